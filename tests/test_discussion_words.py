"""No discussion template hard-codes a comparison word between two numbers it does not
compare: "0.115 ... below the reconstruction's 0.11" must come from comparing them."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMBER = r"\{\{[^{}]*\|\s*(?:f|pct|d|n0)\b[^{}]*\}\}"
WORDS = r"\b(?:below|above|higher than|lower than|closer than|farther than|more than|" \
        r"less than|fewer than|smaller than|larger than|exceeds?)\b"
#: a comparison word between two numbers of one sentence, with no decision between them
HARD_CODED = re.compile(NUMBER + r"(?P<between>[^{}]{0,80}?" + WORDS + r"[^{}]{0,80}?)" + NUMBER)


def hard_coded(text: str) -> list[str]:
    out = []
    for m in HARD_CODED.finditer(text):
        between = m.group("between")
        if re.search(r"[.;:]\s|\n\s*-|\n\n", between):     # another sentence or bullet
            continue
        out.append(" ".join(m.group(0).split())[:160])
    return out


def test_no_template_hard_codes_a_comparison_between_two_numbers():
    found = {p.name: hard_coded(p.read_text())
             for p in sorted((ROOT / "book" / "discussion").glob("*.md"))}
    found = {k: v for k, v in found.items() if v}
    assert not found, found


def test_the_check_catches_the_sentence_it_was_written_for():
    text = ('at validity {{ t("Validity") | f }}, below the\n  reconstruction\'s '
            '{{ t("Reconstruction_proximity") | f }}, but')
    assert hard_coded(text)
    decided = ('at validity {{ a | f }}, {{ "below" if a < b else "above" }} the '
               "reconstruction's {{ b | f }}")
    assert not hard_coded(decided)


def test_psce_delta_is_called_ours_not_the_papers():
    """PSCE's δ = 0.9 has no source in the paper we could find: the Bayesian page calls
    the main row's setting ours (issue 43); it called it "the paper's setting"."""
    said = [p.name for p in (ROOT / "notebooks" / "mnist_bayesian.py",
                             ROOT / "book" / "discussion" / "mnist_bayesian.md")
            if "paper's setting" in p.read_text()]
    assert not said, said
