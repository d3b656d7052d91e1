"""The explainer interface shared by every counterfactual method.

Anchors: CARLA's ``get_counterfactuals``, alibi's recorded parameters and captum's
batch-first ``attribute``.  An explainer is built from a classifier (plus what the
method needs: a generator, an autoencoder, ...) and a frozen dataclass config;
learned methods train in :meth:`Explainer.fit`; :meth:`Explainer.explain` turns a
whole batch of query images into a :class:`Counterfactuals` record at once.
Tensors follow the classifier's device.

The caller's objects are never changed: :meth:`Explainer.explain` and
:meth:`Explainer.fit` run the classifier and every network the method was given
inside :func:`frozen` (evaluation mode, no parameter gradients, both restored on
exit) and draw their randomness inside :func:`seeded` (the global RNG state is
restored on exit).  Per-call results are returned, never stored on the explainer.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

import cflib
from cflib.cache import cached, fingerprint
from cflib.env import forbid_compute
from cflib.explainers.records import (
    FitRecord,
    decode,
    encode,
    read_explainer,
    stem,
    write_explainer,
)
from cflib.explainers.records import read as read_pair
from cflib.explainers.records import write as write_pair
from cflib.scopes import channels_last, channels_last_agrees, check_seed, frozen, seeded
from cflib.tensors import (  # noqa: F401  (re-exported for the methods)
    HALF_DTYPES,
    X_MAX,
    X_MIN,
    _show,
    as_target,
    check_classifier,
    check_images,
    check_model,
    model_device,
    model_dtype,
    n_classes_of,
    predict,
    working,
)

log = logging.getLogger("cflib")


_NUMBER_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def _annotation_text(t) -> str:
    """An annotation as text, whether the class was written with ``from __future__ import
    annotations`` (a string) or without (the objects): ``int``, ``float | None``,
    ``tuple``..."""
    import types
    import typing

    if isinstance(t, str):
        return t
    if t is type(None):
        return "None"
    origin = typing.get_origin(t)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_annotation_text(a) for a in typing.get_args(t))
    if origin is not None:
        return getattr(origin, "__name__", str(origin))
    return getattr(t, "__name__", str(t))


def _hints(cls) -> dict:
    """The resolved annotations of a config class (``typing.get_type_hints``), or the raw
    ones when a name cannot be resolved."""
    import typing

    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {}


def _check_field(cls_name: str, name: str, annotation: str, value) -> None:
    """One config field against its annotation: the type (no bool for a number, no float
    for an int), finiteness, and None only where the annotation allows it."""
    kinds = [k.strip() for k in str(annotation).split("|")]
    if value is None:
        if "None" in kinds:
            return
        raise ValueError(f"{cls_name}.{name} must be {' | '.join(kinds)}, got None")
    base = [k for k in kinds if k != "None"]
    if len(base) == 1 and base[0] in _NUMBER_TYPES:
        kind = base[0]
        ok = isinstance(value, _NUMBER_TYPES[kind]) and (kind == "bool"
                                                         or not isinstance(value, bool))
        if not ok:
            raise ValueError(f"{cls_name}.{name} must be {kind}, got {type(value).__name__} "
                             f"{value!r}")
        if kind == "float" and not math.isfinite(value):
            raise ValueError(f"{cls_name}.{name} must be a finite number, got {value!r}")
    elif base and base[0].startswith("tuple"):
        if not isinstance(value, tuple):
            raise ValueError(f"{cls_name}.{name} must be a tuple, got {type(value).__name__} "
                             f"{value!r}")
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{cls_name}.{name} must hold finite numbers, got {value!r}")


#: how far beyond [-1, 1] a counterfactual's pixel may overshoot (a method's last step)
#: before it is counted and warned about
RANGE_SLACK = 1e-3

def key_config(config) -> dict:
    """A config as it enters a cache key: every field, but those its class lists in
    ``KEY_OMITS_DEFAULT`` while they are at their default (fields added after networks
    were cached, so that those networks are still found)."""
    d = asdict(config)
    for f in fields(config):
        if f.name in getattr(type(config), "KEY_OMITS_DEFAULT", ()) and d[f.name] == f.default:
            d.pop(f.name)
    return d


@dataclass(frozen=True)
class ExplainerConfig:
    """Base of every method's config; subclasses add the paper's arguments.

    Every field is checked when the config is built, before any work: its type (from
    the annotation: an int field takes no float or bool, a float field only finite
    numbers), a ``seed`` field's range (0..2**63-1) and then the subclass's ranges.
    """

    batch_size: int = 256  # images pushed through the model at once

    def __post_init__(self):
        hints = _hints(type(self))
        for f in fields(self):
            _check_field(type(self).__name__, f.name,
                         _annotation_text(hints.get(f.name, f.type)), getattr(self, f.name))
            if f.name == "seed":
                check_seed(self.seed, f"{type(self).__name__}.seed")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")


@dataclass
class Counterfactuals:
    """A batch of counterfactuals and what is known about them.

    ``success`` is a mask (failure is recorded, never a row of NaNs): the classifier
    assigns the counterfactual to the target *and* did not already assign the query to
    it (``meta["already_target"]``: a query already in its target is no success, whatever
    the method returns);
    ``seconds`` is the wall time of :meth:`Explainer.explain` for the batch;
    ``meta`` holds the config, the seed, ``model_passes`` (images the search pushed
    through the classifier's first layer, per counterfactual) and what the method reports
    per call
    (e.g. CVE's number of edits).
    """

    x: torch.Tensor
    x_cf: torch.Tensor
    target: torch.Tensor
    pred: torch.Tensor        # classifier's decision on x
    pred_cf: torch.Tensor     # classifier's decision on x_cf
    success: torch.Tensor     # pred_cf == target
    seconds: float
    method: str
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.x)

    @property
    def seconds_per_cf(self) -> float:
        return self.seconds / max(len(self), 1)

    @property
    def validity(self) -> float:
        return self.success.float().mean().item()

    # -- saved explanations (alibi's Explanation is the anchor) ---------------------------
    def save(self, path) -> Path:
        """Write this batch to ``path`` (a stem: ``<path>.pt`` holds the tensors, saved with
        ``torch.save`` and read back with ``weights_only=True``; ``<path>.json`` the method,
        config, seed, provenance and every other per-call entry of ``meta``).  A round trip
        through :meth:`load` is exact.  Returns the ``.json`` path."""
        return save_counterfactuals(path, {"": self})

    @classmethod
    def load(cls, path) -> "Counterfactuals":
        """A batch written by :meth:`save` (a ValueError names a file of another schema
        version, or one that holds several batches)."""
        batches = load_counterfactuals(path)
        if set(batches) != {""}:
            raise ValueError(f"{stem(path)}.json holds {len(batches)} batches "
                             f"({sorted(batches)[:3]}...): read it with load_counterfactuals")
        return batches[""]

    def head(self, n: int) -> "Counterfactuals":
        """The first ``n`` counterfactuals (tensors of the batch's length cut, the rest
        kept; ``seconds`` is the whole batch's)."""
        k = len(self)

        def cut(v):
            if torch.is_tensor(v) and v.dim() > 0 and len(v) == k:
                return v[:n]
            if isinstance(v, dict):
                return {a: cut(b) for a, b in v.items()}
            return v

        return Counterfactuals(**{a: cut(b) for a, b in self.__dict__.items()})

    def split(self, sizes) -> list["Counterfactuals"]:
        """The batch cut into consecutive parts of ``sizes`` rows (summing to its length):
        a search run once on several tables' or pairs' queries, returned as each one's
        batch.  Tensors of the batch's length are cut (``meta``'s too); ``seconds`` is
        shared by rows (each part keeps the batch's time per counterfactual);
        ``n_already_target`` is recounted from ``already_target``; ``n_outside_range``,
        a count over the whole batch, stays 0 where it was 0 and is None otherwise (the
        batch does not record which rows left the range)."""
        sizes = [int(n) for n in sizes]
        k = len(self)
        if any(n < 0 for n in sizes) or sum(sizes) != k:
            raise ValueError(f"the parts' sizes {sizes} must be >= 0 and sum to the batch's "
                             f"{k} counterfactuals")
        parts, start = [], 0
        for n in sizes:
            rows = slice(start, start + n)

            def cut(v):
                if torch.is_tensor(v) and v.dim() > 0 and len(v) == k:
                    return v[rows]
                if isinstance(v, dict):
                    return {a: cut(b) for a, b in v.items()}
                return v

            part = {a: cut(b) for a, b in self.__dict__.items()}
            part["seconds"] = self.seconds * n / k if k else 0.0
            meta = part["meta"]
            if torch.is_tensor(meta.get("already_target")):
                meta["n_already_target"] = int(meta["already_target"].sum())
            if meta.get("n_outside_range"):
                meta["n_outside_range"] = None
            parts.append(Counterfactuals(**part))
            start += n
        return parts

    def cpu(self) -> "Counterfactuals":
        def move(v):
            if torch.is_tensor(v):
                return v.detach().cpu()
            if isinstance(v, dict):
                return {k: move(u) for k, u in v.items()}
            return v

        return Counterfactuals(**{k: move(v) for k, v in self.__dict__.items()})


#: the version of the files :meth:`Counterfactuals.save` writes
CF_SCHEMA = 2
_CF_KIND = "cflib.Counterfactuals"
_CF_TENSORS = ("x", "x_cf", "target", "pred", "pred_cf", "success")


def save_counterfactuals(path, batches: dict[str, "Counterfactuals"]) -> Path:
    """Write several named batches to ``<path>.pt`` (their tensors, and every tensor of
    their ``meta``) and ``<path>.json`` (everything else, and the schema version), each
    file atomically.  ``meta`` may hold tensors, numbers, text, None, lists, tuples and
    dicts with text keys of them; any other entry is a TypeError naming it."""
    tensors: dict[str, torch.Tensor] = {}
    records = {}
    what = "Counterfactuals.save: meta entry"
    for name, cf in batches.items():
        if not isinstance(cf, Counterfactuals):
            raise TypeError(f"batch {name!r} is a {type(cf).__name__}, not Counterfactuals")
        rec = {k: encode(getattr(cf, k), f"{name}/{k}", tensors, what) for k in _CF_TENSORS}
        rec.update(seconds=float(cf.seconds), method=cf.method,
                   meta=encode(cf.meta, f"{name}/meta", tensors, what))
        records[name] = rec
    doc = {"schema": CF_SCHEMA, "kind": _CF_KIND, "batches": records}
    return write_pair(path, doc, tensors)


def load_counterfactuals(path) -> dict[str, "Counterfactuals"]:
    """The batches :func:`save_counterfactuals` wrote to ``path``, by name (a ValueError
    names a file of another schema version)."""
    doc, tensors = read_pair(path, _CF_KIND, CF_SCHEMA, "counterfactuals")
    batches = doc.get("batches")
    if not isinstance(batches, dict):
        raise ValueError(f"{path}: 'batches' is not a mapping of named batches")
    return {name: _batch(path, name, rec, tensors) for name, rec in batches.items()}


def _batch(path, name: str, rec, tensors: dict) -> "Counterfactuals":
    """One saved batch, every field checked: one clear error naming the file and field."""
    def bad(field: str, why: str) -> ValueError:
        return ValueError(f"{path}: batch {name!r}, field {field!r}: {why}")

    if not isinstance(rec, dict):
        raise bad("", "not a record")
    missing = [k for k in (*_CF_TENSORS, "seconds", "method", "meta") if k not in rec]
    if missing:
        raise bad(missing[0], "missing")
    try:
        vals = {k: decode(rec[k], tensors) for k in _CF_TENSORS}
    except (KeyError, TypeError) as err:
        raise bad("tensors", f"names a tensor the .pt does not hold ({err})") from None
    for k, v in vals.items():
        if not torch.is_tensor(v):
            raise bad(k, f"is a {type(v).__name__}, not a tensor")
    n = len(vals["x"]) if vals["x"].dim() else -1
    if vals["x_cf"].shape != vals["x"].shape or n < 0:
        raise bad("x_cf", f"shape {tuple(vals['x_cf'].shape)} is not the queries' "
                          f"{tuple(vals['x'].shape)}")
    for k in ("target", "pred", "pred_cf", "success"):
        if vals[k].shape != (n,):
            raise bad(k, f"shape {tuple(vals[k].shape)}, not ({n},)")
    if vals["success"].dtype != torch.bool:
        raise bad("success", f"dtype {vals['success'].dtype}, not a bool mask")
    for k in ("x", "x_cf"):             # images: real numbers, never NaN or infinite
        if not vals[k].is_floating_point() or not bool(torch.isfinite(vals[k]).all()):
            raise bad(k, f"holds {vals[k].dtype} values that are not all finite numbers "
                         "(NaN or infinite): not images")
    seconds = rec["seconds"]
    if (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
            or not math.isfinite(seconds) or seconds < 0):
        raise bad("seconds", f"{seconds!r} is not a number of seconds")
    if not isinstance(rec["method"], str):
        raise bad("method", f"{rec['method']!r} is not a method's name")
    meta = decode(rec["meta"], tensors)
    if not isinstance(meta, dict):
        raise bad("meta", f"is a {type(meta).__name__}, not a mapping")
    return Counterfactuals(**vals, seconds=float(seconds), method=rec["method"], meta=meta)


def _first_layer(model: nn.Module) -> nn.Module:
    """The first leaf module with parameters (every image entering the network passes
    it, whichever method of the model a search calls); the model itself if none."""
    for m in model.modules():
        if not list(m.children()) and any(True for _ in m.parameters(recurse=False)):
            return m
    return model


# -- the base class ------------------------------------------------------------------------
class Explainer:
    """Base class: subclasses implement :meth:`_generate` (or :meth:`_search`) for a batch.

    Subclasses set ``name`` as the paper spells the method and ``Config`` to their
    frozen dataclass of arguments.  Build one with a classifier and a config
    (``Method(classifier, config)``, or the config's fields as keywords) plus the
    networks the method needs; methods with ``needs_fit`` learn in :meth:`fit` first.

    What a learned method learned is one :class:`~cflib.explainers.records.FitRecord`
    (:attr:`fit_record`); the explainer is :attr:`fitted` when it holds one (or when
    it learns nothing).  :meth:`save` writes it, :meth:`load` reads it back for the
    same classifier and networks.
    """

    name: str = "Explainer"
    Config: type = ExplainerConfig
    #: True for methods that must be fitted before explain()
    needs_fit: bool = False
    #: what fit() learned (None until fit() or load())
    fit_record: FitRecord | None = None
    #: other methods whose fit records this class reads (C3LT (inverted): C3LT's)
    adopts: tuple[str, ...] = ()
    _live: dict = {}        # the modules built from fit_record's tensors (see _restore)
    #: whether the method runs float16 / bfloat16 networks (inputs, working tensors and
    #: results in the classifier's dtype); False: refused before any work
    half_precision: bool = True

    def __init__(self, classifier: nn.Module, config: ExplainerConfig | None = None,
                 **kwargs):
        if config is not None and kwargs:
            raise TypeError("pass either a config or keyword arguments, not both")
        if not isinstance(classifier, nn.Module):
            raise TypeError(f"{self.name} explains a torch.nn.Module classifier, got "
                            f"{type(classifier).__name__}")
        if config is None:
            known = {f.name for f in fields(self.Config)}
            unknown = sorted(set(kwargs) - known)
            if unknown:
                raise TypeError(f"{self.name} has no argument(s) {unknown}; its config "
                                f"{self.Config.__name__} takes {sorted(known)}")
        self.config = config if config is not None else self.Config(**kwargs)
        if not isinstance(self.config, self.Config):
            raise TypeError(f"{self.name} needs a {self.Config.__name__}, got "
                            f"{type(self.config).__name__}")
        check_model(classifier)
        self.classifier = classifier

    # -- networks ---------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return model_device(self.classifier)

    def frozen_networks(self) -> dict[str, nn.Module]:
        """Pretrained networks besides the classifier that the method depends on."""
        return {}

    def _image_networks(self) -> list[nn.Module]:
        """The networks whose input is an image batch (the classifier and any
        autoencoder): what :func:`~cflib.scopes.channels_last` may run faster."""
        nets = [self.classifier]
        for name, m in self.frozen_networks().items():
            if name.startswith("autoencoder"):
                nets.append(m)
        return nets

    def _caller_networks(self) -> list[nn.Module]:
        return [self.classifier, *self.frozen_networks().values()]

    def _check_same_device(self, **nets: nn.Module | None) -> None:
        """The networks a method is given must sit on the classifier's device (we never
        move the caller's modules)."""
        for name, net in nets.items():
            if net is not None and model_device(net) != self.device:
                raise ValueError(f"the {name} is on {model_device(net)} but the classifier on "
                                 f"{self.device}; move it first ({name}.to({str(self.device)!r}))")

    def network_fingerprints(self) -> dict[str, str]:
        """:func:`~cflib.cache.fingerprint` of the classifier and of every network of
        :meth:`frozen_networks`, by name: what a fit record is checked against."""
        nets = {"classifier": self.classifier, **self.frozen_networks()}
        return {k: fingerprint(m) for k, m in nets.items()}

    # -- what the method learned ------------------------------------------------------------
    @property
    def fitted(self) -> bool:
        """Whether :meth:`explain` may run: a fit record is held, or nothing is learned."""
        return self.fit_record is not None or not self.needs_fit

    def fitted_value(self, key: str):
        """One value the fit recorded (:attr:`fit_record`; None before :meth:`fit`)."""
        return self.fit_record.values[key] if self.fit_record else None

    @property
    def info(self) -> dict:
        """What the fit reports (its training's curves, steps, seconds; empty before)."""
        return self.fit_record.info if self.fit_record else {}

    @property
    def image_shape(self) -> tuple | None:
        """The image shape the method was fitted on (None before :meth:`fit`)."""
        return self.fitted_value("image_shape")

    def _check_precision(self) -> None:
        """Refuse, before any work, a float16 / bfloat16 network given to a method that
        does not run at half precision (``half_precision = False``), and half-precision
        networks of mixed dtypes (a bfloat16 classifier with a float32 autoencoder), each
        naming the dtypes and the fix."""
        dts = {name: model_dtype(net)
               for name, net in {"classifier": self.classifier,
                                 **self.frozen_networks()}.items()}
        half = {name: dt for name, dt in dts.items() if dt in HALF_DTYPES}
        if not half:
            return
        name, dt = next(iter(half.items()))
        if not self.half_precision:
            raise ValueError(f"{self.name} does not run {dt} networks (the {name} is {dt}); "
                             f"pass float32 ones ({name}.float())")
        other = {n: d for n, d in dts.items() if d != dts["classifier"]}
        if other:
            n, d = next(iter(other.items()))
            raise ValueError(f"the {n} is {d} but the classifier {dts['classifier']}; pass "
                             f"networks of one dtype ({n}.to({dts['classifier']}))")

    def fit(self, *args, **kwargs) -> "Explainer":
        """Train what the method learns (no-op for optimisation-based methods)."""
        return self

    def _new_record(self, tensors: dict, values: dict | None = None,
                    info: dict | None = None) -> FitRecord:
        """A fit record of this explainer: ``tensors`` maps a name to a tensor or to a
        module (saved as its state dict under ``name.``)."""
        flat = {}
        for name, t in tensors.items():
            if isinstance(t, nn.Module):
                flat.update({f"{name}.{k}": v for k, v in t.state_dict().items()})
            else:
                flat[name] = t
        return FitRecord(method=self.name, config=asdict(self.config),
                         fingerprints=self.network_fingerprints(), tensors=flat,
                         values=dict(values or {}), info=dict(info or {}))

    def record_fit(self, tensors: dict, values: dict | None = None,
                   info: dict | None = None) -> "Explainer":
        """Keep what ``fit`` learned, as a :class:`FitRecord` of this explainer (its name,
        config and networks' fingerprints filled in): ``tensors`` maps a name to a tensor
        or to a module (saved as its state dict), ``values`` holds learned numbers and
        tuples, ``info`` what training reported.  Returns ``self``, so a user's ``fit``
        ends with ``return self.record_fit(...)``; ``save`` and ``load`` then need
        nothing more."""
        return self._adopt(self._new_record(tensors, values, info), check=False)

    def _adopt(self, record: FitRecord, check: bool = True) -> "Explainer":
        """Hold ``record`` as what this explainer learned (after checking that it is a
        record of this method and, with ``check``, fitted against these very networks)."""
        if record.method not in (self.name, *self.adopts):
            raise ValueError(f"a fit record of {record.method!r} cannot make a {self.name!r}"
                             + (f" (it reads records of {[self.name, *self.adopts]})"
                                if self.adopts else ""))
        if check:
            self._check_fingerprints(record)
        self._live = self._restore(record)
        self.fit_record = record
        return self

    def _restore(self, record: FitRecord) -> dict[str, nn.Module]:
        """The modules a method computes with, built from ``record``'s tensors (shared,
        not copied); none by default."""
        return {}

    def _check_fingerprints(self, record: FitRecord) -> None:
        given, want = self.network_fingerprints(), record.fingerprints
        for name in [*want, *(k for k in given if k not in want)]:
            a, b = want.get(name), given.get(name)
            if a == b:
                continue
            if a is None:
                raise ValueError(f"this {record.method} was fitted without a {name}; "
                                 f"build it without {name}=")
            if b is None:
                raise ValueError(f"this {record.method} was fitted with a {name} (fingerprint "
                                 f"{a}); pass that {name}=")
            raise ValueError(f"the {name} given (fingerprint {b}) is not the one this "
                             f"{record.method} was fitted against (fingerprint {a}); a fitted "
                             f"explainer is used only with the networks it was fitted with")

    # -- saved explainers (alibi's save_explainer / load_explainer are the anchor) ---------
    def save(self, path) -> Path:
        """Write this explainer to ``path`` (a stem: ``<path>.pt`` holds the learned tensors,
        saved with ``torch.save`` and read back with ``weights_only=True``;
        ``<path>.json`` the method, the config, the fit record's fingerprints, learned
        values and training info, the cflib version and the schema version).  A method
        that learns nothing saves its config only.  Returns the ``.json`` path."""
        if not self.fitted:
            raise RuntimeError(f"{self.name} is not fitted: call fit() before save()")
        return write_explainer(path, self.name, asdict(self.config), self.fit_record)

    @classmethod
    def load(cls, path, classifier: nn.Module, **networks) -> "Explainer":
        """The explainer :meth:`save` wrote to ``path``, rebuilt for ``classifier`` and the
        frozen ``networks`` the method is built with (``generator=``, ``encoder=``,
        ``discriminator=`` for C3LT, ``autoencoder=`` for CEM, ...).

        ``Explainer.load`` finds the class by the saved method's name among the imported
        explainer classes; ``Method.load`` reads only a file of ``Method``.  The
        classifier and every network are checked against the fingerprints the fit
        record holds: a different one is a ValueError naming it.  A file of another
        schema version is a ValueError naming its version.  Explaining with the loaded
        explainer gives the same counterfactuals, bit for bit, as with the saved one.
        """
        method, config, record = read_explainer(path)
        target = _explainer_class(method) if cls is Explainer else cls
        if target.name != method:
            raise ValueError(f"{stem(path)}.json holds a saved {method!r}, not a "
                             f"{cls.name!r}: read it with Explainer.load")
        try:
            cfg = target.Config(**config)
        except TypeError as err:
            raise ValueError(f"{stem(path)}.json: the saved config of {method} does not fit "
                             f"this cflib's {target.Config.__name__} ({err})") from None
        try:
            ex = target(classifier, cfg, **networks)
        except TypeError as err:
            raise TypeError(f"{target.__name__}.load takes the classifier and the networks "
                            f"{target.__name__} is built with, as keywords "
                            f"(got {sorted(networks)}): {err}") from None
        if record is None:
            if ex.needs_fit:
                raise ValueError(f"{stem(path)}.json holds no fit record, but {method} must be "
                                 "fitted")
            return ex
        return ex._adopt(record.to(ex.device))

    def _cached_fit(self, net: nn.Module, cache: dict | None,
                    train: Callable[[nn.Module], dict | None]) -> dict:
        """Train ``net`` in place with ``train(net)``, or load it from the weight cache.

        ``cache`` (dataset, pair, profile, seed, ...) plus the method's name, its
        config, and the fingerprints of the classifier and of every frozen network
        in ``self.frozen_networks()`` form the cache key; ``None`` trains without
        caching.  The caller's networks are frozen and the global RNG restored.
        """
        forbid_compute(f"{self.name}.fit")
        with frozen(*self._caller_networks()):
            if cache is None:
                with seeded(int(getattr(self.config, "seed", 0) or 0)):
                    info = train(net) or {}
            else:
                cfg = {**cache, "method": self.name, "config": key_config(self.config),
                       "networks": self.network_fingerprints()}
                kind = self.name.lower().replace(" ", "_").replace(".", "")
                _, info = cached(kind, cfg, lambda: net, train, self.device)
        net.eval()
        return info

    # -- explaining -------------------------------------------------------------------------
    def _generate(self, x: torch.Tensor, target: torch.Tensor, query: torch.Tensor,
                  generator: torch.Generator | None):
        """Counterfactuals for the batch; ``generator`` is a seeded CPU generator.

        Returns the counterfactual images, or ``(images, meta)`` where ``meta`` holds
        per-call results to record.  The default runs ``self._search(x_chunk,
        target_chunk)`` over chunks of ``config.batch_size`` images (each chunk
        optimised as one batch), for methods whose search needs no randomness or
        query labels.
        """
        if not hasattr(self, "_search"):
            raise NotImplementedError(f"{type(self).__name__} implements neither _generate nor _search")
        bs = self.config.batch_size
        out = torch.empty_like(x)
        for i in range(0, len(x), bs):
            out[i:i + bs] = self._search(x[i:i + bs], target[i:i + bs])
        return out

    def explain(self, x: torch.Tensor, target, seed: int | None = 0, *,
                assume_range: bool = False) -> Counterfactuals:
        """Counterfactuals for a batch ``x`` (N, C, H, W) in [-1, 1] towards ``target``.

        ``target`` is a class index or one per image.  ``seed`` (an int in 0..2**63-1)
        seeds the method's randomness (``None``: the global RNG as it stands); the global
        RNG state, the classifier's mode and its parameters' ``requires_grad`` flags are
        the same after the call as before.  Every input is checked before any work: a
        batch with no value below 0 gets a warning that it looks like [0, 1] data
        (:func:`~cflib.tensors.check_images`), which ``assume_range=True`` silences; NaN or
        infinite scores of the classifier are a ValueError.  The counterfactuals come in
        the classifier's dtype (float16 / bfloat16 where the method runs them:
        ``half_precision``).
        """
        forbid_compute(f"{self.name}.explain")
        check_images(x, assume_range=assume_range)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an int or None, got {type(seed).__name__} {seed!r}")
        if seed is not None:
            check_seed(seed)
        check_model(self.classifier)
        self._check_precision()
        if not self.fitted:
            raise RuntimeError(f"{self.name} must be fitted first: call fit() before explain()")
        dev = self.device
        caller = self.classifier
        n_classes, wrapped = check_classifier(caller, x)
        target = as_target(target, len(x), dev, n_classes)
        if wrapped:        # a tuple / dict output: read the scores out of it for this call
            from cflib.tensors import ScoresOf

            self.classifier = ScoresOf(caller)
        try:
            return self._explain(x, target, seed, dev)
        finally:
            self.classifier = caller

    def _explain(self, x, target, seed, dev) -> Counterfactuals:
        with frozen(*self._caller_networks()):
            # float64 (or half) images are converted to the classifier's dtype
            x = x.to(dev, dtype=model_dtype(self.classifier))
            probs = predict(self.classifier, x, finite=True)
            pred = probs.argmax(1)
            already = pred == target
            if already.all():
                raise ValueError(
                    f"the classifier already assigns every query to its target ({_show(target)})"
                    ": a counterfactual needs a target other than the query's class")
            if already.any():
                log.info("%s: %d of %d queries are already classified as their target; "
                         "they are not counted as valid (meta['already_target'])",
                         self.name, int(already.sum()), len(x))
            # the networks that take images run channels-last where they agree with
            # themselves (a speed scope: see cflib.scopes.channels_last)
            fast = [m for m in self._image_networks()
                    if channels_last_agrees(m, x[:2])]
            rows = [0]              # images the search pushes through the classifier
            hook = _first_layer(self.classifier).register_forward_pre_hook(
                lambda _m, args: rows.__setitem__(0, rows[0] + (len(args[0]) if args else 0)))
            try:
                with seeded(seed) as gen, channels_last(*fast):
                    if dev.type == "cuda":
                        torch.cuda.synchronize(dev)
                    t0 = time.perf_counter()
                    out = self._generate(x, target, pred, gen)
                    if dev.type == "cuda":
                        torch.cuda.synchronize(dev)
                    seconds = time.perf_counter() - t0
            finally:
                hook.remove()
            x_cf, extra = out if isinstance(out, tuple) else (out, {})
            x_cf, outside = self._checked_output(x_cf, x)
            pred_cf = predict(self.classifier, x_cf).argmax(1)
        return Counterfactuals(
            x=x, x_cf=x_cf, target=target, pred=pred, pred_cf=pred_cf,
            success=(pred_cf == target) & ~already, seconds=seconds, method=self.name,
            meta={"config": asdict(self.config) if is_dataclass(self.config) else {},
                  "seed": seed, "cflib_version": cflib.__version__, "device": str(dev),
                  "model_fingerprint": fingerprint(self.classifier),
                  "already_target": already, "n_already_target": int(already.sum()),
                  "n_outside_range": outside,
                  "model_passes": rows[0] / len(x), **extra},
        )

    def _checked_output(self, x_cf, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        """What a method's search returned, as the batch's counterfactuals, and how many of
        them left the image range: a tensor of the queries' shape, finite (a NaN or
        infinite image is a failure of the method, an error naming it, never silently
        clipped to a valid-looking image), in the classifier's dtype and clamped to the
        image range [-1, 1] (a method may overshoot it by its step; the value returned is
        the nearest image).  Counterfactuals with a pixel beyond the range by more than
        :data:`RANGE_SLACK` are counted (``meta["n_outside_range"]``) and warned about,
        as inputs outside it are: [0, 255] images, say, are not counterfactuals."""
        if not torch.is_tensor(x_cf) or tuple(x_cf.shape) != tuple(x.shape):
            shape = tuple(x_cf.shape) if torch.is_tensor(x_cf) else type(x_cf).__name__
            raise RuntimeError(f"{self.name} returned counterfactuals of shape {shape} for a "
                               f"batch of shape {tuple(x.shape)}")
        if x_cf.is_complex():
            raise RuntimeError(f"{self.name} returned counterfactuals of dtype {x_cf.dtype}; "
                               "images are real tensors in [-1, 1]")
        bad = ~torch.isfinite(x_cf.detach()).flatten(1).all(1)
        if bad.any():
            rows = bad.nonzero().flatten().tolist()
            raise RuntimeError(f"{self.name} returned {len(rows)} non-finite counterfactual(s) "
                               f"(NaN or inf; rows {rows[:5]}{'...' if len(rows) > 5 else ''}) "
                               f"of a batch of {len(x)}")
        flat = x_cf.detach().flatten(1)
        out = ((flat < X_MIN - RANGE_SLACK) | (flat > X_MAX + RANGE_SLACK)).any(1)
        n_out = int(out.sum())
        if n_out:
            import warnings

            warnings.warn(f"{self.name} returned {n_out} of {len(x)} counterfactuals with pixels "
                          f"outside the image range [-1, 1] (from {flat.min().item():.3g} to "
                          f"{flat.max().item():.3g}); they were clamped to it and are counted "
                          "in meta['n_outside_range']", RuntimeWarning, stacklevel=3)
        # in the classifier's dtype (a no-op where the method computed in it)
        return x_cf.detach().to(x.dtype).clamp(X_MIN, X_MAX), n_out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"


def _explainer_class(name: str) -> type[Explainer]:
    """The explainer class whose ``name`` is ``name`` (for :meth:`Explainer.load`): cflib's
    own method of that name (``cflib.explainers.EXPLAINERS``) first, else the one imported
    class that defines it."""
    from cflib import explainers

    if name in explainers.EXPLAINERS:
        return explainers.EXPLAINERS[name]
    found, todo = [], list(Explainer.__subclasses__())
    while todo:
        c = todo.pop()
        todo.extend(c.__subclasses__())
        if c.__dict__.get("name") == name and c not in found:
            found.append(c)
    if len(found) != 1:
        which = ("no imported explainer class is" if not found else
                 f"{len(found)} imported explainer classes are "
                 f"({', '.join(c.__qualname__ for c in found)})")
        raise ValueError(f"{which} named {name!r}: import the method's module first, or "
                         "load with its class (Method.load)")
    return found[0]


class AutoencoderExplainer(Explainer):
    """Base of the methods whose loss holds an autoencoder term (CEM, PSCE).

    ``autoencoder`` is the caller's all-class autoencoder (``None``: no term), or, where a
    method supports it, a mapping ``{class: autoencoder}``; each is frozen during
    ``explain`` like the classifier.
    """

    per_class_autoencoder = False   # whether a {class: autoencoder} mapping is understood

    def __init__(self, classifier: nn.Module, config: ExplainerConfig | None = None, *,
                 autoencoder=None, **kwargs):
        super().__init__(classifier, config, **kwargs)
        if isinstance(autoencoder, dict):
            if not self.per_class_autoencoder:
                raise ValueError(f"{self.name} takes one all-class autoencoder, not a "
                                 "{class: autoencoder} mapping")
            if not autoencoder or not all(isinstance(m, nn.Module)
                                          for m in autoencoder.values()):
                raise ValueError("autoencoder must be a module or a non-empty "
                                 "{class: module} mapping")
            self._check_same_device(**{f"autoencoder[{k}]": m for k, m in autoencoder.items()})
        else:
            self._check_same_device(autoencoder=autoencoder)
        self.autoencoder = autoencoder

    def frozen_networks(self) -> dict[str, nn.Module]:
        if self.autoencoder is None:
            return {}
        if isinstance(self.autoencoder, dict):
            return {f"autoencoder_{k}": m for k, m in sorted(self.autoencoder.items())}
        return {"autoencoder": self.autoencoder}
