"""FID and KID through torchmetrics, with a feature network trained on the dataset.

InceptionV3 weights cannot be downloaded where this book is built, and Inception
features of 28x28 digits are a poor fit anyway; torchmetrics accepts any module
with a ``num_features`` attribute, so both distances use :class:`cflib.models.FeatureNet`.
"""
from __future__ import annotations

import warnings

import torch
from torch import nn
from torchmetrics.image.fid import FrechetInceptionDistance
from torchmetrics.image.kid import KernelInceptionDistance

from cflib.metrics.spec import MetricSpec, register
from cflib.scopes import frozen, seeded
from cflib.tensors import model_device


class FrozenFeatures(nn.Module):
    """Wraps a feature network so that torchmetrics can never put it in training mode.

    The caller's network is not changed: each forward pass runs it inside
    :func:`cflib.scopes.frozen` (evaluation mode, no parameter gradients), which puts
    every module's mode and flag back as they were.
    """

    def __init__(self, net: nn.Module, num_features: int | None = None):
        super().__init__()
        self.net = net
        self.num_features = int(num_features or net.num_features)

    def train(self, mode: bool = True):  # keep BatchNorm statistics fixed
        return self

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with frozen(self.net):
            return self.net(x).double()


def fid_kid(fake: torch.Tensor, real: torch.Tensor, feature: nn.Module,
            kid_subset_size: int = 1000, kid_subsets: int = 100,
            batch_size: int = 500, seed: int = 0) -> tuple[float, float]:
    """(FID, KID) between two image batches, KID unscaled (the table shows x 1e3).

    KID's subset size is capped by the smaller set; its random subsets are drawn
    with ``seed`` (the global RNG state is restored afterwards).  With fewer than 2
    images per side the distances are undefined and a ValueError is raised.
    """
    n = min(len(fake), len(real))
    if n < 2:
        raise ValueError(f"FID/KID need at least 2 images per side, got {len(fake)} and {len(real)}")
    if not isinstance(feature, FrozenFeatures):
        feature = FrozenFeatures(feature)
    dev = model_device(feature)
    fid = FrechetInceptionDistance(feature=feature, normalize=False).to(dev)
    with warnings.catch_warnings():  # "will save all extracted features": small sets here
        warnings.simplefilter("ignore", UserWarning)
        kid = KernelInceptionDistance(feature=feature, subsets=kid_subsets,
                                      subset_size=min(kid_subset_size, n), normalize=False).to(dev)
    for imgs, is_real in ((real, True), (fake, False)):
        for i in range(0, len(imgs), batch_size):
            b = imgs[i:i + batch_size].to(dev)
            fid.update(b, real=is_real)
            kid.update(b, real=is_real)
    with seeded(seed):
        return float(fid.compute()), float(kid.compute()[0])


# -- specs (context: ``fid_kid``, the pair (FID, KID) of the counterfactuals) -------------
FID = MetricSpec("FID", lambda c: c.fid_kid[0], False,
                 "Fréchet distance to real target-class test images (our feature network)")
KID = MetricSpec("KID", lambda c: c.fid_kid[1], False,
                 "kernel distance to real target-class test images (our feature network)",
                 display_scale=1e3)
register(FID, KID)
