"""The chapters through papermill at the smoke profile, then the book build."""
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cflib import data
from cflib.build_chapter import CHAPTERS, build
from cflib.c3lt_benchmark import C3LT_METHODS, C3LT_METRICS
from cflib.data import PROJECT_ROOT
from cflib.results import COLUMNS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all((data.data_root() / d / "raw" / "t10k-images-idx3-ubyte").exists()
                for d in ("MNIST", "FashionMNIST")),
        reason=f"MNIST / Fashion-MNIST files are not in the data root {data.data_root()} "
               "(set CFLIB_DATA)"),
]


@pytest.fixture(scope="module")
def book_dir(tmp_path_factory):
    """A copy of the book's sources, so the tests never overwrite the user's chapters."""
    import shutil

    root = tmp_path_factory.mktemp("book")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    shutil.copytree(PROJECT_ROOT / "book", root / "book",
                    ignore=shutil.ignore_patterns("chapters"))
    return root


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory, book_dir):
    out = tmp_path_factory.mktemp("results")
    for chapter in CHAPTERS:
        build(chapter, profile="smoke", results_dir=out, out_dir=book_dir / "book" / "chapters")
    return out


def check_c3lt_results(df: pd.DataFrame, dataset: str, pairs):
    assert list(df.columns) == COLUMNS
    assert set(df["dataset"]) == {dataset} and set(df["profile"]) == {"smoke"}
    acc = df[df["method"] == "Classifier"]
    assert len(acc) == 1 and acc["metric"].item() == "Accuracy"
    assert 0.0 <= acc["value"].item() <= 1.0
    cf = df[df["method"] != "Classifier"]
    methods = set(cf["method"])
    assert {"Original Data", "Adv. Attack"} <= methods
    for method in methods:
        for pair in list(pairs) + ["mean"]:
            got = cf[(cf["method"] == method) & (cf["pair"] == pair)]
            assert sorted(got["metric"]) == sorted(s.name for s in C3LT_METRICS), (method, pair)
            assert all(math.isfinite(v) for v in got["value"]), (method, pair)
    v = cf[cf["metric"] == "Validity"]["value"]
    assert v.between(0, 1).all()
    for m in ("AUPC_target", "AUPC_query"):
        assert cf[cf["metric"] == m]["value"].between(0, 1).all()
    assert (cf[cf["metric"] == "Seconds_per_CF"]["value"] > 0).all()
    # the mean row is the mean over pairs
    im1 = cf[(cf["metric"] == "IM1") & (cf["method"] == "Adv. Attack")].set_index("pair")["value"]
    assert im1["mean"] == pytest.approx(im1.drop("mean").mean())


def test_mnist_chapter_writes_every_metric(results_dir):
    df = pd.read_csv(results_dir / "mnist_eval.csv", keep_default_na=False)
    check_c3lt_results(df, "mnist", ["4->9", "3->8", "5->6"])


def test_fashion_mnist_chapter_writes_every_metric(results_dir):
    df = pd.read_csv(results_dir / "fashion_mnist_test.csv", keep_default_na=False)
    check_c3lt_results(df, "fmnist", ["0->2", "7->9", "4->6"])


def test_every_method_of_the_table_runs(results_dir):
    df = pd.read_csv(results_dir / "mnist_eval.csv", keep_default_na=False)
    assert set(df["method"]) == {"Classifier", *C3LT_METHODS}


def test_bayesian_chapter_writes_every_metric(results_dir):
    from cflib.bayes_benchmark import BAYES_METHODS, BAYES_METRICS
    from cflib.profiles import get_profile

    df = pd.read_csv(results_dir / "mnist_bayesian.csv")
    assert list(df.columns) == COLUMNS + ["repeat"]
    assert set(df["setting"]) == {"mc_dropout", "bnn"}
    acc = df[df["method"] == "Classifier"]
    assert len(acc) == 2 and acc["value"].between(0, 1).all()
    cf = df[df["method"] != "Classifier"]
    assert set(cf["method"]) == set(BAYES_METHODS)
    repeats = get_profile("smoke").bayes_repeats
    for (s, m), g in cf.groupby(["setting", "method"]):
        assert sorted(set(g["metric"])) == sorted(spec.name for spec in BAYES_METRICS), (s, m)
        assert len(g) == 5 * repeats
    assert cf[cf["metric"] == "Validity"]["value"].between(0, 1).all()


def test_book_builds(results_dir, book_dir, tmp_path):
    jb = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(book_dir),
          "--path-output", str(tmp_path), "--quiet"]
    proc = subprocess.run(jb, capture_output=True, text=True, cwd=book_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html = tmp_path / "_build" / "html"
    assert (html / "index.html").exists()
    page = (html / "book" / "chapters" / "mnist_eval.html").read_text()
    for name in ("Adv. Attack", "Original Data", "CEM", "CVE", "ExpGAN", "C3LT", "IM1", "COUT",
                 "Protocol notes"):
        assert name in page
    fpage = (html / "book" / "chapters" / "fashion_mnist_test.html").read_text()
    assert "Fashion-MNIST" in fpage and "Ankle boot" in fpage
    assert (html / "book" / "chapters" / "cross_dataset.html").exists()
    bpage = (html / "book" / "chapters" / "mnist_bayesian.html").read_text()
    for name in ("PSCE", "BayesCF", "Wachter", "ROAR", "Schut", "Robustness_Ratio_1e-3",
                 "Protocol notes"):
        assert name in bpage


def test_refresh_prose_only_when_code_is_unchanged(results_dir, book_dir, tmp_path):
    import shutil

    import nbformat

    from cflib.build_chapter import refresh_prose

    executed = book_dir / "book" / "chapters" / "mnist_eval.ipynb"
    shutil.copy(executed, tmp_path / "mnist_eval.ipynb")
    assert refresh_prose("mnist_eval", out_dir=tmp_path).exists()
    nb = nbformat.read(tmp_path / "mnist_eval.ipynb", as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code"
                and "injected-parameters" not in c.metadata.get("tags", []))
    code.source += "\nprint('changed')"
    nbformat.write(nb, tmp_path / "mnist_eval.ipynb")
    with pytest.raises(ValueError, match="re-run"):
        refresh_prose("mnist_eval", out_dir=tmp_path)
