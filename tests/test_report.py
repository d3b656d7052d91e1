"""The tidy-table helpers and the reference file, on small hand-made tables."""
import re
from pathlib import Path

import pandas as pd
import pytest

from cflib.bench.catalog import check_methods
from cflib.bench.reference import load_reported, reported_on_our_scale
from cflib.bench.results import pair_means, tidy, with_pair_means
from cflib.bench.runner import shape_checks
from cflib.book import report
from cflib.book.report import readme as readme_tools
from cflib.book.runs import notebook as nb_tools


def rows(values):
    return tidy([{"dataset": "mnist", "pair": p, "method": m, "metric": k, "value": v,
                  "train_seed": 0, "data_seed": 0, "profile": "smoke"}
                 for (p, m, k), v in values.items()])


def test_pair_means_are_means_over_pairs():
    df = with_pair_means(rows({("4->9", "CEM", "IM1"): 1.0, ("3->8", "CEM", "IM1"): 2.0,
                               ("5->6", "CEM", "IM1"): 6.0}))
    assert pair_means(df)["value"].item() == pytest.approx(3.0)
    assert pair_means(df)["pair"].item() == "" and len(df) == 4


def test_reported_values_are_the_reference_file():
    rep = load_reported("c3lt", "mnist")
    assert set(rep["direction"]) <= {"lower", "higher"}
    im1 = rep[(rep["method"] == "C3LT") & (rep["metric"] == "IM1")]["value"].item()
    assert im1 > 0
    # IM2 and KID come back to our scale: the table's x10 and x1e3 divided out
    ours = reported_on_our_scale("c3lt", "mnist")
    im2x10 = rep[(rep["method"] == "CEM") & (rep["metric"] == "IM2x10")]["value"].item()
    im2 = ours[(ours["method"] == "CEM") & (ours["metric"] == "IM2")]["value"].item()
    assert im2 == pytest.approx(im2x10 / 10)


def test_comparison_table_puts_ours_beside_paper_on_table_scale():
    df = with_pair_means(rows({("4->9", "CEM", "IM2"): 0.1, ("4->9", "CEM", "IM1"): 1.5,
                               ("4->9", "Adv. Attack", "IM1"): 2.0}))
    t = report.comparison_table(df, "c3lt", "mnist", metrics=["IM1", "IM2"])
    assert t.loc["CEM", ("IM2 (x10)", "ours")] == pytest.approx(1.0)
    paper = load_reported("c3lt", "mnist")
    cem_im2 = paper[(paper["method"] == "CEM") & (paper["metric"] == "IM2x10")]["value"].item()
    assert t.loc["CEM", ("IM2 (x10)", "paper")] == pytest.approx(cem_im2)
    assert pd.isna(t.loc["Adv. Attack", ("IM2 (x10)", "paper")])


def test_shape_checks_evaluate_orderings_in_each_metrics_direction():
    df = with_pair_means(rows({("4->9", "A", "IM1"): 1.0, ("4->9", "B", "IM1"): 2.0,
                               ("4->9", "A", "COUT"): 0.1, ("4->9", "B", "COUT"): 0.5}))
    e = {"threshold": float("nan"), "match": "", "source": ""}
    exp = pd.DataFrame([
        {"metric": "IM1", "method": "A", "relation": "better", "other": "B", **e},
        {"metric": "IM1", "method": "B", "relation": "better", "other": "A", **e},
        {"metric": "COUT", "method": "A", "relation": "better", "other": "B", **e},
        {"metric": "COUT", "method": "B", "relation": "best", "other": "", **e},
        {"metric": "IM1", "method": "A", "relation": "better", "other": "missing", **e},
    ])
    out = shape_checks(pair_means(df), "c3lt", expectations=exp)
    # IM1 is lower-is-better, COUT higher-is-better; the missing method is skipped
    assert out["holds"].tolist() == [True, False, False, True]
    assert out["direction"].tolist() == ["↓", "↓", "↑", "↑"]
    # the committed expectations of the C3LT table name methods of the catalog
    from cflib.bench.catalog import CATALOG
    from cflib.bench.reference import expected_orderings
    c3lt = expected_orderings("c3lt")
    assert set(c3lt["method"]) | set(c3lt["other"]) <= set(CATALOG)


def test_reported_directions_agree_with_the_metric_specs():
    from cflib.bench.reference import REPORTED_NAMES
    from cflib.metrics.spec import get_spec

    rep = load_reported()
    for name, direction in set(zip(rep["metric"], rep["direction"])):
        ours = REPORTED_NAMES.get(name, (name,))[0]
        if ours in ("Overhead",):  # the quantization chapter declares it
            continue
        assert get_spec(ours).direction == direction, name


def test_unknown_method_is_named():
    with pytest.raises(ValueError, match="unknown method.*Foo"):
        check_methods(["Foo"])


def bayes_rows():
    vals = {("PSCE", "IM1"): [0.9, 1.1], ("Wachter", "IM1"): [1.4, 1.6],
            ("PSCE", "Robustness_Ratio_1e-3"): [1.0, 1.0],
            ("Wachter", "Robustness_Ratio_1e-3"): [0.8, 0.9]}
    run = {"train_seed": 0, "data_seed": 0, "profile": "smoke"}
    rows_ = [{"dataset": "mnist", "method": m, "model": "mc_dropout", "metric": k, "value": v,
              **run, "repeat": r}
             for (m, k), vs in vals.items() for r, v in enumerate(vs)]
    rows_.append({"dataset": "mnist", "method": "Classifier", "model": "mc_dropout",
                  "metric": "Accuracy", "value": 0.99, **run, "repeat": -1})
    return tidy(rows_)


def test_bayes_table_mean_sd_and_paper_im1():
    t = report.bayes_table(bayes_rows(), "mc_dropout")
    assert t.loc["PSCE", ("IM1", "ours")] == pytest.approx(1.0)
    assert t.loc["PSCE", ("IM1", "± sd")] == pytest.approx(0.1414, abs=1e-3)
    paper = load_reported("bayes", "mnist")
    want = paper[(paper["method"] == "PSCE") & (paper["model"] == "mc_dropout")
                 & (paper["metric"] == "IM1")]["value"].item()
    assert t.loc["PSCE", ("IM1", "paper")] == want
    assert pd.isna(t.loc["PSCE", ("Robustness_Ratio_1e-3", "paper")])
    with pytest.raises(ValueError, match="no results for model 'bnn'"):
        report.bayes_table(bayes_rows(), "bnn")
    md = report.markdown_bayes(t)
    assert "| PSCE | 1 ± 0.141 / " in md


def test_bayes_summary_and_psce_checks():
    from cflib.bench.tables.bayes import shape_checks as bayes_checks
    from cflib.bench.tables.bayes import summarise

    s = summarise(bayes_rows())
    assert "Classifier" not in set(s["method"])
    row = s[(s["method"] == "Wachter") & (s["metric"] == "IM1")]
    assert row["mean"].item() == pytest.approx(1.5) and row["n"].item() == 2
    checks = bayes_checks(s).set_index("expectation")["holds"]
    assert checks["IM1: PSCE best"] and checks["Robustness_Ratio_1e-3: PSCE best"]
    worse = bayes_rows()
    worse.loc[(worse["method"] == "PSCE") & (worse["metric"] == "IM1"), "value"] = 2.0
    assert not bayes_checks(summarise(worse)).set_index("expectation")["holds"]["IM1: PSCE best"]


def test_markdown_ours_paper():
    df = with_pair_means(rows({("4->9", "CEM", "IM1"): 1.5}))
    md = report.markdown_ours_paper(report.comparison_table(df, "c3lt", "mnist", metrics=["IM1"]))
    paper = load_reported("c3lt", "mnist")
    cem = paper[(paper["method"] == "CEM") & (paper["metric"] == "IM1")]["value"].item()
    assert md.splitlines()[2] == f"| CEM | 1.5 / {cem:.3g} |"


def test_update_readme_rewrites_only_the_summary_block_and_the_results_page(tmp_path):
    res = tmp_path / "results"
    res.mkdir()
    bayes_rows().assign(profile="standard").to_csv(res / "mnist_bayesian.csv", index=False)
    readme, page = tmp_path / "README.md", tmp_path / "results.md"
    readme.write_text("intro\n<!-- summary:start -->\nold\n<!-- summary:end -->\nafter\n")
    with pytest.raises(FileNotFoundError, match="mnist_eval.csv"):
        report.update_readme(readme, res, page=page)   # every chapter's results are needed
    assert "old" in readme.read_text() and not page.exists()
    acc = {"dataset": "mnist", "method": "Classifier", "metric": "Accuracy", "value": 0.99,
           "train_seed": 0, "data_seed": 0, "profile": "standard"}
    for name, dataset in (("mnist_eval", "mnist"), ("fashion_mnist_test", "fmnist")):
        df = with_pair_means(rows({(p, m, "IM1"): v for p in ("4->9", "3->8", "5->6")
                                   for m, v in (("C3LT", 1.5), ("CEM", 2.5))}))
        df = tidy(pd.concat([tidy([acc]), df])).assign(dataset=dataset, profile="standard")
        df.to_csv(res / f"{name}.csv", index=False)
    with pytest.raises(FileNotFoundError, match="fashion_mnist_quant.csv"):
        report.update_readme(readme, res, page=page)
    quant = quant_rows(0.9, 0.1)
    quant.to_csv(res / "fashion_mnist_quant.csv", index=False)       # a smoke run: refused
    with pytest.raises(ValueError, match="not the book's run"):
        report.update_readme(readme, res, page=page)
    assert "old" in readme.read_text()
    quant.assign(profile="standard").to_csv(res / "fashion_mnist_quant.csv", index=False)
    report.update_readme(readme, res, page=page)
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("after\n") and "old" not in text
    assert "C3LT IM1 1.5 (paper" in text and "PTQ INT8 VD 0.1" in text
    full = page.read_text()
    # the page shows the chapters' page tables (HTML), not markdown
    assert "Bayesian classifiers: MC dropout" in full and "| PSCE |" not in full
    assert re.search(r"<th>PSCE</th><td>1(\.00)? ± 0\.14", full), full
    # every table links to its chapter
    for name in ("mnist_eval", "fashion_mnist_test", "mnist_bayesian", "fashion_mnist_quant"):
        assert f"{{doc}}`chapters/{name}`" in full, name
    readme.write_text("no markers")
    with pytest.raises(ValueError, match="summary"):
        report.update_readme(readme, res, page=page)
    assert readme.read_text() == "no markers"


def quant_rows(acc, vd):
    base = {"dataset": "fmnist", "train_seed": 0, "data_seed": 0, "profile": "smoke"}
    vals = {("FP32", "Accuracy"): 0.91, ("FP32", "FP_Feasible"): 0.8,
            ("PTQ INT8", "Accuracy"): acc, ("PTQ INT8", "VD"): vd, ("PTQ INT8", "VD_low"): 0.05,
            ("PTQ INT8", "VD_high"): 0.2, ("PTQ INT8", "FA_recon"): 0.07,
            ("PTQ INT8", "FA_recon_low"): 0.06, ("PTQ INT8", "FA_recon_high"): 0.08,
            ("PTQ INT8", "Avg_weight_bits"): 8.0, ("PTQ INT8", "Avg_act_bits"): 8.0,
            ("PTQ INT8", "CRG"): 0.01, ("PTQ INT8", "CRG_ci95"): 0.02,
            ("PTQ INT8", "DirSim"): 0.99, ("PTQ INT8", "DirSim_ci95"): 0.01,
            ("PTQ INT8", "Overhead"): 1.0, ("PTQ INT8", "Bit_cost"): 8.0,
            ("PTQ INT8", "Q_Feasible"): 0.8}
    return tidy([{**base, "method": m, "metric": k, "value": v} for (m, k), v in vals.items()])


def test_quant_table_puts_the_listing_beside_ours():
    from cflib.bench.reference import reported_value

    t = report.quant_table(quant_rows(0.9, 0.1))
    assert list(t.index) == ["FP32", "PTQ INT8"]
    assert t.loc["PTQ INT8", ("Accuracy %", "ours")] == pytest.approx(90.0)
    assert t.loc["PTQ INT8", ("Accuracy %", "paper")] == pytest.approx(
        100 * reported_value("quant", "fmnist", "PTQ INT8", "Accuracy"))
    assert t.loc["PTQ INT8", ("Overhead ×", "paper")] == reported_value(
        "quant", "fmnist", "PTQ INT8", "Overhead")
    assert t.loc["PTQ INT8", ("VD", "low")] == pytest.approx(0.05)   # the Wilson interval
    assert t.loc["PTQ INT8", ("CRG", "±")] == pytest.approx(0.02)     # one seed: the CI
    md = report.markdown_quant(t)
    assert "| PTQ INT8 | 90 / " in md and "0.1 [0.05, 0.2]" in md and "0.01 ± 0.02" in md
    assert "| 8 / 8 |" in md
    # all 14 figures of the listing reach the table
    paper = load_reported("quant", "fmnist")
    assert len(paper) == 14 and set(paper["metric"]) == {"Accuracy_pct", "Overhead_x"}


def test_perturbation_table_means_over_repeats():
    curves = pd.DataFrame([{"model": "bnn", "method": "PSCE", "repeat": r, "scale": s,
                            "validity": v}
                           for r, vs in enumerate([[1.0, 0.5], [1.0, 0.7]])
                           for s, v in zip([0.0, 0.1], vs)])
    t = report.perturbation_table(curves)
    assert t.loc[("bnn", "PSCE"), 0.1] == pytest.approx(0.6)
    assert list(t.columns) == [0.0, 0.1]


def test_readme_timings_come_from_the_notebooks_metadata(tmp_path):
    import nbformat

    build_chapter = readme_tools
    nb = nbformat.v4.new_notebook()
    nb.metadata["cflib"] = {"seconds": 754, "threads": 1, "date": "2026-11-30",
                            "params": {"profile": "standard"}}
    nbformat.write(nb, tmp_path / "mnist_eval.ipynb")
    table = build_chapter.timing_markdown(tmp_path)
    assert "| `mnist_eval` | `standard` | 12.6 min | 1 | 2026-11-30 |" in table
    assert "fashion_mnist_test" not in table          # no notebook, no row


def test_committed_notebooks_carry_no_scratch_or_machine_paths():
    import nbformat

    build_chapter = nb_tools
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('# Parameters\nresults_dir = "_build/tmp/x-1/results"\n')
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.append(cell)
    nb.metadata["papermill"] = {"input_path": "/home/me/x.ipynb", "output_path": "/home/me/y",
                                "parameters": {"results_dir": "_build/tmp/x-1/results"}}
    build_chapter.scrub_paths(nb, "_build/tmp/x-1/results", "results")
    text = nbformat.writes(nb)
    assert "_build/tmp" not in text and "/home/me" not in text
    assert 'results_dir = "results"' in nb.cells[0].source


# -- the discussions: every number generated from the results --------------------------------
def _discussion_chapters():
    from cflib.book.report.discussion import discussions, template_path

    return [c for c in discussions() if template_path(c).exists()]


@pytest.mark.parametrize("chapter", _discussion_chapters())
def test_no_number_is_typed_into_a_discussion(chapter):
    """Outside the template's tags a discussion holds no decimal number: every value it
    quotes is read from the results when the page is built."""
    import re

    from cflib.book.report.discussion import template_path

    text = template_path(chapter).read_text()
    prose = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", "", text, flags=re.S)
    typed = re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", prose)
    assert not typed, f"{chapter}: numbers typed into the prose: {typed[:10]}"


#: integers a discussion may type, each with why it is not read from a config or result
TYPED_INTEGERS = {
    "nearly 0": "language: a loss approaching zero",
    "95 %": "the Wilson interval's level, the default of cflib.metrics.recourse.wilson",
    "10-step": "the K = 10 teacher ablation: its K is set where cflib/bench/tables/quant.py "
               "builds the variant (no config field holds it yet)",
}


@pytest.mark.parametrize("chapter", _discussion_chapters())
def test_no_setting_is_typed_into_a_discussion(chapter):
    """Nor an integer: an epoch count, a weight or a budget in the prose is filled from the
    config or the evidence, so that it cannot disagree with what was run.  The few
    integers that are not settings are listed, with why, in ``TYPED_INTEGERS``."""
    import re

    from cflib.book.report.discussion import template_path

    text = template_path(chapter).read_text()
    prose = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", "", text, flags=re.S)
    for phrase in TYPED_INTEGERS:
        prose = prose.replace(phrase, "")
    typed = [prose[max(0, m.start() - 20):m.end() + 12].replace("\n", " ")
             for m in re.finditer(r"(?<![\w.])\d+(?![\w.])", prose)]
    assert not typed, f"{chapter}: integers typed into the prose: {typed[:10]}"


def test_every_allowed_integer_is_still_in_a_discussion():
    """An allowance that no template uses any more is removed, not kept."""
    from cflib.book.report.discussion import template_path

    texts = " ".join(template_path(ch).read_text() for ch in _discussion_chapters())
    assert [p for p in TYPED_INTEGERS if p not in texts] == []


#: per discussion, one value its template quotes as ``v(method, metric, model=...) | f``
#: (the C3LT chapters' as ``m(...)``: the mean over their sweep's training seeds)
PROBES = {
    "mnist_eval": ("C3LT", "Proximity", ""),
    "fashion_mnist_test": ("C3LT", "Proximity", ""),
    "cross_dataset": ("Original Data", "Validity", ""),   # mnist_eval's seed mean
    "mnist_bayesian": ("Original Data", "IM1", "mc_dropout"),
    "fashion_mnist_quant": ("MixedPrec-QAT", "VD", ""),
}


def _probe_value(csv, method, metric, model, seeds: bool = False) -> float:
    """The probe's value read from a results file here: the mean over pairs of the table's
    own row (the per-run row where there are no pairs), over the repeats; with ``seeds``,
    its mean over the training seeds of the chapter's sweep beside it (the book's run
    replacing its own seed), as the discussion quotes it."""
    if seeds:
        csv = Path(csv)
        sweep = sorted((csv.parent / "sweep" / csv.stem / "standard").glob(f"seed*/{csv.name}"))
        if sweep:
            own = _probe_value(csv, method, metric, model)
            own_seed = int(pd.read_csv(csv)["train_seed"].iloc[0])
            vals = {int(f.parent.name[4:]): _probe_value(f, method, metric, model)
                    for f in sweep}
            vals[own_seed] = own
            return sum(vals.values()) / len(vals)
    df = pd.read_csv(csv, keep_default_na=False)
    d = df[(df["method"] == method) & (df["metric"] == metric) & (df["variant"] == "")
           & (df["model"] == model)]
    means = d[d["aggregate"] == "mean over pairs"]
    d = means if len(means) else d[d["aggregate"] == ""]
    if "repeat" in d.columns and (d["repeat"] >= 0).any():
        d = d[d["repeat"] >= 0]
    return float(pd.to_numeric(d["value"]).mean())


def test_every_discussion_has_a_probe():
    assert set(PROBES) == set(_discussion_chapters())


@pytest.mark.parametrize("chapter", _discussion_chapters())
def test_a_changed_result_changes_the_discussion(chapter, tmp_path):
    """Render a chapter's discussion from a copy of the committed results, scale every
    value by 1.37 in the copy, render again: the text changes, and the probe's value, as
    read from the scaled file and formatted, is in the new text where the old one was in
    the old text."""
    import shutil

    from cflib.bench.data import PROJECT_ROOT
    from cflib.book.report.discussion import discussion_text, discussions
    from cflib.book.report.discussion import f as fmt

    _, _, name, _ = discussions()[chapter]
    src = PROJECT_ROOT / "results"
    if not (src / f"{name}.csv").exists():
        pytest.skip(f"no committed results/{name}.csv")
    res = tmp_path / "results"
    shutil.copytree(src, res)
    before = discussion_text(chapter, res)
    assert before.strip()
    seeds = chapter in ("mnist_eval", "fashion_mnist_test", "cross_dataset")
    old = _probe_value(res / f"{name}.csv", *PROBES[chapter], seeds=seeds)
    for f in res.rglob(f"{name}*.csv"):
        df = pd.read_csv(f)
        if "value" in df.columns:
            v = pd.to_numeric(df["value"], errors="coerce")
            df["value"] = v * 1.37
            df.to_csv(f, index=False)
    after = discussion_text(chapter, res)
    assert after != before
    new = _probe_value(res / f"{name}.csv", *PROBES[chapter], seeds=seeds)
    assert new == pytest.approx(1.37 * old) and fmt(new) != fmt(old)
    # as whole numbers: "0.13" is not found in "0.132"
    assert _has_number(before, fmt(old)) and _has_number(after, fmt(new))
    assert not _has_number(before, fmt(new))


def _has_number(text: str, number: str) -> bool:
    """Whether ``number`` is in ``text`` as a whole number, not as part of a longer one."""
    return re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", text) is not None


def test_a_number_is_found_only_whole():
    assert _has_number("VD 0.13, then", "0.13") and _has_number("(0.13)", "0.13")
    assert not _has_number("VD 0.132", "0.13") and not _has_number("10.13", "0.13")


def test_the_discussions_number_formats():
    from cflib.book.report.discussion import d, f
    assert [f(0.12345), f(3), f(2.5e-5), f(float("nan"))] == ["0.123", "3", "2.50e-05", "–"]
    assert [d(0.0042), d(-0.00478), d(2e-4), d(None)] == ["+0.004", "−0.005", "0.000", "–"]


def test_the_cross_dataset_ranking_ranks_the_papers_rows_and_the_unchanged_query():
    from cflib.bench.results import MEAN_OVER_PAIRS
    from cflib.book.report.tables import paper_rows, rank_methods
    rows = paper_rows("c3lt")
    assert rows[-1] == "Query (unchanged)" and "C3LT" in rows and "CEM (targeted)" not in rows
    df = pd.DataFrame({"method": ["C3LT", "CEM (targeted)", "CEM"], "metric": "Proximity",
                       "value": [0.3, 0.01, 0.05], "aggregate": MEAN_OVER_PAIRS, "variant": ""})
    ranks = rank_methods({"MNIST": df}, ["Proximity"], rows)["MNIST"]["Proximity"]
    assert ranks.to_dict() == {"C3LT": 2.0, "CEM": 1.0}


#: the project's own top folders: a path under one of them named in prose must exist
OWN_FOLDERS = ("cflib", "book", "results", "notebooks", "tests", "benchmarks", ".ci")


def test_every_project_path_the_prose_names_exists():
    """A file of this project named in a chapter's prose, a book page or the README
    (``cflib/bench/reference/expected.csv``) exists (a path of another repository, such
    as the papers' code, is not checked)."""
    from cflib.bench.data import PROJECT_ROOT

    sources = [*PROJECT_ROOT.glob("notebooks/*.py"), *PROJECT_ROOT.glob("book/*.md"),
               *PROJECT_ROOT.glob("book/discussion/*.md"), PROJECT_ROOT / "README.md"]
    named = {}
    for src in sources:
        for path in re.findall(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|csv|md|bib|yml|ipynb))`",
                               src.read_text()):
            if path.split("/")[0] in OWN_FOLDERS:
                named.setdefault(path, src.relative_to(PROJECT_ROOT).as_posix())
    assert "cflib/bench/reference/reported.csv" in named      # the check sees the prose
    missing = {p: src for p, src in named.items() if not (PROJECT_ROOT / p).exists()}
    assert not missing, f"prose names files that do not exist: {missing}"
    # and a module or function named as `cflib.x.y` resolves
    import importlib

    def resolves(name: str) -> bool:
        parts = name.split(".")
        for k in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:k]))
            except ImportError:
                continue
            for attr in parts[k:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
        return False

    dotted = {m: src.relative_to(PROJECT_ROOT).as_posix() for src in sources
              for m in re.findall(r"`(cflib(?:\.\w+)+)", src.read_text())}
    assert "cflib.metrics.robustness" in dotted and not resolves("cflib.data")
    unresolved = {m: src for m, src in dotted.items() if not resolves(m)}
    assert not unresolved, f"prose names modules that do not exist: {unresolved}"


def test_a_styled_table_renders_the_same_html_twice():
    """A re-render must show the executed page: a Styler's element ids come from its uuid,
    random in pandas unless set (the confounded-realism table differed between runs)."""
    from cflib.book.report.tables import style
    t = pd.DataFrame({"4->9": [0.1, 1.0]}, index=["Query (unchanged)", "C3LT"])
    html = [style(t).map(lambda v: "font-weight: bold;" if v > 0.5 else "").to_html()
            for _ in range(2)]
    assert html[0] == html[1] and "font-weight: bold" in html[0]
    # the notebook keeps the plain-text form too: no memory address in it
    assert repr(style(t)) == repr(style(t)) == "<styled table, 2 rows x 1 columns>"
    other = style(t * 2).to_html()
    assert other != html[0]


def test_the_timing_table_shows_the_compute_run_of_a_re_rendered_chapter(tmp_path):
    """A page re-rendered in 15 s from a 107-minute computation is listed at 107 minutes."""
    import nbformat

    from cflib.book.report.readme import timing_markdown
    nb = nbformat.v4.new_notebook()
    nb.metadata["cflib"] = {"params": {"profile": "standard"}, "mode": "render", "seconds": 15,
                            "threads": 1, "date": "2026-12-02",
                            "computed": {"seconds": 6459, "threads": 2, "date": "2026-12-01"}}
    nbformat.write(nb, tmp_path / "mnist_eval.ipynb")
    executed = nbformat.v4.new_notebook()
    executed.metadata["cflib"] = {"params": {"profile": "smoke"}, "seconds": 90, "threads": 1,
                                  "date": "2026-12-02"}
    nbformat.write(executed, tmp_path / "cross_dataset.ipynb")
    table = timing_markdown(tmp_path)
    assert "| `mnist_eval` | `standard` | 107.7 min | 2 | 2026-12-01 |" in table
    assert "| `cross_dataset` | `smoke` | 1.5 min | 1 | 2026-12-02 |" in table


def test_fid_and_kid_name_their_feature_space_and_never_sit_beside_the_papers():
    df = with_pair_means(rows({("4->9", "CEM", "FID"): 100.0, ("4->9", "CEM", "IM1"): 1.5}))
    t = report.comparison_table(df, "c3lt", "mnist", metrics=["IM1", "FID"])
    assert ("FID (FeatureNet)", "ours") in t.columns and ("FID", "ours") not in t.columns
    assert t[("FID (FeatureNet)", "paper")].isna().all()
    assert t.loc["CEM", ("IM1", "paper")] == pytest.approx(
        load_reported("c3lt", "mnist").query("method == 'CEM' and metric == 'IM1'")["value"].item())
    assert "FID (FeatureNet) ↓" in str(report.page_table(t))     # the arrow is kept


@pytest.mark.parametrize("chapter", ["mnist_eval", "mnist_bayesian", "fashion_mnist_quant"])
def test_a_chapter_opens_with_its_discussions_summary(chapter):
    """The discussion's opening ("What this shows", up to the template's end marker) fills
    the chapter's summary marker near the top, the rest its discussion marker; a notebook
    without the summary marker shows the whole discussion in one place."""
    import nbformat

    from cflib.bench.data import PROJECT_ROOT
    from cflib.book.chapters import get_chapter
    from cflib.book.runs.notebook import MARKER, SUMMARY, SUMMARY_END, fill_discussion

    results = PROJECT_ROOT / "results"
    if not (results / f"{chapter}.csv").exists():
        pytest.skip(f"no committed results/{chapter}.csv")

    def notebook(*texts):
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(t) for t in texts])

    nb = notebook(SUMMARY, "## Discussion\n\n" + MARKER)
    fill_discussion(nb, get_chapter(chapter), results)
    top, rest = nb.cells[0].source, nb.cells[1].source
    assert top.startswith("**What this shows.**") and "Every number below" not in top
    assert "Every number below" in rest and "What this shows" not in rest
    assert SUMMARY_END not in top + rest and SUMMARY not in top
    one = notebook("## Discussion\n\n" + MARKER)
    fill_discussion(one, get_chapter(chapter), results)
    assert "What this shows" in one.cells[0].source and SUMMARY_END not in one.cells[0].source


def _ops(subject, kind, wall, ops):
    return [{"subject": subject, "kind": kind, "threads": 1, "wall_seconds": wall,
             "operator": op, "family": fam, "self_seconds": sec, "calls": calls}
            for op, fam, sec, calls in ops]


def test_the_operator_table_shares_add_up_and_name_the_largest_operator():
    ops = pd.DataFrame(
        _ops("DCGAN epoch", "loop", 2.0, [("aten::mkldnn_convolution", "convolution", 1.2, 10),
                                         ("aten::add_", "elementwise and other", 0.3, 30),
                                         ("outside operators", "outside operators", 0.5, 0)])
        + _ops("Wachter", "search, batch 128", 1.0, [("aten::addmm", "matrix product", 0.1, 5),
                                                     ("aten::mul", "elementwise and other", 0.6, 95),
                                                     ("outside operators", "outside operators", 0.3, 0)]))
    t = report.ops_table(ops)
    shares = t[[c for c in t.columns if c.startswith("% ")]]
    assert shares.sum(axis=1).tolist() == pytest.approx([100.0, 100.0])
    assert t.loc["DCGAN epoch", "largest operator"] == "mkldnn_convolution (60 %)"
    assert t.loc["Wachter", "largest operator"] == "mul (60 %)"
    assert t.loc["Wachter", "operator calls/s"] == pytest.approx(100.0)
    assert t.loc["Wachter", "µs per call"] == pytest.approx(7000.0)
    assert report.dense_share(ops).to_dict() == pytest.approx({"DCGAN epoch": 0.6, "Wachter": 0.1})


def _step(code, method, compact, calls, syncs, once=5.0, where=""):
    return {"code": code, "method": method, "compact": compact, "n_images": 32,
            "calls_per_step": calls, "syncs_per_step": syncs, "host_reads_per_step": 0.0,
            "syncs_per_search": once, "linear": True, "where": where, "commit": code[:3]}


def test_the_steps_table_sets_before_beside_after_per_search_and_names_what_still_syncs():
    """Rows in any order (after first), a search counted only after (no before: NaN, not
    another row's), its kept-queries variant a row of its own, and what still reads back
    each step taken from the after rows alone (a sync fixed since is not named)."""
    steps = pd.DataFrame([
        _step("after", "CEM", True, 284, 0.0, once=18),
        _step("after", "Schut", True, 81, 10.0, where="index[mask]@schut.py:86 x10"),
        _step("after", "Schut", False, 87, 0.0),
        _step("after", "New", True, 12, 1.0, where="nonzero@new.py:3 x1"),
        _step("before", "CEM", True, 160, 4.0, once=17),
        _step("before", "Schut", True, 81, 10.0, where="index[mask]@schut.py:86 x10"),
        _step("before", "Schut", False, 87, 10.0, where="index[mask]@schut.py:86 x10"),
    ])
    t = report.steps_table(steps)
    assert list(t.index) == ["CEM", "Schut", "Schut, finished queries kept", "New"]
    assert list(t.columns) == ["calls/step before", "calls/step after", "syncs/step before",
                               "syncs/step after", "syncs once"]
    assert t.loc["CEM"].tolist() == [160, 284, 4.0, 0.0, 18]
    assert t.loc["Schut, finished queries kept", "syncs/step before"] == 10.0
    assert t.loc["Schut, finished queries kept", "syncs/step after"] == 0.0
    assert t.loc["New", ["calls/step before", "syncs/step before"]].isna().all()
    assert report.step_syncs_left(steps) == {"Schut": "index[mask]@schut.py:86 x10",
                                             "New": "nonzero@new.py:3 x1"}
    gone = report.steps_table(pd.concat([steps, pd.DataFrame([_step("before", "Old", True,
                                                                     9, 2.0, once=3)])]))
    assert gone.loc["Old", "syncs/step after"] != gone.loc["Old", "syncs/step after"]  # NaN
    assert gone.loc["Old", "syncs once"] == 3          # a search counted before only
    only_after = report.steps_table(steps[steps["code"] == "after"])
    assert list(only_after.columns) == ["calls/step after", "syncs/step after", "syncs once"]


def test_the_budget_evidence_is_one_datasets_curve_in_budget_order(tmp_path):
    """The committed curve's rows of one dataset with the chapters' generator (1 epoch),
    ordered by the share of the public optimisation whatever the file's order, and its
    training curves in the same order; no files, no rows."""
    def scores(cands):
        return pd.DataFrame([{"dataset": ds, "pair": "7->2", "candidate": c, "seed": 0,
                              "profile": "standard", "dcgan_epochs": g, "encoder_epochs": g,
                              "metric": m, "value": v}
                             for ds in ("mnist", "fmnist") for g in (1, 5)
                             for c, frac in cands.items()
                             for m, v in (("Budget_fraction", frac), ("Proximity", 0.3))])

    sc = scores({"b32, 6 epochs": 0.12, "b32, 13 epochs": 0.26, "b32, 1 epoch": 0.02})
    sc.to_csv(tmp_path / "c3lt_budget.csv", index=False)
    curve = (sc.drop(columns=["metric", "value"]).drop_duplicates()
             .assign(step=1, prox_l1=0.3, train_validity=1.0))
    curve.to_csv(tmp_path / "c3lt_budget_curves.csv", index=False)
    sc, cu = report.budget_evidence("mnist", tmp_path)
    order = ["b32, 1 epoch", "b32, 6 epochs", "b32, 13 epochs"]
    assert list(dict.fromkeys(sc["candidate"])) == order
    assert list(cu["candidate"]) == order
    assert set(sc["dataset"]) == {"mnist"} and set(sc["dcgan_epochs"]) == {1}
    fig = report.plot_c3lt_budget_curves(cu, sc)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[-1] == "b32, 13 epochs (26 % of the public)"
    import matplotlib.pyplot as plt
    plt.close(fig)
    empty, _ = report.budget_evidence("mnist", tmp_path / "missing")
    assert empty.empty


def _worst(metric: str) -> float:
    """A value that loses on ``metric`` to any real one."""
    from cflib.metrics.spec import get_spec
    try:
        spec = get_spec(metric)
    except (KeyError, ValueError):
        return 1e9
    return 1e9 if spec.key(1e9) > spec.key(-1e9) else -1e9


def test_the_cross_dataset_page_ranks_the_seed_means_its_chapters_show(tmp_path):
    """The cross-dataset page declares both C3LT chapters' sweeps among its reads, so it
    ranks the means over their training seeds, as the two chapters show them, not the
    book's own seed: a second seed in which C3LT is worst on every metric moves C3LT's
    ranks on this page exactly as the seed means say."""
    from cflib.bench.results import read_results
    from cflib.bench.tables.c3lt import C3LT_METRICS
    from cflib.book.chapters import get_chapter
    from cflib.book.report.discussion import readings_for, reads_sweep
    from cflib.book.report.tables import paper_rows, rank_methods, rank_summary
    from cflib.book.spread import seed_means
    from tests.fixtures.sweeps import results_with_seed

    def c3lt_worst(other):
        """a second training seed in which C3LT is worst on every metric"""
        c3lt = other["method"] == "C3LT"
        other.loc[c3lt, "value"] = [_worst(m) for m in other.loc[c3lt, "metric"]]

    res = results_with_seed(tmp_path, 7, c3lt_worst,
                            chapters=("mnist_eval", "fashion_mnist_test"))
    chapters = {"MNIST": "mnist_eval", "Fashion-MNIST": "fashion_mnist_test"}
    for name in chapters.values():
        assert reads_sweep(get_chapter("cross_dataset"), name, "standard")
    cross = readings_for("cross_dataset", res)
    assert cross.n_seeds == 2
    metrics = [s.name for s in C3LT_METRICS]
    own = {t: read_results(res / f"{c}.csv") for t, c in chapters.items()}
    means = {t: seed_means(c, own[t], str(own[t]["profile"].iloc[0]), root=res / "sweep")[0]
             for t, c in chapters.items()}
    expected = rank_summary(rank_methods(means, metrics, paper_rows("c3lt")))
    pd.testing.assert_frame_equal(cross.ranks(), expected)
    alone = rank_summary(rank_methods(own, metrics, paper_rows("c3lt")))
    assert not cross.ranks().equals(alone)      # the second seed is seen


def test_the_grid_frames_an_already_target_query_apart_from_a_failure():
    """Validity as defined: a query the classifier already puts in the target never counts
    as valid, and the grid frames it grey and dashed, not red like a failure."""
    import matplotlib
    import torch

    from cflib.book.report.figures import plot_cf_grid

    class CF:
        def __init__(self):
            self.x = torch.zeros(3, 1, 4, 4)
            self.x_cf = torch.zeros(3, 1, 4, 4)
            self.target = torch.tensor([9, 9, 9])
            self.pred = torch.tensor([9, 4, 4])          # the first is already a 9
            self.success = torch.tensor([False, False, True])

        def __len__(self):
            return 3

    fig = plot_cf_grid({("4->9", "M"): CF()}, "4->9", ["M"], n=3, with_diff=False)
    axes = fig.axes
    colors = [matplotlib.colors.to_hex(axes[3 + c].spines["top"].get_edgecolor())
              for c in range(3)]
    styles = [axes[3 + c].spines["top"].get_linestyle() for c in range(3)]
    assert colors[0] == "#888888" and styles[0] == "--"        # already in the target
    assert colors[1] == "#ff0000" and styles[1] == "-"         # a failure
    assert colors[2] != "#ff0000"                               # a success: no frame
    import matplotlib.pyplot as plt

    plt.close(fig)


#: the smallest text a book figure may carry, in points: 9 pt at the figures' 100 dpi is
#: 12.5 px when a figure is shown at its own size (as at 400 px, where it scrolls sideways
#: rather than shrink: the browser test), above the 11 px a phone reader needs
MIN_FONT_PT = 9


def test_no_figure_text_is_smaller_than_the_minimum():
    """Every font size the figure module sets (its style and each fontsize / labelsize
    literal) is at least MIN_FONT_PT, and a drawn grid's every text is too."""
    import re

    import matplotlib.text
    import torch

    from cflib.book.report import figures

    src = Path(figures.__file__).read_text()
    literal = [float(v) for v in re.findall(r"(?:fontsize|labelsize)=([0-9.]+)", src)]
    styled = [v for k, v in figures.STYLE.items() if "size" in k]
    assert literal and min(literal + styled) >= MIN_FONT_PT, sorted(literal + styled)[:3]

    class CF:
        x = torch.zeros(3, 1, 28, 28)
        x_cf = torch.zeros(3, 1, 28, 28)
        success = torch.tensor([True, False, True])
        meta = {"already_target": torch.tensor([False, False, True])}

        def __len__(self):
            return 3

    fig = figures.plot_cf_grid({("4->9", "M"): CF()}, "4->9", ["M"], n=3, title="4 → 9")
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]
    assert sizes and min(sizes) >= MIN_FONT_PT, min(sizes)


def test_the_readme_stays_short_and_says_what_a_user_needs():
    """The README is read on a repository's front page: at most 8,000 bytes, and it still
    names the two commands, saving and loading, the bench and the re-run check."""
    from cflib.bench.data import PROJECT_ROOT

    text = (PROJECT_ROOT / "README.md").read_text()
    assert len(text.encode()) <= 8000, f"README.md is {len(text.encode())} bytes"
    for needed in ("make book", "make test", ".save(", "Explainer.load(", "cflib bench",
                   "cflib verify --rerun", "CFLIB_DATA", "CFLIB_SHIPPED=off"):
        assert needed in text, needed
    assert not re.search(r"\b[A-Z]+_SENTENCE\b", text), "a placeholder left in the README"


def test_generator_reading_fingerprints_an_evidence_files_generator():
    """The reconstruction proximity of an evidence file on its smallest generator (the
    same for every candidate there): a file measured on other networks reads otherwise."""
    rows = [("a", 1, "Reconstruction_proximity", 0.11), ("b", 1, "Reconstruction_proximity", 0.11),
            ("a", 5, "Reconstruction_proximity", 0.07), ("a", 1, "Proximity", 0.4)]
    ev = pd.DataFrame(rows, columns=["candidate", "dcgan_epochs", "metric", "value"])
    assert report.generator_reading(ev) == pytest.approx(0.11)
    assert report.generator_reading(ev.drop(columns="dcgan_epochs")) == pytest.approx(0.29 / 3)
    assert pd.isna(report.generator_reading(ev[ev["metric"] == "Proximity"]))


def test_same_generator_tells_files_of_two_generators_apart():
    """The page's 'measured on another generator' reads this: 0.1115 against the chapters'
    0.1073 is another generator; equal readings, or a file without one, are not."""
    assert not report.same_generator(0.1115, 0.1073)
    assert report.same_generator(0.1073, 0.10735) and report.same_generator(float("nan"), 0.1)


def test_the_readmes_chapter_times_are_the_executed_notebooks():
    """The README's C3LT compute times are prose; they must be the committed notebooks'
    records, as the results page's table reads them (compute_minutes)."""
    from cflib.bench.data import PROJECT_ROOT

    text = (PROJECT_ROOT / "README.md").read_text()
    m = re.search(r"C3LT chapters compute in ([\d.]+) and ([\d.]+) min", " ".join(text.split()))
    assert m, "the README no longer states the C3LT chapters' compute time"
    assert [f"{v} min" for v in m.groups()] == [readme_tools.compute_minutes("mnist_eval"),
                                                readme_tools.compute_minutes("fashion_mnist_test")]
