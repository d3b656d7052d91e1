"""C3LT (Khorram & Fuxin 2022): DCGAN, encoder, latent mappings, explainer, zoo, cache.

Everything runs on the synthetic ``bars`` images.  The paper-size DCGAN (ngf=64)
is only pushed through one or two training steps; the validity test uses a small
linear autoencoder as the "generator" so that the mapping networks, not the
quality of a few-step GAN, are what is tested.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from cflib.explainers.c3lt import (
    C3LT,
    C3LTConfig,
    C3LTMappings,
    classifier_loss,
    gen_masks,
    nonlinear_map_step,
    proximity_loss,
)
from cflib.models.dcgan import (
    DCGAN,
    Discriminator,
    EncoderDCGAN,
    Generator,
    train_dcgan,
    train_encoder,
)

# ----------------------------------------------------------------------------- helpers

class LinearEncoder(nn.Module):
    def __init__(self, d=100):
        super().__init__()
        self.fc = nn.Linear(784, d)

    def forward(self, x):
        return self.fc(x.flatten(1))[:, :, None, None]  # (N, d, 1, 1) like EncoderDCGAN


class LinearDecoder(nn.Module):
    def __init__(self, d=100):
        super().__init__()
        self.fc = nn.Linear(d, 784)

    def forward(self, z):
        return torch.tanh(self.fc(z.flatten(1))).view(-1, 1, 28, 28)


@pytest.fixture(scope="module")
def toy_latent(bars):
    """A fast stand-in for (G, E, D): a linear autoencoder trained on the bars."""
    torch.manual_seed(0)
    enc, dec = LinearEncoder(), LinearDecoder()
    x, _ = bars
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=3e-3)
    for _ in range(60):
        loss = ((dec(enc(x)) - x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    disc = Discriminator(ndf=8)
    return dec.eval(), enc.eval(), disc.eval()


def make_c3lt(clf, toy, **kw):
    G, E, D = toy
    cfg = dict(epochs=1, batch_size=32, seed=0)
    cfg.update(kw)
    return C3LT(clf, generator=G, encoder=E, discriminator=D, **cfg)


# ----------------------------------------------------------------------------- DCGAN

def test_dcgan_architecture_matches_official_shapes():
    G, D, E = Generator(), Discriminator(), EncoderDCGAN()
    z = torch.randn(2, 100, 1, 1)
    x = G(z)
    assert x.shape == (2, 1, 28, 28) and x.abs().max() <= 1
    assert G(z.flatten(1)).shape == (2, 1, 28, 28)
    p = D(x)
    assert p.shape == (2,) and ((p > 0) & (p < 1)).all()
    assert E(x).shape == (2, 100, 1, 1)
    # official widths: first transposed conv 100 -> 512 (ngf * 8), 4x4
    assert G.main[0].weight.shape == (100, 512, 4, 4)
    assert D.main[0].weight.shape == (64, 1, 4, 4)


def test_dcgan_and_encoder_train_a_few_steps_reproducibly(bars):
    x = bars[0][:32]

    def run():
        torch.manual_seed(0)
        gan = DCGAN(ngf=8, ndf=8)
        stats = train_dcgan(gan, x, epochs=1, batch_size=16, seed=0)
        enc = EncoderDCGAN(ndf=8)
        est = train_encoder(enc, gan.generator, x, epochs=1, batch_size=16, seed=0)
        return gan, enc, stats, est

    gan, enc, stats, est = run()
    assert set(stats) == {"loss_d", "loss_g", "d_x", "d_g_z"}
    assert all(torch.isfinite(torch.tensor(v)) for v in [*stats.values(), *est.values()])
    assert not gan.training and not enc.training
    assert all(p.requires_grad for p in gan.generator.parameters())  # restored
    gan2, enc2, _, _ = run()
    for a, b in zip(list(gan.state_dict().values()) + list(enc.state_dict().values()),
                    list(gan2.state_dict().values()) + list(enc2.state_dict().values())):
        assert torch.equal(a, b)


# ----------------------------------------------------------------------------- pieces

def test_map_step_keeps_norm_and_path_length():
    torch.manual_seed(0)
    z = torch.randn(5, 100, 1, 1)
    m = C3LTMappings().g
    path = nonlinear_map_step(z, m, 3)
    assert len(path) == 4 and path[0] is z
    for zk in path[1:]:
        assert zk.shape == z.shape
        torch.testing.assert_close(zk.flatten(1).norm(dim=1), z.flatten(1).norm(dim=1))


def test_losses_behave():
    x = torch.rand(4, 1, 28, 28) * 2 - 1
    assert proximity_loss(x, x, 10.0, 1.0).item() == pytest.approx(0.0, abs=1e-6)
    # the mask by hand: squared differences 0, 1, 4, 9 min-max normalised
    m = gen_masks(torch.zeros(1, 1, 2, 2), torch.tensor([[[[0.0, 1.0], [2.0, 3.0]]]]))
    assert m.flatten().tolist() == pytest.approx([0.0, 1 / 9, 4 / 9, 1.0])
    assert torch.equal(gen_masks(x, x), torch.zeros_like(x))        # no 0 / 0
    # constant logits (0, log 3): p = (1/4, 3/4) for every image
    clf = nn.Linear(784, 2)
    with torch.no_grad():
        clf.weight.zero_()
        clf.bias.copy_(torch.tensor([0.0, math.log(3.0)]))
    flat = nn.Sequential(nn.Flatten(), clf)
    one, zero = torch.ones(4, dtype=torch.long), torch.zeros(4, dtype=torch.long)
    assert classifier_loss(flat, x, one, "nll").item() == pytest.approx(-math.log(0.75))
    assert classifier_loss(flat, x, one, "hinge", 0.05).item() == 0.0     # 1/4 - 3/4 + 0.05
    assert classifier_loss(flat, x, zero, "hinge", 0.05).item() == pytest.approx(0.55)
    with pytest.raises(ValueError, match="cls_type"):
        classifier_loss(flat, x, one, "mse")


# ----------------------------------------------------------------------------- explainer

def test_c3lt_reaches_target_both_directions(tiny_classifier, bars, toy_latent):
    x, y = bars
    # 8 steps; a larger learning rate than the paper's 1e-3 keeps the test short
    ex = make_c3lt(tiny_classifier, toy_latent, epochs=4, lr=5e-3)
    ex.fit(x[y == 0][:64], x[y == 1][:64])
    assert (ex.query_class, ex.target_class) == (0, 1)  # read from the classifier
    xq = x[y == 0][-32:]  # not seen in training
    cf = ex.explain(xq, target=1, seed=0)
    assert cf.validity >= 0.9, ex.info
    back = ex.explain(x[y == 1][-32:], target=0, seed=0)  # h: CF class -> query class
    assert back.validity >= 0.9, ex.info
    mixed = ex.explain(torch.cat([xq[:4], x[y == 1][:4]]), torch.tensor([1] * 4 + [0] * 4))
    assert mixed.validity >= 0.75
    assert ex.info["epochs"] == 4 and ex.info["last_train_validity"] >= 0.5
    assert cf.meta["config"]["alpha"] == 0.1 and cf.meta["config"]["kappa"] == 0.05


def test_c3lt_hinge_and_multi_step_run(tiny_classifier, bars, toy_latent):
    from dataclasses import replace

    x, y = bars
    ex = make_c3lt(tiny_classifier, toy_latent, cls_type="hinge", n_steps=2)
    ex.fit(x[y == 0][:32], x[y == 1][:32])
    cf = ex.explain(x[y == 0][:8], 1)
    # the same mappings taken one step instead of two: another image (the second step of
    # g moved the code again)
    G, E, D = toy_latent
    one = C3LT(tiny_classifier, replace(ex.config, n_steps=1), generator=G, encoder=E,
               discriminator=D)._adopt(ex.fit_record)
    cf1 = one.explain(x[y == 0][:8], 1)
    assert (cf.x_cf - cf1.x_cf).abs().flatten(1).amax(1).min() > 1e-3


def test_c3lt_reproducible(tiny_classifier, bars, toy_latent):
    x, y = bars
    outs = []
    for _ in range(2):
        ex = make_c3lt(tiny_classifier, toy_latent)
        ex.fit(x[y == 0][:32], x[y == 1][:32])
        outs.append(ex.explain(x[y == 0][:8], 1, seed=0).x_cf)
    assert torch.equal(outs[0], outs[1])


def test_c3lt_goes_through_cache(tiny_classifier, bars, toy_latent, tmp_cache, monkeypatch):
    x, y = bars
    cache = {"dataset": "bars", "pair": "0->1", "profile": "test", "seed": 0}
    a = make_c3lt(tiny_classifier, toy_latent)
    a.fit(x[y == 0][:32], x[y == 1][:32], cache=cache)
    assert len(list(tmp_cache.glob("c3lt-*.pt"))) == 1

    def boom(*args, **kwargs):
        raise AssertionError("retrained instead of loading from the cache")

    monkeypatch.setattr(C3LT, "_train", boom)
    b = make_c3lt(tiny_classifier, toy_latent)
    b.fit(x[y == 0][:32], x[y == 1][:32], cache=cache)
    for p, q in zip(a.maps.parameters(), b.maps.parameters()):
        assert torch.equal(p, q)
    assert b.info == a.info
    # a different config is a different cache entry
    with pytest.raises(AssertionError, match="retrained"):
        make_c3lt(tiny_classifier, toy_latent, beta=0.2).fit(
            x[y == 0][:32], x[y == 1][:32], cache=cache)


def test_c3lt_clear_errors(tiny_classifier, bars, toy_latent):
    x, y = bars
    G, E, D = toy_latent
    ex = make_c3lt(tiny_classifier, toy_latent, epochs=0)
    with pytest.raises(RuntimeError, match="fit"):
        ex.explain(x[:2], 1)
    with pytest.raises(ValueError, match="different classes"):
        ex.fit(x[y == 0][:16], x[y == 0][16:32])
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        ex.fit(x[y == 0][:16] * 5, x[y == 1][:16])
    ex.fit(x[y == 0][:16], x[y == 1][:16])
    with pytest.raises(ValueError, match="pair 0->1"):
        ex.explain(x[:4], target=7)
    with pytest.raises(ValueError, match="cls_type"):
        C3LTConfig(cls_type="l2")
    with pytest.raises(ValueError, match="n_steps"):
        C3LTConfig(n_steps=0)
    with pytest.raises(TypeError):
        C3LT(tiny_classifier, epochs=1)  # no generator / encoder
    no_d = C3LT(tiny_classifier, generator=G, encoder=E, epochs=1, gamma=0.001, batch_size=16)
    with pytest.raises(ValueError, match="discriminator"):
        no_d.fit(x[y == 0][:16], x[y == 1][:16])


# ----------------------------------------------------------------------------- zoo / factory

def test_zoo_and_factory_end_to_end(tiny_classifier, bars, tmp_cache, monkeypatch):
    """zoo.dcgan + zoo.c3lt_encoder + catalog.build at the paper's widths, one step each."""
    import cflib.models.dcgan as dcgan_mod
    from cflib.bench import catalog, zoo
    from cflib.bench.profiles import get_profile

    x, y = bars
    def fake_split(dataset, split="test"):
        return (x, y) if split == "train" else (x[:32], y[:32])

    monkeypatch.setattr(zoo, "load_split", fake_split)
    monkeypatch.setattr(catalog, "load_split", fake_split)
    prof = get_profile("smoke", c3lt=dict(dcgan_subset=16, dcgan_epochs=1, encoder_epochs=1,
                                          c3lt_epochs=1, c3lt_subset=8))
    ex = catalog.build("C3LT", tiny_classifier, dataset="mnist", profile=prof, seeds=0,
                       pair=(0, 1))
    assert ex.fitted and (ex.query_class, ex.target_class) == (0, 1)
    cf = ex.explain(x[y == 0][:4], 1)
    kinds = sorted(p.name.split("-")[0] for p in tmp_cache.glob("*.pt"))
    assert kinds == ["c3lt", "c3lt_encoder", "dcgan"]

    # a second call loads everything from the cache
    def boom(*args, **kwargs):
        raise AssertionError("retrained instead of loading from the cache")

    monkeypatch.setattr(dcgan_mod, "train_dcgan", boom)
    monkeypatch.setattr(dcgan_mod, "train_encoder", boom)
    monkeypatch.setattr(zoo, "train_dcgan", boom)
    monkeypatch.setattr(zoo, "train_encoder", boom)
    monkeypatch.setattr(C3LT, "_train", boom)
    (G, D), info = zoo.dcgan("mnist", prof, seed=0)
    E, einfo = zoo.c3lt_encoder("mnist", prof, seed=0)
    assert isinstance(G, Generator) and isinstance(D, Discriminator)
    assert "loss_d" in info and "test_recon_l1" in einfo
    ex2 = catalog.build("C3LT", tiny_classifier, dataset="mnist", profile=prof, seeds=0,
                        pair="0->1")
    assert torch.equal(ex2.explain(x[y == 0][:4], 1).x_cf, cf.x_cf)
    with pytest.raises(ValueError, match="equal"):
        catalog.build("C3LT", tiny_classifier, dataset="mnist", profile=prof, pair=(1, 1))
