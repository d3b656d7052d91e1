"""The throughput benchmark knows every method of the catalog before it measures anything."""
import importlib.util
from pathlib import Path

import pytest

from cflib.bench import catalog
from cflib.book.chapters import get_chapter

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):
    """``benchmarks/<name>.py`` imported as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def throughput():
    return _script("throughput")


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


def test_an_update_replaces_only_the_measured_methods_rows(throughput):
    import pandas as pd

    old = pd.DataFrame({"method": ["A", "A", "CEM", "CEM", "B", "CEM"],
                        "device": ["cpu", "cpu", "cpu", "cpu", "cpu", "cuda"],
                        "seconds": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    new = pd.DataFrame({"method": ["CEM", "CEM", "New"], "device": ["cpu"] * 3,
                        "seconds": [30.0, 40.0, 70.0]})
    out = throughput.update_rows(old, new, device="cpu")
    assert out["method"].tolist() == ["A", "A", "CEM", "CEM", "CEM", "B", "New"]
    assert out["seconds"].tolist() == [1.0, 2.0, 6.0, 30.0, 40.0, 5.0, 70.0]
    assert old["seconds"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]   # the input untouched
    ops = throughput.update_rows(old.drop(columns="device").rename(columns={"method": "subject"}),
                                 new.drop(columns="device").rename(columns={"method": "subject"}),
                                 key="subject")
    assert ops["subject"].tolist() == ["A", "A", "CEM", "CEM", "B", "New"]   # every device


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


@pytest.fixture(scope="module")
def first_run():
    return _script("first_run")


LOG = """executing 2 chapter(s) on 2 worker(s): mnist_eval, fashion_mnist_test
[mnist_eval] 07:44:47 training classifier (classifier-f4a35c87becbad20.pt)
[fashion_mnist_test] 07:44:47 training classifier (classifier-f08e5a4531a29f5d.pt)
[mnist_eval] 07:47:17 training DCGAN generator (dcgan-3a4836e1d04cd0c3.pt)
[mnist_eval] 07:58:00 C3LT 4->9: 183 updates
"""
EVENTS = "\n".join([
    "2026-12-03T07:47:17\ttrained\tclassifier-f4a35c87becbad20.pt\t150.0\tvm:1",
    "2026-12-03T07:47:20\ttrained\tclassifier-f08e5a4531a29f5d.pt\t152.0\tvm:2",
    "2026-12-03T07:57:17\ttrained\tdcgan-3a4836e1d04cd0c3.pt\t600.0\tvm:1",
    "2026-12-03T07:58:17\ttrained-unsaved\tencoder-0000000000000000.pt\t48.0\tvm:9",
    "a line that is not an event"])


def test_the_first_run_attributes_each_training_to_its_chapter_and_kind(first_run, tmp_path):
    owners = first_run.entry_chapters(LOG)
    assert owners == {"classifier-f4a35c87becbad20.pt": "mnist_eval",
                      "classifier-f08e5a4531a29f5d.pt": "fashion_mnist_test",
                      "dcgan-3a4836e1d04cd0c3.pt": "mnist_eval"}
    t = first_run.trainings(EVENTS, owners)
    assert t["kind"].tolist() == ["classifier", "classifier", "dcgan", "encoder"]
    assert t["chapter"].tolist() == ["mnist_eval", "fashion_mnist_test", "mnist_eval", "?"]
    assert first_run.trainings(EVENTS, owners, until="2026-12-03T07:57:17")["kind"].tolist() == [
        "classifier", "classifier", "dcgan"]
    table = first_run.first_run_table(2000.0, {"mnist_eval": 2500.0, "fashion_mnist_test": 1500.0},
                                      t, workers=2)
    ch = table[table["scope"] == "chapter"].set_index("name")
    assert ch.loc["mnist_eval", "train_seconds"] == 750.0
    assert ch["share"].sum() == pytest.approx(1.0)
    net = table[table["scope"] == "network"]
    assert net["seconds"].sum() == pytest.approx(950.0)
    book = table[table["scope"] == "book"].set_index("name")
    assert book.loc["wall time", "seconds"] == 2000.0
    assert book.loc["chapters' compute, summed", "seconds"] == 4000.0

    from cflib.bench.results import read_table, write_table
    from cflib.book import report

    table = read_table(write_table(table, tmp_path / "performance_first_run.csv"))  # as the page reads it
    by_chapter, by_network = report.first_run_tables(table)
    assert by_network.index[0] == "dcgan" and by_network.loc["classifier", "trained"] == 2
    assert by_network.loc["dcgan", "% of all compute"] == pytest.approx(15.0)
    assert by_chapter.loc[get_chapter("mnist_eval").title, "compute min"] == pytest.approx(2500 / 60)


def test_the_first_run_refuses_a_wall_time_or_chapters_it_cannot_use(first_run):
    t = first_run.trainings("", {})
    with pytest.raises(ValueError, match="wall time"):
        first_run.first_run_table(0.0, {"mnist_eval": 1.0}, t, workers=2)
    with pytest.raises(ValueError, match="no executed chapter"):
        first_run.first_run_table(10.0, {}, t, workers=2)


@pytest.fixture(scope="module")
def c3lt_alpha():
    return _script("c3lt_alpha")


def test_the_alpha_lever_replaces_only_the_datasets_it_measured(c3lt_alpha, tmp_path):
    """One dataset measured again replaces that dataset's rows in the one evidence file;
    the other dataset's rows stay, and nothing else is written beside it."""
    import pandas as pd

    path = tmp_path / "c3lt_alpha.csv"
    rows = lambda ds, v: pd.DataFrame({"dataset": [ds] * 2, "candidate": ["alpha=1", "alpha=10"],  # noqa: E731
                                       "metric": ["Proximity"] * 2, "value": [v, v / 2]})
    c3lt_alpha.replace_datasets(pd.concat([rows("mnist", 0.4), rows("fmnist", 0.3)]), path)
    out = c3lt_alpha.replace_datasets(rows("fmnist", 0.2), path)
    back = pd.read_csv(path)
    assert len(out) == len(back) == 4
    assert sorted(back.loc[back["dataset"] == "fmnist", "value"]) == [0.1, 0.2]
    assert sorted(back.loc[back["dataset"] == "mnist", "value"]) == [0.2, 0.4]
    assert [p.name for p in tmp_path.iterdir()] == ["c3lt_alpha.csv"]


def test_a_one_at_a_time_sample_below_one_query_is_refused(throughput, monkeypatch):
    monkeypatch.setattr(throughput, "measure_peak", lambda *a: pytest.fail("measured"))
    with pytest.raises(SystemExit, match="--alone-images must be at least 1"):
        throughput.main(["--alone-images", "0", "--methods", "C3LT"])


def test_the_chapter_timing_gives_each_method_the_time_to_the_next(tmp_path, monkeypatch):
    """benchmarks/chapter_timing.py (what make gpu-check times the chapter with): each
    method's time runs from its runner line to the next one (or the end), summed over
    pairs, with its images; the networks trained come from the cache's events."""
    import logging
    import time
    from types import SimpleNamespace

    import pandas as pd

    timing = _script("chapter_timing")
    log = logging.getLogger("cflib")

    def fake_run(args):
        dataset = args.dataset
        time.sleep(0.05)                              # the shared networks
        # a row searched once on both pairs' queries (ACROSS_PAIRS), then scored per pair
        log.info("%s %s: %s%s on %d images", dataset, "4->9,3->8", "C", "", 4)
        time.sleep(0.1)
        for pair in ("4->9", "3->8"):
            log.info("%s %s: %s%s on %d images", dataset, pair, "A", "", 3)
            time.sleep(0.02)
            log.info("%s %s: %s%s on %d images", dataset, pair, "C", "", 2)
            time.sleep(0.03)
            log.info("%s %s: %s%s on %d images", dataset, pair, "B", " [kappa=0]", 2)
            time.sleep(0.1)
        return SimpleNamespace(results=pd.DataFrame())

    from dataclasses import replace

    spec = timing.spec_of_notebook("c3lt_table.py", "mnist")
    monkeypatch.setattr(timing, "spec_of_notebook",
                        lambda source, dataset: replace(spec, run=fake_run))
    calls = iter([[], [{"event": "trained", "entry": "dcgan-1.pt", "seconds": "8.9"}]])
    monkeypatch.setattr(timing, "events", lambda: next(calls))
    out = tmp_path / "t.csv"
    timing.main(["--device", "cpu", "--out", str(out)])
    df = pd.read_csv(out).set_index("part")
    assert df.loc["method: A", "images"] == 6 and df.loc["method: B [kappa=0]", "images"] == 4
    # the search across pairs counts its 4 images once, its scoring lines only their time
    assert df.loc["method: C", "images"] == 4
    assert 0.15 <= df.loc["method: C", "seconds"] < 0.3
    assert 0.04 <= df.loc["method: A", "seconds"] < 0.15
    assert 0.2 <= df.loc["method: B [kappa=0]", "seconds"] < 0.4
    assert 0.05 <= df.loc["before the first method (shared networks, data)", "seconds"] < 0.1
    assert df.loc["trained: dcgan-1.pt", "seconds"] == 8.9
    assert df.loc["total", "seconds"] >= 0.45 and set(df["pairs"]) == {"4->9 3->8"}
