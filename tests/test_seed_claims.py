"""What a page quotes under a claim over training seeds: the seed means, never one seed;
numbers that no rounding turns into the claim; set-level descriptions never ranked."""
import math

import pandas as pd
import pytest

from cflib.bench.results import MEAN_OVER_PAIRS
from cflib.book.report.discussion import Readings, f, pct
from tests.fixtures.sweeps import results_with_seed


def test_no_rounding_prints_a_share_as_all_or_none():
    assert [pct(0.9967, 0), pct(0.998, 0), pct(0.99999, 0)] == ["99.7 %", "99.8 %", "99.999 %"]
    assert [pct(1.0, 0), pct(0.0, 0), pct(0.0001, 0), pct(0.89, 0)] == [
        "100 %", "0 %", "0.01 %", "89 %"]
    # a percentage rounds the share as a table rounds it: 0.8455 is 84.6 % beside 0.846
    assert (pct(0.8455), f(0.8455)) == ("84.6 %", "0.846")
    assert [f(0.9967, 2), f(1.047, 2), f(-0.9996, 2), f(1.0, 2), f(0.0, 2)] == [
        "0.997", "1.05", "-0.9996", "1", "0"]
    assert pct(float("nan")) == "–" and f(None) == "–"


def _frame(values: dict, seed: int = 0) -> pd.DataFrame:
    """A C3LT-shaped results table: {(method, metric): value}, as means over pairs."""
    return pd.DataFrame([{"dataset": "mnist", "method": m, "model": "", "variant": "",
                          "pair": "", "aggregate": MEAN_OVER_PAIRS, "metric": k, "value": v,
                          "train_seed": seed, "data_seed": 0, "profile": "smoke"}
                         for (m, k), v in values.items()])


def test_a_reading_under_several_seeds_is_the_seed_mean_not_seed_0():
    # seed 0 alone: the SmallCNN judge grants 0.62, twice the others' 0.30; seed 1 grants
    # 0.62 against 0.40: over the seeds (0.35) it is not twice, so no claim
    def seed(k, far):
        return _frame({("Adv. Attack", "Validity"): 0.99,
                       ("Adv. Attack", "Validity (SmallCNN judge)"): 0.62,
                       ("Adv. Attack", "Validity (ResNet judge)"): far,
                       ("Adv. Attack", "Validity (MLP judge)"): far}, k)
    alone = Readings(seed(0, 0.30), "c3lt", "mnist")
    both = Readings(seed(0, 0.30), "c3lt", "mnist", per_seed={0: seed(0, 0.30),
                                                               1: seed(1, 0.40)})
    assert alone.like_explained(["Adv. Attack"]) == ["Adv. Attack"]
    assert both.like_explained(["Adv. Attack"]) == []
    assert both.judge_gap("Adv. Attack") == pytest.approx(0.99 - 0.35)
    assert alone.judge_gap("Adv. Attack") == pytest.approx(0.99 - 0.30)
    assert both.means["value"].tolist() == pytest.approx([0.99, 0.62, 0.35, 0.35])


def test_order_and_leads_read_the_seed_means_in_the_metrics_direction():
    s0 = _frame({("C3LT", "FID"): 27.0, ("ExpGAN", "FID"): 28.0,
                 ("C3LT", "IM1"): 0.6, ("ExpGAN", "IM1"): 0.9})
    s1 = _frame({("C3LT", "FID"): 29.0, ("ExpGAN", "FID"): 26.0,
                 ("C3LT", "IM1"): 0.7, ("ExpGAN", "IM1"): 0.8}, 1)
    r = Readings(s0, "c3lt", "mnist", per_seed={0: s0, 1: s1})
    assert r.order("FID", ["C3LT", "ExpGAN"]) == ["ExpGAN", "C3LT"]      # 27.0 < 28.0
    assert r.leads("C3LT", ["IM1", "FID"], ["ExpGAN"]) == ["IM1"]
    assert Readings(s0, "c3lt", "mnist").leads("C3LT", ["IM1", "FID"], ["ExpGAN"]) == [
        "IM1", "FID"]                                                     # seed 0 alone


def test_the_checks_of_several_seeds_hold_only_where_they_hold_in_every_seed(tmp_path):
    """A second training seed in which C3LT is worst on every metric: each check about
    C3LT that holds in seed 0 now holds in 1 of 2 seeds, and is no longer counted as
    holding; the Kendall tau is that of the seed means."""
    from cflib.bench.results import table_means
    from cflib.book.report.discussion import readings_for
    from cflib.book.report.tables import ranking_agreement
    from cflib.book.spread import mean_of_seeds

    def c3lt_worst(other):
        c3lt = other["method"] == "C3LT"
        other.loc[c3lt, "value"] = [-1e9 if k in ("Validity", "AUPC_target", "COUT")
                                    else 1e9 for k in other.loc[c3lt, "metric"]]

    res = results_with_seed(tmp_path, 7, c3lt_worst)
    r = readings_for("mnist_eval", res)
    alone = Readings(r.per_seed[0], "c3lt", "mnist")
    assert r.n_seeds == 2
    ch, ch0 = r.checks(), alone.checks()
    c3lt = ch["method"].eq("C3LT") & ch0.set_index(ch.index)["verdict"].eq("holds")
    assert c3lt.any()
    assert set(ch.loc[c3lt, "verdict"]) == {"holds in 1 of 2 seeds"}
    assert (ch["verdict"] == "holds").sum() < (ch0["verdict"] == "holds").sum()
    means = mean_of_seeds(r.per_seed)
    t = ranking_agreement(table_means(means[means["variant"] == ""]), "c3lt", "mnist", ["IM1"])
    assert r.tau("IM1") == pytest.approx(float(t.loc["IM1", "Kendall tau"]))
    assert not math.isclose(r.tau("IM1"), alone.tau("IM1"))


def test_diversity_and_query_dependence_are_never_ranked():
    from cflib.book.report.tables import rank_methods, rank_summary
    df = pd.concat([_frame({("Adv. Attack", "Diversity"): 1.46, ("C3LT", "Diversity"): 0.6,
                            ("Adv. Attack", "Query_dependence"): 0.9,
                            ("C3LT", "Query_dependence"): 0.6,
                            ("Adv. Attack", "Proximity"): 0.3, ("C3LT", "Proximity"): 0.34})])
    ranks = rank_methods({"MNIST": df}, ["Diversity", "Query_dependence", "Proximity"])["MNIST"]
    assert list(ranks.columns) == ["Proximity"]
    assert rank_summary({"MNIST": ranks})["MNIST"].to_dict() == {"Adv. Attack": 1.0, "C3LT": 2.0}


def test_a_variants_time_is_never_shown_under_the_method_it_varies():
    from cflib.book.report.tables import timing_beside_papers
    df = _frame({("CEM", "Seconds_per_CF"): 1.8, ("C3LT", "Seconds_per_CF"): 0.006})
    kappa = df[df["method"] == "CEM"].assign(variant="kappa=0", value=2.0)
    out = timing_beside_papers({"MNIST": pd.concat([df, kappa], ignore_index=True)})
    assert out["MNIST (ours)"].to_dict() == {"CEM": 1.8, "C3LT": 0.006, "CEM [kappa=0]": 2.0}
