"""A chapter's source as a notebook, and an executed notebook cleaned for the page."""
from __future__ import annotations

import json

from cflib.book.chapters import Chapter
from cflib.book.report.discussion import discussion_text

MARKER = "<!-- discussion -->"
#: where a chapter shows its discussion's opening, "what this shows", near its top; the
#: template marks the end of that opening with SUMMARY_END (a chapter without the
#: SUMMARY marker shows the whole discussion at MARKER)
SUMMARY, SUMMARY_END = "<!-- summary -->", "<!-- summary ends -->"

#: the cells a run adds around its code cells: the tracer (:mod:`cflib.trace`) of the cflib
#: definitions its setup and compute cells run, then of those its presentation cells run
TRACE_ON = "from cflib import trace as _cflib_trace\n_cflib_trace.start()"
TRACE_OFF = "_cflib_segment = _cflib_trace.stop()"
PRESENT_ON = "from cflib import trace as _cflib_trace\n_cflib_trace.start()"

#: the last cell of every run: which cflib definitions its compute and its presentation
#: ran, which cflib modules, data files, results files and shipped networks the kernel used
#: (:mod:`cflib.book.runs.probe`)
PROBE = "from cflib.book.runs.probe import report as _cflib_report\n_cflib_report(globals())"


def personalise(nb, chapter: Chapter) -> None:
    """Give a chapter made from a shared template its own title, and its own name where
    the prose says ``<this chapter>``."""
    titled = False
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        if not titled and cell.source.lstrip().startswith("# "):
            lines = cell.source.lstrip().split("\n")
            cell.source = "\n".join([f"# {chapter.title}"] + lines[1:])
            titled = True
        cell.source = cell.source.replace("<this chapter>", chapter.name)


def discussion_template(chapter: Chapter) -> str:
    """The chapter's discussion page (a template filled from the results), or ''."""
    from cflib.book.report.discussion import template_path

    page = template_path(chapter.name)
    return page.read_text() if page.exists() else ""


def fill_discussion(nb, chapter: Chapter, results_dir) -> None:
    """Replace the ``<!-- discussion -->`` marker of an executed notebook with the chapter's
    discussion, every number in it read from ``results_dir`` (and the sweep beside it)."""
    cells = [c for c in nb.cells if c.cell_type == "markdown" and MARKER in c.source]
    if not cells:
        return
    text = discussion_text(chapter.name, results_dir) if discussion_template(chapter) else ""
    summary, _, rest = text.rpartition(SUMMARY_END)
    tops = [c for c in nb.cells if c.cell_type == "markdown" and SUMMARY in c.source]
    if not tops:
        summary, rest = "", summary + rest
    for cell in tops:
        cell.source = cell.source.replace(SUMMARY, summary.strip())
    for cell in cells:
        cell.source = cell.source.replace(MARKER, rest.strip())


#: a chapter is compute, then presentation: code cells tagged ``compute`` run the
#: computation and save what the page needs (results files, saved counterfactuals); cells
#: tagged ``setup`` (parameters, imports) serve both; every other code cell is presentation
#: and reads only what the compute saved, so that a re-render runs it alone
COMPUTE, SETUP = "compute", "setup"
#: what a compute cell runs during a re-render
RENDER_PLACEHOLDER = "# computed by the chapter's last full run (a re-render reads its results)"


def cell_kind(cell) -> str:
    """``markdown``, ``parameters``, ``compute``, ``setup`` or ``presentation``."""
    if cell.cell_type != "code":
        return "markdown"
    tags = set(cell.get("metadata", {}).get("tags", []))
    for kind in ("parameters", COMPUTE, SETUP):
        if kind in tags:
            return kind
    return "presentation"


def to_notebook(chapter: Chapter, render: bool = False):
    """The chapter's source as a notebook (title and discussion filled in).  With
    ``render``, every compute cell runs :data:`RENDER_PLACEHOLDER` instead of its code
    (the cells and their ids stay where they are)."""
    import jupytext

    nb = jupytext.read(chapter.path)
    personalise(nb, chapter)
    for i, cell in enumerate(nb.cells):       # stable ids: a re-run writes the same file
        cell["id"] = f"{chapter.name}-{i}"
        if render and cell_kind(cell) == COMPUTE:
            cell.source = RENDER_PLACEHOLDER
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def add_tracing(nb, render: bool = False) -> None:
    """Put the tracer's cells (tagged ``cflib-probe``: the page drops them) around the
    notebook's setup and compute cells (not in a re-render: its compute cells do not run),
    and from its first presentation cell on, so that the run records the cflib
    definitions its computation ran apart from those its page ran.  A presentation cell
    between two compute cells is refused (it would count for neither)."""
    import nbformat

    kinds = [cell_kind(c) for c in nb.cells]
    ours = [i for i, k in enumerate(kinds) if k in (SETUP, COMPUTE)]
    last = ours[-1] if ours else max([i for i, k in enumerate(kinds) if k == "parameters"],
                                     default=-1)
    between = [i for i in range(ours[0], last) if kinds[i] == "presentation"] if ours else []
    if between:
        raise ValueError(f"cell {between[0]} of the chapter is a presentation cell between "
                         "its setup and compute cells: move it after the last compute cell "
                         "(or tag it 'compute')")
    present = next((i for i in range(last + 1, len(kinds)) if kinds[i] == "presentation"), None)

    def cell(source):
        c = nbformat.v4.new_code_cell(source)
        c.metadata["tags"] = ["cflib-probe"]
        return c

    out = []
    for i, c in enumerate(nb.cells):
        if ours and i == ours[0] and not render:
            out.append(cell(TRACE_ON))
        if i == present:
            out.append(cell(PRESENT_ON))
        out.append(c)
        if ours and i == ours[-1] and not render:
            out.append(cell(TRACE_OFF))
    nb.cells = out


def restore_compute_cells(executed, chapter: Chapter, previous) -> None:
    """After a re-render: give every compute cell of ``executed`` its code back and the
    outputs it had in ``previous`` (the notebook of the chapter's last full run, whose
    compute cells ran that same code)."""
    src = {c["id"]: c.source for c in to_notebook(chapter).cells if cell_kind(c) == COMPUTE}
    before = {c.source: c.get("outputs", []) for c in previous.cells
              if c.cell_type == "code" and c.source in src.values()}
    for cell in executed.cells:
        if cell.get("id") in src:
            cell.source = src[cell["id"]]
            cell["outputs"] = before.get(cell.source, [])


def clean(nb, chapter: Chapter, params: dict, provenance: str) -> dict:
    """Strip what a reader should not see; return the inputs the probe cell reported."""
    reported = {"modules": [], "data": [], "reads": [], "definitions": {},
                "presentation": {}, "networks": []}
    keep = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code":
            outs = []
            for o in cell.get("outputs", []):
                text = o.get("text", "")
                if o.get("output_type") == "stream" and "CFLIB_INPUTS" in text:
                    reported = json.loads(text.split("CFLIB_INPUTS", 1)[1].strip().split("\n")[0])
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
                # the page shows what the code made, not the code: the notebook (the page's
                # download button) and its source under notebooks/ hold it
                cell.metadata["tags"] = sorted(set(tags) | {"remove-input"})
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


