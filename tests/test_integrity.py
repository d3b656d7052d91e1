"""Nothing published can be replaced or edited unnoticed: an executed chapter is sealed
(its cells, outputs and run record), a chapter's results files are bound to its sealed
record, and every other results file (sweep seeds, tuning evidence, the benchmark's
tables) to the record of the run that wrote it (``results/written.json``).  Each case
works on a copy of the committed book, never on the committed files."""
from __future__ import annotations

import hashlib
import json
import shutil

import nbformat
import pytest

from cflib.book.chapters import CHAPTERS
from cflib.book.runs import digests
from cflib.book.runs.paths import CHAPTER_DIR, RESULTS_DIR
from cflib.book.runs.written import LEDGER, check_written, read_ledger, record_written

SEED_FILE = "sweep/mnist_eval/standard/seed1/mnist_eval.csv"


@pytest.fixture
def book(tmp_path):
    """A copy of the committed chapters and results: (chapters folder, results folder)."""
    chapters, results = tmp_path / "chapters", tmp_path / "results"
    shutil.copytree(CHAPTER_DIR, chapters)
    shutil.copytree(RESULTS_DIR, results)
    return chapters, results


def _edit_number(text: str) -> str:
    """The first ``0.ddd`` in ``text`` with its last digit changed."""
    import re

    m = re.search(r"0\.\d{3}", text)
    assert m, "no number to edit"
    old = m.group(0)
    new = old[:-1] + str((int(old[-1]) + 1) % 10)
    return text[:m.start()] + new + text[m.end():]


def test_the_committed_book_passes_every_check():
    """What ``cflib verify``, ``cflib readme`` and ``make book`` check, on the committed
    files: every notebook matches its seal, every results file its notebook or record."""
    for name in CHAPTERS:
        assert not digests.check_seal(name), name
    digests.refuse_unmatched(CHAPTERS)
    claimed = digests.claimed_outputs(CHAPTERS)
    assert not check_written(RESULTS_DIR, claimed)
    # every file of results/ is bound: to a notebook, or to the record
    recorded = set(read_ledger(RESULTS_DIR))
    files = {f.relative_to(RESULTS_DIR).as_posix() for f in RESULTS_DIR.rglob("*")
             if f.is_file() and f.name != LEDGER and not f.name.startswith(".")}
    assert files <= claimed | recorded
    assert SEED_FILE in recorded and "tuning/c3lt_alpha.csv" in recorded
    assert "performance.csv" in recorded


def test_an_edited_number_in_a_chapters_outputs_is_refused(book):
    chapters, results = book
    path = chapters / "mnist_eval.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and any(
        "text/html" in o.get("data", {}) for o in c.get("outputs", [])))
    out = next(o for o in cell.outputs if "text/html" in o.get("data", {}))
    out.data["text/html"] = _edit_number(out.data["text/html"])
    nbformat.write(nb, str(path))
    bad = digests.check_outputs("mnist_eval", results, chapters)
    assert len(bad) == 1 and "mnist_eval.ipynb was edited after the run" in bad[0]
    assert digests.staleness("mnist_eval", folder=chapters, results_root=results).kind \
        == "outputs"
    with pytest.raises(ValueError, match="mnist_eval.ipynb was edited after the run"):
        digests.refuse_unmatched(CHAPTERS, results, chapters)


def test_a_results_csv_edited_with_its_digest_is_refused(book):
    """The forger edits the CSV and puts its new sha256 into the notebook's record: the
    record is sealed, so the notebook no longer matches its seal."""
    chapters, results = book
    f = results / "mnist_eval.csv"
    f.write_text(_edit_number(f.read_text()))
    path = chapters / "mnist_eval.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.metadata["cflib"]["outputs"]["mnist_eval.csv"] = hashlib.sha256(
        f.read_bytes()).hexdigest()[:16]
    nbformat.write(nb, str(path))
    with pytest.raises(ValueError, match="mnist_eval.ipynb was edited after the run"):
        digests.refuse_unmatched(CHAPTERS, results, chapters)


def test_an_edited_sweep_seed_file_is_refused(book):
    chapters, results = book
    f = results / SEED_FILE
    f.write_text(_edit_number(f.read_text()))
    bad = check_written(results, digests.claimed_outputs(CHAPTERS, chapters))
    assert len(bad) == 1 and SEED_FILE in bad[0] and "does not match the record" in bad[0]
    assert "git checkout --" in bad[0] and "cflib sweep mnist_eval --seeds 1" in bad[0]
    with pytest.raises(ValueError, match="seed1/mnist_eval.csv does not match the record"):
        digests.refuse_unmatched(CHAPTERS, results, chapters)


@pytest.mark.parametrize("change, match", [
    (lambda r: (r / "tuning" / "c3lt.csv").unlink(), "tuning/c3lt.csv is gone"),
    (lambda r: (r / "performance.csv").write_bytes(b""), "performance.csv does not match"),
    (lambda r: (r / "sweep" / "mine.csv").write_text("a\n1\n"), "written by no recorded run"),
    (lambda r: (r / LEDGER).write_text("{"), r"is not JSON \(the record of written results files"),
])
def test_every_other_results_file_is_bound_to_its_record(book, change, match):
    chapters, results = book
    change(results)
    with pytest.raises(ValueError, match=match):
        digests.refuse_unmatched(CHAPTERS, results, chapters)


def test_make_book_refuses_an_edited_seed_before_rendering(monkeypatch, book):
    """``make book`` (plan_book, the book's run) refuses an edited sweep seed file that a
    page reads instead of re-rendering the page from it."""
    from cflib.book.runs import assemble

    _, results = book
    f = results / SEED_FILE
    f.write_text(_edit_number(f.read_text()))
    monkeypatch.setattr(assemble, "RESULTS_DIR", results)
    with pytest.raises(ValueError, match="refusing to build: .*seed1/mnist_eval.csv does not"):
        assemble.plan_book(dict(assemble.BOOK_RUN))


def test_a_recorded_file_is_bound_and_a_new_run_rebinds_it(tmp_path):
    f = tmp_path / "sweep" / "x" / "seed1" / "x.csv"
    f.parent.mkdir(parents=True)
    f.write_text("a\n1\n")
    record_written([f], "cflib sweep x --seeds 1", tmp_path)
    assert not check_written(tmp_path)
    entry = json.loads((tmp_path / LEDGER).read_text())["files"]["sweep/x/seed1/x.csv"]
    assert entry["by"] == "cflib sweep x --seeds 1" and len(entry["sha256"]) == 64
    f.write_text("a\n2\n")
    assert "does not match the record" in check_written(tmp_path)[0]
    record_written([f], "cflib sweep x --seeds 1", tmp_path)      # the run again
    assert not check_written(tmp_path)
    with pytest.raises(ValueError, match="is not under the results folder"):
        record_written([tmp_path.parent / "elsewhere.csv"], "x", tmp_path)


def test_cflib_record_refuses_a_chapters_own_output(capsys):
    from cflib.book.cli import main

    with pytest.raises(SystemExit, match="written by a chapter's notebook"):
        main(["record", str(RESULTS_DIR / "mnist_eval.csv"), "--by", "me"])


def test_a_re_render_keeps_the_seal_valid(book):
    """Sealing is deterministic: a notebook written and read back keeps its seal."""
    chapters, _ = book
    nb = nbformat.read(chapters / "mnist_bayesian.ipynb", as_version=4)
    digests.seal_notebook(nb)
    nbformat.write(nb, str(chapters / "mnist_bayesian.ipynb"))
    assert not digests.check_seal("mnist_bayesian", chapters)
