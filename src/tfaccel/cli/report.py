"""``tfaccel report``: devices, doctor and a bench run, on the terminal and as files.

Writes report.html (self-contained, plots embedded), report.json, report.md and the plot files
report.md links (plots/*.png) into ``--out`` (default ./tfaccel-report), records the bench run
in the results database and compares it with the last run of this machine. The workflow is
:func:`tfaccel.report.make_report`; this module parses the flags, calls it, renders the result
and maps its status to the exit code.
"""

from __future__ import annotations

import argparse
from typing import Any

from tfaccel.cli._output import RichProgress, print_json, quiet_tensorflow
from tfaccel.cli.bench import EXIT_CODE, add_bench_arguments, check_db, options_from

__all__ = ["FLAGS", "add_parser", "run"]

# The library's argument names -> this command's flags, for the messages of its errors
# (tfaccel.cli.main applies it).
FLAGS = {"out": "--out"}


def add_parser(sub: Any) -> None:
    """Register ``tfaccel report`` on the CLI's subparsers."""
    p = sub.add_parser(
        "report",
        help="devices, doctor and a bench run: terminal summary plus HTML/JSON/Markdown files",
        description=(
            "Probe the devices, run the doctor's checks and a bench (use --quick for about 1.5 "
            "minutes on 2 cores), then write report.html (self-contained, plots embedded), "
            "report.json, report.md and the plots/*.png files report.md links into --out."
        ),
    )
    add_bench_arguments(p)
    # the parser of every command is built for each: tfaccel.report (the doctor, the plans) is
    # imported by `tfaccel report` alone, and gives the default folder then
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="directory for the report files (default ./tfaccel-report); tfaccel replaces "
        "only files it wrote there (listed in .tfaccel-report) and refuses a directory "
        "where report.md, report.json, report.html or plots/*.png are someone else's",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measure, write the report files and print the summary (or the JSON document); exit 1
    if the convergence check failed."""
    from tfaccel import probe, report
    from tfaccel.report.files import check_writable

    if args.out is None:
        args.out = report.DEFAULT_OUT
    check_db(args, compare=False)  # a report compares only what it records
    options = options_from(args)
    check_writable(args.out, create=False)  # before the machine is probed or TensorFlow starts
    with RichProgress("probing the machine") as progress:
        snap = probe.snapshot()  # before quiet_tensorflow(), so the doctor sees the user's env
        progress.status("starting TensorFlow")
        quiet_tensorflow()
        result = report.make_report(
            options,
            out=args.out,
            snapshot=snap,
            db=args.db,
            save=not args.no_save,
            progress=progress,
        )
    if args.json:
        print_json(result.to_dict())
    else:
        from tfaccel.report.text import console, render_report

        console().print(render_report(result))
    return EXIT_CODE[result.status]
