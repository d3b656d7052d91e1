"""One runner protocol for the book's tables.

A table's runner takes one :class:`RunArgs` (checked once, by its spec:
:mod:`cflib.bench.tables.registry`), builds each method from the catalog, explains the
queries, and scores every batch of counterfactuals with :func:`evaluate` inside an
evaluation context (see :mod:`cflib.metrics.spec`).  The functions that serve all tables:

* :func:`evaluate`: every spec that applies to one context;
* :func:`summarise`: mean, standard deviation and count of every cell over repeats or
  training seeds;
* :func:`explained`: one method's counterfactuals of one batch, memoized in the local
  cache (:mod:`cflib.memo`): a table re-run with unchanged methods re-scores them
  without explaining again;
* :func:`shape_checks`: what ``cflib/bench/reference/expected.csv`` leads us to expect
  (orderings, thresholds, paired comparisons on the same queries and the conditions
  under which a comparison is tested), each with a verdict and the reason;
  :func:`shape_checks_by_seed` counts in how many seeds each one holds.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, is_dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

from cflib.bench.profiles import Profile
from cflib.bench.reference import expected_orderings, parse_match
from cflib.bench.results import CELL
from cflib.bench.seeds import Seeds
from cflib.explainers import Counterfactuals
from cflib.memo import memoized
from cflib.metrics import recourse as rm
from cflib.metrics.spec import get_spec

#: what a paired comparison needs: (method, other, metric) -> per-query values of both
#: rows on the same queries (NaN where a query does not count)
PairedValues = Callable[[str, str, str], tuple[torch.Tensor, torch.Tensor]]


def as_seeds(seeds) -> Seeds:
    """``seeds`` as a :class:`~cflib.bench.seeds.Seeds` (an int: the training and the data
    seed alike); a TypeError for anything else."""
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        return Seeds(train=seeds, data=seeds)
    if not isinstance(seeds, Seeds):
        raise TypeError(f"seeds must be a Seeds(train=, data=) or an int, got {seeds!r}")
    return seeds


@dataclass(frozen=True)
class RunArgs:
    """The arguments of one run of a table, normalised once (:meth:`make`; a table's
    :meth:`~cflib.bench.tables.registry.TableSpec.args` checks the rest): the dataset
    (canonical name), the profile (a :class:`~cflib.bench.profiles.Profile`), the seeds,
    the device (checked), the rows to run, the class pairs (tables with pairs), the
    classifiers (tables with several), the queries per pair or repeat (None: the
    profile's), the training seeds merged in one run (the quantization table; empty: the
    profile's) and the target class (tables with one target).  A runner trusts it."""

    dataset: str
    profile: Profile
    seeds: Seeds
    device: str
    methods: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...] = ()
    models: tuple[str, ...] = ()
    n_images: int | None = None
    train_seeds: tuple[int, ...] | None = None
    target: int | None = None
    #: methods beside the catalog's (a user's, as :class:`cflib.bench.catalog.Entry`; never
    #: registered in the catalog)
    entries: tuple = ()

    @classmethod
    def make(cls, dataset: str, profile="standard", seeds: Seeds = Seeds(), device="cpu",
             methods=(), pairs=(), models=(), n_images: int | None = None,
             train_seeds=None, target: int | None = None, entries=()) -> "RunArgs":
        from cflib.bench.data import canonical_dataset
        from cflib.bench.profiles import get_profile
        from cflib.tensors import check_device

        check_device(device)
        return cls(canonical_dataset(dataset), get_profile(profile), as_seeds(seeds), str(device),
                   tuple(methods), tuple(tuple(p) for p in pairs), tuple(models), n_images,
                   None if train_seeds is None else (
                       (train_seeds,) if isinstance(train_seeds, int) else tuple(train_seeds)),
                   target, tuple(entries))


@dataclass
class Explained:
    """One method's counterfactuals of one batch, and what a table reads off the built
    method (``extra``: JSON values such as its budget fraction or training history)."""

    cf: Counterfactuals
    extra: dict = field(default_factory=dict)

    def save(self, folder: Path) -> None:
        self.cf.save(Path(folder) / "cf")
        (Path(folder) / "extra.json").write_text(json.dumps(self.extra))

    @classmethod
    def load(cls, folder: Path) -> "Explained":
        return cls(Counterfactuals.load(Path(folder) / "cf"),
                   json.loads((Path(folder) / "extra.json").read_text()))


def tensor_digest(t: torch.Tensor) -> str:
    """sha256 (16 hex) of a tensor's dtype, shape and values."""
    t = t.detach().cpu().contiguous()
    h = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
    h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
    return h.hexdigest()[:16]


def state_key(value, depth: int = 0):
    """A JSON value that changes when a built explainer's state does: its config, each
    network's fingerprint, each tensor's digest, every other attribute's value, walked
    through dicts, lists and dataclasses (what its builder made; a memo key holds it)."""
    from torch import nn

    from cflib.cache import fingerprint

    if depth > 6:
        return type(value).__qualname__
    if torch.is_tensor(value):
        return tensor_digest(value)
    if isinstance(value, nn.Module):
        return {"module": type(value).__qualname__, "weights": fingerprint(value)}
    if isinstance(value, dict):
        return {str(k): state_key(v, depth + 1) for k, v in sorted(value.items(), key=str)}
    if isinstance(value, (list, tuple)):
        return [state_key(v, depth + 1) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__qualname__,
                **{f: state_key(getattr(value, f), depth + 1)
                   for f in value.__dataclass_fields__}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "__dict__") and depth == 0:
        return {"type": type(value).__qualname__,
                **{k: state_key(v, depth + 1) for k, v in sorted(vars(value).items())}}
    return repr(value) if isinstance(value, (torch.dtype, torch.device)) else \
        type(value).__qualname__


def explained(table: str, key: dict, compute: Callable[[], Explained]) -> Explained:
    """``compute()`` (build a method, explain a batch) memoized under ``key`` (everything
    the step is given: method, pair or model, seeds, profile, the queries' digest, the
    explained network's fingerprint; :mod:`cflib.memo` adds the code it runs and the
    networks it loads)."""
    key = {**key, "threads": torch.get_num_threads()}
    return memoized(f"{table}-explain", key, compute, Explained.save, Explained.load)


def evaluate(ctx, specs, optional=()) -> dict[str, float]:
    """Every metric of ``specs`` that applies to one evaluation context (a spec with
    ``needs`` only where the counterfactuals report it), then each of ``optional`` whose
    ``needs`` the context's ``info`` holds."""
    out = {spec.name: spec(ctx) for spec in specs if spec.applies(ctx)}
    info = getattr(ctx, "info", {}) or {}
    for key, spec in optional:
        if key in info:
            out[spec.name] = spec(ctx)
    return out


def summarise(results: pd.DataFrame, over: str = "repeat") -> pd.DataFrame:
    """Mean, standard deviation (ddof 1; NaN for one) and count of every cell over
    ``over`` (``"repeat"`` or ``"train_seed"``): columns ``CELL + [mean, std, n]``.
    Repeats are averaged within each training seed first when summarising over seeds."""
    df = results
    keys = [c for c in CELL if c in df.columns]
    if over == "train_seed" and "repeat" in df.columns:
        df = df.groupby(keys + ["train_seed"], sort=False, dropna=False)["value"].mean()
        df = df.reset_index()
    return (df.groupby(keys, sort=False, dropna=False)["value"]
            .agg(mean="mean", std="std", n="count").reset_index())


# -- expectations ------------------------------------------------------------------------------
def _text(e) -> str:
    return {"better": f"{e.metric}: {e.method} better than {e.other}",
            "best": f"{e.metric}: {e.method} best",
            "at_least": f"{e.metric}: {e.method} ≥ {e.threshold:g}",
            "at_most": f"{e.metric}: {e.method} ≤ {e.threshold:g}",
            "within": f"{e.metric}: {e.method} within {e.threshold:g} of {e.other}",
            "paired": f"{e.metric}: {e.method} better than {e.other} on the same queries",
            }[e.relation]


def _match(vals: pd.Series, a: str, b: str, match: str) -> tuple[bool, str]:
    """Whether rows ``a`` and ``b`` are close enough on the match metrics to compare."""
    gaps = []
    ok = True
    for metric, limit in parse_match(match).items():
        va, vb = vals.get((a, metric), math.nan), vals.get((b, metric), math.nan)
        gap = va - vb
        gaps.append(f"{metric} gap {gap:+.3g} (limit {limit:g})")
        ok &= bool(abs(gap) <= limit)
    return ok, "; ".join(gaps)


def shape_checks(means: pd.DataFrame, table: str, by: list[str] | None = None,
                 expectations: pd.DataFrame | None = None, paired: PairedValues | None = None,
                 n_boot: int = rm.N_BOOT, seed: int = 0, candidates=None,
                 noise: dict | None = None) -> pd.DataFrame:
    """Test a table's expectations on a run's means.

    ``means`` has columns ``method, metric, value`` (plus the grouping columns ``by``);
    ``expectations`` defaults to :func:`expected_orderings(table)`.  Comparisons run in
    each metric's own direction (ties hold); ``paired`` supplies per-query values for the
    ``paired`` relation (a paired-bootstrap 95 % interval of the difference of means;
    skipped without it).  A comparison with a ``match`` condition that its two rows do
    not meet is reported as not tested.  Expectations whose rows are absent are skipped.
    ``candidates`` limits the rows a ``best`` is compared with (default: every row).
    ``noise``: ``{metric: (size, what)}``, the measured noise of a metric's values (a seed
    spread, an interval's half-width, a stated selection error): an ordering that fails
    by no more than it is ``within noise``, neither held nor failed (a materiality rule).

    Columns: ``expectation, metric, direction, method, value, other, other value,
    difference, ci_low, ci_high, matched, holds, significant, verdict, why, source``;
    ``verdict`` is ``holds``, ``fails``, ``within noise``, ``inconclusive`` or ``not tested``.
    """
    exp = expected_orderings(table) if expectations is None else expectations
    groups = means.groupby(by, sort=False) if by else [((), means)]
    rows = []
    for key, d in groups:
        key = key if isinstance(key, tuple) else (key,)
        vals = d.groupby(["method", "metric"], sort=False)["value"].mean()
        for e in exp.itertuples():
            got = _compare(e, vals, candidates, paired, n_boot, seed)
            if got is not None:
                rows.append({**dict(zip(by or [], key)),
                             **_verdict(e, vals, *got, noise=(noise or {}).get(e.metric))})
    cols = (by or []) + ["expectation", "metric", "direction", "method", "value", "other",
                         "other value", "difference", "ci_low", "ci_high", "matched", "holds",
                         "significant", "verdict", "why", "source"]
    return pd.DataFrame(rows, columns=cols)


def _compare(e, vals: pd.Series, candidates, paired, n_boot: int, seed: int):
    """One expectation on one group's means: ``(value, other, other value, holds, (ci low,
    high), significant, difference)``, or None where its rows are absent (or a paired
    comparison has no per-query values)."""
    spec = get_spec(e.metric)
    if (e.method, e.metric) not in vals:
        return None
    v = float(vals[(e.method, e.metric)])
    other, w, ci, significant = (e.other or ""), math.nan, (math.nan, math.nan), None
    diff = None
    if e.relation == "best":
        others = vals.xs(e.metric, level="metric").drop(e.method, errors="ignore")
        if candidates is not None:
            others = others[others.index.isin(list(candidates))]
        others = others.dropna()
        if others.empty:
            return None
        other = min(others.index, key=lambda m: spec.key(others[m]))
        w = float(others[other])
        holds = spec.better(v, w)
    elif e.relation in ("at_least", "at_most"):
        w = float(e.threshold)
        holds = v >= w if e.relation == "at_least" else v <= w
    else:
        if (other, e.metric) not in vals:
            return None
        w = float(vals[(other, e.metric)])
        if e.relation == "better":
            holds = spec.better(v, w)
        elif e.relation == "within":
            holds = abs(v - w) <= float(e.threshold)
        else:  # paired
            if paired is None:
                return None
            a, b = paired(e.method, other, e.metric)
            stat = (rm.abs_nanmean if spec.higher_is_better is None
                    else (lambda t: torch.nanmean(t, dim=-1)))
            c = rm.paired_bootstrap(a, b, n_boot, seed, stat=stat)
            ci, diff = (c.low, c.high), c.estimate
            sign = 1.0 if spec.higher_is_better else -1.0
            holds = bool(sign * c.estimate >= 0)
            # the interval excludes 0 (either way): a difference the data resolve
            significant = bool(c.low > 0 or c.high < 0)
    return v, other, w, holds, ci, significant, (v - w) if diff is None else diff


def _verdict(e, vals: pd.Series, v, other, w, holds, ci, significant, diff,
             noise=None) -> dict:
    """The row of a tested expectation: its verdict (a ``match`` condition its rows do
    not meet: not tested; a paired interval that includes 0: inconclusive) and why."""
    spec = get_spec(e.metric)
    matched, why = True, ""
    if e.match:
        matched, why = _match(vals, e.method, other, e.match)
    holds = bool(holds) and matched   # an unmatched comparison never holds
    verdict = ("not tested" if not matched else "holds" if holds else "fails")
    if not matched:
        why = "rows not matched: " + why
    elif significant is False:
        # the sign of the estimate is not a finding: neither holds nor fails
        verdict, holds = "inconclusive", False
        why = "the 95 % interval includes 0"
    elif significant and not holds:
        why = "the 95 % interval excludes 0, the other way"
    elif (verdict == "fails" and noise is not None and e.relation in ("better", "best")
          and abs(v - w) <= noise[0]):
        # a gap smaller than the measured noise is no finding either way
        verdict = "within noise"
        why = f"the gap {abs(v - w):.3g} is within {noise[1]} ({noise[0]:.3g})"
    shown = abs if spec.higher_is_better is None else float
    return {"expectation": _text(e), "metric": e.metric, "direction": spec.arrow,
            "method": e.method, "value": shown(v), "other": other, "other value": shown(w),
            "difference": diff, "ci_low": ci[0], "ci_high": ci[1], "matched": matched,
            "holds": bool(holds), "significant": significant, "verdict": verdict, "why": why,
            "source": e.source}


def shape_checks_by_seed(per_seed: dict, table: str, by: list[str] | None = None,
                         select=None) -> pd.DataFrame:
    """:func:`shape_checks` in every training seed of a sweep: per expectation, in how
    many seeds it holds, whether it holds in all of them, and the range of both values.

    ``per_seed``: ``{seed: results table}``; ``select`` picks the rows the checks read
    (e.g. the pair means of a C3LT table).
    """
    frames = []
    for seed, df in sorted(per_seed.items()):
        d = select(df) if select else df
        checks = shape_checks(d, table, by=by)
        if len(checks):
            frames.append(checks.assign(seed=seed))
    if not frames:
        return pd.DataFrame()
    all_ = pd.concat(frames, ignore_index=True)
    keys = (by or []) + ["expectation"]
    out = all_.groupby(keys, sort=False).agg(
        seeds=("seed", "count"), holds_in=("holds", "sum"),
        value_min=("value", "min"), value_max=("value", "max"),
        other_min=("other value", "min"), other_max=("other value", "max")).reset_index()
    out["holds in every seed"] = out["holds_in"] == out["seeds"]
    return out
