import pytest
import torch

from cflib.explainers.cem import CEM, CEMConfig
from cflib.models import ConvAutoencoder

# The bar toy needs a large change (a new bar on the right half), hence the large
# hinge weight; few iterations keep the file fast on a 2-core CPU.
FAST = dict(kappa=1.0, c_init=100.0, c_steps=2, max_iterations=40)


@pytest.fixture(scope="module")
def queries(bars):
    x, y = bars
    return x[y == 0][:8]


@pytest.fixture(scope="module")
def pn(tiny_classifier, queries):
    return CEM(tiny_classifier, **FAST).explain(queries, target=1, seed=0)


def test_cem_reaches_the_target(pn, queries):
    assert pn.validity >= 0.75
    assert pn.method == "CEM" and pn.meta["config"]["max_iterations"] == 40
    assert pn.meta["autoencoder"] is False


def test_cem_pn_only_adds_ink(pn, queries):
    # no_info_val = -1 (black): a pertinent negative only moves pixels away from it
    assert (pn.x_cf - queries).min() >= -1e-6
    assert (pn.x_cf - queries).max() > 0.5


def test_cem_unrestricted_may_remove(tiny_classifier, queries):
    cf = CEM(tiny_classifier, no_info_val=None, **{**FAST, "c_init": 1000.0, "c_steps": 1}).explain(
        queries[:3], 1)
    assert cf.validity >= 0.6
    assert (cf.x_cf - queries[:3]).min() < 0


def test_cem_reproducible(tiny_classifier, queries):
    ex = CEM(tiny_classifier, kappa=1.0, c_init=100.0, c_steps=1, max_iterations=5)
    a = ex.explain(queries[:3], 1, seed=0).x_cf
    b = ex.explain(queries[:3], 1, seed=0).x_cf
    assert torch.equal(a, b)


def test_cem_batch_equals_single(tiny_classifier, queries):
    # per-image c vectors and masks: an image's result does not depend on its batch
    ex = CEM(tiny_classifier, kappa=1.0, c_init=100.0, c_steps=2, max_iterations=8)
    both = ex.explain(queries[:2], 1).x_cf
    one = ex.explain(queries[1:2], 1).x_cf
    assert torch.allclose(both[1:2], one, atol=1e-5)


def test_cem_with_autoencoder_runs(tiny_classifier, queries):
    torch.manual_seed(0)
    ae = ConvAutoencoder()
    kw = dict(kappa=1.0, c_init=100.0, c_steps=1, max_iterations=5)
    cf = CEM(tiny_classifier, autoencoder=ae, **kw).explain(queries[:2], 1)
    without = CEM(tiny_classifier, **kw).explain(queries[:2], 1)
    assert cf.meta["autoencoder"] is True and without.meta["autoencoder"] is False
    assert not torch.equal(cf.x_cf, without.x_cf)      # the gamma term took part
    # the caller's autoencoder is left as it was: training mode, trainable
    assert ae.training and all(p.requires_grad for p in ae.parameters())


def test_cem_failure_is_a_mask(tiny_classifier, queries):
    # one iteration with a tiny c cannot reach the target: the last iterate comes back,
    # success False; that iterate is the query itself (the one gradient step is far below
    # the shrinkage threshold beta)
    cf = CEM(tiny_classifier, c_init=1e-3, c_steps=1, max_iterations=1).explain(queries[:2], 1)
    assert not cf.success.any()
    assert torch.equal(cf.x_cf, queries[:2])


def test_cem_binary_search_lowers_c_after_success(tiny_classifier, queries):
    # a large c finds a PN in round 1, then c is halved: with more rounds the kept
    # PN is never worse (elastic-net loss) than with one round
    kw = dict(kappa=1.0, c_init=1000.0, max_iterations=15)
    one = CEM(tiny_classifier, c_steps=1, **kw).explain(queries[:2], 1)
    three = CEM(tiny_classifier, c_steps=3, **kw).explain(queries[:2], 1)
    beta = CEMConfig().beta

    def en(cf):
        d = (cf.x_cf - cf.x).flatten(1)
        return d.pow(2).sum(1) + beta * d.abs().sum(1)

    ok = one.success & three.success
    assert ok.any()
    assert (en(three)[ok] <= en(one)[ok] + 1e-4).all()


@pytest.mark.parametrize("kw, msg", [
    (dict(c_steps=0), "c_steps"),
    (dict(beta=-1.0), "beta"),
    (dict(clip=(1.0, -1.0)), "clip"),
])
def test_cem_bad_config(tiny_classifier, kw, msg):
    with pytest.raises(ValueError, match=msg):
        CEM(tiny_classifier, **kw)


def test_cem_bad_input(tiny_classifier, queries):
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        CEM(tiny_classifier, max_iterations=1).explain(queries * 255, 1)
    with pytest.raises(ValueError, match="target"):
        CEM(tiny_classifier, max_iterations=1).explain(queries, target=11)


def test_cem_from_the_catalog_uses_sizes_and_all_class_ae(tiny_classifier, monkeypatch):
    from cflib.bench import catalog, zoo

    calls = []

    def fake_autoencoder(dataset, cls, profile, seed=0, device="cpu", use_cache=True):
        calls.append((dataset, cls, profile.name, seed))
        return ConvAutoencoder(), {}

    monkeypatch.setattr(zoo, "autoencoder", fake_autoencoder)
    ex = catalog.build("CEM", tiny_classifier, dataset="mnist", profile="smoke", seeds=3,
                       pair=(4, 9))
    assert calls == [("mnist", None, "smoke", 3)]
    assert ex.autoencoder is not None and ex.config.gamma > 0
    from cflib.bench.profiles import get_profile
    smoke = get_profile("smoke")
    assert ex.config.max_iterations == smoke.c3lt.cem_max_iterations
    assert ex.config.c_steps == smoke.c3lt.cem_c_steps
    with pytest.raises(ValueError, match="equal"):
        catalog.build("CEM", tiny_classifier, dataset="mnist", profile="smoke", pair=(4, 4))


def test_cem_runs_its_steps_inside_the_scope(tiny_classifier, queries):
    from cflib.explainers import CEMPaperBudget, CEMTargeted

    seen = []
    first = tiny_classifier.conv[0]
    hook = first.register_forward_pre_hook(
        lambda m, args: seen.append(torch.is_grad_enabled() and "forward" in vars(m)))
    try:
        for cls in (CEM, CEMTargeted, CEMPaperBudget):
            seen.clear()
            cls(tiny_classifier, kappa=1.0, c_steps=1, max_iterations=2).explain(queries[:2], 1)
            assert any(seen), f"{cls.name}: the first layer's gradient pass was not converted"
    finally:
        hook.remove()
    assert "forward" not in vars(first)


@pytest.mark.parametrize("sizes", [(20, 40), (16, 4), (6, 6)])
def test_queries_of_several_pairs_in_one_batch_get_the_same_bits(tiny_classifier, bars, sizes):
    """The C3LT table runs CEM (paper budget) once on every pair's queries (its
    ACROSS_PAIRS): each query's search is its own, so its counterfactual must be the very
    one its pair's own batch gives, targets and labels differing by pair, through the
    CPU scopes (the one-channel convolutions, F.fold below 16 images and the shifted
    additions from 16) and the all-class autoencoder term: the chapters' 20 queries a
    pair, a batch crossing the fold's threshold, and a small one.  (Below about 5 images
    a batch oneDNN's kernels can round otherwise, ~1e-7: smoke's 2 queries a pair.)"""
    from cflib.bench.tables.c3lt import ACROSS_PAIRS

    assert "CEM (paper budget)" in ACROSS_PAIRS
    x, y = bars
    torch.manual_seed(0)
    ae = ConvAutoencoder().eval()
    ex = CEM(tiny_classifier, autoencoder=ae, kappa=1.0, c_init=100.0, c_steps=2,
             max_iterations=6)
    a, b = x[y == 0][:sizes[0]], x[y == 1][:sizes[1]]
    alone = [ex.explain(a, 1), ex.explain(b, 0)]
    both = ex.explain(torch.cat([a, b]), torch.tensor([1] * len(a) + [0] * len(b)))
    for own, part in zip(alone, both.split(sizes)):
        assert torch.equal(own.x_cf, part.x_cf)
        assert torch.equal(own.success, part.success)
        assert part.meta["n_already_target"] == own.meta["n_already_target"]
        assert part.seconds_per_cf == pytest.approx(both.seconds_per_cf)
