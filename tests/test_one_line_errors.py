"""One clear line for each crash of the probe (issue 62): files that are not what they
should be (a folder, a FIFO, a device file, truncated, nested past the recursion limit,
of another dataset), arguments argparse or importlib would have answered with their own
words, records with a malformed entry.  Each case is built to break the guard."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cflib import io as cio
from cflib import shipped
from cflib.book.cli import main

# -- bounded reads ------------------------------------------------------------------------


def test_a_device_file_a_fifo_or_a_folder_is_refused_before_it_is_read(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((Path("/dev/zero"), "a device file"), (fifo, "a FIFO"),
                       (tmp_path, "a folder")):
        with pytest.raises(ValueError, match=kind):       # returns at once: no hang
            cio.read_bounded(path, "results file", fix="restore it")
    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(ValueError, match="larger than any results file"):
        cio.read_bounded(big, "results file", limit=1024)
    with pytest.raises(ValueError, match="is missing"):
        cio.read_bounded(tmp_path / "gone.json")


def test_json_that_is_not_json_or_too_deep_names_its_file(tmp_path):
    bad, deep, binary = tmp_path / "bad.json", tmp_path / "deep.json", tmp_path / "bin.json"
    bad.write_text('{"files": ')
    deep.write_text("[" * 100_000 + "]" * 100_000)
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match=r"bad.json is not JSON .*restore"):
        cio.read_json(bad, fix="restore it")
    with pytest.raises(ValueError, match="deep.json is nested too deep"):
        cio.read_json(deep)
    with pytest.raises(ValueError, match="bin.json is not text"):
        cio.read_json(binary)
    assert cio.read_json(_write(tmp_path / "ok.json", {"a": [1]})) == {"a": [1]}


def _write(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj))
    return path


# -- the ledger of written results files --------------------------------------------------


@pytest.mark.parametrize("ledger, match", [
    ("a string", "no mapping 'files'"),
    ({"format": 1, "files": {"x.csv": "abc"}}, "entry 'x.csv' is not a mapping with a sha256"),
    ({"format": 1, "files": {"x.csv": {"by": "me"}}}, "entry 'x.csv' is not a mapping"),
    ({"format": 1}, "no mapping 'files'"),
])
def test_a_malformed_ledger_is_named(tmp_path, ledger, match):
    from cflib.book.runs.written import LEDGER, read_ledger

    _write(tmp_path / LEDGER, ledger)
    with pytest.raises(ValueError, match=match):
        read_ledger(tmp_path)


def test_a_ledger_that_is_a_folder_or_too_deep_is_named(tmp_path):
    from cflib.book.runs.written import LEDGER, read_ledger

    (tmp_path / LEDGER).mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        read_ledger(tmp_path)
    shutil.rmtree(tmp_path / LEDGER)
    (tmp_path / LEDGER).write_text('{"files": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match="nested too deep"):
        read_ledger(tmp_path)


def test_a_missing_ledger_is_named_once(tmp_path, monkeypatch):
    from cflib.book.runs import written

    (tmp_path / "a.csv").write_text("x\n1\n")
    (tmp_path / "b.csv").write_text("x\n2\n")
    monkeypatch.setattr(written, "RESULTS_DIR", tmp_path)
    bad = written.check_written(tmp_path)
    assert len(bad) == 1 and "written.json is missing" in bad[0] and "git checkout" in bad[0]


def test_a_results_file_linked_to_a_device_is_named(tmp_path):
    from cflib.book.runs.written import check_written, record_written

    (tmp_path / "a.csv").write_text("x\n1\n")
    record_written([tmp_path / "a.csv"], "test", tmp_path)
    (tmp_path / "zero.csv").symlink_to("/dev/zero")
    bad = check_written(tmp_path)
    assert len(bad) == 1 and "zero.csv is not a plain file" in bad[0]


# -- the manifest of the shipped networks -------------------------------------------------

GOOD_SHA = "0" * 64


@pytest.mark.parametrize("doc, match", [
    ("{not json", "is not JSON"),
    ({"format": shipped.FORMAT}, "lists no networks"),
    ({"format": shipped.FORMAT, "networks": {"c-1": {"sha256": GOOD_SHA}}},
     "'c-1' has no plain file name"),
    ({"format": shipped.FORMAT, "networks": {"c-1": {"file": "../../etc/x.safetensors",
                                                    "sha256": GOOD_SHA}}},
     "'c-1' has no plain file name"),
    ({"format": shipped.FORMAT, "networks": {"c-1": {"file": "c-1.safetensors",
                                                    "sha256": None}}},
     "'c-1' has no sha256 .*the manifest is damaged, not the file"),
    ({"format": shipped.FORMAT, "networks": ["c-1"]}, "lists no networks"),
    ([1, 2], "is of format 'list'"),
])
def test_a_malformed_manifest_is_named_with_its_entry(tmp_path, doc, match):
    path = tmp_path / shipped.MANIFEST
    path.write_text(doc) if isinstance(doc, str) else _write(path, doc)
    with pytest.raises(ValueError, match=match):
        shipped.manifest(tmp_path)


# -- notebooks, CSVs, the events log, the data --------------------------------------------


@pytest.mark.parametrize("text", ["", '{"cells": [', "not a notebook"])
def test_a_truncated_or_emptied_notebook_is_named(tmp_path, text):
    from cflib.book.chapters import read_notebook

    nb = tmp_path / "mnist_eval.ipynb"
    nb.write_text(text)
    with pytest.raises(ValueError, match=r"mnist_eval.ipynb is not (a notebook|text)"):
        read_notebook(nb)


def test_a_csv_that_is_not_a_results_file_is_named(tmp_path):
    from cflib.book.runs.rerun import _comparable, _read

    odd = tmp_path / "odd.csv"
    odd.write_text('a,b\n1,"2\n')                       # an unclosed quote
    with pytest.raises(ValueError, match="odd.csv is not a results CSV"):
        _read(odd)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"lacks the column\(s\)"):
        _comparable("mnist_eval", "other.csv", _read(other), _read(other), "smoke")


def test_a_garbage_line_in_the_events_log_is_passed_over(tmp_path):
    from cflib.cache import EVENTS, events

    (tmp_path / EVENTS).write_text("garbage\n2026-01-01\ttrained\tc3lt-1\t12.5\thost:1\n"
                                   "2026-01-01\ttrained\tc3lt-2\tfast\thost:1\n")
    got = events(tmp_path)
    assert [e["entry"] for e in got] == ["c3lt-1"] and got[0]["event"] == "trained"


@pytest.mark.data
def test_the_other_datasets_files_under_this_ones_name_are_named(tmp_path):
    from cflib.bench import data

    real = data.data_root()
    (tmp_path / "MNIST" / "raw").mkdir(parents=True)
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (tmp_path / "MNIST" / "raw" / name).symlink_to(real / "FashionMNIST" / "raw" / name)
    with pytest.raises(ValueError, match="holds Fashion-MNIST's test images .* not MNIST's"):
        data._load("mnist", False, str(tmp_path))
    assert data.origin(real / "MNIST" / "raw" / "t10k-labels-idx1-ubyte") == ("mnist",
                                                                            "test labels")


# -- arguments ----------------------------------------------------------------------------


def test_a_pair_with_a_dash_reaches_the_pair_check():
    with pytest.raises(SystemExit) as e:
        main(["bench", "--method", "tests.fixtures.toy:Toy", "--tables", "c3lt-mnist",
              "--pairs", "-1->3"])
    assert "cannot read pair '-1->3'" in str(e.value)      # not argparse's words


@pytest.mark.parametrize("path", ["../../etc/passwd:x", "tests.fixtures.toy:Toy.__globals__",
                                  "tests/fixtures/toy.py:Toy"])
def test_an_import_path_that_is_no_python_name_is_refused_in_one_line(path):
    from cflib.bench.methods import resolve_method

    with pytest.raises(ValueError, match="dotted Python names") as e:
        resolve_method(path)
    assert len(str(e.value)) < 400


@pytest.mark.parametrize("out, match", [("", "is empty"), ("/proc/x", "cannot be written"),
                                        ("/etc/hostname/x", "is a file, not a folder")])
def test_an_output_folder_that_cannot_be_written_is_refused(out, match):
    from cflib.bench.folders import check_output_dir

    with pytest.raises(ValueError, match=match):
        check_output_dir(out, "--out")


def test_a_saved_file_nested_too_deep_is_named(tmp_path):
    from cflib.explainers import Counterfactuals

    (tmp_path / "x.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "x.pt").write_bytes(b"")
    with pytest.raises(ValueError, match="x.json is not a saved counterfactuals of cflib"):
        Counterfactuals.load(tmp_path / "x")


@pytest.mark.parametrize("body, match", [
    ("import sys\nsys.exit(0)\ndef fn(model, x, target):\n    return x\n", r"called sys\.exit\(0\)"),
    ("import sys\nsys.exit(3)\n", r"called sys\.exit\(3\)"),
    ("1 / 0\n", r"raised ZeroDivisionError: division by zero"),
])
def test_a_method_module_that_exits_or_raises_at_import_is_named(tmp_path, monkeypatch,
                                                                   body, match):
    """A module that ends the run (sys.exit, 0 included) or raises while it is imported
    is one ValueError naming the method and the module (it was exit 0 with nothing
    written, exit 3 with no message, or a raw traceback)."""
    import sys

    from cflib.bench.methods import resolve_method

    name = f"exits_{abs(hash(body)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=rf"method '{name}:fn': importing module '{name}' {match}"):
        resolve_method(f"{name}:fn")
    sys.modules.pop(name, None)


def test_a_method_that_exits_while_it_is_built_is_named():
    from cflib.bench.methods import probe, resolve_method
    from cflib.bench.tables.registry import SPECS

    method = resolve_method("tests.fixtures.toy:QuitsWhenBuilt")
    with pytest.raises(ValueError, match=r"QuitsWhenBuilt\(classifier, config\) called "
                                         r"sys\.exit\(0\) while being built"):
        probe(method, next(iter(SPECS.values())))


@pytest.mark.parametrize("out, says", [
    ("cflib/x-new", r"inside cflib/, which holds"),             # a new subfolder of the code
    ("book/../cflib/x-new", r"inside cflib/, which holds"),
    ("tests/fixtures/x-new", r"inside tests/, which holds"),
    (".git/x-new", r"inside the project's git folder"),
])
def test_a_bench_out_inside_the_projects_tracked_folders_is_refused(out, says):
    """Only a folder that already held tracked files was refused: `--out cflib/x` (new)
    wrote into the package, `.git/x` into git's own folder, unseen by git status."""
    import os

    from cflib.bench.compare import check_out
    from cflib.bench.data import PROJECT_ROOT

    here = os.getcwd()
    os.chdir(PROJECT_ROOT)
    try:
        with pytest.raises(ValueError, match=says):
            check_out(out)
    finally:
        os.chdir(here)
    assert not (PROJECT_ROOT / out).exists()


def test_a_link_into_the_package_is_refused_and_a_new_folder_of_ones_own_is_not(tmp_path):
    from cflib.bench.compare import check_out
    from cflib.bench.data import PROJECT_ROOT

    (tmp_path / "link").symlink_to(PROJECT_ROOT / "cflib")
    with pytest.raises(ValueError, match=r"inside cflib/"):
        check_out(tmp_path / "link" / "newdir")
    mine = PROJECT_ROOT / "my-bench-out-test"           # a new top-level folder: the user's
    assert check_out(mine) == mine.resolve() and not mine.exists()


def test_saving_counterfactuals_under_a_file_is_named(tmp_path):
    import torch

    from cflib.explainers import Wachter

    (tmp_path / "afile").write_text("x")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    cf = Wachter(model, steps=2).explain(torch.rand(2, 1, 4, 4) * 2 - 1, target=1)
    with pytest.raises(NotADirectoryError, match=r"cannot write .*afile/cf\.pt: a part of its "
                                                 r"folder is a file"):
        cf.save(tmp_path / "afile" / "cf")


@pytest.mark.parametrize("record", [{"method": "x"}, [1], {"method": "x", "config": {},
                                    "fingerprints": {}, "tensors": {"__tensor__": "gone"},
                                    "values": {}, "info": {}}])
def test_an_explainer_resealed_without_its_records_fields_is_named(tmp_path, record):
    """A fit record without its fingerprints, a list for the record, a tensor the .pt does
    not hold: with the checksum recomputed they were a KeyError or a TypeError."""
    import torch

    from cflib.explainers import Explainer
    from cflib.explainers import records as rec

    rec.write(tmp_path / "fit", {"kind": rec.FIT_KIND, "schema": rec.FIT_SCHEMA,
                                 "method": "Wachter", "config": {}, "record": record}, {})
    with pytest.raises(ValueError, match=r"fit\.json is not a whole saved explainer \(a field is "
                                         r"missing or malformed: \w+Error: .+\); save it again"):
        Explainer.load(tmp_path / "fit", torch.nn.Linear(4, 3))


@pytest.mark.parametrize("where", ["x_cf", "x"])
def test_a_saved_batch_with_a_nan_image_is_refused_on_load(tmp_path, where):
    """A NaN counterfactual saved (or written into the .pt and resealed) loaded as a
    valid batch; an image is finite numbers, and the load names the field."""
    import torch

    from cflib.explainers import Counterfactuals, Wachter

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    cf = Wachter(model, steps=2).explain(torch.rand(2, 1, 4, 4) * 2 - 1, target=1)
    getattr(cf, where)[0, 0, 0, 0] = float("nan")
    cf.save(tmp_path / "cf")
    with pytest.raises(ValueError, match=rf"field '{where}': holds torch.float32 values that "
                                         r"are not all finite"):
        Counterfactuals.load(tmp_path / "cf")
