"""Execute the book's chapters once, keep what they made, re-execute only what changed.

    python -m cflib.build_chapter mnist_eval --profile standard --device cpu --seed 0 \\
        [-p n_images 100] [-p pairs '["4->9"]'] [--force]
    python -m cflib.build_chapter all --stale-only      # what `make book` runs

A chapter's jupytext source is converted to a notebook and executed by papermill in a
temporary folder.  Only a run that succeeds replaces anything: its executed notebook,
stripped of stderr noise, with its code collapsed and a line saying which commit,
profile and seed produced it, and its results files are moved into place atomically.
A failed run leaves the previous notebook, results and README byte-identical (the
failed notebook is kept under ``_build/failed/`` to read).

Where the output goes:

* the book's run (profile ``standard``, seed 0, device ``cpu``, no other parameter):
  ``book/chapters/<chapter>.ipynb`` and ``results/<chapter>*.csv``, committed;
* any other run: ``_build/runs/<profile>-seed<seed>[-<params>]/``, one folder per run
  of the book, beside the committed files, never over them.

The executed notebook records in its metadata (``cflib``) the sha256 of every input:
the source, its discussion page, every ``cflib`` module the kernel imported, the data
files it read (``SHA256SUMS`` of the data root), the results of the chapters it reads
and its parameters.  A chapter is *stale* when one of them changed; ``--stale-only``
(``make book``) re-executes stale chapters only, so a fresh clone renders the
committed chapters without training anything.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cflib.chapters import CHAPTERS, Chapter, check, get_chapter
from cflib.data import PROJECT_ROOT, data_root

DISCUSSION = PROJECT_ROOT / "book" / "discussion"
CHAPTER_DIR = PROJECT_ROOT / "book" / "chapters"
RESULTS_DIR = PROJECT_ROOT / "results"
RUNS_DIR = PROJECT_ROOT / "_build" / "runs"
FAILED_DIR = PROJECT_ROOT / "_build" / "failed"
MARKER = "<!-- discussion -->"
#: the book's own run; anything else writes beside it
BOOK_RUN = {"profile": "standard", "seed": 0, "device": "cpu"}
log = logging.getLogger("cflib.build")

#: the last cell of every run: which cflib modules and data files the kernel used
_PROBE = ('import json as _j, sys as _s\n'
          'from cflib.data import files_read as _f\n'
          'print("CFLIB_INPUTS" + _j.dumps({"modules": sorted(m.__file__ for n, m in '
          'list(_s.modules.items()) if n.split(".")[0] == "cflib" and getattr(m, "__file__", None)), '
          '"data": _f()}))')


# -- the notebook ------------------------------------------------------------------------------
def _personalise(nb, chapter: Chapter) -> None:
    """Give a chapter made from a shared template its own title and discussion."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("# "):
            lines = cell.source.lstrip().split("\n")
            cell.source = "\n".join([f"# {chapter.title}"] + lines[1:])
            break
    page = DISCUSSION / f"{chapter.name}.md"
    text = page.read_text() if page.exists() else ""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and MARKER in cell.source:
            cell.source = cell.source.replace(MARKER, text)


def to_notebook(chapter: Chapter):
    """The chapter's source as a notebook (title and discussion filled in)."""
    import jupytext

    nb = jupytext.read(chapter.path)
    _personalise(nb, chapter)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def _rel(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


# -- inputs and staleness ------------------------------------------------------------------------
def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _code_sha(path: Path) -> str:
    """sha256 of a Python module's code: its syntax tree without docstrings, so that an
    edit of comments, docstrings or layout does not make the chapters that run it stale."""
    import ast

    try:
        tree = ast.parse(Path(path).read_text())
    except SyntaxError:
        return _sha(path)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def _source_digests(chapter: Chapter) -> dict[str, str]:
    """The chapter's code cells and its prose (markdown cells and discussion page), apart:
    a prose-only edit is copied into the page without re-executing (``refresh_prose``)."""
    nb = to_notebook(chapter)
    code = "\n# cell\n".join(c.source for c in nb.cells if c.cell_type == "code")
    prose = "\n# cell\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return {"code": hashlib.sha256(code.encode()).hexdigest()[:16],
            "prose": hashlib.sha256(prose.encode()).hexdigest()[:16]}


def _data_digest(files: list[str]) -> dict[str, str]:
    """sha256 of the data files a run read, from the data root's SHA256SUMS when it has
    one (no re-hashing of 100 MB), else of the files themselves."""
    root = data_root()
    sums = {}
    if (root / "SHA256SUMS").exists():
        for line in (root / "SHA256SUMS").read_text().splitlines():
            if line.strip():
                digest, name = line.split(maxsplit=1)
                sums[name.strip().lstrip("*")] = digest[:16]
    out = {}
    for f in files:
        out[f] = sums.get(f) or (_sha(root / f) if (root / f).exists() else "missing")
    return out


def input_digests(chapter: Chapter, params: dict, modules: list[str],
                  data_files: list[str], results_root: Path = RESULTS_DIR) -> dict:
    """Every input of a chapter run, as ``{kind: {name: sha}}``."""
    src = _source_digests(chapter)
    mods = {}
    for m in modules:
        rel = _rel(Path(m))
        mods[rel] = _code_sha(PROJECT_ROOT / rel) if (PROJECT_ROOT / rel).exists() else "missing"
    reads = {}
    for pattern in chapter.read_patterns(params["profile"]):
        for f in sorted(Path(results_root).glob(pattern)):
            reads[str(f.relative_to(results_root))] = _sha(f)
    return {"source": src, "modules": mods, "data": _data_digest(data_files), "reads": reads,
            "params": hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]}


def stale_reasons(chapter: str | Chapter, params: dict | None = None,
                  prose: bool = False) -> list[str]:
    """Why the committed notebook of ``chapter`` must be re-executed (empty: it is fresh).

    A change of the chapter's prose alone is not a reason to execute (it is copied in
    by :func:`refresh_prose`); ``prose=True`` lists it too.
    """
    import nbformat

    ch = chapter if isinstance(chapter, Chapter) else get_chapter(chapter)
    path = CHAPTER_DIR / f"{ch.name}.ipynb"
    if not path.exists():
        return [f"{_rel(path)} does not exist"]
    meta = nbformat.read(path, as_version=4).metadata.get("cflib")
    if not meta or "inputs" not in meta:
        return [f"{_rel(path)} has no record of its inputs"]
    params = params or check(ch, {k: v for k, v in BOOK_RUN.items()})
    old = meta["inputs"]
    now = input_digests(ch, params, [PROJECT_ROOT / m for m in old.get("modules", {})],
                        list(old.get("data", {})))
    reasons = []
    if old.get("source", {}).get("code") != now["source"]["code"]:
        reasons.append(f"the code of {_rel(ch.path)} changed")
    if prose and old.get("source", {}).get("prose") != now["source"]["prose"]:
        reasons.append(f"the prose of {ch.name} changed")
    for kind in ("modules", "reads"):
        for name in sorted(set(old.get(kind, {})) | set(now[kind])):
            if old.get(kind, {}).get(name) != now[kind].get(name):
                reasons.append(f"{name} changed")
    data_now = {k: v for k, v in now["data"].items() if v != "missing"}
    for name, digest in data_now.items():   # absent data (a reader's clone) is no change
        if old["data"].get(name) != digest:
            reasons.append(f"data file {name} changed")
    if old.get("params") != now["params"]:
        reasons.append("parameters changed")
    return reasons


# -- running ---------------------------------------------------------------------------------
def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _is_book_run(params: dict, chapter: Chapter) -> bool:
    defaults = check(chapter, dict(BOOK_RUN))
    return all(params.get(k) == v for k, v in defaults.items() if k != "results_dir")


def output_dirs(chapter: Chapter, params: dict) -> tuple[Path, Path]:
    """(folder of the executed notebook, folder of the results) for a run: the book's
    own for the book's run, else one folder per (profile, seed, other parameters) that
    every chapter of such a run shares."""
    if _is_book_run(params, chapter):
        return CHAPTER_DIR, RESULTS_DIR
    defaults = check(chapter, dict(BOOK_RUN))
    extra = {k: v for k, v in params.items()
             if k not in ("profile", "seed", "results_dir", "results_name", "dataset")
             and defaults.get(k) != v}
    tag = f"{params['profile']}-seed{params['seed']}"
    if extra:
        tag += "-" + hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8]
    d = RUNS_DIR / tag
    return d, d


def _clean(nb, chapter: Chapter, params: dict, provenance: str) -> dict:
    """Strip what a reader should not see; return the inputs the probe cell reported."""
    reported = {"modules": [], "data": []}
    keep = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code":
            outs = []
            for o in cell.get("outputs", []):
                text = o.get("text", "")
                if o.get("output_type") == "stream" and "CFLIB_INPUTS" in text:
                    reported = json.loads(text.split("CFLIB_INPUTS", 1)[1].strip())
                    continue
                if o.get("output_type") == "stream" and o.get("name") == "stderr":
                    continue                       # warnings, progress, logging: the console's
                outs.append(o)
            cell.outputs = outs
            if "cflib-probe" in tags:
                continue
            if "injected-parameters" in tags or "parameters" in tags:
                cell.metadata["tags"] = sorted(set(tags) | {"remove-cell"})
            else:
                cell.metadata["tags"] = sorted(set(tags) | {"hide-input"})
        keep.append(cell)
    nb.cells = keep
    # the provenance line right under the title
    import nbformat

    line = nbformat.v4.new_markdown_cell(provenance)
    line.metadata["tags"] = ["cflib-provenance"]
    at = next((i + 1 for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), 0)
    nb.cells.insert(at, line)
    return reported


def scrub_paths(nb, run_results: str, results: str) -> None:
    """Keep this machine's paths out of a committed notebook: papermill's absolute input
    and output paths go, and the run's scratch results folder (injected as
    ``results_dir``) reads as the folder the results were installed in."""
    pm_meta = nb.metadata.get("papermill", {})
    pm_meta.pop("input_path", None)
    pm_meta.pop("output_path", None)
    if pm_meta.get("parameters", {}).get("results_dir") == run_results:
        pm_meta["parameters"]["results_dir"] = results
    for cell in nb.cells:
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.source = cell.source.replace(f'"{run_results}"', f'"{results}"')


def build(chapter: str, profile: str = "standard", device: str = "cpu", seed: int = 0,
          extra: dict | None = None, out_dir: Path | None = None,
          results_dir: Path | None = None) -> Path:
    """Execute one chapter; returns the path of its executed notebook.

    Parameters are validated before any kernel starts.  ``out_dir`` / ``results_dir``
    override where the notebook and the results go (tests); by default the book's run
    replaces the committed files and any other run writes under ``_build/runs/``.
    """
    import nbformat
    import papermill as pm

    ch = get_chapter(chapter)
    params = check(ch, {"profile": profile, "device": device, "seed": int(seed),
                        **(extra or {})})
    # papermill cannot read 'x: list | None = ...' annotations and warns about every such
    # parameter; cflib.chapters validated them above (and the notebook does again)
    logging.getLogger("papermill").setLevel(logging.ERROR)
    nb_dir, res_dir = output_dirs(ch, params)
    nb_dir, res_dir = Path(out_dir or nb_dir), Path(results_dir or res_dir)
    for d in (nb_dir, res_dir):
        d.mkdir(parents=True, exist_ok=True)
        if not os.access(d, os.W_OK):
            raise PermissionError(f"cannot write into {d}; choose another folder")
    work = Path(tempfile.mkdtemp(prefix=f"{ch.name}-", dir=_scratch()))
    tmp_results = work / "results"
    tmp_results.mkdir()
    copied = set()                          # what the chapter reads, copied into its folder
    for pattern in ch.read_patterns(params["profile"]):
        # from the run's own results; what no chapter makes (the benchmark's
        # performance.csv) from the book's results when the run's folder lacks it
        src_dir = res_dir
        if pattern in ch.external and not any(res_dir.glob(pattern)):
            src_dir = RESULTS_DIR
        for f in src_dir.glob(pattern):
            rel = f.relative_to(src_dir)
            (tmp_results / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, tmp_results / rel)
            copied.add(rel)
    nb = to_notebook(ch)
    probe = nbformat.v4.new_code_cell(_PROBE)
    probe.metadata["tags"] = ["cflib-probe"]
    nb.cells.append(probe)
    src, executed = work / f"{ch.name}.ipynb", work / f"{ch.name}.out.ipynb"
    nbformat.write(nb, src)
    run_params = {**params, "results_dir": _rel(tmp_results)}
    # CPU training depends on the thread count: the kernel gets CFLIB_THREADS (default 1,
    # the book's runs) so that a re-run reproduces the committed numbers
    threads = os.environ.get("CFLIB_THREADS", "1")
    env = {"CFLIB_LOG": "INFO", "CFLIB_PROGRESS": "0", "OMP_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads}
    env_before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    t0 = time.perf_counter()
    print(f"[{ch.name}] executing at profile {params['profile']}, seed {params['seed']} "
          f"(kernel output follows)", flush=True)
    try:
        pm.execute_notebook(str(src), str(executed), parameters=run_params,
                            kernel_name="python3", cwd=str(PROJECT_ROOT), progress_bar=False,
                            log_output=False, stdout_file=sys.stdout, stderr_file=sys.stderr)
    except Exception as err:
        FAILED_DIR.mkdir(parents=True, exist_ok=True)
        if executed.exists():
            shutil.copy2(executed, FAILED_DIR / f"{ch.name}.ipynb")
        shutil.rmtree(work, ignore_errors=True)
        raise RuntimeError(f"chapter {ch.name} failed after {time.perf_counter() - t0:.0f} s; "
                           f"nothing was replaced (the failed notebook: "
                           f"{_rel(FAILED_DIR / (ch.name + '.ipynb'))})\n{err}") from None
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    seconds = time.perf_counter() - t0
    out_nb = nbformat.read(executed, as_version=4)
    when = datetime.date.today().isoformat()
    provenance = (f"*This page was executed on {when} from commit `{_commit()}` of the "
                  f"project, profile `{params['profile']}`, seed {params['seed']}, device "
                  f"`{params['device']}` ({threads} CPU thread(s)), in "
                  f"{seconds / 60:.1f} minutes.*")
    reported = _clean(out_nb, ch, params, provenance)
    scrub_paths(out_nb, run_params["results_dir"], _rel(res_dir))
    inputs = input_digests(ch, {k: v for k, v in params.items()},
                           [PROJECT_ROOT / m if not Path(m).is_absolute() else m
                            for m in reported.get("modules", [])], reported.get("data", []),
                           res_dir)
    out_nb.metadata["cflib"] = {"chapter": ch.name, "commit": _commit(), "date": when,
                                "seconds": round(seconds), "threads": int(threads),
                                "params": params, "inputs": inputs}
    # success: move results, then the notebook, each atomically
    for f in sorted(tmp_results.glob("*.csv")):
        if f.relative_to(tmp_results) not in copied:
            _install(f, res_dir / f.name)
    final = nb_dir / f"{ch.name}.ipynb"
    tmp_nb = work / "final.ipynb"
    nbformat.write(out_nb, tmp_nb)
    _install(tmp_nb, final)
    shutil.rmtree(work, ignore_errors=True)
    print(f"[{ch.name}] done in {seconds:.0f} s -> {_rel(final)}", flush=True)
    return final


def _scratch() -> Path:
    d = PROJECT_ROOT / "_build" / "tmp"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _install(src: Path, dest: Path) -> Path:
    """Put ``src`` at ``dest`` atomically: copied beside ``dest`` (same file system),
    then renamed over it, so a reader never sees half a file."""
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.copy2(src, tmp)
    os.replace(tmp, dest)
    return dest


def build_book(profile: str = "standard", device: str = "cpu", seed: int = 0,
               rerun: bool = False) -> Path:
    """Execute the chapters a book needs, then build its HTML; returns index.html.

    The book's run (``standard``, seed 0, ``cpu``) executes only stale chapters (all
    with ``rerun``) and builds the project's own book from the committed notebooks.
    Any other run executes every chapter into ``_build/runs/`` and builds a separate
    book from those notebooks in ``_build/book-<profile>-seed<seed>/``, leaving the
    committed book alone.
    """
    t0 = time.perf_counter()
    book_run = {"profile": profile, "seed": int(seed), "device": device} == BOOK_RUN
    notebooks = {}
    for name in CHAPTERS:
        params = check(name, {"profile": profile, "device": device, "seed": int(seed)})
        if book_run and not rerun:
            reasons = stale_reasons(name, params)
            if not reasons:
                if stale_reasons(name, params, prose=True):
                    refresh_prose(name)
                    print(f"[{name}] prose refreshed (code and inputs unchanged): not executed",
                          flush=True)
                else:
                    print(f"[{name}] up to date (inputs unchanged): not executed", flush=True)
                notebooks[name] = CHAPTER_DIR / f"{name}.ipynb"
                continue
            print(f"[{name}] stale: " + "; ".join(reasons[:5])
                  + (f" (+{len(reasons) - 5} more)" if len(reasons) > 5 else ""), flush=True)
        notebooks[name] = build(name, profile, device, seed)
    root = PROJECT_ROOT
    if not book_run:
        root = PROJECT_ROOT / "_build" / f"book-{profile}-seed{seed}"
        # the run's notebooks sit in one runs folder: assemble a book around them
        shutil.rmtree(root, ignore_errors=True)
        (root / "book").mkdir(parents=True)
        for f in ("_config.yml", "_toc.yml"):
            shutil.copy2(PROJECT_ROOT / f, root / f)
        shutil.copytree(PROJECT_ROOT / "book", root / "book", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("chapters"))
        for folder in ("_static", "_ext"):
            if (PROJECT_ROOT / folder).exists():
                shutil.copytree(PROJECT_ROOT / folder, root / folder)
        (root / "book" / "chapters").mkdir()
        for name, nb in notebooks.items():
            shutil.copy2(nb, root / "book" / "chapters" / f"{name}.ipynb")
    # jupyter-book 1 has no ``python -m`` entry: its console script beside this Python
    script = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(script) if script.exists() else "jupyter-book", "build", str(root), "--quiet"]
    proc = subprocess.run(cmd, cwd=root)
    if proc.returncode:
        raise RuntimeError(f"jupyter-book build failed in {_rel(root)} (exit {proc.returncode})")
    index = root / "_build" / "html" / "index.html"
    print(f"book built in {time.perf_counter() - t0:.0f} s: {_rel(index)}", flush=True)
    return index


def refresh_prose(chapter: str, out_dir: Path | None = None) -> Path:
    """Copy the source's markdown cells into an executed chapter, without re-running it.

    Only for prose edits: the code cells of the source and of the executed notebook
    must be identical, else a ValueError asks for a re-execution.
    """
    import nbformat

    ch = get_chapter(chapter)
    src = to_notebook(ch)
    out = Path(out_dir or CHAPTER_DIR) / f"{ch.name}.ipynb"
    done = nbformat.read(out, as_version=4)
    hidden = ("injected-parameters", "cflib-provenance")
    done_cells = [c for c in done.cells
                  if not set(hidden) & set(c.get("metadata", {}).get("tags", []))]
    src_code = [c.source for c in src.cells if c.cell_type == "code"]
    done_code = [c.source for c in done_cells if c.cell_type == "code"]
    if src_code != done_code or len(src.cells) != len(done_cells):
        raise ValueError(f"{chapter}: the code changed since it was executed; re-run it "
                         f"(make chapter NB={chapter})")
    for new, old in zip(src.cells, done_cells):
        if new.cell_type == "markdown":
            old.source = new.source
    meta = done.metadata.get("cflib")
    if meta and "inputs" in meta:        # the prose is an input: record its new digest
        meta["inputs"]["source"] = _source_digests(ch)
    tmp = out.with_name(f".{out.name}.tmp")
    nbformat.write(done, tmp)
    os.replace(tmp, out)
    return out


TIMING_START, TIMING_END = "<!-- timing:chapters:start -->", "<!-- timing:chapters:end -->"


def timing_markdown(nb_dir: Path = CHAPTER_DIR) -> str:
    """How long each committed chapter took to execute, read from its notebook's metadata
    (the run that produced it: its profile, threads and date; networks already in the
    weight cache were loaded, not trained)."""
    import nbformat

    rows = ["| chapter | profile | executed in | CPU threads | date |", "|---|---|---|---|---|"]
    for name in CHAPTERS:
        path = nb_dir / f"{name}.ipynb"
        if not path.exists():
            continue
        meta = nbformat.read(path, as_version=4).metadata.get("cflib", {})
        if "seconds" not in meta:
            continue
        rows.append(f"| `{name}` | `{meta['params']['profile']}` | "
                    f"{meta['seconds'] / 60:.1f} min | {meta['threads']} | {meta['date']} |")
    return "\n".join(rows)


def update_timings(readme: Path = PROJECT_ROOT / "README.md", nb_dir: Path = CHAPTER_DIR) -> None:
    """Rewrite the README's block between the timing markers from the chapters in
    ``nb_dir`` (the committed ones by default)."""
    text = Path(readme).read_text()
    if TIMING_START not in text or TIMING_END not in text:
        raise ValueError(f"{readme} has no {TIMING_START} ... {TIMING_END} block")
    head, rest = text.split(TIMING_START, 1)
    _, tail = rest.split(TIMING_END, 1)
    Path(readme).write_text(f"{head}{TIMING_START}\n{timing_markdown(nb_dir)}\n{TIMING_END}{tail}")


def parse_extra(pairs) -> dict:
    """``-p NAME VALUE`` pairs; VALUE is read as JSON when it parses (chapters.check
    converts text further where the parameter's type asks)."""
    extra = {}
    for k, v in pairs:
        try:
            extra[k] = json.loads(v)
        except json.JSONDecodeError:
            extra[k] = v
    return extra


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("chapter", choices=list(CHAPTERS) + ["all"])
    ap.add_argument("--profile", default="standard")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stale-only", action="store_true",
                    help="execute only chapters whose inputs changed (make book)")
    ap.add_argument("--refresh-prose", action="store_true",
                    help="only copy edited markdown into the executed chapter (no execution)")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="a parameter of the chapter's parameters cell")
    args = ap.parse_args(argv)
    extra = parse_extra(args.p)
    names = list(CHAPTERS) if args.chapter == "all" else [args.chapter]
    for name in names:
        if args.refresh_prose:
            print(f"{name}: prose refreshed in {_rel(refresh_prose(name))}")
            continue
        params = check(name, {"profile": args.profile, "device": args.device,
                              "seed": args.seed, **extra})
        if args.stale_only and _is_book_run(params, get_chapter(name)):
            reasons = stale_reasons(name, params)
            if not reasons:
                if stale_reasons(name, params, prose=True):
                    refresh_prose(name)
                print(f"[{name}] up to date (inputs unchanged): not executed")
                continue
            print(f"[{name}] stale: " + "; ".join(reasons[:5])
                  + (f" (+{len(reasons) - 5} more)" if len(reasons) > 5 else ""))
        build(name, args.profile, args.device, args.seed, extra)


if __name__ == "__main__":
    main()
