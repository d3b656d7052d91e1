"""Metric specifications: each metric of a table declared once (torchmetrics-style metadata).

A :class:`MetricSpec` holds a metric's name (one spelling across chapters), the
function that computes it from a runner's evaluation context, and its direction
(``higher_is_better``: True, False, or None for "closer to zero is better").
Runners iterate over their table's specs; the report reads directions, display
scales and descriptions from the same objects.  Every spec is registered by name
in :data:`SPECS` when its table's runner module is imported.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

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
    """The spec of a metric name (importing the table runners registers them all)."""
    if name not in SPECS:
        _load_runners()
    if name not in SPECS:
        raise ValueError(f"unknown metric {name!r}; known: {sorted(SPECS)}")
    return SPECS[name]


def _load_runners() -> None:
    import importlib

    for mod in ("cflib.c3lt_benchmark", "cflib.bayes_benchmark", "cflib.quant_benchmark"):
        importlib.import_module(mod)


# -- metrics shared by the tables -----------------------------------------------------------
# Their functions read an evaluation context with ``cf`` (the Counterfactuals),
# ``query_labels`` ((N,) classes of the queries) and ``autoencoders`` (class -> AE).
def _im1(ctx) -> float:
    from cflib.metrics.plausibility import im1_by_class

    return im1_by_class(ctx.cf.x_cf, ctx.cf.target, ctx.query_labels,
                        ctx.autoencoders).mean().item()


IM1 = MetricSpec(
    "IM1", _im1, False,
    "target-class AE error / query-class AE error (Van Looveren & Klaise 2019), the AEs of "
    "each image's own target and query classes")
VALIDITY = MetricSpec(
    "Validity", lambda ctx: ctx.cf.validity, True,
    "share of counterfactuals the classifier assigns to the target")
SECONDS_PER_CF = MetricSpec(
    "Seconds_per_CF", lambda ctx: ctx.cf.seconds_per_cf, False,
    "wall time of the batched explain call per counterfactual, on the machine that built "
    "the page (training excluded)", timing=True)
ACCURACY = MetricSpec("Accuracy", None, True, "classifier test accuracy (a fraction)")
register(IM1, VALIDITY, SECONDS_PER_CF, ACCURACY)
