"""Which code trained a network: the commit and a digest of the training code.

Every network the weight cache trains (:func:`cflib.cache.cached`) and every network the
book ships (:mod:`cflib.shipped`) records :func:`provenance`: the commit of the checkout
it was trained from (``"unknown"`` outside a git checkout; ``+`` marks uncommitted
changes under ``cflib/``), the date, and the sha256 of each definition of cflib that its
training reaches (:func:`reachable`: from the ``train`` and ``build`` functions, every
cflib function, class and module-level value their code names, transitively; each
definition's syntax tree without docstrings, so an edited comment changes nothing).
:func:`changed_since` names the recorded definitions that were changed or removed since,
so that a network trained by older code is never reused as if it were current: the cache
and the shipped layer say so when they load one.  A definition the training never
reaches (another network's) does not count.
"""
from __future__ import annotations

import functools
import inspect
import subprocess
import sys
import time
import types
from functools import lru_cache
from pathlib import Path

from cflib.definitions import CHECKOUT, definitions

__all__ = ["reachable", "training_code", "training_code_at", "commit", "provenance",
           "changed_since", "certified_since", "describe", "definitions"]


@lru_cache(maxsize=None)
def _file_definitions(module: str, mtime: float) -> dict[str, str]:
    return definitions(CHECKOUT / module)


def _module_path(modname: str) -> str | None:
    mod = sys.modules.get(modname)
    f = getattr(mod, "__file__", None)
    if not f:
        return None
    try:
        return Path(f).resolve().relative_to(CHECKOUT).as_posix()
    except ValueError:
        return None


def _ours(obj) -> bool:
    return str(getattr(obj, "__module__", "") or "").startswith("cflib")


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def reachable(*objs) -> set[tuple[str, str]]:
    """``(module, name)`` of every top-level cflib definition the objects reach: each
    function's and method's global names (through cflib modules' attributes too), closure
    cells, classes' methods and bases, transitively.  The objects themselves are walked
    even when they are not cflib's (a user's training function)."""
    out: set[tuple[str, str]] = set()
    seen: set[int] = set()
    roots = {id(o) for o in objs}       # the caller's own functions are walked too
    stack = list(objs)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None:
            continue
        seen.add(id(obj))
        if isinstance(obj, functools.partial):
            stack += [obj.func, *obj.args, *obj.keywords.values()]
            continue
        if inspect.ismethod(obj):
            stack.append(obj.__func__)
            continue
        if isinstance(obj, (staticmethod, classmethod)):
            stack.append(obj.__func__)
            continue
        if isinstance(obj, property):
            stack += [obj.fget, obj.fset]
            continue
        if inspect.isclass(obj):
            if not _ours(obj):
                continue
            mod = _module_path(obj.__module__)
            if mod:
                out.add((mod, obj.__qualname__.split(".")[0]))
            stack += [v for v in vars(obj).values()
                      if inspect.isfunction(v) or isinstance(v, (staticmethod, classmethod,
                                                                  property))]
            stack += [b for b in obj.__bases__ if _ours(b)]
            continue
        if not inspect.isfunction(obj) or not (_ours(obj) or id(obj) in roots):
            continue
        mod = _module_path(obj.__module__) if _ours(obj) else None
        if mod:
            out.add((mod, obj.__qualname__.split(".")[0]))
        stack += [c.cell_contents for c in (obj.__closure__ or ())
                  if _cell_ok(c) and (callable(c.cell_contents)
                                      or isinstance(c.cell_contents, functools.partial))]
        names = _code_names(obj.__code__)
        g = obj.__globals__
        for n in names:
            v = g.get(n)
            if v is None:
                continue
            if inspect.ismodule(v):
                if v.__name__.startswith("cflib"):
                    stack += [getattr(v, a) for a in names if hasattr(v, a)]
                continue
            if inspect.isfunction(v) or inspect.isclass(v) or isinstance(v, functools.partial):
                stack.append(v)
            elif mod:              # a module-level value of the function's own module
                out.add((mod, n))
    return out


def _cell_ok(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def training_code(*fns) -> dict[str, str]:
    """``{"module::definition": sha}`` of every definition reachable from ``fns`` (the
    training and build functions of a network), as the files are now."""
    out = {}
    for module, name in sorted(reachable(*fns)):
        path = CHECKOUT / module
        if not path.exists():
            continue
        defs = _file_definitions(module, path.stat().st_mtime)
        out.update({f"{module}::{d}": sha for d, sha in defs.items()
                    if d == name or d.startswith(name + "[")})
    return out


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=CHECKOUT, capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def training_code_at(keys, commit: str) -> dict[str, str]:
    """The digests of the definitions ``keys`` (``module::name``) as they were at
    ``commit`` (read from git); a ValueError when the commit is unknown."""
    if _git("cat-file", "-e", f"{commit}^{{commit}}") is None:
        raise ValueError(f"unknown commit {commit!r} (not in this checkout's git history)")
    by_module: dict[str, list[str]] = {}
    for k in keys:
        module, name = k.split("::", 1)
        by_module.setdefault(module, []).append(name)
    out = {}
    for module, names in by_module.items():
        text = _git("show", f"{commit}:{module}")
        defs = definitions(text=text) if text is not None else {}
        out.update({f"{module}::{n}": defs[n] for n in names if n in defs})
    return dict(sorted(out.items()))


@lru_cache(maxsize=1)
def commit() -> str:
    """The checkout's commit (short), ``+`` when its cflib/ has uncommitted changes;
    ``"unknown"`` outside a git checkout."""
    head = _git("rev-parse", "--short", "HEAD")
    if not head or not head.strip():
        return "unknown"
    dirty = _git("status", "--porcelain", "--", "cflib")
    return head.strip() + ("+" if dirty and dirty.strip() else "")


def provenance(*fns, seconds: float | None = None) -> dict:
    """What trains a network with ``fns`` now: commit, date, training code, seconds."""
    out = {"commit": commit(), "date": time.strftime("%Y-%m-%d"), "code": training_code(*fns)}
    if seconds is not None:
        out["seconds"] = round(float(seconds), 1)
    return out


def _compare(recorded: dict | None, certified: dict | None) -> tuple[list[str], list[str]]:
    """``(changed, certified)``: the recorded definitions changed or removed since, and
    those of them whose change is certified."""
    if certified is None:
        from cflib.shipped import certified as shipped_certified

        certified = shipped_certified()
    changed, accepted = [], []
    for key, sha in recorded["code"].items():
        module, name = key.split("::", 1)
        path = CHECKOUT / module
        now = _file_definitions(module, path.stat().st_mtime) if path.exists() else {}
        if now.get(name) != sha:
            certified_change = (sha, now.get(name)) in certified.get(key, ())
            (accepted if certified_change else changed).append(key)
    return sorted(changed), sorted(accepted)


def changed_since(recorded: dict | None, certified: dict | None = None) -> list[str] | None:
    """The recorded definitions (``module::name``) that were changed or removed since
    ``recorded`` (a :func:`provenance`), but those whose change from the recorded digest to
    today's is certified (twin trainings bit-equal: ``certified``, by default the shipped
    networks' :func:`cflib.shipped.certified`); ``None`` when nothing was recorded."""
    if not recorded or not isinstance(recorded.get("code"), dict):
        return None
    return _compare(recorded, certified)[0]


def certified_since(recorded: dict | None, certified: dict | None = None) -> list[str]:
    """The recorded definitions whose change since is certified (see :func:`changed_since`)."""
    if not recorded or not isinstance(recorded.get("code"), dict):
        return []
    return _compare(recorded, certified)[1]


def describe(recorded: dict | None) -> str:
    """One phrase: which code trained it, and whether that is today's training code."""
    changed = changed_since(recorded)
    if changed is None:
        return "trained by code that recorded no provenance (an older cflib)"
    who = f"trained at commit {recorded.get('commit', 'unknown')} ({recorded.get('date', '?')})"
    if not changed:
        n = len(certified_since(recorded))
        return f"{who}, by today's training code" + (
            f" ({n} definition{'s' if n != 1 else ''} changed since, certified by twin "
            "trainings)" if n else "")
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return f"{who}; its training code has changed since ({', '.join(changed[:3])}{more})"
