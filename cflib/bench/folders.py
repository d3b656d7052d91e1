"""Where a run may write, checked at every door by one function: a chapter's
``results_dir``, a run's notebook folder, ``cflib bench --out``.

Only the book's own run replaces committed files.  Any other folder is resolved once (a
relative one against ``base``, the current folder by default, as a shell means it; every
symbolic link followed) and refused, before anything is written, when it is a file, lies
inside the book's committed ``results/`` or ``book/``, or is a folder of the project that
holds files under version control.  A file stem written there (a results file's name) is
a plain name (:func:`check_name`).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from cflib.bench.data import PROJECT_ROOT

RESULTS_DIR = PROJECT_ROOT / "results"
BOOK_DIR = PROJECT_ROOT / "book"
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")

__all__ = ["check_output_dir", "check_name", "tracked_under", "RESULTS_DIR", "BOOK_DIR"]


def tracked_under(folder: Path) -> list[str]:
    """The project's files under version control at or below ``folder`` (a resolved
    path); empty outside a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", str(folder)], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [f for f in out.stdout.split("\0") if f] if out.returncode == 0 else []


def check_output_dir(folder, what: str = "results_dir", instead: str = "leave it unset (the "
                     "run writes under _build/runs/)", base: Path | None = None) -> Path:
    """``folder`` resolved, or a ValueError naming ``what`` and why it may not be written
    (``instead``: what the message offers in its place)."""
    given = str(folder)
    if not given.strip():
        raise ValueError(f"{what} is empty; name a folder of your own, or {instead}")
    p = Path(given).expanduser()
    d = (p if p.is_absolute() else Path(base or Path.cwd()) / p).resolve()
    if d.exists() and not d.is_dir():
        raise ValueError(f"{what} {given!r} is a file ({d}), not a folder; name a folder of "
                         "your own")
    _check_writable(d, what, given)
    root = PROJECT_ROOT.resolve()
    via = "" if p.is_absolute() and p.absolute() == d else f" (it resolves to {d})"
    for committed in (RESULTS_DIR, BOOK_DIR):
        c = committed.resolve()
        if d == c or c in d.parents:
            raise ValueError(f"{what} {given!r} is inside the book's committed "
                             f"{c.relative_to(root)}/{via}, which only the book's own run "
                             f"writes; choose a folder of your own, or {instead}")
    if d == root or root in d.parents:
        tracked = tracked_under(d)
        if tracked:
            where = d.relative_to(root).as_posix() if d != root else "."
            raise ValueError(f"{what} {given!r} resolves to {where}/, which holds files of the "
                             f"project under version control (e.g. {tracked[0]}); choose a "
                             f"folder of your own, or {instead}")
    return d


def _check_writable(d: Path, what: str, given: str) -> None:
    """Refuse, before any compute, a folder that cannot be made or written: its nearest
    existing folder is a file, is not writable, or is a kernel file system (/proc, /sys)."""
    near = d
    while not near.exists() and near != near.parent:
        near = near.parent
    if not near.is_dir():
        raise ValueError(f"{what} {given!r} cannot be made: {near} is a file, not a folder")
    if str(near).startswith(("/proc", "/sys")) or (near != d and not os.access(near, os.W_OK)) \
            or (near == d and not os.access(d, os.W_OK | os.X_OK)):
        raise ValueError(f"{what} {given!r} cannot be written ({near} is not writable); "
                         "name a folder of your own")


def check_name(name, what: str = "results_name") -> str:
    """A file stem: a plain name (letters, digits, ``_ . -``; no folder, no ``..``), so
    that it resolves inside its folder and nowhere else."""
    if not isinstance(name, str) or not _PLAIN_NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"{what} must be a plain file name (letters, digits, _ . -; no "
                         f"folder and no '..'), got {name!r}")
    return name


def check_not_in_project_code(d: Path, what: str, given: str, instead: str) -> Path:
    """``d`` (resolved by :func:`check_output_dir`), or a ValueError when it lies in the
    project's git folder or would be made inside a top-level folder of the project that
    holds files under version control (a new subfolder of ``cflib/`` or ``tests/`` is the
    project's, though it holds no tracked file yet); a new top-level folder, or one under
    ``_build/``, is the user's."""
    root = PROJECT_ROOT.resolve()
    if d != root and root not in d.parents:
        return d
    parts = d.relative_to(root).parts
    where = d.relative_to(root).as_posix() if parts else "."
    if parts and parts[0] == ".git":
        raise ValueError(f"{what} {given!r} resolves to {where}/, inside the project's git "
                         f"folder; choose a folder of your own, or {instead}")
    top = root / parts[0] if parts else root
    tracked = tracked_under(top) if top not in (d, root) else []
    if tracked:
        raise ValueError(f"{what} {given!r} resolves to {where}/, inside {parts[0]}/, which "
                         f"holds files of the project under version control (e.g. "
                         f"{tracked[0]}); choose a folder of your own, or {instead}")
    return d
