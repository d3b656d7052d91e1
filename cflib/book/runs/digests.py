"""The inputs and outputs of a chapter run, and what a committed chapter needs: nothing,
a re-render, or a re-execution.

A chapter is compute, then presentation (:mod:`cflib.book.runs.notebook`).  The executed
notebook records in its metadata (``cflib``) the sha256 of every input, in two parts:

* **compute**: the code of its ``setup`` and ``compute`` cells, its parameters, the
  ``cflib`` modules the kernel imported outside the presentation packages
  (:data:`PRESENTATION_MODULES`; syntax trees without docstrings), and the data files it
  read (``SHA256SUMS`` of the data root);
* **presentation**: the code of every other code cell, the presentation modules, and
  every results file the presentation read (other chapters' results, the tuning
  evidence, the sweep's seeds, the papers' numbers);

and the sha256 of every file its compute wrote (**outputs**: its results files and saved
counterfactuals), which ties those files to the notebook.  A changed compute input means
re-executing; a changed presentation input only a re-render from the outputs (seconds);
a prose-only change is copied in (:func:`~cflib.book.runs.assemble.refresh_prose`).  An
output whose file no longer matches its digest (edited, truncated, deleted) is never
published: :func:`check_outputs` refuses it, naming the file.
"""
from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from cflib.bench.data import PROJECT_ROOT, checksums, data_root
from cflib.book.chapters import Chapter, check, get_chapter, run_params
from cflib.book.runs.notebook import COMPUTE, SETUP, cell_kind, discussion_template, to_notebook
from cflib.book.runs.paths import BOOK_RUN, CHAPTER_DIR, RESULTS_DIR, rel

__all__ = ["source_digests", "input_digests", "output_digests", "staleness",
           "check_outputs", "check_seal", "seal", "seal_notebook", "Staleness",
           "PRESENTATION_MODULES", "FORMAT"]

#: the record format of ``metadata["cflib"]`` (2: compute and presentation apart, outputs)
FORMAT = 2
#: the packages whose code only presents (tables, figures, discussion, the page itself)
PRESENTATION_MODULES = ("cflib/book/report/", "cflib/book/runs/", "cflib/book/spread.py",
                        "cflib/book/sweep.py")


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _code_sha(path: Path) -> str:
    """sha256 of a Python module's code: its syntax tree without docstrings, so that an
    edit of comments, docstrings or layout does not make the chapters that run it stale."""
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


def is_presentation_module(name: str) -> bool:
    """Is the module at ``name`` (relative to the project) presentation code?"""
    return any(name.startswith(p) for p in PRESENTATION_MODULES)


def source_digests(chapter: Chapter) -> dict[str, str]:
    """The chapter's source in three parts: the code the compute runs (``setup`` and
    ``compute`` cells), the code the presentation runs (``setup`` and every other code
    cell) and the prose (markdown cells and the discussion template)."""
    nb = to_notebook(chapter)
    kinds = [(cell_kind(c), c.source) for c in nb.cells]
    compute = [s for k, s in kinds if k in (SETUP, COMPUTE)]
    present = [s for k, s in kinds if k in (SETUP, "presentation")]
    prose = [s for k, s in kinds if k == "markdown"] + [discussion_template(chapter)]
    return {"compute": _text_sha("\n# cell\n".join(compute)),
            "presentation": _text_sha("\n# cell\n".join(present)),
            "prose": _text_sha("\n# cell\n".join(prose))}


def _data_digest(files: list[str]) -> dict[str, str]:
    """sha256 of the data files a run read, from the data root's SHA256SUMS when it has
    one (no re-hashing of 100 MB), else of the files themselves."""
    root = data_root()
    sums = {k: v[:16] for k, v in checksums(root).items()}
    out = {}
    for f in files:
        out[f] = sums.get(f) or (_sha(root / f) if (root / f).exists() else "missing")
    return out


def _read_name(path: str, results_root: Path) -> tuple[str, Path]:
    """(the name a read file is recorded under, where it lies for a later check): relative
    to the run's results folder when it is there, else to the project."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path(results_root).resolve())), p
    except ValueError:
        return "project:" + rel(p), p


def read_digests(reads: list[str], results_root: Path, outputs=()) -> dict[str, str]:
    """sha256 of every file the presentation read, but the chapter's own outputs."""
    out = {}
    for f in reads:
        name, path = _read_name(f, results_root)
        if name in outputs or not path.exists():
            continue
        out[name] = _sha(path)
    return out


def output_digests(results_root: Path, names) -> dict[str, str]:
    """sha256 of each output file (names relative to the results folder)."""
    return {n: _sha(Path(results_root) / n) for n in sorted(names)}


def input_digests(chapter: Chapter, params: dict, modules: list[str], data_files: list[str],
                  reads: list[str] = (), results_root: Path = RESULTS_DIR,
                  outputs=()) -> dict:
    """Every input of a chapter run: ``{"compute": {...}, "presentation": {...}}``."""
    src = source_digests(chapter)
    comp_mods, pres_mods = {}, {}
    for m in modules:
        name = rel(Path(m))
        sha = _code_sha(PROJECT_ROOT / name) if (PROJECT_ROOT / name).exists() else "missing"
        (pres_mods if is_presentation_module(name) else comp_mods)[name] = sha
    return {
        "compute": {"source": src["compute"], "modules": comp_mods,
                    "data": _data_digest(data_files),
                    "params": _text_sha(json.dumps(params, sort_keys=True))},
        "presentation": {"source": src["presentation"], "modules": pres_mods,
                         "reads": read_digests(list(reads), results_root, outputs)},
        "prose": src["prose"],
    }


@dataclass
class Staleness:
    """What a committed chapter needs, and why: ``compute`` reasons (re-execute),
    ``presentation`` reasons (re-render from its outputs), ``prose`` reasons (copy the
    prose in) and ``outputs``: output files that no longer match the notebook (never
    published; restore them or re-execute)."""

    chapter: str
    compute: list[str] = field(default_factory=list)
    presentation: list[str] = field(default_factory=list)
    prose: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``outputs`` (refused), ``compute``, ``presentation``, ``prose`` or ``fresh``."""
        for k in ("outputs", "compute", "presentation", "prose"):
            if getattr(self, k):
                return k
        return "fresh"

    def describe(self, limit: int = 5) -> str:
        why = getattr(self, self.kind) if self.kind != "fresh" else []
        more = f" (+{len(why) - limit} more)" if len(why) > limit else ""
        text = {"outputs": "results do not match their notebook",
                "compute": "stale: re-execute", "presentation": "stale: re-render",
                "prose": "prose changed: refresh", "fresh": "up to date"}[self.kind]
        return text + (": " + "; ".join(why[:limit]) + more if why else "")


def _diff(old: dict, new: dict, label=lambda name: f"{name} changed") -> list[str]:
    return [label(n) for n in sorted(set(old) | set(new)) if old.get(n) != new.get(n)]


def notebook_record(chapter: str | Chapter, folder: Path = CHAPTER_DIR) -> dict | None:
    """The run record (``metadata["cflib"]``) of a chapter's executed notebook, or None."""
    import nbformat

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    path = Path(folder) / f"{ch.name}.ipynb"
    if not path.exists():
        return None
    return nbformat.read(path, as_version=4).metadata.get("cflib")


def seal(nb) -> str:
    """sha256 of what an executed notebook shows and records: every cell's type, source
    and outputs, and its run record (``metadata["cflib"]``: parameters, the digests of
    its inputs and outputs) but the seal itself.  Written by the run that made the
    notebook (:func:`seal_notebook`), so an output or a digest edited afterwards no longer
    matches it."""
    import nbformat

    nb = nbformat.reads(nbformat.writes(nb), as_version=4)     # as it lies on disk
    record = {k: v for k, v in nb.metadata.get("cflib", {}).items() if k != "seal"}
    cells = [{"cell_type": c.cell_type, "source": c.source,
              "outputs": [{k: v for k, v in o.items() if k != "execution_count"}
                          for o in c.get("outputs", [])]} for c in nb.cells]
    return _text_sha(json.dumps({"cells": cells, "record": record}, sort_keys=True,
                                default=str))


def seal_notebook(nb):
    """Put the notebook's :func:`seal` into its run record (the last step before it is
    written); returns it."""
    nb.metadata.setdefault("cflib", {})["seal"] = seal(nb)
    return nb


def check_seal(chapter: str | Chapter, folder: Path = CHAPTER_DIR, nb=None) -> list[str]:
    """The chapter's executed notebook (``nb``, else read from ``folder``), when its cells,
    outputs or run record no longer match its seal (edited after the run that wrote it),
    named; empty otherwise or without a notebook."""
    import nbformat

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    path = Path(folder) / f"{ch.name}.ipynb"
    if nb is None:
        if not path.exists():
            return []
        nb = nbformat.read(path, as_version=4)
    if "cflib" not in nb.metadata:
        return []
    fix = (f"`git checkout -- {rel(path)}` to restore the committed one, or re-execute "
           f"it with `make chapter NB={ch.name}`")
    if "seal" not in nb.metadata["cflib"]:
        return [f"{rel(path)} has no seal (written by an older cflib, or by hand): {fix}"]
    if nb.metadata["cflib"]["seal"] != seal(nb):
        return [f"{rel(path)} was edited after the run that wrote it (its cells, outputs or "
                f"run record no longer match its seal): {fix}"]
    return []


def check_outputs(chapter: str | Chapter, results_root: Path = RESULTS_DIR,
                  folder: Path = CHAPTER_DIR) -> list[str]:
    """The chapter's notebook when it no longer matches its seal (:func:`check_seal`),
    and the output files of the notebook that no longer match it (edited, truncated or
    deleted), each named; empty when every one matches."""
    import nbformat

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    path = Path(folder) / f"{ch.name}.ipynb"
    nb = nbformat.read(path, as_version=4) if path.exists() else None
    bad = check_seal(ch, folder, nb) if nb is not None else []
    if bad:             # its record of the outputs cannot be trusted either
        return bad
    meta = (nb.metadata.get("cflib") if nb is not None else None) or {}
    for name, sha in (meta.get("outputs") or {}).items():
        f = Path(results_root) / name
        if not f.exists():
            bad.append(f"{rel(f)} is missing (written by {ch.name}'s notebook)")
        elif _sha(f) != sha:
            bad.append(f"{rel(f)} does not match {ch.name}'s notebook (edited or truncated "
                       f"since the run that wrote it: `git checkout -- {rel(f)}` or re-execute "
                       f"with `make chapter NB={ch.name}`)")
    return bad


def claimed_outputs(chapters, folder: Path = CHAPTER_DIR) -> set[str]:
    """Every results file that one of ``chapters``' executed notebooks wrote."""
    out = set()
    for c in chapters:
        out |= set((notebook_record(c, folder) or {}).get("outputs") or {})
    return out


def refuse_unmatched(chapters, results_root: Path = RESULTS_DIR,
                     folder: Path = CHAPTER_DIR) -> None:
    """Raise a ValueError naming every executed notebook of ``chapters`` that no longer
    matches its seal, every output file that does not match its notebook, and every other
    results file that does not match the record of the run that wrote it
    (:mod:`cflib.book.runs.written`; the book's ``results/``, or a folder with such a
    record): what ``cflib verify``, ``cflib readme`` and the book's build call before
    publishing."""
    from cflib.book.runs.written import check_written

    bad = [b for c in chapters for b in check_outputs(c, results_root, folder)]
    bad += check_written(results_root, claimed_outputs(chapters, folder))
    if bad:
        raise ValueError("refusing to publish results that their notebooks did not write: "
                         + "; ".join(bad))


def staleness(chapter: str | Chapter, params: dict | None = None,
              folder: Path = CHAPTER_DIR, results_root: Path = RESULTS_DIR) -> Staleness:
    """What the executed notebook of ``chapter`` in ``folder`` needs (the book's run by
    default, with its ``results/``)."""
    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    out = Staleness(ch.name)
    path = Path(folder) / f"{ch.name}.ipynb"
    meta = notebook_record(ch, folder)
    if meta is None:
        out.compute.append(f"{rel(path)} does not exist" if not path.exists()
                           else f"{rel(path)} has no record of its inputs")
        return out
    if meta.get("format") != FORMAT:
        out.compute.append(f"{rel(path)} was recorded by an older cflib (no compute and "
                           "presentation record)")
        return out
    out.outputs = check_outputs(ch, results_root, folder)
    params = params or check(ch, run_params(ch, BOOK_RUN))
    old = meta["inputs"]
    oc, op = old["compute"], old["presentation"]
    now = input_digests(ch, params, [PROJECT_ROOT / m for m in list(oc["modules"])
                                     + list(op["modules"])], list(oc["data"]))
    nc, np_ = now["compute"], now["presentation"]
    if oc["source"] != nc["source"]:
        out.compute.append(f"the compute code of {rel(ch.path)} changed")
    out.compute += _diff(oc["modules"], nc["modules"])
    for name, digest in nc["data"].items():      # absent data (a reader's clone) is no change
        if digest != "missing" and oc["data"].get(name) != digest:
            out.compute.append(f"data file {name} changed")
    if oc["params"] != nc["params"]:
        out.compute.append("parameters changed")
    if op["source"] != np_["source"]:
        out.presentation.append(f"the presentation code of {rel(ch.path)} changed")
    out.presentation += _diff(op["modules"], np_["modules"])
    for name, sha in op["reads"].items():
        where = (PROJECT_ROOT / name[len("project:"):] if name.startswith("project:")
                 else Path(results_root) / name)
        if (not where.exists() and not name.startswith("project:")
                and any(fnmatch(name, pattern) for pattern in ch.external)):
            where = RESULTS_DIR / name    # what no chapter makes: the run copied the book's
        if not where.exists():
            out.presentation.append(f"{name} (read by the page) is gone")
        elif _sha(where) != sha:
            out.presentation.append(f"{name} changed")
    # a read pattern that matches a file the last run did not see (a new sweep seed)
    for pattern in ch.read_patterns(params["profile"]):
        for f in sorted(Path(results_root).glob(pattern)):
            name = str(f.relative_to(results_root))
            if name not in op["reads"] and name not in meta.get("outputs", {}):
                out.presentation.append(f"{name} is new")
    if old.get("prose") != now["prose"]:
        out.prose.append(f"the prose of {ch.name} changed")
    return out

