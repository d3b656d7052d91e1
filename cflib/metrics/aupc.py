"""AUPC of the target and query classes, and COUT (Khorram et al., C3LT Sec. 5).

Pixels are ranked by ``|x_cf - x|``; counterfactual pixels are pasted into the query
in that order, ``784 / steps`` pixels at a time (50 steps in the paper), and the
softmax scores of the target c' and query c are recorded along the path.
AUPC is the trapezoid area under each curve on a [0, 1] x-axis; COUT = AUPC_c' - AUPC_c.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from cflib.gemmconv import pooling_as_maxima
from cflib.metrics.spec import MetricSpec, register
from cflib.scopes import frozen
from cflib.tensors import model_device


@dataclass
class AUPCResult:
    target_curve: torch.Tensor   # (N, steps + 1) softmax score of the target
    query_curve: torch.Tensor    # (N, steps + 1) softmax score of the query class
    aupc_target: torch.Tensor    # (N,)
    aupc_query: torch.Tensor     # (N,)

    @property
    def cout(self) -> torch.Tensor:
        return self.aupc_target - self.aupc_query


def trapezoid_area(curve: torch.Tensor) -> torch.Tensor:
    """Area under curves sampled at evenly spaced points of [0, 1], per row."""
    steps = curve.shape[1] - 1
    return torch.trapezoid(curve, dx=1.0 / steps, dim=1)


#: queries per forward pass on the CPU: 4 x 51 images (the C3LT CNN, one thread, 100
#: queries: 0.80 s against 1.57 s in passes of 64 queries, which overflow the caches)
CPU_CHUNK = 4
#: queries per forward pass on a GPU (few large launches)
DEVICE_CHUNK = 64


@torch.no_grad()
def aupc(classifier: nn.Module, x: torch.Tensor, x_cf: torch.Tensor, query: torch.Tensor,
         target: torch.Tensor, steps: int = 50, chunk: int | None = None) -> AUPCResult:
    """Batched insertion curves: the ``steps + 1`` images of ``chunk`` queries in one
    forward pass (None: :data:`CPU_CHUNK` queries on the CPU, where a pass that fits the
    caches is faster, :data:`DEVICE_CHUNK` elsewhere).  Each image's scores do not depend on
    the chunk on the CPU (the C3LT CNN, 1 to 64 queries: the same bits)."""
    if x.shape != x_cf.shape:
        raise ValueError(f"x {tuple(x.shape)} and x_cf {tuple(x_cf.shape)} differ in shape")
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk must be at least 1, got {chunk}")
    dev = model_device(classifier)
    if chunk is None:
        chunk = CPU_CHUNK if dev.type == "cpu" else DEVICE_CHUNK
    n_pix = x[0].numel()
    # number of pasted pixels at each step: 0, 784/50, ..., 784
    counts = torch.round(torch.linspace(0, n_pix, steps + 1)).long().to(dev)
    tc, qc = [], []
    # max-pooling as maxima of strided views on the CPU: the same bits, faster
    with frozen(classifier), pooling_as_maxima(classifier):
        for i in range(0, len(x), chunk):
            xb, cb = x[i:i + chunk].to(dev).flatten(1), x_cf[i:i + chunk].to(dev).flatten(1)
            order = (cb - xb).abs().argsort(dim=1, descending=True, stable=True)
            rank = torch.empty_like(order)
            rank.scatter_(1, order, torch.arange(n_pix, device=dev).expand_as(order))
            # mask[b, s, p] = pixel p is among the first counts[s] pasted at step s
            mask = rank.unsqueeze(1) < counts.view(1, -1, 1)
            path = torch.where(mask, cb.unsqueeze(1), xb.unsqueeze(1))
            probs = torch.softmax(classifier(path.view(-1, *x.shape[1:])), dim=1)
            probs = probs.view(len(xb), steps + 1, -1)
            tb = target[i:i + chunk].to(dev).view(-1, 1, 1).expand(-1, steps + 1, 1)
            qb = query[i:i + chunk].to(dev).view(-1, 1, 1).expand(-1, steps + 1, 1)
            tc.append(probs.gather(2, tb).squeeze(2).cpu())
            qc.append(probs.gather(2, qb).squeeze(2).cpu())
    t, q = torch.cat(tc), torch.cat(qc)
    return AUPCResult(t, q, trapezoid_area(t), trapezoid_area(q))


# -- specs (context: ``curves``, the AUPCResult of the counterfactuals) -------------------
AUPC_TARGET = MetricSpec("AUPC_target", lambda c: c.curves.aupc_target.mean().item(), True,
                         "area under the target's softmax as CF pixels are pasted into the "
                         "query")
AUPC_QUERY = MetricSpec("AUPC_query", lambda c: c.curves.aupc_query.mean().item(), False,
                        "area under the query class's softmax along the same path")
COUT = MetricSpec("COUT", lambda c: c.curves.cout.mean().item(), True,
                  "AUPC_target − AUPC_query")
register(AUPC_TARGET, AUPC_QUERY, COUT)
