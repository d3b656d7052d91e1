"""The install files agree: environment.yml pins what pyproject.toml pins."""
import re
import tomllib

from cflib.bench.data import PROJECT_ROOT


def test_environment_yml_matches_pyproject():
    meta = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    env = (PROJECT_ROOT / "environment.yml").read_text()
    pins = [d for d in meta["dependencies"] if "==" in d]
    assert pins, "pyproject.toml pins torch and torchvision"
    for pin in pins:
        assert re.search(rf"^\s*- {re.escape(pin)}\s*$", env, re.M), pin
    for extra in ("jupyter-book<2", "jupytext", "papermill"):
        assert extra in env
