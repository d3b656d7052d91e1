"""A Sphinx extension of the book: the API reference page (``book/api.md``).

* the checkout the book is built from (its folder or the nearest one above holding
  ``cflib/`` and ``pyproject.toml``) is put first on ``sys.path``, so that autodoc
  documents that ``cflib``, not another installed copy;
* a method's config (a frozen dataclass of :class:`cflib.explainers.ExplainerConfig`)
  gets a table of its fields: name, type, default and the comment written beside the
  field in the source (the comments are the fields' documentation);
* ``{cflib-metric-specs}`` renders every registered :class:`cflib.metrics.MetricSpec`
  as a table, ``{cflib-mapping} module.NAME`` a ``dict`` of text by key (the catalog's
  ``DATA_KEYS``).

Its tables have the class ``cflib-api-table`` (``_static/cflib.css``: the column widths
given, long names broken inside a cell, never wider than the text column).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
import re
import sys
import textwrap
import tokenize
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList


def _rst(text: str) -> str:
    """Plain text safe inside reStructuredText (no markup of its own)."""
    for ch in "\\*`|_":
        text = text.replace(ch, "\\" + ch)
    return text


def field_comments(cls) -> dict[str, str]:
    """``field -> comment`` of a dataclass and its bases: the comment after ``name: type =
    default`` and the comment-only lines below it that start right of the field (its
    continuation); a comment at the field's own indentation is a header, not a
    continuation."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass.__module__ == "builtins":
            continue
        try:
            src = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        own = set(klass.__dict__.get("__annotations__", {}))
        lines = src.splitlines()
        comments = {}          # line number -> (column, text) of every comment
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = (tok.start[1], tok.string.lstrip("#: ").strip())
        for i, line in enumerate(lines, start=1):
            stripped = line.strip()
            name = stripped.split(":", 1)[0].strip()
            if name not in own or ":" not in stripped or line[:1].strip():
                continue
            indent = len(line) - len(line.lstrip())
            if i not in comments or comments[i][0] == indent:
                continue
            parts, j = [comments[i][1]], i + 1
            while (j in comments and not lines[j - 1][:comments[j][0]].strip()
                   and comments[j][0] > indent):
                parts.append(comments[j][1])
                j += 1
            out[name] = " ".join(p for p in parts if p)
    return out


def _config_table(cls) -> list[str]:
    """The fields' table; without the meaning column when most fields have no comment
    (their docstring describes them)."""
    notes, fs = field_comments(cls), dataclasses.fields(cls)
    meaning = sum(bool(notes.get(f.name)) for f in fs) > len(fs) // 2
    rows = [".. list-table:: Fields", "   :header-rows: 1", "   :class: cflib-api-table",
            "   :widths: 18 14 14 54" if meaning else "   :widths: 30 35 35", "",
            "   * - field", "     - type", "     - default"] + (["     - meaning"] * meaning)
    for f in fs:
        default = f.default if f.default is not dataclasses.MISSING else "(required)"
        rows += [f"   * - ``{f.name}``", f"     - {_rst(str(f.type))}",
                 f"     - ``{default!r}``"]
        if meaning:
            rows.append(f"     - {_rst(notes.get(f.name, ''))}")
    return rows


def _process_docstring(app, what, name, obj, options, lines):
    if what != "class" or not inspect.isclass(obj) or not dataclasses.is_dataclass(obj):
        return
    from cflib.explainers.base import ExplainerConfig

    if not issubclass(obj, ExplainerConfig):
        return
    if lines and lines[0].startswith(obj.__name__ + "("):
        del lines[:]                    # the signature dataclasses writes as a docstring
    lines += ["", *_config_table(obj), ""]


def _process_signature(app, what, name, obj, options, signature, return_annotation):
    """A signature as Python can parse it (else Sphinx splits it at every comma): a
    function default by its name instead of ``<function name>``; for a dataclass, the
    annotations unquoted and the default a ``default_factory`` makes instead of
    ``<factory>``."""
    if not signature:
        return None
    sig = re.sub(r"<function (\w+)[^>]*>", r"\1", signature)
    if what == "class" and dataclasses.is_dataclass(obj):
        sig = re.sub(r": '([^']*)'", r": \1", sig)
        for f in dataclasses.fields(obj):
            if f.init and f.default_factory is not dataclasses.MISSING:
                sig = sig.replace("<factory>", repr(f.default_factory()), 1)
    return sig, return_annotation


class _Table(Directive):
    def emit(self, rows: list[str]) -> list[nodes.Node]:
        node = nodes.container()
        self.state.nested_parse(StringList(rows), self.content_offset, node)
        return node.children


class MetricSpecs(_Table):
    """Every registered metric spec: name, direction, scale, what it reads, meaning."""

    #: the metric modules, in the page's order; a spec is listed under the module that
    #: declares it (specs registered otherwise come last, in registration order)
    MODULES = ("basic", "plausibility", "distribution", "aupc", "robustness", "recourse")

    def run(self):
        from cflib.metrics import SPECS, MetricSpec

        where = {}
        for mod in self.MODULES:
            m = importlib.import_module(f"cflib.metrics.{mod}")
            for v in vars(m).values():
                if isinstance(v, MetricSpec) and SPECS.get(v.name) is v:
                    where.setdefault(v.name, mod)
        order = {m: i for i, m in enumerate(self.MODULES)}
        specs = sorted(SPECS.values(), key=lambda s: order.get(where.get(s.name), len(order)))
        rows = [".. list-table:: Metric specs (``cflib.metrics.SPECS``)", "   :header-rows: 1", "   :class: cflib-api-table",
                "   :widths: 16 8 8 12 12 44", "",
                "   * - name", "     - best", "     - table scale", "     - needs",
                "     - declared in", "     - meaning"]
        for s in specs:
            scale = "" if s.display_scale == 1.0 else f"x{s.display_scale:g}"
            needs = f"``meta['{s.needs}']``" if s.needs else ""
            mod = f"``{where[s.name]}``" if s.name in where else ""
            meaning = _rst(s.description) + (" (wall clock)" if s.timing else "")
            rows += [f"   * - ``{s.name}``", f"     - {s.direction}", f"     - {scale}",
                     f"     - {needs}", f"     - {mod}", f"     - {meaning}"]
        return self.emit(rows)


class Mapping(_Table):
    """``module.NAME``, a dict of text by key, as a table."""

    required_arguments = 1

    def run(self):
        module, _, attr = self.arguments[0].rpartition(".")
        mapping = getattr(importlib.import_module(module), attr)
        rows = [f".. list-table:: ``{attr}``", "   :header-rows: 1", "   :class: cflib-api-table", "   :widths: 22 78", "",
                "   * - key", "     - what it is"]
        for k, v in mapping.items():
            rows += [f"   * - ``{k}``", f"     - {_rst(str(v))}"]
        return self.emit(rows)


def setup(app):
    src = Path(app.srcdir).resolve()
    for root in (src, *src.parents):   # the book's own checkout (a run's book sits in _build/)
        if (root / "cflib" / "__init__.py").exists() and (root / "pyproject.toml").exists():
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            break
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("autodoc-process-signature", _process_signature)
    app.add_directive("cflib-metric-specs", MetricSpecs)
    app.add_directive("cflib-mapping", Mapping)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
