"""Schut et al. (2021): greedy, JSMA-style counterfactuals on the predictive distribution.

Schut, Key, McGrath, Costabello, Sacaleanu, Corcoran & Gal, *Generating Interpretable
Counterfactual Explanations By Implicit Minimisation of Epistemic and Aleatoric
Uncertainties*, AISTATS 2021, Sec. 3 (Algorithm 1), as in their official code
(``uces/generators.py: GreedyGenerator``, settings in ``experiments/methods.py``):

- each iteration takes the gradient of the target's predictive probability (the mean
  over the posterior samples; the code uses -CE of the ensemble's mean logits, with the
  same per-image ranking and signs as log p) with respect to the image, and changes
  the most salient pixel (largest ``|gradient|``) by a fixed step in the gradient's sign;
- a pixel is changed at most ``n_changes`` times (5 on MNIST) and the step is
  1 / n_changes of the pixel range (0.2 on [0, 1] in the code, 0.4 on [-1, 1] here),
  so a pixel can travel the whole range;
- an image is done when it is classified as the target with predictive confidence
  >= 0.99; otherwise the search stops after ``max_iters`` (5000 on MNIST).

The whole batch runs at once; finished images leave the batch (they stop changing).
Two details differ from the reference code and are stated in the chapter: pixels that
already sit at the bound the gradient points to are skipped (the code spends an
iteration "changing" them by zero), and ``pixels_per_iter`` > 1 (default 1, the
paper's value) changes several of the most salient pixels per iteration.

Half precision: a float16 / bfloat16 model runs in its own dtype, the image included
(each change is a fixed step of 0.4, which float16 holds); the probabilities are taken
in float32 (:func:`cflib.explainers._posterior.posterior_probs`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from cflib.explainers._posterior import forward_rows, posterior_probs
from cflib.explainers.base import X_MAX, X_MIN, Explainer, ExplainerConfig
from cflib.progress import progress


@dataclass(frozen=True)
class SchutConfig(ExplainerConfig):
    n_changes: int = 5             # times a pixel may change (Schut et al., MNIST)
    max_iters: int = 5000          # iterations (Schut et al., MNIST)
    confidence: float = 0.99       # stop once the target's mean probability reaches this
    step: float | None = None      # pixel step; None: (X_MAX - X_MIN) / n_changes = 0.4
    pixels_per_iter: int = 1       # most salient pixels changed per iteration (paper: 1)
    n_samples: int | None = None   # posterior samples; None: the model's default
    compact: bool = True           # drop finished images from the batch (False: keep them in
                                   # each pass, change only the others: same result, fixed
                                   # shapes, no host synchronisation a step: for a GPU)

    def __post_init__(self):
        super().__post_init__()
        if self.n_changes < 1 or self.max_iters < 1 or self.pixels_per_iter < 1:
            raise ValueError("n_changes, max_iters and pixels_per_iter must be >= 1")
        if not 0.0 < self.confidence <= 1.0:
            raise ValueError(f"confidence must be in (0, 1], got {self.confidence}")
        if self.step is not None and self.step <= 0:
            raise ValueError(f"step must be > 0 (or None), got {self.step}")


class Schut(Explainer):
    """Greedy saliency search to a confident prediction of the target (module docstring)."""

    name = "Schut"
    Config = SchutConfig

    def _search(self, x, t):
        cfg = self.config
        if not cfg.compact:
            return self._search_masked(x, t)
        step = cfg.step if cfg.step is not None else (X_MAX - X_MIN) / cfg.n_changes
        shape = x.shape
        z = x.clone().flatten(1)
        changes = torch.zeros_like(z, dtype=torch.int32)
        active = torch.arange(len(x), device=x.device)
        k = min(cfg.pixels_per_iter, z.shape[1])
        for it in progress(range(cfg.max_iters + 1), desc=self.name):
            fw, sel = forward_rows(active, len(x), cfg.compact)
            zf = z[fw].clone().requires_grad_(True)
            tf = t[fw]
            p = posterior_probs(self.classifier, zf.view(-1, *shape[1:]), cfg.n_samples).mean(0)
            p_t = p.gather(1, tf[:, None]).squeeze(1)
            done = ((p.argmax(1) == tf) & (p_t >= cfg.confidence))[sel]
            keep = ~done
            if not keep.any():
                break
            if it == cfg.max_iters:   # last pass only checks who is done
                break
            obj = p_t[sel][keep]
            if zf.dtype == torch.float16:
                # a confidently classified query has p_t ~ 1e-12, whose gradient underflows
                # in a float16 network's backward pass (the search would stop at once);
                # log p_t has the same per-image ranking and signs (a factor 1 / p_t > 0)
                obj = obj.clamp_min(1e-30).log()
            (grad,) = torch.autograd.grad(obj.sum(), zf)
            grad = grad[sel][keep]
            rows = active[keep]
            za = zf.detach()[sel][keep]
            # pixels changed n_changes times, or already at the bound the gradient points to
            blocked = ((changes[rows] >= cfg.n_changes)
                       | ((grad > 0) & (za >= X_MAX)) | ((grad < 0) & (za <= X_MIN)))
            sal = grad.abs().masked_fill(blocked, 0.0)
            val, pix = sal.topk(k, dim=1)
            ok = val > 0
            stuck = ~ok.any(1)                     # nothing left to change: give up
            r = rows[:, None].expand_as(pix)[ok]
            c = pix[ok]
            z[r, c] = (z[r, c] + step * grad.gather(1, pix)[ok].sign()).clamp(X_MIN, X_MAX)
            changes[r, c] += 1
            active = rows[~stuck]
            if len(active) == 0:
                break
        return z.view(shape).detach()

    def _search_masked(self, x, t, check_every: int = 16):
        """:meth:`_search` with every image in every pass and the finished ones masked:
        the same shapes each iteration, nothing read back but every ``check_every``-th
        iteration's "all done?" (each check waits for the device; the iterations in
        between change nothing once all are done).  The same arithmetic per image as the
        compacted search."""
        cfg = self.config
        step = cfg.step if cfg.step is not None else (X_MAX - X_MIN) / cfg.n_changes
        shape = x.shape
        z = x.clone().flatten(1)
        changes = torch.zeros_like(z, dtype=torch.int32)
        live = torch.ones(len(x), dtype=torch.bool, device=x.device)
        k = min(cfg.pixels_per_iter, z.shape[1])
        for it in progress(range(cfg.max_iters + 1), desc=self.name):
            zf = z.clone().requires_grad_(True)
            p = posterior_probs(self.classifier, zf.view(-1, *shape[1:]), cfg.n_samples).mean(0)
            p_t = p.gather(1, t[:, None]).squeeze(1)
            live = live & ~((p.argmax(1) == t) & (p_t >= cfg.confidence))
            if it == cfg.max_iters or (it % check_every == 0 and not live.any()):
                break
            obj = p_t
            if zf.dtype == torch.float16:     # as in _search
                obj = obj.clamp_min(1e-30).log()
            (grad,) = torch.autograd.grad(obj.where(live, 0).sum(), zf)
            za = zf.detach()
            blocked = ((changes >= cfg.n_changes) | ~live[:, None]
                       | ((grad > 0) & (za >= X_MAX)) | ((grad < 0) & (za <= X_MIN)))
            sal = grad.abs().masked_fill(blocked, 0.0)
            val, pix = sal.topk(k, dim=1)
            ok = val > 0
            old = z.gather(1, pix)
            new = (old + step * grad.gather(1, pix).sign()).clamp(X_MIN, X_MAX)
            z = z.scatter(1, pix, torch.where(ok, new, old))
            changes = changes.scatter_add(1, pix, ok.to(changes.dtype))
            live = live & ok.any(1)               # nothing left to change: give up
        return z.view(shape).detach()
