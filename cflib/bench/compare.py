"""A user's method through the book's tables, beside the book's rows and the papers'.

:func:`compare` runs an explainer of one's own through exactly the protocol of a table
of the book, the same way the table's chapter runs its rows: the table's runner
(:func:`~cflib.bench.tables.c3lt.run_c3lt_table` for the C3LT tables,
:func:`~cflib.bench.tables.bayes.run_bayesian_table` for one Bayesian classifier) builds
the method from an entry the run is given (never added to the catalog), with the
table's queries, data seed, trained networks from the weight cache at
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

import json
import logging
import re
from dataclasses import asdict, dataclass, field, is_dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

import cflib
from cflib.bench.book_rows import (  # noqa: F401  (compare's names, where they were)
    REFERENCE_RTOL,
    book_intervals,
    book_rows,
    committed_rows,
    measured_with,
    reference_gap,
)
from cflib.bench.data import DATASET_TITLES, check_pair, n_classes, pair_label
from cflib.bench.folders import check_name, check_output_dir
from cflib.bench.methods import Method, MethodError, entry, probe, resolve_method  # noqa: F401
from cflib.bench.profiles import Profile, get_profile, normalised
from cflib.bench.results import (
    CLASSIFIER,
    tidy,
)
from cflib.bench.seeds import Seeds
from cflib.bench.tables.registry import TableSpec, as_seeds, bench_tables
from cflib.explainers import records
from cflib.io import atomic_write
from cflib.names import unknown_name

log = logging.getLogger("cflib")

#: the committed results and pages of the book: a comparison never writes inside them
#: where a comparison writes by default: ``./cflib-bench/<method>-<profile>/`` of the current
#: folder (where the user is, never inside the library's clone)
BENCH_DIR = Path("cflib-bench")
#: the version of the ``<results_name>.json`` file :meth:`Comparison.save` writes
SCHEMA = 1
_KIND = "cflib.bench.Comparison"
records.LOADERS[_KIND] = "cflib.bench.compare.Comparison.load(folder, name)"


#: the tables of :func:`compare`, by key (their specs: :mod:`cflib.bench.tables.registry`,
#: a view per classifier where a table explains several)
TABLES: dict[str, TableSpec] = bench_tables()


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

    def queries_used(self) -> dict[str, int]:
        """The queries the method's counterfactuals were made on, per pair (or repeat)."""
        cfs = self.table.counterfactuals(self.run, self.table.model) or {}
        out = {}
        for key, cf in cfs.items():
            k = key[0] if isinstance(key, tuple) else str(key)
            if isinstance(key, tuple) and key[1] != self.method:
                continue
            if hasattr(cf, "__len__") and not isinstance(cf, list):
                out[k] = len(cf)
            elif isinstance(cf, list) and cf and hasattr(cf[0], "__len__"):
                out[k] = sum(len(c) for c in cf)
        return out

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
                              # the queries used: fewer than asked where a class has fewer
                              "queries_used": t.queries_used(),
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
    from cflib.bench.folders import check_not_in_project_code

    instead = f"leave it None: ./{BENCH_DIR}/<method>-<profile>/"
    return check_not_in_project_code(check_output_dir(out, "out", instead), "out", str(out),
                                     instead)


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
        # the book's rows read once: where they cannot stand beside the run, the book's
        # methods run here, at the run's profile, on the same queries and networks
        found = committed_rows(table, self.profile, self.seeds, self.n_images, pairs,
                               self.book_results)
        computed = (table.own_methods() if found[0] is None and self.book_methods
                    else [])
        # the method first (on each pair): a method that fails, fails before the reference
        # rows are scored (each row is seeded alike, in any order)
        # the method is passed to the run as an entry of its own: the catalog is never changed
        args = table.args(self.profile, self.seeds, self.device,
                          [name, *table.references, *computed],
                          self.pairs.get(table.key) or None, n_images=self.n_images,
                          entries=(entry(self.method, table),))
        run = table.run(args)
        intervals = table.intervals(run, table.model)
        used = networks_used(before)
        rows, note, gap = book_rows(table, run.results, self.profile, self.seeds,
                                    self.n_images, pairs, self.book_results, used, computed,
                                    found)
        if rows is not None:       # the book's rows, with their intervals as this run's
            intervals = pd.concat([intervals, book_intervals(
                table, self.book_results, pairs, set(run.results["method"]))],
                ignore_index=True)
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
        probe(m, next(t for t in tabs if (t.kind, t.model) == kind))
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
