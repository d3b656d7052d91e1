"""The explainer interface shared by every counterfactual method.

Anchors: CARLA's ``get_counterfactuals``, alibi's recorded parameters and captum's
batch-first ``attribute``.  An explainer is built from a classifier (plus what the
method needs: a generator, an autoencoder, ...) and a frozen dataclass config;
learned methods train in :meth:`Explainer.fit`; :meth:`Explainer.explain` turns a
whole batch of query images into a :class:`Counterfactuals` record at once.
Tensors follow the classifier's device.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Callable

import torch
from torch import nn

import cflib

X_MIN, X_MAX = -1.0, 1.0  # every image in the project lives in [-1, 1]


@dataclass(frozen=True)
class ExplainerConfig:
    """Base of every method's config; subclasses add the paper's arguments."""

    batch_size: int = 256  # images pushed through the model at once


@dataclass
class Counterfactuals:
    """A batch of counterfactuals and what is known about them.

    ``success`` is a mask (failure is recorded, never a row of NaNs);
    ``seconds`` is the wall time of :meth:`Explainer.explain` for the batch.
    """

    x: torch.Tensor
    x_cf: torch.Tensor
    target: torch.Tensor
    pred: torch.Tensor        # classifier's decision on x
    pred_cf: torch.Tensor     # classifier's decision on x_cf
    success: torch.Tensor     # pred_cf == target
    seconds: float
    method: str
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.x)

    @property
    def seconds_per_cf(self) -> float:
        return self.seconds / max(len(self), 1)

    @property
    def validity(self) -> float:
        return self.success.float().mean().item()

    def cpu(self) -> "Counterfactuals":
        kw = {k: (v.detach().cpu() if torch.is_tensor(v) else v)
              for k, v in self.__dict__.items()}
        return Counterfactuals(**kw)


def model_device(model: nn.Module) -> torch.device:
    """The device of a model's first parameter or buffer (CPU if it has none)."""
    for t in model.parameters():
        return t.device
    for t in model.buffers():
        return t.device
    return torch.device("cpu")


def check_images(x: torch.Tensor, name: str = "x") -> None:
    """Clear errors for the wrong shape, dtype or range; the input is untouched."""
    if not torch.is_tensor(x):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(
            f"{name} must be a batch of images of shape (N, C, H, W); got shape "
            f"{tuple(x.shape)} (add a batch dimension with x.unsqueeze(0))"
        )
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a float tensor scaled to [-1, 1], got {x.dtype}")
    if len(x) == 0:
        raise ValueError(f"{name} is an empty batch")
    lo, hi = x.min().item(), x.max().item()
    if lo < X_MIN - 1e-4 or hi > X_MAX + 1e-4:
        raise ValueError(
            f"{name} must be scaled to [-1, 1]; its values span [{lo:.3g}, {hi:.3g}] "
            "(use cflib.data.load_split, or x * 2 - 1 for images in [0, 1])"
        )


def as_target(target, n: int, device) -> torch.Tensor:
    """Broadcast an int or a tensor of class indices to a (n,) int64 tensor."""
    t = torch.as_tensor(target, device=device).long()
    if t.dim() == 0:
        t = t.expand(n).clone()
    if t.shape != (n,):
        raise ValueError(f"target must be an int or have shape ({n},), got {tuple(t.shape)}")
    if (t < 0).any() or (t > 9).any():
        raise ValueError(f"target classes must be in 0..9, got {t.unique().tolist()}")
    return t


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """Batched softmax probabilities of a classifier (evaluation mode)."""
    was_training = model.training
    model.eval()
    dev = model_device(model)
    out = [torch.softmax(model(x[i:i + batch_size].to(dev)), dim=1)
           for i in range(0, len(x), batch_size)]
    model.train(was_training)
    return torch.cat(out)


class Explainer:
    """Base class: subclasses implement :meth:`_generate` for a whole batch.

    Subclasses set ``name`` as the paper spells the method and ``Config`` to their
    frozen dataclass of arguments.
    """

    name: str = "Explainer"
    Config: type = ExplainerConfig
    learned: bool = False  # True for methods that must be fitted first

    def __init__(self, classifier: nn.Module, config: ExplainerConfig | None = None,
                 **kwargs):
        if config is not None and kwargs:
            raise TypeError("pass either a config or keyword arguments, not both")
        self.config = config if config is not None else self.Config(**kwargs)
        if not isinstance(self.config, self.Config):
            raise TypeError(f"{self.name} needs a {self.Config.__name__}, got "
                            f"{type(self.config).__name__}")
        self.classifier = classifier.eval()
        for p in self.classifier.parameters():
            p.requires_grad_(False)
        self.fitted = not self.learned

    @property
    def device(self) -> torch.device:
        return model_device(self.classifier)

    def fit(self, *args, **kwargs) -> "Explainer":
        """Train what the method learns (no-op for optimisation-based methods)."""
        self.fitted = True
        return self

    def frozen_networks(self) -> dict[str, nn.Module]:
        """Pretrained networks besides the classifier that a learned method depends on."""
        return {}

    def _cached_fit(self, net: nn.Module, cache: dict | None,
                    train: Callable[[nn.Module], dict | None]) -> dict:
        """Train ``net`` in place with ``train(net)``, or load it from the weight cache.

        ``cache`` (dataset, pair, profile, seed, ...) plus the method's name, its
        config, and the fingerprints of the classifier and of every frozen network
        in ``self.frozen_networks()`` form the cache key; ``None`` trains without
        caching.
        """
        from cflib.training import cached, fingerprint

        if cache is None:
            torch.manual_seed(int(getattr(self.config, "seed", 0) or 0))
            info = train(net) or {}
        else:
            nets = {"classifier": self.classifier, **self.frozen_networks()}
            cfg = {**cache, "method": self.name, "config": asdict(self.config),
                   "networks": {k: fingerprint(m) for k, m in nets.items()}}
            kind = self.name.lower().replace(" ", "_").replace(".", "")
            _, info = cached(kind, cfg, lambda: net, train, self.device)
        net.eval()
        self.fitted = True
        return info

    def _generate(self, x: torch.Tensor, target: torch.Tensor, query: torch.Tensor,
                  generator: torch.Generator | None) -> torch.Tensor:
        """Counterfactuals for the batch; ``generator`` is a seeded CPU generator.

        The default runs ``self._search(x_chunk, target_chunk)`` over chunks of
        ``config.batch_size`` images (each chunk optimised as one batch), for
        methods whose search needs no randomness or query labels.
        """
        if not hasattr(self, "_search"):
            raise NotImplementedError(f"{type(self).__name__} implements neither _generate nor _search")
        bs = self.config.batch_size
        out = torch.empty_like(x)
        for i in range(0, len(x), bs):
            out[i:i + bs] = self._search(x[i:i + bs], target[i:i + bs])
        return out

    def explain(self, x: torch.Tensor, target, seed: int | None = 0) -> Counterfactuals:
        """Counterfactuals for a batch ``x`` (N, C, H, W) in [-1, 1] towards ``target``."""
        check_images(x)
        if not self.fitted:
            raise RuntimeError(f"{self.name} is a learned method: call fit() before explain()")
        dev = self.device
        x = x.to(dev)
        target = as_target(target, len(x), dev)
        pred = predict(self.classifier, x).argmax(1)
        gen = None
        if seed is not None:
            torch.manual_seed(seed)
            gen = torch.Generator().manual_seed(seed)  # CPU: same draws on every device
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        x_cf = self._generate(x, target, pred, gen)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        seconds = time.perf_counter() - t0
        x_cf = x_cf.detach().clamp(X_MIN, X_MAX)
        pred_cf = predict(self.classifier, x_cf).argmax(1)
        return Counterfactuals(
            x=x, x_cf=x_cf, target=target, pred=pred, pred_cf=pred_cf,
            success=pred_cf == target, seconds=seconds, method=self.name,
            meta={"config": asdict(self.config) if is_dataclass(self.config) else {},
                  "seed": seed, "cflib_version": cflib.__version__, "device": str(dev)},
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"
