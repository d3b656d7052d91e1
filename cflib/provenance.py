"""Which code trained a network: the commit and a digest of the training code.

Every network the weight cache trains (:func:`cflib.cache.cached`) and every network the
book ships (:mod:`cflib.shipped`) records :func:`provenance`: the commit of the checkout
it was trained from (``"unknown"`` outside a git checkout; ``+`` marks uncommitted
changes), the date, and the sha256 of each module of its training code
(:func:`training_code`: the syntax tree without docstrings and comments, so an edited
comment changes nothing).  :func:`changed_since` names the modules whose code differs
today, so that a network trained by older code is never reused as if it were current:
the cache and the shipped layer say so when they load one.
"""
from __future__ import annotations

import ast
import hashlib
import subprocess
import time
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent

#: the modules every network's training runs through (data, sizes, seeds, loops, models)
COMMON_CODE = ("cflib/training.py", "cflib/models/", "cflib/bench/zoo.py",
               "cflib/bench/data.py", "cflib/bench/profiles.py", "cflib/bench/seeds.py",
               "cflib/bench/choices.py", "cflib/scopes.py")
#: the further modules of the networks of a kind (a kind not listed: the common ones)
KIND_CODE = {
    "c3lt": ("cflib/explainers/c3lt.py", "cflib/explainers/base.py"),
    "expgan": ("cflib/explainers/expgan.py", "cflib/explainers/base.py"),
    "quantized": ("cflib/quantization/",),
    "kd_student": ("cflib/quantization/",),
    "small_cnn_retrained": ("cflib/quantization/",),
    "judge_mlp": ("cflib/bench/judges.py",),
    "judge_gap_cnn": ("cflib/bench/judges.py",),
}


def code_sha(path: Path) -> str:
    """sha256 (16 hex) of a Python module's code: its syntax tree without docstrings."""
    text = Path(path).read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return hashlib.sha256(text.encode()).hexdigest()[:16]
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def _files(spec: str) -> list[Path]:
    p = CHECKOUT / spec
    return sorted(p.rglob("*.py")) if spec.endswith("/") else [p]


def training_code(kind: str) -> dict[str, str]:
    """``{module: code_sha}`` of the training code of a network of ``kind``."""
    return dict(_training_code(kind))


@lru_cache(maxsize=None)
def _training_code(kind: str) -> tuple[tuple[str, str], ...]:
    specs = COMMON_CODE + KIND_CODE.get(kind, ())
    out = {}
    for spec in specs:
        for f in _files(spec):
            if f.exists():
                out[f.relative_to(CHECKOUT).as_posix()] = code_sha(f)
    return tuple(sorted(out.items()))


@lru_cache(maxsize=1)
def commit() -> str:
    """The checkout's commit (short), ``+`` when its cflib/ has uncommitted changes;
    ``"unknown"`` outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=CHECKOUT,
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0 or not head.stdout.strip():
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "cflib"], cwd=CHECKOUT,
                               capture_output=True, text=True, timeout=30)
        return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(kind: str, seconds: float | None = None) -> dict:
    """What trained a network of ``kind`` now: commit, date, training code, seconds."""
    out = {"commit": commit(), "date": time.strftime("%Y-%m-%d"), "code": training_code(kind)}
    if seconds is not None:
        out["seconds"] = round(float(seconds), 1)
    return out


def changed_since(kind: str, recorded: dict | None) -> list[str] | None:
    """The modules of ``kind``'s training code whose code differs from ``recorded``
    (a :func:`provenance`); ``None`` when nothing was recorded (an older cflib)."""
    if not recorded or not isinstance(recorded.get("code"), dict):
        return None
    now = training_code(kind)
    old = recorded["code"]
    return sorted(f for f in set(now) | set(old) if now.get(f) != old.get(f))


def describe(kind: str, recorded: dict | None) -> str:
    """One phrase: which code trained it, and whether that is today's training code."""
    changed = changed_since(kind, recorded)
    if changed is None:
        return "trained by code that recorded no provenance (an older cflib)"
    who = f"trained at commit {recorded.get('commit', 'unknown')} ({recorded.get('date', '?')})"
    if not changed:
        return f"{who}, by today's training code"
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return f"{who}; its training code has changed since ({', '.join(changed[:3])}{more})"
