"""cflib verify --rerun: a re-run's values against the committed ones and the book's
spread over training seeds."""
from __future__ import annotations

import pandas as pd
import pytest

from cflib.bench.results import COLUMNS, write_table
from cflib.book.cli import main
from cflib.book.runs.rerun import BEYOND, BIT_EQUAL, NO_SPREAD, WITHIN, compare_rerun


def _table(seed, im1, fid, seconds=1.0):
    base = {c: "" for c in COLUMNS} | {"dataset": "mnist", "train_seed": seed, "data_seed": 0,
                                       "profile": "smoke", "pair": "4->9", "method": "CEM"}
    return pd.DataFrame([base | {"metric": "IM1", "value": im1},
                         base | {"metric": "FID", "value": fid},
                         base | {"metric": "Seconds_per_CF", "value": seconds}])[COLUMNS]


@pytest.fixture()
def book(tmp_path):
    """A baseline (seed 0) and a sweep of seeds 1, 2: IM1 spread sd 0.1, FID sd 1."""
    write_table(_table(0, 1.0, 10.0), tmp_path / "base" / "mnist_eval.csv")
    for s, (im1, fid) in {1: (1.1, 11.0), 2: (0.9, 9.0)}.items():
        write_table(_table(s, im1, fid), tmp_path / "sweep" / "mnist_eval" / "smoke" /
                    f"seed{s}" / "mnist_eval.csv")
    return tmp_path


def _report(book, im1, fid, seconds=1.0, sweep="sweep"):
    write_table(_table(0, im1, fid, seconds), book / "run" / "mnist_eval.csv")
    return compare_rerun("mnist_eval", book / "run", book / "base", book / sweep)


def test_a_rerun_equal_to_the_book_is_bit_equal_and_timings_are_left_out(book):
    r = _report(book, 1.0, 10.0, seconds=99.0)
    assert r.counts()[BIT_EQUAL] == 2 and r.timings == 1 and len(r.beyond) == 0
    assert (r.rows_bit_equal, r.rows) == (2, 2)


def test_a_value_beyond_the_seed_spread_is_flagged_and_one_within_is_not(book):
    r = _report(book, 1.05, 30.0)         # IM1 0.5 sd away, FID 20 sd away
    status = r.table.set_index("metric")["status"]
    assert status["IM1"] == WITHIN and status["FID"] == BEYOND
    assert list(r.beyond["metric"]) == ["FID"]
    # a given baseline is named as such, never as "the committed results"
    assert "FID: baseline 10, re-run 30" in r.describe()
    assert "against the baseline" in r.describe() and "committed results" not in r.describe()


def test_the_chapters_own_results_file_edited_is_no_baseline(book, monkeypatch):
    """--baseline results/<chapter>.csv after a hand edit used to be compared as "the
    committed results" (1005 of 1005 bit-equal to an edited run): refused, named."""
    from cflib.book.runs import rerun

    monkeypatch.setattr(rerun, "RESULTS_DIR", book / "base")
    monkeypatch.setattr(rerun, "committed_table", lambda chapter: _table(0, 1.0, 10.0))
    assert _report(book, 1.0, 10.0).counts()[BIT_EQUAL] == 2          # as committed: fine
    write_table(_table(0, 2.0, 10.0), book / "base" / "mnist_eval.csv")   # edited by hand
    with pytest.raises(ValueError, match="edited since the commit"):
        _report(book, 2.0, 10.0)


def test_without_a_sweep_a_moved_value_has_no_spread(book):
    (book / "no-sweep").mkdir()
    r = _report(book, 1.05, 10.0, sweep="no-sweep")
    assert r.table.set_index("metric")["status"].to_dict() == {"IM1": NO_SPREAD,
                                                               "FID": BIT_EQUAL}


def test_what_cannot_be_compared_fails_with_its_reason(book):
    """A mistyped sweep root, another chapter's file, a value lost (NaN): never a pass."""
    with pytest.raises(ValueError, match="is not a folder"):
        _report(book, 1.0, 10.0, sweep="mistyped")
    other = _table(0, 1.0, 10.0).assign(dataset="fmnist")
    write_table(other, book / "other" / "mnist_eval.csv")
    with pytest.raises(ValueError, match="another chapter's results"):
        compare_rerun("mnist_eval", book / "other", book / "base", book / "sweep")
    r = _report(book, float("nan"), 10.0)
    assert list(r.beyond["metric"]) == ["IM1"] and "none (NaN) in the re-run: 1" in r.describe()


def test_a_partial_rerun_is_read_against_the_values_it_re_ran(book):
    part = _table(0, 1.0, 10.0)
    write_table(part[part["metric"] != "FID"], book / "run" / "mnist_eval.csv")
    r = compare_rerun("mnist_eval", book / "run", book / "base", book / "sweep")
    assert len(r.table) == 1 and r.not_rerun == 1
    assert "the 1 value it re-ran" in r.describe() and "did not re-run" in r.describe()


def test_the_command_exits_1_naming_the_value_and_refuses_a_missing_run(book, capsys):
    write_table(_table(0, 1.0, 30.0), book / "run" / "mnist_eval.csv")
    with pytest.raises(SystemExit, match="1 value"):
        main(["verify", "--rerun", "mnist_eval", "--run", str(book / "run"), "--baseline",
              str(book / "base"), "--sweep-root", str(book / "sweep")])
    assert "beyond the seed spread: 1" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="does not exist"):
        main(["verify", "--rerun", "mnist_eval", "--run", str(book / "nowhere")])
    with pytest.raises(SystemExit, match="holds no results file mnist_eval.csv"):
        main(["verify", "--rerun", "mnist_eval", "--run", str(book / "sweep")])


def test_per_query_moves_counts_flips_and_the_median_change():
    from cflib.book.runs.rerun import per_query_moves

    def pq(rows):
        return pd.DataFrame(rows, columns=["pair", "method", "metric", "query", "value"])

    before = pq([("4->9", "CEM", "Proximity", 0, 1.0), ("4->9", "CEM", "Proximity", 1, 2.0),
                 ("4->9", "CEM", "Proximity", 2, 4.0), ("4->9", "CEM", "Validity", 0, 1.0),
                 ("4->9", "CEM", "Validity", 1, 0.0), ("4->9", "CEM", "Validity", 2, 1.0),
                 ("3->8", "CEM", "Proximity", 0, float("nan")),
                 ("4->9", "C3LT", "Proximity", 0, 3.0), ("4->9", "C3LT", "Validity", 0, 1.0)])
    after = before.copy()
    after.loc[0, "value"] = 1.5          # +50 %
    after.loc[1, "value"] = 2.2          # +10 %
    after.loc[4, "value"] = 1.0          # a validity flip, 0 -> 1
    # NaN stays NaN (not moved); C3LT unchanged: left out; a method in one table only too
    after = pd.concat([after, pq([("4->9", "New", "Validity", 0, 1.0)])])
    out = per_query_moves(before, after).set_index("method")
    assert list(out.index) == ["CEM"]
    r = out.loc["CEM"]
    assert (r.queries, r.queries_moved) == (4, 2)       # 3 queries of 4->9, one of 3->8
    assert r.proximity_median_rel_change == pytest.approx(0.10)   # median of 0.5, 0.1, 0
    assert (r.validity_flips, r.valid_before, r.valid_after) == (1, 2, 3)
