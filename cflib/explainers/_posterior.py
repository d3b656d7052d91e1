"""Shared pieces of the methods that search against a posterior (Wachter, BayesCF,
ROAR, Schut, PSCE): access to the posterior, a row-masked Adam and the L1 distance.

Every such method also works on a plain classifier (``model(x)`` returns logits): it
is then a posterior with a single sample.  This module is private: it holds helpers,
no registry (the methods are listed in :data:`cflib.explainers.EXPLAINERS`).

Half precision: the probabilities and log-probabilities here are computed in the
working precision (:func:`cflib.tensors.working`: float32 for a float16 / bfloat16
model, the model's own dtype otherwise), and :class:`RowAdam` keeps its moments and
the image it updates (a float32 *master copy*, :func:`master`) in it, so a search on a
half-precision model moves in steps that float16 cannot hold and never takes the log
of an underflowed probability; the model itself runs in its own dtype.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cflib.tensors import working


def master(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` in the working precision: the image an optimiser updates (float32
    for a half-precision batch, a plain copy of a float32 or float64 one)."""
    return x.to(torch.promote_types(x.dtype, torch.float32), copy=True)


# -- the posterior --------------------------------------------------------------------
def is_bayesian(model: nn.Module) -> bool:
    return callable(getattr(model, "sample_probs", None))


def posterior_probs(model: nn.Module, x: torch.Tensor, n_samples: int | None = None) -> torch.Tensor:
    """(S, N, K) class probabilities per posterior sample (S = 1 for a plain classifier)."""
    if is_bayesian(model):
        return working(model.sample_probs(x, n_samples))
    return torch.softmax(working(model(x)), dim=-1).unsqueeze(0)


def log_mean_prob(model: nn.Module, x: torch.Tensor, n_samples: int | None = None) -> torch.Tensor:
    """(N, K) log of the posterior-mean probability (log-softmax for a plain classifier)."""
    if is_bayesian(model) and n_samples is not None:
        return working(model.sample_probs(x, n_samples)).mean(0).clamp_min(1e-30).log()
    return F.log_softmax(working(model(x)), dim=-1)


def deterministic_logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """One deterministic pass: dropout off / posterior-mean weights; ``model(x)`` otherwise."""
    fn = getattr(model, "deterministic_logits", None)
    return fn(x) if callable(fn) else model(x)


def head_inputs(model: nn.Module, x: torch.Tensor, n_samples: int | None = None):
    """(h, W, b) of the last linear layer per posterior sample (see
    :meth:`cflib.models.bayesian.BayesianClassifier.head_inputs`).

    Plain classifiers are supported when they end in ``head = Sequential(..., Linear)``
    and have ``features(x)`` (the C3LT CNN): S = 1, no dropout.
    """
    fn = getattr(model, "head_inputs", None)
    if callable(fn):
        return fn(x, n_samples)
    head = getattr(model, "head", None)
    if (isinstance(head, nn.Sequential) and isinstance(head[-1], nn.Linear)
            and callable(getattr(model, "features", None))):
        h = model.features(x)
        for layer in head[:-1]:
            if not isinstance(layer, nn.Dropout):
                h = layer(h)
        return h.unsqueeze(0), head[-1].weight.unsqueeze(0), head[-1].bias.unsqueeze(0)
    raise TypeError(
        f"ROAR needs the last linear layer of the model; {type(model).__name__} has neither "
        "head_inputs(x) nor a C3LT-style `features` + `head` ending in nn.Linear"
    )


# -- optimisation ----------------------------------------------------------------------
def forward_rows(active: torch.Tensor, n: int, compact: bool):
    """Which rows a pass of a per-image search forwards, and where the active ones sit in
    it: ``(active, all of them)`` when finished images are dropped from the batch
    (``compact``), ``(every row, active)`` when they stay in it.  Every image's search is
    independent of the others', so both give the same result; compaction saves the
    passes of the finished images."""
    if compact:
        return active, slice(None)
    return torch.arange(n, device=active.device), active



class RowAdam:
    """Adam (Kingma & Ba 2015) on a batch of images where each row keeps its own clock.

    ``step(x, grad, rows)`` updates only ``x[rows]``; rows that are done keep their
    moment estimates untouched, so a batched search behaves like N independent ones.
    ``reset(rows)`` restarts the moments (a new lambda round in Wachter's search).
    The moments are in ``x``'s dtype (a :func:`master` copy: float32 for a half-precision
    search) and every gradient is cast to it.
    """

    def __init__(self, x: torch.Tensor, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.lr, (self.b1, self.b2), self.eps = lr, betas, eps
        self.m = torch.zeros_like(x)
        self.v = torch.zeros_like(x)
        self.t = torch.zeros(len(x), device=x.device)

    def reset(self, rows: torch.Tensor) -> None:
        self.m[rows] = 0
        self.v[rows] = 0
        self.t[rows] = 0

    @torch.no_grad()
    def step(self, x: torch.Tensor, grad: torch.Tensor, rows: torch.Tensor) -> None:
        grad = grad.to(x.dtype)        # a half-precision model's gradient, on the master copy
        self.t[rows] += 1
        t = self.t[rows].view(-1, *([1] * (x.dim() - 1)))
        m = self.m[rows] = self.b1 * self.m[rows] + (1 - self.b1) * grad
        v = self.v[rows] = self.b2 * self.v[rows] + (1 - self.b2) * grad * grad
        mhat = m / (1 - self.b1 ** t)
        vhat = v / (1 - self.b2 ** t)
        x[rows] -= self.lr * mhat / (vhat.sqrt() + self.eps)

    @torch.no_grad()
    def step_masked(self, x: torch.Tensor, grad: torch.Tensor, live: torch.Tensor) -> None:
        """:meth:`step` on the rows where ``live`` (N,) is True, every row in the
        arithmetic and the others left as they were: fixed shapes, nothing read back
        (for a GPU).  The same values as ``step(x, grad[rows], rows)`` on those rows."""
        grad = grad.to(x.dtype)
        on = live.view(-1, *([1] * (x.dim() - 1)))
        self.t = torch.where(live, self.t + 1, self.t)
        t = self.t.view(-1, *([1] * (x.dim() - 1)))
        m = self.b1 * self.m + (1 - self.b1) * grad
        v = self.b2 * self.v + (1 - self.b2) * grad * grad
        mhat = m / (1 - self.b1 ** t)
        vhat = v / (1 - self.b2 ** t)
        self.m = torch.where(on, m, self.m)
        self.v = torch.where(on, v, self.v)
        x.copy_(torch.where(on, x - self.lr * mhat / (vhat.sqrt() + self.eps), x))


def l1(x_cf: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Per-image L1 distance (N,), summed over pixels: Wachter's ||x' - x||_1."""
    return (x_cf - x).abs().flatten(1).sum(1)
