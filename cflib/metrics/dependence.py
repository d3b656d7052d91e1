"""Does a counterfactual depend on its query?  Two measures over all counterfactuals of a
pair (or of one target class), on every row of the tables.

A mapping that sends every query to one class prototype scores well on IM1, FID and KID
(a prototype looks like the class) and badly on proximity, and none of those metrics
can see it.  These two can:

- :func:`diversity`: the mean pairwise L1 distance (mean absolute pixel difference)
  between the counterfactuals of one target class, divided by the same between real
  test images of that class.  1: as varied as real data; near 0: one prototype.
- :func:`query_dependence`: the Spearman rank correlation between the pairwise
  distances of the queries and the pairwise distances of their counterfactuals, per
  target class (pairs with the same target), averaged over the classes weighted by
  their pairs.  1: counterfactuals as far apart as their queries are, in the same
  order; 0: the query is ignored (a constant output scores 0 by definition).  It
  measures order, not scale: a prototype plus a twentieth of the query scores 1 at a
  diversity near 0; the two are read together.

Reference rows give the range: ``Original Data`` (random real target images) has a
diversity near 1 and a query dependence near 0; ``Query (unchanged)`` a query
dependence of 1.
"""
from __future__ import annotations

import torch

from cflib.metrics.spec import MetricSpec, register

#: at most this many real images per class enter the denominator of the diversity
MAX_REAL = 500


def mean_pairwise_l1(x: torch.Tensor) -> float:
    """Mean absolute pixel difference over all unordered pairs of ``x`` (NaN below 2)."""
    n = len(x)
    if n < 2:
        return float("nan")
    flat = x.detach().flatten(1).float().cpu()
    d = torch.cdist(flat, flat, p=1) / flat.shape[1]
    iu = torch.triu_indices(n, n, 1)
    return d[iu[0], iu[1]].mean().item()


def real_spread(real: torch.Tensor) -> float:
    """The denominator of :func:`diversity` for one class: the mean pairwise L1 of its
    first :data:`MAX_REAL` real images."""
    return mean_pairwise_l1(real[:MAX_REAL])


def diversity(x_cf: torch.Tensor, target: torch.Tensor, real: dict,
              spread: dict | None = None) -> float:
    """The counterfactuals' mean pairwise L1 over the real images' (``real``: target class
    -> real test images of that class), per target class, averaged over the classes
    weighted by their number of counterfactuals (NaN when no class has two).
    ``spread``: target class -> :func:`real_spread` of its real images, where the caller
    scores many sets of counterfactuals against the same real images and computed it
    once (a class missing from it is computed here)."""
    target = target.cpu()
    spread = spread or {}
    num, weight = 0.0, 0
    for t in target.unique().tolist():
        sel = x_cf[(target == t).to(x_cf.device)]
        if len(sel) < 2:
            continue
        den = spread.get(int(t))
        if den is None:
            den = real_spread(real[int(t)])
        num += len(sel) * mean_pairwise_l1(sel) / den
        weight += len(sel)
    return num / weight if weight else float("nan")


def _ranks(v: torch.Tensor) -> torch.Tensor:
    """Ranks with ties averaged (as Spearman's rho needs)."""
    order = torch.argsort(v, stable=True)
    sorted_v = v[order]
    ranks = torch.empty_like(v, dtype=torch.float64)
    n = len(v)
    pos = torch.arange(n, dtype=torch.float64)
    # group equal values: boundaries where the sorted value changes
    change = torch.ones(n, dtype=torch.bool)
    change[1:] = sorted_v[1:] != sorted_v[:-1]
    starts = torch.nonzero(change).flatten().tolist() + [n]
    for a, b in zip(starts[:-1], starts[1:]):
        ranks[order[a:b]] = pos[a:b].mean()
    return ranks


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman's rank correlation of ``b`` with ``a``: NaN with fewer than three values or
    a constant ``a`` (nothing to follow); 0 when ``b`` is constant and ``a`` is not (the
    output ignores what varies)."""
    if len(a) < 3:
        return float("nan")
    ra, rb = _ranks(a.double()), _ranks(b.double())
    ra, rb = ra - ra.mean(), rb - rb.mean()
    if ra.norm().item() == 0:
        return float("nan")
    if rb.norm().item() == 0:
        return 0.0
    return float((ra @ rb).item() / (ra.norm() * rb.norm()).item())


def query_dependence(x: torch.Tensor, x_cf: torch.Tensor, target: torch.Tensor) -> float:
    """Spearman's rho between the queries' and the counterfactuals' pairwise L1 distances,
    over the pairs of queries with the same target: per target class, averaged over the
    classes weighted by their number of pairs (NaN when no class has three pairs).

    Per class, not pooled: pooling the pairs of several targets into one correlation
    makes the classes' different spreads correlate (real target images drawn at random
    score well above 0 when pooled), so the measure would read class-level differences
    as dependence on the query.  With one target (a C3LT pair) it is the correlation of
    that target's pairs."""
    target = target.cpu()
    rhos, weights = [], []
    for t in target.unique().tolist():
        idx = torch.nonzero(target == t).flatten()
        if len(idx) < 2:
            continue
        q = x[idx.to(x.device)].detach().flatten(1).float().cpu()
        c = x_cf[idx.to(x_cf.device)].detach().flatten(1).float().cpu()
        iu = torch.triu_indices(len(idx), len(idx), 1)
        rho = spearman(torch.cdist(q, q, p=1)[iu[0], iu[1]], torch.cdist(c, c, p=1)[iu[0], iu[1]])
        if rho == rho:                     # NaN: fewer than three pairs, or no spread
            rhos.append(rho)
            weights.append(len(iu[0]))
    if not rhos:
        return float("nan")
    # the weighted mean written from the first class's value: one class's correlation
    # comes back exactly (a product and a division by its weight would round it)
    first = rhos[0]
    return first + sum(w * (r - first) for w, r in zip(weights, rhos)) / sum(weights)


DIVERSITY = MetricSpec(
    "Diversity",
    lambda c: diversity(c.cf.x_cf, c.cf.target, c.real_by_class, getattr(c, "real_spread", None)),
    True,
    "mean pairwise L1 distance between the counterfactuals of one target class over the "
    "same between real test images of that class (1: as varied as real data; near 0: one "
    "prototype for every query)")
QUERY_DEPENDENCE = MetricSpec(
    "Query_dependence", lambda c: query_dependence(c.cf.x, c.cf.x_cf, c.cf.target), True,
    "Spearman's rank correlation between the pairwise distances of the queries and of "
    "their counterfactuals (1: the counterfactuals keep the queries' differences; 0: the "
    "query is ignored)")

register(DIVERSITY, QUERY_DEPENDENCE)
