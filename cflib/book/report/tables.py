"""The book's tables: ours beside the papers' values, per-pair pivots, rankings.

Paper values come from :mod:`cflib.reference` (never typed in); metric directions,
display scales and titles from the metric specs (:mod:`cflib.metrics.spec`).
"""
from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from cflib.bench.data import CLASS_NAMES, parse_pair
from cflib.bench.reference import load_reported, reported_on_our_scale, reported_rows
from cflib.bench.results import CLASSIFIER, MEAN_OVER_PAIRS
from cflib.bench.tables.registry import specs_of
from cflib.book.report.display import fmt
from cflib.metrics.spec import get_spec

#: metrics this book measures in another feature space than the papers' (InceptionV3
#: weights cannot be downloaded where the book is built; ours: the 128-d layer of
#: ``cflib.models.FeatureNet``): their headers name it, and the papers' values are never
#: printed beside ours (the ranking table compares ranks)
OWN_FEATURE_SPACE = ("FID", "KID")


def _title(metric: str) -> str:
    try:
        title = get_spec(metric).title
    except ValueError:
        return metric
    if metric in OWN_FEATURE_SPACE:
        title = (title[:-1] + ", FeatureNet)" if title.endswith(")")
                 else title + " (FeatureNet)")
    return title


def _paper_shown(metric: str) -> bool:
    """May the papers' value of ``metric`` sit beside ours?"""
    return metric not in OWN_FEATURE_SPACE


def _scale(metric: str) -> float:
    try:
        return get_spec(metric).display_scale
    except ValueError:
        return 1.0


def _rows_of(results: pd.DataFrame, pair: str | None) -> pd.DataFrame:
    """The rows of one pair, or the means over pairs (``pair=None``); the table's rows only
    (a sensitivity variant has its own table)."""
    if "variant" in results.columns:
        results = results[results["variant"].fillna("") == ""]
    if pair is None:
        return results[results["aggregate"] == MEAN_OVER_PAIRS]
    return results[(results["pair"] == pair) & (results["aggregate"] == "")]


def comparison_table(results: pd.DataFrame, table: str, dataset: str, pair: str | None = None,
                     metrics=None, methods=None) -> pd.DataFrame:
    """Ours beside the paper's: rows = methods, columns = (metric, ours/paper), table scale;
    the means over pairs, or one ``pair``."""
    ours = _rows_of(results, pair)
    ours = ours[ours["method"] != CLASSIFIER]
    ours = ours.groupby(["method", "metric"])["value"].mean().unstack()
    paper = reported_on_our_scale(table, dataset)
    paper = paper.pivot_table(index="method", columns="metric", values="value", aggfunc="first")
    metrics = list(metrics or ours.columns)
    methods = list(methods or ours.index)
    cols = {}
    for m in metrics:
        f, title = _scale(m), _title(m)
        cols[(title, "ours")] = ours.reindex(methods)[m] * f if m in ours else np.nan
        cols[(title, "paper")] = (paper.reindex(methods)[m] * f
                                  if m in paper.columns and _paper_shown(m)
                                  else pd.Series(np.nan, index=methods))
    out = pd.DataFrame(cols, index=methods)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = "method"
    return out


def row_names(df: pd.DataFrame) -> pd.Series:
    """Each row's name where variants stand beside their methods: ``method [variant]`` for
    a variant's row (``CEM [kappa=0]``), never the name of the method it varies."""
    if "variant" not in df.columns:
        return df["method"]
    v = df["variant"].fillna("")
    return df["method"].where(v == "", df["method"] + " [" + v + "]")


def pair_table(results: pd.DataFrame, metrics) -> pd.DataFrame:
    """Every metric per (pair, method), on the paper's scale: the long form of the table
    (the table's rows; a variant row appears as ``method [variant]``)."""
    df = results[results["method"] != CLASSIFIER].copy()
    df["method"] = row_names(df)
    df.loc[df["aggregate"] == MEAN_OVER_PAIRS, "pair"] = "mean"
    out = df.pivot_table(index=["pair", "method"], columns="metric", values="value",
                         aggfunc="mean", sort=False)
    out = out[[m for m in metrics if m in out.columns]]
    for m in out.columns:
        out[m] = out[m] * _scale(m)
    return out.rename(columns={m: _title(m) for m in out.columns})


def style(table: pd.DataFrame, digits: int = 3):
    """A pandas Styler with a fixed number of significant digits and NaN shown as '–'."""
    # the Styler's element ids come from its uuid, random by default: one drawn from the
    # table's content keeps a re-render's page identical to the executed one
    uuid = hashlib.sha1(table.to_csv().encode()).hexdigest()[:8]
    return _Styled(table, uuid=uuid).format(lambda v: fmt(v, digits))


class _Styled(Styler):
    """A Styler whose plain-text form is the same in every run (pandas' names the object's
    memory address, so a re-rendered notebook differed from the executed one)."""

    def __repr__(self) -> str:
        rows, cols = self.data.shape
        return f"<styled table, {rows} rows x {cols} columns>"


def class_label(dataset: str, c: int) -> str:
    """A class as the pages name it: its number, and its name where it has one
    (``3 (Dress)``; MNIST's digits are their own names)."""
    name = CLASS_NAMES[dataset][c]
    return str(c) if str(name) == str(c) else f"{c} ({name})"


def pair_title(dataset: str, pair) -> str:
    q, t = parse_pair(pair)
    return f"{class_label(dataset, q)} → {class_label(dataset, t)}"


def pairs_table(dataset: str, pairs) -> pd.DataFrame:
    """The class pairs with class names beside the class numbers."""
    rows = []
    for p in pairs:
        q, t = parse_pair(p)
        rows.append({"pair": p, "query": class_label(dataset, q),
                     "target": class_label(dataset, t)})
    return pd.DataFrame(rows).set_index("pair")


def metrics_table(specs):
    """What each metric of a table means and which way is better, from its specs (shown
    as a page table: the descriptions wrap, left-aligned)."""
    from cflib.book.report.display import page_table

    df = pd.DataFrame([{"metric": s.title, "better": s.arrow, "meaning": s.description}
                       for s in specs]).set_index("metric")
    return page_table(df)


def kendall_tau(a, b) -> float:
    """Kendall's tau-b between two scorings of the same items (ties handled); NaN for
    fewer than two items or a constant scoring."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"the two scorings differ in length: {a.shape} and {b.shape}")
    i, j = np.triu_indices(len(a), 1)
    sa, sb = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    n0 = len(i)
    ta, tb = (sa == 0).sum(), (sb == 0).sum()
    denom = np.sqrt(float(n0 - ta) * float(n0 - tb))
    return float((sa * sb).sum() / denom) if denom > 0 else float("nan")


def ranking_agreement(means: pd.DataFrame, table: str, dataset: str, metrics,
                      model: str = "") -> pd.DataFrame:
    """Kendall's tau between our and the paper's ordering of the methods, per metric.

    ``means``: our values (columns ``method, metric, value``); the paper's come from
    the reference file (``model`` selects the Bayesian chapter's classifier).  Only
    methods with both values count; a metric needs three of them.  The orders are
    listed best first, in the metric's direction.
    """
    paper = reported_on_our_scale(table, dataset)
    paper = paper[paper["model"] == model].set_index(["method", "metric"])["value"]
    ours = means.groupby(["method", "metric"], sort=False)["value"].mean()
    rows = []
    for m in metrics:
        methods = [k for k in dict.fromkeys(means["method"])
                   if (k, m) in ours.index and (k, m) in paper.index]
        if len(methods) < 3:
            continue
        a = [ours[(k, m)] for k in methods]
        b = [paper[(k, m)] for k in methods]
        key = get_spec(m).key
        order = lambda vals: " > ".join(k for _, k in sorted(zip(map(key, vals), methods)))  # noqa: E731
        rows.append({"metric": m, "methods": len(methods), "Kendall tau": kendall_tau(a, b),
                     "ours (best first)": order(a), "paper (best first)": order(b)})
    return pd.DataFrame(rows).set_index("metric") if rows else pd.DataFrame()


def confounded_table(results: pd.DataFrame, ratio: float | None = None, methods=None):
    """Proximity over Original Data's, per pair and method (the table's rows): a cell at
    or above ``ratio`` (default: the C3LT table's :attr:`~cflib.bench.tables.registry.TableSpec.redraw_ratio`) is
    shaded: that method moves the query about as far as a different real image of the
    target would, so its realism scores are confounded with redrawing.  A Styler."""
    ratio = specs_of("c3lt")[0].redraw_ratio if ratio is None else ratio
    d = results[(results["metric"] == "Proximity_vs_real") & (results["aggregate"] == "")]
    if "variant" in d.columns:
        d = d[d["variant"].fillna("") == ""]
    t = d.pivot_table(index="method", columns="pair", values="value", aggfunc="mean",
                      sort=False)
    t = t.drop(index=[m for m in ("Original Data",) if m in t.index])
    if methods is not None:
        t = t.reindex([m for m in methods if m in t.index])

    def shade(v):
        return "background-color: #f4c7c3; font-weight: bold" if v >= ratio else ""

    return style(t).map(shade)


def tuning_table(evidence: pd.DataFrame, dataset: str | None = None,
                 index=None) -> pd.DataFrame:
    """The evidence of a choice made on validation data (``cflib.tuning``): one row per
    (dataset, pair, candidate), one column per metric.  With ``dataset``, that dataset's
    rows only, labelled by (pair, candidate), so that the labels stay short and the table
    one table; ``index`` names the row levels where fewer are needed (one pair)."""
    if dataset is not None:
        evidence = evidence[evidence["dataset"] == dataset]
    index = index or (("pair", "candidate") if dataset is not None
                      else ("dataset", "pair", "candidate"))
    return evidence.pivot_table(index=list(index), columns="metric", values="value",
                                sort=False)


#: the evidence files of C3LT's mapping budget on the validation pairs (``python -m
#: cflib.bench.tuning c3lt_budget``), each with its ``_curves`` file
BUDGET_EVIDENCE = ("c3lt_budget",)


def generator_reading(evidence: pd.DataFrame) -> float:
    """How far the generator of an evidence file regenerates the validation queries,
    |G(E(x)) − x| (its ``Reconstruction_proximity`` rows, on its smallest generator when
    it has several): a fingerprint of the DCGAN and encoder it was measured on, for a file
    that records no network.  NaN when it has no such row."""
    d = evidence[evidence["metric"] == "Reconstruction_proximity"]
    if "dcgan_epochs" in d.columns and len(d):
        e = pd.to_numeric(d["dcgan_epochs"])
        d = d[e == e.min()]
    return float(pd.to_numeric(d["value"]).mean()) if len(d) else float("nan")


def same_generator(a: float, b: float, tol: float = 1e-4) -> bool:
    """Were two evidence files measured on one generator?  Their
    :func:`generator_reading` agree within ``tol`` (a missing reading is no evidence
    of another generator)."""
    return not (a == a and b == b) or abs(a - b) <= tol


def budget_evidence(dataset: str, tuning_dir=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores, training curves) of every budget of C3LT's mapping measured on
    ``dataset``'s validation pair with a generator of the chapters' recipe (1 epoch: which
    networks, :func:`generator_reading` tells), from the files
    of :data:`BUDGET_EVIDENCE` that exist, in the order of their budgets."""
    from pathlib import Path

    from cflib.bench.results import read_table
    from cflib.bench.tuning import TUNING_DIR

    folder = Path(tuning_dir or TUNING_DIR)
    scores, curves = [], []
    for name in BUDGET_EVIDENCE:
        for part, out in (("", scores), ("_curves", curves)):
            f = folder / f"{name}{part}.csv"
            if f.exists():
                d = read_table(f)
                d = d[(d["dataset"] == dataset) & (d["dcgan_epochs"].astype(int) == 1)]
                out.append(d)
    empty = pd.DataFrame(columns=["dataset", "pair", "candidate", "metric", "value"])
    sc = pd.concat(scores, ignore_index=True) if scores else empty
    cu = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    if len(sc):
        frac = sc[sc["metric"] == "Budget_fraction"].groupby("candidate")["value"].mean()
        order = {c: i for i, c in enumerate(frac.sort_values().index)}
        sc = sc.sort_values("candidate", key=lambda c: c.map(order), kind="stable")
        if len(cu):
            cu = cu.sort_values("candidate", key=lambda c: c.map(order), kind="stable")
    return sc.reset_index(drop=True), cu.reset_index(drop=True)


def profile_table(profile, groups) -> pd.DataFrame:
    """The sizes a profile sets for the groups a chapter uses (``"nets"``, ``"c3lt"``,
    ``"bayes"``, ``"quant"``): one row per size."""
    from dataclasses import fields

    rows = []
    for g in groups:
        sizes = getattr(profile, g)
        rows += [{"size": f"{g}.{f.name}", "value": getattr(sizes, f.name)}
                 for f in fields(sizes)]
    return pd.DataFrame(rows).set_index("size")


#: the reference rows ranked beside the paper's own rows
RANKED_REFERENCE_ROWS = ("Query (unchanged)",)


def paper_rows(table: str) -> list[str]:
    """The rows the paper's table has (in its order), then our reference rows: the rows
    a ranking of methods compares (our variants, e.g. ``CEM (targeted)``, left out)."""
    rows = reported_rows(table)
    return rows + [r for r in RANKED_REFERENCE_ROWS if r not in rows]


#: set-level descriptions of a set of counterfactuals, never ranked: how varied they are
#: and how their order follows the queries' describe a method, and the most of either is
#: noise (an attack's diversity) or no change at all (the unchanged query), not the best
#: (the bench ranks neither: :data:`cflib.bench.intervals.SET_LEVEL` carry no interval)
DESCRIPTIVE = ("Diversity", "Query_dependence")


def rank_methods(frames: dict, metrics, methods=None) -> dict:
    """Per dataset, each method's rank (1 = best) on the pair-mean of each metric, in the
    metric's own direction; ``methods`` (default: every row) are the rows ranked.  The
    :data:`DESCRIPTIVE` metrics are never ranked."""
    metrics = [m for m in metrics if m not in DESCRIPTIVE]
    out = {}
    for name, df in frames.items():
        mean = df[(df["aggregate"] == MEAN_OVER_PAIRS) & (df["method"] != CLASSIFIER)]
        if methods is not None:
            mean = mean[mean["method"].isin(list(methods))]
        if "variant" in mean.columns:
            mean = mean[mean["variant"].fillna("") == ""]
        wide = mean.pivot_table(index="method", columns="metric", values="value", sort=False)
        wide = wide[[m for m in metrics if m in wide.columns]]
        out[name] = pd.DataFrame({m: wide[m].map(get_spec(m).key).rank(method="min")
                                  for m in wide.columns})
    return out


def rank_summary(ranks: dict) -> pd.DataFrame:
    """Mean rank over every metric except timings, per dataset, and its change."""
    cols = {name: r.drop(columns=[c for c in r.columns if get_spec(c).timing]).mean(axis=1)
            for name, r in ranks.items()}
    out = pd.DataFrame(cols)
    if out.shape[1] == 2:
        out["change"] = out.iloc[:, 1] - out.iloc[:, 0]
    return out.sort_values(out.columns[0])


# -- the Bayesian chapter -------------------------------------------------------------------
def bayes_table(results: pd.DataFrame, model: str, dataset: str = "mnist",
                metrics=None, methods=None) -> pd.DataFrame:
    """One Bayesian classifier: per method and metric our mean and standard deviation
    over the repeats, and the paper's value where ``reported.csv`` has one (IM1 only)."""
    df = results[(results["model"] == model) & (results["method"] != CLASSIFIER)]
    if "variant" in df.columns:
        df = df[df["variant"] == ""]          # ablation rows live in their own table
    if df.empty:
        raise ValueError(f"no results for model {model!r}")
    g = df.groupby(["method", "metric"], sort=False)["value"]
    mean, std = g.mean().unstack(), g.std().unstack()
    paper = load_reported("bayes", dataset)
    paper = paper[paper["model"] == model].set_index(["method", "metric"])["value"]
    methods = list(methods or mean.index)
    metrics = list(metrics or dict.fromkeys(df["metric"]))
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


def psce_ablation_table(results: pd.DataFrame, model: str = "mc_dropout",
                        metrics=("IM1", "Implausibility", "Validity_fresh", "Validity_per_draw",
                                 "Confidence_fresh", "L1", "L0")) -> pd.DataFrame:
    """PSCE's ablation on the first repeat: the main row (our setting: delta 0.9,
    all-class autoencoder) beside each variant, on the same queries."""
    df = results[(results["model"] == model) & (results["method"] == "PSCE")]
    if "repeat" in df.columns:
        df = df[df["repeat"] == 0]
    df = df.assign(variant=df["variant"].replace("", "delta=0.9, all-class AE (main row)"))
    out = df.pivot_table(index="variant", columns="metric", values="value", aggfunc="mean",
                         sort=False)
    return out[[m for m in metrics if m in out.columns]]


def perturbation_table(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean validity over repeats per (model, method) and weight-noise scale."""
    return curves.pivot_table(index=["model", "method"], columns="scale", values="validity",
                              aggfunc="mean", sort=False)


# -- the quantization chapter ---------------------------------------------------------------
def quant_table(results: pd.DataFrame, dataset: str = "fmnist") -> pd.DataFrame:
    """The quantization table: rows FP32, FP32 + retrain, then the listing's order.

    Accuracy (%) ours beside the paper's; VD with its 95 % Wilson interval; the two
    false-acceptance rates that catch a model winning VD by accepting everything
    (``FA recon``: reconstructions of non-target test images put in the target, with its
    Wilson interval; ``FA infeasible``: queries whose FP recourse failed yet accepted,
    with their count); CRG and DirSim with their spread (the sd over seeds, or the 95 %
    bootstrap half-width for one seed); each recipe's own compression seconds, Overhead
    ``T_m / T_PTQ INT8`` beside the paper's and ``T_m / T_MixedPrec-QAT``; average weight
    and activation bits; feasibility.  The paper's VD, CRG and DirSim are not public."""
    res = results[results["variant"] == ""]
    g = res.groupby(["method", "metric"])["value"]
    mean, sd, n = g.mean(), g.std(), g.count()
    paper = reported_on_our_scale("quant", dataset).set_index(["method", "metric"])["value"]

    def get(series, m, k):
        return float(series.get((m, k), np.nan))

    rows = {}
    for m in [r for r in specs_of("quant")[0].methods if (r, "Accuracy") in mean.index]:
        row = {("Accuracy %", "ours"): 100 * get(mean, m, "Accuracy"),
               ("Accuracy %", "paper"): 100 * get(paper, m, "Accuracy")}
        for k, title in (("VD", "VD"), ("FA_recon", "FA recon")):
            row[(title, "ours")] = get(mean, m, k)
            row[(title, "low")] = get(mean, m, f"{k}_low")
            row[(title, "high")] = get(mean, m, f"{k}_high")
        row[("FA infeasible", "ours")] = get(mean, m, "FA_infeasible")
        row[("FA infeasible", "of")] = get(mean, m, "N_fp_infeasible")
        for k in ("CRG", "DirSim"):
            spread = (get(sd, m, k) if get(n, m, k) > 1 else get(mean, m, f"{k}_ci95"))
            row[(k, "ours")] = get(mean, m, k)
            row[(k, "±")] = spread
        row[("compress", "s")] = get(mean, m, "Compress_seconds")
        row[("Overhead ×", "ours")] = get(mean, m, "Overhead")
        row[("Overhead ×", "paper")] = get(paper, m, "Overhead")
        row[("Overhead ×", "vs MixedPrec")] = get(mean, m, "Overhead_vs_MixedPrec")
        row[("bits", "weights")] = get(mean, m, "Avg_weight_bits")
        row[("bits", "acts")] = get(mean, m, "Avg_act_bits")
        row[("feasible", "share")] = get(mean, m, "Q_Feasible" if m != "FP32" else "FP_Feasible")
        rows[m] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = "method"
    return out


def class_accuracy_table(results: pd.DataFrame, classes=None) -> pd.DataFrame:
    """Per-class test accuracy of every row (mean over seeds): rows = methods, columns =
    class names; ``classes`` limits the columns (default: all ten)."""
    res = results[(results["variant"] == "")
                  & results["metric"].str.startswith("Accuracy_class_")]
    out = res.pivot_table(index="method", columns="metric", values="value", aggfunc="mean",
                          sort=False)
    out = out.reindex([m for m in specs_of("quant")[0].methods if m in out.index])
    ks = sorted(int(c.rsplit("_", 1)[1]) for c in out.columns)
    ks = [k for k in ks if classes is None or k in classes]
    names = CLASS_NAMES[results["dataset"].iloc[0]] if len(results) else {}
    out = out[[f"Accuracy_class_{k}" for k in ks]]
    out.columns = [f"{k} {names[k]}" if names else str(k) for k in ks]
    return out


def quant_checks_table(checks: pd.DataFrame) -> pd.DataFrame:
    """The protocol check table: each check beside the table's own value (mean over seeds)."""
    if checks.empty:
        return checks
    return (checks.groupby(["check", "method", "metric"], sort=False)[["ours", "check value"]]
            .mean())


def spread_table(merged: pd.DataFrame, table: str, dataset: str, metrics, methods=None,
                 pair: str | None = None) -> pd.DataFrame:
    """Mean ± sd over training seeds (a sweep's ``merged.csv``) beside the paper's value,
    on the paper's scale: columns (metric, mean / ± sd / paper), and the seeds counted;
    the means over pairs, or one ``pair``."""
    d = _rows_of(merged, pair)
    d = d[d["method"] != CLASSIFIER]
    mean = d.set_index(["method", "metric"])["mean"]
    sd = d.set_index(["method", "metric"])["sd"]
    paper = reported_on_our_scale(table, dataset).set_index(["method", "metric"])["value"]
    methods = list(methods or dict.fromkeys(d["method"]))
    cols = {}
    for m in metrics:
        f, title = _scale(m), _title(m)
        cols[(title, "mean")] = [float(mean.get((k, m), np.nan)) * f for k in methods]
        cols[(title, "± sd")] = [float(sd.get((k, m), np.nan)) * f for k in methods]
        cols[(title, "paper")] = [float(paper.get((k, m), np.nan)) * f if _paper_shown(m)
                                  else np.nan for k in methods]
    out = pd.DataFrame(cols, index=methods)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = f"method (n = {int(d['n'].max())} seeds)" if len(d) else "method"
    return out


# -- the performance page ---------------------------------------------------------------------
#: rows of the catalog that run no search (each metric's range in the tables)
REFERENCE_ROWS = ("Original Data", "Query (unchanged)")


def performance_table(perf: pd.DataFrame) -> pd.DataFrame:
    """Per method (reference rows left out): seconds per counterfactual alone and at the
    best batch size, the speed-up, GFLOP and model passes per counterfactual (and the
    passes when finished queries are kept in the batch), arithmetic intensity, and the
    achieved rate as a fraction of the measured peak and of the roofline at that
    intensity."""
    rows = {}
    for method, d in perf.groupby("method", sort=False):
        if method in REFERENCE_ROWS:
            continue
        alone = d[d["mode"] == "one at a time"].iloc[0]
        batched = d[d["mode"] == "batched"]
        best = batched.loc[batched["seconds_per_cf"].idxmin()]
        kept = d[d["mode"] == "batched, finished queries kept"]
        rows[method] = {
            "s/CF alone": alone["seconds_per_cf"], "s/CF batched": best["seconds_per_cf"],
            "best batch": int(best["batch_size"]), "speed-up ×": best["speedup"],
            "GFLOP/CF": best["flops_per_cf"] / 1e9,
            "passes/CF": best.get("model_passes_per_cf", np.nan),
            "passes/CF, none dropped": (kept["model_passes_per_cf"].iloc[0] if len(kept)
                                        else np.nan),
            "FLOP/byte": best.get("intensity", np.nan),
            "% of peak alone": 100 * alone.get("fraction_of_peak", np.nan),
            "% of peak batched": 100 * best.get("fraction_of_peak", np.nan),
            "% of roofline batched": 100 * best.get("fraction_of_roofline", np.nan),
        }
    out = pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")
    return out.dropna(axis=1, how="all")


def machine_table(machine: pd.DataFrame) -> pd.DataFrame:
    """The kernels of ``performance_machine.csv``: each one's median and best rate over its
    repeats (GFLOP/s, copy GB/s) per thread count, the peak's kernel marked (the dense
    matrix products only: a convolution may do less work than its nominal count)."""
    d = machine.copy()
    unit = d["kind"].map({"flops": 1e9, "bytes": 1e9})
    d["median"] = d["rate"] / unit
    d["best"] = (d["best"] if "best" in d else d["rate"]) / unit
    d["threads"] = d["threads"].astype(int)
    d["kernel"] = d["kernel"] + np.where(d["kind"] == "bytes", " (GB/s)", " (GFLOP/s)")
    if "peak" in d:
        d["kernel"] = d["kernel"] + np.where(d["peak"].astype(str) == "True", ": the peak", "")
    t = d.pivot_table(index="kernel", columns="threads", values=["median", "best"],
                      aggfunc="first", sort=False)
    t.columns = [f"{stat}, {n} thread{'s' if n > 1 else ''}" for stat, n in t.columns]
    t.index.name = "kernel"
    return t[sorted(t.columns, key=lambda c: (c.split(", ")[1], c))]


def loops_table(loops: pd.DataFrame) -> pd.DataFrame:
    """The chapters' training and search loops of ``performance_loops.csv``: seconds per
    unit before and after the speed paths, the speed-up, the rate as a share of the
    one-thread peak, and how far the two computations' outputs differ."""
    rows = {}
    for loop, d in loops.groupby("loop", sort=False):
        b = d[d["paths"] == "before"].iloc[0]
        a = d[d["paths"] == "after"].iloc[0]
        rows[loop] = {"unit": a["unit"], "s before": b["seconds_per_unit"],
                      "s after": a["seconds_per_unit"],
                      "speed-up ×": b["seconds_per_unit"] / a["seconds_per_unit"],
                      "epoch s after": a.get("seconds_per_epoch", np.nan),
                      "% of peak before": 100 * b["fraction_of_peak"],
                      "% of peak after": 100 * a["fraction_of_peak"],
                      "max |difference|": a["max_abs_diff"]}
    out = pd.DataFrame.from_dict(rows, orient="index").rename_axis("loop")
    numeric = [c for c in out.columns if c != "unit"]
    out[numeric] = out[numeric].apply(pd.to_numeric)       # None (no epoch) as NaN
    return out.dropna(axis=1, how="all")


#: the columns of :func:`ops_table`, in order: the operator families of the benchmark's
#: profile (``benchmarks/throughput.py``, ``op_family``) and the time outside operators
OPS_FAMILIES = ("convolution", "matrix product", "pooling", "normalisation",
                "elementwise and other", "outside operators")


def ops_table(ops: pd.DataFrame) -> pd.DataFrame:
    """Where the time of each loop and batched search goes (``performance_ops.csv``):
    the share of the profiled call's wall time per operator family, the operator calls
    per second, the mean time per call, and the single largest operator."""
    rows = {}
    for subject, d in ops.groupby("subject", sort=False):
        wall = float(d["wall_seconds"].iloc[0])
        fam = d.groupby("family")["self_seconds"].sum()
        inside = d[d["family"] != "outside operators"]
        top = inside.loc[inside["self_seconds"].idxmax()]
        calls = float(inside["calls"].sum())
        rows[subject] = {
            "what": d["kind"].iloc[0],
            **{f"% {k}": 100 * float(fam.get(k, 0.0)) / wall for k in OPS_FAMILIES},
            "operator calls/s": calls / wall,
            "µs per call": 1e6 * float(inside["self_seconds"].sum()) / calls,
            "largest operator": f"{top['operator'].split('::')[-1]} "
                                f"({100 * top['self_seconds'] / wall:.0f} %)"}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("loop or search")


def _read_benchmark(results_dir, name: str) -> pd.DataFrame | None:
    """A benchmark's table ``name`` of ``results_dir``, else the book's (``results/``, as
    the tuning evidence is read); None when neither exists."""
    from pathlib import Path

    from cflib.bench.data import PROJECT_ROOT
    from cflib.bench.results import read_table

    for folder in (Path(results_dir), PROJECT_ROOT / "results"):
        f = folder / name
        if f.exists():
            return read_table(f)
    return None


def read_ops(results_dir) -> pd.DataFrame | None:
    """The benchmark's operator profile (``performance_ops.csv``; :func:`_read_benchmark`)."""
    return _read_benchmark(results_dir, "performance_ops.csv")


def read_steps(results_dir) -> pd.DataFrame | None:
    """The searches' operator calls and host synchronisations per step
    (``performance_steps.csv`` of ``benchmarks/step_overhead.py``; :func:`_read_benchmark`)."""
    return _read_benchmark(results_dir, "performance_steps.csv")


def _step_row(method: str, compact) -> str:
    """A row's name in the steps table: the search, or its run with finished queries kept."""
    return method if str(compact) != "False" else f"{method}, finished queries kept"


def steps_table(steps: pd.DataFrame) -> pd.DataFrame:
    """A row per search (and per search with its finished queries kept, ``compact`` False)
    and per training loop (a step is one of its batches):
    operator calls and host synchronisations per step before and after (the ``code`` of
    each row of ``performance_steps.csv``; "after" alone where no "before" was counted),
    and the synchronisations a whole search pays once."""
    df = steps.assign(search=[_step_row(m, c) for m, c in zip(steps["method"], steps["compact"])])
    codes = [c for c in ("before", "after") if c in set(df["code"])]
    rows = {}
    for search, d in df.groupby("search", sort=False):
        by = {c: d[d["code"] == c].iloc[0] for c in codes if (d["code"] == c).any()}
        row = {}
        for col, title in (("calls_per_step", "calls/step"), ("syncs_per_step", "syncs/step")):
            for c in codes:
                row[f"{title} {c}"] = by[c][col] if c in by else np.nan
        last = by["after"] if "after" in by else next(iter(by.values()))
        row["syncs once"] = last["syncs_per_search"]
        rows[search] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("search or loop")


def step_syncs_left(steps: pd.DataFrame) -> dict[str, str]:
    """The searches that still read back from the device every step ("after", or the only
    code counted), with the source lines that do (``where``)."""
    code = "after" if (steps["code"] == "after").any() else steps["code"].iloc[0]
    d = steps[(steps["code"] == code) & (steps["syncs_per_step"] > 0)]
    return {_step_row(m, c): w for m, c, w in zip(d["method"], d["compact"], d["where"])}


def read_gpu_chapter(results_dir) -> pd.DataFrame | None:
    """A C3LT chapter's compute timed part by part on a GPU
    (``performance-cuda_chapter.csv``, written by ``make gpu-check``) of ``results_dir``,
    else the book's; None when neither exists."""
    from pathlib import Path

    from cflib.bench.data import PROJECT_ROOT
    from cflib.bench.results import read_table

    for folder in (Path(results_dir), PROJECT_ROOT / "results"):
        f = folder / "performance-cuda_chapter.csv"
        if f.exists():
            return read_table(f)
    return None


def gpu_chapter_table(timed: pd.DataFrame) -> pd.DataFrame:
    """The GPU chapter timing as a page table: the whole run, what came before the first
    method, every method (its images and seconds, its own training included) and the
    networks' training summed, each with its share of the whole."""
    total = float(timed.loc[timed["part"] == "total", "seconds"].iloc[0])
    rows = []
    for _, r in timed.iterrows():
        part = str(r["part"])
        if part.startswith("trained: "):
            continue
        name = part.removeprefix("method: ")
        images = pd.to_numeric(r.get("images"), errors="coerce")
        rows.append({"part": name, "images": None if pd.isna(images) else int(images),
                     "seconds": float(r["seconds"])})
    trained = timed[timed["part"].astype(str).str.startswith("trained: ")]
    rows.append({"part": f"training, {len(trained)} networks (inside the parts above)",
                 "images": None, "seconds": float(trained["seconds"].sum())})
    out = pd.DataFrame(rows).set_index("part")
    out["% of the run"] = 100 * out["seconds"] / total
    out.index.name = "part"
    return out


def read_first_run(results_dir) -> pd.DataFrame | None:
    """The book's first run on an empty cache (``performance_first_run.csv``, written by
    ``benchmarks/first_run.py``) of ``results_dir``, else the book's; None when neither
    exists."""
    from pathlib import Path

    from cflib.bench.data import PROJECT_ROOT
    from cflib.bench.results import read_table

    for folder in (Path(results_dir), PROJECT_ROOT / "results"):
        f = folder / "performance_first_run.csv"
        if f.exists():
            return read_table(f)
    return None


def first_run_tables(first: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per chapter, per kind of network) of the first run: each chapter's compute
    minutes, the minutes of it spent training networks and its share of the chapters'
    summed compute; each kind of network's count, training minutes and share, largest
    first."""
    first = first.copy()
    for c in ("count", "seconds", "train_seconds", "share", "workers"):
        first[c] = pd.to_numeric(first[c], errors="coerce")     # "" (no share) as NaN
    from cflib.book.chapters import get_chapter

    ch = first[first["scope"] == "chapter"].set_index("name")
    ch.index = [get_chapter(n).title for n in ch.index]     # the reader's names, not files
    chapters = pd.DataFrame({"compute min": ch["seconds"] / 60,
                             "of it training min": ch["train_seconds"] / 60,
                             "networks trained": ch["count"].astype(int),
                             "% of all compute": 100 * ch["share"]}).rename_axis("chapter")
    net = first[first["scope"] == "network"]
    kinds = (net.groupby("name").agg(count=("count", "sum"), seconds=("seconds", "sum"),
                                     share=("share", "sum"))
             .sort_values("seconds", ascending=False))
    networks = pd.DataFrame({"trained": kinds["count"].astype(int),
                             "training min": kinds["seconds"] / 60,
                             "% of all compute": 100 * kinds["share"]}
                            ).rename_axis("network")
    return chapters, networks


def dense_share(ops: pd.DataFrame) -> pd.Series:
    """Per subject of :func:`ops_table`: the share (0-1) of its wall time inside
    convolutions and matrix products, the operators that run near the peak."""
    t = ops_table(ops)
    return (t["% convolution"] + t["% matrix product"]) / 100


def dense_rate(perf: pd.DataFrame, ops: pd.DataFrame) -> pd.Series:
    """Per batched search of both files: its FLOP rate (``performance.csv``, at the batch
    the profile ran, the largest) as a share of the peak *within* its time in
    convolutions and matrix products: the rate of those operators themselves (the
    benchmark counts only their FLOPs)."""
    share = dense_share(ops)
    b = perf[(perf["mode"] == "batched") & (perf["batch_size"] == perf["batch_size"].max())]
    frac = b.set_index("method")["fraction_of_peak"]
    return (frac.reindex(share.index) / share).dropna()


def timing_beside_papers(results: dict, dataset_results: str = "mnist") -> pd.DataFrame:
    """Seconds per counterfactual of the C3LT table's methods in our chapters (mean over
    pairs, this machine) beside the timings the papers report (a variant's row named by
    :func:`row_names`)."""
    paper = reported_on_our_scale("c3lt", dataset_results)
    paper = paper[paper["metric"] == "Seconds_per_CF"].set_index("method")["value"]
    cols = {}
    for name, df in results.items():
        d = df[(df["aggregate"] == MEAN_OVER_PAIRS) & (df["metric"] == "Seconds_per_CF")]
        cols[f"{name} (ours)"] = pd.Series(d["value"].to_numpy(), index=row_names(d))
    out = pd.DataFrame(cols)
    shown = paper.reindex(out.index)
    if shown.notna().any():          # the papers' timings that are confirmed, if any
        out["paper"] = shown
    return out.rename_axis("method")


def judges_table(judges: pd.DataFrame) -> pd.DataFrame:
    """The judges of transfer validity (a run's ``<name>_judges.csv``): family, test and
    held-out accuracy, the epoch kept."""
    out = judges.rename(columns={"judge": "judge", "architecture": "family",
                                 "test_accuracy": "test accuracy",
                                 "val_accuracy": "held-out accuracy",
                                 "best_epoch": "epoch kept"})
    out = out.set_index("judge")[["family", "test accuracy", "held-out accuracy", "epoch kept"]]
    for c in ("test accuracy", "held-out accuracy"):
        out[c] = out[c].map(lambda v: f"{float(v):.4f}")
    return out


def networks_note(networks: pd.DataFrame) -> str:
    """One sentence: how many networks a run used and where they came from (shipped with
    the book, this machine's cache, trained by the run); empty when not recorded."""
    if networks is None or not len(networks):
        return ""
    n = networks["origin"].value_counts().to_dict()
    parts = [f"{n[k]} {what}" for k, what in
             (("shipped", "shipped with the book (networks/)"),
              ("cache", "from this machine's weight cache"),
              ("trained", "trained by this run"),
              ("trained, not cached", "trained by this run, not cached")) if n.get(k)]
    return (f"This run used {len(networks)} networks: " + ", ".join(parts) + ".  Which, and "
            "the code that trained each, in the table.")


def networks_page_table(networks: pd.DataFrame) -> pd.DataFrame:
    """The networks a run used: kind, file, origin and provenance (a page table)."""
    return networks.set_index("entry")[["kind", "origin", "provenance"]]
