"""The record of every results file that no chapter's notebook wrote: the sweep's seeds
and merges, the tuning evidence, the benchmark's tables.

A chapter's own results files are bound to its executed notebook (their sha256 in its
run record, the record sealed: :mod:`cflib.book.runs.digests`).  Everything else under
``results/`` is written by a tool (``cflib sweep``, ``benchmarks/*.py``,
``python -m cflib.bench.tuning``), and each tool records what it wrote in
``results/written.json``: the file's sha256, the command that wrote it, the commit and
the date.  :func:`check_written` names every file that is in no record, that no longer
matches its record, or that its record names but which is gone; ``cflib verify``,
``cflib readme`` and the book's build refuse to publish while it names any.

These digests guard against damage and hand edits, not against forgery: whoever can
write ``results/`` can write the record too (git's history of both is the audit trail).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
from pathlib import Path

from cflib.book.runs.paths import RESULTS_DIR, commit, rel

__all__ = ["LEDGER", "record_written", "record_results", "command_line", "check_written",
           "read_ledger"]

#: the record's file name, at the top of a results folder
LEDGER = "written.json"


def _sha(path: Path) -> str:
    from cflib.io import read_bounded

    return hashlib.sha256(read_bounded(path, "results file")).hexdigest()


def read_ledger(root: Path = RESULTS_DIR) -> dict:
    """``{file relative to root: {"sha256", "by", "commit", "date"}}`` (empty without a
    record); a record that is not one is a ValueError naming it."""
    from cflib.io import read_json

    path = Path(root) / LEDGER
    if not path.exists() and not path.is_symlink():
        return {}
    fix = f"`git checkout -- {rel(path)}` restores the committed one"
    data = read_json(path, "record of written results files", fix=fix)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise ValueError(f"{rel(path)} is not a record of written results files (no mapping "
                         f"'files'); {fix}")
    for name, entry in files.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)):
            raise ValueError(f"{rel(path)} is not a record of written results files (the "
                             f"entry {name!r} is not a mapping with a sha256); {fix}")
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts or "\\" in name:
            raise ValueError(f"{rel(path)} records {name!r}, which is not a file under "
                             f"{rel(Path(root))}/ (the record names results files only, by "
                             f"their path inside it); {fix}")
    return files


def record_written(paths, by: str, root: Path = RESULTS_DIR) -> dict:
    """Record ``paths`` (files under ``root``) as written by the command ``by``, now, at
    this commit; one writer at a time (a file lock).  Returns the record."""
    from filelock import FileLock

    from cflib.io import atomic_write

    root = Path(root).resolve()
    ledger = root / LEDGER
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{LEDGER}.lock")):        # hidden: no results file
        files = read_ledger(root)
        when, at = datetime.date.today().isoformat(), commit()
        for p in paths:
            p = Path(p).resolve()
            try:
                name = p.relative_to(root).as_posix()
            except ValueError:
                raise ValueError(f"{p} is not under the results folder {root}") from None
            if not p.is_file():
                raise ValueError(f"{rel(p)} is not a file: nothing to record")
            if not str(by).strip():
                raise ValueError("--by must name the command that wrote the file(s)")
            old, sha = files.get(name), _sha(p)
            if old is not None and old.get("sha256") == sha:
                if (old.get("by"), old.get("commit")) != (by, at):
                    raise ValueError(f"{rel(p)} is recorded already, unchanged since "
                                     f"({old.get('by')!r}, commit {old.get('commit')}): its "
                                     "record keeps the command and commit that wrote it")
                continue
            files[name] = {"sha256": sha, "by": by, "commit": at, "date": when}
        text = json.dumps({"format": 1, "files": dict(sorted(files.items()))}, indent=1) + "\n"
        atomic_write(ledger, text)
    return files


def record_results(paths, by: str) -> None:
    """Record those of ``paths`` that lie in the book's ``results/`` (what a benchmark
    script calls after writing; a file written elsewhere needs no record)."""
    root = RESULTS_DIR.resolve()
    mine = [p for p in map(Path, paths) if root in p.resolve().parents]
    if mine:
        record_written(mine, by, root)


def command_line(script: str, argv) -> str:
    """How a script was run, as the record names it."""
    import shlex

    return " ".join([script, *map(shlex.quote, argv)])


def check_written(root: Path = RESULTS_DIR, claimed=()) -> list[str]:
    """Every file under ``root`` that neither a chapter's notebook (``claimed``: names
    relative to ``root``) nor the record wrote, or that no longer matches its record, and
    every recorded file that is gone, each named with how to restore it.  Only for the
    book's ``results/`` and for folders that have a record."""
    root = Path(root)
    if not (root / LEDGER).exists() and root.resolve() != RESULTS_DIR.resolve():
        return []
    if not (root / LEDGER).exists():            # the record itself is gone: say so, once
        return [f"{rel(root / LEDGER)} is missing, the record of every results file no "
                f"chapter's notebook wrote: `git checkout -- {rel(root / LEDGER)}` restores it"]
    files = read_ledger(root)
    bad = []
    for f in sorted(root.rglob("*")):
        name = f.relative_to(root).as_posix()
        if any(part.startswith(".") for part in f.relative_to(root).parts):
            continue
        if f.is_symlink() and f.is_dir():           # rglob does not enter it: say so
            bad.append(f"{rel(f)} is a link to a folder ({os.readlink(f)}): a results "
                       "folder holds what the book's runs wrote, not links; remove it")
            continue
        if f.is_dir() or name in claimed or name == LEDGER:
            continue
        if not f.is_file():                         # a link to a device, a FIFO, nothing
            bad.append(f"{rel(f)} is not a plain file (a link to a device, a FIFO or a "
                       "missing file): remove it")
            continue
        entry = files.get(name)
        if entry is None:
            bad.append(f"{rel(f)} was written by no recorded run (no chapter's notebook and "
                       f"no entry in {rel(root / LEDGER)}): remove it, or, if a tool of the "
                       f"project wrote it, record it with `cflib record {rel(f)} --by "
                       "'<the command>'`")
        elif _sha(f) != entry.get("sha256"):
            bad.append(f"{rel(f)} does not match the record of the run that wrote it "
                       f"({entry.get('by')!r}, commit {entry.get('commit')}, "
                       f"{entry.get('date')}): `git checkout -- {rel(f)}` restores the "
                       "committed one, or run that command again")
    for name, entry in sorted(files.items()):
        if name not in claimed and not (root / name).is_file():
            bad.append(f"{rel(root / name)} is gone (recorded as written by "
                       f"{entry.get('by')!r}): `git checkout -- {rel(root / name)}` or run "
                       "that command again")
    return bad
