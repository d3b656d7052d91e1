"""ROAR: robust algorithmic recourse under adversarial model shifts.

Upadhyay, Joshi & Lakkaraju, *Towards Robust and Reliable Algorithmic Recourse*,
NeurIPS 2021, Eq. (5)-(7): the min-max problem

    argmin_x'  max_{delta in Delta}  loss(f_{W + delta}(x'), y') + lambda * c(x, x'),

with Delta = {||delta||_inf <= delta_max}.  As in their code and CARLA's port
(``carla/recourse_methods/catalog/roar``), the inner maximisation is solved for a
linear model: for the current x', delta* = argmax over the box of the first-order
change of the loss, i.e. delta_max * sign(d loss / d W) (the linear program CARLA
hands to ``linprog`` has this closed form); then one Adam step on x' of the loss at
W + delta* plus lambda * ||x' - x||_1 (Danskin: delta* is held fixed); stop when the
loss changes by less than ``loss_threshold`` or after ``max_iter`` steps.

For a deep network CARLA applies ROAR to a local linear approximation (LIME).  Here
the perturbed "linear model" is the network's *last linear layer* (FC 256 -> 10,
weights and bias) acting on the penultimate features of every posterior sample: the
same delta (one per image, ||delta||_inf <= 0.01) shifts the last layer of all S
samples, and the loss is the cross-entropy of the posterior-averaged prediction.
The first-order inner solution is then exact in the logits (they are linear in the
last layer) and approximate in the loss, exactly as in CARLA.

Half precision: a float16 / bfloat16 model runs in its own dtype (the features, the
last layer and its perturbation are in it); the loss is taken in float32 and Adam
updates a float32 master copy of the image with float32 moments (as Wachter's search,
:mod:`cflib.explainers._posterior`); the result is cast to the model's dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from cflib.explainers._posterior import RowAdam, forward_rows, head_inputs, l1, master
from cflib.explainers.base import X_MAX, X_MIN, Explainer, ExplainerConfig, working
from cflib.progress import progress


@dataclass(frozen=True)
class ROARConfig(ExplainerConfig):
    delta_max: float = 0.01      # CARLA's default box on the weight perturbation
    lambda_: float = 0.01        # CARLA's lambda_param: weight of the L1 cost
    lr: float = 0.02             # Adam step size on the [-1, 1] pixel scale (CARLA 0.01 on [0, 1])
    max_iter: int = 500          # CARLA stops on time (t_max_min); we stop on steps
    loss_threshold: float = 1e-3  # CARLA's stopping rule: |loss_t - loss_{t-1}| < threshold
    n_samples: int | None = None  # posterior samples; None: the model's default
    compact: bool = True          # drop converged images from the batch (False: keep them in
                                  # each pass, update only the others: same result, fixed
                                  # shapes, no host synchronisation a step: for a GPU)

    def __post_init__(self):
        super().__post_init__()
        if self.delta_max < 0 or self.lambda_ < 0 or self.max_iter < 1:
            raise ValueError("need delta_max >= 0, lambda_ >= 0 and max_iter >= 1")
        if self.lr <= 0 or self.loss_threshold < 0:
            raise ValueError("need lr > 0 and loss_threshold >= 0")


class ROAR(Explainer):
    """ROAR on the last linear layer of the posterior-averaged model (module docstring)."""

    name = "ROAR"
    Config = ROARConfig

    def _robust_loss(self, zf, x0, t, pick):
        """Per image of ``zf`` (queries ``x0``, targets ``t``), the outer objective at the
        first-order worst case of the last layer within the box, restricted by ``pick``
        (the rows that count: an index, or a mask that zeroes the others), and its
        gradient in ``zf``."""
        cfg = self.config
        h, w, b = head_inputs(self.classifier, zf, cfg.n_samples)
        n, k = len(zf), w.shape[1]
        # inner max: first-order worst case of the last layer within the box
        dw = torch.zeros(n, k, h.shape[-1], device=zf.device, dtype=h.dtype,
                         requires_grad=True)
        db = torch.zeros(n, k, device=zf.device, dtype=h.dtype, requires_grad=True)
        base = torch.matmul(h, w.transpose(1, 2)) + b.unsqueeze(1)

        def ce(dw_, db_):
            logits = base + torch.einsum("snj,nkj->snk", h, dw_) + db_.unsqueeze(0)
            p = torch.softmax(working(logits), dim=-1).mean(0)
            return -p.gather(1, t[:, None]).squeeze(1).clamp_min(1e-30).log()

        gw, gb = torch.autograd.grad(pick(ce(dw, db)).sum(), (dw, db), retain_graph=True)
        dw_star = cfg.delta_max * gw.sign()
        db_star = cfg.delta_max * gb.sign()
        # outer min at the worst case (delta* fixed)
        loss = pick(ce(dw_star, db_star) + cfg.lambda_ * l1(working(zf), working(x0)))
        (grad,) = torch.autograd.grad(loss.sum(), zf)
        return loss, grad

    def _search(self, x, t):
        cfg = self.config
        if not cfg.compact:
            return self._search_masked(x, t)
        z = master(x)                 # what Adam updates; the model sees z.to(x.dtype)
        opt = RowAdam(z, cfg.lr)
        active = torch.arange(len(x), device=x.device)
        prev = torch.zeros(len(x), device=x.device, dtype=z.dtype)   # CARLA starts from loss 0
        for _ in progress(range(cfg.max_iter), desc=self.name):
            fw, sel = forward_rows(active, len(x), cfg.compact)
            zf = z[fw].to(x.dtype).requires_grad_(True)
            loss, grad = self._robust_loss(zf, x[fw], t[fw], lambda v: v[sel])
            opt.step(z, grad[sel], active)
            z[active] = z[active].clamp(X_MIN, X_MAX)
            with torch.no_grad():
                moving = (loss.detach() - prev[active]).abs() >= cfg.loss_threshold
                prev[active] = loss.detach()
            active = active[moving]
            if len(active) == 0:
                break
        return z.detach().to(x.dtype)

    def _search_masked(self, x, t, check_every: int = 16):
        """:meth:`_search` with every image in every pass and the converged ones masked:
        the same shapes each iteration, nothing read back but every ``check_every``-th
        iteration's "all converged?" (the iterations in between change nothing once all
        have).  The same arithmetic per image as the compacted search."""
        cfg = self.config
        z = master(x)
        opt = RowAdam(z, cfg.lr)
        live = torch.ones(len(x), dtype=torch.bool, device=x.device)
        on = live.view(-1, *([1] * (x.dim() - 1)))
        prev = torch.zeros(len(x), device=x.device, dtype=z.dtype)
        for it in progress(range(cfg.max_iter), desc=self.name):
            zf = z.to(x.dtype).requires_grad_(True)
            loss, grad = self._robust_loss(zf, x, t, lambda v: v.where(live, 0))
            opt.step_masked(z, grad, live)
            with torch.no_grad():
                z.copy_(torch.where(on, z.clamp(X_MIN, X_MAX), z))
                moving = (loss.detach() - prev).abs() >= cfg.loss_threshold
                prev = torch.where(live, loss.detach().to(prev.dtype), prev)
            live = live & moving
            on = live.view_as(on)
            if it % check_every == check_every - 1 and not live.any():
                break
        return z.detach().to(x.dtype)
