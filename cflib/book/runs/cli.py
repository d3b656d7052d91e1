"""The chapter builder's command line (``python -m cflib.book.runs``, ``make chapter``)."""
from __future__ import annotations

import argparse
import json

from cflib.book.chapters import CHAPTERS, check, get_chapter, run_params
from cflib.book.runs.assemble import refresh_prose
from cflib.book.runs.digests import staleness
from cflib.book.runs.execute import build
from cflib.book.runs.paths import is_book_run, output_dirs, rel


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
    """The command line; a bad argument or a refused run is one line (exit 2), never a
    traceback."""
    try:
        _main(argv)
    except (ValueError, FileNotFoundError, PermissionError) as err:
        raise SystemExit(f"cflib chapter: {err}") from None


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("chapter", choices=list(CHAPTERS) + ["all"])
    ap.add_argument("--profile", default="standard")
    ap.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default cpu)")
    ap.add_argument("--train-seed", type=int, default=None,
                    help="seeds every network the chapter trains (default 0)")
    ap.add_argument("--data-seed", type=int, default=None,
                    help="seeds the queries and every evaluation draw (default 0)")
    ap.add_argument("--stale-only", action="store_true",
                    help="execute only chapters whose inputs changed (make book)")
    ap.add_argument("--refresh-prose", action="store_true",
                    help="only copy edited markdown into the executed chapter (no execution)")
    ap.add_argument("--render", action="store_true",
                    help="re-render the chapter from its last full run's saved results "
                         "(its presentation cells only: seconds, nothing computed)")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="a parameter of the chapter's parameters cell")
    ap.add_argument("--html", action="store_true",
                    help="a run that is not the book's: render its chapter as a page too "
                         "(a book of that one chapter, in the run's folder)")
    return ap


def _main(argv=None):
    args = _parser().parse_args(argv)
    extra = parse_extra(args.p)
    names = list(CHAPTERS) if args.chapter == "all" else [args.chapter]
    asked = {k: v for k, v in (("device", args.device), ("train_seed", args.train_seed),
                               ("data_seed", args.data_seed)) if v is not None}
    for name in names:
        if args.refresh_prose:
            print(f"{name}: prose refreshed in {rel(refresh_prose(name))}")
            continue
        # what the user asked for must be the chapter's: a seed for a chapter that draws
        # nothing is refused (run_params fills in the rest of the book's run)
        given = asked if args.chapter != "all" else run_params(name, asked)
        params = check(name, {"profile": args.profile, **given, **extra})
        mode = "render" if args.render else "compute"
        if args.stale_only and is_book_run(name, params):
            mode = _stale_mode(name, params)
            if mode is None:
                continue
        path = build(name, args.profile, asked.get("device", "cpu"), asked.get("train_seed", 0),
                     asked.get("data_seed", 0), extra, mode=mode)
        if not is_book_run(name, params):
            if args.html:
                from cflib.book.runs.assemble import chapter_page

                print(f"[{name}] page: {rel(chapter_page(name, path))}", flush=True)
            else:
                _how_to_view(name, params)


def _stale_mode(name: str, params: dict) -> str | None:
    """What ``--stale-only`` does with the book's run of a chapter: ``None`` when it is
    fresh (its edited prose copied in), ``render`` or ``compute``; refused when its
    outputs no longer match it."""
    st = staleness(name, params)
    print(f"[{name}] {st.describe()}")
    if st.kind == "outputs":
        raise SystemExit(f"[{name}] refused: " + "; ".join(st.outputs))
    if st.kind in ("fresh", "prose"):
        if st.kind == "prose":
            refresh_prose(name)
        return None
    return "render" if st.kind == "presentation" else "compute"


def _how_to_view(name: str, params: dict) -> None:
    """Where a run that is not the book's wrote, and how to see it as a page."""
    nb_dir, _ = output_dirs(get_chapter(name), params)
    print(f"[{name}] this run is not the book's: its notebook and results are in "
          f"{rel(nb_dir)}/; add --html to render it as a page, `cflib verify --rerun {name} "
          f"--run {rel(nb_dir)}` to read it against the book's numbers, or open "
          f"{rel(nb_dir / (name + '.ipynb'))} in Jupyter")


if __name__ == "__main__":
    main()
