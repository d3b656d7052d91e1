"""One error for a name a user typed that is not known (a method, metric, table, recipe):
the nearest known name, then every known name."""
from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["unknown_name"]


def unknown_name(kind: str, name, known: Iterable, note: str = "") -> ValueError:
    """The ``ValueError`` for ``name`` not among ``known``: ``unknown <kind> 'name' (did you
    mean 'x'?); choose from [...]``, then ``note``. Raise what it returns."""
    known = list(known)
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueError(f"unknown {kind} {name!r}{hint}; choose from {known}{note}")
