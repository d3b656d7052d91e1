"""The library without the book: importing cflib's explainers, metrics and benchmark
runners needs none of the book's plotting packages (matplotlib, seaborn live in the
``book`` extra)."""
import subprocess
import sys

BLOCK = """
import importlib.metadata as md
import sys
BLOCKED = ("matplotlib", "seaborn", "jupyter_book", "papermill")
for name in BLOCKED:            # as if not installed: no module, no distribution
    sys.modules[name] = None
version = md.version
def hidden(name):
    if name.replace("-", "_") in BLOCKED:
        raise md.PackageNotFoundError(name)
    return version(name)
md.version = hidden
import cflib, cflib.explainers, cflib.metrics, cflib.bench, cflib.bench.catalog, cflib.bench.zoo
import cflib.bench.tables.c3lt, cflib.bench.tables.bayes, cflib.bench.tables.quant
import cflib.bench.compare, cflib.shipped, cflib.cache
print("ok")
"""


def test_the_library_imports_without_the_book_extra():
    out = subprocess.run([sys.executable, "-c", BLOCK], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_the_plotting_packages_are_the_book_extra():
    import tomllib
    from pathlib import Path

    meta = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    deps = " ".join(meta["project"]["dependencies"])
    assert "matplotlib" not in deps and "seaborn" not in deps
    assert any(d.startswith("matplotlib") for d in meta["project"]["optional-dependencies"]["book"])
