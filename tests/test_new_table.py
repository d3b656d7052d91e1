"""A new table of the book from one file: this module defines a synthetic table (its
runner and its :class:`~cflib.bench.tables.registry.TableSpec`, registered at import),
writes its chapter's notebook, runs that chapter through the book's own machinery (a
kernel, the trace of its compute, its record) and renders the executed notebook as a
page.  Nothing else is edited: the chapter, the README block, the results page's line,
the discussion and the bench page's renderer all come from defaults, so a missing entry
is never an import error.  (A real table adds its reference numbers to
``cflib/bench/reference/`` and its place to ``_toc.yml``: five files in all.)"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import pandas as pd
import pytest
import torch

from cflib.bench.data import PROJECT_ROOT
from cflib.bench.results import Run, tidy
from cflib.bench.runner import RunArgs
from cflib.bench.tables.registry import SPECS, TableSpec, register_table
from cflib.metrics.basic import PROXIMITY, VALIDITY, proximity

#: where the test writes the chapter's notebook (outside the tracked tree)
NOTEBOOK = PROJECT_ROOT / "_build" / "new-table" / "synthetic_chapter.py"
LEVELS = torch.tensor([-0.5, 0.0, 0.5])


def classify(x: torch.Tensor) -> torch.Tensor:
    """Class c is the one whose level is nearest the image's mean pixel."""
    return (x.mean((1, 2, 3))[:, None] - LEVELS[None]).abs().argmin(1)


@dataclass
class SyntheticRun(Run):
    results: pd.DataFrame
    counterfactuals: dict = field(default_factory=dict)

    @classmethod
    def from_saved(cls, results, tables, shown) -> "SyntheticRun":
        return cls(results)


def run(args: RunArgs) -> SyntheticRun:
    g = torch.Generator().manual_seed(args.seeds("queries"))
    n = args.n_images or 12
    y = torch.arange(n) % 3
    x = LEVELS[y].view(-1, 1, 1, 1) + 0.1 * torch.randn(n, 1, 4, 4, generator=g)
    t = (y + 1) % 3
    rows = []
    common = {"dataset": args.dataset, **args.seeds.columns(), "profile": args.profile.name}
    for m in args.methods:
        share = 1.0 if m == "Nudge" else 0.0
        x_cf = x + share * (LEVELS[t].view(-1, 1, 1, 1) - x.mean((1, 2, 3), keepdim=True))
        rows += [{**common, "method": m, "metric": VALIDITY.name,
                  "value": (classify(x_cf) == t).float().mean().item()},
                 {**common, "method": m, "metric": PROXIMITY.name,
                  "value": proximity(x, x_cf).mean().item()}]
    return SyntheticRun(tidy(rows))


def means(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.groupby(["method", "metric"], sort=False, as_index=False)["value"].mean()


SYNTHETIC = TableSpec(
    key="synthetic-chapter", kind="synthetic", chapter="synthetic_chapter",
    source=str(NOTEBOOK), dataset="mnist", title="A synthetic table",
    label="A synthetic table of three classes", template="synthetic_chapter",
    methods=("Query (unchanged)", "Nudge"), references=("Query (unchanged)",),
    metrics=(PROXIMITY, VALIDITY), per_pair=False, validity="Validity", run=run,
    load=SyntheticRun.load, means=means,
    checks=lambda rows: pd.DataFrame(columns=["expectation", "verdict"]),
    intervals=lambda r, model="": None, counterfactuals=lambda r, model="": {},
    stand_in=lambda model="": None, n_images=lambda prof: 12,
    check_methods=lambda methods, entries=(): list(methods), bench=False,
    scope="mean over the queries")


def register() -> None:
    """Add the table to the book (a real table's module calls :func:`register_table` at
    import; this test's does it in the kernel and in a fixture, so that no other test
    meets it)."""
    register_table(SYNTHETIC)

SOURCE = '''\
# %% [markdown]
# # A synthetic table
#
# Three classes of synthetic images; one method moves each query onto its target's level.

# %% tags=["parameters"]
profile: str = "standard"   # smoke | standard | paper
device: str = "cpu"         # cpu
train_seed: int = 0         # no network is trained
data_seed: int = 0          # seeds the queries
results_name: str | None = None  # the results file's name
results_dir: str | None = None   # where the results go

# %% tags=["setup"]
import tests.test_new_table
from cflib.book import chapters

tests.test_new_table.register()

p = chapters.parameters(str(tests.test_new_table.NOTEBOOK), globals())

# %% tags=["setup"]
from cflib.bench.seeds import Seeds
from cflib.bench.tables.registry import get_spec

spec = get_spec("synthetic-chapter")
args = spec.args(p.profile, Seeds(train=p.train_seed, data=p.data_seed), p.device)

# %% tags=["compute"]
saved = spec.run(args).save(p.results_dir, p.results_name)

# %%
from cflib.book import report

run = spec.load(p.results_dir, p.results_name)
head = spec.headline(run.results).pivot_table(index="method", columns="metric",
                                              values="value", sort=False)
report.page_table(head)
'''


@pytest.fixture
def registered():
    from cflib.book import chapters

    register()
    chapters.refresh()
    try:
        yield SYNTHETIC
    finally:
        SPECS.pop(SYNTHETIC.key, None)
        chapters.refresh()


def _page(notebook, root) -> str:
    """The executed notebook rendered as the book renders a chapter (Jupyter Book 1,
    execution off), alone in a book of its own: the page's HTML."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root.mkdir(parents=True)
    (root / "_config.yml").write_text("title: A new table\nexecute:\n  execute_notebooks: 'off'\n"
                                      "sphinx:\n  config:\n    html_theme: alabaster\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: synthetic_chapter\n")
    shutil.copy2(notebook, root / "synthetic_chapter.ipynb")
    script = Path(sys.executable).with_name("jupyter-book")
    subprocess.run([str(script), "build", str(root), "--quiet"], check=True,
                   capture_output=True)
    return (root / "_build" / "html" / "synthetic_chapter.html").read_text()


@pytest.mark.slow
@pytest.mark.data
def test_a_new_table_from_one_file_runs_from_its_notebook_to_its_page(tmp_path, registered):
    import nbformat

    from cflib.book import chapters
    from cflib.book.report import readme
    from cflib.book.report.discussion import discussions, template_path
    from cflib.book.runs.execute import build

    NOTEBOOK.parent.mkdir(parents=True, exist_ok=True)
    NOTEBOOK.write_text(textwrap.dedent(SOURCE))
    assert chapters.get_chapter("synthetic_chapter").data == ("mnist",)
    # every default the book has for a table of a new kind, none an import error
    assert "synthetic_chapter" in readme.blocks()
    assert readme.SUMMARY_LINES.get("synthetic") is None
    assert "synthetic_chapter" in discussions()
    assert not template_path("synthetic_chapter").exists()       # no discussion: none shown

    path = build("synthetic_chapter", profile="smoke", out_dir=tmp_path / "book",
                 results_dir=tmp_path / "results")
    record = nbformat.read(path, as_version=4).metadata["cflib"]
    assert "synthetic_chapter.csv" in record["outputs"]
    df = pd.read_csv(tmp_path / "results" / "synthetic_chapter.csv")
    nudge = df[(df["method"] == "Nudge") & (df["metric"] == "Validity")]["value"]
    assert nudge.item() == 1.0
    page = _page(path, tmp_path / "site")
    assert "A synthetic table" in page and "Nudge" in page and "Query (unchanged)" in page
    assert "Proximity" in page and "<table" in page


def test_the_table_is_registered_by_its_module_alone(registered):
    from cflib.book import chapters

    assert SPECS["synthetic-chapter"] is SYNTHETIC and list(SPECS)[-1] == "synthetic-chapter"
    assert chapters.get_chapter("synthetic_chapter").source == str(NOTEBOOK)
    assert SYNTHETIC.views() == [SYNTHETIC]
