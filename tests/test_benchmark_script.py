"""The throughput benchmark knows every method of the catalog before it measures anything."""
import importlib.util
from pathlib import Path

import pytest

from cflib.bench import catalog

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def throughput():
    spec = importlib.util.spec_from_file_location("throughput", ROOT / "benchmarks" / "throughput.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_catalog_method_is_benchmarked_with_its_tables_classifier(throughput):
    """The benchmark reads each method's setting from the catalog: the table whose
    classifier and data the method is run with in the book."""
    from cflib.bench.tables import bayes, c3lt

    for m in c3lt.C3LT_METHODS:
        assert throughput.SETTING[m] == "c3lt", m
    for m in bayes.BAYES_METHODS:
        assert throughput.SETTING[m] == "bayes", m
    assert throughput.SETTING["Latent PGD"] == "quant"
    assert set(throughput.SETTING) == set(catalog.CATALOG)
    assert set(throughput.COMPACTING) == {"Wachter", "BayesCF", "ROAR", "Schut", "PSCE"}
    assert "C3LT" not in throughput.ITERATIVE and "Latent search" in throughput.ITERATIVE


def test_a_method_without_a_setting_is_refused_before_any_measurement(throughput, monkeypatch):
    monkeypatch.setattr(throughput, "measure_peak", lambda *a: pytest.fail("measured"))
    monkeypatch.delitem(throughput.SETTING, "C3LT (inverted)")
    with pytest.raises(SystemExit, match="no benchmark setting"):
        throughput.main(["--methods", "C3LT", "C3LT (inverted)"])
