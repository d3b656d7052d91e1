"""Tables beside the papers' values, and the chapters' figures.

Paper values are read from ``cflib/reference/reported.csv`` (a copy of the
project's reference file), never typed into a notebook.
"""
from __future__ import annotations

from importlib import resources

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from cflib.data import CLASS_NAMES, DATASET_TITLES, parse_pair

#: reported metric name -> (our metric name, factor the paper's table applies)
REPORTED_SCALE = {"IM2x10": ("IM2", 10.0), "KIDx1e3": ("KID", 1e3),
                  "Validity_pct": ("Validity", 100.0), "Accuracy_pct": ("Accuracy", 100.0)}
#: our metric name -> column title of the book's tables
DISPLAY = {"IM2": "IM2 (x10)", "KID": "KID (x1e3)"}
SCALE = {"IM2": 10.0, "KID": 1e3}


def load_reported(table: str | None = None, dataset: str | None = None) -> pd.DataFrame:
    """The papers' numbers: ``table, dataset, method, setting, metric, value, direction, source``."""
    with resources.files("cflib.reference").joinpath("reported.csv").open() as f:
        df = pd.read_csv(f, keep_default_na=False)
    df["value"] = df["value"].astype(float)
    if table is not None:
        df = df[df["table"] == table]
    if dataset is not None:
        df = df[df["dataset"] == dataset]
    return df.reset_index(drop=True)


def reported_on_our_scale(table: str, dataset: str) -> pd.DataFrame:
    """Reported values renamed to our metric names and divided back to our scale."""
    df = load_reported(table, dataset).copy()
    for name, (ours, factor) in REPORTED_SCALE.items():
        m = df["metric"] == name
        df.loc[m, "metric"] = ours
        df.loc[m, "value"] = df.loc[m, "value"] / factor
    return df


def directions(table: str) -> dict:
    df = load_reported(table)
    out = {}
    for name, d in zip(df["metric"], df["direction"]):
        out[REPORTED_SCALE.get(name, (name,))[0]] = d
    return out


def comparison_table(results: pd.DataFrame, table: str, dataset: str, pair: str = "mean",
                     metrics=None, methods=None) -> pd.DataFrame:
    """Ours beside the paper's: rows = methods, columns = (metric, ours/paper), table scale."""
    ours = results[(results["pair"] == pair) & (results["method"] != "Classifier")]
    ours = ours.groupby(["method", "metric"])["value"].mean().unstack()
    paper = reported_on_our_scale(table, dataset)
    paper = paper.pivot_table(index="method", columns="metric", values="value", aggfunc="first")
    metrics = list(metrics or ours.columns)
    methods = list(methods or ours.index)
    cols = {}
    for m in metrics:
        f = SCALE.get(m, 1.0)
        title = DISPLAY.get(m, m)
        cols[(title, "ours")] = ours.reindex(methods)[m] * f if m in ours else np.nan
        cols[(title, "paper")] = (paper.reindex(methods)[m] * f if m in paper.columns
                                  else pd.Series(np.nan, index=methods))
    out = pd.DataFrame(cols, index=methods)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = "method"
    return out


def pair_table(results: pd.DataFrame, metrics) -> pd.DataFrame:
    """Every metric per (pair, method), on the paper's scale: the long form of the table."""
    df = results[results["method"] != "Classifier"]
    out = df.pivot_table(index=["pair", "method"], columns="metric", values="value",
                         aggfunc="mean", sort=False)
    out = out[[m for m in metrics if m in out.columns]]
    for m, f in SCALE.items():
        if m in out:
            out[m] = out[m] * f
    return out.rename(columns=DISPLAY)


def style(table: pd.DataFrame, digits: int = 3):
    """A pandas Styler with a fixed number of significant digits and NaN shown as '–'."""
    return table.style.format(lambda v: "–" if pd.isna(v) else f"{v:.{digits}g}")


def pair_title(dataset: str, pair) -> str:
    q, t = parse_pair(pair)
    names = CLASS_NAMES[dataset]
    if dataset == "mnist":
        return f"{q} → {t}"
    return f"{q} ({names[q]}) → {t} ({names[t]})"


def pairs_table(dataset: str, pairs) -> pd.DataFrame:
    """The class pairs with class names beside the class numbers."""
    names = CLASS_NAMES[dataset]
    rows = []
    for p in pairs:
        q, t = parse_pair(p)
        rows.append({"pair": p, "query": f"{q} ({names[q]})", "target": f"{t} ({names[t]})"})
    return pd.DataFrame(rows).set_index("pair")


def _img(ax, img, cmap="gray", vmin=-1, vmax=1):
    ax.imshow(np.asarray(img).squeeze(), cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks([])
    ax.set_yticks([])


def plot_cf_grid(counterfactuals: dict, pair: str, methods, n: int = 4, with_diff: bool = True,
                 title: str | None = None):
    """Rows: ``n`` fixed query images; columns: query, then each method's CF (and difference).

    Counterfactuals that fail to reach the target get a red frame.
    """
    methods = [m for m in methods if (pair, m) in counterfactuals]
    per = 2 if with_diff else 1
    ncols = 1 + per * len(methods)
    fig, axes = plt.subplots(n, ncols, figsize=(1.1 * ncols, 1.15 * n + 0.4), squeeze=False)
    first = counterfactuals[(pair, methods[0])]
    for r in range(n):
        _img(axes[r, 0], first.x[r])
        for k, m in enumerate(methods):
            cf = counterfactuals[(pair, m)]
            ax = axes[r, 1 + per * k]
            _img(ax, cf.x_cf[r])
            if not bool(cf.success[r]):
                for s in ax.spines.values():
                    s.set_edgecolor("red")
                    s.set_linewidth(2)
            if with_diff:
                _img(axes[r, 2 + per * k], (cf.x_cf[r] - cf.x[r]), cmap="bwr", vmin=-2, vmax=2)
            if r == 0:
                ax.set_title(m, fontsize=8)
                if with_diff:
                    axes[r, 2 + per * k].set_title("difference", fontsize=7)
    axes[0, 0].set_title("query", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_aupc_curves(curves: dict, pairs, methods):
    """Mean target / query softmax along the insertion path, a panel per pair."""
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 3.2), squeeze=False)
    colors = dict(zip(methods, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3))
    for ax, pair in zip(axes[0], pairs):
        for m in methods:
            if (pair, m) not in curves:
                continue
            c = curves[(pair, m)]
            xs = np.linspace(0, 1, c.target_curve.shape[1])
            ax.plot(xs, c.target_curve.mean(0), color=colors[m], label=f"{m}")
            ax.plot(xs, c.query_curve.mean(0), color=colors[m], ls="--")
        ax.set_title(f"pair {pair}: target (solid), query (dashed)", fontsize=9)
        ax.set_xlabel("fraction of pixels pasted")
        ax.set_ylim(-0.02, 1.02)
    axes[0, 0].set_ylabel("softmax score")
    axes[0, -1].legend(fontsize=7, loc="center right")
    fig.tight_layout()
    return fig


def plot_seconds(results: pd.DataFrame):
    """Seconds per counterfactual per method (log scale), mean over pairs."""
    df = results[(results["metric"] == "seconds_per_cf") & (results["pair"] == "mean")]
    df = df.set_index("method")["value"]
    fig, ax = plt.subplots(figsize=(6, 0.45 * len(df) + 0.8))
    ax.barh(df.index, df.values, color="tab:blue")
    ax.set_xscale("log")
    ax.set_xlabel("seconds per counterfactual (log scale, this machine)")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


def shape_checks(results: pd.DataFrame, checks) -> pd.DataFrame:
    """Evaluate expected orderings, e.g. ``("IM1", "C3LT", "<", "CEM")``, on the pair means."""
    mean = results[results["pair"] == "mean"].groupby(["method", "metric"])["value"].mean()
    rows = []
    for metric, a, op, b in checks:
        if (a, metric) not in mean or (b, metric) not in mean:
            continue
        va, vb = mean[(a, metric)], mean[(b, metric)]
        holds = va < vb if op == "<" else va > vb
        rows.append({"expectation": f"{metric}: {a} {op} {b}", "left": va,
                     "right": vb, "holds": bool(holds)})
    return pd.DataFrame(rows)


def rank_methods(frames: dict, metrics, table: str = "c3lt") -> dict:
    """Per dataset, each method's rank (1 = best) on the pair-mean of each metric."""
    dirs = directions(table)
    dirs.setdefault("seconds_per_cf", "lower")
    out = {}
    for name, df in frames.items():
        mean = df[(df["pair"] == "mean") & (df["method"] != "Classifier")]
        wide = mean.pivot_table(index="method", columns="metric", values="value", sort=False)
        wide = wide[[m for m in metrics if m in wide.columns]]
        out[name] = pd.DataFrame({m: wide[m].rank(ascending=dirs.get(m, "lower") == "lower",
                                                  method="min") for m in wide.columns})
    return out


def rank_summary(ranks: dict) -> pd.DataFrame:
    """Mean rank over every metric except time, per dataset, and its change."""
    cols = {name: r.drop(columns=["seconds_per_cf"], errors="ignore").mean(1)
            for name, r in ranks.items()}
    out = pd.DataFrame(cols)
    if out.shape[1] == 2:
        out["change"] = out.iloc[:, 1] - out.iloc[:, 0]
    return out.sort_values(out.columns[0])


# -- the Bayesian chapter -------------------------------------------------------------------
BAYES_METRICS = ("IM1", "Implausibility", "Robustness_Ratio_1e-3", "Validity", "Seconds_per_CF")


def bayes_table(results: pd.DataFrame, setting: str, dataset: str = "mnist",
                metrics=BAYES_METRICS, methods=None) -> pd.DataFrame:
    """One setting: per method and metric our mean and standard deviation over the
    repeats, and the paper's value where ``reported.csv`` has one (IM1 only)."""
    df = results[(results["setting"] == setting) & (results["method"] != "Classifier")]
    if df.empty:
        raise ValueError(f"no results for setting {setting!r}")
    g = df.groupby(["method", "metric"], sort=False)["value"]
    mean, std = g.mean().unstack(), g.std().unstack()
    paper = load_reported("bayes", dataset)
    paper = paper[paper["setting"] == setting].set_index(["method", "metric"])["value"]
    methods = list(methods or mean.index)
    cols = {}
    for m in metrics:
        if m not in mean.columns:
            continue
        cols[(m, "ours")] = mean.reindex(methods)[m]
        cols[(m, "± sd")] = std.reindex(methods)[m]
        cols[(m, "paper")] = pd.Series([paper.get((meth, m), np.nan) for meth in methods],
                                       index=methods, dtype=float)
    out = pd.DataFrame(cols, index=methods)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = "method"
    return out


def plot_bayes_grid(cfs: dict, methods, n: int = 6, repeat: int = 0, title: str | None = None):
    """Rows: the first ``n`` queries of a repeat (label → target); columns: each method's
    counterfactual, red-framed when the posterior-mean decision is not the target."""
    x, y, t, _ = cfs["queries"][repeat]
    methods = [m for m in methods if m in cfs]
    fig, axes = plt.subplots(n, 1 + len(methods), figsize=(1.15 * (1 + len(methods)),
                                                            1.15 * n + 0.4), squeeze=False)
    for r in range(n):
        _img(axes[r, 0], x[r])
        axes[r, 0].set_ylabel(f"{int(y[r])} → {int(t[r])}", fontsize=8)
        for k, m in enumerate(methods):
            cf = cfs[m][repeat]
            ax = axes[r, 1 + k]
            _img(ax, cf.x_cf[r])
            if not bool(cf.success[r]):
                for s in ax.spines.values():
                    s.set_edgecolor("red")
                    s.set_linewidth(2)
            if r == 0:
                ax.set_title(m, fontsize=8)
    axes[0, 0].set_title("query", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_perturbation_curves(curves: pd.DataFrame, methods=None):
    """Validity against the scale of weight noise, a panel per setting; lines are the
    mean over repeats, bands the min-max over repeats.  Scale 0 is drawn at the left
    edge of the log axis."""
    settings = list(dict.fromkeys(curves["setting"]))
    methods = list(methods or dict.fromkeys(curves["method"]))
    fig, axes = plt.subplots(1, len(settings), figsize=(4.6 * len(settings), 3.4),
                             squeeze=False, sharey=True)
    positive = curves.loc[curves["scale"] > 0, "scale"]
    zero_at = positive.min() / 3 if len(positive) else 1e-4
    for ax, s in zip(axes[0], settings):
        d = curves[curves["setting"] == s].copy()
        d["x"] = d["scale"].where(d["scale"] > 0, zero_at)
        for m in methods:
            dm = d[d["method"] == m].groupby("x")["validity"]
            if dm.ngroups == 0:
                continue
            lo, mid, hi = dm.min(), dm.mean(), dm.max()
            line, = ax.plot(mid.index, mid.values, marker="o", ms=3, label=m)
            ax.fill_between(lo.index, lo.values, hi.values, color=line.get_color(), alpha=0.15)
        ax.set_xscale("log")
        ax.set_title(s.replace("_", " "), fontsize=10)
        ax.set_xlabel("std of Gaussian weight noise (leftmost point: none)")
        ax.set_ylim(-0.02, 1.02)
    axes[0, 0].set_ylabel("validity")
    axes[0, -1].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


# -- the README's headline tables --------------------------------------------------------------
def _fmt(v, digits: int = 3) -> str:
    return "–" if pd.isna(v) else f"{v:.{digits}g}"


def markdown_ours_paper(table: pd.DataFrame, digits: int = 3) -> str:
    """A ``comparison_table`` as a markdown table of ``ours / paper`` cells."""
    def fmt(v):
        return _fmt(v, digits)

    metrics = list(dict.fromkeys(table.columns.get_level_values(0)))
    lines = ["| method | " + " | ".join(metrics) + " |",
             "|---|" + "---|" * len(metrics)]
    for method, row in table.iterrows():
        cells = [f"{fmt(row[(m, 'ours')])} / {fmt(row[(m, 'paper')])}" for m in metrics]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown_bayes(table: pd.DataFrame, digits: int = 3) -> str:
    """A ``bayes_table`` as markdown: ``mean ± sd`` cells, the paper's value after a slash."""
    def fmt(v):
        return _fmt(v, digits)

    metrics = list(dict.fromkeys(table.columns.get_level_values(0)))
    lines = ["| method | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    for method, row in table.iterrows():
        cells = []
        for m in metrics:
            c = f"{fmt(row[(m, 'ours')])} ± {fmt(row[(m, '± sd')])}"
            if not pd.isna(row[(m, "paper")]):
                c += f" / {fmt(row[(m, 'paper')])}"
            cells.append(c)
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def headline(results_dir="results") -> str:
    """Markdown headline tables of every committed results file (README)."""
    from pathlib import Path

    from cflib.benchmark import C3LT_METRICS

    out = []
    for name, dataset in (("mnist_eval", "mnist"), ("fashion_mnist_test", "fmnist")):
        f = Path(results_dir) / f"{name}.csv"
        if not f.exists():
            continue
        df = pd.read_csv(f, keep_default_na=False)
        df["value"] = pd.to_numeric(df["value"], errors="coerce")
        acc = df.loc[df["method"] == "Classifier", "value"].item()
        methods = list(dict.fromkeys(df.loc[df["method"] != "Classifier", "method"]))
        t = comparison_table(df, "c3lt", dataset, metrics=C3LT_METRICS, methods=methods)
        out.append(f"**{DATASET_TITLES[dataset]}**, profile `{df['profile'].iloc[0]}`, seed "
                   f"{df['seed'].iloc[0]} (classifier test accuracy {acc:.4f}); mean over the "
                   f"three pairs, ours / paper:\n\n" + markdown_ours_paper(t))
    f = Path(results_dir) / "mnist_bayesian.csv"
    if f.exists():
        df = pd.read_csv(f)
        for s in dict.fromkeys(df.loc[df["method"] != "Classifier", "setting"]):
            acc = df.loc[(df["method"] == "Classifier") & (df["setting"] == s), "value"].item()
            n = df.loc[(df["setting"] == s) & (df["repeat"] >= 0), "repeat"].nunique()
            out.append(f"**MNIST, Bayesian classifiers: {s}**, profile `{df['profile'].iloc[0]}` "
                       f"(posterior-mean test accuracy {acc:.4f}); mean ± sd over {n} repeats, "
                       f"paper's IM1 after the slash:\n\n"
                       + markdown_bayes(bayes_table(df, s)))
    return "\n\n".join(out)


HEADLINE_START, HEADLINE_END = "<!-- headline:start -->", "<!-- headline:end -->"


def update_readme(readme="README.md", results_dir="results") -> str:
    """Rewrite the text between the headline markers of ``readme`` with :func:`headline`."""
    from pathlib import Path

    path = Path(readme)
    text = path.read_text()
    if HEADLINE_START not in text or HEADLINE_END not in text:
        raise ValueError(f"{readme} has no {HEADLINE_START} ... {HEADLINE_END} block")
    head, rest = text.split(HEADLINE_START, 1)
    _, tail = rest.split(HEADLINE_END, 1)
    new = f"{head}{HEADLINE_START}\n{headline(results_dir)}\n{HEADLINE_END}{tail}"
    path.write_text(new)
    return new


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Headline tables of the committed results.")
    ap.add_argument("results_dir", nargs="?", default="results")
    ap.add_argument("--readme", help="rewrite the headline block of this README instead of printing")
    args = ap.parse_args()
    if args.readme:
        update_readme(args.readme, args.results_dir)
    else:
        print(headline(args.results_dir))


def perturbation_table(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean validity over repeats per (setting, method) and weight-noise scale."""
    return curves.pivot_table(index=["setting", "method"], columns="scale", values="validity",
                              aggfunc="mean", sort=False)
