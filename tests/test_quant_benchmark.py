"""The quantization table end to end at the smoke profile (Fashion-MNIST files needed), and
every bad input raising before anything is trained."""
import math

import pandas as pd
import pytest
import torch

from cflib.bench.data import load_split
from cflib.bench.profiles import get_profile
from cflib.bench.results import COLUMNS, read_results
from cflib.bench.seeds import Seeds
from cflib.bench.tables.quant import (
    QUANT,
    QUANT_ROWS,
    RETRAIN,
    run_quant,
    shape_checks,
    summarise,
)
from cflib.quantization import RECIPES

pytestmark = pytest.mark.data

#: the smoke sizes; Accuracy on 1,000 test images and a sweep of the table's widths only
#: (4 and 8 bits are PTQ INT4 and INT8: nothing more is trained)
SMALL = dict(test_subset=1000, sweep_bits=(4, 8))
MAIN = ["Accuracy", "VD", "CRG", "DirSim", "Overhead", "VD_low", "VD_high", "CRG_ci95",
        "DirSim_ci95", "FA_recon", "FA_recon_low", "FA_recon_high", "Accuracy_class_0"]
TIMING = {"Overhead", "Overhead_vs_MixedPrec", "Train_seconds", "Compress_seconds"}


def small(**kw):
    return get_profile("smoke", quant={**SMALL, **kw})


def run_quant_table(profile, train_seeds=None, data_seed=0, device="cpu", methods=None,
                    target=0):
    """The chapter's run: its spec checks every argument, then its runner runs."""
    return QUANT.run(QUANT.args(profile, Seeds(train=0, data=data_seed), device, methods,
                                train_seeds=train_seeds, target=target))


def _no_cache_written(cache):
    return not cache.exists() or not any(cache.iterdir())


def test_the_table_sweep_and_bits_are_written_and_reproducible(tmp_cache, tmp_path):
    run = run_quant_table(small(), train_seeds=[0])
    paths = run.save(tmp_path / "a", "fashion_mnist_quant")
    assert [p.name for p in paths[:4]] == ["fashion_mnist_quant.csv", "fashion_mnist_quant_sweep.csv",
                                       "fashion_mnist_quant_bits.csv",
                                       "fashion_mnist_quant_checks.csv"]
    df = read_results(paths[0])
    assert list(df.columns) == COLUMNS
    assert set(df["pair"]) == {""} and set(df["model"]) == {""}
    assert set(df["dataset"]) == {"fmnist"} and set(df["profile"]) == {"smoke"}
    main = df[df["variant"] == ""]
    assert list(dict.fromkeys(main["method"])) == QUANT_ROWS
    fp = main[main["method"] == "FP32"].set_index("metric")["value"]
    assert set(fp.index) == {"Accuracy", "FP_Feasible", "Median_delta", "Train_seconds",
                             "N_queries", "N_fp_feasible", "N_already_target", "FA_recon",
                             "FA_recon_low", "FA_recon_high",
                             *(f"Accuracy_class_{k}" for k in range(10))}
    assert fp["FP_Feasible"] > 0 and 0 < fp["Accuracy"] <= 1
    for m in [RETRAIN, *RECIPES]:
        v = main[main["method"] == m].set_index("metric")["value"]
        assert all(math.isfinite(v[k]) for k in MAIN), (m, v[MAIN].to_dict())
        assert 0 <= v["VD"] <= 1 and -1 <= v["DirSim"] <= 1 and 0 < v["Accuracy"] <= 1
        assert v["VD_low"] <= v["VD"] <= v["VD_high"]
        assert v["FA_recon_low"] <= v["FA_recon"] <= v["FA_recon_high"]
        # the rejected share of the FP-infeasible queries is a rate over their count
        if v["N_fp_infeasible"] > 0:
            assert 0 <= v["FA_infeasible"] <= 1
    ov = main[main["metric"] == "Overhead"].set_index("method")["value"]
    assert ov["PTQ INT8"] == pytest.approx(1.0)
    sp = main[(main["method"] == "Prune+Quant") & (main["metric"] == "Sparsity")]["value"].item()
    assert sp >= 0.2999
    assert set(df["variant"]) == {"", "repo_init", "raw_latent", "own_fp_reference", "code_bits"}

    sweep = pd.read_csv(paths[1])
    assert list(sweep.columns) == ["bits", "metric", "value", "train_seed", "profile"]
    assert set(sweep["bits"]) == {4, 8} and set(sweep["metric"]) == {
        "Accuracy", "VD", "Transfer_Margin", "FA_recon"}
    bits = pd.read_csv(paths[2])
    assert list(bits.columns) == ["method", "quantizer", "bits", "train_seed", "profile"]
    # seven recipes and the code's-bits check of MixedPrec-QAT and CFQ-QAT, 7 quantizers each
    assert len(bits) == 9 * 7 and set(bits["bits"]) <= {2, 3, 4, 8}
    assert set(bits[bits["method"] == "PTQ INT8"]["bits"]) == {8}
    assert RETRAIN not in set(bits["method"])

    checks = shape_checks(run)
    paired = checks[checks["expectation"].str.contains("on the same queries")]
    assert len(paired) == 6 and paired["holds"].isin([True, False]).all()
    assert not (checks["holds"] & ~checks["matched"]).any()   # unmatched never holds
    assert set(checks["verdict"]) <= {"holds", "fails", "not tested", "inconclusive", "within noise"}
    # an interval that includes 0 is inconclusive, never a hold or a failure
    sig = paired["significant"]
    assert (paired.loc[(sig == False) & paired["matched"], "verdict"]  # noqa: E712
            == "inconclusive").all()
    assert (paired["ci_low"] <= paired["difference"]).all()
    assert not summarise(run.results).empty and not run.checks.empty

    # a second run from the same cache: identical files but for the timings
    again = run_quant_table(small(), train_seeds=[0])
    paths2 = again.save(tmp_path / "b", "fashion_mnist_quant")
    a, b = (read_results(p) for p in (paths[0], paths2[0]))
    keep = ~a["metric"].isin(TIMING)
    pd.testing.assert_frame_equal(a[keep].reset_index(drop=True), b[keep].reset_index(drop=True))
    for p, q in zip(paths[1:4], paths2[1:4]):      # the tables (the recourse file holds
        assert p.read_text() == q.read_text()       # its seconds: read back below)
    back = type(run).load(tmp_path / "a", "fashion_mnist_quant")
    assert set(back.recourse) == {k for k in run.recourse if k[1] == ""}
    for k, rec in back.recourse.items():
        assert torch.equal(rec.cf.x_cf, run.recourse[k].cf.x_cf)


def _first_draw_label(seed=0):
    _, y = load_split("fmnist", "test")
    return int(y[torch.randperm(len(y), generator=torch.Generator().manual_seed(seed + 1))[0]])


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(methods=["PTQ INT2"]), ValueError,
     r"unknown compression recipe 'PTQ INT2'.*'PTQ INT8'.*'Prune\+Quant'"),
    (dict(target=10), ValueError, r"target 10 is not a class"),
    (dict(profile=small(val_fraction=0.0)), ValueError, "calibration set is empty"),
    (dict(profile=small(train_subset=5, val_fraction=0.05)), ValueError,
     "calibration set is empty.*raise val_fraction"),
    (dict(profile=small(sweep_bits=(1, 8))), ValueError, r"2\.\.8, got 1"),
    (dict(profile="huge"), ValueError, "unknown profile 'huge'"),
    (dict(train_seeds=[]), ValueError, "train_seeds must be a non-empty list"),
    (dict(data_seed=-1), ValueError, "data seed must be an int >= 0"),
    (dict(device="tpu"), ValueError, "use device='cpu'"),
])
def test_bad_inputs_raise_before_anything_is_trained(kwargs, error, match, tmp_cache):
    args = {**dict(profile=small(), train_seeds=[0]), **kwargs}
    with pytest.raises(error, match=match):
        run_quant_table(**args)
    assert _no_cache_written(tmp_cache)


def test_a_target_that_leaves_no_query_is_named(tmp_cache):
    t = _first_draw_label()
    with pytest.raises(ValueError, match=f"no test image outside class {t} among the first 1 "
                                         "draws; raise quant.n_queries"):
        run_quant_table(small(n_queries=1), train_seeds=[0], target=t)
    with pytest.raises(ValueError, match="raise quant.n_queries"):
        run_quant("fmnist", small(n_queries=1), seeds=Seeds(), target=t)
    assert _no_cache_written(tmp_cache)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_names_the_fix(tmp_cache):
    with pytest.raises(ValueError, match="CUDA is not available.*use device='cpu'"):
        run_quant_table(small(), train_seeds=[0], device="cuda")
    assert _no_cache_written(tmp_cache)


def test_zoo_quantized_checks_the_method_before_training(tmp_cache):
    from cflib.bench import zoo

    with pytest.raises(ValueError, match="unknown compression recipe 'PTQ INT2'"):
        zoo.quantized("PTQ INT2", "fmnist", small())
    assert _no_cache_written(tmp_cache)

