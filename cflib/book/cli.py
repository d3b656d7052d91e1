"""The ``cflib`` console command.

    cflib list                          chapters, profiles and each chapter's parameters
    cflib chapter NAME [--profile P] [--train-seed S] [--data-seed S] [--device D]
                  [--render] [--html] [-p NAME VALUE ...]
    cflib book [--rerun]                execute stale chapters (or all), build the HTML
    cflib verify                        every executed chapter matches its seal, every
                                        results file the notebook or the run that wrote it
    cflib verify --rerun NAME [--run R] how far a re-run lands from the book: each value
                                        against the committed one and the seeds' spread
    cflib record FILE... --by COMMAND   record results files a tool wrote (their sha256,
                                        the command, the commit) in results/written.json
    cflib stale [--why]                 what each chapter needs: nothing, a re-render (its
                                        presentation changed), a re-execution (its compute
                                        changed), and why (--why: every changed definition)
    cflib certify NAME|all [--check]    twin runs at smoke (the commit that computed the
                                        numbers and the working tree): bit-equal outputs and
                                        every changed line run -> a certificate that keeps
                                        the chapter's numbers (--check: re-check them all)
    cflib sweep NAME --seeds 0 1 2      chapters x training seeds on Dask, merged
    cflib networks [list|check|ship|certify]  the measuring networks shipped with the book
    cflib readme [--results DIR]        regenerate the README's summary and the results page
    cflib bench --method PKG.MODULE:NAME [--config JSON] [--tables T1,T2] [--profile P]
                [--pairs 4->9,...] [--n-images N] [--out DIR] [--force]
                                        your method through the book's tables: a results
                                        file per table and an HTML page beside the book's
                                        rows and the papers' (cflib.bench.compare)
"""
from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from cflib.bench.profiles import PROFILES
from cflib.book.chapters import CHAPTERS, parameter_schema


def _listing() -> str:
    from cflib.bench.catalog import CATALOG
    from cflib.bench.compare import TABLES

    lines = ["chapters (make chapter NB=<name>):"]
    for c in CHAPTERS.values():
        lines.append(f"  {c.name:<20} {c.title}")
    lines.append("tables of cflib bench (--tables):")
    for t in TABLES.values():
        lines.append(f"  {t.key:<20} {t.title}")
    lines.append("methods of the catalog (cflib.bench.catalog.build): " + ", ".join(CATALOG))
    lines.append("profiles: " + ", ".join(PROFILES) + " (sizes only, never the algorithm)")
    for c in CHAPTERS.values():
        lines.append(f"parameters of {c.name} (-p NAME VALUE):")
        for p in parameter_schema(c.path).values():
            value = (f"fixed {c.fixed[p.name]!r}" if p.name in c.fixed   # the chapter's own
                     else f"default {p.default!r}")
            lines.append(f"  {p.name:<14} {' | '.join(p.types):<12} {value}  {p.help}")
    return "\n".join(lines)


def _run_parsers(sub) -> None:
    """The subcommands that run or build chapters: chapter, book, sweep."""
    ch = sub.add_parser("chapter", help="execute one chapter (or all)")
    ch.add_argument("name", choices=list(CHAPTERS) + ["all"])
    ch.add_argument("--profile", default="standard", choices=list(PROFILES))
    ch.add_argument("--device", default=None)
    ch.add_argument("--train-seed", type=int, default=None)
    ch.add_argument("--data-seed", type=int, default=None)
    ch.add_argument("--render", action="store_true",
                    help="re-render from its last full run's saved results (nothing computed)")
    ch.add_argument("--html", action="store_true",
                    help="a run that is not the book's: render its chapter as a page too")
    ch.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    bk = sub.add_parser("book", help="execute stale chapters, then build the HTML book")
    bk.add_argument("--rerun", action="store_true", help="execute every chapter")
    bk.add_argument("--workers", type=int, default=None,
                    help="chapters executed side by side (default: one per core)")
    bk.add_argument("--profile", default="standard", choices=list(PROFILES))
    bk.add_argument("--device", default="cpu")
    bk.add_argument("--train-seed", type=int, default=0)
    bk.add_argument("--data-seed", type=int, default=0)
    sub.add_parser("sweep", help="chapters x training seeds on Dask (cflib sweep --help)")
    rf = sub.add_parser("refresh", help="copy a chapter's edited prose into its executed "
                                        "notebook and fill its discussion again (no run)")
    rf.add_argument("name", choices=list(CHAPTERS) + ["all"])


def _check_parsers(sub) -> None:
    """The subcommands that check what is committed: stale, certify, verify, record."""
    st = sub.add_parser("stale", help="which committed chapters must be re-executed, and why")
    st.add_argument("--why", action="store_true",
                    help="every reason, one a line (each changed definition named)")
    ce = sub.add_parser("certify", help="certify that a change of code leaves a chapter's "
                                        "numbers as they are (twin runs at smoke)")
    ce.add_argument("name", nargs="?", choices=list(CHAPTERS) + ["all"], default=None)
    ce.add_argument("--check", action="store_true",
                    help="re-check every certificate against the records and today's code")
    vf = sub.add_parser("verify", help="refuse (exit 1) when an executed chapter does not "
                                       "match its seal, or a results file the notebook or the "
                                       "recorded run that wrote it; with --rerun, how far a "
                                       "re-run lands from the book")
    vf.add_argument("--rerun", metavar="CHAPTER", choices=[c for c, ch in CHAPTERS.items()
                                                           if ch.writes], default=None,
                    help="compare a re-run of CHAPTER with the committed results and the "
                         "book's spread over training seeds; exit 1 when a value moved "
                         "beyond that spread")
    vf.add_argument("--run", default=None,
                    help="the re-run's results (a CSV, or a folder holding CHAPTER.csv); "
                         "default: results/CHAPTER.csv when a book run replaced it, else "
                         "the newest _build/runs/*/CHAPTER.csv")
    vf.add_argument("--baseline", default=None,
                    help="compare with these results instead of the committed ones")
    vf.add_argument("--sweep-root", default=None,
                    help="the sweeps' folder (default results/sweep)")
    rc = sub.add_parser("record", help="record results files that a tool of the project wrote "
                                       "(results/written.json), so that they may be published")
    rc.add_argument("files", nargs="+")
    rc.add_argument("--by", required=True, help="the command that wrote them")
    rd = sub.add_parser("readme", help="regenerate the README's headline tables")
    rd.add_argument("--results", default="results")
    rd.add_argument("--readme", default="README.md")


def _bench_parser(sub) -> None:
    bn = sub.add_parser("bench", help="your method through the book's tables, beside the "
                                      "book's rows (cflib.bench.compare)")
    bn.add_argument("--method", required=True,
                    help="package.module:Name of an Explainer subclass or of a function "
                         "fn(model, x, target) -> x_cf (the current folder is searched)")
    bn.add_argument("--config", default=None,
                    help="the method's config as JSON, e.g. '{\"steps\": 50}'")
    bn.add_argument("--tables", default="c3lt-mnist",
                    help="comma-separated, of c3lt-mnist, c3lt-fmnist, bayes-mc_dropout, "
                         "bayes-bnn (default c3lt-mnist)")
    bn.add_argument("--profile", default="smoke", choices=list(PROFILES))
    bn.add_argument("--pairs", default=None,
                    help="comma-separated class pairs of the C3LT tables, e.g. 4->9,3->8 "
                         "(default: every pair of each table)")
    bn.add_argument("--n-images", type=int, default=None,
                    help="queries per pair (C3LT) or per repeat (Bayesian); default: the "
                         "profile's")
    bn.add_argument("--out", default=None,
                    help="the folder written (default ./cflib-bench/<method>-<profile>/ of "
                         "the current folder; never inside results/ or book/)")
    bn.add_argument("--no-book-methods", action="store_true",
                    help="where the book's committed rows cannot stand beside the run "
                         "(another profile, seeds or query count), do not run the book's "
                         "methods at this profile: only the reference rows beside yours")
    bn.add_argument("--force", action="store_true",
                    help="replace the files of an earlier run in --out (default: refused)")
    bn.add_argument("--device", default="cpu")
    bn.add_argument("--train-seed", type=int, default=0)
    bn.add_argument("--data-seed", type=int, default=0)
    nw = sub.add_parser("networks", help="the measuring networks shipped with the book "
                                         "(cflib.shipped): list, check, ship or certify them")
    nw.add_argument("action", choices=["list", "check", "ship", "certify"], nargs="?",
                    default="list",
                    help="certify: twin trainings at smoke of the training code changed "
                         "since each network was trained (networks/CERTIFICATES.json)")
    nw.add_argument("--root", default=None, help="the folder (default networks/)")
    nw.add_argument("--trained-at", default=None,
                    help="ship: the commit that trained cache entries that recorded no "
                         "provenance (refused unless its training code equals today's)")


def parser() -> argparse.ArgumentParser:
    """The ``cflib`` command's parser: one builder per group of subcommands."""
    ap = argparse.ArgumentParser(prog="cflib", description=__doc__.split("\n\n")[0],
                                 epilog=_listing(), formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="chapters, profiles and parameters")
    _run_parsers(sub)
    _check_parsers(sub)
    _bench_parser(sub)
    return ap


def main(argv=None) -> None:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sweep"]:                 # its own options (cflib.sweep)
        from cflib.book.sweep import main as sweep_main

        return sweep_main(argv[1:])
    args = parser().parse_args(_joined_options(argv))
    try:
        return COMMANDS[args.command](args)
    except (ValueError, OSError, RecursionError) as err:
        # a bad file, folder or value met on the way: one line naming it (a command's
        # own errors say more where they can); CFLIB_DEBUG=1 shows the traceback
        import os

        if os.environ.get("CFLIB_DEBUG"):
            raise
        text = str(err) or type(err).__name__
        raise SystemExit(f"cflib {args.command}: {text}") from None


def _joined_options(argv: list[str]) -> list[str]:
    """``--pairs -1->3`` as ``--pairs=-1->3``: a value that starts with a dash is the
    option's value (argparse would take it for an option and say "expected one
    argument"), so that the check of the value names it."""
    out, it = [], iter(argv)
    for a in it:
        if a in _VALUED and (nxt := next(it, None)) is not None:
            out.append(f"{a}={nxt}")
        else:
            out.append(a)
    return out


#: options whose value may start with a dash (pairs such as '-1->3', a negative seed)
_VALUED = {"--pairs", "--train-seed", "--data-seed", "--seeds", "--n-images", "--out"}


def _chapter(args) -> None:
    from cflib.book.runs import cli

    cmd = [args.name, "--profile", args.profile]
    for flag, v in (("--device", args.device), ("--train-seed", args.train_seed),
                    ("--data-seed", args.data_seed)):
        if v is not None:
            cmd += [flag, str(v)]
    for k, v in args.p:
        cmd += ["-p", k, v]
    cli.main(cmd + (["--render"] if args.render else []) + (["--html"] if args.html else []))


def _book(args) -> None:
    from cflib.book.runs import assemble

    assemble.build_book(args.profile, args.device, args.train_seed, args.data_seed,
                        args.rerun, args.workers)


def _stale(args) -> None:
    from cflib.book.runs import digests
    from cflib.book.runs.written import check_written

    for name in CHAPTERS:
        st = digests.staleness(name)
        if args.why and st.kind != "fresh":
            why = getattr(st, st.kind)
            print(f"{name}: {st.describe(limit=0).split(':')[0]} ({len(why)} reasons)")
            for reason in why:
                print(f"    {reason}")
        else:
            print(f"{name}: {st.describe()}")
    for problem in check_written(claimed=digests.claimed_outputs(CHAPTERS)):
        print(f"results: {problem}")


def _verify(args) -> None:
    from cflib.book.runs import digests

    if args.rerun:
        from cflib.book.runs.rerun import compare_rerun

        try:
            report = compare_rerun(args.rerun, args.run, args.baseline, args.sweep_root)
        except ValueError as err:
            raise SystemExit(f"cflib verify --rerun: {err}") from None
        print(report.describe())
        if len(report.beyond):
            raise SystemExit(f"{len(report.beyond)} value(s) of {args.rerun} moved beyond the "
                             "book's spread over training seeds")
        return
    try:
        digests.refuse_unmatched(CHAPTERS)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    from cflib.bench.networks import check
    from cflib.book.report.readme import generated_stale

    stale = generated_stale() + [f"networks/: {p}" for p in check()]
    if stale:
        raise SystemExit("cflib verify: " + "; ".join(stale))
    print("every executed chapter matches its seal, every results file the notebook or the "
          "recorded run that wrote it, the README's summary and the results page the "
          "results, and every shipped network its manifest")


def _record(args) -> None:
    from cflib.book.runs import digests
    from cflib.book.runs.paths import RESULTS_DIR
    from cflib.book.runs.written import record_written

    root = RESULTS_DIR.resolve()
    names = {Path(f).resolve().relative_to(root).as_posix() for f in args.files
             if root in Path(f).resolve().parents}
    mine = sorted(names & digests.claimed_outputs(CHAPTERS))
    if mine:
        raise SystemExit(f"cflib record: {mine} are written by a chapter's notebook, which "
                         "binds them; re-execute the chapter instead")
    try:
        record_written(args.files, args.by)
    except ValueError as err:
        raise SystemExit(f"cflib record: {err}") from None
    print(f"recorded {len(args.files)} file(s) as written by {args.by!r}")


def _refresh(args) -> None:
    from cflib.book.runs import assemble

    for name in (list(CHAPTERS) if args.name == "all" else [args.name]):
        print(f"{name}: prose refreshed -> {assemble.refresh_prose(name)}")


def _readme(args) -> None:
    from cflib.book.report.readme import RESULTS_PAGE, update_readme
    from cflib.book.runs import digests
    from cflib.book.runs.paths import RESULTS_DIR

    if Path(args.results).resolve() == RESULTS_DIR.resolve():
        try:        # never publish a results file its notebook did not write
            digests.refuse_unmatched([c for c in CHAPTERS.values() if c.writes])
        except ValueError as err:
            raise SystemExit(str(err)) from None
    update_readme(args.readme, args.results)
    print(f"{args.readme}: summary regenerated from {args.results}/; "
          f"{RESULTS_PAGE.relative_to(RESULTS_PAGE.parents[1])}: every headline table and "
          "the chapters' timings")


def networks(args) -> None:
    from cflib.bench import networks as nets

    root = Path(args.root) if args.root else nets.NETWORKS_DIR
    if args.action == "certify":
        from cflib.book.runs.certify import Refused, certify_networks

        try:
            out = certify_networks()
        except Refused as err:
            raise SystemExit(f"cflib networks certify: {err}") from None
        print(f"certified {len(out['definitions'])} changed training definition(s) from "
              f"{len(out['evidence'])} group(s) of networks")
        for r in out["refused"]:
            print(f"refused: {r}")
    if args.action == "ship":
        try:
            manifest, written = nets.ship(root, trained_at=args.trained_at)
        except ValueError as err:
            raise SystemExit(f"cflib networks ship: {err}") from None
        print(f"shipped {len(written)} networks: {manifest}")
    problems = nets.check(root)
    if args.action == "check" and problems:
        raise SystemExit("cflib networks check: " + "; ".join(problems))
    print("\n".join(nets.listing(root)))
    if problems:        # a listing or a ship never passes over a folder that fails its check
        raise SystemExit(f"cflib networks {args.action}: " + "; ".join(problems))


def _bench_config(text: str | None) -> dict | None:
    """``--config``: one flat JSON object of the method's config fields (None: none)."""
    import json

    if text is None:
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise SystemExit(f"cflib bench: --config is not JSON ({err}): write it like "
                         "'{\"steps\": 50}'") from None
    except RecursionError:
        raise SystemExit("cflib bench: --config is nested too deeply to be a config; "
                         "write its fields as one flat JSON object, like "
                         "'{\"steps\": 50}'") from None
    if not isinstance(config, dict):
        raise SystemExit(f"cflib bench: --config must be a JSON object of the method's "
                         f"config fields, got {text!r}")
    return config


@contextlib.contextmanager
def _bench_folder(out: Path, force: bool):
    """The run's folder, held by this run alone (a second run to it is refused) and empty:
    an earlier run's files are refused, or removed with ``--force`` (none left beside the
    new ones)."""
    import shutil

    from filelock import FileLock, Timeout

    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(out / ".cflib-bench.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise SystemExit(f"cflib bench: another cflib bench is writing {out} now; wait for it, "
                         "or give this run another --out") from None
    try:
        earlier = sorted(f for f in out.iterdir() if not f.name.startswith("."))
        if earlier and not force:
            names = [f.name for f in earlier]
            raise SystemExit(f"cflib bench: {out} already holds an earlier run's files "
                             f"({', '.join(names[:3])}{' ...' if len(names) > 3 else ''}); "
                             "give this run another --out, or pass --force to replace them")
        for f in earlier:
            shutil.rmtree(f) if f.is_dir() and not f.is_symlink() else f.unlink()
        try:
            yield out
        except OSError as err:          # a full disk, a folder gone: no half-written run left
            for f in out.iterdir():
                if not f.name.startswith("."):
                    shutil.rmtree(f, ignore_errors=True) if f.is_dir() else f.unlink(missing_ok=True)
            raise SystemExit(f"cflib bench: writing the run's files in {out} failed "
                             f"({err.strerror or err}); none of this run's files is left "
                             "there") from None
    finally:
        lock.release()


def _method_failure(err: BaseException) -> str:
    """A failure of the user's method as the user needs it: the frames of the user's own
    code (none of cflib's, none of torch's), then the one line that says what failed."""
    import traceback

    import cflib

    lib = str(Path(cflib.__file__).resolve().parent)
    cause, frames = err.__cause__, []
    if cause is not None:
        for fr in traceback.extract_tb(cause.__traceback__):
            f = str(Path(fr.filename).resolve())
            if not f.startswith(lib) and "site-packages" not in f and "/lib/python" not in f:
                frames.append(f'  File "{fr.filename}", line {fr.lineno}, in {fr.name}\n'
                              f"    {fr.line}")
    where = ("your method's code:\n" + "\n".join(frames) + "\n") if frames else ""
    return f"cflib bench: {where}{err}"


def bench(args) -> None:
    """``cflib bench``: every argument checked before any network is loaded (a bad one
    exits with its message), then :func:`cflib.bench.compare.compare` with the book's page
    renderer; prints where the results files and the page are."""
    import os
    import sys
    import time

    from cflib.bench.compare import prepare
    from cflib.bench.seeds import Seeds
    from cflib.book.report.comparison import bench_page

    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())          # --method of the current folder, as python -m
    from cflib.bench.methods import MethodError

    config = _bench_config(args.config)
    try:
        plan = prepare(args.method, args.tables, args.profile, config, args.pairs,
                       args.n_images, args.out, Seeds(args.train_seed, args.data_seed),
                       device=args.device, page=bench_page,
                       book_methods=not args.no_book_methods)
    except (ValueError, TypeError, FileNotFoundError) as err:
        notes = "".join(f" {n}" for n in getattr(err, "__notes__", []))
        raise SystemExit(f"cflib bench: {err}{notes}") from None
    except MethodError as err:       # the method changed torch while built on the stand-in
        raise SystemExit(_method_failure(err)) from None

    with _bench_folder(Path(plan.out), args.force):
        t0 = time.perf_counter()
        try:
            cmp = plan.run()
        except MethodError as err:
            raise SystemExit(_method_failure(err)) from None
    print(f"{cmp.method} through {', '.join(cmp.tables)} at profile {cmp.profile} in "
          f"{time.perf_counter() - t0:.0f} s")
    for key in cmp.tables:
        print(f"results ({key}): {cmp.csv(key)}")
    print(f"page: {cmp.page}")


def _certify(args) -> None:
    """``cflib certify``: each chapter asked for, then its page re-rendered with its
    certificate in the provenance line; ``--check``: every certificate re-checked."""
    from cflib.book.runs import certify as cert
    from cflib.book.runs import cli

    if args.check:
        problems = cert.check_certificates()
        if problems:
            raise SystemExit("cflib certify --check: " + "; ".join(problems))
        from cflib.book.runs.certificates import CERT_DIR

        n = len(list(CERT_DIR.glob("*.json"))) if CERT_DIR.exists() else 0
        print(f"{n} certificate(s), each made for its chapter's record and today's code")
        return
    if args.name is None:
        raise SystemExit("cflib certify: name a chapter (or all), or give --check")
    names = [c for c, ch in CHAPTERS.items() if ch.writes] if args.name == "all" else [args.name]
    refused = []
    for name in names:
        try:
            done = cert.certify(name)
        except cert.Refused as err:
            refused.append(f"{name}: {err}")
            print(f"[{name}] refused: {err}")
            continue
        if done is not None:
            cli.main([name, "--render"])
    if refused:
        raise SystemExit(f"cflib certify: {len(refused)} chapter(s) refused")


#: each subcommand's handler (``sweep`` parses its own options: :func:`main`)
COMMANDS = {"list": lambda args: print(_listing()), "chapter": _chapter, "book": _book,
            "stale": _stale, "certify": _certify, "verify": _verify, "record": _record,
            "refresh": _refresh, "readme": _readme, "bench": bench, "networks": networks}


if __name__ == "__main__":
    main()
