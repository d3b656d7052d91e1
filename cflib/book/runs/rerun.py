"""How far a re-run lands from the book: every value of a re-executed chapter against the
committed one, and against the book's spread over training seeds where the chapter was
swept (``cflib verify --rerun CHAPTER``).

A value of a re-run is, per cell of the chapter's results table (repeats of one seed
averaged first, as :func:`cflib.book.spread.merge_seeds` does):

* **bit-equal**: the same float as the committed one (read from the CSV each run wrote:
  pandas writes the shortest repr that round-trips, so equal text is equal bits);
* **within the seed spread**: it differs, by at most :data:`SPREAD_K` standard deviations
  of that cell over the training seeds of the chapter's sweep (a network trained on
  another machine or at another thread count is another draw of the same training: the
  seeds' spread is the yardstick of "the same result");
* **beyond the seed spread**: it differs by more, which asks for an explanation;
* **moved, no spread**: it differs, and the chapter has no sweep to judge it by (its
  cell has fewer than two seeds).

Wall-clock metrics (``MetricSpec.timing``) are counted apart and never compared.
"""
from __future__ import annotations

import io
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cflib.bench.data import PROJECT_ROOT
from cflib.bench.results import CELL, read_table
from cflib.book.runs.paths import RESULTS_DIR, RUNS_DIR, rel
from cflib.book.spread import SWEEP_DIR, read_sweep

#: a value moved "beyond the seed spread" when |re-run - committed| > SPREAD_K x the
#: standard deviation of its cell over the sweep's training seeds
SPREAD_K = 2.0
BIT_EQUAL, WITHIN, BEYOND, NO_SPREAD, ONLY_ONE, LOST = (
    "bit-equal", "within the seed spread", "beyond the seed spread",
    "moved, no seed spread", "in the re-run only", "a number in the book, none in the re-run")


def timing_metrics() -> set[str]:
    """The names of the wall-clock metrics (never compared across runs)."""
    import cflib.metrics  # noqa: F401  (registers every metric)
    from cflib.metrics.spec import SPECS

    return {name for name, spec in SPECS.items() if spec.timing}


def committed_table(name: str) -> pd.DataFrame:
    """``results/<name>.csv`` as committed: the version in git's HEAD when the project is
    a git checkout and the file is tracked (a book run may have replaced the working copy),
    else the file on disk."""
    path = RESULTS_DIR / f"{name}.csv"
    try:
        out = subprocess.run(["git", "show", f"HEAD:{rel(path)}"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout:
            return pd.read_csv(io.StringIO(out.stdout), keep_default_na=False)
    except (OSError, subprocess.SubprocessError):
        pass
    if not path.exists():
        raise ValueError(f"no committed results for {name!r} ({rel(path)} does not exist)")
    return read_table(path)


def find_rerun(name: str, profile: str | None = None) -> Path:
    """The newest re-run of chapter ``name``: the book's own ``results/<name>.csv`` when a
    book run replaced it (it differs from git's HEAD), else the newest
    ``_build/runs/*/<name>.csv`` at ``profile`` (the committed run's; a run at another
    profile is never picked).  A ValueError when there is none."""
    own = RESULTS_DIR / f"{name}.csv"
    try:
        out = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", rel(own)],
                             cwd=PROJECT_ROOT, capture_output=True, timeout=30)
        if out.returncode == 1:
            return own
    except (OSError, subprocess.SubprocessError):
        pass
    runs = sorted(Path(RUNS_DIR).glob(f"*/{name}.csv"), key=lambda p: p.stat().st_mtime)
    if profile is not None:
        runs = [r for r in runs if set(read_table(r).get("profile", [profile])) == {profile}]
    if not runs:
        at = f" at profile {profile!r}" if profile else ""
        raise ValueError(f"no re-run of {name!r}{at} found: {rel(own)} equals the committed "
                         f"one and {rel(RUNS_DIR)}/ holds no {name}.csv{at}; run `make chapter "
                         f"NB={name}` (or `cflib chapter {name} ...`), or name the run's "
                         "results with --run")
    return runs[-1]


def _cells(df: pd.DataFrame) -> pd.Series:
    """The table's values per cell, repeats of one seed averaged (a Series on CELL)."""
    d = df.copy()
    d["value"] = pd.to_numeric(d["value"], errors="coerce")
    return d.groupby(_keyed(d), sort=False)["value"].mean()


def _keyed(d: pd.DataFrame) -> list[str]:
    """The CELL columns of ``d``, as text (in place), so that tables read by different
    readers index alike."""
    keys = [c for c in CELL if c in d.columns]
    for k in keys:
        d[k] = d[k].fillna("").astype(str)
    return keys


#: how a report names the committed results it compared a re-run with
COMMITTED = "the committed results"


@dataclass
class RerunReport:
    """Every compared value of a re-run: ``table`` has the cell, ``committed``, ``rerun``,
    ``diff`` (re-run - committed), ``seed_sd`` (NaN without a sweep), ``n_seeds`` and
    ``status`` (one of the module's statuses); ``timings``: the wall-clock values left
    out; ``rows_bit_equal`` / ``rows``: the raw rows (repeats apart) that are bit-equal."""

    chapter: str
    run: str
    table: pd.DataFrame
    timings: int
    rows_bit_equal: int
    rows: int
    not_rerun: int = 0
    #: what the re-run was compared with: the committed results, or a given baseline
    baseline: str = COMMITTED
    #: per method whose per-query values moved, what moved (:func:`per_query_moves`);
    #: None when the run or the baseline has no per-query file beside it
    per_query: pd.DataFrame | None = None

    @property
    def against_committed(self) -> bool:
        return self.baseline == COMMITTED

    def counts(self) -> dict[str, int]:
        return {s: int((self.table["status"] == s).sum())
                for s in (BIT_EQUAL, WITHIN, BEYOND, NO_SPREAD, ONLY_ONE, LOST)}

    @property
    def beyond(self) -> pd.DataFrame:
        """The values that fail the comparison: beyond the seed spread, or a committed
        number the re-run lost (NaN)."""
        return self.table[self.table["status"].isin([BEYOND, LOST])]

    def describe(self, limit: int = 20) -> str:
        c = self.counts()
        n = len(self.table)
        partial = (f"; {self.not_rerun} committed values this run did not re-run (a part of "
                   "the chapter: other methods, pairs or models)" if self.not_rerun else "")
        lines = [f"{self.chapter}: {self.run} against {self.baseline}: the {n} "
                 f"value{'s' if n != 1 else ''} it re-ran compared ({self.timings} wall-clock values left out{partial})",
                 f"  bit-equal: {c[BIT_EQUAL]} of {n} (raw rows: {self.rows_bit_equal} of "
                 f"{self.rows})",
                 f"  within the seed spread ({SPREAD_K:g} sd over training seeds): {c[WITHIN]}",
                 f"  beyond the seed spread: {c[BEYOND]}",
                 f"  moved, no seed spread to judge them (the cell was not swept): "
                 f"{c[NO_SPREAD]}"]
        if c[LOST]:
            lines.append(f"  a number in the book, none (NaN) in the re-run: {c[LOST]}")
        if c[ONLY_ONE]:
            lines.append(f"  in the re-run only (no committed value): {c[ONLY_ONE]}")
        shown = self.beyond if c[BEYOND] else self.table[self.table["status"] == NO_SPREAD]
        if len(shown):
            what = "beyond the spread" if c[BEYOND] else "moved (no spread)"
            lines.append(f"  {what}, largest first:")
            shown = shown.assign(_r=shown["diff"].abs() / shown["seed_sd"].where(
                shown["seed_sd"] > 0, np.nan)).sort_values(
                ["_r", "diff"], ascending=False, key=lambda s: s.abs())
            for _, r in shown.head(limit).iterrows():
                cell = " / ".join(str(r[k]) for k in CELL if k in r and str(r[k]) not in ("", "nan"))
                sd = "" if np.isnan(r["seed_sd"]) else \
                    f", seed sd {r['seed_sd']:.4g} ({abs(r['diff']) / r['seed_sd']:.1f} sd)" \
                    if r["seed_sd"] > 0 else ", seed sd 0"
                was = "committed" if self.against_committed else "baseline"
                lines.append(f"    {cell}: {was} {r['committed']:.6g}, re-run "
                             f"{r['rerun']:.6g}{sd}")
            if len(shown) > limit:
                lines.append(f"    ... and {len(shown) - limit} more")
        if self.per_query is not None and len(self.per_query):
            lines.append("  per query, the methods whose values moved (median |change| / "
                         "|baseline| of each query's proximity; validity flips):")
            for r in self.per_query.itertuples():
                med = "" if np.isnan(r.proximity_median_rel_change) else \
                    f"proximity median change {100 * r.proximity_median_rel_change:.3g} %, "
                lines.append(f"    {r.method}: {r.queries_moved} of {r.queries} queries moved; "
                             f"{med}validity flipped on {r.validity_flips} "
                             f"({r.valid_before} valid before, {r.valid_after} after)")
        return "\n".join(lines)


def compare_rerun(chapter: str, run=None, baseline=None, sweep_root=None,
                  profile: str | None = None) -> RerunReport:
    """Compare a re-run of ``chapter`` (``run``: its results CSV or a folder holding
    ``<chapter>.csv``; default :func:`find_rerun`) with ``baseline`` (a CSV or folder;
    default the committed results, :func:`committed_table`) and with the spread over
    training seeds of the sweep under ``sweep_root`` (default ``results/sweep``; the
    book's own seed taken from the baseline).  The profile of the sweep is the baseline's."""
    committed = committed_table(chapter)
    base_path = None if baseline is None else Path(_csv(baseline, chapter))
    base = committed if base_path is None else _read(base_path)
    if base_path is not None and base_path.resolve() == (RESULTS_DIR / f"{chapter}.csv").resolve():
        rows, same = _raw_equal(base, committed)
        if same < rows or len(base) != len(committed):
            raise ValueError(f"--baseline {rel(base_path)} is the chapter's results file, "
                             "edited since the commit (its values are not the committed ones): "
                             "leave --baseline out to compare with the committed results, or "
                             f"`git checkout -- {rel(base_path)}`")
    profile = profile or str(base["profile"].iloc[0])
    run_path = find_rerun(chapter, profile) if run is None else _csv(run, chapter)
    rerun = _read(run_path)
    _comparable(chapter, rel(run_path), rerun, base, profile)
    if sweep_root is not None and not Path(sweep_root).is_dir():
        raise ValueError(f"--sweep-root {str(sweep_root)!r} is not a folder: the seed "
                         "spread cannot be read (leave it out for results/sweep)")
    timing = timing_metrics()
    n_timing = int(rerun["metric"].isin(timing).sum())
    rerun_v = rerun[~rerun["metric"].isin(timing)]
    base_v = base[~base["metric"].isin(timing)]
    rows, same = _raw_equal(rerun_v, base_v)
    a, b = _cells(rerun_v), _cells(base_v)
    # the spread of each cell over the seeds: the sweep's own merge (repeats of a seed
    # averaged, then the sd over seeds), the committed run (never a given baseline)
    # standing for its seed
    own = committed if set(committed["profile"]) == {profile} else None
    merged, per_seed = read_sweep(chapter, profile, root=sweep_root or SWEEP_DIR, own=own)
    sd = n = None
    if len(per_seed) >= 2:
        merged = merged.copy()
        spread = merged.set_index(_keyed(merged))
        sd, n = spread["sd"], spread["n"]
    idx = a.index                   # the cells the re-run re-ran (a part, or all of them)
    not_rerun = len(b.index.difference(a.index))
    table = pd.DataFrame({"committed": b.reindex(idx), "rerun": a.reindex(idx)})
    table["diff"] = table["rerun"] - table["committed"]
    table["seed_sd"] = sd.reindex(idx) if sd is not None else np.nan
    table["n_seeds"] = n.reindex(idx).fillna(0).astype(int) if n is not None else 0
    table["status"] = [_status(r) for r in table.itertuples()]
    label = COMMITTED if base_path is None else f"the baseline {rel(base_path)}"
    return RerunReport(chapter, rel(run_path), table.reset_index(), n_timing, same, rows,
                       not_rerun, label, _per_query(chapter, Path(run_path), base_path))


#: the per-query metrics :func:`per_query_moves` summarises
PROXIMITY, VALIDITY = "Proximity", "Validity"


def per_query_moves(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """What moved, query by query, between two per-query tables (columns ``pair``,
    ``method``, ``metric``, ``query``, ``value``; a query is a pair and its index): one row
    per method with at least one moved value, with ``queries`` (compared), ``queries_moved``
    (any of its values differs, NaN equal to NaN), ``proximity_median_rel_change`` (the
    median over queries of |after - before| / |before| of the proximity, where before is
    not 0; NaN without one), ``validity_flips`` (queries whose validity changed) and the
    valid counts before and after.  Methods in one table only are left out."""
    keys = ["pair", "method", "metric", "query"]
    m = before[keys + ["value"]].astype({k: str for k in keys}).merge(
        after[keys + ["value"]].astype({k: str for k in keys}), on=keys, suffixes=("_b", "_a"))
    b = pd.to_numeric(m["value_b"], errors="coerce").to_numpy(float)
    a = pd.to_numeric(m["value_a"], errors="coerce").to_numpy(float)
    m["moved"] = ~_same_value(a, b)
    m["b"], m["a"] = b, a
    rows = []
    for method, g in m.groupby("method", sort=False):
        q = g.groupby(["pair", "query"], sort=False)["moved"].any()
        if not q.any():
            continue
        prox = g[(g["metric"] == PROXIMITY) & (g["b"] != 0)]
        rel_change = ((prox["a"] - prox["b"]).abs() / prox["b"].abs()).dropna()
        val = g[g["metric"] == VALIDITY]
        rows.append({"method": method, "queries": len(q), "queries_moved": int(q.sum()),
                     "proximity_median_rel_change": float(rel_change.median())
                     if len(rel_change) else np.nan,
                     "validity_flips": int((val["a"] != val["b"]).sum()),
                     "valid_before": int((val["b"] == 1).sum()),
                     "valid_after": int((val["a"] == 1).sum())})
    return pd.DataFrame(rows, columns=["method", "queries", "queries_moved",
                                       "proximity_median_rel_change", "validity_flips",
                                       "valid_before", "valid_after"])


def _per_query(chapter: str, run_path: Path, base_path: Path | None) -> pd.DataFrame | None:
    """:func:`per_query_moves` of the per-query files beside the run and the baseline
    (the committed one from git's HEAD when no baseline is given); None without both."""
    name = f"{chapter}_per_query"
    after = run_path.with_name(f"{name}.csv")
    if not after.is_file():
        return None
    try:
        before = committed_table(name) if base_path is None else \
            _read(base_path.with_name(f"{name}.csv"))
    except ValueError:
        return None
    return per_query_moves(before, _read(after))


def _comparable(chapter: str, run: str, rerun: pd.DataFrame, base: pd.DataFrame,
                profile: str) -> None:
    """Refuse a re-run that cannot be compared with the baseline: another kind of file,
    another dataset (another chapter's results), another profile, no value in common."""
    missing = [c for c in ("method", "metric", "value") if c not in rerun.columns]
    if missing:
        raise ValueError(f"{run} is not a results file (it lacks the column(s) {missing})")
    if "profile" in rerun.columns and set(rerun["profile"]) != {profile}:
        raise ValueError(f"the re-run {run} is at profile {sorted(set(rerun['profile']))}, the "
                         f"baseline at {profile!r}: compare runs of one profile")
    if "dataset" in rerun.columns and set(rerun["dataset"]) != set(base["dataset"]):
        raise ValueError(f"the re-run {run} is of dataset(s) {sorted(set(rerun['dataset']))}, "
                         f"{chapter}'s results of {sorted(set(base['dataset']))}: another "
                         "chapter's results?")
    keys = ["method", "metric"]
    common = rerun[keys].drop_duplicates().merge(base[keys].drop_duplicates())
    if common.empty:
        raise ValueError(f"the re-run {run} shares no method and metric with {chapter}'s "
                         "results: another chapter's results?")


def _read(path: Path) -> pd.DataFrame:
    """A results CSV, read bounded (no device file, FIFO or folder: :mod:`cflib.io`); a
    file that is not a CSV is a ValueError naming it."""
    from cflib.io import read_text

    text = read_text(path, "results CSV")
    try:
        df = pd.read_csv(io.StringIO(text), keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{rel(path)} is not a results CSV ({first})") from None
    return df


def _csv(path, chapter: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise ValueError(f"{str(path)!r} does not exist; name the run's results CSV or the "
                         f"folder holding {chapter}.csv")
    if p.is_dir():
        p = p / f"{chapter}.csv"
    if not p.is_file():
        raise ValueError(f"{str(path)!r} holds no results file {chapter}.csv")
    return p


def _raw_equal(rerun: pd.DataFrame, base: pd.DataFrame) -> tuple[int, int]:
    """(rows of the re-run, of which bit-equal to the baseline's row of the same cell and
    repeat), NaN equal to NaN."""
    keys = [c for c in CELL + ["repeat"] if c in rerun.columns and c in base.columns]
    r = rerun[keys + ["value"]].astype({k: str for k in keys})
    b = base[keys + ["value"]].astype({k: str for k in keys})
    m = r.merge(b, on=keys, how="left", suffixes=("", "_b"))
    x = pd.to_numeric(m["value"], errors="coerce").to_numpy(float)
    y = pd.to_numeric(m["value_b"], errors="coerce").to_numpy(float)
    same = _same_value(x, y) & m["value_b"].notna().to_numpy()   # a missing row differs
    return len(m), int(same.sum())


def _same_value(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Element-wise: the same float, NaN the same as NaN."""
    return (x == y) | (np.isnan(x) & np.isnan(y))


def _status(r) -> str:
    a, b = r.rerun, r.committed
    if np.isnan(a) and np.isnan(b):
        return BIT_EQUAL
    if np.isnan(a):
        return LOST
    if np.isnan(b):
        return ONLY_ONE
    if a == b:
        return BIT_EQUAL
    if r.n_seeds < 2 or np.isnan(r.seed_sd):
        return NO_SPREAD
    return WITHIN if abs(a - b) <= SPREAD_K * r.seed_sd else BEYOND
