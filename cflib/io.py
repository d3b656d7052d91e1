"""One atomic writer for every file cflib writes (weights, results, notebooks, README).

:func:`atomic_write` writes to a temporary file beside the destination (same file
system) and renames it over the destination, so a reader never sees half a file and a
failed write leaves the old file as it was.  Files are created readable by the group
(a shared cache or results folder on a cluster).
"""
from __future__ import annotations

import errno
import os
import shutil
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
    return atomic_write_all([(path, data)])[0]


def atomic_write_all(items) -> list[Path]:
    """Write several files (``(path, data)`` pairs, ``data`` as :func:`atomic_write` takes
    it) so that every one is replaced or none is: each is written to a temporary file
    beside it first, then all are renamed into place.  A failure (a full disk, a folder
    that is a file) removes every temporary file and leaves the files already there as
    they were; a full disk is one OSError naming the file and the space left."""
    staged, path = [], None
    try:
        for path, data in items:
            path = Path(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise NotADirectoryError(errno.ENOTDIR, f"cannot write {path}: a part of its "
                                         "folder is a file, not a folder", str(path)) from None
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            os.close(fd)
            staged.append(tmp)
            if callable(data):
                data(Path(tmp))
            elif isinstance(data, bytes):
                Path(tmp).write_bytes(data)
            else:
                Path(tmp).write_text(data)
            os.chmod(tmp, shared_mode())
        for (path, _), tmp in zip(items, staged):
            os.replace(tmp, path)
    except (OSError, RuntimeError) as err:
        if _out_of_space(err):
            raise OSError(errno.ENOSPC, f"No space left on device to write {path} "
                          f"({_free(Path(path).parent)} free there, or the disk quota is "
                          "exceeded): nothing was written (the files already there are as "
                          "they were); free some space or write elsewhere", str(path)) from err
        raise
    finally:
        for tmp in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return [Path(p) for p, _ in items]


def _out_of_space(err: BaseException) -> bool:
    """A write that failed because the disk (or the quota) is full: the OSError itself, or
    torch's serializer's RuntimeError ("[enforce fail ...] file write failed")."""
    if isinstance(err, OSError):
        return err.errno in (errno.ENOSPC, errno.EDQUOT)
    return "file write failed" in str(err) or "No space left" in str(err)


def _free(folder: Path) -> str:
    return f"{shutil.disk_usage(folder).free / 2**20:.1f} MiB"


#: the largest file cflib reads whole (a results CSV, a record, a notebook): 256 MiB
READ_LIMIT = 256 << 20


def read_bounded(path, what: str = "file", limit: int = READ_LIMIT, fix: str = "") -> bytes:
    """The bytes of the regular file ``path``, read only when it is one and no larger than
    ``limit``: a folder, a device file (``/dev/zero``), a FIFO or a socket is refused before
    it is opened (nothing hangs, nothing fills memory).  Every refusal is a ValueError that
    names the file, what it should be and ``fix``."""
    import stat

    path = Path(path)
    tail = f"; {fix}" if fix else ""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{path} is missing (the {what}){tail}") from None
    except OSError as err:
        raise ValueError(f"{path} cannot be read (the {what}): {err.strerror}{tail}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device file" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a plain file")
        raise ValueError(f"{path} is {kind}, not the {what} (a plain file){tail}")
    if st.st_size > limit:
        raise ValueError(f"{path} is {st.st_size / 2**20:.0f} MiB, larger than any {what} "
                         f"cflib writes ({limit >> 20} MiB at most){tail}")
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} grew past {limit >> 20} MiB while read (the {what}){tail}")
    return data


def read_text(path, what: str = "file", limit: int = READ_LIMIT, fix: str = "") -> str:
    """:func:`read_bounded`, decoded as UTF-8 (a ValueError naming the file if not)."""
    data = read_bounded(path, what, limit, fix)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        tail = f"; {fix}" if fix else ""
        raise ValueError(f"{path} is not text (the {what}; byte {err.start} is not UTF-8)"
                         f"{tail}") from None


def read_json(path, what: str = "record", limit: int = READ_LIMIT, fix: str = ""):
    """The JSON document in ``path`` (:func:`read_text`); a file that is not JSON, or is
    nested past Python's recursion limit, is a ValueError naming the file and ``fix``."""
    import json

    text = read_text(path, what, limit, fix)
    tail = f"; {fix}" if fix else ""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not JSON (the {what}: {err.msg} at line {err.lineno}, "
                         f"column {err.colno}){tail}") from None
    except RecursionError:
        raise ValueError(f"{path} is nested too deep to be the {what}{tail}") from None
