"""One chapter run: prepare, execute, record, install.

A chapter's jupytext source is converted to a notebook and executed by papermill in a
scratch folder, in one of two modes:

* ``compute``: every cell runs; the compute cells write the chapter's outputs (results
  files, saved counterfactuals) and the presentation cells read them back;
* ``render``: the compute cells do not run; the chapter's outputs of its last full run are
  checked against its notebook and copied in, and the presentation cells alone run on
  them (seconds: a changed figure never re-trains or re-explains anything, and any
  explainer call or training in the kernel is an error, ``CFLIB_RENDER``).

Only a run that succeeds replaces anything: its executed notebook, stripped of stderr
noise, with its code collapsed, a line saying which commit, profile and seeds produced it,
and the record of its inputs and outputs (:mod:`cflib.book.runs.digests`), then its
outputs, are moved into place atomically.  A failed run leaves the previous notebook,
results and README byte-identical (the failed notebook is kept under ``_build/failed/``).
"""
from __future__ import annotations

import datetime
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cflib.bench.data import PROJECT_ROOT
from cflib.book.chapters import Chapter, check, get_chapter, run_params
from cflib.book.runs.certificates import certificate_digest, certificate_line, retire
from cflib.book.runs.digests import (
    FORMAT,
    FORMATS,
    check_outputs,
    check_seal,
    input_digests,
    notebook_record,
    output_digests,
    seal_notebook,
    staleness,
)
from cflib.book.runs.notebook import (
    PROBE,
    add_tracing,
    clean,
    fill_discussion,
    restore_compute_cells,
    scrub_paths,
    to_notebook,
)
from cflib.book.runs.paths import (
    CHAPTER_DIR,
    FAILED_DIR,
    check_output_dir,
    commit,
    output_dirs,
    rel,
)
from cflib.env import RENDER, check_all, environ
from cflib.env import threads as env_threads
from cflib.io import atomic_write

log = logging.getLogger("cflib.runs")
MODES = ("compute", "render")


class Console(io.TextIOBase):
    """Where a kernel's output goes on the terminal: each line prefixed with its chapter
    (chapters run side by side), without the probe's record of the kernel's inputs (it
    stays in the notebook's metadata)."""

    HIDDEN = ("CFLIB_INPUTS",)

    def __init__(self, chapter: str, stream=None):
        super().__init__()
        self.chapter, self.stream, self.buffer = chapter, stream, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.buffer += text
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            self._emit(line)
        return len(text)

    def _emit(self, line: str) -> None:
        if line.strip() and not any(h in line for h in self.HIDDEN):
            out = self.stream or sys.stdout
            out.write(f"[{self.chapter}] {line}\n")
            out.flush()

    def flush(self) -> None:
        if self.buffer:
            self._emit(self.buffer)
            self.buffer = ""


@dataclass(frozen=True)
class ChapterRun:
    """One prepared run of a chapter: what it is, where it writes, what it read."""

    chapter: Chapter
    params: dict
    mode: str
    threads: int
    nb_dir: Path
    res_dir: Path
    work: Path
    copied: frozenset = field(default_factory=frozenset)   # inputs copied into its results
    previous: dict | None = None                           # the last full run's record

    @property
    def results(self) -> Path:
        """The scratch results folder the kernel writes and reads."""
        return self.work / "results"

    @property
    def final(self) -> Path:
        return self.nb_dir / f"{self.chapter.name}.ipynb"

    @property
    def injected(self) -> dict:
        return {**self.params, "results_dir": rel(self.results)}

    def environment(self) -> dict:
        # CPU training depends on the thread count: the kernel gets CFLIB_THREADS (default
        # 1, the book's runs) so that a re-run reproduces the committed numbers
        t = str(self.threads)
        return {"CFLIB_LOG": "INFO", "CFLIB_PROGRESS": "0", "OMP_NUM_THREADS": t,
                "MKL_NUM_THREADS": t, RENDER: "1" if self.mode == "render" else None}


def prepare(chapter: str, profile: str = "standard", device: str = "cpu", train_seed: int = 0,
            data_seed: int = 0, extra: dict | None = None, out_dir: Path | None = None,
            results_dir: Path | None = None, mode: str = "compute") -> ChapterRun:
    """Validate everything before any kernel starts, make the folders, and copy in what the
    chapter reads (a render: its own outputs too, checked against its notebook)."""
    import nbformat

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    ch = get_chapter(chapter)
    run = run_params(ch, {"profile": profile, "device": device, "train_seed": train_seed,
                          "data_seed": data_seed})
    params = check(ch, {**run, **(extra or {})})
    check_all()                  # every environment variable cflib reads, before any work
    if mode == "compute" and ch.datasets(params):
        from cflib.bench.data import check_data

        check_data(ch.datasets(params))       # a missing data root: before any kernel
    nb_dir, res_dir = output_dirs(ch, params)      # resolved and checked
    if out_dir is not None:
        nb_dir = check_output_dir(out_dir, "out_dir")
    if results_dir is not None:
        res_dir = check_output_dir(results_dir, "results_dir")
    for d in (nb_dir, res_dir):
        d.mkdir(parents=True, exist_ok=True)
        if not os.access(d, os.W_OK):
            raise PermissionError(f"cannot write into {d}; choose another folder")
    previous = _last_full_run(ch, params, nb_dir, res_dir) if mode == "render" else None
    work = Path(tempfile.mkdtemp(prefix=f"{ch.name}-", dir=scratch()))
    results = work / "results"
    results.mkdir()
    copied = _copy_inputs(ch, params, res_dir, previous, results)
    nb = to_notebook(ch, render=mode == "render")
    add_tracing(nb, render=mode == "render")
    probe = nbformat.v4.new_code_cell(PROBE)
    probe.metadata["tags"] = ["cflib-probe"]
    nb.cells.append(probe)
    nbformat.write(nb, work / f"{ch.name}.ipynb")
    return ChapterRun(ch, params, mode, env_threads(), nb_dir, res_dir, work,
                      frozenset(copied), previous)


def _last_full_run(ch: Chapter, params: dict, nb_dir: Path, res_dir: Path) -> dict:
    """The record of the chapter's last full run, which a re-render renders from: refused
    when there is none, when its outputs no longer match it, or when its compute changed
    since."""
    previous = notebook_record(ch, nb_dir)
    if not previous or previous.get("format") not in FORMATS:
        raise ValueError(f"{ch.name} has no full run to re-render from in {rel(nb_dir)}; "
                         f"execute it (make chapter NB={ch.name})")
    bad = check_outputs(ch, res_dir, nb_dir)
    if bad:
        raise ValueError(f"cannot re-render {ch.name}: " + "; ".join(bad))
    changed = staleness(ch, params, nb_dir, res_dir).compute
    if changed:
        raise ValueError(f"cannot re-render {ch.name}: its compute changed since its last "
                         f"full run ({'; '.join(changed[:3])}); execute it (make chapter "
                         f"NB={ch.name})")
    return previous


def _copy_inputs(ch: Chapter, params: dict, res_dir: Path, previous: dict | None,
                 results: Path) -> set[str]:
    """Copy into the run's scratch ``results`` what the chapter reads (from the run's own
    results; what no chapter makes, the benchmark's files, from the book's when the run's
    folder lacks them) and, for a re-render, its last full run's outputs; returns their
    names."""
    copied, names = set(), []
    for pattern in ch.read_patterns(params["profile"]):
        src_dir = res_dir
        if pattern in ch.external and not any(res_dir.glob(pattern)):
            from cflib.book.runs.paths import RESULTS_DIR

            src_dir = RESULTS_DIR
        names += [(src_dir, f.relative_to(src_dir)) for f in src_dir.glob(pattern)]
    if previous:
        names += [(res_dir, Path(n)) for n in previous.get("outputs", {})]
    for src_dir, name in names:
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src_dir / name, results / name)
        copied.add(str(name))
    return copied


def execute(run: ChapterRun) -> tuple[Path, float]:
    """The prepared notebook through papermill; returns (the executed notebook, seconds).
    A failure keeps the failed notebook under ``_build/failed/`` and raises."""
    import papermill as pm

    ch = run.chapter
    # papermill cannot read 'x: list | None = ...' annotations and warns about every such
    # parameter; cflib.book.chapters validated them above (and the notebook does again)
    logging.getLogger("papermill").setLevel(logging.ERROR)
    src, executed = run.work / f"{ch.name}.ipynb", run.work / f"{ch.name}.out.ipynb"
    verb = "executing" if run.mode == "compute" else "re-rendering (no compute)"
    print(f"[{ch.name}] {verb}: {describe(run.params)} (kernel output follows)", flush=True)
    console = Console(ch.name)
    t0 = time.perf_counter()
    try:
        with environ(**run.environment()):
            # the kernel logs at error level only (no transport warning on the console)
            pm.execute_notebook(str(src), str(executed), parameters=run.injected,
                                kernel_name="python3", cwd=str(PROJECT_ROOT),
                                progress_bar=False, log_output=False, stdout_file=console,
                                stderr_file=console,
                                extra_arguments=["--IPKernelApp.log_level=ERROR"])
    except Exception as err:
        FAILED_DIR.mkdir(parents=True, exist_ok=True)
        if executed.exists():
            shutil.copy2(executed, FAILED_DIR / f"{ch.name}.ipynb")
        shutil.rmtree(run.work, ignore_errors=True)
        raise RuntimeError(f"chapter {ch.name} failed after {time.perf_counter() - t0:.0f} s; "
                           f"nothing was replaced (the failed notebook: "
                           f"{rel(FAILED_DIR / (ch.name + '.ipynb'))})\n{err}") from None
    finally:
        console.flush()
    return executed, time.perf_counter() - t0


def _written(run: ChapterRun) -> list[str]:
    """The files the kernel wrote into its results folder (not the ones copied in)."""
    return sorted(str(f.relative_to(run.results)) for f in run.results.rglob("*")
                  if f.is_file() and str(f.relative_to(run.results)) not in run.copied)


def _provenance(run: ChapterRun, seconds: float, when: str) -> tuple[str, dict]:
    """The page's provenance line (when, from which commit and how its numbers were
    computed; for a re-render of the book's run, what its certificate certified since)
    and the record of the computation (``computed``)."""
    ch, params, prev = run.chapter, run.params, run.previous or {}
    if run.mode == "render":
        computed = prev.get("computed", {})
        provenance = (f"*This page's numbers were computed on {computed.get('date', '?')} from "
                      f"commit `{computed.get('commit', '?')}` of the project, "
                      f"{describe(params)} ({_threads(computed.get('threads', run.threads))}), "
                      f"in {computed.get('seconds', 0) / 60:.1f} minutes; the page was "
                      f"rendered from them on {when} (commit `{commit()}`).*")
        if run.nb_dir.resolve() == CHAPTER_DIR.resolve():
            provenance += certificate_line(ch.name, prev)
    else:
        computed = {"date": when, "commit": commit(), "seconds": round(seconds),
                    "threads": run.threads}
        provenance = (f"*This page was executed on {when} from commit `{commit()}` of the "
                      f"project, {describe(params)} ({_threads(run.threads)}), in "
                      f"{seconds / 60:.1f} minutes.*")
    provenance += _sweep_line(run)
    provenance += (f" *Code: `notebooks/{ch.source}`; re-run: `make chapter NB={ch.name}`.*")
    return provenance, computed


def _sweep_line(run: ChapterRun) -> str:
    """For a chapter whose tables merge other training seeds: which seeds, and that they
    come from ``cflib sweep`` runs, not from this page's run."""
    ch = run.chapter
    if not any(r.startswith("sweep/{chapter}/") for r in ch.reads):
        return ""
    folder = run.res_dir / "sweep" / ch.name / run.params["profile"]
    seeds = sorted(int(d.name[4:]) for d in folder.glob("seed*") if d.name[4:].isdigit())
    if not seeds:
        return ""
    own = run.params.get("train_seed", 0)
    return (f" *Its tables of mean ± sd over training seeds merge this run (training seed "
            f"{own}) with training seed{'s' if len(seeds) > 1 else ''} "
            f"{', '.join(map(str, seeds))}, each a `cflib sweep` run of this chapter "
            f"(`{rel(folder)}/`; its date and commit in `results/written.json`).*")


def record(run: ChapterRun, executed: Path, seconds: float):
    """The executed notebook made into the page: cleaned, its compute cells restored (a
    render), its discussion filled, this machine's paths scrubbed, and the record of its
    inputs and outputs in ``metadata["cflib"]``.  Returns (notebook, outputs)."""
    import nbformat

    ch, params = run.chapter, run.params
    nb = nbformat.read(executed, as_version=4)
    when = datetime.date.today().isoformat()
    prev = run.previous or {}
    if run.mode == "render":
        restore_compute_cells(nb, ch, nbformat.read(run.final, as_version=4))
    provenance, computed = _provenance(run, seconds, when)
    reported = clean(nb, ch, params, provenance)
    try:
        # the discussion is filled here, not in the kernel: what it runs is presentation too
        discussed = traced(lambda: fill_discussion(nb, ch, run.results))
    except Exception as err:    # a template error never loses a run: fix it, then refresh
        discussed = {}
        print(f"[{ch.name}] the discussion could not be filled ({type(err).__name__}: {err}); "
              f"the run is kept with its marker: fix book/discussion/ and run `cflib refresh "
              f"{ch.name}`", flush=True)
    scrub_paths(nb, run.injected["results_dir"], rel(run.res_dir))
    if run.mode == "render":
        outputs = dict(prev.get("outputs", {}))
    else:
        outputs = output_digests(run.results, _written(run))
    inputs = input_digests(ch, params, reported.get("data", []), reported.get("reads", []),
                           run.results, outputs, reported.get("definitions"),
                           {**(reported.get("presentation") or {}), **discussed},
                           reported.get("networks", []))
    if run.mode == "render":
        # the compute did not run: its inputs are the last full run's (unchanged, which
        # is why this was a render)
        inputs["compute"] = prev["inputs"]["compute"]
    nb.metadata["cflib"] = {"format": FORMAT, "chapter": ch.name, "mode": run.mode,
                            "commit": commit(), "date": when, "seconds": round(seconds),
                            "threads": run.threads, "params": params, "computed": computed,
                            "inputs": inputs, "outputs": outputs}
    if run.nb_dir.resolve() == CHAPTER_DIR.resolve():          # the book's run
        nb.metadata["cflib"]["certificate"] = (certificate_digest(ch.name)
                                               if run.mode == "render" else "")
    return nb, outputs


def install(run: ChapterRun, nb, outputs: dict) -> Path:
    """Move the outputs, then the notebook, into place, each atomically; a file whose
    content did not change is left as it is (a re-run with the same outputs changes
    nothing).  Returns the notebook's path."""
    import nbformat

    ch = run.chapter
    if run.mode == "compute" and run.nb_dir.resolve() == CHAPTER_DIR.resolve():
        retire(ch.name)            # a full run: its numbers need no certificate
    if run.mode == "compute":
        for name in outputs:
            src, dest = run.results / name, run.res_dir / name
            if not _same_bytes(src, dest):
                dest.parent.mkdir(parents=True, exist_ok=True)
                install_file(src, dest)
    final = run.final
    seal_notebook(nb)
    old = nbformat.read(final, as_version=4) if final.exists() else None
    if (old is not None and same_outputs(old, nb) and same_record(old, nb)
            and not check_seal(ch, final.parent, old)):
        print(f"[{ch.name}] done: the same outputs as {rel(final)}, left as it was",
              flush=True)
    else:
        tmp_nb = run.work / "final.ipynb"
        nbformat.write(nb, tmp_nb)
        install_file(tmp_nb, final)
        print(f"[{ch.name}] done -> {rel(final)}", flush=True)
    return final


def build(chapter: str, profile: str = "standard", device: str = "cpu", train_seed: int = 0,
          data_seed: int = 0, extra: dict | None = None, out_dir: Path | None = None,
          results_dir: Path | None = None, mode: str = "compute") -> Path:
    """Run one chapter (``mode``: ``compute`` executes it all, ``render`` re-renders it from
    its last full run's outputs); returns the path of its executed notebook.

    Parameters are validated before any kernel starts.  ``out_dir`` / ``results_dir``
    override where the notebook and the results go (tests); by default the book's run
    replaces the committed files and any other run writes under ``_build/runs/``.
    """
    run = prepare(chapter, profile, device, train_seed, data_seed, extra, out_dir,
                  results_dir, mode)
    try:
        executed, seconds = execute(run)
        nb, outputs = record(run, executed, seconds)
        path = install(run, nb, outputs)
        print(f"[{run.chapter.name}] {run.mode} run took {seconds:.0f} s", flush=True)
        return path
    finally:
        shutil.rmtree(run.work, ignore_errors=True)


def describe(params: dict) -> str:
    parts = [f"profile `{params['profile']}`"]
    if "train_seed" in params:
        parts.append(f"training seed {params['train_seed']}")
    if "data_seed" in params:
        parts.append(f"data seed {params['data_seed']}")
    if "device" in params:
        parts.append(f"device `{params['device']}`")
    return ", ".join(parts)


def _threads(n: int) -> str:
    return f"{n} CPU thread" + ("" if int(n) == 1 else "s")


def _same_bytes(a: Path, b: Path) -> bool:
    return b.exists() and a.read_bytes() == b.read_bytes()


def same_outputs(old, new) -> bool:
    """Do two executed notebooks show the same thing (cells, sources and outputs), whatever
    their run records (date, commit, minutes, execution counts and times)?"""
    def view(nb):
        cells = []
        for c in nb.cells:
            if "cflib-provenance" in c.get("metadata", {}).get("tags", []):
                continue
            outs = [{k: v for k, v in o.items() if k not in ("execution_count", "metadata")}
                    for o in c.get("outputs", [])]
            cells.append((c.cell_type, c.source, json.dumps(outs, sort_keys=True)))
        return cells
    return view(old) == view(new)


def traced(fn) -> dict[str, str]:
    """Run ``fn``; the cflib definitions it ran (:func:`cflib.trace.record`), as the
    kernel's tracer records a page's.  Inside a traced computation, its segment; under
    another tracer (a debugger, coverage), nothing can be seen: ``{}``."""
    from cflib import trace

    if trace.active():
        with trace.segment() as seg:
            fn()
        return trace.record(seg)
    if sys.gettrace() is not None:
        fn()
        return {}
    trace.start()
    try:
        fn()
    finally:
        seg = trace.stop()
    return trace.record(seg)


def same_record(old, new) -> bool:
    """Do two executed notebooks hold the same record of their run, but for when and from
    which commit it ran and how long it took?  A full run that gives a re-rendered page's
    outputs from the same inputs holds its record too (the page is left as it is: what
    its record says stays true); a re-render of a computed page is its own record."""
    def view(nb, mode: bool):
        meta = dict(nb.metadata.get("cflib", {}))
        for k in ("date", "commit", "seconds", "computed", "seal") + (() if mode else ("mode",)):
            meta.pop(k, None)
        return json.dumps(meta, sort_keys=True, default=str)

    modes = tuple(nb.metadata.get("cflib", {}).get("mode") for nb in (old, new))
    keep_mode = modes != ("render", "compute")
    return view(old, keep_mode) == view(new, keep_mode)


def scratch() -> Path:
    d = PROJECT_ROOT / "_build" / "tmp"
    d.mkdir(parents=True, exist_ok=True)
    return d


def install_file(src: Path, dest: Path) -> Path:
    """Put ``src`` at ``dest`` atomically (:func:`cflib.io.atomic_write`): a reader never
    sees half a file."""
    return atomic_write(dest, lambda tmp: shutil.copy2(src, tmp))
