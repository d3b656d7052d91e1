"""Fake quantization, QuantSmallCNN and the seven recipes, on tiny networks and the bars."""
import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from cflib.models import C3LTClassifier, SmallCNN
from cflib.quantization import RECIPES, PTQConfig, QATConfig, QuantSmallCNN, fake
from cflib.quantization.fake import (
    Quantizer,
    budget_penalty,
    mse_act_clip,
    mse_weight_step,
    quantize_act,
    quantize_weight,
    repo_weight_step,
    round_ste,
    temperature,
)
from cflib.quantization.recipes import (
    Pool,
    TeacherPoints,
    build_quant_model,
    calibrate_ptq,
    cf_calibration_set,
    compress,
    kd_loss,
    magnitude_prune,
    qat_loss,
    teacher_points,
    train_qat,
)


def test_round_ste_has_the_identity_gradient():
    x = torch.linspace(-3, 3, 41, requires_grad=True)
    y = round_ste(x)
    assert torch.equal(y, x.detach().round())
    (g,) = torch.autograd.grad((y * torch.arange(41.0)).sum(), x)
    assert torch.equal(g, torch.arange(41.0))


@pytest.mark.parametrize("bits", range(2, 9))
def test_weight_quantizer_levels_and_range(bits):
    g = torch.Generator().manual_seed(bits)
    w = torch.randn(4000, generator=g)
    s = torch.tensor(0.05)
    q = quantize_weight(w, s, bits)
    levels = (q / s).round()
    assert torch.allclose(q / s, levels, atol=1e-4)
    assert len(q.unique()) <= 2 ** bits
    assert levels.min() >= -(2 ** (bits - 1)) and levels.max() <= 2 ** (bits - 1) - 1


@pytest.mark.parametrize("bits", range(2, 9))
def test_activation_quantizer_levels_and_clamps(bits):
    a = torch.linspace(-2, 5, 3001)
    c = torch.tensor(3.0)
    q = quantize_act(a, c, bits)
    assert len(q.unique()) <= 2 ** bits
    assert q.min() >= 0 and q.max() <= c + 1e-6
    assert (q[a < 0] == 0).all()
    assert torch.allclose(q[a > c], c.expand((a > c).sum()))


@pytest.mark.parametrize("kind", ["weight", "act"])
def test_steps_clips_and_policy_get_finite_gradients_under_hard_gumbel(kind):
    torch.manual_seed(0)
    q = Quantizer(kind, (2, 3, 4, 8), init_bit=4).train()
    q.temperature.fill_(1.0)
    x = torch.randn(64, 16).abs() * 3 if kind == "act" else 0.2 * torch.randn(64, 16)
    q.initialise(x, "mse")
    x.requires_grad_(True)
    out = q(x)
    (out * torch.randn_like(out)).sum().backward()
    for p in (q.raw, q.logits):
        assert p.grad is not None and torch.isfinite(p.grad).all()
    assert q.logits.grad.abs().sum() > 0 and q.raw.grad.abs().sum() > 0
    assert torch.isfinite(x.grad).all()


def test_mse_initialisation_is_the_grid_minimiser_and_beats_the_codes_rule_at_8_bits():
    torch.manual_seed(0)
    w = 0.05 * torch.randn(32, 16, 3, 3)
    for b in (2, 4, 8):
        s = mse_weight_step(w, b, grid=40)
        grid = [w.abs().max().item() * k / 40 / (2 ** (b - 1) - 1) for k in range(1, 41)]
        errs = [(quantize_weight(w.double(), torch.tensor(g, dtype=torch.float64), b)
                 - w.double()).pow(2).mean().item() for g in grid]
        assert s == pytest.approx(grid[min(range(40), key=errs.__getitem__)], rel=1e-9)

    def err(step):
        return (quantize_weight(w, torch.tensor(step), 8) - w).pow(2).mean().item()

    assert err(mse_weight_step(w, 8)) < err(repo_weight_step(w, 8))
    a = torch.rand(5000) ** 3 * 4
    c = mse_act_clip(a, 4, grid=40)
    clips = [a.max().item() * k / 40 for k in range(1, 41)]
    errs = [(quantize_act(a.double(), torch.tensor(v, dtype=torch.float64), 4)
             - a.double()).pow(2).mean().item() for v in clips]
    assert c == pytest.approx(clips[min(range(40), key=errs.__getitem__)], rel=1e-9)


def test_from_fp_with_quantizers_off_reproduces_the_fp_logits_exactly(small_cnn_bars, bars):
    x, _ = bars
    q = QuantSmallCNN.from_fp(small_cnn_bars, calib_x=x[:32], enabled=False)
    with torch.no_grad():
        assert torch.equal(q(x[:64]), small_cnn_bars(x[:64]))
        q.set_enabled(True)
        assert not torch.equal(q.eval()(x[:64]), small_cnn_bars(x[:64]))


def test_from_fp_names_the_module_of_another_architecture(bars):
    with pytest.raises(TypeError, match=r"C3LTClassifier has module 'conv'.*SmallCNN: features"):
        QuantSmallCNN.from_fp(C3LTClassifier(), calib_x=bars[0][:4])
    wide = SmallCNN()
    wide.features[0] = torch.nn.Conv2d(1, 32, 5, padding=2)
    with pytest.raises(TypeError, match=r"'features.0'.*kernel_size=\(5, 5\)"):
        QuantSmallCNN.from_fp(wide, calib_x=bars[0][:4])


def test_eval_mode_is_deterministic_argmax_and_fixed_bits_are_respected():
    torch.manual_seed(0)
    w = 0.1 * torch.randn(8, 8)
    q = Quantizer("weight", (2, 3, 4, 8), init_bit=4)
    q.initialise(w, "mse")
    with torch.no_grad():
        q.logits.copy_(torch.tensor([0.0, 0.3, 0.1, 0.5]))    # argmax: 8 bits
    q.eval()
    a, b = q(w), q(w)
    assert torch.equal(a, b) and q.chosen_bits() == 8
    assert torch.equal(a, q.quantize_at(w, 3))
    fixed = Quantizer("weight", (2, 4, 8), init_bit=4, fixed_bits=2).train()
    fixed.initialise(w, "mse")
    for _ in range(5):     # training mode draws nothing: always 2 bits
        assert torch.equal(fixed(w), fixed.quantize_at(w, 0))
    assert fixed.chosen_bits() == 2 and float(fixed.expected_bits()) == 2.0


def test_bit_cost_weighting_and_budget_penalty(small_cnn_bars, bars):
    q = QuantSmallCNN.from_fp(small_cnn_bars, calib_x=bars[0][:32]).eval()
    q(bars[0][:2])
    assert float(q.bit_cost().detach()) == pytest.approx(4.0)
    n = {k: m.weight.numel() for k, m in q.weight_layers().items()}
    with torch.no_grad():
        q.weight_quantizers["conv1"].logits.copy_(torch.tensor([0.0, 0.0, 0.0, 5.0]))  # 8 bits
        q.act_quantizers["act1"].logits.copy_(torch.tensor([5.0, 0.0, 0.0, 0.0]))      # 2 bits
    q(bars[0][:2])
    w = (8 * n["conv1"] + 4 * (sum(n.values()) - n["conv1"])) / sum(n.values())
    assert float(q.bit_cost().detach()) == pytest.approx(0.5 * w + 0.5 * (2 + 4 + 4) / 3)
    assert q.bit_summary()["bit_cost"] == pytest.approx(0.5 * w + 0.5 * (2 + 4 + 4) / 3)
    assert float(budget_penalty(torch.tensor(3.5), 4.0, 0.01)) == 0.0
    assert float(budget_penalty(torch.tensor(4.0), 4.0, 0.01)) == 0.0
    assert float(budget_penalty(torch.tensor(5.0), 4.0, 0.01)) == pytest.approx(0.01)


def test_temperature_schedule_is_geometric_from_5_to_a_quarter():
    taus = [temperature(e, 4) for e in range(4)]
    assert taus[0] == pytest.approx(5.0) and taus[-1] == pytest.approx(0.25)
    ratios = [b / a for a, b in zip(taus, taus[1:])]
    assert all(r == pytest.approx(0.05 ** (1 / 3)) for r in ratios)
    assert temperature(0, 1) == pytest.approx(5.0)           # E = 1: no division by zero
    assert temperature(7, 4) == pytest.approx(0.25)           # floored


def test_ptq_changes_only_steps_and_clips_and_lowers_the_logit_mse(small_cnn_bars, bars):
    x, _ = bars
    fp = small_cnn_bars
    q = QuantSmallCNN.from_fp(fp, bits=(3,), init_bit=3, fixed_bits=3, calib_x=x[:64])
    before = {k: v.clone() for k, v in q.state_dict().items()}

    def mse():
        with torch.no_grad():
            return F.mse_loss(q.eval()(x), fp(x)).item()

    m0 = mse()
    calibrate_ptq(q, fp, x, PTQConfig(bits=3, epochs=3, batch_size=64), seed=0)
    after = q.state_dict()
    for k, v in before.items():
        changed = not torch.equal(v, after[k])
        assert changed == k.endswith(".raw"), k
    assert mse() < m0


def test_ptq_int8_agrees_with_fp_on_the_tiny_classifier(small_cnn_bars, bars):
    x, y = bars
    pool = Pool(x[:192], y[:192], x[192:], y[192:])
    cfg = replace(RECIPES["PTQ INT8"], epochs=1)
    q = QuantSmallCNN(bits=(8,), init_bit=8, fixed_bits=8)
    info = compress(q, cfg, small_cnn_bars, pool)
    with torch.no_grad():
        agree = (q(x).argmax(1) == small_cnn_bars(x).argmax(1)).float().mean().item()
    assert agree >= 0.99
    assert info["bits"] == dict.fromkeys(info["bits"], 8) and info["compress_seconds"] > 0


def test_cf_ptq_calibration_set_is_nontarget_images_plus_one_teacher_point_each(
        small_cnn_bars, latent_ae_bars, bars):
    x, y = bars
    xc, rate = cf_calibration_set(small_cnn_bars, latent_ae_bars, x[:40], y[:40], target=0)
    keep = y[:40] != 0
    assert len(xc) == 2 * keep.sum()
    assert torch.equal(xc[:keep.sum()], x[:40][keep])
    assert not torch.equal(xc[keep.sum():], x[:40][keep])
    # the rate is the share of those teacher points the classifier puts in the target
    with torch.no_grad():
        hit = (small_cnn_bars(xc[keep.sum():]).argmax(1) == 0).float().mean().item()
    assert rate == pytest.approx(hit)
    with pytest.raises(ValueError, match="calibration set is empty"):
        cf_calibration_set(small_cnn_bars, latent_ae_bars, x[y == 0][:4], y[y == 0][:4], 0)


def test_teacher_points_keep_only_successful_nontarget_images(small_cnn_bars, latent_ae_bars,
                                                             bars):
    x, y = bars
    tp = teacher_points(small_cnn_bars, latent_ae_bars, x[:24], y[:24], target=0, steps=20,
                        step_size=1.0)
    with torch.no_grad():
        hits = small_cnn_bars(tp.x_cf).argmax(1) == 0
    assert torch.equal(tp.success, (y[:24] != 0) & hits)
    assert torch.equal(tp.x_cf[y[:24] == 0], x[:24][y[:24] == 0])   # class t: untouched


def test_cfq_loss_cf_term_and_eta_zero_equals_mixedprec(small_cnn_bars, bars):
    x, y = bars
    q = QuantSmallCNN.from_fp(small_cnn_bars, calib_x=x[:32])
    cf_x = x[y == 1][:5]
    q.eval()     # deterministic bits: the CF term can be recomputed by hand
    loss, parts = qat_loss(q, x[:16], y[:16], QATConfig(eta=1.0), cf_x, target=0)
    with torch.no_grad():
        want_cf = F.cross_entropy(q(cf_x), torch.zeros(5, dtype=torch.long))
    assert float(parts["cf"]) == pytest.approx(float(want_cf), rel=1e-6)
    assert float(loss.detach()) == pytest.approx(float(parts["task"] + want_cf + parts["penalty"]),
                                                 rel=1e-6)
    q.train()    # Gumbel draws: the same seed gives the same draws
    torch.manual_seed(3)
    mixed, _ = qat_loss(q, x[:16], y[:16], QATConfig())
    torch.manual_seed(3)
    cfq0, _ = qat_loss(q, x[:16], y[:16], QATConfig(eta=0.0), cf_x, target=0)
    torch.manual_seed(3)
    empty, _ = qat_loss(q, x[:16], y[:16], QATConfig(eta=1.0), cf_x[:0], target=0)
    assert float(mixed.detach()) == float(cfq0.detach()) == float(empty.detach())


def test_train_qat_uses_only_the_teacher_set(small_cnn_bars, bars, monkeypatch):
    from cflib.quantization import recipes as methods

    x, y = bars
    seen = []
    real = methods.qat_loss

    def spy(q, xb, yb, cfg, cf_x=None, target=None):
        seen.append(None if cf_x is None else cf_x.clone())
        return real(q, xb, yb, cfg, cf_x, target)

    monkeypatch.setattr(methods, "qat_loss", spy)
    success = torch.zeros(64, dtype=torch.bool)
    success[[1, 3, 5]] = True
    marker = torch.full_like(x[:64], 0.5)
    tp = TeacherPoints(marker, success)
    q = QuantSmallCNN.from_fp(small_cnn_bars, calib_x=x[:32])
    train_qat(q, x[:64], y[:64], replace(QATConfig(eta=1.0), epochs=1, batch_size=64),
              target=0, teacher=tp)
    assert len(seen) == 1 and len(seen[0]) == 3 and (seen[0] == 0.5).all()


def test_prune_zeroes_the_smallest_30_percent_and_the_mask_survives_qat(small_cnn_bars, bars):
    x, y = bars
    q = QuantSmallCNN.from_fp(small_cnn_bars, calib_x=x[:32])
    n = sum(m.weight.numel() for m in q.weight_layers().values())
    masks = magnitude_prune(q, 0.30)
    zeros = sum((m.weight == 0).sum().item() for m in q.weight_layers().values())
    assert zeros == math.floor(0.3 * n)
    assert set(masks) == {"conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight"}
    train_qat(q, x[:64], y[:64], replace(QATConfig(prune_fraction=0.3), epochs=1, batch_size=16),
              masks=masks)
    for name, m in masks.items():
        w = dict(q.named_parameters())[name]
        assert (w[~m] == 0).all()
    assert q.sparsity() == pytest.approx(math.floor(0.3 * n) / n, abs=1e-6)
    with pytest.raises(ValueError, match=r"prune_fraction must be in \[0, 1\)"):
        magnitude_prune(q, 1.0)


def test_kd_loss_matches_the_formula():
    torch.manual_seed(0)
    s, t, y = torch.randn(6, 10), torch.randn(6, 10), torch.randint(0, 10, (6,))
    T, a = 2.0, 0.3
    p = torch.softmax(t / T, 1)
    kl = (p * (p.log() - torch.log_softmax(s / T, 1))).sum(1).mean()
    want = a * F.cross_entropy(s, y) + (1 - a) * T ** 2 * kl
    assert float(kd_loss(s, t, y, T, a)) == pytest.approx(float(want), rel=1e-6)


def test_the_registry_holds_exactly_the_seven_listed_rows():
    assert list(RECIPES) == ["PTQ INT8", "CFQ-QAT", "CF-PTQ", "MixedPrec-QAT", "KD+Quant",
                                   "PTQ INT4", "Prune+Quant"]
    assert RECIPES["CFQ-QAT"].eta == 1.0 and RECIPES["MixedPrec-QAT"].eta == 0.0
    assert RECIPES["Prune+Quant"].prune_fraction == 0.30
    assert RECIPES["KD+Quant"].kd_temperature == 2.0
    assert RECIPES["CF-PTQ"].cf_aware and RECIPES["PTQ INT4"].bits == 4
    from cflib.bench.profiles import get_profile
    from cflib.bench.zoo import recipe_config

    smoke = get_profile("smoke")
    cfg = recipe_config("CFQ-QAT", smoke)
    assert cfg == replace(RECIPES["CFQ-QAT"], epochs=smoke.quant.qat_epochs,
                          student_epochs=smoke.quant.clf_epochs,
                          target_avg_bits=smoke.quant.bit_budget,
                          policy_lr=smoke.quant.policy_lr, bit_lambda=smoke.quant.bit_lambda)
    # the library's recipe is the public code's: budget 4, the policy at AdamW's lr
    assert RECIPES["CFQ-QAT"].target_avg_bits == 4.0 and RECIPES["CFQ-QAT"].policy_lr is None
    assert recipe_config("PTQ INT4", smoke).epochs == smoke.quant.calib_epochs
    with pytest.raises(ValueError, match=r"unknown compression recipe 'PTQ INT2'.*'PTQ INT8'"):
        recipe_config("PTQ INT2", smoke)


@pytest.mark.parametrize("kwargs, match", [
    (dict(bits=1), r"bits must be an int in 2\.\.8, got 1"),
    (dict(bits=16), r"bits must be an int in 2\.\.8, got 16"),
    (dict(bits=4.5), r"bits must be an int in 2\.\.8, got 4\.5"),
])
def test_bad_ptq_bits_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PTQConfig(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(bits=()), "candidate bit set is empty"),
    (dict(bits=(2, 4, 4)), "has duplicates"),
    (dict(bits=(2, 9)), r"every candidate bit must be an int in 2\.\.8"),
    (dict(bits=(2, 8), init_bit=4), "init_bit=4 is not among the candidate bits"),
    (dict(target_avg_bits=9.0), r"target_avg_bits must lie in \[2, 8\]"),
    (dict(target_avg_bits=1.0), r"target_avg_bits must lie in \[2, 8\]"),
    (dict(bit_lambda=-0.1), "bit_lambda must be >= 0"),
    (dict(eta=-1.0), "eta must be >= 0"),
    (dict(prune_fraction=1.0), r"prune_fraction must be in \[0, 1\)"),
    (dict(prune_fraction=-0.1), r"prune_fraction must be in \[0, 1\)"),
    (dict(kd_temperature=0.0), "kd_temperature must be > 0"),
    (dict(kd_temperature=2.0, kd_alpha=1.5), r"kd_alpha must be in \[0, 1\]"),
    (dict(init="lsq"), "init must be one of"),
])
def test_bad_qat_configs_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        QATConfig(**kwargs)


def test_quantizer_checks_its_bits():
    with pytest.raises(ValueError, match="fixed_bits=3 is not among"):
        Quantizer("weight", (2, 4), init_bit=4, fixed_bits=3)
    with pytest.raises(ValueError, match="kind must be"):
        Quantizer("bias")
    assert fake.check_bits(8) == 8


def test_the_quantized_cache_key_follows_the_fp_model_the_ae_and_the_config(
        small_cnn_bars, latent_ae_bars, monkeypatch):
    import copy

    from cflib.bench import zoo
    from cflib.cache import cache_key

    keys = []
    monkeypatch.setattr(zoo, "cached", lambda kind, cfg, *a, **k: (keys.append(cache_key(cfg)),
                                                                   (None, {}))[1])

    def key(method="PTQ INT8", fp=small_cnn_bars, ae=latent_ae_bars, config=None):
        zoo.quantized(method, "fmnist", "smoke", fp=fp, autoencoder=ae, config=config)
        return keys[-1]

    base = key()
    assert key() == base
    fp2 = copy.deepcopy(small_cnn_bars)
    with torch.no_grad():
        fp2.classifier[3].bias.add_(1e-3)
    ae2 = copy.deepcopy(latent_ae_bars)
    with torch.no_grad():
        ae2.code_std.mul_(1.01)
    assert key(fp=fp2) != base and key(ae=ae2) != base
    assert key(config=replace(RECIPES["PTQ INT8"], init="repo")) != base
    assert key("CFQ-QAT") != key("MixedPrec-QAT")


def test_a_policy_learning_rate_lets_the_allocation_leave_its_initial_bit():
    """With the code's lr (1e-3) and a few steps the bit logits barely move; with their own
    learning rate and a budget below 4 bits the penalty pushes some quantizers down."""
    torch.manual_seed(0)
    x, y = torch.rand(256, 1, 28, 28) * 2 - 1, torch.randint(0, 10, (256,))
    bits = {}
    for plr in (None, 0.5):
        q = build_quant_model(QATConfig())
        cfg = QATConfig(epochs=2, batch_size=32, target_avg_bits=2.5, bit_lambda=1.0,
                        policy_lr=plr)
        train_qat(q, x, y, cfg)
        bits[plr] = q.bit_allocation()
    assert set(bits[None].values()) == {4}
    assert min(bits[0.5].values()) < 4
    with pytest.raises(ValueError, match="policy_lr must be > 0"):
        QATConfig(policy_lr=0.0)
