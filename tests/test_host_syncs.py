"""The searches' inner steps wait on no host synchronisation (issue: steps without
per-step overhead): CEM's FISTA step and the latent search's step are counted with a
dispatch mode that sees every `_local_scalar_dense` (what `.item()`, `bool(tensor)` and
`one_hot`'s label check call) and every `nonzero`; on a GPU each one stalls the stream.
What the CEM margin computes is unchanged: the same values as with one_hot's mask."""
from __future__ import annotations

import collections

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from cflib.explainers import CEM

SYNCS = ("_local_scalar_dense", "nonzero", "is_nonzero")


class CountSyncs(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._overloadpacket.__name__
        if name in SYNCS:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


def _classifier():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 5)).eval()


def test_a_cem_search_synchronises_a_fixed_number_of_times_whatever_its_steps():
    x = torch.rand(6, 1, 8, 8) * 2 - 1
    label = torch.tensor([0, 1, 2, 3, 4, 0])
    counts = []
    for iterations in (5, 25):
        ex = CEM(_classifier(), CEM.Config(c_steps=2, max_iterations=iterations, batch_size=6))
        with CountSyncs() as c:
            ex._attack(x, label)
        counts.append(sum(c.counts.values()))
    assert counts[0] == counts[1] == 0, counts     # the loop itself: none at all


def test_the_margin_is_the_one_hot_masked_margin_bit_for_bit():
    ex = CEM(_classifier())
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(64, 7, generator=g)
    target = torch.randint(0, 7, (64,), generator=g)
    z_t = logits.gather(1, target[:, None]).squeeze(1)
    old = z_t - logits.masked_fill(nn.functional.one_hot(target, 7).bool(),
                                   float("-inf")).max(1).values
    assert torch.equal(ex._margin(logits, target), old)
