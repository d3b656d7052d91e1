"""Counterfactuals under Bayesian classifiers (Duell & Fan 2026): shared pieces.

The five methods of the chapter live in their own modules and are re-exported here:

=========  ==========================================  ===================================
name       module                                      searches against
=========  ==========================================  ===================================
Wachter    :mod:`cflib.explainers.wachter`             one deterministic pass (dropout off
                                                       / posterior-mean weights)
BayesCF    :mod:`cflib.explainers.wachter`             the posterior-mean prediction
ROAR       :mod:`cflib.explainers.roar`                posterior mean, last layer's weights
                                                       adversarially shifted by <= 0.01
Schut      :mod:`cflib.explainers.schut`               posterior-mean probability (greedy)
PSCE       :mod:`cflib.explainers.psce`                posterior mean and variance
=========  ==========================================  ===================================

Every method also works on a plain classifier (``model(x)`` returns logits): it is
then a posterior with a single sample.  This module holds what they share: access to
the posterior (:func:`posterior_probs`, :func:`log_mean_prob`,
:func:`deterministic_logits`), a row-masked Adam (:class:`RowAdam`) so that images
whose search is over stop moving while the rest of the batch goes on, Schut et al.'s
map of similar digits (:data:`SCHUT_TARGETS`, :func:`schut_targets`,
:func:`schut_queries`) and the factory :func:`from_profile`.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cflib.profiles import Profile, get_profile

#: Schut et al. (2021) official code (``experiments/exp_qualitative_eval.py``): for a
#: test digit of class c the target is drawn uniformly from SCHUT_TARGETS[c].
SCHUT_TARGETS: dict[int, list[int]] = {
    0: [3, 6, 8], 1: [4, 7, 9], 2: [3, 7], 3: [0, 2, 8], 4: [1, 9],
    5: [6, 8], 6: [0, 5, 8], 7: [1, 2, 9], 8: [0, 3, 6], 9: [1, 4, 7],
}

METHODS = ("Wachter", "BayesCF", "ROAR", "Schut", "PSCE")


# -- the posterior --------------------------------------------------------------------
def is_bayesian(model: nn.Module) -> bool:
    return callable(getattr(model, "sample_probs", None))


def posterior_probs(model: nn.Module, x: torch.Tensor, n_samples: int | None = None) -> torch.Tensor:
    """(S, N, K) class probabilities per posterior sample (S = 1 for a plain classifier)."""
    if is_bayesian(model):
        return model.sample_probs(x, n_samples)
    return torch.softmax(model(x), dim=-1).unsqueeze(0)


def log_mean_prob(model: nn.Module, x: torch.Tensor, n_samples: int | None = None) -> torch.Tensor:
    """(N, K) log of the posterior-mean probability (log-softmax for a plain classifier)."""
    if is_bayesian(model) and n_samples is not None:
        return model.sample_probs(x, n_samples).mean(0).clamp_min(1e-30).log()
    return F.log_softmax(model(x), dim=-1)


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
class RowAdam:
    """Adam (Kingma & Ba 2015) on a batch of images where each row keeps its own clock.

    ``step(x, grad, rows)`` updates only ``x[rows]``; rows that are done keep their
    moment estimates untouched, so a batched search behaves like N independent ones.
    ``reset(rows)`` restarts the moments (a new lambda round in Wachter's search).
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
        self.t[rows] += 1
        t = self.t[rows].view(-1, *([1] * (x.dim() - 1)))
        m = self.m[rows] = self.b1 * self.m[rows] + (1 - self.b1) * grad
        v = self.v[rows] = self.b2 * self.v[rows] + (1 - self.b2) * grad * grad
        mhat = m / (1 - self.b1 ** t)
        vhat = v / (1 - self.b2 ** t)
        x[rows] -= self.lr * mhat / (vhat.sqrt() + self.eps)


def l1(x_cf: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Per-image L1 distance (N,), summed over pixels: Wachter's ||x' - x||_1."""
    return (x_cf - x).abs().flatten(1).sum(1)


# -- Schut et al.'s protocol -------------------------------------------------------------
def schut_targets(labels, seed: int = 0) -> torch.Tensor:
    """A target per label, drawn uniformly from :data:`SCHUT_TARGETS` (numpy, ``seed + 2``
    as in Schut et al.'s ``_choose_targets``)."""
    labels = torch.as_tensor(labels).long()
    if labels.dim() != 1:
        raise ValueError(f"labels must be a 1-d tensor, got shape {tuple(labels.shape)}")
    if len(labels) and ((labels < 0).any() or (labels > 9).any()):
        raise ValueError("labels must be digit classes in 0..9")
    rng = np.random.default_rng(seed + 2)
    return torch.tensor([int(rng.choice(SCHUT_TARGETS[int(c)])) for c in labels],
                        dtype=torch.long)


def schut_queries(dataset: str = "mnist", n: int = 100, seed: int = 0, split: str = "test"):
    """Schut et al.'s draw: ``n`` random images of ``split`` (numpy, ``seed + 1``, without
    replacement) and a target per image from the similar-digit map (``seed + 2``).

    Returns ``(x, y, target, index)``: images (n, 1, 28, 28) in [-1, 1], their labels,
    the targets and the indices into the split.
    """
    from cflib.data import canonical_dataset, load_split

    if canonical_dataset(dataset) != "mnist":
        raise ValueError("Schut et al.'s target map is defined for MNIST digits only")
    x, y = load_split(dataset, split)
    if not 0 < n <= len(x):
        raise ValueError(f"n must be in 1..{len(x)}, got {n}")
    idx = torch.from_numpy(np.random.default_rng(seed + 1).choice(len(x), n, replace=False))
    return x[idx], y[idx], schut_targets(y[idx], seed), idx


# -- factory -----------------------------------------------------------------------------
def opt_steps(profile: Profile) -> int:
    """Gradient steps per search for Wachter/BayesCF/ROAR/PSCE.

    Read from ``profile.bayes_opt_steps`` when the profile has it; otherwise 20 for
    ``smoke`` and 100 for the others (see the chapter's protocol notes).
    """
    steps = getattr(profile, "bayes_opt_steps", None)
    if steps is None:
        steps = 20 if profile.name == "smoke" else 100
    return int(steps)


def registry() -> dict[str, type]:
    from cflib.explainers.psce import PSCE
    from cflib.explainers.roar import ROAR
    from cflib.explainers.schut import Schut
    from cflib.explainers.wachter import BayesCF, Wachter

    return {"Wachter": Wachter, "BayesCF": BayesCF, "ROAR": ROAR, "Schut": Schut, "PSCE": PSCE}


def from_profile(method: str, model: nn.Module, dataset: str = "mnist", profile="standard",
                 seed: int = 0):
    """The named method (one of :data:`METHODS`) configured for ``profile``.

    Equivalent to ``<Class>.from_profile(model, dataset, profile, seed)``.
    """
    reg = registry()
    if method not in reg:
        raise ValueError(f"unknown method {method!r}; choose one of {list(reg)}")
    return reg[method].from_profile(model, dataset, get_profile(profile), seed)
