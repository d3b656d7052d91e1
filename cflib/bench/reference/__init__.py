"""What the papers report and what they lead us to expect, read from files, never typed.

* ``reported.csv``: every number the papers report (a copy of the project's reference
  file), with its direction and source: :func:`load_reported`,
  :func:`reported_on_our_scale`.
* ``expected.csv``: what the papers (and our protocol) lead us to expect of a table,
  one line each: ``method`` is ``better`` than ``other`` on ``metric``, the ``best`` of
  all, ``at_least`` / ``at_most`` a ``threshold``, ``within`` a threshold of ``other``,
  or better than ``other`` on the same queries (``paired``, with a bootstrap interval);
  ``match`` lists the conditions under which a comparison is tested at all (e.g.
  ``Accuracy:0.01;Bit_cost:0.25``: the two rows within one accuracy point and a quarter
  bit): :func:`expected_orderings`.

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
    # through the results reader: a chapter records the reference files it read
    from cflib.bench.results import read_table

    return read_table(str(resources.files("cflib.bench.reference").joinpath(name)))


def load_reported(table: str | None = None, dataset: str | None = None,
                  confirmed_only: bool = True) -> pd.DataFrame:
    """The papers' numbers: ``table, dataset, method, model, metric, value, direction,
    source``, as spelled in the reference file (``model``: the Bayesian chapter's
    classifier, ``mc_dropout`` or ``bnn``; empty elsewhere).  A number whose source says
    ``unconfirmed`` (a listing that could not be checked against the paper) is left out
    unless ``confirmed_only`` is False: it is never printed as the paper's."""
    df = _read("reported.csv")
    df["value"] = df["value"].astype(float)
    if confirmed_only:
        df = df[~df["source"].str.contains("unconfirmed", case=False, na=False)]
    if table is not None:
        df = df[df["table"] == table]
    if dataset is not None:
        df = df[df["dataset"] == dataset]
    return df.reset_index(drop=True)


def reported_rows(table: str) -> list[str]:
    """The rows the paper's table reports, in its order (the C3LT table: Original Data,
    Adv. Attack, CEM, CVE, ExpGAN, C3LT)."""
    return list(dict.fromkeys(load_reported(table)["method"]))


def reported_on_our_scale(table: str, dataset: str | None = None) -> pd.DataFrame:
    """Reported values renamed to our metric names and divided back to our scale."""
    df = load_reported(table, dataset).copy()
    for name, (ours, factor) in REPORTED_NAMES.items():
        m = df["metric"] == name
        df.loc[m, "metric"] = ours
        df.loc[m, "value"] = df.loc[m, "value"] / factor
    return df


def reported_value(table: str, dataset: str, method: str, metric: str,
                   model: str = "") -> float:
    """One reported value on our scale (NaN when the paper has none)."""
    df = reported_on_our_scale(table, dataset)
    hit = df[(df["method"] == method) & (df["metric"] == metric) & (df["model"] == model)]
    return float(hit["value"].iloc[0]) if len(hit) else float("nan")


RELATIONS = ("better", "best", "at_least", "at_most", "within", "paired")


def parse_match(text: str) -> dict[str, float]:
    """``"Accuracy:0.01;Bit_cost:0.25"`` -> ``{"Accuracy": 0.01, "Bit_cost": 0.25}``."""
    out = {}
    for part in filter(None, (p.strip() for p in str(text).split(";"))):
        metric, _, gap = part.partition(":")
        out[metric.strip()] = float(gap)
    return out


def expected_orderings(table: str) -> pd.DataFrame:
    """What one table is expected to show: ``metric, method, relation, other, threshold,
    match, source`` (see the module docstring); ``threshold`` a float (NaN when unused)."""
    df = _read("expected.csv")
    bad = set(df["relation"]) - set(RELATIONS)
    if bad:
        raise ValueError(f"expected.csv: unknown relation(s) {sorted(bad)}; known {RELATIONS}")
    df["threshold"] = pd.to_numeric(df["threshold"], errors="coerce")
    need = df["relation"].isin(["at_least", "at_most", "within"]) & df["threshold"].isna()
    if need.any():
        raise ValueError(f"expected.csv: relations {sorted(set(df.loc[need, 'relation']))} need "
                         "a threshold")
    for m in df["match"]:
        parse_match(m)
    return df[df["table"] == table].drop(columns="table").reset_index(drop=True)
