"""The ``cflib`` command called in-process (``cflib.book.cli.main(argv)``): what ``list``,
``stale`` and ``verify`` print, and the argument errors refused before anything runs;
``-p NAME VALUE`` parsing (``cflib.book.runs.cli.parse_extra``).  ``stale`` and ``verify``
read a scratch chapters folder (the real staleness and output checks, pointed at it), so
what they print does not depend on this checkout's committed notebooks."""
from __future__ import annotations

import functools
import hashlib
import re

import nbformat
import pytest

from cflib.book import cli
from cflib.book.chapters import CHAPTERS
from cflib.book.runs import cli as runs_cli
from cflib.book.runs import digests


def test_list_prints_every_chapter_every_profile_and_each_chapters_parameters(capsys):
    cli.main(["list"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "chapters (make chapter NB=<name>):"
    for i, (name, ch) in enumerate(CHAPTERS.items()):
        assert lines[1 + i].split()[0] == name and lines[1 + i].endswith(ch.title)
    assert "profiles: smoke, standard, paper (sizes only, never the algorithm)" in lines
    sections = [ln for ln in lines if ln.startswith("parameters of ")]
    assert sections == [f"parameters of {n} (-p NAME VALUE):" for n in CHAPTERS]
    # a chapter's fixed parameter shows as fixed, the others with their default
    block = out.split("parameters of mnist_eval")[1].split("parameters of ")[0]
    assert any(ln.split()[:1] == ["dataset"] and "fixed 'mnist'" in ln
               for ln in block.splitlines())
    assert any(ln.split()[:1] == ["train_seed"] and "default 0" in ln
               for ln in block.splitlines())


def _notebook(folder, name, record):
    nb = nbformat.v4.new_notebook()
    if record is not None:
        nb.metadata["cflib"] = record
        digests.seal_notebook(nb)               # as the run that wrote it does
    nbformat.write(nb, folder / f"{name}.ipynb")


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A chapters folder and a results folder of our own, read by the real checks."""
    chapters, res = tmp_path / "chapters", tmp_path / "results"
    chapters.mkdir()
    res.mkdir()
    monkeypatch.setattr(digests, "staleness",
                        functools.partial(digests.staleness, folder=chapters, results_root=res))
    real = digests.refuse_unmatched
    monkeypatch.setattr(digests, "refuse_unmatched",
                        lambda chs: real(chs, results_root=res, folder=chapters))
    return chapters, res


def test_stale_prints_each_chapter_and_why(scratch, capsys):
    chapters, _ = scratch
    names = list(CHAPTERS)
    _notebook(chapters, names[0], None)                         # executed, no record
    _notebook(chapters, names[1], {"format": 0})               # an older cflib's record
    cli.main(["stale"])                                         # the others: no notebook
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines] == names
    assert lines[0] == (f"{names[0]}: stale: re-execute: {chapters / names[0]}.ipynb has no "
                        "record of its inputs")
    assert lines[1] == (f"{names[1]}: stale: re-execute: {chapters / names[1]}.ipynb was "
                        "recorded by an older cflib (no compute and presentation record)")
    for name, line in zip(names[2:], lines[2:]):
        assert line == f"{name}: stale: re-execute: {chapters / name}.ipynb does not exist"


def test_verify_passes_matching_outputs_and_refuses_an_edited_one(scratch, capsys):
    chapters, res = scratch
    name = list(CHAPTERS)[0]
    (res / "table.csv").write_text("a,b\n1,2\n")
    sha = hashlib.sha256(b"a,b\n1,2\n").hexdigest()[:16]
    _notebook(chapters, name, {"outputs": {"table.csv": sha}})
    for other in list(CHAPTERS)[1:]:              # every chapter is there (a missing one is named)
        _notebook(chapters, other, {"outputs": {}})
    cli.main(["verify"])
    assert capsys.readouterr().out == ("every executed chapter matches its seal, every "
                                       "results file the notebook or the recorded run that "
                                       "wrote it, the README's summary and the results "
                                       "page the results, and every shipped network its "
                                       "manifest\n")
    (res / "table.csv").write_text("a,b\n1,3\n")                # edited since the run
    with pytest.raises(SystemExit) as err:
        cli.main(["verify"])
    msg = str(err.value)
    assert msg.startswith("refusing to publish results that their notebooks did not write")
    assert f"{res / 'table.csv'} does not match {name}'s notebook" in msg
    (res / "table.csv").unlink()
    with pytest.raises(SystemExit, match=r"table\.csv is missing"):
        cli.main(["verify"])


@pytest.fixture
def nothing_runs(monkeypatch):
    """Any chapter build is a failure: argument errors must come before it."""
    monkeypatch.setattr(runs_cli, "build", lambda *a, **k: pytest.fail("a chapter was built"))


@pytest.mark.parametrize("argv, match", [
    (["chapter", "nope"], r"argument name: invalid choice: 'nope'"),
    (["chapter", "mnist_eval", "--profile", "huge"], r"argument --profile: invalid choice"),
    (["chapter", "mnist_eval", "-p", "n_images"], r"argument -p: expected 2 arguments"),
    (["nocommand"], r"argument command: invalid choice: 'nocommand'"),
    ([], r"the following arguments are required: command"),
])
def test_argument_errors_exit_2_with_argparses_message(argv, match, nothing_runs, capsys):
    with pytest.raises(SystemExit) as err:
        cli.main(argv)
    assert err.value.code == 2
    assert re.search(match, capsys.readouterr().err)


@pytest.mark.parametrize("p, match", [
    (["bogus", "1"], r"unknown parameter\(s\) \['bogus'\] for chapter 'mnist_eval'"),
    (["n_images", "2"], r"n_images must be at least 4"),
    (["train_seed", "-1"], r"train_seed must be >= 0"),
    (["dataset", "fmnist"], r"chapter 'mnist_eval' is the"),
])
def test_a_bad_parameter_is_refused_before_any_build(p, match, nothing_runs):
    with pytest.raises(SystemExit, match="cflib chapter: " + match):
        cli.main(["chapter", "mnist_eval", "-p", *p])


def test_parse_extra_reads_json_and_keeps_text():
    pairs = [("n", "8"), ("pairs", '["4->9", "3->8"]'), ("methods", "CEM"), ("x", "null"),
             ("lr", "1.5e-3"), ("flag", "true"), ("name", '"quoted"'), ("n", "12")]
    assert runs_cli.parse_extra(pairs) == {
        "n": 12, "pairs": ["4->9", "3->8"], "methods": "CEM", "x": None, "lr": 1.5e-3,
        "flag": True, "name": "quoted"}
    assert runs_cli.parse_extra([]) == {}


def test_a_failing_method_shows_the_users_frames_and_one_line(tmp_path, monkeypatch):
    """cflib bench shows where the user's own code failed and the one line that says what
    failed, not the library's stack."""
    import importlib
    import sys

    from cflib.bench.methods import MethodError
    from cflib.book.cli import _method_failure

    (tmp_path / "mymeth.py").write_text("def explain(model, x, target):\n"
                                        "    return x[:, :1] * float('nan')\n"
                                        "def bad(model, x, target):\n"
                                        "    return explain(model, x, target)[0, 5]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("mymeth")
    try:
        try:
            mod.bad(None, __import__("torch").zeros(2, 1, 4, 4), 1)
        except Exception as err:
            raise MethodError("mymeth failed on c3lt-mnist 4->9: IndexError: ...") from err
    except MethodError as err:
        text = _method_failure(err)
    sys.modules.pop("mymeth", None)
    assert "mymeth.py" in text and "in bad" in text and "return explain(model, x" in text
    assert text.strip().endswith("mymeth failed on c3lt-mnist 4->9: IndexError: ...")
    assert "cflib/bench" not in text and "torch" not in text.split("\n")[0]
