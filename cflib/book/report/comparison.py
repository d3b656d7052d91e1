"""A user's method beside the book's rows: the tables, ranks, grid and page of a
:class:`cflib.bench.compare.Comparison`.

The numbers come from the comparison (:mod:`cflib.bench.compare`: its rows, means, ranks
and the chapter's checks); this module only shows them, with the book's own page tables
(:func:`~cflib.book.report.display.page_table`, :func:`~cflib.book.report.display.verdicts`)
and figures (:func:`~cflib.book.report.figures.plot_cf_grid`,
:func:`~cflib.book.report.figures.plot_bayes_grid`):

* :func:`bench_table`: every row's value beside the paper's, as the chapter's table;
* :func:`bench_ranks`: each row's rank per metric, and its mean rank;
* :func:`bench_grid`: the method's counterfactuals beside the reference rows';
* :func:`bench_reading`: a few sentences read off the numbers (:func:`bench_verdict`: the
  same as a list, one topic per item);
* :func:`bench_page`: all of it, per table, as one self-contained HTML page (the style
  inline, the figures as base64 PNG): the renderer ``cflib.bench.compare`` takes.
"""
from __future__ import annotations

import html
import os

import pandas as pd

from cflib.bench.data import PROJECT_ROOT
from cflib.bench.intervals import N_BOOT, SMALL_SET
from cflib.book.report.display import figure_html, fmt, page_table, verdicts
from cflib.book.report.figures import plot_bayes_grid, plot_cf_grid
from cflib.book.report.tables import bayes_table, comparison_table, metrics_table, pair_title
from cflib.metrics.spec import get_spec

#: the book's stylesheet, inlined into the page (a minimal one where it is not found)
CSS = PROJECT_ROOT / "_static" / "cflib.css"
_PAGE_CSS = """body { font-family: system-ui, sans-serif; max-width: 820px; margin: 2em auto;
  padding: 0 1em; line-height: 1.45; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 2em; } h3 { font-size: 1.05em; }
img { max-width: 100%; height: auto; }
p.note { background: #f6f6f6; border-left: 3px solid #999; padding: 0.5em 0.8em; }
"""


def _metrics(tc) -> list[str]:
    return [s.name for s in tc.table.metrics]


def _c3lt_table(tc) -> pd.DataFrame:
    return comparison_table(tc.shown, "c3lt", tc.table.dataset, metrics=_metrics(tc),
                            methods=tc.methods)


def _bayes_table(tc) -> pd.DataFrame:
    metrics = [m for m in _metrics(tc) if m in set(tc.shown["metric"])]
    return bayes_table(tc.shown, tc.table.model, tc.table.dataset, metrics=metrics,
                       methods=tc.methods)


def _c3lt_grid(tc, n):
    rows = [tc.method, "Original Data", "Query (unchanged)"]
    return [plot_cf_grid(tc.counterfactuals, pair, rows, n=n or 4,
                         title=pair_title(tc.table.dataset, pair)) for pair in tc.pairs]


def _bayes_grid(tc, n):
    rows = [tc.method, "Original Data", "Query (unchanged)"]
    return [plot_bayes_grid(tc.counterfactuals, rows, n=n or 6,
                            title=f"{tc.table.label}: label → target above each query")]


#: how a table of each kind (:attr:`TableSpec.kind`) is drawn: its page
#: table (the chapter's: ours beside the paper's), its counterfactual grid, what the grid
#: shows besides the frames, and which rows a "best" of its checks is among
RENDERERS = {
    "c3lt": (_c3lt_table, _c3lt_grid,
             " (with each its change from the query: red ink added, blue removed).",
             " (your row included: a <i>best</i> that fails may be beaten by yours)"),
    "bayes": (_bayes_table, _bayes_grid, ".",
              " (a <i>best</i> among the paper's five methods)"),
}


def _plain_table(tc) -> pd.DataFrame:
    """Rows = the rows shown, columns = the metrics: a table no paper reports."""
    w = tc.wide()
    return w[[m for m in _metrics(tc) if m in w.columns]]


#: a table of a spec with no renderer of its own: its values, no grid
PLAIN = (_plain_table, lambda tc, n: [], ".", "")


def _renderer(tc):
    return RENDERERS.get(tc.table.kind, PLAIN)


def _all_pairs(tc) -> bool:
    """Did the run cover the paper's dataset-level protocol (every pair of the table)?"""
    return not tc.table.per_pair or set(tc.pairs) == {f"{q}->{t}" for q, t in tc.table.pairs}


def bench_table(tc) -> pd.DataFrame:
    """Rows = the rows shown (reference rows, the method, the book's), columns = (metric,
    ours / paper) on the paper's scale: the chapter's table (C3LT tables: the means over
    the pairs run; Bayesian tables: the mean ± sd over repeats).  The paper's values
    only where the run covers every pair (they are dataset-level)."""
    table = _renderer(tc)[0](tc)
    if not _all_pairs(tc) and isinstance(table.columns, pd.MultiIndex):
        table = table.loc[:, table.columns.get_level_values(1) != "paper"]
    return table


def bench_ranks(tc) -> pd.DataFrame:
    """Each row's range of ranks per metric (1 = best, in the metric's direction: from 1 +
    the rows wholly better to the rows ranked less those wholly worse, by the 95 %
    intervals; one number where they meet) and the mean of the ranges' midpoints."""
    best, worst = tc.ranks(), tc.worst_ranks()
    if not len(best.columns):
        return best
    out = pd.DataFrame(index=best.index, columns=best.columns, dtype=object)
    for m in best.columns:
        for r in best.index:
            b, w = best.loc[r, m], worst.loc[r, m]
            out.loc[r, m] = ("–" if pd.isna(b) else f"{int(b)}" if b == w
                             else f"{int(b)}–{int(w)}")
    out["mean rank"] = [fmt(v, 2) for v in ((best + worst) / 2).mean(axis=1)]
    return out


def bench_intervals(tc) -> pd.DataFrame:
    """Rows = the rows shown, columns = the metrics with an interval: each value with its
    95 % interval (:mod:`cflib.bench.intervals`; the book's committed rows from the
    per-query values their chapter kept)."""
    iv = tc.intervals
    if iv is None or not len(iv):
        return pd.DataFrame()
    wide = tc.wide()
    metrics = [m for m in tc.table.ranked if m in set(iv["metric"]) and m in wide.columns]
    ivx = iv.set_index(["method", "metric"])
    cells = {}
    for m in metrics:
        spec, col = get_spec(m), {}
        k = spec.display_scale                   # on the paper's scale, as the table
        for row in wide.index:
            v = wide.loc[row, m]
            if (row, m) in ivx.index and pd.notna(ivx.loc[(row, m), "lo"]):
                lo, hi = ivx.loc[(row, m), "lo"], ivx.loc[(row, m), "hi"]
                col[row] = f"{fmt(k * v)} [{fmt(k * lo)}, {fmt(k * hi)}]"
            else:
                col[row] = f"{fmt(k * v)} (no interval)" if pd.notna(v) else "–"
        cells[spec.title] = col                  # the page table adds the arrow
    out = pd.DataFrame(cells, index=pd.Index(list(wide.index), name="method"))
    return out


def bench_grid(tc, n: int | None = None):
    """The method's counterfactuals beside the reference rows' (the same queries): one
    figure per pair (C3LT tables), or the first queries of the first repeat (Bayesian)."""
    return _renderer(tc)[1](tc, n)


def _list(names) -> str:
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _reading(tc) -> list[tuple[str, str]]:
    """What the numbers say about the method, as ``(topic, sentences)``: its ranks, its
    validity beside the real target images', and (C3LT tables) how far it moves the query
    against a real target image; every number read from the comparison."""
    wide, m = tc.wide(), tc.method
    out = [("Ranks", _rank_reading(tc))]
    if "Validity (all judges)" in wide.columns:
        j, real = wide.loc[m, "Validity (all judges)"], wide["Validity (all judges)"].get(
            "Original Data")
        out.append(("The judges", f"All three judges (classifiers trained apart from the "
                    f"explained one) put {fmt(100 * j, 3)} % of its counterfactuals in the "
                    "target" + (f" (real target images: {fmt(100 * real, 3)} %)."
                                if real is not None and pd.notna(real) else ".")))
    valid = tc.table.validity
    if valid in wide.columns:
        v, real = wide.loc[m, valid], wide[valid].get("Original Data")
        out.append(("Validity", f"The classifier assigns {fmt(100 * v, 3)} % of its "
                    "counterfactuals to the target"
                    + (f" (real target images: {fmt(100 * real, 3)} %)."
                       if real is not None and pd.notna(real) else ".")))
    if "Proximity_vs_real" in wide.columns:
        ratio = wide.loc[m, "Proximity_vs_real"]
        text = (f"It changes the query {fmt(ratio, 2)} times as much as a different real "
                "image of the target class does (Original Data's proximity)")
        if ratio >= tc.table.redraw_ratio:
            text += (f"; at {fmt(tc.table.redraw_ratio, 2)} or more it redraws the query rather "
                     "than edits it, so its realism scores (IM1, IM2, FID, KID) reward the "
                     "redraw")
        out.append(("An edit or a redraw", text + "."))
    return out


def _rank_reading(tc) -> str:
    """Where the method ranks on each ranked metric, as a range of ranks of the table's
    rows (the 95 % intervals allow every rank in it), first and last where alone."""
    ranks, worst, ties, m = tc.ranks(), tc.worst_ranks(), tc.ties(), tc.method
    if not len(ranks.columns) or m not in ranks.index:
        return f"No metric is ranked: no row of this table has an interval ({tc.sample_size()})."
    n = len(ranks)
    spans = []
    for k in ranks.columns:
        b, w = ranks.loc[m, k], worst.loc[m, k]
        if pd.notna(b):
            spans.append(f"{k} {int(b)}" if b == w else f"{k} {int(b)}–{int(w)}")
    alone = [k for k in ranks.columns if ranks.loc[m, k] == 1 and not ties.loc[m, k]]
    last = [k for k in ranks.columns if ranks.loc[m, k] == ranks[k].count() > 1]
    mid = (ranks + worst) / 2
    text = (f"Of the {n} rows (the reference rows ranked too), on {tc.sample_size()}, {m} "
            f"ranks {'; '.join(spans)}; its mean rank {fmt(mid.loc[m].mean(), 2)}")
    if alone:
        text += f"; first on its own on {_list(alone)}"
    if last:
        text += f"; last on its own on {_list(last)}"
    return (text + ". A range is where its 95 % interval overlaps other rows': no order is "
            "claimed between rows whose intervals overlap.")


def bench_reading(tc) -> str:
    """What the numbers say about the method, in a few sentences (:func:`_reading`)."""
    return " ".join(text for _, text in _reading(tc))


def bench_verdict(tc) -> str:
    """The same reading as a markdown list, one topic per item: a page's answer."""
    return "\n".join(f"- **{topic}**: {text}" for topic, text in _reading(tc))


def _figure_html(fig, alt: str) -> str:
    return f"<p>{figure_html(fig, alt)}</p>"


def _run_table(cmp) -> pd.DataFrame:
    rows = {"method": cmp.method, "given as": cmp.given,
            "config": ", ".join(f"{k}={v!r}" for k, v in cmp.config.items()) or "–",
            "profile": cmp.profile, "training seed": cmp.seeds.train,
            "data seed": cmp.seeds.data, "device": cmp.device,
            "queries": cmp.n_images if cmp.n_images is not None else "the profile's",
            "tables": ", ".join(cmp.tables)}
    return pd.DataFrame({"value": [str(v) for v in rows.values()]},
                        index=pd.Index(list(rows), name="run"))


def _small_sets(tc) -> int | None:
    """The images per set behind this run's FID and KID when fewer than
    :data:`~cflib.bench.intervals.SMALL_SET` (C3LT tables), else None."""
    if tc.sample is None or tc.sample[0] != "queries":
        return None
    _, n, k = tc.sample
    return n // max(k, 1) if 0 < n // max(k, 1) < SMALL_SET else None


def _interval_caption(tc) -> str:
    if (tc.intervals["basis"] == "queries").any():
        return (f"mean over the pairs run [95 % bootstrap interval: the queries of each pair "
                f"resampled {N_BOOT} times]; the book's committed rows too, from the "
                "per-query values their chapter kept")
    return "mean over the repeats [95 % t interval over the repeats]"


def _section_origin(tc) -> list[str]:
    """Where the rows beside the method come from: the classifier, the pairs, the note on
    the book's rows, the networks, the clocks."""
    parts = [f"<h2>{html.escape(tc.table.label)}: how it was made</h2>"]
    acc = tc.results[tc.results["method"] == "Classifier"]["value"]
    if len(acc):
        parts.append(f"<p>The table's classifier reaches {fmt(100 * acc.iloc[0], 4)} % test "
                     "accuracy." + (f" Pairs run: {html.escape(', '.join(tc.pairs))}." if
                                    tc.pairs else "") + "</p>")
    parts.append(f'<p class="note">{html.escape(tc.note)}</p>')
    if tc.computed:
        parts.append("<p>A run at the book's profile and seeds (<code>--profile standard</code>, "
                     "training and data seed 0) puts the book's committed rows beside yours "
                     "instead; the README gives what it costs.</p>")
    from cflib.bench.compare import measured_with

    said = measured_with(getattr(tc, "networks", []) or [])
    if said:
        parts.append(f"<p>{html.escape(said)}</p>")
    if tc.book is not None:
        parts.append("<p>The book's rows were timed on the machine of the book's run, yours on "
                     "this one: their Seconds_per_CF do not compare (time is not ranked).</p>")
    return parts


def _section_table(tc) -> list[str]:
    """The table (each value's sample and the small-set mark), its intervals, the ranks
    and their reading, the judges."""
    small = _small_sets(tc)
    here = (f"; rows computed in this run at profile {tc.results['profile'].iloc[0]}: "
            f"{', '.join(tc.computed)}" if tc.computed else "")
    parts = [f"<p>Each value of this run's rows rests on {html.escape(tc.sample_size())}." + (
                 f" FID and KID here compare sets of {small} images, fewer than "
                 f"{SMALL_SET}: both are biased upward at that size, so they rank rows of this "
                 "run among themselves but do not compare with the paper's values." if small
                 else "") + (f" Rows computed in this run{html.escape(here)}." if here else "")
             + "</p>"]
    intervals = bench_intervals(tc)
    if len(intervals):
        parts.append("<details><summary>Each value with its 95 % interval</summary>"
                     + str(page_table(intervals, caption=_interval_caption(tc)))
                     + "</details>")
    parts.append("<h3>Ranks</h3>")
    parts.append(str(page_table(bench_ranks(tc),
                                caption="1 = best, in each metric's direction (the arrow); "
                                        "a range where the 95 % intervals allow several "
                                        "ranks (rows whose intervals overlap are not "
                                        "ordered); time and the set-level FID, KID, "
                                        "diversity and query dependence are not ranked")))
    judges = judges_reading(tc)
    if judges:
        parts += ["<h3>The judges of transfer</h3>", judges]
    return parts


def _section_checks(tc) -> list[str]:
    """The chapter's checks on the rows shown, and what each metric means."""
    checks = tc.checks()
    if checks.empty:
        inner = ("<p>None of the table's expectations applies to these rows: they compare "
                 "the papers' methods, and none of them stands beside yours here.</p>")
    else:
        inner = str(verdicts(checks, by=list(tc.table.check_by) or None))
    return [f'<details class="cflib-fold"><summary>What the papers claim about the other '
            f"methods of this table, checked on the rows above</summary><p>What the papers "
            f"lead us to expect of this table{_renderer(tc)[3]}:</p>{inner}</details>",
            f"<details><summary>What each metric means</summary>"
            f"{metrics_table(tc.table.metrics)}</details>"]


def bench_section(tc) -> str:
    """One table of the page: where the rows beside the method come from, the table, the
    ranks, the reading, the grid and the chapter's checks."""
    parts = _section_origin(tc) + _section_table(tc)
    parts.append("<h3>Counterfactuals</h3><p>The method's counterfactuals beside the "
                 "reference rows' on the same queries; a red frame: not assigned to the "
                 "target; a grey dashed frame: a query the classifier already assigned to "
                 "the target, which never counts as valid" + _renderer(tc)[2] + "</p>")
    for fig in bench_grid(tc):
        parts.append(_figure_html(fig, f"{tc.method} beside the reference rows"))
    return "\n".join(parts + _section_checks(tc))


#: a judge is weak evidence below this test accuracy, or when it already assigns more than
#: JUDGE_ALREADY of the unchanged queries to their target
JUDGE_ACCURACY, JUDGE_ALREADY = 0.9, 0.1


def judges_reading(tc) -> str:
    """The judges of transfer validity of one table run: each judge's family and test
    accuracy (the table's ``judges`` file, when the run wrote one) and the share of
    unchanged queries it already assigns to their target; a judge below
    :data:`JUDGE_ACCURACY` or above :data:`JUDGE_ALREADY` is named as weak evidence."""
    from cflib.metrics.basic import JUDGE_NAMES

    res = tc.results
    q = res[(res["method"] == "Query (unchanged)") & (res["aggregate"] == "")]
    if "pair" in q.columns and (q["pair"] != "").any():
        q = q[q["pair"] != ""]
    already = {j: float(q.loc[q["metric"] == f"Validity ({j} judge)", "value"].mean())
               for j in JUDGE_NAMES}
    info = getattr(tc.run, "judges", None)
    acc = ({r["judge"]: float(r["test_accuracy"]) for _, r in info.iterrows()}
           if info is not None and len(info) else {})
    if not acc and all(v != v for v in already.values()):
        return ""
    rows, weak = [], []
    for j in JUDGE_NAMES:
        a, u = acc.get(j, float("nan")), already.get(j, float("nan"))
        rows.append(f"<tr><td>{html.escape(j)}</td><td>{fmt(a, 4)}</td><td>{fmt(u, 3)}</td></tr>")
        if a < JUDGE_ACCURACY or u > JUDGE_ALREADY:
            weak.append(j)
    table = ("<table class=\"cflib-table\"><thead><tr><th>judge</th><th>test accuracy</th>"
             "<th>unchanged queries it already calls the target</th></tr></thead><tbody>"
             + "".join(rows) + "</tbody></table>")
    said = (f"<p>{', '.join(weak)}: weak evidence here (test accuracy below "
            f"{100 * JUDGE_ACCURACY:.0f} % or more than {100 * JUDGE_ALREADY:.0f} % of the "
            "unchanged queries "
            "already called the target): a counterfactual it accepts says little.</p>"
            if weak else "<p>Each judge is accurate and calls few unchanged queries the "
            "target: a counterfactual all three accept looks like the target class to "
            "networks of three families.</p>")
    return ("<p>Three judges of three families score every row (a SmallCNN, a residual "
            "network, a perceptron); <code>Validity (all judges)</code> counts what all three "
            "accept.</p>" + table + said)


def _answer(tc) -> list[str]:
    """A table's answer, first on the page: the verdict (ranks, judges, validity, edit or
    redraw) and the table with the method's row marked."""
    items = "".join(f"<li><b>{html.escape(topic)}</b>: {html.escape(text)}</li>"
                    for topic, text in _reading(tc))
    return [f"<h2>{html.escape(tc.table.label)}</h2>",
            f'<ul class="cflib-verdict">{items}</ul>',
            str(page_table(bench_table(tc), highlight=[tc.method],
                           caption=f"{tc.table.scope}; your row marked"
                                   + _paper_note(tc)))]


def _paper_note(tc) -> str:
    """Why the paper's values are (or are not) beneath ours."""
    if not _all_pairs(tc):
        return ("; the paper's values are left out: they are over all of the table's pairs, "
                "this run's over " + ", ".join(tc.pairs))
    return "; the paper's value beneath ours where it reports one"


def _provenance(cmp) -> str:
    """One line: when, from which commit, on which machine, at which settings."""
    import datetime
    import platform

    import torch

    from cflib.provenance import commit

    cfg = ", ".join(f"{k}={v!r}" for k, v in cmp.config.items()) or "its defaults"
    return (f'<p class="cflib-provenance">Run on {datetime.date.today().isoformat()} from '
            f"commit <code>{html.escape(commit())}</code> of cflib, on "
            f"{html.escape(platform.machine())} ({os.cpu_count()} cores, torch "
            f"{html.escape(torch.__version__)}, device {html.escape(str(cmp.device))}): "
            f"{html.escape(cmp.method)} ({html.escape(cmp.given)}; {html.escape(cfg)}) at "
            f"profile {html.escape(cmp.profile)}, training seed {cmp.seeds.train}, data seed "
            f"{cmp.seeds.data}, "
            + (f"{cmp.n_images} queries asked" if cmp.n_images is not None
               else "the profile's queries")
            + "".join(f"; {k}: {tc.sample_size()}" for k, tc in cmp.tables.items())
            + ".</p>")


def bench_page(cmp) -> str:
    """The comparison as one self-contained HTML page: each table's answer first (the
    verdict and the table, your row marked), one provenance line, then each table's
    section (:func:`bench_section`); the book's stylesheet inline, figures as base64
    PNG, no file or network access needed to view it."""
    css = CSS.read_text() if CSS.exists() else ""
    title = f"{cmp.method} beside the book's tables"
    body = [f"<h1>{html.escape(title)}</h1>"]
    for tc in cmp.tables.values():
        body += _answer(tc)
    body.append(_provenance(cmp))
    body.append("<h2>How these numbers were made</h2><p>Your method ran through exactly the "
                "protocol of each table (its queries, data seed, trained networks, metrics "
                "and reference rows), beside the book's rows.</p>")
    body += [bench_section(tc) for tc in cmp.tables.values()]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{_PAGE_CSS}{css}</style></head>"
            "<body>\n" + "\n".join(body) + "\n</body></html>\n")


__all__ = ["bench_table", "bench_ranks", "bench_intervals", "bench_grid", "bench_reading",
           "bench_verdict",
           "bench_section", "bench_page"]
