"""The inputs and outputs of a chapter run, and what a committed chapter needs: nothing,
a re-render, or a re-execution.

A chapter is compute, then presentation (:mod:`cflib.book.runs.notebook`).  The executed
notebook records in its metadata (``cflib``) the sha256 of every input, in two parts:

* **compute**: the code of its ``setup`` and ``compute`` cells, its parameters, the
  digest of every cflib definition those cells ran (:mod:`cflib.trace`: each function or
  method, and the skeleton of every module they lie in or import: its constants, class
  attributes, decorators; :mod:`cflib.definitions`), the shipped networks they loaded
  (their sha256 in ``networks/MANIFEST.json``) and the data files they read
  (``SHA256SUMS`` of the data root).  A definition the computation never ran is no
  input: an unused helper, a function only the presentation or the bench calls, a
  module imported by the setup alone.  A change whose twin runs at ``smoke`` were
  bit-equal is accepted by its certificate (:mod:`cflib.book.runs.certify`);
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
from cflib.book.chapters import Chapter, check, get_chapter, read_notebook, run_params
from cflib.book.runs.notebook import COMPUTE, SETUP, cell_kind, discussion_template, to_notebook
from cflib.book.runs.paths import BOOK_RUN, CHAPTER_DIR, RESULTS_DIR, rel
from cflib.definitions import key_digest, strip_docstrings

__all__ = ["source_digests", "input_digests", "output_digests", "staleness",
           "check_outputs", "check_seal", "seal", "seal_notebook", "Staleness",
           "FORMAT", "FORMATS", "definition_digests", "compute_changes"]

#: the record format of ``metadata["cflib"]`` (2: compute and presentation apart, outputs;
#: 3: the compute's inputs are the definitions it ran, not the modules it imported)
FORMAT = 3
#: the formats a committed chapter may hold (a format-2 chapter's compute inputs are whole
#: modules until its next full run)
FORMATS = (2, 3)
def _sha(path: Path) -> str:
    from cflib.io import read_bounded

    return hashlib.sha256(read_bounded(path, "file")).hexdigest()[:16]


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _code_sha(path: Path) -> str:
    """sha256 of a Python module's code: its syntax tree without docstrings, so that an
    edit of comments, docstrings or layout does not make the chapters that run it stale."""
    try:
        tree = strip_docstrings(ast.parse(Path(path).read_text()))
    except SyntaxError:
        return _sha(path)
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def _module_digests(modules) -> dict[str, str]:
    """Format 2's inputs: each module's whole code (:func:`_code_sha`)."""
    return {m: (_code_sha(PROJECT_ROOT / m) if (PROJECT_ROOT / m).exists() else "missing")
            for m in modules}


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


def definition_digests(keys) -> dict[str, str]:
    """Today's digest of each definition ``"cflib/x.py::name"`` (``missing`` when its
    module or the definition is gone; :func:`cflib.definitions.key_digest`)."""
    return {key: key_digest(key, PROJECT_ROOT) for key in keys}


def network_digests(entries) -> dict[str, str]:
    """sha256 (16 hex) of each shipped network (its manifest's name) as
    ``networks/MANIFEST.json`` records it (``missing`` when the manifest no longer lists
    it)."""
    from cflib.shipped import manifest

    listed = manifest()
    by_file = {e.get("file"): e for e in listed.values()}
    out = {}
    for name in entries:
        e = listed.get(name) or by_file.get(name) or {}
        out[name] = (e.get("sha256") or "missing")[:16]
    return out


def input_digests(chapter: Chapter, params: dict, data_files: list[str],
                  reads: list[str] = (), results_root: Path = RESULTS_DIR, outputs=(),
                  definitions: dict | None = None, presentation: dict | None = None,
                  networks=()) -> dict:
    """Every input of a chapter run: ``{"compute": {...}, "presentation": {...}}``.
    ``definitions`` and ``presentation``: the cflib definitions its compute and its
    presentation ran (:func:`cflib.trace.record`); ``networks``: the shipped networks its
    compute loaded."""
    src = source_digests(chapter)
    return {
        "compute": {"source": src["compute"],
                    "definitions": dict(sorted((definitions or {}).items())),
                    "networks": network_digests(sorted(networks)),
                    "data": _data_digest(data_files),
                    "params": _text_sha(json.dumps(params, sort_keys=True))},
        "presentation": {"source": src["presentation"],
                         "definitions": dict(sorted((presentation or {}).items())),
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


def compute_changes(chapter: Chapter, meta: dict, folder: Path = CHAPTER_DIR) -> list[str]:
    """The definitions a chapter's compute ran (its record, ``meta``) whose digest is not
    today's, each named, but those its certificate accepts (the change and the digest it
    certified, :mod:`cflib.book.runs.certify`); and every definition a certificate added
    (newly run by a certified change) that changed since."""
    from cflib.book.runs.certificates import expected_definitions

    expected, certified = expected_definitions(chapter, meta, folder)
    now = definition_digests(expected)
    out = []
    for key, sha in expected.items():
        if now[key] == sha:
            continue
        what = "removed" if now[key] == "missing" else "changed"
        since = " since its certificate" if key in certified else ""
        out.append(f"{key} {what}{since}")
    return out


def notebook_record(chapter: str | Chapter, folder: Path = CHAPTER_DIR) -> dict | None:
    """The run record (``metadata["cflib"]``) of a chapter's executed notebook, or None."""

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    path = Path(folder) / f"{ch.name}.ipynb"
    if not path.exists():
        return None
    record = read_notebook(path).metadata.get("cflib")
    if record is not None and not isinstance(record, dict):
        raise ValueError(f"{rel(path)}: its run record (metadata.cflib) is a "
                         f"{type(record).__name__}, not a record: restore the notebook with "
                         f"`git checkout -- {rel(path)}` or re-execute it with "
                         f"`make chapter NB={ch.name}`")
    return record


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

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    path = Path(folder) / f"{ch.name}.ipynb"
    if nb is None:
        if not path.exists():
            return []
        nb = read_notebook(path)
    fix = (f"`git checkout -- {rel(path)}` to restore the committed one, or re-execute "
           f"it with `make chapter NB={ch.name}`")
    if "cflib" not in nb.metadata:
        return [f"{rel(path)} has no run record (metadata.cflib: what its run read and "
                f"wrote, and its seal): it is not a chapter a run wrote; {fix}"]
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

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    path = Path(folder) / f"{ch.name}.ipynb"
    nb = read_notebook(path) if path.exists() else None
    if nb is None:
        return [f"{rel(path)} is missing: `git checkout -- {rel(path)}` restores the "
                f"committed chapter, or execute it with `make chapter NB={ch.name}`"]
    bad = check_seal(ch, folder, nb)
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


def _compute_reasons(ch: Chapter, meta: dict, now: dict, folder: Path) -> list[str]:
    """Why a chapter must be re-executed: its compute cells, a definition its compute ran
    (format 3; every imported module whole in format 2), a shipped network, a data file
    or its parameters changed (a certificate's accepted changes aside)."""
    oc, nc, out = meta["inputs"]["compute"], now["compute"], []
    if "definitions" in oc:
        from cflib.book.runs.certificates import expected_source

        source_changed = expected_source(ch, meta, folder) != nc["source"]
    else:
        source_changed = oc["source"] != nc["source"]
    if source_changed:
        out.append(f"the compute code of {rel(ch.path)} changed")
    if "definitions" in oc:
        out += compute_changes(ch, meta, folder)
        out += _diff(oc.get("networks", {}), nc["networks"],
                     lambda n: f"shipped network {n} changed")
    else:                     # format 2: every cflib module the kernel imported, whole
        out += _diff(oc["modules"], _module_digests(oc["modules"]))
    for name, digest in nc["data"].items():      # absent data (a reader's clone) is no change
        if digest != "missing" and oc["data"].get(name) != digest:
            out.append(f"data file {name} changed")
    if oc["params"] != nc["params"]:
        out.append("parameters changed")
    return out


def _read_reasons(ch: Chapter, meta: dict, profile: str, results_root: Path) -> list[str]:
    """Why a page must be re-rendered for what it read: a results file it read changed or
    went, or a file its read patterns now match is new (a new sweep seed)."""
    op, out = meta["inputs"]["presentation"], []
    for name, sha in op["reads"].items():
        where = (PROJECT_ROOT / name[len("project:"):] if name.startswith("project:")
                 else Path(results_root) / name)
        if (not where.exists() and not name.startswith("project:")
                and any(fnmatch(name, pattern) for pattern in ch.external)):
            where = RESULTS_DIR / name    # what no chapter makes: the run copied the book's
        if not where.exists():
            out.append(f"{name} (read by the page) is gone")
        elif _sha(where) != sha:
            out.append(f"{name} changed")
    for pattern in ch.read_patterns(profile):
        for f in sorted(Path(results_root).glob(pattern)):
            name = str(f.relative_to(results_root))
            if name not in op["reads"] and name not in meta.get("outputs", {}):
                out.append(f"{name} is new")
    return out


def _presentation_reasons(ch: Chapter, meta: dict, now: dict, folder: Path) -> list[str]:
    """Why a page must be re-rendered for its code: its presentation cells, a definition
    they ran (format 3; modules in format 2) or its certificate changed."""
    op, np_, out = meta["inputs"]["presentation"], now["presentation"], []
    if op["source"] != np_["source"]:
        out.append(f"the presentation code of {rel(ch.path)} changed")
    if "definitions" in op:
        out += _diff(op["definitions"], definition_digests(op["definitions"]))
    else:
        out += _diff(op["modules"], _module_digests(op["modules"]))
    if "certificate" in meta and Path(folder).resolve() == CHAPTER_DIR.resolve():
        from cflib.book.runs.certificates import certificate_digest

        if meta["certificate"] != certificate_digest(ch.name):
            out.append(f"its certificate (book/certificates/{ch.name}.json) changed")
    return out


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
    if meta.get("format") not in FORMATS:
        out.compute.append(f"{rel(path)} was recorded by an older cflib (no compute and "
                           "presentation record)")
        return out
    out.outputs = check_outputs(ch, results_root, folder)
    params = params or check(ch, run_params(ch, BOOK_RUN))
    oc = meta["inputs"]["compute"]
    now = input_digests(ch, params, list(oc["data"]), networks=list(oc.get("networks", {})))
    out.compute = _compute_reasons(ch, meta, now, folder)
    out.presentation = (_presentation_reasons(ch, meta, now, folder)
                        + _read_reasons(ch, meta, params["profile"], results_root))
    if meta["inputs"].get("prose") != now["prose"]:
        out.prose.append(f"the prose of {ch.name} changed")
    return out

