"""The method catalog: every method built with one call, explaining a batch, leaving the
caller's model, flags and RNG as they were; methods not tied to 28x28 take 3x32x32, and
classifiers with other class counts (a 20-class model, pair (0, 15), targets 10..19)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from cflib.bench import catalog
from cflib.bench.catalog import CATALOG
from cflib.explainers import EXPLAINERS, Explainer, get_explainer
from cflib.models import ConvAutoencoder, LatentAutoencoder
from cflib.models.dcgan import DCGAN, EncoderDCGAN

#: methods whose paper ties them to the 28x28 DCGAN (C3LT's generator)
TIED_TO_28 = {"C3LT", "C3LT (reconstruction)", "C3LT (inverted)", "Latent search"}  # the DCGAN


@pytest.fixture(scope="module")
def data(bars):
    torch.manual_seed(0)
    gan = DCGAN(ngf=8, ndf=8).eval()
    return dict(train=bars, pool=bars, autoencoder=ConvAutoencoder().eval(),
                generator=gan.generator, discriminator=gan.discriminator,
                encoder=EncoderDCGAN(ndf=8).eval(), cache=False,
                latent_autoencoder=LatentAutoencoder().fit_latent_stats(bars[0]).eval())


def _state(model: nn.Module):
    return ([m.training for m in model.modules()],
            [p.requires_grad for p in model.parameters()],
            {k: v.clone() for k, v in model.state_dict().items()})


def test_an_explainer_without_a_builder_fails_by_name():
    """The catalog is read off the library's one registry: a method added there without a
    builder here is named at import, not silently missing from the harness."""
    class NewMethod(catalog.OriginalData):
        name = "New method"

    with pytest.raises(RuntimeError, match=r"no builder for \['New method'\]"):
        catalog._catalog({**EXPLAINERS, "New method": NewMethod})


def test_the_catalog_holds_every_method_of_the_tables():
    assert list(CATALOG) == list(EXPLAINERS) == ["Original Data", "Query (unchanged)", "Adv. Attack", "CEM",
                             "CEM (targeted)", "CEM (paper budget)", "CVE",
                             "CVE (receptive field)", "ExpGAN", "C3LT", "C3LT (reconstruction)",
                             "C3LT (inverted)", "Latent search",
                             "Wachter", "BayesCF", "ROAR", "Schut", "PSCE", "Latent PGD"]
    assert all(issubclass(cls, Explainer) and cls.name == name
               for name, cls in EXPLAINERS.items())
    assert all(e.cls is EXPLAINERS[name] for name, e in CATALOG.items())
    assert [n for n, e in CATALOG.items() if e.per_pair] == [
        "CVE", "CVE (receptive field)", "ExpGAN", "C3LT", "C3LT (reconstruction)",
        "C3LT (inverted)", "Latent search"]
    assert {e.table for e in CATALOG.values()} == {"c3lt", "bayes", "quant"}
    assert [n for n, e in CATALOG.items() if not e.searches] == [
        "Original Data", "Query (unchanged)", "ExpGAN", "C3LT", "C3LT (reconstruction)"]
    with pytest.raises(ValueError, match="unknown method 'DiCE'.*C3LT"):
        get_explainer("DiCE")
    with pytest.raises(ValueError, match="did you mean 'C3LT'"):
        catalog.get_entry("C3TL")


def check_what_comes_back(name, cf, xq, clf, target, pool_x=None):
    """What every method's counterfactuals must be, asked of the result itself: the success
    mask is what the classifier says (a pass of its own here), the query comes back as it is
    from Query (unchanged) and changed from every other method (from CEM where it succeeded:
    its failures may be the query), and where a method bounds
    its change the change keeps the bound (Adv. Attack's eps-ball, CEM's pertinent negative
    adding ink only, Original Data's images real ones)."""
    with torch.no_grad():
        pred, pred_cf = clf(xq).argmax(1), clf(cf.x_cf).argmax(1)
    assert torch.equal(cf.success, (pred_cf == target) & (pred != target))
    d = cf.x_cf - xq
    moved = d.abs().flatten(1).amax(1)
    if name == "Query (unchanged)":
        assert moved.max() == 0 and cf.validity == 0.0
        return
    # CEM's failed search returns its last iterate, which may be the query itself (no
    # gradient step passed the shrinkage threshold): there only the successes moved
    assert (moved[cf.success] > 0).all() if name.startswith("CEM") else (moved > 0).all(), \
        (name, moved)
    if name == "Original Data" and pool_x is not None:
        hit = (cf.x_cf.flatten(1)[:, None] == pool_x.to(cf.x_cf).flatten(1)[None]).all(2)
        assert hit.any(1).all()
    if name == "Adv. Attack":
        assert moved.max() <= catalog.AdvAttackConfig.eps + 1e-6
    if name.startswith("CEM"):
        assert (d >= -1e-6).all()


@pytest.mark.parametrize("name", list(CATALOG))
def test_every_method_builds_from_one_call_and_explains_a_batch(name, tiny_classifier, bars,
                                                                data):
    x, y = bars
    xq = x[y == 0][:4]
    ex = catalog.build(name, tiny_classifier, dataset="mnist", profile="smoke", seeds=0,
                       pair=(0, 1), **data)
    cf = ex.explain(xq, 1, seed=0)
    assert cf.method == name and cf.meta["config"]["batch_size"] == ex.config.batch_size
    check_what_comes_back(name, cf, xq, tiny_classifier, 1, pool_x=x[y == 1])


@pytest.mark.parametrize("name", list(CATALOG))
def test_explain_and_fit_leave_the_callers_state_as_it_was(name, bars, data):
    from cflib.models import C3LTClassifier
    from cflib.training import train_classifier

    torch.manual_seed(1)
    clf = C3LTClassifier()
    x, y = bars
    train_classifier(clf, x[:64], y[:64], epochs=1, batch_size=32)
    clf.zero_grad(set_to_none=True)
    clf.train()                                   # a model explained mid-training
    clf.head[1].weight.requires_grad_(False)      # with mixed flags
    ae = ConvAutoencoder().train()
    caller = {**data, "autoencoder": ae}
    before_clf, before_ae = _state(clf), _state(ae)
    rng = torch.random.get_rng_state()
    ex = catalog.build(name, clf, dataset="mnist", profile="smoke", seeds=0, pair=(0, 1),
                       **caller)
    ex.explain(x[y == 0][:3], 1, seed=3)
    assert torch.equal(torch.random.get_rng_state(), rng)
    for before, model in ((before_clf, clf), (before_ae, ae)):
        modes, flags, weights = _state(model)
        assert modes == before[0] and flags == before[1]
        assert all(torch.equal(weights[k], v) for k, v in before[2].items())
    # the model goes on training: gradients reach its trainable parameters
    clf(x[:2]).sum().backward()
    assert clf.head[4].weight.grad is not None and clf.head[1].weight.grad is None


class SmallRGB(nn.Module):
    """A 3x32x32 classifier with the C3LT layout (``features`` map + ``head``), 5 classes;
    its 8 x 8 feature map cuts the image into 4 x 4-pixel grid tiles (CVE)."""

    def __init__(self, n_classes: int = 5):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 8, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(8, 8, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8 * 8 * 8, 16), nn.ReLU(),
                                  nn.Dropout(0.5), nn.Linear(16, n_classes))

    def features(self, x):
        return self.conv(x)

    def classify_features(self, f):
        return self.head(f)

    def forward(self, x):
        return self.head(self.conv(x))


@pytest.mark.parametrize("name", sorted(set(CATALOG) - TIED_TO_28))
def test_methods_take_rgb_32x32_batches_and_other_class_counts(name):
    from cflib.training import train_classifier

    g = torch.Generator().manual_seed(0)
    y = torch.arange(80) % 5
    x = 0.2 * torch.randn(80, 3, 32, 32, generator=g) - 0.5
    for c in range(5):                 # class c: a bright square in channel c % 3, place c
        x[y == c, c % 3, 4 * c:4 * c + 12, 4 * c:4 * c + 12] += 1.0
    x = x.clamp(-1, 1)
    torch.manual_seed(0)
    clf = SmallRGB()
    train_classifier(clf, x, y, epochs=15, batch_size=16)
    with torch.no_grad():
        y = clf(x).argmax(1)           # labels the classifier agrees with
    q, t = y.unique()[:2].tolist()
    data = dict(train=(x, y), pool=(x, y), autoencoder=None, cache=False,
                latent_autoencoder=LatentAutoencoder(channels=3, image_size=32)
                .fit_latent_stats(x).eval())
    ex = catalog.build(name, clf, dataset="mnist", profile="smoke", seeds=0, pair=(q, t),
                       **data)
    cf = ex.explain(x[y == q][:3], t)
    check_what_comes_back(name, cf, x[y == q][:3], clf, t, pool_x=x[y == t])
    with pytest.raises(ValueError, match=r"0\.\.4"):
        ex.explain(x[:3], 7)          # the classifier has 5 outputs


def test_build_names_unknown_data_and_missing_pairs(tiny_classifier):
    with pytest.raises(TypeError, match="unknown data argument.*'pools'"):
        catalog.build("CEM", tiny_classifier, dataset="mnist", profile="smoke", pools=None)
    with pytest.raises(ValueError, match="pair=\\(query, target\\)"):
        catalog.build("CVE", tiny_classifier, dataset="mnist", profile="smoke")
    with pytest.raises(ValueError, match="unknown profile"):
        catalog.build("Schut", tiny_classifier, dataset="mnist", profile="huge")
    with pytest.raises(ValueError, match="class 12 of pair 0->12 is not a class"):
        catalog.build("Adv. Attack", tiny_classifier, dataset="mnist", profile="smoke",
                      pair=(0, 12))


def _twenty_class_rgb():
    """A 20-class 3x32x32 classifier (untrained: only the output width matters here)."""
    torch.manual_seed(0)
    return SmallRGB(n_classes=20).eval()


def test_a_core_explainer_explains_a_20_class_rgb_model_towards_classes_10_to_19():
    from cflib.explainers import AdvAttack

    clf = _twenty_class_rgb()
    x = torch.rand(6, 3, 32, 32) * 2 - 1
    targets = torch.arange(10, 16) + 4 * (torch.arange(6) % 2)      # 10..19
    cf = AdvAttack(clf, steps=5).explain(x, targets, seed=0)
    assert cf.target.tolist() == targets.tolist()
    with torch.no_grad():       # the attack raised each image's own target's score
        before = torch.log_softmax(clf(x), 1).gather(1, targets[:, None])
        after = torch.log_softmax(clf(cf.x_cf), 1).gather(1, targets[:, None])
    assert (after > before).all()
    with pytest.raises(ValueError, match=r"0\.\.19"):
        AdvAttack(clf, steps=5).explain(x, 20)


def test_the_catalog_takes_pair_0_15_for_a_20_class_model():
    clf = _twenty_class_rgb()
    x = torch.rand(4, 3, 32, 32) * 2 - 1
    for name in ("Adv. Attack", "Query (unchanged)", "Wachter", "Schut"):
        ex = catalog.build(name, clf, profile="smoke", pair=(0, 15), image_shape=(3, 32, 32))
        assert ex.explain(x, 15, seed=0).target.unique().tolist() == [15]
    with pytest.raises(ValueError, match="no training image of class 15"):
        catalog.build("ExpGAN", clf, dataset="mnist", profile="smoke", pair=(0, 15),
                      image_shape=(3, 32, 32))
