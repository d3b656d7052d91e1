"""The chapters through papermill at the smoke profile, the book build, and every page
opened in a real browser (headless Chromium)."""
import functools
import http.server
import math
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
from test_identities import check_c3lt_identities  # tests/ is on sys.path (prepend)

from cflib.bench import data
from cflib.bench.data import PROJECT_ROOT
from cflib.bench.results import COLUMNS, MEAN_OVER_PAIRS
from cflib.bench.tables.c3lt import C3LT_METHODS, C3LT_METRICS, CVE_METRICS
from cflib.book.chapters import CHAPTERS
from cflib.book.runs.digests import check_outputs
from cflib.book.runs.execute import build

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all((data.data_root() / d / "raw" / "t10k-images-idx3-ubyte").exists()
                for d in ("MNIST", "FashionMNIST")),
        reason=f"MNIST / Fashion-MNIST files are not in the data root {data.data_root()} "
               "(set CFLIB_DATA)"),
]
SCREENSHOTS = PROJECT_ROOT / "_build" / "screenshots"
MACHINE_PATH = re.compile(r"(/tmp/|/root/|/home/|/work/)[A-Za-z0-9_.-]+")


@pytest.fixture(scope="module")
def book_dir(tmp_path_factory):
    """A copy of the book's sources, so the tests never overwrite the user's chapters."""
    root = tmp_path_factory.mktemp("book")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    for folder in ("_static", "_ext"):
        shutil.copytree(PROJECT_ROOT / folder, root / folder)
    shutil.copytree(PROJECT_ROOT / "book", root / "book",
                    ignore=shutil.ignore_patterns("chapters"))
    return root


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory, book_dir):
    out = tmp_path_factory.mktemp("results")
    for chapter in CHAPTERS:
        build(chapter, profile="smoke", results_dir=out, out_dir=book_dir / "book" / "chapters")
    return out


@pytest.fixture(scope="module")
def html(results_dir, book_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("html")
    jb = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(book_dir),
          "--path-output", str(out), "--quiet", "-W", "--keep-going"]    # a warning fails
    proc = subprocess.run(jb, capture_output=True, text=True, cwd=book_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-3000:]
    return out / "_build" / "html"


def check_c3lt_results(df: pd.DataFrame, dataset: str, pairs):
    assert list(df.columns) == COLUMNS
    assert set(df["dataset"]) == {dataset} and set(df["profile"]) == {"smoke"}
    # an empty value is a metric undefined on too few images: query dependence needs
    # three pairs of queries, and CEM (paper budget) explains only the profile's first
    # few queries of a pair (2 at smoke); every other value is a number
    from cflib.bench.profiles import get_profile

    few = get_profile("smoke").c3lt.cem_paper_queries < 3
    undefined = {("CEM (paper budget)", "Query_dependence")} if few else set()
    empty = df[df["value"] == ""]
    assert set(zip(empty["method"], empty["metric"])) == undefined, empty
    df = df.assign(value=pd.to_numeric(df["value"].replace("", None)).astype(float))
    acc = df[df["method"] == "Classifier"]
    assert len(acc) == 1 and acc["metric"].item() == "Accuracy"
    assert 0.0 <= acc["value"].item() <= 1.0
    cf = df[(df["method"] != "Classifier") & (df["variant"] == "")]
    methods = set(cf["method"])
    assert {"Original Data", "Adv. Attack"} <= methods
    # what some rows add: the ratio to Original Data's proximity (every row), the
    # mapping's own change (C3LT's rows), the count of queries already in the target
    optional = {"Proximity_vs_real", "Proximity_to_reconstruction", "N_already_target",
                "Budget_fraction"}
    for method in methods:
        for pair in list(pairs) + [MEAN_OVER_PAIRS]:
            got = cf[(cf["method"] == method)
                     & ((cf["pair"] == pair) | (cf["aggregate"] == pair))]
            want = [s.name for s in C3LT_METRICS]
            if method.startswith("CVE"):
                want += [s.name for s in CVE_METRICS]
            extra = set(got["metric"]) - set(want)
            assert set(want) <= set(got["metric"]) and extra <= optional, (method, pair, extra)
            assert "Proximity_vs_real" in set(got["metric"]), (method, pair)
            defined = got[[(method, m) not in undefined for m in got["metric"]]]
            assert all(math.isfinite(v) for v in defined["value"]), (method, pair)
    assert (df["variant"] == "kappa=0").any()            # CEM's sensitivity line
    assert (cf[cf["metric"] == "Seconds_per_CF"]["value"] > 0).all()
    # the book's identities (COUT, the means over pairs, the reference rows, accuracy)
    df = df.copy()
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    check_c3lt_identities(df)
    # the pixel searches move the query: validity above zero on the smoke pairs.  The
    # generator's rows (C3LT, Latent search, ExpGAN) are not held to it: the smoke DCGAN
    # has 32 updates, its images lie as far from every query as noise (proximity ~0.9 on
    # MNIST), and their validity at smoke says nothing of the method
    means = cf[cf["aggregate"] == MEAN_OVER_PAIRS]
    val = means[means["metric"] == "Validity"].set_index("method")["value"].astype(float)
    assert (val[["Adv. Attack", "CEM (targeted)"]] > 0).all(), val
    # ... but Latent search does search: its codes move, so its images leave the
    # reconstruction G(E(x)) they start from
    moved = means[means["metric"] == "Proximity_to_reconstruction"]
    moved = moved.set_index("method")["value"].astype(float)
    assert moved["Latent search"] > 0, moved


def test_mnist_chapter_writes_every_metric(results_dir):
    df = pd.read_csv(results_dir / "mnist_eval.csv", keep_default_na=False)
    check_c3lt_results(df, "mnist", ["4->9", "3->8", "5->6"])


def test_fashion_mnist_chapter_writes_every_metric(results_dir):
    df = pd.read_csv(results_dir / "fashion_mnist_test.csv", keep_default_na=False)
    check_c3lt_results(df, "fmnist", ["0->2", "7->9", "4->6"])


def test_every_method_of_the_table_runs(results_dir):
    df = pd.read_csv(results_dir / "mnist_eval.csv", keep_default_na=False)
    assert set(df["method"]) == {"Classifier", *C3LT_METHODS}


def test_bayesian_chapter_writes_every_metric(results_dir):
    from cflib.bench.profiles import get_profile
    from cflib.bench.tables.bayes import (
        ABLATION_METRICS,
        BAYES_METHODS,
        BAYES_METRICS,
        BAYES_REFERENCES,
        PSCE_VARIANTS,
    )

    df = pd.read_csv(results_dir / "mnist_bayesian.csv", keep_default_na=False)
    assert list(df.columns) == COLUMNS + ["repeat"]
    assert set(df["model"]) == {"mc_dropout", "bnn"}
    acc = df[df["method"] == "Classifier"]
    assert len(acc) == 2 and pd.to_numeric(acc["value"]).between(0, 1).all()
    ablation = df[df["variant"] != ""]
    assert set(ablation["variant"]) == set(PSCE_VARIANTS)
    assert set(ablation["model"]) == {"mc_dropout"} and set(ablation["method"]) == {"PSCE"}
    assert set(ablation["metric"]) == {spec.name for spec in ABLATION_METRICS}
    cf = df[(df["method"] != "Classifier") & (df["variant"] == "")]
    assert set(cf["method"]) == set(BAYES_METHODS) | set(BAYES_REFERENCES)
    repeats = get_profile("smoke").bayes.repeats
    for (s, m), g in cf.groupby(["model", "method"]):
        assert sorted(set(g["metric"])) == sorted(spec.name for spec in BAYES_METRICS), (s, m)
        assert len(g) == len(BAYES_METRICS) * repeats
    for metric in ("Validity", "Validity_fresh", "Robustness_AUC"):
        rows = cf[cf["metric"] == metric]
        v = pd.to_numeric(rows["value"], errors="coerce")
        # every method has a value; a reference row may have none (a blank cell)
        assert v[rows["method"].isin(BAYES_METHODS)].notna().all(), metric
        assert v.dropna().between(0, 1).all(), metric


def test_executed_chapters_record_their_inputs_and_hide_plumbing(results_dir, book_dir):
    import nbformat

    nb = nbformat.read(book_dir / "book" / "chapters" / "mnist_eval.ipynb", as_version=4)
    meta = nb.metadata["cflib"]
    compute, present = meta["inputs"]["compute"], meta["inputs"]["presentation"]
    assert meta["params"]["profile"] == "smoke" and meta["mode"] == "compute"
    # the definitions each part ran (format 3): the compute's explainers, the
    # presentation's figures; no report code is a compute input, and the parameter
    # check is digested as the parameters, not recorded
    assert any(k.startswith("cflib/explainers/cem.py::CEM.") for k in compute["definitions"])
    assert any(k.startswith("cflib/book/report/figures.py::") for k in present["definitions"])
    assert not any(k.startswith("cflib/book/report/") for k in compute["definitions"])
    assert "cflib/book/chapters.py::check" not in compute["definitions"]
    assert any(k.startswith("MNIST/raw/") for k in compute["data"])
    assert "project:results/tuning/c3lt_levers.csv" in present["reads"]
    # the outputs are tied to the notebook: each digest is its file's
    assert {"mnist_eval.csv", "mnist_eval_counterfactuals.pt"} <= set(meta["outputs"])
    assert not check_outputs("mnist_eval", results_dir, book_dir / "book" / "chapters")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all({"remove-input", "remove-cell"} & set(c.metadata.get("tags", [])) for c in code)
    assert not any(o.get("name") == "stderr" for c in code for o in c.get("outputs", []))
    assert "This page was executed" in nb.cells[1].source


def test_a_presentation_edit_re_renders_every_chapter_without_computing(
        results_dir, book_dir, tmp_path, monkeypatch):
    """After an edit of a presentation module (every definition of display.py), each
    chapter whose page ran it is stale for its presentation only, and its re-render (from
    the outputs its full run saved) trains nothing, explains nothing (CFLIB_RENDER makes
    either an error in the kernel) and shows the same page.  A chapter whose compute ran it
    (your_method: the bench writes its page as a compute output) is re-executed; one that
    ran none of it stays fresh."""
    import nbformat

    from cflib.book.runs import digests
    from cflib.book.runs.execute import same_outputs
    from cflib.cache import EVENTS, cache_root

    edited = "cflib/book/report/display.py::"
    folder = book_dir / "book" / "chapters"
    before = {n: nbformat.read(folder / f"{n}.ipynb", as_version=4) for n in CHAPTERS}

    def ran(name, part):
        return any(k.startswith(edited)
                   for k in before[name].metadata["cflib"]["inputs"][part]["definitions"])

    key_digest = digests.key_digest
    monkeypatch.setattr(digests, "key_digest", lambda key, root: key_digest(key, root) + (
        "-edited" if key.startswith(edited) else ""))
    events = cache_root() / EVENTS
    n_events = len(events.read_text().splitlines()) if events.exists() else 0
    from cflib.book.chapters import check, run_params

    run = {"profile": "smoke", "device": "cpu", "train_seed": 0, "data_seed": 0}
    rendered = []
    for name in CHAPTERS:
        st = digests.staleness(name, check(name, run_params(name, run)), folder, results_dir)
        expected = ("compute" if ran(name, "compute") else
                    "presentation" if ran(name, "presentation") else "fresh")
        assert st.kind == expected, (name, st.describe())
        if expected != "presentation":
            continue
        assert st.presentation and all(r.startswith(edited) for r in st.presentation)
        build(name, profile="smoke", results_dir=results_dir, out_dir=folder, mode="render")
        after = nbformat.read(folder / f"{name}.ipynb", as_version=4)
        assert after.metadata["cflib"]["mode"] == "render"
        assert same_outputs(before[name], after), f"{name}: the re-render shows another page"
        rendered.append(name)
    # every table chapter shows its tables through display.py: each was re-rendered
    assert set(TABLE_CHAPTERS) <= set(rendered), rendered
    assert (len(events.read_text().splitlines()) if events.exists() else 0) == n_events


def test_an_edited_output_is_refused(results_dir, book_dir, tmp_path):
    """An edited results file never reaches a page: the re-render and the publishing
    checks refuse it, naming the file."""
    from cflib.book.runs.digests import check_outputs, refuse_unmatched

    folder = book_dir / "book" / "chapters"
    f = results_dir / "mnist_bayesian.csv"
    original = f.read_bytes()
    try:
        f.write_bytes(original.replace(b",IM1,", b",IM1,", 1)[:-40])     # truncated
        assert "mnist_bayesian.csv does not match" in check_outputs("mnist_bayesian",
                                                                   results_dir, folder)[0]
        with pytest.raises(ValueError, match="mnist_bayesian.csv does not match"):
            refuse_unmatched(["mnist_bayesian"], results_dir, folder)
        with pytest.raises(ValueError, match="cannot re-render mnist_bayesian"):
            build("mnist_bayesian", profile="smoke", results_dir=results_dir, out_dir=folder,
                  mode="render")
    finally:
        f.write_bytes(original)
    assert not check_outputs("mnist_bayesian", results_dir, folder)


def test_book_builds(html):
    assert (html / "index.html").exists()
    page = (html / "book" / "chapters" / "mnist_eval.html").read_text()
    for name in ("Adv. Attack", "Original Data", "CEM", "CVE", "ExpGAN", "C3LT", "IM1", "COUT",
                 "Protocol notes", "Query (unchanged)", "Kendall"):
        assert name in page
    fpage = (html / "book" / "chapters" / "fashion_mnist_test.html").read_text()
    assert "Fashion-MNIST" in fpage and "Ankle boot" in fpage
    assert (html / "book" / "chapters" / "cross_dataset.html").exists()
    bpage = (html / "book" / "chapters" / "mnist_bayesian.html").read_text()
    for name in ("PSCE", "BayesCF", "Wachter", "ROAR", "Schut", "Robustness_AUC",
                 "Validity_fresh", "Protocol notes"):
        assert name in bpage
    # every row name that links to its definition finds it on its own page
    for name in ("mnist_eval", "fashion_mnist_test", "mnist_bayesian", "fashion_mnist_quant"):
        text = (html / "book" / "chapters" / f"{name}.html").read_text()
        targets = set(re.findall(r'href="#(row-[a-z0-9-]+)"', text))
        assert targets, f"{name}: no row name links to its definition"
        missing = sorted(t for t in targets if f'id="{t}"' not in text)
        assert not missing, f"{name}: row links without a definition on the page: {missing}"


def test_refresh_prose_only_when_code_is_unchanged(results_dir, book_dir, tmp_path):
    import nbformat

    from cflib.book.runs.assemble import refresh_prose

    executed = book_dir / "book" / "chapters" / "mnist_eval.ipynb"
    shutil.copy(executed, tmp_path / "mnist_eval.ipynb")
    assert refresh_prose("mnist_eval", out_dir=tmp_path).exists()
    nb = nbformat.read(tmp_path / "mnist_eval.ipynb", as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code"
                and "injected-parameters" not in c.metadata.get("tags", []))
    code.source += "\nprint('changed')"
    nbformat.write(nb, tmp_path / "mnist_eval.ipynb")
    with pytest.raises(ValueError, match="was edited after the run"):    # not by a run
        refresh_prose("mnist_eval", out_dir=tmp_path)
    from cflib.book.runs.digests import seal_notebook

    nbformat.write(seal_notebook(nb), tmp_path / "mnist_eval.ipynb")      # an older run's
    with pytest.raises(ValueError, match="re-run"):
        refresh_prose("mnist_eval", out_dir=tmp_path)


# -- the built book in a real browser ---------------------------------------------------------
#: a chapter page -> texts its results table must show (every row of the table)
TABLE_ROWS = {
    "mnist_eval": C3LT_METHODS,
    "fashion_mnist_test": C3LT_METHODS,
    "mnist_bayesian": ["Wachter", "BayesCF", "ROAR", "Schut", "PSCE"],
    "cross_dataset": ["C3LT", "CEM", "Original Data"],
}
#: the table chapters, and what each page must do for a reader: the main table on the
#: first desktop screen (1400 x 1000) and within the first two phone screens, no wider
#: than the phone's column; the page at most MAX_PAGE_PX tall at 1400 px with at most
#: MAX_TABLES tables shown (the rest folded)
TABLE_CHAPTERS = ("mnist_eval", "fashion_mnist_test", "mnist_bayesian", "fashion_mnist_quant")
SCREEN_PX, MAX_PAGE_PX, MAX_TABLES = 1000, 12_000, 12
#: the chapters that open with their answer: the verdict (at most MAX_VERDICT bullets) and
#: the headline table's header above ANSWER_PX[width] (a desk's first screen at 1400 x
#: 1000, a phone's first two at 400 x 850); the ranking page's headline is its heatmaps,
#: so its verdict alone is checked
ANSWER_CHAPTERS = TABLE_CHAPTERS + ("performance",)
VERDICT_CHAPTERS = ANSWER_CHAPTERS + ("cross_dataset",)
ANSWER_PX, MAX_VERDICT = {1400: 1000, 400: 1700}, 5
#: how much smaller than drawn a figure may be shown, per window width
SHRINK = {1400: 1.25}

_PAGE_CHECKS = """
const out = {};
out.images = Array.from(document.images).map(i => [i.src.slice(-60), i.complete && i.naturalWidth > 0]);
// every shown output figure: its own width and the width it is shown at
out.figures = Array.from(document.querySelectorAll('div.cell_output img')).filter(
  i => i.naturalWidth > 0 && i.getBoundingClientRect().width > 0).map(
  i => [i.naturalWidth, Math.round(i.getBoundingClientRect().width)]);
out.figure_edges = Array.from(document.querySelectorAll('div.cell_output img')).filter(
  i => i.naturalWidth > 0 && i.getBoundingClientRect().width > 0).map(
  i => Math.round(i.getBoundingClientRect().right));
out.links = Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'));
out.stderr = document.querySelectorAll('.output.stderr, .stderr').length;
out.shown_code = document.querySelectorAll('div.cell div.cell_input').length;
// Jupyter Book's toggle bars ("Show code cell source"): none on a chapter
out.code_bars = Array.from(document.querySelectorAll('summary, button, .toggle-button')).filter(
  e => /show code cell/i.test(e.textContent)).length;
out.text = document.body.innerText;
const main = document.querySelector('main, article, .bd-article') || document.body;
const article = document.querySelector('article, .bd-article') || main;
const right = main.getBoundingClientRect().right;
const column = article.getBoundingClientRect().width;
// shown now: laid out, and not folded in a closed <details>
const visible = t => t.getBoundingClientRect().width > 0 && t.offsetParent !== null
  && !t.closest('details:not([open])');
const tables = Array.from(document.querySelectorAll('div.cell_output table, article table')).filter(visible);
out.cut_tables = tables.filter(t => {
  let el = t.parentElement, scrolls = false;
  while (el && el !== document.body) {
    const s = getComputedStyle(el);
    if (['auto', 'scroll'].includes(s.overflowX)) { scrolls = true; break; }
    el = el.parentElement;
  }
  return !scrolls && t.getBoundingClientRect().right > right + 2;
}).length;
out.wide_tables = tables.filter(t => t.scrollWidth > column + 2).map(
  t => [Math.round(t.scrollWidth), Math.round(column), t.innerText.slice(0, 40)]);
// a DataFrame shown with its raw 0..N index
out.raw_index = tables.filter(t => {
  const heads = Array.from(t.querySelectorAll('tbody tr')).map(r => r.firstElementChild);
  return heads.length > 1 && heads.every((h, k) => h && h.tagName === 'TH' && h.innerText.trim() === String(k));
}).length;
// a column whose every body cell is a dash or empty
out.dash_columns = tables.filter(t => {
  const rows = Array.from(t.querySelectorAll('tbody tr'));
  if (rows.length < 2) return false;
  const n = Math.max(...rows.map(r => r.children.length));
  for (let c = 1; c < n; c++) {
    if (rows.every(r => { const x = r.children[c]; return !x || ['–', '-', ''].includes(x.innerText.trim()); })) return true;
  }
  return false;
}).length;
out.tables = tables.map(t => t.innerText);
// the chapter's main table: the first shown table whose header starts with "method"
const main_table = tables.find(t => {
  const h = t.querySelector('thead th');
  return h && h.innerText.trim().toLowerCase().startsWith('method');
});
out.main_table = main_table ? {top: Math.round(main_table.getBoundingClientRect().top + window.scrollY),
                                width: Math.round(main_table.scrollWidth)} : null;
// the chapter's answer: the verdict (the list after "What this shows") and the headline
// table (the first shown table)
const lead = Array.from(article.querySelectorAll('p')).find(
  p => /^What (this|the measurements) show/.test(p.innerText.trim()));
let verdict = lead ? lead.nextElementSibling : null;
while (verdict && verdict.tagName !== 'UL') verdict = verdict.nextElementSibling;
out.verdict = verdict ? {bottom: Math.round(verdict.getBoundingClientRect().bottom + window.scrollY),
                         items: verdict.children.length} : null;
const head = tables.length ? (tables[0].querySelector('thead') || tables[0]) : null;
out.headline = head ? Math.round(head.getBoundingClientRect().top + window.scrollY) : null;
out.column = Math.round(column);
out.height = document.body.scrollHeight;
out.overflow = document.documentElement.scrollWidth - window.innerWidth;
// folded tables (in a closed <details>): formatted as page tables, no Python literals
out.raw_folded = Array.from(document.querySelectorAll('details:not([open]) table')).filter(
  t => Array.from(t.querySelectorAll('td, th')).some(
    c => ['NaN', 'nan', 'None', 'True', 'False', '<NA>'].includes(c.textContent.trim()))).length;
// the text outside code and commands (a command block may name any chapter)
const prose = document.body.cloneNode(true);
prose.querySelectorAll('pre, code, script, style').forEach(e => e.remove());
out.prose = prose.textContent;
return out;
"""
#: texts no page may show: template leaks
LEAKS = ("rows written", "see the README", "<this chapter>", "{{", "}}", "<!-- discussion",
         "<!-- summary")


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not (chromium and driver_bin):
        pytest.fail("headless Chromium is needed for the browser test: apt-get install "
                    "chromium chromium-driver (`make test` installs them)")
    import os

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1366,1000",
                 "--disable-dev-shm-usage"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(html):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_every_page_in_a_real_browser(html, site, browser):
    """Every page at 1400 px and at 400 px: no console error, every image decoded, shown at
    (nearly) its own size at 1400 px and its whole width in view at 400 px (a figure fits a
    phone's column; a tap opens it at its own size), every internal link resolved and every external
    one well-formed, no stderr, no uncollapsed code, no table cut off, and at 1400 px no
    table wider than the text column, no raw DataFrame index, no all-dash column, no
    template leak, no folded table with Python literals; on each table chapter the main
    table on the first screen at 1400 px and within two at 400 px (no wider than the
    phone's column), the page at most 12,000 px tall with at most 12 tables shown;
    screenshots of both widths are kept under ``_build/screenshots/``."""
    from urllib.parse import urljoin, urlparse

    from selenium.common.exceptions import JavascriptException
    from selenium.webdriver.support.ui import WebDriverWait

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pages = sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                   if p.name not in ("genindex.html", "search.html", "py-modindex.html")
                   and p.relative_to(html).parts[0] != "_static")     # theme templates
    assert "index.html" in pages and len(pages) >= len(CHAPTERS) + 1
    problems = []
    for width in (1400, 400):
        browser.set_window_size(width, 1000)
        for page in pages:
            url = f"{site}/{page}"
            browser.get(url)
            # a redirect page (index.html) navigates on after loading: wait for its target
            WebDriverWait(browser, 30, ignored_exceptions=(JavascriptException,)).until(
                lambda b: b.execute_script(
                    "return document.readyState === 'complete' && document.body !== null"
                    " && !document.querySelector('meta[http-equiv=\"refresh\" i]')"))
            res = browser.execute_script(_PAGE_CHECKS)
            errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            tag = f"{page} @{width}px"
            if errors:
                problems.append(f"{tag}: console errors {errors[:3]}")
            broken = [src for src, ok in res["images"] if not ok]
            if broken:
                problems.append(f"{tag}: images not decoded {broken[:3]}")
            if res["cut_tables"]:
                problems.append(f"{tag}: {res['cut_tables']} table(s) cut off at the right edge")
            if res["raw_folded"]:
                problems.append(f"{tag}: {res['raw_folded']} folded table(s) with NaN / None / "
                                "True text")
            # a figure shown smaller than drawn shrinks its text: at 1400 px by at most a
            # quarter; on a phone it fits the column, its whole width in view (a tap opens
            # it at its own size)
            if width == 1400:
                shrunk = [f for f in res["figures"] if f[0] > SHRINK[width] * f[1]]
                if shrunk:
                    problems.append(f"{tag}: figure(s) drawn wider than shown, text too small "
                                    f"(natural, shown px) {shrunk[:3]}")
            else:
                cut = [f for f in res["figure_edges"] if f > width + 1]
                if cut:
                    problems.append(f"{tag}: figure(s) reaching past the screen's right edge "
                                    f"(at x = {cut[:3]})")
            if res["overflow"] > 2:
                problems.append(f"{tag}: the page is {res['overflow']} px wider than the "
                                "window (scrolls sideways)")
            if Path(page).stem in VERDICT_CHAPTERS:
                verdict, limit = res["verdict"], ANSWER_PX[width]
                if verdict is None:
                    problems.append(f"{tag}: no verdict (a list after 'What this shows')")
                else:
                    if verdict["bottom"] >= limit:
                        problems.append(f"{tag}: the verdict ends at y = {verdict['bottom']}, "
                                        f"not above {limit}")
                    if verdict["items"] > MAX_VERDICT:
                        problems.append(f"{tag}: the verdict has {verdict['items']} bullets "
                                        f"(at most {MAX_VERDICT})")
                if Path(page).stem in ANSWER_CHAPTERS and (res["headline"] is None
                                                           or res["headline"] >= limit):
                    problems.append(f"{tag}: the headline table's header at y = "
                                    f"{res['headline']}, not above {limit}")
            if Path(page).stem in TABLE_CHAPTERS:
                main, screens = res["main_table"], 1 if width == 1400 else 2
                if main is None:
                    problems.append(f"{tag}: no shown table whose header starts with 'method'")
                else:
                    if main["top"] >= screens * SCREEN_PX:
                        problems.append(f"{tag}: the main table starts at y = {main['top']}, "
                                        f"below the first {screens} screen(s)")
                    if width == 400 and main["width"] > res["column"] + 2:
                        problems.append(f"{tag}: the main table is {main['width']} px wide in "
                                        f"a {res['column']} px column")
                if width == 1400 and res["height"] > MAX_PAGE_PX:
                    problems.append(f"{tag}: the page is {res['height']} px tall "
                                    f"(at most {MAX_PAGE_PX})")
                if width == 1400 and len(res["tables"]) > MAX_TABLES:
                    problems.append(f"{tag}: {len(res['tables'])} tables shown (at most "
                                    f"{MAX_TABLES}; fold the rest)")
            if width == 1400:
                here = browser.current_url                  # index.html redirects to the intro
                for href in res["links"]:
                    target = urlparse(urljoin(here, href))
                    if target.scheme in ("http", "https") and target.netloc != urlparse(site).netloc:
                        if not re.fullmatch(r"[A-Za-z0-9.-]+\.[A-Za-z]{2,}", target.netloc):
                            problems.append(f"{tag}: malformed external link {href}")
                        continue
                    if target.scheme in ("mailto", "javascript"):
                        continue
                    if target.scheme not in ("http", "https"):
                        problems.append(f"{tag}: malformed link {href}")
                        continue
                    path = html / target.path.lstrip("/")
                    if target.path.endswith("/"):
                        path = path / "index.html"
                    if not path.exists():
                        problems.append(f"{tag}: broken internal link {href}")
                if res["stderr"]:
                    problems.append(f"{tag}: {res['stderr']} stderr block(s) shown")
                if res["shown_code"]:
                    problems.append(f"{tag}: {res['shown_code']} code cell(s) shown")
                if res["code_bars"]:
                    problems.append(f"{tag}: {res['code_bars']} 'Show code cell' bar(s)")
                if res["wide_tables"]:
                    problems.append(f"{tag}: table(s) wider than the column {res['wide_tables'][:3]}")
                if res["raw_index"]:
                    problems.append(f"{tag}: {res['raw_index']} table(s) with a raw 0..N index")
                if res["dash_columns"]:
                    problems.append(f"{tag}: {res['dash_columns']} table(s) with an all-dash column")
                hit = MACHINE_PATH.search(res["text"])
                if hit:
                    problems.append(f"{tag}: machine path {hit.group(0)!r} in the text")
                leaks = [w for w in LEAKS if w in res["text"]]
                chapter = Path(page).stem
                # a chapter page names only itself; another page names a chapter's file
                # only in its commands
                # (the own-method page compares with mnist_eval's results and names their
                # file: that is its content, not a leak)
                text = res["text"] if chapter in CHAPTERS else res["prose"]
                if chapter == "your_method":
                    text = re.sub(r"mnist_eval\.csv|the mnist_eval chapter.s results", "", text)
                if "mnist_eval" in text and chapter != "mnist_eval":
                    leaks.append("mnist_eval")
                if leaks:
                    problems.append(f"{tag}: template leak(s) {leaks}")
                if chapter in TABLE_ROWS:
                    tables = "\n".join(res["tables"])
                    missing = [r for r in TABLE_ROWS[chapter] if r not in tables]
                    if missing:
                        problems.append(f"{tag}: results table lacks rows {missing}")
            height = browser.execute_script("return document.body.scrollHeight")
            browser.set_window_size(width, min(max(int(height), 800), 16000))
            name = page.replace("/", "_")[:-5]
            browser.save_screenshot(str(SCREENSHOTS / f"{name}-{width}.png"))
            browser.set_window_size(width, 1000)
    assert not problems, "\n".join(problems)
    assert len(list(SCREENSHOTS.glob("*.png"))) >= 2 * len(pages)
