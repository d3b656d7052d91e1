"""The environment variables cflib reads, each checked before any work, one error style.

| variable | what it sets | allowed |
|---|---|---|
| ``CFLIB_CACHE`` | the weight cache folder (:mod:`cflib.cache`) | a folder (created when missing) |
| ``CFLIB_DATA`` | the data root of the book's datasets | an existing folder |
| ``CFLIB_PROGRESS`` | progress bars on or off | ``1``/``0``, ``true``/``false``, ``yes``/``no``, ``on``/``off`` |
| ``CFLIB_THREADS`` | torch threads of a chapter run | an int from 1 to the machine's cores |
| ``CFLIB_SCHEDULER`` | a Dask scheduler for sweeps and the book | an address ``tcp://host:port`` (or ``host:port``) |
| ``CFLIB_LOG`` | cflib's log level on stderr | a logging level name (``INFO``, ``WARNING``, ...) |
| ``CFLIB_MEMO`` | memoized steps (a method's counterfactuals) read back from the cache, or always computed (:mod:`cflib.memo`) | as ``CFLIB_PROGRESS``; unset: on |
| ``CFLIB_RENDER`` | set by a chapter's re-render: any explainer call or training is an error | ``1``/``0`` (as ``CFLIB_PROGRESS``) |

A bad value is a ValueError that names the variable, its value and what is allowed.
"""
from __future__ import annotations

import contextlib
import os
import re
from typing import Iterator

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _bad(name: str, value: str, allowed: str) -> ValueError:
    return ValueError(f"{name}={value!r} is not valid; {allowed}")


def flag(name: str) -> bool | None:
    """A boolean variable (None when unset)."""
    v = os.environ.get(name)
    if v is None:
        return None
    if v.strip().lower() in _TRUE:
        return True
    if v.strip().lower() in _FALSE:
        return False
    raise _bad(name, v, f"use one of {list(_TRUE + _FALSE[:-1])} (or unset it)")


def threads(name: str = "CFLIB_THREADS", default: int = 1) -> int:
    """A thread count from 1 to the machine's cores (``default`` when unset)."""
    v = os.environ.get(name)
    if v is None:
        return default
    cores = os.cpu_count() or 1
    try:
        n = int(v.strip())
    except ValueError:
        raise _bad(name, v, f"it must be an int from 1 to {cores} (this machine's cores)") \
            from None
    if not 1 <= n <= cores:
        raise _bad(name, v, f"it must be an int from 1 to {cores} (this machine's cores)")
    return n


def folder(name: str, must_exist: bool = False) -> str | None:
    """A folder variable: not empty, not a file, existing when ``must_exist``."""
    v = os.environ.get(name)
    if v is None:
        return None
    if not v.strip():
        raise _bad(name, v, "it is empty: unset it or name a folder")
    p = os.path.expanduser(v)
    if os.path.exists(p) and not os.path.isdir(p):
        raise _bad(name, v, "it names a file: name a folder")
    if must_exist and not os.path.isdir(p):
        raise _bad(name, v, "no such folder: name the folder that holds the data")
    return p


_ADDRESS = re.compile(r"^([a-z]+://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")


def scheduler(name: str = "CFLIB_SCHEDULER") -> str | None:
    """A Dask scheduler address (None when unset)."""
    v = os.environ.get(name)
    if v is None:
        return None
    if not _ADDRESS.match(v.strip()):
        raise _bad(name, v, "it must be a scheduler address such as tcp://10.0.0.5:8786 "
                            "(or unset it for a local cluster)")
    return v.strip()


def log_level(name: str = "CFLIB_LOG") -> str | None:
    import logging

    v = os.environ.get(name)
    if v is None or not v.strip():
        return None
    if not isinstance(logging.getLevelName(v.strip().upper()), int):
        raise _bad(name, v, "use a logging level: DEBUG, INFO, WARNING, ERROR")
    return v.strip().upper()


RENDER = "CFLIB_RENDER"


def forbid_compute(what: str) -> None:
    """Raise when this process re-renders a chapter from its saved results
    (``CFLIB_RENDER`` set): a re-render reads what the chapter's last full run saved and
    never explains, fits or trains; ``what`` names the call that tried."""
    if flag(RENDER):
        raise RuntimeError(f"{what} during a re-render of a chapter ({RENDER} is set): a "
                           "re-render reads the saved results only; move this call into the "
                           "chapter's compute cell (tagged 'compute')")


@contextlib.contextmanager
def environ(**values: str | None) -> Iterator[None]:
    """Environment variables set (``None``: unset) inside the block, every one put back as
    it was on exit, whatever happens inside."""
    before = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check_all() -> None:
    """Check every variable cflib reads (a run calls this before any work)."""
    flag("CFLIB_PROGRESS")
    flag("CFLIB_MEMO")
    flag(RENDER)
    threads()
    folder("CFLIB_CACHE")
    folder("CFLIB_DATA", must_exist=True)
    scheduler()
    log_level()
