"""Progress bars behind one switch.

Every long loop of the library (training epochs, searches over chunks of a batch)
goes through :func:`progress`.  Bars are shown by ``tqdm.auto`` when the switch is
on; the switch is, in order: the last :func:`set_progress` call, the environment
variable ``CFLIB_PROGRESS`` (``0``/``1``), and otherwise on, except under ``CI`` or
pytest, where it is off.
"""
from __future__ import annotations

import os
import sys
from typing import Iterable, TypeVar

from cflib.env import flag

T = TypeVar("T")
_STATE: dict[str, bool | None] = {"on": None}


def set_progress(on: bool | None) -> None:
    """Turn progress bars on or off for this process (``None``: back to the default)."""
    _STATE["on"] = None if on is None else bool(on)


def progress_enabled() -> bool:
    if _STATE["on"] is not None:
        return bool(_STATE["on"])
    env = flag("CFLIB_PROGRESS")
    if env is not None:
        return env
    return not (os.environ.get("CI") or "pytest" in sys.modules)


def progress(iterable: Iterable[T], desc: str = "", total: int | None = None,
             leave: bool = False) -> Iterable[T]:
    """``iterable`` wrapped in a tqdm bar when progress is on, else unchanged."""
    if not progress_enabled():
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, leave=leave)
