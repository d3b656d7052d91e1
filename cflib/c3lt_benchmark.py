"""The C3LT table (Khorram & Fuxin 2022): methods x metrics over class pairs.

:func:`run_c3lt_table` builds every method of the table from the catalog
(:data:`cflib.explainers.METHODS`) for each class pair, explains the same query
images with each, and scores every counterfactual with the table's metric specs
(:data:`C3LT_METRICS`).  The result is the tidy table of :mod:`cflib.results`,
with the mean over pairs as ``pair = "mean"``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd
import torch
from torch import nn

from cflib import zoo
from cflib.data import (
    CF_PAIRS,
    canonical_dataset,
    check_pair,
    class_subset,
    load_split,
    pair_label,
    parse_pair,
)
from cflib.explainers import METHODS, Counterfactuals, get_method
from cflib.metrics import FrozenFeatures, aupc, fid_kid, im2, proximity
from cflib.metrics.aupc import AUPCResult
from cflib.metrics.spec import ACCURACY, IM1, SECONDS_PER_CF, VALIDITY, MetricSpec, register
from cflib.profiles import get_profile
from cflib.results import tidy, with_pair_means

log = logging.getLogger("cflib")

#: the rows of the C3LT table (the paper's rows, each of our reference rows and
#: variants beside the row it explains)
C3LT_METHODS = ["Original Data", "Query (unchanged)", "Adv. Attack", "CEM", "CEM (targeted)",
                "CVE", "CVE (receptive field)", "ExpGAN", "C3LT", "C3LT (reconstruction)"]
#: the rows the paper reports
PAPER_METHODS = ["Original Data", "Adv. Attack", "CEM", "CVE", "ExpGAN", "C3LT"]


@dataclass
class EvalModels:
    """The networks every metric of one dataset needs."""

    dataset: str
    classifier: nn.Module
    classifier_info: dict
    autoencoders: dict            # class index -> AE, and None -> the all-class AE
    feature: FrozenFeatures
    feature_info: dict


@dataclass
class PairContext:
    """One batch of counterfactuals of one pair, and what its metrics need.

    The insertion curves and the FID/KID pair are computed once, on first use, and
    shared by the metrics that read them.
    """

    cf: Counterfactuals
    query_class: int
    target_class: int
    models: EvalModels
    reference: torch.Tensor
    aupc_steps: int = 50
    seed: int = 0

    @cached_property
    def curves(self) -> AUPCResult:
        n = len(self.cf)
        q = torch.full((n,), self.query_class, dtype=torch.long)
        t = torch.full((n,), self.target_class, dtype=torch.long)
        return aupc(self.models.classifier, self.cf.x, self.cf.x_cf, q, t, steps=self.aupc_steps)

    @cached_property
    def fid_kid(self) -> tuple[float, float]:
        return fid_kid(self.cf.x_cf, self.reference, self.models.feature, seed=self.seed)

    @property
    def autoencoders(self) -> dict:
        return self.models.autoencoders

    @property
    def query_labels(self) -> torch.Tensor:
        return torch.full((len(self.cf),), self.query_class, dtype=torch.long)


#: the metrics of the C3LT table, declared once (IM2 and KID are stored unscaled;
#: ``display_scale`` is the paper's x10 and x1e3)
C3LT_METRICS: tuple[MetricSpec, ...] = register(
    IM1,
    MetricSpec("IM2", lambda c: im2(c.cf.x_cf, c.autoencoders[c.target_class],
                                    c.autoencoders[None]).mean().item(),
               False, "disagreement of the target-class and all-class AEs, over the L1 norm",
               display_scale=10.0),
    MetricSpec("FID", lambda c: c.fid_kid[0], False,
               "Fréchet distance to real target-class test images (our feature network)"),
    MetricSpec("KID", lambda c: c.fid_kid[1], False,
               "kernel distance to real target-class test images (our feature network)",
               display_scale=1e3),
    MetricSpec("AUPC_target", lambda c: c.curves.aupc_target.mean().item(), True,
               "area under the target's softmax as CF pixels are pasted into the query"),
    MetricSpec("AUPC_query", lambda c: c.curves.aupc_query.mean().item(), False,
               "area under the query class's softmax along the same path"),
    MetricSpec("COUT", lambda c: c.curves.cout.mean().item(), True, "AUPC_target − AUPC_query"),
    MetricSpec("Proximity", lambda c: proximity(c.cf.x, c.cf.x_cf).mean().item(), False,
               "mean absolute pixel change on the [−1, 1] scale"),
    VALIDITY,
    SECONDS_PER_CF,
)
#: what CVE reports besides the table's metrics (computed only where the method has them)
CVE_METRICS: tuple[MetricSpec, ...] = register(
    MetricSpec("Edits", lambda c: c.cf.meta["mean_edits"], False,
               "CVE: feature cells replaced, mean over queries", needs="mean_edits"),
    MetricSpec("Feature_Validity", lambda c: c.cf.meta["feature_validity"], True,
               "CVE: share of queries whose edited feature map the head assigns to the target",
               needs="feature_validity"),
)


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


def evaluate(ctx: PairContext, metrics=C3LT_METRICS + CVE_METRICS) -> dict[str, float]:
    """Every metric of ``metrics`` that applies to one batch of counterfactuals of one pair."""
    return {spec.name: spec(ctx) for spec in metrics if spec.applies(ctx)}


@dataclass
class TableRun:
    """What one run of the C3LT table produced: tidy rows plus what the figures need."""

    results: pd.DataFrame
    counterfactuals: dict = field(default_factory=dict)   # (pair, method) -> Counterfactuals
    curves: dict = field(default_factory=dict)            # (pair, method) -> AUPCResult
    models: EvalModels | None = None

    @property
    def pairs(self) -> list[str]:
        return [p for p in dict.fromkeys(self.results["pair"]) if p not in ("all", "mean")]

    @property
    def methods(self) -> list[str]:
        return list(dict.fromkeys(self.results.loc[self.results["method"] != "Classifier",
                                                   "method"]))

    @property
    def classifier_accuracy(self) -> float:
        return float(self.results.loc[self.results["method"] == "Classifier", "value"].item())


def check_methods(methods) -> list[str]:
    """The method names, each checked against the catalog."""
    methods = list(methods)
    for m in methods:
        get_method(m)
    return methods


def run_c3lt_table(dataset: str = "mnist", pairs=None, methods=None, profile="standard",
                   seed: int = 0, device="cpu", n_images: int | None = None) -> TableRun:
    """Run the methods of the C3LT table on each class pair and score every metric.

    Query images: ``n_images`` (seeded draw) of the query class of the test split;
    profile sizes decide the rest.  Returns a :class:`TableRun`.
    """
    dataset, prof = canonical_dataset(dataset), get_profile(profile)
    pairs = [check_pair(dataset, *parse_pair(p)) for p in (pairs or CF_PAIRS[dataset])]
    methods = check_methods(methods or C3LT_METHODS)
    n_images = n_images if n_images is not None else prof.n_images
    classes = [c for p in pairs for c in p]
    models = load_eval_models(dataset, classes, prof, seed, device)
    x_test, y_test = load_split(dataset, "test")
    rows, cfs, curves = [], {}, {}
    common = {"dataset": dataset, "setting": "", "seed": seed, "profile": prof.name}
    rows.append({**common, "pair": "all", "method": "Classifier", "metric": ACCURACY.name,
                 "value": models.classifier_info["test_accuracy"]})
    for q, t in pairs:
        label = pair_label((q, t))
        xq, _ = class_subset(x_test, y_test, q, n_images, seed)
        xt, _ = class_subset(x_test, y_test, t)
        reference, pool = split_reference(xt, seed)
        for method in methods:
            log.info("%s %s: %s on %d images", dataset, label, method, len(xq))
            # Original Data draws from the half of the real target images that FID/KID
            # do not use as their reference
            data = ({"pool": (pool, torch.full((len(pool),), t))}
                    if method == "Original Data" else {})
            explainer = METHODS[method].from_profile(
                models.classifier, dataset=dataset, profile=prof, seed=seed, pair=(q, t), **data)
            cf = explainer.explain(xq.to(device), t, seed=seed).cpu()
            ctx = PairContext(cf, q, t, models, reference, prof.aupc_steps, seed)
            rows += [{**common, "pair": label, "method": method, "metric": k, "value": v}
                     for k, v in evaluate(ctx).items()]
            cfs[(label, method)] = cf
            curves[(label, method)] = ctx.curves
    df = pd.DataFrame(rows)
    acc = df[df["method"] == "Classifier"]
    df = pd.concat([acc, with_pair_means(df[df["method"] != "Classifier"])], ignore_index=True)
    return TableRun(tidy(df), cfs, curves, models)
