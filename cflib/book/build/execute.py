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
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from cflib.bench.data import PROJECT_ROOT
from cflib.book.build.digests import input_digests
from cflib.book.build.notebook import PROBE, clean, scrub_paths, to_notebook
from cflib.book.build.paths import FAILED_DIR, RESULTS_DIR, commit, output_dirs, rel
from cflib.book.chapters import check, get_chapter
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
    params = check(ch, {"profile": profile, "device": device, "train_seed": train_seed,
                        "data_seed": data_seed, **(extra or {})})
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
    run_params = {**params, "results_dir": rel(tmp_results)}
    # CPU training depends on the thread count: the kernel gets CFLIB_THREADS (default 1,
    # the book's runs) so that a re-run reproduces the committed numbers
    threads = os.environ.get("CFLIB_THREADS", "1")
    env = {"CFLIB_LOG": "INFO", "CFLIB_PROGRESS": "0", "OMP_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads}
    env_before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    t0 = time.perf_counter()
    print(f"[{ch.name}] executing at profile {params['profile']}, training seed "
          f"{params['train_seed']}, data seed {params['data_seed']} "
          f"(kernel output follows)", flush=True)
    console = Console(ch.name)
    try:
        # the kernel logs at error level only (no transport warning on the console)
        pm.execute_notebook(str(src), str(executed), parameters=run_params,
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
                  f"project, profile `{params['profile']}`, training seed "
                  f"{params['train_seed']}, data seed {params['data_seed']}, device "
                  f"`{params['device']}` ({threads} CPU thread(s)), in "
                  f"{seconds / 60:.1f} minutes.*")
    reported = clean(out_nb, ch, params, provenance)
    scrub_paths(out_nb, run_params["results_dir"], rel(res_dir))
    inputs = input_digests(ch, {k: v for k, v in params.items()},
                           [PROJECT_ROOT / m if not Path(m).is_absolute() else m
                            for m in reported.get("modules", [])], reported.get("data", []),
                           res_dir)
    out_nb.metadata["cflib"] = {"chapter": ch.name, "commit": commit(), "date": when,
                                "seconds": round(seconds), "threads": int(threads),
                                "params": params, "inputs": inputs}
    # success: move results, then the notebook, each atomically
    for f in sorted(tmp_results.glob("*.csv")):
        if f.relative_to(tmp_results) not in copied:
            install(f, res_dir / f.name)
    final = nb_dir / f"{ch.name}.ipynb"
    tmp_nb = work / "final.ipynb"
    nbformat.write(out_nb, tmp_nb)
    install(tmp_nb, final)
    shutil.rmtree(work, ignore_errors=True)
    print(f"[{ch.name}] done in {seconds:.0f} s -> {rel(final)}", flush=True)
    return final


def scratch() -> Path:
    d = PROJECT_ROOT / "_build" / "tmp"
    d.mkdir(parents=True, exist_ok=True)
    return d


def install(src: Path, dest: Path) -> Path:
    """Put ``src`` at ``dest`` atomically (:func:`cflib.io.atomic_write`): a reader never
    sees half a file."""
    return atomic_write(dest, lambda tmp: shutil.copy2(src, tmp))
