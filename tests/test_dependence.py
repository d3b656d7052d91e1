"""Query dependence: diversity and query dependence on constructed data (a method that
returns one fixed image, the identity, real images drawn at random)."""
from __future__ import annotations

import math

import torch

from cflib.metrics.dependence import diversity, query_dependence, spearman


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
