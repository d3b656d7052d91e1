"""Training loops and the on-disk cache of trained weights.

Every trained network (classifier, autoencoders, feature network, generators,
mappings) goes through :func:`cached`: its weights are stored under a key built
from the full training config (dataset, architecture, hyperparameters, seed and
profile), written to a temporary file and renamed, so a re-executed chapter loads
instead of retraining.  A file that cannot be read, or whose stored config does not
match, is retrained and replaced, never loaded.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from cflib.data import PROJECT_ROOT
from cflib.progress import progress
from cflib.scopes import frozen, seeded

log = logging.getLogger("cflib")
CACHE_ENV = "CFLIB_CACHE"
FORMAT = 1


def cache_root() -> Path:
    """``$CFLIB_CACHE`` or ``<project>/cache`` (never beside the read-only data)."""
    return Path(os.environ.get(CACHE_ENV) or PROJECT_ROOT / "cache").expanduser()


def _normalise(config: dict) -> dict:
    return json.loads(json.dumps(config, sort_keys=True, default=str))


def cache_key(config: dict) -> str:
    blob = json.dumps(_normalise(config), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def fingerprint(module: nn.Module) -> str:
    """A short sha256 of a network's weights and buffers (order and shape included).

    Learned explainers put the fingerprint of the networks they depend on (the
    classifier being explained, a frozen generator) into their cache key, so a
    retrained classifier or GAN never meets mappings trained against the old one.
    """
    return state_fingerprint(module.state_dict())


def state_fingerprint(state: dict) -> str:
    """:func:`fingerprint` of a state dict (the checksum stored beside cached weights)."""
    h = hashlib.sha256()
    for name, t in state.items():
        t = t.detach().cpu().contiguous()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
    return h.hexdigest()[:16]


def cache_path(kind: str, config: dict) -> Path:
    return cache_root() / f"{kind}-{cache_key(config)}.pt"


def _atomic_save(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _try_load(path: Path, config: dict, module: nn.Module) -> dict | None:
    """The stored info if ``path`` holds verified weights for exactly ``config``; else None.

    The file's config, its keys and shapes and the checksum of its tensors are checked
    *before* any tensor is copied into ``module``, so a file that fails leaves the
    module exactly as it was built (retraining never starts from half-loaded weights).
    Files written before checksums existed load once and are re-saved with one.
    """
    if not path.exists():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
        if payload.get("format") != FORMAT or payload.get("config") != _normalise(config):
            log.warning("cache %s was written for another config; retraining", path.name)
            return None
        state = payload["state_dict"]
        own = module.state_dict()
        if set(state) != set(own) or any(tuple(state[k].shape) != tuple(own[k].shape)
                                         for k in own):
            log.warning("cache %s holds another architecture's weights; retraining", path.name)
            return None
        stored = payload.get("sha256")
        if stored is not None and stored != state_fingerprint(state):
            log.warning("cache %s fails its checksum (a corrupt file); retraining", path.name)
            return None
        module.load_state_dict(state)
        if stored is None:  # a file from before checksums: verified from now on
            _atomic_save({**payload, "sha256": state_fingerprint(state)}, path)
        return payload.get("info", {})
    except Exception as err:  # corrupt, truncated, unreadable...
        log.warning("cache %s is unreadable (%s: %s); retraining", path.name,
                    type(err).__name__, err)
        return None


def check_writable(folder: Path) -> None:
    """Fail before training, not after it, when the cache folder cannot be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise PermissionError(
            f"the weight cache {folder} cannot be written ({type(err).__name__}: {err}); set "
            f"{CACHE_ENV} to a writable folder (or pass use_cache=False to train without it)"
        ) from None


def cached(kind: str, config: dict, build: Callable[[], nn.Module],
           train: Callable[[nn.Module], dict | None], device="cpu",
           use_cache: bool = True) -> tuple[nn.Module, dict]:
    """Build a module and load it from the cache, or train and cache it.

    ``train(module)`` trains in place and may return an info dict (e.g. test
    accuracy) that is stored beside the weights (with their checksum) and returned on
    later loads.  The cache folder's write access is checked before training.
    """
    seed = int(config.get("seed", 0))
    with seeded(seed):
        module = build().to(device)
    path = cache_path(kind, config)
    if use_cache:
        info = _try_load(path, config, module)
        if info is not None:
            log.info("loaded %s from %s", kind, path)
            return module.to(device).eval(), info
        check_writable(path.parent)
    log.info("training %s (%s)", kind, path.name)
    with seeded(seed):
        info = train(module) or {}
    module.eval()
    if use_cache:
        state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
        _atomic_save({"format": FORMAT, "config": _normalise(config), "state_dict": state,
                      "sha256": state_fingerprint(state), "info": info}, path)
    return module, info


def batches(n: int, batch_size: int, seed: int | None = None, shuffle: bool = True):
    """Index batches over ``range(n)``, reshuffled from ``seed`` when asked."""
    if shuffle:
        g = torch.Generator().manual_seed(seed or 0)
        order = torch.randperm(n, generator=g)
    else:
        order = torch.arange(n)
    for i in range(0, n, batch_size):
        yield order[i:i + batch_size]


def _logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model.logits(x) if hasattr(model, "logits") else model(x)


def train_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int,
                     lr: float = 1e-3, batch_size: int = 128, seed: int = 0,
                     desc: str = "classifier", weight_decay: float | None = None) -> None:
    """Adam on cross-entropy; ``x`` in [-1, 1].

    ``weight_decay`` set: AdamW with that decoupled decay instead (the quantization
    chapter's SmallCNN recipe, AdamW 1e-3 / 1e-4).
    """
    dev = next(model.parameters()).device
    if weight_decay is None:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    for ep in progress(range(epochs), desc=desc):
        for idx in batches(len(x), batch_size, seed + ep):
            xb, yb = x[idx].to(dev), y[idx].to(dev)
            loss = F.cross_entropy(_logits(model, xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    model.eval()


def train_autoencoder(model: nn.Module, x: torch.Tensor, epochs: int, lr: float = 1e-3,
                      batch_size: int = 128, seed: int = 0, desc: str = "autoencoder",
                      x_val: torch.Tensor | None = None, patience: int | None = None) -> dict:
    """Adam on the mean squared reconstruction error.

    With ``x_val`` the mean squared error on those held-out images is measured after
    every epoch and the weights of the best epoch are kept; with ``patience`` too,
    training stops once ``patience`` epochs in a row have not improved it (early
    stopping: "trained to convergence" within ``epochs``).  Returns the epochs run,
    the best epoch and its validation error (empty without ``x_val``).
    """
    dev = next(model.parameters()).device
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    best, best_state, best_epoch, stale, ran = float("inf"), None, -1, 0, 0
    for ep in progress(range(epochs), desc=desc):
        model.train()
        for idx in batches(len(x), batch_size, seed + ep):
            xb = x[idx].to(dev)
            loss = F.mse_loss(model(xb), xb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        ran = ep + 1
        if x_val is None:
            continue
        val = reconstruction_mse(model, x_val)
        if val < best:
            best, best_epoch, stale = val, ep + 1, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            stale += 1
            if patience is not None and stale >= patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    if x_val is None:
        return {}
    return {"epochs_run": ran, "best_epoch": best_epoch, "val_mse": best}


@torch.no_grad()
def reconstruction_mse(model: nn.Module, x: torch.Tensor, batch_size: int = 1000) -> float:
    """Mean squared reconstruction error per pixel (evaluation mode, restored after)."""
    dev = next(model.parameters()).device
    with frozen(model):
        total = sum(((model(x[i:i + batch_size].to(dev)) - x[i:i + batch_size].to(dev)) ** 2)
                    .sum().item() for i in range(0, len(x), batch_size))
    return total / x.numel()


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1024) -> float:
    """Top-1 accuracy in [0, 1]."""
    was = model.training
    model.eval()
    dev = next(model.parameters()).device
    correct = 0
    for i in range(0, len(x), batch_size):
        out = _logits(model, x[i:i + batch_size].to(dev))
        correct += (out.argmax(1).cpu() == y[i:i + batch_size]).sum().item()
    model.train(was)
    return correct / len(x)
