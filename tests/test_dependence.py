"""Query dependence: diversity and query dependence on constructed data (a method that
returns one fixed image, the identity, real images drawn at random)."""
from __future__ import annotations

import math

import torch

from cflib.metrics.dependence import MAX_REAL, diversity, query_dependence, real_spread, spearman


def _images(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 28, 28, generator=g) * 2 - 1


def test_one_fixed_image_has_diversity_0_and_query_dependence_0():
    q, real = _images(40, 0), _images(60, 1)
    t = torch.full((40,), 9)
    fixed = real[:1].expand(40, -1, -1, -1).clone()
    assert diversity(fixed, t, {9: real}) == 0.0
    assert query_dependence(q, fixed, t) == 0.0


def test_the_identity_on_real_images_has_diversity_1_and_query_dependence_1():
    real = _images(50, 2)
    t = torch.full((50,), 3)
    assert math.isclose(diversity(real, t, {3: real}), 1.0, rel_tol=1e-6)
    assert math.isclose(query_dependence(real, real, t), 1.0, rel_tol=1e-9)


def test_real_images_unrelated_to_the_queries_are_query_independent():
    q, cf, real = _images(60, 3), _images(60, 4), _images(60, 5)
    t = torch.full((60,), 1)
    assert abs(query_dependence(q, cf, t)) < 0.1
    assert 0.9 < diversity(cf, t, {1: real}) < 1.1


def test_only_pairs_with_the_same_target_are_compared_and_ties_are_averaged():
    q = _images(6, 6)
    t = torch.tensor([0, 0, 0, 1, 1, 1])
    # the counterfactuals of target 1 are the queries of target 0 and vice versa: within
    # each target the distances still follow, across targets nothing is compared
    cf = torch.cat([q[3:], q[:3]])
    assert query_dependence(q, cf, t) < 1.0
    assert math.isclose(spearman(torch.tensor([1.0, 1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0])),
                        math.sqrt(3) / 2, rel_tol=1e-9)


def test_targets_of_different_spread_do_not_make_random_images_query_dependent():
    """Queries and counterfactuals of one target share a spread that differs between the
    targets (as query classes and target classes do on the Bayesian table); each
    counterfactual is drawn apart from its query.  Pooled into one correlation the
    targets' spreads correlate (rho well above 0); per target there is nothing to follow."""
    scales = [0.05, 0.2, 0.6, 1.0]
    q = torch.cat([s * _images(20, 10 + k) for k, s in enumerate(scales)])
    cf = torch.cat([s * _images(20, 30 + k) for k, s in enumerate(scales)])
    t = torch.arange(4).repeat_interleave(20)

    def pooled():
        dq, dc = [], []
        for c in range(4):
            a, b = q[t == c].flatten(1), cf[t == c].flatten(1)
            iu = torch.triu_indices(20, 20, 1)
            dq.append(torch.cdist(a, a, p=1)[iu[0], iu[1]])
            dc.append(torch.cdist(b, b, p=1)[iu[0], iu[1]])
        return spearman(torch.cat(dq), torch.cat(dc))

    assert pooled() > 0.5
    assert abs(query_dependence(q, cf, t)) < 0.1


def test_one_target_is_that_targets_correlation_and_targets_weigh_by_their_pairs():
    q, cf = _images(12, 40), _images(12, 41)
    one = torch.full((12,), 5)
    iu = torch.triu_indices(12, 12, 1)
    d = lambda x: torch.cdist(x.flatten(1), x.flatten(1), p=1)[iu[0], iu[1]]  # noqa: E731
    assert query_dependence(q, cf, one) == spearman(d(q), d(cf))
    # a target of 8 queries (28 pairs) and one of 4 (6 pairs): the identity on the first,
    # a fixed image on the second -> (28 * 1 + 6 * 0) / 34
    t = torch.tensor([0] * 8 + [1] * 4)
    out = torch.cat([q[:8], q[8:9].expand(4, -1, -1, -1)])
    assert math.isclose(query_dependence(q, out, t), 28 / 34, rel_tol=1e-9)


def test_query_dependence_sees_order_not_scale():
    """A prototype plus a twentieth of the query keeps the queries' order (1) while its
    diversity is near 0: the two are read together."""
    q, real = _images(30, 50), _images(60, 51)
    t = torch.full((30,), 2)
    cf = real[:1] + 0.05 * q
    assert math.isclose(query_dependence(q, cf, t), 1.0, rel_tol=1e-9)
    assert diversity(cf, t, {2: real}) < 0.1


def test_the_committed_reference_rows_read_as_the_protocol_says():
    """On every table that reports it, random real target images (`Original Data`) have a
    query dependence within 0.1 of 0, and the unchanged query has 1 (the committed results;
    the function itself is tested above)."""
    import pandas as pd

    from cflib.bench.data import PROJECT_ROOT
    from cflib.bench.results import MEAN_OVER_PAIRS

    seen = 0
    for name in ("mnist_eval", "fashion_mnist_test", "mnist_bayesian"):
        f = PROJECT_ROOT / "results" / f"{name}.csv"
        if not f.exists():
            continue
        d = pd.read_csv(f, keep_default_na=False)
        d = d[(d["metric"] == "Query_dependence") & (d["variant"] == "")]
        if (d["aggregate"] == MEAN_OVER_PAIRS).any():
            d = d[d["aggregate"] == MEAN_OVER_PAIRS]
        means = pd.to_numeric(d["value"], errors="coerce").groupby([d["method"], d["model"]]).mean()
        for model in set(d["model"]):
            assert abs(means[("Original Data", model)]) <= 0.1, (name, model)
            assert abs(means[("Query (unchanged)", model)] - 1) < 1e-9, (name, model)
            seen += 1
    assert seen >= 2


def test_a_spread_computed_once_gives_the_same_bits_and_a_missing_class_is_computed():
    """A table gives the real images' spread computed once per pair: the diversity must be
    the very value it computes itself, only past MAX_REAL images (never used), and a
    target absent from the spread computed as before, not read as 0 or skipped."""
    real = {2: _images(MAX_REAL + 40, 7), 5: _images(80, 8)}
    cf = _images(30, 9)
    t = torch.tensor([2] * 18 + [5] * 12)
    own = diversity(cf, t, real)
    assert diversity(cf, t, real, {2: real_spread(real[2])}) == own
    assert diversity(cf, t, real, {c: real_spread(x) for c, x in real.items()}) == own
    # the images past MAX_REAL never enter the denominator
    assert real_spread(real[2]) == real_spread(real[2][:MAX_REAL])
    # a wrong spread is used as given (the caller's record), so it must move the value
    assert diversity(cf, t, real, {2: 2 * real_spread(real[2])}) != own


def test_the_c3lt_table_computes_the_diversity_denominator_once_per_pair(monkeypatch):
    """Every method of a pair shares one reference: its spread comes from the pair's
    context, and a context without it computes the same value itself."""
    from cflib.bench.tables.c3lt import PairContext
    from cflib.explainers import Counterfactuals
    from cflib.metrics import DIVERSITY
    from cflib.metrics.distribution import ImageFeatures

    real = _images(120, 10)
    x, x_cf = _images(20, 11), _images(20, 12)
    cf = Counterfactuals(x=x, x_cf=x_cf, target=torch.full((20,), 4),
                         pred=torch.zeros(20, dtype=torch.long), pred_cf=torch.full((20,), 4),
                         success=torch.ones(20, dtype=torch.bool), seconds=0.0, method="m")
    ref = ImageFeatures(real, (), torch.nn.Identity())
    given = PairContext(cf, 1, 4, None, ref, reference_spread=real_spread(real))
    alone = PairContext(cf, 1, 4, None, ref)
    calls = []
    import cflib.metrics.dependence as dep
    monkeypatch.setattr(dep, "mean_pairwise_l1",
                        lambda v, f=dep.mean_pairwise_l1: calls.append(len(v)) or f(v))
    assert DIVERSITY.fn(given) == DIVERSITY.fn(alone)
    assert calls == [20, 120, 20]    # the reference only where not given
