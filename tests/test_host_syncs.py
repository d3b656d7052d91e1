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


# -- the step-overhead benchmark's counter, and the searches it counts -------------------------
def _step_overhead():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "step_overhead.py"
    spec = importlib.util.spec_from_file_location("step_overhead", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_counter_sees_each_kind_of_host_read_and_no_false_one():
    so = _step_overhead()
    x = torch.randn(6, 4)
    mask = x[:, 0] > 0
    with so.CountCalls() as c:
        x[mask]                       # boolean index: nonzero inside the kernel
        x[mask] = 0.0                 # boolean index assignment
        x[0, 0].item()
        bool(x.sum() > 0)
        x.nonzero()
        y = x.view(24).add(1)         # a view launches nothing; the add is one call
        y[torch.tensor([0, 2])]       # an integer index reads nothing back
    assert sum(c.syncs.values()) == 5, c.syncs
    assert c.host_reads == 0
    assert c.calls >= 6 and not any(k.startswith("add") for k in c.syncs)
    p = torch.zeros(3, requires_grad=True)
    opt = torch.optim.Adam([p], lr=0.1, foreach=False)
    p.sum().backward()
    with so.CountCalls() as c:
        opt.step()                    # its step counter is a host scalar: a read, no sync
    assert sum(c.syncs.values()) == 0 and c.host_reads >= 1


def test_per_step_counts_and_flags_a_search_that_stops_early():
    so = _step_overhead()
    x = torch.randn(8, 3)

    def search(steps, stop=None):
        z = x.clone()
        for i in range(steps):
            z = z * 0.9 + 1               # two calls a step
            z[z[:, 0] > 100] = 0          # one masked assignment: a sync a step
            if stop is not None and i == stop:
                break
        return z

    r = so.per_step(lambda b: search(b), lambda b: b)
    assert r["calls_per_step"] == 4 and r["syncs_per_step"] == 1 and r["linear"], r
    assert "index_put" in r["where"]
    early = so.per_step(lambda b: search(b, stop=4), lambda b: b)   # 3 steps, then 5, 5
    assert not early["linear"]


def test_schut_with_finished_queries_kept_synchronises_once_per_check_not_per_step():
    """compact=False: fixed shapes, the finished images masked; only every check_every-th
    iteration reads back whether all are done.  The compacting search reads back every
    iteration (its shapes follow the unfinished images)."""
    import inspect

    from cflib.explainers import Schut

    so = _step_overhead()
    torch.manual_seed(0)
    clf = _classifier()
    x = torch.rand(6, 1, 8, 8) * 2 - 1
    every = inspect.signature(Schut._search_masked).parameters["check_every"].default
    counts = {}
    for compact in (False, True):
        for iters in (every, 3 * every):
            ex = Schut(clf, Schut.Config(max_iters=iters, confidence=1.0, n_changes=1000,
                                         compact=compact))
            with so.CountCalls() as c:
                ex._search(x, torch.full((6,), 3))
            counts[compact, iters] = sum(c.syncs.values())
    assert counts[False, 3 * every] - counts[False, every] == 2, counts
    assert counts[True, 3 * every] - counts[True, every] >= 2 * every, counts


def test_roar_and_psce_with_finished_queries_kept_read_back_once_per_check():
    """ROAR reads back every check_every-th iteration, PSCE once per outer round: their
    steps in between synchronise nothing (the compacting searches read back each step)."""
    import inspect

    from cflib.explainers import PSCE, ROAR

    class Headed(nn.Module):          # ROAR perturbs the last linear layer: features + head
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(),
                                          nn.Flatten())
            self.head = nn.Sequential(nn.Linear(4 * 8 * 8, 5))

        def forward(self, x):
            return self.head(self.features(x))

    so = _step_overhead()
    torch.manual_seed(0)
    clf = Headed().eval()
    x = torch.rand(6, 1, 8, 8) * 2 - 1
    t = torch.full((6,), 3)
    every = inspect.signature(ROAR._search_masked).parameters["check_every"].default
    counts = {}
    for compact in (False, True):
        for iters in (every, 3 * every):
            roar = ROAR(clf, ROAR.Config(max_iter=iters, loss_threshold=0.0, compact=compact))
            psce = PSCE(clf, PSCE.Config(inner_steps=iters, outer_iters=2, tol=0.0,
                                         compact=compact), autoencoder=None)
            for name, ex in (("ROAR", roar), ("PSCE", psce)):
                with so.CountCalls() as c:
                    ex._search(x, t)
                counts[name, compact, iters] = sum(c.syncs.values())
    assert counts["ROAR", False, 3 * every] - counts["ROAR", False, every] == 2, counts
    assert counts["PSCE", False, 3 * every] == counts["PSCE", False, every], counts
    assert counts["ROAR", True, 3 * every] - counts["ROAR", True, every] >= 2 * every, counts
    assert counts["PSCE", True, 3 * every] - counts["PSCE", True, every] >= 2 * every, counts


def test_row_adams_masked_step_is_its_indexed_step_bit_for_bit():
    """RowAdam.step_masked against step(x, grad[rows], rows): rows that never stepped,
    rows joining late and rows leaving, over several steps with gradients of every scale."""
    from cflib.explainers._posterior import RowAdam

    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 1, 3, 3, generator=g)
    a, b = RowAdam(x.clone(), 0.05), RowAdam(x.clone(), 0.05)
    xa, xb = x.clone(), x.clone()
    lives = [[1, 1, 0, 1, 0, 1, 1], [1, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0, 0],
             [1, 1, 0, 1, 1, 1, 1]]
    for k, live in enumerate(lives):
        live = torch.tensor(live, dtype=torch.bool)
        grad = torch.randn(7, 1, 3, 3, generator=g) * 10.0 ** (k - 2)
        rows = live.nonzero().flatten()
        a.step(xa, grad[rows], rows)
        b.step_masked(xb, grad, live)
        assert torch.equal(xa, xb) and torch.equal(a.m, b.m) and torch.equal(a.v, b.v)
        assert torch.equal(a.t, b.t)
    assert torch.equal(xb[2], x[2])          # a row never live is untouched


def test_the_generator_loops_read_back_once_an_epoch_not_once_a_batch():
    """DCGAN and encoder training keep the images on the device and the epoch's sums
    there: as many read-backs for twice the batches (they were 4 and 2 a batch)."""
    from cflib.models.dcgan import DCGAN, EncoderDCGAN, train_dcgan, train_encoder

    so = _step_overhead()
    counts = {}
    for batches in (2, 4):
        x = torch.rand(8 * batches, 1, 28, 28) * 2 - 1
        torch.manual_seed(0)
        gan, enc = DCGAN(ngf=8, ndf=8), EncoderDCGAN()
        with so.CountCalls() as c:
            train_dcgan(gan, x, 1, batch_size=8, seed=0)
        counts["dcgan", batches] = sum(c.syncs.values())
        with so.CountCalls() as c:
            train_encoder(enc, gan.generator, x, 1, batch_size=8, seed=0)
        counts["encoder", batches] = sum(c.syncs.values())
    assert counts["dcgan", 2] == counts["dcgan", 4], counts
    assert counts["encoder", 2] == counts["encoder", 4], counts


def test_c3lt_training_reads_back_at_its_logged_points_only():
    """C3LT's mapping updates keep their sums on the device and read them at the logged
    points (about ten an epoch): twice the updates, the same read-backs."""
    from cflib.explainers import C3LT
    from cflib.explainers.c3lt import C3LTMappings
    from cflib.models import C3LTClassifier
    from cflib.models.dcgan import DCGAN, EncoderDCGAN

    so = _step_overhead()
    torch.manual_seed(0)
    f, gan, enc = C3LTClassifier().eval(), DCGAN(ngf=8, ndf=8).eval(), EncoderDCGAN().eval()
    counts = []
    for updates in (20, 40):
        x = torch.rand(4 * updates, 1, 28, 28) * 2 - 1
        ex = C3LT(f, C3LT.Config(epochs=1, batch_size=4, gamma=0.1, beta=1.0),
                  generator=gan.generator, encoder=enc, discriminator=gan.discriminator)
        with so.CountCalls() as c:
            ex._train(C3LTMappings(100), x, x.flip(0), 0, 1)
        counts.append(sum(c.syncs.values()))
    assert counts[0] == counts[1], counts
