"""The compute of a C3LT chapter, timed part by part, from the cache it is given.

    python benchmarks/chapter_timing.py [--dataset mnist] [--pairs 4->9 3->8]
        [--profile standard] [--device cuda] [--out results/performance-cuda_chapter.csv]

Runs the table as the chapter's compute cell does (``spec.run(spec.args(...))``: every network
trained or loaded from ``CFLIB_CACHE``, every method on every pair, every metric) and
writes one tidy row per part: ``total`` (the wall time of the whole run), the time
before the first method (the networks every method shares, the data), each method's
time over every pair (from the runner's "<method> on <n> images" line to the next:
its own training, such as C3LT's mappings, its search and its scoring; a row searched
once on every pair's queries counts that search's images, not its scoring lines'), and each
network the run trained (``trained: <entry>``, from the cache's ``events.log``), with
the device's name.  With an empty cache these are the networks' first training on that
device.
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cflib.bench.results import write_table  # noqa: E402
from cflib.bench.seeds import Seeds  # noqa: E402
from cflib.bench.tables.registry import spec_of_notebook  # noqa: E402
from cflib.book.runs.written import command_line, record_results  # noqa: E402
from cflib.cache import events  # noqa: E402


class _Marks(logging.Handler):
    """The time of each of the runner's "<method> on <n> images" lines."""

    PATTERN = re.compile(r"^\S+ (?P<pair>\S+): (?P<method>.+?) on (?P<n>\d+) images$")

    def __init__(self):
        super().__init__(logging.INFO)
        self.marks: list[tuple[float, str, str, int]] = []

    def emit(self, record):
        m = self.PATTERN.match(record.getMessage())
        if m:
            self.marks.append((time.perf_counter(), m["pair"], m["method"], int(m["n"])))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="mnist")
    ap.add_argument("--pairs", nargs="+", default=None, help="default: the chapter's")
    ap.add_argument("--profile", default="standard")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=str(ROOT / "results" / "performance-cuda_chapter.csv"))
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda, but CUDA is not available on this machine")
    machine = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    marks = _Marks()
    runner_log = logging.getLogger("cflib")         # the runner's logger
    runner_log.addHandler(marks)
    runner_log.setLevel(logging.INFO)
    before = len(events())
    t0 = time.perf_counter()
    spec = spec_of_notebook("c3lt_table.py", args.dataset)
    run = spec.run(spec.args(args.profile, Seeds(0, 0), args.device, pairs=args.pairs))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    end = time.perf_counter()
    rows = [{"part": "total", "seconds": end - t0, "images": None}]
    if marks.marks:
        rows.append({"part": "before the first method (shared networks, data)",
                     "seconds": marks.marks[0][0] - t0, "images": None})
    # a row searched once on every pair's queries (the table's ACROSS_PAIRS) logs that
    # search ("4->9,3->8,5->6: ... on 60 images"), then a line per pair for its scoring:
    # those lines add time, not images
    across = {method for _, pair, method, _ in marks.marks if "," in pair}
    per_method: dict[str, list[float]] = {}
    for (t, pair, method, n), nxt in zip(marks.marks, marks.marks[1:] + [(end,)]):
        per_method.setdefault(method, [0.0, 0])
        per_method[method][0] += nxt[0] - t
        if method not in across or "," in pair:
            per_method[method][1] += n
    for method, (seconds, n) in per_method.items():
        rows.append({"part": f"method: {method}", "seconds": seconds, "images": n})
    trained = [e for e in events()[before:] if e["event"] == "trained"]
    for e in trained:
        rows.append({"part": f"trained: {e['entry']}", "seconds": float(e["seconds"]),
                     "images": None})
    pairs = " ".join(dict.fromkeys(p for _, p, _, _ in marks.marks if "," not in p))
    table = pd.DataFrame(rows).assign(dataset=args.dataset, profile=args.profile, pairs=pairs,
                                      device=args.device, machine=machine,
                                      torch=torch.__version__)
    out = write_table(table, args.out)
    record_results([out], command_line("benchmarks/chapter_timing.py",
                                       sys.argv[1:] if argv is None else argv))
    print(table[["part", "seconds", "images"]].to_string(index=False))
    print(f"written {out}")
    return run


if __name__ == "__main__":
    main()
