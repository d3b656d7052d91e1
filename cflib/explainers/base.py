"""The explainer interface shared by every counterfactual method.

Anchors: CARLA's ``get_counterfactuals``, alibi's recorded parameters and captum's
batch-first ``attribute``.  An explainer is built from a classifier (plus what the
method needs: a generator, an autoencoder, ...) and a frozen dataclass config;
learned methods train in :meth:`Explainer.fit`; :meth:`Explainer.explain` turns a
whole batch of query images into a :class:`Counterfactuals` record at once.
Tensors follow the classifier's device.

The caller's objects are never changed: :meth:`Explainer.explain` and
:meth:`Explainer.fit` run the classifier and every network the method was given
inside :func:`frozen` (evaluation mode, no parameter gradients, both restored on
exit) and draw their randomness inside :func:`seeded` (the global RNG state is
restored on exit).  Per-call results are returned, never stored on the explainer.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Callable

import torch
from torch import nn

import cflib
from cflib.scopes import frozen, seeded

X_MIN, X_MAX = -1.0, 1.0  # every image in the project lives in [-1, 1]
log = logging.getLogger("cflib")


def _show(t: torch.Tensor) -> str:
    u = t.unique().tolist()
    return f"class {u[0]}" if len(u) == 1 else f"classes {u[:5]}"

#: what ``from_profile(..., **data)`` may be given instead of what the method would load
DATA_KEYS = {
    "train": "(x, y) training images a learned method fits on (default: the dataset's train split)",
    "pool": "(x, y) real images to draw from (Original Data: target-class test images; "
            "CVE: distractor candidates)",
    "autoencoder": "the all-class autoencoder of CEM's and PSCE's loss (default: cflib.zoo)",
    "generator": "C3LT's frozen DCGAN generator (default: cflib.zoo.dcgan)",
    "discriminator": "C3LT's frozen DCGAN discriminator (default: cflib.zoo.dcgan)",
    "encoder": "C3LT's frozen encoder (default: cflib.zoo.c3lt_encoder)",
    "latent_autoencoder": "Latent PGD's LatentAutoencoder with fitted latent statistics "
                          "(default: cflib.zoo.latent_autoencoder)",
    "cache": "True (default) to keep learned weights in the weight cache, False to train afresh",
}


@dataclass(frozen=True)
class ExplainerConfig:
    """Base of every method's config; subclasses add the paper's arguments."""

    batch_size: int = 256  # images pushed through the model at once

    def __post_init__(self):
        if int(self.batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")


@dataclass
class Counterfactuals:
    """A batch of counterfactuals and what is known about them.

    ``success`` is a mask (failure is recorded, never a row of NaNs);
    ``seconds`` is the wall time of :meth:`Explainer.explain` for the batch;
    ``meta`` holds the config, the seed and what the method reports per call
    (e.g. CVE's number of edits).
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
        def move(v):
            if torch.is_tensor(v):
                return v.detach().cpu()
            if isinstance(v, dict):
                return {k: move(u) for k, u in v.items()}
            return v

        return Counterfactuals(**{k: move(v) for k, v in self.__dict__.items()})


# -- input checks ------------------------------------------------------------------------
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
        raise ValueError(f"{name} must be a float tensor scaled to [-1, 1], got {x.dtype} "
                         "(for uint8 images in 0..255: x.float() / 127.5 - 1)")
    if len(x) == 0:
        raise ValueError(f"{name} is an empty batch")
    bad = (~torch.isfinite(x)).sum().item()
    if bad:
        raise ValueError(f"{name} holds {bad} NaN or infinite value(s); every pixel must be a "
                         "number in [-1, 1]")
    lo, hi = x.min().item(), x.max().item()
    if lo < X_MIN - 1e-4 or hi > X_MAX + 1e-4:
        raise ValueError(
            f"{name} must be scaled to [-1, 1]; its values span [{lo:.3g}, {hi:.3g}] "
            "(use cflib.data.load_split, or x * 2 - 1 for images in [0, 1])"
        )
    if lo >= 0.0 and hi > lo:
        # real images in [-1, 1] always have pixels darker than mid-grey (below 0)
        raise ValueError(
            f"{name} has no value below 0: it looks like images in [0, 1], but cflib works on "
            "[-1, 1] (black is -1); pass x * 2 - 1")


def as_target(target, n: int, device, n_classes: int = 10) -> torch.Tensor:
    """Broadcast an int or a tensor of class indices to a (n,) int64 tensor.

    ``n_classes`` is the classifier's output width: targets must be in
    ``0 .. n_classes - 1``.
    """
    t = torch.as_tensor(target, device=device)
    if t.is_floating_point() and not torch.equal(t, t.round()):
        raise ValueError(f"target must hold class indices, got {target!r}")
    t = t.long()
    if t.dim() == 0:
        t = t.expand(n).clone()
    if t.shape != (n,):
        raise ValueError(f"target must be an int or have shape ({n},), got {tuple(t.shape)}")
    if (t < 0).any() or (t >= n_classes).any():
        raise ValueError(f"target classes must be in 0..{n_classes - 1} (the classifier has "
                         f"{n_classes} outputs), got {t.unique().tolist()}")
    return t


def model_dtype(model: nn.Module) -> torch.dtype:
    for t in model.parameters():
        if t.is_floating_point():
            return t.dtype
    return torch.float32


@torch.no_grad()
def checked_probs(model: nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """The classifier's softmax on ``x``, after checking that it can take these images and
    that it returns scores (logits or log-probabilities), not probabilities."""
    try:
        with frozen(model):
            out = model(x[:2].to(model_device(model)))
    except Exception as err:
        raise ValueError(f"the classifier cannot take images of shape {tuple(x.shape[1:])} "
                         f"({type(err).__name__}: {str(err).splitlines()[0]}); pass images of "
                         "the shape it was trained on") from None
    if out.dim() != 2:
        raise ValueError(f"the classifier must return one score per class, shape (N, K); it "
                         f"returns {tuple(out.shape)}")
    if out.shape[1] < 2:
        raise ValueError(f"the classifier returns {out.shape[1]} score per image; a "
                         "counterfactual needs at least two classes")
    if ((out >= 0) & (out <= 1)).all() and torch.allclose(out.sum(1), torch.ones(len(out)).to(out),
                                                          atol=1e-4):
        raise ValueError("the classifier returns probabilities (each row is in [0, 1] and sums "
                         "to 1); the methods need its logits (or log-probabilities): drop the "
                         "final softmax")
    return predict(model, x, batch_size)


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """Batched softmax probabilities of a classifier (evaluation mode, restored after)."""
    with frozen(model):
        dev = model_device(model)
        out = [torch.softmax(model(x[i:i + batch_size].to(dev)), dim=1)
               for i in range(0, len(x), batch_size)]
    return torch.cat(out)


def n_classes_of(model: nn.Module, x: torch.Tensor) -> int:
    """The classifier's output width, read off one forward pass on ``x[:1]``."""
    with torch.no_grad(), frozen(model):
        return int(model(x[:1].to(model_device(model))).shape[1])


# -- the base class ------------------------------------------------------------------------
class Explainer:
    """Base class: subclasses implement :meth:`_generate` (or :meth:`_search`) for a batch.

    Subclasses set ``name`` as the paper spells the method and ``Config`` to their
    frozen dataclass of arguments.  Build one directly (``Method(classifier,
    config)`` or with the config's fields as keywords) or with the sizes of a
    profile through :meth:`from_profile`.
    """

    name: str = "Explainer"
    Config: type = ExplainerConfig
    learned: bool = False  # True for methods that must be fitted first

    def __init__(self, classifier: nn.Module, config: ExplainerConfig | None = None,
                 **kwargs):
        if config is not None and kwargs:
            raise TypeError("pass either a config or keyword arguments, not both")
        if not isinstance(classifier, nn.Module):
            raise TypeError(f"{self.name} explains a torch.nn.Module classifier, got "
                            f"{type(classifier).__name__}")
        self.config = config if config is not None else self.Config(**kwargs)
        if not isinstance(self.config, self.Config):
            raise TypeError(f"{self.name} needs a {self.Config.__name__}, got "
                            f"{type(self.config).__name__}")
        self.classifier = classifier
        self.fitted = not self.learned

    # -- construction from a profile ----------------------------------------------------
    @classmethod
    def from_profile(cls, classifier: nn.Module, *, dataset: str, profile="standard",
                     seed: int = 0, pair=None, **data) -> "Explainer":
        """The method with the sizes of ``profile`` (fitted when it learns).

        ``dataset`` names the data a learned method trains on and the cached
        networks it needs; ``pair`` is the (query, target) class pair a per-pair
        method (CVE, ExpGAN, C3LT) is built for; ``data`` replaces what would be
        loaded (see :data:`DATA_KEYS`).  Every method accepts the same call.
        """
        from cflib.data import canonical_dataset, check_pair, parse_pair
        from cflib.profiles import get_profile

        unknown = sorted(set(data) - set(DATA_KEYS))
        if unknown:
            raise TypeError(f"unknown data argument(s) {unknown}; from_profile takes "
                            f"{sorted(DATA_KEYS)}")
        dataset, prof = canonical_dataset(dataset), get_profile(profile)
        if pair is not None:
            pair = check_pair(dataset, *parse_pair(pair))
        return cls._from_profile(classifier, dataset, prof, int(seed), pair, data)

    @classmethod
    def _from_profile(cls, classifier, dataset, profile, seed, pair, data) -> "Explainer":
        return cls(classifier, cls.Config(**cls.profile_config(profile, seed)))

    @classmethod
    def profile_config(cls, profile, seed: int) -> dict:
        """Config fields that ``profile`` sets (sizes only, never the algorithm)."""
        return {}

    @staticmethod
    def _need_pair(name: str, pair) -> tuple[int, int]:
        if pair is None:
            raise ValueError(f"{name} is built per class pair: pass pair=(query, target)")
        return pair

    # -- networks ---------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return model_device(self.classifier)

    def frozen_networks(self) -> dict[str, nn.Module]:
        """Pretrained networks besides the classifier that the method depends on."""
        return {}

    def _caller_networks(self) -> list[nn.Module]:
        return [self.classifier, *self.frozen_networks().values()]

    def _check_same_device(self, **nets: nn.Module | None) -> None:
        """The networks a method is given must sit on the classifier's device (we never
        move the caller's modules)."""
        for name, net in nets.items():
            if net is not None and model_device(net) != self.device:
                raise ValueError(f"the {name} is on {model_device(net)} but the classifier on "
                                 f"{self.device}; move it first ({name}.to({str(self.device)!r}))")

    def fit(self, *args, **kwargs) -> "Explainer":
        """Train what the method learns (no-op for optimisation-based methods)."""
        self.fitted = True
        return self

    def _cached_fit(self, net: nn.Module, cache: dict | None,
                    train: Callable[[nn.Module], dict | None]) -> dict:
        """Train ``net`` in place with ``train(net)``, or load it from the weight cache.

        ``cache`` (dataset, pair, profile, seed, ...) plus the method's name, its
        config, and the fingerprints of the classifier and of every frozen network
        in ``self.frozen_networks()`` form the cache key; ``None`` trains without
        caching.  The caller's networks are frozen and the global RNG restored.
        """
        from cflib.training import cached, fingerprint

        with frozen(*self._caller_networks()):
            if cache is None:
                with seeded(int(getattr(self.config, "seed", 0) or 0)):
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

    # -- explaining -------------------------------------------------------------------------
    def _generate(self, x: torch.Tensor, target: torch.Tensor, query: torch.Tensor,
                  generator: torch.Generator | None):
        """Counterfactuals for the batch; ``generator`` is a seeded CPU generator.

        Returns the counterfactual images, or ``(images, meta)`` where ``meta`` holds
        per-call results to record.  The default runs ``self._search(x_chunk,
        target_chunk)`` over chunks of ``config.batch_size`` images (each chunk
        optimised as one batch), for methods whose search needs no randomness or
        query labels.
        """
        if not hasattr(self, "_search"):
            raise NotImplementedError(f"{type(self).__name__} implements neither _generate nor _search")
        bs = self.config.batch_size
        out = torch.empty_like(x)
        for i in range(0, len(x), bs):
            out[i:i + bs] = self._search(x[i:i + bs], target[i:i + bs])
        return out

    def explain(self, x: torch.Tensor, target, seed: int | None = 0) -> Counterfactuals:
        """Counterfactuals for a batch ``x`` (N, C, H, W) in [-1, 1] towards ``target``.

        ``target`` is a class index or one per image.  ``seed`` seeds the method's
        randomness (``None``: the global RNG as it stands); the global RNG state, the
        classifier's mode and its parameters' ``requires_grad`` flags are the same
        after the call as before.
        """
        check_images(x)
        if not self.fitted:
            raise RuntimeError(f"{self.name} is a learned method: call fit() before explain()")
        dev = self.device
        with frozen(*self._caller_networks()):
            # float64 (or half) images are converted to the classifier's dtype
            x = x.to(dev, dtype=model_dtype(self.classifier))
            probs = checked_probs(self.classifier, x)
            target = as_target(target, len(x), dev, probs.shape[1])
            pred = probs.argmax(1)
            already = pred == target
            if already.all():
                raise ValueError(
                    f"the classifier already assigns every query to its target ({_show(target)})"
                    ": a counterfactual needs a target other than the query's class")
            if already.any():
                log.info("%s: %d of %d queries are already classified as their target; "
                            "they count as valid as they are (meta['already_target'])",
                            self.name, int(already.sum()), len(x))
            with seeded(seed) as gen:
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                t0 = time.perf_counter()
                out = self._generate(x, target, pred, gen)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                seconds = time.perf_counter() - t0
            x_cf, extra = out if isinstance(out, tuple) else (out, {})
            x_cf = x_cf.detach().clamp(X_MIN, X_MAX)
            pred_cf = predict(self.classifier, x_cf).argmax(1)
        return Counterfactuals(
            x=x, x_cf=x_cf, target=target, pred=pred, pred_cf=pred_cf,
            success=pred_cf == target, seconds=seconds, method=self.name,
            meta={"config": asdict(self.config) if is_dataclass(self.config) else {},
                  "seed": seed, "cflib_version": cflib.__version__, "device": str(dev),
                  "already_target": already, **extra},
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"


class AutoencoderExplainer(Explainer):
    """Base of the methods whose loss holds an autoencoder term (CEM, PSCE).

    ``autoencoder`` is the caller's all-class autoencoder (``None``: no term); it is
    frozen during ``explain`` like the classifier.  :meth:`from_profile` takes it from
    :func:`cflib.zoo.autoencoder` (cached) unless ``autoencoder=`` is given.
    """

    def __init__(self, classifier: nn.Module, config: ExplainerConfig | None = None, *,
                 autoencoder: nn.Module | None = None, **kwargs):
        super().__init__(classifier, config, **kwargs)
        self._check_same_device(autoencoder=autoencoder)
        self.autoencoder = autoencoder

    def frozen_networks(self) -> dict[str, nn.Module]:
        return {} if self.autoencoder is None else {"autoencoder": self.autoencoder}

    @classmethod
    def _from_profile(cls, classifier, dataset, profile, seed, pair, data):
        if "autoencoder" in data:        # autoencoder=None: no autoencoder term
            ae = data["autoencoder"]
        else:
            from cflib import zoo

            ae, _ = zoo.autoencoder(dataset, None, profile, seed, device=model_device(classifier))
        return cls(classifier, cls.Config(**cls.profile_config(profile, seed)), autoencoder=ae)
