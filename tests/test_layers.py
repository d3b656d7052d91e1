"""The package's layers, read off the sources: imports point down only, and no circle.

``cflib`` (the core a user imports: tensors, scopes, cache, models, training, explainers,
metrics, quantization) imports nothing from ``cflib.bench`` (the benchmark harness) or
``cflib.book`` (the book and its tools); ``cflib.bench`` imports nothing from
``cflib.book``.  Every import counts, function-local ones included, and importing
``a.b.c`` counts as importing the packages ``a.b`` and ``a`` too (Python runs their
``__init__`` first).
"""
import ast
from pathlib import Path

import pytest

from cflib.definitions import strip_docstrings

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "cflib"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _resolve(base: str, name: str | None = None) -> str | None:
    """The cflib module an import names (``from base import name``)."""
    if name and f"{base}.{name}" in MODULES:
        return f"{base}.{name}"
    return base if base in MODULES else None


def import_graph() -> dict[str, set[str]]:
    """module -> the cflib modules it imports (anywhere in its body), with their packages."""
    graph = {}
    for mod, path in MODULES.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [_resolve(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [_resolve(node.module, a.name) for a in node.names]
            for t in filter(None, targets):
                if not t.startswith("cflib"):
                    continue
                edges.update([t, *_ancestors(t)])
        own = set(_ancestors(mod)) | {mod}
        graph[mod] = {e for e in edges if e not in own}
    return graph


def layer(name: str) -> str:
    if name.startswith("cflib.book"):
        return "book"
    if name.startswith("cflib.bench"):
        return "bench"
    return "core"


RANK = {"core": 0, "bench": 1, "book": 2}


def test_the_graph_is_read():
    graph = import_graph()
    assert "cflib.explainers.base" in graph["cflib.explainers.c3lt"]
    assert "cflib.bench.catalog" in graph["cflib.bench.tables.c3lt"]
    assert len(graph) >= 40


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down(name):
    graph = import_graph()
    up = sorted(t for t in graph[name] if RANK[layer(t)] > RANK[layer(name)])
    assert not up, f"{name} ({layer(name)}) imports from a layer above it: {up}"


def test_the_book_runs_its_pages_and_the_pages_do_not_run_the_book():
    """Inside ``cflib.book``: ``runs`` (executing chapters) imports ``report`` (what a page
    shows), never the reverse; the paths both need live in ``cflib.book.chapters``."""
    graph = import_graph()
    report = [m for m in graph if m.startswith("cflib.book.report")]
    assert len(report) >= 5
    up = {m: sorted(t for t in graph[m] if t.startswith("cflib.book.runs")) for m in report}
    assert not {m: t for m, t in up.items() if t}, up
    assert any(t.startswith("cflib.book.report") for m in graph
               if m.startswith("cflib.book.runs") for t in graph[m])


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph: its strongly connected components of more than one
    module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert not circles(import_graph()), f"import circles: {circles(import_graph())}"


def _code(path: Path) -> str:
    """A module's code without its docstrings (they may point a reader to the harness)."""
    tree = strip_docstrings(ast.parse(path.read_text()))
    return ast.unparse(tree)


def test_the_core_knows_no_dataset_or_profile():
    """The library a user imports never names the book's datasets, profiles or layers."""
    hits = []
    for name, path in MODULES.items():
        if layer(name) != "core":
            continue
        text = _code(path)
        for word in ("get_profile", "canonical_dataset", "CF_PAIRS", "cflib.bench", "cflib.book"):
            if word in text:
                hits.append(f"{name}: {word}")
    assert not hits, hits


def test_a_circle_is_caught(tmp_path, monkeypatch):
    """The check can fail: two modules importing each other (one inside a function) are a
    circle, and a core module importing the harness points up."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    from cflib.b import g\n")
    b.write_text("from cflib.a import f\nimport cflib.bench.zoo\n")
    monkeypatch.setitem(MODULES, "cflib.a", a)
    monkeypatch.setitem(MODULES, "cflib.b", b)
    graph = import_graph()
    assert graph["cflib.a"] == {"cflib.b"}
    assert ["cflib.a", "cflib.b"] in circles(graph)
    assert any(layer(t) == "bench" for t in graph["cflib.b"])
