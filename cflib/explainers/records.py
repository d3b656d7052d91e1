"""What an explainer learned, as one frozen record, and the files it is saved in.

A learned method (C3LT's mappings, ExpGAN's networks, CVE's distractor pool, Original
Data's pool) keeps everything :meth:`~cflib.explainers.Explainer.fit` produced in one
:class:`FitRecord`: the method and config that fitted it, the fingerprints of the
classifier and of every frozen network it was fitted against, the learned tensors, the
learned values (class pair, image shape) and the training's info.  An explainer is fitted
when it holds a record; saving it writes the record, loading it reads the record back
and checks its fingerprints against the networks given.

Files come in pairs beside one stem, for explanations and fitted explainers alike:
``<stem>.pt`` holds only tensors (``torch.save`` of a flat dict, read back with
``weights_only=True``), ``<stem>.json`` everything else, its schema version and where
each tensor goes (``{"__tensor__": key}``; a tuple is ``{"__tuple__": [...]}``, so that a
round trip gives back exactly what was saved).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

import cflib
from cflib.cache import state_fingerprint
from cflib.io import atomic_write_all

#: the version of the files :meth:`Explainer.save <cflib.explainers.Explainer.save>` writes
FIT_SCHEMA = 2
FIT_KIND = "cflib.Explainer"
#: older schemas still read, per kind: their checksum covers the tensors alone
LEGACY = {"cflib.Explainer": (1,), "cflib.Counterfactuals": (1,)}


@dataclass(frozen=True)
class FitRecord:
    """Everything a learned explainer's ``fit`` produced (read-only once made).

    * ``method``, ``config``: the explainer that fitted it (``config`` as ``asdict``);
    * ``fingerprints``: network name (``classifier``, ``generator``, ...) ->
      :func:`cflib.cache.fingerprint` of the network it was fitted against;
    * ``tensors``: the learned tensors by name (a module's state dict under its name and
      a dot: ``maps.g.T1.0.weight``);
    * ``values``: learned numbers and tuples (the class pair, the image shape);
    * ``info``: what the training reported (C3LT's history, ...).
    """

    method: str
    config: dict
    fingerprints: dict[str, str]
    tensors: dict[str, torch.Tensor]
    values: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def state(self, name: str) -> dict[str, torch.Tensor]:
        """The state dict saved under ``name`` (its keys without the ``name.`` prefix)."""
        p = f"{name}."
        return {k[len(p):]: v for k, v in self.tensors.items() if k.startswith(p)}

    def to(self, device) -> "FitRecord":
        """The same record with its tensors on ``device``."""
        return replace(self, tensors={k: v.to(device) for k, v in self.tensors.items()})


def stem(path) -> Path:
    """``path`` without a ``.pt`` / ``.json`` suffix: the two files share it."""
    p = Path(path)
    return p.with_suffix("") if p.suffix in (".pt", ".json") else p


def encode(value, key: str, tensors: dict[str, torch.Tensor], what: str):
    """``value`` as JSON, its tensors moved into ``tensors`` under keys made from ``key``.

    Tensors, numbers, text, None, lists, tuples and dicts with text keys are saved; any
    other type is a TypeError naming ``what`` and the entry."""
    if torch.is_tensor(value):
        t = value.detach().cpu().contiguous()
        if t.untyped_storage().nbytes() != t.numel() * t.element_size():
            t = t.clone()       # a view of a larger tensor: save its own elements only
        tensors[key] = t
        return {"__tensor__": key}
    if isinstance(value, dict):
        bad = [a for a in value if not isinstance(a, str)]
        if bad:
            raise TypeError(f"{what} {key!r} has a key {bad[0]!r} of type "
                            f"{type(bad[0]).__name__}; only text keys are saved")
        return {a: encode(b, f"{key}.{a}", tensors, what) for a, b in value.items()}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(b, f"{key}.{i}", tensors, what)
                              for i, b in enumerate(value)]}
    if isinstance(value, list):
        return [encode(b, f"{key}.{i}", tensors, what) for i, b in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{what} {key!r} is a {type(value).__name__}; only tensors, numbers, "
                    "text, None, lists, tuples and dicts are saved")


def decode(value, tensors: dict[str, torch.Tensor]):
    """The inverse of :func:`encode`."""
    if isinstance(value, dict):
        if set(value) == {"__tensor__"}:
            return tensors[value["__tensor__"]]
        if set(value) == {"__tuple__"}:
            return tuple(decode(b, tensors) for b in value["__tuple__"])
        return {a: decode(b, tensors) for a, b in value.items()}
    if isinstance(value, list):
        return [decode(b, tensors) for b in value]
    return value


def checksum(doc: dict, tensors: dict[str, torch.Tensor]) -> str:
    """sha256 of a saved pair as a whole: the JSON document (but its ``sha256``) and every
    tensor, so that an edit of either file is seen."""
    import hashlib

    body = {k: v for k, v in doc.items() if k != "sha256"}
    h = hashlib.sha256(json.dumps(body, sort_keys=True).encode())
    h.update(state_fingerprint(tensors).encode())
    return h.hexdigest()[:32]


def write(path, doc: dict, tensors: dict[str, torch.Tensor]) -> Path:
    """``<stem>.pt`` (the tensors) and ``<stem>.json`` (``doc`` with its :func:`checksum`),
    each written atomically; returns the ``.json`` path."""
    doc = {**doc, "sha256": checksum(doc, tensors)}
    s = stem(path)
    # the pair replaced together: a failure (a full disk) leaves an earlier pair whole
    return atomic_write_all([
        (s.with_suffix(".pt"), lambda tmp: torch.save(tensors, tmp)),
        (s.with_suffix(".json"), lambda tmp: Path(tmp).write_text(json.dumps(doc, indent=1))),
    ])[1]


#: which loader reads each kind of saved file (named when a file is given to another);
#: the layers above add theirs
LOADERS = {"cflib.Explainer": "the method's class: <Method>.load(path, classifier)",
           "cflib.Counterfactuals": "Counterfactuals.load(path)"}


def read(path, kind: str, schema: int, what: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """The JSON document and the tensors of a pair :func:`write` wrote, after checking
    that the document is ``kind`` at version ``schema``.  A file that is not such a saved
    object, one of another kind (the error names the loader that reads it) or of another
    version is a ValueError naming the file."""
    s = stem(path)
    for f in (s.with_suffix(".json"), s.with_suffix(".pt")):
        if not f.exists():
            raise FileNotFoundError(f"no saved {what} at {f}")
    try:
        doc = json.loads(s.with_suffix(".json").read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ValueError(f"{s}.json is not a saved {what} of cflib (it is not readable JSON: "
                         f"{type(err).__name__}: {err})") from None
    got = doc if isinstance(doc, dict) else {}
    if got.get("kind") != kind and got.get("kind") in LOADERS:
        raise ValueError(f"{s}.json holds a saved {got['kind']}, not {what}: read it with "
                         f"{LOADERS[got['kind']]}")
    if got.get("kind") != kind:
        raise ValueError(f"{s}.json is not a saved {what} of cflib (its kind is "
                         f"{got.get('kind')!r}, not {kind!r})")
    if got.get("schema") not in (schema, *LEGACY.get(kind, ())):
        raise ValueError(f"{s}.json is schema version {got.get('schema')!r} of {kind}; this "
                         f"cflib reads schema {schema} (write it again with this version)")
    if not isinstance(got.get("sha256"), str):
        raise ValueError(f"{s}.json has no checksum (sha256): it is not a file cflib saved "
                         "whole, or it was edited; save it again")
    try:
        tensors = torch.load(s.with_suffix(".pt"), map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, not a torch file, unsafe content...
        raise ValueError(f"{s}.pt is not the tensors of a saved {what} ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''})") from None
    if not isinstance(tensors, dict):
        raise ValueError(f"{s}.pt is not the tensors of a saved {what} (it holds a "
                         f"{type(tensors).__name__})")
    # the schema's own checksum covers both files; a legacy one covered the tensors alone
    want = (checksum(doc, tensors) if got["schema"] == schema
            else state_fingerprint(tensors))
    if got["sha256"] != want:
        raise ValueError(f"{s}.json and {s}.pt do not match their checksum: one of them was "
                         "edited, or they were not saved together; save them again")
    return doc, tensors


# -- fitted explainers ---------------------------------------------------------------------
def write_explainer(path, method: str, config: dict, record: FitRecord | None) -> Path:
    """Save an explainer: its method and config, and its fit record (None: a method that
    learns nothing)."""
    tensors: dict[str, torch.Tensor] = {}
    what = f"{method}.save: entry"
    rec = None
    if record is not None:
        rec = {"method": record.method,
               "config": encode(record.config, "record.config", tensors, what),
               "fingerprints": dict(record.fingerprints),
               "tensors": encode(dict(record.tensors), "record.tensors", tensors, what),
               "values": encode(dict(record.values), "record.values", tensors, what),
               "info": encode(dict(record.info), "record.info", tensors, what)}
    doc = {"schema": FIT_SCHEMA, "kind": FIT_KIND, "method": method,
           "config": encode(config, "config", tensors, what),
           "cflib_version": cflib.__version__, "record": rec}
    return write(path, doc, tensors)


def read_explainer(path) -> tuple[str, dict, FitRecord | None]:
    """``(method, config, record)`` of a file :func:`write_explainer` wrote; a ValueError
    for another schema version or a ``.pt`` file that is not the one its ``.json`` names."""
    doc, tensors = read(path, FIT_KIND, FIT_SCHEMA, "explainer")
    try:
        rec = doc.get("record")
        record = None
        if rec is not None:
            record = FitRecord(method=rec["method"], config=decode(rec["config"], tensors),
                               fingerprints=dict(rec["fingerprints"]),
                               tensors=decode(rec["tensors"], tensors),
                               values=decode(rec["values"], tensors),
                               info=decode(rec["info"], tensors))
        return doc["method"], decode(doc["config"], tensors), record
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        # a pair whose checksum holds but whose document lacks a field (resealed by hand)
        raise ValueError(f"{stem(path)}.json is not a whole saved explainer (a field is "
                         f"missing or malformed: {type(err).__name__}: {err}); save it "
                         "again") from None
