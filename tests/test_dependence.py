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
