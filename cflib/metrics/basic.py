"""Validity and proximity."""
from __future__ import annotations

import torch

from cflib.metrics.spec import MetricSpec, register


def validity(pred_cf: torch.Tensor, target: torch.Tensor,
             pred: torch.Tensor | None = None) -> torch.Tensor:
    """Per-sample 1.0 where the counterfactual is classified as the target, else 0.0.

    ``pred_cf`` (and ``pred``, the classifier's decision on the queries) hold class
    indices (N,) or scores (N, K).  With ``pred``, a query the classifier already
    assigned to its target is never a success: nothing was changed.
    """
    if pred_cf.dim() == 2:
        pred_cf = pred_cf.argmax(1)
    if pred_cf.shape != target.shape:
        raise ValueError(f"pred_cf {tuple(pred_cf.shape)} and target {tuple(target.shape)} differ")
    out = pred_cf == target
    if pred is not None:
        pred = pred.argmax(1) if pred.dim() == 2 else pred
        if pred.shape != target.shape:
            raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")
        out = out & (pred != target)
    return out.float()


def proximity(x: torch.Tensor, x_cf: torch.Tensor) -> torch.Tensor:
    """Mean absolute pixel change per image on the [-1, 1] scale (C3LT's proximity)."""
    if x.shape != x_cf.shape:
        raise ValueError(f"x {tuple(x.shape)} and x_cf {tuple(x_cf.shape)} differ in shape")
    return (x_cf - x).abs().flatten(1).mean(1)


#: a pixel counts as changed (L0) when it moves by more than this on the [0, 1] scale
L0_THRESHOLD = 0.1


def l1_distance(x: torch.Tensor, x_cf: torch.Tensor) -> torch.Tensor:
    """Per image, the summed absolute pixel change on the [0, 1] scale (images in [-1, 1])."""
    if x.shape != x_cf.shape:
        raise ValueError(f"x {tuple(x.shape)} and x_cf {tuple(x_cf.shape)} differ in shape")
    return ((x_cf - x).abs() / 2).flatten(1).sum(1)


def l0_count(x: torch.Tensor, x_cf: torch.Tensor, threshold: float = L0_THRESHOLD) -> torch.Tensor:
    """Per image, the number of pixels that move by more than ``threshold`` on the [0, 1]
    scale (images in [-1, 1])."""
    if x.shape != x_cf.shape:
        raise ValueError(f"x {tuple(x.shape)} and x_cf {tuple(x_cf.shape)} differ in shape")
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    return ((x_cf - x).abs() / 2 > threshold).flatten(1).sum(1).float()


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
PROXIMITY_TO_RECONSTRUCTION = MetricSpec(
    "Proximity_to_reconstruction",
    lambda c: proximity(c.cf.meta["reconstruction"], c.cf.x_cf).mean().item(), False,
    "mean absolute pixel change from the query as the generator renders it, G(z), to the "
    "counterfactual G(g(z)): the change C3LT's mapping itself makes",
    needs="reconstruction")
L1 = MetricSpec("L1", lambda c: l1_distance(c.cf.x, c.cf.x_cf).mean().item(), False,
                "summed absolute pixel change per image on the [0, 1] scale (pixels of ink "
                "moved), mean over images")
L0 = MetricSpec("L0", lambda c: l0_count(c.cf.x, c.cf.x_cf).mean().item(), False,
                f"pixels changed by more than {L0_THRESHOLD} on the [0, 1] scale, mean over "
                "images")
N_ALREADY_TARGET = MetricSpec(
    "N_already_target", lambda c: c.cf.meta["n_already_target"], False,
    "queries the classifier already assigns to the target: never counted as valid",
    needs="n_already_target")
def judged(judge, cf) -> torch.Tensor:
    """Which of ``cf``'s counterfactuals another classifier, ``judge``, assigns to their
    targets (bool, one per counterfactual; a query the explained classifier already
    assigned to its target is never a success, as in :attr:`Counterfactuals.success`)."""
    from cflib.scopes import frozen
    from cflib.tensors import model_device

    with torch.no_grad(), frozen(judge):
        dev = model_device(judge)
        pred = torch.cat([judge(cf.x_cf[i:i + 512].to(dev)).argmax(1).cpu()
                          for i in range(0, len(cf.x_cf), 512)])
    return (pred == cf.target.cpu()) & ~cf.meta["already_target"].cpu()


def judged_validity(judge, cf) -> float:
    """Share of ``cf``'s counterfactuals that another classifier, ``judge``, assigns to
    their targets (:func:`judged`).  An adversarial perturbation fools the classifier it
    was computed on; a change that makes the image look like the target class convinces
    an independent one too."""
    return judged(judge, cf).float().mean().item()


def all_judges_validity(judges, cf) -> float:
    """Share of ``cf``'s counterfactuals that *every* judge of ``judges`` assigns to its
    target: the strict reading of transfer (no judge family is fooled alone)."""
    ok = torch.ones(len(cf.x_cf), dtype=torch.bool)
    for judge in judges.values():
        ok &= judged(judge, cf)
    return ok.float().mean().item()


#: the judges of transfer validity, by the name their metrics carry (the context's
#: ``judges``: cflib.bench.zoo.JUDGES): three families
JUDGE_NAMES = ("SmallCNN", "ResNet", "MLP")
_JUDGE_DESCRIPTIONS = {
    "SmallCNN": "a convolutional network close to the explained one (the quantization "
                "chapter's SmallCNN: 3x3 convolutions, max pooling, 64 hidden units)",
    "ResNet": "a residual network with batch norm and global average pooling",
    "MLP": "a multilayer perceptron on the pixels (no convolution)",
}


def _judge_spec(name: str) -> MetricSpec:
    return MetricSpec(
        f"Validity ({name} judge)", lambda c: judged_validity(c.judges[name], c.cf), True,
        f"share of counterfactuals that an independent judge, {_JUDGE_DESCRIPTIONS[name]}, "
        "trained on the training split with its own seed, assigns to the target")


VALIDITY_JUDGES = tuple(_judge_spec(n) for n in JUDGE_NAMES)
VALIDITY_ALL_JUDGES = MetricSpec(
    "Validity (all judges)", lambda c: all_judges_validity(c.judges, c.cf), True,
    "share of counterfactuals that every judge (three families: "
    + ", ".join(JUDGE_NAMES) + ") assigns to the target: transfer in the strict reading")

register(VALIDITY, PROXIMITY, SECONDS_PER_CF, ACCURACY, EDITS, FEATURE_VALIDITY,
         PROXIMITY_TO_RECONSTRUCTION, N_ALREADY_TARGET, L1, L0, *VALIDITY_JUDGES,
         VALIDITY_ALL_JUDGES)
