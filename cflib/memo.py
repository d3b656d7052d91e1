"""Steps computed once: a step's result kept in the local cache, valid while the code it
ran and the networks it used are unchanged.

A memoized step (a method's counterfactuals on one pair, say) is looked up by its
**inputs** (``key``: a JSON-able dict the caller builds from everything it passes in:
method, pair, seeds, profile, config, a digest of the query images, the explained
network's fingerprint) and kept with the **definitions it ran** (:mod:`cflib.trace`:
``{"cflib/x.py::unit": digest}``) and the **networks it used** (each cache or shipped file,
its size and the sha256 of its bytes: the same file in another clone is the same
network).  A later lookup with the same inputs returns the kept
result only when every one of those definitions still has its digest and every network
file is the one it used; else the step runs again and replaces the entry.  A hit counts
the step's definitions and networks as used by the enclosing run (:func:`cflib.trace.note`,
:func:`cflib.cache.note_used`), so a run that reads a step back records what a run that
computed it records.

Entries live under ``<cache>/memo/<kind>/<key>/`` (:func:`cflib.cache.cache_root`), never in
the repository; a lock per entry lets concurrent runs share the folder (one computes, the
others wait and read), and an entry is written to a temporary folder and renamed, so a
reader never meets half of one.  ``CFLIB_MEMO=off`` computes every step (and keeps
nothing).  Without the tracer available (a debugger is on) a step is computed and not kept.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

from cflib import trace
from cflib.cache import cache_key, cache_root, networks_used, note_used
from cflib.definitions import CHECKOUT, module_code
from cflib.env import flag
from cflib.shipped import file_sha256, shipped_root

log = logging.getLogger("cflib")
T = TypeVar("T")
FORMAT = 1
RECORD = "record.json"
MEMO_ENV = "CFLIB_MEMO"

__all__ = ["memoized", "memo_root", "changed_units", "FORMAT", "MEMO_ENV"]


def memo_root() -> Path:
    return cache_root() / "memo"


def changed_units(units: dict[str, str]) -> list[str]:
    """The recorded ``units`` (``file::unit``) whose digest is not today's (or whose file
    is gone)."""
    out = []
    for key, sha in units.items():
        module, _, unit = key.partition("::")
        path = CHECKOUT / module
        now = module_code(path).digests().get(unit) if path.exists() else None
        if now != sha:
            out.append(key)
    return out


def _network_file(entry: dict) -> Path | None:
    if entry.get("origin") == "shipped":        # its file's name under the shipped folder
        root = shipped_root()
        return root / entry["entry"] if root is not None else None
    return cache_root() / entry["entry"]


def _stat(entry: dict, by_date: bool = False) -> list | None:
    """What a network file is: its size and the sha256 of its bytes, so that the same file
    in another checkout, clone or copy (another modification time) is the same network;
    ``by_date``: its size and modification time, what an entry kept before networks were
    told by content recorded.  None when it is gone."""
    f = _network_file(entry)
    try:
        st = f.stat() if f is not None else None
        if st is None:
            return None
        return [st.st_size, st.st_mtime_ns if by_date else file_sha256(f)]
    except OSError:
        return None


def _valid(record: dict) -> str | None:
    """Why a kept entry cannot be used (None: it can)."""
    if record.get("format") != FORMAT:
        return "another format"
    changed = changed_units(record.get("units", {}))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return f"its code changed ({', '.join(changed[:3])}{more})"
    for net in record.get("networks", []):
        if net.get("origin", "").startswith("trained, not cached"):
            return f"network {net['entry']} was not cached"
        kept = net.get("stat")
        by_date = isinstance(kept, list) and len(kept) == 2 and isinstance(kept[1], int)
        if _stat(net, by_date) != kept:
            return f"network {net['entry']} changed"
    return None


def _read(path: Path) -> dict | None:
    try:
        record = json.loads((path / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def memoized(kind: str, key: dict, compute: Callable[[], T],
             save: Callable[[T, Path], None], load: Callable[[Path], T]) -> T:
    """``compute()``'s result for ``key``: read back from the cache when a valid entry
    exists, else computed, kept (``save(result, folder)``) and returned.  ``load(folder)``
    reads a kept result back."""
    if flag(MEMO_ENV) is False:
        return compute()
    folder = memo_root() / kind / cache_key({"kind": kind, **key})
    hit = _lookup(folder, load)
    if hit is not None:
        return hit[0]
    from filelock import FileLock

    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        hit = _lookup(folder, load)          # another process computed it meanwhile
        if hit is not None:
            return hit[0]
        return _compute(kind, key, folder, compute, save)


def _lookup(folder: Path, load):
    record = _read(folder) if folder.exists() else None
    if record is None:
        return None
    why = _valid(record)
    if why is not None:
        log.info("memo %s: computing again (%s)", folder.name, why)
        return None
    try:
        value = load(folder)
    except Exception as err:            # an unreadable entry is computed again
        log.warning("memo %s: could not be read (%s); computing again", folder.name, err)
        return None
    trace.note(record["units"])
    note_used([{k: v for k, v in n.items() if k != "stat"} for n in record["networks"]])
    log.info("memo %s: read back (%s)", folder.name, record.get("label", ""))
    return (value,)


def _compute(kind: str, key: dict, folder: Path, compute, save):
    own = not trace.active()
    if own:
        try:
            trace.start()
        except RuntimeError as err:     # a debugger's tracer: compute, keep nothing
            log.info("memo: %s; the step is computed and not kept", err)
            return compute()
    first = len(networks_used())
    try:
        with trace.segment() as seg:
            t0 = time.perf_counter()
            value = compute()
            seconds = time.perf_counter() - t0
    finally:
        if own:
            trace.stop()
    units = trace.record(seg)
    nets = [{**n, "stat": _stat(n)} for n in networks_used(first)]
    record = {"format": FORMAT, "kind": kind, "key": key, "label": key.get("label", ""),
              "units": units, "networks": nets, "seconds": round(seconds, 3),
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        save(value, tmp)
        (tmp / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True, default=str))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except OSError as err:              # a full disk or no permission: the run goes on
        log.warning("memo %s: could not be kept (%s)", folder.name, err)
        shutil.rmtree(tmp, ignore_errors=True)
    return value
