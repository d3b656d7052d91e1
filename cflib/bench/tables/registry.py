"""What a table of the book is, in one record: :class:`TableSpec`, and the registry of the
tables a method can be run through (:data:`BENCH_TABLES`).

A spec holds everything a consumer needs to know about a table without asking its name:
its rows (methods and reference rows), its metrics, whether its rows come per class pair
or per repeat, its runner with one signature (``run(args: RunArgs) -> Run``, the
arguments normalised once, at the edge, by :meth:`RunArgs.make`), how a saved run is read
back, how its rows aggregate, which checks its chapter applies, each value's interval
(:mod:`cflib.bench.intervals`), and the untrained classifier a user's config is first
built on.  :mod:`cflib.bench.compare` and the bench page look a table up here instead of
switching on its name; a new table is a new spec (the tests define a synthetic one).

This module is above the tables' runners (it imports them); the runners never import it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from cflib.bench.data import CF_PAIRS, canonical_dataset, check_data
from cflib.bench.profiles import Profile, get_profile
from cflib.bench.results import CLASSIFIER, table_means, tidy, with_pair_means
from cflib.bench.seeds import Seeds
from cflib.bench.tables import bayes, c3lt
from cflib.tensors import check_device


def as_seeds(seeds) -> Seeds:
    """``seeds`` as a :class:`Seeds` (an int: the training and the data seed alike); a
    TypeError for anything else."""
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        return Seeds(train=seeds, data=seeds)
    if not isinstance(seeds, Seeds):
        raise TypeError(f"seeds must be a Seeds(train=, data=) or an int, got {seeds!r}")
    return seeds


@dataclass(frozen=True)
class RunArgs:
    """The arguments of one run of a table, normalised once (:meth:`make`): the dataset
    (canonical name), the profile (a :class:`~cflib.bench.profiles.Profile`), the seeds,
    the device (checked), the rows to run, the class pairs (tables with pairs), the
    classifiers (tables with several) and the queries per pair or repeat (None: the
    profile's)."""

    dataset: str
    profile: Profile
    seeds: Seeds
    device: str
    methods: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...] = ()
    models: tuple[str, ...] = ()
    n_images: int | None = None

    @classmethod
    def make(cls, dataset: str, profile="standard", seeds: Seeds = Seeds(), device="cpu",
             methods=(), pairs=(), models=(), n_images: int | None = None) -> "RunArgs":
        check_device(device)
        return cls(canonical_dataset(dataset), get_profile(profile), as_seeds(seeds), str(device),
                   tuple(methods), tuple(tuple(p) for p in pairs), tuple(models), n_images)


@dataclass(frozen=True)
class TableSpec:
    """One table of the book (see the module docstring).

    ``per_pair``: rows per class pair, aggregated as the mean over the pairs run (the C3LT
    tables), else per repeat (mean ± sd over repeats); ``validity``: the metric a reading
    quotes as the classifier's validity; ``run(args)``, ``load(folder, name)``: a run and
    a saved one; ``means(rows)``: each row's value per metric (``method, metric, value``);
    ``checks(rows)``: the chapter's expectations on those rows; ``intervals(run, model)``:
    each value's interval; ``counterfactuals(run, model)``: the saved counterfactuals;
    ``stand_in(model)``: the table's classifier architecture, untrained; ``n_images``: the
    profile's queries per pair or repeat."""

    name: str
    methods: tuple[str, ...]
    references: tuple[str, ...]
    metrics: tuple
    per_pair: bool
    validity: str
    run: Callable[[RunArgs], object]
    load: Callable
    means: Callable[[pd.DataFrame], pd.DataFrame]
    checks: Callable[[pd.DataFrame], pd.DataFrame]
    intervals: Callable[[object, str], pd.DataFrame]
    counterfactuals: Callable[[object, str], dict]
    stand_in: Callable[[str], object]
    n_images: Callable[[Profile], int]
    check_by: tuple[str, ...] = ()
    scope: str = "mean over the pairs run"
    #: checks that a table's data files are there (before anything is loaded or trained)
    check_data: Callable[[list[str]], None] = check_data

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


# -- the C3LT table ------------------------------------------------------------------------
def _c3lt_run(a: RunArgs):
    return c3lt.run_c3lt_table(a.dataset, list(a.pairs) or None, list(a.methods) or None,
                               a.profile, a.seeds, a.device, a.n_images)


def _c3lt_means(rows: pd.DataFrame) -> pd.DataFrame:
    return table_means(rows)[["method", "metric", "value"]].reset_index(drop=True)


def _c3lt_checks(rows: pd.DataFrame) -> pd.DataFrame:
    from cflib.bench.runner import shape_checks

    return shape_checks(table_means(rows), "c3lt")


def _c3lt_intervals(run, model: str = "") -> pd.DataFrame:
    from cflib.bench.intervals import bootstrap, per_query

    return bootstrap(per_query(run))


def _c3lt_stand_in(model: str = ""):
    from cflib.models import C3LTClassifier

    return C3LTClassifier().eval()


C3LT = TableSpec(
    "c3lt", tuple(c3lt.C3LT_METHODS), ("Original Data", "Query (unchanged)"),
    tuple(c3lt.C3LT_METRICS), True, "Validity", _c3lt_run, c3lt.C3LTRun.load, _c3lt_means,
    _c3lt_checks, _c3lt_intervals, lambda run, model="": run.counterfactuals,
    _c3lt_stand_in, lambda prof: prof.c3lt.n_images)


# -- the Bayesian table --------------------------------------------------------------------
def _bayes_run(a: RunArgs):
    prof = (get_profile(a.profile, bayes={"n_images": a.n_images}) if a.n_images is not None
            else a.profile)
    methods = list(a.methods) or list(bayes.BAYES_METHODS)
    return bayes.run_bayesian_table(a.dataset, list(a.models) or list(bayes.MODELS), prof,
                                    a.seeds, a.device, methods)


def _bayes_main(rows: pd.DataFrame) -> pd.DataFrame:
    s = bayes.summarise(rows)
    return s[s["variant"] == ""]


def _bayes_means(rows: pd.DataFrame) -> pd.DataFrame:
    return _bayes_main(rows).rename(columns={"mean": "value"})[["method", "metric", "value"]]


def _bayes_intervals(run, model: str = "") -> pd.DataFrame:
    from cflib.bench.intervals import repeat_intervals

    s = _bayes_main(run.results)
    return repeat_intervals(s[s["model"] == model] if model else s)


def _bayes_stand_in(model: str = "mc_dropout"):
    from cflib.models.bayesian import BayesByBackpropCNN, MCDropoutCNN

    if model == "mc_dropout":
        return MCDropoutCNN(p=0.5, n_samples=2, sample_seed=0).eval()
    return BayesByBackpropCNN(prior_sigma=0.1, rho_init=-5.0, n_samples=2,
                              sample_seed=0).eval()


BAYES = TableSpec(
    "bayes", tuple([*bayes.BAYES_REFERENCES, *bayes.BAYES_METHODS]),
    tuple(bayes.BAYES_REFERENCES), tuple(bayes.BAYES_METRICS), False, "Validity_fresh",
    _bayes_run, bayes.BayesRun.load, _bayes_means,
    lambda rows: bayes.shape_checks(bayes.summarise(rows)), _bayes_intervals,
    lambda run, model="mc_dropout": run.counterfactuals[model], _bayes_stand_in,
    lambda prof: prof.bayes.n_images, check_by=("model",),
    scope="mean ± sd over the repeats")


#: the specs of the book's tables, by name
SPECS: dict[str, TableSpec] = {s.name: s for s in (C3LT, BAYES)}


@dataclass(frozen=True)
class BenchTable:
    """A table a method can be compared on: its spec, dataset, classifier (``model``, for
    a table of several; empty otherwise), the book's results file of it (``book_name``.csv,
    its chapter's name) and title."""

    key: str
    spec: TableSpec
    dataset: str
    model: str
    book_name: str
    title: str

    @property
    def kind(self) -> str:
        return self.spec.name

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """The table's class pairs (none for a table without pairs: a target per query)."""
        return list(CF_PAIRS[self.dataset]) if self.spec.per_pair else []

    @property
    def metrics(self):
        return self.spec.metrics

    @property
    def ranked(self) -> list[str]:
        return self.spec.ranked

    def args(self, profile, seeds, device, methods, pairs=(), n_images=None) -> RunArgs:
        """This table's run of ``methods`` (its classifier among the spec's); the dataset
        is the table's own, named as its spec knows it."""
        check_device(device)
        return RunArgs(self.dataset, get_profile(profile), seeds, str(device), tuple(methods),
                       tuple(tuple(p) for p in pairs), (self.model,) if self.model else (),
                       n_images)


@dataclass(frozen=True)
class ChapterTable:
    """A chapter of the book that runs a table of a paper: its name (its results file's,
    ``results/<chapter>.csv``), the table of the papers' numbers it reproduces
    (:mod:`cflib.bench.reference`: ``c3lt``, ``bayes``, ``quant``), its dataset, its title
    on the README and the results page, and its discussion template
    (``book/discussion/<template>.md``)."""

    chapter: str
    table: str
    dataset: str
    title: str
    template: str


#: the chapters that run a paper's table, by chapter name: the one place that names them
CHAPTER_TABLES: dict[str, ChapterTable] = {c.chapter: c for c in (
    ChapterTable("mnist_eval", "c3lt", "mnist", "C3LT table, MNIST", "c3lt_table"),
    ChapterTable("fashion_mnist_test", "c3lt", "fmnist", "C3LT table, Fashion-MNIST",
                 "c3lt_table"),
    ChapterTable("mnist_bayesian", "bayes", "mnist", "Bayesian classifiers, MNIST",
                 "mnist_bayesian"),
    ChapterTable("fashion_mnist_quant", "quant", "fmnist",
                 "Recourse under quantization, Fashion-MNIST", "fashion_mnist_quant"),
)}


def chapters_of(table: str) -> list[ChapterTable]:
    """The chapters that run the papers' table ``table`` (``c3lt``: one per dataset)."""
    return [c for c in CHAPTER_TABLES.values() if c.table == table]


#: the tables of :func:`cflib.bench.compare.compare`, by key
BENCH_TABLES: dict[str, BenchTable] = {t.key: t for t in (
    BenchTable("c3lt-mnist", C3LT, "mnist", "", "mnist_eval", "The C3LT table, MNIST"),
    BenchTable("c3lt-fmnist", C3LT, "fmnist", "", "fashion_mnist_test",
               "The C3LT table, Fashion-MNIST"),
    BenchTable("bayes-mc_dropout", BAYES, "mnist", "mc_dropout", "mnist_bayesian",
               "Bayesian classifiers, MNIST: MC dropout"),
    BenchTable("bayes-bnn", BAYES, "mnist", "bnn", "mnist_bayesian",
               "Bayesian classifiers, MNIST: BNN"),
)}

__all__ = ["RunArgs", "TableSpec", "BenchTable", "SPECS", "BENCH_TABLES", "C3LT", "BAYES",
           "ChapterTable", "CHAPTER_TABLES", "chapters_of"]
