"""Convolutional autoencoders for IM1 / IM2 (Van Looveren & Klaise 2019).

The architecture follows the public reference setup (alibi's MNIST autoencoder,
used by Schut et al.): two 3x3 conv layers of 16 channels and a max-pool down to a
1-channel 14x14 code, mirrored by an upsampling decoder; tanh output for [-1, 1].
"""
from __future__ import annotations

import torch
from torch import nn


class ConvAutoencoder(nn.Module):
    def __init__(self, channels: int = 16):
        super().__init__()
        c = channels
        self.encoder = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c, 1, 3, padding=1),
        )
        self.decoder = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, 1, 3, padding=1), nn.Tanh(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))
