"""Classifiers: the C3LT CNN, the feature network used for FID/KID, the quantization
chapter's SmallCNN, and the judges of transfer validity (a residual network with batch
norm and global pooling, and a multilayer perceptron)."""
from __future__ import annotations

import torch
from torch import nn


class C3LTClassifier(nn.Module):
    """The classifier of the C3LT official code (MNIST and Fashion-MNIST).

    conv 1->32 5x5, ReLU, maxpool 2; conv 32->64 5x5, ReLU, maxpool 2;
    FC 1024->256, ReLU, dropout 0.5; FC 256->10.  :meth:`features` returns the
    64x4x4 spatial map used by CVE's cell search.
    """

    def __init__(self, n_classes: int = 10, dropout: float = 0.5):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(1024, 256), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(256, n_classes),
        )

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Spatial feature map (N, 64, 4, 4)."""
        return self.conv(x)

    def classify_features(self, f: torch.Tensor) -> torch.Tensor:
        """Logits from a (possibly edited) spatial feature map."""
        return self.head(f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x))


class FeatureNet(nn.Module):
    """A small CNN trained on the dataset itself; its penultimate layer feeds FID/KID.

    InceptionV3 weights cannot be downloaded on the machines that build this book,
    so the Frechet and kernel distances use this network's ``num_features``-d
    embedding instead.  It is deliberately a different architecture and seed than
    the classifier being explained.
    """

    def __init__(self, num_features: int = 128, n_classes: int = 10):
        super().__init__()
        self.num_features = num_features
        self.body = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(128, num_features), nn.ReLU(),
        )
        self.head = nn.Linear(num_features, n_classes)
        self.embed = True  # forward returns features (what torchmetrics expects)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) if self.embed else self.head(self.body(x))


class SmallCNN(nn.Module):
    """The FP classifier of the quantization chapter (Yahyati et al. 2026), in the public
    code's layout (``cfq/models.py``, ``SmallCNN``).

    ``features``: conv 1->32 3x3 p1, ReLU, maxpool 2; conv 32->64 3x3 p1, ReLU, maxpool 2.
    ``classifier``: flatten, FC 3136->64, ReLU, FC 64->n_classes.  No dropout and no batch
    norm, so :class:`cflib.quantization.QuantSmallCNN` reproduces it exactly with its
    quantizers off.  Inputs are cflib's [-1, 1] images (the code feeds [0, 1]).
    """

    def __init__(self, n_classes: int = 10, width: int = 64):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 7 * 7, width), nn.ReLU(), nn.Linear(width, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class _ResidualBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out),
        )
        self.skip = (nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class ResNetJudge(nn.Module):
    """A judge of another convolutional family than the explained C3LT CNN: a small
    residual network (a 3x3 stem of 16 channels, two residual blocks of 32 and 64 channels
    at stride 2, batch norm throughout, global average pooling, one linear layer).  No max
    pooling, no fully connected hidden layer, no dropout."""

    def __init__(self, n_classes: int = 10):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            _ResidualBlock(16, 32, 2), _ResidualBlock(32, 64, 2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(64, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class MLPJudge(nn.Module):
    """A judge of a non-convolutional family: a multilayer perceptron on the 784 pixels
    (784 -> 512 -> 256 -> 10, ReLU); it sees no locality or translation structure."""

    def __init__(self, n_classes: int = 10, hidden: tuple[int, int] = (512, 256)):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(784, hidden[0]), nn.ReLU(),
            nn.Linear(hidden[0], hidden[1]), nn.ReLU(), nn.Linear(hidden[1], n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
