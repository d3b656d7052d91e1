"""The throughput benchmark knows every method of the catalog before it measures anything."""
import importlib.util
from pathlib import Path

import pytest

from cflib.bench import catalog

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def throughput():
    spec = importlib.util.spec_from_file_location("throughput", ROOT / "benchmarks" / "throughput.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_catalog_method_is_benchmarked_with_its_tables_classifier(throughput):
    """The benchmark reads each method's setting from the catalog: the table whose
    classifier and data the method is run with in the book."""
    from cflib.bench.tables import bayes, c3lt

    for m in c3lt.C3LT_METHODS:
        assert throughput.SETTING[m] == "c3lt", m
    for m in bayes.BAYES_METHODS:
        assert throughput.SETTING[m] == "bayes", m
    assert throughput.SETTING["Latent PGD"] == "quant"
    assert set(throughput.SETTING) == set(catalog.CATALOG)
    assert set(throughput.COMPACTING) == {"Wachter", "BayesCF", "ROAR", "Schut", "PSCE"}
    assert "C3LT" not in throughput.ITERATIVE and "Latent search" in throughput.ITERATIVE


def test_a_method_without_a_setting_is_refused_before_any_measurement(throughput, monkeypatch):
    monkeypatch.setattr(throughput, "measure_peak", lambda *a: pytest.fail("measured"))
    monkeypatch.delitem(throughput.SETTING, "C3LT (inverted)")
    with pytest.raises(SystemExit, match="no benchmark setting"):
        throughput.main(["--methods", "C3LT", "C3LT (inverted)"])


def test_the_peak_is_the_best_median_of_matmuls_and_convolutions(throughput, monkeypatch):
    """The peak is the highest *median* rate among the dense kernels (a convolution where
    it beats the matrix products, as on an AMD EPYC), never the copy, never a best."""
    import torch

    medians = iter([80e9, 84e9, 120e9, 135e9, 110e9, 45e9])   # 2 matmuls, 3 convs, copy
    monkeypatch.setattr(throughput, "_rates",
                        lambda fn, dev, repeats, work: (1e15, next(medians)))
    rows = throughput.measure_peak(torch.device("cpu"), 1, repeats=1)
    top = [r for r in rows if r["peak"]]
    assert len(top) == 1 and top[0]["family"] == "conv2d" and top[0]["rate"] == 135e9
    peak, bandwidth, kernel = throughput.peak_of(throughput.pd.DataFrame(rows), 1)
    assert (peak, bandwidth) == (135e9, 45e9) and kernel.startswith("conv2d 128x128")


def test_operator_families_of_the_profile(throughput):
    assert throughput.op_family("aten::mkldnn_convolution") == "convolution"
    assert throughput.op_family("aten::convolution_backward") == "convolution"
    assert throughput.op_family("aten::addmm") == "matrix product"
    assert throughput.op_family("aten::max_pool2d_with_indices") == "pooling"
    assert throughput.op_family("aten::native_batch_norm") == "normalisation"
    assert throughput.op_family("aten::add_") == "elementwise and other"


def test_the_operator_profile_adds_up_to_the_wall_time(throughput):
    """Every operator's self time and the time outside operators add up to the profiled
    call's wall time, and a call made of convolutions spends most of its time in them."""
    import torch
    import torch.nn.functional as F

    x, w = torch.randn(16, 8, 32, 32), torch.randn(8, 8, 5, 5)
    rows = throughput.op_profile("conv", "loop", lambda: [F.conv2d(x, w, padding=2)
                                                          for _ in range(20)], threads=1)
    wall = rows[0]["wall_seconds"]
    assert sum(r["self_seconds"] for r in rows) == pytest.approx(wall, rel=1e-6)
    conv = sum(r["self_seconds"] for r in rows if r["family"] == "convolution")
    assert conv > 0.5 * wall
    assert rows[-1]["operator"] == "outside operators"


def test_ops_only_refuses_a_gpu_before_any_measurement(throughput, monkeypatch):
    monkeypatch.setattr(throughput, "profile_all", lambda *a: pytest.fail("profiled"))
    monkeypatch.setattr(throughput.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(throughput.torch.cuda, "get_device_name", lambda *a: "gpu")
    with pytest.raises(SystemExit, match="--device cpu"):
        throughput.main(["--ops-only", "--device", "cuda"])
