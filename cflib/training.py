"""Training loops: classifiers, autoencoders, and the accuracy and reconstruction error
they are judged by.  Networks are trained in place; the weight cache
(:mod:`cflib.cache`) decides whether a loop runs at all."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cflib.progress import progress
from cflib.scopes import frozen


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


class BestEpoch:
    """The epoch of the best validation score, its weights, and early stopping.

    ``update(score, epoch)`` after every epoch keeps a copy of the weights when the score
    improves (higher or lower is better, ``higher``) and returns True once ``patience``
    epochs in a row have not improved it; ``restore()`` loads the best weights back.
    """

    def __init__(self, model: nn.Module, higher: bool, patience: int | None = None):
        self.model, self.higher, self.patience = model, higher, patience
        self.best = -float("inf") if higher else float("inf")
        self.epoch, self.stale, self.state = -1, 0, None

    def update(self, score: float, epoch: int) -> bool:
        if (score > self.best) if self.higher else (score < self.best):
            self.best, self.epoch, self.stale = score, epoch, 0
            self.state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            return False
        self.stale += 1
        return self.patience is not None and self.stale >= self.patience

    def restore(self) -> None:
        if self.state is not None:
            self.model.load_state_dict(self.state)


def _epochs(model: nn.Module, opt, n: int, epochs: int, batch_size: int, seed: int, desc: str,
            batch_loss, keep: "BestEpoch", score=None, grad_clip: float | None = None) -> int:
    """The loop both trainers share: ``epochs`` passes over ``n`` examples in seeded
    batches (``batch_loss(indices)``; the gradient norm clipped to ``grad_clip``), after
    each the held-out ``score()`` given to ``keep`` (which may stop it early); the best
    epoch's weights restored, the model left in evaluation mode.  Returns the epochs run."""
    ran = 0
    for ep in progress(range(epochs), desc=desc):
        model.train()
        for idx in batches(n, batch_size, seed + ep):
            loss = batch_loss(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            opt.step()
        ran = ep + 1
        if score is not None and keep.update(score(), ep + 1):
            break
    keep.restore()
    model.eval()
    return ran


def train_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int,
                     lr: float = 1e-3, batch_size: int = 128, seed: int = 0,
                     desc: str = "classifier", weight_decay: float | None = None,
                     x_val: torch.Tensor | None = None, y_val: torch.Tensor | None = None,
                     patience: int | None = None, grad_clip: float | None = None) -> dict:
    """Adam on cross-entropy; ``x`` in [-1, 1].

    ``weight_decay`` set: AdamW with that decoupled decay instead (the quantization
    chapter's SmallCNN recipe, AdamW 1e-3 / 1e-4); ``grad_clip``: the global gradient
    norm is clipped to it.  With ``x_val``/``y_val`` the accuracy on those held-out images
    is measured after every epoch and the weights of the best epoch are kept; with
    ``patience`` too, training stops once ``patience`` epochs in a row have not improved
    it ("trained until its accuracy stops improving").  Returns the epochs run, the best
    epoch and its validation accuracy (empty without ``x_val``).
    """
    dev = next(model.parameters()).device
    if weight_decay is None:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    keep = BestEpoch(model, higher=True, patience=patience)
    ran = _epochs(model, opt, len(x), epochs, batch_size, seed, desc,
                  lambda idx: F.cross_entropy(_logits(model, x[idx].to(dev)), y[idx].to(dev)),
                  keep, None if x_val is None else lambda: accuracy(model, x_val, y_val),
                  grad_clip)
    if x_val is None:
        return {}
    return {"epochs_run": ran, "best_epoch": keep.epoch, "val_accuracy": keep.best}


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
    keep = BestEpoch(model, higher=False, patience=patience)

    def batch_loss(idx):
        xb = x[idx].to(dev)
        return F.mse_loss(model(xb), xb)

    ran = _epochs(model, opt, len(x), epochs, batch_size, seed, desc, batch_loss, keep,
                  None if x_val is None else lambda: reconstruction_mse(model, x_val))
    if x_val is None:
        return {}
    return {"epochs_run": ran, "best_epoch": keep.epoch, "val_mse": keep.best}


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
    """Top-1 accuracy in [0, 1] (evaluation mode; the model's modes restored, even on error)."""
    dev = next(model.parameters()).device
    correct = 0
    with frozen(model):
        for i in range(0, len(x), batch_size):
            out = _logits(model, x[i:i + batch_size].to(dev))
            correct += (out.argmax(1).cpu() == y[i:i + batch_size]).sum().item()
    return correct / len(x)
