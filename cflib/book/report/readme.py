"""The README's results summary and the book's *Results at a glance* page, generated from
the committed results files.

    cflib readme [--results DIR]          # what `make book` users run after a re-run
    python -m cflib.book.report [results_dir]   # print the headline tables

rewrites the block between ``<!-- summary:start -->`` and ``<!-- summary:end -->`` of
the README and writes ``book/results.md`` (every headline table and the chapters'
timings).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

import pandas as pd

from cflib.bench.data import DATASET_TITLES, PROJECT_ROOT
from cflib.bench.reference import reported_value
from cflib.bench.results import CLASSIFIER, read_results, table_means
from cflib.bench.tables.registry import SPECS, spec_of_chapter
from cflib.book.chapters import BOOK_RUN, CHAPTER_DIR, CHAPTERS, read_notebook
from cflib.book.report.discussion import f as num
from cflib.book.report.discussion import pct
from cflib.book.report.display import markdown, page_table
from cflib.book.report.tables import bayes_table, comparison_table, quant_table, spread_table
from cflib.book.spread import read_sweep
from cflib.io import atomic_write

#: a headline block: its sentence, its table and the table's markdown form
Block = tuple[str, pd.DataFrame, Callable[[pd.DataFrame], str]]

SUMMARY_START, SUMMARY_END = "<!-- summary:start -->", "<!-- summary:end -->"


def _markdown_cells(table: pd.DataFrame, cell) -> str:
    """A table of one row per method, one cell per metric (``cell(row, metric)``)."""
    metrics = list(dict.fromkeys(table.columns.get_level_values(0)))
    cells = pd.DataFrame([[cell(row, m) for m in metrics] for _, row in table.iterrows()],
                         index=table.index, columns=metrics)
    return markdown(cells, index="method")


def markdown_ours_paper(table: pd.DataFrame, digits: int = 3) -> str:
    """A ``comparison_table`` as a markdown table of ``ours / paper`` cells."""
    return _markdown_cells(table, lambda row, m: f"{num(row[(m, 'ours')], digits)} / "
                                                 f"{num(row[(m, 'paper')], digits)}")


def markdown_bayes(table: pd.DataFrame, digits: int = 3) -> str:
    """A ``bayes_table`` as markdown: ``mean ± sd`` cells, the paper's value after a slash."""
    def cell(row, m):
        c = f"{num(row[(m, 'ours')], digits)} ± {num(row[(m, '± sd')], digits)}"
        return c if pd.isna(row[(m, "paper")]) else c + f" / {num(row[(m, 'paper')], digits)}"

    return _markdown_cells(table, cell)


def markdown_spread(table: pd.DataFrame, digits: int = 3) -> str:
    """A ``spread_table`` as markdown: ``mean ± sd / paper`` cells."""
    return _markdown_cells(table, lambda row, m: f"{num(row[(m, 'mean')], digits)} ± "
                                                 f"{num(row[(m, '± sd')], 2)} / "
                                                 f"{num(row[(m, 'paper')], digits)}")


def _c3lt_block(df: pd.DataFrame, dataset: str, name: str, results_dir) -> Block:
    metrics = list(spec_of_chapter(name).page_metrics)
    methods = list(dict.fromkeys(df.loc[df["method"] != CLASSIFIER, "method"]))
    profile = df["profile"].iloc[0]
    merged, _ = read_sweep(name, profile, root=Path(results_dir) / "sweep", own=df)
    if merged is not None:
        acc = merged[merged["method"] == CLASSIFIER]
        n = int(merged["n"].max())
        # a metric some seeds of the sweep predate is left out, not shown as a mean of fewer
        seen = merged.groupby("metric")["n"].max()
        late = [m for m in metrics if seen.get(m, 0) < n]
        metrics = [m for m in metrics if m not in late]
        return (f"**{DATASET_TITLES[dataset]}**, profile `{profile}`, {n} training seeds "
                f"({merged['seeds'].iloc[0].replace(' ', ', ')}; classifier test accuracy "
                f"{acc['mean'].item():.4f} ± {acc['sd'].item():.4f}); mean over the three "
                f"pairs, mean ± sd over seeds, the paper's value beneath"
                + (f" ({', '.join(late)}: on the chapter's page, for training seed "
                   f"{df['train_seed'].iloc[0]}, until the sweep's other seeds are re-run)"
                   if late else "") + ":",
                spread_table(merged, "c3lt", dataset, metrics, methods), markdown_spread)
    acc = df.loc[df["method"] == CLASSIFIER, "value"].item()
    t = comparison_table(df, "c3lt", dataset, metrics=metrics, methods=methods)
    return (f"**{DATASET_TITLES[dataset]}**, profile `{profile}`, training seed "
            f"{df['train_seed'].iloc[0]} (classifier test accuracy {acc:.4f}); mean over the "
            f"three pairs, ours with the paper's value beneath:",
            t, markdown_ours_paper)


def _bayes_blocks(df: pd.DataFrame) -> list[Block]:
    out = []
    for s in dict.fromkeys(df.loc[df["method"] != CLASSIFIER, "model"]):
        acc = df.loc[(df["method"] == CLASSIFIER) & (df["model"] == s), "value"].item()
        n = df.loc[(df["model"] == s) & (df["repeat"] >= 0), "repeat"].nunique()
        label = {"mc_dropout": "MC dropout", "bnn": "BNN"}.get(s, s)
        out.append((f"**MNIST, Bayesian classifiers: {label}**, profile "
                    f"`{df['profile'].iloc[0]}` (posterior-mean test accuracy {acc:.4f}); mean "
                    f"± sd over {n} repeats, the paper's IM1 beneath:",
                    bayes_table(df, s), markdown_bayes))
    return out


def markdown_quant(table: pd.DataFrame, digits: int = 3) -> str:
    """A ``quant_table`` as markdown: accuracy and overhead ``ours / paper``, VD and the
    false acceptance on reconstructions ``ours [95 % interval]``, CRG and DirSim
    ``ours ± spread``."""
    def interval(row, k):
        v = row[(k, "ours")]
        if pd.isna(v):
            return "–"
        return (f"{num(v, digits)} [{num(row[(k, 'low')], 2)}, "
                f"{num(row[(k, 'high')], 2)}]")

    rows = {}
    for method, row in table.iterrows():
        cells = [f"{num(row[('Accuracy %', 'ours')], digits)} / "
                 f"{num(row[('Accuracy %', 'paper')], digits)}",
                 interval(row, "VD"), interval(row, "FA recon")]
        for k in ("CRG", "DirSim"):
            v = row[(k, "ours")]
            cells.append("–" if pd.isna(v) else f"{num(v, digits)} ± {num(row[(k, '±')], 2)}")
        cells.append(f"{num(row[('Overhead ×', 'ours')], digits)} / "
                     f"{num(row[('Overhead ×', 'paper')], digits)}")
        cells.append(f"{num(row[('bits', 'weights')], 2)} / {num(row[('bits', 'acts')], 2)}")
        rows[method] = cells
    return markdown(pd.DataFrame.from_dict(rows, orient="index", columns=[
        "Accuracy %", "VD", "FA recon", "CRG", "DirSim", "Overhead ×", "avg bits W/A"]),
        index="method")


def _quant_block(df: pd.DataFrame) -> list[Block]:
    seeds = df["train_seed"].nunique()
    spread = "the 95 % bootstrap half-width" if seeds == 1 else f"the sd over {seeds} seeds"
    fp = df[(df["method"] == "FP32") & (df["variant"] == "")].groupby("metric")["value"].mean()
    return [(f"**Fashion-MNIST, recourse under quantization**, profile `{df['profile'].iloc[0]}` "
            f"(FP32 test accuracy {fp['Accuracy']:.4f}, FP recourse feasible for "
            f"{fp['FP_Feasible']:.3f} of the queries); accuracy and overhead ours / paper "
            f"(overhead: compression time over PTQ INT8's, the paper's base is not published), "
            f"VD and false acceptance on reconstructions with 95 % Wilson intervals, CRG and "
            f"DirSim ours ± {spread} (the paper's are not public):",
             quant_table(df), markdown_quant)]


def _plain_block(spec):
    """The headline block of a table without a maker of its own: each row's value per
    metric (:meth:`TableSpec.headline`)."""
    def block(df, d):
        head = spec.headline(df).pivot_table(index="method", columns="metric", values="value",
                                             sort=False)
        return [(f"**{spec.label}**, profile `{df['profile'].iloc[0]}`:", head, markdown)]
    return block


#: how the headline block of each kind of table is made (from its results file and the
#: results folder); a table of another kind gets :func:`_plain_block`
BLOCK_MAKERS = {
    "c3lt": lambda spec: lambda df, d: [_c3lt_block(df, spec.dataset, spec.chapter, d)],
    "bayes": lambda spec: lambda df, d: _bayes_blocks(df),
    "quant": lambda spec: lambda df, d: _quant_block(df),
}


def blocks() -> dict:
    """Results file -> how its headline block is made, for every table of the book
    (:data:`cflib.bench.tables.registry.SPECS`, in the book's order)."""
    return {s.chapter: BLOCK_MAKERS.get(s.kind, _plain_block)(s) for s in SPECS.values()}


def headline(results_dir="results", html: bool = False) -> str:
    """The headline tables of every results file of the book: markdown (the terminal's),
    or with ``html=True`` the page tables of the chapters (:func:`page_table`: one cell
    per metric, split to fit the book's column).

    Every table's results file must exist: a missing one is an error, never an
    emptied table.
    """
    frames = _frames(results_dir)
    out = []
    for name, block in blocks().items():
        for text, table, as_markdown in block(frames[name], results_dir):
            if html:      # the page links each table to its chapter (the title as link text)
                out.append(f"{text}\n\n{page_table(table)}\n\nIts chapter, with the figures, "
                           f"checks and protocol notes: {{doc}}`chapters/{name}`.")
            else:
                out.append(f"{text}\n\n{as_markdown(table)}")
    return "\n\n".join(out)


def _frames(results_dir) -> dict[str, pd.DataFrame]:
    names = [s.chapter for s in SPECS.values()]
    missing = [f"{name}.csv" for name in names if not (Path(results_dir) / f"{name}.csv").exists()]
    if missing:
        raise FileNotFoundError(f"{results_dir} lacks {missing}; the headline needs every "
                                "chapter's results (run the chapters, or point at the folder "
                                "that holds them)")
    frames = {name: read_results(Path(results_dir) / f"{name}.csv") for name in names}
    for name, df in frames.items():
        run = {"profile": set(df["profile"]), "train_seed": set(df["train_seed"]),
               "data_seed": set(df["data_seed"])}
        book = {k: {BOOK_RUN[k]} for k in run}
        spec = spec_of_chapter(name)
        if spec.sweeps:              # the seed means of a sweep beside seed 0's own run
            book["train_seed"] = {0}
        if run != book:
            raise ValueError(f"{results_dir}/{name}.csv is not the book's run ({run}); the "
                             "README and the results page show the book's runs only "
                             f"({BOOK_RUN}): point at the book's results folder")
        if spec.per_pair:
            pairs = set(df.loc[df["pair"] != "", "pair"])
            if len(pairs) != len(spec.pairs):
                raise ValueError(f"{results_dir}/{name}.csv holds the pairs {sorted(pairs)}, not "
                                 f"the table's {len(spec.pairs)}: it is not the book's run")
    return frames


def _cell(frame: pd.DataFrame, method: str, metric: str, **where) -> float:
    d = frame[(frame["method"] == method) & (frame["metric"] == metric)]
    for k, v in where.items():
        d = d[d[k] == v]
    return float(d["value"].mean()) if len(d) else float("nan")


def _c3lt_line(spec, df, results_dir) -> tuple[str, str]:
    """A C3LT table's README line: C3LT's IM1, proximity and validity beside the paper's
    and real target images' (the seed means where it was swept, as its table, its verdict
    and the results page show them, else its one run)."""
    name, dataset, title = spec.chapter, spec.dataset, spec.label
    merged, _ = read_sweep(name, df["profile"].iloc[0], root=Path(results_dir) / "sweep",
                           own=df)
    metrics = ["IM1", "Proximity", "Validity"]
    if merged is not None:
        t = spread_table(merged, "c3lt", dataset, metrics, ["C3LT", "Original Data"])
        n = int(merged["n"].max())

        def cell(method, metric, t=t):
            return (f"{num(t.loc[method, (metric, 'mean')])} ± "
                    f"{num(t.loc[method, (metric, '± sd')], 2)}")
        seeds = f" ({n} training seeds, mean ± sd)"
    else:
        m = table_means(df)

        def cell(method, metric, m=m):
            return num(_cell(m, method, metric))
        seeds = f" (training seed {df['train_seed'].iloc[0]})"
    parts = [f"{metric} {cell('C3LT', metric)} (paper "
             f"{num(reported_value('c3lt', dataset, 'C3LT', metric))})" for metric in metrics]
    return (f"{title}{seeds}", f"C3LT {', '.join(parts)}; real target images: IM1 "
                               f"{cell('Original Data', 'IM1')}, proximity "
                               f"{cell('Original Data', 'Proximity')}")


def _bayes_line(spec, b, results_dir) -> tuple[str, str]:
    b = b[b["variant"] == ""]
    parts = []
    for model in dict.fromkeys(b.loc[b["model"] != "", "model"]):
        ours = _cell(b, "PSCE", "IM1", model=model)
        paper = reported_value("bayes", spec.dataset, "PSCE", "IM1", model)
        label = spec.model_titles.get(model, model.replace("_", " "))
        parts.append(f"{label} {num(ours)} (paper {num(paper)})")
    return spec.label, "PSCE IM1 " + ", ".join(parts)


def _quant_line(spec, q, results_dir) -> tuple[str, str]:
    q = q[q["variant"] == ""]
    parts = [f"FP32 accuracy {num(_cell(q, 'FP32', 'Accuracy'))}"]
    for m in ("PTQ INT8", "PTQ INT4", "MixedPrec-QAT", "CFQ-QAT"):
        parts.append(f"{m} VD {num(_cell(q, m, 'VD'))}")
    # as the chapter says it: a share in per cent (one number, one form)
    parts.append(f"false acceptance CFQ-QAT {pct(_cell(q, 'CFQ-QAT', 'FA_recon'))} "
                 f"(FP32 {pct(_cell(q, 'FP32', 'FA_recon'))})")
    return spec.label, ", ".join(parts)


def _plain_line(spec, df, results_dir) -> tuple[str, str]:
    """A table without a line of its own: its validity metric for each row."""
    head = spec.headline(df)
    v = head[head["metric"] == spec.validity]
    return spec.label, ", ".join(f"{r.method} {spec.validity} {num(r.value)}"
                                 for r in v.itertuples())


#: the README line of each kind of table (another kind gets :func:`_plain_line`)
SUMMARY_LINES = {"c3lt": _c3lt_line, "bayes": _bayes_line, "quant": _quant_line}


def summary(results_dir="results") -> str:
    """The README's compact results: one line per table, its key numbers beside the
    papers' (where they report them), read from the results files."""
    f = _frames(results_dir)
    lines = dict(SUMMARY_LINES.get(s.kind, _plain_line)(s, f[s.chapter], results_dir)
                 for s in SPECS.values())
    return markdown(pd.DataFrame({"what the committed run shows": lines}), index="table")


RESULTS_PAGE = PROJECT_ROOT / "book" / "results.md"


def results_page(results_dir="results", nb_dir: Path = CHAPTER_DIR) -> str:
    """The book's *Results at a glance* page: every headline table and the chapters'
    timings, from the results files and the executed notebooks."""
    return ("(results)=\n# Results at a glance\n\n"
            "*Written by `cflib readme` from the committed results files; each chapter "
            "shows the same numbers with their figures, checks and protocol notes.*\n\n"
            + headline(results_dir, html=True)
            + "\n\n## How long each chapter took\n\nFrom the executed notebooks' records "
              "(networks already in the weight cache were loaded, not trained).\n\n"
            + timing_markdown(nb_dir) + "\n")


def update_readme(readme="README.md", results_dir="results", page=None) -> str:
    """Rewrite the README's summary block and the book's results page (both from the
    results files; both fail before anything is written when a file is missing; ``cflib
    readme`` first refuses a committed results file that does not match its notebook)."""
    block = summary(results_dir)
    text = results_page(results_dir)
    atomic_write(Path(page or RESULTS_PAGE), text)
    return _replace_block(readme, SUMMARY_START, SUMMARY_END, block)


def generated_stale(readme=PROJECT_ROOT / "README.md", results_dir="results",
                    page=None) -> list[str]:
    """The generated text that no longer matches what it was generated from: the README's
    summary block and the results page, each regenerated from the results and compared
    (a number edited by hand in either is named; ``cflib verify`` and CI call this)."""
    bad = []
    text = Path(readme).read_text()
    if text.count(SUMMARY_START) != 1 or text.count(SUMMARY_END) != 1 or \
            text.index(SUMMARY_START) > text.index(SUMMARY_END):
        # without its markers the block is not checked: that is itself a finding
        bad.append(f"{Path(readme).name} has lost its summary block's markers ({SUMMARY_START} "
                   f"... {SUMMARY_END}, once each and in that order), so its numbers cannot "
                   f"be checked: restore them (`git checkout -- {Path(readme).name}`) and "
                   "run `cflib readme`")
    else:
        block = text.split(SUMMARY_START, 1)[1].split(SUMMARY_END, 1)[0].strip("\n")
        if block != summary(results_dir).strip("\n"):
            bad.append(f"{Path(readme).name}'s summary block does not match the results it is "
                       "generated from (edited by hand, or the results changed): run "
                       "`cflib readme`")
    page = Path(page or RESULTS_PAGE)
    if not page.exists() or page.read_text() != results_page(results_dir):
        bad.append(f"{page.relative_to(PROJECT_ROOT) if page.is_relative_to(PROJECT_ROOT) else page} "
                   "does not match the results it is generated from: run `cflib readme`")
    return bad


def _replace_block(path, start: str, end: str, block: str) -> str:
    """Rewrite the text between two markers of a file, atomically; returns the new text."""
    path = Path(path)
    text = path.read_text()
    if start not in text or end not in text:
        raise ValueError(f"{path} has no {start} ... {end} block")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    new = f"{head}{start}\n{block}\n{end}{tail}"
    atomic_write(path, new)
    return new


TIMING_START, TIMING_END = "<!-- timing:chapters:start -->", "<!-- timing:chapters:end -->"


def compute_run(name: str, nb_dir: Path = CHAPTER_DIR) -> tuple[dict, dict] | None:
    """A committed chapter's notebook metadata and the record of the compute run that made
    it (seconds, threads, date), or None where it has no such record."""
    path = nb_dir / f"{name}.ipynb"
    if not path.exists():
        return None
    meta = read_notebook(path).metadata.get("cflib", {})
    # a re-rendered page keeps the compute run's record under "computed"; its own
    # "seconds" are the render's
    run = meta.get("computed", meta)
    return (meta, run) if "seconds" in run else None


def compute_minutes(name: str, nb_dir: Path = CHAPTER_DIR) -> str | None:
    """A committed chapter's compute time as the results page and the README state it."""
    rec = compute_run(name, nb_dir)
    return None if rec is None else f"{rec[1]['seconds'] / 60:.1f} min"


def timing_markdown(nb_dir: Path = CHAPTER_DIR) -> str:
    """How long each committed chapter took to execute, read from its notebook's metadata
    (the run that produced it: its profile, threads and date; networks already in the
    weight cache were loaded, not trained)."""

    rows = []
    for name in CHAPTERS:
        rec = compute_run(name, nb_dir)
        if rec is None:
            continue
        meta, run = rec
        rows.append([f"`{name}`", f"`{meta['params']['profile']}`",
                     compute_minutes(name, nb_dir), run["threads"], run["date"]])
    return markdown(pd.DataFrame(rows, columns=["chapter", "profile", "computed in",
                                                "CPU threads", "date"]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="Headline tables of the committed results.")
    ap.add_argument("results_dir", nargs="?", default="results")
    ap.add_argument("--readme", help="rewrite the summary of this README and the results page "
                                     "instead of printing")
    args = ap.parse_args(argv)
    if args.readme:
        update_readme(args.readme, args.results_dir)
    else:
        print(headline(args.results_dir))
