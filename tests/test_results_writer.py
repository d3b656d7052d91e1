"""The tidy results writer (``cflib.bench.results``): a round trip that keeps every value,
empty strings, NaN, the optional ``repeat`` column and repeated rows; the schema checked on
the way in; a failed write leaving nothing behind; the pair rows and their means."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from cflib.bench import results
from cflib.bench.results import (
    COLUMNS,
    MEAN_OVER_PAIRS,
    pair_means,
    pair_rows,
    read_results,
    read_table,
    table_means,
    tidy,
    with_pair_means,
    write_results,
    write_table,
)

NAN = float("nan")


def _row(**kw):
    base = {"dataset": "mnist", "method": "CEM", "model": "", "variant": "", "pair": "4->9",
            "aggregate": "", "metric": "IM1", "value": 1.0, "train_seed": 0, "data_seed": 0,
            "profile": "smoke"}
    return {**base, **kw}


ROWS = [
    _row(value=0.125),
    _row(value=NAN, metric="FID"),                          # an undefined metric
    _row(method="C3LT", value=-2.5e-7, metric="COUT"),
    _row(model="bnn", variant="repo_init", pair="", aggregate=MEAN_OVER_PAIRS, value=3.0),
    _row(method="Classifier", pair="", metric="Accuracy", value=0.99),
    _row(value=0.125),                                       # the first row again
    _row(method="NA", variant="None", pair="null", value=0.5),  # pandas' NaN spellings
]


def test_a_round_trip_keeps_values_nan_empty_strings_and_repeated_rows(tmp_path):
    df = pd.DataFrame(ROWS)
    path = write_results(df, "chapter", tmp_path)
    assert path == tmp_path / "chapter.csv"
    back = read_results("chapter", tmp_path)
    assert list(back.columns) == COLUMNS and len(back) == 7
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    for c in ("dataset", "method", "model", "variant", "pair", "aggregate", "metric",
              "profile"):
        assert back[c].tolist() == df[c].tolist(), c          # "" stays "", "NA" text
    assert back["value"].iloc[[0, 2, 3, 4, 5, 6]].tolist() == [0.125, -2.5e-7, 3.0, 0.99,
                                                                0.125, 0.5]
    assert math.isnan(back["value"].iloc[1])
    assert back["train_seed"].tolist() == [0] * 7
    # the path form reads the same file
    assert back.equals(read_results(path))


def test_the_repeat_column_is_kept_after_the_schema_and_other_columns_are_dropped(tmp_path):
    df = pd.DataFrame([{**r, "repeat": i % 2, "note": "x"} for i, r in enumerate(ROWS)])
    back = read_results(write_results(df, "bayes", tmp_path))
    assert list(back.columns) == COLUMNS + ["repeat"]
    assert back["repeat"].tolist() == [0, 1, 0, 1, 0, 1, 0]


def test_missing_text_columns_default_to_empty_and_a_missing_value_is_an_error():
    short = [{k: v for k, v in r.items() if k not in ("model", "variant")} for r in ROWS]
    t = tidy(short)
    assert t["model"].tolist() == [""] * 7 and t["variant"].tolist() == [""] * 7
    withnone = tidy([_row(pair=None, aggregate=None)])
    assert withnone[["pair", "aggregate"]].values.tolist() == [["", ""]]
    with pytest.raises(ValueError, match=r"lack the column\(s\) \['value'\]"):
        tidy([{k: v for k, v in ROWS[0].items() if k != "value"}])
    with pytest.raises(ValueError, match=r"\['dataset', 'profile'\]"):
        tidy([{k: v for k, v in ROWS[0].items() if k not in ("dataset", "profile")}])


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    good = pd.DataFrame(ROWS)
    path = write_results(good, "chapter", tmp_path)
    before = path.read_bytes()

    def half_then_fail(self, tmp, **kw):     # a disk that fills up mid-file
        with open(tmp, "w") as f:
            f.write("dataset,method\nmnist,")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        write_results(good.assign(value=7.0), "chapter", tmp_path)
    with pytest.raises(OSError):
        write_results(good, "new", tmp_path)
    assert path.read_bytes() == before                      # the old file as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chapter.csv"]   # no new, no temp


def test_a_table_off_the_schema_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match=r"lack the column\(s\) \['metric'\]"):
        write_results(pd.DataFrame(ROWS).drop(columns="metric"), "chapter", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_run_saves_and_loads_the_results_and_every_extra_table(tmp_path):
    """The one save/load of every table's run (:class:`cflib.bench.results.Run`): results,
    the extra tables it names, nothing else; read back through ``from_saved``."""
    from dataclasses import dataclass

    @dataclass
    class MyRun(results.Run):
        results: pd.DataFrame
        curves: pd.DataFrame
        TABLES = ("curves", "absent")

        def tables(self):
            return {"curves": self.curves}

        @classmethod
        def from_saved(cls, res, tables, shown):
            assert shown == {} and set(tables) == {"curves"}
            return cls(res, tables["curves"])

    run = MyRun(pd.DataFrame(ROWS[:2]), pd.DataFrame({"x": [1, 2], "label": ["", "a"]}))
    paths = run.save(tmp_path, "ch")
    assert [p.name for p in paths] == ["ch.csv", "ch_curves.csv"]
    back = MyRun.load(tmp_path, "ch")
    assert back.curves["x"].tolist() == [1, 2] and len(back.results) == 2
    curves = read_table(paths[1])
    assert curves["x"].tolist() == [1, 2] and curves["label"].tolist() == ["", "a"]
    assert str(paths[1].resolve()) in results.files_read()
    with pytest.raises(FileNotFoundError, match="make chapter NB=absent"):
        read_results("absent", tmp_path)
    with pytest.raises(FileNotFoundError, match="no file"):
        read_table(tmp_path / "absent.csv")
    write_table(pd.DataFrame({"a": [1]}), tmp_path / "sub" / "t.csv")     # folder made
    assert (tmp_path / "sub" / "t.csv").read_text() == "a\n1\n"


def test_pair_rows_and_their_means_by_hand():
    df = tidy([_row(pair="4->9", value=1.0), _row(pair="3->8", value=4.0),
               _row(pair="4->9", value=10.0, variant="ablation"),
               _row(pair="3->8", value=20.0, variant="ablation")])
    acc = tidy([_row(method="Classifier", pair="", metric="Accuracy", value=0.9)])
    # as the C3LT table builds it: the accuracy beside the pair rows and their means
    out = pd.concat([acc, with_pair_means(df)], ignore_index=True)
    means = pair_means(out)
    assert sorted(means["value"].tolist()) == [2.5, 15.0]
    assert set(means["pair"]) == {""} and set(means["aggregate"]) == {"mean over pairs"}
    assert table_means(out)["value"].tolist() == [2.5]          # the variant left out
    assert len(pair_rows(out)) == 4                             # no means, no accuracy
    assert out[out["method"] == "Classifier"]["value"].tolist() == [0.9]
    # one mean per method, metric and run: another seed is another mean
    two = with_pair_means(tidy([_row(value=1.0), _row(value=3.0, train_seed=1)]))
    assert sorted(pair_means(two)["value"].tolist()) == [1.0, 3.0]
