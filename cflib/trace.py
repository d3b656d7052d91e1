"""Which of cflib's definitions a computation ran.

A tracer (:func:`sys.settrace` and :func:`threading.settrace`, call events only) notes the
code object of every cflib function called while it is on; a code object's file and first
line name its unit (:mod:`cflib.definitions`: the function or method it is, or encloses
it).  It never traces lines: for every frame it returns None, so a frame costs one set
lookup.  Module bodies (imports) are left out: importing a module runs no definition of
it; the functions an import calls (a module-level ``register(...)``) count.

Segments nest: :func:`segment` opens one (a memoized step, :mod:`cflib.memo`), and what it
ran counts for every enclosing segment too; :func:`note` adds units that a step did not
run because it was read back (a memo hit), so that the enclosing record is the same as if
it had run.  :func:`paused` runs code that is not an input (a check whose output is
digested instead).

:func:`record` turns the code objects into ``{"cflib/x.py::unit": digest}``, with the
skeleton (``cflib/x.py::<module>``) of every module a unit ran in and of every cflib module
those import (transitively through module-level imports): a changed module constant, class
attribute, default argument, decorator or lambda changes one of these digests.
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from cflib.definitions import CHECKOUT, PACKAGE, SKELETON, module_code

__all__ = ["start", "stop", "active", "segment", "note", "pause", "resume", "paused", "excluded",
           "codes", "record", "units_of", "Segment"]

_PREFIX = str(PACKAGE) + os.sep
_HERE = str(Path(__file__).resolve())
#: modules that watch a computation without changing a number of it (which code ran, what
#: a step kept, progress bars): never inputs, so a change of them re-makes nothing
OBSERVERS = ("cflib/trace.py", "cflib/memo.py", "cflib/definitions.py", "cflib/progress.py")


class Segment:
    """The code objects one segment ran and the units it was given (:func:`note`)."""

    def __init__(self) -> None:
        self.codes: dict[int, object] = {}     # id -> code object (kept: ids never reused)
        self.noted: dict[str, str] = {}


_stack: list[Segment] = []
_cur: dict = {}            # the innermost open segment's code objects (read by _trace)
_other: dict = {}          # code objects that are not cflib's (never looked at again)
_on = False
_paused = 0


def _trace(frame, event, arg):
    # keyed by id: a code object's own hash digests its whole content on every call; the
    # dicts keep the objects alive, so an id is never reused for another one
    c = frame.f_code
    i = id(c)
    if i in _cur or i in _other:
        return None
    f = c.co_filename
    if not f.startswith(_PREFIX):
        _other[i] = c
    elif f != _HERE and c.co_name != "<module>" and not _paused:
        _cur[i] = c
    return None


def excluded(fn):
    """A decorator: ``fn`` is no input of what calls it (its output is digested instead:
    a chapter's parameter check); what it calls is paused too."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with paused():
            return fn(*args, **kwargs)

    _other[id(wrapper.__code__)] = wrapper.__code__
    return wrapper


def active() -> bool:
    """Is the tracer on?"""
    return _on


def start() -> None:
    """Turn the tracer on (this thread and threads started later), with one open segment.
    A second call is a no-op.  Refused while another tracer (a debugger, coverage) is on."""
    global _on, _cur, _paused
    if _on:
        return
    if sys.gettrace() is not None:
        raise RuntimeError("cflib.trace cannot start: another tracer (a debugger or "
                           "coverage) is on in this process")
    _stack[:] = [Segment()]
    _cur = _stack[-1].codes
    _paused = 0
    _on = True
    threading.settrace(_trace)
    sys.settrace(_trace)


def stop() -> Segment:
    """Turn the tracer off; returns the outermost segment (everything it saw)."""
    global _on, _cur
    sys.settrace(None)
    threading.settrace(None)
    _on = False
    out = _stack[0] if _stack else Segment()
    while len(_stack) > 1:                 # a segment left open by an error: fold it in
        _close()
    _stack.clear()
    _cur = {}
    return out


def _close() -> Segment:
    global _cur
    seg = _stack.pop()
    if _stack:
        _stack[-1].codes.update(seg.codes)
        _stack[-1].noted.update(seg.noted)
        _cur = _stack[-1].codes
    return seg


@contextmanager
def segment():
    """A nested segment: yields a :class:`Segment` that holds, once the block is left,
    what the block ran (it counts for the enclosing segments as well).  Without the tracer
    on it yields an empty segment and traces nothing."""
    global _cur
    if not _on:
        yield Segment()
        return
    seg = Segment()
    _stack.append(seg)
    _cur = seg.codes
    try:
        yield seg
    finally:
        if _stack and _stack[-1] is seg:
            _close()


def note(units: dict[str, str]) -> None:
    """Count ``units`` (``{"file::unit": digest}`` a memoized step recorded) as run by the
    open segments."""
    if _on and _stack:
        _stack[-1].noted.update(units)


def pause() -> None:
    """Stop noting what runs until :func:`resume` (calls nest)."""
    global _paused
    _paused += 1


def resume() -> None:
    global _paused
    _paused = max(0, _paused - 1)


@contextmanager
def paused():
    """Run a block whose code is not an input (its output is digested instead)."""
    pause()
    try:
        yield
    finally:
        resume()


def codes() -> list:
    """The code objects the innermost open segment has run so far."""
    return list(_cur.values())


def units_of(codes) -> dict[str, set[str]]:
    """``{module path relative to the checkout: {unit names}}`` of ``codes`` (the skeleton,
    :data:`~cflib.definitions.SKELETON`, for a code object outside every unit: a lambda
    in a module-level value)."""
    out: dict[str, set[str]] = {}
    for c in codes:
        path = Path(c.co_filename)
        if not path.exists():
            continue
        rel = path.resolve().relative_to(CHECKOUT).as_posix()
        unit = module_code(path).unit_at(c.co_firstlineno)
        out.setdefault(rel, set()).add(unit or SKELETON)
    return out


def _module_file(dotted: str) -> str | None:
    """The file of a dotted cflib module name, relative to the checkout (None: not a
    module of the checkout, e.g. a name imported from a module)."""
    parts = dotted.split(".")
    base = CHECKOUT.joinpath(*parts)
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.exists():
            return cand.relative_to(CHECKOUT).as_posix()
    return None


def record(seg: Segment | None = None) -> dict[str, str]:
    """``{"cflib/x.py::unit": digest}``: every unit ``seg`` ran (else the outermost open
    segment's so far) and every unit it was given, and the skeleton of every module they
    lie in and of every cflib module those import (transitively)."""
    seg = seg or (_stack[0] if _stack else Segment())
    ran = units_of(seg.codes.values())
    out: dict[str, str] = dict(seg.noted)
    for key in seg.noted:
        module, _, unit = key.partition("::")
        ran.setdefault(module, set())
    todo = []
    for module, units in list(ran.items()):
        if not (CHECKOUT / module).exists():     # a noted module since removed
            del ran[module]
            continue
        code = module_code(CHECKOUT / module)
        digests = code.digests()
        for u in units:
            out[f"{module}::{u}"] = digests.get(u, "missing")
        todo += list(code.imports)
        todo += [m for u in units for m in code.unit_imports.get(u, ())]
    seen = set()
    skeletons = set(ran)
    while todo:
        dotted = todo.pop()
        if dotted in seen:
            continue
        seen.add(dotted)
        # importing a.b.c runs a/__init__ and a/b/__init__ first
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):
            f = _module_file(".".join(parts[:i]))
            if f and f not in skeletons:
                skeletons.add(f)
                todo += list(module_code(CHECKOUT / f).imports)
    for f in skeletons:
        out[f"{f}::{SKELETON}"] = module_code(CHECKOUT / f).skeleton
    return dict(sorted((k, v) for k, v in out.items() if not k.startswith(OBSERVERS)))
