"""``Adv. Attack``: a batched targeted PGD attack (Madry et al. 2018) in [-1, 1].

The C3LT paper's IM1 table lists an adversarial attack as the counterfactual that
fools the classifier without looking like the target class.  torchattacks 3.5.1
pins ``requests~=2.25``, which breaks Sphinx 7 (Jupyter Book), so the attack is
written here: L-infinity projected gradient descent on the cross-entropy towards
the target, random start, every image of the batch at once.

Half precision: a float16 / bfloat16 classifier is attacked in its own dtype (the
random start, the iterates and the result are in it); only the cross-entropy is taken
in float32 (:func:`~cflib.tensors.working`).  PGD's signed steps need no optimiser
state, so no float32 master copy is kept.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cflib.explainers.base import X_MAX, X_MIN, Explainer, ExplainerConfig, working
from cflib.progress import progress


@dataclass(frozen=True)
class AdvAttackConfig(ExplainerConfig):
    eps: float = 0.6          # L-inf radius on the [-1, 1] scale (0.3 on [0, 1], MNIST's usual)
    alpha: float = 0.02       # step size on the [-1, 1] scale
    steps: int = 100
    random_start: bool = True

    def __post_init__(self):
        super().__post_init__()
        if self.eps <= 0 or self.alpha <= 0 or self.steps < 1:
            raise ValueError(f"need eps > 0, alpha > 0 and steps >= 1; got eps={self.eps}, "
                             f"alpha={self.alpha}, steps={self.steps}")


class AdvAttack(Explainer):
    name = "Adv. Attack"
    Config = AdvAttackConfig

    def _generate(self, x, target, query, generator):
        cfg = self.config
        out = torch.empty_like(x)
        for i in range(0, len(x), cfg.batch_size):
            xb, tb = x[i:i + cfg.batch_size], target[i:i + cfg.batch_size]
            delta = torch.zeros_like(xb)
            if cfg.random_start:
                # drawn in float32 on the CPU (the same draw on every device and dtype)
                delta = (torch.rand(xb.shape, generator=generator).to(xb) * 2 - 1) * cfg.eps
            adv = (xb + delta).clamp(X_MIN, X_MAX)
            for _ in progress(range(cfg.steps), desc=self.name):
                adv.requires_grad_(True)
                loss = F.cross_entropy(working(self.classifier(adv)), tb)
                (grad,) = torch.autograd.grad(loss, adv)
                with torch.no_grad():
                    adv = adv - cfg.alpha * grad.sign()  # descend: towards the target
                    adv = (xb + (adv - xb).clamp(-cfg.eps, cfg.eps)).clamp(X_MIN, X_MAX)
            out[i:i + cfg.batch_size] = adv.detach()
        return out

