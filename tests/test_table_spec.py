"""A table is one record (issue 42, item 1): a tiny synthetic table, defined here as a
:class:`~cflib.bench.tables.registry.TableSpec` and nowhere else, runs end to end through
the book's machinery: its runner (one signature, ``run(args)``), its results file, the
page table, its headline and :func:`cflib.bench.compare.compare` with a toy method beside
its own rows.  No data file, no trained network: three classes of synthetic images and a
fixed linear classifier."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import pytest
import torch

from cflib.bench import catalog
from cflib.bench.compare import Comparison, compare
from cflib.bench.intervals import bootstrap
from cflib.bench.results import Run, read_results, tidy
from cflib.bench.seeds import Seeds
from cflib.bench.tables.registry import RunArgs, TableSpec
from cflib.book.report import bench_page, bench_table
from cflib.explainers import Explainer, ExplainerConfig
from cflib.metrics.basic import PROXIMITY, VALIDITY, proximity

CLASSES, SIZE = 3, 8


#: the mean pixel of each class's images
LEVELS = torch.tensor([-0.5, 0.0, 0.5])


def classifier() -> torch.nn.Module:
    """Class c is the one whose level is nearest the image's mean pixel m: the scores
    -(m - level)^2 + m^2, a fixed linear map."""
    lin = torch.nn.Linear(SIZE * SIZE, CLASSES)
    with torch.no_grad():
        lin.weight.copy_(2 * LEVELS.view(-1, 1).expand(-1, SIZE * SIZE) / (SIZE * SIZE))
        lin.bias.copy_(-LEVELS ** 2)
    return torch.nn.Sequential(torch.nn.Flatten(), lin).eval()


def shift(x, target, share: float):
    """``x`` with its mean moved ``share`` of the way to the target class's level."""
    gap = LEVELS[target.cpu()].view(-1, 1, 1, 1).to(x) - x.mean((1, 2, 3), keepdim=True)
    return x + share * gap


def images(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % CLASSES
    x = LEVELS[y].view(-1, 1, 1, 1) + 0.1 * torch.randn(n, 1, SIZE, SIZE, generator=g)
    return x, y


@dataclass(frozen=True)
class NudgeConfig(ExplainerConfig):
    share: float = 1.0


class Nudge(Explainer):
    """The table's own method: the image's mean moved onto the target's level."""

    name = "Nudge"
    Config = NudgeConfig

    def _generate(self, x, target, query, generator):
        return shift(x, target, self.config.share)


@dataclass
class SyntheticRun(Run):
    results: pd.DataFrame
    counterfactuals: dict = field(default_factory=dict)
    per_query: pd.DataFrame = field(default_factory=pd.DataFrame)

    def shown(self) -> dict:
        return self.counterfactuals

    @classmethod
    def from_saved(cls, results, tables, shown) -> "SyntheticRun":
        return cls(results, shown)


def run(args: RunArgs) -> SyntheticRun:
    clf = classifier()
    x, y = images(args.n_images or 12, args.seeds("queries"))
    target = (y + 1) % CLASSES
    rows, cfs, per_query = [], {}, []
    common = {"dataset": args.dataset, **args.seeds.columns(), "profile": args.profile.name,
              "repeat": 0}
    for m in args.methods:
        if m == "Query (unchanged)":
            x_cf = x.clone()
        elif m == "Nudge":
            x_cf = Nudge(clf).explain(x, target).x_cf
        else:                                    # a user's method, from its entry
            x_cf = catalog.build(m, clf, profile=args.profile, seeds=args.seeds,
                                 entries=args.entries).explain(x, target).x_cf
        valid = (clf(x_cf).argmax(1) == target).float()
        prox = proximity(x, x_cf)
        for metric, v in ((VALIDITY.name, valid), (PROXIMITY.name, prox)):
            rows.append({**common, "method": m, "metric": metric, "value": v.mean().item()})
            per_query += [{"pair": "", "method": m, "metric": metric, "query": i,
                           "value": float(a)} for i, a in enumerate(v)]
        cfs[m] = x_cf
    return SyntheticRun(tidy(rows), {}, pd.DataFrame(per_query))


def means(rows: pd.DataFrame) -> pd.DataFrame:
    d = rows[rows["method"] != "Classifier"]
    return d.groupby(["method", "metric"], sort=False)["value"].mean().reset_index()


SYNTHETIC = TableSpec(
    key="synthetic", kind="synthetic", chapter="synthetic", source="synthetic.py",
    dataset="mnist", title="A synthetic table", label="A synthetic table of three classes",
    template="synthetic", methods=("Query (unchanged)", "Nudge"),
    references=("Query (unchanged)",), metrics=(PROXIMITY, VALIDITY), per_pair=False,
    validity="Validity", run=run, load=SyntheticRun.load, means=means,
    checks=lambda rows: pd.DataFrame(columns=["expectation", "verdict"]),
    intervals=lambda r, model="": bootstrap(r.per_query) if len(r.per_query) else None,
    counterfactuals=lambda r, model="": {}, stand_in=lambda model="": classifier(),
    n_images=lambda prof: 12, check_methods=lambda methods, entries=(): list(methods), scope="mean over the queries",
    check_data=lambda datasets: None)
TABLE = SYNTHETIC


def toy_shift(model, x, target):
    """The user's method: a third of Nudge's shift (not far enough to flip the class)."""
    return shift(x, target, 1 / 3)


def test_a_synthetic_table_runs_end_to_end(tmp_path, monkeypatch):
    # the runner, with one signature
    r = SYNTHETIC.run(SYNTHETIC.args("smoke", Seeds()))
    assert set(r.results["method"]) == {"Query (unchanged)", "Nudge"}
    head = SYNTHETIC.headline(r.results).set_index(["method", "metric"])
    assert head.loc[("Nudge", "Validity"), "value"] == 1.0           # nudged into the target
    assert head.loc[("Query (unchanged)", "Proximity"), "value"] == 0.0
    assert set(head["label"]) == {"one training seed"}

    # the user's method beside the table's own rows, through compare and its page
    from cflib.bench import compare as compare_mod

    monkeypatch.setitem(compare_mod.TABLES, TABLE.key, TABLE)
    cmp = compare(toy_shift, tables=["synthetic"], profile="smoke", out=tmp_path / "out",
                  book_results=tmp_path, page=bench_page)
    tc = cmp.tables["synthetic"]
    assert tc.methods == ["Query (unchanged)", "toy_shift", "Nudge"]
    assert tc.computed == ["Nudge"] and "no synthetic.csv" in tc.note
    df = read_results(cmp.csv("synthetic"))                 # the results file
    assert set(df["method"]) == {"Query (unchanged)", "toy_shift", "Nudge"}
    table = bench_table(tc)                                   # the page table
    assert list(table.columns) == ["Proximity", "Validity"]
    assert table.loc["Nudge", "Proximity"] > table.loc["toy_shift", "Proximity"] > 0
    ranks = tc.ranks()
    assert ranks.loc["Query (unchanged)", "Proximity"] == 1
    assert "toy_shift" in cmp.page.read_text() and "A synthetic table" in cmp.page.read_text()
    back = Comparison.load(tmp_path / "out", book_results=tmp_path)
    pd.testing.assert_frame_equal(back.results, cmp.results)
    assert "toy_shift" not in catalog.CATALOG


def test_run_args_are_normalised_once_at_the_edge():
    a = RunArgs.make("MNIST", "smoke", 3, "cpu", ["Nudge"], [(4, 9)])
    assert a.dataset == "mnist" and a.profile.name == "smoke" and a.seeds == Seeds(3, 3)
    assert a.methods == ("Nudge",) and a.pairs == ((4, 9),)
    with pytest.raises(ValueError, match="unknown profile"):
        RunArgs.make("mnist", "huge")
    with pytest.raises(TypeError, match="seeds must be"):
        RunArgs.make("mnist", "smoke", "0")
    with pytest.raises(ValueError, match="unknown dataset 'cifar'"):
        RunArgs.make("cifar", "smoke")
