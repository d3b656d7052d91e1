"""The Bayesian-classifier table (Duell & Fan 2026): methods x metrics on MNIST.

:func:`run_bayesian` trains (or loads) the MC-dropout or BNN classifier, draws
Schut et al.'s queries (random test digits, a similar-digit target per image), runs
Wachter, BayesCF, ROAR, Schut and PSCE (built from the catalog,
:data:`cflib.explainers.METHODS`) on them and scores every counterfactual with the
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
- ``Seconds_per_CF``: wall time of the method divided by the number of images.

IM1 and Implausibility average over *all* counterfactuals, valid or not (as Schut et
al.); rows come per repeat (key ``repeat``), each repeat a fresh draw of queries.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import torch
from torch import nn

from cflib import zoo
from cflib.data import canonical_dataset, load_split
from cflib.explainers import METHODS, Counterfactuals, get_method
from cflib.metrics.robustness import (
    fresh_draws,
    implausibility,
    robustness_auc,
    robustness_ratio,
    validity_under_perturbation,
)
from cflib.metrics.spec import ACCURACY, IM1, SECONDS_PER_CF, MetricSpec, register
from cflib.profiles import get_profile
from cflib.results import shape_checks as _shape_checks
from cflib.results import tidy

log = logging.getLogger("cflib")

SETTINGS = {"mc_dropout": zoo.mc_dropout_classifier, "bnn": zoo.bnn_classifier}
#: the rows of the table, in the chapter's order
BAYES_METHODS = ["Wachter", "BayesCF", "ROAR", "Schut", "PSCE"]
PAIR = "schut_map"
QUERY_SEED = 12345  # Schut et al.'s repeats use seeds 12345 + repeat

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


def query_seed(seed: int, repeat: int) -> int:
    return QUERY_SEED + 1000 * seed + repeat


FRESH_SEED = 10_000_000  # posterior draws for evaluation: seeds no search ever uses
N_FRESH = 20             # as many fresh draws as the searches use


def fresh_seed(seed: int, repeat: int) -> int:
    """The seed of the fresh posterior draws that judge one repeat's counterfactuals."""
    return FRESH_SEED + 1000 * seed + repeat


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
    fresh_seed: int = FRESH_SEED
    scales: tuple = DEFAULT_SCALES

    def fresh(self):
        """The context in which the model predicts with the fresh draws."""
        return fresh_draws(self.model, N_FRESH, self.fresh_seed)

    @cached_property
    def curve(self) -> dict[float, float]:
        """Validity on fresh draws against the std of Gaussian weight noise."""
        dev = next(self.model.parameters()).device
        with self.fresh():
            return validity_under_perturbation(self.model, self.cf.x_cf.to(dev),
                                               self.cf.target.to(dev), self.scales,
                                               self.n_perturbations, self.seed)

    def validity_fresh(self) -> float:
        return self.curve[0.0]

    def robustness_ratio(self) -> float:
        with self.fresh():
            return robustness_ratio(self.model, self.cf.x_cf, self.cf.target, 1e-3,
                                    self.n_perturbations, seed=self.seed)


BAYES_METRICS: tuple[MetricSpec, ...] = register(
    IM1,
    MetricSpec("Implausibility",
               lambda c: implausibility(c.cf.x_cf, c.cf.target, c.x_train, c.y_train).mean().item(),
               False, "mean L2 distance to the nearest 10 % of target-class training images"),
    MetricSpec("Validity", lambda c: c.cf.validity, True,
               "share classified as the target by the posterior draws the search used "
               "(in-sample)"),
    MetricSpec("Validity_fresh", lambda c: c.validity_fresh(), True,
               "share classified as the target by fresh posterior draws the search never saw "
               "(out-of-sample)"),
    MetricSpec("Robustness_AUC", lambda c: robustness_auc(c.curve), True,
               "area under validity (fresh draws) against weight-noise std 1e-3 to 1e-1, "
               "log axis, normalised to [0, 1]"),
    MetricSpec("Robustness_Ratio_1e-3", lambda c: c.robustness_ratio(), True,
               "share of valid counterfactuals (fresh draws) still valid after N(0, 1e-3²) "
               "weight noise; saturated: about 1 for every method"),
    SECONDS_PER_CF,
)


def bayes_model(dataset: str = "mnist", setting: str = "mc_dropout", profile="standard",
                seed: int = 0, device="cpu"):
    """The cached classifier of a setting: (model, info)."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose one of {list(SETTINGS)}")
    return SETTINGS[setting](dataset, profile, seed, device)


def check_methods(methods) -> list[str]:
    methods = list(methods)
    for m in methods:
        get_method(m)
    return methods


def run_bayesian(dataset: str = "mnist", setting: str = "mc_dropout", profile="standard",
                 seed: int = 0, device="cpu", methods=BAYES_METHODS, n_perturbations: int = 20,
                 model_and_info=None, scales=DEFAULT_SCALES) -> tuple[list[dict], dict]:
    """Run the chapter's methods for one setting; returns ``(rows, cfs)``.

    ``rows``: tidy dicts (dataset, pair, method, setting, metric, value, seed, profile,
    repeat).  ``cfs``: ``{"queries": [(x, y, target, index) per repeat],
    "<method>": [Counterfactuals per repeat] (on the CPU), "model_info": info,
    "curves": [rows (setting, method, repeat, scale, validity)]}`` where the curves are
    validity on fresh posterior draws against the scale of weight noise.
    ``model_and_info``: the setting's ``(model, info)`` when the caller already has it
    (else it is loaded from the cache).
    """
    dataset, prof = canonical_dataset(dataset), get_profile(profile)
    methods = check_methods(methods)
    model, info = model_and_info or bayes_model(dataset, setting, prof, seed, device)
    log.info("%s classifier: test accuracy %.4f", setting, info.get("test_accuracy", float("nan")))
    x_train, y_train = load_split(dataset, "train")
    aes = {c: zoo.autoencoder(dataset, c, prof, seed, device=device)[0] for c in range(10)}
    explainers = {m: METHODS[m].from_profile(model, dataset=dataset, profile=prof, seed=seed)
                  for m in methods}
    rows: list[dict] = []
    cfs: dict = {"queries": [], "model_info": info, "curves": [], **{m: [] for m in methods}}
    base = {"dataset": dataset, "pair": PAIR, "setting": setting, "seed": seed,
            "profile": prof.name}
    for r in range(prof.bayes_repeats):
        qs = query_seed(seed, r)
        x, y, t, idx = schut_queries(dataset, prof.bayes_n_images, qs)
        cfs["queries"].append((x, y, t, idx))
        for m, ex in explainers.items():
            log.info("%s / %s: repeat %d, %d images", setting, m, r, len(x))
            cf = ex.explain(x, t, seed=qs)
            ctx = BayesContext(cf, y, aes, model, x_train, y_train, n_perturbations, qs,
                               fresh_seed(seed, r), tuple(scales))
            rows += [{**base, "method": m, "metric": spec.name, "value": spec(ctx), "repeat": r}
                     for spec in BAYES_METRICS]
            cfs["curves"] += [{"setting": setting, "method": m, "repeat": r, "scale": sc,
                               "validity": v} for sc, v in ctx.curve.items()]
            cfs[m].append(cf.cpu())
    return rows, cfs


# -- the chapter: both settings, tidy results, spread over repeats ---------------------------
@dataclass
class BayesRun:
    """What :func:`run_bayesian_table` returns.

    ``results``: tidy rows (one per setting, method, metric and repeat; plus the
    classifiers' ``Accuracy`` with ``method = "Classifier"``); ``counterfactuals``:
    ``{setting: cfs}`` as returned by :func:`run_bayesian`; ``curves``: validity on fresh
    posterior draws against weight-noise scale (setting, method, repeat, scale, validity).
    """

    results: pd.DataFrame
    counterfactuals: dict
    curves: pd.DataFrame

    def tables(self) -> dict[str, pd.DataFrame]:
        """Extra tables written beside the results (:func:`cflib.results.write_run`)."""
        return {"curves": self.curves}

    @property
    def settings(self) -> list[str]:
        return list(self.counterfactuals)

    @property
    def accuracy(self) -> pd.Series:
        acc = self.results[self.results["method"] == "Classifier"]
        return acc.set_index("setting")["value"]


def run_bayesian_table(dataset: str = "mnist", settings=tuple(SETTINGS), profile="standard",
                       seed: int = 0, device="cpu", methods=BAYES_METHODS,
                       n_perturbations: int = 20, scales=DEFAULT_SCALES) -> BayesRun:
    """Run :func:`run_bayesian` for every setting; returns a :class:`BayesRun`."""
    settings = list(settings)
    bad = [s for s in settings if s not in SETTINGS]
    if bad:
        raise ValueError(f"unknown setting(s) {bad}; choose from {list(SETTINGS)}")
    methods = check_methods(methods)
    dataset, prof = canonical_dataset(dataset), get_profile(profile)
    rows, cfs, curves = [], {}, []
    for s in settings:
        model, info = bayes_model(dataset, s, prof, seed, device)
        rows.append({"dataset": dataset, "pair": "all", "method": "Classifier", "setting": s,
                     "metric": ACCURACY.name, "value": float(info["test_accuracy"]),
                     "seed": seed, "profile": prof.name, "repeat": -1})
        r, c = run_bayesian(dataset, s, prof, seed, device, methods, n_perturbations,
                            model_and_info=(model, info), scales=scales)
        rows += r
        cfs[s] = c
        curves += c["curves"]
    return BayesRun(tidy(rows), cfs, pd.DataFrame(curves))


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation (ddof 1; NaN for one repeat) and number of repeats of
    every (setting, method, metric); the classifiers' accuracy rows are left out."""
    df = results[results["method"] != "Classifier"]
    return (df.groupby(["setting", "method", "metric"], sort=False)["value"]
            .agg(mean="mean", std="std", n="count").reset_index())


def shape_checks(summary: pd.DataFrame) -> pd.DataFrame:
    """The paper's expected shape (``cflib/reference/expected.csv``, table ``bayes``) per
    setting, on :func:`summarise`'s means over repeats (ties count as holding)."""
    return _shape_checks(summary.rename(columns={"mean": "value"}), "bayes", by=["setting"])
