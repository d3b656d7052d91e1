"""`make book` on a fresh copy of the project: the committed chapters render without
training anything, a chapter whose presentation changed is the only one re-rendered (its
compute not re-run), and a results file edited by hand is never published.  Each test has
its own clone: none depends on another's edits or on the order they run in."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cflib.bench import data
from cflib.bench.data import PROJECT_ROOT
from cflib.book.chapters import CHAPTERS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (data.data_root() / "SHA256SUMS").exists(),
                       reason="the data root's SHA256SUMS is needed to compare data digests"),
]


@pytest.fixture
def fresh_clone(tmp_path_factory):
    """The project's files as a clone has them (tracked and new, not ignored), elsewhere:
    a clone of its own for each test."""
    root = tmp_path_factory.mktemp("clone")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=PROJECT_ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        src = PROJECT_ROOT / f
        if src.is_file():
            dest = root / f
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(src.read_bytes())
    return root


@pytest.fixture
def committed_chapters_fresh(fresh_clone):
    """The tests need committed, up-to-date chapters: say which are not (seconds), rather
    than run into the executions that `make book` would then start (hours at `standard`)."""
    out = _cli(fresh_clone, "stale")
    assert out.returncode == 0, out.stdout + out.stderr
    stale = [line for line in out.stdout.splitlines() if not line.endswith(": up to date")]
    assert not stale, "committed chapters must be re-executed first:\n" + "\n".join(stale)
    return fresh_clone


def _cli(root: Path, *args, cache: Path | None = None):
    env = {**os.environ, "PYTHONPATH": str(root), "CFLIB_PROGRESS": "0",
           **({"CFLIB_CACHE": str(cache)} if cache else {})}
    return subprocess.run([sys.executable, "-m", "cflib.book.cli", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=1800)


def _run(root: Path, *args, cache: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(root), "CFLIB_CACHE": str(cache),
           "CFLIB_PROGRESS": "0"}
    proc = subprocess.run([sys.executable, "-m", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def test_make_book_renders_the_committed_chapters_without_training(committed_chapters_fresh,
                                                                     fresh_clone, tmp_path):
    cache = tmp_path / "cache"
    out = _run(fresh_clone, "cflib.book.cli", "book", cache=cache)
    for name in CHAPTERS:
        assert f"[{name}] up to date" in out, out[-3000:]
    assert "] executing" not in out and "] re-rendering" not in out
    assert (fresh_clone / "_build" / "html" / "index.html").exists()
    for name in CHAPTERS:
        assert (fresh_clone / "_build" / "html" / "book" / "chapters" / f"{name}.html").exists()
    assert not cache.exists() or not any(cache.iterdir())      # nothing was trained


def test_a_presentation_edit_is_only_re_rendered(committed_chapters_fresh, fresh_clone,
                                                 tmp_path):
    """A new presentation cell in one chapter: that chapter alone runs, as a re-render (its
    compute is not re-run: nothing trained), and its page shows the new cell's output."""
    src = fresh_clone / "notebooks" / "cross_dataset.py"
    src.write_text(src.read_text() + '\n# %%\nprint("an edited chapter")\n')
    cache = tmp_path / "cache"
    out = _run(fresh_clone, "cflib.book.runs", "all", "--stale-only", cache=cache)
    assert "[cross_dataset] re-rendering" in out, out[-3000:]
    assert out.count("] re-rendering") == 1 and "] executing" not in out, out[-3000:]
    import nbformat

    nb = nbformat.read(fresh_clone / "book" / "chapters" / "cross_dataset.ipynb", as_version=4)
    assert nb.metadata["cflib"]["mode"] == "render"
    assert any("an edited chapter" in "".join(o.get("text", "")) for c in nb.cells
               if c.cell_type == "code" for o in c.get("outputs", []))
    assert not cache.exists() or not any(cache.iterdir())


def test_an_edited_results_file_is_never_published(committed_chapters_fresh, fresh_clone,
                                                   tmp_path):
    """One number of a committed results file changed by hand: `cflib stale` reports it,
    `cflib verify`, `cflib readme` and `cflib book` refuse, each naming the file; the
    README and the results page are left as they were."""
    f = fresh_clone / "results" / "mnist_eval.csv"
    lines = f.read_text().splitlines()
    i = next(k for k, x in enumerate(lines) if ",C3LT,," in x and ",IM1," in x)
    head, value, tail = lines[i].rsplit(",", 3)[0], lines[i].rsplit(",", 3)[1], \
        ",".join(lines[i].rsplit(",", 3)[2:])
    lines[i] = f"{head},{float(value) * 0.5},{tail}"
    f.write_text("\n".join(lines) + "\n")
    readme = (fresh_clone / "README.md").read_bytes()
    page = (fresh_clone / "book" / "results.md").read_bytes()
    stale = _cli(fresh_clone, "stale")
    assert "mnist_eval: results do not match their notebook" in stale.stdout, stale.stdout
    assert "results/mnist_eval.csv does not match" in stale.stdout
    for args in (("verify",), ("readme",), ("book",)):
        proc = _cli(fresh_clone, *args, cache=tmp_path / "cache")
        assert proc.returncode != 0, (args, proc.stdout[-2000:])
        assert "results/mnist_eval.csv does not match" in proc.stdout + proc.stderr, args
        assert "] executing" not in proc.stdout
    assert (fresh_clone / "README.md").read_bytes() == readme
    assert (fresh_clone / "book" / "results.md").read_bytes() == page


def test_the_readmes_papermill_example_leaves_the_clone_clean(fresh_clone, tmp_path):
    """The README's papermill line, run by hand on the committed chapter, writes under
    ``_build/`` only: ``git status`` stays clean."""
    import re
    import shlex

    line = next(x for x in (fresh_clone / "README.md").read_text().splitlines()
                if "papermill " in x)
    line = re.sub(r"\s+#.*$", "", line)
    notebook, output = shlex.split(line.split("papermill ", 1)[1])[:2]
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=fresh_clone, check=True)
    subprocess.run([*git, "add", "-A"], cwd=fresh_clone, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "clone"], cwd=fresh_clone, check=True)
    # the line as a shell runs it (its own `mkdir` included), papermill from this venv
    env = {**os.environ, "PYTHONPATH": str(fresh_clone), "CFLIB_CACHE": str(tmp_path / "cache"),
           "CFLIB_PROGRESS": "0",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "-c", f"{line} -k python3"], cwd=fresh_clone,
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=fresh_clone,
                            capture_output=True, text=True, check=True).stdout
    assert status == "", status
    assert notebook.startswith("book/chapters/") and (fresh_clone / output).exists()


def test_re_running_a_chapter_with_unchanged_inputs_leaves_the_clone_clean(fresh_clone,
                                                                           tmp_path):
    """`make chapter NB=cross_dataset` on a clone, twice: its outputs are those of the
    committed notebook, so neither run changes a tracked file."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    if not (fresh_clone / ".git").exists():
        subprocess.run(["git", "init", "-q"], cwd=fresh_clone, check=True)
        subprocess.run([*git, "add", "-A"], cwd=fresh_clone, check=True)
        subprocess.run([*git, "commit", "-q", "-m", "clone"], cwd=fresh_clone, check=True)
    for _ in range(2):
        _run(fresh_clone, "cflib.book.runs", "cross_dataset", cache=tmp_path / "cache")
        status = subprocess.run(["git", "status", "--porcelain"], cwd=fresh_clone,
                                capture_output=True, text=True, check=True).stdout
        assert status == "", status
