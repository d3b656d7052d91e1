"""The DCGAN and the image-to-latent encoder that C3LT steers (Khorram & Fuxin, CVPR 2022).

Architectures follow the official C3LT code (github.com/khorrams/c3lt):

* :class:`Generator` -- ``models/gans/dcgan.py``: the PyTorch-examples DCGAN
  generator (latent 100, ``ngf=64``), transposed convolutions 1 -> 4 -> 8 -> 16 -> 32,
  then a 1x1 transposed convolution with padding 2 that crops 32x32 to 28x28, tanh.
* :class:`Discriminator` -- same file: strided 4x4 convolutions 28 -> 14 -> 7 -> 3 -> 1
  (``ndf=64``), LeakyReLU 0.2, sigmoid; returns one probability per image.
* :class:`EncoderDCGAN` -- ``models/encoders/encoder_dcgan.py``: the discriminator's
  trunk whose last convolution outputs ``latent_dim`` channels, followed by a
  BatchNorm, giving ``z`` of shape (N, 100, 1, 1).

:func:`train_dcgan` is the PyTorch-examples DCGAN loop the official code points to
(Adam lr 2e-4, betas (0.5, 0.999), batch 64, BCE, the non-saturating generator
loss, N(0, 0.02) initialisation).  The official repository ships pretrained
encoder weights but not the script that trained them; :func:`train_encoder`
therefore states its own choice (see its docstring).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cflib.progress import progress
from cflib.scopes import channels_last, fast_paths_enabled

LATENT_DIM = 100


def weights_init(m: nn.Module) -> None:
    """DCGAN initialisation (Radford et al. 2016): conv N(0, 0.02), BatchNorm N(1, 0.02)."""
    name = type(m).__name__
    if "Conv" in name:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif "BatchNorm" in name:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


class Generator(nn.Module):
    """DCGAN generator for 28x28 images: z (N, latent_dim, 1, 1) -> x (N, nc, 28, 28) in [-1, 1]."""

    def __init__(self, latent_dim: int = LATENT_DIM, ngf: int = 64, nc: int = 1):
        super().__init__()
        self.latent_dim = latent_dim
        self.main = nn.Sequential(
            nn.ConvTranspose2d(latent_dim, ngf * 8, 4, 1, 0, bias=False),   # 4x4
            nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),      # 8x8
            nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),      # 16x16
            nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),          # 32x32
            nn.BatchNorm2d(ngf), nn.ReLU(True),
            # a 1x1 transposed conv with padding 2 crops 32x32 to MNIST's 28x28
            nn.ConvTranspose2d(ngf, nc, kernel_size=1, stride=1, padding=2, bias=False),
            nn.Tanh(),
        )
        self.apply(weights_init)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``main(z)``, computed as the same function with two shortcuts: the first
        transposed convolution (a 1x1 code to 4x4) as one matrix product, and the last
        (1x1 with padding 2, a crop of 32x32 to 28x28) as the crop followed by a 1x1
        convolution, whose input gradient is an order of magnitude cheaper than the
        padded transposed form's.  Forward hooks on ``main``'s first and last layers do
        not run.  Inside ``cflib.scopes.fast_paths(False)``: ``main(z)`` itself."""
        if not fast_paths_enabled():
            return self.main(z if z.dim() == 4 else z[:, :, None, None])
        n = len(z)
        m = self.main
        w0 = m[0].weight                                   # (latent, 8 ngf, 4, 4)
        h = (z.reshape(n, -1) @ w0.reshape(w0.shape[0], -1)).view(n, *w0.shape[1:])
        h = m[2](m[1](h))
        for i in range(3, 12, 3):
            h = m[i + 2](m[i + 1](m[i](h)))
        head = m[12]
        p = head.padding[0]
        h = F.conv2d(h[:, :, p:h.shape[2] - p, p:h.shape[3] - p], head.weight.transpose(0, 1))
        return m[13](h)


def _down(nc: int, ndf: int, out: int) -> list[nn.Module]:
    """The official discriminator's convolutions, 28x28 to 1x1 with ``out`` channels (the
    encoder shares them)."""
    return [
        nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),                        # 14x14
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),                   # 7x7
        nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),               # 3x3
        nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 4, out, 4, 2, 1, bias=False),                   # 1x1
    ]


class Discriminator(nn.Module):
    """DCGAN discriminator for 28x28 images: x -> probability of being real, shape (N,)."""

    def __init__(self, ndf: int = 64, nc: int = 1):
        super().__init__()
        self.main = nn.Sequential(*_down(nc, ndf, 1), nn.Sigmoid())
        self.apply(weights_init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x).view(-1)


class EncoderDCGAN(nn.Module):
    """Image -> latent code z of shape (N, latent_dim, 1, 1), the official C3LT encoder."""

    def __init__(self, latent_dim: int = LATENT_DIM, ndf: int = 64, nc: int = 1):
        super().__init__()
        self.latent_dim = latent_dim
        self.main = nn.Sequential(*_down(nc, ndf, latent_dim), nn.BatchNorm2d(latent_dim))
        self.apply(weights_init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x)


class FrozenGenerator(nn.Module):
    """A trained :class:`Generator` for the loops that keep it frozen (C3LT's mappings,
    the encoder's training, latent searches): the same function, computed faster.

    Each batch norm (evaluation mode: a fixed affine map per channel) is folded into the
    transposed convolution before it; the first layer (a 1x1 code to 4x4) is one matrix
    product whose output is already channels-last; the 32x32 output that the last 1x1
    transposed convolution with padding 2 crops to 28x28 is never computed: the
    convolution before it takes padding 3 instead of 1, which yields exactly the central
    28x28 (batch norm, ReLU and a 1x1 convolution act pixel by pixel, so cropping first
    changes nothing), and the 1x1 layer becomes a plain 1x1 convolution.  Everything runs
    channels-last.  Outputs equal the generator's up to float rounding (about 1e-7); it
    holds copies of the weights, never the generator's own, and has no gradients.  Build
    it from a generator in evaluation mode with ``FrozenGenerator(G)``; a generator
    trained further needs a new one.
    """

    def __init__(self, generator: Generator):
        super().__init__()
        layers = list(generator.main)
        if (len(layers) != 14 or not isinstance(layers[12], nn.ConvTranspose2d)
                or layers[12].kernel_size != (1, 1) or layers[12].padding != (2, 2)
                or layers[0].kernel_size != (4, 4) or layers[0].stride != (1, 1)):
            raise TypeError("FrozenGenerator folds the DCGAN Generator of cflib.models.dcgan "
                            f"(got {type(generator).__name__} with {len(layers)} layers)")
        self.latent_dim = generator.latent_dim
        cl = torch.channels_last
        with torch.no_grad():
            folded = []
            for i in range(0, 12, 3):
                ct, bn = layers[i], layers[i + 1]
                scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
                folded.append((ct, ct.weight * scale.view(1, -1, 1, 1),
                               bn.bias - bn.running_mean * scale))
            ct0, w0, b0 = folded[0]
            c0 = ct0.out_channels
            # z (N, d) @ (d, 4*4*c0): the output's memory is (N, 4, 4, c0), channels-last
            self.w0 = nn.Parameter(w0.permute(0, 2, 3, 1).reshape(ct0.in_channels, -1).clone())
            self.b0 = nn.Parameter(b0.repeat(16).clone())
            convs = []
            for k, (ct, w, b) in enumerate(folded[1:]):
                last = k == len(folded) - 2
                fused = nn.ConvTranspose2d(ct.in_channels, ct.out_channels, ct.kernel_size,
                                           ct.stride, ct.padding[0] + (2 if last else 0),
                                           bias=True)
                fused.weight.copy_(w)
                fused.bias.copy_(b)
                convs += [fused, nn.ReLU()]
            self.body = nn.Sequential(*convs)
            head = layers[12].weight                      # (ngf, nc, 1, 1)
            self.head = nn.Conv2d(head.shape[0], head.shape[1], 1, bias=False)
            self.head.weight.copy_(head.transpose(0, 1))
        self.c0 = c0
        self.to(next(generator.parameters()).device)
        for m in self.body:
            if isinstance(m, nn.ConvTranspose2d):
                m.weight.data = m.weight.data.contiguous(memory_format=cl)
        self.eval().requires_grad_(False)

    def train(self, mode: bool = True) -> "FrozenGenerator":
        return super().train(False)                     # frozen: always evaluation mode

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        n = len(z)
        h = torch.addmm(self.b0, z.reshape(n, -1), self.w0)
        h = torch.relu(h.view(n, 4, 4, self.c0).permute(0, 3, 1, 2))   # channels-last
        for m in self.body:
            h = m(h)
            if h.dim() == 4 and not h.is_contiguous(memory_format=torch.channels_last):
                h = h.contiguous(memory_format=torch.channels_last)
        return torch.tanh(self.head(h))


def frozen_generator(generator: nn.Module) -> nn.Module:
    """The generator as a loop that keeps it frozen computes it: a :class:`FrozenGenerator`
    of the book's :class:`Generator`, any other generator (or any generator inside
    ``cflib.scopes.fast_paths(False)``) as it is."""
    if isinstance(generator, Generator) and fast_paths_enabled():
        return FrozenGenerator(generator)
    return generator


class DCGAN(nn.Module):
    """Generator and discriminator in one module, so that they are cached together."""

    def __init__(self, latent_dim: int = LATENT_DIM, ngf: int = 64, ndf: int = 64, nc: int = 1):
        super().__init__()
        self.latent_dim = latent_dim
        self.generator = Generator(latent_dim, ngf, nc)
        self.discriminator = Discriminator(ndf, nc)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.generator(z)


def _device(module: nn.Module) -> torch.device:
    return next(module.parameters()).device


def _noise(n: int, latent_dim: int, gen: torch.Generator, device) -> torch.Tensor:
    # drawn on the CPU from a seeded generator: the same codes on every device
    return torch.randn(n, latent_dim, 1, 1, generator=gen).to(device)


def _order(n: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randperm(n, generator=gen)


def train_dcgan(gan: DCGAN, x: torch.Tensor, epochs: int, lr: float = 2e-4,
                beta1: float = 0.5, batch_size: int = 64, seed: int = 0,
                desc: str = "DCGAN") -> dict:
    """The PyTorch-examples DCGAN loop used by the official C3LT code.

    Per batch: the discriminator maximises ``log D(x) + log(1 - D(G(z)))``; the
    generator then maximises ``log D(G(z))`` (the non-saturating loss) on the same
    fake batch.  ``x`` are real images in [-1, 1].  Returns the last epoch's mean
    losses and ``D(x)``/``D(G(z))``.
    """
    if epochs < 0:
        raise ValueError(f"epochs must be >= 0, got {epochs}")
    G, D = gan.generator, gan.discriminator
    dev = _device(gan)
    gen = torch.Generator().manual_seed(seed)
    opt_d = torch.optim.Adam(D.parameters(), lr=lr, betas=(beta1, 0.999))
    opt_g = torch.optim.Adam(G.parameters(), lr=lr, betas=(beta1, 0.999))
    gan.train()
    stats: dict = {}
    # the images on the device once, each batch drawn there by index, and the epoch's
    # sums kept there: nothing read back until the epoch ends
    x = x.to(dev)
    with channels_last(G, D):       # about 5% faster on the CPU; the same function
        for ep in range(epochs):
            sums = torch.zeros(4, device=dev)
            n_seen = 0
            # progress inside the epoch: one epoch of the DCGAN takes minutes on a CPU
            for idx in progress(_order(len(x), gen).to(dev).split(batch_size),
                                desc=f"{desc} epoch {ep + 1}/{epochs}"):
                real = x[idx]
                b = len(real)
                ones, zeros = torch.ones(b, device=dev), torch.zeros(b, device=dev)
                # (1) discriminator step on real and (detached) fake images
                fake = G(_noise(b, gan.latent_dim, gen, dev))
                d_real = D(real)
                d_fake = D(fake.detach())
                loss_d = F.binary_cross_entropy(d_real, ones) + F.binary_cross_entropy(d_fake, zeros)
                opt_d.zero_grad(set_to_none=True)
                loss_d.backward()
                opt_d.step()
                # (2) generator step: fake labels are "real" for the generator's loss
                d_fake2 = D(fake)
                loss_g = F.binary_cross_entropy(d_fake2, ones)
                opt_g.zero_grad(set_to_none=True)
                loss_g.backward()
                opt_g.step()
                sums += torch.stack([loss_d.detach(), loss_g.detach(),
                                     d_real.detach().mean(), d_fake.detach().mean()]) * b
                n_seen += b
            if n_seen:
                s = (sums / n_seen).tolist()
                stats = {"loss_d": s[0], "loss_g": s[1], "d_x": s[2], "d_g_z": s[3]}
    gan.eval()
    return stats


def train_encoder(encoder: EncoderDCGAN, generator: Generator, x: torch.Tensor, epochs: int,
                  lr: float = 1e-3, batch_size: int = 128, latent_weight: float = 1.0,
                  seed: int = 0, desc: str = "encoder") -> dict:
    """Train ``encoder`` to invert the frozen ``generator`` (our choice; see below).

    The official C3LT code loads a pretrained ``EncoderDCGAN`` but does not publish
    how it was trained.  We use the two standard GAN-inversion terms:

    * image reconstruction on real images, ``|G(E(x)) - x|_1``: what C3LT needs,
      since the counterfactual is ``G(g(E(x)))`` and should stay close to ``x``;
    * latent reconstruction on generated images, ``|E(G(z)) - z|_2^2`` with
      ``z ~ N(0, I)`` (weight ``latent_weight``): keeps the codes of real images
      in the region of the latent space the generator was trained on, where C3LT's
      norm-preserving steps operate.

    The generator stays in evaluation mode and is not updated.  Adam, lr ``lr``.
    Returns the last epoch's mean losses.
    """
    if epochs < 0:
        raise ValueError(f"epochs must be >= 0, got {epochs}")
    dev = _device(encoder)
    gen = torch.Generator().manual_seed(seed)
    generator.eval()
    req = [p.requires_grad for p in generator.parameters()]
    for p in generator.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(encoder.parameters(), lr=lr, betas=(0.5, 0.999))
    encoder.train()
    stats: dict = {}
    # the frozen generator as a FrozenGenerator (the same function, about 1.4x faster
    # forward and backward), the encoder channels-last (cflib.scopes.channels_last)
    G = frozen_generator(generator)
    x = x.to(dev)      # on the device once, batches drawn there (as train_dcgan)
    try:
        with channels_last(encoder):
            for ep in range(epochs):
                sums, n_seen = torch.zeros(2, device=dev), 0
                for idx in progress(_order(len(x), gen).to(dev).split(batch_size),
                                    desc=f"{desc} epoch {ep + 1}/{epochs}"):
                    real = x[idx]
                    b = len(real)
                    loss_img = (G(encoder(real)) - real).abs().mean()
                    z = _noise(b, encoder.latent_dim, gen, dev)
                    with torch.no_grad():
                        x_fake = G(z)
                    loss_lat = ((encoder(x_fake) - z) ** 2).mean()
                    loss = loss_img + latent_weight * loss_lat
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    sums += torch.stack([loss_img.detach(), loss_lat.detach()]) * b
                    n_seen += b
                if n_seen:
                    s = (sums / n_seen).tolist()
                    stats = {"loss_img_l1": s[0], "loss_latent_mse": s[1]}
    finally:
        for p, r in zip(generator.parameters(), req):
            p.requires_grad_(r)
    encoder.eval()
    return stats
