"""``tfaccel doctor``: why TensorFlow does or does not use the GPU, and the fix."""

from __future__ import annotations

import argparse
from typing import Any

from tfaccel.cli._args import seconds
from tfaccel.cli._output import print_json, show_tensorflow_log
from tfaccel.errors import UsageError

__all__ = ["FLAGS", "add_parser", "run"]

# The library's argument names -> this command's flags, for the messages of its errors
# (tfaccel.cli.main applies it).
FLAGS = {"timeout_s": "--deep-timeout", "path": "--save-snapshot", "bundle": "--bundle"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="check why TensorFlow does (not) use the GPU; diagnose a pasted log",
        description=(
            "Run ordered checks (driver, CUDA libraries, cuDNN, compute capability, TensorFlow "
            "build, environment), each with its status, the evidence seen and the exact fix. "
            "Without --deep it never imports TensorFlow. With --log it diagnoses a TensorFlow "
            "log or traceback instead of this machine."
        ),
        epilog=(
            "exit codes: 0 no check failed, 1 at least one failure found, 2 usage error "
            "(bad argument or unreadable input)"
        ),
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the evidence of every check, not only problems, and, with --deep, what "
        "TensorFlow logged",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        help="diagnose this TensorFlow log or traceback ('-' reads standard input)",
    )
    p.add_argument(
        "--deep",
        action="store_true",
        help="also import TensorFlow in a subprocess (with a timeout) and read its log",
    )
    p.add_argument(
        "--deep-timeout",
        type=seconds("--deep-timeout", example=120),
        default=120.0,
        metavar="S",
        help="seconds allowed for the --deep import of TensorFlow (default 120)",
    )
    p.add_argument("--snapshot", metavar="FILE", help="diagnose a saved snapshot, not this machine")
    p.add_argument(
        "--save-snapshot",
        metavar="FILE",
        help="save everything probed to FILE (JSON) for a bug report",
    )
    p.add_argument(
        "--bundle",
        metavar="FILE",
        help="write one file to attach to a bug report (Markdown with the JSON inside): the "
        "versions, the findings, the snapshot, and the logs of --deep and --log; user names, "
        "home paths, host names, IP and MAC addresses and secret values are redacted in it, "
        "and it ends with what was redacted. Only the file is redacted: what is printed "
        "(--json included) is not",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Diagnose this machine, a saved snapshot or a log; print the report; 1 if a check failed."""
    from tfaccel import probe
    from tfaccel.diagnosis import DoctorReport, diagnose, match_log, read_log_file
    from tfaccel.probe import deep
    from tfaccel.snapshot import check_writable, load_snapshot, save_snapshot

    if args.snapshot and args.deep:
        raise UsageError(
            "--deep cannot be combined with --snapshot",
            expected="--deep to probe this machine, or --snapshot FILE to replay a saved one",
            received="both",
            fix="drop --deep: a saved snapshot keeps the deep results it was saved with",
        )
    for flag, value in (
        ("--snapshot", args.snapshot),
        ("--save-snapshot", args.save_snapshot),
        ("--bundle", args.bundle),
    ):
        if value is not None and not value.strip():
            raise UsageError(
                f"{flag} was given an empty file name",
                expected="the path of a Markdown file"
                if flag == "--bundle"
                else "the path of a JSON file",
                received=repr(value),
                fix=f"e.g. {flag} {'tfaccel-bundle.md' if flag == '--bundle' else 'snapshot.json'}",
            )
    if args.save_snapshot:
        check_writable(args.save_snapshot)  # before the probe, which may take minutes
    if args.bundle:
        check_writable(args.bundle, argument_name="bundle")
    if args.deep and args.deep_timeout < deep.MIN_IMPORT_S:
        raise deep.timeout_too_short(args.deep_timeout)
    log = read_log_file(args.log) if args.log is not None else None
    snap = None
    if args.snapshot:
        snap = load_snapshot(args.snapshot)
    elif log is None or args.deep or args.save_snapshot or args.bundle:
        snap = probe.snapshot(deep=args.deep, deep_timeout_s=args.deep_timeout)
    if snap is not None and snap.deep is not None:
        show_tensorflow_log(snap.deep.log)  # with --verbose only
    if args.save_snapshot and snap is not None:
        save_snapshot(snap, args.save_snapshot)
    if snap is None:
        # A pasted log is diagnosed alone: it may come from another machine.
        report = DoctorReport(findings=[], log=match_log(log) if log else None)
    else:
        report = diagnose(snap, log=log)
    bundle = None
    if args.bundle:
        from tfaccel.report.bundle import write_bundle

        bundle = write_bundle(args.bundle, report, snap, log=log, argument_name="bundle")
    if args.json:
        print_json(report.to_dict())
    else:
        from tfaccel.report.findings import render_terminal
        from tfaccel.report.text import console

        out = console()
        out.print(render_terminal(report, verbose=args.verbose))
        if args.save_snapshot:
            out.print(f"snapshot saved to {args.save_snapshot}")
        if bundle is not None:
            replaced = sum(bundle.redacted.values())
            out.print(
                f"bundle written to {args.bundle} ({replaced} value(s) redacted; only the file "
                "is: check it before you attach it to a bug report)",
                markup=False,
                highlight=False,
            )
    return int(report.exit_code)
