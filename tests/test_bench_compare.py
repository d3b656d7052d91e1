"""`cflib bench` and `cflib.bench.compare`: a user's method through a table's protocol,
beside the book's rows (issue 31, items 1, 2 and 6).

The toy explainer (tests/fixtures/toy.py: a fixed step towards the mean training image
of the target class, fitted per pair) goes through the command at the smoke profile and
lands beside the reference rows on the page; a plain function goes through the Python
call; the book's rows stand beside a run only where their reference rows equal the
run's; every bad input is a clear error before any network trains, and nothing under the
committed results/ or book/ changes.  The networks are trained once, in a cache folder
shared by this module's tests.
"""
import hashlib
import html
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch

from cflib.bench import catalog
from cflib.bench.compare import (
    TABLES,
    Comparison,
    MethodError,
    TableComparison,
    book_rows,
    compare,
)
from cflib.bench.data import PROJECT_ROOT
from cflib.bench.profiles import get_profile
from cflib.bench.results import COLUMNS, read_results
from cflib.bench.seeds import Seeds
from cflib.bench.tables.c3lt import C3LT_METRICS
from cflib.book.cli import main
from cflib.book.report import bench_page, fmt
from cflib.explainers import Explainer
from cflib.metrics.spec import get_spec
from tests.fixtures import toy

pytestmark = pytest.mark.data

COMMITTED = [PROJECT_ROOT / "results", PROJECT_ROOT / "book"]


def digests() -> dict[str, str]:
    """sha256 of every file under the committed results/ and book/."""
    return {str(f.relative_to(PROJECT_ROOT)): hashlib.sha256(f.read_bytes()).hexdigest()
            for d in COMMITTED for f in sorted(d.rglob("*")) if f.is_file()}


@pytest.fixture
def untouched():
    """Fails the test if any committed file under results/ or book/ changed."""
    before = digests()
    yield
    assert digests() == before, "a committed file under results/ or book/ changed"


@pytest.fixture(scope="module")
def bench_cache(tmp_path_factory):
    """One weight cache for the module: the smoke networks are trained once."""
    folder = tmp_path_factory.mktemp("bench-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CFLIB_CACHE", str(folder))
        yield folder


def page_text(path) -> str:
    """The page's text: no style, no images, no markup."""
    t = path.read_text()
    t = re.sub(r"<style>.*?</style>", "", t, flags=re.S)
    t = re.sub(r"<br\s*/?>|</(?:tr|li|p|caption|h1|h2|h3)>", "\n", t)
    return html.unescape(re.sub(r"<[^>]+>", " ", t))


def table_row(page: str, method: str) -> str:
    """The text of a method's first row in the page's tables."""
    m = re.search(rf"<tr><th>{re.escape(html.escape(method))}</th>(.*?)</tr>", page, re.S)
    assert m, f"no row {method!r} on the page"
    return html.unescape(re.sub(r"<[^>]+>", " ", m.group(1)))


# -- the toy explainer through the command ---------------------------------------------------
#: the runs below train the smoke networks of the C3LT table's evaluation (classifier,
#: autoencoders, feature network, independent classifier): with an empty cache the first
#: took 313 s and 461 s in two runs on this project's 2-core machine (other jobs running),
#: so they are slow
@pytest.mark.slow
def test_the_toy_through_cflib_bench(bench_cache, tmp_path, capsys, untouched, monkeypatch):
    """From a folder outside the clone, at smoke: the files land under that folder, the
    book's methods computed at smoke stand beside the toy's row (the committed rows are
    at standard), every value of this run has its interval over queries, and no rank is
    claimed between rows whose intervals overlap."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(PROJECT_ROOT))        # tests.fixtures from anywhere
    out = tmp_path / "cflib-bench" / "Toy-smoke"
    threads = torch.get_num_threads()
    main(["bench", "--method", "tests.fixtures.toy:Toy", "--tables", "c3lt-mnist",
          "--profile", "smoke", "--pairs", "4->9"])
    printed = capsys.readouterr().out
    csv, page = out / "comparison_c3lt-mnist.csv", out / "comparison.html"
    assert f"results (c3lt-mnist): {csv}" in printed and f"page: {page}" in printed
    assert torch.get_num_threads() == threads            # restored
    assert "Toy" not in catalog.CATALOG                  # the catalog as it was

    df = read_results(csv)                               # the results schema
    assert list(df.columns) == COLUMNS
    book = TABLES["c3lt-mnist"].own_methods()
    assert {"C3LT", "CEM", "ExpGAN", "Adv. Attack"} <= set(book)
    assert set(df["method"]) == {"Classifier", "Toy", "Original Data", "Query (unchanged)",
                                 *book}
    assert set(df["profile"]) == {"smoke"} and set(df["pair"]) == {"4->9", ""}
    toy_rows = df[(df["method"] == "Toy") & (df["pair"] == "4->9")].set_index("metric")["value"]
    assert {s.name for s in C3LT_METRICS} <= set(toy_rows.index)
    prox = df[(df["pair"] == "4->9") & (df["metric"] == "Proximity")].set_index("method")["value"]
    assert prox["Query (unchanged)"] == 0 < prox["Toy"] < prox["Original Data"]

    body = page.read_text()
    assert '<meta name="viewport" content="width=device-width' in body   # phones
    text = page_text(page)
    assert "Toy beside the book's tables" in text
    for method in ("Toy", "Original Data", "Query (unchanged)"):
        assert method in text
    # the toy's row, with its own IM1, stands in the page's table beside the reference rows
    assert fmt(toy_rows["IM1"]) in table_row(body, "Toy")
    assert table_row(body, "Original Data") and table_row(body, "Query (unchanged)")
    # the paper's values are over all of its pairs: not beneath one pair's, and said so
    assert "paper" not in table_row(body, "Original Data")
    assert "the paper's values are left out: they are over all of the table's pairs" in text
    # the committed rows are at the standard profile: not beside a smoke run, and said so;
    # the book's methods ran here at smoke instead, labelled as this run's
    assert "results/mnist_eval.csv) are at profile standard; this run is at smoke" in text
    assert "were run here at profile smoke beside it" in text
    assert "rows computed in this run at profile smoke: Adv. Attack" in text
    assert table_row(body, "C3LT") and table_row(body, "ExpGAN")
    assert "rests on 12 queries per pair on 1 pair (12 in all)" in text
    assert "fewer than 100: both are biased upward" in text     # FID/KID on 12 images
    assert "Ranks" in text and "mean rank" in text
    assert body.count("data:image/png;base64,") == 1                # the grid, embedded
    assert "<link" not in body and "src=\"http" not in body        # self-contained

    back = Comparison.load(out)                          # what the page was made from
    pd.testing.assert_frame_equal(back.results, df)
    assert back.method == "Toy" and back.config == {"batch_size": 256, "step": 0.5}
    tc = back.tables["c3lt-mnist"]
    assert tc.computed == book
    # every value of every row has an interval over the 12 queries, and it holds the value
    iv = tc.intervals.set_index(["method", "metric"])
    per_pair = df[(df["pair"] == "4->9") & (df["variant"] == "")].set_index(
        ["method", "metric"])["value"]
    for (m, metric), r in iv.iterrows():
        assert r["value"] == pytest.approx(per_pair[(m, metric)], rel=1e-5, abs=1e-7), (m, metric)
        assert r["lo"] - 1e-9 <= r["value"] <= r["hi"] + 1e-9 and r["n"] <= 12
    for m in ("Toy", "C3LT", "Original Data"):
        assert {"IM1", "Proximity", "Validity", "AUPC_target"} <= set(iv.loc[m].index)
    # no rank between rows whose intervals overlap; a lower rank only past a separation
    ranks, worst, ties = tc.ranks(), tc.worst_ranks(), tc.ties()
    assert "FID" not in ranks.columns and "Proximity" in ranks.columns
    overlapping = 0
    for metric in ranks.columns:
        for a in ranks.index:
            lo_a, hi_a = iv.loc[(a, metric), ["lo", "hi"]]
            for b in ranks.index.drop(a):
                lo_b, hi_b = iv.loc[(b, metric), ["lo", "hi"]]
                if lo_a <= hi_b and lo_b <= hi_a:                # the intervals overlap:
                    overlapping += 1                             # no order between them
                    assert b in ties.loc[a, metric]
                    assert ranks.loc[a, metric] <= worst.loc[b, metric]
                    assert ranks.loc[b, metric] <= worst.loc[a, metric]
                else:                                            # separated: ordered
                    assert b not in ties.loc[a, metric]
                    key = get_spec(metric).key                   # smaller is better
                    ka, kb = sorted((key(lo_a), key(hi_a))), sorted((key(lo_b), key(hi_b)))
                    first, second = (a, b) if ka[1] < kb[0] else (b, a)
                    assert ranks.loc[first, metric] < ranks.loc[second, metric]
    assert overlapping > 0                                       # 12 queries: many ties
    assert ranks.loc["Query (unchanged)", "Proximity"] == 1    # 0 on every query
    assert ranks.loc["Toy", "Proximity"] < ranks.loc["Original Data", "Proximity"]


# -- a plain function through the Python call --------------------------------------------
@pytest.fixture(scope="module")
def fn_run(bench_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("fn")
    return compare(toy.fgsm_step, tables=["c3lt-mnist"], profile="smoke", pairs=["4->9"],
                   out=out, page=bench_page, book_methods=False)


@pytest.mark.slow
def test_a_plain_function_through_compare(fn_run, untouched):
    cmp = fn_run
    assert cmp.method == "fgsm_step" and cmp.page.exists()
    df = read_results(cmp.csv("c3lt-mnist"))
    assert set(df["method"]) == {"Classifier", "fgsm_step", "Original Data",
                                 "Query (unchanged)"}
    pd.testing.assert_frame_equal(cmp.results, df)
    body = cmp.page.read_text()
    assert table_row(body, "fgsm_step") and table_row(body, "Original Data")
    tc = cmp.tables["c3lt-mnist"]
    assert tc.book is None and "at profile standard" in tc.note
    assert "only this run's own reference rows" in tc.note and tc.computed == []
    assert tc.methods == ["Original Data", "Query (unchanged)", "fgsm_step"]


@pytest.mark.slow
def test_a_function_through_a_bayesian_table(bench_cache, tmp_path, capsys, untouched):
    """The same command on the MC-dropout table (its runner adds the reference rows): the
    function's row beside them, per repeat, and the chapter's checks of the reference
    rows."""
    out = tmp_path / "bayes"
    main(["bench", "--method", "tests.fixtures.toy:fgsm_step", "--tables", "bayes-mc_dropout",
          "--profile", "smoke", "--out", str(out), "--no-book-methods"])
    assert f"page: {out / 'comparison.html'}" in capsys.readouterr().out
    df = read_results(out / "comparison_bayes-mc_dropout.csv")
    assert list(df.columns) == [*COLUMNS, "repeat"]
    assert set(df["method"]) == {"Classifier", "fgsm_step", "Original Data",
                                 "Query (unchanged)"} and set(df["model"]) == {"mc_dropout"}
    tc = Comparison.load(out).tables["bayes-mc_dropout"]
    assert "at profile standard" in tc.note
    # the Bayesian table's interval is over its repeats: one at smoke, so none, and no rank
    assert set(tc.intervals["basis"]) == {"repeats"} and tc.intervals["lo"].isna().all()
    assert tc.ranks().empty
    from cflib.book.report import bench_reading

    assert "1 repeat, each a fresh draw of queries (one repeat has no interval, so no rank " \
           "is claimed)" in bench_reading(tc)
    assert set(tc.checks()["verdict"]) <= {"holds", "fails", "not tested"}
    assert len(tc.checks())                               # Original Data vs the query
    body = (out / "comparison.html").read_text()
    assert table_row(body, "fgsm_step") and "Bayesian classifiers, MNIST: MC dropout" in body


# -- the book's rows beside a run, on a run made up here (no network) ----------------------
#: the made-up run's values: row -> (IM1, Proximity, Validity)
MADE_UP = {"Original Data": (0.4, 0.3, 0.9), "Query (unchanged)": (1.2, 0.0, 0.0),
           "Mine": (0.8, 0.2, 0.6)}


def made_up_run(values=MADE_UP, profile="smoke", pair="4->9"):
    """A C3LT table run of three rows on one pair, with its counterfactuals."""
    from cflib.bench.results import tidy, with_pair_means
    from cflib.bench.tables.c3lt import C3LTRun
    from cflib.explainers import Counterfactuals

    common = {"dataset": "mnist", "train_seed": 0, "data_seed": 0, "profile": profile}
    rows = [{**common, "method": "Classifier", "metric": "Accuracy", "value": 0.9}]
    for m, (im1, prox, valid) in values.items():
        for metric, v in (("IM1", im1), ("Proximity", prox), ("Validity", valid),
                          ("Seconds_per_CF", 0.01), ("Proximity_vs_real", prox / 0.3)):
            rows.append({**common, "method": m, "pair": pair, "metric": metric, "value": v})
    df = tidy(rows)
    df = tidy(pd.concat([df[df["method"] == "Classifier"],
                         with_pair_means(df[df["method"] != "Classifier"])]))
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4, 1, 28, 28, generator=g) * 2 - 1
    t = torch.full((4,), 9)
    cfs = {(pair, m): Counterfactuals(x, (x * 0.5).clamp(-1, 1), t, t * 0 + 4, t,
                                      torch.tensor([True, False, True, True]), 0.04, m)
           for m in values}
    return C3LTRun(df, cfs)


def made_up_intervals(values=MADE_UP, spread=0.01, pair="4->9"):
    """Each row's interval over four made-up queries whose values lie ``spread`` around the
    row's value (:func:`cflib.bench.intervals.bootstrap`)."""
    from cflib.bench.intervals import bootstrap

    rows = [{"pair": pair, "method": m, "metric": metric, "query": i, "value": v + d}
            for m, vals in values.items()
            for metric, v in zip(("IM1", "Proximity", "Validity"), vals)
            for i, d in enumerate((-spread, -spread / 3, spread / 3, spread))]
    return bootstrap(pd.DataFrame(rows))


def made_up_comparison(run, book=None, note="", gap=None, intervals=None):
    iv = made_up_intervals() if intervals is None else intervals
    tc = TableComparison(TABLES["c3lt-mnist"], "Mine", run, ["4->9"], book, note, gap,
                         intervals=iv)
    cmp = Comparison("Mine", "class tests.Mine", {"batch_size": 256}, "smoke", Seeds(), "cpu",
                     None, {"c3lt-mnist": tc})
    return tc, cmp


def test_ranks_reading_and_page_of_a_made_up_run(tmp_path):
    run = made_up_run()
    tc, cmp = made_up_comparison(run, note="a note")
    assert tc.methods == ["Original Data", "Query (unchanged)", "Mine"]
    ranks = tc.ranks()
    assert list(ranks.columns) == ["IM1", "Proximity", "Validity"]      # time is not ranked
    assert ranks.loc["Mine"].tolist() == [2, 2, 2]
    assert ranks.loc["Original Data"].tolist() == [1, 3, 1]
    from cflib.book.report import bench_reading

    text = bench_reading(tc)
    assert "Mine ranks IM1 2; Proximity 2; Validity 2; its mean rank 2" in text
    assert "first on its own" not in text and "Of the 3 rows" in text
    assert "4 queries per pair on 1 pair (4 in all)" in text
    assert "60 % of its counterfactuals" in text and "real target images: 90 %" in text
    # the page's answer: the same sentences, one topic per item
    from cflib.book.report import bench_verdict

    items = bench_verdict(tc).split("\n")
    assert [i.split("**")[1] for i in items] == ["Ranks", "Validity", "An edit or a redraw"]
    assert " ".join(i.split("**: ", 1)[1] for i in items) == text
    page = bench_page(cmp)
    assert table_row(page, "Mine") and "a note" in page
    assert page.count("data:image/png;base64,") == 1
    # the answer first: the verdict and the table (your row marked), then the provenance
    first = page.index("<h2>")
    assert page.index('class="cflib-verdict"') < page.index("cflib-provenance")
    assert page.index('<tr class="cflib-mark"><th>') > first
    assert page.index('<tr class="cflib-mark"><th>') < page.index("How these numbers were made")

    cmp.save(tmp_path, "mine")                                  # and read back
    back = Comparison.load(tmp_path, "mine", book_results=tmp_path)
    pd.testing.assert_frame_equal(back.results, cmp.results)
    assert back.tables["c3lt-mnist"].ranks().equals(ranks)
    pd.testing.assert_frame_equal(back.tables["c3lt-mnist"].intervals, tc.intervals)
    assert ("no mnist_eval.csv (the mnist_eval chapter's results) was found, which cflib "
            "chapter mnist_eval --profile smoke writes" in back.tables["c3lt-mnist"].note)


def test_rows_whose_intervals_overlap_are_not_ordered():
    """Mine's IM1 (0.42) lies within Original Data's interval (0.4, queries spread by
    0.05): the two share first place, with overlapping rank ranges, and the reading says
    so instead of calling either better; with tight intervals Original Data is first on
    its own.  Without any interval nothing is ranked."""
    from cflib.book.report import bench_reading
    from cflib.book.report.comparison import bench_ranks

    close = {**MADE_UP, "Mine": (0.42, 0.2, 0.6)}
    tc, _ = made_up_comparison(made_up_run(close), intervals=made_up_intervals(close, 0.05))
    ranks, worst, ties = tc.ranks(), tc.worst_ranks(), tc.ties()
    assert ranks.loc["Mine", "IM1"] == ranks.loc["Original Data", "IM1"] == 1
    assert worst.loc["Mine", "IM1"] == worst.loc["Original Data", "IM1"] == 2
    assert ties.loc["Mine", "IM1"] == ["Original Data"]
    assert ranks.loc["Query (unchanged)", "IM1"] == 3                 # separated from both
    assert bench_ranks(tc).loc["Mine", "IM1"] == "1–2"
    text = bench_reading(tc)
    assert "ranks IM1 1–2" in text and "first on its own" not in text

    tc, _ = made_up_comparison(made_up_run(close), intervals=made_up_intervals(close, 0.001))
    assert tc.ranks().loc["Original Data", "IM1"] == 1 and tc.ranks().loc["Mine", "IM1"] == 2
    assert bench_ranks(tc).loc["Mine", "IM1"] == "2"

    empty = pd.DataFrame(columns=["method", "metric", "value", "lo", "hi", "n", "pairs",
                                  "basis"])
    tc, _ = made_up_comparison(made_up_run(close), intervals=empty)
    assert tc.ranks().empty and "No metric is ranked" in bench_reading(tc)


def test_the_book_rows_stand_beside_a_run_whose_reference_rows_are_theirs(tmp_path):
    """A results file of the table at the run's profile and seeds whose reference rows
    equal the run's: its other rows stand beside the method, ranked with it, with the
    paper's values; one at another profile, with other seeds or query count, or whose
    reference rows differ is left out, and the note says why."""
    run = made_up_run()
    own = run.results
    book = made_up_run({**{k: v for k, v in MADE_UP.items() if k != "Mine"},
                        "C3LT": (0.7, 0.25, 1.0), "CEM": (1.5, 0.05, 0.5)}).results
    book.to_csv(tmp_path / "mnist_eval.csv", index=False)
    prof, table = get_profile("smoke"), TABLES["c3lt-mnist"]
    rows, note, gap = book_rows(table, own, prof, Seeds(), None, ["4->9"], tmp_path)
    assert rows is not None and gap == 0
    assert "come from mnist_eval.csv (the mnist_eval chapter's results)" in note
    tc, cmp = made_up_comparison(run, rows, note, gap)
    assert tc.methods == ["Original Data", "Query (unchanged)", "Mine", "CEM", "C3LT"]
    ranks = tc.ranks()
    assert ranks.loc["C3LT", "IM1"] == 2 and ranks.loc["Mine", "IM1"] == 3
    assert ranks.loc["CEM", "Proximity"] == 2 and ranks.loc["C3LT", "Validity"] == 1
    checks = tc.checks()                       # the chapter's: CEM and C3LT are there now
    assert "IM1: C3LT better than CEM" in set(checks["expectation"])
    page = bench_page(cmp)
    # one pair of three: the paper's dataset-level values are left out, and the page says why
    assert "paper" not in table_row(page, "C3LT") and table_row(page, "Mine")
    assert ("the paper's values are left out: they are over all of the table's pairs"
            in html.unescape(page))

    # the committed results/ are at the standard profile
    rows, note, _ = book_rows(table, own, prof, Seeds(), None, ["4->9"])
    assert rows is None and "results/mnist_eval.csv) are at profile standard" in note
    for kw, why in (({"n_images": 8}, "use the profile's 12 queries; this run uses 8"),
                    ({"seeds": Seeds(1, 0)}, "are of training / data seeds [(0, 0)]"),
                    ({"pairs": ["3->8"]}, "have no pair 3->8")):
        args = {"seeds": Seeds(), "n_images": None, "pairs": ["4->9"], **kw}
        rows, note, _ = book_rows(table, own, prof, args["seeds"], args["n_images"],
                                  args["pairs"], tmp_path)
        assert rows is None and why in note, note
    moved = book.assign(value=book["value"].where(book["method"] != "Original Data",
                                                  book["value"] + 0.5))
    moved.to_csv(tmp_path / "mnist_eval.csv", index=False)
    rows, note, gap = book_rows(table, own, prof, Seeds(), None, ["4->9"], tmp_path)
    assert rows is None and gap > 0.1 and "reference rows differ from this run's" in note
    assert "Original Data 4->9" in note                       # where the gap is


# -- a method that fails on a batch --------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("method, match", [
    (toy.Crashes, r"Crashes failed on table c3lt-mnist, pair 4->9: ZeroDivisionError: the "
                  r"toy divides by zero"),
    ("tests.fixtures.toy:wrong_shape",
     r"wrong_shape failed on table c3lt-mnist, pair 4->9: RuntimeError: wrong_shape returned "
     r"counterfactuals of shape \(12, 1, 14, 28\) for a batch of shape \(12, 1, 28, 28\)"),
    (toy.nan_images, r"nan_images failed on table c3lt-mnist, pair 4->9: RuntimeError: "
                     r"nan_images returned 12 non-finite counterfactual"),
])
def test_a_method_that_fails_on_a_batch_is_named(method, match, bench_cache, tmp_path,
                                                untouched):
    with pytest.raises(MethodError, match=match):
        compare(method, tables=["c3lt-mnist"], pairs=["4->9"], out=tmp_path / "x")
    assert not (tmp_path / "x").exists()                  # no half comparison written
    assert all(n not in catalog.CATALOG for n in ("Crashes", "wrong_shape", "nan_images"))


@pytest.mark.slow
def test_a_method_that_changes_the_classifier_stops_the_run(bench_cache, tmp_path, untouched):
    """A method that nudges the weights of the classifier it explains, in place, would
    have every later row (and the book's reference rows) measured with a corrupted
    classifier: the run stops with the method named, and nothing is written."""
    with pytest.raises(MethodError, match="changed the weights of the classifier it "
                                          "explains, in place .* while explaining"):
        compare("tests.fixtures.toy:nudges_the_classifier", tables=["c3lt-mnist"],
                pairs=["4->9"], out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


# -- bad input: a clear error before any network trains ----------------------------------
class NamedLikeTheBook(Explainer):
    name = "C3LT"


BAD = [
    ("tests.fixtures.nope:Toy", {}, {}, ValueError, r"no module named 'tests.fixtures.nope'"),
    ("tests.fixtures.toy:Nope", {}, {}, ValueError,
     r"module 'tests.fixtures.toy' has no attribute 'Nope'"),
    ("tests.fixtures.toy.Toy", {}, {}, ValueError, r"'package.module:Name'"),
    ("tests.fixtures.toy:NOT_A_METHOD", {}, {}, TypeError,
     r"must be an Explainer subclass, an import path"),
    (toy.Toy(torch.nn.Linear(784, 10)), {}, {}, TypeError, r"already built"),
    (NamedLikeTheBook, {}, {}, ValueError, r"called 'C3LT', a row of the book's own"),
    (toy.Toy, {"steps": 50}, {}, TypeError,
     r"Toy has no argument\(s\) \['steps'\]; its config ToyConfig takes"),
    (toy.Toy, {"step": 2.0}, {}, ValueError, r"ToyConfig.step must be in \(0, 1\], got 2.0"),
    (toy.Picky, {"step": 0.5}, {}, ValueError, r"Picky takes a step of at most 0.3"),
    (toy.Toy, {}, {"tables": ["c3lt-cifar"]}, ValueError, r"unknown table 'c3lt-cifar'"),
    (toy.Toy, {}, {"pairs": ["0->2"]}, ValueError,
     r"pair 0->2 is not a pair of the table\(s\) asked for .*c3lt-mnist: 4->9, 3->8, 5->6"),
    (toy.Toy, {}, {"pairs": ["4->12"]}, ValueError, r"class 12 of pair 4->12"),
    (toy.Toy, {}, {"tables": "c3lt-mnist,c3lt-fmnist", "pairs": ["4->9"]}, ValueError,
     r"none of the pairs \['4->9'\] is a pair of c3lt-fmnist"),
    (toy.fgsm_step, {}, {"tables": ["bayes-bnn"], "pairs": ["4->9"]}, ValueError,
     r"the Bayesian tables have none"),
    (toy.Toy, {}, {"tables": ["bayes-mc_dropout"]}, ValueError,
     r"Toy needs fitting, and compare fits a method per class pair"),
    (toy.Toy, {}, {"out": PROJECT_ROOT / "results"}, ValueError,
     r"inside the book's committed results/"),
    (toy.Toy, {}, {"out": PROJECT_ROOT / "book" / "chapters" / "mine"}, ValueError,
     r"inside the book's committed book/"),
    (toy.Toy, {}, {"n_images": 2}, ValueError, r"n_images must be an int of at least 4"),
    (toy.Toy, {}, {"device": "cuda:99"}, ValueError, r"device"),
]


@pytest.mark.parametrize("method, config, kw, error, match", BAD,
                         ids=[re.sub(r"\W+", "-", b[4])[:40] for b in BAD])
def test_bad_input_is_a_clear_error_before_any_network_trains(method, config, kw, error,
                                                              match, tmp_cache, tmp_path,
                                                              untouched):
    kw = {"out": tmp_path / "out", **kw}
    with pytest.raises(error, match=match):
        compare(method, config=config, **kw)
    assert not tmp_cache.exists() or not any(tmp_cache.iterdir())     # nothing trained
    assert not (tmp_path / "out").exists()                            # nothing written


@pytest.mark.parametrize("args, match", [
    (["--method", "tests.fixtures.nope:Toy"], r"cflib bench: .*no module named"),
    (["--method", "tests.fixtures.toy:Toy", "--config", "{steps: 50}"], r"not JSON"),
    (["--method", "tests.fixtures.toy:Toy", "--config", "[1]"], r"must be a JSON object"),
    (["--method", "tests.fixtures.toy:Toy", "--config", '{"steps": 50}'],
     r"Toy has no argument\(s\) \['steps'\]"),
    (["--method", "tests.fixtures.toy:Picky", "--config", '{"step": 0.5}'],
     r"Picky takes a step of at most 0.3.*before any network is trained"),
    (["--method", "tests.fixtures.toy:Toy", "--tables", "c3lt-mnist,nope"], r"unknown table"),
    (["--method", "tests.fixtures.toy:Toy", "--pairs", "3->5"], r"pair 3->5 is not a pair"),
    (["--method", "tests.fixtures.toy:Toy", "--out", "results/mine"], r"committed results/"),
])
def test_the_command_refuses_bad_input_with_its_message(args, match, tmp_cache, untouched,
                                                        monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    with pytest.raises(SystemExit, match=match):
        main(["bench", *args, "--profile", "smoke"])
    assert not tmp_cache.exists() or not any(tmp_cache.iterdir())


@dataclass
class _StubPlan:
    """What cflib bench runs, without a network: writes one file into its folder."""

    out: Path
    log: list

    def run(self):
        from types import SimpleNamespace

        self.log.append(self.out)
        (self.out / "comparison.html").write_text("page")
        return SimpleNamespace(method="Toy", tables=[], profile="smoke", page=self.out / "p",
                               csv=lambda key: None)


def test_two_bench_runs_to_one_out_cannot_both_succeed(tmp_path, monkeypatch, capsys):
    """A second run to the same --out is refused (unless --force) before it computes; one
    that finds the folder locked by a running one too."""
    from filelock import FileLock

    from cflib.bench import compare as compare_mod

    ran = []
    monkeypatch.setattr(compare_mod, "prepare",
                        lambda *a, **k: _StubPlan(Path(a[6]) if a[6] is not None else tmp_path,
                                                  ran))
    args = ["bench", "--method", "tests.fixtures.toy:Toy", "--out", str(tmp_path / "o")]
    main(args)
    assert ran == [tmp_path / "o"]
    with pytest.raises(SystemExit, match="already holds an earlier run's files.*--force"):
        main(args)
    assert len(ran) == 1
    main(args + ["--force"])
    assert len(ran) == 2
    with FileLock(str(tmp_path / "o" / ".cflib-bench.lock")):
        with pytest.raises(SystemExit, match="another cflib bench is writing"):
            main(args + ["--force"])
    assert len(ran) == 2


def test_a_config_nested_too_deeply_is_refused_with_its_message():
    deep = "[" * 60_000 + "]" * 60_000
    with pytest.raises(SystemExit, match="nested too deeply"):
        main(["bench", "--method", "tests.fixtures.toy:Toy", "--config", deep])


def test_cflib_bench_writes_where_the_user_is_by_default(tmp_path, monkeypatch):
    """Without --out the page and files go under ./cflib-bench/<method>-<profile>/ of the
    current folder, never into the library's clone."""
    from cflib.bench import compare as compare_mod

    ran = []
    # the default is worked out once, by compare (prepare), against the current folder
    monkeypatch.setattr(compare_mod, "prepare", lambda *a, **k: _StubPlan(
        compare_mod.check_out(Path.cwd() / compare_mod.BENCH_DIR / "Toy-smoke"), ran))
    monkeypatch.chdir(tmp_path)
    main(["bench", "--method", "tests.fixtures.toy:Toy"])
    assert ran == [(tmp_path / "cflib-bench" / "Toy-smoke").resolve()]
    assert (tmp_path / "cflib-bench" / "Toy-smoke" / "comparison.html").exists()
    assert not (PROJECT_ROOT / "cflib-bench" / "Toy-smoke").exists()


def test_cflib_list_names_the_bench_tables_and_the_catalog(capsys):
    main(["list"])
    out = capsys.readouterr().out
    for key in ("c3lt-mnist", "c3lt-fmnist", "bayes-mc_dropout", "bayes-bnn"):
        assert key in out
    assert "methods of the catalog" in out and "C3LT (inverted)" in out and "PSCE" in out


def test_a_method_that_switches_grad_off_when_built_stops_the_bench_in_one_line(tmp_path):
    """Probe 62, n21c: the user's method built on the stand-in classifier switched
    torch's gradient mode off; the book's Adv. Attack row then failed with a raw autograd
    error naming no method.  Now the bench stops before any network, naming the method."""
    import torch

    with pytest.raises(SystemExit) as e:
        main(["bench", "--method", "tests.fixtures.toy:TurnsGradOffWhenBuilt", "--tables",
              "c3lt-mnist", "--profile", "smoke", "--out", str(tmp_path / "o")])
    msg = str(e.value)
    assert msg.startswith("cflib bench: TurnsGradOff changed torch's gradient mode "
                          "(True -> False), when built"), msg
    assert "\n" not in msg and torch.is_grad_enabled()
    assert not (tmp_path / "o").exists()
