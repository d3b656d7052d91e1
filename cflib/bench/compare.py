"""A user's method through the book's tables, beside the book's rows and the papers'.

:func:`compare` runs an explainer of one's own through exactly the protocol of a table
of the book, the same way the table's chapter runs its rows: the table's runner
(:func:`~cflib.bench.tables.c3lt.run_c3lt_table` for the C3LT tables,
:func:`~cflib.bench.tables.bayes.run_bayesian_table` for one Bayesian classifier) builds
the method from the catalog (:func:`cflib.bench.catalog.extended` adds it for the
run), with the table's queries, data seed, trained networks from the weight cache at
the profile, metrics and reference rows (``Original Data`` and ``Query (unchanged)``)::

    from cflib.bench.compare import compare
    from cflib.book.report import bench_page        # the book's page tables and figures

    cmp = compare("mypkg.mymodule:MyExplainer", tables=["c3lt-mnist"], profile="smoke",
                  config={"steps": 50}, pairs=["4->9"], page=bench_page)
    cmp.results          # this run's rows, in the results schema (cflib.bench.results)
    cmp.page             # the HTML comparison page
    cmp.tables["c3lt-mnist"].ranks()

``method`` is an :class:`~cflib.explainers.Explainer` subclass (built as
``Method(classifier, Method.Config(**config))``; one that ``needs_fit`` is fitted first,
per class pair, with ``fit(x_query, x_target)``: the pair's training images as C3LT's are
drawn, ``c3lt_subset`` per class at the profile, and ``pair=(query, target)`` where
``fit`` takes it), an import path ``"package.module:Name"`` of such a class or of a
function, or a plain function ``fn(model, x, target) -> x_cf``
(:func:`cflib.explainers.from_function`).  Its output goes through the base's checks:
a wrong shape or a NaN image is an error naming the method.

Everything is checked before any network is loaded or trained (:func:`prepare`): the
method path (a module or attribute that is missing is named), the config (unknown
arguments, and the class's own checks: it is built once on the table's classifier
architecture, untrained), the tables, the pairs (each a pair of its table), the
profile, seeds, device, data files and the output folder.  A method that crashes on a
batch is re-raised as a :class:`MethodError` naming the method and the table and pair.

What is written, under ``out`` (default ``./cflib-bench/<method>-<profile>/`` of the current folder; never
inside the committed ``results/`` or ``book/``, so a user's method never replaces a
committed file): for each table its results file ``<results_name>_<table>.csv`` in the
results schema, the extra tables and the counterfactuals the page shows (as the
chapters save them: :meth:`C3LTRun.save <cflib.bench.tables.c3lt.C3LTRun.save>`),
``<results_name>.json`` (the method, its config, the run) and, with ``page=``, the
HTML page ``<results_name>.html``.  :meth:`Comparison.load` reads them back.

The book's rows beside yours: the table's committed results file
(``results/mnist_eval.csv``, ``results/fashion_mnist_test.csv``,
``results/mnist_bayesian.csv``; ``book_results=`` another folder) is read only where it
was made with the run's profile and seeds (and the profile's query count and the pairs
asked for), and its reference rows equal this run's on every metric but time (the same
networks and queries: the weight cache keys networks by the CPU thread count, so a run
at another ``CFLIB_THREADS`` trains other networks); else :attr:`TableComparison.note`
says why, and the book's methods run here at the run's profile (``book_methods=True``,
the default: a ``smoke`` page shows C3LT, CEM, ExpGAN and the rest at ``smoke`` sizes,
labelled as this run's rows, never mixed with the committed ones), or only this run's
own reference rows stand beside the method (``book_methods=False``).

How sure each value is: every value of this run's rows carries a 95 % interval
(:mod:`cflib.bench.intervals`: over the queries of each pair for the C3LT tables, over
the repeats for the Bayesian ones), and :meth:`TableComparison.ranks` orders two rows
only where their intervals separate.

The page itself is presentation, which lives in the book's layer (``cflib.book``, above
this one): ``page=`` takes the renderer, :func:`cflib.book.report.bench_page` (the
``cflib bench`` command passes it).
"""
from __future__ import annotations

import importlib
import inspect
import json
import logging
import math
import re
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

import cflib
from cflib.bench import catalog
from cflib.bench.data import DATASET_TITLES, PROJECT_ROOT, check_pair, n_classes, pair_label
from cflib.bench.folders import RESULTS_DIR, check_name, check_output_dir
from cflib.bench.profiles import Profile, get_profile, normalised
from cflib.bench.results import (
    CELL,
    CLASSIFIER,
    read_results,
    tidy,
)
from cflib.bench.seeds import Seeds
from cflib.bench.tables.registry import TableSpec, as_seeds, bench_tables
from cflib.explainers import Explainer, from_function, records
from cflib.io import atomic_write
from cflib.metrics.spec import get_spec
from cflib.names import unknown_name
from cflib.scopes import seeded

log = logging.getLogger("cflib")

#: the committed results and pages of the book: a comparison never writes inside them
#: where a comparison writes by default: ``./cflib-bench/<method>-<profile>/`` of the current
#: folder (where the user is, never inside the library's clone)
BENCH_DIR = Path("cflib-bench")
#: relative difference up to which this run's reference rows count as the book's
REFERENCE_RTOL = 1e-4
#: the version of the ``<results_name>.json`` file :meth:`Comparison.save` writes
SCHEMA = 1
_KIND = "cflib.bench.Comparison"
records.LOADERS[_KIND] = "cflib.bench.compare.Comparison.load(folder, name)"


class MethodError(RuntimeError):
    """A user's method failed while a table ran it (building, fitting or explaining); the
    message names the method, the table and the pair, and the cause is chained."""


#: the tables of :func:`compare`, by key (their specs: :mod:`cflib.bench.tables.registry`,
#: a view per classifier where a table explains several)
TABLES: dict[str, TableSpec] = bench_tables()


# -- the method ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Method:
    """A user's method as :func:`compare` builds it: its name (the results' ``method``),
    its explainer class, its checked config and how it was given."""

    name: str
    cls: type[Explainer]
    config: object
    given: str

    def build(self, classifier) -> Explainer:
        return self.cls(classifier, self.config)


def _import_path(path: str):
    """The object ``"package.module:Name"`` names; a ValueError names what is missing."""
    if path.count(":") != 1 or not all(path.split(":")):
        raise ValueError(f"method {path!r}: an import path is 'package.module:Name' (e.g. "
                         "'mypkg.mymodule:MyExplainer')")
    module, attr = path.split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name and (module == err.name or module.startswith(err.name + ".")):
            raise ValueError(f"method {path!r}: no module named {err.name!r} (is it on "
                             "sys.path? PYTHONPATH, and for cflib bench the current folder, "
                             "are searched)") from None
        raise ValueError(f"method {path!r}: importing module {module!r} failed: {err}") from err
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(mod) if not n.startswith("_")]
            raise ValueError(f"method {path!r}: module {module!r} has no attribute {part!r} "
                             f"(it defines {names[:12]}{'...' if len(names) > 12 else ''})")
        obj = getattr(obj, part)
    return obj


def _name_of(cls: type[Explainer]) -> str:
    """The method's name: ``name`` set on the class (or on a base class of the user's),
    else the class's own name (a name inherited from one of cflib's classes is not
    the user's method's)."""
    for c in cls.__mro__:
        if "name" in c.__dict__:
            if c is cls or not c.__module__.startswith("cflib."):
                return c.__dict__["name"]
            break
    return cls.__name__


def resolve_method(method, config: dict | None = None) -> Method:
    """``method`` (a class, a ``"package.module:Name"`` path or a function) and its
    ``config`` as a :class:`Method`; every error names the method and the fix."""
    given = method
    if isinstance(method, str):
        method = _import_path(method)
    if isinstance(method, Explainer):
        raise TypeError(f"method {given!r} is an explainer already built (with its own "
                        "classifier); pass its class: compare builds it with each table's "
                        "classifier")
    if isinstance(method, type):
        if not issubclass(method, Explainer):
            raise TypeError(f"method {given!r} is the class {method.__qualname__}, not a "
                            "subclass of cflib.explainers.Explainer (or pass a function "
                            "fn(model, x, target) -> x_cf)")
        cls = method
    elif callable(method):
        cls = from_function(method, name=getattr(method, "__name__", None))
    else:
        raise TypeError(f"method must be an Explainer subclass, an import path "
                        f"'package.module:Name' or a function fn(model, x, target) -> x_cf; "
                        f"got {type(method).__name__} {method!r}")
    name = _name_of(cls)
    if name in catalog.CATALOG:
        raise ValueError(f"method {given!r} is called {name!r}, a row of the book's own; set "
                         f"name = '...' on {cls.__qualname__} to name your method otherwise")
    config = {} if config is None else config
    if not isinstance(config, dict) or not all(isinstance(k, str) for k in config):
        raise TypeError(f"config of {name} must be a dict of its config's fields, got "
                        f"{config!r}")
    if not (isinstance(cls.Config, type) and is_dataclass(cls.Config)):
        raise TypeError(f"{name}.Config must be a frozen dataclass of its arguments (a "
                        "subclass of cflib.explainers.ExplainerConfig)")
    known = [f.name for f in fields(cls.Config)]
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise TypeError(f"{name} has no argument(s) {unknown}; its config "
                        f"{cls.Config.__name__} takes {sorted(known)}")
    cfg = cls.Config(**config)        # the class's own checks (ValueError, ...)
    how = (f"import path {given!r}" if isinstance(given, str)
           else f"{'class' if isinstance(given, type) else 'function'} "
                f"{getattr(given, '__module__', '?')}.{getattr(given, '__qualname__', given)}")
    return Method(name, cls, cfg, how)


def _probe(method: Method, table: TableSpec) -> None:
    with seeded(0):            # the stand-in's initialisation: the global RNG restored
        clf = table.stand_in(table.model)
        try:
            ex = method.build(clf)
        except Exception as err:
            err.add_note(f"(raised while building {method.name} as {method.cls.__qualname__}"
                         f"(classifier, config) on the {table.key} table's classifier "
                         "architecture, untrained, before any network is trained)")
            raise
    if not isinstance(ex, Explainer):
        raise TypeError(f"{method.cls.__qualname__}(classifier, config) returned "
                        f"{type(ex).__name__}, not an explainer")


def _untouched(classifier, before: str, name: str, where: str, when: str) -> None:
    """A :class:`MethodError` when the method changed the weights (or buffers) of the
    classifier it explains: every later row and the judges are measured with it."""
    from cflib.cache import fingerprint

    now = fingerprint(classifier)
    if now != before:
        raise MethodError(f"{name} changed the weights of the classifier it explains, in place, "
                          f"{when} on {where} (fingerprint {before} became {now}); the rows "
                          "that follow and the book's reference rows are measured with that "
                          "classifier, so the run stops here.  A method must leave the model "
                          "it explains as it found it: change a copy (copy.deepcopy) instead")


def _guard(ex: Explainer, name: str, where: str, classifier=None,
           before: str | None = None) -> Explainer:
    """``ex`` whose explain re-raises any failure as a :class:`MethodError` naming the
    method and ``where`` (the table and pair), and, given the ``classifier`` and its
    fingerprint ``before``, refuses a method that changed the classifier's weights."""
    explain = ex.explain

    def guarded(*args, **kwargs):
        try:
            out = explain(*args, **kwargs)
        except Exception as err:
            raise MethodError(f"{name} failed on {where}: {type(err).__name__}: {err}") from err
        if classifier is not None:
            _untouched(classifier, before, name, where, "while explaining")
        return out

    ex.explain = guarded
    return ex


def _fit(ex: Explainer, name: str, where: str, x_query, x_target, pair) -> Explainer:
    params = inspect.signature(ex.fit).parameters
    takes_pair = "pair" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
    try:
        out = ex.fit(x_query, x_target, pair=pair) if takes_pair else ex.fit(x_query, x_target)
    except Exception as err:
        raise MethodError(f"{name} failed to fit on {where}: {type(err).__name__}: {err} "
                          "(a method with needs_fit is fitted with fit(x_query, x_target"
                          "[, pair=(query, target)]))") from err
    ex = out if isinstance(out, Explainer) else ex
    if not ex.fitted:
        raise MethodError(f"{name}.fit on {where} left it unfitted: a method with needs_fit "
                          "holds what it learned in its fit_record (a FitRecord) when fit "
                          "returns")
    return ex


def _entry(method: Method, table: TableSpec) -> catalog.Entry:
    """The catalog entry of the user's method for one table's run."""
    def build(r: catalog.Request) -> Explainer:
        if table.per_pair:
            q, t = r.need_pair(method.name)
            where = f"table {table.key}, pair {q}->{t}"
        else:
            where = f"table {table.key}"
        from cflib.cache import fingerprint

        before = fingerprint(r.classifier)
        try:
            ex = method.build(r.classifier)
        except Exception as err:
            raise MethodError(f"{method.name} could not be built on {where}: "
                              f"{type(err).__name__}: {err}") from err
        _untouched(r.classifier, before, method.name, where, "when built")
        if ex.needs_fit:
            n = r.sizes.c3lt_subset
            xq = r.class_images(method.name, q, n, r.seeds("c3lt")).to(r.device)
            xt = r.class_images(method.name, t, n, r.seeds("c3lt_target_draw")).to(r.device)
            ex = _fit(ex, method.name, where, xq, xt, (q, t))
            _untouched(r.classifier, before, method.name, where, "while fitting")
        return _guard(ex, method.name, where, r.classifier, before)

    return catalog.Entry(method.name, method.cls, table.per_pair, build, table.kind,
                         searches=True)


# -- the book's rows beside the method -------------------------------------------------------
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
              networks: list[dict] | None = None, computed=()):
    """The book's committed rows of ``table`` that can stand beside this run's, with a
    sentence saying where they come from or why none do: ``(rows or None, note, gap)``.

    They are read from ``folder/<book_name>.csv`` (default: the committed ``results/``)
    only when made at this run's profile and seeds, with the profile's query count and
    every pair asked for (:func:`committed_rows`), and when their reference rows equal
    this run's (relative difference at most :data:`REFERENCE_RTOL`, every metric but
    time).  ``computed``: the book's methods this run computed itself (where the committed
    rows cannot stand), named in the note."""
    if computed:
        mine = (f"the book's methods ({len(computed)} rows: {', '.join(computed)}) were run "
                f"here at profile {profile.name} beside it, on the same queries and "
                "networks: they are this run's rows, not the book's committed ones")
    else:
        mine = ("only this run's own reference rows (Original Data, Query (unchanged)) "
                "stand beside it")
    df, shown, why = committed_rows(table, profile, seeds, n_images, pairs, folder)
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


# -- what a comparison holds -----------------------------------------------------------------
@dataclass
class TableComparison:
    """One table of a comparison: this run (``run``: a
    :class:`~cflib.bench.tables.c3lt.C3LTRun` or a
    :class:`~cflib.bench.tables.bayes.BayesRun`, the method's rows and the reference
    rows), the book's rows beside it (``book``, or None) and ``note``, the sentence that
    says where the rows beside the method come from."""

    table: TableSpec
    method: str
    run: object
    pairs: list[str]
    book: pd.DataFrame | None
    note: str
    gap: float | None = None
    networks: list = field(default_factory=list)   # cflib.cache.networks_used records
    #: the book's methods this run computed itself, at its profile (where the committed
    #: rows cannot stand beside it)
    computed: list = field(default_factory=list)
    #: each row's value with its interval (cflib.bench.intervals: over the queries of each
    #: pair for this run's rows of a C3LT table, over the repeats for a Bayesian table)
    intervals: pd.DataFrame | None = None

    @property
    def results(self) -> pd.DataFrame:
        """This run's rows (the method's and the reference rows), the results schema."""
        return self.run.results

    @cached_property
    def shown(self) -> pd.DataFrame:
        """The rows the page shows: this run's, and the book's other rows where they stand
        beside it (C3LT tables: the pairs run, their means recomputed over those pairs)."""
        own = self.run.results
        if self.book is None:
            return own
        return self.table.shown(own, self.book[~self.book["method"].isin(set(own["method"]))])

    @property
    def methods(self) -> list[str]:
        """The rows in the page's order: the reference rows, the method, the book's rows."""
        rows = [m for m in dict.fromkeys(self.shown["method"]) if m != CLASSIFIER]
        refs = self.table.references
        book = [m for m in self.table.own_methods() if m in rows]
        extra = [m for m in rows if m not in (*refs, self.method, *book)]
        return [*[m for m in refs if m in rows], self.method, *book, *extra]

    def means(self) -> pd.DataFrame:
        """Each row's value of each metric: the mean over the pairs (C3LT tables) or over
        the repeats (Bayesian tables), the table's rows only (no variant); columns
        ``method, metric, value`` (the spec's ``means``)."""
        return self.table.means(self.shown)

    def wide(self) -> pd.DataFrame:
        """:meth:`means` as rows = methods (page order), columns = metrics."""
        w = self.means().pivot_table(index="method", columns="metric", values="value",
                                     sort=False)
        return w.reindex([m for m in self.methods if m in w.index])

    def ranks(self) -> pd.DataFrame:
        """Each row's best rank on each metric of the table but time, counts and
        set-level statistics, in the metric's own direction: 1 + the rows whose interval
        lies wholly on the better side of its own
        (:func:`cflib.bench.intervals.separated_ranks`).  A metric no row has an interval
        of is not ranked."""
        return self._separated[0]

    def worst_ranks(self) -> pd.DataFrame:
        """Each row's worst rank: the rows ranked, less those whose interval lies wholly on
        the worse side of its own (with :meth:`ranks`, the range of ranks the intervals
        allow; rows whose intervals overlap have overlapping ranges)."""
        return self._separated[1]

    def ties(self) -> pd.DataFrame:
        """Per row and ranked metric, the other rows whose interval overlaps its own."""
        return self._separated[2]

    @cached_property
    def _separated(self):
        """(best ranks, worst ranks, ties), computed once for the three accessors."""
        from cflib.bench.intervals import separated_ranks

        iv = self.intervals if self.intervals is not None else pd.DataFrame(
            columns=["method", "metric", "lo", "hi"])
        return separated_ranks(self.wide(), iv, self.table.ranked)

    @property
    def sample(self) -> tuple[str, int, int] | None:
        """``(basis, n, pairs)`` behind the method's values: ``queries`` (n in all, over
        ``pairs`` pairs) or ``repeats`` (n repeats); None when not recorded."""
        iv = self.intervals if self.intervals is not None else pd.DataFrame()
        r = iv[iv["method"] == self.method] if len(iv) else iv
        if not len(r):
            return None
        return str(r["basis"].iloc[0]), int(r["n"].max()), int(r["pairs"].max())

    def sample_size(self) -> str:
        """The queries behind the method's values, in words (C3LT tables: per pair and in
        all; Bayesian tables: the repeats, each a fresh draw of queries)."""
        if self.sample is None:
            return "the sample size was not recorded"
        basis, n, k = self.sample
        if basis == "queries":
            return (f"{n // max(k, 1)} queries per pair on {k} pair{'s' * (k != 1)} "
                    f"({n} in all)")
        return (f"{n} repeat{'s' * (n != 1)}, each a fresh draw of queries"
                + (" (one repeat has no interval, so no rank is claimed)" if n < 2 else ""))

    def checks(self) -> pd.DataFrame:
        """The checks the table's chapter shows, on the rows shown (the spec's: the C3LT
        tables' on the means over pairs; the Bayesian table's per classifier over repeats,
        its ``best`` among the paper's five methods)."""
        return self.table.checks(self.shown)

    @property
    def counterfactuals(self) -> dict:
        """The saved counterfactuals of this run: C3LT tables ``{(pair, method): cf}``,
        Bayesian tables the classifier's ``{"queries": ..., method: [cf]}``."""
        return self.table.counterfactuals(self.run, self.table.model)


@dataclass
class Comparison:
    """What :func:`compare` returns: ``results`` (this run's rows of every table, the
    results schema), ``page`` (the HTML page, or None without a renderer), ``tables``
    (:class:`TableComparison` by table key), and where it was written."""

    method: str
    given: str
    config: dict
    profile: str
    seeds: Seeds
    device: str
    n_images: int | None
    tables: dict[str, TableComparison]
    folder: Path | None = None
    results_name: str = "comparison"
    page: Path | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def results(self) -> pd.DataFrame:
        return tidy(pd.concat([t.results for t in self.tables.values()], ignore_index=True))

    def csv(self, key: str) -> Path:
        """The results file of table ``key``."""
        return Path(self.folder) / f"{self.results_name}_{key}.csv"

    def save(self, folder, name: str = "comparison") -> list[Path]:
        """Write every table's run (results, extra tables, the page's counterfactuals)
        as ``<name>_<table>...`` and the comparison's record ``<name>.json``; returns the
        paths.  :meth:`load` reads them back."""
        folder, name = Path(folder), check_name(name)
        paths = []
        for t in self.tables.values():
            paths += save_table(t, folder, name)
        return self.save_record(folder, name, paths)

    def save_record(self, folder, name: str, paths=()) -> list[Path]:
        """Write ``<name>.json`` (the method, its config, the run, the tables) beside the
        tables' files ``paths`` already written; returns every path."""
        folder, name, paths = Path(folder), check_name(name), list(paths)
        doc = {"schema": SCHEMA, "kind": _KIND, "method": self.method, "given": self.given,
               "config": self.config, "profile": self.profile,
               "seeds": {"train": self.seeds.train, "data": self.seeds.data},
               "device": self.device, "n_images": self.n_images,
               "cflib_version": cflib.__version__,
               "tables": {k: {"pairs": t.pairs, "computed": t.computed,
                              "networks": [{"kind": n["kind"], "entry": n["entry"],
                                            "origin": n["origin"],
                                            "provenance": n["provenance"]}
                                           for n in t.networks]}
                          for k, t in self.tables.items()}}
        paths.append(atomic_write(folder / f"{name}.json",
                                  json.dumps(doc, indent=1, default=str) + "\n"))
        self.folder, self.results_name, self.files = folder, name, paths
        return paths

    @classmethod
    def load(cls, folder, name: str = "comparison", book_results=None) -> "Comparison":
        """The comparison :meth:`save` wrote to ``folder``, the book's rows beside it read
        again from ``book_results`` (default: the committed ``results/``) under the same
        rule as :func:`compare`'s.  The page, when there is one, is ``<name>.html``."""
        folder = Path(folder)
        path = folder / f"{check_name(name)}.json"
        if not path.exists():
            raise FileNotFoundError(f"no comparison {path}; run cflib.bench.compare first")
        doc = json.loads(path.read_text())
        if doc.get("kind") != _KIND or doc.get("schema") != SCHEMA:
            raise ValueError(f"{path} is not a comparison of schema {SCHEMA} (kind "
                             f"{doc.get('kind')!r}, schema {doc.get('schema')!r})")
        prof, seeds = get_profile(doc["profile"]), Seeds(**doc["seeds"])
        tables = {}
        for key, t in doc["tables"].items():
            spec = TABLES[key]
            run = spec.load(folder, f"{name}_{key}")
            used, computed = t.get("networks", []), t.get("computed", [])
            rows, note, gap = book_rows(spec, run.results, prof, seeds, doc["n_images"],
                                        t["pairs"], book_results, used, computed)
            ivf = folder / f"{name}_{key}_intervals.csv"
            iv = pd.read_csv(ivf) if ivf.exists() else None
            tables[key] = TableComparison(spec, doc["method"], run, t["pairs"], rows, note, gap,
                                          used, computed, iv)
        page = folder / f"{name}.html"
        return cls(doc["method"], doc["given"], doc["config"], doc["profile"], seeds,
                   doc["device"], doc["n_images"], tables, folder, name,
                   page if page.exists() else None)


def save_table(t: TableComparison, folder, name: str) -> list[Path]:
    """One table's run as its chapter saves it (``C3LTRun.save`` / ``BayesRun.save``):
    ``<name>_<table>.csv`` in the results schema, its extra tables and the counterfactuals
    the page shows; and each row's interval, ``<name>_<table>_intervals.csv``."""
    from cflib.bench.results import write_table

    stem = f"{check_name(name)}_{t.table.key}"
    paths = t.run.save(Path(folder), stem)
    if t.intervals is not None:
        paths.append(write_table(t.intervals, Path(folder) / f"{stem}_intervals.csv"))
    return paths


# -- checking everything first ---------------------------------------------------------------


def check_out(out) -> Path:
    """The output folder (:func:`cflib.bench.folders.check_output_dir`: a user's method
    never replaces a committed file)."""
    return check_output_dir(out, "out", f"leave it None: ./{BENCH_DIR}/<method>-<profile>/")


def check_tables(tables) -> list[TableSpec]:
    """Table keys (a list, or one text with commas) as :class:`TableSpec` s."""
    if isinstance(tables, str):
        tables = [t.strip() for t in tables.split(",") if t.strip()]
    keys = list(dict.fromkeys(tables or []))
    if not keys:
        raise ValueError(f"tables must name at least one table of {list(TABLES)}")
    bad = [k for k in keys if k not in TABLES]
    if bad:
        raise unknown_name("table", bad[0], TABLES)
    return [TABLES[k] for k in keys]


def check_pairs(pairs, tables: list[TableSpec]) -> dict[str, list[tuple[int, int]]]:
    """The pairs each C3LT table runs: its own pairs (``pairs=None``), else those of
    ``pairs`` that are pairs of it; a pair of none of the tables, a C3LT table left
    without a pair, or pairs with only Bayesian tables are a ValueError."""
    c3 = [t for t in tables if t.per_pair]
    if pairs is None:
        return {t.key: t.pairs for t in c3}
    if isinstance(pairs, str):
        pairs = [p.strip() for p in pairs.split(",") if p.strip()]
    if not c3:
        raise ValueError("pairs are the C3LT tables' class pairs; the Bayesian tables have "
                         "none (each query gets its own target: Schut et al.'s draw): leave "
                         "pairs out")
    if not pairs:
        raise ValueError("pairs must name at least one pair, e.g. ['4->9'], or be None")
    parsed = []
    for p in pairs:
        q, t = check_pair(p, min(n_classes(t.dataset) for t in c3))
        parsed.append((q, t))
    out = {t.key: [p for p in dict.fromkeys(parsed) if p in t.pairs] for t in c3}
    for p in parsed:
        if not any(p in t.pairs for t in c3):
            of = "; ".join(f"{t.key}: {', '.join(pair_label(x) for x in t.pairs)}" for t in c3)
            raise ValueError(f"pair {pair_label(p)} is not a pair of the table(s) asked for "
                             f"(a table runs its own pairs, as its chapter: {of})")
    for t in c3:
        if not out[t.key]:
            raise ValueError(f"none of the pairs {[pair_label(p) for p in parsed]} is a pair "
                             f"of {t.key} ({DATASET_TITLES[t.dataset]}: "
                             f"{', '.join(pair_label(x) for x in t.pairs)})")
    return out


@dataclass
class Plan:
    """A comparison checked and ready to run (:func:`prepare`); :meth:`run` computes it."""

    method: Method
    tables: list[TableSpec]
    pairs: dict[str, list[tuple[int, int]]]
    profile: Profile
    n_images: int | None
    seeds: Seeds
    device: str
    out: Path
    results_name: str
    book_results: Path | None
    page: Callable | None
    book_methods: bool = True

    def run_table(self, table: TableSpec) -> TableComparison:
        """One table through its runner, the method added to the catalog for the run."""
        from cflib.cache import networks_used

        name = self.method.name
        pairs = [pair_label(p) for p in self.pairs.get(table.key, [])]
        before = len(networks_used())
        committed, _, _ = committed_rows(table, self.profile, self.seeds, self.n_images,
                                         pairs, self.book_results)
        # where the committed rows cannot stand beside the run, the book's methods run
        # here, at the run's profile, on the same queries and networks
        computed = (table.own_methods() if committed is None and self.book_methods
                    else [])
        # the method first (on each pair): a method that fails, fails before the reference
        # rows are scored (each row is seeded alike, in any order)
        with catalog.extended(_entry(self.method, table)):
            args = table.args(self.profile, self.seeds, self.device,
                              [name, *table.references, *computed],
                              self.pairs.get(table.key) or None, n_images=self.n_images)
            run = table.run(args)
            intervals = table.intervals(run, table.model)
        used = networks_used(before)
        rows, note, gap = book_rows(table, run.results, self.profile, self.seeds,
                                    self.n_images, pairs, self.book_results, used, computed)
        return TableComparison(table, name, run, pairs, rows, note, gap, used, computed,
                               intervals)

    def run(self) -> Comparison:
        """Every table, then the files and the page; torch runs at ``CFLIB_THREADS``
        threads (default 1, the chapters': the networks the chapters trained are the ones
        loaded from the cache), restored afterwards."""
        from cflib.env import threads

        before = torch.get_num_threads()
        torch.set_num_threads(threads())
        done, written = {}, []
        try:
            for t in self.tables:        # each table's files written as soon as it is done
                done[t.key] = self.run_table(t)
                written += save_table(done[t.key], self.out, self.results_name)
        finally:
            torch.set_num_threads(before)
        cfg = asdict(self.method.config) if is_dataclass(self.method.config) else {}
        cmp = Comparison(self.method.name, self.method.given, cfg, self.profile.name,
                         self.seeds, str(self.device), self.n_images, done)
        cmp.save_record(self.out, self.results_name, written)
        if self.page is not None:
            html = self.page(cmp)
            cmp.page = atomic_write(self.out / f"{self.results_name}.html", html)
            cmp.files.append(cmp.page)
        return cmp


@normalised
def prepare(method, tables=("c3lt-mnist",), profile="smoke", config: dict | None = None,
            pairs=None, n_images: int | None = None, out=None, seeds: Seeds = Seeds(), *,
            device="cpu", results_name: str = "comparison", book_results=None,
            page: Callable | None = None, book_methods: bool = True) -> Plan:
    """Check every argument of :func:`compare` and return the :class:`Plan` that runs it;
    nothing is loaded, trained or written.  Errors name the argument and the fix."""
    tabs = check_tables(tables)
    prof = profile
    seeds = as_seeds(seeds)
    if n_images is not None and (isinstance(n_images, bool) or not isinstance(n_images, int)
                                 or n_images < 4):
        raise ValueError(f"n_images must be an int of at least 4 (the page shows 4 queries) "
                         f"or None for the profile's size, got {n_images!r}")
    pair_map = check_pairs(pairs, tabs)
    name = check_name(results_name)
    if page is not None and not callable(page):
        raise TypeError(f"page must be a renderer (cflib.book.report.bench_page) or None, got "
                        f"{page!r}")
    m = resolve_method(method, config)
    folder = check_out(out if out is not None else
                       Path.cwd() / BENCH_DIR / f"{_slug(m.name)}-{prof.name}")
    fits = m.cls.needs_fit
    for t in tabs:
        if not t.per_pair and fits:
            raise ValueError(f"{m.name} needs fitting, and compare fits a method per class "
                             f"pair; the table {t.key} has no pairs (a target per query): run "
                             "it on the C3LT tables, or fit nothing (needs_fit = False)")
    for kind in dict.fromkeys((t.kind, t.model) for t in tabs):
        _probe(m, next(t for t in tabs if (t.kind, t.model) == kind))
    for t in tabs:
        t.check_data([t.dataset])
    if not isinstance(book_methods, bool):
        raise TypeError(f"book_methods must be True or False, got {book_methods!r}")
    return Plan(m, tabs, pair_map, prof, n_images, seeds, str(device), folder, name,
                Path(book_results) if book_results is not None else None, page, book_methods)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.") or "method"


def compare(method, tables=("c3lt-mnist",), profile="smoke", config: dict | None = None,
            pairs=None, n_images: int | None = None, out=None, seeds: Seeds = Seeds(), *,
            device="cpu", results_name: str = "comparison", book_results=None,
            page: Callable | None = None, book_methods: bool = True) -> Comparison:
    """Run ``method`` through each of ``tables`` at ``profile`` and write the comparison.

    ``method``: an Explainer subclass, ``"package.module:Name"`` or a function
    ``fn(model, x, target) -> x_cf`` (see the module docstring); ``config``: its config's
    fields; ``tables``: keys of :data:`TABLES` (``c3lt-mnist``, ``c3lt-fmnist``,
    ``bayes-mc_dropout``, ``bayes-bnn``); ``pairs``: the C3LT tables' pairs to run
    (default: all of each table's; each must be a pair of a table asked for);
    ``n_images``: queries per pair / per repeat (default: the profile's); ``seeds``: the
    training and data seeds; ``out``: the folder written (default
    ``./cflib-bench/<method>-<profile>/`` of the current folder), never inside the committed ``results/`` or
    ``book/``; ``results_name``: the stem of its files; ``book_results``: the folder of
    the book's results files (default ``results/``); ``page``: the page renderer
    (:func:`cflib.book.report.bench_page`; None: no page); ``book_methods``: where the
    book's committed rows cannot stand beside the run (another profile, seeds or query
    count), run the book's methods here at the run's profile (default; False: only the
    reference rows beside yours).

    Everything is checked before any network is loaded (:func:`prepare`).  Returns the
    :class:`Comparison`.
    """
    return prepare(method, tables, profile, config, pairs, n_images, out, seeds,
                   device=device, results_name=results_name, book_results=book_results,
                   page=page, book_methods=book_methods).run()


__all__ = ["compare", "prepare", "Comparison", "TableComparison", "TableSpec", "TABLES",
           "MethodError", "Method", "resolve_method", "book_rows", "committed_rows",
           "check_out"]
