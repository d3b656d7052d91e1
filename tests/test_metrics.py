"""Every metric on tiny inputs whose values are worked out by hand."""
import math

import pytest
import torch
from torch import nn

from cflib.metrics import aupc, fid_kid, im1, im2, proximity, validity
from cflib.metrics.aupc import trapezoid_area
from cflib.metrics.distribution import FrozenFeatures, ImageFeatures


class Scale(nn.Module):
    """A stand-in autoencoder: returns ``factor * x`` (0 gives the zero image)."""

    def __init__(self, factor):
        super().__init__()
        self.factor = nn.Parameter(torch.tensor(float(factor)), requires_grad=False)

    def forward(self, x):
        return self.factor * x


def test_im1_known_value():
    x = torch.ones(1, 1, 2, 2)
    # target AE error ||x - 0||^2 = 4, query AE error ||x - x/2||^2 = 1  ->  IM1 = 4
    assert im1(x, Scale(0), Scale(0.5), eps=0).item() == pytest.approx(4.0)
    # a perfect target AE gives 0
    assert im1(x, Scale(1), Scale(0.5)).item() == pytest.approx(0.0)


def test_im1_per_sample():
    x = torch.stack([torch.ones(1, 2, 2), 2 * torch.ones(1, 2, 2)])
    out = im1(x, Scale(0), Scale(0.5), eps=0)
    assert out.shape == (2,)
    assert torch.allclose(out, torch.tensor([4.0, 4.0]))


def test_im2_known_value_on_the_unit_scale():
    x = torch.ones(1, 1, 2, 2)              # white on [-1, 1]: u = 1 on [0, 1]
    # on [0, 1]: ||(AE_t(x) - AE(x)) / 2||^2 = ||(0 - x/2) / 2||^2 = 4 / 16 ; ||u||_1 = 4
    assert im2(x, Scale(0), Scale(0.5), eps=0).item() == pytest.approx(1 / 16)
    # black (-1 on [-1, 1]) is 0 on [0, 1]: a half-grey image has ||u||_1 = 2
    half = torch.tensor([[[[1.0, 1.0], [-1.0, -1.0]]]])
    assert im2(half, Scale(0), Scale(0.5), eps=0).item() == pytest.approx(1 / 8)


def test_proximity_known_value():
    x = torch.zeros(2, 1, 2, 2)
    x_cf = x.clone()
    x_cf[0, 0, 0, 0] = 1.0
    x_cf[1] = -0.5
    assert torch.allclose(proximity(x, x_cf), torch.tensor([0.25, 0.5]))
    with pytest.raises(ValueError, match="shape"):
        proximity(x, x_cf[:1])


def test_validity_from_labels_and_scores():
    assert validity(torch.tensor([1, 2, 1]), torch.tensor([1, 1, 1])).tolist() == [1.0, 0.0, 1.0]
    scores = torch.tensor([[0.1, 0.9], [0.8, 0.2]])
    assert validity(scores, torch.tensor([1, 1])).tolist() == [1.0, 0.0]


def test_trapezoid_area():
    assert trapezoid_area(torch.tensor([[0.0, 1.0]])).item() == pytest.approx(0.5)
    assert trapezoid_area(torch.tensor([[1.0, 1.0, 1.0]])).item() == pytest.approx(1.0)
    assert trapezoid_area(torch.tensor([[0.0, 1.0, 0.0]])).item() == pytest.approx(0.5)


class FractionModel(nn.Module):
    """P(class 1) = fraction of pixels equal to +1; P(class 0) = the rest."""

    def forward(self, x):
        f = ((x.flatten(1) + 1) / 2).mean(1).clamp(1e-6, 1 - 1e-6)
        return torch.stack([torch.log(1 - f), torch.log(f)], 1)


def test_aupc_linear_path_known_values():
    x = -torch.ones(3, 1, 28, 28)
    x_cf = torch.ones(3, 1, 28, 28)
    q, t = torch.zeros(3, dtype=torch.long), torch.ones(3, dtype=torch.long)
    r = aupc(FractionModel(), x, x_cf, q, t, steps=50)
    # p_target rises linearly from 0 to 1 along the path: area 1/2 each, COUT 0
    assert r.target_curve.shape == (3, 51)
    assert r.target_curve[:, 0].max() < 1e-4 and r.target_curve[:, -1].min() > 1 - 1e-4
    assert torch.allclose(r.aupc_target, torch.full((3,), 0.5), atol=2e-3)
    assert torch.allclose(r.aupc_query, torch.full((3,), 0.5), atol=2e-3)
    assert torch.allclose(r.cout, torch.zeros(3), atol=4e-3)


def test_aupc_pastes_largest_changes_first():
    x = -torch.ones(1, 1, 28, 28)
    x_cf = x.clone()
    x_cf.view(-1)[:392] = 1.0        # half the pixels change
    q, t = torch.zeros(1, dtype=torch.long), torch.ones(1, dtype=torch.long)
    r = aupc(FractionModel(), x, x_cf, q, t, steps=50)
    # every changed pixel is pasted within the first half of the path: the target
    # curve reaches its final value 0.5 at the midpoint and stays there
    assert r.target_curve[0, 25].item() == pytest.approx(0.5, abs=1e-3)
    assert r.target_curve[0, -1].item() == pytest.approx(0.5, abs=1e-3)
    # area = triangle (0.5 * 0.5 * 0.5) + rectangle (0.5 * 0.5) = 0.375
    assert r.aupc_target.item() == pytest.approx(0.375, abs=2e-3)


def test_aupc_no_change_is_constant():
    x = torch.rand(2, 1, 28, 28) * 2 - 1
    q, t = torch.zeros(2, dtype=torch.long), torch.ones(2, dtype=torch.long)
    r = aupc(FractionModel(), x, x.clone(), q, t, steps=10)
    p1 = torch.softmax(FractionModel()(x), 1)[:, 1]
    assert torch.allclose(r.aupc_target, p1, atol=1e-5)


class _CountingNet(nn.Module):
    """A small CNN with max-pooling (counts the images it sees)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(4, 8, 3), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Flatten(), nn.Linear(8 * 5 * 5, 3))
        self.num_features = 3
        self.seen = 0

    def forward(self, x):
        self.seen += len(x)
        return self.body(x)


def test_aupc_is_the_same_bits_in_every_chunk_and_refuses_no_chunk():
    """A chunk of queries per forward pass is a speed setting: the curves are the same bits
    from one query at a time to all at once (the C3LT table's default runs 4 on the CPU,
    with its max-pooling as maxima of strided views)."""
    net = _CountingNet().eval()
    g = torch.Generator().manual_seed(1)
    x, x_cf = torch.rand(9, 1, 28, 28, generator=g), torch.rand(9, 1, 28, 28, generator=g)
    q, t = torch.zeros(9, dtype=torch.long), torch.ones(9, dtype=torch.long)
    ref = aupc(net, x, x_cf, q, t, steps=10, chunk=9)
    for chunk in (None, 2, 4, 5):
        r = aupc(net, x, x_cf, q, t, steps=10, chunk=chunk)
        assert torch.equal(r.target_curve, ref.target_curve)
        assert torch.equal(r.query_curve, ref.query_curve)
    assert "forward" not in vars(net.body[2])            # the pooling scope is gone
    net.seen = 0
    with pytest.raises(ValueError, match="chunk"):
        aupc(net, x, x_cf, q, t, chunk=0)
    assert net.seen == 0                                   # refused before any compute


def test_image_features_serve_fid_kid_as_their_images_do():
    """Features computed once (a table's reference set) give the same FID and KID bits as
    the images; one forward pass per image for both distances; features of another
    network are refused before any compute."""
    net = _CountingNet().eval()
    g = torch.Generator().manual_seed(2)
    real, fake = torch.rand(30, 1, 28, 28, generator=g), torch.rand(12, 1, 28, 28, generator=g)
    direct = fid_kid(fake, real, net, kid_subset_size=10, batch_size=8)
    assert net.seen == 42                                  # once each, not once per distance
    feats = ImageFeatures.of(real, net, batch_size=8)
    assert len(feats) == 30 and [len(b) for b in feats.batches] == [8, 8, 8, 6]
    assert feats.images is real
    net.seen = 0
    assert fid_kid(fake, feats, net, kid_subset_size=10, batch_size=8) == direct
    assert net.seen == 12                                  # only the fake side ran
    other = _CountingNet().eval()
    net.seen = other.seen = 0
    with pytest.raises(ValueError, match="another feature network"):
        fid_kid(fake, feats, other, kid_subset_size=10)
    assert net.seen == other.seen == 0
    with pytest.raises(ValueError, match="batch_size"):
        ImageFeatures.of(real, net, batch_size=0)


def identity_features(d):
    return FrozenFeatures(nn.Flatten(), num_features=d)


def test_fid_of_a_shifted_copy_is_the_squared_shift():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(200, 1, 1, 4, generator=g)
    shift = torch.tensor([1.0, -2.0, 0.0, 0.5]).view(1, 1, 1, 4)
    fid, kid = fid_kid(a + shift, a, identity_features(4), kid_subset_size=50)
    # equal covariances: FID = ||mu_1 - mu_2||^2 = 1 + 4 + 0 + 0.25
    assert fid == pytest.approx(5.25, rel=1e-3)
    fid0, kid0 = fid_kid(a.clone(), a, identity_features(4), kid_subset_size=50)
    assert abs(fid0) < 1e-3
    assert kid > 10 * abs(kid0)


def test_fid_needs_two_images():
    with pytest.raises(ValueError, match="at least 2"):
        fid_kid(torch.zeros(1, 1, 1, 4), torch.zeros(5, 1, 1, 4), identity_features(4))


def test_fid_kid_leaves_the_callers_feature_network_as_it_was():
    """The feature network runs in evaluation mode (BatchNorm statistics fixed) and the
    caller's training mode and gradient flags come back unchanged."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.BatchNorm1d(4))
    net.train()
    net[1].weight.requires_grad_(False)
    stats = net[1].running_mean.clone()
    a = torch.randn(50, 1, 1, 4)
    f = FrozenFeatures(net, num_features=4)
    f.train()
    fid_kid(a + 1, a, f, kid_subset_size=20)
    assert net.training and net[1].training
    assert not net[1].weight.requires_grad and net[1].bias.requires_grad
    assert torch.equal(net[1].running_mean, stats)


def test_robustness_leaves_each_modules_mode_as_it_was():
    from cflib.metrics.robustness import perturbed_validity

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 3))
    model.train()
    model[2].eval()                      # mixed modes, as a caller may leave them
    perturbed_validity(model, torch.randn(5, 1, 1, 4), 1, 1e-3, n_perturbations=2)
    assert [m.training for m in model.modules()] == [True, True, True, False, True]
    assert all(p.requires_grad for p in model.parameters())


# -- hand values at the edges (what the mutation check, tests/mutation/run.py, asked for) ------
def test_validity_never_counts_a_query_already_in_its_target():
    from cflib.metrics import validity

    pred_cf, target = torch.tensor([1, 1, 0]), torch.tensor([1, 1, 1])
    pred = torch.tensor([0, 1, 0])            # the second query was already class 1
    assert validity(pred_cf, target, pred).tolist() == [1.0, 0.0, 0.0]
    scores = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]])
    assert validity(pred_cf, target, scores).tolist() == [1.0, 0.0, 0.0]


def test_l0_counts_a_change_above_the_threshold_only():
    from cflib.metrics import l0_count, l1_distance

    x = -torch.ones(1, 1, 2, 2)
    y = x.clone()
    y[0, 0, 0, 0] = -0.5                      # 0.25 on the [0, 1] scale, exactly
    y[0, 0, 1, 1] = 0.0                       # 0.5
    assert l0_count(x, y, threshold=0.25).tolist() == [1.0]     # above, not at
    assert l0_count(x, y, threshold=0.0).tolist() == [2.0]      # any change counts
    assert l1_distance(x, y).tolist() == [0.75]


def test_cout_is_target_minus_query():
    x = -torch.ones(1, 1, 28, 28)
    x_cf = x.clone()
    x_cf.view(-1)[:392] = 1.0
    q, t = torch.zeros(1, dtype=torch.long), torch.ones(1, dtype=torch.long)
    r = aupc(FractionModel(), x, x_cf, q, t, steps=50)
    # the query's curve is 1 - the target's: area 0.625, COUT 0.375 - 0.625
    assert r.aupc_query.item() == pytest.approx(0.625, abs=2e-3)
    assert r.cout.item() == pytest.approx(-0.25, abs=4e-3)


def test_wilson_interval_of_one_event_in_ten_by_hand():
    from cflib.metrics.recourse import wilson

    lo, hi = wilson(1, 10)                    # (p + z^2/2n -+ z sqrt(...)) / (1 + z^2/n)
    assert lo == pytest.approx(0.01787, abs=1e-4) and hi == pytest.approx(0.40415, abs=1e-4)
    lo, hi = wilson(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.72246, abs=1e-4)


def test_the_bootstrap_interval_takes_both_tails():
    """400 alternating 0/1 values: the mean's standard error is 0.025, and a 95 % percentile
    interval reaches 1.96 of them on each side (not 1.645: the 90 % one)."""
    from cflib.metrics.recourse import bootstrap_ci

    v = torch.tensor([0.0, 1.0] * 200)
    ci = bootstrap_ci(v, n_boot=4000, seed=0)
    assert ci.estimate == 0.5
    assert ci.estimate - ci.low == pytest.approx(1.96 * 0.025, abs=0.004)
    assert ci.high - ci.estimate == pytest.approx(1.96 * 0.025, abs=0.004)


def test_implausibility_takes_the_ceiling_of_the_fraction():
    from cflib.metrics.robustness import implausibility

    x_train = torch.stack([c * torch.ones(1, 2, 2) for c in (0.0, 1.0, 2.0)])  # L2: 0, 2, 4
    y_train = torch.ones(3, dtype=torch.long)
    x_cf = torch.zeros(1, 1, 2, 2)
    # ceil(0.5 * 3) = 2 nearest: (0 + 2) / 2
    assert implausibility(x_cf, 1, x_train, y_train, frac=0.5).item() == pytest.approx(1.0)


class TwoWay(nn.Module):
    """Class 1 when the first pixel is above 0, with a margin of 10 per unit."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        with torch.no_grad():
            self.fc.weight.zero_()
            self.fc.bias.zero_()
            self.fc.weight[1, 0] = 10.0

    def forward(self, x):
        return self.fc(x.flatten(1))


def test_the_robustness_ratio_counts_only_the_counterfactuals_valid_to_begin_with():
    from cflib.metrics.robustness import robustness_ratio

    x_cf = torch.zeros(2, 1, 2, 2)
    x_cf[0, 0, 0, 0] = 1.0                    # valid (class 1), by a margin of 10
    x_cf[1, 0, 0, 0] = -1.0                   # not valid
    assert robustness_ratio(TwoWay(), x_cf, 1, scale=1e-4, n_perturbations=3) == 1.0
    assert math.isnan(robustness_ratio(TwoWay(), x_cf[1:], 1, scale=1e-4, n_perturbations=3))


def test_metric_specs_rank_in_their_own_direction():
    from cflib.metrics import get_spec

    prox, val, crg = get_spec("Proximity"), get_spec("Validity"), get_spec("CRG")
    assert prox.better(0.1, 0.2) and not prox.better(0.2, 0.1)
    assert val.better(0.9, 0.5) and not val.better(0.5, 0.9)
    assert crg.better(-0.1, 0.2) and not crg.better(0.3, -0.2) and crg.key(-0.3) == 0.3
    assert [s.direction for s in (prox, val, crg)] == ["lower", "higher", "zero"]
    assert get_spec("IM2").title == "IM2 (x10)" and get_spec("KID").title == "KID (x1e3)"
    assert get_spec("FID").title == "FID"


# -- the strict reading of transfer and the bootstrap, as functions (issue 62) ----------------
class _Fixed(nn.Module):
    """A judge that answers ``labels`` whatever it is shown (in order of the rows)."""

    def __init__(self, labels):
        super().__init__()
        self.labels = torch.tensor(labels)
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return nn.functional.one_hot(self.labels[:len(x)], 10).float() + 0 * self.w


def _judged_batch(n=4, already=()):
    from types import SimpleNamespace

    done = torch.zeros(n, dtype=torch.bool)
    done[list(already)] = True
    return SimpleNamespace(x_cf=torch.zeros(n, 1, 28, 28), target=torch.full((n,), 3),
                           meta={"already_target": done})


def test_all_judges_validity_is_what_every_judge_grants_and_no_more():
    from cflib.metrics.basic import all_judges_validity, judged_validity

    cf = _judged_batch()
    yes, a, b = _Fixed([3, 3, 3, 3]), _Fixed([3, 3, 3, 0]), _Fixed([0, 3, 3, 3])
    assert judged_validity(a, cf) == 0.75 and judged_validity(b, cf) == 0.75
    # each judge alone grants 3 of 4; together only the two rows both grant
    assert all_judges_validity({"A": a, "B": b}, cf) == 0.5
    # one judge refusing everything refuses the strict reading, whatever the others say
    assert all_judges_validity({"yes": yes, "no": _Fixed([0, 0, 0, 0])}, cf) == 0.0
    assert all_judges_validity({"yes": yes}, cf) == 1.0
    # a query already in its target is never a success, even where every judge agrees
    assert all_judges_validity({"yes": yes}, _judged_batch(already=[1])) == 0.75


def test_the_bootstrap_interval_covers_a_known_mean_at_its_level():
    """On draws of known mean and spread, the 95 % interval holds the true mean in about
    95 % of the trials (a too-narrow or one-sided interval fails), and its width is
    close to 2 x 1.96 sd / sqrt(n)."""
    import numpy as np
    import pandas as pd

    from cflib.bench.intervals import bootstrap

    rng = np.random.default_rng(0)
    n, sd, trials, hits, widths = 50, 0.2, 200, 0, []
    for t in range(trials):
        v = rng.normal(0.5, sd, size=n)
        df = pd.DataFrame({"pair": "4->9", "method": "A", "metric": "IM1", "query": range(n),
                           "value": v})
        iv = bootstrap(df, n_boot=400, seed=t).iloc[0]
        hits += iv["lo"] <= 0.5 <= iv["hi"]
        widths.append(iv["hi"] - iv["lo"])
    assert 0.88 <= hits / trials <= 0.99
    assert np.median(widths) == pytest.approx(2 * 1.96 * sd / np.sqrt(n), rel=0.15)
