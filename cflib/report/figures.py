"""The chapters' figures: counterfactual grids, insertion curves, timings, rankings,
validity under weight noise.  Each function returns a matplotlib figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from cflib.metrics.spec import SECONDS_PER_CF


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
    df = results[(results["metric"] == SECONDS_PER_CF.name) & (results["pair"] == "mean")]
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
