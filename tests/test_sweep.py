"""Chapters x seeds on Dask: the merge over seeds, failures reported, a worker killed
mid-sweep without losing a result."""
from __future__ import annotations

import math
import os
import signal
import threading
import time

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
def test_a_smoke_sweep_survives_a_killed_worker(tmp_path, monkeypatch):
    """Two seeds of a chapter on two workers; one worker is killed while it runs its
    task; the task is rescheduled and the merged table has n = 2 for every cell."""
    from distributed import Client, LocalCluster

    monkeypatch.setenv("CFLIB_CACHE", str(tmp_path / "cache"))
    killed = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"OMP_NUM_THREADS": "1"}) as cluster, Client(cluster) as client:
        def killer():
            t0 = time.time()
            while time.time() - t0 < 600:
                busy = [w for w, tasks in client.processing().items() if tasks]
                if busy:
                    time.sleep(8)                      # mid-task, inside the chapter run
                    pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                    os.kill(pid, signal.SIGKILL)
                    killed["pid"] = pid
                    return
                time.sleep(0.5)

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        res = run_sweep("mnist_bayesian", [0, 1], "smoke", root=tmp_path / "sweep",
                        client=client)
        thread.join(timeout=5)
    assert killed, "no worker was killed"
    assert res.failures == [] and sorted(s for _, s in res.task_seconds) == [0, 1]
    merged, per_seed = read_sweep("mnist_bayesian", "smoke", root=tmp_path / "sweep")
    assert sorted(per_seed) == [0, 1]
    assert len(merged) > 0 and (merged["n"] == 2).all()
    assert merged["mean"].notna().all() and merged["sd"].notna().all()
    assert res.speedup > 0
