import pytest
import torch

from cflib.explainers import AdvAttack, OriginalData
from cflib.explainers.base import check_images


def test_tiny_classifier_separates_bars(tiny_classifier, bars):
    x, y = bars
    acc = (tiny_classifier(x).argmax(1) == y).float().mean().item()
    assert acc > 0.95


def test_adv_attack_reaches_target_in_range(tiny_classifier, bars):
    x, y = bars
    xq = x[y == 0][:16]
    cf = AdvAttack(tiny_classifier, eps=1.0, alpha=0.05, steps=60).explain(xq, target=1, seed=0)
    assert (cf.x_cf - xq).abs().max() <= 1.0 + 1e-5          # inside the L-inf ball
    assert cf.validity >= 0.9
    assert cf.seconds > 0 and cf.meta["config"]["steps"] == 60


def test_adv_attack_reproducible(tiny_classifier, bars):
    x, y = bars
    xq = x[y == 0][:8]
    a = AdvAttack(tiny_classifier, steps=5).explain(xq, 1, seed=3).x_cf
    b = AdvAttack(tiny_classifier, steps=5).explain(xq, 1, seed=3).x_cf
    assert torch.equal(a, b)


def test_original_data_returns_real_target_images(tiny_classifier, bars):
    x, y = bars
    xq = x[y == 0][:10]
    ex = OriginalData(tiny_classifier).fit(x, y)
    cf = ex.explain(xq, 1, seed=0)
    pool = x[y == 1]
    for img in cf.x_cf:
        assert (pool - img).abs().flatten(1).max(1).values.min() == 0
    assert cf.validity == 1.0


def test_original_data_needs_fit(tiny_classifier, bars):
    with pytest.raises(RuntimeError, match="fit"):
        OriginalData(tiny_classifier).explain(bars[0][:2], 1)


@pytest.mark.parametrize("bad, msg", [
    (torch.zeros(1, 28, 28), "shape"),
    (torch.zeros(2, 1, 28, 28, dtype=torch.uint8), "float"),
    (torch.full((2, 1, 28, 28), 255.0), r"\[-1, 1\]"),
    (torch.zeros(0, 1, 28, 28), "empty"),
])
def test_bad_images_clear_error(bad, msg):
    with pytest.raises(ValueError, match=msg):
        check_images(bad)


def test_bad_input_leaves_query_untouched(tiny_classifier, bars):
    xq = bars[0][:4].clone()
    before = xq.clone()
    with pytest.raises(ValueError, match="target"):
        AdvAttack(tiny_classifier, steps=2).explain(xq, target=12)
    assert torch.equal(xq, before)


def test_config_and_kwargs_exclusive(tiny_classifier):
    with pytest.raises(TypeError):
        AdvAttack(tiny_classifier, AdvAttack.Config(), steps=3)


def test_a_batch_split_into_parts_cuts_every_row_and_recounts_what_it_must():
    """Counterfactuals.split: every tensor of the batch's length is cut (meta's too), the
    time is shared by rows, the count of queries already in their target is recounted
    per part, a count the batch holds only as a whole is not passed off as a part's, and
    sizes that do not cover the batch are refused."""
    import pytest
    import torch

    from cflib.explainers import Counterfactuals

    n = 5
    already = torch.tensor([True, False, False, True, True])
    cf = Counterfactuals(x=torch.arange(n).float().view(n, 1, 1, 1), x_cf=torch.zeros(n, 1, 1, 1),
                         target=torch.arange(n), pred=torch.zeros(n, dtype=torch.long),
                         pred_cf=torch.arange(n), success=~already, seconds=10.0, method="m",
                         meta={"already_target": already, "n_already_target": 3,
                               "n_outside_range": 0, "model_passes": 7.0,
                               "config": {"k": torch.tensor([1.0, 2.0])}})
    first, second = cf.split([2, 3])
    assert first.x.flatten().tolist() == [0, 1] and second.x.flatten().tolist() == [2, 3, 4]
    assert first.meta["already_target"].tolist() == [True, False]
    assert (first.meta["n_already_target"], second.meta["n_already_target"]) == (1, 2)
    assert first.seconds == 4.0 and second.seconds == 6.0
    assert first.seconds_per_cf == second.seconds_per_cf == cf.seconds_per_cf
    assert first.meta["model_passes"] == 7.0 and first.meta["n_outside_range"] == 0
    assert first.meta["config"]["k"].tolist() == [1.0, 2.0]     # not of the batch's length
    assert cf.meta["n_already_target"] == 3                       # the batch is untouched
    cf.meta["n_outside_range"] = 2
    assert [p.meta["n_outside_range"] for p in cf.split([4, 1])] == [None, None]
    assert [len(p) for p in cf.split([0, 5])] == [0, 5]
    for bad in ([2, 2], [6, -1], [2, 4]):
        with pytest.raises(ValueError, match="sum to the batch"):
            cf.split(bad)
