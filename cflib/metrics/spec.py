"""Metric specifications: each metric of a table declared once (torchmetrics-style metadata).

A :class:`MetricSpec` holds a metric's name (one spelling across chapters), the
function that computes it from a runner's evaluation context, and its direction
(``higher_is_better``: True, False, or None for "closer to zero is better").
Each spec is declared beside its function (``cflib/metrics/*.py``) and registered by
name in :data:`SPECS` when :mod:`cflib.metrics` is imported; a table lists the specs
it reports, and the report reads directions, display scales and descriptions from
the same objects.

A spec's function reads an *evaluation context*: any object with the attributes the
function names.  The ones cflib's specs read are ``cf`` (the
:class:`~cflib.explainers.Counterfactuals`), ``query_labels`` ((N,) classes of the
queries), ``autoencoders`` (class -> autoencoder, ``None`` -> the all-class one) and
what a family of metrics needs besides (documented beside it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from cflib.names import unknown_name

#: every declared metric, by name
SPECS: dict[str, "MetricSpec"] = {}


@dataclass(frozen=True)
class MetricSpec:
    """One metric of a table.

    ``fn(ctx)`` computes the value from the runner's evaluation context (None for
    metrics a runner sets itself); ``higher_is_better`` is True / False, or None
    when the best value is 0 (ranked by absolute value); ``display_scale`` is the
    factor the paper's table applies (IM2 x10, KID x1e3); ``timing`` marks wall-clock
    metrics (left out of rankings and reproducibility checks); ``needs`` names a key of
    ``Counterfactuals.meta`` that the metric reads: it is computed only for the methods
    that report it (e.g. CVE's number of edits).
    """

    name: str
    fn: Callable[[Any], float] | None
    higher_is_better: bool | None
    description: str = ""
    display_scale: float = 1.0
    timing: bool = False
    needs: str | None = None

    def applies(self, ctx) -> bool:
        """Does this metric apply to the counterfactuals of ``ctx``?"""
        return self.needs is None or self.needs in ctx.cf.meta

    @property
    def title(self) -> str:
        """Column title of the book's tables (the paper's scale in brackets)."""
        if self.display_scale == 1.0:
            return self.name
        exp = math.log10(self.display_scale)
        factor = f"x{int(self.display_scale)}" if exp < 2 else f"x1e{round(exp)}"
        return f"{self.name} ({factor})"

    @property
    def direction(self) -> str:
        """``"higher"``, ``"lower"`` or ``"zero"`` (as in the reference file)."""
        return {True: "higher", False: "lower", None: "zero"}[self.higher_is_better]

    @property
    def arrow(self) -> str:
        return {True: "↑", False: "↓", None: "→ 0"}[self.higher_is_better]

    def key(self, value: float) -> float:
        """A sort key where smaller is better."""
        if self.higher_is_better is None:
            return abs(value)
        return -value if self.higher_is_better else value

    def better(self, a: float, b: float) -> bool:
        """Is ``a`` at least as good as ``b`` (ties count as holding)?"""
        return self.key(a) <= self.key(b)

    def __call__(self, ctx) -> float:
        if self.fn is None:
            raise TypeError(f"metric {self.name} is set by its runner, not computed from a context")
        return float(self.fn(ctx))


def register(*specs: MetricSpec) -> tuple[MetricSpec, ...]:
    """Register specs by name; a name declared twice with other metadata is an error."""
    for s in specs:
        old = SPECS.get(s.name)
        if old is not None and (old.higher_is_better, old.display_scale, old.timing) != (
                s.higher_is_better, s.display_scale, s.timing):
            raise ValueError(f"metric {s.name!r} is declared twice with different metadata")
        SPECS.setdefault(s.name, s)
    return specs


def get_spec(name: str) -> MetricSpec:
    """The spec of a metric name (every metric of :mod:`cflib.metrics` is registered when
    the package is imported)."""
    if name not in SPECS:
        raise unknown_name("metric", name, sorted(SPECS))
    return SPECS[name]
