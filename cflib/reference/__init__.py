"""What the papers report and what they lead us to expect, read from files, never typed.

* ``reported.csv``: every number the papers report (a copy of the project's reference
  file), with its direction and source: :func:`load_reported`,
  :func:`reported_on_our_scale`.
* ``expected.csv``: the orderings the papers claim (``method`` is better than
  ``other`` on ``metric``, or the ``best`` of all): :func:`expected_orderings`.

The papers spell a few metrics on their tables' scale (``IM2x10``, ``KIDx1e3``,
``Validity_pct``); :data:`REPORTED_NAMES` maps each to our metric name and the factor
to divide by.
"""
from __future__ import annotations

from importlib import resources

import pandas as pd

#: reported metric name -> (our metric name, factor the paper's table applies)
REPORTED_NAMES: dict[str, tuple[str, float]] = {
    "IM2x10": ("IM2", 10.0),
    "KIDx1e3": ("KID", 1e3),
    "Validity_pct": ("Validity", 100.0),
    "Accuracy_pct": ("Accuracy", 100.0),
    "Overhead_x": ("Overhead", 1.0),
    "seconds_per_cf": ("Seconds_per_CF", 1.0),
}


def _read(name: str) -> pd.DataFrame:
    with resources.files("cflib.reference").joinpath(name).open() as f:
        return pd.read_csv(f, keep_default_na=False)


def load_reported(table: str | None = None, dataset: str | None = None) -> pd.DataFrame:
    """The papers' numbers: ``table, dataset, method, setting, metric, value, direction,
    source``, as spelled in the reference file."""
    df = _read("reported.csv")
    df["value"] = df["value"].astype(float)
    if table is not None:
        df = df[df["table"] == table]
    if dataset is not None:
        df = df[df["dataset"] == dataset]
    return df.reset_index(drop=True)


def reported_on_our_scale(table: str, dataset: str | None = None) -> pd.DataFrame:
    """Reported values renamed to our metric names and divided back to our scale."""
    df = load_reported(table, dataset).copy()
    for name, (ours, factor) in REPORTED_NAMES.items():
        m = df["metric"] == name
        df.loc[m, "metric"] = ours
        df.loc[m, "value"] = df.loc[m, "value"] / factor
    return df


def reported_value(table: str, dataset: str, method: str, metric: str,
                   setting: str = "") -> float:
    """One reported value on our scale (NaN when the paper has none)."""
    df = reported_on_our_scale(table, dataset)
    hit = df[(df["method"] == method) & (df["metric"] == metric) & (df["setting"] == setting)]
    return float(hit["value"].iloc[0]) if len(hit) else float("nan")


def expected_orderings(table: str) -> pd.DataFrame:
    """The papers' expected orderings of one table: ``metric, method, relation, other,
    source`` with ``relation`` "better" (than ``other``) or "best" (of all methods)."""
    df = _read("expected.csv")
    bad = set(df["relation"]) - {"better", "best"}
    if bad:
        raise ValueError(f"expected.csv: unknown relation(s) {sorted(bad)}")
    return df[df["table"] == table].drop(columns="table").reset_index(drop=True)
