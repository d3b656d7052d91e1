"""Datasets, the C3LT class pairs and the data root.

Images are returned as float tensors of shape ``(N, 1, 28, 28)`` scaled to
[-1, 1] (the C3LT protocol), labels as ``int64``.  Files are read from the folder
named by the environment variable ``CFLIB_DATA`` (default: ``data/`` in the
project), in torchvision's layout (``MNIST/raw/...``, ``FashionMNIST/raw/...``).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import torch

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_ENV = "CFLIB_DATA"

_ALIASES = {
    "mnist": "mnist",
    "fmnist": "fmnist",
    "fashion_mnist": "fmnist",
    "fashion-mnist": "fmnist",
    "fashionmnist": "fmnist",
}

#: (query, target) class pairs of the C3LT paper (official code), per dataset.
CF_PAIRS: dict[str, list[tuple[int, int]]] = {
    "mnist": [(4, 9), (3, 8), (5, 6)],
    "fmnist": [(0, 2), (7, 9), (4, 6)],
}

CLASS_NAMES: dict[str, list[str]] = {
    "mnist": [str(i) for i in range(10)],
    "fmnist": ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"],
}

DATASET_TITLES = {"mnist": "MNIST", "fmnist": "Fashion-MNIST"}


def canonical_dataset(name: str) -> str:
    """Map a dataset name or alias to ``"mnist"`` or ``"fmnist"``."""
    key = str(name).lower().strip()
    if key not in _ALIASES:
        raise ValueError(
            f"unknown dataset {name!r}; choose one of 'mnist', 'fmnist' "
            f"(aliases: {sorted(_ALIASES)})"
        )
    return _ALIASES[key]


def data_root() -> Path:
    """The data root: ``$CFLIB_DATA`` or ``<project>/data``."""
    return Path(os.environ.get(DATA_ENV) or PROJECT_ROOT / "data").expanduser()


def check_pair(dataset: str, query: int, target: int) -> tuple[int, int]:
    """Validate a (query, target) class pair and return it as ints."""
    canonical_dataset(dataset)
    q, t = int(query), int(target)
    for c in (q, t):
        if not 0 <= c <= 9:
            raise ValueError(f"class {c} is not one of the 10 classes 0..9")
    if q == t:
        raise ValueError(
            f"pair ({q}, {t}): the query and target classes are equal; a "
            "counterfactual needs a target class different from the query class"
        )
    return q, t


def parse_pair(pair) -> tuple[int, int]:
    """Accept ``(4, 9)``, ``[4, 9]`` or ``"4->9"``."""
    if isinstance(pair, str):
        parts = pair.replace(" ", "").split("->")
        if len(parts) != 2:
            raise ValueError(f"cannot read pair {pair!r}; write it like '4->9'")
        return int(parts[0]), int(parts[1])
    q, t = pair
    return int(q), int(t)


def pair_label(pair) -> str:
    q, t = parse_pair(pair)
    return f"{q}->{t}"


def _torchvision_class(dataset: str):
    from torchvision import datasets

    return {"mnist": datasets.MNIST, "fmnist": datasets.FashionMNIST}[dataset]


@functools.lru_cache(maxsize=8)
def _load(dataset: str, train: bool, root: str) -> tuple[torch.Tensor, torch.Tensor]:
    cls = _torchvision_class(dataset)
    try:
        ds = cls(root=root, train=train, download=False)
    except RuntimeError:
        try:  # users elsewhere get the files from torchvision's download
            ds = cls(root=root, train=train, download=True)
        except Exception as err:  # offline, read-only, ...
            folder = Path(root) / cls.__name__ / "raw"
            raise FileNotFoundError(
                f"{DATASET_TITLES[dataset]} files not found in {folder} and the "
                f"download failed ({type(err).__name__}: {err}). Put the files there "
                f"in torchvision's layout or set {DATA_ENV} to the folder that holds "
                f"'{cls.__name__}/raw/'."
            ) from None
    x = ds.data.unsqueeze(1).float().div(127.5).sub(1.0)
    y = ds.targets.long().clone()
    return x, y


def load_split(dataset: str, split: str = "test") -> tuple[torch.Tensor, torch.Tensor]:
    """Images in [-1, 1], shape (N, 1, 28, 28), and labels of one split."""
    dataset = canonical_dataset(dataset)
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; use 'train' or 'test'")
    root = data_root()
    x, y = _load(dataset, split == "train", str(root))
    return x, y


def class_subset(x: torch.Tensor, y: torch.Tensor, classes, n: int | None = None,
                 seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The images of the given classes; ``n`` of them drawn with ``seed`` when set."""
    if isinstance(classes, int):
        classes = [classes]
    mask = torch.zeros_like(y, dtype=torch.bool)
    for c in classes:
        mask |= y == int(c)
    idx = mask.nonzero().squeeze(1)
    if n is not None and n < len(idx):
        g = torch.Generator().manual_seed(seed)
        idx = idx[torch.randperm(len(idx), generator=g)[:n]].sort().values
    return x[idx], y[idx]


def subsample(x: torch.Tensor, y: torch.Tensor, n: int | None, seed: int = 0):
    """A seeded random subset of ``n`` examples (all when ``n`` is None)."""
    if n is None or n >= len(x):
        return x, y
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(x), generator=g)[:n]
    return x[idx], y[idx]
