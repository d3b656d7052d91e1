"""The book's first run on an empty cache, measured: where its time went.

    make book RERUN=1 WORKERS=2 > book.log 2>&1      # an empty cache folder, timed
    .venv/bin/python benchmarks/first_run.py --log book.log --wall SECONDS \\
        [--cache cache] [--chapters book/chapters] [--out results/performance_first_run.csv]

It reads three records the run leaves: the book's console log (each kernel's
``[chapter] HH:MM:SS training <kind> (<file>)`` line names the chapter that trained a
cache entry), the weight cache's ``events.log`` (each entry's training seconds) and the
executed chapters' metadata (each chapter's compute seconds).  ``--wall`` is the wall time
of the whole ``make book`` (e.g. from ``/usr/bin/time``).  It writes one tidy table:

* ``scope=book``: the wall time, the sum of the chapters' compute times and their ratio
  (the speed-up of running them side by side);
* ``scope=chapter``: each chapter's compute seconds, of which ``train_seconds`` trained
  networks;
* ``scope=network``: per chapter and kind of network (``classifier``, ``dcgan``, ...),
  how many were trained and their seconds; ``share`` is the share of the sum of the
  chapters' compute seconds.

The performance page shows it (``report.first_run_table``).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cflib.bench.results import write_table  # noqa: E402
from cflib.book.runs.written import command_line, record_results  # noqa: E402
from cflib.cache import EVENTS  # noqa: E402

#: a kernel's line of the book's log announcing a training
TRAINING_LINE = re.compile(r"^\[(?P<chapter>[\w-]+)\] \d\d:\d\d:\d\d training .*\((?P<entry>[^()\s]+)\)\s*$")


def entry_chapters(log_text: str) -> dict[str, str]:
    """Cache entry (file name) -> the chapter whose kernel trained it, from the book's log."""
    out = {}
    for line in log_text.splitlines():
        m = TRAINING_LINE.match(line.strip())
        if m:
            out.setdefault(m["entry"], m["chapter"])
    return out


def kind_of(entry: str) -> str:
    """The kind of network of a cache entry: its file name before the key's hash."""
    stem = entry.rsplit(".", 1)[0]
    return stem.rsplit("-", 1)[0] if "-" in stem else stem


def trainings(events_text: str, chapters: dict[str, str], until: str | None = None) -> pd.DataFrame:
    """One row per network trained (up to the time ``until``, ``YYYY-MM-DDTHH:MM:SS``, when
    given: what trained after the book is not the book's): entry, kind, chapter (``?`` when
    the log does not say), seconds."""
    rows = []
    for line in events_text.splitlines():
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 4 or not parts[1].startswith("trained"):
            continue
        if until is not None and parts[0] > until:
            continue
        rows.append({"entry": parts[2], "kind": kind_of(parts[2]),
                     "chapter": chapters.get(parts[2], "?"), "seconds": float(parts[3])})
    return pd.DataFrame(rows, columns=["entry", "kind", "chapter", "seconds"])


def chapter_seconds(folder: Path) -> dict[str, float]:
    """Each executed chapter's compute seconds (its notebook's ``computed`` record)."""
    out = {}
    for nb in sorted(Path(folder).glob("*.ipynb")):
        rec = json.loads(nb.read_text()).get("metadata", {}).get("cflib", {})
        sec = (rec.get("computed") or {}).get("seconds", rec.get("seconds"))
        if sec is not None:
            out[nb.stem] = float(sec)
    return out


def first_run_table(wall: float, chapters: dict[str, float], trained: pd.DataFrame,
                    workers: int) -> pd.DataFrame:
    """The tidy table described in the module's docstring."""
    if wall <= 0:
        raise ValueError(f"the wall time must be positive, not {wall}")
    if not chapters:
        raise ValueError("no executed chapter found: nothing to measure")
    total = sum(chapters.values())
    rows = [{"scope": "book", "name": "wall time", "chapter": "", "count": len(chapters),
             "seconds": wall, "train_seconds": trained["seconds"].sum(),
             "share": float("nan"), "workers": workers},
            {"scope": "book", "name": "chapters' compute, summed", "chapter": "",
             "count": len(chapters), "seconds": total, "train_seconds": trained["seconds"].sum(),
             "share": 1.0, "workers": workers}]
    for ch, sec in chapters.items():
        mine = trained[trained["chapter"] == ch]
        rows.append({"scope": "chapter", "name": ch, "chapter": ch, "count": len(mine),
                     "seconds": sec, "train_seconds": mine["seconds"].sum(),
                     "share": sec / total, "workers": workers})
    for (ch, kind), d in trained.groupby(["chapter", "kind"], sort=False):
        rows.append({"scope": "network", "name": kind, "chapter": ch, "count": len(d),
                     "seconds": d["seconds"].sum(), "train_seconds": d["seconds"].sum(),
                     "share": d["seconds"].sum() / total, "workers": workers})
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", required=True, help="the book's console log")
    ap.add_argument("--wall", type=float, required=True, help="the book's wall time, seconds")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--until", default=None,
                    help="the book's end, YYYY-MM-DDTHH:MM:SS (events after it are not the book's)")
    ap.add_argument("--cache", default=str(ROOT / "cache"))
    ap.add_argument("--chapters", default=str(ROOT / "book" / "chapters"))
    ap.add_argument("--out", default=str(ROOT / "results" / "performance_first_run.csv"))
    args = ap.parse_args(argv)
    log, events = Path(args.log), Path(args.cache) / EVENTS
    for f in (log, events):
        if not f.exists():
            raise SystemExit(f"{f} does not exist")
    trained = trainings(events.read_text(), entry_chapters(log.read_text()), args.until)
    table = first_run_table(args.wall, chapter_seconds(Path(args.chapters)), trained,
                            args.workers)
    write_table(table, args.out)
    record_results([args.out], command_line("benchmarks/first_run.py",
                                            sys.argv[1:] if argv is None else argv))
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
