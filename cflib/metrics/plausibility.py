"""IM1 and IM2, the autoencoder interpretability metrics of Van Looveren & Klaise (2019).

Both are computed per image, summing over pixels, on the [0, 1] pixel scale of the
public reference evaluation (Schut et al., ``uces/im_evaluation.py``: MNIST through
``ToTensor()``).  The autoencoders see the [-1, 1] images of the project; their inputs
and outputs are mapped to [0, 1] by ``u = (x + 1) / 2`` before the norms.  IM1, a ratio
of two squared errors, is the same on either scale; IM2 is not (its L1 denominator
counts the background at 0 on [0, 1], at 1 on [-1, 1]).
"""
from __future__ import annotations

import torch
from torch import nn

from cflib.metrics.spec import MetricSpec, register
from cflib.scopes import frozen


def _sq(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a - b).pow(2).flatten(1).sum(1)


@torch.no_grad()
def _recon(ae: nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    dev = next(ae.parameters()).device
    with frozen(ae):
        return torch.cat([ae(x[i:i + batch_size].to(dev)).to(x.device)
                          for i in range(0, len(x), batch_size)])


def im1(x_cf: torch.Tensor, ae_target: nn.Module, ae_query: nn.Module,
        eps: float = 1e-8) -> torch.Tensor:
    """IM1 = ||x_cf - AE_t(x_cf)||^2 / (||x_cf - AE_q(x_cf)||^2 + eps), per image.

    Eq. (5) of Van Looveren & Klaise: below 1 when the counterfactual is better
    explained by the target-class autoencoder than by the query-class one.
    """
    return _sq(x_cf, _recon(ae_target, x_cf)) / (_sq(x_cf, _recon(ae_query, x_cf)) + eps)


def im2(x_cf: torch.Tensor, ae_target: nn.Module, ae_all: nn.Module,
        eps: float = 1e-8) -> torch.Tensor:
    """IM2 = ||AE_t(x_cf) - AE(x_cf)||^2 / (||x_cf||_1 + eps), per image, on [0, 1].

    Eq. (6) of Van Looveren & Klaise; ``ae_all`` is trained on every class.  With
    ``u = (v + 1) / 2`` for every image ``v`` in [-1, 1], the numerator is a quarter of
    the squared distance on [-1, 1] and the denominator ``||(x_cf + 1) / 2||_1``.  The
    C3LT table reports IM2 x 10.
    """
    num = _sq(_recon(ae_target, x_cf), _recon(ae_all, x_cf)) / 4.0
    return num / ((x_cf + 1).div(2).abs().flatten(1).sum(1) + eps)


def im1_by_class(x_cf: torch.Tensor, target, query, autoencoders: dict) -> torch.Tensor:
    """Per-image IM1 with the class autoencoders of each image's own (target, query)
    classes: ``autoencoders[c]`` is the AE of class c; ``target`` and ``query`` are
    ints or (N,) tensors of classes."""
    n = len(x_cf)
    t = torch.as_tensor(target).long().cpu().expand(n) if torch.as_tensor(target).dim() == 0 \
        else torch.as_tensor(target).long().cpu()
    q = torch.as_tensor(query).long().cpu().expand(n) if torch.as_tensor(query).dim() == 0 \
        else torch.as_tensor(query).long().cpu()
    if t.shape != (n,) or q.shape != (n,):
        raise ValueError(f"target and query must be ints or have shape ({n},)")
    out = torch.empty(n)
    for tc, qc in sorted({(int(a), int(b)) for a, b in zip(t.tolist(), q.tolist())}):
        missing = [c for c in (tc, qc) if c not in autoencoders]
        if missing:
            raise ValueError(f"no class autoencoder for class(es) {missing}")
        rows = ((t == tc) & (q == qc)).nonzero().squeeze(1)
        out[rows] = im1(x_cf[rows.to(x_cf.device)], autoencoders[tc], autoencoders[qc]).cpu()
    return out


# -- specs (context: ``cf``, ``query_labels``, ``autoencoders``) ---------------------------
IM1 = MetricSpec(
    "IM1", lambda c: im1_by_class(c.cf.x_cf, c.cf.target, c.query_labels,
                                  c.autoencoders).mean().item(), False,
    "target-class AE error / query-class AE error (Van Looveren & Klaise 2019), the AEs of "
    "each image's own target and query classes")
IM2 = MetricSpec(
    "IM2", lambda c: im2(c.cf.x_cf, c.autoencoders[c.target_class],
                         c.autoencoders[None]).mean().item(),
    False, "disagreement of the target-class and all-class AEs, over the L1 norm",
    display_scale=10.0)
register(IM1, IM2)
