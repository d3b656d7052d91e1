"""cflib's code as definitions, each with a digest: the one place that says what a change
of code is.

A module is cut into **units** and a **skeleton**:

* a unit is a function or method whose every enclosing node is the module or a class
  (``proximity``, ``CEM.explain``, ``Profile.nets`` for a property): its whole node
  (decorators, signature, default arguments, body; nested functions, lambdas and
  comprehensions inside it are part of it);
* the skeleton (``<module>``) is everything else: imports, module constants, class
  statements with their bases, decorators and class attributes, lambdas in module-level
  values (a ``MetricSpec``'s), but none of the units.

Each digest is the sha256 of the node's syntax tree without docstrings
(:func:`strip_docstrings`), so an edit of a comment, a docstring or the layout changes
nothing, and a unit appended to a module changes no other unit nor the skeleton.
:func:`definitions` cuts a module at its top level instead (a class whole, each entry of a
dict literal apart): the granularity :mod:`cflib.provenance` records for a network's
training code.  Both share the stripper and the digest.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent
#: the key of a module's skeleton among its units
SKELETON = "<module>"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)

__all__ = ["strip_docstrings", "digest", "definitions", "Unit", "ModuleCode", "module_code",
           "unit_digests", "key_digest", "key_lines", "unit_shapes", "SKELETON", "PACKAGE",
           "CHECKOUT"]


def strip_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` without the docstring of any module, class or function (in place)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def digest(node: ast.AST) -> str:
    """sha256 (12 hex) of a syntax tree (without line numbers: a definition moved within
    its file keeps its digest)."""
    return hashlib.sha256(ast.dump(node).encode()).hexdigest()[:12]


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def definitions(path: Path | None = None, text: str | None = None) -> dict[str, str]:
    """Digest of each top-level definition of a module (function, class, assignment; each
    entry of a dict literal apart, ``NAME['key']``).  Imports and ``__all__`` are left out."""
    text = Path(path).read_text() if text is None else text
    try:
        tree = strip_docstrings(ast.parse(text))
    except SyntaxError:
        return {"<module>": _text_digest(text)}
    out: dict[str, str] = {}
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, (*_DEFS, ast.ClassDef)):
            out[node.name] = digest(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = ast.unparse(t)
                if name == "__all__":
                    continue
                value = node.value
                if (isinstance(value, ast.Dict) and value.keys
                        and all(isinstance(k, ast.Constant) for k in value.keys)):
                    for k, v in zip(value.keys, value.values):
                        out[f"{name}[{k.value!r}]"] = digest(v)
                else:
                    out[name] = digest(node)
        else:
            out[f"<statement {i}>"] = digest(node)
    return out


@dataclass(frozen=True)
class Unit:
    """One unit of a module: its qualified name, its lines (first decorator to last line)
    and the digest of its node."""

    name: str
    first: int
    last: int
    digest: str


@dataclass(frozen=True)
class ModuleCode:
    """A module cut into units and its skeleton, and the cflib modules it imports (at
    module level, and inside each unit)."""

    units: tuple[Unit, ...]
    skeleton: str
    imports: tuple[str, ...]                  # module-level imports (dotted names)
    unit_imports: dict                        # unit name -> dotted names it imports

    def digests(self) -> dict[str, str]:
        return {SKELETON: self.skeleton, **{u.name: u.digest for u in self.units}}

    def unit_at(self, line: int) -> str | None:
        """The innermost unit whose lines hold ``line`` (None: the skeleton's)."""
        best = None
        for u in self.units:
            if u.first <= line <= u.last and (best is None or u.first >= best.first):
                best = u
        return best.name if best else None


def _imported(node: ast.AST, package: str) -> list[str]:
    """Dotted cflib module names an import node names (relative imports resolved against
    ``package``; ``from a import b`` names ``a`` and ``a.b``, one of which is a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "cflib"]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[:len(parts) - node.level + 1]
            base = ".".join(p for p in [*parts, base] if p)
        if base.split(".")[0] != "cflib":
            return []
        return [base, *(f"{base}.{a.name}" for a in node.names)]
    return []


def _parse(text: str, package: str) -> ModuleCode:
    try:
        tree = strip_docstrings(ast.parse(text))
    except SyntaxError:
        return ModuleCode((), _text_digest(text), (), {})
    units: list[Unit] = []
    unit_imports: dict[str, tuple[str, ...]] = {}

    def cut(body: list, prefix: str) -> list:
        kept = []
        for node in body:
            if isinstance(node, _DEFS):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                name = prefix + node.name
                units.append(Unit(name, first, node.end_lineno, digest(node)))
                unit_imports[name] = tuple(m for sub in ast.walk(node)
                                           for m in _imported(sub, package))
                continue
            if isinstance(node, ast.ClassDef):
                node.body = cut(node.body, f"{prefix}{node.name}.") or [ast.Pass()]
            kept.append(node)
        return kept

    tree.body = cut(tree.body, "")
    imports = tuple(m for node in ast.walk(tree) for m in _imported(node, package))
    return ModuleCode(tuple(units), digest(tree), imports, unit_imports)


@lru_cache(maxsize=512)
def _module_code(path: str, mtime_ns: int, size: int, package: str) -> ModuleCode:
    return _parse(Path(path).read_text(), package)


def module_code(path: Path | str, text: str | None = None) -> ModuleCode:
    """:class:`ModuleCode` of the module at ``path`` (relative to the checkout, or
    absolute); of ``text`` when given (a file as it was at another commit)."""
    p = Path(path)
    full = p if p.is_absolute() else CHECKOUT / p
    try:
        package = ".".join(full.resolve().relative_to(CHECKOUT).parts[:-1])
    except ValueError:
        package = ""
    if text is not None:
        return _parse(text, package)
    st = full.stat()
    return _module_code(str(full), st.st_mtime_ns, st.st_size, package)


def unit_digests(path: Path | str, text: str | None = None) -> dict[str, str]:
    """``{unit name: digest, SKELETON: digest}`` of a module (or of ``text``)."""
    return module_code(path, text).digests()


def key_digest(key: str, root: Path = CHECKOUT, text: str | None = None) -> str:
    """Today's digest of ``"cflib/x.py::name"``: a unit or the skeleton
    (:func:`unit_digests`), else a top-level definition (:func:`definitions`: a class
    whole, a dict entry ``NAME['key']``, as a network's provenance records them);
    ``missing`` when its module or the name is gone.  ``text``: the module as it was."""
    module, _, name = key.partition("::")
    path = Path(root) / module
    if text is None:
        if not path.exists():
            return "missing"
        units = module_code(path).digests()
    else:
        units = module_code(path, text).digests()
    if name in units:
        return units[name]
    return definitions(path if text is None else None, text).get(name, "missing")


def key_lines(text: str, name: str) -> tuple[int, int] | None:
    """The lines (first, last) of ``name`` in a module's ``text``: a unit, a top-level
    definition or dict entry; the whole module for the skeleton; None when absent."""
    if name == SKELETON:
        return (1, max(1, len(text.splitlines())))
    code = module_code("x.py", text)
    for u in code.units:
        if u.name == name:
            return (u.first, u.last)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    base, _, entry = name.partition("[")
    for node in tree.body:
        if isinstance(node, (*_DEFS, ast.ClassDef)) and node.name == name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return (first, node.end_lineno)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if base not in [ast.unparse(t) for t in targets]:
                continue
            if entry and isinstance(node.value, ast.Dict):
                for k, v in zip(node.value.keys, node.value.values):
                    if isinstance(k, ast.Constant) and f"{k.value!r}]" == entry:
                        return (k.lineno, v.end_lineno)
            return (node.lineno, node.end_lineno)
    return None


def _anonymous(node: ast.AST) -> str:
    import copy

    node = copy.deepcopy(node)
    node.name = "_"
    return digest(node)


def unit_shapes(text: str) -> dict[str, str]:
    """``{digest of the unit with its name left out: unit name}`` of a module's units and
    classes, a class whole (a unit or a class moved to another module, or renamed, keeps
    this digest)."""
    try:
        tree = strip_docstrings(ast.parse(text))
    except SyntaxError:
        return {}
    out = {}

    def walk(body, prefix):
        for node in body:
            if isinstance(node, _DEFS):
                out[_anonymous(node)] = prefix + node.name
            elif isinstance(node, ast.ClassDef):
                out[_anonymous(node)] = prefix + node.name
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return out
