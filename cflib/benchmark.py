"""Run counterfactual methods over class pairs and score them: the tidy results table.

One long table with columns ``dataset, pair, method, setting, metric, value, seed,
profile``; the book's tables are pivots of it.  Metric names follow the papers:
``IM1, IM2, FID, KID, AUPC_target, AUPC_query, COUT, Proximity, Validity,
seconds_per_cf`` (IM2 and KID unscaled; the report applies the tables' x10 and x1e3).
"""
from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import nn

from cflib import zoo
from cflib.data import CF_PAIRS, canonical_dataset, check_pair, class_subset, load_split, pair_label, parse_pair
from cflib.explainers.base import Counterfactuals, Explainer
from cflib.metrics import FrozenFeatures, aupc, fid_kid, im1, im2, proximity, validity
from cflib.metrics.aupc import AUPCResult
from cflib.profiles import Profile, get_profile

log = logging.getLogger("cflib")

C3LT_METRICS = ["IM1", "IM2", "FID", "KID", "AUPC_target", "AUPC_query", "COUT",
                "Proximity", "Validity", "seconds_per_cf"]
COLUMNS = ["dataset", "pair", "method", "setting", "metric", "value", "seed", "profile"]

#: method name as the papers spell it -> module with ``from_profile``
METHOD_MODULES = {
    "Original Data": "cflib.explainers.original",
    "Adv. Attack": "cflib.explainers.adversarial",
    "CEM": "cflib.explainers.cem",
    "CVE": "cflib.explainers.cve",
    "ExpGAN": "cflib.explainers.expgan",
    "C3LT": "cflib.explainers.c3lt",
}
C3LT_METHODS = list(METHOD_MODULES)


def available_methods() -> list[str]:
    """The C3LT-table methods whose module is present in this installation."""
    out = []
    for name, mod in METHOD_MODULES.items():
        try:
            importlib.import_module(mod)
            out.append(name)
        except ModuleNotFoundError:
            pass
    return out


def check_methods(methods) -> list[str]:
    methods = list(methods)
    unknown = [m for m in methods if m not in METHOD_MODULES]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {list(METHOD_MODULES)}")
    return methods


@dataclass
class EvalModels:
    """The networks every metric of one dataset needs."""

    dataset: str
    classifier: nn.Module
    classifier_info: dict
    autoencoders: dict            # class index -> AE, and None -> the all-class AE
    feature: FrozenFeatures
    feature_info: dict


def load_eval_models(dataset: str, classes, profile="standard", seed: int = 0,
                     device="cpu") -> EvalModels:
    """Classifier, class autoencoders for ``classes``, all-class AE and FID feature net."""
    dataset, prof = canonical_dataset(dataset), get_profile(profile)
    clf, clf_info = zoo.classifier(dataset, prof, seed, device)
    aes = {c: zoo.autoencoder(dataset, c, prof, seed, device)[0] for c in sorted(set(classes))}
    aes[None] = zoo.autoencoder(dataset, None, prof, seed, device)[0]
    feat, feat_info = zoo.feature_net(dataset, prof, seed, device)
    return EvalModels(dataset, clf, clf_info, aes, FrozenFeatures(feat), feat_info)


def split_reference(x_target: torch.Tensor, seed: int = 0):
    """Split real target-class test images into (FID/KID reference, Original Data pool).

    Disjoint halves, so the ``Original Data`` row is not scored against itself.
    """
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(x_target), generator=g)
    half = len(x_target) // 2
    return x_target[perm[:half]], x_target[perm[half:]]


def evaluate(cf: Counterfactuals, query_class: int, target_class: int, models: EvalModels,
             reference: torch.Tensor, aupc_steps: int = 50) -> tuple[dict, AUPCResult]:
    """Every metric of the C3LT table for one batch of counterfactuals of one pair."""
    x_cf = cf.x_cf
    ae_t, ae_q, ae_all = (models.autoencoders[target_class], models.autoencoders[query_class],
                          models.autoencoders[None])
    q = torch.full((len(cf),), query_class, dtype=torch.long)
    t = torch.full((len(cf),), target_class, dtype=torch.long)
    curves = aupc(models.classifier, cf.x, x_cf, q, t, steps=aupc_steps)
    fid, kid = fid_kid(x_cf, reference, models.feature)
    values = {
        "IM1": im1(x_cf, ae_t, ae_q).mean().item(),
        "IM2": im2(x_cf, ae_t, ae_all).mean().item(),
        "FID": fid,
        "KID": kid,
        "AUPC_target": curves.aupc_target.mean().item(),
        "AUPC_query": curves.aupc_query.mean().item(),
        "COUT": curves.cout.mean().item(),
        "Proximity": proximity(cf.x, x_cf).mean().item(),
        "Validity": validity(cf.pred_cf.cpu(), cf.target.cpu()).mean().item(),
        "seconds_per_cf": cf.seconds_per_cf,
    }
    return values, curves


@dataclass
class TableRun:
    """What one run of the C3LT table produced: tidy rows plus what the figures need."""

    results: pd.DataFrame
    counterfactuals: dict = field(default_factory=dict)   # (pair, method) -> Counterfactuals
    curves: dict = field(default_factory=dict)            # (pair, method) -> AUPCResult
    models: EvalModels | None = None


def build_explainer(method: str, classifier, dataset, pair, profile, seed, pool=None) -> Explainer:
    mod = importlib.import_module(METHOD_MODULES[method])
    if method == "Original Data":
        return mod.from_profile(classifier, dataset, pair, profile, seed, pool=pool)
    return mod.from_profile(classifier, dataset, pair, profile, seed)


def with_pair_means(df: pd.DataFrame) -> pd.DataFrame:
    """Append the mean over pairs (``pair = "mean"``) of every method and metric."""
    per_pair = df[df["pair"] != "mean"]
    keys = ["dataset", "method", "setting", "metric", "seed", "profile"]
    means = per_pair.groupby(keys, as_index=False, dropna=False)["value"].mean()
    means["pair"] = "mean"
    return pd.concat([per_pair, means[COLUMNS]], ignore_index=True)


def run_c3lt_table(dataset: str = "mnist", pairs=None, methods=None, profile="standard",
                   seed: int = 0, device="cpu", n_images: int | None = None) -> TableRun:
    """Run the methods of the C3LT table on each class pair and score every metric.

    Query images: the first ``n_images`` (seeded draw) of the query class of the
    test split; profile sizes decide the rest.  Returns a :class:`TableRun`.
    """
    dataset, prof = canonical_dataset(dataset), get_profile(profile)
    pairs = [check_pair(dataset, *parse_pair(p)) for p in (pairs or CF_PAIRS[dataset])]
    methods = check_methods(methods or available_methods())
    n_images = n_images if n_images is not None else prof.n_images
    classes = [c for p in pairs for c in p]
    models = load_eval_models(dataset, classes, prof, seed, device)
    x_test, y_test = load_split(dataset, "test")
    rows, cfs, curves = [], {}, {}
    common = {"dataset": dataset, "setting": "", "seed": seed, "profile": prof.name}
    rows.append({**common, "pair": "all", "method": "Classifier", "metric": "Accuracy",
                 "value": models.classifier_info["test_accuracy"]})
    for q, t in pairs:
        label = pair_label((q, t))
        xq, _ = class_subset(x_test, y_test, q, n_images, seed)
        xt, _ = class_subset(x_test, y_test, t)
        reference, pool = split_reference(xt, seed)
        for method in methods:
            log.info("%s %s: %s on %d images", dataset, label, method, len(xq))
            explainer = build_explainer(method, models.classifier, dataset, (q, t), prof, seed,
                                        pool=(pool, torch.full((len(pool),), t)))
            cf = explainer.explain(xq.to(device), t, seed=seed).cpu()
            values, curve = evaluate(cf, q, t, models, reference, prof.aupc_steps)
            rows += [{**common, "pair": label, "method": method, "metric": k, "value": v}
                     for k, v in values.items()]
            cfs[(label, method)] = cf
            curves[(label, method)] = curve
    df = pd.DataFrame(rows)
    acc = df[df["method"] == "Classifier"]
    df = pd.concat([acc, with_pair_means(df[df["method"] != "Classifier"])], ignore_index=True)
    return TableRun(df[COLUMNS], cfs, curves, models)
