"""How the book's tables and checks are shown on a page.

The functions of :mod:`cflib.book.report.tables` return numbers (DataFrames a reader can
also save); the ones here turn them into what a page shows:

* :func:`page_table`: one cell per metric, our value with the paper's beneath it (only
  where the paper has values), ``mean ± sd`` where a spread exists, better-direction
  arrows in the headers, right-aligned numbers with consistent significant digits, the
  method column kept in view while the table scrolls (CSS class ``cflib-table``);
* :func:`verdicts`: a shape-check table as a verdict list, failures first, with the
  values, the interval and why a comparison was or was not tested; the full table
  folded beneath it.
"""
from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

from cflib.metrics.spec import SPECS

#: the text column of the book at desktop width, in CSS pixels, and the width of an
#: average character of a table (0.85 em of 16 px)
COLUMN_PX = 780
CHAR_PX = 7.0
#: headers and row labels are bold <th> cells: wider per character
BOLD_CHAR_PX = 8.3
#: the text column on a phone (400 px screen: 385 px at 0.78 em, ~418 px of the desktop
#: font), less a margin; there, row labels wrap at about 10 characters and headers at
#: their words (``cflib.css``)
NARROW_PX = 420
NARROW_LABEL_CHARS = 10


def fmt(v, digits: int = 3, count: bool = True, trim: bool = False) -> str:
    """A number with ``digits`` significant digits, thousands separated, no exponent
    below 1e6 ('–' when missing): the book's one number format.  A whole number prints as
    a count (``12``, ``1,000``) unless ``count=False`` (a column of measurements: ``1.00``
    beside ``0.953``).  ``trim=True`` (prose) drops trailing zeros, so a value the paper
    printed as ``0.072`` is not given a precision it never had (``0.0720``); the rounding
    is the same."""
    if v is None or isinstance(v, str):
        return "–" if v is None else v
    if v is pd.NA or v is pd.NaT:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(x):
        return "–"
    if x == 0:
        return "0" if count else f"{0:.{digits - 1}f}"
    if count and x.is_integer() and abs(x) < 1e6:
        return f"{int(x):,}"
    a = abs(x)
    if a >= 10 ** digits:
        return f"{x:,.0f}" if a < 1e6 else f"{x:.{digits - 1}e}"
    if a < 1e-3:
        return f"{x:.{digits - 1}e}"
    decimals = max(digits - 1 - int(math.floor(math.log10(a))), 0)
    s = f"{x:.{decimals}f}"
    return s.rstrip("0").rstrip(".") if trim and "." in s else s


def markdown(cells: pd.DataFrame, index: str | None = None) -> str:
    """A frame of ready-made cells as a markdown (pipe) table: its header, a rule, a line per
    row; with ``index``, the index first, under that title.  Every markdown table the
    book writes goes through here.  Unpadded: ``DataFrame.to_markdown`` pads each cell to
    its column's width, which would put hundreds of spaces into the README's results
    block (one long cell per row)."""
    frame = cells.reset_index(names=index) if index is not None else cells

    def line(values) -> str:
        return "| " + " | ".join(str(v) for v in values) + " |"

    return "\n".join([line(frame.columns), "|" + "---|" * len(frame.columns),
                      *(line(r) for r in frame.itertuples(index=False))])


def _arrows() -> dict[str, str]:
    """Column title -> the metric's better-direction arrow."""
    out = {}
    for spec in SPECS.values():
        out.setdefault(spec.title, spec.arrow)
        out.setdefault(spec.name, spec.arrow)
    return out


def _is_count(values) -> bool:
    """Are the numbers of a column all whole (counts, not measurements)?"""
    nums = [float(v) for v in values if isinstance(v, (int, float, np.number))
            and not isinstance(v, (bool, np.bool_)) and math.isfinite(float(v))]
    return all(x.is_integer() for x in nums)


def _header(title: str, arrows: dict) -> str:
    # "FID (FeatureNet)", "KID (x1e3, FeatureNet)": the metric's arrow
    arrow = arrows.get(title) or arrows.get(title.split(" (")[0], "")
    return f"{title} {arrow}".strip()


class Page:
    """An HTML fragment a notebook shows as its output (``_repr_html_``); ``plain``, the
    part its text form shows (the body without its phone-only copy), if not all of it."""

    def __init__(self, body: str, plain: str | None = None):
        self.body = body
        self.plain = body if plain is None else plain

    def _repr_html_(self) -> str:
        return self.body

    def __str__(self) -> str:
        return self.body

    def __repr__(self) -> str:
        """Its text without the markup (what a terminal or a text-only reader shows), so
        that the same page prints the same way in every run."""
        import re

        text = re.sub(r"<br\s*/?>|</(?:tr|li|p|caption|summary)>", "\n", self.plain)
        text = html.unescape(re.sub(r"<[^>]+>", " ", text))
        lines = [" ".join(line.split()) for line in text.split("\n")]
        return "\n".join(line for line in lines if line)


def row_anchor(label: str) -> str:
    """The id of a row's one-line definition on a page (``row-`` and the label's words):
    the target of that row's name in a :func:`page_table` with ``links``."""
    import re

    slug = re.sub(r"[^a-z0-9]+", "-", str(label).lower()).strip("-")
    if not slug:
        raise ValueError(f"row label {label!r} has no letters or digits to name its anchor")
    return "row-" + slug


def page_table(table: pd.DataFrame, digits: int = 3, caption: str | None = None,
               width: int = COLUMN_PX, links=None, highlight=()) -> Page:
    """A report table (columns ``(metric, part)``) as a page table.

    Parts ``ours`` and ``paper`` become one cell: ours, and the paper's value beneath it
    in grey where the paper reports one (a metric without any paper value shows ours
    only); ``mean`` with ``± sd`` becomes ``mean ± sd``; ``ours`` with ``±`` becomes
    ``ours ± spread``; ``low``/``high`` become an interval beneath.  Other parts stay
    their own columns.  Flat columns are shown as they are.  A table wider than
    ``width`` CSS pixels is split into several, each with the row labels.  A row whose
    label is in ``links`` names a link to its definition on the page
    (``#`` + :func:`row_anchor`; the page places that anchor); a row whose label is in
    ``highlight`` is marked (a user's row beside the book's).
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"page_table takes a DataFrame, got {type(table).__name__}")
    arrows = _arrows()
    # a metric undefined in every row (e.g. query dependence on too few images) is left
    # out rather than shown as a column of dashes
    level = table.columns.get_level_values(0)
    undefined = {m for m in level if table.loc[:, level == m].isna().all().all()}
    table = table.loc[:, [m not in undefined for m in level]]
    rows = list(table.index)
    cols = (_grouped_columns(table, rows, digits, arrows)
            if isinstance(table.columns, pd.MultiIndex) else _flat_columns(table, digits, arrows))
    name = table.index.name or ""
    labels = [" / ".join(map(str, r)) if isinstance(r, tuple) else str(r) for r in rows]
    wide = _chunks(cols, [name, *labels], width)
    narrow = _chunks(cols, [name, *labels], min(width, NARROW_PX), narrow=True)
    linked = set() if links is None else set(map(str, links))
    heads = [f'<a class="cflib-row" href="#{row_anchor(lb)}">{html.escape(lb)}</a>'
             if lb in linked else html.escape(lb) for lb in labels]
    marked = frozenset(map(str, highlight))
    desktop = _tables(cols, name, labels, wide, caption, heads, marked)
    if narrow == wide:
        return Page(desktop)
    # a phone gets the same cells in narrower tables; the page shows one or the other
    phone = _tables(cols, name, labels, narrow, caption, heads, marked)
    return Page(f'<div class="cflib-wide">{desktop}</div>'
                f'<div class="cflib-narrow">{phone}</div>', plain=desktop)


def _cell(sub: pd.DataFrame, r, main: str, parts: list, digits: int, paper_whole: bool,
          whole: bool) -> str:
    """One metric's cell of row ``r``: ours (``± sd`` or ``±`` beside it), and beneath it
    in grey the interval, the count it is of, and the paper's value."""
    text = fmt(sub.loc[r, main], digits, whole)
    for spread in ("± sd", "±"):
        if spread in parts:
            sd = sub.loc[r, spread]
            text += "" if pd.isna(sd) else f" ± {fmt(sd, 2)}"
    extra = ""
    if "low" in parts and "high" in parts and not pd.isna(sub.loc[r, "low"]):
        extra = f"[{fmt(sub.loc[r, 'low'], 2)}, {fmt(sub.loc[r, 'high'], 2)}]"
    if "of" in parts and not pd.isna(sub.loc[r, "of"]):
        extra = (extra + " " if extra else "") + f"of {fmt(sub.loc[r, 'of'], digits)}"
    if "paper" in parts and not sub["paper"].isna().all():
        p = sub.loc[r, "paper"]
        extra = (extra + " " if extra else "") + (
            f"paper {fmt(p, digits, paper_whole)}" if not pd.isna(p) else "")
    return html.escape(text) + (f'<br><span class="paper">{html.escape(extra)}</span>'
                                if extra else "")


def _grouped_columns(table: pd.DataFrame, rows: list, digits: int, arrows) -> dict:
    """The page columns of a table of ``(metric, part)`` columns: one cell per metric
    where it has ours or a mean (:func:`_cell`), its other parts their own columns."""
    cols: dict[str, list[str]] = {}
    for m in dict.fromkeys(table.columns.get_level_values(0)):
        sub = table[m]
        parts = list(sub.columns)
        head = _header(m, arrows)
        main = "ours" if "ours" in parts else "mean" if "mean" in parts else None
        used = set()
        if main is not None:
            whole = _is_count(sub[main])
            paper_whole = "paper" in parts and _is_count(sub["paper"])
            cols[head] = [_cell(sub, r, main, parts, digits, paper_whole, whole) for r in rows]
            used = {main, "± sd", "±", "low", "high", "paper", "of"}
        for part in parts:
            if part in used:
                continue
            whole = _is_count(sub[part])
            cols[f"{head} {part}" if main is not None else f"{m} {part}"] = [
                html.escape(fmt(sub.loc[r, part], digits, whole)) for r in rows]
    return cols


def _flat_columns(table: pd.DataFrame, digits: int, arrows) -> dict:
    """The page columns of a table of flat columns, as they are (long text marked)."""
    cols: dict[str, list[str]] = {}
    for c in table.columns:
        vals = table[c]
        text = vals.map(lambda v: isinstance(v, str) and len(v) > 24).any()
        whole = _is_count(vals)
        cells = [html.escape(fmt(v, digits, whole)) for v in vals]
        cols[_header(fmt(c) if not isinstance(c, str) else c, arrows)] = (
            [f'<span class="text">{v}</span>' for v in cells] if text else cells)
    return cols


def _tables(cols: dict[str, list[str]], name: str, labels: list[str], chunks,
            caption: str | None, heads: list[str], marked=frozenset()) -> str:
    out = []
    for k, chunk in enumerate(chunks):
        head = "".join(f"<th>{html.escape(h)}</th>" for h in chunk)
        body = []
        for i, label in enumerate(labels):
            cells = "".join(
                f'<td class="text">{cols[h][i]}</td>'
                if cols[h][i].startswith('<span class="text">') else f"<td>{cols[h][i]}</td>"
                for h in chunk)
            mark = ' class="cflib-mark"' if label in marked else ""
            body.append(f"<tr{mark}><th>{heads[i]}</th>{cells}</tr>")
        cap = f"<caption>{html.escape(caption)}</caption>" if caption and k == 0 else ""
        out.append(f'<div class="cflib-scroll"><table class="cflib-table">{cap}<thead><tr>'
                   f"<th>{html.escape(name)}</th>{head}</tr></thead><tbody>{''.join(body)}"
                   "</tbody></table></div>")
    return "".join(out)


def _text_width(cell: str, char_px: float = CHAR_PX) -> float:
    import re

    lines = re.sub(r"<br\s*/?>", "\n", cell)
    lines = re.sub(r"<[^>]+>", "", lines)
    return max((len(html.unescape(x)) for x in lines.split("\n")), default=0) * char_px + 22


def _chunks(cols: dict[str, list[str]], labels: list[str], width: int,
            narrow: bool = False) -> list[list[str]]:
    """Split the columns into tables that each fit ``width`` px beside the label column
    (a text column counts as 16 em).  ``narrow``: the phone's tables, whose row labels
    wrap at :data:`NARROW_LABEL_CHARS` characters and headers at their words."""
    label_w = max(_text_width(html.escape(x), BOLD_CHAR_PX) for x in labels)
    if narrow:
        label_w = min(label_w, NARROW_LABEL_CHARS * BOLD_CHAR_PX + 22)
    out, cur, used = [], [], label_w
    for h, cells in cols.items():
        w = _column_width(h, cells, narrow)             # headers wrap at their words
        if cur and used + w > width:
            out.append(cur)
            cur, used = [], label_w
        cur.append(h)
        used += w
    if cur or not out:
        out.append(cur)
    return _balanced(out, cols, label_w, width, narrow)


def _column_width(h: str, cells: list[str], narrow: bool) -> float:
    if any(c.startswith('<span class="text">') for c in cells):
        return (10 if narrow else 16) * 13.6 + 22
    head = max(h.split(), key=len, default="")
    return max([_text_width(html.escape(head), BOLD_CHAR_PX)] + [_text_width(c) for c in cells])


def _balanced(chunks: list[list[str]], cols, label_w: float, width: int,
              narrow: bool) -> list[list[str]]:
    """The same number of tables with the columns spread evenly (no last table of one
    column), where they still fit ``width``."""
    names = [h for c in chunks for h in c]
    k = len(chunks)
    if k < 2:
        return chunks
    per = -(-len(names) // k)
    even = [names[i:i + per] for i in range(0, len(names), per)]
    fits = all(label_w + sum(_column_width(h, cols[h], narrow) for h in c) <= width
               for c in even)
    return even if fits and len(even) == k else chunks


def figure_html(fig, alt: str = "") -> str:
    """A matplotlib figure as an ``<img>`` with its PNG inline (base64), at the figure's
    own resolution (the book's figures are drawn at ``figures.DPI``); the figure is closed, so a notebook does not show it a second time."""
    import base64
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight")   # as drawn
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def _markdown(text: str) -> str:
    from markdown_it import MarkdownIt  # myst's parser: the book's extra

    return MarkdownIt("commonmark", {"typographer": False}).enable("table").render(text)


def fold(summary: str, *items, note: str | None = None) -> Page:
    """Evidence one click away: ``items`` in a folded section (``<details>``) whose title
    is ``summary``.  An item is a :class:`Page`, a report table (a DataFrame, shown as
    :func:`page_table`), a styled table (its HTML), a matplotlib figure (inline PNG; the
    figure is closed) or Markdown text; ``note``, Markdown shown first.  ``None`` items
    are skipped."""
    import matplotlib.figure
    from pandas.io.formats.style import Styler

    parts = [_markdown(note)] if note else []
    for item in items:
        if item is None:
            continue
        if isinstance(item, Page):
            parts.append(item.body)
        elif isinstance(item, pd.DataFrame):
            parts.append(page_table(item).body)
        elif isinstance(item, Styler):
            parts.append(f'<div class="cflib-scroll">{item.to_html()}</div>')
        elif isinstance(item, matplotlib.figure.Figure):
            parts.append(f"<p>{figure_html(item, summary)}</p>")
        elif isinstance(item, str):
            parts.append(_markdown(item))
        else:
            raise TypeError(f"fold cannot show a {type(item).__name__}")
    body = "".join(parts)
    return Page(f'<details class="cflib-fold"><summary>{html.escape(summary)}</summary>'
                f"{body}</details>")


_MARK = {"holds": ("✓", "holds"), "fails": ("✗", "fails"), "not tested": ("–", "not tested"),
         "inconclusive": ("–", "inconclusive"), "within noise": ("≈", "within noise")}
#: a check whose source starts so is a sanity check of our protocol, not a paper's claim
PROTOCOL_SOURCES = ("our protocol", "reference row", "fewer bits")


def _tally(checks: pd.DataFrame) -> str:
    """The head of a verdict list: the papers' claims apart from our protocol's sanity
    checks, and the claims that hold only as ties (both values equal, e.g. saturated)."""
    src = checks["source"].astype(str).str.lower()
    ours = src.str.startswith(PROTOCOL_SOURCES)
    parts = []
    for name, d in (("the papers' claims", checks[~ours]), ("our protocol's checks", checks[ours])):
        if d.empty:
            continue
        n = d["verdict"].value_counts().to_dict()
        ties = int(((d["verdict"] == "holds") & (d["value"] == d["other value"])).sum())
        verb = {"holds": ("holds", "hold"), "fails": ("fails", "fail"),
                "inconclusive": ("is inconclusive", "are inconclusive"),
                "within noise": ("is within noise", "are within noise"),
                "not tested": ("is not tested", "are not tested")}
        say = lambda k: f"{n.get(k, 0)} {verb[k][n.get(k, 0) != 1]}"  # noqa: E731
        held = say("holds") + (f" ({ties} only as ties: both values equal)" if ties else "")
        rest = [say(k) for k in ("fails", "within noise", "inconclusive", "not tested")
                if n.get(k)]
        parts.append(f"{name}: {', '.join([held, *rest])}")
    return "<p>" + "; ".join(parts).capitalize() + ".</p>" if parts else ""


def _seed_lines(checks: pd.DataFrame, by: list[str], digits: int) -> list[str]:
    """A per-seed check table's lines: in how many seeds each expectation holds."""
    lines = []
    d = checks.assign(_o=checks["holds_in"] - checks["seeds"]).sort_values("_o")
    for r in d.to_dict("records"):
        ok = r["holds_in"] == r["seeds"]
        mark = "✓" if ok else ("✗" if r["holds_in"] == 0 else "◐")
        scope = " · ".join(f"{k} {r[k]}" for k in by)
        lines.append(
            f'<li class="{"holds" if ok else "fails"}"><b>{mark}</b> '
            f"{html.escape(str(r['expectation']))}{' (' + html.escape(scope) + ')' if scope else ''}"
            f": holds in {int(r['holds_in'])} of {int(r['seeds'])} training seeds "
            f"(values {fmt(r['value_min'], digits)}–{fmt(r['value_max'], digits)} against "
            f"{fmt(r['other_min'], digits)}–{fmt(r['other_max'], digits)})</li>")
    return lines


def _verdict_lines(checks: pd.DataFrame, by: list[str], digits: int) -> list[str]:
    """A check table's lines, failures first: the verdict, both values, the paired
    interval, why it was not tested or is not significant, and the source."""
    lines = []
    order = {"fails": 0, "within noise": 1, "inconclusive": 1, "not tested": 1, "holds": 2}
    d = checks.assign(_o=checks["verdict"].map(order)).sort_values("_o", kind="stable")
    for r in d.to_dict("records"):
        mark, word = _MARK.get(r["verdict"], ("?", r["verdict"]))
        other = r["other"] or ""
        vs = (f"{fmt(r['value'], digits)} against {html.escape(str(other))} "
              f"{fmt(r['other value'], digits)}" if other
              else f"{fmt(r['value'], digits)} (threshold {fmt(r['other value'], digits)})")
        ci = ""
        if not pd.isna(r.get("ci_low", np.nan)):
            ci = (f"; difference {fmt(r['difference'], digits)}, 95 % interval "
                  f"[{fmt(r['ci_low'], 2)}, {fmt(r['ci_high'], 2)}]")
        why = r.get("why")
        why = f"; {html.escape(str(why))}" if isinstance(why, str) and why else ""
        scope = " · ".join(f"{k} {r[k]}" for k in by)
        lines.append(
            f'<li class="{r["verdict"].replace(" ", "-")}"><b>{mark} {word}</b> '
            f"{html.escape(str(r['expectation']))}"
            f"{' (' + html.escape(scope) + ')' if scope else ''}: {vs}{ci}{why}"
            f'<br><span class="source">{html.escape(str(r["source"]))}</span></li>')
    return lines


def verdicts(checks: pd.DataFrame, by: list[str] | None = None, digits: int = 3) -> Page:
    """A shape-check table (:func:`cflib.bench.runner.shape_checks`) as a verdict list:
    one line per expectation, failures first, then the untested ones, then those that
    hold; each with both values, the paired interval where there is one, why it was not
    tested or is not significant, and its source.  The full table is folded beneath.

    A per-seed table (:func:`cflib.bench.runner.shape_checks_by_seed`) reads as "holds in
    k of n seeds"."""
    if checks is None or checks.empty:
        return Page("<p>No expectation applies to this run.</p>")
    by = [c for c in (by or []) if c in checks.columns]
    lines = (_seed_lines(checks, by, digits) if "holds_in" in checks.columns
             else _verdict_lines(checks, by, digits))
    head = _tally(checks) if {"verdict", "source"} <= set(checks.columns) else ""
    full = checks.drop(columns=[c for c in ("_o",) if c in checks.columns])
    if "expectation" in full.columns:
        full = full.set_index("expectation")
    # formatted as every page table: '–' for a missing value, yes / no, fixed digits
    table = page_table(full.astype(object).where(full.notna(), None), digits)
    # what fails or was not tested is shown; what holds (in every seed) is one click away
    shown = [x for x in lines if not x.startswith('<li class="holds"')]
    held = [x for x in lines if x.startswith('<li class="holds"')]
    listed = f'<ul class="cflib-verdicts">{"".join(shown)}</ul>' if shown else ""
    if held:
        listed += (f'<details class="cflib-fold"><summary>✓ {len(held)} '
                   f'{"holds" if len(held) == 1 else "hold"}'
                   f'{" in every seed" if "holds_in" in checks.columns else ""}: the list'
                   f'</summary><ul class="cflib-verdicts">{"".join(held)}</ul></details>')
    return Page(f"{head}{listed}"
                f"<details><summary>The full table</summary>{table.body}</details>",
                plain=f"{head}{listed}")


__all__ = ["Page", "figure_html", "fmt", "fold", "page_table", "verdicts"]
