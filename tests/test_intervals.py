"""Intervals before ranks (issue 44, item 2): :mod:`cflib.bench.intervals` on tiny made-up
values."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cflib.bench.intervals import bootstrap, repeat_intervals, separated_ranks


def values(rows):
    """Per-query values: rows of (pair, method, metric, [values])."""
    return pd.DataFrame([{"pair": p, "method": m, "metric": k, "query": i, "value": v}
                         for p, m, k, vs in rows for i, v in enumerate(vs)])


def test_the_bootstrap_interval_holds_the_mean_over_pairs_and_shrinks_with_the_spread():
    iv = bootstrap(values([("4->9", "A", "Proximity", [0.1, 0.2, 0.3, 0.4]),
                           ("3->8", "A", "Proximity", [0.5, 0.5, 0.5, 0.5]),
                           ("4->9", "B", "Proximity", [0.2] * 4)])).set_index("method")
    a, b = iv.loc["A"], iv.loc["B"]
    assert a["value"] == pytest.approx((0.25 + 0.5) / 2)       # the mean over the pairs
    assert a["lo"] < a["value"] < a["hi"] and a["n"] == 8 and a["pairs"] == 2
    # half of the mean comes from a pair with no spread: at most half the first pair's range
    assert a["hi"] - a["lo"] <= (0.4 - 0.1) / 2 + 1e-12
    assert b["lo"] == b["hi"] == pytest.approx(0.2)             # no spread, no width
    assert set(iv["basis"]) == {"queries"}


def test_the_bootstrap_is_seeded_and_checks_its_arguments():
    v = values([("4->9", "A", "IM1", list(np.linspace(0, 1, 12)))])
    pd.testing.assert_frame_equal(bootstrap(v), bootstrap(v))
    with pytest.raises(ValueError, match="level must lie in"):
        bootstrap(v, level=1.5)
    with pytest.raises(ValueError, match="n_boot be at least 100"):
        bootstrap(v, n_boot=10)


def test_the_repeats_interval_is_a_t_interval_and_absent_for_one_repeat():
    s = pd.DataFrame([{"method": "A", "metric": "IM1", "mean": 1.0, "std": 0.3, "n": 3},
                      {"method": "B", "metric": "IM1", "mean": 2.0, "std": math.nan, "n": 1}])
    iv = repeat_intervals(s).set_index("method")
    half = 4.303 * 0.3 / math.sqrt(3)                          # t(0.975, 2 df)
    assert iv.loc["A", "lo"] == pytest.approx(1 - half) and iv.loc["A", "hi"] == pytest.approx(1 + half)
    assert math.isnan(iv.loc["B", "lo"]) and set(iv["basis"]) == {"repeats"}


def test_ranks_follow_each_metrics_direction_and_only_where_intervals_separate():
    wide = pd.DataFrame({"Proximity": [0.1, 0.12, 0.5], "Validity": [0.9, 0.5, 0.52],
                         "FID": [1.0, 2.0, 3.0]}, index=["A", "B", "C"])
    iv = pd.DataFrame([
        ("A", "Proximity", 0.08, 0.13), ("B", "Proximity", 0.11, 0.14),
        ("C", "Proximity", 0.45, 0.55), ("A", "Validity", 0.85, 0.95),
        ("B", "Validity", 0.4, 0.6), ("C", "Validity", 0.45, 0.6)],
        columns=["method", "metric", "lo", "hi"])
    best, worst, ties = separated_ranks(wide, iv, ["Proximity", "Validity", "FID"])
    assert "FID" not in best.columns                         # set-level: not ranked
    # lower is better on proximity: A and B overlap (ranks 1-2 each), C is third alone
    assert best["Proximity"].tolist() == [1, 1, 3] and worst["Proximity"].tolist() == [2, 2, 3]
    assert ties.loc["A", "Proximity"] == ["B"] and ties.loc["C", "Proximity"] == []
    # higher is better on validity: A first alone; B and C overlap
    assert best["Validity"].tolist() == [1, 2, 2] and worst["Validity"].tolist() == [1, 3, 3]
    # a row without an interval counts as its value: C's proximity point 0.5 outside A's
    best, _, _ = separated_ranks(wide, iv[iv["method"] != "C"], ["Proximity"])
    assert best.loc["C", "Proximity"] == 3
