"""The book's measuring networks, shipped with the project: a read-only layer the weight
cache consults before it trains.

A re-run on another machine retrains every network, and CPU training differs across
machines and thread counts in its last bits, which a network's metrics (FID, KID, AUPC)
amplify.  So the networks a row is *measured* with (the explained classifiers, the IM
autoencoders, the FID/KID feature networks, the independent classifiers) travel with the
book, for its run (training seed 0, profile ``standard``), in ``networks/`` of the
project:

* each network is one `safetensors <https://huggingface.co/docs/safetensors>`_ file
  (tensors only: loading it runs no code), ``<kind>-<key>.safetensors``, where ``key``
  is the sha256 of the network's training config (:func:`cflib.cache.cache_key`);
* ``MANIFEST.json`` lists each file with its config, the sha256 of the file, the info
  stored beside the weights (test accuracy, ...), where it was trained (device, threads)
  and its provenance (:mod:`cflib.provenance`: the commit and the digests of the code that
  trained it, each distinct map of digests once in the manifest's ``code`` table).  The manifest is under version control, so git is the signature: a file
  that fails its manifest's sha256 is an error, never loaded and never retrained over.

:func:`cflib.cache.cached` asks :func:`load` first: a network of the manifest is loaded
(on any device, at any thread count) and nothing is trained.  ``CFLIB_SHIPPED=off``
retrains everything (the cache still serves what this machine trained);
``CFLIB_SHIPPED=<folder>`` names another folder.  The generators and the methods' own
networks (DCGAN, encoders, C3LT's mappings, ExpGAN, the quantization recipes) are the
methods' training and are never shipped.  ``cflib networks ship`` writes the folder
(:mod:`cflib.bench.networks`).
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

import torch
from torch import nn

from cflib.io import atomic_write

SHIPPED_ENV = "CFLIB_SHIPPED"
MANIFEST = "MANIFEST.json"
#: changes of training code proven not to move the shipped networks (twin trainings at
#: ``smoke`` bit-equal: ``cflib networks certify``): ``{"definitions": {key: [[old, new], ...]}}``
CERTIFICATES = "CERTIFICATES.json"
FORMAT = 1
_OFF = ("0", "off", "false", "no")


def shipped_root() -> Path | None:
    """The folder of the shipped networks: ``$CFLIB_SHIPPED`` (``off``: none), else
    ``networks/`` of the project checkout cflib runs from (None when it has none)."""
    v = os.environ.get(SHIPPED_ENV)
    if v is not None:
        if not v.strip():
            raise ValueError(f"{SHIPPED_ENV}={v!r} is not valid; name the folder of the "
                             "shipped networks, or 'off' to retrain every network")
        if v.strip().lower() in _OFF:
            return None
        p = Path(v).expanduser()
        if not (p / MANIFEST).is_file():
            raise ValueError(f"{SHIPPED_ENV}={v!r} is not valid: {p} holds no {MANIFEST}; "
                             "name the folder of the shipped networks, or 'off'")
        return p
    p = Path(__file__).resolve().parent.parent / "networks"
    if (p / MANIFEST).is_file():
        return p
    if p.is_dir() and any(p.glob("*.safetensors")):
        # networks without their manifest: never retrain them in silence
        raise ValueError(f"{p} holds shipped networks but no {MANIFEST}: restore it (git "
                         f"checkout -- networks/{MANIFEST}), or set {SHIPPED_ENV}=off to "
                         "retrain every network")
    return None


def entry_name(kind: str, key: str) -> str:
    return f"{kind}-{key}"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=8)
def _manifest(root: str, mtime: float) -> dict:
    data = json.loads((Path(root) / MANIFEST).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{Path(root) / MANIFEST} is of format {data.get('format')!r}; this "
                         f"cflib reads format {FORMAT}")
    code = data.get("code", {})
    out = {}
    for name, e in data["networks"].items():    # each provenance's code map, resolved
        made = dict(e.get("provenance") or {})
        if isinstance(made.get("code"), str):
            made["code"] = code.get(made["code"])
        out[name] = {**e, "provenance": made}
    return out


@lru_cache(maxsize=8)
def _checked_manifest(root: str, mtime: float) -> None:
    """Check the manifest in ``root`` whole, read bounded, before any entry is used: its
    format, its ``networks`` map, each entry's file name and sha256; every fault a
    ValueError naming the manifest, the entry and the fix."""
    from cflib.io import read_json

    path = Path(root) / MANIFEST
    fix = (f"restore it (git checkout -- {path.parent.name}/{MANIFEST}), or set "
           f"{SHIPPED_ENV}=off to retrain every network")
    data = read_json(path, "manifest of the shipped networks", fix=fix)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path} is of format {got!r}; this cflib reads format {FORMAT}; {fix}")
    nets, code = data.get("networks"), data.get("code", {})
    if not isinstance(nets, dict) or not isinstance(code, dict):
        raise ValueError(f"{path} lists no networks (no mapping 'networks'); {fix}")
    for name, e in nets.items():
        _check_entry(path, name, e, fix)


def _check_entry(path: Path, name: str, e, fix: str) -> None:
    """One manifest entry: a mapping whose ``file`` is a plain ``.safetensors`` name in the
    manifest's folder and whose ``sha256`` is 64 hex digits; else a ValueError naming the
    entry and the field."""
    import reprlib

    if not isinstance(e, dict):
        raise ValueError(f"{path}: the entry {name!r} is not a mapping; {fix}")
    f = e.get("file")
    if not (isinstance(f, str) and f.endswith(".safetensors") and "/" not in f
            and "\\" not in f and not f.startswith(".")):
        raise ValueError(f"{path}: the entry {name!r} has no plain file name in 'file' (a "
                         f".safetensors file in {path.parent.name}/, got {f!r}); {fix}")
    sha = e.get("sha256")
    if not (isinstance(sha, str) and len(sha) == 64
            and all(c in "0123456789abcdef" for c in sha)):
        raise ValueError(f"{path}: the entry {name!r} has no sha256 (64 hex digits, got "
                         f"{reprlib.repr(sha)}); the manifest is damaged, not the file: {fix}")


def manifest(root: Path | None = None) -> dict[str, dict]:
    """``{name: entry}`` of the shipped networks (empty when none are shipped)."""
    root = shipped_root() if root is None else Path(root)
    if root is None or not (root / MANIFEST).is_file():
        return {}
    mtime = (root / MANIFEST).stat().st_mtime
    _checked_manifest(str(root), mtime)           # whole, before any entry is used
    return _manifest(str(root), mtime)


def certified(root: Path | None = None) -> dict[str, set[tuple[str, str]]]:
    """``{"module::name": {(old digest, new digest), ...}}``: the changes of training code
    that twin trainings certified (:data:`CERTIFICATES`; empty without the file)."""
    root = shipped_root() if root is None else Path(root)
    path = root / CERTIFICATES if root is not None else None
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        return {k: {tuple(p) for p in v} for k, v in data["definitions"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path} is not a readable certificate file ({err}): restore it "
                         "(git checkout) or run `cflib networks certify` again") from None


def find(kind: str, key: str, root: Path | None = None) -> dict | None:
    """The manifest's entry of the network ``kind`` with config key ``key``, or None."""
    return manifest(root).get(entry_name(kind, key))


def load(kind: str, key: str, config: dict, module: nn.Module,
         root: Path | None = None) -> tuple[dict, dict] | None:
    """Load the shipped network ``kind``/``key`` into ``module``: ``(info, entry)``, or None
    when it is not shipped (or shipping is off).  The file's sha256 must equal the
    manifest's, the manifest's config the one asked for, and the tensors the module's names
    and shapes, all checked before a tensor is copied; anything else is a ValueError that
    names the file and what to do (a shipped network is never silently replaced)."""
    root = shipped_root() if root is None else Path(root)
    if root is None:
        return None
    entry = find(kind, key, root)
    if entry is None:
        unlisted = root / f"{entry_name(kind, key)}.safetensors"
        if unlisted.is_file():           # its entry was removed: never retrain in silence
            raise ValueError(f"the shipped network {unlisted} is not listed in {MANIFEST} "
                             f"(its entry was removed); restore the manifest (git checkout -- "
                             f"{root.name}/{MANIFEST}), or set {SHIPPED_ENV}=off to retrain "
                             "every network")
        return None
    path = root / entry["file"]
    fix = (f"restore it (git checkout -- {path.parent.name}/{path.name}), or set "
           f"{SHIPPED_ENV}=off to retrain every network")
    if not path.is_file():
        raise ValueError(f"the shipped network {path} is listed in {MANIFEST} but missing; {fix}")
    if file_sha256(path) != entry["sha256"]:
        raise ValueError(f"the shipped network {path} fails its sha256 in {MANIFEST} (the file "
                         f"was edited or replaced); {fix}")
    if entry.get("config") != json.loads(json.dumps(config, sort_keys=True, default=str)):
        raise ValueError(f"{MANIFEST} lists {entry_name(kind, key)} with another config than "
                         f"the one it is keyed by; {fix}")
    try:
        from safetensors.torch import load_file
    except ImportError:
        raise ImportError(f"the shipped network {path} needs the safetensors package "
                          f"(pip install safetensors, a dependency of cflib), or set "
                          f"{SHIPPED_ENV}=off to retrain every network") from None
    state = load_file(str(path))
    own = module.state_dict()
    if set(state) != set(own) or any(tuple(state[k].shape) != tuple(own[k].shape) for k in own):
        raise ValueError(f"the shipped network {path} does not fit today's {kind} architecture "
                         f"(another set of tensors); re-ship it (cflib networks ship) or set "
                         f"{SHIPPED_ENV}=off")
    device = next((t.device for t in own.values()), torch.device("cpu"))
    module.load_state_dict({k: v.to(device) for k, v in state.items()})
    return dict(entry.get("info", {})), entry


def _code_table(made: dict, code: dict) -> dict:
    """A provenance with its code map moved into the manifest's ``code`` table (one map per
    distinct training code, named by its sha256), so the manifest lists each map once."""
    made = dict(made)
    if isinstance(made.get("code"), dict):
        blob = json.dumps(made["code"], sort_keys=True)
        key = hashlib.sha256(blob.encode()).hexdigest()[:16]
        code[key] = made["code"]
        made["code"] = key
    return made


def write(root: Path, networks: list[dict]) -> Path:
    """Write ``networks`` (dicts with ``kind``, ``key``, ``config``, ``state`` (a state dict),
    ``info``, ``trained_on``, ``provenance``) as safetensors files and their manifest under
    ``root``, replacing the folder's manifest.  Returns the manifest's path."""
    from safetensors.torch import save_file

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    listed = ({e["file"] for e in manifest(root).values()}
              if (root / MANIFEST).is_file() else set())
    strays = [f"{entry_name(n['kind'], n['key'])}.safetensors" for n in networks
              if (root / f"{entry_name(n['kind'], n['key'])}.safetensors").exists()
              and f"{entry_name(n['kind'], n['key'])}.safetensors" not in listed]
    if strays:
        raise ValueError(f"{root} already holds {strays[:3]}, which its manifest does not "
                         "list: a file shipping did not write is never written over; move it "
                         "away first")
    entries, code = {}, {}
    for n in networks:
        name = entry_name(n["kind"], n["key"])
        path = root / f"{name}.safetensors"
        state = {k: v.detach().cpu().contiguous().clone() for k, v in n["state"].items()}
        atomic_write(path, lambda tmp, s=state: save_file(s, str(tmp)))
        entries[name] = {"kind": n["kind"], "key": n["key"], "file": path.name, "sha256": file_sha256(path),
                         "bytes": path.stat().st_size, "config": n["config"],
                         "trained_on": n["trained_on"], "info": n["info"],
                         "provenance": _code_table(n["provenance"], code)}
    text = json.dumps({"format": FORMAT, "networks": dict(sorted(entries.items())),
                       "code": code}, indent=1, sort_keys=True) + "\n"
    return atomic_write(root / MANIFEST, text)
