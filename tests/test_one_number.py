"""One claim, one number (issue 42, item 2): the README's results block, the *Results at a
glance* page and each chapter's verdict and discussion quote a headline claim with the
same value in the same rounding, read from the committed results.

The C3LT chapters were swept over training seeds: their claims are the seed means (as
their tables), and the value of training seed 0 alone, where it rounds differently, must
appear in none of those texts.  The Bayesian and quantization chapters ran once: their
one value everywhere.
"""
from __future__ import annotations

import pytest

from cflib.bench.data import PROJECT_ROOT
from cflib.book.report.discussion import discussion_text, f, pct, readings_for
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
