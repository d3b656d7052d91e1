"""Half precision: every explainer of ``EXPLAINERS`` either runs a bfloat16 / float16
model on the CPU (counterfactuals in the model's dtype, finite, of the batch's shape) or
refuses it before any work with a ValueError naming the dtype (issue 27).

Tiny networks and batches: the bars classifier cast to the dtype, 4 queries, a few
iterations, the minimum fit of the learned methods."""
from __future__ import annotations

import copy
import re

import pytest
import torch
from torch import nn

from cflib.explainers import EXPLAINERS
from cflib.models import LatentAutoencoder

DTYPES = [torch.bfloat16, torch.float16]
#: the methods that refuse a half-precision network (their docstrings say why)
REFUSED = {"C3LT", "C3LT (inverted)", "Latent search"}


class _Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 100)

    def forward(self, x):
        return self.fc(x.flatten(1))[:, :, None, None]


class _Dec(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(100, 784)

    def forward(self, z):
        return torch.tanh(self.fc(z.flatten(1))).view(-1, 1, 28, 28)


def _built(make):
    """A network built without touching the global RNG (the test checks it is restored)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return make()


def _latent(dt):
    return _built(lambda: _Dec().to(dt)), _built(lambda: _Enc().to(dt))


def _c3lt(cls, m, dt, x, y):
    G, E = _latent(dt)
    ex = cls(m, generator=G, encoder=E, epochs=1, batch_size=8, gamma=0.0)
    return ex.fit(x[y == 0][:8], x[y == 1][:8]) if cls is EXPLAINERS["C3LT"] else ex


#: name -> (model, dtype, bars) -> a fitted explainer (the fit is part of the work)
BUILD = {
    "Original Data": lambda c, m, dt, x, y: c(m).fit(x[:16], y[:16]),
    "Query (unchanged)": lambda c, m, dt, x, y: c(m),
    "Adv. Attack": lambda c, m, dt, x, y: c(m, steps=3),
    # a hinge weight large enough that 3 FISTA steps pass the shrinkage threshold
    "CEM": lambda c, m, dt, x, y: c(m, max_iterations=3, c_steps=1, c_init=1000.0),
    "CEM (targeted)": lambda c, m, dt, x, y: c(m, max_iterations=3, c_steps=1, c_init=1000.0),
    "CEM (paper budget)": lambda c, m, dt, x, y: c(m, max_iterations=3, c_steps=1,
                                                   c_init=1000.0),
    "CVE": lambda c, m, dt, x, y: c(m, n_distractors=2).fit(x[:16], y[:16]),
    "CVE (receptive field)": lambda c, m, dt, x, y: c(m, n_distractors=2).fit(x[:16], y[:16]),
    "ExpGAN": lambda c, m, dt, x, y: c(m, epochs=1, width=4, batch_size=8).fit(
        x[y == 0][:8], x[y == 1][:8], pair=(0, 1)),
    "C3LT": lambda c, m, dt, x, y: _c3lt(c, m, dt, x, y),
    "C3LT (reconstruction)": lambda c, m, dt, x, y: _c3lt(c, m, dt, x, y),
    "C3LT (inverted)": lambda c, m, dt, x, y: _c3lt(c, m, dt, x, y),
    "Latent search": lambda c, m, dt, x, y: c(m, *(), **dict(zip(("generator", "encoder"),
                                                                 _latent(dt))), steps=2),
    "Wachter": lambda c, m, dt, x, y: c(m, steps=3, lam_steps=2),
    "BayesCF": lambda c, m, dt, x, y: c(m, steps=3, lam_steps=2),
    "ROAR": lambda c, m, dt, x, y: c(m, max_iter=3),
    "Schut": lambda c, m, dt, x, y: c(m, max_iters=3),
    "PSCE": lambda c, m, dt, x, y: c(m, outer_iters=2, inner_steps=2),
    "Latent PGD": lambda c, m, dt, x, y: c(m, autoencoder=_built(
        lambda: LatentAutoencoder().to(dt)), latent="raw", steps=2),
}


def _state(model):
    return ([s.training for s in model.modules()], [p.requires_grad for p in model.parameters()],
            {k: v.clone() for k, v in model.state_dict().items()})


def test_every_explainer_is_covered():
    assert set(BUILD) == set(EXPLAINERS)
    assert {n for n, c in EXPLAINERS.items() if not c.half_precision} == REFUSED


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(EXPLAINERS))
def test_half_precision_runs_or_is_refused_before_any_work(name, dtype, tiny_classifier, bars,
                                                           tmp_cache, monkeypatch):
    x, y = bars
    cls = EXPLAINERS[name]
    model = copy.deepcopy(tiny_classifier).to(dtype).train()   # a mode to keep
    before, rng = _state(model), torch.get_rng_state()
    q = x[y == 0][:4]
    if name in REFUSED:
        from cflib.explainers.c3lt import C3LT

        monkeypatch.setattr(C3LT, "_train", lambda *a, **k: pytest.fail("trained"))
        monkeypatch.setattr(cls, "_generate", lambda *a, **k: pytest.fail("computed"))
        with pytest.raises(ValueError, match=rf"does not run {re.escape(str(dtype))} networks"
                                             r".*\.float\(\)"):
            BUILD[name](cls, model, dtype, x, y).explain(q, 1, seed=0)
        assert not tmp_cache.exists()                            # nothing trained or cached
    else:
        ex = BUILD[name](cls, model, dtype, x, y)
        cf = ex.explain(q, 1, seed=0)
        assert cf.x_cf.dtype == dtype and cf.x.dtype == dtype
        # the method did its work in that dtype: every image moved (no search stalled on
        # an underflowed gradient), but the query returned as it is
        moved = (cf.x_cf != cf.x).flatten(1).any(1)
        assert not moved.any() if name == "Query (unchanged)" else moved.all()
    after = _state(model)
    assert after[0] == before[0] and after[1] == before[1]
    assert all(torch.equal(before[2][k], after[2][k]) for k in before[2])
    assert torch.equal(rng, torch.get_rng_state())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_half_precision_classifier_with_a_float32_network_is_refused(dtype, tiny_classifier,
                                                                      bars, monkeypatch):
    from cflib.explainers import CEM, PSCE

    q = bars[0][:4]
    model = copy.deepcopy(tiny_classifier).to(dtype)
    for cls in (CEM, PSCE):
        monkeypatch.setattr(cls, "_generate", lambda *a, **k: pytest.fail("computed"))
        with pytest.raises(ValueError, match=rf"the autoencoder is torch\.float32 but the "
                                             rf"classifier {re.escape(str(dtype))}"):
            cls(model, autoencoder=LatentAutoencoder()).explain(q, 1)


def test_the_searches_keep_a_float32_master_copy(tiny_classifier, bars, monkeypatch):
    """Wachter's Adam (and ROAR's, PSCE's) updates a float32 copy of a float16 iterate: its
    moments are float32, so a squared gradient below float16's range does not vanish."""
    from cflib.explainers import _posterior
    from cflib.explainers.wachter import Wachter

    seen = []
    real = _posterior.RowAdam.step

    def spy(self, x, grad, rows):
        seen.append((x.dtype, self.v.dtype, grad.dtype))
        return real(self, x, grad, rows)

    monkeypatch.setattr(_posterior.RowAdam, "step", spy)
    model = copy.deepcopy(tiny_classifier).half()
    Wachter(model, steps=2, lam_steps=1).explain(bars[0][:2], 1)
    assert seen and all(s == (torch.float32, torch.float32, torch.float16) for s in seen)
