"""The tidy results of every chapter: one schema, one writer, one reader, the shape checks.

Every chapter writes one long table with :data:`COLUMNS`
(``dataset, pair, method, setting, metric, value, seed, profile``), plus ``repeat``
where a chapter repeats its queries (the Bayesian chapter); the book's tables are
pivots of it.  Files are written atomically (a temporary file renamed), so a failed
run never leaves half a file.  :func:`shape_checks` tests the papers' expected
orderings (``cflib/reference/expected.csv``) on a run's means, in each metric's own
direction (:mod:`cflib.metrics.spec`).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd

from cflib.metrics.spec import get_spec
from cflib.reference import expected_orderings

COLUMNS = ["dataset", "pair", "method", "setting", "metric", "value", "seed", "profile"]
OPTIONAL = ["repeat"]


def tidy(rows) -> pd.DataFrame:
    """Rows (dicts or a DataFrame) as a results table: :data:`COLUMNS` in order, then
    ``repeat`` when present; a missing column is an error."""
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"results rows lack the column(s) {missing}; a results table has "
                         f"{COLUMNS} (+ {OPTIONAL})")
    return df[COLUMNS + [c for c in OPTIONAL if c in df.columns]].reset_index(drop=True)


def write_table(df: pd.DataFrame, path) -> Path:
    """Write a CSV atomically: a temporary file beside ``path``, then renamed over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        df.to_csv(tmp, index=False)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_results(df: pd.DataFrame, name: str, results_dir="results") -> Path:
    """``results_dir/<name>.csv`` from a results table (checked against the schema)."""
    return write_table(tidy(df), Path(results_dir) / f"{name}.csv")


def write_run(run, name: str, results_dir="results") -> list[Path]:
    """Every table of a runner's result: ``run.results`` as ``<name>.csv`` and each
    extra table of ``run.tables()`` (e.g. ``{"curves": df}``) as ``<name>_<key>.csv``."""
    paths = [write_results(run.results, name, results_dir)]
    for key, df in getattr(run, "tables", dict)().items():
        paths.append(write_table(df, Path(results_dir) / f"{name}_{key}.csv"))
    return paths


def read_results(name_or_path, results_dir="results") -> pd.DataFrame:
    """A results table: ``results_dir/<name>.csv`` (or a path), values as floats and the
    empty ``setting`` kept as an empty string."""
    path = Path(name_or_path)
    if path.suffix != ".csv":
        path = Path(results_dir) / f"{name_or_path}.csv"
    if not path.exists():
        raise FileNotFoundError(f"no results file {path}; run the chapter first "
                                f"(make chapter NB={path.stem})")
    df = pd.read_csv(path, keep_default_na=False)
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return tidy(df)


def read_table(path) -> pd.DataFrame:
    """Any CSV the book writes (tuning evidence, curves), empty strings kept as such."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no file {path}; the command that writes it is named in "
                                "the module that reads it (e.g. python -m cflib.tuning ...)")
    return pd.read_csv(path, keep_default_na=False)


def with_pair_means(df: pd.DataFrame) -> pd.DataFrame:
    """Append the mean over pairs (``pair = "mean"``) of every method and metric."""
    per_pair = df[df["pair"] != "mean"]
    keys = ["dataset", "method", "setting", "metric", "seed", "profile"]
    means = per_pair.groupby(keys, as_index=False, dropna=False, sort=False)["value"].mean()
    means["pair"] = "mean"
    return pd.concat([per_pair, means[COLUMNS]], ignore_index=True)


def shape_checks(means: pd.DataFrame, table: str, by: list[str] | None = None,
                 expectations: pd.DataFrame | None = None) -> pd.DataFrame:
    """Test the papers' expected orderings on a run's means.

    ``means`` has columns ``method, metric, value`` (plus the grouping columns ``by``,
    e.g. ``["setting"]``); ``expectations`` defaults to
    :func:`cflib.reference.expected_orderings(table)`.  "better" compares two methods,
    "best" one method against every other; both in the metric's own direction, ties
    counting as holding.  Expectations whose methods are absent are skipped.
    """
    exp = expected_orderings(table) if expectations is None else expectations
    groups = means.groupby(by, sort=False) if by else [((), means)]
    rows = []
    for key, d in groups:
        key = key if isinstance(key, tuple) else (key,)
        vals = d.groupby(["method", "metric"], sort=False)["value"].mean()
        for e in exp.itertuples():
            spec = get_spec(e.metric)
            if (e.method, e.metric) not in vals:
                continue
            v = vals[(e.method, e.metric)]
            if e.relation == "best":
                others = vals.xs(e.metric, level="metric").drop(e.method, errors="ignore").dropna()
                if others.empty:
                    continue
                best = min(others.index, key=lambda m: spec.key(others[m]))
                other, w = best, others[best]
                text = f"{e.metric}: {e.method} best"
            else:
                if (e.other, e.metric) not in vals:
                    continue
                other, w = e.other, vals[(e.other, e.metric)]
                text = f"{e.metric}: {e.method} better than {e.other}"
            rows.append({**dict(zip(by or [], key)), "expectation": text,
                         "direction": spec.arrow, "method": e.method, "value": v,
                         "other": other, "other value": w, "holds": bool(spec.better(v, w))})
    return pd.DataFrame(rows)


def shape_checks_by_seed(per_seed: dict, table: str, by: list[str] | None = None,
                         select=None) -> pd.DataFrame:
    """:func:`shape_checks` in every training seed of a sweep: per expectation, in how
    many seeds it holds and whether it holds in all of them.

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
