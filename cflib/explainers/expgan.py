"""``ExpGAN``: ExplainGAN (Samangouei, Saeedi, Nakagawa & Silberman, ECCV 2018).

"ExplainGAN: Model Explanation via Decision Boundary Crossing Transformations".
For one pair of classes (query ``q``, target ``t``) of a frozen classifier ``F``,
ExplainGAN learns image-to-image generators that, for an input ``x`` the
classifier puts in class ``y``, produce

* a **reconstruction** ``x_rec`` of ``x`` in its own class ``y``;
* a **transformation** ``x_tr`` of ``x`` into the other class ``y'``, and a
  **mask** ``m`` in [0, 1] of the pixels that change;
* the **composite** ``c = m * x_tr + (1 - m) * x`` (paper, Sec. 3), which is the
  counterfactual: only masked pixels differ from the input.

Training minimises (paper, Sec. 3.2; the weights are ours, see below)

* ``L_cls = -log F(y' | c)``: the composite crosses the decision boundary;
* ``L_rec = ||x - x_rec||^2``: the generator of an image's own class reproduces it;
* ``L_GAN`` (the paper's Eq. 8): class-specific discriminators ``D_j`` tell real
  images the classifier puts in class ``j`` from every generated image that claims
  to be of class ``j`` (reconstructions of class-``j`` images, transformations and
  composites of the other class's images);
* the mask priors: consistency ``||(1 - m) * (x - x_tr)||^2`` (outside the mask the
  transformation must equal the input, so the mask is where the change really is),
  count ``max(mean(m), kappa)`` (at most a fraction ``kappa`` of pixels changes),
  smoothness (total variation of ``m``) and entropy ``||min(m, 1 - m)||_2``
  (masks close to binary).

Layout of the networks here: one generator per class, ``G_j`` makes images of
class ``j`` and outputs an image (tanh, [-1, 1]) and a mask (sigmoid).  ``G_y`` on
a class-``y`` image is its reconstruction; ``G_{y'}`` on it is the transformation
and mask.  The discriminator is one small CNN with two logits (``D_q``, ``D_t``
sharing their convolutions).  Each generator is a small conv encoder-decoder for
28x28 images.  Training images are grouped by the classifier's decision between
``q`` and ``t`` (ExplainGAN explains the classifier, not the labels).

Where the paper is silent (architectures, optimiser, loss weights for MNIST)
the choices are ours: width-16 conv encoder-decoders (28 -> 7 -> 28) without
normalisation layers; Adam (lr 1e-3, betas 0.5/0.999) for G and D, one D step per
G step; every loss a per-pixel / per-image mean so the weights do not depend on
the image size; default weights cls 3, rec 10, GAN 0.1, consistency 10, count 10
with ``kappa`` 0.05, smoothness 0.5, entropy 0.5.  The book's chapters replace some
of them by the candidate chosen on a validation pair that no table uses
(chosen on validation data; the book's protocol notes say how).

Inference is one batched forward pass of the generator of the target class.

Half precision: ExplainGAN's own generators and discriminator are trained and run in
float32 whatever the classifier's dtype (Adam on float16 weights loses the small
updates; the networks are ExplainGAN's, not the caller's); a float16 / bfloat16
classifier runs in its own dtype on the composites cast to it, its loss is taken in
float32, and the counterfactuals are returned in the classifier's dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

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
    working,
)
from cflib.progress import progress
from cflib.scopes import seeded


@dataclass(frozen=True)
class ExpGANConfig(ExplainerConfig):
    """ExplainGAN training arguments (weights: the paper gives none for MNIST)."""

    epochs: int = 4
    batch_size: int = 128          # training batch; also the chunk of explain()
    lr: float = 1e-3               # Adam, generators and discriminator
    beta1: float = 0.5             # Adam beta1 (DCGAN's)
    width: int = 16                # channels of the first conv layer of G and D
    # loss weights (paper, Sec. 3.2: classifier, reconstruction, GAN, priors)
    cls_weight: float = 3.0        # -log F(target | composite)
    rec_weight: float = 10.0       # mean squared reconstruction error (identity)
    gan_weight: float = 0.1        # non-saturating adversarial loss of the generators
    const_weight: float = 10.0     # consistency prior: (1 - m) * (x - x_tr) -> 0
    count_weight: float = 10.0     # count prior: max(mean mask, kappa)
    kappa: float = 0.05            # fraction of pixels the mask may cover for free
    smooth_weight: float = 0.5     # total variation of the mask
    entropy_weight: float = 0.5    # ||min(m, 1 - m)||_2 (binary masks)
    seed: int = 0                  # initialisation and batch order

    def __post_init__(self):
        super().__post_init__()
        if self.epochs < 0 or self.batch_size < 1 or self.width < 1 or self.lr <= 0:
            raise ValueError("ExpGAN needs epochs >= 0, batch_size >= 1, width >= 1 and lr > 0; "
                             f"got epochs={self.epochs}, batch_size={self.batch_size}, "
                             f"width={self.width}, lr={self.lr}")
        if not 0 <= self.kappa <= 1:
            raise ValueError(f"kappa is a fraction of pixels in [0, 1], got {self.kappa}")
        weights = {k: v for k, v in self.__dict__.items() if k.endswith("_weight")}
        if any(v < 0 for v in weights.values()):
            raise ValueError(f"loss weights must be >= 0, got {weights}")


# --------------------------------------------------------------------------- networks

class MaskGenerator(nn.Module):
    """A small conv encoder-decoder for CxHxW images -> (image in [-1, 1], mask in [0, 1]).

    H -> H/2 -> H/4 (two stride-2 convs; 28 -> 14 -> 7), a 3x3 conv, then two
    transposed convs back to H; the last layer has C + 1 channels, tanh for the
    image, sigmoid for the mask.  No normalisation layer, so training and evaluation
    mode agree.  H and W must be multiples of 4.
    """

    def __init__(self, width: int = 32, channels: int = 1):
        super().__init__()
        w, c = width, channels
        self.channels = c
        self.net = nn.Sequential(
            nn.Conv2d(c, w, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(w, 2 * w, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(2 * w, 2 * w, 3, 1, 1), nn.LeakyReLU(0.2),
            nn.ConvTranspose2d(2 * w, w, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.ConvTranspose2d(w, c + 1, 4, 2, 1),
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(x)
        c = self.channels
        return torch.tanh(out[:, :c]), torch.sigmoid(out[:, c:])


class PairDiscriminator(nn.Module):
    """``D_q`` and ``D_t`` as two logits over shared convolutions (DCGAN-style)."""

    def __init__(self, width: int = 32, image_shape=(1, 28, 28)):
        super().__init__()
        w, (c, h, wd) = width, image_shape
        self.net = nn.Sequential(
            nn.Conv2d(c, w, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(w, 2 * w, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Flatten(), nn.Linear(2 * w * (h // 4) * (wd // 4), 2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ExpGANNet(nn.Module):
    """Every trained part, so the weight cache holds the whole state.

    ``generators[0]`` makes query-class images, ``generators[1]`` target-class images.
    """

    def __init__(self, width: int = 32, image_shape=(1, 28, 28)):
        super().__init__()
        c = image_shape[0]
        self.generators = nn.ModuleList([MaskGenerator(width, c), MaskGenerator(width, c)])
        self.discriminator = PairDiscriminator(width, image_shape)


# --------------------------------------------------------------------------- losses

def total_variation(m: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of neighbouring mask values (smoothness prior)."""
    return ((m[..., 1:, :] - m[..., :-1, :]).abs().mean()
            + (m[..., :, 1:] - m[..., :, :-1]).abs().mean())


def _bce(logits: torch.Tensor, real: bool) -> torch.Tensor:
    target = torch.ones_like(logits) if real else torch.zeros_like(logits)
    return F.binary_cross_entropy_with_logits(logits, target)


# --------------------------------------------------------------------------- explainer

class ExpGAN(Explainer):
    """ExplainGAN for one (query, target) class pair; see the module docstring.

    ``fit(x_query, x_target, pair=(q, t))`` trains on images of the two classes;
    ``explain(x, target)`` then maps each image to the class ``target`` (``t`` or
    ``q``) with the generator of that class, in one batched forward pass.
    """

    name = "ExpGAN"
    Config = ExpGANConfig
    needs_fit = True

    def __init__(self, classifier: nn.Module, config: ExpGANConfig | None = None, **kwargs):
        super().__init__(classifier, config, **kwargs)

    # ---------------------------------------------------------------- reads of the fit record
    @property
    def net(self) -> ExpGANNet | None:
        """The trained generators and discriminator (None before :meth:`fit`)."""
        return self._live.get("net")

    @property
    def pair(self) -> tuple[int, int] | None:
        return self.fitted_value("pair")

    def _restore(self, record) -> dict[str, nn.Module]:
        with torch.device("meta"):        # no initialisation, no draw from the global RNG
            net = ExpGANNet(record.config["width"], record.values["image_shape"])
        net.load_state_dict(record.state("net"), assign=True)
        return {"net": net.eval().requires_grad_(False)}

    # ---------------------------------------------------------------- training
    def fit(self, x_query: torch.Tensor, x_target: torch.Tensor, pair=None,
            cache: dict | None = None, *, assume_range: bool = False) -> "ExpGAN":
        """Train (or load from the weight cache) the generators and discriminator.

        ``x_query`` / ``x_target``: training images of the query and target class.
        ``pair``: the classes ``(q, t)``; when None, each is the classifier's
        majority decision on the corresponding images.  Every training image is
        then grouped by the classifier's decision between ``q`` and ``t``
        (ExplainGAN explains the classifier's decisions, not the labels).
        ``cache``: dataset, pair, profile, seed, ... of the weight cache (None:
        train without caching).  ``assume_range``: as in
        :meth:`~cflib.explainers.Explainer.explain`.
        """
        check_images(x_query, "x_query", assume_range=assume_range)
        check_images(x_target, "x_target", assume_range=assume_range)
        shape = tuple(x_query.shape[1:])
        if tuple(x_target.shape[1:]) != shape:
            raise ValueError(f"x_query {shape} and x_target {tuple(x_target.shape[1:])} "
                             "images differ in shape")
        if shape[1] % 4 or shape[2] % 4:
            raise ValueError(f"ExpGAN's generators halve the image twice: height and width "
                             f"must be multiples of 4, got {shape[1]}x{shape[2]}")
        k = n_classes_of(self.classifier, x_query)
        if pair is None:
            pair = (int(predict(self.classifier, x_query).argmax(1).mode().values),
                    int(predict(self.classifier, x_target).argmax(1).mode().values))
        q, t = int(pair[0]), int(pair[1])
        if q == t or not (0 <= q < k and 0 <= t < k):
            raise ValueError(f"pair ({q}, {t}) must be two different classes in 0..{k - 1}"
                             + ("; pass pair=(query, target) to fit()" if q == t else ""))
        # ExplainGAN's networks train in float32 (module docstring)
        x = torch.cat([x_query.detach().cpu(), x_target.detach().cpu()]).to(torch.float32)
        # the classifier's decision between the two classes: 0 -> q, 1 -> t
        side = predict(self.classifier, x)[:, [q, t]].argmax(1).cpu()

        cfg = self.config
        with seeded(cfg.seed):  # same initial weights for the same seed
            net = ExpGANNet(cfg.width, shape).to(self.device)
        key = None
        if cache is not None:
            key = {**cache, "classes": [q, t], "n_query": len(x_query),
                   "n_target": len(x_target)}
        info = self._cached_fit(net, key, lambda n: self._train(n, x, side, (q, t)))
        values = {"pair": (q, t), "image_shape": shape}
        return self.record_fit({"net": net}, values, info)

    def _train(self, net: ExpGANNet, x: torch.Tensor, side: torch.Tensor,
               pair: tuple[int, int]) -> dict:
        """Alternating discriminator / generator Adam steps (the paper's objective)."""
        cfg, dev = self.config, self.device
        q, t = pair
        classes = torch.tensor([q, t], device=dev)
        net.train()
        gens, disc = net.generators, net.discriminator
        opt_g = torch.optim.Adam(gens.parameters(), lr=cfg.lr, betas=(cfg.beta1, 0.999))
        opt_d = torch.optim.Adam(disc.parameters(), lr=cfg.lr, betas=(cfg.beta1, 0.999))
        order_gen = torch.Generator().manual_seed(cfg.seed)
        hist: dict[str, float] = {}
        for _ in progress(range(cfg.epochs), desc=f"ExpGAN {q}->{t}"):
            sums: dict[str, float] = {}
            order = torch.randperm(len(x), generator=order_gen)
            n_batches = 0
            for i in range(0, len(x), cfg.batch_size):
                idx = order[i:i + cfg.batch_size]
                xb, yb = x[idx].to(dev), side[idx].to(dev)
                losses = self._step(gens, disc, opt_g, opt_d, xb, yb, classes)
                for k, v in losses.items():
                    sums[k] = sums.get(k, 0.0) + v
                n_batches += 1
            hist = {k: v / max(n_batches, 1) for k, v in sums.items()}
        net.eval()
        return {f"last_epoch_{k}": round(v, 5) for k, v in hist.items()}

    def _step(self, gens, disc, opt_g, opt_d, xb, yb, classes) -> dict[str, float]:
        cfg = self.config
        rows = torch.arange(len(xb), device=xb.device)
        img_q, mask_q = gens[0](xb)
        img_t, mask_t = gens[1](xb)
        imgs, masks = torch.stack([img_q, img_t], 1), torch.stack([mask_q, mask_t], 1)
        other = 1 - yb
        x_rec = imgs[rows, yb]                       # G_y(x): own class, identity
        x_tr, m = imgs[rows, other], masks[rows, other]  # G_y'(x): other class + mask
        comp = m * x_tr + (1 - m) * xb               # the counterfactual

        # discriminator D_j: real images of class j vs generated images claiming class j
        fakes = torch.cat([x_rec, x_tr, comp])
        fake_cls = torch.cat([yb, other, other])
        d_real = disc(xb).gather(1, yb[:, None])
        d_fake = disc(fakes.detach()).gather(1, fake_cls[:, None])
        loss_d = _bce(d_real, True) + _bce(d_fake, False)
        opt_d.zero_grad(set_to_none=True)
        loss_d.backward()
        opt_d.step()

        # generators
        loss_gan = _bce(disc(fakes).gather(1, fake_cls[:, None]), True)
        # the classifier in its own dtype (a no-op cast for a float32 one)
        logits = working(self.classifier(comp.to(model_dtype(self.classifier))))
        loss_cls = F.cross_entropy(logits, classes[other])
        loss_rec = F.mse_loss(x_rec, xb)
        loss_const = (((1 - m) * (x_tr - xb)) ** 2).mean()
        loss_count = m.mean((1, 2, 3)).clamp(min=cfg.kappa).mean()
        loss_smooth = total_variation(m)
        loss_entropy = torch.minimum(m, 1 - m).pow(2).mean((1, 2, 3)).add(1e-8).sqrt().mean()
        loss_g = (cfg.cls_weight * loss_cls + cfg.rec_weight * loss_rec
                  + cfg.gan_weight * loss_gan + cfg.const_weight * loss_const
                  + cfg.count_weight * loss_count + cfg.smooth_weight * loss_smooth
                  + cfg.entropy_weight * loss_entropy)
        opt_g.zero_grad(set_to_none=True)
        loss_g.backward()
        opt_g.step()
        acc = (logits.detach().argmax(1) == classes[other]).float().mean()
        return {"d": loss_d.item(), "gan": loss_gan.item(), "cls": loss_cls.item(),
                "rec": loss_rec.item(), "const": loss_const.item(),
                "mask_mean": m.mean().item(), "valid": acc.item()}

    # ---------------------------------------------------------------- inference
    def transform(self, x: torch.Tensor, target, *, assume_range: bool = False
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(composite, transformed image, mask) of ``x`` towards ``target`` (q or t), in
        float32 (ExplainGAN's networks); ``assume_range``: as in
        :meth:`~cflib.explainers.Explainer.explain`."""
        if self.net is None:
            raise RuntimeError("ExpGAN must be fitted first: call fit() before explain()")
        check_images(x, assume_range=assume_range)
        return self._transform(x, target)

    @torch.no_grad()
    def _transform(self, x: torch.Tensor, target):
        if self.net is None:
            raise RuntimeError("ExpGAN must be fitted first: call fit() before explain()")
        if tuple(x.shape[1:]) != self.image_shape:
            raise ValueError(f"this ExpGAN was trained on {self.image_shape} images, got "
                             f"{tuple(x.shape[1:])}")
        q, t = self.pair
        x = x.to(self.device, next(self.net.parameters()).dtype)
        target = torch.as_tensor(target, device=x.device).long()
        if target.dim() == 0:
            target = target.expand(len(x))
        if target.shape != (len(x),):
            raise ValueError(f"target must be an int or have shape ({len(x)},), "
                             f"got {tuple(target.shape)}")
        bad = ~((target == q) | (target == t))
        if bad.any():
            raise ValueError(
                f"this ExpGAN was trained for the pair ({q}, {t}); it cannot map to "
                f"class(es) {sorted(set(target[bad].tolist()))}. Fit one ExpGAN per "
                "(query, target) pair")
        comp, x_tr, mask = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
        for j, cls in enumerate((q, t)):
            rows = (target == cls).nonzero().squeeze(1)
            for i in range(0, len(rows), self.config.batch_size):
                r = rows[i:i + self.config.batch_size]
                img, m = self.net.generators[j](x[r])
                x_tr[r], mask[r] = img, m
                comp[r] = m * img + (1 - m) * x[r]
        return comp, x_tr, mask

    def _generate(self, x, target, query, generator):
        # deterministic: ExplainGAN's counterfactual is a forward pass, no sampling; the
        # batch was checked by explain(), and comes back in the classifier's dtype
        return self._transform(x, target)[0].to(x.dtype)

