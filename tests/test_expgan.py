"""ExpGAN (ExplainGAN) on the two-bar toy: training, validity, seeds, cache, errors."""
import pytest
import torch

from cflib.explainers.expgan import ExpGAN, ExpGANConfig

# small and fast: the toy's bars are 4 of 28 columns, so the mask must be allowed
# to cover ~20% of the pixels (kappa) and the steps must be large
TOY = dict(epochs=12, batch_size=32, lr=2e-3, width=8, kappa=0.3)


def _toy_sets(bars, n=64):
    x, y = bars
    return x[y == 0][:n], x[y == 1][:n]


@pytest.fixture(scope="module")
def fitted(tiny_classifier, bars):
    xq, xt = _toy_sets(bars)
    return ExpGAN(tiny_classifier, **TOY).fit(xq, xt, pair=(0, 1))


def test_counterfactuals_reach_the_target(fitted, bars):
    x, y = bars
    xq = x[y == 0][-32:]  # not seen in training
    cf = fitted.explain(xq, target=1, seed=0)
    assert cf.validity >= 0.8
    assert cf.method == "ExpGAN" and cf.meta["config"]["kappa"] == TOY["kappa"]
    # the counterfactual is the composite transform() returns, in the classifier's dtype
    comp, _, mask = fitted.transform(xq, 1)
    assert torch.equal(cf.x_cf, comp)
    # each pixel changes by at most twice its mask (|x_tr - x| <= 2)
    assert ((cf.x_cf - xq).abs() <= 2 * mask + 1e-6).all()


def test_masked_out_pixels_are_the_querys_exactly(tiny_classifier, bars):
    """A stub generator of the target class with a known mask: 0 on columns 0-6 and 21-27
    (the query's pixels, bit for bit), 1 on 7-13 (the generator's image), 0.5 on 14-20
    (their mean)."""
    x, y = bars
    ex = ExpGAN(tiny_classifier, epochs=0, width=4).fit(x[y == 0][:8], x[y == 1][:8],
                                                        pair=(0, 1))

    class Stub(torch.nn.Module):
        def forward(self, xb):
            img = torch.full_like(xb, 0.8)
            m = torch.zeros_like(xb)
            m[..., 7:14] = 1.0
            m[..., 14:21] = 0.5
            return img, m

    ex.net.generators[1] = Stub()
    q = x[y == 0][:8]
    out = ex.explain(q, 1).x_cf
    assert torch.equal(out[..., :7], q[..., :7]) and torch.equal(out[..., 21:], q[..., 21:])
    assert torch.equal(out[..., 7:14], torch.full_like(q[..., 7:14], 0.8))
    assert torch.allclose(out[..., 14:21], (0.8 + q[..., 14:21]) / 2, atol=1e-6)


def test_both_directions_in_one_batch(fitted, bars):
    x, y = bars
    xb = torch.cat([x[y == 0][-8:], x[y == 1][-8:]])
    target = torch.tensor([1] * 8 + [0] * 8)
    cf = fitted.explain(xb, target, seed=0)
    assert cf.validity >= 0.6
    # the same images one direction at a time give the same result (batching is exact)
    part = fitted.explain(xb[:8], 1, seed=0).x_cf
    assert torch.allclose(cf.x_cf[:8], part, atol=1e-6)


def test_bad_target_and_unfitted_errors(fitted, tiny_classifier, bars):
    xq = bars[0][:4]
    with pytest.raises(ValueError, match=r"pair \(0, 1\)"):
        fitted.explain(xq, target=5)
    with pytest.raises(RuntimeError, match="fit"):
        ExpGAN(tiny_classifier).explain(xq, 1)
    with pytest.raises(ValueError, match="different classes"):
        ExpGAN(tiny_classifier, epochs=1).fit(xq, xq, pair=(1, 1))
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        ExpGAN(tiny_classifier, epochs=1).fit(xq * 255, xq, pair=(0, 1))
    with pytest.raises(ValueError, match="kappa"):
        ExpGAN(tiny_classifier, kappa=5.0)
    with pytest.raises(ValueError, match="weights"):
        ExpGAN(tiny_classifier, cls_weight=-1.0)
    # without pair=, the classes are the classifier's decisions on each set
    x, y = bars
    assert ExpGAN(tiny_classifier, epochs=0).fit(x[y == 0][:8], x[y == 1][:8]).pair == (0, 1)


def test_reproducible_with_seed(tiny_classifier, bars):
    xq, xt = _toy_sets(bars, 16)
    kw = dict(epochs=1, batch_size=16, width=4)
    a = ExpGAN(tiny_classifier, seed=3, **kw).fit(xq, xt, pair=(0, 1))
    b = ExpGAN(tiny_classifier, seed=3, **kw).fit(xq, xt, pair=(0, 1))
    c = ExpGAN(tiny_classifier, seed=4, **kw).fit(xq, xt, pair=(0, 1))
    sa, sb, sc = a.net.state_dict(), b.net.state_dict(), c.net.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    assert torch.equal(a.explain(xq, 1, seed=0).x_cf, b.explain(xq, 1, seed=0).x_cf)


def test_second_fit_loads_from_cache(tiny_classifier, bars, tmp_cache, monkeypatch):
    xq, xt = _toy_sets(bars, 16)
    cfg = ExpGANConfig(epochs=1, batch_size=16, width=4)
    cache = {"dataset": "toy", "pair": "0->1", "profile": "test", "seed": 0}
    first = ExpGAN(tiny_classifier, cfg).fit(xq, xt, pair=(0, 1), cache=cache)
    assert len(list(tmp_cache.glob("expgan-*.pt"))) == 1

    def no_training(*args, **kwargs):
        raise AssertionError("the cached weights should have been loaded")

    monkeypatch.setattr(ExpGAN, "_train", no_training)
    second = ExpGAN(tiny_classifier, cfg).fit(xq, xt, pair=(0, 1), cache=cache)
    s1, s2 = first.net.state_dict(), second.net.state_dict()
    assert set(s1) == set(s2) and all(torch.equal(s1[k], s2[k]) for k in s1)
    assert any(k.startswith("discriminator.") for k in s2)  # the whole state is cached
    assert second.info == first.info
    # another config is another cache entry: it must train
    with pytest.raises(AssertionError, match="cached"):
        ExpGAN(tiny_classifier, epochs=2, batch_size=16, width=4).fit(
            xq, xt, pair=(0, 1), cache=cache)


def test_the_catalog_uses_train_split_and_cache(tiny_classifier, bars, tmp_cache, monkeypatch):
    from cflib.bench import catalog

    calls = []

    def fake_split(dataset, split="test"):
        calls.append(split)
        return bars

    monkeypatch.setattr(catalog, "load_split", fake_split)
    ex = catalog.build("ExpGAN", tiny_classifier, dataset="mnist", profile="smoke", seeds=0,
                       pair=(0, 1))
    assert calls == ["train"]
    assert ex.config.epochs == 1 and ex.pair == (0, 1)
    assert len(list(tmp_cache.glob("expgan-*.pt"))) == 1
    monkeypatch.setattr(ExpGAN, "_train", lambda *a, **k: pytest.fail("retrained"))
    again = catalog.build("ExpGAN", tiny_classifier, dataset="mnist", profile="smoke", seeds=0,
                          pair="0->1")
    assert torch.equal(again.explain(bars[0][:4], 1).x_cf, ex.explain(bars[0][:4], 1).x_cf)
