"""What recording a chapter's compute costs: one table's compute run twice, with
:mod:`cflib.trace` on (as a chapter's compute cells run) and off, each in a fresh
process, memoization off (every step computed), the networks loaded from the cache.

    python benchmarks/trace_overhead.py [--table c3lt-mnist] [--profile smoke]
        [--pairs 4->9] [--repeats 1]

Both runs take the same queries, seeds and networks: their results must be equal (the
tracer observes, it never changes a number); it prints each run's seconds and the
overhead.  Run the two at once on two cores (``--parallel``) or one after the other.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
import torch
sys.path.insert(0, {root!r})
from cflib import trace
from cflib.bench.tables.registry import get_spec
torch.set_num_threads(1)
spec = get_spec({table!r})
args = spec.args({profile!r}, 0, "cpu", None, {pairs!r} or None)
if {traced!r}:
    trace.start()
t0, c0 = time.perf_counter(), time.process_time()
run = spec.run(args)
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
units = len(trace.record(trace.stop())) if {traced!r} else 0
res = run.results
res = res[~res["metric"].str.contains("Time|seconds", case=False)]
print(json.dumps({{"seconds": seconds, "cpu": cpu, "units": units,
                  "values": res["value"].round(12).astype(str).tolist()}}))
"""


def _child(table, profile, pairs, traced):
    code = CHILD.format(root=str(ROOT), table=table, profile=profile, pairs=pairs,
                        traced=traced)
    env = {**os.environ, "CFLIB_MEMO": "off", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            text=True)


def _result(proc) -> dict:
    out, _ = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"a run failed (exit {proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", default="c3lt-mnist")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--pairs", nargs="*", default=["4->9"])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--parallel", action="store_true",
                   help="run the traced and the untraced run at once (two cores)")
    a = p.parse_args(argv)
    rows = []
    for r in range(a.repeats):
        t0 = time.perf_counter()
        if a.parallel:
            procs = [_child(a.table, a.profile, a.pairs, t) for t in (False, True)]
            off, on = (_result(q) for q in procs)
        else:
            off = _result(_child(a.table, a.profile, a.pairs, False))
            on = _result(_child(a.table, a.profile, a.pairs, True))
        equal = off["values"] == on["values"]
        rows.append((off["cpu"], on["cpu"]))
        print(f"repeat {r}: untraced {off['seconds']:.1f} s ({off['cpu']:.1f} s CPU), traced "
              f"{on['seconds']:.1f} s ({on['cpu']:.1f} s CPU; {on['units']} definitions "
              f"recorded): overhead {100 * (on['seconds'] / off['seconds'] - 1):+.1f} % wall, "
              f"{100 * (on['cpu'] / off['cpu'] - 1):+.1f} % CPU; results "
              f"{'equal' if equal else 'DIFFER'} ({len(off['values'])} values); wall "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        if not equal:
            raise SystemExit("the traced run's results differ from the untraced run's")
    off_s, on_s = sum(x for x, _ in rows), sum(y for _, y in rows)
    print(f"overall: {100 * (on_s / off_s - 1):+.1f} % of CPU time ({a.table}, {a.profile}, "
          f"pairs {' '.join(a.pairs)})")


if __name__ == "__main__":
    main()
