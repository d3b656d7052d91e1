"""``Latent search``: what a generator allows, found one query at a time.

A reference row for the C3LT table: the REVISE recipe of Joshi, Koyejo, Vijitbenjaronk,
Kim & Ghosh, *Towards Realistic Individual Recourse and Actionable Explanations in
Black-Box Decision Making Systems* (2019, arXiv 1907.09615), Sec. 3: a counterfactual is
searched in the latent space of a generative model::

    z* = argmin_z  CE(f(G(z)), t) + lambda * mean |G(z) - x|,     x' = G(z*),

by gradient descent from the code of the query, ``z_0 = E(x)``.  Run on C3LT's own
frozen DCGAN generator ``G`` and encoder ``E``, with C3LT's projection after every step
(``z`` rescaled to the norm of ``z_0``, as ``nonlinear_map_step`` does: the codes stay on
the sphere the mappings use), it bounds what any method that renders its counterfactual
as ``G(z)`` with this generator can reach: C3LT's mapping ``g`` is one learned function
of ``z_0`` for every query, this search is one local search per query of the same form
(its ``lambda`` fixed on a validation pair), not the best answer the generator allows.
The distance is the table's proximity (the mean absolute change per pixel on [-1, 1]).

Each query is optimised on its own (the loss is a sum of per-image terms, so one batched
Adam is ``batch_size`` independent searches).  Over the ``steps`` iterates, a query keeps
the closest one the classifier assigns to the target (the iterate is judged on the same
forward pass that gives its gradient); a query that never reaches the target returns its
last iterate and counts as a failure.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cflib.explainers.base import Explainer, ExplainerConfig
from cflib.models.dcgan import frozen_generator
from cflib.progress import progress


@dataclass(frozen=True)
class LatentSearchConfig(ExplainerConfig):
    """``lambda_``: weight of the pixel distance (REVISE's lambda); ``steps`` Adam steps of
    learning rate ``lr`` on the code; ``project``: rescale the code to the norm of
    ``E(x)`` after every step (C3LT's sphere; False: REVISE's unconstrained search)."""

    lambda_: float = 1.0
    steps: int = 200
    lr: float = 0.05
    project: bool = True
    batch_size: int = 128

    def __post_init__(self):
        super().__post_init__()
        if self.lambda_ < 0 or self.steps < 1 or not self.lr > 0:
            raise ValueError(f"need lambda_ >= 0, steps >= 1 and lr > 0, got {self.lambda_}, "
                             f"{self.steps}, {self.lr}")


class LatentSearch(Explainer):
    """REVISE on a frozen generator and encoder (C3LT's): a reference row that shows what
    the generator allows.  Built from the classifier, a :class:`LatentSearchConfig` and the
    ``generator`` and ``encoder``; nothing to fit."""

    name = "Latent search"
    Config = LatentSearchConfig
    #: a float16 / bfloat16 generator is refused: the search's Adam on the code and its
    #: distance are float32, as C3LT's mappings (whose generator it shares)
    half_precision = False

    def __init__(self, classifier: nn.Module, config: LatentSearchConfig | None = None, *,
                 generator: nn.Module, encoder: nn.Module, **kwargs):
        super().__init__(classifier, config, **kwargs)
        if generator is None or encoder is None:
            raise TypeError("Latent search needs a generator and an encoder "
                            "(cflib.models.dcgan: Generator and EncoderDCGAN)")
        self._check_same_device(generator=generator, encoder=encoder)
        self.generator, self.encoder = generator, encoder

    def frozen_networks(self) -> dict[str, nn.Module]:
        return {"generator": self.generator, "encoder": self.encoder}

    def _generate(self, x, target, query, generator):
        G = frozen_generator(self.generator)
        out = torch.empty_like(x)
        steps = torch.empty(len(x), device=x.device)
        bs = self.config.batch_size
        for i in range(0, len(x), bs):
            out[i:i + bs], steps[i:i + bs] = self._search(G, x[i:i + bs], target[i:i + bs])
        return out, {"reconstruction": self._render(G, x), "steps_to_target": steps}

    @torch.no_grad()
    def _render(self, G, x: torch.Tensor) -> torch.Tensor:
        """G(E(x)): where every search starts."""
        bs = self.config.batch_size
        return torch.cat([G(self.encoder(x[i:i + bs])) for i in range(0, len(x), bs)])

    def _search(self, G, x: torch.Tensor, t: torch.Tensor):
        cfg = self.config
        n = len(x)
        with torch.no_grad():
            z0 = self.encoder(x)
        norm = z0.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
        z = z0.clone().requires_grad_(True)
        opt = torch.optim.Adam([z], lr=cfg.lr)
        best = torch.full((n,), float("inf"), device=x.device)
        best_img = torch.empty_like(x)
        first = torch.full((n,), float("nan"), device=x.device)
        img = None
        for k in progress(range(cfg.steps + 1), desc=f"{self.name} steps"):
            img = G(z)
            dist = (img - x).abs().flatten(1).mean(1)
            logits = self.classifier(img)
            with torch.no_grad():       # the iterate z_k, judged on its own forward pass
                valid = logits.argmax(1) == t
                closer = valid & (dist < best)
                best = torch.where(closer, dist, best)
                # a selection, not a masked assignment (which synchronises on its count)
                best_img = torch.where(closer.view(-1, 1, 1, 1), img, best_img)
                first = torch.where(valid & first.isnan(), torch.full_like(first, k), first)
            if k == cfg.steps:
                break
            loss = F.cross_entropy(logits, t, reduction="sum") + cfg.lambda_ * dist.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if cfg.project:
                with torch.no_grad():
                    z.mul_(norm / z.flatten(1).norm(dim=1).view(-1, 1, 1, 1).clamp_min(1e-12))
        found = best.isfinite()
        out = torch.where(found.view(-1, 1, 1, 1), best_img, img.detach())
        return out, first
