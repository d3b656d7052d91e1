"""Datasets, the C3LT class pairs and the data root.

Images are returned as float tensors of shape ``(N, 1, 28, 28)`` scaled to
[-1, 1] (the C3LT protocol), labels as ``int64``.  Files are read from the folder
named by the environment variable ``CFLIB_DATA`` (default: ``data/`` in the
project), in torchvision's layout (``MNIST/raw/...``, ``FashionMNIST/raw/...``).
Nothing is downloaded at run time: a missing file is a FileNotFoundError naming where
it was looked for and ``CFLIB_DATA`` (:func:`check_data` finds one before any work).
When the data root holds a ``SHA256SUMS``, every file read must be listed in it and
match its checksum.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import torch

from cflib.env import folder

PROJECT_ROOT = Path(__file__).resolve().parents[2]
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
#: (C, H, W) of each dataset's images
IMAGE_SHAPES = {"mnist": (1, 28, 28), "fmnist": (1, 28, 28)}


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
    """The data root: ``$CFLIB_DATA`` (checked: not empty, not a file) or ``<project>/data``."""
    env = folder(DATA_ENV)
    return Path(env) if env else PROJECT_ROOT / "data"


def n_classes(dataset: str) -> int:
    """The number of classes of a dataset (read from its class names)."""
    return len(CLASS_NAMES[canonical_dataset(dataset)])


def check_pair(pair, n_classes: int) -> tuple[int, int]:
    """A (query, target) pair of two different classes of an ``n_classes``-way classifier
    (any form :func:`parse_pair` reads)."""
    q, t = parse_pair(pair)
    for c in (q, t):
        if not 0 <= c < n_classes:
            raise ValueError(f"class {c} of pair {q}->{t} is not a class of this classifier "
                             f"(0..{n_classes - 1})")
    if q == t:
        raise ValueError(f"pair ({q}, {t}): the query and target classes are equal; a "
                         "counterfactual needs a target class different from the query class")
    return q, t


def parse_pair(pair) -> tuple[int, int]:
    """Accept ``(4, 9)``, ``[4, 9]`` or ``"4->9"``."""
    if isinstance(pair, str):
        parts = pair.replace(" ", "").split("->")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"cannot read pair {pair!r}: two class numbers, written like "
                             "'4->9'")
        return int(parts[0]), int(parts[1])
    try:
        q, t = pair
        if any(isinstance(c, bool) or float(c) != int(c) for c in (q, t)):
            raise ValueError
        return int(q), int(t)
    except (TypeError, ValueError):
        raise ValueError(f"cannot read pair {pair!r}: two class numbers, written like "
                         "'4->9' or (4, 9)") from None


def pair_label(pair) -> str:
    q, t = parse_pair(pair)
    return f"{q}->{t}"


#: each dataset's folder in the data root (torchvision's names)
FOLDERS = {"mnist": "MNIST", "fmnist": "FashionMNIST"}

_FILES_READ: set[str] = set()
_N = {True: 60000, False: 10000}


def files_read() -> list[str]:
    """The data files (relative to the data root) this process has read."""
    return sorted(_FILES_READ)


def _raw_files(dataset: str, train: bool) -> tuple[str, str]:
    folder = FOLDERS[dataset]
    prefix = "train" if train else "t10k"
    return (f"{folder}/raw/{prefix}-images-idx3-ubyte", f"{folder}/raw/{prefix}-labels-idx1-ubyte")


def _missing(root: Path, dataset: str, files: list[str]) -> FileNotFoundError:
    where = root / FOLDERS[dataset] / "raw"
    env = f"{DATA_ENV}={root}" if folder(DATA_ENV) else f"{DATA_ENV} unset: the default {root}"
    return FileNotFoundError(
        f"{DATASET_TITLES[dataset]} files not found: {files} in {root} ({env}); cflib never "
        f"downloads them: put them in {where} (torchvision's layout) or set {DATA_ENV} to the "
        f"folder that holds '{FOLDERS[dataset]}/raw/'")


def check_data(datasets=("mnist", "fmnist"), splits=("train", "test")) -> Path:
    """Fail before any work when a dataset's files are not in the data root.

    Checks, without reading the files: the data root exists, each file of ``datasets``
    and ``splits`` is there, and, where the root holds a ``SHA256SUMS``, that it lists
    each of them (its checksums are compared when a file is read).  A missing folder or
    file is a FileNotFoundError naming where it was looked for and ``CFLIB_DATA``; an
    unlisted file a ValueError naming it and ``SHA256SUMS``.  Returns the data root.
    """
    datasets = [datasets] if isinstance(datasets, str) else list(datasets)
    splits = [splits] if isinstance(splits, str) else list(splits)
    for s in splits:
        if s not in ("train", "test"):
            raise ValueError(f"unknown split {s!r}; use 'train' or 'test'")
    root = data_root()
    names = [canonical_dataset(d) for d in datasets]
    if not root.is_dir():
        env = f"{DATA_ENV}={root}" if folder(DATA_ENV) else f"{DATA_ENV} unset: the default"
        raise FileNotFoundError(
            f"the data root {root} does not exist ({env}); set {DATA_ENV} to the folder that "
            f"holds {sorted({FOLDERS[d] + '/raw/' for d in names})} (cflib never downloads "
            "the datasets)")
    sums = checksums(root)
    for d in names:
        files = [f for s in splits for f in _raw_files(d, s == "train")]
        missing = [f for f in files if not (root / f).is_file()]
        if missing:
            raise _missing(root, d, missing)
        if sums:
            for f in files:
                _listed(root, sums, f)
    return root


def _listed(root: Path, sums: dict[str, str], rel: str) -> str:
    """The checksum ``SHA256SUMS`` gives ``rel``; a ValueError when it lists no such file."""
    if rel not in sums:
        raise ValueError(f"{root / rel} is not listed in {root / 'SHA256SUMS'}, which lists "
                         f"{len(sums)} other file(s): a file the checksums do not cover is not "
                         f"read; add its line ('<sha256>  {rel}') or remove SHA256SUMS")
    return sums[rel]


def checksums(root: Path) -> dict[str, str]:
    """The data root's ``SHA256SUMS`` (``<sha256>  <file>`` per line) as ``{file: sha256}``;
    {} without the file.  A malformed line is a ValueError naming the file and the line."""
    f = Path(root) / "SHA256SUMS"
    if not f.exists():
        return {}
    out = {}
    for i, line in enumerate(f.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-fA-F]{64}", parts[0]):
            raise ValueError(f"{f}, line {i}: {line!r} is not '<sha256 in 64 hex digits>  "
                             "<file>'; fix or remove the line")
        out[parts[1].strip().lstrip("*")] = parts[0].lower()
    return out


#: the sha256 of the first 4 KiB (the header and the first images or labels) of each
#: original file: which dataset and split a file holds, whatever folder it lies in
ORIGINS = {
    "ca71e055028bc42661b17888bf5251971daebdfc238aee0899c301267a06e752": ("fmnist", "test images"),
    "8999b541bcbea5efb9757b9d17f43ab70168c4a92e7c16282fba07661af937c1": ("fmnist", "test labels"),
    "73fda24d90a4689a4c45b155ad364b53ea5d732a41b04d590a3d6d712609ff37": ("fmnist", "training images"),
    "f99483a0d2b949c8bfdeb4f6c2d56ed3dd034a9f3edf615de27d8870afaa154b": ("fmnist", "training labels"),
    "52a0245ca77e0d859ff5bde00ae4a4a117ccc7cfa00efebad7428d99d7b959ad": ("mnist", "test images"),
    "465726f2d32f64dfc7ecfba9111cb0abb173b9edee1243e98a4514c0982f27d0": ("mnist", "test labels"),
    "3578fc65cebc63149ee771a0147cbe8bcc9e0f1d677744dffbad5aced2c36f89": ("mnist", "training images"),
    "026c1f9224bc82a869462d40a1abb07396a8b1247f3c3f459d692f56ed536a21": ("mnist", "training labels"),
}


def origin(path) -> tuple[str, str] | None:
    """``(dataset, what)`` of an original MNIST or Fashion-MNIST file (by its first 4 KiB),
    or None for any other file (a user's own data is not judged)."""
    import hashlib

    with open(path, "rb") as f:
        head = f.read(4096)
    return ORIGINS.get(hashlib.sha256(head).hexdigest())


def _check_origin(root: Path, dataset: str, files) -> None:
    """A file of the other dataset under this one's name (Fashion-MNIST's files under
    ``MNIST/raw/``, say) is a ValueError naming what the file holds; checked with or
    without ``SHA256SUMS``."""
    for rel in files:
        got = origin(root / rel)
        if got is not None and got[0] != dataset:
            raise ValueError(f"{root / rel} holds {DATASET_TITLES[got[0]]}'s {got[1]} (its "
                             f"header and first items are theirs), not "
                             f"{DATASET_TITLES[dataset]}'s: put each dataset's files in its own "
                             f"folder ({FOLDERS[got[0]]}/raw/ for these)")


def _read_idx(path: Path, magic: int, n: int, item: int, what: str) -> torch.Tensor:
    """The payload of an IDX file (MNIST's format), every size and header checked."""
    import numpy as np

    size = path.stat().st_size
    header = 16 if magic == 2051 else 8
    want = header + n * item
    if size != want:
        raise ValueError(f"{path} is truncated or corrupt: {size} bytes where the {what} "
                         f"file holds {want}; replace it with the original file")
    raw = np.fromfile(path, dtype=np.uint8)
    got_magic = int.from_bytes(raw[:4].tobytes(), "big")
    got_n = int.from_bytes(raw[4:8].tobytes(), "big")
    if got_magic != magic or got_n != n:
        raise ValueError(f"{path} is not an IDX {what} file of {n} items (header: magic "
                         f"{got_magic}, {got_n} items); replace it with the original file")
    return torch.from_numpy(raw[header:].copy())


@functools.lru_cache(maxsize=8)
def _load(dataset: str, train: bool, root: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Images (N, 1, 28, 28) in [-1, 1] and labels of one split, checked: file sizes and
    headers always, contents against ``SHA256SUMS`` when the data root has one (which
    must then list both files), labels in 0..9."""
    import hashlib

    root_p = Path(root)
    img_rel, lab_rel = _raw_files(dataset, train)
    missing = [f for f in (img_rel, lab_rel) if not (root_p / f).is_file()]
    if missing:
        raise _missing(root_p, dataset, missing)
    _check_origin(root_p, dataset, (img_rel, lab_rel))
    sums = checksums(root_p)
    for rel in (img_rel, lab_rel):
        if sums:   # a SHA256SUMS that does not list a file read is an error, not a pass
            want = _listed(root_p, sums, rel)
            got = hashlib.sha256((root_p / rel).read_bytes()).hexdigest()
            if got != want:
                raise ValueError(f"{root_p / rel} does not match its checksum in "
                                 f"{root_p / 'SHA256SUMS'} (a changed or corrupt file); "
                                 "replace it with the original file")
    n = _N[train]
    images = _read_idx(root_p / img_rel, 2051, n, 28 * 28, "image")
    labels = _read_idx(root_p / lab_rel, 2049, n, 1, "label").long()
    if labels.max() > 9:
        bad = labels[labels > 9].unique().tolist()[:5]
        raise ValueError(f"{root_p / lab_rel} holds labels {bad} outside 0..9; replace it "
                         "with the original file")
    _FILES_READ.update((img_rel, lab_rel))
    x = images.view(n, 1, 28, 28).float().div(127.5).sub(1.0)
    return x, labels


def load_split(dataset: str, split: str = "test") -> tuple[torch.Tensor, torch.Tensor]:
    """Images in [-1, 1], shape (N, 1, 28, 28), and labels of one split.

    The tensors are the caller's own copies: editing them in place changes nothing
    for later calls.
    """
    dataset = canonical_dataset(dataset)
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; use 'train' or 'test'")
    x, y = _load(dataset, split == "train", str(data_root()))
    return x.clone(), y.clone()


def class_subset(x: torch.Tensor, y: torch.Tensor, classes, n: int | None = None,
                 seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The images of the given classes; ``n`` of them (an int >= 1) drawn with ``seed``
    when set (all of them when there are fewer)."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"n must be an int >= 1 (images to draw) or None (all), got {n!r}")
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


def holdout(x: torch.Tensor, fraction: float, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded split of ``x`` into (the rest, a held-out ``fraction``); at least one each."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    if len(x) < 2:
        raise ValueError(f"need at least 2 images to hold some out, got {len(x)}")
    n_val = min(len(x) - 1, max(1, round(fraction * len(x))))
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(x), generator=g)
    return x[perm[n_val:]], x[perm[:n_val]]
