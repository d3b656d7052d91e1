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

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Callable, TypeVar

from cflib import trace
from cflib.cache import cache_key, cache_root, networks_used, note_used
from cflib.definitions import CHECKOUT, module_code
from cflib.env import flag

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
        from cflib.shipped import shipped_root

        root = shipped_root()
        return root / entry["entry"] if root is not None else None
    return cache_root() / entry["entry"]


@lru_cache(maxsize=1024)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """The sha256 of a file's bytes (kept while its size and modification time are)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stat(entry: dict) -> list | None:
    """What a network file is: its size and the sha256 of its bytes, so that the same file
    in another checkout, clone or copy (another modification time) is the same network;
    None when it is gone."""
    f = _network_file(entry)
    try:
        st = f.stat() if f is not None else None
        if st is None:
            return None
        return [st.st_size, _sha256(str(f), st.st_size, st.st_mtime_ns)]
    except OSError:
        return None


def _same_network(net: dict) -> bool:
    """Is a step's network file the one it used?  By content; an entry kept before
    networks were told by content recorded ``[size, mtime_ns]``, compared as it was."""
    kept = net.get("stat")
    if isinstance(kept, list) and len(kept) == 2 and isinstance(kept[1], int):
        f = _network_file(net)
        try:
            st = f.stat() if f is not None else None
        except OSError:
            return False
        return st is not None and [st.st_size, st.st_mtime_ns] == kept
    return _stat(net) == kept


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
        if not _same_network(net):
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
