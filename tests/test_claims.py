"""Claims (cflib.book.report.claims): a comparative sentence is a predicate evaluated in
each training seed and worded by the seeds it holds in; tested on values built so that
the means say one thing and the seeds another, and on every page's ledger against the
committed results files, read here on their own (csv module, no cflib reader)."""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from cflib.book.report.claims import Claim, holds, seeds_phrase
from cflib.book.report.discussion import Readings, discussions, readings_for, render, template_path
from cflib.metrics.spec import get_spec

ROOT = Path(__file__).resolve().parents[1]


def _claim(holds, a=(0.1, 0.1, 0.1), b=(0.2, 0.2, 0.2)):
    return Claim("A", "B", "Proximity", tuple(a), tuple(b), tuple(holds))


def test_a_claim_is_worded_by_the_seeds_it_holds_in():
    assert _claim([True] * 3).say("closer", "no closer") == "closer (in 3 of 3 training seeds)"
    assert _claim([True, True, False]).say("closer", "no closer") == \
        "closer in 2 of 3 training seeds only"
    assert _claim([False] * 3).say("closer", "no closer") == "no closer (in 3 of 3 training seeds)"
    assert bool(_claim([True, True, False])) is False        # `{% if c %}`: every seed only
    assert bool(_claim([True] * 3)) is True
    assert _claim([True]).seeds == "in the one training seed"
    assert seeds_phrase(0, 1) == "not in the one training seed"


def test_the_relations_never_hold_on_a_tie_or_a_missing_value_in_their_sense():
    prox, val = get_spec("Proximity"), get_spec("Validity")     # lower / higher is better
    assert holds(prox, 0.1, 0.2) and not holds(prox, 0.2, 0.1)
    assert holds(val, 0.9, 0.8) and not holds(val, 0.8, 0.9)
    assert not holds(prox, 0.1, 0.1)                            # a tie is no lead
    assert holds(prox, 0.1, 0.1, strict=False)
    assert not holds(prox, math.nan, 0.2) and not holds(prox, 0.1, math.nan, strict=False)
    assert not holds(prox, 0.1, math.inf, strict=False)         # infinite: missing, too


def _frame(seed, a, b):
    rows = []
    for method, value in (("A", a), ("B", b)):
        rows.append({"dataset": "mnist", "method": method, "model": "", "variant": "",
                     "pair": "", "aggregate": "mean over pairs", "metric": "Proximity",
                     "value": value, "train_seed": seed, "data_seed": 0,
                     "profile": "smoke"})
    return pd.DataFrame(rows)


def test_a_claim_reads_the_seeds_where_the_means_would_mislead():
    """A is closer on the mean over seeds (0.1 + 0.1 + 0.5 < 3 x 0.3) but in 2 of the 3
    seeds only: the claim says so, and its values are each seed's."""
    per_seed = {0: _frame(0, 0.1, 0.3), 1: _frame(1, 0.1, 0.3), 2: _frame(2, 0.5, 0.3)}
    r = Readings(per_seed[0], "c3lt", "mnist", per_seed)
    assert r.m("A", "Proximity") < r.m("B", "Proximity")        # what the means say
    c = r.claim("A", "B", "Proximity")
    assert (c.k, c.n) == (2, 3) and not c
    assert c.a_values == (0.1, 0.1, 0.5) and c.b_values == (0.3, 0.3, 0.3)
    assert r.claims == [c]
    # a lead needs every seed: A leads nowhere, though first on the means
    assert r.leads("A", ["Proximity"], ["B"]) == []
    assert r.order("Proximity", ["A", "B"])[0] == "A"


# -- every page's claims against the committed results files --------------------------
def _csv_value(path: Path, method, metric, pair, variant, model, repeat=None) -> float:
    """One seed's value as a reader of the CSV would take it: the row of the mean over
    pairs (else the one unaggregated row) or the pair's own row; repeats averaged (or
    the one ``repeat``)."""
    rows = [r for r in csv.DictReader(path.open())
            if r["method"] == method and r["metric"] == metric and r["variant"] == variant
            and r["model"] == model and (repeat is None or r.get("repeat") == str(repeat))]
    if pair is None:
        picked = [r for r in rows if r["aggregate"] == "mean over pairs"] or \
            [r for r in rows if r["aggregate"] == ""]
    else:
        picked = [r for r in rows if r["pair"] == pair and r["aggregate"] == ""]
    if picked and "repeat" in picked[0] and any(float(r["repeat"] or -1) >= 0 for r in picked):
        picked = [r for r in picked if float(r["repeat"] or -1) >= 0]
    vals = [float(r["value"]) for r in picked if r["value"] not in ("", "nan")]
    return sum(vals) / len(vals) if vals else math.nan


def _seed_files(chapter: str, name: str) -> list[Path]:
    own = ROOT / "results" / f"{name}.csv"
    sweep = ROOT / "results" / "sweep" / name / "standard"
    return [own, *sorted(sweep.glob(f"seed*/{name}.csv"))] if sweep.exists() else [own]


@pytest.mark.parametrize("chapter", sorted(discussions()))
def test_every_claim_of_a_rendered_page_holds_in_the_seeds_it_says(chapter):
    _, _, name, _ = discussions()[chapter]
    readings = readings_for(chapter, ROOT / "results")
    text = render(template_path(chapter).read_text(), readings)
    files = _seed_files(chapter, name)
    if readings.n_seeds > 1:
        assert len(files) == readings.n_seeds, files
    for c in readings.claims:
        spec = get_spec(c.metric)
        seed_files = _seed_files(c.source, c.source) if c.source else files
        if c.source:                       # another chapter's results (cross_dataset)
            assert c.n == len(seed_files), (c, seed_files)
        for i in range(c.n):
            if c.unit == "repeats":         # one seed's repeats: the rows of repeat i
                path, rep = seed_files[0], i
            else:
                path, rep = seed_files[i], None
            a = _csv_value(path, c.a, c.metric, c.pair, c.variant_a, c.model, rep)
            assert a == pytest.approx(c.a_values[i], nan_ok=True, rel=1e-9), (c, path)
            if c.relation == "reaches":     # b is a threshold, not a row
                b = float(c.b)
                assert c.b_values[i] == b
                held = not spec.key(a) < spec.key(b)
            else:
                assert c.relation == "better", c
                b = _csv_value(path, c.b, c.metric_b or c.metric, c.pair, c.variant_b, c.model,
                               rep)
                assert b == pytest.approx(c.b_values[i], nan_ok=True, rel=1e-9), (c, path)
                held = (spec.key(a) < spec.key(b)) if c.strict else (spec.key(a) <= spec.key(b))
            assert c.holds[i] == (held and math.isfinite(a) and math.isfinite(b)), (c, path)
    # a block's sentence never runs into the next bullet ("...seeds).- **What")
    assert not re.search(r"[.)]- \*\*", text), re.search(r".{80}[.)]- \*\*", text)
    if chapter == "mnist_bayesian":
        assert any(c.unit == "repeats" for c in readings.claims)
        assert all(math.isfinite(x) for c in readings.claims for x in c.a_values + c.b_values)
    if chapter in ("mnist_eval", "fashion_mnist_test"):
        assert len(readings.claims) >= 10
        assert all(math.isfinite(x) for c in readings.claims for x in c.a_values + c.b_values)
        # a plain sentence carries its count: no claim is said without "k of n"
        assert "closer counterfactuals than C3LT's one mapping finds (in " in text or \
            "counterfactuals than C3LT's one mapping finds in " in text


def test_a_redraw_is_decided_pair_by_pair_and_seed_by_seed():
    """C3LT's ratio to a real target image on pair "4->6" is 0.56, 0.88, 0.59 over three
    seeds (the mean 0.68 is below the 0.8 redraw ratio: the means call it an edit); in
    seed 1 it is a redraw, and the words say so.  "0->2" reaches it in every seed, "7->9"
    in none; exactly at the ratio is a redraw; a missing seed reaches nothing."""
    from cflib.bench.tables.registry import specs_of

    ratio = specs_of("c3lt")[0].redraw_ratio
    assert ratio == 0.8

    def frame(seed, vals):
        return pd.DataFrame([{"dataset": "fashion_mnist", "method": "C3LT", "model": "",
                              "variant": "", "pair": p, "aggregate": "",
                              "metric": "Proximity_vs_real", "value": v, "train_seed": seed,
                              "data_seed": 0, "profile": "smoke"}
                             for p, v in zip(("0->2", "7->9", "4->6"), vals)])
    per_seed = {0: frame(0, (1.05, 0.5, 0.56)), 1: frame(1, (0.8, 0.6, 0.88)),
                2: frame(2, (1.08, math.nan, 0.59))}
    r = Readings(per_seed[0], "c3lt", "fashion_mnist", per_seed)
    assert r.m("C3LT", "Proximity_vs_real", pair="4->6") < ratio     # what the means say
    rd = r.redraws("C3LT")
    assert rd.every == ["0->2"] and [c.pair for c in rd.some] == ["4->6"] and rd.any
    assert rd.words() == "on 1 of 3 pairs in every training seed, and on 4->6 in 1 of 3"
    some_only = Readings(per_seed[0], "c3lt", "fashion_mnist",
                         {s: df[df["pair"] == "4->6"] for s, df in per_seed.items()})
    assert some_only.redraws("C3LT").words() == "on 4->6 in 1 of 3 training seeds only"
    seven = next(c for c in rd.claims if c.pair == "7->9")
    assert seven.nowhere and seven.holds == (False, False, False)    # NaN reaches nothing
    assert len(r.claims) == 3 and all(c.relation == "reaches" for c in r.claims)
    one = Readings(per_seed[0], "c3lt", "fashion_mnist")
    assert one.redraws("C3LT").words() == "on 1 of 3 pairs in the one training seed"
    none = Readings(frame(0, (0.1, 0.1, 0.1)), "c3lt", "fashion_mnist")
    assert not none.redraws("C3LT").any and none.redraws("C3LT").words() == ""


def test_the_best_rows_say_in_how_many_seeds_they_are_the_best():
    """C is third on the means but fourth in seed 2: the top three hold in 2 of 3 seeds."""
    def frame(seed, vals):
        return pd.concat([_frame(seed, *vals[:2]).assign(method=["A", "B"]),
                          _frame(seed, *vals[2:]).assign(method=["C", "D"])])
    per_seed = {0: frame(0, (0.1, 0.2, 0.3, 0.4)), 1: frame(1, (0.1, 0.2, 0.3, 0.4)),
                2: frame(2, (0.1, 0.2, 0.35, 0.32))}
    r = Readings(per_seed[0], "c3lt", "mnist", per_seed)
    t = r.top("Proximity", ["D", "C", "B", "A"], 3)
    assert t.rows == ("A", "B", "C") and (t.k, t.n) == (2, 3)
    assert t.seeds == "in 2 of 3 training seeds" and len(r.claims) == 3


def test_the_best_mean_rank_says_in_how_many_seeds_it_is_the_best():
    """cross_dataset's "best mean rank": A is ahead on the seed means but B in seed 2:
    A is the best in 2 of 3 training seeds, B in 1, a reference row never counts."""
    per_seed = {0: _frame(0, 0.1, 0.3), 1: _frame(1, 0.1, 0.3), 2: _frame(2, 0.5, 0.3)}
    for s, df in per_seed.items():     # the paper's rows; a reference row, better than both
        df = df.replace({"method": {"A": "CEM", "B": "CVE"}})
        ref = df.iloc[:1].assign(method="Original Data", value=0.0)
        per_seed[s] = pd.concat([df, ref], ignore_index=True)
    r = Readings(per_seed[0], "c3lt", "mnist", None,
                 {"mnist_eval": per_seed[0], "mnist_eval per seed": per_seed})
    assert r.best_rank_seeds("CEM") == {"MNIST": "in 2 of 3 training seeds"}
    assert r.best_rank_seeds("CVE") == {"MNIST": "in 1 of 3 training seeds"}


def test_a_time_is_quoted_from_the_pages_own_run_not_averaged_over_the_seeds_runs():
    """Times belong to their runs: ``v`` reads the page's own run (here training seed 1 of
    three, built with another time than the others), and the CEM sentence of the C3LT
    template quotes its time through ``v``, not the seeds' mean ``m``."""
    per_seed = {0: _frame(0, 3.0, 1.0), 1: _frame(1, 0.7, 1.0), 2: _frame(2, 2.0, 1.0)}
    r = Readings(per_seed[1], "c3lt", "mnist", per_seed)
    assert r.v("A", "Proximity") == 0.7
    assert r.m("A", "Proximity") == pytest.approx(1.9)
    assert render('{{ v("A", "Proximity") }} here', r) == "0.7 here"
    template = template_path("c3lt_table").read_text()
    assert 'v("CEM", "Seconds_per_CF")' in template
    assert not re.search(r'\bm\("[^"]+", "Seconds_per_CF"', template)   # no time is a mean
