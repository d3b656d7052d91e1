"""``Latent PGD``: the latent recourse solver of Yahyati et al. (2026).

The public code's ``LatentRecourseSolver`` (``cfq/latent.py``), batched.  A query
``x`` is encoded once, ``z = E(x)``; a latent action ``delta`` is searched by projected
gradient descent on the per-image objective::

    J(delta) = CE(f(x_hat), t) + cost_weight * (||delta||_2 + lambda_pixel * ||x_hat - x||_1)
               + manifold_weight * relu(||x_hat - x||_1 - pixel_budget)
    x_hat    = clamp(D(z + delta))
    delta   <- Proj_{||delta||_2 <= radius}(delta - step_size * grad J)

a *plain* gradient step (not signed, not normalised), ``steps`` times per restart.
Restart 0 starts at ``delta = 0``, later restarts at ``Proj(init_noise * randn)``.  After
each restart: success = ``argmax f(x_hat) == t`` and cost
``c = ||delta||_2 + lambda_pixel * ||x_hat - x||_1``; each image keeps its better result
(success beats failure, then lower cost; among failures, lower CE).

Two points differ from the code and are stated in the chapter:

* **standardised latent** (deviation (b), the default): ``delta`` acts on
  ``u = (z - mu) / sigma`` with the per-dimension statistics of the training codes
  (:class:`cflib.models.LatentAutoencoder`), ``x_hat = D(mu + sigma * (u + delta))``,
  which makes the code's radius and step scale-free.  ``latent="raw"`` is the code.
* cflib's images live in [-1, 1] and the decoder ends in tanh; every pixel term is
  computed on the code's [0, 1] scale, ``||x_hat - x||_1,[0,1] = 1/2 ||x_hat - x||_1,[-1,1]``,
  so the constants 0.02 and 120 keep their meaning.

Every image's objective is independent (no batch statistics in the classifier or the
decoder), so a result does not depend on its batch; restart noise is drawn once for
the whole batch from the seeded CPU generator of :meth:`Explainer.explain`, so
``batch_size`` does not change it either.  The classifier may be an FP model or a
fake-quantized one in evaluation mode (deterministic bits).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from cflib.explainers.base import (
    X_MAX,
    X_MIN,
    Explainer,
    ExplainerConfig,
    as_target,
    check_images,
)
from cflib.progress import progress
from cflib.scopes import frozen

LATENTS = ("standardised", "raw")


@dataclass(frozen=True)
class LatentRecourseConfig(ExplainerConfig):
    """Arguments of the code's ``LatentRecourseSolver`` (evaluation: 40 steps x 2 restarts)."""

    radius: float = 4.0            # projection radius of delta (L2)
    steps: int = 40                # gradient steps per restart
    step_size: float = 0.08        # plain gradient step
    restarts: int = 2              # restart 0 from delta = 0, later ones from small noise
    cost_weight: float = 0.01      # weight of the action cost in the objective
    lambda_pixel: float = 0.02     # weight of the pixel L1 (on [0, 1]) inside the cost
    pixel_budget: float = 120.0    # pixel L1 (on [0, 1]) above which the penalty starts
    manifold_weight: float = 0.01  # weight of that penalty
    init_noise: float = 0.05       # std of the restart noise
    latent: str = "standardised"   # "standardised" (deviation (b)) or "raw" (the code)

    def __post_init__(self):
        super().__post_init__()
        if not self.radius > 0:
            raise ValueError(f"radius must be > 0, got {self.radius}")
        if int(self.steps) < 1 or int(self.restarts) < 1:
            raise ValueError(f"steps and restarts must be >= 1, got steps={self.steps}, "
                             f"restarts={self.restarts}")
        if not self.step_size > 0:
            raise ValueError(f"step_size must be > 0, got {self.step_size}")
        if min(self.cost_weight, self.lambda_pixel, self.manifold_weight, self.init_noise,
               self.pixel_budget) < 0:
            raise ValueError("cost_weight, lambda_pixel, manifold_weight, init_noise and "
                             "pixel_budget must be >= 0")
        if self.latent not in LATENTS:
            raise ValueError(f"latent must be 'standardised' or 'raw', got {self.latent!r}")

    @classmethod
    def teacher(cls, **overrides) -> "LatentRecourseConfig":
        """The QAT/CF-PTQ teacher preset of the code: 2 steps of 0.12, 1 restart."""
        return replace(cls(steps=2, step_size=0.12, restarts=1), **overrides)


@dataclass
class LatentSolution:
    """What the solver returns for a batch (tensors on the classifier's device)."""

    x_cf: torch.Tensor         # (N, C, H, W) x_hat in [-1, 1]
    delta: torch.Tensor        # (N, d) the kept latent action
    success: torch.Tensor      # (N,) argmax f(x_hat) == t
    cost: torch.Tensor         # (N,) ||delta|| + lambda_pixel * L1 on [0, 1]
    target_loss: torch.Tensor  # (N,) CE(f(x_hat), t)


def better_restart(success: torch.Tensor, cost: torch.Tensor, ce: torch.Tensor,
                   best_success: torch.Tensor, best_cost: torch.Tensor,
                   best_ce: torch.Tensor) -> torch.Tensor:
    """Where the new restart replaces the kept one: success beats failure, then lower
    cost among successes, lower CE among failures (the code's rule)."""
    return ((success & (~best_success | (cost < best_cost)))
            | (~success & ~best_success & (ce < best_ce)))


def project(delta: torch.Tensor, radius: float) -> torch.Tensor:
    """``delta`` scaled into the L2 ball of ``radius`` (per row)."""
    norm = delta.norm(dim=1, keepdim=True).clamp_min(1e-8)
    return delta * (radius / norm).clamp(max=1.0)


def pixel_l1(x_hat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``||x_hat - x||_1`` on the [0, 1] scale of images stored in [-1, 1]."""
    return 0.5 * (x_hat - x).abs().flatten(1).sum(1)


class LatentRecourse(Explainer):
    """Batched latent PGD through a latent autoencoder (the public code's solver, batched).

    ``autoencoder`` must have ``encode``/``decode`` (and, for ``latent="standardised"``,
    fitted ``code_mean``/``code_std``: :class:`cflib.models.LatentAutoencoder`);
    ``explain`` returns, in ``meta``: ``delta``
    (N, d), ``cost`` (N,), ``target_loss`` (N,) and ``latent``.  :meth:`solve` runs the
    same search without touching the global RNG (the QAT teacher).

    Half precision: a float16 / bfloat16 classifier and autoencoder (of one dtype) run in
    it, the latent action included: the search takes plain gradient steps, with no
    optimiser state that float16 could lose.
    """

    name = "Latent PGD"
    Config = LatentRecourseConfig

    def __init__(self, classifier: nn.Module, config: LatentRecourseConfig | None = None, *,
                 autoencoder: nn.Module, **kwargs):
        super().__init__(classifier, config, **kwargs)
        if autoencoder is None or not all(callable(getattr(autoencoder, m, None))
                                          for m in ("encode", "decode")):
            raise TypeError(f"{self.name} needs an autoencoder with encode() and decode() "
                            f"(got {type(autoencoder).__name__}); train one through "
                            "cflib.models.LatentAutoencoder")
        if self.config.latent == "standardised":
            ok = getattr(autoencoder, "stats_fitted", None)
            if not ok or not callable(getattr(autoencoder, "standardise", None)):
                raise ValueError("latent='standardised' needs the autoencoder's latent "
                                 "statistics: call "
                                 "fit_latent_stats(x_train) (or use latent='raw')")
        self._check_same_device(autoencoder=autoencoder)
        self.autoencoder = autoencoder

    def frozen_networks(self) -> dict[str, nn.Module]:
        return {"autoencoder": self.autoencoder}

    # -- the latent map ---------------------------------------------------------------------
    def _to_latent(self, x: torch.Tensor) -> torch.Tensor:
        z = self.autoencoder.encode(x)
        return self.autoencoder.standardise(z) if self.config.latent == "standardised" else z

    def _decode(self, u: torch.Tensor) -> torch.Tensor:
        z = self.autoencoder.destandardise(u) if self.config.latent == "standardised" else u
        return self.autoencoder.decode(z).clamp(X_MIN, X_MAX)

    def objective(self, u: torch.Tensor, delta: torch.Tensor, x: torch.Tensor,
                  target: torch.Tensor):
        """Per-image ``J``, and ``(x_hat, logits, ce, l1)`` it was computed from."""
        cfg = self.config
        x_hat = self._decode(u + delta)
        logits = self.classifier(x_hat)
        ce = F.cross_entropy(logits, target, reduction="none")
        l1 = pixel_l1(x_hat, x)
        j = (ce + cfg.cost_weight * (delta.norm(dim=1) + cfg.lambda_pixel * l1)
             + cfg.manifold_weight * F.relu(l1 - cfg.pixel_budget))
        return j, (x_hat, logits, ce, l1)

    # -- the search -------------------------------------------------------------------------
    def _search_batch(self, x: torch.Tensor, target: torch.Tensor,
                      noise: torch.Tensor | None) -> LatentSolution:
        cfg = self.config
        with torch.no_grad():
            u = self._to_latent(x)
        n = len(x)
        best = LatentSolution(x.clone(), torch.zeros_like(u),
                              torch.zeros(n, dtype=torch.bool, device=x.device),
                              torch.full((n,), float("inf"), device=x.device),
                              torch.full((n,), float("inf"), device=x.device))
        for r in range(cfg.restarts):
            delta = (torch.zeros_like(u) if r == 0
                     else project(cfg.init_noise * noise[:, r - 1].to(u), cfg.radius))
            for _ in range(cfg.steps):
                delta = delta.detach().requires_grad_(True)
                j, _ = self.objective(u, delta, x, target)
                (grad,) = torch.autograd.grad(j.sum(), delta)
                delta = project(delta.detach() - cfg.step_size * grad, cfg.radius)
            with torch.no_grad():
                _, (x_hat, logits, ce, l1) = self.objective(u, delta, x, target)
                success = logits.argmax(1) == target
                cost = delta.norm(dim=1) + cfg.lambda_pixel * l1
                take = better_restart(success, cost, ce, best.success, best.cost,
                                      best.target_loss)
                view = take.view(-1, *([1] * (x.dim() - 1)))
                best = LatentSolution(torch.where(view, x_hat, best.x_cf),
                                      torch.where(take[:, None], delta, best.delta),
                                      torch.where(take, success, best.success),
                                      torch.where(take, cost, best.cost),
                                      torch.where(take, ce, best.target_loss))
        return best

    def _solve(self, x: torch.Tensor, target: torch.Tensor,
               generator: torch.Generator | None) -> LatentSolution:
        cfg = self.config
        noise = None
        if cfg.restarts > 1:  # drawn once for the batch: chunking does not change it
            with torch.no_grad():
                d = self.autoencoder.encode(x[:1]).shape[1]
            noise = torch.randn(len(x), cfg.restarts - 1, d, generator=generator)
        parts = []
        bs = cfg.batch_size
        with torch.enable_grad():
            for i in progress(range(0, len(x), bs), desc=f"{self.name} chunks"):
                parts.append(self._search_batch(x[i:i + bs], target[i:i + bs],
                                                None if noise is None else noise[i:i + bs]))
        return LatentSolution(*(torch.cat([getattr(p, k) for p in parts])
                                for k in ("x_cf", "delta", "success", "cost", "target_loss")))

    def solve(self, x: torch.Tensor, target, generator: torch.Generator | None = None, *,
              assume_range: bool = False) -> LatentSolution:
        """The search on ``x`` towards ``target``, without seeding anything.

        The networks are frozen for the call (restored after).  Restart noise comes from
        ``generator``, or the global RNG when it is None; with one restart (the teacher)
        no randomness is drawn at all, so a QAT loop that calls this keeps its own
        random stream: a teacher inside a training loop must not reseed it.
        ``assume_range``: as in :meth:`~cflib.explainers.Explainer.explain`.
        """
        check_images(x, assume_range=assume_range)
        with frozen(*self._caller_networks()), torch.no_grad():
            x = x.to(self.device)
            n_classes = self.classifier(x[:1]).shape[1]
        target = as_target(target, len(x), self.device, n_classes)
        with frozen(*self._caller_networks()):
            return self._solve(x, target, generator)

    def _generate(self, x, target, query, generator):
        sol = self._solve(x, target, generator)
        return sol.x_cf, {"delta": sol.delta.detach(), "cost": sol.cost.detach(),
                          "target_loss": sol.target_loss.detach(), "latent": self.config.latent}
