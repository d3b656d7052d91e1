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
  8x7x7 code, on the reference's [0, 1] scale with a linear output.
* ``"dense-<k>"`` (:class:`DenseAutoencoder`): a fully connected autoencoder
  (pixels-256-k-256-pixels, ReLU), the dense class autoencoders with a small code used
  in the PSCE author's related code (k = 20 there).

Outputs end in tanh (every image of the project lives in [-1, 1]), but for the
reference class autoencoder's linear output.  Which one scores IM1 was chosen on
validation data (the chapters' protocol notes).

:class:`LatentAutoencoder` is the quantization chapter's: the autoencoder whose 32-d
latent the recourse solver searches.
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
    """``conv-8x7x7``: the reference class-specific autoencoder (8-channel 7x7 code).

    It works on its own scale, as the reference does: images mapped to [0, 1] and a
    linear output layer (no squashing), mapped back to [-1, 1].  With a tanh output on
    [-1, 1] its training collapses to the all-background image (the output saturates at
    -1, where its gradient vanishes), which is what the book's first search measured.
    """

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
            nn.Conv2d(16, in_channels, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder((x + 1) / 2)) * 2 - 1


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


class LatentAutoencoder(nn.Module):
    """The conv autoencoder with a 32-d latent of the quantization chapter's recourse solver.

    The public code's layout (``cfq/models.py``, ``ConvAutoencoder``):
    encoder conv 1->16 3x3 s2 p1, ReLU; conv 16->32 3x3 s2 p1, ReLU; FC 1568->32;
    decoder FC 32->1568; convT 32->16 4x4 s2 p1, ReLU; convT 16->1 4x4 s2 p1.  The
    code's sigmoid becomes tanh, since cflib's images live in [-1, 1].  ``channels`` and
    ``image_size`` (a multiple of 4) let the same layout take 3x32x32 images.

    ``code_mean`` / ``code_std`` are the per-dimension mean and standard deviation of
    the training codes (buffers, so the weight cache holds them; NaN until
    :meth:`fit_latent_stats`).  The solver searches in the standardised latent
    ``u = (z - mean) / std`` (the book's deviation (b) of the quantization chapter).
    """

    def __init__(self, latent_dim: int = 32, channels: int = 1, image_size: int = 28):
        super().__init__()
        if image_size % 4:
            raise ValueError(f"image_size must be a multiple of 4 (two stride-2 stages), "
                             f"got {image_size}")
        s = image_size // 4
        self.latent_dim, self._grid = int(latent_dim), s
        self.encoder_conv = nn.Sequential(
            nn.Conv2d(channels, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        )
        self.encoder_fc = nn.Linear(32 * s * s, latent_dim)
        self.decoder_fc = nn.Linear(latent_dim, 32 * s * s)
        self.decoder_conv = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(16, channels, 4, stride=2, padding=1), nn.Tanh(),
        )
        self.register_buffer("code_mean", torch.full((latent_dim,), float("nan")))
        self.register_buffer("code_std", torch.full((latent_dim,), float("nan")))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Codes ``z`` (N, latent_dim) of images in [-1, 1]."""
        return self.encoder_fc(self.encoder_conv(x).flatten(1))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Images in [-1, 1] from codes ``z``."""
        h = self.decoder_fc(z).view(len(z), 32, self._grid, self._grid)
        return self.decoder_conv(h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    # -- the standardised latent ----------------------------------------------------------
    @property
    def stats_fitted(self) -> bool:
        """True once :meth:`fit_latent_stats` has set finite statistics."""
        return bool(torch.isfinite(self.code_mean).all() and torch.isfinite(self.code_std).all()
                    and (self.code_std > 0).all())

    def _check_stats(self) -> None:
        if not self.stats_fitted:
            raise ValueError("the autoencoder's latent statistics are unset; call "
                             "fit_latent_stats(x_train) on its training images")

    def standardise(self, z: torch.Tensor) -> torch.Tensor:
        """``u = (z - code_mean) / code_std``."""
        self._check_stats()
        return (z - self.code_mean) / self.code_std

    def destandardise(self, u: torch.Tensor) -> torch.Tensor:
        """``z = code_mean + code_std * u`` (the inverse of :meth:`standardise`)."""
        self._check_stats()
        return self.code_mean + self.code_std * u

    @torch.no_grad()
    def fit_latent_stats(self, x: torch.Tensor, batch_size: int = 1024) -> "LatentAutoencoder":
        """Set ``code_mean`` / ``code_std`` to the per-dimension mean and (population)
        standard deviation of the codes of ``x`` (std floored at 1e-6)."""
        was = self.training
        self.eval()
        dev = self.code_mean.device
        z = torch.cat([self.encode(x[i:i + batch_size].to(dev))
                       for i in range(0, len(x), batch_size)])
        self.train(was)
        self.code_mean.copy_(z.mean(0))
        self.code_std.copy_(z.std(0, unbiased=False).clamp_min(1e-6))
        return self
