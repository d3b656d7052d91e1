"""FID and KID through torchmetrics, with a feature network trained on the dataset.

InceptionV3 weights cannot be downloaded where this book is built, and Inception
features of 28x28 digits are a poor fit anyway; torchmetrics accepts any module
with a ``num_features`` attribute, so both distances use :class:`cflib.models.FeatureNet`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

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


def _network(feature: nn.Module) -> nn.Module:
    return feature.net if isinstance(feature, FrozenFeatures) else feature


class _Given(nn.Module):
    """What torchmetrics calls its feature extractor, for features computed already: the
    input itself (``num_features`` tells torchmetrics the width, so it runs nothing)."""

    def __init__(self, num_features: int):
        super().__init__()
        self.num_features = num_features

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return features


@dataclass(frozen=True, eq=False)
class ImageFeatures:
    """One image set and its feature vectors, as :func:`fid_kid` consumes them: computed
    once, batch by batch (float64), by one feature network, and given to FID and KID
    alike.  A table compares one reference set of real images with every method's
    counterfactuals: :meth:`of` it once per pair, not once per method.  Build with
    ``ImageFeatures.of(images, feature)``."""

    images: torch.Tensor
    batches: tuple[torch.Tensor, ...]
    network: nn.Module          # the feature network that computed them (not its wrapper)

    @classmethod
    @torch.no_grad()
    def of(cls, images: torch.Tensor, feature: nn.Module,
           batch_size: int = 500) -> "ImageFeatures":
        """``feature``'s vectors of ``images`` in batches of ``batch_size``."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not isinstance(feature, FrozenFeatures):
            feature = FrozenFeatures(feature)
        dev = model_device(feature)
        return cls(images, tuple(feature(images[i:i + batch_size].to(dev))
                                 for i in range(0, len(images), batch_size)), feature.net)

    def __len__(self) -> int:
        return len(self.images)


def fid_kid(fake: torch.Tensor | ImageFeatures, real: torch.Tensor | ImageFeatures,
            feature: nn.Module, kid_subset_size: int = 1000, kid_subsets: int = 100,
            batch_size: int = 500, seed: int = 0) -> tuple[float, float]:
    """(FID, KID) between two image batches, KID unscaled (the table shows x 1e3).

    Either side may be given as :class:`ImageFeatures` of ``feature`` (computed once for
    several calls; the same numbers as its images, batched alike); images are put through
    ``feature`` in batches of ``batch_size``, once for both distances.  KID's subset size
    is capped by the smaller set; its random subsets are drawn with ``seed`` (the global
    RNG state is restored afterwards).  With fewer than 2 images per side the distances
    are undefined and a ValueError is raised, as it is for features of another network.
    """
    n = min(len(fake), len(real))
    if n < 2:
        raise ValueError(f"FID/KID need at least 2 images per side, got {len(fake)} and {len(real)}")
    for side in (fake, real):
        if isinstance(side, ImageFeatures) and side.network is not _network(feature):
            raise ValueError("ImageFeatures computed by another feature network than "
                             f"{type(_network(feature)).__name__} given to fid_kid")
    if not isinstance(feature, FrozenFeatures):
        feature = FrozenFeatures(feature)
    fake, real = (s if isinstance(s, ImageFeatures) else ImageFeatures.of(s, feature, batch_size)
                  for s in (fake, real))
    dev = model_device(feature)
    given = _Given(feature.num_features)
    fid = FrechetInceptionDistance(feature=given, normalize=False).to(dev)
    with warnings.catch_warnings():  # "will save all extracted features": small sets here
        warnings.simplefilter("ignore", UserWarning)
        kid = KernelInceptionDistance(feature=given, subsets=kid_subsets,
                                      subset_size=min(kid_subset_size, n), normalize=False).to(dev)
    for side, is_real in ((real, True), (fake, False)):
        for b in side.batches:
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
