"""Shared fixtures: tiny synthetic data and a small classifier trained on it.

Two well-separated classes of 28x28 images in [-1, 1]: class 0 has a bright
vertical bar on the left, class 1 on the right (labels 0 and 1 of a 10-way head).
"""
from __future__ import annotations

import pytest
import torch

# The test tensors are tiny: one intra-op thread is as fast as two, and two OpenMP
# threads spinning against any other process on a 2-core machine run 20x slower.
torch.set_num_threads(1)


def make_bars(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    x = torch.full((n, 1, 28, 28), -1.0)
    x += 0.1 * torch.rand(n, 1, 28, 28, generator=g)
    for i in range(n):
        c0 = 4 + int(torch.randint(0, 4, (1,), generator=g)) + (14 if y[i] == 1 else 0)
        x[i, 0, 4:24, c0:c0 + 4] = 0.9
    return x.clamp(-1, 1), y


@pytest.fixture(scope="session")
def bars():
    """(x, y): 256 synthetic images of the two bar classes."""
    return make_bars(256)


@pytest.fixture(scope="session")
def tiny_classifier(bars):
    """A C3LTClassifier trained to tell the two bar classes apart (accuracy ~1)."""
    from cflib.models import C3LTClassifier
    from cflib.training import train_classifier

    torch.manual_seed(0)
    model = C3LTClassifier()
    x, y = bars
    train_classifier(model, x, y, epochs=3, lr=1e-3, batch_size=32, seed=0)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """An empty weight cache for one test."""
    monkeypatch.setenv("CFLIB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def small_cnn_bars(bars):
    """The quantization chapter's SmallCNN trained on the bars (frozen, eval mode)."""
    from cflib.models import SmallCNN
    from cflib.training import train_classifier

    torch.manual_seed(0)
    model = SmallCNN()
    x, y = bars
    train_classifier(model, x, y, epochs=2, lr=1e-3, batch_size=32, seed=0, weight_decay=1e-4)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


@pytest.fixture(scope="session")
def latent_ae_bars(bars):
    """A LatentAutoencoder trained on the bars, with fitted latent statistics."""
    from cflib.models import LatentAutoencoder
    from cflib.training import train_autoencoder

    torch.manual_seed(0)
    ae = LatentAutoencoder()
    x, _ = bars
    train_autoencoder(ae, x, epochs=4, lr=3e-3, batch_size=32, seed=0)
    ae.fit_latent_stats(x)
    for p in ae.parameters():
        p.requires_grad_(False)
    return ae.eval()
