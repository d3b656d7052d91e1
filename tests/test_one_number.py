"""One claim, one number (issue 42, item 2): the README's results block, the *Results at a
glance* page and each chapter's verdict and discussion quote a headline claim with the
same value in the same rounding, read from the committed results.

The C3LT chapters were swept over training seeds: their claims are the seed means (as
their tables), and the value of training seed 0 alone, where it rounds differently, must
appear in none of those texts.  The Bayesian and quantization chapters ran once: their
one value everywhere.
"""
from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from cflib.bench.data import PROJECT_ROOT
from cflib.book.report.discussion import discussion_text, f, pct, readings_for
from cflib.book.report.display import fmt
from cflib.book.report.readme import results_page, summary

RESULTS = PROJECT_ROOT / "results"

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def texts():
    return {"README block": summary(RESULTS), "results page": results_page(RESULTS),
            **{ch: discussion_text(ch, RESULTS)
               for ch in ("mnist_eval", "fashion_mnist_test", "mnist_bayesian",
                          "fashion_mnist_quant")}}


@pytest.mark.parametrize("chapter", ["mnist_eval", "fashion_mnist_test"])
@pytest.mark.parametrize("metric", ["Proximity", "IM1", "Validity"])
def test_a_c3lt_claim_has_one_number(texts, chapter, metric):
    r = readings_for(chapter, RESULTS)
    assert r.n_seeds == 3                          # the committed sweep: three seeds
    mean, seed0 = r.m("C3LT", metric), r.v("C3LT", metric)
    said = f(mean)
    assert f"{metric} {said} ±" in texts["README block"]
    assert said in texts["results page"]
    # the chapter's verdict and discussion: proximity and IM1 as numbers, validity as a share
    assert (pct(mean, 0) if metric == "Validity" else said) in texts[chapter]
    if f(seed0) != said and metric != "Validity":   # seed 0 alone would be a second number
        for name in ("README block", chapter):
            assert f(seed0) not in texts[name], (name, metric, f(seed0), said)


@pytest.mark.parametrize("model", ["mc_dropout", "bnn"])
def test_psce_im1_has_one_number(texts, model):
    r = readings_for("mnist_bayesian", RESULTS)
    said = f(r.v("PSCE", "IM1", model=model))
    label = {"mc_dropout": "MC dropout", "bnn": "BNN"}[model]
    assert f"{label} {said} (paper" in texts["README block"]
    assert said in texts["mnist_bayesian"] and said in texts["results page"]


def test_cfq_qat_false_acceptance_has_one_number(texts):
    r = readings_for("fashion_mnist_quant", RESULTS)
    said = pct(r.v("CFQ-QAT", "FA_recon"))
    assert f"false acceptance CFQ-QAT {said}" in texts["README block"]
    assert f"it puts {said} of non-target reconstructions" in texts["fashion_mnist_quant"]


@pytest.mark.parametrize("chapter", ["mnist_eval", "fashion_mnist_test"])
def test_the_ratio_to_the_papers_proximity_has_one_rounding(texts, chapter):
    """"N× the paper's" is computed once and said with one rounding (it was 4.6× in the
    verdict and 4.57× at the end of the same page)."""
    r = readings_for(chapter, RESULTS)
    ratio = r.m("C3LT", "Proximity") / r.paper("C3LT", "Proximity")
    assert f"{f(ratio, 2)}×" in texts[chapter]
    if f(ratio, 3) != f(ratio, 2):
        assert f"{f(ratio, 3)}×" not in texts[chapter]


class _Tables(HTMLParser):
    """Every ``<table>`` of an HTML text: ``[(header, {row name: [cell texts]})]``, a cell's
    text up to its ``<br>`` (the paper's value beneath ours is left out)."""

    def __init__(self):
        super().__init__()
        self.tables, self._cell, self._row, self._cut = [], None, None, False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], {}))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell, self._cut = "", False
        elif tag == "br":
            self._cut = True

    def handle_data(self, data):
        if self._cell is not None and not self._cut:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row:
            header, rows = self.tables[-1]
            if not header:
                header.extend(self._row)
            else:
                rows[self._row[0]] = self._row[1:]


def _transfer_cell(chapter: str, method: str, metric: str) -> str:
    """The cell of ``method`` and ``metric`` in the committed chapter's transfer table."""
    nb = json.loads((PROJECT_ROOT / "book" / "chapters" / f"{chapter}.ipynb").read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            page = "".join(out.get("data", {}).get("text/html", ""))
            if "Every row: each judge" not in page:
                continue
            parser = _Tables()
            parser.feed(page)
            for header, rows in parser.tables:
                if f"{metric} ↑" in header and method in rows:
                    return rows[method][header.index(f"{metric} ↑") - 1]
    raise AssertionError(f"{chapter}: no transfer table with {method} and {metric}")


@pytest.mark.parametrize("chapter", ["mnist_eval", "fashion_mnist_test"])
@pytest.mark.parametrize("metric", ["Diversity", "Query_dependence", "Validity (all judges)"])
def test_the_transfer_table_shows_the_number_the_verdict_quotes(chapter, metric):
    """The verdict quotes C3LT's diversity, query dependence and all-judges validity as the
    mean over the training seeds that have them; the table of every row shows that mean
    (it showed training seed 0 alone while the verdict quoted seeds 0 and 1)."""
    r = readings_for(chapter, RESULTS)
    shown = _transfer_cell(chapter, "C3LT", metric).split(" ±")[0]
    assert shown == fmt(r.m("C3LT", metric), 3), (chapter, metric, shown)
