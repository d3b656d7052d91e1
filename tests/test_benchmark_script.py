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


def test_every_catalog_method_has_a_benchmark_setting(throughput):
    missing = [m for m in catalog.CATALOG if m != "CEM (paper budget)" and m not in throughput.SETTING]
    assert not missing


def test_a_method_without_a_setting_is_refused_before_any_measurement(throughput, monkeypatch):
    monkeypatch.setattr(throughput, "measure_peak", lambda *a: pytest.fail("measured"))
    monkeypatch.delitem(throughput.SETTING, "C3LT (inverted)")
    with pytest.raises(SystemExit, match="no benchmark setting"):
        throughput.main(["--methods", "C3LT", "C3LT (inverted)"])
