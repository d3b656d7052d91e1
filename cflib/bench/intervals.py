"""How sure a row's value is, and which rows a comparison may call better than another.

A table's value is a mean over a handful of queries (12 per pair at ``smoke``, 100 at
``standard``): a rank between two rows means something only where their values differ by
more than the draw of queries explains.  This module gives every value an interval and
ranks rows only where the intervals separate:

* :func:`per_query`: the per-query values of the metrics that are means over queries
  (validity, proximity, IM1, IM2, the insertion-curve areas, the judges' validity), from a
  C3LT table run that still holds its networks and every counterfactual; their mean over a
  pair's queries is the table's value (a test checks it against the runner's);
* :func:`bootstrap`: the percentile interval of each row's mean over pairs, resampling
  the queries of each pair with replacement (pairs resampled independently);
* :func:`repeat_intervals`: the Bayesian tables' interval over their repeats (a t
  interval of the mean; a repeat is a fresh draw of queries);
* :func:`separated_ranks`: each row's rank on each metric as the number of rows whose
  interval lies wholly on the better side of its own, plus one: rows whose intervals
  overlap share a rank (tied).

Set-level metrics (FID, KID, diversity, query dependence) are not means over queries:
they carry no interval here and are not ranked.  FID and KID on fewer than
:data:`SMALL_SET` images are biased upward and are marked so on the page.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from cflib.metrics.basic import JUDGE_NAMES, judged, proximity
from cflib.metrics.plausibility import im1_by_class, im2
from cflib.metrics.spec import get_spec

#: the confidence of the intervals, the bootstrap's resamples and its seed
LEVEL, N_BOOT, BOOT_SEED = 0.95, 2000, 0
#: FID and KID from fewer images than this per set are biased upward (marked on the page)
SMALL_SET = 100
#: the metrics that are set-level statistics, not means over queries (no interval here)
SET_LEVEL = ("FID", "KID", "Diversity", "Query_dependence")


def _per_query_values(cf, curves, models, query_class: int, target_class: int) -> dict:
    """``{metric: (N,) tensor}`` for one pair and method (N: its queries)."""
    n = len(cf)
    out = {"Validity": cf.success.float().cpu(),
           "Proximity": proximity(cf.x, cf.x_cf).cpu()}
    if models is not None and models.autoencoders:
        q = torch.full((n,), query_class, dtype=torch.long)
        out["IM1"] = im1_by_class(cf.x_cf, cf.target, q, models.autoencoders).cpu()
        if None in models.autoencoders and target_class in models.autoencoders:
            out["IM2"] = im2(cf.x_cf, models.autoencoders[target_class],
                             models.autoencoders[None]).cpu()
    if curves is not None and len(curves.aupc_target) == n:
        out["AUPC_target"] = curves.aupc_target.cpu()
        out["AUPC_query"] = curves.aupc_query.cpu()
        out["COUT"] = curves.cout.cpu()
    judges = getattr(models, "judges", None) or {}
    if judges and all(j in judges for j in JUDGE_NAMES):
        every = torch.ones(n, dtype=torch.bool)
        for j in JUDGE_NAMES:
            ok = judged(judges[j], cf).cpu()
            out[f"Validity ({j} judge)"] = ok.float()
            every &= ok
        out["Validity (all judges)"] = every.float()
    return out


def per_query(run) -> pd.DataFrame:
    """The per-query values of a C3LT table run (:class:`~cflib.bench.tables.c3lt.C3LTRun`
    as its runner returns it: every counterfactual, the insertion curves and the networks):
    columns ``pair, method, metric, query, value``.  A run read back from files holds only
    the figures' counterfactuals: a ValueError."""
    if getattr(run, "models", None) is None:
        raise ValueError("per-query values need the run as its runner returned it (its "
                         "networks and every counterfactual), not one read back from files")
    frames = []
    for (pair, method), cf in run.counterfactuals.items():
        q, t = (int(c) for c in pair.split("->"))
        vals = _per_query_values(cf, run.curves.get((pair, method)), run.models, q, t)
        for metric, v in vals.items():
            frames.append(pd.DataFrame({"pair": pair, "method": method, "metric": metric,
                                        "query": np.arange(len(v)),
                                        "value": v.double().numpy()}))
    cols = ["pair", "method", "metric", "query", "value"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def bootstrap(values: pd.DataFrame, n_boot: int = N_BOOT, level: float = LEVEL,
              seed: int = BOOT_SEED) -> pd.DataFrame:
    """Each row's mean over pairs of its per-query values (:func:`per_query`) with the
    percentile interval at ``level``: the queries of each pair resampled with replacement
    ``n_boot`` times (each pair on its own), the pair means averaged.  Columns ``method,
    metric, value, lo, hi, n, pairs, basis`` (``n``: the queries behind the value)."""
    if not 0 < level < 1 or n_boot < 100:
        raise ValueError(f"level must lie in (0, 1) and n_boot be at least 100, got {level}, "
                         f"{n_boot}")
    rng = np.random.default_rng(seed)
    rows = []
    for (method, metric), g in values.groupby(["method", "metric"], sort=False):
        reps, means, n = np.zeros(n_boot), [], 0
        pairs = list(dict.fromkeys(g["pair"]))
        for pair in pairs:
            v = g.loc[g["pair"] == pair, "value"].to_numpy(float)
            idx = rng.integers(0, len(v), size=(n_boot, len(v)))
            reps += v[idx].mean(1)
            means.append(v.mean())
            n += len(v)
        reps /= len(pairs)
        a = (1 - level) / 2
        rows.append({"method": method, "metric": metric, "value": float(np.mean(means)),
                     "lo": float(np.quantile(reps, a)), "hi": float(np.quantile(reps, 1 - a)),
                     "n": n, "pairs": len(pairs), "basis": "queries"})
    return pd.DataFrame(rows, columns=["method", "metric", "value", "lo", "hi", "n", "pairs",
                                       "basis"])


#: Student t quantiles at 0.975 for 1 to 10 degrees of freedom (the repeats of a table)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def _t_quantile(p: float, df: int) -> float:
    """The Student t quantile: the table above at 0.975, else the normal quantile with
    the Cornish-Fisher correction (within 0.01 of the exact value from 5 degrees of
    freedom)."""
    if abs(p - 0.975) < 1e-12 and 1 <= df <= len(_T975):
        return _T975[df - 1]
    from statistics import NormalDist

    z = NormalDist().inv_cdf(p)
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def repeat_intervals(summary: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """A t interval of the mean over repeats from a summary (columns ``method, metric,
    mean, std, n``; :func:`cflib.bench.tables.bayes.summarise`); no interval (NaN) with one
    repeat.  Columns as :func:`bootstrap`'s, ``basis`` "repeats"."""
    rows = []
    for _, r in summary.iterrows():
        n = int(r["n"])
        half = (_t_quantile(1 - (1 - level) / 2, n - 1) * r["std"] / math.sqrt(n)
                if n > 1 and pd.notna(r["std"]) else float("nan"))
        rows.append({"method": r["method"], "metric": r["metric"], "value": r["mean"],
                     "lo": r["mean"] - half, "hi": r["mean"] + half, "n": n, "pairs": 0,
                     "basis": "repeats"})
    return pd.DataFrame(rows, columns=["method", "metric", "value", "lo", "hi", "n", "pairs",
                                       "basis"])


def _better_side(spec, lo: float, hi: float) -> tuple[float, float]:
    """An interval as sort keys (smaller is better): (best end, worst end)."""
    a, b = spec.key(lo), spec.key(hi)
    if spec.higher_is_better is None and lo <= 0 <= hi:   # |v| with 0 inside
        return 0.0, max(a, b)
    return min(a, b), max(a, b)


def separated_ranks(wide: pd.DataFrame, intervals: pd.DataFrame,
                    metrics: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(best, worst, ties)`` of the rows of ``wide`` (rows = methods, columns = metrics)
    on ``metrics``, from their intervals (:func:`bootstrap` / :func:`repeat_intervals`; a
    row without one counts as its value alone): a row's best rank is 1 + the rows whose
    interval lies wholly on the better side of its own, its worst rank the number of rows
    less those wholly on the worse side.  Rows whose intervals overlap have overlapping
    rank ranges: no order is claimed between them.  ``ties`` holds, per row and metric,
    the other rows it overlaps.  A set-level metric (:data:`SET_LEVEL`) or one with no
    interval at all is left out."""
    iv = intervals.set_index(["method", "metric"]) if len(intervals) else None
    best, worst, ties = {}, {}, {}
    for m in metrics:
        if m in SET_LEVEL or m not in wide.columns or iv is None:
            continue
        spec = get_spec(m)
        span, any_interval = {}, False
        for row in wide.index:
            v = wide.loc[row, m]
            if pd.isna(v):
                continue
            lo, hi = v, v
            if (row, m) in iv.index and pd.notna(iv.loc[(row, m), "lo"]):
                lo, hi, any_interval = iv.loc[(row, m), "lo"], iv.loc[(row, m), "hi"], True
            span[row] = _better_side(spec, lo, hi)
        if not any_interval:
            continue
        above = {r: [o for o in span if o != r and span[o][1] < b]
                 for r, (b, _) in span.items()}
        below = {r: [o for o in span if o != r and w < span[o][0]]
                 for r, (_, w) in span.items()}
        best[m] = {r: 1 + len(above[r]) for r in span}
        worst[m] = {r: len(span) - len(below[r]) for r in span}
        ties[m] = {r: [o for o in span if o != r and o not in above[r] and o not in below[r]]
                   for r in span}
    idx = pd.Index(list(wide.index), name="method")
    return (pd.DataFrame(best, index=idx), pd.DataFrame(worst, index=idx),
            pd.DataFrame(ties, index=idx))


__all__ = ["per_query", "bootstrap", "repeat_intervals", "separated_ranks", "LEVEL", "N_BOOT",
           "SMALL_SET", "SET_LEVEL"]
