"""The Bayesian-classifier table (Duell & Fan 2026): methods x metrics on MNIST.

:func:`run_bayesian` trains (or loads) the MC-dropout or BNN classifier, draws
Schut et al.'s queries (random test digits, a similar-digit target per image), runs
Wachter, BayesCF, ROAR, Schut and PSCE on them and scores every counterfactual:

- ``IM1``: Van Looveren & Klaise's ratio with the class autoencoders of the target and
  of the query image's *label* (as Schut et al.'s evaluation), mean over images;
- ``Implausibility``: mean L2 distance to the nearest 10 % of the target-class
  training images, mean over images;
- ``Robustness_Ratio_1e-3``: share of the valid counterfactuals still classified as
  the target after Gaussian noise of std 1e-3 on every weight (20 perturbed models);
- ``Validity``: share of counterfactuals whose posterior-mean decision is the target
  (a fraction in [0, 1]; the paper prints percentages);
- ``Seconds_per_CF``: wall time of the method divided by the number of images.

IM1 and Implausibility average over *all* counterfactuals, valid or not (as Schut et
al.); rows come per repeat (key ``repeat``), each repeat a fresh draw of queries.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import pandas as pd
import torch

from cflib import zoo
from cflib.data import canonical_dataset, load_split
from cflib.explainers.bayesian import METHODS, from_profile, schut_queries
from cflib.metrics import im1
from cflib.metrics.robustness import implausibility, robustness_ratio
from cflib.profiles import get_profile

log = logging.getLogger("cflib")

SETTINGS = {"mc_dropout": zoo.mc_dropout_classifier, "bnn": zoo.bnn_classifier}
PAIR = "schut_map"
QUERY_SEED = 12345  # Schut et al.'s repeats use seeds 12345 + repeat


def bayes_model(dataset: str = "mnist", setting: str = "mc_dropout", profile="standard",
                seed: int = 0, device="cpu"):
    """The cached classifier of a setting: (model, info)."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose one of {list(SETTINGS)}")
    return SETTINGS[setting](dataset, profile, seed, device)


def query_seed(seed: int, repeat: int) -> int:
    return QUERY_SEED + 1000 * seed + repeat


@torch.no_grad()
def im1_by_pair(x_cf: torch.Tensor, target: torch.Tensor, query: torch.Tensor, aes: dict,
                ) -> torch.Tensor:
    """Per-image IM1 with the autoencoders of each image's (query, target) classes."""
    out = torch.empty(len(x_cf))
    t, q = target.cpu(), query.cpu()
    for tc, qc in sorted({(int(a), int(b)) for a, b in zip(t, q)}):
        rows = ((t == tc) & (q == qc)).nonzero().squeeze(1)
        out[rows] = im1(x_cf[rows.to(x_cf.device)], aes[tc], aes[qc]).cpu()
    return out


def run_bayesian(dataset: str = "mnist", setting: str = "mc_dropout", profile="standard",
                 seed: int = 0, device="cpu", methods=METHODS, n_perturbations: int = 20,
                 model_and_info=None) -> tuple[list[dict], dict]:
    """Run the chapter's methods for one setting; returns ``(rows, cfs)``.

    ``rows``: tidy dicts (dataset, pair, method, setting, metric, value, seed, profile,
    repeat).  ``cfs``: ``{"queries": [(x, y, target, index) per repeat],
    "<method>": [Counterfactuals per repeat] (on the CPU), "model_info": info}``.
    ``model_and_info``: the setting's ``(model, info)`` when the caller already has it
    (else it is loaded from the cache).
    """
    dataset, prof = canonical_dataset(dataset), get_profile(profile)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    model, info = model_and_info or bayes_model(dataset, setting, prof, seed, device)
    log.info("%s classifier: test accuracy %.4f", setting, info.get("test_accuracy", float("nan")))
    x_train, y_train = load_split(dataset, "train")
    aes = {c: zoo.autoencoder(dataset, c, prof, seed, device=device)[0] for c in range(10)}
    explainers = {m: from_profile(m, model, dataset, prof, seed) for m in methods}
    rows: list[dict] = []
    cfs: dict = {"queries": [], "model_info": info, **{m: [] for m in methods}}
    base = {"dataset": dataset, "pair": PAIR, "setting": setting, "seed": seed,
            "profile": prof.name}
    for r in range(prof.bayes_repeats):
        qs = query_seed(seed, r)
        x, y, t, idx = schut_queries(dataset, prof.bayes_n_images, qs)
        cfs["queries"].append((x, y, t, idx))
        for m, ex in explainers.items():
            log.info("%s / %s: repeat %d, %d images", setting, m, r, len(x))
            cf = ex.explain(x, t, seed=qs)
            xc, tc = cf.x_cf, cf.target
            values = {
                "IM1": im1_by_pair(xc, tc, y, aes).mean().item(),
                "Implausibility": implausibility(xc, tc, x_train, y_train).mean().item(),
                "Robustness_Ratio_1e-3": robustness_ratio(model, xc, tc, 1e-3,
                                                          n_perturbations, seed=qs),
                "Validity": cf.validity,
                "Seconds_per_CF": cf.seconds_per_cf,
            }
            rows += [{**base, "method": m, "metric": k, "value": float(v), "repeat": r}
                     for k, v in values.items()]
            cfs[m].append(cf.cpu())
    return rows, cfs


DEFAULT_SCALES = (0.0, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)


def perturbation_curve(model, cfs: dict, setting: str, scales=DEFAULT_SCALES,
                       n_perturbations: int = 20, seed: int = 0) -> list[dict]:
    """Validity against the scale of weight noise, for the counterfactuals of
    :func:`run_bayesian`: rows (setting, method, repeat, scale, validity) to plot."""
    from cflib.metrics.robustness import validity_under_perturbation

    dev = next(model.parameters()).device
    rows = []
    for m in METHODS:
        for r, cf in enumerate(cfs.get(m, [])):
            curve = validity_under_perturbation(model, cf.x_cf.to(dev), cf.target.to(dev),
                                                scales, n_perturbations, seed)
            rows += [{"setting": setting, "method": m, "repeat": r, "scale": s, "validity": v}
                     for s, v in curve.items()]
    return rows


# -- the chapter: both settings, tidy results, spread over repeats ---------------------------
@dataclass
class BayesRun:
    """What :func:`run_bayesian_table` returns.

    ``results``: tidy rows (one per setting, method, metric and repeat; plus the
    classifiers' ``Accuracy`` with ``method = "Classifier"``); ``counterfactuals``:
    ``{setting: cfs}`` as returned by :func:`run_bayesian`; ``curves``: validity
    against weight-noise scale (setting, method, repeat, scale, validity).
    """

    results: pd.DataFrame
    counterfactuals: dict
    curves: pd.DataFrame


COLUMNS = ["dataset", "pair", "method", "setting", "metric", "value", "seed", "profile",
           "repeat"]


def run_bayesian_table(dataset: str = "mnist", settings=tuple(SETTINGS), profile="standard",
                       seed: int = 0, device="cpu", methods=METHODS,
                       n_perturbations: int = 20, scales=DEFAULT_SCALES) -> BayesRun:
    """Run :func:`run_bayesian` for every setting and :func:`perturbation_curve` on its
    counterfactuals; returns a :class:`BayesRun`."""
    settings = list(settings)
    bad = [s for s in settings if s not in SETTINGS]
    if bad:
        raise ValueError(f"unknown setting(s) {bad}; choose from {list(SETTINGS)}")
    dataset, prof = canonical_dataset(dataset), get_profile(profile)
    rows, cfs, curves = [], {}, []
    for s in settings:
        model, info = bayes_model(dataset, s, prof, seed, device)
        rows.append({"dataset": dataset, "pair": "all", "method": "Classifier", "setting": s,
                     "metric": "Accuracy", "value": float(info["test_accuracy"]),
                     "seed": seed, "profile": prof.name, "repeat": -1})
        r, c = run_bayesian(dataset, s, prof, seed, device, methods, n_perturbations,
                            model_and_info=(model, info))
        rows += r
        cfs[s] = c
        curves += perturbation_curve(model, c, s, scales, n_perturbations, seed)
    return BayesRun(pd.DataFrame(rows)[COLUMNS], cfs, pd.DataFrame(curves))


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation (ddof 1; NaN for one repeat) and number of repeats of
    every (setting, method, metric); the classifiers' accuracy rows are left out."""
    df = results[results["method"] != "Classifier"]
    out = (df.groupby(["setting", "method", "metric"], sort=False)["value"]
           .agg(mean="mean", std="std", n="count").reset_index())
    return out


#: The paper's expected shape: (metric, direction) where PSCE should be the best method.
PSCE_CHECKS = (("IM1", "lower"), ("Robustness_Ratio_1e-3", "higher"))


def shape_checks(summary: pd.DataFrame, method: str = "PSCE", checks=PSCE_CHECKS) -> pd.DataFrame:
    """Per setting, is ``method`` the best on each metric of ``checks`` (means over repeats,
    ties count as holding)?  ``summary`` is :func:`summarise`'s output."""
    rows = []
    for setting, d in summary.groupby("setting", sort=False):
        means = d.set_index(["method", "metric"])["mean"]
        for metric, direction in checks:
            if (method, metric) not in means:
                continue
            others = means.xs(metric, level="metric").drop(method, errors="ignore").dropna()
            if others.empty:
                continue
            best = others.idxmin() if direction == "lower" else others.idxmax()
            v, b = means[(method, metric)], others[best]
            holds = v <= b if direction == "lower" else v >= b
            rows.append({"setting": setting,
                         "expectation": f"{metric}: {method} {'lowest' if direction == 'lower' else 'highest'}",
                         method: v, "best other": f"{best} ({b:.4g})", "holds": bool(holds)})
    return pd.DataFrame(rows)
