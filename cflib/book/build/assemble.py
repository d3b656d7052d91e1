"""The whole book: execute the chapters it needs, then build its HTML with Jupyter Book 1."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from cflib.bench.data import PROJECT_ROOT
from cflib.book.build.digests import source_digests, stale_reasons
from cflib.book.build.execute import build
from cflib.book.build.notebook import to_notebook
from cflib.book.build.paths import BOOK_RUN, CHAPTER_DIR, rel
from cflib.book.chapters import CHAPTERS, check, get_chapter
from cflib.io import atomic_write


def build_book(profile: str = "standard", device: str = "cpu", train_seed: int = 0,
               data_seed: int = 0, rerun: bool = False) -> Path:
    """Execute the chapters a book needs, then build its HTML; returns index.html.

    The book's run (``standard``, seeds 0, ``cpu``) executes only stale chapters (all
    with ``rerun``) and builds the project's own book from the committed notebooks.
    Any other run executes every chapter into ``_build/runs/`` and builds a separate
    book from those notebooks in ``_build/book-<profile>-train<t>-data<d>/``, leaving
    the committed book alone.
    """
    t0 = time.perf_counter()
    run = {"profile": profile, "train_seed": train_seed, "data_seed": data_seed,
           "device": device}
    book_run = run == BOOK_RUN
    notebooks = {}
    for name in CHAPTERS:
        params = check(name, dict(run))
        if book_run and not rerun:
            reasons = stale_reasons(name, params)
            if not reasons:
                if stale_reasons(name, params, prose=True):
                    refresh_prose(name)
                    print(f"[{name}] prose refreshed (code and inputs unchanged): not executed",
                          flush=True)
                else:
                    print(f"[{name}] up to date (inputs unchanged): not executed", flush=True)
                notebooks[name] = CHAPTER_DIR / f"{name}.ipynb"
                continue
            print(f"[{name}] stale: " + "; ".join(reasons[:5])
                  + (f" (+{len(reasons) - 5} more)" if len(reasons) > 5 else ""), flush=True)
        notebooks[name] = build(name, profile, device, train_seed, data_seed)
    root = PROJECT_ROOT
    if not book_run:
        root = PROJECT_ROOT / "_build" / f"book-{profile}-train{train_seed}-data{data_seed}"
        # the run's notebooks sit in one runs folder: assemble a book around them
        shutil.rmtree(root, ignore_errors=True)
        (root / "book").mkdir(parents=True)
        for f in ("_config.yml", "_toc.yml"):
            shutil.copy2(PROJECT_ROOT / f, root / f)
        shutil.copytree(PROJECT_ROOT / "book", root / "book", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("chapters"))
        for folder in ("_static", "_ext"):
            if (PROJECT_ROOT / folder).exists():
                shutil.copytree(PROJECT_ROOT / folder, root / folder)
        (root / "book" / "chapters").mkdir()
        for name, nb in notebooks.items():
            shutil.copy2(nb, root / "book" / "chapters" / f"{name}.ipynb")
    # jupyter-book 1 has no ``python -m`` entry: its console script beside this Python
    script = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(script) if script.exists() else "jupyter-book", "build", str(root), "--quiet"]
    proc = subprocess.run(cmd, cwd=root)
    if proc.returncode:
        raise RuntimeError(f"jupyter-book build failed in {rel(root)} (exit {proc.returncode})")
    index = root / "_build" / "html" / "index.html"
    print(f"book built in {time.perf_counter() - t0:.0f} s: {rel(index)}", flush=True)
    return index


def refresh_prose(chapter: str, out_dir: Path | None = None) -> Path:
    """Copy the source's markdown cells into an executed chapter, without re-running it.

    Only for prose edits: the code cells of the source and of the executed notebook
    must be identical, else a ValueError asks for a re-execution.
    """
    import nbformat

    ch = get_chapter(chapter)
    src = to_notebook(ch)
    out = Path(out_dir or CHAPTER_DIR) / f"{ch.name}.ipynb"
    done = nbformat.read(out, as_version=4)
    hidden = ("injected-parameters", "cflib-provenance")
    done_cells = [c for c in done.cells
                  if not set(hidden) & set(c.get("metadata", {}).get("tags", []))]
    src_code = [c.source for c in src.cells if c.cell_type == "code"]
    done_code = [c.source for c in done_cells if c.cell_type == "code"]
    if src_code != done_code or len(src.cells) != len(done_cells):
        raise ValueError(f"{chapter}: the code changed since it was executed; re-run it "
                         f"(make chapter NB={chapter})")
    for new, old in zip(src.cells, done_cells):
        if new.cell_type == "markdown":
            old.source = new.source
    meta = done.metadata.get("cflib")
    if meta and "inputs" in meta:        # the prose is an input: record its new digest
        meta["inputs"]["source"] = source_digests(ch)
    return atomic_write(out, lambda tmp: nbformat.write(done, str(tmp)))


