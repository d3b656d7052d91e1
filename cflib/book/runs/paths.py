"""Where a run writes: the book's own run replaces the committed files, any other run
writes beside them, never over them.

* the book's run (profile ``standard``, training and data seed 0, device ``cpu``, no
  other parameter): ``book/chapters/<chapter>.ipynb`` and ``results/<chapter>*.csv``;
* any other run: ``_build/runs/<profile>-train<t>-data<d>[-<params>]/``, one folder per
  run of the book, shared by every chapter of that run.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from cflib.bench import folders
from cflib.bench.data import PROJECT_ROOT
from cflib.book.chapters import (  # noqa: F401  (the book's run, where runs go)
    BOOK_RUN,
    CHAPTER_DIR,
    DISCUSSION,
    RESULTS_DIR,
    RUNS_DIR,
    Chapter,
    is_book_run,
    run_folder,
)

FAILED_DIR = PROJECT_ROOT / "_build" / "failed"


def rel(path) -> str:
    """``path`` relative to the project, when it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"



def check_output_dir(folder, what: str = "results_dir") -> Path:
    """Where a run that is not the book's own may write (:func:`cflib.bench.folders.
    check_output_dir`: never inside the committed ``results/`` or ``book/``, nor a folder
    of tracked files)."""
    return folders.check_output_dir(folder, what)


def output_dirs(chapter: Chapter, params: dict) -> tuple[Path, Path]:
    """(folder of the executed notebook, folder of the results) for a run, resolved: the
    book's own for the book's run, the user's ``results_dir`` when one is given (both
    there), else one folder per (profile, seeds, other parameters) that every chapter of
    such a run shares (:func:`cflib.book.chapters.run_folder`).  Any folder but the book's
    own passes :func:`check_output_dir` (a ValueError before anything is written)."""
    if params.get("results_dir") is not None:
        d = check_output_dir(params["results_dir"], "results_dir")
        return d, d
    if is_book_run(chapter, params):
        return CHAPTER_DIR, RESULTS_DIR
    d = check_output_dir(run_folder(chapter, params), "the run's folder")
    return d, d

