"""The chapters' figures: counterfactual grids, insertion curves, timings, rankings,
validity under weight noise.  Each function returns a matplotlib figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from cflib.bench.results import MEAN_OVER_PAIRS
from cflib.book.report.tables import performance_table, quant_table
from cflib.metrics import SECONDS_PER_CF


def _frame(ax, color: str = "red", width: float = 2.0) -> None:
    for s in ax.spines.values():
        s.set_edgecolor(color)
        s.set_linewidth(width)


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
                _frame(ax)
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
    df = results[(results["metric"] == SECONDS_PER_CF.name)
                 & (results["aggregate"] == MEAN_OVER_PAIRS)]
    df = df.set_index("method")["value"]
    fig, ax = plt.subplots(figsize=(6, 0.45 * len(df) + 0.8))
    ax.barh(df.index, df.values, color="tab:blue")
    ax.set_xscale("log")
    ax.set_xlabel("seconds per counterfactual (log scale, this machine)")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


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
                _frame(ax)
            if r == 0:
                ax.set_title(m, fontsize=8)
    axes[0, 0].set_title("query", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_perturbation_curves(curves: pd.DataFrame, methods=None):
    """Validity against the scale of weight noise, a panel per Bayesian classifier; lines are the
    mean over repeats, bands the min-max over repeats.  Scale 0 is drawn at the left
    edge of the log axis."""
    models = list(dict.fromkeys(curves["model"]))
    methods = list(methods or dict.fromkeys(curves["method"]))
    fig, axes = plt.subplots(1, len(models), figsize=(4.6 * len(models), 3.4),
                             squeeze=False, sharey=True)
    positive = curves.loc[curves["scale"] > 0, "scale"]
    zero_at = positive.min() / 3 if len(positive) else 1e-4
    for ax, s in zip(axes[0], models):
        d = curves[curves["model"] == s].copy()
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


def plot_rank_heatmaps(ranks: dict):
    """One heatmap per dataset of each method's rank per metric (1 = best)."""
    import seaborn as sns

    fig, axes = plt.subplots(1, len(ranks), figsize=(5.2 * len(ranks), 3.6), squeeze=False)
    for ax, (name, r) in zip(axes[0], ranks.items()):
        sns.heatmap(r, annot=True, fmt=".0f", cmap="viridis_r", cbar=False, ax=ax)
        ax.set_title(f"{name}: rank per metric (1 = best)", fontsize=10)
        ax.set_xlabel("")
        ax.set_ylabel("")
    fig.tight_layout()
    return fig


# -- the quantization chapter ------------------------------------------------------------------
def plot_acc_vs_vd(results: pd.DataFrame, dataset: str = "fmnist"):
    """"Accuracy hides what VD shows": per compressed row, accuracy (ours beside the
    paper's, FP32 as a line) and VD with its 95 % interval (or sd over seeds)."""
    t = quant_table(results, dataset)
    rows = [m for m in t.index if m != "FP32"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 0.42 * len(rows) + 1.6), sharey=True)
    y = np.arange(len(rows))
    a1.barh(y - 0.2, t.loc[rows, ("Accuracy %", "ours")], 0.4, label="ours", color="tab:blue")
    a1.barh(y + 0.2, t.loc[rows, ("Accuracy %", "paper")], 0.4, label="paper",
            color="tab:gray")
    if "FP32" in t.index:
        a1.axvline(t.loc["FP32", ("Accuracy %", "ours")], color="k", ls="--", lw=1,
                   label="our FP32")
    lo = np.nanmin(t.loc[rows, [("Accuracy %", "ours"), ("Accuracy %", "paper")]].values)
    a1.set_xlim(max(0, lo - 8), 100)
    a1.set_xlabel("test accuracy (%)")
    a1.legend(fontsize=7, loc="lower left")
    a2.barh(y, t.loc[rows, ("VD", "ours")], xerr=t.loc[rows, ("VD", "±")], color="tab:red",
            capsize=3)
    a2.set_xlabel("VD: share of FP recourse the compressed model rejects")
    a2.set_xlim(0, 1)
    a1.set_yticks(y)
    a1.set_yticklabels(rows)
    a1.invert_yaxis()
    fig.tight_layout()
    return fig


def plot_vd_vs_bits(sweep: pd.DataFrame, results: pd.DataFrame):
    """The uniform-bit PTQ sweep: accuracy and VD against bits, the mixed-precision rows
    as points at their average bits."""
    s = sweep.groupby(["bits", "metric"])["value"].mean().unstack()
    res = results[results["variant"] == ""]
    mean = res.groupby(["method", "metric"])["value"].mean()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.4))
    a1.plot(s.index, 100 * s["Accuracy"], marker="o", color="tab:blue", label="PTQ W=A=b")
    a2.plot(s.index, s["VD"], marker="o", color="tab:red", label="PTQ W=A=b")
    if ("FP32", "Accuracy") in mean:
        a1.axhline(100 * mean[("FP32", "Accuracy")], color="k", ls="--", lw=1, label="FP32")
    for m in ("MixedPrec-QAT", "CFQ-QAT", "KD+Quant", "Prune+Quant"):
        if (m, "Bit_cost") in mean:
            a1.scatter(mean[(m, "Bit_cost")], 100 * mean[(m, "Accuracy")], marker="s", label=m)
            a2.scatter(mean[(m, "Bit_cost")], mean[(m, "VD")], marker="s", label=m)
    for ax in (a1, a2):
        ax.set_xlabel("bits (average bits for mixed precision)")
        ax.set_xticks(sorted(set(s.index)))
    a1.set_ylabel("test accuracy (%)")
    a2.set_ylabel("VD")
    a2.set_ylim(-0.02, 1.02)
    a2.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_recourse_grid(run, seed: int | None = None, n: int = 6, methods=None):
    """Rows: ``n`` FP-feasible queries (those with a VD event first); columns: the query,
    the FP recourse, each compressed row's own recourse.  A red frame marks a row whose
    model rejects the FP recourse (a VD event); each cell shows cos(delta_f, delta_q)."""
    seed = run.train_seeds[0] if seed is None else seed
    methods = [m for m in (methods or run.methods) if (seed, "", m) in run.recourse]
    fp = run.recourse[(seed, "", "FP32")].cf
    feasible = fp.success.nonzero().flatten().tolist()
    events = {m: run.recourse[(seed, "", m)].vd_events for m in methods}
    with_event = [i for i in feasible if any(bool(events[m][i] == 1) for m in methods)]
    rows = (with_event + [i for i in feasible if i not in with_event])[:n]
    if not rows:
        raise ValueError("no FP-feasible query to show")
    cols = 2 + len(methods)
    fig, axes = plt.subplots(len(rows), cols, figsize=(1.15 * cols, 1.2 * len(rows) + 0.5),
                             squeeze=False)
    for r, i in enumerate(rows):
        _img(axes[r, 0], fp.x[i])
        _img(axes[r, 1], fp.x_cf[i])
        for k, m in enumerate(methods):
            rec = run.recourse[(seed, "", m)]
            ax = axes[r, 2 + k]
            _img(ax, rec.cf.x_cf[i])
            if not bool(rec.cf.success[i]):
                ax.set_facecolor("0.85")
                _frame(ax, "0.5", 1.0)
            if bool(rec.vd_events[i] == 1):
                _frame(ax)
            cos = float(rec.dirsim[i])
            ax.set_xlabel("–" if np.isnan(cos) else f"cos {cos:.2f}", fontsize=6, labelpad=1)
            if r == 0:
                ax.set_title(m, fontsize=6)
    axes[0, 0].set_title("query", fontsize=7)
    axes[0, 1].set_title("FP recourse", fontsize=7)
    fig.tight_layout()
    return fig


def plot_bit_allocation(bits: pd.DataFrame):
    """Methods x quantizers, each cell the final bits (mean over seeds): is "mixed" mixed?"""
    import seaborn as sns

    t = bits.pivot_table(index="method", columns="quantizer", values="bits", aggfunc="mean",
                         sort=False)
    order = [q for q in ("conv1.w", "conv2.w", "fc1.w", "fc2.w", "act1", "act2", "act3")
             if q in t.columns]
    t = t[order + [q for q in t.columns if q not in order]]
    fig, ax = plt.subplots(figsize=(1.0 * t.shape[1] + 2.5, 0.45 * t.shape[0] + 1.2))
    sns.heatmap(t, annot=True, fmt=".3g", cmap="viridis", vmin=2, vmax=8, cbar=False, ax=ax)
    ax.set_xlabel("quantizer")
    ax.set_ylabel("")
    fig.tight_layout()
    return fig


def plot_recourse_distributions(run, methods=None):
    """Per-query cost gap and direction cosine per compressed row (box plots), and f_q's
    target margin at the FP recourse points (below 0: a VD event)."""
    methods = list(methods or run.methods)

    def pooled(m, attr):
        vals = [getattr(run.recourse[(s, "", m)], attr) for s in run.train_seeds
                if (s, "", m) in run.recourse]
        v = np.concatenate([np.asarray(t, dtype=float) for t in vals]) if vals else np.array([])
        return v[~np.isnan(v)]

    fig, axes = plt.subplots(1, 3, figsize=(13, 0.4 * len(methods) + 2))
    for ax, attr, label in ((axes[0], "cost_gap", "CRG per query: (c_q - c_f) / c_f"),
                            (axes[1], "dirsim", "DirSim per query: cos(δ_f, δ_q)")):
        data = [pooled(m, attr) for m in methods]
        ax.boxplot(data, vert=False, showfliers=False)
        ax.set_yticks(range(1, len(methods) + 1))
        ax.set_yticklabels(methods if ax is axes[0] else [])
        ax.invert_yaxis()
        ax.set_xlabel(label, fontsize=8)
    axes[0].axvline(0, color="k", lw=0.8)
    for m in methods:
        axes[2].hist(pooled(m, "margin"), bins=30, histtype="step", label=m)
    axes[2].axvline(0, color="k", lw=0.8)
    axes[2].set_xlabel("f_q's target margin at the FP recourse", fontsize=8)
    axes[2].legend(fontsize=6)
    fig.tight_layout()
    return fig


# -- the performance page ---------------------------------------------------------------------
def plot_time_vs_batch(perf: pd.DataFrame):
    """Seconds per counterfactual against batch size (log-log), one line per method; the
    one-at-a-time time is drawn at batch size 1."""
    fig, ax = plt.subplots(figsize=(8, 4.6))
    for method, d in perf.groupby("method", sort=False):
        if not d["flops_per_cf"].gt(0).any():
            continue                       # reference rows: no model work to time
        d = d.sort_values("batch_size")
        ax.plot(d["batch_size"], d["seconds_per_cf"], marker="o", ms=3, label=method)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (1: one image at a time)")
    ax.set_ylabel("seconds per counterfactual")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def plot_fraction_of_bound(perf: pd.DataFrame):
    """The fraction of the classifier's large-batch forward+backward FLOP rate each
    method reaches, one image at a time and at its best batch size."""
    t = performance_table(perf)
    t = t[t["GFLOP/CF"] > 0]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(t) + 1.4))
    y = np.arange(len(t))
    ax.barh(y - 0.2, t["fraction of bound alone"], 0.4, label="one at a time", color="tab:gray")
    ax.barh(y + 0.2, t["fraction of bound batched"], 0.4, label="best batch", color="tab:blue")
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.set_yticks(y)
    ax.set_yticklabels(t.index)
    ax.invert_yaxis()
    ax.set_xlabel("achieved FLOP/s ÷ the classifier's large-batch forward+backward FLOP/s")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
