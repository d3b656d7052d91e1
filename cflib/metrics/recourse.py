"""Recourse under compression: VD, CRG, DirSim, overhead, bootstrap CIs (Yahyati et al. 2026;
the book's Protocols page, "Recourse under quantization").

Queries ``i = 1..n``; ``F = {i : s_f,i}`` are the queries whose FP recourse succeeds and
``Both = F & {i : s_q,i}``.  The FP recourse ``x_hat_f`` is computed once, on the FP
model, and every compressed model is scored against it:

* ``VD = |{i in F : argmax f_q(x_hat_f,i) != t}| / |F|``: the share of FP recourse the
  compressed model rejects; NaN (with a logged warning) when F is empty; the code
  divides by ``max(|F|, 1)``, which reads as a perfect 0 (deviation (f));
* ``CRG = mean_{i in Both} (c_q,i - c_f,i) / max(c_f,i, 1e-8)``: the relative cost gap
  of the two models' own recourse (0 is best);
* ``DirSim = mean_{i in Both} <delta_f,i, delta_q,i> / max(||delta_f,i|| ||delta_q,i||, 1e-8)``:
  whether the two recourse actions point the same way (a zero delta gives 0);
* ``Transfer_Margin = mean_{i in F} (z_t - max_{j != t} z_j)`` of f_q's logits at
  ``x_hat_f``: the paper's margin analysis, negative exactly for VD events;
* ``overhead = (T_fp + T_m) / (T_fp + T_baseline)``.

Per-query versions (NaN where a query does not count) feed the percentile bootstrap
(:func:`bootstrap_ci`) and the paired bootstrap of a difference between two methods
on the same queries (:func:`paired_bootstrap`).
"""
from __future__ import annotations

import logging
from typing import Callable, Mapping, NamedTuple

import torch

from cflib.metrics.spec import MetricSpec, register

log = logging.getLogger("cflib")
N_BOOT = 1000


# -- input checks ------------------------------------------------------------------------------
def _mask(m: torch.Tensor, name: str) -> torch.Tensor:
    if not torch.is_tensor(m) or m.dtype != torch.bool:
        kind = m.dtype if torch.is_tensor(m) else type(m).__name__
        raise ValueError(f"{name} must be a boolean mask (torch.bool), got {kind}; "
                         f"pass e.g. cf.success or (pred == target)")
    if m.dim() != 1:
        raise ValueError(f"{name} must be 1-d (one entry per query), got shape {tuple(m.shape)}")
    return m


def _same_length(**tensors: torch.Tensor) -> int:
    lengths = {k: len(v) for k, v in tensors.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"metric inputs must have one entry per query, got lengths {lengths}")
    return next(iter(lengths.values()))


def _nanmean(v: torch.Tensor) -> float:
    v = v[~torch.isnan(v)]
    return float(v.mean()) if len(v) else float("nan")


# -- per-query values --------------------------------------------------------------------------
def vd_events(fp_success: torch.Tensor, q_valid: torch.Tensor) -> torch.Tensor:
    """Per query: 1.0 where the FP recourse succeeded and f_q rejects it (a VD event), 0.0
    where f_q accepts it, NaN where the FP recourse failed.  ``q_valid[i]`` is
    ``argmax f_q(x_hat_f,i) == t``."""
    _mask(fp_success, "fp_success")
    _mask(q_valid, "q_valid")
    _same_length(fp_success=fp_success, q_valid=q_valid)
    out = (~q_valid).float().cpu()
    out[~fp_success.cpu()] = float("nan")
    return out


def relative_cost_gap(fp_success: torch.Tensor, q_success: torch.Tensor,
                      fp_cost: torch.Tensor, q_cost: torch.Tensor) -> torch.Tensor:
    """Per query ``(c_q - c_f) / max(c_f, 1e-8)`` on Both, NaN elsewhere."""
    _mask(fp_success, "fp_success")
    _mask(q_success, "q_success")
    _same_length(fp_success=fp_success, q_success=q_success, fp_cost=fp_cost, q_cost=q_cost)
    fc, qc = fp_cost.detach().double().cpu(), q_cost.detach().double().cpu()
    out = ((qc - fc) / fc.clamp_min(1e-8)).float()
    out[~(fp_success & q_success).cpu()] = float("nan")
    return out


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise ``<a, b> / max(||a|| ||b||, 1e-8)`` (0 where either row is zero)."""
    if a.shape != b.shape or a.dim() != 2:
        raise ValueError(f"deltas must be two (n, d) tensors of one shape, got {tuple(a.shape)} "
                         f"and {tuple(b.shape)}")
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return ((a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1)).clamp_min(1e-8)).float()


def direction_similarity(fp_success: torch.Tensor, q_success: torch.Tensor,
                         fp_delta: torch.Tensor, q_delta: torch.Tensor) -> torch.Tensor:
    """Per query cosine of the two latent actions on Both, NaN elsewhere."""
    _mask(fp_success, "fp_success")
    _mask(q_success, "q_success")
    _same_length(fp_success=fp_success, q_success=q_success, fp_delta=fp_delta,
                 q_delta=q_delta)
    out = cosine(fp_delta, q_delta)
    out[~(fp_success & q_success).cpu()] = float("nan")
    return out


def target_margin(logits: torch.Tensor, target) -> torch.Tensor:
    """Per row ``z_t - max_{j != t} z_j`` (negative: the target does not win)."""
    logits = logits.detach().float().cpu()
    t = torch.as_tensor(target).long().cpu().expand(len(logits))
    z_t = logits.gather(1, t[:, None]).squeeze(1)
    others = logits.scatter(1, t[:, None], float("-inf"))
    return z_t - others.max(1).values


def transfer_margins(fp_success: torch.Tensor, q_logits_at_fp: torch.Tensor,
                     target) -> torch.Tensor:
    """Per query f_q's target margin at the FP recourse on F, NaN elsewhere."""
    _mask(fp_success, "fp_success")
    _same_length(fp_success=fp_success, q_logits_at_fp=q_logits_at_fp)
    out = target_margin(q_logits_at_fp, target)
    out[~fp_success.cpu()] = float("nan")
    return out


# -- the table's values ------------------------------------------------------------------------
def vd(fp_success: torch.Tensor, q_valid: torch.Tensor) -> float:
    """Validity drop: the share of FP-feasible queries whose FP recourse f_q rejects.
    NaN, with a logged warning, when no FP recourse exists (F is empty)."""
    ev = vd_events(fp_success, q_valid)
    if torch.isnan(ev).all():
        log.warning("VD is undefined: the FP recourse failed on every query (F is empty); "
                    "reporting NaN")
        return float("nan")
    return _nanmean(ev)


def crg(fp_success: torch.Tensor, q_success: torch.Tensor, fp_cost: torch.Tensor,
        q_cost: torch.Tensor) -> float:
    """Cost of recourse gap: mean relative cost gap over Both (NaN if Both is empty)."""
    return _nanmean(relative_cost_gap(fp_success, q_success, fp_cost, q_cost))


def dirsim(fp_success: torch.Tensor, q_success: torch.Tensor, fp_delta: torch.Tensor,
           q_delta: torch.Tensor) -> float:
    """Direction similarity: mean cosine of the latent actions over Both (NaN if empty)."""
    return _nanmean(direction_similarity(fp_success, q_success, fp_delta, q_delta))


def transfer_margin(fp_success: torch.Tensor, q_logits_at_fp: torch.Tensor, target) -> float:
    """Mean over F of f_q's target margin at the FP recourse (NaN if F is empty)."""
    return _nanmean(transfer_margins(fp_success, q_logits_at_fp, target))


def overhead(seconds: Mapping[str, float], baseline: str = "PTQ INT8") -> dict[str, float]:
    """``T_m / T_baseline`` for every method ``m`` of ``seconds`` (each method's own
    compression stage, in seconds, measured on this implementation): how many times the
    baseline's compression work a recipe costs.  The paper does not publish its
    definition; this one compares compression stages alone.  A missing or zero baseline
    is an error."""
    if baseline not in seconds:
        raise ValueError(f"overhead needs the baseline {baseline!r} among the timings "
                         f"(got {sorted(seconds)}); run it too")
    base = float(seconds[baseline])
    if not base > 0:
        raise ValueError(f"the baseline time T_{baseline} must be > 0, got {base}")
    return {m: float(t) / base for m, t in seconds.items()}


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a rate of ``k`` events in ``n`` trials (NaN for n = 0):
    a binomial interval that stays inside [0, 1] and is not degenerate at 0 or n events
    (a bootstrap of n zeros is [0, 0]; Wilson's upper bound is about 3.8 / n)."""
    if n <= 0:
        return float("nan"), float("nan")
    z = {0.95: 1.959963984540054, 0.9: 1.6448536269514722, 0.99: 2.5758293035489004}[level]
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)   # exact at the ends, no rounding
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def rate(events: torch.Tensor) -> tuple[float, float, float, int]:
    """``(rate, Wilson low, Wilson high, n)`` of a per-query event vector where NaN marks a
    query that does not count."""
    v = torch.as_tensor(events).double()
    v = v[~torch.isnan(v)]
    n, k = len(v), int(v.sum().item())
    lo, hi = wilson(k, n)
    return (k / n if n else float("nan")), lo, hi, n


# -- bootstrap ---------------------------------------------------------------------------------
class CI(NamedTuple):
    """An estimate with its percentile bootstrap interval."""

    estimate: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def _nanmean_rows(v: torch.Tensor) -> torch.Tensor:
    return torch.nanmean(v, dim=-1)


def _resample(n: int, n_boot: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(int(seed))
    return torch.randint(n, (n_boot, n), generator=g)


def _interval(stats: torch.Tensor, level: float) -> tuple[float, float]:
    stats = stats[~torch.isnan(stats)].double()
    if not len(stats):
        return float("nan"), float("nan")
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    lo, hi = torch.quantile(stats, q).tolist()
    return lo, hi


def _values(v, name: str) -> torch.Tensor:
    v = torch.as_tensor(v).detach().double().cpu()
    if v.dim() != 1:
        raise ValueError(f"{name} must be 1-d per-query values, got shape {tuple(v.shape)}")
    return v


def bootstrap_ci(values, n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95,
                 stat: Callable[[torch.Tensor], torch.Tensor] = _nanmean_rows) -> CI:
    """Percentile bootstrap over queries of ``stat`` (default: the mean of the non-NaN
    per-query values, e.g. :func:`vd_events`).  Resamples all n queries with
    replacement ``n_boot`` times from a generator seeded with ``seed``; the interval is
    the central ``level`` of the resampled statistics (resamples where it is undefined
    are dropped)."""
    v = _values(values, "values")
    est = float(stat(v[None])[0])
    if not len(v):
        return CI(float("nan"), float("nan"), float("nan"))
    stats = stat(v[_resample(len(v), n_boot, seed)])
    return CI(est, *_interval(stats, level))


def paired_bootstrap(a, b, n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95,
                     stat: Callable[[torch.Tensor], torch.Tensor] = _nanmean_rows) -> CI:
    """``stat(a) - stat(b)`` for two methods' per-query values on the same queries, with a
    paired percentile bootstrap: one resample of query indices serves both methods, so
    what the queries share cancels.  NaN marks a query that does not count for a method
    (e.g. outside Both).  Mismatched lengths are a ValueError."""
    a, b = _values(a, "a"), _values(b, "b")
    _same_length(a=a, b=b)
    est = float(stat(a[None])[0] - stat(b[None])[0])
    if not len(a):
        return CI(float("nan"), float("nan"), float("nan"))
    idx = _resample(len(a), n_boot, seed)
    return CI(est, *_interval(stat(a[idx]) - stat(b[idx]), level))


def abs_nanmean(v: torch.Tensor) -> torch.Tensor:
    """``|mean|`` of the non-NaN values per row: CRG's distance to its best value, 0."""
    return torch.nanmean(v, dim=-1).abs()


# -- specs ------------------------------------------------------------------------------------
# Context (one compressed model scored against the FP model's recourse): ``fp`` and ``q``
# (the two Counterfactuals records; ``q`` None for the FP model itself), ``fp_success``,
# ``q_success``, ``q_valid`` (f_q accepts the FP recourse), ``cost_gap``, ``dirsim``,
# ``margins``, ``infeasible_accepted`` (per query), ``fa_events`` (per reconstruction),
# ``class_accuracy(k)``, ``ci(values)`` (a bootstrap half-width), ``info`` (the model's
# training record), ``overhead``, ``overhead_mixedprec`` and ``target``.
def _mean(v: torch.Tensor) -> float:
    v = v[~torch.isnan(v)]
    return float(v.mean()) if len(v) else float("nan")


def _info(key: str):
    return lambda c: float(c.info[key])


VD = MetricSpec("VD", lambda c: vd(c.fp_success, c.q_valid), False,
                "validity drop: share of FP recourse the compressed model rejects")
CRG = MetricSpec("CRG", lambda c: _mean(c.cost_gap), None,
                 "cost of recourse gap: mean (c_q - c_f) / c_f over queries feasible on both")
DIRSIM = MetricSpec("DirSim", lambda c: _mean(c.dirsim), True,
                    "cosine of the FP and compressed latent actions, over queries feasible on both")
OVERHEAD = MetricSpec("Overhead", lambda c: c.overhead, False,
                      "T_method / T_PTQ INT8: the recipe's compression time over PTQ INT8's "
                      "(this implementation; the paper's base is not published)", timing=True)
def _wilson(name: str, events: str, description: str | None = None):
    """A share of events (the context's attribute ``events``) and the two ends of its 95 %
    Wilson (binomial) interval: ``name``, ``name_low``, ``name_high`` (without
    ``description``, the two ends alone)."""
    value = lambda k: lambda c: rate(getattr(c, events))[k]  # noqa: E731
    ends = (MetricSpec(f"{name}_low", value(1), False,
                       f"lower end of {name}'s 95 % Wilson interval"),
            MetricSpec(f"{name}_high", value(2), False,
                       f"upper end of {name}'s 95 % Wilson interval"))
    return ((MetricSpec(name, value(0), False, description), *ends) if description
            else ends)


VD_LOW, VD_HIGH = _wilson("VD", "vd_events")
FA_RECON, FA_RECON_LOW, FA_RECON_HIGH = _wilson(
    "FA_recon", "fa_events", "false acceptance: share of autoencoder reconstructions of "
    "non-target test images the model puts in the target")
FA_INFEASIBLE, FA_INFEASIBLE_LOW, FA_INFEASIBLE_HIGH = _wilson(
    "FA_infeasible", "infeasible_accepted", "share of the queries whose FP recourse failed "
    "that the model nevertheless puts in the target at the FP's last point")
N_FP_INFEASIBLE = MetricSpec("N_fp_infeasible", lambda c: rate(c.infeasible_accepted)[3],
                             False, "queries whose FP recourse failed (already-target ones "
                                    "excluded)")
OVERHEAD_VS_MIXEDPREC = MetricSpec(
    "Overhead_vs_MixedPrec", lambda c: c.overhead_mixedprec, False,
    "T_method / T_MixedPrec-QAT: the public code's reading of its runtime script", timing=True)


def class_accuracy_specs(n_classes: int) -> tuple[MetricSpec, ...]:
    """Per-class test accuracy (the classes a target may steal from): one registered spec
    per class of an ``n_classes``-way classifier, read from the context's
    ``class_accuracy(k)``."""
    return register(*(MetricSpec(f"Accuracy_class_{k}", (lambda c, k=k: c.class_accuracy(k)),
                                 True, f"test accuracy on class {k}")
                      for k in range(n_classes)))


CRG_CI = MetricSpec("CRG_ci95", lambda c: c.ci(c.cost_gap), False,
                    "half-width of CRG's 95 % percentile bootstrap interval over queries")
DIRSIM_CI = MetricSpec("DirSim_ci95", lambda c: c.ci(c.dirsim), False,
                       "half-width of DirSim's 95 % percentile bootstrap interval over queries")
FP_FEASIBLE = MetricSpec("FP_Feasible", lambda c: c.fp.success.float().mean().item(), True,
                         "share of queries whose FP recourse succeeds (|F| / n)")
Q_FEASIBLE = MetricSpec("Q_Feasible", lambda c: c.q.success.float().mean().item(), True,
                        "share of queries whose recourse on the compressed model succeeds")
TRANSFER_MARGIN = MetricSpec(
    "Transfer_Margin", lambda c: _mean(c.margins), True,
    "mean over F of f_q's target margin z_t - max_j z_j at the FP recourse (< 0: a VD event)")
AVG_WEIGHT_BITS = MetricSpec("Avg_weight_bits", _info("avg_weight_bits"), False,
                             "parameter-weighted mean weight bits of the final allocation")
AVG_ACT_BITS = MetricSpec("Avg_act_bits", _info("avg_act_bits"), False,
                          "mean activation bits of the final allocation")
BIT_COST = MetricSpec("Bit_cost", _info("bit_cost"), False,
                      "1/2 average weight bits + 1/2 average activation bits (the code's cost)")
COMPRESS_SECONDS = MetricSpec("Compress_seconds", _info("compress_seconds"), False,
                              "wall time of the method's own stage (calibration, teacher, KD "
                              "student, pruning, QAT)", timing=True)
TRAIN_SECONDS = MetricSpec("Train_seconds", _info("train_seconds"), False,
                           "wall time of the FP32 SmallCNN's training", timing=True)
TEACHER_SUCCESS = MetricSpec("Teacher_success", _info("teacher_success"), True,
                             "share of non-target training (CFQ) or calibration (CF-PTQ) images "
                             "whose teacher point the FP model puts in the target")
SPARSITY = MetricSpec("Sparsity", _info("sparsity"), True,
                      "share of exactly-zero conv and linear weights in the final model")
MEDIAN_DELTA = MetricSpec("Median_delta", lambda c: c.fp.meta["delta"].norm(dim=1).median().item(),
                          False, "median ||delta|| of the FP recourse over all queries "
                                 "(latent units of the solver)")
N_QUERIES = MetricSpec("N_queries", lambda c: len(c.fp), True, "queries (labels != target)")
N_FP_FEASIBLE = MetricSpec("N_fp_feasible", lambda c: int(c.fp_success.sum()), True,
                           "queries with a successful FP recourse, |F|")
N_ALREADY_TARGET = MetricSpec("N_already_target", lambda c: int((c.fp.pred.cpu() == c.target).sum()),
                              False, "queries the FP model already puts in the target class "
                                     "(kept, as the code keeps them)")
N_BOTH_FEASIBLE = MetricSpec("N_both_feasible",
                             lambda c: int((c.fp_success & c.q_success).sum()), True,
                             "queries feasible on both models, |Both|")
register(VD, CRG, DIRSIM, OVERHEAD, VD_LOW, VD_HIGH, FA_RECON, FA_RECON_LOW, FA_RECON_HIGH,
         FA_INFEASIBLE, FA_INFEASIBLE_LOW, FA_INFEASIBLE_HIGH, N_FP_INFEASIBLE,
         OVERHEAD_VS_MIXEDPREC, CRG_CI, DIRSIM_CI, FP_FEASIBLE, Q_FEASIBLE,
         TRANSFER_MARGIN, AVG_WEIGHT_BITS, AVG_ACT_BITS, BIT_COST, COMPRESS_SECONDS,
         TRAIN_SECONDS, TEACHER_SUCCESS, SPARSITY, MEDIAN_DELTA, N_QUERIES, N_FP_FEASIBLE,
         N_BOTH_FEASIBLE, N_ALREADY_TARGET)
