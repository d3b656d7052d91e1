"""Chapters x seeds on Dask: the merge over seeds, failures reported, a worker killed
mid-sweep without losing a result."""
from __future__ import annotations

import math
import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from cflib.bench import data
from cflib.book.sweep import merge_seeds, read_sweep, run_sweep


def _rows(seed, value):
    return pd.DataFrame([
        {"dataset": "mnist", "pair": "4->9", "method": "CEM", "metric": "IM1",
         "value": value, "train_seed": seed, "data_seed": 0, "profile": "smoke"},
        {"dataset": "mnist", "pair": "4->9", "method": "CEM", "metric": "FID",
         "value": 10 * value, "train_seed": seed, "data_seed": 0, "profile": "smoke"}])


def test_merge_seeds_gives_mean_sd_and_n_per_cell():
    m = merge_seeds([_rows(0, 1.0), _rows(1, 3.0)]).set_index("metric")
    assert m.loc["IM1", "mean"] == 2.0 and m.loc["IM1", "sd"] == pytest.approx(math.sqrt(2))
    assert (m["n"] == 2).all() and (m["seeds"] == "0 1").all()
    # repeats within a seed are averaged first: a seed counts once
    rep = pd.concat([_rows(0, 1.0), _rows(0, 2.0)]).assign(repeat=[0, 0, 1, 1])
    m2 = merge_seeds([rep, _rows(1, 3.0)]).set_index("metric")
    assert m2.loc["IM1", "mean"] == pytest.approx((1.5 + 3.0) / 2) and m2.loc["IM1", "n"] == 2


def _fake_task(chapter, seed, profile, device, extra, data_seed=0):
    if seed == 13:
        raise RuntimeError("the kernel died of something")
    return {"tables": {f"{chapter}.csv": _rows(seed, float(seed))}, "seconds": 0.1}


def test_a_failing_task_is_reported_and_the_rest_kept(tmp_path):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        res = run_sweep("mnist_eval", [0, 1, 13], "smoke", root=tmp_path, client=client,
                        task=_fake_task, retries=0)
    assert res.failures == [{"chapter": "mnist_eval", "seed": 13,
                             "error": "RuntimeError: the kernel died of something"}]
    merged, per_seed = read_sweep("mnist_eval", "smoke", root=tmp_path)
    assert sorted(per_seed) == [0, 1] and (merged["n"] == 2).all()
    with pytest.raises(ValueError, match="unknown chapter"):
        run_sweep("nope", [0], root=tmp_path, client=client, task=_fake_task)
    with pytest.raises(ValueError, match="repeat"):
        run_sweep("mnist_eval", [0, 0], root=tmp_path, client=client, task=_fake_task)


@pytest.mark.slow
@pytest.mark.skipif(not (data.data_root() / "MNIST" / "raw" / "t10k-images-idx3-ubyte").exists(),
                    reason="MNIST not in the data root")
def test_a_sweep_on_a_real_cluster_survives_a_killed_worker(tmp_path, monkeypatch):
    """What a cluster user runs: a ``dask scheduler`` and two ``dask worker`` processes on
    127.0.0.1, the sweep sent through ``CFLIB_SCHEDULER``; one worker (and the chapter
    kernel it runs) is killed mid-task, its task is rescheduled on the other, and the
    merged table has n = 2 for every cell.  The kill waits on a marker: a kernel below a
    busy worker has trained a network of the chapter (the shared cache's events.log)."""
    import subprocess
    import sys

    from distributed import Client

    bin_ = Path(sys.executable).parent
    env = {**os.environ, "CFLIB_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    monkeypatch.setenv("CFLIB_CACHE", env["CFLIB_CACHE"])
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([str(bin_ / "dask"), "scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file",
                               str(sched_file)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)]
    try:
        t0 = time.time()
        while not sched_file.exists() and time.time() - t0 < 60:
            time.sleep(0.2)
        workers = {}
        for name in ("w1", "w2"):
            workers[name] = subprocess.Popen(
                [str(bin_ / "dask"), "worker", "--scheduler-file", str(sched_file), "--name",
                 name, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host",
                 "127.0.0.1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        procs += list(workers.values())
        client = Client(scheduler_file=str(sched_file))
        client.wait_for_workers(2, timeout=120)
        monkeypatch.setenv("CFLIB_SCHEDULER", client.scheduler.address)
        killed = {}

        def inside_a_chapter():
            """(worker name, kernel pid) of a worker that holds a task and whose chapter
            kernel is inside the chapter run: a process below the worker has trained a
            network into the shared cache (its events.log names the process); None if none
            yet.  A marker, not a time: the kill cannot come before the chapter started or
            after the task ended."""
            import psutil

            from cflib.cache import events

            trainers = {e["process"].rsplit(":", 1)[-1] for e in events(Path(env["CFLIB_CACHE"]))
                        if e["event"] == "trained"}
            info = client.scheduler_info()["workers"]
            for addr, tasks in client.processing().items():
                proc = workers.get(info.get(addr, {}).get("name"))
                if not tasks or proc is None:
                    continue
                try:
                    below = {str(c.pid) for c in psutil.Process(proc.pid).children(recursive=True)}
                except psutil.NoSuchProcess:
                    continue
                if below & trainers:
                    return info[addr]["name"], int(min(below & trainers))
            return None

        def killer():
            t1 = time.time()
            while time.time() - t1 < 600:
                found = inside_a_chapter()
                if found:
                    name, kernel = found
                    os.killpg(workers[name].pid, signal.SIGKILL)   # the worker ...
                    try:
                        os.kill(kernel, signal.SIGKILL)   # ... and its kernel (own session)
                    except ProcessLookupError:
                        pass
                    killed.update(name=name, kernel=kernel)
                    return
                time.sleep(0.2)

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        res = run_sweep("mnist_bayesian", [0, 1], "smoke", root=tmp_path / "sweep")
        thread.join(timeout=5)
        client.close()
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert killed, "no worker was killed inside a chapter run"
    assert res.failures == [] and sorted(s for _, s in res.task_seconds) == [0, 1]
    merged, per_seed = read_sweep("mnist_bayesian", "smoke", root=tmp_path / "sweep")
    assert sorted(per_seed) == [0, 1]
    # n counts the seeds with a value (a metric can be undefined in one seed at smoke)
    both = pd.concat(per_seed.values())
    both["value"] = pd.to_numeric(both["value"], errors="coerce")
    keys = ["model", "method", "metric"]
    have = both[both["repeat"] >= 0].groupby(keys + ["train_seed"])["value"].mean()
    have = have.notna().groupby(keys).sum()
    got = merged[merged["method"] != "Classifier"].set_index(keys)["n"]
    assert len(got) > 40 and (got == have.reindex(got.index)).all()
    assert (got == 2).mean() > 0.9
    # cflib verify --rerun on these smoke runs: seed 0 as the baseline, seed 0 again as the
    # re-run is bit-equal; one value moved 10 seed-sd away is flagged beyond the spread
    from cflib.bench.results import write_table
    from cflib.book.runs.rerun import BIT_EQUAL, compare_rerun

    base = per_seed[0]
    write_table(base, tmp_path / "base" / "mnist_bayesian.csv")
    same = compare_rerun("mnist_bayesian", tmp_path / "base", tmp_path / "base",
                         tmp_path / "sweep")
    assert same.counts()[BIT_EQUAL] == len(same.table) > 40 and len(same.beyond) == 0
    cell = same.table[(same.table["seed_sd"] > 0) & (same.table["metric"] == "IM1")].iloc[0]
    moved = base.copy()
    moved["value"] = pd.to_numeric(moved["value"], errors="coerce")
    rows = ((moved["method"] == cell["method"]) & (moved["model"] == cell["model"])
            & (moved["variant"].astype(str) == cell["variant"]) & (moved["metric"] == "IM1"))
    moved.loc[rows, "value"] = moved.loc[rows, "value"] + 10 * cell["seed_sd"]
    write_table(moved, tmp_path / "run" / "mnist_bayesian.csv")
    flagged = compare_rerun("mnist_bayesian", tmp_path / "run", tmp_path / "base",
                            tmp_path / "sweep")
    assert [(r.method, r.model, r.metric) for r in flagged.beyond.itertuples()] == \
        [(cell["method"], cell["model"], "IM1")]
