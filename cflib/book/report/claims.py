"""Claims: a discussion's comparative sentences as checked objects.

A sentence such as "`Latent search` finds closer counterfactuals than C3LT" is a claim:
a predicate evaluated in each training seed on that seed's values, never on a mean alone.
:meth:`cflib.book.report.discussion.Readings.claim` makes one and keeps it in the
readings' ledger (``readings.claims``); the template words the sentence by how many
seeds it holds in::

    {% set c = claim("Latent search", "C3LT", "Proximity") %}
    ... {{ c.say("closer", "no closer") }} counterfactuals than C3LT's ...

renders "closer (in 3 of 3 training seeds)", "closer in 2 of 3 training seeds only" or
"no closer (in 3 of 3 training seeds)" (and "closer in 1 of 3 training seeds only" where
it holds in fewer than every seed but not in none).  A claim is strict: ``a`` better than
``b`` in the metric's own direction (lower proximity, higher validity), a tie is not a
lead.  ``tests/test_claims.py`` renders every page and checks each claim in the ledger
against the results files, reading them on its own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Claim", "Top", "Reached", "seeds_phrase", "holds", "reaches"]


def seeds_phrase(k: int, n: int, unit: str = "training seeds") -> str:
    """``"in k of n training seeds"`` (``"in the one training seed"`` with one); ``unit``
    ``"repeats"`` for the repeats of one training seed (the Bayesian table)."""
    if n == 1:
        one = unit[:-1]
        return f"in the one {one}" if k else f"not in the one {one}"
    return f"in {k} of {n} {unit}"


@dataclass(frozen=True)
class Claim:
    """``a`` strictly better than ``b`` on ``metric``, seed by seed (``strict=False``: at
    least as good, a tie holding).

    ``a_values``/``b_values`` are each training seed's values (seed order); a seed where
    either is missing (NaN) holds nothing.  ``holds[i]`` is the predicate in seed ``i``."""

    a: str
    b: str
    metric: str
    a_values: tuple[float, ...]
    b_values: tuple[float, ...]
    holds: tuple[bool, ...]
    pair: str | None = None
    model: str = ""
    variant_a: str = ""
    variant_b: str = ""
    strict: bool = True
    #: ``b``'s metric where it is another one on the same scale (C3LT's proximity to its
    #: reconstruction against the reconstruction's own proximity)
    metric_b: str = ""
    #: what the values are one per: "training seeds", or "repeats" of one seed
    unit: str = "training seeds"
    #: ``"better"``: ``a`` better than ``b`` (the default); ``"reaches"``: ``a`` at the
    #: threshold ``b`` or past it on the metric's worse side (``b`` a number, not a row:
    #: C3LT's proximity ratio at the redraw ratio or more)
    relation: str = "better"
    #: the chapter whose results the values are read from; ``""``: the page's own
    source: str = ""

    @property
    def k(self) -> int:
        return sum(self.holds)

    @property
    def n(self) -> int:
        return len(self.holds)

    @property
    def everywhere(self) -> bool:
        """Holds in every training seed: the only case a sentence states it plainly."""
        return self.n > 0 and self.k == self.n

    @property
    def nowhere(self) -> bool:
        """Holds in no training seed: the sentence states its negation."""
        return self.k == 0

    @property
    def seeds(self) -> str:
        return seeds_phrase(self.k, self.n, self.unit)

    def say(self, yes: str, no: str) -> str:
        """The claim in words: ``yes`` where it holds in every seed, ``no`` where it holds
        in none (each with the count), else ``yes`` qualified by the seeds it holds in."""
        if self.everywhere:
            return f"{yes} ({self.seeds})"
        if self.nowhere:
            return f"{no} ({seeds_phrase(self.n, self.n, self.unit)})"
        return f"{yes} {self.seeds} only"

    def __bool__(self) -> bool:          # `{% if c %}`: only a claim held in every seed
        return self.everywhere


def reaches(spec, value: float, threshold: float) -> bool:
    """``value`` at ``threshold`` or past it on ``spec``'s worse side (a lower-is-better
    ratio of at least the threshold); a missing or infinite value reaches nothing."""
    if not (math.isfinite(value) and math.isfinite(threshold)):
        return False
    return not spec.key(value) < spec.key(threshold)


def holds(spec, a: float, b: float, strict: bool = True) -> bool:
    """``a`` better than ``b`` in ``spec``'s direction (``strict=False``: at least as good,
    :meth:`~cflib.metrics.spec.MetricSpec.better`); a tie is no strict lead, a missing or
    infinite value holds nothing."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return spec.key(a) < spec.key(b) if strict else spec.better(a, b)


@dataclass(frozen=True)
class Top:
    """``rows`` (best first, by the means over the seeds) are the best ``len(rows)`` of
    their set: in each seed, each of them at least as good as every row left out (the
    pairwise claims).  ``k`` counts the seeds where every one of those claims holds."""

    rows: tuple[str, ...]
    claims: tuple[Claim, ...]

    @property
    def n(self) -> int:
        return max((c.n for c in self.claims), default=0)

    @property
    def k(self) -> int:
        return sum(all(c.holds[i] for c in self.claims) for i in range(self.n))

    @property
    def seeds(self) -> str:
        unit = self.claims[0].unit if self.claims else "training seeds"
        return seeds_phrase(self.k, self.n, unit)


@dataclass(frozen=True)
class Reached:
    """Per pair, where a row reaches a threshold (:meth:`Readings.reaches` claims, one a
    pair): the pairs where it does in every seed, those where it does in some, and the
    words for both (``"on 2 of 3 pairs in every training seed, and on 4->6 in 1 of 3
    training seeds only"``)."""

    claims: tuple[Claim, ...]

    @property
    def every(self) -> list[str]:
        return [c.pair for c in self.claims if c.everywhere]

    @property
    def some(self) -> list[Claim]:
        return [c for c in self.claims if not c.everywhere and not c.nowhere]

    @property
    def any(self) -> bool:
        return bool(self.every or self.some)

    def words(self) -> str:
        """``"on 2 of 3 pairs in every training seed, and on 4->6 in 1 of 3"`` (the unit
        said once), ``"on 4->6 in 1 of 3 training seeds only"`` where no pair reaches it
        in every seed, ``""`` where none reaches it at all."""
        if not self.claims:
            return ""
        n, first = len(self.claims), self.claims[0]
        every = (seeds_phrase(1, 1, first.unit) if first.n == 1
                 else f"in every {first.unit[:-1]}")
        parts = [f"on {len(self.every)} of {n} pairs {every}"] if self.every else []
        parts += [f"on {c.pair} in {c.k} of {c.n}" if parts else f"on {c.pair} {c.seeds} only"
                  for c in self.some]
        return ", and ".join(parts)
