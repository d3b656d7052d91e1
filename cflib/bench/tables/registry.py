"""What a table of the book is, in one record: :class:`TableSpec`, and the one registry
of them (:data:`SPECS`).

A spec holds everything a consumer needs to know about a table without asking its name:
its chapter (name, notebook, title, the results it reads besides its own), its dataset,
the paper's table it reproduces (``kind``: ``c3lt``, ``bayes``, ``quant``), its rows
(methods and reference rows), its metrics, whether its rows come per class pair or per
repeat, its runner with one signature (``run(args: RunArgs) -> Run``; :meth:`args` checks
every argument once, at the edge, and the runner trusts what it is given), how a saved
run is read back, how its rows aggregate, which checks its chapter applies, each value's
interval (:mod:`cflib.bench.intervals`), the untrained classifier a user's config is first
built on, and whether a user's method can be run through it (``bench``; one view per
classifier where a table explains several: :meth:`views`).

A table module (``cflib/bench/tables/<table>.py``) defines its runner and its spec and
calls :func:`register_table`; importing :mod:`cflib.bench.tables` imports every module of the
package, so a new table is one new module.  The book (chapters, README blocks,
discussions, pages), :mod:`cflib.bench.compare` and the bench page look a table up here
and never switch on its name.  This module is below the tables' modules: they import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Callable

import pandas as pd

from cflib.bench.data import CF_PAIRS, check_data, check_pair, n_classes
from cflib.bench.profiles import Profile
from cflib.bench.results import CLASSIFIER, tidy, with_pair_means
from cflib.bench.runner import RunArgs, as_seeds
from cflib.names import unknown_name

__all__ = ["RunArgs", "TableSpec", "SPECS", "get_spec", "spec_of_chapter", "spec_of_notebook",
           "specs_of", "bench_tables", "as_seeds", "register_table"]


def _no_check(args: RunArgs) -> RunArgs:
    return args


@dataclass(frozen=True)
class TableSpec:
    """One table of the book (see the module docstring).

    ``per_pair``: rows per class pair, aggregated as the mean over the pairs run (the C3LT
    tables), else per repeat or training seed; ``validity``: the metric a reading quotes
    as the classifier's validity; ``run(args)``, ``load(folder, name)``: a run and a saved
    one; ``means(rows)``: each row's value per metric (``method, metric, value``);
    ``checks(rows)``: the chapter's expectations on those rows; ``intervals(run, model)``:
    each value's interval; ``counterfactuals(run, model)``: the saved counterfactuals;
    ``stand_in(model)``: the table's classifier architecture, untrained; ``n_images``: the
    profile's queries per pair or repeat; ``check_methods``: the names its rows may take
    (the catalog's explainers, or the quantization recipes); ``check_args``: what the
    table checks beyond the common arguments (a target, training seeds, the profile's
    sizes); ``models``: the classifiers it explains when several (one bench view each)."""

    key: str
    kind: str
    chapter: str
    source: str
    dataset: str
    title: str
    label: str
    template: str
    methods: tuple[str, ...]
    references: tuple[str, ...]
    metrics: tuple
    per_pair: bool
    validity: str
    run: Callable[[RunArgs], object]
    load: Callable
    means: Callable[[pd.DataFrame], pd.DataFrame]
    checks: Callable
    intervals: Callable[[object, str], pd.DataFrame]
    counterfactuals: Callable[[object, str], dict]
    stand_in: Callable[[str], object]
    n_images: Callable[[Profile], int]
    check_methods: Callable
    check_args: Callable[[RunArgs], RunArgs] = _no_check
    #: the rows a run computes by default, where not the table's rows (the quantization
    #: table: its recipes; FP32 is always computed)
    run_methods: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    model: str = ""
    model_titles: dict = field(default_factory=dict)
    bench: bool = True
    #: does its chapter show the table over several training seeds (a sweep)
    sweeps: bool = False
    #: the metrics of the chapter's full table (default: :attr:`metrics`)
    page_metrics: tuple[str, ...] = ()
    #: a row moving the query at least this share of what a real image of the target
    #: moves it redraws rather than edits (tables with such a reference row; else None)
    redraw_ratio: float | None = None
    check_by: tuple[str, ...] = ()
    scope: str = "mean over the pairs run"
    #: checks that a table's data files are there (before anything is loaded or trained)
    check_data: Callable[[list[str]], None] = check_data

    # -- a run: every argument checked once, here -----------------------------------------
    def args(self, profile="standard", seeds=0, device="cpu", methods=None, pairs=None,
             models=None, n_images: int | None = None, **extra) -> RunArgs:
        """This table's run, every argument checked before anything is loaded: the
        dataset is the table's own; ``methods`` (default: every row), ``pairs`` (default:
        the paper's, tables with pairs), ``models`` (default: every classifier, or this
        view's), ``n_images`` (None: the profile's; at least 1), and what the table adds
        (:attr:`check_args`)."""
        a = RunArgs.make(self.dataset, profile, seeds, device, (), (), (), n_images, **extra)
        if methods is None:
            methods = self.run_methods or self.methods
        methods = tuple(self.check_methods(methods, a.entries))
        if self.per_pair:
            k = n_classes(self.dataset)
            given = CF_PAIRS[self.dataset] if pairs is None else pairs
            if isinstance(given, str):
                given = [p.strip() for p in given.split(",") if p.strip()]
            if not given:
                raise ValueError("pairs must name at least one pair, e.g. ['4->9'], or be None")
            pairs = tuple(dict.fromkeys(check_pair(p, k) for p in given))
        elif pairs:
            raise ValueError(f"the {self.label} table has no class pairs (a target per "
                             "query): leave pairs out")
        else:
            pairs = ()
        if models is None:
            models = (self.model,) if self.model else self.models
        models = tuple(models)
        if self.models:
            if not models:
                raise ValueError(f"models must name at least one of {list(self.models)}")
            for m in models:
                if m not in self.models:
                    raise unknown_name("model", m, self.models)
        if n_images is not None and (isinstance(n_images, bool) or not isinstance(n_images, int)
                                     or n_images < 1):
            raise ValueError(f"n_images must be a positive int or None, got {n_images!r}")
        self.check_data([self.dataset])
        return self.check_args(replace(a, methods=methods, pairs=pairs, models=models))

    # -- what every page quotes -----------------------------------------------------------
    def headline(self, results: pd.DataFrame) -> pd.DataFrame:
        """The table's values as every page quotes them: each row's value per metric over
        the training seeds the results hold (columns ``method, metric, value, sd, n,
        label``: the seed mean, its sd and number of seeds where there are several, the
        single run labelled as such)."""
        frames = [self.means(g).assign(train_seed=s)
                  for s, g in results.groupby("train_seed", sort=True)]
        d = pd.concat(frames, ignore_index=True)
        out = d.groupby(["method", "metric"], sort=False)["value"].agg(
            value="mean", sd="std", n="count").reset_index()
        out["label"] = [f"mean of {n} training seeds" if n > 1 else "one training seed"
                        for n in out["n"]]
        return out

    @property
    def ranked(self) -> list[str]:
        """The metrics a rank is given on: the table's, less wall time and counts."""
        return [s.name for s in self.metrics if not s.timing and s.name != "N_already_target"]

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """The table's class pairs (none for a table without pairs: a target per query)."""
        return list(CF_PAIRS[self.dataset]) if self.per_pair else []

    @property
    def results_name(self) -> str:
        """The chapter's results file (``results/<chapter>.csv``)."""
        return self.chapter

    def own_methods(self) -> list[str]:
        """The chapter's rows but the reference rows."""
        return [m for m in self.methods if m not in self.references]

    def shown(self, own: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
        """A run's rows with another run's rows of other methods beside them (the book's
        committed rows beside a user's run): per pair tables recompute their means over
        the pairs run."""
        if not self.per_pair:
            return tidy(pd.concat([own, other], ignore_index=True))
        acc = own[own["method"] == CLASSIFIER]
        per_pair = pd.concat([own[(own["aggregate"] == "") & (own["method"] != CLASSIFIER)],
                              other[other["aggregate"] == ""]], ignore_index=True)
        return tidy(pd.concat([acc, with_pair_means(per_pair)], ignore_index=True))

    def views(self) -> list["TableSpec"]:
        """What a user's method is compared on: the table, or one view per classifier
        where it explains several (key ``<kind>-<model>``)."""
        if not self.models:
            return [self]
        return [replace(self, key=f"{self.kind}-{m}", model=m,
                        label=f"{self.label}: {self.model_titles.get(m, m)}")
                for m in self.models]


@lru_cache(maxsize=1)
def _toc() -> str:
    from cflib.bench.data import PROJECT_ROOT

    toc = PROJECT_ROOT / "_toc.yml"
    return toc.read_text() if toc.exists() else ""


def _book_position(spec: TableSpec) -> int:
    """Where the table's chapter stands in the book's table of contents (``_toc.yml``;
    the order of the README blocks, the chapters and the bench's listings)."""
    text = _toc()
    at = text.find(f"book/chapters/{spec.chapter}\n")
    return at if at >= 0 else len(text) + 1


#: every table of the book, by key, in the book's order (each module registers its own)
SPECS: dict[str, TableSpec] = {}


def register_table(*specs: TableSpec) -> tuple[TableSpec, ...]:
    """Add table specs to :data:`SPECS` (a key or a chapter given twice is an error)."""
    for s in specs:
        if s.key in SPECS and SPECS[s.key] is not s:
            raise ValueError(f"table {s.key!r} is registered twice")
        clash = [o.key for o in SPECS.values() if o.chapter == s.chapter and o.key != s.key]
        if clash:
            raise ValueError(f"chapter {s.chapter!r} already runs the table {clash[0]!r}")
        SPECS[s.key] = s
    ordered = sorted(SPECS.values(), key=_book_position)      # the book's order, always
    SPECS.clear()
    SPECS.update({s.key: s for s in ordered})
    return specs


def _all() -> dict[str, TableSpec]:
    import cflib.bench.tables  # noqa: F401  (every table module registers its spec)

    return SPECS


def get_spec(key: str) -> TableSpec:
    """A table by its key; an unknown key names the nearest and lists them all."""
    specs = _all()
    if key not in specs:
        raise unknown_name("table", key, specs)
    return specs[key]


def spec_of_chapter(chapter: str) -> TableSpec | None:
    """The table a chapter runs (None: a chapter that runs no paper's table)."""
    return next((s for s in _all().values() if s.chapter == chapter), None)


def spec_of_notebook(source: str, dataset: str | None = None) -> TableSpec:
    """The table a chapter's notebook runs (a notebook several tables share: the one of
    ``dataset``)."""
    from cflib.bench.data import canonical_dataset

    found = [s for s in _all().values() if s.source == source
             and (dataset is None or s.dataset == canonical_dataset(dataset))]
    if len(found) != 1:
        raise ValueError(f"no single table runs notebooks/{source}"
                         + (f" on {dataset}" if dataset else "") + f" ({len(found)} do)")
    return found[0]


def specs_of(kind: str) -> list[TableSpec]:
    """The tables of one paper's table (``c3lt``: one per dataset)."""
    return [s for s in _all().values() if s.kind == kind]


def bench_tables() -> dict[str, TableSpec]:
    """The tables a user's method can be run through, by key (a view per classifier)."""
    return {v.key: v for s in _all().values() if s.bench for v in s.views()}
