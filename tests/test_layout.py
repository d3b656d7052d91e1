"""The project's layout rules, checked on the sources: sizes live in profiles, notebooks
only call the library, and the lint rules hold."""
import ast
import re

from cflib.bench.data import PROJECT_ROOT

NOTEBOOKS = sorted((PROJECT_ROOT / "notebooks").glob("*.py"))
LIBRARY = sorted((PROJECT_ROOT / "cflib").rglob("*.py"))


def test_no_size_branches_on_profile_names():
    hits = [f"{p.relative_to(PROJECT_ROOT)}:{i}" for p in LIBRARY
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"profile\.name\s*[!=]=", line)]
    assert not hits, f"sizes belong in cflib/profiles.py, not in branches on the name: {hits}"


#: the one thing a chapter may define: "Benchmark your own method" defines, in the page,
#: the reader's method it benchmarks (a class and its methods; nothing else)
USER_METHODS = {"your_method.py": {"NearestUnlikeNeighbour"}}


def test_notebooks_only_call_the_library():
    assert NOTEBOOKS
    for nb in NOTEBOOKS:
        tree = ast.parse(nb.read_text())
        allowed = [n for n in tree.body if isinstance(n, ast.ClassDef)
                   and n.name in USER_METHODS.get(nb.name, ())]
        inside = {id(d) for c in allowed for d in ast.walk(c)}
        defs = [n.name for n in ast.walk(tree) if id(n) not in inside
                and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        assert not defs, f"{nb.name} defines {defs}: move them into cflib"
        for name in USER_METHODS.get(nb.name, ()):
            assert name in {c.name for c in allowed}, f"{nb.name} no longer defines {name}"
        calls = {n.func.attr for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        assert not calls & {"to_csv", "to_json", "savefig", "write_text"}, \
            f"{nb.name} writes files itself; use cflib.results"
