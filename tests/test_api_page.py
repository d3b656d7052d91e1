"""The API reference page (``book/api.md``): in the table of contents, documenting every
explainer of ``EXPLAINERS`` with its config, and its config tables read the fields'
comments (the book build itself runs in ``make book``)."""
import dataclasses
import re
import sys
from pathlib import Path

import pytest

from cflib.explainers import EXPLAINERS, CEMConfig, WachterConfig

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "api.md"


def documented() -> set[str]:
    """The objects the page's autodoc directives name."""
    return set(re.findall(r"^\.\. auto(?:class|function|data|module):: (\S+)",
                          PAGE.read_text(), re.M))


def test_the_page_is_in_the_toc_before_the_references():
    toc = (ROOT / "_toc.yml").read_text()
    assert "file: book/api\n" in toc
    assert toc.index("book/api") < toc.index("book/references")


def test_every_explainer_and_its_config_is_on_the_page():
    import cflib.explainers as ex

    names = documented()
    missing = []
    for cls in EXPLAINERS.values():
        for obj in (cls, cls.Config):
            public = f"cflib.explainers.{obj.__name__}"
            where = f"{obj.__module__}.{obj.__name__}"
            if getattr(ex, obj.__name__, None) is not obj:
                public = where
            if not {public, where} & names:
                missing.append(public)
    assert not missing, f"book/api.md does not document {sorted(set(missing))}"
    for name in ("cflib.explainers.Counterfactuals", "cflib.explainers.FitRecord",
                 "cflib.metrics.MetricSpec", "cflib.bench.catalog.build"):
        assert name in names


def test_config_tables_read_the_fields_comments():
    pytest.importorskip("docutils")
    sys.path.insert(0, str(ROOT / "_ext"))
    try:
        from cflib_api import _config_table, field_comments
    finally:
        sys.path.remove(str(ROOT / "_ext"))
    notes = field_comments(CEMConfig)
    assert notes["batch_size"] == "images pushed through the model at once"   # the base's
    assert notes["clip"] == ("element-wise gradient clipping (alibi's default; the "
                             "reference code has none)")                      # continued
    assert notes["kappa"] == "logit margin of the target over every other class"
    assert field_comments(WachterConfig)["compact"].endswith("update only the unfinished: "
                                                             "same result)")
    rows = _config_table(WachterConfig)
    assert len([r for r in rows if r.startswith("   * - ``")]) == len(
        dataclasses.fields(WachterConfig))
    assert any("lambda <- lambda \\* lam\\_factor" in r for r in rows)   # escaped for rST
