"""Wachter et al. (2017) counterfactuals and BayesCF, their posterior-averaged twin.

Wachter, Mittelstadt & Russell, *Counterfactual explanations without opening the
black box*, Harv. J. Law Tech. 2018 (arXiv 1711.00399), Eq. (2)-(3):

    argmin_x'  max_lambda  lambda * loss(f(x'), y') + d(x, x'),

"solved by iteratively solving for x' and increasing lambda until a sufficiently close
solution is found".  Here d is the L1 distance summed over pixels and loss is the
cross-entropy towards the target class (``loss="ce"``, CARLA's classification port;
``loss="mse"`` is the paper's squared error (f_t(x') - 1)^2 on the target's
probability, whose gradient vanishes on confidently classified images).  For each
lambda, ``steps`` Adam steps on x' (kept in [-1, 1]); images whose counterfactual is
then valid stop; the others continue from where they are with lambda multiplied by
``lam_factor``, for at most ``lam_steps`` values of lambda.

- :class:`Wachter` optimises and checks validity on one deterministic forward pass of
  the model (MC dropout: dropout off; BNN: posterior-mean weights): the classic
  method, blind to the posterior.
- :class:`BayesCF` uses the same objective and search on the posterior-averaged
  prediction p(y | x') = mean over S samples of softmax, as in Duell & Fan (2026).

Half precision: a float16 / bfloat16 model runs in its own dtype on a cast of the
iterate, while Adam updates a float32 master copy of it with float32 moments and the
loss is taken in float32 (see :mod:`cflib.explainers._posterior`); the result is the
master copy cast to the model's dtype.  On float32 and float64 models the master copy
is the iterate itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cflib.explainers._posterior import (
    RowAdam,
    deterministic_logits,
    forward_rows,
    l1,
    log_mean_prob,
    master,
)
from cflib.explainers.base import X_MAX, X_MIN, Explainer, ExplainerConfig, working
from cflib.progress import progress


@dataclass(frozen=True)
class WachterConfig(ExplainerConfig):
    lam_init: float = 1.0      # first lambda (weight of the prediction loss)
    lam_factor: float = 10.0   # lambda <- lambda * lam_factor while the counterfactual is invalid
    lam_steps: int = 4         # lambda values tried (1, 10, 100, 1000 by default)
    steps: int = 100           # Adam steps per lambda value
    lr: float = 0.02           # Adam step size on the [-1, 1] pixel scale
    loss: str = "ce"           # "ce": -log p_t ; "mse": (p_t - 1)^2 (Wachter's Eq. 2)
    n_samples: int | None = None  # posterior samples (BayesCF); None: the model's default
    compact: bool = True       # drop finished images from the batch (False: keep every image
                               # in each pass and update only the unfinished: same result)

    def __post_init__(self):
        super().__post_init__()
        if self.loss not in ("ce", "mse"):
            raise ValueError(f"loss must be 'ce' or 'mse', got {self.loss!r}")
        if self.lam_init <= 0 or self.lam_factor < 1 or self.lam_steps < 1 or self.steps < 1:
            raise ValueError("need lam_init > 0, lam_factor >= 1, lam_steps >= 1, steps >= 1")
        if self.lr <= 0 or (self.n_samples is not None and self.n_samples < 1):
            raise ValueError("need lr > 0 and n_samples >= 1 (or None)")


class Wachter(Explainer):
    """Wachter et al. 2017 on one deterministic pass of the model (see the module docstring)."""

    name = "Wachter"
    Config = WachterConfig

    def _log_probs(self, z: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(working(deterministic_logits(self.classifier, z)), dim=-1)

    def _loss_terms(self, z, x0, t):
        logp = self._log_probs(z)
        logp_t = logp.gather(1, t[:, None]).squeeze(1)
        pred_loss = -logp_t if self.config.loss == "ce" else (logp_t.exp() - 1) ** 2
        return pred_loss, l1(working(z), working(x0)), logp.argmax(1) == t

    def _search(self, x, t):
        cfg = self.config
        z = master(x)                 # what Adam updates; the model sees z.to(x.dtype)
        lam = torch.full((len(x),), float(cfg.lam_init), device=x.device)
        opt = RowAdam(z, cfg.lr)
        active = torch.arange(len(x), device=x.device)
        for _ in progress(range(cfg.lam_steps), desc=f"{self.name} lambdas"):
            opt.reset(active)
            for _ in range(cfg.steps):
                fw, sel = forward_rows(active, len(x), cfg.compact)
                zf = z[fw].to(x.dtype).requires_grad_(True)
                pred_loss, dist, _ = self._loss_terms(zf, x[fw], t[fw])
                loss = (lam[active] * pred_loss[sel] + dist[sel]).sum()
                (grad,) = torch.autograd.grad(loss, zf)
                opt.step(z, grad[sel], active)
                z[active] = z[active].clamp(X_MIN, X_MAX)
            with torch.no_grad():
                fw, sel = forward_rows(active, len(x), cfg.compact)
                _, _, valid = self._loss_terms(z[fw].to(x.dtype), x[fw], t[fw])
            active = active[~valid[sel]]
            if len(active) == 0:
                break
            lam[active] *= cfg.lam_factor
        return z.detach().to(x.dtype)

class BayesCF(Wachter):
    """Wachter's objective and lambda search on the posterior-averaged prediction."""

    name = "BayesCF"

    def _log_probs(self, z):
        return log_mean_prob(self.classifier, z, self.config.n_samples)

