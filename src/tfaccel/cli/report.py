"""``tfaccel report``: devices, doctor and a bench run, on the terminal and as files.

Writes report.html (self-contained, plots embedded), report.json and report.md into ``--out``
(default ./tfaccel-report), records the bench run in the results database and compares it
with the last run of this machine.
"""

from __future__ import annotations

import argparse
from typing import Any

from tfaccel.cli._output import print_json

__all__ = ["DEFAULT_OUT", "add_parser", "run"]

DEFAULT_OUT = "tfaccel-report"


def add_parser(sub: Any) -> None:
    """Register ``tfaccel report`` on the CLI's subparsers."""
    from tfaccel.cli.bench import add_bench_arguments

    p = sub.add_parser(
        "report",
        help="devices, doctor and a bench run: terminal summary plus HTML/JSON/Markdown files",
        description=(
            "Probe the devices, run the doctor's checks and a bench (use --quick for about 1.5 "
            "minutes on 2 cores), then write report.html (self-contained, plots embedded), "
            "report.json and report.md into --out."
        ),
    )
    add_bench_arguments(p)
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"directory for the report files (default ./{DEFAULT_OUT})",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Measure, write the report files and print the summary (or the JSON document)."""
    from tfaccel import bench, inventory, probe
    from tfaccel.cli.bench import RichProgress, options_from, quiet_tensorflow
    from tfaccel.diagnosis import diagnose
    from tfaccel.report.html import build_document, check_writable, write_report
    from tfaccel.store import ResultsStore

    options = options_from(args)
    out_dir = check_writable(args.out)
    db = None if args.no_save else ResultsStore(args.db)
    try:
        with RichProgress("probing the machine") as progress:
            snap = probe.snapshot()
            inv = inventory.build(snap)
            diagnosis = diagnose(snap)
            quiet_tensorflow()  # after the probe, so the doctor sees the user's environment
            progress.status("importing TensorFlow")
            result = bench.run(options, store=db, progress=progress, snapshot=snap)
            progress.status("drawing the plots")
            comparison = None
            if db is not None:
                before = bench.previous_run(db, result)
                comparison = bench.compare_runs(before, result) if before is not None else None
            doc = build_document(
                result, devices=inv.to_dict(), doctor=diagnosis.to_dict(), comparison=comparison
            )
            files = write_report(out_dir, doc, _plots(doc["summary"]))
    finally:
        if db is not None:
            db.close()
    written = {"html": str(files.html), "json": str(files.json), "markdown": str(files.markdown)}
    if args.json:
        print_json({**doc, "written": written})
        return 0
    from rich.rule import Rule

    from tfaccel.cli.bench import render
    from tfaccel.report.doctor_text import render_doctor
    from tfaccel.report.text import console, render_inventory

    out = console()
    out.print(Rule("tfaccel devices"))
    out.print(render_inventory(inv))
    out.print(Rule("tfaccel doctor"))
    out.print(render_doctor(doc["doctor"]))
    out.print(Rule("tfaccel bench"))
    out.print(render(doc["summary"], doc["bench"], comparison))
    out.print(Rule("files"))
    for kind, path in written.items():
        out.print(f"{kind:9} {path}", markup=False, highlight=False)
    return 0


def _plots(summary: dict[str, Any]) -> dict[str, bytes]:
    from tfaccel.report.plots import render_all

    return render_all(summary)
