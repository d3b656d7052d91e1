"""Bayesian classifiers (MC dropout, Bayes by Backprop), the five methods of the
Duell & Fan chapter and the robustness metrics, on the `bars` toy."""
from __future__ import annotations

import math

import pytest
import torch

from cflib.bench import catalog
from cflib.bench.profiles import get_profile
from cflib.bench.tables.bayes import BAYES_METHODS, SCHUT_TARGETS, schut_targets
from cflib.explainers import EXPLAINERS, PSCE, ROAR, BayesCF, Schut, Wachter, get_explainer
from cflib.explainers._posterior import log_mean_prob
from cflib.metrics.robustness import (
    implausibility,
    perturbed_validity,
    robustness_ratio,
    validity_under_perturbation,
)
from cflib.models import ConvAutoencoder
from cflib.models.bayesian import BayesByBackpropCNN, MCDropoutCNN, predictive_accuracy, train_bnn
from cflib.training import train_classifier

S = 8  # posterior samples in the tests


@pytest.fixture(scope="module")
def mc_model(bars):
    torch.manual_seed(0)
    x, y = bars
    m = MCDropoutCNN(n_samples=S, sample_seed=0)
    train_classifier(m, x, y, epochs=1, lr=1e-3, batch_size=32, seed=0)
    return m.eval()


@pytest.fixture(scope="module")
def bnn_model(bars):
    torch.manual_seed(0)
    x, y = bars
    m = BayesByBackpropCNN(n_samples=S, sample_seed=0)
    train_bnn(m, x, y, epochs=2, lr=1e-3, batch_size=32, seed=0)
    return m.eval()


@pytest.fixture(scope="module")
def plain_model(mc_model):
    """A plain C3LT classifier with the MC-dropout model's weights (the state dicts match)."""
    from cflib.models import C3LTClassifier

    m = C3LTClassifier()
    m.load_state_dict(mc_model.state_dict())
    return m.eval()


@pytest.fixture(params=["mc", "bnn"])
def model(request, mc_model, bnn_model):
    return mc_model if request.param == "mc" else bnn_model


@pytest.fixture(scope="module")
def queries(bars):
    x, y = bars
    return x[y == 0][:5]


# -- classifiers -----------------------------------------------------------------------------
def test_interface_shapes_and_accuracy(model, bars):
    x, y = bars
    xb = x[:6]
    with torch.no_grad():
        p = model.sample_probs(xb)
        mean, var = model.predictive(xb)
        logp = model(xb)
    assert p.shape == (S, 6, 10)
    assert torch.allclose(p.sum(-1), torch.ones(S, 6), atol=1e-5)
    assert torch.allclose(mean, p.mean(0)) and (var >= 0).all()
    assert torch.allclose(logp.exp(), mean, atol=1e-6)       # forward = log posterior mean
    assert model.sample_probs(xb, n_samples=3).shape == (3, 6, 10)
    assert predictive_accuracy(model, x, y) > 0.95
    det = model.deterministic_logits(x).argmax(1)
    assert (det == y).float().mean() > 0.95


def test_sampling_is_reproducible_and_batch_independent(model, bars):
    xb = bars[0][:5]
    with torch.no_grad():
        a = model.sample_probs(xb)
        b = model.sample_probs(xb)
        part = model.sample_probs(xb[:2])
        other = model.sample_probs(xb, seed=123)
        fresh1 = model.sample_probs(xb, seed=None)
        fresh2 = model.sample_probs(xb, seed=None)
    assert torch.equal(a, b)
    assert torch.allclose(part, a[:, :2], atol=1e-6)     # samples are shared function draws
    assert not torch.allclose(other, a)
    assert not torch.allclose(fresh1, fresh2)


def test_head_inputs_match_sample_logits(model, bars):
    xb = bars[0][:4]
    with torch.no_grad():
        h, w, b = model.head_inputs(xb)
        logits = h @ w.transpose(1, 2) + b.unsqueeze(1)
        assert torch.allclose(logits, model.sample_logits(xb), atol=1e-5)


def test_mc_dropout_loads_c3lt_weights(plain_model, bars):
    m = MCDropoutCNN.from_classifier(plain_model, n_samples=4)
    xb = bars[0][:4]
    with torch.no_grad():
        assert torch.allclose(m.deterministic_logits(xb), plain_model(xb), atol=1e-5)


def test_bnn_kl_and_spread(bnn_model):
    assert bnn_model.kl().item() > 0
    assert (bnn_model.fc1.weight_sigma > 0).all()
    assert "fc1.weight_rho" not in bnn_model.perturbable_parameters()


def test_classifier_bad_input(mc_model):
    with pytest.raises(ValueError, match="shape"):
        mc_model.sample_probs(torch.zeros(1, 28, 28))
    with pytest.raises(ValueError, match="n_samples"):
        mc_model.sample_probs(torch.zeros(1, 1, 28, 28), n_samples=0)
    with pytest.raises(ValueError, match="dropout"):
        MCDropoutCNN(p=1.0)


# -- methods --------------------------------------------------------------------------------
STRONG = {  # the bars classes differ by a whole bar: large changes needed
    "Wachter": dict(steps=25, lr=0.05),
    "BayesCF": dict(steps=25, lr=0.05),
    "ROAR": dict(max_iter=50, lr=0.05, lambda_=0.001),
    "Schut": dict(max_iters=100, pixels_per_iter=10),
    "PSCE": dict(inner_steps=20, outer_iters=2, lr=0.05, delta=0.8, epsilon=0.05),
}


CASES = [(kind, m) for kind in ("mc", "bnn") for m in STRONG]


@pytest.mark.parametrize("kind, method", CASES)
def test_method_reaches_target(kind, method, mc_model, bnn_model, queries):
    model = mc_model if kind == "mc" else bnn_model
    cls = EXPLAINERS[method]
    extra = {"autoencoder": ConvAutoencoder().eval()} if method == "PSCE" else {}
    ex = cls(model, **extra, **STRONG[method])
    assert ex.name == method
    cf = ex.explain(queries, 1, seed=0)
    assert cf.validity >= 0.75
    assert cf.method == method and cf.meta["config"]
    if method == "PSCE":  # the returned counterfactuals are delta-safe and epsilon-robust
        with torch.no_grad():
            mean, var = model.predictive(cf.x_cf)
        assert ((mean[:, 1] >= 0.8) & (var[:, 1] <= 0.05)).float().mean() >= 0.75


def test_method_reproducible(mc_model, queries):
    for cls, kw in ((BayesCF, dict(steps=5, lam_steps=1)), (Schut, dict(max_iters=10)),
                    (ROAR, dict(max_iter=5))):
        a = cls(mc_model, **kw).explain(queries[:3], 1, seed=1).x_cf
        b = cls(mc_model, **kw).explain(queries[:3], 1, seed=1).x_cf
        assert torch.equal(a, b)


def test_schut_stops_done_images_and_respects_budget(mc_model, queries):
    ex = Schut(mc_model, max_iters=3, n_changes=5)
    x_cf = ex.explain(queries[:4], 1).x_cf
    changed = (x_cf != queries[:4]).flatten(1).sum(1)
    assert (changed <= 3).all()                                  # one pixel per iteration
    steps = (x_cf - queries[:4]).abs()
    assert steps.max() <= 3 * 0.4 + 1e-5
    # a batch already in its target class is refused, not reported as valid
    with pytest.raises(ValueError, match="already assigns every query"):
        Schut(mc_model, max_iters=5, confidence=0.5).explain(queries[:2], 0)


def test_wachter_uses_deterministic_pass_bayescf_the_mean(mc_model, queries):
    w = Wachter(mc_model, steps=2, lam_steps=1)
    b = BayesCF(mc_model, steps=2, lam_steps=1)
    z = queries[:2]
    assert torch.allclose(w._log_probs(z), torch.log_softmax(mc_model.deterministic_logits(z), 1))
    assert torch.allclose(b._log_probs(z), log_mean_prob(mc_model, z))


def test_roar_on_plain_classifier(plain_model, queries):
    cf = ROAR(plain_model, max_iter=40, lr=0.05, lambda_=0.001).explain(queries[:4], 1)
    assert cf.validity >= 0.75


def test_methods_bad_input(mc_model):
    with pytest.raises(ValueError, match="delta"):
        PSCE(mc_model, delta=1.5)
    with pytest.raises(ValueError, match="loss"):
        Wachter(mc_model, loss="hinge")
    with pytest.raises(ValueError, match="target"):
        Schut(mc_model).explain(torch.zeros(2, 1, 28, 28), target=11)
    with pytest.raises(ValueError, match="unknown method"):
        get_explainer("DiCE")
    with pytest.raises(TypeError, match="last linear layer"):
        ROAR(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10)),
             max_iter=1).explain(torch.zeros(1, 1, 28, 28), 1)


def test_catalog_sizes(mc_model, monkeypatch):
    import cflib.bench.zoo as zoo

    monkeypatch.setattr(zoo, "autoencoder", lambda *a, **k: (ConvAutoencoder().eval(), {}))
    smoke = get_profile("smoke")
    exs = {m: catalog.build(m, mc_model, dataset="mnist", profile="smoke")
           for m in BAYES_METHODS}
    assert exs["Schut"].config.max_iters == smoke.bayes.schut_max_iters
    assert exs["Wachter"].config.steps == smoke.bayes.opt_steps
    assert exs["ROAR"].config.max_iter == 5 * smoke.bayes.opt_steps
    assert exs["PSCE"].autoencoder is not None
    assert all(ex.name == m for m, ex in exs.items())


def test_schut_targets_map():
    labels = torch.arange(10).repeat(5)
    t = schut_targets(labels, seed=3)
    assert torch.equal(t, schut_targets(labels, seed=3))
    assert all(int(b) in SCHUT_TARGETS[int(a)] for a, b in zip(labels, t))
    with pytest.raises(ValueError, match="0..9"):
        schut_targets(torch.tensor([10]))


# -- metrics ---------------------------------------------------------------------------------
def test_implausibility_two_points():
    x_train = torch.stack([torch.zeros(1, 2, 2), torch.ones(1, 2, 2), 5 * torch.ones(1, 2, 2)])
    y_train = torch.tensor([1, 1, 0])
    x_cf = torch.zeros(1, 1, 2, 2)
    assert implausibility(x_cf, 1, x_train, y_train, frac=0.5).item() == pytest.approx(0.0)
    assert implausibility(x_cf, 1, x_train, y_train, frac=1.0).item() == pytest.approx(1.0)
    assert implausibility(x_cf, 0, x_train, y_train).item() == pytest.approx(10.0)
    with pytest.raises(ValueError, match="frac"):
        implausibility(x_cf, 1, x_train, y_train, frac=0)
    with pytest.raises(ValueError, match="shape"):
        implausibility(torch.zeros(1, 1, 3, 3), 1, x_train, y_train)


def test_robustness_ratio_scale_zero_and_weights_restored(model, bars):
    x, y = bars
    xb = x[y == 1][:6]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert robustness_ratio(model, xb, 1, scale=0.0, n_perturbations=3) == 1.0
    r_small = robustness_ratio(model, xb, 1, scale=1e-3, n_perturbations=3, seed=0)
    assert r_small == 1.0                     # noise of 1e-3 flips no decision of the bars
    r_big = robustness_ratio(model, xb, 1, scale=1.0, n_perturbations=4, seed=0)
    assert r_big < 1.0
    assert r_big == robustness_ratio(model, xb, 1, scale=1.0, n_perturbations=4, seed=0)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    pv = perturbed_validity(model, xb, 1, 1e-3, n_perturbations=5, chunk=2)
    assert pv.shape == (5, 6) and pv.dtype == torch.bool
    assert math.isnan(robustness_ratio(model, xb, 0, scale=1e-3, n_perturbations=2))


def test_validity_under_perturbation_curve(mc_model, bars):
    x, y = bars
    xb = x[:10]
    curve = validity_under_perturbation(mc_model, xb, y[:10], [0, 1e-3, 1.0], n_perturbations=3)
    assert list(curve) == [0.0, 1e-3, 1.0]
    assert curve[0.0] == pytest.approx((mc_model(xb).argmax(1) == y[:10]).float().mean().item())
    with pytest.raises(ValueError, match="scale"):
        perturbed_validity(mc_model, xb, 1, -1.0)


def test_robustness_on_plain_classifier(plain_model, bars):
    x, y = bars
    assert robustness_ratio(plain_model, x[y == 1][:4], 1, scale=0.0, n_perturbations=2) == 1.0


# -- cached training and the runner ----------------------------------------------------------
def test_zoo_bayes_classifiers_cache(bars, tmp_cache, monkeypatch):
    import cflib.bench.zoo as zoo
    import cflib.models.bayesian as mb

    monkeypatch.setattr(zoo, "load_split", lambda dataset, split="test": bars)
    calls = {"mc": 0, "bnn": 0}
    real_tc, real_bnn = zoo.train_classifier, mb.train_bnn

    def tc(*a, **k):
        calls["mc"] += 1
        return real_tc(*a, **k)

    def tb(*a, **k):
        calls["bnn"] += 1
        return real_bnn(*a, **k)

    monkeypatch.setattr(zoo, "train_classifier", tc)
    monkeypatch.setattr(zoo, "train_bnn", tb)
    prof = get_profile("smoke", bayes={"epochs": 1}, nets={"train_subset": None})
    for fn, key in ((zoo.mc_dropout_classifier, "mc"), (zoo.bnn_classifier, "bnn")):
        m1, info1 = fn("mnist", prof, seed=0)
        m2, info2 = fn("mnist", prof, seed=0)
        assert calls[key] == 1 and info1 == info2
        with torch.no_grad():                       # the recorded accuracy is the model's
            acc = (m1(bars[0]).argmax(1) == bars[1]).float().mean().item()
        assert info1["test_accuracy"] == pytest.approx(acc) and acc > 0.9
        xb = bars[0][:3]
        with torch.no_grad():
            assert torch.allclose(m1(xb), m2(xb))
    assert len(list(tmp_cache.glob("*.pt"))) == 2


def test_runner_rejects_bad_model():
    from cflib.bench.tables.bayes import run_bayesian

    with pytest.raises(ValueError, match="model"):
        run_bayesian("mnist", model="ensemble", profile="smoke")
    with pytest.raises(ValueError, match="method"):
        run_bayesian("mnist", model="bnn", profile="smoke", methods=["DiCE"])


def test_im1_by_class_matches_im1():
    from cflib.metrics import im1
    from cflib.metrics.plausibility import im1_by_class

    torch.manual_seed(0)
    aes = {c: ConvAutoencoder().eval() for c in range(3)}
    x = torch.rand(5, 1, 28, 28) * 2 - 1
    t = torch.tensor([1, 2, 1, 0, 2])
    q = torch.tensor([0, 0, 2, 1, 0])
    got = im1_by_class(x, t, q, aes)
    for i in range(5):
        ref = im1(x[i:i + 1], aes[int(t[i])], aes[int(q[i])])
        assert got[i].item() == pytest.approx(ref.item(), rel=1e-5)
    with pytest.raises(ValueError, match="no class autoencoder"):
        im1_by_class(x, 7, 0, aes)


def test_bayesian_table_names_an_unknown_model():
    from cflib.bench.tables.bayes import BAYES

    with pytest.raises(ValueError, match="unknown model.*'ensemble'"):
        BAYES.args("smoke", models=["mc_dropout", "ensemble"])


# -- per-sample stopping ------------------------------------------------------------------------
COMPACTING = {
    "Wachter": dict(steps=15, lam_steps=4, lr=0.05),
    "BayesCF": dict(steps=15, lam_steps=4, lr=0.05, n_samples=S),
    "ROAR": dict(max_iter=40, lr=0.05, n_samples=S),
    "Schut": dict(max_iters=60, n_samples=S, pixels_per_iter=4),
    "PSCE": dict(inner_steps=10, outer_iters=3, lr=0.05, delta=0.8, epsilon=0.05),
}


@pytest.mark.parametrize("method", list(COMPACTING))
def test_dropping_finished_queries_changes_nothing_but_the_passes(method, mc_model, queries):
    """Per-sample stopping: the same counterfactuals with finished queries dropped from
    the batch (compact) and kept in it, with fewer passes through the model."""
    cls = EXPLAINERS[method]
    extra = {"autoencoder": ConvAutoencoder().eval()} if method == "PSCE" else {}
    out = {}
    for compact in (True, False):
        torch.manual_seed(0)
        ex = cls(mc_model, **extra, **COMPACTING[method], compact=compact)
        out[compact] = ex.explain(queries, 1, seed=0)
    a, b = out[True], out[False]
    assert torch.equal(a.success, b.success)
    assert torch.allclose(a.x_cf, b.x_cf, atol=1e-5)
    assert 0 < a.meta["model_passes"] <= b.meta["model_passes"]


def test_psce_takes_a_target_class_autoencoder_per_query(mc_model, queries):
    """PSCE's manifold term with ``{class: autoencoder}``: each query uses its target's
    autoencoder (here two distinct ones give another search than either alone); CEM,
    whose loss takes one all-class autoencoder, refuses the mapping before any compute."""
    from cflib.explainers import CEM

    x = queries
    t = torch.tensor([1, 2, 1, 2, 1])[:len(x)]
    torch.manual_seed(0)
    a, b = ConvAutoencoder().eval(), ConvAutoencoder().eval()
    per_class = {c: (a if c % 2 == 0 else b) for c in range(10)}
    cfg = dict(outer_iters=2, inner_steps=5)
    one = PSCE(mc_model, autoencoder=a, **cfg).explain(x, t, seed=0)
    mixed = PSCE(mc_model, autoencoder=per_class, **cfg).explain(x, t, seed=0)
    assert not torch.equal(one.x_cf, mixed.x_cf)        # the odd targets used b
    assert torch.equal(one.x_cf[t % 2 == 0], mixed.x_cf[t % 2 == 0])   # the even ones a
    with pytest.raises(ValueError, match="one all-class autoencoder"):
        CEM(mc_model, autoencoder=per_class)


def test_reference_rows_and_edit_size_metrics():
    """L1 counts moved ink on the [0, 1] scale, L0 the pixels moved by more than 0.1."""
    from cflib.metrics import l0_count, l1_distance

    x = -torch.ones(2, 1, 4, 4)
    y = x.clone()
    y[0, 0, 0, 0] = 1.0          # one pixel from black to white: 1 on the [0, 1] scale
    y[1, 0, 0, :2] = -0.9        # two pixels by 0.05 on [0, 1]: below the L0 threshold
    assert l1_distance(x, y).tolist() == pytest.approx([1.0, 0.1])
    assert l0_count(x, y).tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="threshold"):
        l0_count(x, y, threshold=-1)
