"""A plain function as an explainer: ``fn(model, x, target) -> x_cf``.

The simplest counterfactual method a user can write is a function that takes the
classifier, a batch of query images in [-1, 1] and one target class per image, and
returns a batch of counterfactual images of the same shape.  :class:`FunctionExplainer`
runs such a function through the base :class:`~cflib.explainers.Explainer`, so that it
gets everything the built-in methods get: the inputs checked, the classifier frozen
(evaluation mode, no parameter gradients; gradients with respect to the images still
flow), the global RNG seeded and restored, the time measured, the output checked (the
queries' shape, finite: a NaN or infinite image is an error naming the method) and the
:class:`~cflib.explainers.Counterfactuals` record with its validity::

    from cflib.explainers import FunctionExplainer, from_function

    def towards_mean(model, x, target):
        return 0.5 * x + 0.5 * x.mean(0, keepdim=True)

    cf = FunctionExplainer(model, towards_mean).explain(x, target=9)
    Method = from_function(towards_mean, name="Towards the mean")   # a class
    cf = Method(model).explain(x, target=9)

:func:`from_function` makes the class that ``cflib.bench.compare`` (and the ``cflib
bench`` command) builds from a classifier, as it builds any method.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from cflib.explainers.base import Explainer, ExplainerConfig


@dataclass(frozen=True)
class FunctionConfig(ExplainerConfig):
    """A function's config: the base's ``batch_size`` (queries handed to the function at
    once); the function takes no other argument."""


def check_function(fn, what: str = "fn") -> Callable:
    """``fn`` if it is a callable that can be called as ``fn(model, x, target)``; else a
    TypeError naming what it is and the signature a method function needs."""
    if isinstance(fn, type) or not callable(fn):
        raise TypeError(f"{what} must be a function fn(model, x, target) -> x_cf, got "
                        f"{type(fn).__name__} {fn!r}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):        # a builtin without a signature: trust it
        return fn
    try:
        sig.bind(None, None, None)
    except TypeError:
        raise TypeError(f"{what} {getattr(fn, '__name__', fn)!r} must take three arguments "
                        f"(model, x, target); its signature is {sig}") from None
    return fn


class FunctionExplainer(Explainer):
    """A function ``fn(model, x, target) -> x_cf`` run as an explainer.

    ``fn`` gets the classifier (frozen: evaluation mode, no parameter gradients), a
    chunk of at most ``batch_size`` queries (a copy, on the classifier's device and in
    its dtype) and their targets (an ``(n,)`` long tensor), and returns the
    counterfactual images of the chunk.  Its output goes through the base's checks: a
    tensor of the chunk's shape, finite (NaN or infinite images are an error naming the
    method), then clamped to [-1, 1].  Randomness the function draws from torch's global
    RNG is seeded by ``explain(..., seed=)`` and the RNG restored afterwards.

    Build it as ``FunctionExplainer(model, fn)`` (or ``fn=fn``; a config or
    ``batch_size=`` as for any explainer); ``name`` (default: the function's
    ``__name__``) is how the method is called in results and errors.  A class made by
    :func:`from_function` holds its function and is built from a classifier (and a
    config) alone.
    """

    name = "Function"
    Config = FunctionConfig
    #: the function of a class made by :func:`from_function` (None: pass ``fn``)
    function: Callable | None = None

    def __init__(self, classifier: nn.Module, config: FunctionConfig | Callable | None = None,
                 *, fn: Callable | None = None, name: str | None = None, **kwargs):
        if callable(config) and not isinstance(config, ExplainerConfig):
            if fn is not None:
                raise TypeError("pass the function once: FunctionExplainer(model, fn) or "
                                "FunctionExplainer(model, fn=fn)")
            config, fn = None, config            # FunctionExplainer(model, fn)
        super().__init__(classifier, config, **kwargs)
        fn = fn if fn is not None else type(self).function
        if fn is None:
            raise TypeError(f"{type(self).__name__} needs a function: "
                            "FunctionExplainer(model, fn), or a class from from_function(fn)")
        self.fn = check_function(fn)
        if name is not None:
            self.name = _check_name(name)
        elif type(self).function is None:
            self.name = getattr(fn, "__name__", None) or self.name

    def _generate(self, x, target, query, generator):
        bs = self.config.batch_size
        chunks = []
        for i in range(0, len(x), bs):
            xi = x[i:i + bs]
            out = self.fn(self.classifier, xi.clone(), target[i:i + bs].clone())
            if not torch.is_tensor(out) or tuple(out.shape) != tuple(xi.shape):
                shape = tuple(out.shape) if torch.is_tensor(out) else type(out).__name__
                raise RuntimeError(f"{self.name} returned counterfactuals of shape {shape} "
                                   f"for a batch of shape {tuple(xi.shape)}")
            chunks.append(out.detach().to(x.device))
        return chunks[0] if len(chunks) == 1 else torch.cat(chunks)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.config})"


def _check_name(name) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty text, got {name!r}")
    from cflib.explainers import EXPLAINERS

    if name in EXPLAINERS:
        raise ValueError(f"name {name!r} is one of cflib's own methods; name your function "
                         "otherwise")
    return name


def from_function(fn: Callable, name: str | None = None) -> type[FunctionExplainer]:
    """A :class:`FunctionExplainer` class for ``fn``: built from a classifier (and a
    config, ``batch_size`` only) like every explainer class, so that anything that
    builds methods from a class (``cflib.bench.compare``, ``cflib bench``) takes a plain
    function too.  ``name`` (default: ``fn.__name__``) names the method; a name of one of
    cflib's own methods is refused."""
    check_function(fn)
    name = _check_name(name if name is not None else getattr(fn, "__name__", "function"))
    attrs = {"name": name, "function": staticmethod(fn),
             "__doc__": inspect.getdoc(fn) or f"The function {name!r} as an explainer.",
             "__module__": getattr(fn, "__module__", __name__)}
    return type(f"FunctionExplainer[{name}]", (FunctionExplainer,), attrs)
