"""Certificates: a change of code proven not to move a chapter's numbers, by twin runs.

A chapter's numbers come from one full run (the commit in its record, ``computed``).  A
later change of a definition that run ran makes it stale (:mod:`cflib.book.runs.digests`);
``cflib certify CHAPTER`` decides, in minutes, whether the change moves its numbers:

1. **twins**: the chapter's setup and compute cells run at ``smoke`` twice, side by side,
   one on a git worktree of the commit that computed the committed numbers and one on the
   working tree: the same seeds, one CPU thread each, no memoized step, each with an
   empty weight cache of its own (so every network the chapter trains is trained by each
   twin's own code), each under coverage.py's line tracer;
2. **equal outputs**: every file the twins' compute wrote is compared, bit for bit, after
   leaving out what a clock or a machine writes (wall-clock metrics,
   :attr:`cflib.metrics.spec.MetricSpec.timing`; columns and keys of seconds, dates,
   commits, provenance and where a network came from);
3. **every changed line ran**: each changed definition's changed statements (a
   :mod:`difflib` of the two versions of its module) ran in the twin of their version
   (the old ones in the old twin, the new in the new), and a changed signature or
   decorator counts only when the function's body ran.  A change whose lines run only at
   ``standard`` is refused with that reason: it needs a re-execution.  Error paths that
   no run reaches (a refusal's message, a full disk) are run by the twins'
   :data:`GUARD_PROBES` after the compute; each probe must raise in both twins (a change
   on a path that raises cannot move the numbers of a run that completed).

Then it writes ``book/certificates/<chapter>.json``: both commits, the old and new
digest of every changed definition, the definitions the new code runs that the recorded
run did not (a changed caller's new callee: inputs from now on), the twins' output
digests and coverage.  Staleness accepts exactly that mapping, and only for the record
it was made for (:func:`expected_definitions`); the chapter's provenance line names the
commit its numbers come from and the definitions certified since; ``cflib certify
--check`` re-checks every certificate against the records and today's code (CI); the
chapter's next full run retires its certificate.
"""
from __future__ import annotations

import ast
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cflib.book.chapters import Chapter, check, get_chapter, run_params
from cflib.book.runs import certificates
from cflib.book.runs.certificates import (
    FORMAT,
    certificate_path,
    read_certificate,
    record_digest,
)
from cflib.book.runs.paths import CHAPTER_DIR, PROJECT_ROOT, rel
from cflib.definitions import SKELETON, key_digest, key_lines, module_code

WORK = PROJECT_ROOT / "_build" / "certify"
#: what a clock or a machine writes into an output: never compared
VOLATILE = ("seconds", "second", "time", "date", "commit", "provenance", "origin",
            "duration", "elapsed", "when")

__all__ = ["certify", "check_certificates", "certify_networks", "Refused"]


class Refused(Exception):
    """A change that a certificate cannot cover (the reason says what it needs)."""


# -- the twins ----------------------------------------------------------------------------
@dataclass
class Twin:
    """One twin run: its tree, where it writes, and what came out."""

    label: str
    tree: Path
    work: Path
    proc: subprocess.Popen | None = None
    seconds: float = 0.0
    log: str = ""
    coverage: dict = field(default_factory=dict)

    @property
    def results(self) -> Path:
        return self.work / "results"


def _git(*args, cwd=PROJECT_ROOT) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise Refused(f"git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def worktree(commit: str) -> Path:
    """A git worktree of ``commit`` under ``_build/certify/`` (made once, reused).  Made
    under a lock: two certifications of chapters last run at one commit (side by side)
    would otherwise each remove the other's half-made tree."""
    import fcntl

    path = WORK / f"tree-{commit}"
    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / f"tree-{commit}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (path / ".git").exists():
            return path
        subprocess.run(["git", "worktree", "prune"], cwd=PROJECT_ROOT, capture_output=True)
        if path.exists():
            shutil.rmtree(path)
        _git("worktree", "add", "--detach", str(path), commit)
    return path


#: Error paths that no chapter run reaches, run by each twin after the chapter's compute
#: (under the same coverage): the image-range refusal (its message and advice) and the
#: [0, 1]-looking batch's warning (as an error), a method that returns complex
#: counterfactuals or another shape, a saved pair under a file, over a folder or resealed
#: without its record's fields, and a write to a full disk (torch's
#: own error, the OSError, and another failure passed through).  Each must raise, in both
#: twins: a change on a path that raises cannot move the numbers of a run that completed.
#: Their outcomes (raised by the function each is there for, raised elsewhere, or
#: returned) are compared and written into the certificate.
PROBES_FILE = "probes.json"   # each twin's probe outcomes, beside its coverage
GUARD_PROBES = """
import errno as _e, tempfile as _t, torch as _torch
from pathlib import Path as _P
from cflib.tensors import check_images as _ci
from cflib.io import atomic_write as _aw
from cflib.explainers.base import Explainer as _Ex
_cflib_probes = {}
def _cflib_probe(name, fn, where):
    # "raised" only where the error comes from the function the probe is there for
    try:
        fn()
        _cflib_probes[name] = "returned"
    except Exception as err:
        tb, frames = err.__traceback__, set()
        while tb is not None:
            frames.add(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
        _cflib_probes[name] = "raised" if where in frames else f"raised outside {where}"
_ones = _torch.ones(1, 1, 2, 2)
for _lo, _hi in ((-1.0, 1.0001), (-1.0002, 1.0), (0.0, 255.0), (0.0, 1.2), (-3.0, 3.0)):
    _cflib_probe(f"check_images [{_lo}, {_hi}]",
                 lambda: _ci(_torch.cat([_ones * _lo, _ones * _hi])), "check_images")
import warnings as _wn
with _wn.catch_warnings():
    _wn.simplefilter("error")                   # the [0, 1]-looking batch's warning raises
    _cflib_probe("check_images [0.0, 0.9]", lambda: _ci(_torch.cat([_ones * 0.0, _ones * 0.9])),
                 "check_images")
class _Returns(_Ex):
    name = "probe"
    def _generate(self, x, target, query, generator):
        return self.out
def _to_class_0():          # logits putting every image in class 0: target 1 is not yet
    lin = _torch.nn.Linear(4, 3)
    with _torch.no_grad():
        lin.weight.zero_()
        lin.bias.copy_(_torch.tensor([3.0, 0.0, -5.0]))
    return _torch.nn.Sequential(_torch.nn.Flatten(), lin)
for _name, _out in (("complex64", _torch.zeros(2, 1, 2, 2, dtype=_torch.complex64)),
                    ("complex128", _torch.zeros(2, 1, 2, 2, dtype=_torch.complex128)),
                    ("another shape", _torch.zeros(1, 1, 2, 2)), ("a list", [0.0])):
    _m = _Returns(_to_class_0())
    _m.out = _out
    _cflib_probe(f"explain returns {_name}", lambda: _m.explain(_torch.zeros(2, 1, 2, 2), 1),
                 "_checked_output")
def _torch_full(p):
    raise RuntimeError("[enforce fail] PytorchStreamWriter failed writing file data/0: "
                       "file write failed")
def _os_full(p):
    raise OSError(_e.ENOSPC, "No space left on device")
def _other(p):
    raise RuntimeError("another failure")
_d = _P(_t.mkdtemp())
for _w in (_torch_full, _os_full, _other):
    _cflib_probe(f"atomic_write {_w.__name__}", lambda: _aw(_d / "f.bin", _w), "atomic_write")
# bytes and text written over a folder: every kind of data reaches its write, then fails
(_d / "adir").mkdir()
(_d / "adir" / "x").write_text("x")
for _kind, _data in (("bytes", b"x"), ("text", "x")):
    _cflib_probe(f"atomic_write {_kind} over a folder", lambda: _aw(_d / "adir", _data),
                 "atomic_write")
# a saved pair: under a folder that is a file; its .json a folder; a record resealed
# without its fields
from cflib.explainers import records as _rec
(_d / "afile").write_text("x")
_cflib_probe("save under a file", lambda: _rec.write(_d / "afile" / "cf", {"k": 1}, {}), "write")
(_d / "pair.json").mkdir()
(_d / "pair.json" / "x").write_text("x")
_cflib_probe("save over a folder", lambda: _rec.write(_d / "pair", {"k": 1}, {}), "write")
_rec.write(_d / "fit", {"kind": _rec.FIT_KIND, "schema": _rec.FIT_SCHEMA, "method": "x",
                        "config": {}, "record": {"method": "x"}}, {})
_cflib_probe("explainer record resealed without its fields",
             lambda: _rec.read_explainer(_d / "fit"), "read_explainer")
# the weight cache's lock: a link to nowhere (refused), then held by another holder for a
# moment (waited for, then the training, which raises here, runs)
import fcntl as _fcntl, os as _os, threading as _th
from cflib import cache as _cache
def _fails(m):
    raise RuntimeError("the probe's training")
def _cached():
    return _cache.cached("probe", {"seed": 0}, lambda: _torch.nn.Linear(1, 1), _fails)
_was = _os.environ.get(_cache.CACHE_ENV)
_os.environ[_cache.CACHE_ENV] = str(_d / "cache")
try:
    (_d / "cache").mkdir()
    _lk = _P(str(_cache.cache_path("probe", {"seed": 0})) + ".lock")
    _os.symlink(_d / "nowhere" / "x", _lk)
    _cflib_probe("cache lock a link to nowhere", _cached, "cached")
    _lk.unlink()
    _fd = _os.open(_lk, _os.O_RDWR | _os.O_CREAT)
    _fcntl.flock(_fd, _fcntl.LOCK_EX)                     # as filelock holds it
    _th.Timer(0.2, _os.close, [_fd]).start()              # closing releases it
    _cflib_probe("cache lock held, then released", _cached, "cached")
finally:
    if _was is None:
        _os.environ.pop(_cache.CACHE_ENV, None)
    else:
        _os.environ[_cache.CACHE_ENV] = _was
"""


def twin_notebook(chapter: Chapter, tree: Path, coverage_out: Path):
    """The chapter's parameters, setup and compute cells as ``tree`` has them, then the
    :data:`GUARD_PROBES`, under coverage.py from the first cell (so that the imports are
    traced too); the probes' outcomes go to ``probes.json`` beside the coverage."""
    import jupytext
    import nbformat

    from cflib.book.runs.notebook import cell_kind

    nb = jupytext.read(tree / "notebooks" / chapter.source)
    cells = [c for c in nb.cells if cell_kind(c) in ("parameters", "setup", "compute")]
    start = nbformat.v4.new_code_cell(
        "import coverage as _cv\n"
        f"_cflib_cov = _cv.Coverage(data_file=None, source=[{str(tree / 'cflib')!r}], "
        "config_file=False)\n_cflib_cov.start()")
    probes = nbformat.v4.new_code_cell(
        GUARD_PROBES + "import json as _j\n"
        f"open({str(coverage_out.with_name(PROBES_FILE))!r}, 'w').write("
        "_j.dumps(_cflib_probes, sort_keys=True))")
    stop = nbformat.v4.new_code_cell(
        "_cflib_cov.stop()\nimport json as _j, cflib as _c\n"
        f"assert _c.__file__.startswith({str(tree)!r}), _c.__file__\n"
        "_d = _cflib_cov.get_data()\n"
        f"open({str(coverage_out)!r}, 'w').write(_j.dumps("
        "{f: sorted(_d.lines(f) or []) for f in _d.measured_files()}))")
    nb.cells = [start, *cells, probes, stop]
    for i, c in enumerate(nb.cells):
        c["id"] = f"twin-{i}"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


_RUNNER = """
import json, sys, logging
import papermill as pm
logging.getLogger("papermill").setLevel(logging.ERROR)
src, out, cwd, params = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
pm.execute_notebook(src, out, parameters=params, kernel_name="python3", cwd=cwd,
                    progress_bar=False, log_output=False)
"""


def start_twin(twin: Twin, chapter: Chapter, params: dict) -> None:
    import nbformat

    twin.work.mkdir(parents=True, exist_ok=True)
    twin.results.mkdir(exist_ok=True)
    cov = twin.work / "coverage.json"
    nb = twin_notebook(chapter, twin.tree, cov)
    src = twin.work / "twin.ipynb"
    nbformat.write(nb, src)
    cache = twin.work / "cache"
    cache.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(twin.tree), "CFLIB_CACHE": str(cache),
           "CFLIB_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "CFLIB_MEMO": "0", "CFLIB_PROGRESS": "0", "CFLIB_LOG": "WARNING"}
    env.pop("CFLIB_RENDER", None)
    injected = {**params, "results_dir": str(twin.results)}
    twin.seconds = time.perf_counter()
    twin.proc = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, str(src), str(twin.work / "out.ipynb"),
         str(twin.tree), json.dumps(injected)], cwd=twin.tree, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish_twin(twin: Twin) -> None:
    out, _ = twin.proc.communicate()
    twin.seconds = time.perf_counter() - twin.seconds
    twin.log = out or ""
    if twin.proc.returncode != 0:
        tail = "\n".join(twin.log.strip().splitlines()[-15:])
        raise Refused(f"the {twin.label} twin failed after {twin.seconds:.0f} s:\n{tail}")
    cov = json.loads((twin.work / "coverage.json").read_text())
    root = twin.tree.resolve()
    twin.coverage = {Path(f).resolve().relative_to(root).as_posix(): set(lines)
                     for f, lines in cov.items() if Path(f).resolve().is_relative_to(root)}


# -- comparing outputs --------------------------------------------------------------------
def _volatile(name: str) -> bool:
    n = str(name).lower()
    return any(v in n for v in VOLATILE)


def normalised(path: Path) -> bytes:
    """What of an output file is compared: a CSV without wall-clock metrics and volatile
    columns; a JSON without volatile keys; a tensor file's tensors, name by name."""
    if path.suffix == ".csv":
        import pandas as pd

        from cflib.book.runs.rerun import timing_metrics

        df = pd.read_csv(path)
        if "metric" in df.columns:
            df = df[~df["metric"].isin(timing_metrics())]
        df = df[[c for c in df.columns if not _volatile(c)]]
        return df.to_csv(index=False).encode()
    if path.suffix == ".json":
        def clean(v):
            if isinstance(v, dict):        # a file's format and checksum are not its numbers
                return {k: clean(x) for k, x in v.items()
                        if not _volatile(k) and k not in ("schema", "sha256", "format")}
            if isinstance(v, list):
                return [clean(x) for x in v]
            return v
        return json.dumps(clean(json.loads(path.read_text())), sort_keys=True).encode()
    if path.suffix == ".pt":
        import torch

        obj = torch.load(path, weights_only=True, map_location="cpu")
        h = hashlib.sha256()

        def walk(prefix, v):
            if torch.is_tensor(v):
                h.update(prefix.encode() + str(v.dtype).encode() + str(tuple(v.shape)).encode())
                h.update(v.contiguous().numpy().tobytes() if v.dtype != torch.bfloat16
                         else v.float().contiguous().numpy().tobytes())
            elif isinstance(v, dict):
                for k in sorted(v, key=str):
                    walk(f"{prefix}/{k}", v[k])
            elif isinstance(v, (list, tuple)):
                for i, x in enumerate(v):
                    walk(f"{prefix}/{i}", x)
            elif not _volatile(prefix.rsplit("/", 1)[-1]):
                h.update(f"{prefix}={v!r}".encode())
        walk("", obj)
        return h.hexdigest().encode()
    return path.read_bytes()


def output_digests(folder: Path) -> dict[str, str]:
    out = {}
    for f in sorted(Path(folder).rglob("*")):
        if f.is_file():
            out[f.relative_to(folder).as_posix()] = hashlib.sha256(normalised(f)).hexdigest()[:16]
    return out


def _first_difference(a: Path, b: Path) -> str:
    if a.suffix != ".csv":
        return "its content differs"
    import pandas as pd

    da, db = pd.read_csv(a), pd.read_csv(b)
    if list(da.columns) != list(db.columns) or len(da) != len(db):
        return f"{len(da)} vs {len(db)} rows"
    if "value" in da.columns:
        diff = da.index[(da["value"] != db["value"]) & ~(da["value"].isna() & db["value"].isna())]
        if len(diff):
            r = da.loc[diff[0]]
            what = ", ".join(f"{k}={r[k]}" for k in ("method", "pair", "metric") if k in da)
            return (f"{len(diff)} values differ, e.g. {what}: {da.loc[diff[0], 'value']!r} vs "
                    f"{db.loc[diff[0], 'value']!r}")
    return "its content differs"


# -- which lines changed, and whether they ran ------------------------------------------------
def _statements(tree: ast.AST) -> list[tuple[int, int, ast.stmt]]:
    """(first, last line that counts as the statement's own, node) of every statement:
    a compound statement's own lines are its header's."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        body = getattr(node, "body", None)
        last = (body[0].lineno - 1 if isinstance(body, list) and body and
                body[0].lineno > node.lineno else node.end_lineno)
        out.append((first, max(first, last), node))
    return out


def _is_docstring(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def changed_statements(old: str, new: str, name: str) -> tuple[list, list]:
    """The statements of definition ``name`` that a change touched: ``(old, new)``, each a
    list of ``(first line, last line, node, enclosing function or None)`` in its version of
    the module."""
    a, b = old.splitlines(), new.splitlines()
    span_a, span_b = key_lines(old, name) if old else None, key_lines(new, name) if new else None
    lines_a, lines_b = set(), set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        lines_a |= set(range(i1 + 1, i2 + 1))
        lines_b |= set(range(j1 + 1, j2 + 1))
        if i1 == i2:                  # an insertion: the statement around it in the old
            lines_a.add(max(i1, 1))
        if j1 == j2:
            lines_b.add(max(j1, 1))
    if name == SKELETON:           # the skeleton holds no unit: a unit's lines are its own
        def skeleton_lines(text, lines):
            code = module_code("x.py", text) if text else None
            return {x for x in lines if code is not None and code.unit_at(x) is None}
        lines_a, lines_b = skeleton_lines(old, lines_a), skeleton_lines(new, lines_b)

    def pick(text, span, lines):
        if not text or span is None:
            return []
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return []
        stmts = _statements(tree)
        funcs = [(f, n) for f, _, n in stmts if isinstance(n, (ast.FunctionDef,
                                                               ast.AsyncFunctionDef))]
        out, seen = [], set()
        for line in sorted(x for x in lines if span[0] <= x <= span[1]):
            holding = [(f, la, n) for f, la, n in stmts if f <= line <= n.end_lineno]
            if not holding:
                continue                          # a blank line or a comment
            f, la, n = max(holding, key=lambda t: t[0])    # the innermost
            if _is_docstring(n) or id(n) in seen:
                continue
            seen.add(id(n))
            encl = [fn for fl, fn in funcs if fl <= f and fn.end_lineno >= n.end_lineno
                    and fn is not n]
            out.append((f, la, n, max(encl, key=lambda fn: fn.lineno) if encl else None))
        return out

    return pick(old, span_a, lines_a), pick(new, span_b, lines_b)


def _ran(stmt, executed: set[int]) -> bool:
    first, last, node, func = stmt
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        # a signature, a default or a decorator counts when the body ran
        if isinstance(node, ast.ClassDef):
            return bool(executed & set(range(first, last + 1)))
        body = set(range(node.body[0].lineno, node.end_lineno + 1))
        return bool(executed & body)
    return bool(executed & set(range(first, last + 1)))


def unrun_changes(key: str, old: str, new: str, cov_old: set, cov_new: set) -> list[str]:
    """The changed statements of ``key`` that did not run in their twin, named by line."""
    name = key.split("::", 1)[1]
    s_old, s_new = changed_statements(old, new, name)
    missing = [f"line {s[0]} of the old version" for s in s_old if not _ran(s, cov_old)]
    missing += [f"line {s[0]}" for s in s_new if not _ran(s, cov_new)]
    if not s_old and not s_new and key_digest(key, text=old) != key_digest(key, text=new):
        missing.append("a change the line comparison cannot place")
    return missing


def _unrun(keys, base: str, cov_old: dict, cov_new: dict) -> dict[str, list[str]]:
    """``{key: the changed statements that did not run}`` of the definitions ``keys``
    between commit ``base`` and the working tree, from each twin's coverage."""
    out = {}
    for key in keys:
        module, _, name = key.partition("::")
        try:
            old_text = _git("show", f"{base}:{module}")
        except Refused:
            old_text = ""
        new_path = PROJECT_ROOT / module
        new_text = new_path.read_text() if new_path.exists() else ""
        if key_lines(new_text, name) is None and _moved(old_text, name):
            continue            # the same code under another name or in another module
        missing = unrun_changes(key, old_text, new_text, cov_old.get(module, set()),
                                cov_new.get(module, set()))
        if missing:
            out[key] = missing
    return out


def _moved(old_text: str, name: str) -> bool:
    """Is the unit ``name`` of ``old_text`` in today's cflib, the same code under another
    name or in another module (a move or a rename: its callers' changed lines run in the
    twins, its own lines did not change)?"""
    from cflib.definitions import unit_shapes

    shape = next((k for k, v in unit_shapes(old_text).items() if v == name), None)
    if shape is None:
        return False
    return any(shape in unit_shapes(f.read_text())
               for f in (PROJECT_ROOT / "cflib").rglob("*.py"))


def added_definitions(recorded: dict, coverage: dict[str, set[int]]) -> dict[str, str]:
    """The units the new twin ran (by its lines) that the recorded run did not, with the
    skeletons of their modules: what a certified change newly runs."""
    out = {}
    for module, lines in coverage.items():
        path = PROJECT_ROOT / module
        if not path.exists():
            continue
        code = module_code(path)
        for u in code.units:
            body = set(range(u.first, u.last + 1))
            key = f"{module}::{u.name}"
            if key not in recorded and lines & body and _body_ran(path, u, lines):
                out[key] = u.digest
        skel = f"{module}::{SKELETON}"
        if skel not in recorded and any(k.startswith(module + "::") for k in out):
            out[skel] = code.skeleton
    return out


def _body_ran(path: Path, unit, lines: set[int]) -> bool:
    text = path.read_text().splitlines()
    tree = ast.parse("\n".join(text))
    for node in ast.walk(tree):
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and
                node.end_lineno == unit.last and node.body):
            return bool(lines & set(range(node.body[0].lineno, node.end_lineno + 1)))
    return False


# -- certify ------------------------------------------------------------------------------
def _commit_now() -> str:
    from cflib.book.runs.paths import commit

    return commit()


def changes(chapter: Chapter, meta: dict) -> dict[str, tuple[str, str]]:
    """``{key: (recorded digest, today's)}`` of every definition the chapter's record holds
    that changed since its full run."""
    recorded = meta["inputs"]["compute"].get("definitions", {})
    return {k: (v, key_digest(k, PROJECT_ROOT)) for k, v in recorded.items()
            if key_digest(k, PROJECT_ROOT) != v}


def _other_reasons(chapter: Chapter, meta: dict) -> list[str]:
    """What a certificate cannot cover: anything but changed definitions and changed
    compute cells (both run in the twins, each tree's own)."""
    from cflib.book.runs.digests import staleness

    st = staleness(chapter)
    return [r for r in st.compute if "::" not in r and not r.startswith("the compute code of")
            ] + st.outputs


def certify(name: str, log=print) -> dict | None:
    """Certify the changed definitions of one chapter (see the module's docstring);
    returns the certificate written, None when nothing changed.  Raises :class:`Refused`
    naming why no certificate can be written."""
    from cflib.book.runs.digests import notebook_record

    ch = get_chapter(name)
    meta = notebook_record(ch)
    if meta is None or "definitions" not in meta["inputs"]["compute"]:
        raise Refused(f"{name}'s committed notebook records no definitions (an older "
                      f"record): re-execute it once (make chapter NB={name})")
    other = _other_reasons(ch, meta)
    if other:
        raise Refused(f"{name} needs a re-execution, which no certificate replaces: "
                      + "; ".join(other[:5]))
    changed = changes(ch, meta)
    from cflib.book.runs.digests import source_digests

    source = (meta["inputs"]["compute"]["source"], source_digests(ch)["compute"])
    if not changed and source[0] == source[1]:
        log(f"[{name}] nothing to certify: every definition its run ran is unchanged")
        return None
    base = str(meta["computed"]["commit"])
    if base.endswith("+") or base == "unknown":
        raise Refused(f"{name}'s numbers were computed from uncommitted code ({base}); no "
                      "worktree can reproduce it: re-execute the chapter")
    log(f"[{name}] certifying {len(changed)} changed definition(s)"
        f"{' and its compute cells' if source[0] != source[1] else ''} against commit {base}: "
        f"twin runs at smoke (empty caches, one thread each)")
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_work()))
    old, new, params = _twins(ch, base, work)
    cert = _judge(ch, meta, base, changed, old, new, params)
    if source[0] != source[1]:
        cert["source"] = list(source)
    cert["seconds"] = round(time.perf_counter() - t0)
    path = certificate_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cert, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    log(f"[{name}] certified in {cert['seconds']} s -> {rel(path)}")
    return cert


def _twins(ch: Chapter, base: str, work: Path) -> tuple[Twin, Twin, dict]:
    """The chapter's compute at ``smoke`` run twice side by side, on a worktree of
    ``base`` and on the working tree: ``(old, new, the parameters)``."""
    params = check(ch, run_params(ch, {"profile": "smoke", "device": "cpu", "train_seed": 0,
                                       "data_seed": 0}))
    params = {k: v for k, v in params.items() if k != "results_dir"}
    old = Twin("old", worktree(base), work / "old")
    new = Twin("new", PROJECT_ROOT, work / "new")
    try:
        for twin in (old, new):
            start_twin(twin, ch, params)
        for twin in (old, new):
            finish_twin(twin)
    finally:
        for twin in (old, new):
            if twin.proc is not None and twin.proc.poll() is None:
                twin.proc.kill()
    return old, new, params


def _work() -> Path:
    WORK.mkdir(parents=True, exist_ok=True)
    return WORK


def _judge(ch, meta, base, changed, old: Twin, new: Twin, params) -> dict:
    a, b = output_digests(old.results), output_digests(new.results)
    if set(a) != set(b):
        raise Refused(f"the twins wrote other files: {sorted(set(a) ^ set(b))[:5]}")
    differ = [n for n in a if a[n] != b[n]]
    if differ:
        why = "; ".join(f"{n}: {_first_difference(old.results / n, new.results / n)}"
                        for n in differ[:3])
        raise Refused(f"the change moves {ch.name}'s numbers at smoke ({why}): it needs a "
                      f"re-execution (make chapter NB={ch.name})")
    probes = [json.loads((t.work / PROBES_FILE).read_text()) for t in (old, new)]
    if probes[0] != probes[1] or set(probes[1].values()) != {"raised"}:
        raise Refused(f"the guard probes (certify.GUARD_PROBES) must raise in both twins: "
                      f"old {probes[0]}, new {probes[1]}")
    unrun = _unrun(changed, base, old.coverage, new.coverage)
    if unrun:
        listed = "; ".join(f"{k} ({', '.join(v[:3])})" for k, v in list(unrun.items())[:5])
        raise Refused(f"changed lines that do not run at smoke, so twins cannot vouch for "
                      f"them: {listed}; they need a re-execution at standard "
                      f"(make chapter NB={ch.name})")
    recorded = meta["inputs"]["compute"]["definitions"]
    return {"format": FORMAT, "chapter": ch.name, "record": record_digest(meta),
            "computed_commit": base, "certified_commit": _commit_now(),
            "date": time.strftime("%Y-%m-%d"), "profile": "smoke", "params": params,
            "definitions": {k: list(v) for k, v in sorted(changed.items())},
            "added": added_definitions(recorded, new.coverage),
            "outputs": b, "guard_probes": probes[1], "twin_seconds": {"old": round(old.seconds), "new": round(new.seconds)}}


def check_certificates(folder: Path = CHAPTER_DIR) -> list[str]:
    """Every certificate checked against the record it was made for and today's code:
    the problems, each named (empty: all hold).  A certificate whose record is gone (the
    chapter re-executed) or whose new digests are no longer today's is a problem: retire
    it or certify again."""
    cert_dir = certificates.CERT_DIR           # read when called (a test points it elsewhere)
    paths = sorted(cert_dir.glob("*.json")) if cert_dir.exists() else []
    return [problem for path in paths for problem in _check_certificate(path, folder)]


def _check_certificate(path: Path, folder: Path) -> list[str]:
    """The problems of one certificate file (see :func:`check_certificates`)."""
    from cflib.book.runs.digests import notebook_record

    name = path.stem
    try:
        cert = read_certificate(name)
        ch = get_chapter(name)
    except ValueError as err:
        return [str(err)]
    meta = notebook_record(ch, folder)
    if meta is None or cert.get("record") != record_digest(meta):
        return [f"{rel(path)} was made for another run of {name} than the committed "
                f"one: delete it (the chapter's full run retires its certificate)"]
    bad = _definitions_unheld(path, name, cert, meta["inputs"]["compute"])
    if cert.get("source"):
        from cflib.book.runs.digests import source_digests

        old, new = cert["source"]
        if old != meta["inputs"]["compute"]["source"]:
            bad.append(f"{rel(path)}: its old compute cells are not the recorded ones")
        if new != source_digests(ch)["compute"]:
            bad.append(f"{rel(path)}: {ch.source}'s compute cells changed since it was "
                       f"certified: `cflib certify {name}` again")
    try:
        _git("cat-file", "-e", f"{cert.get('computed_commit')}^{{commit}}")
    except Refused:
        bad.append(f"{rel(path)}: its commit {cert.get('computed_commit')} is not in "
                   "this checkout's history")
    return bad


def _definitions_unheld(path: Path, name: str, cert: dict, compute: dict) -> list[str]:
    """A certificate's changed and added definitions that no longer hold, each named."""
    bad = []
    recorded = compute.get("definitions", {})
    for key, pair in cert.get("definitions", {}).items():
        if not (isinstance(pair, list) and len(pair) == 2):
            bad.append(f"{rel(path)}: {key} is not an [old, new] pair")
            continue
        if recorded.get(key) != pair[0]:
            bad.append(f"{rel(path)}: {key}'s old digest is not the recorded one")
        if key_digest(key, PROJECT_ROOT) != pair[1]:
            bad.append(f"{rel(path)}: {key} changed since it was certified: "
                       f"`cflib certify {name}` again")
    for key, sha in cert.get("added", {}).items():
        if key_digest(key, PROJECT_ROOT) != sha:
            bad.append(f"{rel(path)}: {key} (newly run by the certified change) changed "
                       f"since: `cflib certify {name}` again")
    return bad


# -- the shipped networks ---------------------------------------------------------------------
_TRAINER = """
import json, sys
import coverage
tree, specs, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
cov = coverage.Coverage(data_file=None, source=[tree + "/cflib"], config_file=False)
cov.start()
from cflib.bench import zoo
from cflib.cache import state_fingerprint
weights = {}
for s in specs:
    fn = getattr(zoo, s["kind"])
    args = [s["dataset"]] + ([s["cls"]] if s["kind"] == "autoencoder" else [])
    kw = {"arch": s["arch"]} if s["kind"] == "autoencoder" else {}
    model, info = fn(*args, profile="smoke", seed=0, **kw)
    weights[s["id"]] = state_fingerprint(model.state_dict())
# branch probes: what no smoke training reaches, on a tiny seeded problem (gradient
# clipping and early stopping of both trainers; the loader's missing-file error)
import tempfile
import torch
from cflib import training as T
from cflib.bench import data as D
from cflib.models import C3LTClassifier, ConvAutoencoder
g = torch.Generator().manual_seed(0)
x, xv = torch.rand(32, 1, 28, 28, generator=g) * 2 - 1, torch.rand(16, 1, 28, 28, generator=g) * 2 - 1
y, yv = torch.randint(0, 10, (32,), generator=g), torch.randint(0, 10, (16,), generator=g)
torch.manual_seed(0)
m = C3LTClassifier()
run = T.train_classifier(m, x, y, 8, batch_size=8, seed=0, x_val=xv, y_val=yv, patience=1,
                         grad_clip=1.0)
weights["probe: train_classifier"] = [state_fingerprint(m.state_dict()), run]
torch.manual_seed(0)
a = ConvAutoencoder()
run = T.train_autoencoder(a, x, 8, lr=0.05, batch_size=8, seed=0, x_val=xv, patience=1)
weights["probe: train_autoencoder"] = [state_fingerprint(a.state_dict()), run]
try:
    D._load("mnist", True, tempfile.mkdtemp())
    weights["probe: _load"] = "read"
except Exception as err:
    weights["probe: _load"] = type(err).__name__
cov.stop()
d = cov.get_data()
json.dump({"weights": weights, "coverage": {f: sorted(d.lines(f) or []) for f in
                                            d.measured_files()}}, open(out, "w"))
"""


def _train_twin(tree: Path, specs: list[dict], work: Path) -> subprocess.Popen:
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "CFLIB_CACHE": str(work / "cache"),
           "CFLIB_SHIPPED": "off", "CFLIB_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "CFLIB_MEMO": "0", "CFLIB_PROGRESS": "0",
           "CFLIB_LOG": "WARNING"}
    return subprocess.Popen([sys.executable, "-c", _TRAINER, str(tree), json.dumps(specs),
                             str(work / "out.json")], cwd=tree, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _twin_result(proc: subprocess.Popen, tree: Path, work: Path, label: str) -> dict:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        tail = "\n".join((out or "").strip().splitlines()[-12:])
        raise Refused(f"the {label} twin training failed:\n{tail}")
    got = json.loads((work / "out.json").read_text())
    root = tree.resolve()
    got["coverage"] = {Path(f).resolve().relative_to(root).as_posix(): set(v)
                       for f, v in got["coverage"].items() if Path(f).resolve().is_relative_to(root)}
    return got


def _network_groups() -> dict[str, list]:
    """The shipped networks whose training code changed since they were trained, grouped
    by the commit that trained them: ``{commit: [(name, entry, changed keys)]}``."""
    from cflib import provenance as prov
    from cflib.shipped import manifest

    groups: dict[str, list] = {}
    for name, e in manifest().items():
        changed = prov.changed_since(e.get("provenance"), certified={})
        if changed:
            groups.setdefault(str(e["provenance"].get("commit", "unknown")), []).append(
                (name, e, changed))
    return groups


def _twin_specs(nets) -> list[dict]:
    """One training per kind, architecture, dataset and class/all-class of ``nets``."""
    specs, seen = [], set()
    for name, e, _ in nets:
        c = e["config"]
        sig = (e["kind"], c.get("arch"), c.get("dataset"), c.get("cls") is None)
        if sig not in seen:
            seen.add(sig)
            specs.append({"id": name, "kind": e["kind"], "dataset": c["dataset"],
                          "cls": c.get("cls"), "arch": c.get("arch")})
    return specs


def _certify_group(commit_: str, nets: list, log) -> tuple[dict, dict]:
    """Twin trainings for the networks one commit trained: ``({key: (old, new)}, the
    evidence)``, or :class:`Refused`."""
    from cflib import provenance as prov

    base = commit_.rstrip("+")
    keys = sorted({k for _, _, ch in nets for k in ch})
    recorded = {k: v for _, e, _ in nets for k, v in e["provenance"]["code"].items() if k in keys}
    try:
        at = prov.training_code_at(list(recorded), base)
    except ValueError as err:
        raise Refused(str(err)) from None
    if commit_.endswith("+") and at != recorded:
        raise Refused(f"trained from uncommitted code that commit {base} does not hold "
                      f"({sorted(k for k in recorded if at.get(k) != recorded[k])[:3]})")
    specs = _twin_specs(nets)
    log(f"[networks] {len(nets)} network(s) trained at {commit_}: {len(keys)} changed "
        f"definition(s); twin trainings of {len(specs)} at smoke")
    work = Path(tempfile.mkdtemp(prefix="networks-", dir=_work()))
    t0, old_tree = time.perf_counter(), worktree(base)
    procs = [_train_twin(old_tree, specs, work / "old"), _train_twin(PROJECT_ROOT, specs,
                                                                     work / "new")]
    try:
        old = _twin_result(procs[0], old_tree, work / "old", "old")
        new = _twin_result(procs[1], PROJECT_ROOT, work / "new", "new")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    differ = [i for i in old["weights"] if old["weights"][i] != new["weights"].get(i)]
    if differ:
        raise Refused(f"the twins trained other weights ({differ[:3]}): retrain and ship these "
                      "networks (cflib networks ship)")
    unrun = _unrun(keys, base, old["coverage"], new["coverage"])
    if unrun:
        raise Refused("changed training lines that did not run at smoke: " + "; ".join(
            f"{k} ({', '.join(v[:2])})" for k, v in unrun.items()))
    shutil.rmtree(work, ignore_errors=True)
    pairs = {key: (recorded[key], key_digest(key, PROJECT_ROOT)) for key in keys}
    return pairs, {"trained_at": commit_, "compared_with": base,
                   "certified_commit": _commit_now(), "date": time.strftime("%Y-%m-%d"),
                   "networks": [n for n, _, _ in nets], "trained_twins": [s["id"] for s in specs],
                   "weights": new["weights"], "definitions": keys,
                   "seconds": round(time.perf_counter() - t0)}


def certify_networks(log=print) -> dict:
    """Certify the training-code changes since each shipped network was trained: for each
    commit that trained some of them, twin trainings at ``smoke`` (a worktree of that
    commit and the working tree; empty caches, one thread, coverage) of one network of each
    kind, architecture and dataset, and probes of what no smoke training reaches (both
    trainers' gradient clipping and early stopping on a tiny seeded problem, the loader's
    missing-file error); the weights (and the probes' records) bit-equal and every changed
    line of their training code run in its twin.  Writes ``networks/CERTIFICATES.json`` (the accepted
    ``[old, new]`` digests with their evidence) and returns it; a group whose twins
    disagree is named in ``refused``."""
    from cflib.shipped import CERTIFICATES, shipped_root

    root = shipped_root()
    if root is None:
        raise Refused("no shipped networks (networks/MANIFEST.json) to certify")
    accepted: dict[str, set] = {}
    evidence, refused = [], []
    for commit_, nets in sorted(_network_groups().items()):
        try:
            pairs, proof = _certify_group(commit_, nets, log)
        except Refused as err:
            refused.append(f"{commit_}: {err}")
            continue
        for key, pair in pairs.items():
            accepted.setdefault(key, set()).add(pair)
        evidence.append(proof)
    out = {"format": FORMAT,
           "definitions": {k: sorted(list(p) for p in v) for k, v in sorted(accepted.items())},
           "evidence": evidence}
    (root / CERTIFICATES).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    out["refused"] = refused
    return out
