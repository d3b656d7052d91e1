"""The book's chapters and their parameters: one registry, one validation.

Each chapter is a jupytext source in ``notebooks/`` whose cell tagged ``parameters``
declares every parameter with a type annotation, a default and a comment::

    n_images: int | None = None   # query images per pair; None: the profile's size

That cell is the schema: :func:`parameter_schema` reads it, and :func:`check` validates
a chapter's parameters against it (types, ranges, unknown names, a dataset that does
not match the chapter) before any kernel starts (:func:`cflib.book.runs.execute.prepare`) and again
inside the notebook (:func:`parameters`), so that a papermill run with a misspelt or
mistyped parameter stops with a message instead of running something else.  Values
given as text (``papermill -p n_images 50``) are read as JSON where the annotation
asks for a number or a list.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cflib import trace
from cflib.bench import catalog
from cflib.bench.data import PROJECT_ROOT, canonical_dataset, check_pair, n_classes
from cflib.bench.folders import check_name, check_output_dir
from cflib.bench.profiles import get_profile
from cflib.bench.tables.registry import SPECS, get_spec, spec_of_chapter, specs_of
from cflib.names import unknown_name
from cflib.tensors import check_device

NOTEBOOKS = PROJECT_ROOT / "notebooks"
RESULTS_DIR = PROJECT_ROOT / "results"
RUNS_DIR = PROJECT_ROOT / "_build" / "runs"
#: the executed chapters and their discussion templates
CHAPTER_DIR = PROJECT_ROOT / "book" / "chapters"
DISCUSSION = PROJECT_ROOT / "book" / "discussion"
#: the book's own run; anything else writes beside it
BOOK_RUN = {"profile": "standard", "train_seed": 0, "data_seed": 0, "device": "cpu"}
#: ... at this many CPU threads (CPU training differs with the thread count)
BOOK_THREADS = 1


#: the sweep results over training seeds a C3LT chapter shows when they exist
SWEEP_READS = ("sweep/{chapter}/{profile}/seed*/{chapter}.csv",)


@dataclass(frozen=True)
class Chapter:
    """A chapter: its source, title, the parameters it fixes and the results files it
    reads (glob patterns in its results folder, ``{chapter}`` and ``{profile}`` filled in;
    they are inputs: a changed file makes the chapter stale)."""

    name: str
    source: str
    title: str
    fixed: dict = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    #: files no chapter makes (the throughput benchmark's), read from the book's results
    #: when a run's own folder lacks them
    external: tuple[str, ...] = ()
    #: does the chapter write a results file (else it only reads others')
    writes: bool = True
    #: the datasets its compute reads (checked before any kernel starts); a chapter with a
    #: ``dataset`` parameter reads that one
    data: tuple[str, ...] = ()

    def datasets(self, params: dict) -> list[str]:
        return [params["dataset"]] if params.get("dataset") else list(self.data)

    def read_patterns(self, profile: str) -> list[str]:
        return [r.format(chapter=self.name, profile=profile)
                for r in self.reads + self.external]

    @property
    def path(self) -> Path:
        return NOTEBOOKS / self.source


def _table_chapter(spec) -> Chapter:
    """The chapter of a table (its spec says it all): a notebook several tables share
    fixes each chapter's dataset as a parameter; one of its own reads its dataset."""
    shared = sum(s.source == spec.source for s in SPECS.values()) > 1
    return Chapter(spec.chapter, spec.source, spec.title,
                   {"dataset": spec.dataset} if shared else {},
                   reads=SWEEP_READS if spec.sweeps else (),
                   data=() if shared else (spec.dataset,))


def _sweeps_of(specs) -> tuple[str, ...]:
    return tuple(r.format(chapter=s.chapter, profile="{profile}") for r in SWEEP_READS
                 for s in specs if s.sweeps)


def _chapters() -> dict[str, Chapter]:
    c3lt = specs_of("c3lt")
    own = [f"{s.chapter}.csv" for s in c3lt]
    book = [
        Chapter("cross_dataset", "cross_dataset.py", "How the methods rank on the two datasets",
                # the C3LT chapters and their sweeps: the ranks of the seed means, as the
                # chapters show them
                reads=(*own, *_sweeps_of(c3lt)), writes=False),
        Chapter("performance", "performance.py", "How fast the methods run, batched and alone",
                reads=tuple(own), external=("performance.csv", "performance_machine.csv",
                                            "performance_loops.csv"), writes=False),
        Chapter("your_method", "your_method.py", "Benchmark your own method",
                reads=(f"{get_spec('c3lt-mnist').chapter}.csv",), data=("mnist",)),
    ]
    chapters = [_table_chapter(s) for s in SPECS.values()] + book
    toc = (PROJECT_ROOT / "_toc.yml").read_text() if (PROJECT_ROOT / "_toc.yml").exists() else ""

    def position(c: Chapter) -> int:
        at = toc.find(f"book/chapters/{c.name}\n")
        return at if at >= 0 else len(toc) + 1

    return {c.name: c for c in sorted(chapters, key=position)}


#: every chapter of the book, in the book's order (``_toc.yml``; a chapter comes after those
#: it reads): a chapter of each table (:mod:`cflib.bench.tables.registry`), then the book's
#: own pages
CHAPTERS: dict[str, Chapter] = _chapters()


def refresh() -> dict[str, Chapter]:
    """:data:`CHAPTERS` again from the registry (a table registered after this module was
    imported, e.g. by a user's or a test's module, gets its chapter)."""
    fresh = _chapters()
    if list(fresh) != list(CHAPTERS):
        CHAPTERS.clear()
        CHAPTERS.update(fresh)
    return CHAPTERS


def get_chapter(name: str) -> Chapter:
    if name not in CHAPTERS:
        refresh()
    if name not in CHAPTERS:
        raise unknown_name("chapter", name, CHAPTERS)
    return CHAPTERS[name]


# -- the schema -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    name: str
    types: tuple[str, ...]      # from the annotation: "int", "str", "float", "bool", "list", "None"
    default: Any
    help: str


def _parameters_cell(source: Path) -> str:
    text = Path(source).read_text()
    m = re.search(r'^# %% tags=\["parameters"\]\n(.*?)(?=^# %%)', text, re.S | re.M)
    if m is None:
        raise ValueError(f"{source} has no cell tagged 'parameters'")
    return m.group(1)


def parameter_schema(source) -> dict[str, Param]:
    """The parameters a chapter source declares: name -> :class:`Param`."""
    cell = _parameters_cell(Path(source))
    lines = cell.splitlines()
    out = {}
    for node in ast.parse(cell).body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            raise ValueError(f"{source}: every line of the parameters cell must be "
                             f"'name: type = value  # help' ({ast.unparse(node)!r} is not)")
        types = tuple(t.strip() for t in ast.unparse(node.annotation).split("|"))
        line = lines[node.lineno - 1]
        help_ = line.split("#", 1)[1].strip() if "#" in line else ""
        out[node.target.id] = Param(node.target.id, types, ast.literal_eval(node.value), help_)
    return out


# -- validation ----------------------------------------------------------------------------
_PY = {"int": int, "str": str, "float": (int, float), "bool": bool, "list": (list, tuple)}


def _convert(p: Param, value):
    """A value of one of ``p.types``: text read as JSON where a number or list is asked."""
    if value is None:
        if "None" in p.types:
            return None
        raise ValueError(f"parameter {p.name!r} cannot be None (it is {' | '.join(p.types)})")
    if isinstance(value, str) and "str" not in p.types:
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"parameter {p.name!r} must be {' | '.join(p.types)}; got the text "
                             f"{value!r}, which is not JSON (e.g. {json.dumps(p.default)})") from None
        return _convert(p, value)
    for t in p.types:
        if t == "None":
            continue
        py = _PY.get(t)
        if py is None:
            raise ValueError(f"parameter {p.name!r}: unsupported annotation {t!r}")
        if isinstance(value, bool) and t in ("int", "float"):
            continue                     # True is not a count
        if isinstance(value, py):
            return list(value) if t == "list" else value
    raise ValueError(f"parameter {p.name!r} must be {' | '.join(p.types)}, got "
                     f"{type(value).__name__} {value!r}")


def _dataset(values: dict, chapter: Chapter | None) -> str:
    """The dataset a chapter's parameters are about (its own, or the one it reads)."""
    if values.get("dataset"):
        return values["dataset"]
    if chapter is not None and (chapter.fixed.get("dataset") or chapter.data):
        return chapter.fixed.get("dataset") or chapter.data[0]
    return "mnist"


def _check_dataset(value, values: dict, chapter: Chapter | None) -> None:
    canonical = canonical_dataset(value)
    fixed = (chapter.fixed.get("dataset") if chapter else None)
    if fixed is not None and canonical != fixed:
        other = [c.name for c in CHAPTERS.values()
                 if c.source == chapter.source and c.fixed.get("dataset") == canonical]
        raise ValueError(f"chapter {chapter.name!r} is the {fixed} table; dataset={value!r} "
                         f"does not match it" + (f" (run the chapter {other[0]!r})"
                                                 if other else ""))


def _check_pairs(value, values: dict, chapter: Chapter | None) -> None:
    if not value:
        raise ValueError("pairs must name at least one pair, e.g. ['4->9'], or be None")
    for pr in value:
        check_pair(pr, n_classes(_dataset(values, chapter)))


def _check_methods(value, values: dict, chapter: Chapter | None) -> None:
    if not value:
        raise ValueError("methods must name at least one method, or be None")
    # the table's own names: the catalog's explainers, or the compression recipes
    spec = spec_of_chapter(chapter.name) if chapter is not None else None
    (spec.check_methods if spec is not None else catalog.check_methods)(value)


def _check_models(value, values: dict, chapter: Chapter | None) -> None:
    spec = spec_of_chapter(chapter.name) if chapter is not None else None
    models = spec.models if spec is not None else ()
    if not value:
        raise ValueError(f"models must name at least one of {list(models)}")
    for m in value:
        if m not in models:
            raise unknown_name("model", m, models)


def _check_target(value, values: dict, chapter: Chapter | None) -> None:
    k = n_classes(_dataset(values, chapter))
    if not 0 <= value < k:
        raise ValueError(f"target must be a class in 0..{k - 1}, got {value}")


def _check_seed(name: str):
    def check_(value, values, chapter) -> None:
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    return check_


def _check_n_images(value, values: dict, chapter: Chapter | None) -> None:
    if value < 4:
        raise ValueError(f"n_images must be at least 4 (the figures show 4 queries per pair) "
                         f"or None for the profile's size, got {value}")


def _check_results_dir(value, values: dict, chapter: Chapter | None) -> None:
    if not str(value).strip():
        raise ValueError("results_dir must name a folder (or be None for the run's own)")
    check_results_dir(value)


#: the ranges and names of the parameters the chapters share, each checked by one
#: function (a None value, where the parameter allows it, is not checked); the profile
#: and the device by the one check the library has for each
_CHECKS = {
    "profile": lambda value, values, chapter: get_profile(value),
    "device": lambda value, values, chapter: check_device(value),
    "train_seed": _check_seed("train_seed"), "data_seed": _check_seed("data_seed"),
    "n_images": _check_n_images, "dataset": _check_dataset, "pairs": _check_pairs,
    "methods": _check_methods, "models": _check_models, "target": _check_target,
    "results_dir": _check_results_dir,
    "results_name": lambda value, values, chapter: check_results_name(value),
}


def _check_value(name: str, value, values: dict, chapter: Chapter | None) -> None:
    """Ranges and names of the parameters the chapters share (:data:`_CHECKS`)."""
    if name in _CHECKS and value is not None:
        _CHECKS[name](value, values, chapter)


def check_results_name(name: str) -> str:
    """A results file's name: a plain name (:func:`cflib.bench.folders.check_name`)."""
    return check_name(name, "results_name")


def check_results_dir(folder) -> Path:
    """A user's results folder (:func:`cflib.bench.folders.check_output_dir`; a relative
    one against the current folder, as the shell means it: a chapter's kernel runs in
    the project)."""
    return check_output_dir(folder, "results_dir", "leave it None: the run writes under "
                            "_build/runs/")


def check(chapter: str | Chapter, given: dict, source=None) -> dict:
    """All parameters of ``chapter``: its defaults, its fixed values and ``given``,
    converted and validated; a ValueError names the first problem (an unknown name
    lists the chapter's parameters)."""
    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    schema = parameter_schema(source or ch.path)
    unknown = sorted(set(given) - set(schema))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for chapter {ch.name!r}; its "
                         f"parameters are {list(schema)}")
    values = {k: p.default for k, p in schema.items()}
    values.update({k: v for k, v in ch.fixed.items() if k in schema})
    values["results_name"] = ch.name if "results_name" in schema else None
    values.update(given)
    out = {k: _convert(schema[k], v) for k, v in values.items() if k in schema}
    for k, v in out.items():
        _check_value(k, v, out, ch)
    return out


_IPYTHON = {"In", "Out", "get_ipython", "exit", "quit", "open"}


@trace.excluded
def parameters(source: str, namespace: dict) -> SimpleNamespace:
    """Validate a running notebook's parameters (call it right after the parameters cell).

    ``namespace`` is the notebook's ``globals()``: every declared parameter is read from
    it, and any other name found there (a misspelt parameter that papermill injected)
    is an error.  Returns the converted values.  Its code is no input of the chapter's
    computation (:func:`cflib.trace.excluded`: the values it returns are digested as the
    parameters).
    """
    if not any(c.source == source for c in CHAPTERS.values()):
        refresh()
    schema = parameter_schema(NOTEBOOKS / source)
    stray = sorted(k for k, v in namespace.items()
                   if k not in schema and not k.startswith("_") and k not in _IPYTHON
                   and not callable(v) and type(v).__name__ != "module")
    if stray:
        raise ValueError(f"unknown parameter(s) {stray}; the parameters of {source} are "
                         f"{list(schema)}")
    given = {k: namespace[k] for k in schema if k in namespace}
    name = given.get("results_name")
    matches = [c for c in CHAPTERS.values() if c.source == source]
    ch = next((c for c in matches if c.name == name), None)
    if ch is None and name is None and len(matches) == 1:
        ch = matches[0]
    if ch is None and name is None and "dataset" in given:
        # a template shared by chapters: the one whose fixed dataset was asked for
        from cflib.bench.data import canonical_dataset

        try:
            wanted = canonical_dataset(given["dataset"])
        except ValueError:
            wanted = None
        ch = next((c for c in matches if c.fixed.get("dataset") == wanted), None)
    if ch is None:
        # a user's own run under another results name: the template's first chapter,
        # without its fixed dataset
        base = matches[0]
        ch = Chapter(name or base.name, base.source, base.title, {}, base.reads)
    values = check(ch, {k: v for k, v in given.items() if k != "results_name"})
    values["results_name"] = check_results_name(name) if name is not None else ch.name
    if "results_dir" in values and values["results_dir"] is None:
        # by hand (papermill), never into the book's committed results
        values["results_dir"] = str(run_folder(ch, values) if ch.writes else RESULTS_DIR)
    return SimpleNamespace(**values)


def run_params(chapter: str | Chapter, run: dict) -> dict:
    """The keys of a run (profile, device, seeds) that ``chapter`` declares: a chapter that
    draws nothing has no seed, one that computes nothing no device."""
    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    schema = parameter_schema(ch.path)
    return {k: v for k, v in run.items() if k in schema}


def is_book_run(chapter: str | Chapter, params: dict) -> bool:
    """Are ``params`` the book's own run of ``chapter`` (its defaults at the book's profile,
    seeds and device, no results folder of its own, at the book's one CPU thread)?"""
    from cflib.env import threads

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    if params.get("results_dir") is not None or threads() != BOOK_THREADS:
        return False
    defaults = check(ch, run_params(ch, BOOK_RUN))
    return all(params.get(k) == v for k, v in defaults.items() if k != "results_dir")


def run_folder(chapter: str | Chapter, params: dict) -> Path:
    """Where a run that is not the book's writes: ``_build/runs/<profile>-train<t>-data<d>``
    and a hash of everything else that changes an output (its other parameters, a results
    name of its own, a thread count other than the book's), one folder per run."""
    from cflib.env import threads

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    defaults = check(ch, run_params(ch, BOOK_RUN))
    extra = {k: v for k, v in params.items()
             if k not in ("profile", "train_seed", "data_seed", "results_dir", "dataset")
             and defaults.get(k) != v and not (k == "results_name" and v == ch.name)}
    if threads() != BOOK_THREADS:
        extra["threads"] = threads()
    tag = (f"{params.get('profile', 'standard')}-train{params.get('train_seed', 0)}"
           f"-data{params.get('data_seed', 0)}")
    if extra:
        tag += "-" + hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8]
    return RUNS_DIR / tag


def read_notebook(path, fix: str = ""):
    """The notebook at ``path`` (nbformat 4), read bounded (:func:`cflib.io.read_text`); a
    file that is not a notebook (truncated, emptied, another file) is a ValueError that
    names it and ``fix`` (by default: restore the committed one)."""
    import nbformat

    from cflib.io import read_text

    fix = fix or f"`git checkout -- {_rel(path)}` restores the committed one"
    text = read_text(path, "notebook", fix=fix)
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as err:          # nbformat's NotJSONError, a validation error, ...
        first = str(err).strip().splitlines()[0][:120] if str(err).strip() else type(err).__name__
        raise ValueError(f"{_rel(path)} is not a notebook ({first}); {fix}") from None


def _rel(path) -> str:
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)
