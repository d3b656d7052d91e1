"""The ``cflib`` console command.

    cflib list                          chapters, profiles and each chapter's parameters
    cflib chapter NAME [--profile P] [--train-seed S] [--data-seed S] [--device D]
                  [-p NAME VALUE ...]
    cflib book [--rerun]                execute stale chapters (or all), build the HTML
    cflib verify                        every committed results file matches its notebook
    cflib stale                         what each chapter needs: nothing, a re-render (its
                                        presentation changed), a re-execution (its compute
                                        changed), and why
    cflib sweep NAME --seeds 0 1 2      chapters x training seeds on Dask, merged
    cflib readme [--results DIR]        regenerate the README's summary and the results page
"""
from __future__ import annotations

import argparse

from cflib.bench.profiles import PROFILES
from cflib.book.chapters import CHAPTERS, parameter_schema


def _listing() -> str:
    lines = ["chapters (make chapter NB=<name>):"]
    for c in CHAPTERS.values():
        lines.append(f"  {c.name:<20} {c.title}")
    lines.append("profiles: " + ", ".join(PROFILES) + " (sizes only, never the algorithm)")
    for c in CHAPTERS.values():
        lines.append(f"parameters of {c.name} (-p NAME VALUE):")
        for p in parameter_schema(c.path).values():
            value = (f"fixed {c.fixed[p.name]!r}" if p.name in c.fixed   # the chapter's own
                     else f"default {p.default!r}")
            lines.append(f"  {p.name:<14} {' | '.join(p.types):<12} {value}  {p.help}")
    return "\n".join(lines)


def main(argv=None) -> None:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sweep"]:                 # its own options (cflib.sweep)
        from cflib.book.sweep import main as sweep_main

        return sweep_main(argv[1:])
    ap = argparse.ArgumentParser(prog="cflib", description=__doc__.split("\n\n")[0],
                                 epilog=_listing(), formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="chapters, profiles and parameters")
    ch = sub.add_parser("chapter", help="execute one chapter (or all)")
    ch.add_argument("name", choices=list(CHAPTERS) + ["all"])
    ch.add_argument("--profile", default="standard", choices=list(PROFILES))
    ch.add_argument("--device", default=None)
    ch.add_argument("--train-seed", type=int, default=None)
    ch.add_argument("--data-seed", type=int, default=None)
    ch.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    bk = sub.add_parser("book", help="execute stale chapters, then build the HTML book")
    bk.add_argument("--rerun", action="store_true", help="execute every chapter")
    bk.add_argument("--workers", type=int, default=None,
                    help="chapters executed side by side (default: one per core)")
    bk.add_argument("--profile", default="standard", choices=list(PROFILES))
    bk.add_argument("--device", default="cpu")
    bk.add_argument("--train-seed", type=int, default=0)
    bk.add_argument("--data-seed", type=int, default=0)
    sub.add_parser("stale", help="which committed chapters must be re-executed, and why")
    sub.add_parser("verify", help="refuse (exit 1) when a committed results file does not "
                                  "match the notebook that wrote it")
    rf = sub.add_parser("refresh", help="copy a chapter's edited prose into its executed "
                                        "notebook and fill its discussion again (no run)")
    rf.add_argument("name", choices=list(CHAPTERS) + ["all"])
    sub.add_parser("sweep", help="chapters x training seeds on Dask (cflib sweep --help)")
    rd = sub.add_parser("readme", help="regenerate the README's headline tables")
    rd.add_argument("--results", default="results")
    rd.add_argument("--readme", default="README.md")
    args = ap.parse_args(argv)

    from cflib.book.runs import assemble, cli, digests

    if args.command == "list":
        print(_listing())
    elif args.command == "chapter":
        cmd = [args.name, "--profile", args.profile]
        for flag, v in (("--device", args.device), ("--train-seed", args.train_seed),
                        ("--data-seed", args.data_seed)):
            if v is not None:
                cmd += [flag, str(v)]
        for k, v in args.p:
            cmd += ["-p", k, v]
        cli.main(cmd)
    elif args.command == "book":
        assemble.build_book(args.profile, args.device, args.train_seed, args.data_seed,
                            args.rerun, args.workers)
    elif args.command == "stale":
        for name in CHAPTERS:
            print(f"{name}: {digests.staleness(name).describe(limit=100)}")
    elif args.command == "verify":
        try:
            digests.refuse_unmatched(CHAPTERS)
        except ValueError as err:
            raise SystemExit(str(err)) from None
        print("every committed results file matches the notebook that wrote it")
    elif args.command == "refresh":
        for name in (list(CHAPTERS) if args.name == "all" else [args.name]):
            print(f"{name}: prose refreshed -> {assemble.refresh_prose(name)}")
    elif args.command == "readme":
        from cflib.book.report.readme import RESULTS_PAGE, update_readme

        update_readme(args.readme, args.results)
        print(f"{args.readme}: summary regenerated from {args.results}/; "
              f"{RESULTS_PAGE.relative_to(RESULTS_PAGE.parents[1])}: every headline table and "
              "the chapters' timings")


if __name__ == "__main__":
    main()
