"""The choices made on validation data, as constants the harness reads.

Every free hyperparameter the papers leave open is chosen by :mod:`cflib.bench.tuning` on
*validation pairs* that no table uses (MNIST 7->2, Fashion-MNIST 1->3) or on held-out
training images, never on the tables' test images; its evidence is in
``results/tuning/``, shown in the chapters, and a test keeps these constants equal to
the winners of that evidence.
"""
from __future__ import annotations

#: (query, target) pairs used for choices only; no table reports them
VALIDATION_PAIRS = {"mnist": (7, 2), "fmnist": (1, 3)}

#: the class-specific autoencoder architecture of IM1/IM2, chosen on the validation pairs
#: (MNIST 7->2, Fashion-MNIST 1->3) by ``python -m cflib.bench.tuning im_autoencoder``: the one
#: whose IM1 best separates real target-class from real query-class held-out training
#: images (``results/tuning/im_autoencoder.csv``; a test keeps the two in agreement)
IM_CLASS_AE = "dense-20"
#: the all-class autoencoder (IM2, CEM's and PSCE's loss terms): the reference one
ALL_CLASS_AE = "conv-1x14x14"

#: candidate overrides of ExpGANConfig (the other weights stay at their defaults: cls 3,
#: rec 10, GAN 0.1, consistency 10, count 10 with kappa 0.05, smoothness and entropy 0.5,
#: themselves inherited from an earlier search, re-examined here as "defaults")
EXPGAN_CANDIDATES: dict[str, dict] = {
    "defaults": {},
    "cls1": {"cls_weight": 1.0},
    "cls10": {"cls_weight": 10.0},
    "cls30": {"cls_weight": 30.0},
    "count3": {"count_weight": 3.0},
    "count30": {"count_weight": 30.0},
    "rec30": {"rec_weight": 30.0},
    "cls10-count3": {"cls_weight": 10.0, "count_weight": 3.0},
    "cls10-kappa0.1": {"cls_weight": 10.0, "kappa": 0.1},
    "gan0.03": {"gan_weight": 0.03},
}


#: the chosen candidate per dataset (``best_expgan`` of ``results/tuning/expgan.csv``, held-out
#: training images of the table's pairs; a test keeps the two in agreement)
EXPGAN_CHOICE = {"mnist": "gan0.03", "fmnist": "cls10"}


def expgan_weights(dataset: str) -> dict:
    """ExpGAN's loss weights for ``dataset``: the validation-pair choice, or none."""
    name = EXPGAN_CHOICE.get(dataset)
    return dict(EXPGAN_CANDIDATES[name]) if name else {}




#: Latent search's lambda (the weight of the pixel distance in REVISE's objective) per
#: dataset, chosen on the validation pair by ``python -m cflib.bench.tuning latent_search``
#: (``results/tuning/latent_search.csv``, ``best_latent_lambda``): among the lambdas with
#: validity >= 0.95, the one whose counterfactuals an independent classifier most often
#: assigns to the target (a test keeps the two in agreement)
LATENT_SEARCH_LAMBDA = {"mnist": 1.0, "fmnist": 3.0}


def latent_search_lambda(dataset: str) -> float:
    """Latent search's lambda for ``dataset`` (the validation-pair choice)."""
    return float(LATENT_SEARCH_LAMBDA[dataset])
