"""The whole book: execute the chapters it needs, then build its HTML with Jupyter Book 1."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from cflib.bench.data import PROJECT_ROOT
from cflib.book.chapters import CHAPTERS, check, get_chapter, run_params
from cflib.book.runs.digests import (
    check_seal,
    refuse_unmatched,
    seal_notebook,
    source_digests,
    staleness,
)
from cflib.book.runs.execute import build
from cflib.book.runs.notebook import fill_discussion, to_notebook
from cflib.book.runs.paths import BOOK_RUN, CHAPTER_DIR, RESULTS_DIR, output_dirs, rel
from cflib.env import scheduler as env_scheduler
from cflib.io import atomic_write


def dependencies(names) -> dict[str, list[str]]:
    """Chapter -> the chapters among ``names`` whose results it reads (they run first)."""
    names = list(names)
    out = {}
    for n in names:
        ch = get_chapter(n)
        out[n] = [m for m in names if m != n and f"{m}.csv" in ch.reads]
    return out


def _task(name: str, run: dict, mode: str = "compute", *_after) -> str:
    """One chapter on a worker (``mode``: ``compute`` or ``render``; ``_after``: the
    chapters it waits for); ``run["folder"]``, when set, holds both its notebook and its
    results (tests)."""
    folder = run.get("folder")
    return str(build(name, run["profile"], run["device"], run["train_seed"], run["data_seed"],
                     out_dir=folder, results_dir=folder, mode=mode))


def execute_chapters(names, run: dict, workers: int | None = None,
                     scheduler: str | None = None) -> dict[str, Path]:
    """Execute chapters, side by side where they do not read each other's results
    (``names``: a list, every chapter computed, or ``{chapter: mode}``).

    Each chapter runs in its own kernel pinned to ``CFLIB_THREADS`` threads (default 1),
    so a chapter's arithmetic does not depend on what runs beside it.  The chapters go
    to a Dask cluster: ``scheduler`` / ``CFLIB_SCHEDULER`` when set, else a
    ``LocalCluster`` of ``workers`` single-threaded workers (default: one per core, at
    most one per chapter); a chapter starts when the chapters it reads are done.  With
    one worker (or one chapter) they run one after another in this process.  A chapter
    that fails is reported and stops the chapters that read it; the others finish.
    """
    import os

    modes = dict(names) if isinstance(names, dict) else {n: "compute" for n in names}
    names = list(modes)
    deps = dependencies(names)
    address = scheduler or env_scheduler()
    n = workers or min(len(names), os.cpu_count() or 1)
    if not names:
        return {}
    if not address and (n <= 1 or len(names) == 1):
        done = {}
        for name in _order(names, deps):
            done[name] = Path(_task(name, run, modes[name]))
        return done
    from distributed import Client, LocalCluster

    cluster = None
    if address:
        client = Client(address)
    else:
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None,
                               env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        client = Client(cluster)
    print(f"executing {len(names)} chapter(s) on {len(client.scheduler_info()['workers'])} "
          f"worker(s): {', '.join(names)}", flush=True)
    try:
        return _on_cluster(client, names, deps, run, modes)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _on_cluster(client, names, deps, run: dict, modes: dict) -> dict[str, Path]:
    """Every chapter as a task of ``client``, after the chapters it reads; the failures
    reported together once the others are done."""
    from distributed import as_completed

    futures = {}
    for name in _order(names, deps):
        after = [futures[d] for d in deps[name]]
        futures[name] = client.submit(_task, name, run, modes[name], *after, pure=False,
                                      key=f"chapter-{name}-{time.time_ns()}", retries=0)
    done, failed = {}, []
    for fut in as_completed(list(futures.values())):
        name = next(k for k, v in futures.items() if v is fut)
        try:
            done[name] = Path(fut.result())
        except Exception as err:  # reported; the chapters that do not need it finish
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            failed.append(f"{name}: {first}")
            print(f"[{name}] FAILED: {first}", flush=True)
    if failed:
        raise RuntimeError("chapter(s) failed: " + "; ".join(failed))
    return done


def _order(names, deps) -> list[str]:
    """The chapters with every chapter after those it reads."""
    out: list[str] = []
    while len(out) < len(names):
        ready = [n for n in names if n not in out and all(d in out for d in deps[n])]
        if not ready:
            raise ValueError(f"chapters read each other in a circle: {deps}")
        out += ready
    return out


def plan_book(run: dict, rerun: bool = False) -> dict[str, str]:
    """What each chapter of a book's run needs: ``compute`` (re-execute), ``render``
    (re-render from its outputs), ``prose`` (copy the prose in) or ``fresh``; a chapter
    that reads the results of a chapter that runs is rendered at least.  A notebook that
    no longer matches its seal, an output file that no longer matches its notebook, and
    (the book's run) a results file that no longer matches the record of the run that
    wrote it are refused before anything runs (ValueError naming them)."""
    from cflib.book.runs.digests import claimed_outputs
    from cflib.book.runs.written import check_written

    plan, bad = {}, []
    deps = dependencies(CHAPTERS)
    for name in CHAPTERS:
        params = check(name, run_params(name, run))
        nb_dir, res_dir = output_dirs(get_chapter(name), params)
        if rerun:
            plan[name] = "compute"
            print(f"[{name}] executing (every chapter asked for)", flush=True)
            continue
        st = staleness(name, params, nb_dir, res_dir)
        if st.kind == "outputs":
            bad += st.outputs
            continue
        kind = {"compute": "compute", "presentation": "render"}.get(st.kind, st.kind)
        ran = [d for d in deps[name] if plan.get(d) in ("compute", "render")]
        if ran and kind in ("fresh", "prose"):
            kind = "render"
            st.presentation.append(f"it reads {', '.join(ran)}, which runs")
        plan[name] = kind
        print(f"[{name}] {st.describe()}" + ("" if kind != "render" or st.kind == "presentation"
                                             else f" ({st.presentation[-1]})"), flush=True)
    if run == BOOK_RUN:
        bad += check_written(RESULTS_DIR, claimed_outputs(CHAPTERS))
    if bad:
        raise ValueError("refusing to build: " + "; ".join(bad))
    return plan


def build_book(profile: str = "standard", device: str = "cpu", train_seed: int = 0,
               data_seed: int = 0, rerun: bool = False, workers: int | None = None) -> Path:
    """Run what the chapters of a book need, then build its HTML; returns index.html.

    Each chapter is re-executed when its compute changed, re-rendered from its saved
    outputs when only its presentation did (seconds, nothing trained or explained), has
    its prose copied in when only that changed, and is left alone otherwise
    (:func:`plan_book`; every chapter is executed with ``rerun``).  The book's run
    (``standard``, seeds 0, ``cpu``) works on the committed notebooks and builds the
    project's own book; any other run works on its own folder under ``_build/runs/`` and
    builds a separate book in ``_build/book-<profile>-train<t>-data<d>/``.  The chapters
    run side by side on ``workers`` single-threaded workers (:func:`execute_chapters`).
    """
    t0 = time.perf_counter()
    run = {"profile": profile, "train_seed": train_seed, "data_seed": data_seed,
           "device": device}
    book_run = run == BOOK_RUN
    plan = plan_book(run, rerun)
    for name, kind in plan.items():
        if kind == "prose":
            params = check(name, run_params(name, run))
            nb_dir, res_dir = output_dirs(get_chapter(name), params)
            refresh_prose(name, nb_dir, res_dir)
            print(f"[{name}] prose refreshed (code and inputs unchanged): not executed",
                  flush=True)
    tasks = {n: k for n, k in plan.items() if k in ("compute", "render")}
    notebooks = execute_chapters(tasks, run, workers)
    for name in CHAPTERS:
        if name not in notebooks:
            params = check(name, run_params(name, run))
            notebooks[name] = output_dirs(get_chapter(name), params)[0] / f"{name}.ipynb"
    notebooks = {n: notebooks[n] for n in CHAPTERS}
    refuse_unmatched(CHAPTERS) if book_run else None
    root = PROJECT_ROOT if book_run else _assemble(
        PROJECT_ROOT / "_build" / f"book-{profile}-train{train_seed}-data{data_seed}", notebooks)
    # jupyter-book 1 has no ``python -m`` entry: its console script beside this Python
    script = Path(sys.executable).with_name("jupyter-book")
    # a Sphinx warning fails the build (all of them reported first), so none comes back
    cmd = [str(script) if script.exists() else "jupyter-book", "build", str(root), "--quiet",
           "-W", "--keep-going"]
    proc = subprocess.run(cmd, cwd=root)
    if proc.returncode:
        raise RuntimeError(f"jupyter-book build failed in {rel(root)} (exit {proc.returncode})")
    index = root / "_build" / "html" / "index.html"
    print(f"book built in {time.perf_counter() - t0:.0f} s: {rel(index)}", flush=True)
    return index


def _assemble(root: Path, notebooks: dict[str, Path]) -> Path:
    """A book around a run's notebooks (they sit in one runs folder): the project's
    config, pages, static files and extensions, and the run's chapters, in ``root``."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "book").mkdir(parents=True)
    for f in ("_config.yml", "_toc.yml"):
        shutil.copy2(PROJECT_ROOT / f, root / f)
    shutil.copytree(PROJECT_ROOT / "book", root / "book", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("chapters"))
    for folder in ("_static", "_ext"):
        if (PROJECT_ROOT / folder).exists():
            shutil.copytree(PROJECT_ROOT / folder, root / folder)
    (root / "book" / "chapters").mkdir()
    for name, nb in notebooks.items():
        shutil.copy2(nb, root / "book" / "chapters" / f"{name}.ipynb")
    return root


def chapter_page(name: str, notebook: Path) -> Path:
    """One run's chapter as a page: a book of that chapter alone (the project's config,
    static files and extensions), built beside the run's notebook (``<folder>/html-<name>/``);
    returns the page's HTML file."""
    root = _assemble(Path(notebook).parent / f"html-{name}", {name: Path(notebook)})
    (root / "_toc.yml").write_text(f"format: jb-book\nroot: book/chapters/{name}\n")
    for extra in (root / "book").glob("*.md"):
        if extra.name != "references.md":
            extra.unlink()                       # the other pages are the book's, not this run's
    script = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(script) if script.exists() else "jupyter-book", "build", str(root), "--quiet"]
    proc = subprocess.run(cmd, cwd=root)
    if proc.returncode:
        raise RuntimeError(f"jupyter-book build failed in {rel(root)} (exit {proc.returncode})")
    return root / "_build" / "html" / "book" / "chapters" / f"{name}.html"


def refresh_prose(chapter: str, out_dir: Path | None = None,
                  results_dir: Path | None = None) -> Path:
    """Copy the source's markdown cells into an executed chapter, without re-running it,
    and fill its discussion again from the results (the committed ones by default).

    Only for prose edits: the code cells of the source and of the executed notebook
    must be identical, else a ValueError asks for a re-execution.
    """
    import nbformat

    ch = get_chapter(chapter)
    src = to_notebook(ch)
    out = Path(out_dir or CHAPTER_DIR) / f"{ch.name}.ipynb"
    edited = check_seal(ch, out.parent)
    if edited:                  # never seal an edit that no run made
        raise ValueError(f"{chapter}: " + "; ".join(edited))
    done = nbformat.read(out, as_version=4)
    hidden = ("injected-parameters", "cflib-provenance")
    done_cells = [c for c in done.cells
                  if not set(hidden) & set(c.get("metadata", {}).get("tags", []))]
    src_code = [c.source for c in src.cells if c.cell_type == "code"]
    done_code = [c.source for c in done_cells if c.cell_type == "code"]
    if src_code != done_code or len(src.cells) != len(done_cells):
        raise ValueError(f"{chapter}: the code changed since it was executed; re-run it "
                         f"(make chapter NB={chapter})")
    for new, old in zip(src.cells, done_cells):
        if new.cell_type == "markdown":
            old.source = new.source
    fill_discussion(done, ch, results_dir or RESULTS_DIR)
    meta = done.metadata.get("cflib")
    if meta and "inputs" in meta:        # the prose is an input: record its new digest
        meta["inputs"]["prose"] = source_digests(ch)["prose"]
    seal_notebook(done)
    return atomic_write(out, lambda tmp: nbformat.write(done, str(tmp)))


