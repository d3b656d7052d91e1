"""The book's committed rows beside a user's run: read where they stand (the same
profile, seeds and queries, and this run's reference rows equal to the book's), else
the reason they cannot, and which measuring networks measured the run."""
from __future__ import annotations

import logging
import math
from pathlib import Path

import pandas as pd

from cflib.bench.data import PROJECT_ROOT
from cflib.bench.folders import RESULTS_DIR
from cflib.bench.profiles import Profile
from cflib.bench.results import CELL, CLASSIFIER, read_results
from cflib.bench.seeds import Seeds
from cflib.bench.tables.registry import TableSpec
from cflib.metrics.spec import get_spec

log = logging.getLogger("cflib")
#: relative difference up to which this run's reference rows count as the book's
REFERENCE_RTOL = 1e-4

__all__ = ["reference_gap", "measured_with", "committed_rows", "book_rows", "book_intervals",
           "REFERENCE_RTOL"]


def _rel(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT.resolve()))
    except ValueError:
        return str(path)


def reference_gap(own: pd.DataFrame, book: pd.DataFrame,
                  references=("Original Data", "Query (unchanged)")) -> tuple[float, str]:
    """The largest relative difference between this run's reference rows and the book's
    on the same cells (every metric but time), and where it is (NaN: no common cell)."""
    keys = [c for c in CELL if c != "dataset"] + (["repeat"] if "repeat" in own.columns
                                                  and "repeat" in book.columns else [])
    pick = lambda d: d[d["method"].isin(references) & (d["aggregate"] == "")]  # noqa: E731
    a = pick(own).groupby(keys, dropna=False)["value"].mean()
    b = pick(book).groupby(keys, dropna=False)["value"].mean()
    common = [k for k in a.index.intersection(b.index)
              if not _timing(k[keys.index("metric")])]
    if not common:
        return math.nan, "no common cell"
    worst, where = 0.0, ""
    for k in common:
        x, y = float(a[k]), float(b[k])
        if math.isnan(x) and math.isnan(y):
            continue
        gap = abs(x - y) / max(abs(x), abs(y), 1e-6) if not (math.isnan(x) or math.isnan(y)) \
            else math.inf
        if gap > worst:
            cell = dict(zip(keys, k))
            worst, where = gap, " ".join(str(cell[c]) for c in ("method", "pair", "metric")
                                         if cell.get(c))
    return worst, where


def _timing(metric: str) -> bool:
    try:
        return get_spec(metric).timing
    except ValueError:
        return False


def measured_with(networks: list[dict]) -> str:
    """One sentence: which measuring networks (:data:`cflib.bench.networks.MEASURING_KINDS`)
    a run used, shipped with the book or trained here (``networks``: the records of
    :func:`cflib.cache.networks_used`; empty: not recorded)."""
    from cflib.bench.networks import MEASURING_KINDS

    mine = [n for n in networks if n["kind"] in MEASURING_KINDS]
    if not mine:
        return ""
    shipped = [n for n in mine if n["origin"] == "shipped"]
    other = [n for n in mine if n["origin"] != "shipped"]
    if not other:
        return (f"Measured with the book's shipped networks ({len(shipped)}: the classifier, "
                "the IM autoencoders, the feature network and the judges of networks/).")
    kinds = ", ".join(sorted({n["kind"] for n in other}))
    return (f"Measured with {len(other)} of {len(mine)} networks not shipped with the book "
            f"but trained on this machine or loaded from its cache ({kinds})"
            + (f", and {len(shipped)} shipped ones." if shipped else "."))


def committed_rows(table: TableSpec, profile: Profile, seeds: Seeds,
                   n_images: int | None, pairs: list[str], folder=None):
    """The book's committed rows of ``table`` that may stand beside a run at ``profile``,
    ``seeds`` and ``n_images`` on ``pairs``, before the run (everything but the equality of
    the reference rows): ``(rows or None, where they come from, why not)``."""
    folder = Path(folder) if folder is not None else RESULTS_DIR
    path = folder / f"{table.chapter}.csv"
    # the file as a reader knows it: the committed one by its path, another by its name
    # (a chapter's run reads a copy in a scratch folder)
    shown = (_rel(path) if folder.resolve() == RESULTS_DIR.resolve()
             else f"{path.name} (the {table.chapter} chapter's results)")
    if not path.exists():
        return None, shown, (f"The book's rows of this table are not shown: no {shown} was "
                             f"found, which cflib chapter {table.chapter} --profile "
                             f"{profile.name} writes")
    df = read_results(path)
    df = df[(df["dataset"] == table.dataset) & (df["model"] == table.model)]
    df = df[df["method"] != CLASSIFIER]
    if df.empty:
        return None, shown, f"The book's rows are not shown: {shown} has no row of this table"
    profiles = sorted(set(df["profile"]))
    if profiles != [profile.name]:
        return None, shown, (f"The book's rows ({shown}) are at profile "
                             f"{', '.join(profiles)}; this run is at {profile.name}, whose "
                             "networks and sizes differ")
    theirs = sorted({(int(a), int(b)) for a, b in zip(df["train_seed"], df["data_seed"])})
    if theirs != [(seeds.train, seeds.data)]:
        return None, shown, (f"The book's rows ({shown}) are of training / data seeds "
                             f"{theirs}; this run's are ({seeds.train}, {seeds.data})")
    default = table.n_images(profile)
    if n_images is not None and n_images != default:
        return None, shown, (f"The book's rows ({shown}) use the profile's {default} queries; "
                             f"this run uses {n_images}")
    missing = [p for p in pairs if p not in set(df["pair"])]
    if missing:
        return None, shown, f"The book's rows ({shown}) have no pair {', '.join(missing)}"
    if pairs:
        df = df[df["pair"].isin(pairs) & (df["aggregate"] == "")]
    return df, shown, ""


def book_rows(table: TableSpec, own: pd.DataFrame, profile: Profile, seeds: Seeds,
              n_images: int | None, pairs: list[str], folder=None,
              networks: list[dict] | None = None, computed=(), found=None):
    """The book's committed rows of ``table`` that can stand beside this run's, with a
    sentence saying where they come from or why none do: ``(rows or None, note, gap)``.

    They are read from ``folder/<book_name>.csv`` (default: the committed ``results/``)
    only when made at this run's profile and seeds, with the profile's query count and
    every pair asked for (:func:`committed_rows`), and when their reference rows equal
    this run's (relative difference at most :data:`REFERENCE_RTOL`, every metric but
    time).  ``computed``: the book's methods this run computed itself (where the committed
    rows cannot stand), named in the note; ``found``: what :func:`committed_rows` gave
    before the run (the file is then not read again)."""
    if computed:
        mine = (f"the book's methods ({len(computed)} rows: {', '.join(computed)}) were run "
                f"here at profile {profile.name} beside it, on the same queries and "
                "networks: they are this run's rows, not the book's committed ones")
    else:
        mine = ("only this run's own reference rows (Original Data, Query (unchanged)) "
                "stand beside it")
    df, shown, why = (found if found is not None else
                      committed_rows(table, profile, seeds, n_images, pairs, folder))
    if df is None:
        return None, f"{why}, so {mine}.", None
    gap, where = reference_gap(own, df, table.references)
    if not gap <= REFERENCE_RTOL:
        why = ("they share no cell with this run's" if math.isnan(gap) else
               f"the largest relative difference is {gap:.2g}, on {where}")
        return None, (f"The book's rows ({shown}) are not shown: their reference rows "
                      f"differ from this run's ({why}): {_cause(networks)}; {mine}."), gap
    return df, (f"The book's rows come from {shown} (profile {profile.name}, training "
                f"seed {seeds.train}, data seed {seeds.data}); this run's reference rows "
                f"equal them (largest relative difference {gap:.1g}, every metric but time), "
                "so the method ran on the book's networks and queries."), gap


def book_intervals(table: TableSpec, folder, pairs: list[str], own: set) -> pd.DataFrame:
    """The intervals of the book's committed rows beside a run (all but ``own``, the
    run's own rows), as the run's are made: over each pair's queries from the per-query
    values the chapter kept (the pairs run only), or over the repeats.  Empty where the
    chapter kept none."""
    import inspect

    folder = Path(folder) if folder is not None else RESULTS_DIR
    try:
        run = table.load(folder, table.chapter)
    except (OSError, ValueError, KeyError) as err:
        log.info("the book's rows of %s carry no interval (%s)", table.key, err)
        return pd.DataFrame()
    kw = ({"pairs": pairs} if "pairs" in inspect.signature(table.intervals).parameters
          and pairs else {})
    iv = table.intervals(run, table.model, **kw)
    if iv is None or not len(iv):
        return pd.DataFrame()
    return iv[~iv["method"].isin(own)].reset_index(drop=True)


def _cause(networks: list[dict] | None) -> str:
    """Why this run's reference rows differ from the book's, as far as the run knows."""
    from cflib.bench.networks import MEASURING_KINDS

    mine = [n for n in (networks or []) if n["kind"] in MEASURING_KINDS]
    other = sorted({n["kind"] for n in mine if n["origin"] != "shipped"})
    if other:
        return ("this run measured with networks that are not the book's shipped ones ("
                + ", ".join(other) + ": trained on this machine or loaded from its cache, "
                "e.g. with CFLIB_SHIPPED=off or for a pair the book does not run), and a "
                "network trained on another machine or thread count differs in its last "
                "bits")
    if mine:
        return ("this run measured with the book's shipped networks, so the difference "
                "comes from the computation itself (another CPU kind, another thread count "
                "than the book's one, another device) or from code changed since the "
                "book's run")
    return ("this run's networks or queries are not the book's, or the file was written "
            "by other code")
