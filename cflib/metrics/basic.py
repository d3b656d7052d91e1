"""Validity and proximity."""
from __future__ import annotations

import torch

from cflib.metrics.spec import MetricSpec, register


def validity(pred_cf: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample 1.0 where the counterfactual is classified as the target, else 0.0.

    ``pred_cf`` holds class indices (N,) or scores (N, K).
    """
    if pred_cf.dim() == 2:
        pred_cf = pred_cf.argmax(1)
    if pred_cf.shape != target.shape:
        raise ValueError(f"pred_cf {tuple(pred_cf.shape)} and target {tuple(target.shape)} differ")
    return (pred_cf == target).float()


def proximity(x: torch.Tensor, x_cf: torch.Tensor) -> torch.Tensor:
    """Mean absolute pixel change per image on the [-1, 1] scale (C3LT's proximity)."""
    if x.shape != x_cf.shape:
        raise ValueError(f"x {tuple(x.shape)} and x_cf {tuple(x_cf.shape)} differ in shape")
    return (x_cf - x).abs().flatten(1).mean(1)


# -- specs (see cflib.metrics.spec: the context's ``cf`` is the Counterfactuals) -----------
VALIDITY = MetricSpec(
    "Validity", lambda ctx: ctx.cf.validity, True,
    "share of counterfactuals the classifier assigns to the target")
PROXIMITY = MetricSpec(
    "Proximity", lambda c: proximity(c.cf.x, c.cf.x_cf).mean().item(), False,
    "mean absolute pixel change on the [−1, 1] scale")
SECONDS_PER_CF = MetricSpec(
    "Seconds_per_CF", lambda ctx: ctx.cf.seconds_per_cf, False,
    "wall time of the batched explain call per counterfactual, on the machine that built "
    "the page (training excluded)", timing=True)
ACCURACY = MetricSpec("Accuracy", None, True, "classifier test accuracy (a fraction)")
#: what CVE reports besides the table's metrics (computed only where a method reports them)
EDITS = MetricSpec("Edits", lambda c: c.cf.meta["mean_edits"], False,
                   "CVE: feature cells replaced, mean over queries", needs="mean_edits")
FEATURE_VALIDITY = MetricSpec(
    "Feature_Validity", lambda c: c.cf.meta["feature_validity"], True,
    "CVE: share of queries whose edited feature map the head assigns to the target",
    needs="feature_validity")
register(VALIDITY, PROXIMITY, SECONDS_PER_CF, ACCURACY, EDITS, FEATURE_VALIDITY)
