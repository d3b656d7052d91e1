"""The on-disk cache of trained weights, shared by processes and machines.

Every trained network goes through :func:`cached`: its weights are stored under a key
built from the full training config (dataset, architecture, hyperparameters, seed,
profile), so a re-run loads instead of retraining.  What makes it safe to share one
cache folder between chapters, Dask workers and users:

* **trained once**: a lock per entry (``<file>.lock``, an OS file lock that dies with
  its process) is held while a network trains; a second process that needs the same
  entry waits, then loads what the first one wrote;
* **keyed by what changes the weights**: the key is the sha256 of the config plus the
  device type trained on (``cpu`` / ``cuda``) and, on the CPU, torch's intra-op thread
  count at training time (:func:`keyed`): CPU kernels reduce in another order
  with another thread count, so a network trained at 2 threads differs in its last bits
  from one trained at 1, and a 1-thread run never loads the 2-thread entry;
* **shipped first**: the book's measuring networks ship with the project
  (:mod:`cflib.shipped`); a network of its manifest is loaded from there, on any device
  and thread count, before the cache is looked at (``CFLIB_SHIPPED=off``: never);
* **trusted only when verified**: a file is loaded only when it is of this
  :data:`FORMAT` (or :data:`LEGACY_FORMAT`), its stored config equals the one asked for,
  its tensors match the module's names and shapes and the stored checksum equals the
  sha256 of its weights, its stored ``info`` and its provenance (:func:`payload_checksum`),
  so an edited ``test_accuracy`` fails like an edited weight; a file of an older format,
  without a checksum or with a wrong one is retrained and replaced, never loaded or
  re-signed;
* **provenance**: every entry records the commit and the digest of the code that trained
  it (:mod:`cflib.provenance`); loading one whose training code has changed since (or
  that recorded none) says so in the log, and every network a run used is listed with
  where it came from (:func:`networks_used`: shipped, cache or trained);
* **never half-written**: files are written to a temporary name and renamed; a write
  that fails (a full disk, no permission) keeps the trained network in memory, logs
  where it could not be written and why, and the run goes on;
* **shared**: files are created readable by the group (a cluster's shared cache), and
  every training is appended to ``events.log`` in the cache folder (which entry, how
  long, which process), so a run can count what it trained.

``CFLIB_CACHE`` names the folder; by default ``cache/`` in a checkout of the project,
else ``~/.cache/cflib``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from cflib import provenance as prov
from cflib import shipped
from cflib.env import folder, forbid_compute
from cflib.env import threads as env_threads
from cflib.io import atomic_write
from cflib.scopes import seeded, torch_threads
from cflib.tensors import check_device

log = logging.getLogger("cflib")
CACHE_ENV = "CFLIB_CACHE"
FORMAT = 3   # 3: the checksum covers the provenance too
LEGACY_FORMAT = 2   # 2: the key holds where it was trained; the checksum covers the info
EVENTS = "events.log"
#: how long a process waits for another one training the same entry
LOCK_TIMEOUT_S = 6 * 3600


def cache_root() -> Path:
    """``$CFLIB_CACHE``; else ``cache/`` of the project checkout cflib runs from, else
    ``~/.cache/cflib``.  An empty value is a ValueError, a file a PermissionError."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        p = Path(env).expanduser()
        if env.strip() and p.exists() and not p.is_dir():
            raise PermissionError(f"{CACHE_ENV}={env!r} is a file, not a folder; set "
                                  f"{CACHE_ENV} to a writable folder")
        return Path(folder(CACHE_ENV))
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").exists():
        return checkout / "cache"
    return Path.home() / ".cache" / "cflib"


def _normalise(config: dict) -> dict:
    return json.loads(json.dumps(config, sort_keys=True, default=str))


def cache_key(config: dict) -> str:
    """A short sha256 of a config (its canonical JSON)."""
    blob = json.dumps(_normalise(config), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def fingerprint(module: nn.Module) -> str:
    """A short sha256 of a network's weights and buffers (order and shape included).

    Learned explainers put the fingerprint of the networks they depend on (the
    classifier being explained, a frozen generator) into their cache key, so a
    retrained classifier or GAN never meets mappings trained against the old one.
    """
    return state_fingerprint(module.state_dict())


def state_fingerprint(state: dict) -> str:
    """:func:`fingerprint` of a state dict (the checksum stored beside cached weights)."""
    h = hashlib.sha256()
    for name, t in state.items():
        t = t.detach().cpu().contiguous()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
    return h.hexdigest()[:16]


def cache_path(kind: str, config: dict, device="cpu") -> Path:
    """Where :func:`cached` keeps the network of ``config`` trained on ``device`` (the key
    holds :func:`trained_on` as well as the config)."""
    return cache_root() / f"{kind}-{cache_key(keyed(config, device))}.pt"


def keyed(config: dict, device="cpu") -> dict:
    """The config a cache entry is stored under: ``config`` and where it was trained."""
    return {**config, "trained_on": trained_on(device)}


def trained_on(device) -> dict:
    """What changes a network's weights besides its config: the device type, and on the
    CPU the thread count it is trained at (float sums are split across threads, so a CPU
    training at 2 threads gives other weights than at 1): ``CFLIB_THREADS`` (default 1),
    the one setting of the library, the chapters, the bench and papermill runs, so a
    network one of them trained is the one the others load.  Part of every cache key."""
    dev = torch.device(device)
    where = {"device_type": dev.type}
    if dev.type == "cpu":
        where["threads"] = env_threads()
    return where


def _training_threads(device):
    """Train at the thread count the key holds (:func:`trained_on`) on the CPU."""
    dev = torch.device(device)
    return torch_threads(env_threads()) if dev.type == "cpu" else contextlib.nullcontext()


def payload_checksum(state: dict, info: dict, provenance: dict | None = None) -> str:
    """The checksum stored beside cached weights: their fingerprint, the stored info
    (an edited ``test_accuracy`` fails it as an edited weight does) and, from format 3,
    the provenance."""
    blob = state_fingerprint(state) + json.dumps(_normalise(info), sort_keys=True)
    if provenance is not None:
        blob += json.dumps(_normalise(provenance), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


#: every network this process asked the cache for, in order (:func:`networks_used`)
_USED: list[dict] = []


def networks_used(since: int = 0) -> list[dict]:
    """The networks this process asked :func:`cached` for (from the ``since``-th on): dicts
    with ``kind``, ``entry`` (the cache file's or the shipped file's name), ``origin``
    (``shipped``, ``cache``, ``trained`` or ``trained, not cached``), ``provenance``
    (one phrase, :func:`cflib.provenance.describe`) and ``code`` (the definitions its
    training reaches today, :func:`cflib.provenance.training_code`)."""
    return [dict(u) for u in _USED[since:]]


def networks_table(records: list[dict]):
    """:func:`networks_used` records as a table (one row per network, first use kept):
    ``kind, entry, origin, provenance`` (a chapter saves it beside its results)."""
    import pandas as pd

    seen, rows = set(), []
    for r in records:
        if r["entry"] not in seen:
            seen.add(r["entry"])
            rows.append({k: r[k] for k in ("kind", "entry", "origin", "provenance")})
    return pd.DataFrame(rows, columns=["kind", "entry", "origin", "provenance"])


def note_used(records: list[dict]) -> None:
    """Count the networks a step read back from :mod:`cflib.memo` used (its
    :func:`networks_used` records) as used by this process: what it trained then is in the
    cache now (origin ``cache``)."""
    for r in records:
        origin = r["origin"] if r["origin"] in ("shipped", "cache") else "cache"
        _USED.append({**r, "origin": origin, "code": r.get("code") or {}})


def _used(kind: str, entry: str, origin: str, recorded: dict | None, code: dict) -> None:
    _USED.append({"kind": kind, "entry": entry, "origin": origin,
                  "provenance": prov.describe(recorded), "code": code})


def atomic_save(obj, path: Path) -> None:
    """``torch.save`` through :func:`cflib.io.atomic_write` (a temporary file renamed)."""
    atomic_write(path, lambda tmp: torch.save(obj, tmp))


def _try_load(path: Path, config: dict, module: nn.Module) -> tuple[dict, dict | None] | None:
    """``(info, provenance)`` stored with ``path`` when it holds verified weights for exactly
    ``config`` (provenance None for a format-2 file, which recorded none); else None.

    The file's config, its keys and shapes and the checksum of its tensors are checked
    *before* any tensor is copied into ``module``, so a file that fails leaves the
    module exactly as it was built (retraining never starts from half-loaded weights).
    """
    if not path.exists():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
        if payload.get("format") not in (FORMAT, LEGACY_FORMAT):
            log.warning("cache %s is of format %r (written by another cflib; this one writes "
                        "%d); it is not trusted: retraining", path.name, payload.get("format"),
                        FORMAT)
            return None
        if payload.get("config") != _normalise(config):
            log.warning("cache %s was written for another config; retraining", path.name)
            return None
        state = payload["state_dict"]
        own = module.state_dict()
        if set(state) != set(own) or any(tuple(state[k].shape) != tuple(own[k].shape)
                                         for k in own):
            log.warning("cache %s holds another architecture's weights; retraining", path.name)
            return None
        stored = payload.get("sha256")
        if stored is None:
            log.warning("cache %s has no checksum (written by an older cflib); it is not "
                        "trusted: retraining", path.name)
            return None
        info = payload.get("info", {})
        recorded = payload.get("provenance") if payload["format"] == FORMAT else None
        if payload["format"] == FORMAT and not isinstance(recorded, dict):
            log.warning("cache %s has no provenance; it is not trusted: retraining", path.name)
            return None
        if stored != payload_checksum(state, info, recorded):
            log.warning("cache %s fails its checksum (a corrupt or edited file); retraining",
                        path.name)
            return None
        module.load_state_dict(state)
        return info, recorded
    except Exception as err:  # corrupt, truncated, unreadable...
        log.warning("cache %s is unreadable (%s: %s); retraining", path.name,
                    type(err).__name__, err)
        return None


def check_writable(folder: Path) -> None:
    """Fail before training, not after it, when the cache folder cannot be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise PermissionError(
            f"the weight cache {folder} cannot be written ({type(err).__name__}: {err}); set "
            f"{CACHE_ENV} to a writable folder (or pass use_cache=False to train without it)"
        ) from None


def _record(folder: Path, event: str, name: str, seconds: float) -> None:
    """Append one line to the cache's ``events.log`` (best effort: never fails a run)."""
    line = (f"{time.strftime('%Y-%m-%dT%H:%M:%S')}\t{event}\t{name}\t{seconds:.1f}\t"
            f"{socket.gethostname()}:{os.getpid()}\n")
    try:
        with open(folder / EVENTS, "a") as f:
            f.write(line)
    except OSError:
        pass


def events(folder: Path | None = None) -> list[dict]:
    """The training events of a cache folder: ``time, event, entry, seconds, process``
    (a line that is not five tab-separated fields with a number of seconds is passed over:
    the log is advisory)."""
    f = Path(folder or cache_root()) / EVENTS
    if not f.exists():
        return []
    from cflib.io import read_text

    keys = ("time", "event", "entry", "seconds", "process")
    out = []
    for line in read_text(f, "log of training events").splitlines():
        fields = line.split("\t")
        if len(fields) != len(keys):
            continue                  # a torn or foreign line: the log is advisory
        try:
            float(fields[3])
        except ValueError:
            continue
        out.append(dict(zip(keys, fields)))
    return out


def _lock(path: Path):
    from filelock import FileLock

    return FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S)


def _loaded(kind: str, path: Path, module: nn.Module, device, code: dict, info: dict,
            recorded: dict | None):
    """A verified cache entry: say which code trained it when that is not today's."""
    changed = prov.changed_since(recorded)
    if changed is None or changed:
        log.warning("cache %s: %s", path.name, prov.describe(recorded))
    else:
        log.info("loaded %s %s", kind, path.name)
    _used(kind, path.name, "cache", recorded, code)
    return module.to(device).eval(), info


def read_entry(path: Path) -> dict:
    """A cache file's stored payload (config, state dict, info, provenance), unverified."""
    return torch.load(path, map_location="cpu", weights_only=True)


def cached(kind: str, config: dict, build: Callable[[], nn.Module],
           train: Callable[[nn.Module], dict | None], device="cpu",
           use_cache: bool = True) -> tuple[nn.Module, dict]:
    """Build a module and load it from the cache, or train and cache it (once).

    ``train(module)`` trains in place and may return an info dict (e.g. test
    accuracy) that is stored beside the weights (with their checksum) and returned on
    later loads.  The entry's key is :func:`keyed` of ``config`` and ``device``
    (the device type, and the thread count on the CPU).  While one process trains an
    entry, others asking for it wait for its lock and then load it.  ``device`` is
    checked first (:func:`cflib.tensors.check_device`), the cache folder's write access
    before training; a write that fails afterwards is logged and the trained module
    returned.
    """
    forbid_compute(f"the weight cache ({kind})")
    device = check_device(device)
    seed = int(config.get("seed", 0))
    path = cache_path(kind, config, device)
    key = cache_key(config)
    asked = config
    config = keyed(config, device)
    with seeded(seed):
        module = build().to(device)
    code = prov.training_code(train, build, seeded)
    if not use_cache:
        with seeded(seed), _training_threads(device):
            info = train(module) or {}
        _used(kind, path.name, "trained, not cached", prov.provenance(train, build, seeded),
              code)
        return module.eval(), info
    got = shipped.load(kind, key, asked, module)
    if got is not None:
        info, entry = got
        log.info("loaded %s %s (shipped with the book)", kind, entry["file"])
        _used(kind, entry["file"], "shipped", entry.get("provenance"), code)
        return module.to(device).eval(), info
    loaded = _try_load(path, config, module)
    if loaded is not None:
        return _loaded(kind, path, module, device, code, *loaded)
    check_writable(path.parent)
    lock = _lock(path)
    from filelock import Timeout

    try:
        lock.acquire(timeout=0)
    except Timeout:  # a TimeoutError, so an OSError: caught first
        log.info("waiting: another process is training %s (%s)", kind, path.name)
        lock.acquire()
    except OSError as err:  # a folder, no permission, a link to nowhere or a link loop
        raise RuntimeError(
            f"the lock file {lock.lock_file} of cache entry {path.name} cannot be taken "
            f"({type(err).__name__}: {err.strerror}); remove it (a lock is re-made on the "
            f"next run) or set {CACHE_ENV} to another folder") from None
    try:
        loaded = _try_load(path, config, module)     # trained by the process we waited for
        if loaded is not None:
            return _loaded(kind, path, module, device, code, *loaded)
        log.info("training %s (%s)", kind, path.name)
        t0 = time.perf_counter()
        with seeded(seed), _training_threads(device):
            info = train(module) or {}
        module.eval()
        seconds = time.perf_counter() - t0
        state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
        made = _normalise({**prov.provenance(train, build, seeded, seconds=seconds),
                           "code": code})
        _used(kind, path.name, "trained", made, code)
        try:
            info = _normalise(info)
            atomic_save({"format": FORMAT, "config": _normalise(config), "state_dict": state,
                         "sha256": payload_checksum(state, info, made), "info": info,
                         "provenance": made}, path)
            _record(path.parent, "trained", path.name, seconds)
        except Exception as err:  # a full disk, a lost permission...
            log.warning("could not write %s to the weight cache %s (%s: %s); the trained "
                        "network is kept in memory for this run only", kind, path,
                        type(err).__name__, str(err).splitlines()[0] if str(err) else "")
            _record(path.parent, "trained-unsaved", path.name, seconds)
        return module, info
    finally:
        lock.release()
