"""The book's chapters side by side: a chapter's results are the same whether it runs
alone or beside another chapter (each kernel is pinned to its own thread), and the
chapters that read others' results wait for them."""
import pandas as pd
import pytest

from cflib.bench import data
from cflib.book.runs.assemble import dependencies, execute_chapters

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all((data.data_root() / d / "raw" / "t10k-images-idx3-ubyte").exists()
                for d in ("MNIST", "FashionMNIST")),
        reason="MNIST / Fashion-MNIST files are not in the data root (set CFLIB_DATA)"),
]
TIMING = {"Seconds_per_CF", "Overhead", "Compress_seconds", "Train_seconds"}


def test_readers_wait_for_the_chapters_they_read():
    deps = dependencies(["cross_dataset", "mnist_eval", "fashion_mnist_test", "performance"])
    assert deps["cross_dataset"] == ["mnist_eval", "fashion_mnist_test"]
    assert deps["performance"] == ["mnist_eval", "fashion_mnist_test"]
    assert deps["mnist_eval"] == []


def test_a_chapter_run_beside_another_gives_the_same_results(tmp_path):
    run = {"profile": "smoke", "train_seed": 0, "data_seed": 0, "device": "cpu"}
    alone = execute_chapters(["mnist_bayesian"], {**run, "folder": str(tmp_path / "alone")},
                             workers=1)
    both = execute_chapters(["mnist_bayesian", "fashion_mnist_quant"],
                            {**run, "folder": str(tmp_path / "both")}, workers=2)
    assert set(both) == {"mnist_bayesian", "fashion_mnist_quant"}
    assert alone["mnist_bayesian"].exists()
    a = pd.read_csv(tmp_path / "alone" / "mnist_bayesian.csv", keep_default_na=False)
    b = pd.read_csv(tmp_path / "both" / "mnist_bayesian.csv", keep_default_na=False)
    keep = ~a["metric"].isin(TIMING)
    assert keep.sum() > 20
    pd.testing.assert_frame_equal(a[keep].reset_index(drop=True),
                                  b[~b["metric"].isin(TIMING)].reset_index(drop=True))
    assert (tmp_path / "both" / "fashion_mnist_quant.csv").exists()
