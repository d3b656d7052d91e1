"""One atomic writer for every file cflib writes (weights, results, notebooks, README).

:func:`atomic_write` writes to a temporary file beside the destination (same file
system) and renames it over the destination, so a reader never sees half a file and a
failed write leaves the old file as it was.  Files are created readable by the group
(a shared cache or results folder on a cluster).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def shared_mode() -> int:
    """rw for the owner, r(w) for the group and others as the umask allows; group-r always."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o664 & ~mask) | 0o640


def atomic_write(path, data: str | bytes | Callable[[Path], None]) -> Path:
    """Write ``data`` (text, bytes, or a function that writes the temporary path it is
    given) to ``path`` atomically; the folder is created.  Any failure removes the
    temporary file and re-raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        if callable(data):
            data(Path(tmp))
        elif isinstance(data, bytes):
            Path(tmp).write_bytes(data)
        else:
            Path(tmp).write_text(data)
        os.chmod(tmp, shared_mode())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
