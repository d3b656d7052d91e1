"""What decides rebuilding, unit-tested on a scratch project: a toy chapter (setup, compute
and presentation cells), a compute module, a presentation module, a results file it reads
and an output it wrote, recorded as a run records them (``input_digests`` /
``output_digests``); then each kind of edit, and what ``staleness`` makes of it."""
from __future__ import annotations

import json
import textwrap

import nbformat
import pytest

from cflib.book import chapters
from cflib.book.runs import digests

SOURCE = textwrap.dedent('''\
    # ---
    # jupyter:
    #   jupytext:
    #     text_representation:
    #       extension: .py
    #       format_name: percent
    # ---

    # %% [markdown]
    # # A toy chapter
    #
    # Its prose.

    # %% tags=["parameters"]
    profile: str = "smoke"   # the profile

    # %% tags=["setup"]
    n = 3

    # %% tags=["compute"]
    saved = [n] * n

    # %%
    print(saved)
    ''')


COMPUTE_MODULE = '''"""doc"""
X = 1


def f():
    return X + 1


def unused():
    return 0
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A scratch project with the toy chapter recorded as freshly run."""
    # imported before PROJECT_ROOT is patched below: the module reads it at import, and a
    # first import here would keep the scratch root for every later test
    import cflib.book.runs.certificates  # noqa: F401

    root = tmp_path
    (root / "notebooks").mkdir()
    (root / "notebooks" / "toy.py").write_text(SOURCE)
    for rel, text in {"cflib/bench/toy_compute.py": COMPUTE_MODULE,
                      "cflib/book/report/toy_present.py": '"""doc"""\nY = 1\n\n\n'
                                                          'def show():\n    return Y\n'}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    res = root / "results"
    (res / "tuning").mkdir(parents=True)
    (res / "tuning" / "evidence.csv").write_text("a,b\n1,2\n")
    (res / "toy.csv").write_text("metric,value\nIM1,0.5\n")
    folder = root / "book" / "chapters"
    folder.mkdir(parents=True)
    data = root / "data"
    (data / "MNIST" / "raw").mkdir(parents=True)
    (data / "MNIST" / "raw" / "t10k").write_bytes(b"images")
    monkeypatch.setenv("CFLIB_DATA", str(data))
    monkeypatch.setattr(chapters, "NOTEBOOKS", root / "notebooks")
    monkeypatch.setattr(digests, "PROJECT_ROOT", root)
    import cflib.book.runs.paths as paths

    monkeypatch.setattr(paths, "PROJECT_ROOT", root)
    monkeypatch.setattr(paths, "rel", lambda p: str(p.resolve().relative_to(root.resolve()))
                        if str(p.resolve()).startswith(str(root.resolve())) else str(p))
    monkeypatch.setattr(digests, "rel", paths.rel)
    monkeypatch.setattr("cflib.book.runs.notebook.discussion_template", lambda ch: "")
    monkeypatch.setattr(digests, "discussion_template", lambda ch: "")
    ch = chapters.Chapter("toy", "toy.py", "A toy chapter")
    params = {"profile": "smoke"}

    def record():
        # as the tracer records a run: the definitions the compute ran (f, and the
        # skeleton of its module), those the presentation ran (show)
        ran = ["cflib/bench/toy_compute.py::f", "cflib/bench/toy_compute.py::<module>"]
        shown = ["cflib/book/report/toy_present.py::show",
                 "cflib/book/report/toy_present.py::<module>"]
        outputs = digests.output_digests(res, ["toy.csv"])
        inputs = digests.input_digests(ch, params, ["MNIST/raw/t10k"],
                                       [str(res / "tuning" / "evidence.csv"), str(res / "toy.csv")],
                                       res, outputs, digests.definition_digests(ran),
                                       digests.definition_digests(shown))
        nb = nbformat.v4.new_notebook()
        nb.metadata["cflib"] = {"format": digests.FORMAT, "inputs": inputs, "outputs": outputs}
        nbformat.write(digests.seal_notebook(nb), folder / "toy.ipynb")

    record()
    return {"root": root, "ch": ch, "params": params, "folder": folder, "res": res,
            "record": record}


def _st(p, params=None):
    return digests.staleness(p["ch"], params or p["params"], p["folder"], p["res"])


def _edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_freshly_recorded_chapter_is_fresh(project):
    st = _st(project)
    assert st.kind == "fresh", st


def test_a_docstring_or_comment_edit_is_no_reason(project):
    f = project["root"] / "cflib/bench/toy_compute.py"
    _edit(f, '"""doc"""', '"""another docstring"""\n# and a comment')
    _edit(f, "    return X + 1", '    """f\'s docstring."""\n    return X + 1  # one more')
    assert _st(project).kind == "fresh"


def test_a_compute_definition_edit_means_re_executing_naming_it(project):
    f = project["root"] / "cflib/bench/toy_compute.py"
    _edit(f, "X = 1", "X = 2")
    st = _st(project)
    assert st.kind == "compute" and st.compute == ["cflib/bench/toy_compute.py::<module> changed"]
    _edit(f, "X = 2", "X = 1")
    _edit(f, "return X + 1", "return X + 2")
    assert _st(project).compute == ["cflib/bench/toy_compute.py::f changed"]
    _edit(f, "def f():", "def g():")
    assert _st(project).compute == ["cflib/bench/toy_compute.py::f removed"]


def test_a_definition_the_compute_never_ran_is_no_reason(project):
    f = project["root"] / "cflib/bench/toy_compute.py"
    _edit(f, "return 0", "return 1")                       # unused() changed
    f.write_text(f.read_text() + "\n\ndef helper():\n    return 2\n")   # a helper added
    assert _st(project).kind == "fresh"


def test_a_certificate_accepts_exactly_the_change_it_certified(project, monkeypatch):
    import json

    from cflib.book.runs import certificates

    monkeypatch.setattr(certificates, "CERT_DIR", project["root"] / "book" / "certificates")
    monkeypatch.setattr(certificates, "CHAPTER_DIR", project["folder"])
    f = project["root"] / "cflib/bench/toy_compute.py"
    key = "cflib/bench/toy_compute.py::f"
    old = digests.definition_digests([key])[key]
    _edit(f, "return X + 1", "return 1 + X")
    new = digests.definition_digests([key])[key]
    meta = digests.notebook_record(project["ch"], project["folder"])
    certificates.CERT_DIR.mkdir(parents=True)
    cert = {"format": certificates.FORMAT, "chapter": "toy", "record": certificates.record_digest(meta),
            "definitions": {key: [old, new]}, "added": {}, "computed_commit": "x",
            "certified_commit": "y", "date": "today"}
    (certificates.CERT_DIR / "toy.json").write_text(json.dumps(cert))
    assert _st(project).kind == "fresh"
    _edit(f, "return 1 + X", "return 2 + X")           # a further change: not certified
    assert _st(project).compute == [f"{key} changed since its certificate"]
    _edit(f, "return 2 + X", "return 1 + X")
    cert["record"] = "another run"                      # made for another record
    (certificates.CERT_DIR / "toy.json").write_text(json.dumps(cert))
    assert _st(project).compute == [f"{key} changed"]


def test_a_presentation_definition_edit_means_re_rendering_only(project):
    _edit(project["root"] / "cflib/book/report/toy_present.py", "return Y", "return Y + 1")
    st = _st(project)
    assert st.kind == "presentation" and not st.compute
    assert st.presentation == ["cflib/book/report/toy_present.py::show changed"]


def test_a_compute_cell_edit_means_re_executing_a_presentation_cell_edit_re_rendering(project):
    src = project["root"] / "notebooks" / "toy.py"
    _edit(src, "print(saved)", "print(saved, n)")
    assert _st(project).kind == "presentation"
    project["record"]()
    _edit(src, "saved = [n] * n", "saved = [n] * (n + 1)")
    assert _st(project).kind == "compute"
    project["record"]()
    _edit(src, "n = 3", "n = 4")                  # setup serves both: compute first
    st = _st(project)
    assert st.kind == "compute" and st.presentation


def test_a_prose_edit_is_only_prose(project):
    _edit(project["root"] / "notebooks" / "toy.py", "# Its prose.", "# Its new prose.")
    st = _st(project)
    assert st.kind == "prose" and st.prose
    assert not st.compute and not st.presentation


def test_a_read_file_edit_means_re_rendering(project):
    (project["res"] / "tuning" / "evidence.csv").write_text("a,b\n1,3\n")
    st = _st(project)
    assert st.kind == "presentation"
    assert st.presentation == ["tuning/evidence.csv changed"]


def test_another_parameter_means_re_executing(project):
    st = _st(project, {"profile": "standard"})
    assert st.kind == "compute" and st.compute == ["parameters changed"]


def test_an_edited_or_deleted_output_is_refused_naming_the_file(project):
    out = project["res"] / "toy.csv"
    out.write_text("metric,value\nIM1,0.4\n")      # a hand-edited number
    st = _st(project)
    assert st.kind == "outputs" and "toy.csv does not match toy's notebook" in st.outputs[0]
    with pytest.raises(ValueError, match="toy.csv does not match"):
        digests.refuse_unmatched([project["ch"]], project["res"], project["folder"])
    out.unlink()
    assert "toy.csv is missing" in _st(project).outputs[0]


def test_a_missing_data_file_is_no_reason_a_changed_one_is(project):
    f = project["root"] / "data" / "MNIST" / "raw" / "t10k"
    f.unlink()                                    # a reader's clone without the data
    assert _st(project).kind == "fresh"
    f.write_bytes(b"other images")
    st = _st(project)
    assert st.kind == "compute" and st.compute == ["data file MNIST/raw/t10k changed"]


def test_a_record_of_the_older_format_is_re_executed(project):
    path = project["folder"] / "toy.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.metadata["cflib"]["format"] = 1
    nbformat.write(nb, path)
    assert _st(project).kind == "compute"
    path.unlink()
    assert _st(project).compute[0].endswith("toy.ipynb does not exist")


def test_the_committed_certificates_hold():
    """Every certificate in book/certificates is for the committed run of its chapter and
    today's code (CI re-checks them in seconds; none is also fine)."""
    from cflib.book.runs.certify import check_certificates

    assert check_certificates() == []


def test_certify_check_on_the_command_line_counts_the_certificates(capsys):
    """``cflib certify --check`` (make certify CHECK=1) used to crash after a clean check,
    reading the certificates' folder from the wrong module."""
    from cflib.book.cli import main
    from cflib.book.runs.certificates import CERT_DIR

    main(["certify", "--check"])
    n = len(list(CERT_DIR.glob("*.json"))) if CERT_DIR.exists() else 0
    assert f"{n} certificate(s), each made for its chapter's record" in capsys.readouterr().out


def test_a_certificate_for_another_run_or_unreadable_is_named(tmp_path, monkeypatch):
    from cflib.book.runs import certificates, certify

    monkeypatch.setattr(certificates, "CERT_DIR", tmp_path)
    (tmp_path / "mnist_eval.json").write_text(json.dumps(
        {"format": certificates.FORMAT, "chapter": "mnist_eval", "record": "0" * 16,
         "definitions": {}, "certified_commit": "x", "date": "today"}))
    (tmp_path / "mnist_bayesian.json").write_text("{not json")
    bad = certify.check_certificates()
    assert len(bad) == 2
    assert any("mnist_bayesian.json is not a readable certificate" in b for b in bad)
    assert any("mnist_eval.json was made for another run of mnist_eval" in b for b in bad)


def test_the_networks_twin_trainer_reaches_what_no_smoke_training_does(tmp_path):
    """The twin trainer of `cflib networks certify`, with no network to train, still runs
    its probes: early stopping of both trainers, gradient clipping, the loader's
    missing-file error; each recorded and each line covered, so a change to them can be
    vouched for (or refused) by twins."""
    from cflib.bench.data import PROJECT_ROOT
    from cflib.book.runs.certify import _train_twin, _twin_result

    got = _twin_result(_train_twin(PROJECT_ROOT, [], tmp_path), PROJECT_ROOT, tmp_path, "new")
    w = got["weights"]
    assert w["probe: train_classifier"][1]["epochs_run"] < 8        # stopped early
    assert w["probe: train_autoencoder"][1]["epochs_run"] < 8
    assert w["probe: _load"] == "FileNotFoundError"
    src = (PROJECT_ROOT / "cflib/training.py").read_text().splitlines()
    ran = got["coverage"]["cflib/training.py"]
    for needle in ("break", "clip_grad_norm_"):
        line = next(i for i, t in enumerate(src, 1) if needle in t and not t.strip().startswith("#"))
        assert line in ran, needle


def test_a_pages_certificate_line_names_definitions_as_a_reader_would(monkeypatch):
    from cflib.book.runs import certificates as certs

    cert = {"record": "r", "certified_commit": "abc1234", "date": "2026-12-06",
            "definitions": {"cflib/bench/tables/quant.py::<module>": ["a", "b"],
                            "cflib/metrics/dependence.py::query_dependence": ["c", "d"]}}
    monkeypatch.setattr(certs, "read_certificate", lambda chapter: cert)
    monkeypatch.setattr(certs, "record_digest", lambda meta: "r")
    line = certs.certificate_line("mnist_eval", {})
    assert "the module statements of `quant.py`" in line
    assert "`query_dependence` (dependence.py)" in line and "2 changed definitions" in line
    monkeypatch.setattr(certs, "record_digest", lambda meta: "another run")
    assert certs.certificate_line("mnist_eval", {}) == ""


def test_a_full_run_with_a_re_rendered_pages_outputs_leaves_it_as_it_is():
    """A page re-rendered from saved results, then computed again from the same inputs with
    the same outputs: the same record but for when, from which commit and how (so a
    re-run on a clone changes no tracked file); other inputs are another record."""
    from cflib.book.runs.execute import same_record

    def nb(**meta):
        n = nbformat.v4.new_notebook()
        n.metadata["cflib"] = {"params": {"profile": "standard"}, "inputs": {"compute": {}},
                               "outputs": {"x.csv": "aa"}, **meta}
        return n

    rendered = nb(mode="render", commit="d00fe18", computed={"commit": "82b8f2f"})
    computed = nb(mode="compute", commit="4861b75", computed={"commit": "4861b75"})
    assert same_record(rendered, computed)
    assert not same_record(computed, rendered)      # a re-render asked for is written
    assert not same_record(rendered, nb(mode="compute", outputs={"x.csv": "bb"}))
    assert not same_record(rendered, nb(mode="compute", inputs={"compute": {"a": "1"}}))


def test_what_the_discussion_runs_is_recorded_as_presentation():
    """The discussion is filled by the runner, not the kernel: the definitions it runs
    (a number format, a check) are recorded beside the kernel's, so editing one re-renders
    the page (it was invisible before: a page could show prose from older code)."""
    from cflib import trace
    from cflib.book.report import discussion
    from cflib.book.runs.execute import traced

    units = traced(lambda: discussion.pct(0.9967, 0))
    assert "cflib/book/report/discussion.py::pct" in units
    assert "cflib/book/report/discussion.py::f" not in units
    trace.start()
    try:
        inner = traced(lambda: discussion.f(0.5))
    finally:
        outer = trace.record(trace.stop())
    assert "cflib/book/report/discussion.py::f" in inner
    assert "cflib/book/report/discussion.py::f" in outer          # counts for the run too


def test_the_chapter_twins_guard_probes_raise_and_reach_the_error_paths():
    """certify.GUARD_PROBES, run as a twin runs them (under coverage): every probe raises,
    and the error lines no chapter run reaches (the range refusal's message, a
    non-floating-point result, a full disk) are covered, so a change to them can be
    vouched for by twins; a probe that returned would refuse the certificate."""
    import coverage

    from cflib.bench.data import PROJECT_ROOT
    from cflib.book.runs.certify import GUARD_PROBES

    cov = coverage.Coverage(data_file=None, source=[str(PROJECT_ROOT / "cflib")],
                            config_file=False)
    scope: dict = {}
    cov.start()
    try:
        exec(GUARD_PROBES, scope)
    finally:
        cov.stop()
    probes = scope["_cflib_probes"]
    assert len(probes) == 20 and set(probes.values()) == {"raised"}, probes
    data = cov.get_data()
    for module, needle in (("cflib/tensors.py", "its values span"),
                           ("cflib/tensors.py", "rescale it to [-1, 1]"),
                           ("cflib/explainers/base.py", "returned counterfactuals of dtype"),
                           ("cflib/io.py", "No space left on device to write"),
                           ("cflib/io.py", '"file write failed" in str(err)'),
                           ("cflib/io.py", "a part of its "),
                           ("cflib/explainers/records.py", "is not a whole saved explainer"),
                           ("cflib/cache.py", "cannot be taken"),
                           ("cflib/cache.py", "waiting: another process is training")):
        path = PROJECT_ROOT / module
        ran = set(data.lines(str(path)) or [])
        src = path.read_text().splitlines()
        line = next(i for i, t in enumerate(src, 1) if needle in t)
        # a statement's first line is what coverage records; walk back to it
        while line not in ran and line > 1 and not src[line - 1].lstrip().startswith(("def ", "if ")):
            line -= 1
        assert line in ran, (module, needle)


def test_a_class_moved_to_another_module_unchanged_is_a_move_a_changed_one_is_not(
        tmp_path, monkeypatch):
    """A certify of networks skips a definition moved unchanged (its lines did not change;
    its callers' changed lines run in the twins): a class whole too, not only a function."""
    from cflib.book.runs import certify
    from cflib.definitions import unit_shapes

    cls = textwrap.dedent('''
        class Noise:
            """Doc."""

            def __init__(self, eps):
                if eps <= 0:
                    raise ValueError("eps")
                self.eps = eps

            def __call__(self, x):
                return x + self.eps
        ''')
    old = "import torch\n\nX = 1\n" + cls
    assert "Noise" in unit_shapes(old).values() and "Noise.__call__" in unit_shapes(old).values()
    (tmp_path / "cflib").mkdir()
    monkeypatch.setattr(certify, "PROJECT_ROOT", tmp_path)
    new = tmp_path / "cflib" / "augment.py"
    new.write_text('"""Another module."""\n' + cls.replace('"""Doc."""', '"""Other doc."""'))
    assert certify._moved(old, "Noise")                       # moved, docstring aside
    new.write_text(cls.replace("raise ValueError", "raise TypeError"))
    assert not certify._moved(old, "Noise")                   # moved and changed
    assert not certify._moved(old, "Gone")                    # not in the old text at all


def test_two_certifications_of_one_commit_make_its_worktree_once(tmp_path, monkeypatch):
    """Side by side, two chapters last run at one commit share its worktree: the second
    waits for the first's (it removed the half-made tree and failed before the lock)."""
    import threading
    import time

    from cflib.book.runs import certify

    made = []

    def fake_git(*args, cwd=None):
        assert args[:2] == ("worktree", "add")
        made.append(args)
        time.sleep(0.2)                     # another certification arrives meanwhile
        path = tmp_path / f"tree-{args[-1]}"
        (path / ".git").mkdir(parents=True)
        (path / "notebooks").mkdir()
        return ""

    monkeypatch.setattr(certify, "WORK", tmp_path)
    monkeypatch.setattr(certify, "_git", fake_git)
    out = []
    threads = [threading.Thread(target=lambda: out.append(certify.worktree("abc1234")))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and out == [tmp_path / "tree-abc1234"] * 2
    assert (tmp_path / "tree-abc1234" / "notebooks").is_dir()
