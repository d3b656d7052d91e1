"""``C3LT``: Cycle-Consistent Counterfactuals by Latent Transformations.

Khorram & Fuxin, CVPR 2022 (arXiv 2203.15064); official code
github.com/khorrams/c3lt (``c3lt/train.py``, ``c3lt/helper.py``, ``c3lt/modules.py``,
``args.py``), which this module follows line by line where it can.

A pretrained generator ``G`` (the DCGAN of :mod:`cflib.models.dcgan`), an encoder
``E`` (image -> latent) and a discriminator ``D`` are frozen.  Two small mapping
networks are learned per class pair (Sec. 3 of the paper):

* ``g`` maps latent codes of the query class ``c`` towards the CF class ``c'``;
* ``h`` maps codes of ``c'`` back towards ``c``.

Each is ``NLMappingConv``: 1x1 conv 100->100, ReLU, 1x1 conv 100->100 on
``z`` of shape (N, 100, 1, 1).  One latent step (``nonlinear_map_step``, after
GAN-steerability) is ``z_{k+1} = z_k + g(z_k)`` rescaled to the norm of the
starting code ``z_0``; ``n_steps`` steps give ``g^n(z)``.  The counterfactual is
``x' = G(g^n(E(x)))``: inference is a single batched forward pass.

Training loss per batch of query images ``x`` (class c) and CF-class images
``y`` (class c') (``train_c3lt`` in the official code, Eq. 7 of the paper)::

    L = L_cls + alpha * L_prox + beta * L_cyc + gamma * L_adv

* ``L_cls`` (Eq. 3): classification loss of ``f(G(g^n(E(x))))`` towards c' and of
  ``f(G(h^n(E(y))))`` towards c, averaged.  ``cls_type="nll"`` is the negative
  log-likelihood; ``cls_type="hinge"`` is ``max(0, max_{k!=t} p_k - p_t + kappa)``
  on softmax probabilities.
* ``L_prox`` (Eq. 4): ``(|x - x'|_1 + p1 * smooth(m) + p2 * entropy(m)) / (1 + p1 + p2)``
  against the input ``x`` itself (not its reconstruction ``G(E(x))``, as in the
  official code), where ``m`` is the per-image min-max normalised ``(x' - x)^2``;
  ``smooth`` is the mean squared difference of neighbouring mask pixels, ``entropy``
  is ``mean(min(m, 1 - m))`` (pushes the mask to be binary).
* ``L_cyc`` (Eq. 5): cycle consistency: ``x`` against ``G(h^n(g^n(E(x))))`` with a
  perceptual loss (L1 between the classifier's first two conv+ReLU feature maps,
  plus pixel L1, divided by 3) and ``E(x)`` against ``h^n(g^n(E(x)))`` with L1; the
  same for ``y`` with g and h swapped; the four terms averaged.
* ``L_adv`` (Eq. 6): ``-log D(.)`` (BCE towards "real") on the two counterfactuals
  and the two cycled images, averaged.

Optimiser: Adam (lr 1e-3) on the parameters of g and h only; the learning rate
is multiplied by ``decay_gamma`` (0.5) every ``decay_step`` (25) epochs (StepLR).
G, E, D and the classifier stay frozen in evaluation mode.

Where this module departs from the official code, for speed or robustness only:
the codes ``E(x)`` of the training images are computed once (E is frozen and
deterministic), the unused reconstruction ``G(E(x))`` is not generated during
training, ``epochs`` epochs are run (the official loop runs ``epochs + 1``), and
the difference mask guards against division by zero.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from itertools import chain
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from cflib.explainers.base import (
    Explainer,
    ExplainerConfig,
    check_images,
    model_dtype,
    n_classes_of,
    predict,
)
from cflib.models.dcgan import frozen_generator
from cflib.progress import progress
from cflib.scopes import channels_last, frozen, seeded

CLS_TYPES = ("nll", "hinge")
#: what the training history logs per point (means over the updates since the last one)
_LOGGED = ("loss", "cls", "prox", "cyc", "adv", "train_validity", "prox_l1")


@dataclass(frozen=True)
class C3LTConfig(ExplainerConfig):
    """The arguments of the official ``args.py`` (same names, paper defaults).

    * ``alpha``: weight of the proximity loss ``L_prox``.  (The help string of the
      official ``args.py`` calls it "coefficient for classification loss", but
      ``train.py`` multiplies the proximity loss by it; the paper's Eq. 7 agrees.)
    * ``beta``: weight of the cycle-consistency loss ``L_cyc``.
    * ``gamma``: weight of the adversarial loss ``L_adv``.  The paper uses 0.001 on
      MNIST/Fashion-MNIST; the official ``args.py`` default is 0.0.
    * ``p1``: weight of the mask smoothness term inside ``L_prox``.
    * ``p2``: weight of the mask entropy (binariness) term inside ``L_prox``.
    * ``cls_type``: ``"nll"`` (official default) or ``"hinge"``.
    * ``kappa``: the confidence margin of the hinge classification loss.
    * ``n_steps``: latent steps of each mapping (official default 1).
    * ``epochs``, ``lr`` (``lr_map`` in ``args.py``), ``decay_step``, ``decay_gamma``:
      the schedule, Adam lr multiplied by ``decay_gamma`` every ``decay_step`` epochs
      (the official 25 of 201 epochs: eight halvings).  ``decay_every_steps``, when
      set, decays every that many optimizer steps instead, so that a run with fewer
      epochs can still make the official number of halvings.
    * ``batch_size``: images per class in a training batch (128, as the paper);
      also the inference batch.
    * ``seed``: initialisation of g and h and the order of the training batches.
    * ``invert_steps``, ``invert_lr``: test-time refinement of the query's code before
      the mapping (our variant ``C3LT (inverted)``, 0 for C3LT itself): Adam on z from
      E(x), minimising ``|G(z) - x|_1``.
    """

    batch_size: int = 128
    latent_dim: int = 100
    n_steps: int = 1
    alpha: float = 0.1
    beta: float = 0.1
    gamma: float = 0.001
    p1: float = 10.0
    p2: float = 1.0
    cls_type: str = "nll"
    kappa: float = 0.05
    epochs: int = 200
    lr: float = 1e-3
    decay_step: int = 25
    decay_gamma: float = 0.5
    decay_every_steps: int | None = None
    seed: int = 0
    invert_steps: int = 0
    invert_lr: float = 0.01
    max_step: float | None = None
    #: fields added after mappings were cached: at their default they stay out of the
    #: cache key, so the mappings cached before them are still found
    KEY_OMITS_DEFAULT: ClassVar[tuple[str, ...]] = ("max_step",)

    def __post_init__(self):
        super().__post_init__()
        if self.cls_type not in CLS_TYPES:
            raise ValueError(f"cls_type must be one of {CLS_TYPES}, got {self.cls_type!r}")
        if self.n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {self.n_steps}")
        if self.epochs < 0 or self.batch_size < 1 or self.decay_step < 1:
            raise ValueError("epochs must be >= 0, batch_size and decay_step >= 1")
        if self.decay_every_steps is not None and self.decay_every_steps < 1:
            raise ValueError(f"decay_every_steps must be >= 1 or None, got "
                             f"{self.decay_every_steps}")
        if self.max_step is not None and not self.max_step > 0:
            raise ValueError(f"max_step must be > 0 or None, got {self.max_step}")
        if self.invert_steps < 0 or not self.invert_lr > 0:
            raise ValueError("invert_steps must be >= 0 and invert_lr > 0")
        for name in ("alpha", "beta", "gamma", "p1", "p2", "kappa", "lr"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


# ----------------------------------------------------------------------------- schedule

#: the public code's schedule (``args.py``, ``c3lt/train.py``, ``datasets.py``): epochs
#: ``range(0, epochs + 1)`` with ``epochs=200`` (201 epochs), batches of 128 images per
#: class from two loaders zipped (``drop_last=False``: an epoch has as many updates as
#: the shorter class has batches), Adam at ``lr_map=1e-3``, ``StepLR`` every 25 epochs by
#: 0.5 (``decay_step``, ``decay_gamma``)
PUBLIC_SCHEDULE = {"epochs": 201, "batch_size": 128, "lr": 1e-3, "decay_step": 25,
                   "decay_gamma": 0.5}


def public_lr_sum(n_query: int, n_target: int) -> float:
    """The sum over the public code's updates of their learning rate, for a pair whose
    classes have ``n_query`` and ``n_target`` training images: the measure of how much
    optimisation a schedule gives the mappings (9,246 updates, lr x steps 2.29 on MNIST
    4->9).  A run's ``info["lr_sum"]`` over this is the fraction of the published
    optimisation it received."""
    s = PUBLIC_SCHEDULE
    per_epoch = min(-(-n_query // s["batch_size"]), -(-n_target // s["batch_size"]))
    return sum(per_epoch * s["lr"] * s["decay_gamma"] ** (e // s["decay_step"])
               for e in range(s["epochs"]))


# ----------------------------------------------------------------------------- networks

class NLMappingConv(nn.Module):
    """The official non-linear latent mapping: 1x1 conv, ReLU, 1x1 conv on (N, d, 1, 1)."""

    def __init__(self, latent_dim: int = 100):
        super().__init__()
        self.T1 = nn.Sequential(nn.Conv2d(latent_dim, latent_dim, 1, 1, 0, bias=True), nn.ReLU())
        self.T2 = nn.Sequential(nn.Conv2d(latent_dim, latent_dim, 1, 1, 0, bias=True))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.T2(self.T1(z))


class C3LTMappings(nn.Module):
    """The two learned transformations of one class pair, cached together."""

    def __init__(self, latent_dim: int = 100):
        super().__init__()
        self.g = NLMappingConv(latent_dim)  # query class c -> CF class c'
        self.h = NLMappingConv(latent_dim)  # CF class c' -> query class c


def nonlinear_map_step(z: torch.Tensor, map_func: nn.Module, n_steps: int,
                       max_step: float | None = None) -> list[torch.Tensor]:
    """The latent path ``[z_0, z_1, ..., z_n]`` (official ``nonlinear_map_step``).

    ``z_{k+1} = (z_k + map(z_k)) * |z_0| / |z_k + map(z_k)|``: each step adds the
    mapping's output and projects back to the sphere of the starting code's norm,
    which keeps the codes where the generator was trained (GAN steerability,
    Jahanian et al. 2020).  ``max_step`` (ours, a lever; None in the public code):
    the mapping's output is shortened to at most ``max_step * |z_0|`` before the step.
    """
    shape = z.shape
    flat = z.reshape(shape[0], -1)
    norm = flat.norm(dim=1, keepdim=True)
    path, prev = [z], flat
    for _ in range(n_steps):
        move = map_func(prev.view(shape)).reshape(shape[0], -1)
        if max_step is not None:
            cap = max_step * norm / move.norm(dim=1, keepdim=True).clamp_min(1e-12)
            move = move * cap.clamp(max=1.0)
        step = prev + move
        step = step * norm / step.norm(dim=1, keepdim=True).clamp_min(1e-12)
        path.append(step.view(shape))
        prev = step
    return path


# ----------------------------------------------------------------------------- losses

def classifier_loss(classifier: nn.Module, images: torch.Tensor, target: torch.Tensor,
                    cls_type: str = "nll", kappa: float = 0.05) -> torch.Tensor:
    """``L_cls`` (Eq. 3; official ``classifier_loss``) for a batch towards ``target`` (N,).

    The official classifier returns log-softmax outputs and uses ``NLLLoss``; ours
    returns logits, so the same quantity is the cross-entropy of the logits.
    """
    return classification_loss(classifier(images), target, cls_type, kappa)


def classification_loss(logits: torch.Tensor, target: torch.Tensor, cls_type: str = "nll",
                        kappa: float = 0.05) -> torch.Tensor:
    """:func:`classifier_loss` from the classifier's logits (N, K)."""
    if cls_type == "nll":
        return F.cross_entropy(logits, target)
    if cls_type == "hinge":
        prob = torch.softmax(logits, dim=1)
        p_t = prob.gather(1, target[:, None]).squeeze(1)
        others = prob.scatter(1, target[:, None], float("-inf"))
        return torch.clamp(others.amax(1) - p_t + kappa, min=0).mean()
    raise ValueError(f"cls_type must be one of {CLS_TYPES}, got {cls_type!r}")


def gen_masks(inputs: torch.Tensor, targets: torch.Tensor, mode: str = "mse") -> torch.Tensor:
    """Per-image min-max normalised difference mask (official ``gen_masks``).

    ``mode="mse"`` (used by the proximity loss) squares the difference, ``"abs"``
    takes its absolute value.  A small epsilon keeps identical images finite (the
    official code divides by zero there).
    """
    d = (targets - inputs).reshape(len(inputs), -1)
    if mode == "mse":
        d = d ** 2
    elif mode == "abs":
        d = d.abs()
    else:
        raise ValueError(f"mode must be 'mse' or 'abs', got {mode!r}")
    d = d - d.min(1, keepdim=True).values
    d = d / d.max(1, keepdim=True).values.clamp_min(1e-12)
    return d.view(inputs.shape)


def smoothness_loss(masks: torch.Tensor, power: float = 2.0) -> torch.Tensor:
    """Mean |difference|^2 of vertically and horizontally adjacent mask pixels (first channel)."""
    m = masks[:, 0]
    a = (m[:, :-1, :] - m[:, 1:, :]).abs().pow(power).flatten(1).mean(1)
    b = (m[:, :, :-1] - m[:, :, 1:]).abs().pow(power).flatten(1).mean(1)
    return (a + b).mean() / 2


def entropy_loss(masks: torch.Tensor) -> torch.Tensor:
    """``mean(min(m, 1 - m))``: zero for a binary mask (first channel)."""
    m = masks[:, 0]
    return torch.minimum(m, 1.0 - m).mean()


def proximity_loss(real: torch.Tensor, fake: torch.Tensor, p1: float = 0.0,
                   p2: float = 0.0) -> torch.Tensor:
    """``L_prox`` (Eq. 4): pixel L1 plus smoothness and entropy of the difference mask."""
    masks = gen_masks(real, fake, mode="mse")
    prx = (real - fake).abs().mean()
    return (prx + p1 * smoothness_loss(masks) + p2 * entropy_loss(masks)) / (1 + p1 + p2)


def classifier_features(classifier: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """The feature maps of the perceptual loss: conv+ReLU outputs of 'layer1' and 'layer2'.

    The official ``MNISTFeatureExtractor`` takes, for the classifier's two conv
    blocks, the output of conv+ReLU before the max-pool.  For
    :class:`cflib.models.C3LTClassifier` (``conv`` = conv, ReLU, pool, conv, ReLU,
    pool) these are ``conv[:2](x)`` and ``conv[2:5]`` of it.  Another classifier
    falls back to its ``features(x)`` map when it has one, else to pixels only.
    """
    conv = getattr(classifier, "conv", None)
    if isinstance(conv, nn.Sequential) and len(conv) >= 5:
        f1 = conv[:2](x)
        return [f1, conv[2:5](f1)]
    if hasattr(classifier, "features"):
        return [classifier.features(x)]
    return []


def perceptual_loss(imgs_1: torch.Tensor, imgs_2: torch.Tensor, classifier: nn.Module,
                    input_dis_penalty: float = 1.0) -> torch.Tensor:
    """Official ``perceptual_loss``: L1 of classifier features plus pixel L1, averaged."""
    feats = list(zip(classifier_features(classifier, imgs_1),
                     classifier_features(classifier, imgs_2)))
    out = sum((F.l1_loss(a, b) for a, b in feats), imgs_1.new_zeros(()))
    out = out + input_dis_penalty * F.l1_loss(imgs_1, imgs_2)
    return out / (1 + len(feats))


# ----------------------------------------------------------------------------- explainer

class C3LT(Explainer):
    """C3LT counterfactuals: ``x' = G(g^n(E(x)))`` with g learned per class pair.

    Build with the classifier to explain, a :class:`C3LTConfig` (or its fields as
    keywords) and the frozen ``generator``, ``encoder`` and ``discriminator``; call
    :meth:`fit` with training images of the query and the CF class; then
    :meth:`explain` maps query images towards the CF class (g) and CF-class images
    back towards the query class (h), in one batched pass.

    Half precision: refused.  C3LT learns its mappings by back-propagating the loss of
    Eq. 7 through three frozen networks (generator, classifier, discriminator) and the
    cycle through the mappings twice; at float16 that needs float32 master copies of the
    mappings and of every code and image crossing a network, which is not written (and
    the official code trains in float32).  A float16 / bfloat16 classifier, generator,
    encoder or discriminator is a ValueError naming its dtype in :meth:`fit` and
    :meth:`explain`, before any work (pass float32 networks: ``net.float()``).
    ``C3LT (reconstruction)``, a forward pass, runs them.
    """

    name = "C3LT"
    Config = C3LTConfig
    needs_fit = True
    half_precision = False

    def __init__(self, classifier: nn.Module, config: C3LTConfig | None = None, *,
                 generator: nn.Module, encoder: nn.Module,
                 discriminator: nn.Module | None = None, **kwargs):
        super().__init__(classifier, config, **kwargs)
        if generator is None or encoder is None:
            raise TypeError("C3LT needs a pretrained generator and encoder "
                            "(cflib.models.dcgan: Generator and EncoderDCGAN)")
        self._check_same_device(generator=generator, encoder=encoder,
                                discriminator=discriminator)
        self.generator = generator
        self.encoder = encoder
        self.discriminator = discriminator

    # -- what fit() learned: reads of the fit record -----------------------------------
    @property
    def maps(self) -> C3LTMappings | None:
        """The learned g and h (None before :meth:`fit`)."""
        return self._live.get("maps")

    @property
    def query_class(self) -> int | None:
        return self.fitted_value("query_class")

    @property
    def target_class(self) -> int | None:
        return self.fitted_value("target_class")

    def _restore(self, record) -> dict[str, nn.Module]:
        with torch.device("meta"):        # no initialisation, no draw from the global RNG
            maps = C3LTMappings(record.config["latent_dim"])
        maps.load_state_dict(record.state("maps"), assign=True)
        return {"maps": maps.eval().requires_grad_(False)}

    # -- helpers ---------------------------------------------------------------------
    def frozen_networks(self) -> dict[str, nn.Module]:
        nets = {"generator": self.generator, "encoder": self.encoder}
        if self.discriminator is not None:
            nets["discriminator"] = self.discriminator
        return nets

    @torch.no_grad()
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latent codes ``E(x)`` (N, d, 1, 1), in batches of ``batch_size``."""
        bs = self.config.batch_size
        with frozen(self.encoder):
            return torch.cat([self.encoder(x[i:i + bs].to(self.device))
                              for i in range(0, len(x), bs)])

    def _majority_class(self, x: torch.Tensor) -> int:
        return int(predict(self.classifier, x).argmax(1).mode().values)

    def _check_latent(self, x: torch.Tensor) -> None:
        with torch.no_grad(), frozen(self.encoder, self.generator):
            z = self.encoder(x[:2].to(self.device, model_dtype(self.encoder)))
            img = self.generator(z)
        d = self.config.latent_dim
        if z.shape[1:] != (d, 1, 1):
            raise ValueError(f"the encoder returns codes of shape {tuple(z.shape[1:])}, "
                             f"C3LT expects ({d}, 1, 1) (config latent_dim={d})")
        if img.shape[1:] != x.shape[1:]:
            raise ValueError(f"the generator makes images of shape {tuple(img.shape[1:])} "
                             f"but the data has shape {tuple(x.shape[1:])}")

    # -- training ----------------------------------------------------------------------
    def fit(self, x_query: torch.Tensor, x_target: torch.Tensor, cache: dict | None = None,
            *, query_class: int | None = None, target_class: int | None = None,
            assume_range: bool = False) -> "C3LT":
        """Learn g and h on training images of the two classes (``train_c3lt``).

        ``x_query`` are images of the query class c, ``x_target`` of the CF class c'
        (the TRAIN split).  The class indices default to the classifier's majority
        decision on each set.  An epoch pairs the two shuffled sets batch by batch
        and stops at the shorter one, as the official zip of two data loaders.
        ``cache`` (dataset, pair, profile, seed) makes a second call load the
        weights instead of training.  ``assume_range``: as in
        :meth:`~cflib.explainers.Explainer.explain`.
        """
        self._check_precision()
        check_images(x_query, "x_query", assume_range=assume_range)
        check_images(x_target, "x_target", assume_range=assume_range)
        if x_query.shape[1:] != x_target.shape[1:]:
            raise ValueError(f"x_query {tuple(x_query.shape[1:])} and x_target "
                             f"{tuple(x_target.shape[1:])} images differ in shape")
        self._check_latent(x_query)
        q = self._majority_class(x_query) if query_class is None else int(query_class)
        t = self._majority_class(x_target) if target_class is None else int(target_class)
        if q == t:
            raise ValueError(f"the query and CF classes are both {q}; pass query_class= "
                             "and target_class= or images of two different classes")
        k = n_classes_of(self.classifier, x_query)
        for c in (q, t):
            if not 0 <= c < k:
                raise ValueError(f"class {c} is not one of the classifier's {k} classes 0..{k - 1}")
        cfg = self.config
        with seeded(cfg.seed):  # the same initial g and h on every device
            net = C3LTMappings(cfg.latent_dim).to(self.device)
        if cache is not None:
            cache = {**cache, "query_class": q, "target_class": t,
                     "n_query": len(x_query), "n_target": len(x_target)}

        def train(m: C3LTMappings) -> dict:
            return self._train(m, x_query, x_target, q, t)

        info = self._cached_fit(net, cache, train)
        values = {"query_class": q, "target_class": t, "image_shape": tuple(x_query.shape[1:])}
        return self.record_fit({"maps": net}, values, info)

    def _train(self, maps: C3LTMappings, x_q: torch.Tensor, x_t: torch.Tensor,
               q: int, t: int) -> dict:
        cfg, dev = self.config, self.device
        D, f = self.discriminator, self.classifier
        t_start = time.perf_counter()
        use_adv = cfg.gamma > 0
        if use_adv and D is None:
            raise ValueError("gamma > 0 needs a discriminator: pass discriminator= "
                             "or set gamma=0")
        # E is frozen and deterministic (eval mode): encode once, not every epoch
        z_q_all, z_t_all = self.encode(x_q), self.encode(x_t)
        gen = torch.Generator().manual_seed(cfg.seed)
        opt = torch.optim.Adam(chain(maps.g.parameters(), maps.h.parameters()), lr=cfg.lr)
        per_step = cfg.decay_every_steps is not None
        sched = torch.optim.lr_scheduler.StepLR(
            opt, step_size=cfg.decay_every_steps if per_step else cfg.decay_step,
            gamma=cfg.decay_gamma)
        y_q = torch.full((cfg.batch_size,), q, dtype=torch.long, device=dev)
        y_t = torch.full((cfg.batch_size,), t, dtype=torch.long, device=dev)
        n = min(len(x_q), len(x_t))
        maps.train()
        hist: list[dict] = []
        per_epoch = -(-n // cfg.batch_size)
        log_every = max(1, per_epoch // 10)     # about ten points of the curves per epoch
        done, lr_sum = 0, 0.0
        # one batched pass per update (E, G, D and f frozen, evaluation mode: every image
        # is computed on its own, so batching the two directions and the cycles changes
        # nothing but the rounding): G on the four sets of codes, f on the two sets of
        # counterfactuals (whose logits also give the training validity), D on all four
        FG = self._frozen_generator()
        # the images and codes on the device once, each batch drawn there by index, the
        # logged sums kept there (read back at each logged point, about ten an epoch)
        x_q, x_t = x_q.to(dev), x_t.to(dev)
        z_q_all, z_t_all = z_q_all.to(dev), z_t_all.to(dev)
        for ep in range(cfg.epochs):
            perm_q = torch.randperm(len(x_q), generator=gen).to(dev)
            perm_t = torch.randperm(len(x_t), generator=gen).to(dev)
            sums, seen = torch.zeros(len(_LOGGED), device=dev), 0
            steps = progress(range(0, n, cfg.batch_size),
                             desc=f"C3LT {q}->{t} epoch {ep + 1}/{cfg.epochs}")
            for k, i in enumerate(steps):
                iq, it = perm_q[i:min(i + cfg.batch_size, n)], perm_t[i:min(i + cfg.batch_size, n)]
                x1, x2, z1, z2 = x_q[iq], x_t[it], z_q_all[iq], z_t_all[it]
                b = len(x1)
                with channels_last(FG, f, D):
                    loss, parts = self._update_loss(maps, FG, D, f, x1, x2, z1, z2,
                                                    y_t[:b], y_q[:b], use_adv)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                lr_sum += opt.param_groups[0]["lr"]
                opt.step()
                if per_step:
                    sched.step()
                sums += torch.stack([loss.detach(), *(v.detach() for v in parts)]) * b
                seen += b
                done += 1
                if seen and ((k + 1) % log_every == 0 or k + 1 == per_epoch):
                    s = (sums / seen).tolist()
                    hist.append(dict(zip(_LOGGED, s),
                                     step=done, epoch=ep + (k + 1) / per_epoch,
                                     lr=opt.param_groups[0]["lr"]))
                    sums, seen = torch.zeros(len(_LOGGED), device=dev), 0
            if not per_step:
                sched.step()
        maps.eval()
        steps = cfg.epochs * -(-n // cfg.batch_size)
        info = {"query_class": q, "target_class": t, "n_pairs_per_epoch": n,
                "epochs": cfg.epochs, "steps": steps, "final_lr": opt.param_groups[0]["lr"],
                "lr_sum": lr_sum,
                "public_fraction": lr_sum / public_lr_sum(len(x_q), len(x_t)),
                "train_seconds": time.perf_counter() - t_start, "history": hist}
        if hist:
            info.update({f"last_{k}": v for k, v in hist[-1].items()})
        return info

    def _frozen_generator(self) -> nn.Module:
        """The generator as the loops compute it: :class:`~cflib.models.dcgan.FrozenGenerator`
        (batch norms folded) for the book's DCGAN generator, any other generator as it is."""
        return frozen_generator(self.generator)

    def _update_loss(self, maps, G, D, f, x1, x2, z1, z2, y_t, y_q, use_adv: bool):
        """Eq. 7 for one batch of query images ``x1`` (codes ``z1``) and CF-class images
        ``x2`` (``z2``): ``(loss, [cls, prox, cyc, adv, train_validity, prox_l1])``, where
        ``prox_l1`` is the raw pixel L1 of the counterfactuals, the part of ``prox``
        that the table's proximity measures."""
        cfg, b = self.config, len(x1)
        z_cf = torch.cat([nonlinear_map_step(z1, maps.g, cfg.n_steps, cfg.max_step)[-1],
                          nonlinear_map_step(z2, maps.h, cfg.n_steps, cfg.max_step)[-1]])
        cycles = cfg.beta or use_adv
        codes = z_cf
        if cycles:
            z_cyc = torch.cat([nonlinear_map_step(z_cf[:b], maps.h, cfg.n_steps, cfg.max_step)[-1],
                               nonlinear_map_step(z_cf[b:], maps.g, cfg.n_steps, cfg.max_step)[-1]])
            codes = torch.cat([z_cf, z_cyc])
        imgs = G(codes)
        x_cf, x_real = imgs[:2 * b], torch.cat([x1, x2])
        logits = f(x_cf)
        # the mean over both directions equals the official average of the two means
        # (equal sizes), for each of the four terms
        cls = classification_loss(logits, torch.cat([y_t, y_q]), cfg.cls_type, cfg.kappa)
        zero = cls.new_zeros(())
        prox = proximity_loss(x_real, x_cf, cfg.p1, cfg.p2) if cfg.alpha else zero
        cyc = adv = zero
        if cfg.beta:
            x_cyc = imgs[2 * b:]
            cyc = (perceptual_loss(x_real, x_cyc, f)
                   + F.l1_loss(torch.cat([z1, z2]), codes[2 * b:])) / 2
        if use_adv:
            # BCE towards "real" on the two counterfactuals and the two cycled images
            d_out = D(imgs)
            adv = F.binary_cross_entropy(d_out, torch.ones_like(d_out))
        loss = cls + cfg.alpha * prox + cfg.beta * cyc + cfg.gamma * adv
        with torch.no_grad():
            valid = (logits[:b].argmax(1) == y_t).float().mean()
            prox_l1 = (x_real - x_cf).abs().mean()
        return loss, [cls, prox, cyc, adv, valid, prox_l1]

    # -- inference ---------------------------------------------------------------------
    def _generate(self, x, target, query, generator):
        if self.maps is None:
            raise RuntimeError("C3LT must be fitted first: call fit() before explain()")
        q, t = self.query_class, self.target_class
        bad = ~((target == t) | (target == q))
        if bad.any():
            raise ValueError(
                f"this C3LT was fitted for the pair {q}->{t}: it maps towards {t} (g) and "
                f"back towards {q} (h); got targets {target[bad].unique().tolist()}. "
                "Fit one C3LT per class pair.")
        if tuple(x.shape[1:]) != self.image_shape:
            raise ValueError(f"images of shape {tuple(x.shape[1:])} do not match the "
                             f"generator's {self.image_shape}")
        bs, n = self.config.batch_size, self.config.n_steps
        G = self._frozen_generator()
        out, recon = torch.empty_like(x), torch.empty_like(x)
        for i in range(0, len(x), bs):
            xb, tb = x[i:i + bs], target[i:i + bs]
            with torch.no_grad():
                z = self.encoder(xb)
            z = self.invert(z, xb, G)
            with torch.no_grad():
                z_g = nonlinear_map_step(z, self.maps.g, n, self.config.max_step)[-1]
                z_h = nonlinear_map_step(z, self.maps.h, n, self.config.max_step)[-1]
                z_cf = torch.where((tb == t).view(-1, 1, 1, 1), z_g, z_h)
                both = G(torch.cat([z_cf, z]))
                out[i:i + bs], recon[i:i + bs] = both[:len(xb)], both[len(xb):]
        # G(z): the query as the generator renders it before the mapping; the change
        # the mapping itself makes is |x_cf - G(z)| (Proximity_to_reconstruction)
        return out, {"reconstruction": recon}

    def invert(self, z: torch.Tensor, x: torch.Tensor, G: nn.Module | None = None) -> torch.Tensor:
        """The code refined at test time (``invert_steps`` Adam steps on ``|G(z) - x|_1``
        from ``z = E(x)``, each image on its own); ``z`` itself when ``invert_steps`` is 0.
        ``G``: the generator as computed (default: :meth:`_frozen_generator`)."""
        cfg = self.config
        if cfg.invert_steps == 0:
            return z
        G = G or self._frozen_generator()
        z = z.detach().clone().requires_grad_(True)
        opt = torch.optim.Adam([z], lr=cfg.invert_lr)
        for _ in range(cfg.invert_steps):
            # the sum of per-image means: each image's gradient is its own
            loss = (G(z) - x).abs().flatten(1).mean(1).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return z.detach()


class C3LTReconstruction(C3LT):
    """``C3LT (reconstruction)``: ``G(E(x))`` itself, the C3LT pipeline without the
    mapping.  A reference row: its proximity is what the encoder and generator alone
    change, so a reader sees how much of C3LT's change is the mapping.

    Half precision: runs float16 / bfloat16 networks (a forward pass: the batch is cast
    to the encoder's dtype, the images come back in the classifier's)."""

    name = "C3LT (reconstruction)"
    needs_fit = False
    half_precision = True

    def fit(self, *args, **kwargs) -> "C3LTReconstruction":
        """Nothing to learn: G and E are pretrained."""
        return self

    def _generate(self, x, target, query, generator):
        self._check_latent(x)
        bs = self.config.batch_size
        G = self._frozen_generator()
        out = torch.empty_like(x)
        with torch.no_grad():
            for i in range(0, len(x), bs):
                # the encoder's dtype in, the classifier's out (no-op casts in float32)
                out[i:i + bs] = G(self.encoder(x[i:i + bs].to(model_dtype(self.encoder))))
        return out


class C3LTInverted(C3LT):
    """``C3LT (inverted)`` (our variant): C3LT's mappings applied to the query's code after
    ``invert_steps`` steps of test-time inversion (:meth:`C3LT.invert`), so a reader sees
    how much of C3LT's change is the encoder's imperfect inversion.  Built from a fitted
    :class:`C3LT` (the same mappings, nothing retrained) with :meth:`from_fitted`."""

    name = "C3LT (inverted)"
    adopts = ("C3LT",)

    @classmethod
    def from_fitted(cls, c3lt: C3LT, invert_steps: int = 100,
                    invert_lr: float = 0.01) -> "C3LTInverted":
        """The fitted ``c3lt``'s record (its mappings, classes and training info) read by a
        ``C3LT (inverted)`` with the same networks and config but ``invert_steps`` and
        ``invert_lr``."""
        if c3lt.fit_record is None:
            raise RuntimeError("from_fitted needs a fitted C3LT: call fit() first")
        cfg = replace(c3lt.config, invert_steps=int(invert_steps), invert_lr=float(invert_lr))
        out = cls(c3lt.classifier, cfg, **c3lt.frozen_networks())
        return out._adopt(c3lt.fit_record)
