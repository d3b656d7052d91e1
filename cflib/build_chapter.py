"""Convert a chapter's jupytext source, execute it with papermill, write it into the book.

    python -m cflib.build_chapter mnist_eval --profile standard --device cpu --seed 0 \
        [-p n_images 100] [-p pairs '["4->9"]']

The executed notebook lands in ``book/chapters/<chapter>.ipynb`` (where ``_toc.yml``
expects it) and its results in ``results/<chapter>.csv``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from cflib.data import PROJECT_ROOT
from cflib.profiles import get_profile

#: chapter -> (jupytext source in notebooks/, fixed parameters, title)
CHAPTERS = {
    "mnist_eval": ("mnist_eval.py", {"dataset": "mnist"},
                   "Counterfactuals on MNIST: the C3LT table"),
    "fashion_mnist_test": ("mnist_eval.py", {"dataset": "fmnist"},
                           "Counterfactuals on Fashion-MNIST: the C3LT table"),
    "cross_dataset": ("cross_dataset.py", {}, "How the methods rank on the two datasets"),
    "mnist_bayesian": ("mnist_bayesian.py", {},
                       "Counterfactuals under Bayesian classifiers on MNIST"),
}
DISCUSSION = PROJECT_ROOT / "book" / "discussion"
MARKER = "<!-- discussion -->"


def _personalise(nb, chapter: str, title: str) -> None:
    """Give a chapter made from a shared template its own title and discussion.

    The template's first heading becomes ``title``; the markdown cell holding
    ``<!-- discussion -->`` gets the text of ``book/discussion/<chapter>.md``.
    """
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("# "):
            lines = cell.source.lstrip().split("\n")
            cell.source = "\n".join([f"# {title}"] + lines[1:])
            break
    page = DISCUSSION / f"{chapter}.md"
    text = page.read_text() if page.exists() else ""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and MARKER in cell.source:
            cell.source = cell.source.replace(MARKER, text)


def to_ipynb(source: Path, dest: Path, chapter: str | None = None, title: str | None = None) -> Path:
    import jupytext

    nb = jupytext.read(source)
    if chapter is not None:
        _personalise(nb, chapter, title)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    dest.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, dest)
    return dest


def build(chapter: str, profile: str = "standard", device: str = "cpu", seed: int = 0,
          extra: dict | None = None, out_dir: Path | None = None,
          results_dir: Path | None = None) -> Path:
    """Execute one chapter; returns the path of the executed notebook."""
    import papermill as pm

    if chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; choose one of {sorted(CHAPTERS)}")
    get_profile(profile)  # fail before starting a kernel
    source, fixed, title = CHAPTERS[chapter]
    ipynb = to_ipynb(PROJECT_ROOT / "notebooks" / source,
                     PROJECT_ROOT / "notebooks" / f"{chapter}.ipynb", chapter, title)
    out_dir = Path(out_dir or PROJECT_ROOT / "book" / "chapters")
    out_dir.mkdir(parents=True, exist_ok=True)
    params = {**fixed, "profile": profile, "device": device, "seed": seed,
              "results_name": chapter,
              "results_dir": str(Path(results_dir or PROJECT_ROOT / "results").resolve()),
              **(extra or {})}
    out = out_dir / f"{chapter}.ipynb"
    t0 = time.perf_counter()
    pm.execute_notebook(str(ipynb), str(out), parameters=params, kernel_name="python3",
                        cwd=str(PROJECT_ROOT), progress_bar=False, log_output=False)
    print(f"{chapter}: executed at profile {profile} in {time.perf_counter() - t0:.0f} s -> {out}")
    return out


def refresh_prose(chapter: str, out_dir: Path | None = None) -> Path:
    """Copy the source's markdown cells into an executed chapter, without re-running it.

    Only for prose edits: the code cells of the source and of the executed notebook
    must be identical, else a ValueError asks for a re-execution.
    """
    import jupytext
    import nbformat

    source, fixed, title = CHAPTERS[chapter]
    src = jupytext.read(PROJECT_ROOT / "notebooks" / source)
    _personalise(src, chapter, title)
    out = Path(out_dir or PROJECT_ROOT / "book" / "chapters") / f"{chapter}.ipynb"
    done = nbformat.read(out, as_version=4)
    src_code = [c.source for c in src.cells if c.cell_type == "code"]
    # papermill adds an "injected-parameters" cell after the parameters cell
    done_cells = [c for c in done.cells
                  if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]
    done_code = [c.source for c in done_cells if c.cell_type == "code"]
    if src_code != done_code or len(src.cells) != len(done_cells):
        raise ValueError(f"{chapter}: the code changed since it was executed; re-run it "
                         f"(make chapter NB={chapter})")
    for new, old in zip(src.cells, done_cells):
        if new.cell_type == "markdown":
            old.source = new.source
    nbformat.write(done, out)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("chapter", choices=sorted(CHAPTERS) + ["all"])
    ap.add_argument("--profile", default="standard")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--refresh-prose", action="store_true",
                    help="only copy edited markdown into the executed chapter (no execution)")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="extra parameter; VALUE is read as JSON when it parses")
    args = ap.parse_args(argv)
    extra = {}
    for k, v in args.p:
        try:
            extra[k] = json.loads(v)
        except json.JSONDecodeError:
            extra[k] = v
    for chapter in (CHAPTERS if args.chapter == "all" else [args.chapter]):
        if args.refresh_prose:
            print(f"{chapter}: prose refreshed in {refresh_prose(chapter)}")
        else:
            build(chapter, args.profile, args.device, args.seed, extra)


if __name__ == "__main__":
    main()
