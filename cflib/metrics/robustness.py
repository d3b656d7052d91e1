"""Implausibility and robustness to weight changes (the Duell & Fan 2026 chapter).

- :func:`implausibility`: mean L2 distance of a counterfactual to the nearest ``frac``
  of the target-class training images (lower is better).  The paper's definition was
  not in reach; this is the common one (the book's Protocols page).
- :func:`perturbed_validity`, :func:`robustness_ratio`,
  :func:`validity_under_perturbation`: the classifier's weights get i.i.d. Gaussian
  noise and the counterfactuals are classified again.  The noise is *absolute*:
  standard deviation ``scale`` in the weights' own units (the weights of the C3LT
  CNN have standard deviations of about 0.02 to 0.12, so 1e-3 is a 1 % to 5 % nudge);
  ``relative=True`` uses ``scale`` times each tensor's own standard deviation
  instead.  Which tensors are perturbed: every floating-point parameter, or the
  names a model lists in ``perturbable_parameters()`` (for the Bayes-by-Backprop
  network: the trunk and the posterior means, never the ``rho`` spreads).  The
  model is never modified: the perturbed weights go through
  :func:`torch.func.functional_call`, all perturbations at once with
  :func:`torch.func.vmap`.
"""
from __future__ import annotations

import contextlib
import math

import torch
from torch import nn
from torch.func import functional_call, vmap

from cflib.metrics.spec import MetricSpec, register
from cflib.scopes import frozen

__all__ = ["implausibility", "perturbed_validity", "robustness_ratio",
           "validity_under_perturbation", "fresh_draws", "robustness_auc"]


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(len(x), -1).float()


@torch.no_grad()
def implausibility(x_cf: torch.Tensor, target, x_train: torch.Tensor, y_train: torch.Tensor,
                   frac: float = 0.1, chunk: int = 256) -> torch.Tensor:
    """Per counterfactual, the mean L2 distance to its ``ceil(frac * n_t)`` nearest
    training images of its target class (n_t of them); shape (N,).

    ``target`` is an int or an (N,) tensor of classes.  Distances are taken on the
    flattened images in the scale they are given ([-1, 1] in this project).
    """
    if not 0.0 < frac <= 1.0:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    if x_cf.dim() < 2 or x_train.dim() < 2:
        raise ValueError("x_cf and x_train must be batches (N, ...)")
    if x_cf.shape[1:] != x_train.shape[1:]:
        raise ValueError(f"x_cf {tuple(x_cf.shape[1:])} and x_train "
                         f"{tuple(x_train.shape[1:])} images differ in shape")
    if len(x_train) != len(y_train):
        raise ValueError("x_train and y_train differ in length")
    t = torch.as_tensor(target, device=x_cf.device).long()
    if t.dim() == 0:
        t = t.expand(len(x_cf))
    if t.shape != (len(x_cf),):
        raise ValueError(f"target must be an int or have shape ({len(x_cf)},)")
    out = torch.empty(len(x_cf), device=x_cf.device)
    y_train = y_train.to(x_train.device)
    for c in t.unique().tolist():
        pool = _flat(x_train[y_train == c]).to(x_cf.device)
        if len(pool) == 0:
            raise ValueError(f"no training image of target class {c}")
        k = max(1, math.ceil(frac * len(pool)))
        rows = (t == c).nonzero().squeeze(1)
        for i in range(0, len(rows), chunk):
            r = rows[i:i + chunk]
            d = torch.cdist(_flat(x_cf[r]), pool)                 # (n, n_t)
            out[r] = d.topk(k, dim=1, largest=False).values.mean(1)
    return out


def _param_names(model: nn.Module) -> list[str]:
    names = getattr(model, "perturbable_parameters", None)
    if callable(names):
        return list(names())
    return [n for n, p in model.named_parameters() if p.is_floating_point()]


@torch.no_grad()
def perturbed_validity(model: nn.Module, x_cf: torch.Tensor, target, scale: float,
                       n_perturbations: int = 20, seed: int = 0, relative: bool = False,
                       batch_size: int = 512, chunk: int = 4) -> torch.Tensor:
    """(P, N) bool: is counterfactual n still classified as its target by perturbed model p?

    Model p has weights w + scale * e_p (``relative``: w + scale * std(w) * e_p),
    e_p ~ N(0, I) drawn from a CPU generator seeded with ``seed``; the decision is
    ``argmax model(x)`` (the posterior-mean decision for the Bayesian classifiers).
    ``chunk`` perturbed models are evaluated at once (vmap); it bounds the memory.
    """
    if scale < 0:
        raise ValueError(f"scale must be >= 0, got {scale}")
    if n_perturbations < 1:
        raise ValueError(f"n_perturbations must be >= 1, got {n_perturbations}")
    dev = next(model.parameters()).device
    x_cf = x_cf.to(dev)
    t = torch.as_tensor(target, device=dev).long()
    if t.dim() == 0:
        t = t.expand(len(x_cf))
    if t.shape != (len(x_cf),):
        raise ValueError(f"target must be an int or have shape ({len(x_cf)},)")
    with frozen(model):      # evaluation mode; every module's mode and flag restored after
        params = dict(model.named_parameters())
        buffers = dict(model.named_buffers())
        names = _param_names(model)
        g = torch.Generator().manual_seed(int(seed))
        stacked = {}
        for n, p in params.items():
            if n in names and scale > 0:
                e = torch.randn((n_perturbations, *p.shape), generator=g).to(dev, p.dtype)
                s = scale * (p.detach().float().std().item() if relative and p.numel() > 1 else 1.0)
                stacked[n] = p.detach().unsqueeze(0) + s * e
            else:
                stacked[n] = p.detach().unsqueeze(0).expand(n_perturbations, *p.shape)
        model(x_cf[:1])  # draws (and caches) a Bayesian model's posterior samples outside vmap

        def decide(ps, xb):
            return functional_call(model, ({**ps}, buffers), (xb,)).argmax(-1)

        batched = vmap(decide, in_dims=(0, None), randomness="same")
        rows = []
        for j in range(0, n_perturbations, chunk):
            ps = {n: v[j:j + chunk] for n, v in stacked.items()}
            cols = [batched(ps, x_cf[i:i + batch_size]) == t[i:i + batch_size]  # (p, n)
                    for i in range(0, len(x_cf), batch_size)]
            rows.append(torch.cat(cols, dim=1))
        return torch.cat(rows, dim=0)


def _counted(valid: torch.Tensor, counts: torch.Tensor | None) -> torch.Tensor:
    """``valid`` where the query counts (a query already in its target never does)."""
    return valid if counts is None else valid & counts.to(valid.device).bool()


def robustness_ratio(model: nn.Module, x_cf: torch.Tensor, target, scale: float = 1e-3,
                     n_perturbations: int = 20, seed: int = 0, relative: bool = False,
                     counts: torch.Tensor | None = None) -> float:
    """Robustness Ratio: share of the valid counterfactuals that stay valid under weight noise.

    = (sum over perturbations p and counterfactuals n valid under the unperturbed
    model of [still valid under p]) / (P * number of valid counterfactuals).  It is 1
    at ``scale = 0`` and NaN when no counterfactual is valid to begin with (the
    Validity row then says why).  ``counts`` (N,) marks the counterfactuals that may be
    valid at all (False for a query the model already put in its target).  See
    :func:`perturbed_validity` for the noise.
    """
    base = _counted(perturbed_validity(model, x_cf, target, 0.0, 1, seed)[0], counts)
    if not base.any():
        return float("nan")
    pert = perturbed_validity(model, x_cf, target, scale, n_perturbations, seed, relative)
    return pert[:, base].float().mean().item()


def validity_under_perturbation(model: nn.Module, x_cf: torch.Tensor, target, scales,
                                n_perturbations: int = 20, seed: int = 0,
                                relative: bool = False,
                                counts: torch.Tensor | None = None) -> dict[float, float]:
    """Validity (share of all counterfactuals classified as the target) per noise scale.

    Returns ``{scale: validity}``, averaged over ``n_perturbations`` perturbed models
    (one unperturbed model at scale 0): the curve of validity against the scale of
    weight noise.  ``counts`` (N,) marks the counterfactuals that may count as valid
    (False for a query the model already put in its target).
    """
    out = {}
    for s in scales:
        s = float(s)
        p = 1 if s == 0 else n_perturbations
        v = perturbed_validity(model, x_cf, target, s, p, seed, relative)
        out[s] = _counted(v, counts).float().mean().item()
    return out


def fresh_draws(model: nn.Module, n_samples: int | None = None, seed: int | None = None):
    """A context in which a Bayesian classifier predicts with posterior draws that a
    search never saw (``n_samples`` draws from ``seed``; see
    :meth:`cflib.models.bayesian.BayesianClassifier.draws`); a no-op for a plain model."""
    draws = getattr(model, "draws", None)
    if callable(draws):
        return draws(n_samples, seed)
    return contextlib.nullcontext(model)


def robustness_auc(curve: dict[float, float], lo: float = 1e-3, hi: float = 1e-1) -> float:
    """Normalised area under a validity-vs-noise curve on a log axis, from ``lo`` to ``hi``.

    ``curve`` maps noise scales to validity (:func:`validity_under_perturbation`); the
    trapezoid rule over ``log10(scale)`` for the scales in [lo, hi], divided by the
    width of that interval: 1 for a counterfactual set valid at every scale, 0 for one
    valid at none.  The scales must include ``lo`` and ``hi``.
    """
    pts = sorted((s, v) for s, v in curve.items() if lo <= s <= hi)
    if not pts or pts[0][0] != lo or pts[-1][0] != hi or len(pts) < 2:
        raise ValueError(f"the curve needs points at {lo} and {hi}, got scales {sorted(curve)}")
    xs = [math.log10(s) for s, _ in pts]
    area = sum((xs[i + 1] - xs[i]) * (pts[i][1] + pts[i + 1][1]) / 2 for i in range(len(pts) - 1))
    return area / (xs[-1] - xs[0])


# -- specs ------------------------------------------------------------------------------------
# Context: ``cf``, ``x_train``/``y_train`` (the training split), ``validity_fresh()`` (validity
# on fresh posterior draws), ``validity_per_draw()``, ``curve`` (validity on fresh draws
# against weight-noise std) and ``robustness_ratio()``.
IMPLAUSIBILITY = MetricSpec(
    "Implausibility",
    lambda c: implausibility(c.cf.x_cf, c.cf.target, c.x_train, c.y_train).mean().item(),
    False, "mean L2 distance to the nearest 10 % of target-class training images")
VALIDITY_IN_SAMPLE = MetricSpec(
    "Validity", lambda c: c.cf.validity, True,
    "share classified as the target by the posterior draws the search used (in-sample)")
VALIDITY_FRESH = MetricSpec(
    "Validity_fresh", lambda c: c.validity_fresh(), True,
    "share classified as the target by fresh posterior draws the search never saw "
    "(out-of-sample)")
VALIDITY_PER_DRAW = MetricSpec(
    "Validity_per_draw", lambda c: c.validity_per_draw(), True,
    "share of single fresh posterior draws that put the counterfactual in the target (the "
    "PSCE author's validity after training; stricter than the posterior mean)")
CONFIDENCE_FRESH = MetricSpec(
    "Confidence_fresh", lambda c: c.confidence_fresh(), True,
    "posterior-mean probability of the target at the counterfactual on fresh posterior "
    "draws, mean over images: how far past the boundary a method goes")
ROBUSTNESS_AUC = MetricSpec(
    "Robustness_AUC", lambda c: robustness_auc(c.curve), True,
    "area under validity (fresh draws) against weight-noise std 1e-3 to 1e-1, log axis, "
    "normalised to [0, 1]")
ROBUSTNESS_RATIO = MetricSpec(
    "Robustness_Ratio_1e-3", lambda c: c.robustness_ratio(), True,
    "share of valid counterfactuals (fresh draws) still valid after N(0, 1e-3²) weight noise; "
    "saturated: about 1 for every method")
register(IMPLAUSIBILITY, VALIDITY_IN_SAMPLE, VALIDITY_FRESH, VALIDITY_PER_DRAW, ROBUSTNESS_AUC,
         ROBUSTNESS_RATIO, CONFIDENCE_FRESH)
