"""The spread over training seeds: where a sweep's results live and how they merge.

A sweep (:mod:`cflib.book.sweep`) writes each training seed's results to
``results/sweep/<chapter>/<profile>/seed<seed>/``; :func:`merge_seeds` gives, for every
cell of the chapter's table, the mean, the standard deviation and the number of seeds;
:func:`read_sweep` reads them back with the book's own run.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from cflib.bench.data import PROJECT_ROOT
from cflib.bench.results import CELL, read_table

SWEEP_DIR = PROJECT_ROOT / "results" / "sweep"


def sweep_dir(chapter: str, profile: str = "standard", root=SWEEP_DIR,
              extra: dict | None = None) -> Path:
    """``<root>/<chapter>/<profile>``, and a hash of any other parameters: a sweep with other
    parameters writes beside, never over, the book's."""
    d = Path(root) / chapter / profile
    if extra:
        import hashlib
        import json

        d = d.with_name(f"{profile}-"
                        + hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8])
    return d


def merge_seeds(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Mean, standard deviation (ddof 1) and number of training seeds of every cell of a
    chapter's results table over its per-seed results (``repeat`` rows are averaged
    within each seed first)."""
    df = pd.concat(frames, ignore_index=True)
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    keys = [c for c in CELL if c in df.columns]
    per_seed = df.groupby(keys + ["train_seed"], sort=False, dropna=False)["value"].mean()
    per_seed = per_seed.reset_index()
    out = per_seed.groupby(keys, sort=False, dropna=False).agg(
        mean=("value", "mean"), sd=("value", "std"), n=("value", "count"),
        seeds=("train_seed", lambda s: " ".join(map(str, sorted(s))))).reset_index()
    out["profile"] = df["profile"].iloc[0]
    return out


def read_sweep(chapter: str, profile: str = "standard", root=SWEEP_DIR, own=None,
               extra: dict | None = None):
    """``(merged, per-seed results)`` of a chapter over its training seeds, or
    ``(None, {})`` when it was never swept.

    The seeds are the sweep's (``root/<chapter>/<profile>/seed*/``) and, when given,
    ``own``: the results table of the book's own run (its seed replaces a swept one),
    so that the book's run and a sweep of the other seeds make one table.
    """
    d = sweep_dir(chapter, profile, root, extra)
    per_seed = {}
    for s in sorted(d.glob("seed*/")):
        if s.is_symlink():
            raise ValueError(f"{s} is a link to a folder ({s.resolve()}), not a seed the "
                             "sweep wrote: a sweep's seeds are its own folders; remove it")
        f = s / f"{chapter}.csv"
        if f.exists():
            per_seed[int(s.name[4:])] = read_table(f)
    if not per_seed:
        return None, {}
    if own is not None and len(own):
        per_seed[int(own["train_seed"].iloc[0])] = own
    return merge_seeds(list(per_seed.values())), dict(sorted(per_seed.items()))


def seed_means(chapter: str, results: pd.DataFrame, profile: str = "standard",
               root=SWEEP_DIR) -> tuple[pd.DataFrame, int]:
    """A chapter's results with every value replaced by its mean over the training seeds
    of its sweep (the book's own run included), and the number of seeds; the results as
    they are and 1 when the chapter was never swept."""
    _, per_seed = read_sweep(chapter, profile, root=root, own=results)
    if len(per_seed) < 2:
        return results, 1
    return mean_of_seeds(per_seed, list(results.columns)), len(per_seed)


def mean_of_seeds(per_seed: dict, columns: list[str] | None = None) -> pd.DataFrame:
    """Every cell's mean over the training seeds of ``{seed: results table}``: the
    columns of the results (``columns``, default the first seed's), ``train_seed`` -1."""
    frames = []
    for _, df in sorted(per_seed.items()):
        d = df.copy()
        d["value"] = pd.to_numeric(d["value"], errors="coerce")
        frames.append(d)
    columns = columns or list(frames[0].columns)
    allr = pd.concat(frames, ignore_index=True)
    keys = [c for c in columns if c not in ("value", "train_seed")]
    means = allr.groupby(keys, dropna=False, sort=False)["value"].mean().reset_index()
    return means.assign(train_seed=-1)[columns]
