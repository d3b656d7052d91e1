"""Autoencoders for IM1 / IM2 (Van Looveren & Klaise 2019) and for the methods' loss terms.

Three architectures, named by their code (:data:`AE_ARCHS`, :func:`make_autoencoder`):

* ``"conv-1x14x14"`` (:class:`ConvAutoencoder`): the all-class autoencoder of the
  public reference evaluation (Schut et al., ``uces/im_evaluation.py``,
  ``_MnistAllClassesAE``): two 3x3 conv layers of 16 channels and a max-pool down to a
  1-channel 14x14 code, mirrored by an upsampling decoder.  A wide code: it
  reconstructs any digit, which is what IM2's all-class AE and CEM's / PSCE's
  manifold terms need.
* ``"conv-8x7x7"`` (:class:`ClassConvAutoencoder`): the reference's *class-specific*
  autoencoder (``_MnistClassSpecificAE``): 16 then 8 channels, two max-pools, an
  8x7x7 code.
* ``"dense-<k>"`` (:class:`DenseAutoencoder`): a fully connected autoencoder
  (pixels-256-k-256-pixels, ReLU), the dense class autoencoders with a small code used
  in the PSCE author's related code (k = 20 there).

Outputs end in tanh: every image of the project lives in [-1, 1].  Which one scores
IM1 was chosen on validation data (``cflib.tuning``, the chapters' protocol notes).
"""
from __future__ import annotations

import math

import torch
from torch import nn


class ConvAutoencoder(nn.Module):
    """``conv-1x14x14``: the reference all-class autoencoder (1-channel 14x14 code)."""

    def __init__(self, channels: int = 16, in_channels: int = 1):
        super().__init__()
        c = channels
        self.encoder = nn.Sequential(
            nn.Conv2d(in_channels, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c, 1, 3, padding=1),
        )
        self.decoder = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, in_channels, 3, padding=1), nn.Tanh(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


class ClassConvAutoencoder(nn.Module):
    """``conv-8x7x7``: the reference class-specific autoencoder (8-channel 7x7 code)."""

    def __init__(self, in_channels: int = 1):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, padding=1),
        )
        self.decoder = nn.Sequential(
            nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
            nn.Conv2d(16, in_channels, 3, padding=1), nn.Tanh(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


class DenseAutoencoder(nn.Module):
    """``dense-<code>``: pixels -> 256 -> code -> 256 -> pixels, ReLU, tanh output."""

    def __init__(self, code: int = 20, image_shape=(1, 28, 28), hidden: int = 256):
        super().__init__()
        self.image_shape = tuple(image_shape)
        d = math.prod(self.image_shape)
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(d, hidden), nn.ReLU(),
                                     nn.Linear(hidden, code))
        self.decoder = nn.Sequential(nn.Linear(code, hidden), nn.ReLU(), nn.Linear(hidden, d),
                                     nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x)).view(len(x), *self.image_shape)


#: the architectures by name (``dense-<k>`` for any k)
AE_ARCHS = ("conv-1x14x14", "conv-8x7x7", "dense-<k>")


def make_autoencoder(arch: str, image_shape=(1, 28, 28)) -> nn.Module:
    """The autoencoder named ``arch`` (see :data:`AE_ARCHS`) for images of ``image_shape``."""
    c = image_shape[0]
    if arch == "conv-1x14x14":
        return ConvAutoencoder(in_channels=c)
    if arch == "conv-8x7x7":
        return ClassConvAutoencoder(in_channels=c)
    if arch.startswith("dense-") and arch[6:].isdigit() and int(arch[6:]) > 0:
        return DenseAutoencoder(int(arch[6:]), image_shape)
    raise ValueError(f"unknown autoencoder architecture {arch!r}; choose one of {AE_ARCHS}")
