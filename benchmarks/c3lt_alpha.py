"""C3LT's proximity weight, measured: does the objective keep the mapping's edits large?

    .venv/bin/python benchmarks/c3lt_alpha.py [--datasets mnist fmnist] [--alphas 1 10]
        [--seed 0] [--out results/tuning]

C3LT minimises ``L_cls + alpha * L_prox + beta * L_cyc + gamma * L_adv``, where ``L_prox``
averages the pixel L1 with the mask's smoothness and entropy terms (weights 10 and 1), so
the L1 that the table's proximity measures enters with weight ``alpha / 12`` beside the
classification loss's 1 (the public code's ``alpha`` is 0.1).  The budget curve and the
generator lever leave proximity where it is; this script tests the remaining candidate,
the objective's weight on proximity.  On each validation pair (a pair no table uses), C3LT
is built exactly as the chapters build it (their classifier, DCGAN and encoder, every
training image of the pair, the ``standard`` profile's budget) with ``alpha`` multiplied,
and scored on the same 100 test images of the query class as the budget curve, with the
same readings (:func:`cflib.bench.tuning.tune_c3lt_budget`'s).  One process per dataset
on one thread (the chapters' thread count: the networks it loads are the chapters').

It writes ``c3lt_alpha.csv`` (and ``_curves.csv``) beside the other tuning evidence,
replacing the rows of the datasets it measured and keeping the others'; the paper's ``alpha`` is the ``c3lt_generator`` evidence's C3LT at 1 epoch (the
same build), so it is not trained again here.  The candidates are variants, not the
method: the chapters train C3LT with the paper's ``alpha``.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cflib.bench import catalog  # noqa: E402
from cflib.bench.data import canonical_dataset, class_subset, load_split  # noqa: E402
from cflib.bench.profiles import get_profile  # noqa: E402
from cflib.bench.results import read_table, write_table  # noqa: E402
from cflib.bench.tuning import (  # noqa: E402
    TUNING_DIR,
    _c3lt_scores,
    _generator_columns,
    _validation_models,
)
from cflib.book.runs.written import command_line, record_results  # noqa: E402
from cflib.env import threads  # noqa: E402
from cflib.explainers import C3LT  # noqa: E402

log = logging.getLogger("cflib")
PAPER_ALPHA = C3LT.Config().alpha


def measure(datasets, alphas, seed: int = 0, device="cpu", n_queries: int = 100,
            profile: str = "standard") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores, training curves) of C3LT at each ``alpha`` on the validation pairs."""
    prof = get_profile(profile)
    rows, curves = [], []
    for d in map(canonical_dataset, datasets):
        q, t, clf, models = _validation_models(d, prof, seed, device)
        x, y = load_split(d, "test")
        xq, _ = class_subset(x, y, q, n_queries, seed)
        for a in alphas:
            ex = catalog.build("C3LT", clf, dataset=d, profile=prof, seeds=seed, pair=(q, t),
                               c3lt_config={"alpha": float(a)})
            cf = ex.explain(xq.to(device), t, seed=seed).cpu()
            values = {**_c3lt_scores(cf, models, q, t), "alpha": float(a),
                      "Updates": float(ex.info["steps"]),
                      "Budget_fraction": float(ex.info["public_fraction"]),
                      "Train_seconds": float(ex.info["train_seconds"])}
            common = {"dataset": d, "pair": f"{q}->{t}",
                      "candidate": f"alpha={a:g} ({a / PAPER_ALPHA:g}x the paper's)",
                      "seed": seed, "profile": prof.name, **_generator_columns(prof)}
            rows += [{**common, "metric": k, "value": float(v)} for k, v in values.items()]
            curves += [{**common, **h} for h in ex.info["history"]]
            log.info("%s C3LT alpha %g: %s", d, a, values)
    return pd.DataFrame(rows), pd.DataFrame(curves)


def replace_datasets(new: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Write ``new`` to ``path`` in place of the rows of its datasets; the rows of every
    other dataset already there are kept (one evidence file for both datasets, whichever
    was measured last)."""
    if path.exists():
        old = read_table(path)
        new = pd.concat([old[~old["dataset"].isin(set(new["dataset"]))], new],
                        ignore_index=True)
    write_table(new, path)
    return new


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["mnist", "fmnist"])
    ap.add_argument("--alphas", nargs="+", type=float, default=[1.0, 10.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(TUNING_DIR))
    args = ap.parse_args(argv)
    if any(a <= 0 for a in args.alphas):
        raise SystemExit(f"every alpha must be positive: {args.alphas}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(threads())
    df, curves = measure(args.datasets, args.alphas, args.seed, args.device)
    out = Path(args.out)
    replace_datasets(df, out / "c3lt_alpha.csv")
    replace_datasets(curves, out / "c3lt_alpha_curves.csv")
    record_results([out / "c3lt_alpha.csv", out / "c3lt_alpha_curves.csv"],
                   command_line("benchmarks/c3lt_alpha.py", sys.argv[1:] if argv is None else argv))
    print(df.pivot_table(index=["dataset", "candidate"], columns="metric", values="value")
          .round(4).to_string())


if __name__ == "__main__":
    main()
