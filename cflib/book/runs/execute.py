"""One chapter through papermill, installed only when it succeeds.

A chapter's jupytext source is converted to a notebook and executed by papermill in a
temporary folder.  Only a run that succeeds replaces anything: its executed notebook,
stripped of stderr noise, with its code collapsed and a line saying which commit,
profile and seeds produced it, and its results files are moved into place atomically.
A failed run leaves the previous notebook, results and README byte-identical (the
failed notebook is kept under ``_build/failed/`` to read).
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
from pathlib import Path

from cflib.bench.data import PROJECT_ROOT
from cflib.book.chapters import check, get_chapter, run_params
from cflib.book.runs.digests import input_digests
from cflib.book.runs.notebook import PROBE, clean, fill_discussion, scrub_paths, to_notebook
from cflib.book.runs.paths import FAILED_DIR, RESULTS_DIR, commit, output_dirs, rel
from cflib.env import check_all
from cflib.env import threads as env_threads
from cflib.io import atomic_write

log = logging.getLogger("cflib.build")


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


def build(chapter: str, profile: str = "standard", device: str = "cpu", train_seed: int = 0,
          data_seed: int = 0, extra: dict | None = None, out_dir: Path | None = None,
          results_dir: Path | None = None) -> Path:
    """Execute one chapter; returns the path of its executed notebook.

    Parameters are validated before any kernel starts.  ``out_dir`` / ``results_dir``
    override where the notebook and the results go (tests); by default the book's run
    replaces the committed files and any other run writes under ``_build/runs/``.
    """
    import nbformat
    import papermill as pm

    ch = get_chapter(chapter)
    run = run_params(ch, {"profile": profile, "device": device, "train_seed": train_seed,
                          "data_seed": data_seed})
    params = check(ch, {**run, **(extra or {})})
    check_all()                  # every environment variable cflib reads, before any work
    threads = str(env_threads())
    # papermill cannot read 'x: list | None = ...' annotations and warns about every such
    # parameter; cflib.chapters validated them above (and the notebook does again)
    logging.getLogger("papermill").setLevel(logging.ERROR)
    nb_dir, res_dir = output_dirs(ch, params)
    nb_dir, res_dir = Path(out_dir or nb_dir), Path(results_dir or res_dir)
    for d in (nb_dir, res_dir):
        d.mkdir(parents=True, exist_ok=True)
        if not os.access(d, os.W_OK):
            raise PermissionError(f"cannot write into {d}; choose another folder")
    work = Path(tempfile.mkdtemp(prefix=f"{ch.name}-", dir=scratch()))
    tmp_results = work / "results"
    tmp_results.mkdir()
    copied = set()                          # what the chapter reads, copied into its folder
    for pattern in ch.read_patterns(params["profile"]):
        # from the run's own results; what no chapter makes (the benchmark's
        # performance.csv) from the book's results when the run's folder lacks it
        src_dir = res_dir
        if pattern in ch.external and not any(res_dir.glob(pattern)):
            src_dir = RESULTS_DIR
        for f in src_dir.glob(pattern):
            name = f.relative_to(src_dir)
            (tmp_results / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, tmp_results / name)
            copied.add(name)
    nb = to_notebook(ch)
    probe = nbformat.v4.new_code_cell(PROBE)
    probe.metadata["tags"] = ["cflib-probe"]
    nb.cells.append(probe)
    src, executed = work / f"{ch.name}.ipynb", work / f"{ch.name}.out.ipynb"
    nbformat.write(nb, src)
    injected = {**params, "results_dir": rel(tmp_results)}
    # CPU training depends on the thread count: the kernel gets CFLIB_THREADS (default 1,
    # the book's runs) so that a re-run reproduces the committed numbers
    env = {"CFLIB_LOG": "INFO", "CFLIB_PROGRESS": "0", "OMP_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads}
    env_before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    t0 = time.perf_counter()
    print(f"[{ch.name}] executing: {_describe(params)} (kernel output follows)", flush=True)
    console = Console(ch.name)
    try:
        # the kernel logs at error level only (no transport warning on the console)
        pm.execute_notebook(str(src), str(executed), parameters=injected,
                            kernel_name="python3", cwd=str(PROJECT_ROOT), progress_bar=False,
                            log_output=False, stdout_file=console, stderr_file=console,
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])
    except Exception as err:
        FAILED_DIR.mkdir(parents=True, exist_ok=True)
        if executed.exists():
            shutil.copy2(executed, FAILED_DIR / f"{ch.name}.ipynb")
        shutil.rmtree(work, ignore_errors=True)
        raise RuntimeError(f"chapter {ch.name} failed after {time.perf_counter() - t0:.0f} s; "
                           f"nothing was replaced (the failed notebook: "
                           f"{rel(FAILED_DIR / (ch.name + '.ipynb'))})\n{err}") from None
    finally:
        console.flush()
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    seconds = time.perf_counter() - t0
    out_nb = nbformat.read(executed, as_version=4)
    when = datetime.date.today().isoformat()
    provenance = (f"*This page was executed on {when} from commit `{commit()}` of the "
                  f"project, {_describe(params)} ({threads} CPU thread(s)), in "
                  f"{seconds / 60:.1f} minutes.*")
    reported = clean(out_nb, ch, params, provenance)
    try:
        fill_discussion(out_nb, ch, tmp_results)
    except Exception as err:    # a template error never loses a run: fix it, then refresh
        print(f"[{ch.name}] the discussion could not be filled ({type(err).__name__}: {err}); "
              f"the run is kept with its marker: fix book/discussion/ and run `cflib refresh "
              f"{ch.name}`", flush=True)
    scrub_paths(out_nb, injected["results_dir"], rel(res_dir))
    inputs = input_digests(ch, {k: v for k, v in params.items()},
                           [PROJECT_ROOT / m if not Path(m).is_absolute() else m
                            for m in reported.get("modules", [])], reported.get("data", []),
                           res_dir)
    out_nb.metadata["cflib"] = {"chapter": ch.name, "commit": commit(), "date": when,
                                "seconds": round(seconds), "threads": int(threads),
                                "params": params, "inputs": inputs}
    # success: move results, then the notebook, each atomically; a file whose content did
    # not change is left as it is (a re-run with the same outputs changes nothing)
    for f in sorted(tmp_results.glob("*.csv")):
        dest = res_dir / f.name
        if f.relative_to(tmp_results) not in copied and not _same_bytes(f, dest):
            install(f, dest)
    final = nb_dir / f"{ch.name}.ipynb"
    if final.exists() and same_outputs(nbformat.read(final, as_version=4), out_nb):
        print(f"[{ch.name}] done in {seconds:.0f} s: the same outputs as "
              f"{rel(final)}, left as it was", flush=True)
    else:
        tmp_nb = work / "final.ipynb"
        nbformat.write(out_nb, tmp_nb)
        install(tmp_nb, final)
        print(f"[{ch.name}] done in {seconds:.0f} s -> {rel(final)}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return final


def _describe(params: dict) -> str:
    parts = [f"profile `{params['profile']}`"]
    if "train_seed" in params:
        parts.append(f"training seed {params['train_seed']}")
    if "data_seed" in params:
        parts.append(f"data seed {params['data_seed']}")
    if "device" in params:
        parts.append(f"device `{params['device']}`")
    return ", ".join(parts)


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


def scratch() -> Path:
    d = PROJECT_ROOT / "_build" / "tmp"
    d.mkdir(parents=True, exist_ok=True)
    return d


def install(src: Path, dest: Path) -> Path:
    """Put ``src`` at ``dest`` atomically (:func:`cflib.io.atomic_write`): a reader never
    sees half a file."""
    return atomic_write(dest, lambda tmp: shutil.copy2(src, tmp))
