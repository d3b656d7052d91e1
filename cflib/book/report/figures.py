"""The chapters' figures: counterfactual grids, insertion curves, timings, rankings,
validity under weight noise.  Each function returns a matplotlib figure.

Every figure is drawn for the book's text column: at most :data:`PAGE_WIDTH` inches wide
at :data:`DPI` dots per inch (the column is about 780 px), so that it is shown at its
own size and its text (:data:`STYLE`, 12 pt and up) reads like the body text; panels
stack vertically rather than side by side, and image grids put methods in rows.  A
method has the same colour and marker on every page (:func:`method_style`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from cflib.bench.results import MEAN_OVER_PAIRS
from cflib.book.report.tables import performance_table, quant_table
from cflib.metrics import SECONDS_PER_CF

#: the widest figure, in inches, and the resolution it is drawn at: 7.6 x 100 = 760 px
PAGE_WIDTH = 7.6
DPI = 100
#: the book's matplotlib settings (applied by :func:`use_book_style`)
STYLE = {"figure.dpi": DPI, "savefig.dpi": DPI, "font.size": 12, "axes.titlesize": 12,
         "axes.labelsize": 12, "xtick.labelsize": 11, "ytick.labelsize": 11,
         "legend.fontsize": 11, "figure.titlesize": 13}


def use_book_style() -> None:
    """Apply :data:`STYLE` to matplotlib (the chapters call the figure functions, which
    call this first)."""
    plt.rcParams.update(STYLE)


def _all_methods() -> list[str]:
    from cflib.bench.catalog import CATALOG
    from cflib.bench.tables.registry import specs_of

    return list(dict.fromkeys([*CATALOG, *(m for s in specs_of("quant") for m in s.methods)]))


_MARKERS = "osD^vP*Xhp<>"


def method_style(method: str) -> dict:
    """The colour and marker of ``method``, the same on every page: the methods of the
    catalog and the quantization rows in a fixed order over a 20-colour palette (a name
    outside them gets one by its hash)."""
    names = _all_methods()
    colors = plt.get_cmap("tab20").colors
    i = names.index(method) if method in names else abs(hash(method)) % len(colors)
    # tab20 pairs a dark and a light shade: take the dark ones first, then the light
    order = list(range(0, 20, 2)) + list(range(1, 20, 2))
    return {"color": colors[order[i % 20]], "marker": _MARKERS[i % len(_MARKERS)]}


def _figure(nrows=1, ncols=1, height=4.0, width=PAGE_WIDTH, **kw):
    use_book_style()
    return plt.subplots(nrows, ncols, figsize=(min(width, PAGE_WIDTH), height), **kw)


def _frame(ax, color: str = "red", width: float = 2.0, style: str = "-") -> None:
    for s in ax.spines.values():
        s.set_edgecolor(color)
        s.set_linewidth(width)
        s.set_linestyle(style)


def already_target(cf, i: int) -> bool:
    """Did the classifier already assign query ``i`` to its target (so that its
    counterfactual never counts as valid, whatever it shows)?  The mask the explainer
    recorded (``meta["already_target"]``), else its decision on the query against the
    target."""
    already = (getattr(cf, "meta", None) or {}).get("already_target")
    if already is not None:
        return bool(already[i])
    if getattr(cf, "pred", None) is None or getattr(cf, "target", None) is None:
        return False
    target = cf.target[i] if getattr(cf.target, "ndim", 0) else cf.target
    return bool(cf.pred[i] == target)


def _img(ax, img, cmap="gray", vmin=-1, vmax=1):
    ax.imshow(np.asarray(img).squeeze(), cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks([])
    ax.set_yticks([])


def _titled_layout(fig, title: str | None, room: float = 0.45) -> None:
    """Lay a grid out tightly, with ``room`` inches above the axes (and their own titles)
    for the figure's title, so that the title never overlaps an image."""
    if not title:
        fig.tight_layout(pad=0.3, w_pad=0.1, h_pad=0.2)
        return
    fig.suptitle(title, y=1 - 0.08 / fig.get_figheight(), va="top")
    fig.tight_layout(pad=0.3, w_pad=0.1, h_pad=0.2,
                     rect=(0, 0, 1, 1 - room / fig.get_figheight()))


def plot_query_dependence(counterfactuals: dict, pair: str, methods, n: int = 10,
                          title: str | None = None):
    """Does the output follow the query?  Rows: ``n`` different queries of one pair;
    columns: the query, then each method's counterfactual of it.  A method whose column
    repeats one image ignores its query; real target images drawn at random
    (``Original Data``) show what no dependence looks like."""
    methods = [m for m in methods if (pair, m) in counterfactuals]
    first = counterfactuals[(pair, methods[0])]
    n = min(n, len(first))
    cols = ["query", *methods]
    cell = PAGE_WIDTH / (len(cols) + 0.4)
    fig, axes = _figure(n, len(cols), height=cell * n + 1.1, squeeze=False)
    for r in range(n):
        _img(axes[r, 0], first.x[r])
        for k, m in enumerate(methods, start=1):
            cf = counterfactuals[(pair, m)]
            if r >= len(cf):
                axes[r, k].axis("off")
                continue
            _img(axes[r, k], cf.x_cf[r])
    import textwrap

    for k, label in enumerate(cols):
        axes[0, k].set_title("\n".join(textwrap.wrap(label, 10)), fontsize=9)
    _titled_layout(fig, title)
    return fig


def plot_cf_grid(counterfactuals: dict, pair: str, methods, n: int = 4, with_diff: bool = True,
                 title: str | None = None):
    """Rows: the query, then each method; columns: ``n`` fixed query images, each with the
    method's difference from the query beside it (red: ink added, blue: removed).

    Counterfactuals that fail to reach the target get a red frame; a query the
    classifier already assigned to the target (never counted as valid) a grey dashed one.
    """
    methods = [m for m in methods if (pair, m) in counterfactuals]
    per = 2 if with_diff else 1
    ncols = per * n
    cell = PAGE_WIDTH / (ncols + 1.6)
    fig, axes = _figure(1 + len(methods), ncols, height=cell * (1 + len(methods)) + 0.6,
                        squeeze=False)
    first = counterfactuals[(pair, methods[0])]
    n = min(n, len(first))
    for c in range(n):
        _img(axes[0, per * c], first.x[c])
        if with_diff:
            axes[0, per * c + 1].axis("off")
        for k, m in enumerate(methods):
            cf = counterfactuals[(pair, m)]
            ax = axes[1 + k, per * c]
            if c >= len(cf):             # a row run on fewer queries (its budget)
                ax.axis("off")
                if with_diff:
                    axes[1 + k, per * c + 1].axis("off")
                continue
            _img(ax, cf.x_cf[c])
            if already_target(cf, c):
                _frame(ax, color="#888888", style="--")
            elif not bool(cf.success[c]):
                _frame(ax)
            if with_diff:
                _img(axes[1 + k, per * c + 1], (cf.x_cf[c] - cf.x[c]), cmap="bwr", vmin=-2, vmax=2)
    for r, label in enumerate(["query", *methods]):
        axes[r, 0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=11)
    if with_diff:
        for c in range(n):
            axes[1, per * c + 1].set_title("change", fontsize=10)
    _titled_layout(fig, title)
    return fig


def plot_aupc_curves(curves: dict, pairs, methods):
    """Mean target (solid) and query-class (dashed) softmax along the insertion path, a
    panel per pair, stacked."""
    fig, axes = _figure(len(pairs), 1, height=2.6 * len(pairs) + 1.2, squeeze=False,
                        sharex=True)
    shown = []
    for ax, pair in zip(axes[:, 0], pairs):
        for m in methods:
            if (pair, m) not in curves:
                continue
            c = curves[(pair, m)]
            st = method_style(m)
            xs = np.linspace(0, 1, c.target_curve.shape[1])
            ax.plot(xs, c.target_curve.mean(0), color=st["color"], label=m)
            ax.plot(xs, c.query_curve.mean(0), color=st["color"], ls="--")
            shown.append(m)
        ax.set_title(f"pair {pair}: target (solid), query class (dashed)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("softmax")
    axes[-1, 0].set_xlabel("fraction of the changed pixels pasted into the query")
    _legend_below(fig, axes[0, 0], 0.025)
    return fig


def _legend_below(fig, ax, row_height: float) -> None:
    """The legend of ``ax`` under the figure, three entries a row, the axes above it."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.03 + row_height * ((len(labels) + 2) // 3), 1, 1))


def _frontier_axes(fig, ax, xlabel: str, ylabel: str, top: float):
    """A proximity-validity frontier's axes: labels, validity from 0 to ``top``, a grid
    and the legend in the corner the frontier leaves free; returns the figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, top)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, loc="lower right")
    fig.tight_layout()
    return fig


def plot_seconds(results: pd.DataFrame):
    """Seconds per counterfactual per method (log scale), mean over pairs."""
    df = results[(results["metric"] == SECONDS_PER_CF.name)
                 & (results["aggregate"] == MEAN_OVER_PAIRS)]
    if "variant" in df.columns:
        df = df[df["variant"].fillna("") == ""]
    df = df.set_index("method")["value"]
    fig, ax = _figure(height=0.4 * len(df) + 1.0)
    ax.barh(df.index, df.values, color=[method_style(m)["color"] for m in df.index])
    ax.set_xscale("log")
    ax.set_xlabel("seconds per counterfactual (log scale, this machine)")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


def plot_bayes_grid(cfs: dict, methods, n: int = 6, repeat: int = 0, title: str | None = None):
    """Rows: the query, then each method; columns: the first ``n`` queries of a repeat
    (label → target above).  A red frame: the posterior-mean decision is not the target; a
    grey dashed one: the query was already in its target (never counted as valid)."""
    x, y, t, _ = cfs["queries"][repeat]
    methods = [m for m in methods if m in cfs]
    n = min(n, len(x))
    cell = PAGE_WIDTH / (n + 1.8)
    fig, axes = _figure(1 + len(methods), n, height=cell * (1 + len(methods)) + 0.7,
                        squeeze=False)
    for c in range(n):
        _img(axes[0, c], x[c])
        axes[0, c].set_title(f"{int(y[c])} → {int(t[c])}", fontsize=11)
        for k, m in enumerate(methods):
            cf = cfs[m][repeat]
            ax = axes[1 + k, c]
            _img(ax, cf.x_cf[c])
            if already_target(cf, c):
                _frame(ax, color="#888888", style="--")
            elif not bool(cf.success[c]):
                _frame(ax)
    for r, label in enumerate(["query", *methods]):
        axes[r, 0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=11)
    _titled_layout(fig, title)
    return fig


def plot_perturbation_curves(curves: pd.DataFrame, methods=None):
    """Validity against the scale of weight noise, a panel per Bayesian classifier
    (stacked); lines are the mean over repeats, bands the min-max over repeats.  Scale 0
    is drawn at the left edge of the log axis."""
    models = list(dict.fromkeys(curves["model"]))
    methods = list(methods or dict.fromkeys(curves["method"]))
    fig, axes = _figure(len(models), 1, height=3.3 * len(models) + 1.0, squeeze=False,
                        sharex=True)
    positive = curves.loc[curves["scale"] > 0, "scale"]
    zero_at = positive.min() / 3 if len(positive) else 1e-4
    for ax, s in zip(axes[:, 0], models):
        d = curves[curves["model"] == s].copy()
        d["x"] = d["scale"].where(d["scale"] > 0, zero_at)
        for m in methods:
            dm = d[d["method"] == m].groupby("x")["validity"]
            if dm.ngroups == 0:
                continue
            st = method_style(m)
            lo, mid, hi = dm.min(), dm.mean(), dm.max()
            ax.plot(mid.index, mid.values, marker=st["marker"], ms=5, color=st["color"],
                    label=m)
            ax.fill_between(lo.index, lo.values, hi.values, color=st["color"], alpha=0.15)
        ax.set_xscale("log")
        ax.set_title(s.replace("_", " ").replace("mc", "MC").replace("bnn", "BNN"))
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("validity")
    axes[-1, 0].set_xlabel("std of Gaussian weight noise (leftmost point: none)")
    _legend_below(fig, axes[0, 0], 0.03)
    return fig


def plot_rank_heatmaps(ranks: dict):
    """One heatmap per dataset (stacked) of each method's rank per metric (1 = best)."""
    import seaborn as sns

    n_rows = max(len(r) for r in ranks.values())
    fig, axes = _figure(len(ranks), 1, height=(0.42 * n_rows + 1.6) * len(ranks),
                        squeeze=False)
    for ax, (name, r) in zip(axes[:, 0], ranks.items()):
        sns.heatmap(r, annot=True, fmt=".0f", cmap="viridis_r", cbar=False, ax=ax,
                    annot_kws={"fontsize": 10})
        ax.set_title(f"{name}: rank per metric (1 = best)")
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    return fig


def plot_im1_vs_confidence(results: pd.DataFrame, methods=None):
    """The trade-off behind the Bayesian ranking: each method's IM1 against its
    counterfactuals' posterior-mean target confidence on fresh draws, one point per
    repeat (the mean over repeats larger), one panel per Bayesian classifier (stacked);
    the reference rows as grey crosses."""
    df = results[(results["metric"].isin(["IM1", "Confidence_fresh"]))
                 & (results["variant"] == "") & (results["repeat"] >= 0)]
    models = list(dict.fromkeys(df["model"]))
    methods = list(methods or dict.fromkeys(df["method"]))
    fig, axes = _figure(len(models), 1, height=3.6 * len(models) + 0.8, squeeze=False,
                        sharex=True)
    for ax, model in zip(axes[:, 0], models):
        d = df[df["model"] == model].pivot_table(index=["method", "repeat"], columns="metric",
                                                 values="value")
        for m in [m for m in methods if m in d.index.get_level_values(0)]:
            pts = d.loc[m]
            ref = m in ("Original Data", "Query (unchanged)")
            st = method_style(m)
            color = "0.45" if ref else st["color"]
            ax.scatter(pts["Confidence_fresh"], pts["IM1"], color=color, s=18, alpha=0.6,
                       marker="x" if ref else st["marker"])
            ax.scatter(pts["Confidence_fresh"].mean(), pts["IM1"].mean(), color=color, s=90,
                       marker="X" if ref else st["marker"], edgecolor="k", label=m)
        ax.set_ylabel("IM1 (lower: more target-like)")
        ax.set_title(model.replace("_", " ").replace("mc", "MC").replace("bnn", "BNN"))
        ax.set_xlim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("posterior-mean target confidence on fresh draws")
    _legend_below(fig, axes[0, 0], 0.035)
    return fig


def plot_c3lt_training(training: pd.DataFrame):
    """C3LT's mapping training, per pair: the classification, proximity and cycle losses
    and the share of training queries whose mapped image the classifier puts in the target,
    against the epoch (about ten points per epoch); the learning rate dotted."""
    if training is None or training.empty:
        raise ValueError("no C3LT training history to plot")
    pairs = list(dict.fromkeys(training["pair"]))
    parts = [("cls", "classification loss"), ("prox", "proximity loss"),
             ("cyc", "cycle loss"), ("train_validity", "train validity")]
    fig, axes = _figure(2, 2, height=5.8, squeeze=False)
    colors = dict(zip(pairs, plt.get_cmap("tab10").colors))
    for ax, (k, title) in zip(axes.flat, parts):
        for p in pairs:
            d = training[training["pair"] == p]
            ax.plot(d["epoch"], d[k], color=colors[p], label=p, lw=1.6)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if k == "train_validity":
            ax.set_ylim(-0.02, 1.02)
    for ax in axes[1]:
        ax.set_xlabel("epoch")
    if "lr" in training.columns:
        ax2 = axes[0, 0].twinx()
        d = training[training["pair"] == pairs[0]]
        ax2.plot(d["epoch"], d["lr"], color="0.5", ls=":", lw=1.2)
        ax2.set_yscale("log")
        ax2.tick_params(labelsize=9, colors="0.4")
    axes[1, 1].legend(fontsize=10, loc="lower right")
    fig.tight_layout()
    return fig


def plot_c3lt_budget_curves(curves: pd.DataFrame, scores: pd.DataFrame | None = None):
    """C3LT's mapping trained at each budget of the budget curve on one validation pair
    (``c3lt_budget_curves.csv`` rows of one dataset): the raw L1 proximity of the
    training batch's counterfactuals (left) and the share of them the classifier puts in
    the target (right) against the update, one line per budget; with ``scores`` (the
    curve's evidence) each budget's label names its share of the public code's sum of
    learning rate x updates."""
    if curves is None or curves.empty:
        raise ValueError("no budget curves to plot")
    cands = list(dict.fromkeys(curves["candidate"]))
    frac = {}
    if scores is not None and len(scores):
        f = scores[scores["metric"] == "Budget_fraction"]
        frac = f.groupby("candidate")["value"].mean().to_dict()
    fig, axes = _figure(1, 2, height=3.4, squeeze=False)
    colors = dict(zip(cands, plt.get_cmap("viridis")(np.linspace(0.05, 0.85, len(cands)))))
    for c in cands:
        d = curves[curves["candidate"] == c].sort_values("step")
        label = c + (f" ({100 * frac[c]:.0f} % of the public)" if c in frac else "")
        axes[0, 0].plot(d["step"], d["prox_l1"], color=colors[c], lw=1.6, label=label)
        axes[0, 1].plot(d["step"], d["train_validity"], color=colors[c], lw=1.6)
    axes[0, 0].set_title("raw L1 proximity of the batch")
    axes[0, 1].set_title("train validity")
    axes[0, 1].set_ylim(-0.02, 1.02)
    for ax in axes[0]:
        ax.set_xlabel("update")
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=9, loc="lower right")
    fig.tight_layout()
    return fig


def plot_lever_frontier(levers: pd.DataFrame, frontier: pd.DataFrame | None = None):
    """Proximity against the strict reading of transfer (``Validity (all judges)``) on one
    dataset's validation pair: C3LT at each lever (``c3lt_levers.csv`` rows of the
    dataset, labelled) and Latent search at each lambda (``latent_search.csv``, joined),
    every point coloured by its diversity (0: one prototype, 1: as varied as real target
    images).  Which setting moves C3LT off the prototype, and at what cost."""
    if levers is None or levers.empty:
        raise ValueError("no lever evidence to plot")
    judged = "Validity (all judges)"
    fig, ax = _figure(height=4.4)
    norm = plt.Normalize(0.0, 1.2)
    cmap = plt.get_cmap("viridis")
    w = levers.pivot_table(index="candidate", columns="metric", values="value", sort=False)
    sc = ax.scatter(w["Proximity"], w[judged], c=w["Diversity"], cmap=cmap, norm=norm, s=70,
                    edgecolor="black", zorder=3, label="C3LT, one lever each")
    for name, row in w.iterrows():
        ax.annotate(name, (row["Proximity"], row[judged]), textcoords="offset points",
                    xytext=(6, 4), fontsize=9)
    if frontier is not None and len(frontier) and judged in set(frontier["metric"]):
        f = frontier
        if "dcgan_epochs" in f.columns:
            f = f[f["dcgan_epochs"] == f["dcgan_epochs"].min()]
        lw = f.pivot_table(index="lambda", columns="metric", values="value").sort_index()
        ax.plot(lw["Proximity"], lw[judged], "-", color="#999999", lw=1, zorder=1)
        ax.scatter(lw["Proximity"], lw[judged], c=lw["Diversity"], cmap=cmap, norm=norm,
                   marker="s", s=40, zorder=2, label="Latent search, one λ each")
    fig.colorbar(sc, ax=ax, label="diversity (1: as varied as real target images)")
    return _frontier_axes(fig, ax, "proximity (mean |x′ − x| per pixel, lower is closer)",
                          "validity, all three judges", 1.02)


def plot_latent_frontier(frontier: pd.DataFrame, generator: pd.DataFrame | None = None,
                         chosen: float | None = None):
    """What C3LT's generator allows on one dataset's validation pair: Latent search's
    frontier over lambda (``latent_search.csv`` rows of the dataset), proximity against
    the validity an independent classifier grants, one point per lambda; with
    ``generator`` (``c3lt_generator.csv`` rows of the dataset) the frontier and C3LT's
    point for each generator training (the DCGAN and encoder at 1 and 5 epochs).  Our
    classifier's validity is near 1 on the whole frontier (the tables say so), so the
    independent classifier's is what separates the points."""
    judged = "Validity (independent classifier)"
    if frontier is None or frontier.empty:
        raise ValueError("no Latent search frontier to plot")
    fig, ax = _figure(height=4.2)
    runs = []
    gen = generator if generator is not None and len(generator) else None
    if gen is not None:
        for e, d in gen.groupby("dcgan_epochs"):
            runs.append((int(e), d[d["kind"] == "Latent search"], d[d["kind"] == "C3LT"]))
    else:
        e = int(frontier["dcgan_epochs"].min()) if "dcgan_epochs" in frontier else 1
        runs.append((e, frontier, None))
    shades = {1: "tab:blue", 5: "tab:orange"}
    for e, lat, c3 in runs:
        # the evidence file's lambda column is text where C3LT's rows (no lambda) share it
        lat = lat.assign(**{"lambda": pd.to_numeric(lat["lambda"], errors="coerce")})
        w = lat.pivot_table(index="lambda", columns="metric", values="value", aggfunc="mean")
        color = shades.get(e, "tab:gray")
        label = f"DCGAN and encoder {e} epoch{'s' if e > 1 else ''}"
        ax.plot(w["Proximity"], w[judged], "o-", color=color, lw=1.6, label=f"Latent search, {label}")
        for lam, row in w.iterrows():
            mine = chosen is not None and lam == chosen and e == runs[0][0]
            mark = "λ " + f"{lam:g}" + (" (chosen)" if mine else "")
            ax.annotate(mark, (row["Proximity"], row[judged]), textcoords="offset points",
                        xytext=(4, 4), fontsize=9, color=color)
        if c3 is not None and len(c3):
            cw = c3.pivot_table(columns="metric", values="value", aggfunc="mean")
            ax.plot(cw["Proximity"], cw[judged], "*", ms=14, color=color,
                    markeredgecolor="black", label=f"C3LT, {label}")
    return _frontier_axes(fig, ax, "proximity (mean |x − x_cf| per pixel)",
                          "validity, independent classifier", 1.05)


# -- the quantization chapter ------------------------------------------------------------------
def plot_acc_vs_vd(results: pd.DataFrame, dataset: str = "fmnist"):
    """"Accuracy hides what VD shows": per row (FP32 + retrain and the compressed rows),
    accuracy (ours beside the paper's, FP32 as a line; the axis starts at 0); below, VD
    and the false acceptance on reconstructions with their 95 % Wilson intervals
    (FP32's false acceptance and the retrained control's VD as lines): a low VD is only
    preserved recourse where the false acceptance stays near FP32's."""
    t = quant_table(results, dataset)
    rows = [m for m in t.index if m != "FP32"]
    h = 0.42 * len(rows) + 1.4
    fig, (a1, a2) = _figure(2, 1, height=2 * h + 0.4, sharey=True)
    y = np.arange(len(rows))
    a1.barh(y - 0.2, t.loc[rows, ("Accuracy %", "ours")], 0.4, label="ours", color="tab:blue")
    a1.barh(y + 0.2, t.loc[rows, ("Accuracy %", "paper")], 0.4, label="paper",
            color="tab:gray")
    if "FP32" in t.index:
        a1.axvline(t.loc["FP32", ("Accuracy %", "ours")], color="k", ls="--", lw=1,
                   label="our FP32")
    a1.set_xlim(0, 100)
    a1.set_xlabel("test accuracy (%)")
    a1.legend(fontsize=10, loc="lower left", framealpha=0.9)

    def bars(k, offset, color, label):
        v = t.loc[rows, (k, "ours")].to_numpy(float)
        err = np.vstack([v - t.loc[rows, (k, "low")].to_numpy(float),
                         t.loc[rows, (k, "high")].to_numpy(float) - v])
        a2.barh(y + offset, v, 0.4, xerr=np.nan_to_num(err), color=color, capsize=3,
                label=label)

    bars("VD", -0.2, "tab:red", "VD (FP recourse rejected)")
    bars("FA recon", 0.2, "tab:orange", "false acceptance")
    if "FP32" in t.index:
        a2.axvline(t.loc["FP32", ("FA recon", "ours")], color="tab:orange", ls="--", lw=1.2,
                   label="FP32's false acceptance")
    if "FP32 + retrain" in t.index:
        a2.axvline(t.loc["FP32 + retrain", ("VD", "ours")], color="tab:red", ls=":", lw=1.5,
                   label="VD of retraining alone")
    a2.set_xlabel("share (95 % Wilson interval)")
    a2.set_xlim(0, 1)
    a2.legend(fontsize=10, loc="lower right", framealpha=0.9)
    a1.set_yticks(y)
    a1.set_yticklabels(rows)
    a1.invert_yaxis()
    fig.tight_layout()
    return fig


def plot_vd_vs_bits(sweep: pd.DataFrame, results: pd.DataFrame):
    """The uniform-bit PTQ sweep: accuracy (axis from 0) and VD against bits (stacked), the
    mixed-precision rows as points at their average bits."""
    s = sweep.groupby(["bits", "metric"])["value"].mean().unstack()
    res = results[results["variant"] == ""]
    mean = res.groupby(["method", "metric"])["value"].mean()
    fig, (a1, a2) = _figure(2, 1, height=6.4, sharex=True)
    a1.plot(s.index, 100 * s["Accuracy"], marker="o", color="tab:blue", label="PTQ W=A=b")
    a2.plot(s.index, s["VD"], marker="o", color="tab:red", label="PTQ W=A=b")
    if ("FP32", "Accuracy") in mean:
        a1.axhline(100 * mean[("FP32", "Accuracy")], color="k", ls="--", lw=1, label="FP32")
    for m in ("MixedPrec-QAT", "CFQ-QAT", "KD+Quant", "Prune+Quant"):
        if (m, "Bit_cost") in mean and (m, "VD") in mean:
            st = method_style(m)
            a1.scatter(mean[(m, "Bit_cost")], 100 * mean[(m, "Accuracy")], marker=st["marker"],
                       color=st["color"], s=50, label=m)
            a2.scatter(mean[(m, "Bit_cost")], mean[(m, "VD")], marker=st["marker"],
                       color=st["color"], s=50, label=m)
    a2.set_xlabel("bits (average bits for the mixed-precision rows)")
    a2.set_xticks(sorted(set(s.index)))
    a1.set_ylabel("test accuracy (%)")
    a1.set_ylim(0, 100)
    a2.set_ylabel("VD")
    a2.set_ylim(-0.02, 1.02)
    a1.legend(fontsize=10, loc="lower right", framealpha=0.9)
    fig.tight_layout()
    return fig


def plot_recourse_grid(run, seed: int | None = None, n: int = 6, methods=None):
    """Columns: ``n`` FP-feasible queries (those with a VD event first); rows: the query,
    the FP recourse, then each compressed row's own recourse.  A red frame marks a row
    whose model rejects the FP recourse (a VD event), grey a row without recourse; under
    each cell the cosine of the two latent actions."""
    seed = run.train_seeds[0] if seed is None else seed
    methods = [m for m in (methods or run.methods) if (seed, "", m) in run.recourse]
    fp = run.recourse[(seed, "", "FP32")].cf
    feasible = fp.success.nonzero().flatten().tolist()
    events = {m: run.recourse[(seed, "", m)].vd_events for m in methods}
    with_event = [i for i in feasible if any(bool(events[m][i] == 1) for m in methods)]
    cols = (with_event + [i for i in feasible if i not in with_event])[:n]
    if not cols:
        raise ValueError("no FP-feasible query to show")
    labels = ["query", "FP recourse", *methods]
    cell = PAGE_WIDTH / (len(cols) + 2.0)
    fig, axes = _figure(len(labels), len(cols), height=(cell + 0.18) * len(labels) + 0.3,
                        squeeze=False)
    for c, i in enumerate(cols):
        _img(axes[0, c], fp.x[i])
        _img(axes[1, c], fp.x_cf[i])
        for k, m in enumerate(methods):
            rec = run.recourse[(seed, "", m)]
            ax = axes[2 + k, c]
            _img(ax, rec.cf.x_cf[i])
            if not bool(rec.cf.success[i]):
                ax.set_facecolor("0.85")
                _frame(ax, "0.5", 1.0)
            if bool(rec.vd_events[i] == 1):
                _frame(ax)
            cos = float(rec.dirsim[i])
            ax.set_xlabel("–" if np.isnan(cos) else f"cos {cos:.2f}", fontsize=9, labelpad=1)
    for r, label in enumerate(labels):
        axes[r, 0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=11)
    fig.tight_layout(pad=0.3, w_pad=0.1, h_pad=0.15)
    return fig


def plot_bit_allocation(bits: pd.DataFrame):
    """Methods x quantizers, each cell the final bits (mean over seeds): is "mixed" mixed?"""
    import seaborn as sns

    t = bits.pivot_table(index="method", columns="quantizer", values="bits", aggfunc="mean",
                         sort=False)
    order = [q for q in ("conv1.w", "conv2.w", "fc1.w", "fc2.w", "act1", "act2", "act3")
             if q in t.columns]
    t = t[order + [q for q in t.columns if q not in order]]
    fig, ax = _figure(height=0.45 * t.shape[0] + 1.4)
    sns.heatmap(t, annot=True, fmt=".3g", cmap="viridis", vmin=2, vmax=8, cbar=False, ax=ax,
                annot_kws={"fontsize": 11})
    ax.set_xlabel("quantizer")
    ax.set_ylabel("")
    fig.tight_layout()
    return fig


def plot_recourse_distributions(run, methods=None):
    """Per-query cost gap and direction cosine per compressed row (box plots), and f_q's
    target margin at the FP recourse points (below 0: a VD event), stacked."""
    methods = list(methods or run.methods)

    def pooled(m, attr):
        vals = [getattr(run.recourse[(s, "", m)], attr) for s in run.train_seeds
                if (s, "", m) in run.recourse]
        v = np.concatenate([np.asarray(t, dtype=float) for t in vals]) if vals else np.array([])
        return v[~np.isnan(v)]

    h = 0.38 * len(methods) + 1.2
    fig, axes = _figure(3, 1, height=3 * h + 0.6)
    for ax, attr, label in ((axes[0], "cost_gap", "CRG per query: (c_q − c_f) / c_f"),
                            (axes[1], "dirsim", "DirSim per query: cos(δ_f, δ_q)"),
                            (axes[2], "margin", "f_q's target margin at the FP recourse")):
        data = [pooled(m, attr) for m in methods]
        ax.boxplot(data, vert=False, showfliers=False)
        ax.set_yticks(range(1, len(methods) + 1))
        ax.set_yticklabels(methods)
        ax.invert_yaxis()
        ax.set_xlabel(label)
    axes[0].axvline(0, color="k", lw=0.8)
    axes[2].axvline(0, color="k", lw=0.8)
    fig.tight_layout()
    return fig


# -- the performance page ---------------------------------------------------------------------
def plot_time_vs_batch(perf: pd.DataFrame):
    """Seconds per counterfactual against batch size (log-log), one line per method (its
    own colour and marker); the one-at-a-time time is drawn at batch size 1.  Reference
    rows (no model work) are left out."""
    fig, ax = _figure(height=5.6)
    from cflib.book.report.tables import REFERENCE_ROWS

    for method, d in perf.groupby("method", sort=False):
        if method in REFERENCE_ROWS or not d["flops_per_cf"].gt(0).any():
            continue
        d = d[d["mode"].isin(["one at a time", "batched"])].sort_values("batch_size")
        st = method_style(method)
        ax.plot(d["batch_size"], d["seconds_per_cf"], marker=st["marker"], ms=5,
                color=st["color"], label=method)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (1: one image at a time)")
    ax.set_ylabel("seconds per counterfactual")
    ax.legend(fontsize=9, ncol=2, loc="upper right", framealpha=0.9)
    fig.tight_layout()
    return fig


def plot_fraction_of_bound(perf: pd.DataFrame):
    """The fraction of the machine's measured peak FLOP rate each method reaches, one
    image at a time and at its best batch size; the roofline at the method's arithmetic
    intensity as a tick (a method cannot pass it)."""
    t = performance_table(perf)
    t = t[t["GFLOP/CF"] > 0]
    fig, ax = _figure(height=0.42 * len(t) + 1.8)
    y = np.arange(len(t))
    ax.barh(y - 0.2, t["% of peak alone"], 0.4, label="one at a time", color="tab:gray")
    ax.barh(y + 0.2, t["% of peak batched"], 0.4, label="best batch", color="tab:blue")
    if "% of roofline batched" in t.columns:
        roof = 100 * t["% of peak batched"] / t["% of roofline batched"]
        ax.scatter(roof, y + 0.2, marker="|", s=200, color="k", label="roofline")
    ax.set_yticks(y)
    ax.set_yticklabels(t.index)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the measured peak FLOP rate")
    ax.legend(fontsize=10, loc="lower right")
    fig.tight_layout()
    return fig
