"""The tidy results of every chapter: one schema, one writer, one reader.

Every chapter writes one long table with :data:`COLUMNS`, plus ``repeat`` where a
chapter repeats its queries (the Bayesian chapter); the book's tables are pivots of it.

| column | what it holds |
|---|---|
| ``dataset`` | ``mnist`` or ``fmnist`` |
| ``method`` | the row's method as the papers spell it (``Classifier`` for the model's own accuracy) |
| ``model`` | which classifier was explained where a chapter has several (``mc_dropout``, ``bnn``); else empty |
| ``variant`` | a check or ablation of the row (e.g. ``repo_init``); empty for the table's own rows |
| ``pair`` | the class pair ``q->t`` of a per-pair row; empty otherwise |
| ``aggregate`` | ``mean over pairs`` for the mean of the per-pair rows; empty otherwise |
| ``metric``, ``value`` | one metric (its spec: :mod:`cflib.metrics`) and its value |
| ``train_seed``, ``data_seed`` | the run's seeds by role (:mod:`cflib.bench.seeds`) |
| ``profile`` | the profile of the run |

Files are written atomically (:func:`cflib.io.atomic_write`), so a failed run never
leaves half a file.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from cflib.io import atomic_write

#: every file the readers below opened in this process (resolved paths): what a chapter's
#: presentation read, recorded with the run (:func:`files_read`)
_READ: set[str] = set()


def files_read() -> list[str]:
    """The resolved paths of every table :func:`read_results` and :func:`read_table` read."""
    return sorted(_READ)


COLUMNS = ["dataset", "method", "model", "variant", "pair", "aggregate", "metric", "value",
           "train_seed", "data_seed", "profile"]
OPTIONAL = ["repeat"]
#: the columns that name one cell of a table (everything but the value and the run)
CELL = ["dataset", "method", "model", "variant", "pair", "aggregate", "metric"]
MEAN_OVER_PAIRS = "mean over pairs"
CLASSIFIER = "Classifier"


def tidy(rows) -> pd.DataFrame:
    """Rows (dicts or a DataFrame) as a results table: :data:`COLUMNS` in order, then
    ``repeat`` when present.  ``model``, ``variant``, ``pair`` and ``aggregate`` default to
    empty; any other missing column is an error."""
    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    for c in ("model", "variant", "pair", "aggregate"):
        if c not in df.columns:
            df[c] = ""
        df[c] = df[c].fillna("").astype(str)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"results rows lack the column(s) {missing}; a results table has "
                         f"{COLUMNS} (+ {OPTIONAL})")
    return df[COLUMNS + [c for c in OPTIONAL if c in df.columns]].reset_index(drop=True)


def write_table(df: pd.DataFrame, path) -> Path:
    """Any table as CSV, atomically."""
    return atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))


def write_results(df: pd.DataFrame, name: str, results_dir="results") -> Path:
    """``results_dir/<name>.csv`` from a results table (checked against the schema)."""
    return write_table(tidy(df), Path(results_dir) / f"{name}.csv")


class Run:
    """What a table's runner returns, saved and read back in one way for every table.

    A subclass is a dataclass whose first field is ``results`` (the tidy rows).  It names
    its extra tables in :meth:`tables` (written as ``<name>_<key>.csv``), the
    counterfactuals its page shows in :meth:`shown` (``{key: Counterfactuals}``, written
    as ``<name>_<SHOWN>.pt`` / ``.json``), and how it is rebuilt from what was saved in
    :meth:`from_saved`.  :meth:`save` and :meth:`load` are written once, here.
    """

    #: the extra tables a saved run may have beside its results (``<name>_<key>.csv``)
    TABLES: tuple[str, ...] = ()
    #: the stem suffix of the saved counterfactuals
    SHOWN = "counterfactuals"

    def tables(self) -> dict[str, pd.DataFrame]:
        return {}

    def shown(self) -> dict:
        return {}

    def save(self, results_dir, name: str) -> list[Path]:
        """Everything the chapter's page shows: ``<name>.csv``, each extra table and the
        shown counterfactuals; :meth:`load` reads them back."""
        from cflib.explainers.base import save_counterfactuals

        paths = [write_results(self.results, name, results_dir)]
        for key, df in self.tables().items():
            paths.append(write_table(df, Path(results_dir) / f"{name}_{key}.csv"))
        shown = self.shown()
        if shown:
            paths.append(save_counterfactuals(Path(results_dir) / f"{name}_{self.SHOWN}",
                                              shown))
        return paths

    @classmethod
    def load(cls, results_dir, name: str) -> "Run":
        """The run :meth:`save` wrote (its networks are not saved)."""
        from cflib.explainers.base import load_counterfactuals

        d = Path(results_dir)
        tables = {k: read_table(d / f"{name}_{k}.csv") for k in cls.TABLES
                  if (d / f"{name}_{k}.csv").exists()}
        stem = d / f"{name}_{cls.SHOWN}"
        shown = load_counterfactuals(stem) if stem.with_suffix(".pt").exists() else {}
        return cls.from_saved(read_results(name, d), tables, shown)

    @classmethod
    def from_saved(cls, results: pd.DataFrame, tables: dict, shown: dict) -> "Run":
        raise NotImplementedError



def read_results(name_or_path, results_dir="results") -> pd.DataFrame:
    """A results table: ``results_dir/<name>.csv`` (or a path), values as floats and the
    empty text columns kept as empty strings."""
    path = Path(name_or_path)
    if path.suffix != ".csv":
        path = Path(results_dir) / f"{name_or_path}.csv"
    if not path.exists():
        raise FileNotFoundError(f"no results file {path}; run the chapter first "
                                f"(make chapter NB={path.stem})")
    df = pd.read_csv(path, keep_default_na=False)
    _READ.add(str(path.resolve()))
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return tidy(df)


def read_table(path) -> pd.DataFrame:
    """Any CSV the book writes (tuning evidence, curves), empty strings kept as such."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no file {path}; the command that writes it is named in "
                                "the module that reads it (e.g. python -m cflib.bench.tuning ...)")
    df = pd.read_csv(path, keep_default_na=False)
    _READ.add(str(path.resolve()))
    return df


def pair_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The per-pair rows (no aggregates, no classifier accuracy)."""
    return df[(df["pair"] != "") & (df["aggregate"] == "")]


def pair_means(df: pd.DataFrame) -> pd.DataFrame:
    """The means over pairs (``aggregate == "mean over pairs"``)."""
    return df[df["aggregate"] == MEAN_OVER_PAIRS]


def table_means(df: pd.DataFrame) -> pd.DataFrame:
    """The means over pairs of the table's rows (variant rows left out)."""
    d = pair_means(df)
    return d[d["variant"].fillna("") == ""] if "variant" in d.columns else d


def with_pair_means(df: pd.DataFrame) -> pd.DataFrame:
    """Append the mean over pairs of every method and metric (``aggregate`` set, ``pair``
    empty)."""
    per_pair = df[df["aggregate"] == ""]
    keys = ["dataset", "method", "model", "variant", "metric", "train_seed", "data_seed",
            "profile"]
    means = per_pair.groupby(keys, as_index=False, dropna=False, sort=False)["value"].mean()
    means["pair"] = ""
    means["aggregate"] = MEAN_OVER_PAIRS
    return pd.concat([per_pair, means[COLUMNS]], ignore_index=True)
