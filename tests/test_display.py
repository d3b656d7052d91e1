"""How tables and checks are shown on a page (cflib.book.report.display), on small tables."""
import re

import numpy as np
import pandas as pd

from cflib.book.report.display import COLUMN_PX, Page, _chunks, fmt, page_table, verdicts


def test_fmt_counts_and_measurements():
    assert fmt(12.0) == "12" and fmt(26279.4) == "26,279" and fmt(None) == "–"
    assert fmt(0.95312) == "0.953" and fmt(float("nan")) == "–" and fmt(2e-5) == "2.00e-05"
    # a whole number in a column of measurements keeps the column's digits
    assert fmt(1.0, count=False) == "1.00" and fmt(0.0, count=False) == "0.00"
    assert fmt(85.0, count=False) == "85.0"


def _table():
    cols = pd.MultiIndex.from_tuples([("IM1", "ours"), ("IM1", "paper"),
                                      ("Validity", "ours"), ("Validity", "paper")])
    return pd.DataFrame([[0.7612, 0.7, 1.0, np.nan], [1.1, np.nan, 0.953, np.nan]],
                        index=pd.Index(["C3LT", "CEM"], name="method"), columns=cols)


def test_page_table_one_cell_per_metric_paper_only_where_reported():
    body = str(page_table(_table()))
    heads = re.findall(r"<th>([^<]*)</th>", body.split("<tbody>")[0])
    assert heads == ["method", "IM1 ↓", "Validity ↑"]          # no paper sub-column
    assert body.count('<span class="paper">') == 1 and "paper 0.700" in body
    # a whole value in a column of measurements: 1.00 beside 0.953, not 1
    assert "<td>1.00</td>" in body and "<td>0.953</td>" in body
    assert "<th>C3LT</th>" in body and not re.search(r"<th>0</th>", body)   # no raw index


def test_page_table_splits_a_wide_table_into_tables_that_fit():
    wide = pd.DataFrame(np.full((3, 14), 0.123456), index=["a", "b", "c"],
                        columns=[f"metric_{k}" for k in range(14)])
    body = str(page_table(wide))
    n = body.count("<table")
    assert n >= 2 and body.count("<th>a</th>") == n               # row labels in each
    cols = {c: [fmt(0.123456)] * 3 for c in wide.columns}
    for chunk in _chunks(cols, ["", "a", "b", "c"], COLUMN_PX):
        assert 1 <= len(chunk) < len(wide.columns)


def test_a_page_prints_the_same_text_in_every_run():
    a, b = page_table(_table()), page_table(_table())
    assert repr(a) == repr(b) and " at 0x" not in repr(a)
    assert "C3LT 0.761" in repr(a) and "<" not in repr(a).replace("<br>", "")
    assert repr(Page("<p>x &amp; y</p>")) == "x & y"


def test_verdicts_list_failures_first_with_the_full_table_folded():
    checks = pd.DataFrame([
        {"expectation": "C3LT beats CEM on IM1", "verdict": "holds", "value": 0.76,
         "other": "CEM", "other value": 1.77, "source": "paper", "why": ""},
        {"expectation": "C3LT is valid", "verdict": "fails", "value": 0.5, "other": "",
         "other value": 0.9, "source": "paper", "why": "below the threshold"},
    ])
    body = str(verdicts(checks))
    assert body.index("✗ fails") < body.index("✓ holds")
    assert "1 hold, 1 fail, 0 not tested" in body
    assert "<details>" in body and body.index("<details>") > body.index("</ul>")
    assert str(verdicts(checks.iloc[:0])) == "<p>No expectation applies to this run.</p>"
