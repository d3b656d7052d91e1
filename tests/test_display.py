"""How tables and checks are shown on a page (cflib.book.report.display), on small tables."""
import re

import numpy as np
import pandas as pd
import pytest

from cflib.book.report.display import (
    COLUMN_PX,
    NARROW_PX,
    Page,
    _chunks,
    fmt,
    fold,
    page_table,
    row_anchor,
    verdicts,
)


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


def test_a_row_name_links_to_its_definition_only_when_asked():
    body = str(page_table(_table(), links=pd.Index(["C3LT"])))
    assert '<th><a class="cflib-row" href="#row-c3lt">C3LT</a></th>' in body
    assert "<th>CEM</th>" in body                        # not in links: plain
    assert "href" not in str(page_table(_table()))
    # the text a terminal shows is the same with and without the links
    assert repr(page_table(_table(), links=["C3LT"])) == repr(page_table(_table()))
    assert row_anchor("CEM (paper budget)") == "row-cem-paper-budget"
    assert row_anchor("KD+Quant") == "row-kd-quant"
    with pytest.raises(ValueError, match="no letters or digits"):
        row_anchor("++")


def test_a_metric_undefined_in_every_row_is_left_out():
    t = _table()
    t[("Query_dependence", "ours")] = np.nan
    body = str(page_table(t))
    assert "Query_dependence" not in body and "IM1" in body and "Validity" in body
    flat = pd.DataFrame({"a": [1.0, 2.0], "b": [np.nan, np.nan]}, index=["x", "y"])
    assert ">b<" not in str(page_table(flat)) and ">a<" in str(page_table(flat))
    with pytest.raises(TypeError, match="takes a DataFrame"):
        page_table([[1, 2]])


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
    assert "The papers' claims: 1 holds, 1 fails." in body
    # our protocol's sanity checks are counted apart, and a tie is said to be one
    mixed = pd.concat([checks, pd.DataFrame([
        {"expectation": "PSCE is the most robust", "verdict": "holds", "value": 1.0,
         "other": "ROAR", "other value": 1.0, "source": "Duell & Fan", "why": ""},
        {"expectation": "Original Data is valid", "verdict": "holds", "value": 0.99,
         "other": "Query (unchanged)", "other value": 0.0,
         "source": "reference row: real target images", "why": ""}])])
    head = str(verdicts(mixed)).split("</p>")[0]
    assert "The papers' claims: 2 hold (1 only as ties: both values equal), 1 fails" in head
    assert "our protocol's checks: 1 holds" in head
    assert "<details>" in body and body.index("<details>") > body.index("</ul>")
    assert str(verdicts(checks.iloc[:0])) == "<p>No expectation applies to this run.</p>"


def test_a_wide_table_gets_a_phone_copy_that_fits_and_prints_once():
    wide = pd.DataFrame(np.full((3, 9), 0.123456), index=["a long row label", "b", "c"],
                        columns=[f"metric {k}" for k in range(9)])
    page = page_table(wide)
    body = str(page)
    assert '<div class="cflib-wide">' in body and '<div class="cflib-narrow">' in body
    desktop, phone = body.split('<div class="cflib-narrow">')
    assert phone.count("<table") > desktop.count("<table")     # more, narrower tables
    cols = {c: [fmt(0.123456)] * 3 for c in wide.columns}
    for chunk in _chunks(cols, ["", *wide.index], NARROW_PX, narrow=True):
        assert 1 <= len(chunk) < len(wide.columns)
    # the text form shows the desktop copy only: each row once
    assert repr(page).count("a long row label") == desktop.count("<table")
    # a table that fits a phone gets no second copy
    assert "cflib-narrow" not in str(page_table(_table()))


def test_fold_shows_tables_figures_and_text_one_click_away():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pandas.io.formats.style import Styler

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    body = str(fold("Per pair", _table(), Styler(pd.DataFrame({"x": [1.5]})), fig, None,
                    "**bold** text", note="Why it matters."))
    assert body.startswith('<details class="cflib-fold"><summary>Per pair</summary>')
    assert body.index("Why it matters.") < body.index("<table")
    assert "paper 0.700" in body                               # a page table, formatted
    assert body.count("data:image/png;base64,") == 1 and "<strong>bold</strong>" in body
    assert not plt.fignum_exists(fig.number)                    # closed: not shown twice
    with pytest.raises(TypeError, match="cannot show a list"):
        fold("x", [1, 2])


def test_verdicts_fold_what_holds_and_format_the_full_table():
    checks = pd.DataFrame([
        {"expectation": "A beats B", "verdict": "holds", "value": 0.76, "other": "B",
         "other value": 1.77, "source": "paper", "why": None, "significant": True},
        {"expectation": "A is valid", "verdict": "fails", "value": 0.5, "other": "",
         "other value": np.nan, "source": "paper", "why": "below", "significant": False},
    ])
    body = str(verdicts(checks))
    shown, folded = body.split('<details class="cflib-fold">', 1)
    assert "A is valid" in shown and "A beats B" not in shown and "A beats B" in folded
    assert "✓ 1 holds: the list" in folded
    full = body.split("<summary>The full table</summary>")[1]
    cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", full)
    assert cells and not {"NaN", "nan", "None", "True", "False"} & set(cells)
    assert "yes" in cells and "–" in cells
    assert "nan" not in repr(verdicts(checks))                 # a missing reason: none


@pytest.mark.parametrize("v, table, prose", [
    (0.072, "0.0720", "0.072"), (0.3294, "0.329", "0.329"), (1.0, "1", "1"),
    (62851.2, "62,851", "62,851"), (2.4e-4, "2.40e-04", "2.40e-04"), (float("nan"), "–", "–"),
    (None, "–", "–"), (12, "12", "12"), (0.9, "0.900", "0.9")])
def test_tables_and_prose_round_a_number_alike(v, table, prose):
    """One number format: a table cell and the prose round a value the same way; the prose
    only drops trailing zeros (the paper's 0.072 is not printed as 0.0720)."""
    from cflib.book.report.discussion import f
    from cflib.book.report.display import fmt

    assert fmt(v) == table and f(v) == prose


def test_a_markdown_table_is_one_line_per_row_unpadded():
    from cflib.book.report.display import markdown

    cells = pd.DataFrame({"IM1": ["0.6 / 0.7", "1.1"], "FID": ["12", "–"]},
                         index=pd.Index(["C3LT", "Adv. Attack"]))
    assert markdown(cells, index="method").splitlines() == [
        "| method | IM1 | FID |", "|---|---|---|",
        "| C3LT | 0.6 / 0.7 | 12 |", "| Adv. Attack | 1.1 | – |"]
    assert markdown(cells).splitlines()[0] == "| IM1 | FID |"
