"""Where a run writes: the book's own run replaces the committed files, any other run
writes beside them, never over them.

* the book's run (profile ``standard``, training and data seed 0, device ``cpu``, no
  other parameter): ``book/chapters/<chapter>.ipynb`` and ``results/<chapter>*.csv``;
* any other run: ``_build/runs/<profile>-train<t>-data<d>[-<params>]/``, one folder per
  run of the book, shared by every chapter of that run.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from cflib.bench.data import PROJECT_ROOT
from cflib.book.chapters import Chapter, check

DISCUSSION = PROJECT_ROOT / "book" / "discussion"
CHAPTER_DIR = PROJECT_ROOT / "book" / "chapters"
RESULTS_DIR = PROJECT_ROOT / "results"
RUNS_DIR = PROJECT_ROOT / "_build" / "runs"
FAILED_DIR = PROJECT_ROOT / "_build" / "failed"
#: the book's own run; anything else writes beside it
BOOK_RUN = {"profile": "standard", "train_seed": 0, "data_seed": 0, "device": "cpu"}


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



def is_book_run(params: dict, chapter: Chapter) -> bool:
    """Are these the parameters of the book's own run of ``chapter``?"""
    defaults = check(chapter, dict(BOOK_RUN))
    return all(params.get(k) == v for k, v in defaults.items() if k != "results_dir")


def output_dirs(chapter: Chapter, params: dict) -> tuple[Path, Path]:
    """(folder of the executed notebook, folder of the results) for a run: the book's
    own for the book's run, else one folder per (profile, seeds, other parameters) that
    every chapter of such a run shares."""
    if is_book_run(params, chapter):
        return CHAPTER_DIR, RESULTS_DIR
    defaults = check(chapter, dict(BOOK_RUN))
    extra = {k: v for k, v in params.items()
             if k not in ("profile", "train_seed", "data_seed", "results_dir", "results_name",
                          "dataset")
             and defaults.get(k) != v}
    tag = f"{params['profile']}-train{params['train_seed']}-data{params['data_seed']}"
    if extra:
        tag += "-" + hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8]
    d = RUNS_DIR / tag
    return d, d
