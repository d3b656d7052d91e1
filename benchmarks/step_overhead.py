"""What each iterative search and each generator training loop asks of the device per
step: operator calls (on a GPU, each one at least one kernel launch) and host
synchronisations, counted for this checkout's code and for another's (the code before a
change), side by side.

    .venv/bin/python benchmarks/step_overhead.py                       # this checkout
    .venv/bin/python benchmarks/step_overhead.py --before ../old-checkout
    .venv/bin/python benchmarks/step_overhead.py --methods Schut ROAR  # some of them

Each search of the catalog runs as the throughput benchmark builds it
(``benchmarks/throughput.py``: the ``smoke`` profile's networks, the table's classifier
and queries, ``--images`` queries in one batch; the searches that drop finished queries
once more with them kept, ``compact=False``) at three budgets of its step count (3, 6
and 9 steps of the field in ``BUDGET``, CVE's 1, 2 and 3 edits; the outer loops, such
as CEM's constant search or Wachter's lambdas, as configured).  A dispatch mode sees
every ATen operator the search calls.  Per step is the increase from one budget to the
next over the steps it adds; the two increases must agree (``linear``), which a search
that stopped early would break.  The chapters' generator loops (the DCGAN, its encoder,
C3LT's mappings; ``LOOPS``) are counted the same way per batch, from three loop lengths,
on the throughput benchmark's random networks of the chapters' architectures.

What counts as a host synchronisation: an operator whose result the host must read
before it can go on (``_local_scalar_dense``: ``.item()``, ``bool(t)``, a Python ``if``
on a tensor; ``nonzero``, ``masked_select``, ``unique``, ``repeat_interleave``) and an
index or index assignment with a boolean mask (it calls ``nonzero`` inside its kernel,
where a dispatch mode does not see it).  A scalar read inside ``torch.optim`` is the
optimizer's step counter, a host tensor on every device unless the optimizer is
capturable: it is counted apart (``host_reads_per_step``), since it waits on nothing.
``where`` names the source lines of the per-step synchronisations (the first frame
outside torch).  A copy to the host (``.cpu()``, ``.tolist()``, ``.numpy()``) waits too,
but on the CPU nothing is copied and the dispatch mode sees no operator: none sits
inside a step of today's searches or loops (read in the code, not counted).

The counts are of operators, not of time: for one code path they are the same on every
machine, and they are what a step pays on a GPU (launches and stalls);
``benchmarks/throughput.py`` times the searches.  Rows go to
``results/performance_steps.csv`` (``code``: ``before`` or ``after``, with the commit
each ran), which the performance page reads.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import traceback
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

os.environ.setdefault("TQDM_DISABLE", "1")
ROOT = Path(__file__).resolve().parents[1]

#: the config field each search's step count is, and the steps per unit of it
#: (the field's value times the outer loops it runs in)
BUDGET = {
    "Adv. Attack": ("steps", ()),
    "CEM": ("max_iterations", ("c_steps",)),
    "CEM (targeted)": ("max_iterations", ("c_steps",)),
    "CVE": ("max_edits", ()),
    "CVE (receptive field)": ("max_edits", ()),
    "C3LT (inverted)": ("invert_steps", ()),
    "Latent search": ("steps", ()),
    "Wachter": ("steps", ("lam_steps",)),
    "BayesCF": ("steps", ("lam_steps",)),
    "ROAR": ("max_iter", ()),
    "Schut": ("max_iters", ()),
    "PSCE": ("inner_steps", ("outer_iters",)),
    "Latent PGD": ("steps", ("restarts",)),
}
BUDGETS = (3, 6, 9)
#: CVE's edits stop when its queries flip, most within a few edits
BUDGETS_OF = {"CVE": (1, 2, 3), "CVE (receptive field)": (1, 2, 3)}
#: the chapters' training loops, counted per batch (or update) from three loop lengths:
#: (name, the throughput benchmark's builder of a run of n of them, the lengths)
LOOPS = {
    "DCGAN training, batch of 64": (lambda tp, n: tp._loop_dcgan(n), (2, 4, 6)),
    "encoder training, batch of 128": (lambda tp, n: tp._loop_encoder(n), (2, 4, 6)),
    # C3LT logs about ten points an epoch whatever its length: 10, 20, 30 updates
    "C3LT mapping update, batch 32": (lambda tp, n: tp._loop_c3lt(32, n), (10, 20, 30)),
}
#: operators whose result the host reads (see the module docstring)
READS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim",
         "unique_consecutive", "repeat_interleave", "is_nonzero"}
MASK_INDEXING = {"index", "index_put", "index_put_", "_index_put_impl_"}


def _bool_mask(args) -> bool:
    idx = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ()
    return any(getattr(t, "dtype", None) in (torch.bool, torch.uint8) for t in idx)


def _source() -> tuple[str, bool]:
    """The first frame outside torch and this file ("file:line"), and whether the call
    came from inside ``torch.optim``."""
    stack = traceback.extract_stack()[:-2]
    optim = any(f"{os.sep}torch{os.sep}optim{os.sep}" in f.filename for f in stack)
    for f in reversed(stack):
        if f"{os.sep}torch{os.sep}" not in f.filename and f.filename != __file__:
            return f"{Path(f.filename).name}:{f.lineno}", optim
    return "?", optim


class CountCalls(TorchDispatchMode):
    """Counts the ATen calls under it: ``calls`` (views excluded: they launch nothing),
    ``syncs`` (by ``"op@file:line"``) and ``host_reads`` (the optimizer's step counter)."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.syncs = collections.Counter()
        self.host_reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._overloadpacket.__name__
        if not func.is_view:
            self.calls += 1
        masked = name in MASK_INDEXING and _bool_mask(args)
        if name in READS or masked:
            where, optim = _source()
            if optim and name == "_local_scalar_dense":
                self.host_reads += 1
            else:
                self.syncs[f"{name}{'[mask]' if masked else ''}@{where}"] += 1
        return func(*args, **(kwargs or {}))


def per_step(run, steps_of, budgets=BUDGETS) -> dict:
    """Counts per step of ``run(budget)`` (one search at that budget, under the counter
    it is given), from three ``budgets``; ``steps_of(budget)``: the steps it runs."""
    counts = []
    for b in budgets:
        c = CountCalls()
        with c:
            run(b)
        counts.append(c)
    d_steps = [steps_of(b2) - steps_of(b1) for b1, b2 in zip(budgets, budgets[1:])]

    def rates(get):
        inc = [(get(c2) - get(c1)) / d for c1, c2, d in zip(counts, counts[1:], d_steps)]
        return inc, get(counts[0]) - inc[0] * steps_of(budgets[0])

    (calls, fixed_calls) = rates(lambda c: c.calls)
    (syncs, fixed) = rates(lambda c: sum(c.syncs.values()))
    (reads, _) = rates(lambda c: c.host_reads)
    keys = counts[0].syncs.keys() | counts[-1].syncs.keys()
    where = {k: (counts[-1].syncs[k] - counts[0].syncs[k]) / (steps_of(budgets[-1])
                                                             - steps_of(budgets[0]))
             for k in sorted(keys)}
    return {"calls_per_step": calls[-1], "syncs_per_step": syncs[-1],
            "host_reads_per_step": reads[-1], "syncs_per_search": fixed,
            "calls_per_search": fixed_calls,
            "linear": calls[0] == calls[1] and syncs[0] == syncs[1] and reads[0] == reads[1],
            "where": "; ".join(f"{k} x{v:g}" for k, v in where.items() if v)}


def measure(root: Path, methods, images: int) -> list[dict]:
    """Rows for ``methods`` with checkout ``root``'s cflib and throughput benchmark."""
    sys.path.insert(0, str(root / "benchmarks"))
    import throughput as tp

    torch.set_num_threads(1)
    rows, cache = [], {}
    for method in [m for m in methods if m in BUDGET]:
        name = tp.SETTING[method]
        if name not in cache:
            cache[name] = tp.setting(name, "cpu")
        clf, xq, target, kw = cache[name]
        x = xq[:images]
        field, outer = BUDGET[method]
        base = tp.build(method, clf, kw, len(x))
        mult = 1
        for f in outer:
            mult *= getattr(base.config, f)
        for compact in ((True, False) if method in tp.COMPACTING else (True,)):
            def run(b, method=method, field=field, compact=compact):
                ex = tp.build(method, clf, kw, len(x), compact=compact)
                ex.config = replace(ex.config, **{field: b})
                ex.explain(x, target, seed=0)

            rows.append({"method": method, "compact": compact, "n_images": len(x),
                         "step": field, "steps_per_unit": mult,
                         **per_step(run, lambda b, m=mult: b * m,
                                    BUDGETS_OF.get(method, BUDGETS))})
            print(f"{method:<22} {'' if compact else 'kept':4} "
                  f"{rows[-1]['calls_per_step']:8.1f} calls, "
                  f"{rows[-1]['syncs_per_step']:5.2f} syncs per step  {rows[-1]['where']}",
                  file=sys.stderr, flush=True)
    for name, (build, lengths) in LOOPS.items():
        if name not in methods:
            continue
        rows.append({"method": name, "compact": True, "n_images": None, "step": "batch",
                     "steps_per_unit": 1,
                     **per_step(lambda n, b=build: b(tp, n)(), lambda n: n, lengths)})
        print(f"{name:<32} {rows[-1]['calls_per_step']:8.1f} calls, "
              f"{rows[-1]['syncs_per_step']:5.2f} syncs per batch  {rows[-1]['where']}",
              file=sys.stderr, flush=True)
    return rows


def _commit(root: Path) -> str:
    git = ["git", "-C", str(root)]
    rev = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip() or "unknown"
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "cflib"],
                           capture_output=True, text=True).stdout.strip()
    return rev + ("+" if dirty else "")


def run_tree(root: Path, methods, images: int) -> list[dict]:
    """:func:`measure` in a fresh process with the ``cflib`` of checkout ``root`` (its
    own ``benchmarks/throughput.py`` builds the searches)."""
    root = root.resolve()
    if not (root / "cflib").is_dir() or not (root / "benchmarks" / "throughput.py").is_file():
        raise SystemExit(f"{root} is not a checkout of this project (no cflib/ and "
                         "benchmarks/throughput.py)")
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, __file__, "--worker", str(root), "--images", str(images),
           "--methods", *methods]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"counting in {root} failed:\n{out.stderr[-3000:]}")
    sys.stderr.write(out.stderr)
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    return [{**r, "commit": _commit(root)} for r in rows]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", default=[*BUDGET, *LOOPS],
                    help="searches and training loops (default: all of them)")
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--before", type=Path, default=None,
                    help="a checkout of the code before the change (rows 'before')")
    ap.add_argument("--out", default=str(ROOT / "results" / "performance_steps.csv"))
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    unknown = [m for m in args.methods if m not in BUDGET and m not in LOOPS]
    if unknown:
        raise SystemExit(f"no step budget known for {unknown}; searches: {list(BUDGET)}, "
                         f"loops: {list(LOOPS)}")
    if args.images < 1:
        raise SystemExit(f"--images must be at least 1, got {args.images}")
    if args.worker is not None:
        print(json.dumps(measure(args.worker, args.methods, args.images)))
        return
    import pandas as pd

    sys.path.insert(0, str(ROOT))
    from cflib.bench.results import write_table
    from cflib.book.runs.written import command_line, record_results

    trees = ([("before", args.before)] if args.before else []) + [("after", ROOT)]
    rows = [{"code": label, **r} for label, tree in trees
            for r in run_tree(tree, args.methods, args.images)]
    df = pd.DataFrame(rows)
    out = write_table(df, args.out)
    record_results([out], command_line("benchmarks/step_overhead.py", sys.argv[1:]))
    print(f"written {out}")


if __name__ == "__main__":
    main()
