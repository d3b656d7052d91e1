"""Bad input gets a clear error before any compute, or a documented conversion; never a
silent wrong result or a bare traceback from torch, torchvision or papermill.

Library inputs (images, targets, models, every explainer config), chapter parameters,
data files and the weight cache."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from cflib.book import chapters
from cflib.explainers import (
    CEM,
    CVE,
    PSCE,
    ROAR,
    AdvAttack,
    C3LTConfig,
    ExpGANConfig,
    Schut,
    Wachter,
)


@pytest.fixture(scope="module")
def q(bars):
    x, y = bars
    return x[y == 0][:4]


def adv(clf):
    return AdvAttack(clf, steps=2)


# -- images ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda q: q.clone().index_put_((torch.tensor([0]),), torch.tensor(float("nan"))), "NaN"),
    (lambda q: torch.where(q > 0, torch.tensor(float("inf")), q), "NaN or infinite"),
    (lambda q: q - 1.01, r"scaled to \[-1, 1\]; its values span \[-2\.01"),
    (lambda q: q.to("meta"), "'meta' device: it has a shape but no values"),
    (lambda q: ((q + 1) * 127.5).to(torch.uint8), "float tensor"),
    (lambda q: q[0], r"shape \(N, C, H, W\)"),
    (lambda q: q[:0], "empty batch"),
    (lambda q: q * 3, r"scaled to \[-1, 1\]"),
    # a batch just past the range: its end printed as it is (1.0001 is not "1"), and the
    # advice is a clamp, not the rescaling of [0, 1] data
    (lambda q: q.clamp(-1, 1).index_put_((torch.tensor([0]),), torch.tensor(1.0001)),
     r"values span \[-1, 1\.0001\] \(it overshoots \[-1, 1\] slightly.*x\.clamp\(-1, 1\)\)"),
    (lambda q: q.clamp(-1, 1) - 0.0002, r"values span \[-1\.000\d+, .*x\.clamp"),
    (lambda q: q.repeat(1, 3, 1, 1), "cannot take images of shape"),
    (lambda q: q.tolist(), "torch.Tensor"),
])
def test_bad_images_are_refused_before_compute(make, match, tiny_classifier, q, monkeypatch):
    ex = adv(tiny_classifier)
    monkeypatch.setattr(AdvAttack, "_generate", lambda *a, **k: pytest.fail("computed"))
    with pytest.raises((ValueError, TypeError), match=match):
        ex.explain(make(q), 1)


def test_float64_images_are_converted_to_the_models_dtype(tiny_classifier, q):
    cf = adv(tiny_classifier).explain(q.double(), 1)
    assert cf.x_cf.dtype == torch.float32 and cf.x.dtype == torch.float32


# -- targets ----------------------------------------------------------------------------------
@pytest.mark.parametrize("target, match", [
    (0, "already assigns every query to its target"),
    (10, r"0\.\.9"),
    (-1, r"0\.\.9"),
    (torch.tensor([1, 1]), r"shape \(4,\)"),
    (1.5, "class indices"),
])
def test_bad_targets(target, match, tiny_classifier, q, monkeypatch):
    monkeypatch.setattr(AdvAttack, "_generate", lambda *a, **k: pytest.fail("computed"))
    with pytest.raises(ValueError, match=match):
        adv(tiny_classifier).explain(q, target)


def test_some_queries_already_in_the_target_are_recorded(tiny_classifier, bars):
    x, y = bars
    mixed = torch.cat([x[y == 0][:2], x[y == 1][:2]])
    cf = adv(tiny_classifier).explain(mixed, 1)
    assert cf.meta["already_target"].tolist() == [False, False, True, True]


# -- models -----------------------------------------------------------------------------------
def test_a_softmax_model_is_refused(tiny_classifier, q):
    probs = nn.Sequential(tiny_classifier, nn.Softmax(dim=1))
    with pytest.raises(ValueError, match="returns probabilities"):
        CEM(probs, max_iterations=2).explain(q, 1)


def test_a_model_with_one_output_or_no_module_is_refused(q):
    with pytest.raises(ValueError, match="at least two classes"):
        adv(nn.Sequential(nn.Flatten(), nn.Linear(784, 1))).explain(q, 0)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        AdvAttack(lambda x: x)


# -- explainer configs --------------------------------------------------------------------------
@pytest.mark.parametrize("build, match", [
    (lambda c: AdvAttack(c, steps=-1), "steps"),
    (lambda c: AdvAttack(c, eps=-0.1), "eps"),
    (lambda c: AdvAttack(c, batch_size=0), "batch_size"),
    (lambda c: CEM(c, max_iterations=0), "max_iterations"),
    (lambda c: CEM(c, beta=-1.0), "beta"),
    (lambda c: CEM(c, clip=(1.0, -1.0)), "clip"),
    (lambda c: CVE(c, n_distractors=0), "n_distractors"),
    (lambda c: CVE(c, paste="tiles"), "paste"),
    (lambda c: ExpGANConfig(epochs=-1), "epochs"),
    (lambda c: ExpGANConfig(kappa=2.0), "kappa"),
    (lambda c: C3LTConfig(cls_type="mse"), "cls_type"),
    (lambda c: C3LTConfig(alpha=-0.1), "alpha"),
    (lambda c: Wachter(c, lr=0.0), "lr"),
    (lambda c: Wachter(c, lam_steps=0), "lam_steps"),
    (lambda c: ROAR(c, delta_max=-0.01), "delta_max"),
    (lambda c: Schut(c, confidence=1.5), "confidence"),
    (lambda c: Schut(c, step=-0.4), "step"),
    (lambda c: PSCE(c, epsilon=0.0), "epsilon"),
    (lambda c: PSCE(c, delta=1.0), "delta"),
    (lambda c: AdvAttack(c, steps=3, foo=1), "foo"),
])
def test_every_config_refuses_bad_values(build, match, tiny_classifier):
    with pytest.raises((ValueError, TypeError), match=match):
        build(tiny_classifier)


def test_load_split_hands_out_copies():
    from cflib.bench import data

    if not (data.data_root() / "MNIST" / "raw" / "t10k-images-idx3-ubyte").exists():
        pytest.skip("MNIST not in the data root")
    x, y = data.load_split("mnist", "test")
    x[:] = 0.0
    y[:] = 7
    x2, y2 = data.load_split("mnist", "test")
    assert x2.min() == -1.0 and (y2 != 7).any()


# -- chapter parameters -------------------------------------------------------------------------
@pytest.mark.parametrize("given, match", [
    ({"n_image": 50}, "unknown parameter.*n_image"),
    ({"n_images": -5}, "at least 4"),
    ({"n_images": 2}, "at least 4"),
    ({"n_images": "lots"}, "not JSON"),
    ({"dataset": "fmnist"}, "does not match.*fashion_mnist_test"),
    ({"pairs": '["4->4"]'}, "equal"),
    ({"pairs": "[]"}, "at least one pair"),
    ({"pairs": '["4-9"]'}, "cannot read pair"),
    ({"train_seed": "x"}, "not JSON"),
    ({"train_seed": -1}, "train_seed"),
    ({"data_seed": -2}, "data_seed"),
    ({"profile": "huge"}, "unknown profile"),
    ({"device": "tpu"}, "device"),
    ({"methods": '["DiCE"]'}, "unknown method"),
    ({"n_images": True}, "int"),
])
def test_bad_chapter_parameters(given, match):
    with pytest.raises(ValueError, match=match):
        chapters.check("mnist_eval", given)


def test_chapter_parameters_given_as_text_are_converted():
    out = chapters.check("mnist_eval", {"pairs": '["4->9"]', "n_images": "50"})
    assert out["pairs"] == ["4->9"] and out["n_images"] == 50
    with pytest.raises(ValueError, match="unknown model"):
        chapters.check("mnist_bayesian", {"models": '["ensemble"]'})
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="use device='cpu'"):
            chapters.check("mnist_eval", {"device": "cuda"})


def test_a_notebook_names_a_misspelt_parameter():
    ns = {"profile": "smoke", "device": "cpu", "train_seed": 0, "data_seed": 0,
          "dataset": "mnist", "pairs": None,
          "n_images": None, "methods": None, "results_name": "mnist_eval",
          "results_dir": "_build/test-results", "n_image": 12, "In": [], "get_ipython": print}
    with pytest.raises(ValueError, match="unknown parameter.*n_image"):
        chapters.parameters("c3lt_table.py", ns)
    del ns["n_image"]
    assert chapters.parameters("c3lt_table.py", ns).profile == "smoke"


# -- data files ----------------------------------------------------------------------------------
@pytest.fixture
def data_copy(tmp_path, monkeypatch):
    """A copy of the MNIST test files in a fresh data root (with or without checksums)."""
    from cflib.bench import data

    src = data.data_root()
    if not (src / "MNIST" / "raw" / "t10k-images-idx3-ubyte").exists():
        pytest.skip("MNIST not in the data root")
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for f in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        shutil.copy(src / "MNIST" / "raw" / f, raw / f)
    monkeypatch.setenv("CFLIB_DATA", str(tmp_path))
    data._load.cache_clear()
    yield tmp_path
    data._load.cache_clear()


def _no_download(monkeypatch):
    """Any torchvision download attempt fails the test (cflib never downloads)."""
    import torchvision

    for cls in (torchvision.datasets.MNIST, torchvision.datasets.FashionMNIST):
        monkeypatch.setattr(cls, "download", lambda self: pytest.fail("tried to download"))
        monkeypatch.setattr(cls, "__init__", lambda self, *a, **k: pytest.fail("torchvision"))


def test_missing_data_names_the_folder_and_the_variable(data_copy, monkeypatch):
    from cflib.bench import data

    (data_copy / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").unlink()
    _no_download(monkeypatch)
    before = sorted(p.name for p in (data_copy / "MNIST" / "raw").iterdir())
    with pytest.raises(FileNotFoundError, match=r"t10k-labels-idx1-ubyte.*in .*CFLIB_DATA="
                                                r".*never downloads"):
        data.load_split("mnist", "test")
    assert sorted(p.name for p in (data_copy / "MNIST" / "raw").iterdir()) == before


def test_a_truncated_file_is_named_as_truncated(data_copy):
    from cflib.bench import data

    f = data_copy / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    f.write_bytes(f.read_bytes()[:-1000])
    with pytest.raises(ValueError, match="truncated"):
        data.load_split("mnist", "test")


def test_same_size_corruption_fails_its_checksum(data_copy):
    import hashlib

    from cflib.bench import data

    f = data_copy / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    labels = data_copy / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    good = f.read_bytes()
    (data_copy / "SHA256SUMS").write_text(
        f"{hashlib.sha256(good).hexdigest()}  MNIST/raw/t10k-images-idx3-ubyte\n"
        f"{hashlib.sha256(labels.read_bytes()).hexdigest()}  MNIST/raw/t10k-labels-idx1-ubyte\n")
    bad = bytearray(good)
    bad[5000:5784] = bytes(784)             # one image overwritten, same size
    f.write_bytes(bytes(bad))
    with pytest.raises(ValueError, match="checksum"):
        data.load_split("mnist", "test")


def test_labels_out_of_range_are_refused(data_copy):
    from cflib.bench import data

    f = data_copy / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    raw = bytearray(f.read_bytes())
    raw[8 + 17] = 200
    f.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"\[200\] outside 0\.\.9"):
        data.load_split("mnist", "test")


# -- the weight cache ---------------------------------------------------------------------------
def _net():
    torch.manual_seed(0)
    return nn.Linear(4, 2)


def _train_once(calls):
    def train(m):
        calls.append(1)
        with torch.no_grad():
            m.weight.add_(1.0)
        return {"trained": True}
    return train


def test_an_unwritable_cache_fails_before_training(tmp_path, monkeypatch):
    from cflib.cache import cached

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("CFLIB_CACHE", str(blocker))
    calls = []
    with pytest.raises(PermissionError, match="CFLIB_CACHE"):
        cached("toy", {"seed": 0}, _net, _train_once(calls))
    assert calls == []


def test_a_zero_filled_file_fails_its_checksum_and_is_retrained(tmp_cache):
    from cflib.cache import cache_path, cached

    calls = []
    m1, _ = cached("toy", {"seed": 0}, _net, _train_once(calls))
    path = cache_path("toy", {"seed": 0})
    payload = torch.load(path, weights_only=True)
    payload["state_dict"] = {k: torch.zeros_like(v) for k, v in payload["state_dict"].items()}
    torch.save(payload, path)
    m2, _ = cached("toy", {"seed": 0}, _net, _train_once(calls))
    assert len(calls) == 2 and torch.equal(m1.weight, m2.weight)


def test_a_partly_matching_file_never_warm_starts_training(tmp_cache):
    from cflib.cache import cache_path, cached

    calls = []
    cfg = {"seed": 0}
    path = cache_path("toy", cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the right config, but only the bias (with a huge value) and a stray key
    from cflib.cache import FORMAT, _normalise, keyed
    torch.save({"format": FORMAT, "config": _normalise(keyed(cfg)),
                "state_dict": {"bias": torch.full((2,), 99.0), "extra": torch.ones(1)},
                "info": {}}, path)
    m, info = cached("toy", cfg, _net, _train_once(calls))
    assert calls == [1] and info == {"trained": True}
    assert (m.bias.abs() < 1).all()           # trained from a fresh build, not from 99


def test_the_readme_is_never_emptied(tmp_path):
    from cflib.book.report import update_readme

    readme = tmp_path / "README.md"
    text = "intro\n<!-- summary:start -->\nold tables\n<!-- summary:end -->\n"
    readme.write_text(text)
    with pytest.raises(FileNotFoundError, match="lacks"):
        update_readme(readme, tmp_path / "no-results", page=tmp_path / "results.md")
    assert readme.read_text() == text and not (tmp_path / "results.md").exists()


def test_a_failed_chapter_run_replaces_nothing(tmp_path):
    """cross_dataset reads the two C3LT results files; without them the kernel fails."""
    from cflib.book.runs.execute import build

    readme = Path(__file__).parents[1] / "README.md"
    readme_before = readme.read_bytes()
    out, res = tmp_path / "chapters", tmp_path / "results"
    out.mkdir()
    res.mkdir()
    before = {"notebook": b'{"cells": [], "nbformat": 4}', "results": b"a,b\n1,2\n"}
    (out / "cross_dataset.ipynb").write_bytes(before["notebook"])
    (res / "cross_dataset.csv").write_bytes(before["results"])
    with pytest.raises(RuntimeError, match="nothing was replaced"):
        build("cross_dataset", profile="smoke", out_dir=out, results_dir=res)
    assert (out / "cross_dataset.ipynb").read_bytes() == before["notebook"]
    assert (res / "cross_dataset.csv").read_bytes() == before["results"]
    assert sorted(p.name for p in res.iterdir()) == ["cross_dataset.csv"]
    assert readme.read_bytes() == readme_before


# -- the remaining reproductions of the hostile probe ------------------------------------------
def test_a_string_target_is_named_before_compute(tiny_classifier, q, monkeypatch):
    monkeypatch.setattr(AdvAttack, "_generate", lambda *a, **k: pytest.fail("computed"))
    with pytest.raises(ValueError, match="got str '9'"):
        adv(tiny_classifier).explain(q, "9")


def test_a_sigmoid_model_is_refused_with_the_fix(tiny_classifier, q):
    with pytest.raises(ValueError, match="one-vs-rest probabilities.*drop the final sigmoid"):
        adv(nn.Sequential(tiny_classifier, nn.Sigmoid())).explain(q, 1)


class _LogitsAndFeatures(nn.Module):
    """A classifier as users write them: ``(logits, features)``."""

    def __init__(self, clf):
        super().__init__()
        self.clf = clf

    def forward(self, x):
        return self.clf(x), x.flatten(1)


def test_a_tuple_output_model_is_explained_on_its_logits(tiny_classifier, q):
    plain = AdvAttack(tiny_classifier, steps=3).explain(q, 1, seed=0)
    wrapped = AdvAttack(_LogitsAndFeatures(tiny_classifier), steps=3).explain(q, 1, seed=0)
    assert torch.equal(plain.x_cf, wrapped.x_cf) and torch.equal(plain.success, wrapped.success)


@pytest.mark.parametrize("build, match", [
    (lambda c: AdvAttack(c, eps=float("nan")), "eps must be a finite number, got nan"),
    (lambda c: AdvAttack(c, alpha=float("inf")), "alpha must be a finite number"),
    (lambda c: AdvAttack(c, steps=2.5), "steps must be int, got float 2.5"),
    (lambda c: CEM(c, max_iterations="10"), "max_iterations must be int"),
    (lambda c: PSCE(c, outer_iters=True), "outer_iters must be int"),
])
def test_non_finite_and_mistyped_config_values_are_refused(build, match, tiny_classifier):
    with pytest.raises((ValueError, TypeError), match=match):
        build(tiny_classifier)


def test_a_float64_model_runs_in_its_own_dtype(tiny_classifier, q):
    import copy

    m64 = copy.deepcopy(tiny_classifier).double()
    cf = AdvAttack(m64, steps=2).explain(q, 1)
    assert cf.x_cf.dtype == torch.float64 and not torch.equal(cf.x_cf, cf.x)   # it searched
    assert next(tiny_classifier.parameters()).dtype == torch.float32   # the caller's untouched


def test_class_subset_refuses_a_negative_count():
    from cflib.bench.data import class_subset

    x, y = torch.zeros(6, 1, 28, 28), torch.tensor([4, 4, 4, 1, 1, 4])
    with pytest.raises(ValueError, match="n must be an int >= 1.*got -5"):
        class_subset(x, y, 4, n=-5)
    assert len(class_subset(x, y, 4, n=2)[0]) == 2


@pytest.mark.parametrize("value", ["abc", "0", "9999", "1.5", "-1"])
def test_a_bad_thread_count_is_refused_before_any_work(value, monkeypatch):
    from cflib import env

    monkeypatch.setenv("CFLIB_THREADS", value)
    with pytest.raises(ValueError, match=f"CFLIB_THREADS='{value}' is not valid"):
        env.check_all()


def test_a_file_without_a_checksum_is_retrained_not_re_signed(tmp_cache):
    from cflib.cache import cache_path, cached

    calls = []
    cached("toy", {"seed": 0}, _net, _train_once(calls))
    path = cache_path("toy", {"seed": 0})
    payload = torch.load(path, weights_only=True)
    del payload["sha256"]
    payload["state_dict"] = {k: torch.zeros_like(v) for k, v in payload["state_dict"].items()}
    torch.save(payload, path)
    m, _ = cached("toy", {"seed": 0}, _net, _train_once(calls))
    assert len(calls) == 2 and m.weight.abs().sum() > 0
    assert "sha256" in torch.load(path, weights_only=True)      # written anew, signed


def test_a_failed_cache_write_keeps_the_trained_network(tmp_cache, monkeypatch, caplog):
    import logging

    from cflib import cache

    def full_disk(obj, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache, "atomic_save", full_disk)
    calls = []
    with caplog.at_level(logging.WARNING, logger="cflib"):
        m, info = cache.cached("toy", {"seed": 0}, _net, _train_once(calls))
    assert len(calls) == 1 and m.weight.abs().sum() > 0
    assert "No space left on device" in caplog.text and "kept in memory" in caplog.text
    assert not cache.cache_path("toy", {"seed": 0}).exists()


def test_a_malformed_checksum_line_names_the_file(tmp_path):
    from cflib.bench.data import checksums

    (tmp_path / "SHA256SUMS").write_text(f"{'a' * 64}  MNIST/raw/a\nnot-a-checksum-line\n")
    with pytest.raises(ValueError, match=r"SHA256SUMS.*line 2"):
        checksums(tmp_path)


def test_a_book_run_gives_each_chapter_only_the_parameters_it_declares():
    """`cflib book --profile smoke` hands every chapter the run's profile, seeds and device;
    a chapter that draws nothing (cross_dataset) declares no seed and must not get one."""
    from cflib.book.chapters import CHAPTERS, check, run_params

    run = {"profile": "smoke", "train_seed": 1, "data_seed": 2, "device": "cpu"}
    for name in CHAPTERS:
        params = check(name, run_params(name, run))
        assert params["profile"] == "smoke"
    assert "train_seed" not in run_params("cross_dataset", run)
    with pytest.raises(ValueError, match="unknown parameter"):
        check("cross_dataset", run)


# -- issue 27: honest refusals ------------------------------------------------------------------
def _state(model: nn.Module):
    """Everything an explainer must leave as it was: modes, flags and weights."""
    return ([m.training for m in model.modules()], [p.requires_grad for p in model.parameters()],
            {k: v.detach().clone() for k, v in model.state_dict().items()})


def _same_state(a, b) -> bool:
    return a[0] == b[0] and a[1] == b[1] and a[2].keys() == b[2].keys() and all(
        torch.equal(a[2][k], b[2][k]) for k in a[2])


def _bright(q):
    """A valid [-1, 1] batch with no value below 0 (what [0, 1] data also looks like)."""
    return q.clamp(min=0.0)


def test_a_valid_batch_without_dark_pixels_is_explained_with_a_warning(tiny_classifier, q):
    import warnings

    from cflib.tensors import RangeWarning

    xb = _bright(q)
    assert xb.min() >= 0 and xb.max() <= 1
    with pytest.warns(RangeWarning, match=r"x has no value below 0: it looks like \[0, 1\] data"
                                          r".*expects \[-1, 1\].*x \* 2 - 1.*assume_range=True"):
        cf = adv(tiny_classifier).explain(xb, 1)
    assert torch.equal(cf.x, xb)                                  # used as given, not rescaled
    with warnings.catch_warnings():
        warnings.simplefilter("error")                            # any warning fails
        quiet = adv(tiny_classifier).explain(xb, 1, assume_range=True)
    assert torch.equal(quiet.x_cf, cf.x_cf)


def _toy_c3lt(clf):
    from cflib.explainers import C3LT

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 100)

        def forward(self, x):
            return self.fc(x.flatten(1))[:, :, None, None]

    class Dec(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(100, 784)

        def forward(self, z):
            return torch.tanh(self.fc(z.flatten(1))).view(-1, 1, 28, 28)

    return C3LT(clf, generator=Dec(), encoder=Enc(), epochs=1, gamma=0.0)


def _expgan_transform(clf, x, **kw):
    from cflib.explainers import ExpGAN

    class Fitted(ExpGAN):            # as if fitted on images of another shape
        net, pair, image_shape = nn.Identity(), (0, 1), (1, 8, 8)

    return Fitted(clf, epochs=1).transform(x, 1, **kw)


def _latent_solve(clf, x, **kw):
    from cflib.explainers import LatentRecourse
    from cflib.models import LatentAutoencoder

    return LatentRecourse(clf, autoencoder=LatentAutoencoder(), latent="raw").solve(x, 99, **kw)


# every caller of check_images, each stopped by a ValueError the check does not raise
CALLERS = {
    "explain": (lambda clf, x, **kw: adv(clf).explain(x, 10, **kw), r"0\.\.9"),
    "OriginalData.fit": (lambda clf, x, **kw: __import__("cflib.explainers", fromlist=["x"])
                         .OriginalData(clf).fit(x, [0], **kw), "labels"),
    "CVE.fit": (lambda clf, x, **kw: CVE(clf).fit(x, [0], **kw), "labels"),
    "ExpGAN.fit": (lambda clf, x, **kw: __import__("cflib.explainers", fromlist=["x"])
                   .ExpGAN(clf, epochs=1).fit(x, x, pair=(1, 1), **kw), "different classes"),
    "ExpGAN.transform": (_expgan_transform, r"trained on \(1, 8, 8\) images"),
    "C3LT.fit": (lambda clf, x, **kw: _toy_c3lt(clf).fit(x, x[:, :, :14], **kw), "differ in shape"),
    "LatentRecourse.solve": (_latent_solve, r"0\.\.9"),
}


@pytest.mark.parametrize("caller", sorted(CALLERS))
def test_every_caller_of_the_range_check_warns_and_takes_assume_range(caller, tiny_classifier, q):
    import warnings

    from cflib.tensors import RangeWarning

    call, stop = CALLERS[caller]
    with pytest.warns(RangeWarning, match="looks like"), pytest.raises(ValueError, match=stop):
        call(tiny_classifier, _bright(q))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=stop):
            call(tiny_classifier, _bright(q), assume_range=True)


def test_the_range_check_refuses_only_what_is_certain():
    import warnings

    from cflib.tensors import check_images

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_images(torch.full((2, 1, 4, 4), -1.0))              # all black
        check_images(torch.linspace(-1, 1, 32).view(2, 1, 4, 4))  # the full range
        check_images(torch.full((2, 1, 4, 4), 1.00009))           # rounding past 1
        check_images(torch.zeros(2, 1, 4, 4))                     # constant: no hint
    with pytest.raises(ValueError, match=r"span \[0, 255\] \(x / 127\.5 - 1 for images in "
                                         r"0\.\.255\)"):
        check_images(torch.tensor([0.0, 255.0]).repeat(8).view(1, 1, 4, 4))
    # data reaching -1 is not [0, 1] data: a slight overshoot is told to clamp, not to
    # rescale (the advice was "x * 2 - 1"); [0, 1.5] data is told to rescale
    with pytest.raises(ValueError, match=r"span \[-1, 1\.01\] \(it overshoots .*clamp"):
        check_images(torch.tensor([-1.0, 1.01]).repeat(8).view(1, 1, 4, 4))
    with pytest.raises(ValueError, match=r"span \[0, 1\.2\] \(x \* 2 - 1 for images in \[0, 1\]"):
        check_images(torch.tensor([0.0, 1.2]).repeat(8).view(1, 1, 4, 4))
    with pytest.raises(ValueError, match=r"span \[-3, 3\] \(rescale it to \[-1, 1\]"):
        check_images(torch.tensor([-3.0, 3.0]).repeat(8).view(1, 1, 4, 4))


class _NaNWhereMarked(nn.Module):
    """The classifier, with ``value`` as every score of the images whose first pixel is 0.5
    (``cls`` set: that class's score only)."""

    def __init__(self, clf, value=float("nan"), cls=None):
        super().__init__()
        self.clf, self.value, self.cls = clf, value, cls

    def forward(self, x):
        out = self.clf(x)
        mark = (x[:, 0, 0, 0] == 0.5)[:, None]
        cols = torch.ones_like(out, dtype=torch.bool) if self.cls is None else (
            torch.arange(out.shape[1]) == self.cls)[None]
        return torch.where(mark & cols, torch.tensor(self.value, dtype=out.dtype), out)


@pytest.mark.parametrize("value, cls, n, where", [
    (float("nan"), None, 4, "on the first 4 images"),       # the first forward
    (float("inf"), 3, 4, "on the first 4 images"),
    (float("-inf"), 5, 4, "on the first 4 images"),         # softmax would hide it
    (float("nan"), None, 20, "on the query images"),        # past the first 16: explain's
])
def test_non_finite_scores_are_refused_before_the_search(value, cls, n, where, tiny_classifier,
                                                         bars, monkeypatch):
    x, y = bars
    xb = x[y == 0][:n].clone()
    xb[-1, 0, 0, 0] = 0.5
    model = _NaNWhereMarked(tiny_classifier, value, cls)
    monkeypatch.setattr(AdvAttack, "_generate", lambda *a, **k: pytest.fail("searched"))
    state, rng = _state(tiny_classifier), torch.get_rng_state()
    with pytest.raises(ValueError, match=rf"the classifier's output holds 1[0 ]*.*NaN or "
                                         rf"infinite score\(s\) {where}.*finite logits"):
        adv(model).explain(xb, 1)
    assert _same_state(state, _state(tiny_classifier))
    assert torch.equal(rng, torch.get_rng_state())


def test_finite_scores_pass_the_check(tiny_classifier, bars):
    x, y = bars
    cf = adv(_NaNWhereMarked(tiny_classifier)).explain(x[y == 0][:20], 1)   # nothing marked
    assert len(cf) == 20 and (cf.x_cf != cf.x).flatten(1).any(1).all()   # every one searched


def test_a_meta_model_is_refused_when_built(tiny_classifier):
    import copy

    meta = copy.deepcopy(tiny_classifier).to("meta")
    for build in (lambda m: AdvAttack(m), lambda m: CEM(m), lambda m: PSCE(m)):
        with pytest.raises(ValueError, match=r"the classifier is on the 'meta' device.*"
                                             r"to_empty\(device='cpu'\)"):
            build(meta)


def test_a_meta_batch_is_refused_before_any_work(tiny_classifier, q, monkeypatch):
    monkeypatch.setattr(AdvAttack, "_generate", lambda *a, **k: pytest.fail("computed"))
    state, rng = _state(tiny_classifier), torch.get_rng_state()
    with pytest.raises(ValueError, match="x is on the 'meta' device"):
        adv(tiny_classifier).explain(q.to("meta"), 1)
    with pytest.raises(ValueError, match="x_pool is on the 'meta' device"):
        CVE(tiny_classifier).fit(q.to("meta"), [0, 0, 0, 0])
    assert _same_state(state, _state(tiny_classifier)) and torch.equal(rng, torch.get_rng_state())


def test_a_network_on_another_device_than_the_classifier_is_refused(tiny_classifier):
    """``_check_same_device``, on a CPU-only machine: the other device is ``meta``."""
    from cflib.explainers import C3LT, LatentRecourse
    from cflib.models import ConvAutoencoder, LatentAutoencoder

    ae = ConvAutoencoder().to("meta")
    with pytest.raises(ValueError, match=r"the autoencoder is on meta but the classifier on cpu;"
                                         r" move it first \(autoencoder\.to\('cpu'\)\)"):
        CEM(tiny_classifier, autoencoder=ae)
    with pytest.raises(ValueError, match=r"the autoencoder\[4\] is on meta"):
        PSCE(tiny_classifier, autoencoder={3: ConvAutoencoder(), 4: ae})
    with pytest.raises(ValueError, match="the encoder is on meta but the classifier on cpu"):
        C3LT(tiny_classifier, generator=nn.Linear(2, 2), encoder=nn.Linear(2, 2).to("meta"))
    with pytest.raises(ValueError, match="the autoencoder is on meta"):
        LatentRecourse(tiny_classifier, autoencoder=LatentAutoencoder().to("meta"), latent="raw")
    assert next(ae.parameters()).device.type == "meta"          # never moved
    assert next(tiny_classifier.parameters()).device.type == "cpu"


@pytest.mark.parametrize("seed", [2 ** 63, 2 ** 70, -1])
def test_a_seed_outside_the_64_bit_range_is_refused_before_any_work(seed, tiny_classifier, q,
                                                                    monkeypatch):
    monkeypatch.setattr(AdvAttack, "_generate", lambda *a, **k: pytest.fail("computed"))
    rng = torch.get_rng_state()
    with pytest.raises(ValueError, match=rf"seed must be in 0\.\.2\*\*63-1.*got {seed}"):
        adv(tiny_classifier).explain(q, 1, seed=seed)
    assert torch.equal(rng, torch.get_rng_state())


def test_the_largest_seed_is_taken(tiny_classifier, q):
    a = AdvAttack(tiny_classifier, steps=1).explain(q, 1, seed=2 ** 63 - 1)
    b = AdvAttack(tiny_classifier, steps=1).explain(q, 1, seed=2 ** 63 - 1)
    assert torch.equal(a.x_cf, b.x_cf) and a.meta["seed"] == 2 ** 63 - 1


@pytest.mark.parametrize("build, match", [
    (lambda: C3LTConfig(seed=2 ** 63), r"C3LTConfig\.seed must be in 0\.\.2\*\*63-1"),
    (lambda: ExpGANConfig(seed=-1), r"ExpGANConfig\.seed must be in 0\.\.2\*\*63-1.*got -1"),
])
def test_config_seeds_outside_the_range_are_refused(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_run_seeds_outside_the_range_are_refused():
    from cflib.bench.seeds import Seeds, train_seed

    for bad in (dict(train=2 ** 63), dict(data=-1), dict(data=2 ** 70)):
        with pytest.raises(ValueError, match=r"seed must be an int >= 0 \(in 0\.\.2\*\*63-1"):
            Seeds(**bad)
    top = Seeds(train=2 ** 63 - 1, data=2 ** 63 - 1)
    assert top("classifier") == 2 ** 63 - 1                  # offset 0: still in range
    with pytest.raises(ValueError, match=r"gives the 'feature_net' seed .* outside "
                                         r"0\.\.2\*\*63-1; use a smaller seed"):
        top("feature_net")                                   # offset 1000
    with pytest.raises(ValueError, match=r"gives the 'bayes_fresh' seed"):
        top("bayes_fresh")
    with pytest.raises(ValueError, match=r"0\.\.2\*\*63-1"):
        train_seed("dcgan", 2 ** 64)


def test_a_cache_entry_with_a_seed_outside_the_range_trains_nothing(tmp_cache):
    from cflib.cache import cached

    calls = []
    with pytest.raises(ValueError, match=r"seed must be in 0\.\.2\*\*63-1.*got 1180591620717"):
        cached("toy", {"seed": 2 ** 70}, _net, _train_once(calls))
    assert calls == [] and not tmp_cache.exists()


# -- devices ------------------------------------------------------------------------------------
def test_check_device_names_the_fix():
    from cflib.tensors import check_device

    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("cpu")).type == "cpu"
    with pytest.raises(ValueError, match=r"cannot read device 'gpu0'.*use device='cpu' or "
                                         r"'cuda'"):
        check_device("gpu0")
    with pytest.raises(ValueError, match=r"device='meta' holds no data.*use device='cpu'"):
        check_device("meta")
    with pytest.raises(ValueError, match=r"'mps' is not supported; use device='cpu' or 'cuda'"):
        check_device("mps")
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        with pytest.raises(ValueError, match=rf"this machine has {n} CUDA device"):
            check_device(f"cuda:{n}")
    else:
        for dev in ("cuda", "cuda:0", "cuda:3", torch.device("cuda")):
            with pytest.raises(ValueError, match=r"CUDA is not available here; use "
                                                 r"device='cpu'"):
                check_device(dev)


no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")


def _zoo_calls():
    from cflib.bench import zoo

    return {
        "classifier": lambda d: zoo.classifier("mnist", "smoke", device=d),
        "feature_net": lambda d: zoo.feature_net("mnist", "smoke", device=d),
        "judge_classifier": lambda d: zoo.judge_classifier("mnist", "smoke", device=d),
        "judge_resnet": lambda d: zoo.judge_resnet("mnist", "smoke", device=d),
        "judge_mlp": lambda d: zoo.judge_mlp("mnist", "smoke", device=d),
        "judges": lambda d: zoo.judges("mnist", "smoke", device=d),
        "autoencoder": lambda d: zoo.autoencoder("mnist", 4, "smoke", device=d),
        "dcgan": lambda d: zoo.dcgan("mnist", "smoke", device=d),
        "c3lt_encoder": lambda d: zoo.c3lt_encoder("mnist", "smoke", device=d),
        "c3lt_pair_encoder": lambda d: zoo.c3lt_pair_encoder("mnist", (4, 9), "smoke", device=d),
        "mc_dropout_classifier": lambda d: zoo.mc_dropout_classifier("mnist", "smoke", device=d),
        "bnn_classifier": lambda d: zoo.bnn_classifier("mnist", "smoke", device=d),
        "small_cnn": lambda d: zoo.small_cnn("fmnist", "smoke", device=d),
        "small_cnn_retrained": lambda d: zoo.small_cnn_retrained("fmnist", "smoke", device=d),
        "latent_autoencoder": lambda d: zoo.latent_autoencoder("fmnist", "smoke", device=d),
        "kd_student": lambda d: zoo.kd_student("fmnist", "smoke", device=d),
        "quantized": lambda d: zoo.quantized("PTQ INT8", "fmnist", "smoke", device=d),
    }


def test_every_zoo_function_with_a_device_is_in_the_list():
    import inspect

    from cflib.bench import zoo

    takes = {n for n, f in inspect.getmembers(zoo, inspect.isfunction)
             if f.__module__ == zoo.__name__ and not n.startswith("_")
             and "device" in inspect.signature(f).parameters}
    assert takes == set(_zoo_calls())


def _runner_calls():
    from cflib.bench.tables import bayes, c3lt, quant

    return {
        # a table's run: its spec checks the arguments (RunArgs), the runner trusts them
        "run_c3lt_table": lambda d: c3lt.C3LT_MNIST.run(c3lt.C3LT_MNIST.args("smoke",
                                                                          device=d)),
        "load_eval_models": lambda d: c3lt.load_eval_models("mnist", [4, 9], "smoke", device=d),
        "bayes_model": lambda d: bayes.bayes_model("mnist", "mc_dropout", "smoke", device=d),
        "run_bayesian": lambda d: bayes.run_bayesian("mnist", profile="smoke", device=d),
        "run_bayesian_table": lambda d: bayes.BAYES.run(bayes.BAYES.args("smoke", device=d)),
        "run_quant": lambda d: quant.run_quant("fmnist", "smoke", device=d),
        "run_quant_table": lambda d: quant.QUANT.run(quant.QUANT.args("smoke", device=d)),
    }


@no_cuda
@pytest.mark.parametrize("kind, name", [("zoo", n) for n in sorted(_zoo_calls())]
                         + [("runner", n) for n in sorted(_runner_calls())])
def test_cuda_without_cuda_is_refused_at_the_entry(kind, name, tmp_cache):
    """Before any data is read, any network built or any cache entry touched."""
    from cflib.bench import data

    call = (_zoo_calls() if kind == "zoo" else _runner_calls())[name]
    read = data.files_read()
    data._load.cache_clear()
    with pytest.raises(ValueError, match=r"device='cuda': CUDA is not available here; use "
                                         r"device='cpu'"):
        call("cuda")
    assert data._load.cache_info().misses == 0 and data.files_read() == read
    assert not tmp_cache.exists()


@no_cuda
def test_the_cache_checks_the_device_before_building(tmp_cache):
    from cflib.cache import cached

    built, calls = [], []
    with pytest.raises(ValueError, match="CUDA is not available here"):
        cached("toy", {"seed": 0}, lambda: built.append(1) or _net(), _train_once(calls), "cuda")
    assert built == [] and calls == [] and not tmp_cache.exists()


# -- data ----------------------------------------------------------------------------------------
def test_a_file_the_checksums_do_not_list_is_refused(data_copy):
    import hashlib

    from cflib.bench import data

    images = data_copy / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    (data_copy / "SHA256SUMS").write_text(
        f"{hashlib.sha256(images.read_bytes()).hexdigest()}  MNIST/raw/t10k-images-idx3-ubyte\n")
    match = (r"MNIST/raw/t10k-labels-idx1-ubyte is not listed in .*SHA256SUMS.*add its line "
             r"\('<sha256>  MNIST/raw/t10k-labels-idx1-ubyte'\) or remove SHA256SUMS")
    with pytest.raises(ValueError, match=match):
        data.load_split("mnist", "test")
    with pytest.raises(ValueError, match=match):
        data.check_data("mnist", "test")
    (data_copy / "SHA256SUMS").unlink()                     # no SHA256SUMS: sizes and headers
    assert len(data.load_split("mnist", "test")[0]) == 10000


def test_check_data_finds_a_missing_root_or_file_before_any_work(tmp_path, monkeypatch,
                                                                 data_copy):
    from cflib.bench import data

    assert data.check_data("mnist", "test") == data_copy     # what data_copy holds
    with pytest.raises(FileNotFoundError, match=r"MNIST files not found: "
                                                r"\['MNIST/raw/train-images-idx3-ubyte', "
                                                r"'MNIST/raw/train-labels-idx1-ubyte'\].*"
                                                r"CFLIB_DATA="):
        data.check_data(["mnist"])                           # no train split in the copy
    with pytest.raises(FileNotFoundError, match=r"Fashion-MNIST files not found.*FashionMNIST"):
        data.check_data("fmnist", "test")
    nowhere = tmp_path / "nowhere"
    monkeypatch.setenv("CFLIB_DATA", str(nowhere))
    _no_download(monkeypatch)
    with pytest.raises(FileNotFoundError, match=rf"the data root {nowhere} does not exist "
                                                rf"\(CFLIB_DATA={nowhere}\).*never downloads"):
        data.check_data("mnist")
    assert not nowhere.exists()
    with pytest.raises(ValueError, match="unknown split 'val'"):
        data.check_data("mnist", "val")


def test_the_table_runners_check_the_data_before_any_network(tmp_path, tmp_cache, monkeypatch):
    from cflib.bench.tables import bayes, c3lt, quant

    monkeypatch.setenv("CFLIB_DATA", str(tmp_path / "nowhere"))
    _no_download(monkeypatch)
    for run in (lambda: c3lt.C3LT_MNIST.run(c3lt.C3LT_MNIST.args("smoke")),
                lambda: bayes.run_bayesian("mnist", profile="smoke"),
                lambda: bayes.BAYES.run(bayes.BAYES.args("smoke")),
                lambda: quant.QUANT.run(quant.QUANT.args("smoke"))):
        with pytest.raises(FileNotFoundError, match="does not exist.*CFLIB_DATA"):
            run()
    assert not tmp_cache.exists()


def test_a_hand_run_into_the_committed_results_is_refused():
    """papermill by hand with results_dir pointing into the book's results/ (or book/): the
    parameters check refuses before any work; only the book's own run writes there."""
    ns = {"profile": "smoke", "device": "cpu", "train_seed": 0, "data_seed": 0,
          "dataset": "mnist", "pairs": None, "n_images": None, "methods": None,
          "results_name": "mnist_eval", "In": [], "get_ipython": print}
    for folder in ("results", "results/", "results/sweep", "./book/chapters", "_build/../results"):
        with pytest.raises(ValueError, match="inside the book's committed"):
            chapters.parameters("c3lt_table.py", {**ns, "results_dir": folder})


@pytest.mark.parametrize("name", ["../../results/mnist_eval", "a/b", "..", "x..y", "", ".hidden"])
def test_a_results_name_with_a_folder_is_refused(name):
    with pytest.raises(ValueError, match="results_name must be a plain file name"):
        chapters.check("mnist_eval", {"profile": "smoke", "results_name": name})


# -- where a run writes: never over a committed file, whatever the current folder ----------
def _git_status() -> str:
    import subprocess

    return subprocess.run(["git", "status", "--porcelain", "--", "results", "book"],
                          cwd=chapters.PROJECT_ROOT, capture_output=True, text=True).stdout


@pytest.mark.parametrize("cwd, folder, match", [
    ("results", ".", "inside the book's committed results/"),
    ("book", "chapters", "inside the book's committed book/"),
    ("book/chapters", "../../results", "inside the book's committed results/"),
    (".", ".", "under version control"),
    (".", "cflib", "under version control"),
    (".", "README.md", "is a file"),
])
def test_a_chapter_run_never_writes_over_committed_files(cwd, folder, match, monkeypatch):
    """``results_dir`` is resolved against the current folder, as the shell means it, and
    refused before any kernel starts when it lands in the committed tree."""
    from cflib.book.runs import cli, execute

    monkeypatch.chdir(chapters.PROJECT_ROOT / cwd)
    monkeypatch.setattr(execute, "execute", lambda run: pytest.fail("a kernel started"))
    before = _git_status()
    with pytest.raises(SystemExit, match=match):      # one line, no traceback
        cli.main(["mnist_eval", "--profile", "smoke", "-p", "results_dir", folder,
                  "-p", "methods", '["Adv. Attack"]', "-p", "pairs", '["4->9"]'])
    assert _git_status() == before


def test_a_planted_link_in_the_runs_folder_is_refused(tmp_path, monkeypatch):
    """A symbolic link at ``_build/runs/<tag>`` that points into ``results/`` is followed
    and refused, with no parameter at all."""
    from cflib.book.runs import cli, execute

    params = chapters.check("mnist_eval", {"profile": "smoke"})
    link = chapters.run_folder("mnist_eval", params)
    if link.exists() or link.is_symlink():
        pytest.skip(f"{link} exists (a real run's folder): not replaced by a test")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(chapters.RESULTS_DIR, target_is_directory=True)
    monkeypatch.setattr(execute, "execute", lambda run: pytest.fail("a kernel started"))
    before = _git_status()
    try:
        with pytest.raises(SystemExit, match=r"results/ \(it resolves to"):
            cli.main(["mnist_eval", "--profile", "smoke"])
    finally:
        link.unlink()
    assert _git_status() == before


def test_a_folder_of_ones_own_inside_the_clone_is_accepted(tmp_path):
    from cflib.book.runs.paths import check_output_dir

    mine = chapters.PROJECT_ROOT / "_build" / "mine-test"
    assert check_output_dir(mine) == mine.resolve()
    assert check_output_dir(tmp_path) == tmp_path.resolve()


@pytest.mark.parametrize("field, value, says", [
    ("steps", "many", "PlainConfig.steps must be int, got str 'many'"),
    ("steps", 50.5, "PlainConfig.steps must be int, got float 50.5"),
    ("lr", float("nan"), "PlainConfig.lr must be a finite number, got nan"),
    ("lr", "0.1", "PlainConfig.lr must be float, got str '0.1'"),
    ("margin", "x", "PlainConfig.margin"),
])
def test_a_config_without_the_future_import_is_checked_too(field, value, says):
    """A user's config module written without ``from __future__ import annotations`` (its
    annotations are objects): every field is checked as in cflib's own configs."""
    from tests.fixtures.plain_config import PlainConfig

    with pytest.raises(ValueError, match=re.escape(says)):
        PlainConfig(**{field: value})
    assert PlainConfig(steps=3, lr=0.5, margin=None).steps == 3


@pytest.mark.parametrize("pair", ["a->b", "4->", "4->9->1", "4.5->9", ("x", 9), (4.5, 9),
                                  (True, 9), 49, None])
def test_an_unreadable_pair_is_one_clear_error(pair):
    from cflib.bench.data import parse_pair

    with pytest.raises(ValueError, match="cannot read pair .*two class numbers"):
        parse_pair(pair)
    assert parse_pair("4 -> 9") == (4, 9) and parse_pair((4.0, 9)) == (4, 9)
