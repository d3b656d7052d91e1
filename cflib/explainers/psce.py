"""PSCE: probabilistically safe counterfactual explanations (Duell & Fan 2026).

Duell & Fan, *Provably Robust Bayesian Counterfactual Explanations under Model
Changes* (arXiv 2601.16659).  A counterfactual x' for target t must be

- delta-safe: the posterior-mean probability of the target is at least delta,
  E_w[p(t | x', w)] >= delta;
- epsilon-robust: the predictive variance of the target is at most epsilon,
  Var_w[p(t | x', w)] <= epsilon;

and among those it should change the query little and stay on the data manifold:

    min_x'  ||x' - x||_1 + gamma * ||x' - AE(x')||_2^2
    s.t.    log delta - log p_bar_t(x') <= 0,    (Var_t(x') - epsilon) / epsilon <= 0,

with AE an autoencoder of all classes (the book trains one per dataset).  The
paper's full text was not in reach; the constraints are theirs, the solver is ours:
an augmented Lagrangian for inequality constraints (Rockafellar's form; Nocedal &
Wright, *Numerical Optimization*, 2nd ed., Eq. 17.65),

    L = f(x') + sum_j [max(0, mu_j + rho c_j(x'))^2 - mu_j^2] / (2 rho),

minimised over x' by ``inner_steps`` Adam steps (x' kept in [-1, 1]), then
mu_j <- max(0, mu_j + rho c_j), rho <- rho * ``rho_factor``, for ``outer_iters`` rounds.
The safety constraint is written on log p (same feasible set, a gradient that does not
vanish on a confidently classified query) and the variance constraint is scaled by
1 / epsilon.  The augmented Lagrangian reaches the boundary of the feasible set from
outside (its iterates sit just short of delta), so the solver aims at constraints
tightened by ``margin`` (delta + margin (1 - delta), (1 - margin) epsilon: 0.925 and
0.0075 by default) while feasibility is judged on delta and epsilon themselves.
Every iterate is checked; the feasible one with the smallest objective
is returned (the last iterate when none is feasible; the ``success`` mask then shows
whether it still reaches the target).  An image that is feasible at the end of an
outer round and whose best objective improved by less than ``tol`` (relative) stops.

Half precision: a float16 / bfloat16 model (and autoencoder) runs in its own dtype on a
cast of the iterate; the objective, the constraints, the multipliers and the penalty
(whose square grows past float16's range as rho doubles) are in float32, and Adam
updates a float32 master copy of the image with float32 moments
(:mod:`cflib.explainers._posterior`); the result is cast to the model's dtype.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from cflib.explainers._posterior import RowAdam, forward_rows, l1, master, posterior_probs
from cflib.explainers.base import X_MAX, X_MIN, AutoencoderExplainer, ExplainerConfig, working
from cflib.progress import progress


@dataclass(frozen=True)
class PSCEConfig(ExplainerConfig):
    delta: float = 0.9           # delta-safety: mean probability of the target >= delta
    epsilon: float = 0.01        # epsilon-robustness: predictive variance of the target <= epsilon
    gamma: float = 1.0           # weight of the autoencoder (manifold) term
    rho: float = 100.0           # initial penalty parameter of the augmented Lagrangian
    rho_factor: float = 2.0      # rho grows by this factor after each outer round
    outer_iters: int = 5         # multiplier updates
    inner_steps: int = 60        # Adam steps per outer round
    lr: float = 0.02             # Adam step size on the [-1, 1] pixel scale
    tol: float = 1e-2            # relative improvement below which a feasible image stops
    margin: float = 0.25         # the solver aims at delta + margin (1 - delta) and (1 - margin) epsilon
    n_samples: int | None = None  # posterior samples; None: the model's default
    compact: bool = True         # drop settled images from the batch (False: keep them in
                                 # each pass, update only the others: same result, fixed
                                 # shapes, no host synchronisation a step: for a GPU)

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 < self.delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {self.delta}")
        if self.epsilon <= 0:
            raise ValueError(f"epsilon must be > 0, got {self.epsilon}")
        if self.gamma < 0 or self.rho <= 0 or self.rho_factor < 1:
            raise ValueError("need gamma >= 0, rho > 0 and rho_factor >= 1")
        if self.outer_iters < 1 or self.inner_steps < 1:
            raise ValueError("outer_iters and inner_steps must be >= 1")
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {self.margin}")
        if self.lr <= 0 or self.tol < 0:
            raise ValueError("need lr > 0 and tol >= 0")


class PSCE(AutoencoderExplainer):
    """delta-safe, epsilon-robust counterfactuals by augmented Lagrangian (module docstring).

    ``autoencoder`` is the all-class autoencoder of the manifold term (``None`` drops
    the term, i.e. gamma = 0), or a mapping ``{class: autoencoder}`` whose target-class
    entry serves each query (a variant: the manifold of the target class alone).
    """

    name = "PSCE"
    Config = PSCEConfig
    per_class_autoencoder = True

    def _terms(self, z, x0, t):
        """objective f (N,), constraints c1, c2 (N,), and feasibility (N,) bool."""
        cfg = self.config
        p = posterior_probs(self.classifier, z, cfg.n_samples)        # (S, N, K)
        p_t = p.gather(2, t.view(1, -1, 1).expand(p.shape[0], -1, 1)).squeeze(2)   # (S, N)
        mean, var = p_t.mean(0), p_t.var(0, unbiased=False)
        delta_in = cfg.delta + cfg.margin * (1 - cfg.delta)
        eps_in = cfg.epsilon * (1 - cfg.margin)
        c1 = math.log(delta_in) - mean.clamp_min(1e-30).log()
        c2 = (var - eps_in) / eps_in
        f = l1(working(z), working(x0))
        if self.autoencoder is not None and cfg.gamma > 0:
            f = f + cfg.gamma * working(z - self._reconstruct(z, t)).pow(2).flatten(1).sum(1)
        feasible = (mean >= cfg.delta) & (var <= cfg.epsilon) & (
            p.mean(0).argmax(1) == t)
        return f, c1, c2, feasible

    def _reconstruct(self, z, t):
        ae = self.autoencoder
        if not isinstance(ae, Mapping):
            return ae(z)
        out = torch.empty_like(z)
        for c in t.unique().tolist():
            rows = t == c
            out[rows] = ae[c](z[rows])
        return out

    def _start(self, x):
        """A search's state: the iterate (what Adam updates; the model sees
        ``z.to(x.dtype)``), the best feasible image and its objective, the multipliers,
        the penalties (in the master copy's dtype) and Adam."""
        n = len(x)
        z = master(x)
        best = master(x)
        kw = dict(device=x.device, dtype=z.dtype)
        best_f = torch.full((n,), float("inf"), **kw)
        mu1 = torch.zeros(n, **kw)
        mu2 = torch.zeros(n, **kw)
        rho = torch.full((n,), float(self.config.rho), **kw)
        return z, best, best_f, mu1, mu2, rho, RowAdam(z, self.config.lr)

    def _search(self, x, t):
        cfg = self.config
        if not cfg.compact:
            return self._search_masked(x, t)
        n = len(x)
        z, best, best_f, mu1, mu2, rho, opt = self._start(x)
        active = torch.arange(n, device=x.device)
        for _ in progress(range(cfg.outer_iters), desc=f"{self.name} rounds"):
            before = best_f.clone()
            for _ in range(cfg.inner_steps + 1):
                fw, sel = forward_rows(active, n, cfg.compact)
                zf = z[fw].to(x.dtype).requires_grad_(True)
                f, c1, c2, feas = (v[sel] for v in self._terms(zf, x[fw], t[fw]))
                with torch.no_grad():   # keep the best feasible iterate seen so far
                    better = feas & (f < best_f[active])
                    rows = active[better]
                    best[rows] = zf.detach()[sel][better].to(best.dtype)
                    best_f[rows] = f.detach()[better]
                if _ == cfg.inner_steps:   # the extra pass only evaluates the last step
                    break
                r, m1, m2 = rho[active], mu1[active], mu2[active]
                al = f + ((m1 + r * c1).clamp_min(0) ** 2 - m1 ** 2) / (2 * r) \
                       + ((m2 + r * c2).clamp_min(0) ** 2 - m2 ** 2) / (2 * r)
                (grad,) = torch.autograd.grad(al.sum(), zf)
                opt.step(z, grad[sel], active)
                z[active] = z[active].clamp(X_MIN, X_MAX)
            with torch.no_grad():
                c1, c2 = c1.detach(), c2.detach()
                mu1[active] = (mu1[active] + rho[active] * c1).clamp_min(0)
                mu2[active] = (mu2[active] + rho[active] * c2).clamp_min(0)
                rho[active] *= cfg.rho_factor
                fa, ba = best_f[active], before[active]
                settled = torch.isfinite(fa) & torch.isfinite(ba) & (ba - fa <= cfg.tol * ba.abs())
            active = active[~settled]
            if len(active) == 0:
                break
        never = ~torch.isfinite(best_f)
        best[never] = z[never].detach()
        return best.to(x.dtype)

    def _search_masked(self, x, t):
        """:meth:`_search` with every image in every pass and the settled ones masked: the
        same shapes each step, nothing read back but each outer round's "all settled?"
        (and, with an autoencoder per class, its routing).  The same arithmetic per image
        as the compacted search."""
        cfg = self.config
        n = len(x)
        z, best, best_f, mu1, mu2, rho, opt = self._start(x)
        live = torch.ones(n, dtype=torch.bool, device=x.device)
        image = [-1] + [1] * (x.dim() - 1)
        for _ in progress(range(cfg.outer_iters), desc=f"{self.name} rounds"):
            before = best_f.clone()
            on = live.view(image)
            for _ in range(cfg.inner_steps + 1):
                zf = z.to(x.dtype).requires_grad_(True)
                f, c1, c2, feas = self._terms(zf, x, t)
                with torch.no_grad():   # keep the best feasible iterate seen so far
                    better = live & feas & (f < best_f)
                    best = torch.where(better.view(image), zf.detach().to(best.dtype), best)
                    best_f = torch.where(better, f.detach().to(best_f.dtype), best_f)
                if _ == cfg.inner_steps:   # the extra pass only evaluates the last step
                    break
                al = f + ((mu1 + rho * c1).clamp_min(0) ** 2 - mu1 ** 2) / (2 * rho) \
                       + ((mu2 + rho * c2).clamp_min(0) ** 2 - mu2 ** 2) / (2 * rho)
                (grad,) = torch.autograd.grad(al.where(live, 0).sum(), zf)
                opt.step_masked(z, grad, live)
                with torch.no_grad():
                    z.copy_(torch.where(on, z.clamp(X_MIN, X_MAX), z))
            with torch.no_grad():
                c1, c2 = c1.detach(), c2.detach()
                mu1 = torch.where(live, (mu1 + rho * c1).clamp_min(0), mu1)
                mu2 = torch.where(live, (mu2 + rho * c2).clamp_min(0), mu2)
                rho = torch.where(live, rho * cfg.rho_factor, rho)
                settled = (torch.isfinite(best_f) & torch.isfinite(before)
                           & (before - best_f <= cfg.tol * before.abs()))
            live = live & ~settled
            if not live.any():
                break
        never = ~torch.isfinite(best_f)
        best = torch.where(never.view(image), z.detach(), best)
        return best.to(x.dtype)
