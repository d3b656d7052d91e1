"""Chapters x training seeds on Dask: one task per (chapter, seed), results merged.

    make sweep SEEDS=0,1,2 NB=mnist_eval [PROFILE=standard]
    cflib sweep mnist_eval --seeds 0 1 2 [--profile standard] [--workers 2]

A sweep varies the *training* seed and keeps the data seed fixed (the same queries and
evaluation draws in every task), so its spread measures training alone.  Each task is
one chapter run (papermill, :func:`cflib.book.runs.execute.build`) at one training
seed, executed by a ``dask.distributed`` worker in a folder of its own; it returns the
chapter's results tables, which the client writes to
``results/sweep/<chapter>/<profile>/seed<seed>/``.  A merge step then builds, for every
cell of the chapter's table, the mean, the standard deviation and the number of seeds
(``merged.csv`` beside them), which the chapters and the README show when it exists.

The cluster is a ``LocalCluster`` sized to this machine (one single-threaded worker
per core) unless ``CFLIB_SCHEDULER`` (or ``scheduler=``) names a running scheduler,
e.g. one started by dask-jobqueue on SLURM::

    from dask_jobqueue import SLURMCluster
    cluster = SLURMCluster(cores=4, memory="16GB", walltime="04:00:00",
                           job_script_prologue=["export CFLIB_CACHE=/shared/cflib-cache",
                                                "export CFLIB_DATA=/shared/data"])
    cluster.scale(jobs=3)            # then CFLIB_SCHEDULER=<cluster.scheduler_address>

Workers need cflib installed, the data root (``CFLIB_DATA``) and, to share trained
networks between tasks and runs, one cache folder (``CFLIB_CACHE``) on a file system
they all see.  A worker that dies has its task rescheduled on another (Dask's
``allowed-failures``); a task that raises is retried ``retries`` times, then reported
with its chapter, seed and error while every other task's results are kept.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from cflib.bench.data import PROJECT_ROOT
from cflib.bench.results import write_table
from cflib.book.chapters import check, run_params
from cflib.book.runs.execute import build
from cflib.book.runs.paths import BOOK_RUN
from cflib.book.runs.written import record_written
from cflib.book.spread import SWEEP_DIR, merge_seeds, read_sweep, sweep_dir  # noqa: F401
from cflib.env import scheduler as env_scheduler

log = logging.getLogger("cflib")
SCHEDULER_ENV = "CFLIB_SCHEDULER"


def run_chapter_task(chapter: str, seed: int, profile: str, device: str, extra: dict,
                     data_seed: int = 0) -> dict:
    """One task: the chapter at one training seed, in a folder of its own; returns its
    tables (``{file name: DataFrame}``) and its wall time.  Runs on a worker."""
    work = Path(tempfile.mkdtemp(prefix=f"sweep-{chapter}-seed{seed}-"))
    t0 = time.perf_counter()
    try:
        build(chapter, profile, device, seed, data_seed, extra, out_dir=work,
              results_dir=work)
        tables = {p.name: pd.read_csv(p, keep_default_na=False) for p in work.glob("*.csv")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"chapter": chapter, "seed": seed, "seconds": time.perf_counter() - t0,
            "tables": tables, "worker_pid": os.getpid()}


@dataclass
class SweepResult:
    """What :func:`run_sweep` did: the merged tables per chapter, the failed tasks, the
    wall time of the sweep and the sum of its tasks' times (their ratio is the speed-up)."""

    merged: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)
    wall_seconds: float = 0.0
    task_seconds: dict = field(default_factory=dict)
    workers: int = 0

    @property
    def speedup(self) -> float:
        return sum(self.task_seconds.values()) / max(self.wall_seconds, 1e-9)


def _client(scheduler: str | None, n_workers: int | None):
    from distributed import Client, LocalCluster

    address = scheduler or env_scheduler()
    if address:
        return Client(address), None
    n = n_workers or os.cpu_count() or 1
    # one single-threaded worker per core: torch in each kernel on one thread too
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                           dashboard_address=None,
                           env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    return Client(cluster), cluster


#: where a sweep at another profile than the book's writes (never the committed results)
OTHER_SWEEPS = PROJECT_ROOT / "_build" / "sweep"


def sweep_root(profile: str, root=None) -> Path:
    """The sweeps' folder: ``root`` when given; the book's ``results/sweep`` at the book's
    profile, else ``_build/sweep`` (a sweep at another profile never writes a tracked
    file)."""
    if root is not None:
        return Path(root)
    return SWEEP_DIR if profile == BOOK_RUN["profile"] else OTHER_SWEEPS


def _check_sweep(chapters, seeds, profile, device, extra, data_seed, scheduler):
    """Every argument of a sweep, before anything is submitted: ``(chapters, seeds)``."""
    chapters = [chapters] if isinstance(chapters, str) else list(chapters)
    seeds = [int(s) for s in seeds]
    if not chapters or not seeds:
        raise ValueError("a sweep needs at least one chapter and one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds repeat: {seeds}")
    for ch in chapters:
        schema_run = run_params(ch, {"device": device, "train_seed": 0, "data_seed": data_seed})
        if "train_seed" not in schema_run:
            raise ValueError(f"chapter {ch!r} trains nothing: a sweep over training seeds "
                             "has nothing to vary")
        for s in seeds:
            check(ch, {"profile": profile, **schema_run, "train_seed": s, **(extra or {})})
    if scheduler is None:
        env_scheduler()                      # a bad CFLIB_SCHEDULER fails before any work
    return chapters, seeds


def estimate(chapters, seeds, profile: str, workers: int) -> str:
    """What the sweep will take, from each chapter's last full run at this profile (its
    record's compute time); '' where no chapter recorded one."""
    from cflib.book.runs.digests import notebook_record

    per = {}
    for ch in chapters:
        computed = (notebook_record(ch) or {}).get("computed", {})
        params = (notebook_record(ch) or {}).get("params", {})
        if computed.get("seconds") and params.get("profile") == profile:
            per[ch] = float(computed["seconds"])
    if not per:
        return ""
    total = sum(per.values()) / len(per) * len(chapters) * len(seeds)
    wall = total / max(1, min(workers, len(chapters) * len(seeds)))
    return (f"about {wall / 60:.0f} min on {workers} worker(s) ({len(chapters) * len(seeds)} "
            f"tasks; each chapter's last run at {profile} computed in "
            + ", ".join(f"{k} {v / 60:.0f} min" for k, v in per.items())
            + "; a seed whose networks are not cached trains them too)")


def _collect(client, futures: dict, result: "SweepResult", profile: str, root: Path,
             key: dict, extra: dict | None, device: str) -> None:
    """Each finished task's tables written and recorded; a failed one reported, the rest
    kept."""
    from distributed import as_completed

    for fut in as_completed(list(futures)):
        ch, s = futures[fut]
        try:
            out = fut.result()
        except Exception as err:  # reported, never lost silently; the rest is kept
            msg = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            result.failures.append({"chapter": ch, "seed": s, "error": msg})
            log.warning("sweep: %s seed %d failed: %s", ch, s, msg)
            continue
        d = sweep_dir(ch, profile, root, key) / f"seed{s}"
        written = [write_table(df, d / name) for name, df in out["tables"].items()]
        record_written(written, f"cflib sweep {ch} --seeds {s} --profile {profile}"
                       + "".join(f" -p {k} {v}" for k, v in (extra or {}).items())
                       + (f" --device {device}" if device != "cpu" else ""),
                       Path(root).parent)
        result.task_seconds[(ch, s)] = out["seconds"]
        log.info("sweep: %s seed %d done in %.0f s", ch, s, out["seconds"])


def run_sweep(chapters, seeds, profile: str = "standard", device: str = "cpu",
              extra: dict | None = None, scheduler: str | None = None,
              n_workers: int | None = None, retries: int = 2, root=None,
              client=None, task=run_chapter_task, data_seed: int = 0) -> SweepResult:
    """Run every (chapter, seed) as a Dask task and merge each chapter's seeds.

    Arguments are checked before anything is submitted.  ``client``: an existing
    ``distributed.Client`` (else one is made: ``scheduler`` / ``CFLIB_SCHEDULER``, or a
    ``LocalCluster`` of ``n_workers`` single-threaded workers).  ``task(chapter, seed,
    profile, device, extra, data_seed)`` is what a worker runs (default: the chapter
    through papermill); it returns a dict with ``tables`` and ``seconds``.  Results with
    other parameters than the book's (``extra``, another device or data seed) go to a
    folder of their own (:func:`cflib.book.spread.sweep_dir`), never over the book's; a
    sweep at another profile than the book's writes under ``_build/sweep``
    (:func:`sweep_root`).
    """
    chapters, seeds = _check_sweep(chapters, seeds, profile, device, extra, data_seed,
                                   scheduler)
    root = sweep_root(profile, root)
    # results of other parameters (or another device) go to a folder of their own
    key = {**(extra or {}), **({"device": device} if device != "cpu" else {}),
           **({"data_seed": data_seed} if data_seed else {})}
    own = client is None
    cluster = None
    if own:
        client, cluster = _client(scheduler, n_workers)
    t0 = time.perf_counter()
    result = SweepResult(workers=len(client.scheduler_info()["workers"]))
    guess = estimate(chapters, seeds, profile, result.workers)
    if guess:
        log.info("sweep: %s", guess)
    try:
        futures = {client.submit(task, ch, s, profile, device, dict(extra or {}), data_seed,
                                 retries=retries, pure=False,
                                 key=f"{ch}-{profile}-seed{s}-{time.time_ns()}"): (ch, s)
                   for ch in chapters for s in seeds}
        _collect(client, futures, result, profile, root, key, extra, device)
    finally:
        result.wall_seconds = time.perf_counter() - t0
        if own:
            client.close()
            if cluster is not None:
                cluster.close()
    for ch in chapters:
        merged = merge_chapter(ch, profile, root, extra=key)
        if merged is not None:
            result.merged[ch] = merged
    return result


def merge_chapter(chapter: str, profile: str = "standard", root=SWEEP_DIR,
                  results_dir=None, extra: dict | None = None) -> pd.DataFrame | None:
    """Write ``merged.csv`` of a chapter's seeds: the swept ones and, for the book's
    profile and parameters, the book's own results file (``results/<chapter>.csv``)."""
    own = None
    book = Path(results_dir or Path(root).parent) / f"{chapter}.csv"
    if profile == BOOK_RUN["profile"] and not extra and book.exists():
        own = pd.read_csv(book, keep_default_na=False)
    merged, _ = read_sweep(chapter, profile, root, own=own, extra=extra)
    if merged is not None:
        path = write_table(merged, sweep_dir(chapter, profile, root, extra) / "merged.csv")
        record_written([path], f"cflib sweep {chapter} (merge) --profile {profile}",
                       Path(root).parent)
    return merged


def main(argv=None) -> None:
    import argparse

    from cflib.book.runs.cli import parse_extra

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapters", nargs="+")
    ap.add_argument("--seeds", nargs="+", type=int, required=True)
    ap.add_argument("--profile", default="standard")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--scheduler", default=None, help=f"a scheduler address (or ${SCHEDULER_ENV})")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    res = run_sweep(args.chapters, args.seeds, args.profile, args.device, parse_extra(args.p),
                    args.scheduler, args.workers)
    total = sum(res.task_seconds.values())
    print(f"sweep: {len(res.task_seconds)} tasks on {res.workers} workers in "
          f"{res.wall_seconds:.0f} s wall time; the tasks took {total:.0f} s in all "
          f"(speed-up {res.speedup:.2f}x)")
    for f in res.failures:
        print(f"FAILED: {f['chapter']} seed {f['seed']}: {f['error']}")
    for ch, m in res.merged.items():
        where = sweep_dir(ch, args.profile, sweep_root(args.profile))
        print(f"{ch}: merged {int(m['n'].max())} seed(s) -> "
              f"{where.relative_to(PROJECT_ROOT)}/merged.csv")
    if res.failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
