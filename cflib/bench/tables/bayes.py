"""The Bayesian-classifier table (Duell & Fan 2026): methods x metrics on MNIST.

:func:`run_bayesian` trains (or loads) the MC-dropout or BNN classifier, draws
Schut et al.'s queries (random test digits, a similar-digit target per image), runs
Wachter, BayesCF, ROAR, Schut and PSCE (built from the catalog,
:mod:`cflib.bench.catalog`) on them and scores every counterfactual with the
table's metric specs (:data:`BAYES_METRICS`):

- ``IM1``: Van Looveren & Klaise's ratio with the class autoencoders of the target and
  of the query image's *label* (as Schut et al.'s evaluation), mean over images;
- ``Implausibility``: mean L2 distance to the nearest 10 % of the target-class
  training images, mean over images;
- ``Validity``: share of counterfactuals whose posterior-mean decision, over the
  posterior draws the searches used, is the target (in-sample: the searches optimised
  against exactly these draws; a fraction in [0, 1], the paper prints percentages);
- ``Validity_fresh``: the same decision over *fresh* posterior draws the searches never
  saw (new dropout masks / new weight samples, seeded): out-of-sample validity;
- ``Robustness_AUC``: the area under the validity-vs-weight-noise curve on fresh draws,
  noise std from 1e-3 to 1e-1 on a log axis, normalised to [0, 1];
- ``Robustness_Ratio_1e-3``: share of the (fresh-draw) valid counterfactuals still
  classified as the target after Gaussian noise of std 1e-3 on every weight (20
  perturbed models); kept for the paper's column, saturated (about 1 for every method);
- ``Validity_per_draw``: the share of single fresh posterior draws that put each
  counterfactual in its target (the PSCE author's "validity after training");
- ``Confidence_fresh``: the posterior-mean probability of the target on fresh draws;
- ``Validity (<name> judge)``, one per judge of three families (a SmallCNN, a residual
  network, a multilayer perceptron; :data:`cflib.bench.zoo.JUDGES`), and ``Validity (all
  judges)``: the share of counterfactuals that the judge (every judge) assigns to the
  target: transfer beyond the explained network;
- ``Diversity`` and ``Query_dependence`` (:mod:`cflib.metrics.dependence`): how varied
  the counterfactuals of one target class are against real test images of it, and how
  much their pairwise distances follow their queries';
- ``L1`` and ``L0``: the summed pixel change and the pixels changed by more than 0.1
  (on the [0, 1] scale);
- ``Seconds_per_CF``: wall time of the method divided by the number of images.

IM1 and Implausibility average over *all* counterfactuals, valid or not (as Schut et
al.); rows come per repeat (key ``repeat``), each repeat a fresh draw of queries.  Two
reference rows show each metric's range: ``Original Data`` (for each query a real test
image of its target class, drawn with the repeat's seed) and ``Query (unchanged)``.
With ``bayes.psce_ablation`` PSCE is also run, on the MC-dropout model's first repeat,
with delta 0.99 and with a manifold term from target-class autoencoders trained apart
from the IM1 ones (another architecture and seed): the ``variant`` column.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
import torch
from torch import nn

from cflib.bench import catalog, zoo
from cflib.bench.choices import IM_CLASS_AE
from cflib.bench.data import CLASS_NAMES, canonical_dataset, check_data, load_split, n_classes
from cflib.bench.profiles import normalised
from cflib.bench.results import CLASSIFIER, Run, tidy
from cflib.bench.runner import (
    Explained,
    RunArgs,
    evaluate,
    explained,
    state_key,
    tensor_digest,
)
from cflib.bench.runner import shape_checks as _shape_checks
from cflib.bench.runner import summarise as _summarise
from cflib.bench.seeds import Seeds
from cflib.bench.tables.registry import TableSpec, register_table
from cflib.cache import fingerprint, networks_table, networks_used
from cflib.explainers import Counterfactuals
from cflib.explainers._posterior import posterior_probs
from cflib.metrics import (
    ACCURACY,
    DIVERSITY,
    IM1,
    L0,
    L1,
    N_ALREADY_TARGET,
    QUERY_DEPENDENCE,
    SECONDS_PER_CF,
    VALIDITY_ALL_JUDGES,
    VALIDITY_JUDGES,
)
from cflib.metrics.dependence import MAX_REAL
from cflib.metrics.robustness import (
    CONFIDENCE_FRESH,
    IMPLAUSIBILITY,
    ROBUSTNESS_AUC,
    ROBUSTNESS_RATIO,
    VALIDITY_FRESH,
    VALIDITY_IN_SAMPLE,
    VALIDITY_PER_DRAW,
    fresh_draws,
    robustness_ratio,
    validity_under_perturbation,
)
from cflib.scopes import frozen
from cflib.tensors import check_device

log = logging.getLogger("cflib")

#: the two Bayesian classifiers of the chapter (the ``model`` column)
MODELS = {"mc_dropout": zoo.mc_dropout_classifier, "bnn": zoo.bnn_classifier}
#: the rows of the table, in the chapter's order
BAYES_METHODS = ["Wachter", "BayesCF", "ROAR", "Schut", "PSCE"]
#: the reference rows (each metric's range), run with every table
BAYES_REFERENCES = ["Original Data", "Query (unchanged)"]
#: the architecture of PSCE's target-class autoencoders: not IM1's (so IM1 does not grade
#: PSCE with the network it optimised against)
PSCE_CLASS_AE = "conv-8x7x7" if IM_CLASS_AE != "conv-8x7x7" else "dense-20"
#: PSCE's ablation: variant -> (delta, manifold autoencoder); the main row is the paper's
#: setting (delta 0.9, the all-class autoencoder)
PSCE_VARIANTS = {
    "delta=0.99": (0.99, "all-class"),
    "target-class AE": (0.9, "target-class"),
    "delta=0.99, target-class AE": (0.99, "target-class"),
}

#: Schut et al. (2021) official code (``experiments/exp_qualitative_eval.py``): for a
#: test digit of class c the target is drawn uniformly from SCHUT_TARGETS[c].
SCHUT_TARGETS: dict[int, list[int]] = {
    0: [3, 6, 8], 1: [4, 7, 9], 2: [3, 7], 3: [0, 2, 8], 4: [1, 9],
    5: [6, 8], 6: [0, 5, 8], 7: [1, 2, 9], 8: [0, 3, 6], 9: [1, 4, 7],
}


# -- Schut et al.'s protocol -------------------------------------------------------------
def schut_targets(labels, seed: int = 0) -> torch.Tensor:
    """A target per label, drawn uniformly from :data:`SCHUT_TARGETS` (numpy, ``seed + 2``
    as in Schut et al.'s ``_choose_targets``)."""
    labels = torch.as_tensor(labels).long()
    if labels.dim() != 1:
        raise ValueError(f"labels must be a 1-d tensor, got shape {tuple(labels.shape)}")
    if len(labels) and ((labels < 0).any() or (labels > 9).any()):
        raise ValueError("labels must be digit classes in 0..9")
    rng = np.random.default_rng(seed + 2)
    return torch.tensor([int(rng.choice(SCHUT_TARGETS[int(c)])) for c in labels],
                        dtype=torch.long)


def schut_queries(dataset: str = "mnist", n: int = 100, seed: int = 0, split: str = "test"):
    """Schut et al.'s draw: ``n`` random images of ``split`` (numpy, ``seed + 1``, without
    replacement) and a target per image from the similar-digit map (``seed + 2``).

    Returns ``(x, y, target, index)``: images (n, 1, 28, 28) in [-1, 1], their labels,
    the targets and the indices into the split.
    """
    if canonical_dataset(dataset) != "mnist":
        raise ValueError("Schut et al.'s target map is defined for MNIST digits only")
    x, y = load_split(dataset, split)
    if not 0 < n <= len(x):
        raise ValueError(f"n must be in 1..{len(x)}, got {n}")
    idx = torch.from_numpy(np.random.default_rng(seed + 1).choice(len(x), n, replace=False))
    return x[idx], y[idx], schut_targets(y[idx], seed), idx


N_FRESH = 20             # as many fresh posterior draws as the searches use


#: weight-noise scales of the validity curve (0 = no noise)
DEFAULT_SCALES = (0.0, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)


# -- the metrics -----------------------------------------------------------------------------
@dataclass
class BayesContext:
    """One method's counterfactuals of one repeat, and what the metrics need.

    ``fresh_seed`` seeds the posterior draws that judge the counterfactuals out of
    sample; the validity curve under weight noise is computed once, on first use.
    """

    cf: Counterfactuals
    query_labels: torch.Tensor
    autoencoders: dict
    model: nn.Module
    x_train: torch.Tensor
    y_train: torch.Tensor
    n_perturbations: int = 20
    seed: int = 0
    fresh_seed: int = 10_000_000
    scales: tuple = DEFAULT_SCALES
    judges: dict = field(default_factory=dict)    # name -> judge (zoo.JUDGES)
    real_by_class: dict = field(default_factory=dict)   # class -> real test images

    def fresh(self):
        """The context in which the model predicts with the fresh draws."""
        return fresh_draws(self.model, N_FRESH, self.fresh_seed)

    @property
    def counts(self) -> torch.Tensor:
        """The queries whose counterfactual may count as valid (not already in the target)."""
        return ~self.cf.meta["already_target"].cpu()

    @cached_property
    def curve(self) -> dict[float, float]:
        """Validity on fresh draws against the std of Gaussian weight noise."""
        dev = next(self.model.parameters()).device
        with self.fresh():
            return validity_under_perturbation(self.model, self.cf.x_cf.to(dev),
                                               self.cf.target.to(dev), self.scales,
                                               self.n_perturbations, self.seed,
                                               counts=self.counts)

    def validity_fresh(self) -> float:
        return self.curve[0.0]

    @torch.no_grad()
    def validity_per_draw(self) -> float:
        """The share of single fresh posterior draws that put each counterfactual in its
        target (the PSCE author's "validity after training"), over the counted queries."""
        dev = next(self.model.parameters()).device
        with self.fresh(), frozen(self.model):
            probs = posterior_probs(self.model, self.cf.x_cf.to(dev), N_FRESH)   # (S, N, K)
        hit = probs.argmax(-1).cpu() == self.cf.target.cpu().view(1, -1)
        return (hit & self.counts.view(1, -1)).float().mean().item()

    @torch.no_grad()
    def confidence_fresh(self) -> float:
        """Mean over images of the posterior-mean probability of the target (fresh draws)."""
        dev = next(self.model.parameters()).device
        with self.fresh(), frozen(self.model):
            probs = posterior_probs(self.model, self.cf.x_cf.to(dev), N_FRESH).mean(0)
        t = self.cf.target.to(probs.device).view(-1, 1)
        return probs.gather(1, t).mean().item()

    def robustness_ratio(self) -> float:
        with self.fresh():
            return robustness_ratio(self.model, self.cf.x_cf, self.cf.target, 1e-3,
                                    self.n_perturbations, seed=self.seed, counts=self.counts)


BAYES_METRICS = (
    IM1, IMPLAUSIBILITY, VALIDITY_IN_SAMPLE, VALIDITY_FRESH, VALIDITY_PER_DRAW, ROBUSTNESS_AUC,
    ROBUSTNESS_RATIO, CONFIDENCE_FRESH, *VALIDITY_JUDGES, VALIDITY_ALL_JUDGES, DIVERSITY,
    QUERY_DEPENDENCE, L1, L0, SECONDS_PER_CF, N_ALREADY_TARGET,
)
#: what PSCE's ablation rows carry
ABLATION_METRICS = (IM1, IMPLAUSIBILITY, VALIDITY_FRESH, VALIDITY_PER_DRAW, CONFIDENCE_FRESH,
                    L1, L0, SECONDS_PER_CF)


def check_models(models) -> list[str]:
    """The Bayesian classifiers to run (names of :data:`MODELS`)."""
    models = [models] if isinstance(models, str) else list(models)
    bad = [m for m in models if m not in MODELS]
    if bad or not models:
        raise ValueError(f"unknown model(s) {bad}; choose from {list(MODELS)}")
    return models


def bayes_model(dataset: str = "mnist", model: str = "mc_dropout", profile="standard",
                seed: int = 0, device="cpu"):
    """The cached Bayesian classifier ``model`` of training seed ``seed``: (model, info)."""
    check_device(device)
    check_models([model])
    return MODELS[model](dataset, profile, seed, device)


def _explained(explainer, x, t, seed: int, key: dict) -> Counterfactuals:
    """``explainer.explain(x, t, seed=seed)``, memoized (:func:`cflib.bench.runner.explained`)
    under ``key``, the queries and targets, and the built explainer's whole state."""
    def compute():
        return Explained(explainer.explain(x, t, seed=seed))

    if key["method"] not in catalog.BOOK_METHODS:     # a user's method: its code is not traced
        return compute().cf
    full = {**key, "queries": tensor_digest(x), "targets": tensor_digest(torch.as_tensor(t)),
            "seed": seed, "explainer": state_key(explainer),
            "label": f"{key['dataset']} {key['model']} {key['method']} repeat {key['repeat']}"}
    return explained("bayes", full, compute).cf


@normalised
def run_bayesian(dataset: str = "mnist", model: str = "mc_dropout", profile="standard",
                 seeds: Seeds = Seeds(), device="cpu", methods=BAYES_METHODS,
                 n_perturbations: int = 20, model_and_info=None,
                 scales=DEFAULT_SCALES, entries=()) -> tuple[list[dict], dict]:
    """Run the chapter's methods for one Bayesian classifier; returns ``(rows, cfs)``.

    ``rows``: tidy dicts (:data:`cflib.bench.results.COLUMNS` and ``repeat``).  ``cfs``:
    ``{"queries": [(x, y, target, index) per repeat], "<method>": [Counterfactuals per
    repeat] (on the CPU), "model_info": info, "curves": [rows (model, method, repeat,
    scale, validity)]}`` where the curves are validity on fresh posterior draws against
    the scale of weight noise.  ``model_and_info``: the classifier's ``(model, info)``
    when the caller already has it (else it is loaded from the cache).  The device, the
    arguments and the data files are checked first, before any network is loaded.
    """
    prof = profile
    methods = catalog.check_methods(methods, entries)
    check_models([model])
    check_data([dataset])
    clf, info = model_and_info or bayes_model(dataset, model, prof, seeds.train, device)
    log.info("%s classifier: test accuracy %.4f", model, info.get("test_accuracy", float("nan")))
    x_train, y_train = load_split(dataset, "train")
    aes = {c: zoo.autoencoder(dataset, c, prof, seeds.train, device=device)[0]
           for c in range(len(CLASS_NAMES[dataset]))}
    judges = {n: m for n, (m, _) in zoo.judges(dataset, prof, seeds.train, device).items()}
    x_test, y_test = load_split(dataset, "test")
    real = {c: x_test[y_test == c][:MAX_REAL] for c in range(n_classes(dataset))}
    rows_of = [*[m for m in BAYES_REFERENCES if m not in methods], *methods]
    explainers = {m: catalog.build(m, clf, dataset=dataset, profile=prof, seeds=seeds,
                                   entries=entries)
                  for m in rows_of}
    ablation = {}
    if prof.bayes.psce_ablation and model == "mc_dropout" and "PSCE" in methods:
        ablation = psce_variants(clf, dataset, prof, seeds, device)
    rows: list[dict] = []
    cfs: dict = {"queries": [], "model_info": info, "curves": [], **{m: [] for m in rows_of},
                 "ablation": {}}
    base = {"dataset": dataset, "model": model, **seeds.columns(), "profile": prof.name}
    key = {**base, "device": str(device), "classifier": fingerprint(clf)}
    for r in range(prof.bayes.repeats):
        qs = seeds("bayes_queries", r)
        x, y, t, idx = schut_queries(dataset, prof.bayes.n_images, qs)
        cfs["queries"].append((x, y, t, idx))
        for m, ex in explainers.items():
            log.info("%s / %s: repeat %d, %d images", model, m, r, len(x))
            cf = _explained(ex, x, t, qs, {**key, "method": m, "repeat": r})
            ctx = BayesContext(cf, y, aes, clf, x_train, y_train, n_perturbations, qs,
                               seeds("bayes_fresh", r), tuple(scales), judges, real)
            rows += [{**base, "method": m, "metric": k, "value": v, "repeat": r}
                     for k, v in evaluate(ctx, BAYES_METRICS).items()]
            cfs["curves"] += [{"model": model, "method": m, "repeat": r, "scale": sc,
                               "validity": v} for sc, v in ctx.curve.items()]
            cfs[m].append(cf.cpu())
        if r == 0:
            for variant, ex in ablation.items():
                log.info("%s / PSCE [%s]: repeat %d, %d images", model, variant, r, len(x))
                cf = _explained(ex, x, t, qs, {**key, "method": "PSCE", "variant": variant,
                                               "repeat": r})
                ctx = BayesContext(cf, y, aes, clf, x_train, y_train, n_perturbations, qs,
                                   seeds("bayes_fresh", r), tuple(scales))
                rows += [{**base, "method": "PSCE", "variant": variant, "metric": k,
                          "value": v, "repeat": r}
                         for k, v in evaluate(ctx, ABLATION_METRICS).items()]
                cfs["ablation"][variant] = cf.cpu()
    return rows, cfs


def psce_class_autoencoders(dataset: str, profile, seeds: Seeds, device="cpu") -> dict:
    """The target-class autoencoders of PSCE's ablation: trained apart from IM1's class
    autoencoders (their own seed, :func:`cflib.bench.seeds.train_seed` of
    ``psce_class_ae``, and another architecture: :data:`PSCE_CLASS_AE`), so that IM1
    does not grade PSCE with the network PSCE optimised against."""
    from cflib.bench.seeds import train_seed

    s = train_seed("psce_class_ae", seeds.train)
    return {c: zoo.autoencoder(dataset, c, profile, s, device=device, arch=PSCE_CLASS_AE)[0]
            for c in range(n_classes(dataset))}


def psce_variants(clf, dataset: str, profile, seeds: Seeds, device="cpu") -> dict:
    """PSCE's ablation explainers (:data:`PSCE_VARIANTS`), built like the catalog's PSCE."""
    from dataclasses import replace

    base = catalog.build("PSCE", clf, dataset=dataset, profile=profile, seeds=seeds)
    class_aes = None
    out = {}
    for variant, (delta, manifold) in PSCE_VARIANTS.items():
        if manifold == "target-class":
            class_aes = class_aes or psce_class_autoencoders(dataset, profile, seeds, device)
            ae = class_aes
        else:
            ae = base.autoencoder
        out[variant] = type(base)(clf, replace(base.config, delta=delta), autoencoder=ae)
    return out


# -- the chapter: both classifiers, tidy results, spread over repeats --------------------------
#: queries of the first repeat a run saves for its figures, with every method's counterfactual
FIGURE_QUERIES = 6
@dataclass
class BayesRun(Run):
    """What :func:`run_bayesian_table` returns.

    ``results``: tidy rows (one per model, method, metric and repeat; plus the
    classifiers' ``Accuracy`` with ``method = "Classifier"``); ``counterfactuals``:
    ``{model: cfs}`` as returned by :func:`run_bayesian`; ``curves``: validity on fresh
    posterior draws against weight-noise scale (model, method, repeat, scale, validity).
    """

    results: pd.DataFrame
    counterfactuals: dict
    curves: pd.DataFrame
    networks: pd.DataFrame = field(default_factory=pd.DataFrame)  # every network, its origin

    def tables(self) -> dict[str, pd.DataFrame]:
        """Extra tables written beside the results (:meth:`cflib.bench.results.Run.save`):
        the validity curves and every network the run used, with its origin."""
        return {"curves": self.curves, **({"networks": self.networks} if len(self.networks)
                                           else {})}

    TABLES = ("curves", "networks")

    def shown(self) -> dict:
        """The counterfactuals the page shows: the first :data:`FIGURE_QUERIES` queries of
        the first repeat with every method's counterfactual (their labels in ``meta``)."""
        shown = {}
        for model, cfs in self.counterfactuals.items():
            x, y, t, _ = cfs["queries"][0]
            for m, per_repeat in cfs.items():
                if m in ("queries", "model_info", "curves", "ablation") or not per_repeat:
                    continue
                cf = per_repeat[0].head(FIGURE_QUERIES)
                cf.meta["query_labels"] = torch.as_tensor(y[:FIGURE_QUERIES])
                shown[f"{model}|{m}"] = cf
        return shown

    @classmethod
    def from_saved(cls, results, tables, shown) -> "BayesRun":
        """The run :meth:`save` wrote: per model, ``queries`` holds the first repeat's
        shown queries and each method its counterfactuals of them."""
        cfs: dict = {}
        for key, cf in shown.items():
            model, m = key.split("|", 1)
            entry = cfs.setdefault(model, {})
            entry.setdefault("queries", [(cf.x, cf.meta["query_labels"], cf.target, None)])
            entry[m] = [cf]
        return cls(results, cfs, tables["curves"], tables.get("networks", pd.DataFrame()))

    @property
    def models(self) -> list[str]:
        return list(self.counterfactuals)

    @property
    def accuracy(self) -> pd.Series:
        acc = self.results[self.results["method"] == CLASSIFIER]
        return acc.set_index("model")["value"]


def run_bayesian_table(args: RunArgs, n_perturbations: int = 20,
                       scales=DEFAULT_SCALES) -> BayesRun:
    """Run :func:`run_bayesian` for every Bayesian classifier of ``args`` (checked by the
    table's spec and trusted here: the classifiers, methods, profile, seeds, device; the
    queries per repeat are the profile's, which the spec sets from ``n_images``); returns a
    :class:`BayesRun`."""
    dataset, prof, seeds, device = args.dataset, args.profile, args.seeds, args.device
    models, methods = list(args.models), list(args.methods)
    rows, cfs, curves = [], {}, []
    first_network = len(networks_used())
    for m in models:
        clf, info = bayes_model(dataset, m, prof, seeds.train, device)
        rows.append({"dataset": dataset, "method": CLASSIFIER, "model": m,
                     "metric": ACCURACY.name, "value": float(info["test_accuracy"]),
                     **seeds.columns(), "profile": prof.name, "repeat": -1})
        r, c = run_bayesian(dataset, m, prof, seeds, device, methods, n_perturbations,
                            model_and_info=(clf, info), scales=scales, entries=args.entries)
        rows += r
        cfs[m] = c
        curves += c["curves"]
    return BayesRun(tidy(rows), cfs, pd.DataFrame(curves),
                    networks_table(networks_used(first_network)))


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation (ddof 1; NaN for one repeat) and number of repeats of
    every (model, method, variant, metric); the classifiers' accuracy rows are left out."""
    out = _summarise(results[results["method"] != CLASSIFIER], over="repeat")
    return out[["model", "method", "variant", "metric", "mean", "std", "n"]]


def shape_checks(summary: pd.DataFrame) -> pd.DataFrame:
    """The paper's expected shape (``expected.csv``, table ``bayes``) per Bayesian
    classifier, on :func:`summarise`'s means over repeats of the table's rows (ties count
    as holding; a ``best`` is among the five methods, not the reference rows)."""
    main = summary[summary["variant"] == ""] if "variant" in summary.columns else summary
    return _shape_checks(main.rename(columns={"mean": "value"}), "bayes", by=["model"],
                         candidates=BAYES_METHODS)


# -- the table's spec ------------------------------------------------------------------------
def _main(rows: pd.DataFrame) -> pd.DataFrame:
    s = summarise(rows)
    return s[s["variant"] == ""]


def _means(rows: pd.DataFrame) -> pd.DataFrame:
    return _main(rows).rename(columns={"mean": "value"})[["method", "metric", "value"]]


def _intervals(run, model: str = "") -> pd.DataFrame:
    from cflib.bench.intervals import repeat_intervals

    s = _main(run.results)
    return repeat_intervals(s[s["model"] == model] if model else s)


def _stand_in(model: str = "mc_dropout"):
    from cflib.models.bayesian import BayesByBackpropCNN, MCDropoutCNN

    if model == "mc_dropout":
        return MCDropoutCNN(p=0.5, n_samples=2, sample_seed=0).eval()
    return BayesByBackpropCNN(prior_sigma=0.1, rho_init=-5.0, n_samples=2,
                              sample_seed=0).eval()


def _check_args(args: RunArgs) -> RunArgs:
    """The queries per repeat: the profile's, or ``n_images`` set into it."""
    from dataclasses import replace

    from cflib.bench.profiles import get_profile

    if args.n_images is None:
        return args
    return replace(args, profile=get_profile(args.profile, bayes={"n_images": args.n_images}))


BAYES = register_table(TableSpec(
    key="bayes", kind="bayes", chapter="mnist_bayesian", source="mnist_bayesian.py",
    dataset="mnist", title="Counterfactuals under Bayesian classifiers on MNIST",
    label="Bayesian classifiers, MNIST", template="mnist_bayesian",
    methods=tuple([*BAYES_REFERENCES, *BAYES_METHODS]), references=tuple(BAYES_REFERENCES),
    metrics=tuple(BAYES_METRICS), per_pair=False, validity="Validity_fresh",
    run=run_bayesian_table, load=BayesRun.load, means=_means,
    checks=lambda rows: shape_checks(summarise(rows)), intervals=_intervals,
    counterfactuals=lambda run, model="mc_dropout": run.counterfactuals[model],
    stand_in=_stand_in, n_images=lambda prof: prof.bayes.n_images,
    check_methods=catalog.check_methods, check_args=_check_args, models=tuple(MODELS),
    model_titles={"mc_dropout": "MC dropout", "bnn": "BNN"}, check_by=("model",),
    scope="mean ± sd over the repeats"))[0]
