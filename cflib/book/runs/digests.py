"""The inputs of a chapter run and whether a committed chapter is stale.

The executed notebook records in its metadata (``cflib``) the sha256 of every input:
its code cells and prose, every ``cflib`` module the kernel imported (their syntax
trees without docstrings), the data files it read (``SHA256SUMS`` of the data root),
the results of the chapters it reads and its parameters.  A chapter is *stale* when
one of them changed; a prose-only change is copied in without re-executing.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cflib.bench.data import PROJECT_ROOT, checksums, data_root
from cflib.book.chapters import Chapter, check, get_chapter, run_params
from cflib.book.runs.notebook import discussion_template, to_notebook
from cflib.book.runs.paths import BOOK_RUN, CHAPTER_DIR, RESULTS_DIR, rel

__all__ = ["source_digests", "input_digests", "stale_reasons"]


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _code_sha(path: Path) -> str:
    """sha256 of a Python module's code: its syntax tree without docstrings, so that an
    edit of comments, docstrings or layout does not make the chapters that run it stale."""
    import ast

    try:
        tree = ast.parse(Path(path).read_text())
    except SyntaxError:
        return _sha(path)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def source_digests(chapter: Chapter) -> dict[str, str]:
    """The chapter's code cells and its prose (markdown cells and discussion page), apart:
    a prose-only edit is copied into the page without re-executing (``refresh_prose``)."""
    nb = to_notebook(chapter)
    code = "\n# cell\n".join(c.source for c in nb.cells if c.cell_type == "code")
    prose = "\n# cell\n".join([c.source for c in nb.cells if c.cell_type == "markdown"]
                               + [discussion_template(chapter)])
    return {"code": hashlib.sha256(code.encode()).hexdigest()[:16],
            "prose": hashlib.sha256(prose.encode()).hexdigest()[:16]}


def _data_digest(files: list[str]) -> dict[str, str]:
    """sha256 of the data files a run read, from the data root's SHA256SUMS when it has
    one (no re-hashing of 100 MB), else of the files themselves."""
    root = data_root()
    sums = {k: v[:16] for k, v in checksums(root).items()}
    out = {}
    for f in files:
        out[f] = sums.get(f) or (_sha(root / f) if (root / f).exists() else "missing")
    return out


def input_digests(chapter: Chapter, params: dict, modules: list[str],
                  data_files: list[str], results_root: Path = RESULTS_DIR) -> dict:
    """Every input of a chapter run, as ``{kind: {name: sha}}``."""
    src = source_digests(chapter)
    mods = {}
    for m in modules:
        name = rel(Path(m))
        mods[name] = (_code_sha(PROJECT_ROOT / name) if (PROJECT_ROOT / name).exists()
                      else "missing")
    reads = {}
    for pattern in chapter.read_patterns(params["profile"]):
        for f in sorted(Path(results_root).glob(pattern)):
            reads[str(f.relative_to(results_root))] = _sha(f)
    return {"source": src, "modules": mods, "data": _data_digest(data_files), "reads": reads,
            "params": hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]}


def stale_reasons(chapter: str | Chapter, params: dict | None = None,
                  prose: bool = False) -> list[str]:
    """Why the committed notebook of ``chapter`` must be re-executed (empty: it is fresh).

    A change of the chapter's prose alone is not a reason to execute (it is copied in
    by :func:`refresh_prose`); ``prose=True`` lists it too.
    """
    import nbformat

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    path = CHAPTER_DIR / f"{ch.name}.ipynb"
    if not path.exists():
        return [f"{rel(path)} does not exist"]
    meta = nbformat.read(path, as_version=4).metadata.get("cflib")
    if not meta or "inputs" not in meta:
        return [f"{rel(path)} has no record of its inputs"]
    params = params or check(ch, run_params(ch, BOOK_RUN))
    old = meta["inputs"]
    now = input_digests(ch, params, [PROJECT_ROOT / m for m in old.get("modules", {})],
                        list(old.get("data", {})))
    reasons = []
    if old.get("source", {}).get("code") != now["source"]["code"]:
        reasons.append(f"the code of {rel(ch.path)} changed")
    if prose and old.get("source", {}).get("prose") != now["source"]["prose"]:
        reasons.append(f"the prose of {ch.name} changed")
    for kind in ("modules", "reads"):
        for name in sorted(set(old.get(kind, {})) | set(now[kind])):
            if old.get(kind, {}).get(name) != now[kind].get(name):
                reasons.append(f"{name} changed")
    data_now = {k: v for k, v in now["data"].items() if v != "missing"}
    for name, digest in data_now.items():   # absent data (a reader's clone) is no change
        if old["data"].get(name) != digest:
            reasons.append(f"data file {name} changed")
    if old.get("params") != now["params"]:
        reasons.append("parameters changed")
    return reasons


