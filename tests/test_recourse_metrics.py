"""VD, CRG, DirSim, transfer margin, overhead and the bootstraps on hand-made tensors."""
import logging
import math

import pytest
import torch

from cflib.metrics.recourse import (
    abs_nanmean,
    bootstrap_ci,
    crg,
    direction_similarity,
    dirsim,
    overhead,
    paired_bootstrap,
    rate,
    relative_cost_gap,
    target_margin,
    transfer_margin,
    vd,
    vd_events,
    wilson,
)

T, F = True, False


def test_vd_hand_example():
    fp = torch.tensor([T, T, T, T, F])
    q_valid = torch.tensor([T, F, T, F, F])     # the failed FP query does not count
    assert vd(fp, q_valid) == pytest.approx(0.5)
    ev = vd_events(fp, q_valid)
    assert ev[:4].tolist() == [0.0, 1.0, 0.0, 1.0] and math.isnan(ev[4])


def test_a_model_against_itself():
    torch.manual_seed(0)
    s = torch.tensor([T, F, T, T])
    cost = torch.rand(4) + 0.5
    delta = torch.randn(4, 32)
    assert vd(s, s) == 0.0                      # f accepts its own recourse
    assert crg(s, s, cost, cost) == 0.0
    assert dirsim(s, s, delta, delta) == pytest.approx(1.0)


def test_vd_is_nan_with_a_warning_when_no_fp_recourse_exists(caplog):
    with caplog.at_level(logging.WARNING, logger="cflib"):
        out = vd(torch.zeros(3, dtype=torch.bool), torch.zeros(3, dtype=torch.bool))
    assert math.isnan(out) and "F is empty" in caplog.text


def test_crg_uses_only_both_feasible_queries():
    fp = torch.tensor([T, T, F, T])
    q = torch.tensor([T, F, T, T])
    c_f = torch.tensor([1.0, 1.0, 1.0, 2.0])
    c_q = torch.tensor([1.5, 100.0, 100.0, 1.0])
    # Both = {0, 3}: (1.5 - 1) / 1 = 0.5 and (1 - 2) / 2 = -0.5
    assert crg(fp, q, c_f, c_q) == pytest.approx(0.0)
    gaps = relative_cost_gap(fp, q, c_f, c_q)
    assert gaps[0] == pytest.approx(0.5) and gaps[3] == pytest.approx(-0.5)
    assert math.isnan(gaps[1]) and math.isnan(gaps[2])
    assert math.isnan(crg(fp, ~fp, c_f, c_q))            # Both empty


def test_dirsim_parallel_orthogonal_opposite_and_zero():
    a = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    b = torch.tensor([[2.0, 0.0], [0.0, 3.0], [-1.0, 0.0], [0.0, 0.0]])
    s = torch.ones(4, dtype=torch.bool)
    assert direction_similarity(s, s, a, b).tolist() == pytest.approx([1.0, 0.0, -1.0, 0.0])
    assert dirsim(s[:1], s[:1], a[:1], b[:1]) == pytest.approx(1.0)


def test_transfer_margin_is_negative_exactly_for_vd_events():
    logits = torch.tensor([[3.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.0, 5.0]])
    assert target_margin(logits, 0).tolist() == pytest.approx([2.0, -1.0, -5.0])
    fp = torch.tensor([T, T, F])
    assert transfer_margin(fp, logits, 0) == pytest.approx(0.5)
    assert ((target_margin(logits, 0) < 0) == (logits.argmax(1) != 0)).all()


def test_mismatched_lengths_and_non_boolean_masks_are_value_errors():
    s3, s4 = torch.ones(3, dtype=torch.bool), torch.ones(4, dtype=torch.bool)
    with pytest.raises(ValueError, match="one entry per query"):
        vd(s3, s4)
    with pytest.raises(ValueError, match="one entry per query"):
        crg(s4, s4, torch.ones(4), torch.ones(3))
    with pytest.raises(ValueError, match="one entry per query"):
        dirsim(s4, s4, torch.ones(4, 2), torch.ones(3, 2))
    with pytest.raises(ValueError, match="boolean mask"):
        vd(torch.ones(3), s3)
    with pytest.raises(ValueError, match="boolean mask"):
        crg(s3, torch.tensor([1, 0, 1]), torch.ones(3), torch.ones(3))
    with pytest.raises(ValueError, match="one entry per query"):
        paired_bootstrap(torch.ones(3), torch.ones(4))


def test_bootstrap_is_seeded_reproducible_and_contains_the_estimate():
    g = torch.Generator().manual_seed(0)
    v = (torch.rand(200, generator=g) < 0.3).float()
    v[::7] = float("nan")                                     # queries that do not count
    a, b = bootstrap_ci(v, seed=1), bootstrap_ci(v, seed=1)
    assert a == b
    assert a.low <= a.estimate <= a.high and a.half_width > 0
    assert a.estimate == pytest.approx(float(v[~v.isnan()].mean()))
    assert bootstrap_ci(v, seed=2) != a
    assert 0.03 < a.half_width < 0.15


def test_paired_difference_has_the_right_sign():
    g = torch.Generator().manual_seed(0)
    base = torch.rand(300, generator=g)
    a = (base < 0.2).float()                                  # fewer VD events
    b = (base < 0.5).float()
    ci = paired_bootstrap(a, b, seed=0)
    assert ci.estimate == pytest.approx(-0.3, abs=0.05)
    assert ci.high < 0 and ci.low <= ci.estimate <= ci.high
    assert paired_bootstrap(b, a, seed=0).estimate == pytest.approx(-ci.estimate)
    # |CRG|: closer to zero is better whatever the sign
    crg_a, crg_b = torch.full((50,), -0.1), torch.full((50,), 0.4)
    assert paired_bootstrap(crg_a, crg_b, stat=abs_nanmean).estimate == pytest.approx(-0.3)


def test_overhead_against_ptq_int8_with_fake_timings():
    secs = {"PTQ INT8": 2.0, "PTQ INT4": 2.0, "CFQ-QAT": 30.0, "MixedPrec-QAT": 20.0}
    assert overhead(secs) == pytest.approx({"PTQ INT8": 1.0, "PTQ INT4": 1.0, "CFQ-QAT": 15.0,
                                            "MixedPrec-QAT": 10.0})
    # the public code's reading: over MixedPrec-QAT
    assert overhead(secs, "MixedPrec-QAT")["CFQ-QAT"] == pytest.approx(1.5)
    with pytest.raises(ValueError, match="baseline 'PTQ INT8'"):
        overhead({"CFQ-QAT": 30.0})
    with pytest.raises(ValueError, match="must be > 0"):
        overhead({"PTQ INT8": 0.0, "CFQ-QAT": 30.0})


def test_wilson_interval_is_not_degenerate_at_zero_events():
    # a bootstrap of 187 zeros is [0, 0]; the binomial interval is not
    lo, hi = wilson(0, 187)
    assert lo == 0.0 and hi == pytest.approx(0.0201, abs=5e-4)
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    assert all(math.isnan(v) for v in wilson(0, 0))
    r, lo, hi, n = rate(torch.tensor([1.0, 0.0, float("nan"), 1.0]))
    assert (r, n) == (pytest.approx(2 / 3), 3) and lo < r < hi


class _AcceptsEverything(torch.nn.Module):
    """A classifier that puts every image in class ``target``."""

    def __init__(self, target=0):
        super().__init__()
        self.target = target
        self.w = torch.nn.Parameter(torch.zeros(()))

    def forward(self, x):
        out = torch.zeros(len(x), 10) + self.w
        out[:, self.target] = 5.0
        return out


def test_a_model_that_accepts_every_reconstruction_is_caught():
    """VD cannot see over-acceptance (every FP recourse is accepted: VD 0); the false
    acceptance on reconstructions is near 1 and the check against FP32 fails."""
    from cflib.bench.runner import shape_checks as table_checks
    from cflib.bench.tables.quant import FA_RECON, VD, QuantContext, decisions
    from cflib.explainers import Counterfactuals

    g = torch.Generator().manual_seed(0)
    recon = torch.rand(200, 1, 28, 28, generator=g)
    n = 20
    x = torch.rand(n, 1, 28, 28, generator=g)
    fp_cf = Counterfactuals(x=x, x_cf=x.clone(), target=torch.zeros(n, dtype=torch.long),
                            pred=torch.ones(n, dtype=torch.long),
                            pred_cf=torch.zeros(n, dtype=torch.long),
                            success=torch.ones(n, dtype=torch.bool), seconds=0.0,
                            method="Latent PGD")
    greedy = _AcceptsEverything(target=0)
    ctx = QuantContext(fp_cf, None, greedy(fp_cf.x_cf), 0, {},
                       fa_pred=decisions(greedy, recon))
    assert VD(ctx) == 0.0                    # VD rewards it
    assert FA_RECON(ctx) == pytest.approx(1.0)
    import pandas as pd

    means = pd.DataFrame([{"method": "FP32", "metric": "FA_recon", "value": 0.07},
                          {"method": "CFQ-QAT", "metric": "FA_recon", "value": FA_RECON(ctx)}])
    checks = table_checks(means, "quant")
    row = checks[checks["metric"] == "FA_recon"]
    assert len(row) == 1 and row["verdict"].item() == "fails"
    # the same check holds for a model that accepts no more than FP32
    means.loc[1, "value"] = 0.08
    assert table_checks(means, "quant")["verdict"].tolist() == ["holds"]
