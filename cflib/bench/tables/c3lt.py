"""The C3LT table (Khorram & Fuxin 2022): methods x metrics over class pairs.

:func:`run_c3lt_table` builds every method of the table from the catalog
(:mod:`cflib.bench.catalog`) for each class pair, explains the same query images
with each, and scores every counterfactual with the table's metric specs
(:data:`SCORED`).  The result is the tidy table of :mod:`cflib.bench.results`,
with the mean over pairs as ``aggregate = "mean over pairs"``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from functools import cached_property

import pandas as pd
import torch
from torch import nn

from cflib.bench import catalog, zoo
from cflib.bench.data import DATASET_TITLES, class_subset, load_split, pair_label
from cflib.bench.profiles import normalised
from cflib.bench.results import CLASSIFIER, Run, table_means, tidy, with_pair_means
from cflib.bench.runner import Explained, RunArgs, evaluate, explained, shape_checks, tensor_digest
from cflib.bench.seeds import Seeds
from cflib.bench.tables.registry import TableSpec, register_table
from cflib.cache import fingerprint, networks_table, networks_used
from cflib.explainers import Counterfactuals
from cflib.metrics import (
    ACCURACY,
    AUPC_QUERY,
    AUPC_TARGET,
    COUT,
    DIVERSITY,
    EDITS,
    FEATURE_VALIDITY,
    FID,
    IM1,
    IM2,
    KID,
    N_ALREADY_TARGET,
    PROXIMITY,
    PROXIMITY_TO_RECONSTRUCTION,
    QUERY_DEPENDENCE,
    SECONDS_PER_CF,
    VALIDITY,
    VALIDITY_ALL_JUDGES,
    VALIDITY_JUDGES,
    FrozenFeatures,
    ImageFeatures,
    aupc,
    fid_kid,
)
from cflib.metrics.aupc import AUPCResult
from cflib.metrics.dependence import real_spread
from cflib.metrics.spec import MetricSpec, register

log = logging.getLogger("cflib")

#: the rows of the C3LT table (the paper's rows, each of our reference rows and
#: variants beside the row it explains)
C3LT_METHODS = ["Original Data", "Query (unchanged)", "Adv. Attack", "CEM", "CEM (targeted)",
                "CEM (paper budget)", "CVE", "CVE (receptive field)", "ExpGAN", "C3LT",
                "C3LT (reconstruction)", "C3LT (inverted)", "Latent search"]
#: rows run on fewer queries than the others (their budget): name -> queries per pair
QUERY_LIMITS = {"CEM (paper budget)": lambda prof: prof.c3lt.cem_paper_queries}
#: rows run once on every pair's queries together, not pair by pair: a search that treats
#: each query alone, draws nothing at random and uses no network of the pair gives each
#: query the same counterfactual either way (on the CPU the same bits from about 5 queries
#: a pair, the chapters' 20 included: tests/test_cem.py; below, oneDNN's small-batch
#: kernels can round otherwise, ~1e-7), and CEM (paper budget)'s 20 queries a pair fill
#: its step poorly (one thread, MNIST: 0.85 ms per query and step at 20 queries, 0.70 at 60)
ACROSS_PAIRS = frozenset({"CEM (paper budget)"})
#: sensitivity checks computed beside a row (the ``variant`` column): (method, variant)
#: -> the config fields it changes
VARIANTS = {("CEM", "kappa=0"): {"kappa": 0.0}}
#: a method moving at least this share of Original Data's proximity on a pair edits the
#: query about as much as a different real image of the target would: a realism lead is
#: then confounded with redrawing the image (flagged in the tables)
CONFOUNDED_RATIO = 0.8
#: counterfactuals per pair and method that a run saves for its figures
FIGURE_QUERIES = 4
#: counterfactuals saved for the first pair: the query-dependence figure's rows
QUERY_FIGURE_QUERIES = 10


@dataclass
class EvalModels:
    """The networks every metric of one dataset needs."""

    dataset: str
    classifier: nn.Module
    classifier_info: dict
    autoencoders: dict            # class index -> AE, and None -> the all-class AE
    feature: FrozenFeatures
    feature_info: dict
    judges: dict = field(default_factory=dict)       # name -> judge (zoo.JUDGES)
    judges_info: dict = field(default_factory=dict)  # name -> its info (test accuracy)


@dataclass
class PairContext:
    """One batch of counterfactuals of one pair, and what its metrics need.

    The insertion curves and the FID/KID pair are computed once, on first use, and
    shared by the metrics that read them.  ``reference``: the real target-class images
    FID and KID compare with, and their features (computed once per pair);
    ``reference_spread``: their mean pairwise L1, the diversity's denominator (computed
    once per pair; None: by the metric).
    """

    cf: Counterfactuals
    query_class: int
    target_class: int
    models: EvalModels
    reference: ImageFeatures
    aupc_steps: int = 50
    kid_seed: int = 0
    reference_spread: float | None = None

    @cached_property
    def curves(self) -> AUPCResult:
        n = len(self.cf)
        q = torch.full((n,), self.query_class, dtype=torch.long)
        t = torch.full((n,), self.target_class, dtype=torch.long)
        return aupc(self.models.classifier, self.cf.x, self.cf.x_cf, q, t, steps=self.aupc_steps)

    @cached_property
    def fid_kid(self) -> tuple[float, float]:
        return fid_kid(self.cf.x_cf, self.reference, self.models.feature, seed=self.kid_seed)

    @property
    def autoencoders(self) -> dict:
        return self.models.autoencoders

    @property
    def judges(self) -> dict:
        return self.models.judges

    @property
    def real_by_class(self) -> dict:
        """Real test images of the target class (the FID/KID reference half): the
        denominator of the diversity."""
        return {self.target_class: self.reference.images}

    @property
    def real_spread(self) -> dict:
        """The diversity's denominator (:func:`~cflib.metrics.dependence.real_spread` of
        the reference images), from ``reference_spread`` where the pair's run computed it
        once for every method."""
        if self.reference_spread is None:
            return {}
        return {self.target_class: self.reference_spread}

    @property
    def query_labels(self) -> torch.Tensor:
        return torch.full((len(self.cf),), self.query_class, dtype=torch.long)


#: the metrics of the C3LT table (IM2 and KID are stored unscaled; their specs'
#: ``display_scale`` is the paper's x10 and x1e3)
C3LT_METRICS = (IM1, IM2, FID, KID, AUPC_TARGET, AUPC_QUERY, COUT, PROXIMITY, VALIDITY,
                *VALIDITY_JUDGES, VALIDITY_ALL_JUDGES, DIVERSITY, QUERY_DEPENDENCE,
                SECONDS_PER_CF)
#: the metrics of transfer and query dependence (their own table in the chapters)
TRANSFER_METRICS = [*[s.name for s in VALIDITY_JUDGES], VALIDITY_ALL_JUDGES.name,
                    DIVERSITY.name, QUERY_DEPENDENCE.name]
#: the chapters' full table: the paper's metrics and the strict reading of transfer
FULL_TABLE_METRICS = [s.name for s in C3LT_METRICS
                      if s.name not in TRANSFER_METRICS or s.name == VALIDITY_ALL_JUDGES.name]
#: what CVE reports besides the table's metrics (computed only where the method has them)
CVE_METRICS = (EDITS, FEATURE_VALIDITY)
PROXIMITY_VS_REAL = register(MetricSpec(
    "Proximity_vs_real", None, False,
    "proximity over Original Data's on the same pair: at 0.8 or more the method moves the "
    "query about as far as a different real image of the target class would"))[0]
BUDGET_FRACTION = register(MetricSpec(
    "Budget_fraction", None, True,
    "the share of the published optimisation the row received: C3LT's sum of learning "
    "rate x updates over the public code's (201 epochs at batch 128), CEM's iterations x "
    "rounds of c over the paper's 1000 x 10"))[0]
#: every metric a run of the table scores (the table's, CVE's own and the reconstruction's)
SCORED = C3LT_METRICS + CVE_METRICS + (PROXIMITY_TO_RECONSTRUCTION, N_ALREADY_TARGET)
#: the paper's CEM budget (Dhurandhar et al. 2018's reference code): iterations x c-steps
CEM_PAPER_BUDGET = 1000 * 10


def budget_fraction(explainer) -> float | None:
    """What share of the published optimisation a built method receives (None where the
    paper publishes no budget, or the method searches nothing)."""
    info = getattr(explainer, "info", None) or {}
    if "public_fraction" in info:
        return float(info["public_fraction"])
    cfg = explainer.config
    if hasattr(cfg, "max_iterations") and hasattr(cfg, "c_steps"):
        return cfg.max_iterations * cfg.c_steps / CEM_PAPER_BUDGET
    return None


@normalised
def load_eval_models(dataset: str, classes, profile="standard", seed: int = 0,
                     device="cpu") -> EvalModels:
    """Classifier, class autoencoders for ``classes``, all-class AE and FID feature net."""
    prof = profile
    clf, clf_info = zoo.classifier(dataset, prof, seed, device)
    aes = {c: zoo.autoencoder(dataset, c, prof, seed, device)[0] for c in sorted(set(classes))}
    aes[None] = zoo.autoencoder(dataset, None, prof, seed, device)[0]
    feat, feat_info = zoo.feature_net(dataset, prof, seed, device)
    judges = zoo.judges(dataset, prof, seed, device)
    return EvalModels(dataset, clf, clf_info, aes, FrozenFeatures(feat), feat_info,
                      {n: m for n, (m, _) in judges.items()},
                      {n: info for n, (_, info) in judges.items()})


def judges_table(models: EvalModels) -> pd.DataFrame:
    """The judges of transfer validity of a run: name, architecture, test accuracy (the
    full test split), held-out accuracy and best epoch (their training selection)."""
    return pd.DataFrame([{"dataset": models.dataset, "judge": name,
                          "architecture": zoo.JUDGE_ARCHITECTURES[name],
                          "test_accuracy": info.get("test_accuracy"),
                          "val_accuracy": info.get("val_accuracy"),
                          "best_epoch": info.get("best_epoch")}
                         for name, info in models.judges_info.items()])


def split_reference(x_target: torch.Tensor, seed: int = 0):
    """Split real target-class test images into (FID/KID reference, Original Data pool).

    Disjoint halves, so the ``Original Data`` row is not scored against itself.
    """
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(x_target), generator=g)
    half = len(x_target) // 2
    return x_target[perm[:half]], x_target[perm[half:]]


@dataclass
class C3LTRun(Run):
    """What one run of the C3LT table produced: tidy rows plus what the figures need."""

    results: pd.DataFrame
    counterfactuals: dict = field(default_factory=dict)   # (pair, method) -> Counterfactuals
    curves: dict = field(default_factory=dict)            # (pair, method) -> AUPCResult
    models: EvalModels | None = None
    training: pd.DataFrame = field(default_factory=pd.DataFrame)  # C3LT's curves per epoch
    judges: pd.DataFrame = field(default_factory=pd.DataFrame)    # the judges, accuracies
    networks: pd.DataFrame = field(default_factory=pd.DataFrame)  # every network, its origin
    per_query: pd.DataFrame = field(default_factory=pd.DataFrame)  # read back: each query's

    def tables(self) -> dict[str, pd.DataFrame]:
        """Extra tables written beside the results: C3LT's training curves, the mean
        insertion curves of every pair and method, and the judges of transfer validity
        (:func:`judges_table`)."""
        out = {"c3lt_training": self.training} if len(self.training) else {}
        if len(self.judges):
            out["judges"] = self.judges
        if len(self.networks):
            out["networks"] = self.networks
        rows = [{"pair": pair, "method": m, "step": k, "target": float(a), "query": float(b)}
                for (pair, m), c in self.curves.items()
                for k, (a, b) in enumerate(zip(c.target_curve.mean(0), c.query_curve.mean(0)))]
        if rows:
            out["aupc_curves"] = pd.DataFrame(rows)
        if self.models is not None and self.counterfactuals:
            # every query's value of the metrics that are means over queries: the book's
            # rows carry the same intervals as a user's (cflib.bench.intervals)
            from cflib.bench.intervals import per_query

            out["per_query"] = per_query(self)
        return out

    TABLES = ("c3lt_training", "judges", "networks", "aupc_curves", "per_query")

    def shown(self) -> dict:
        """The counterfactuals the page shows: the first :data:`FIGURE_QUERIES` of every
        pair and method (:data:`QUERY_FIGURE_QUERIES` of the first pair)."""
        first = next(iter(self.counterfactuals), ("",))[0]
        return {f"{pair}|{m}": cf.head(QUERY_FIGURE_QUERIES if pair == first
                                       else FIGURE_QUERIES)
                for (pair, m), cf in self.counterfactuals.items()}

    @classmethod
    def from_saved(cls, results, tables, shown) -> "C3LTRun":
        """The run :meth:`save` wrote: the figures' counterfactuals and the mean insertion
        curves, not the networks."""
        curves = {}
        if "aupc_curves" in tables:
            for (pair, m), g in tables["aupc_curves"].groupby(["pair", "method"], sort=False):
                g = g.sort_values("step")
                tc = torch.tensor(g["target"].to_numpy(), dtype=torch.float32)[None]
                qc = torch.tensor(g["query"].to_numpy(), dtype=torch.float32)[None]
                curves[(str(pair), str(m))] = AUPCResult(tc, qc, tc.mean(1), qc.mean(1))
        cfs = {tuple(k.split("|", 1)): cf for k, cf in shown.items()}
        return cls(results, cfs, curves, None,
                   *(tables.get(k, pd.DataFrame()) for k in ("c3lt_training", "judges",
                                                            "networks", "per_query")))

    @property
    def pairs(self) -> list[str]:
        return [p for p in dict.fromkeys(self.results["pair"]) if p]

    @property
    def methods(self) -> list[str]:
        return list(dict.fromkeys(self.results.loc[self.results["method"] != CLASSIFIER,
                                                   "method"]))

    @property
    def classifier_accuracy(self) -> float:
        return float(self.results.loc[self.results["method"] == CLASSIFIER, "value"].item())


def _row_explainer(method: str, variant: str, models: EvalModels, dataset: str, prof,
                   seeds: Seeds, **request) -> catalog.Explainer:
    """A row's explainer: the method built from the catalog (``request``: the pair, the
    user's entries, the data it needs), with its variant's config where it has one."""
    explainer = catalog.build(method, models.classifier, dataset=dataset, profile=prof,
                              seeds=seeds, **request)
    if variant:
        explainer.config = replace(explainer.config, **VARIANTS[(method, variant)])
    return explainer


def _explained(method: str, variant: str, models: EvalModels, dataset: str, prof, seeds: Seeds,
               pair: tuple[int, int], xm: torch.Tensor, data: dict, device,
               entries=()) -> Explained:
    """One row's counterfactuals on one pair: the method built from the catalog (a learned
    one fitted), ``xm`` explained towards the pair's target; memoized
    (:func:`cflib.bench.runner.explained`)."""
    q, t = pair

    def compute() -> Explained:
        explainer = _row_explainer(method, variant, models, dataset, prof, seeds,
                                   pair=(q, t), entries=entries, **data)
        cf = explainer.explain(xm.to(device), t, seed=seeds("explain")).cpu()
        extra = {"budget_fraction": budget_fraction(explainer)}
        if "history" in getattr(explainer, "info", {}) and method == "C3LT":
            extra["history"] = explainer.info["history"]
        return Explained(cf, extra)

    key = {"dataset": dataset, "method": method, "variant": variant, "pair": [q, t],
           "seeds": seeds.columns(), "profile": prof.name, "device": str(device),
           "queries": tensor_digest(xm), "classifier": fingerprint(models.classifier),
           "data": {k: [tensor_digest(v) for v in vs] for k, vs in data.items()},
           "label": f"{dataset} {pair_label(pair)} {method}{' [' + variant + ']' if variant else ''}"}
    if method not in catalog.BOOK_METHODS:        # a user's method: its code is not traced
        return compute()
    return explained("c3lt", key, compute)


def _explained_across(method: str, variant: str, models: EvalModels, dataset: str, prof,
                      seeds: Seeds, queries: dict, device) -> dict:
    """A row of :data:`ACROSS_PAIRS`: one batch of every pair's queries (``queries``: pair
    -> its queries), each towards its pair's target, built without a pair; memoized.
    Returns pair -> that pair's :class:`Explained` (its rows of the batch, and the batch's
    time per counterfactual)."""
    pairs = list(queries)

    def compute() -> Explained:
        explainer = _row_explainer(method, variant, models, dataset, prof, seeds)
        x = torch.cat([queries[p] for p in pairs])
        target = torch.cat([torch.full((len(queries[p]),), p[1]) for p in pairs])
        cf = explainer.explain(x.to(device), target, seed=seeds("explain")).cpu()
        return Explained(cf, {"budget_fraction": budget_fraction(explainer)})

    names = ",".join(pair_label(p) for p in pairs)
    log.info("%s %s: %s%s on %d images", dataset, names, method,
             f" [{variant}]" if variant else "", sum(len(x) for x in queries.values()))
    key = {"dataset": dataset, "method": method, "variant": variant,
           "pairs": [list(p) for p in pairs], "seeds": seeds.columns(), "profile": prof.name,
           "device": str(device), "queries": [tensor_digest(queries[p]) for p in pairs],
           "classifier": fingerprint(models.classifier),
           "label": f"{dataset} {names} {method}{' [' + variant + ']' if variant else ''}"}
    step = explained("c3lt", key, compute)
    parts = step.cf.split([len(queries[p]) for p in pairs])
    return {p: Explained(cf, dict(step.extra)) for p, cf in zip(pairs, parts)}


def run_c3lt_table(args: RunArgs) -> C3LTRun:
    """Run the methods of the C3LT table on each class pair and score every metric.

    ``args`` (checked by the table's spec, :meth:`~cflib.bench.tables.registry.TableSpec.
    args`, and trusted here): the dataset, pairs, methods, profile, seeds, device and
    queries per pair (None: the profile's ``n_images`` test images of the query class,
    drawn with the data seed; the networks are the training seed's).  Returns a
    :class:`C3LTRun`."""
    dataset, prof, seeds, device = args.dataset, args.profile, args.seeds, args.device
    pairs, methods = list(args.pairs), list(args.methods)
    n_images = args.n_images if args.n_images is not None else prof.c3lt.n_images
    classes = [c for p in pairs for c in p]
    first_network = len(networks_used())
    models = load_eval_models(dataset, classes, prof, seeds.train, device)
    x_test, y_test = load_split(dataset, "test")
    rows, cfs, curves, training = [], {}, {}, {}
    common = {"dataset": dataset, **seeds.columns(), "profile": prof.name}
    rows.append({**common, "method": CLASSIFIER, "metric": ACCURACY.name,
                 "value": models.classifier_info["test_accuracy"]})
    queries = {p: class_subset(x_test, y_test, p[0], n_images, seeds("queries"))[0]
               for p in pairs}
    jobs = [(m, "") for m in methods] + [k for k in VARIANTS if k[0] in methods]

    def limited(method: str, xq: torch.Tensor) -> torch.Tensor:
        limit = QUERY_LIMITS.get(method)
        return xq[:limit(prof)] if limit else xq

    together = {job: _explained_across(*job, models, dataset, prof, seeds,
                                       {p: limited(job[0], queries[p]) for p in pairs}, device)
                for job in jobs if job[0] in ACROSS_PAIRS}
    for q, t in pairs:
        label = pair_label((q, t))
        xq = queries[(q, t)]
        xt, _ = class_subset(x_test, y_test, t)
        reference, pool = split_reference(xt, seeds("reference_split"))
        # the reference's features once for every method of the pair
        ref_features = ImageFeatures.of(reference, models.feature)
        ref_spread = real_spread(reference)
        prox: dict[tuple[str, str], float] = {}
        for method, variant in jobs:
            xm = limited(method, xq)
            log.info("%s %s: %s%s on %d images", dataset, label, method,
                     f" [{variant}]" if variant else "", len(xm))
            # Original Data draws from the half of the real target images that FID/KID
            # do not use as their reference
            data = ({"pool": (pool, torch.full((len(pool),), t))}
                    if method == "Original Data" else {})
            step = (together[(method, variant)][(q, t)] if (method, variant) in together
                    else _explained(method, variant, models, dataset, prof, seeds, (q, t), xm,
                                    data, device, args.entries))
            cf = step.cf
            ctx = PairContext(cf, q, t, models, ref_features, prof.c3lt.aupc_steps,
                              seeds("kid"), ref_spread)
            values = evaluate(ctx, SCORED)
            rows += [{**common, "pair": label, "method": method, "variant": variant,
                      "metric": k, "value": v} for k, v in values.items()]
            prox[(method, variant)] = values["Proximity"]
            share = step.extra.get("budget_fraction")
            if share is not None:
                rows.append({**common, "pair": label, "method": method, "variant": variant,
                             "metric": BUDGET_FRACTION.name, "value": share})
            if not variant:
                cfs[(label, method)] = cf
                curves[(label, method)] = ctx.curves
                if "history" in step.extra:
                    training[label] = step.extra["history"]
        real = prox.get(("Original Data", ""))
        if real:
            rows += [{**common, "pair": label, "method": m, "variant": v,
                      "metric": PROXIMITY_VS_REAL.name, "value": p / real}
                     for (m, v), p in prox.items()]
    df = tidy(rows)
    acc = df[df["method"] == CLASSIFIER]
    df = pd.concat([acc, with_pair_means(df[df["method"] != CLASSIFIER])], ignore_index=True)
    hist = pd.DataFrame([{"pair": k, **h} for k, hs in training.items() for h in hs])
    return C3LTRun(tidy(df), cfs, curves, models, hist, judges_table(models),
                    networks_table(networks_used(first_network)))


# -- the table's spec: one per dataset -------------------------------------------------------
def _means(rows: pd.DataFrame) -> pd.DataFrame:
    return table_means(rows)[["method", "metric", "value"]].reset_index(drop=True)


def _checks(rows: pd.DataFrame) -> pd.DataFrame:
    return shape_checks(table_means(rows), "c3lt")


def _intervals(run, model: str = "", pairs=None) -> pd.DataFrame:
    """Each row's interval over the queries of each pair: from the run's networks and
    counterfactuals, or from the per-query values a saved run kept (the book's committed
    rows); ``pairs``: only those pairs' queries."""
    from cflib.bench.intervals import bootstrap, per_query

    values = per_query(run) if run.models is not None else run.per_query
    if pairs is not None and len(values):
        values = values[values["pair"].isin(list(pairs))]
    return bootstrap(values) if len(values) else pd.DataFrame(
        columns=["method", "metric", "value", "lo", "hi", "n", "pairs", "basis"])


def _stand_in(model: str = ""):
    from cflib.models import C3LTClassifier

    return C3LTClassifier().eval()


def _spec(dataset: str, chapter: str, title: str) -> TableSpec:
    return TableSpec(
        key=f"c3lt-{dataset}", kind="c3lt", chapter=chapter, source="c3lt_table.py",
        dataset=dataset, title=f"Counterfactuals on {DATASET_TITLES[dataset]}: the C3LT table",
        label=title, template="c3lt_table", methods=tuple(C3LT_METHODS),
        references=("Original Data", "Query (unchanged)"), metrics=tuple(C3LT_METRICS),
        per_pair=True, validity="Validity", run=run_c3lt_table, load=C3LTRun.load,
        means=_means, checks=_checks, intervals=_intervals,
        counterfactuals=lambda run, model="": run.counterfactuals, stand_in=_stand_in,
        n_images=lambda prof: prof.c3lt.n_images, check_methods=catalog.check_methods,
        sweeps=True, page_metrics=tuple(FULL_TABLE_METRICS), redraw_ratio=CONFOUNDED_RATIO)


C3LT_MNIST, C3LT_FMNIST = register_table(_spec("mnist", "mnist_eval", "C3LT table, MNIST"),
                                         _spec("fmnist", "fashion_mnist_test",
                                               "C3LT table, Fashion-MNIST"))
