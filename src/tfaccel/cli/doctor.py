"""``tfaccel doctor``: why TensorFlow does or does not use the GPU, and the fix."""

from __future__ import annotations

import argparse
from typing import Any

from tfaccel.cli._args import integer, seconds
from tfaccel.cli._output import print_json, show_tensorflow_log
from tfaccel.core.errors import UsageError

__all__ = ["FLAGS", "add_parser", "run"]

# The library's argument names -> this command's flags, for the messages of its errors
# (tfaccel.cli.main applies it).
FLAGS = {
    "timeout_s": "--deep-timeout",
    "path": "--save-snapshot",
    "bundle": "--bundle",
    "batch_size": "--batch",
    "devices": "--device",
    "model": "--model",
    "snapshot": "--snapshot",
    "log": "--log",
}


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
            "(bad argument or unreadable input). With --preflight: 0 the release will run "
            "here (ok, or warnings only), 1 it will not (a check failed), 2 usage error"
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
    p.add_argument(
        "--preflight",
        action="store_true",
        help="before installing TensorFlow: say whether a release (--tensorflow) will run on "
        "this GPU (driver, compute capability, Python, platform, glibc, CUDA runtimes on the "
        "loader's path, disk) and the pip install command that fits",
    )
    p.add_argument(
        "--tensorflow",
        metavar="VERSION",
        help="with --preflight: the release to check, e.g. 2.19 (default: the newest tfaccel "
        "is tested with)",
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
    p.add_argument(
        "--model",
        metavar="NAME|SCRIPT",
        help="with --log showing an out-of-memory error: the model that ran out (a reference "
        "model name, or a script defining model_fn()); the oom finding then says what the "
        "batch needs, what the device has, and the batch or gradient accumulation that fits "
        "(a prediction of tfaccel plan)",
    )
    p.add_argument(
        "--batch",
        type=integer("--batch", example=256),
        metavar="N",
        help="with --model: the batch that ran out (default: the first dimension of the "
        "tensor the log failed to allocate)",
    )
    p.add_argument(
        "--device",
        metavar="KEY",
        help="with --model: the device it ran on, a spec database key (tfaccel plan "
        "--list-devices; default: the allocator limit the log prints)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Diagnose this machine, a saved snapshot or a log; print the report; 1 if a check failed."""
    from tfaccel import probe
    from tfaccel.core.files import check_file_name, check_writable_file
    from tfaccel.diagnosis import DoctorReport, diagnose, match_log, read_log_file
    from tfaccel.probe import deep
    from tfaccel.snapshot import load_snapshot, save_snapshot

    if args.preflight or args.tensorflow is not None:
        return _preflight(args)
    if args.snapshot and args.deep:
        raise UsageError(
            "--deep cannot be combined with --snapshot",
            expected="--deep to probe this machine, or --snapshot FILE to replay a saved one",
            received="both",
            fix="drop --deep: a saved snapshot keeps the deep results it was saved with",
        )
    _check_file_names(
        ("--snapshot", args.snapshot),
        ("--save-snapshot", args.save_snapshot),
        ("--bundle", args.bundle),
    )
    for name in ("snapshot", "log"):  # Path drops a trailing slash: file.txt/ would be read
        check_file_name(getattr(args, name) or "", argument_name=name, reading=True)
    _check_plan_flags(args)
    if args.save_snapshot:
        # before the probe, which may take minutes
        check_writable_file(args.save_snapshot, argument_name="path")
    if args.bundle:
        check_writable_file(args.bundle, argument_name="bundle")
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
    if args.model and report.log is not None and log is not None:
        _answer_oom(report.log, log.text, args)
    bundle = None
    if args.bundle:
        from tfaccel.report.bundle import write_bundle

        bundle = write_bundle(args.bundle, report, snap, log=log, argument_name="bundle")
    if args.json:
        print_json(report.to_dict())
    else:
        from tfaccel.report.findings import findings_terminal
        from tfaccel.report.text import console

        out = console()
        out.print(findings_terminal(report, verbose=args.verbose))
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


def _preflight(args: argparse.Namespace) -> int:
    """``--preflight``: will a TensorFlow release run here, before it is installed."""
    from tfaccel import probe
    from tfaccel.core.files import check_file_name
    from tfaccel.diagnosis.preflight import preflight
    from tfaccel.diagnosis.releases import newest_tested, release
    from tfaccel.snapshot import load_snapshot

    if not args.preflight:
        raise UsageError(
            "--tensorflow names the release that --preflight checks, and no --preflight was given",
            expected="tfaccel doctor --preflight [--tensorflow VERSION]",
            received=f"--tensorflow {args.tensorflow}",
            fix=f"add --preflight, e.g. tfaccel doctor --preflight --tensorflow {args.tensorflow}",
        )
    for flag, value in (
        ("--log", args.log),
        ("--deep", args.deep or None),
        ("--bundle", args.bundle),
        ("--save-snapshot", args.save_snapshot),
        ("--model", args.model),
    ):
        if value is not None:
            raise UsageError(
                f"--preflight cannot be combined with {flag}",
                expected="tfaccel doctor --preflight [--tensorflow VERSION] [--snapshot FILE] "
                "[--json] [-v]",
                received=f"--preflight {flag}",
                fix=f"run tfaccel doctor {flag} ... on its own",
            )
    rel = release(args.tensorflow) if args.tensorflow is not None else newest_tested()
    _check_file_names(("--snapshot", args.snapshot))
    check_file_name(args.snapshot or "", argument_name="snapshot", reading=True)
    if args.snapshot:
        snap = load_snapshot(args.snapshot)
    else:
        snap = probe.snapshot()
        snap.cuda_runtimes = probe.libs.cuda_runtimes()  # LD_LIBRARY_PATH as this process has it
    report = preflight(snap, rel)
    if args.json:
        print_json(report.to_dict())
    else:
        from tfaccel.report.findings import findings_terminal
        from tfaccel.report.text import console

        console().print(findings_terminal(report.findings, verbose=args.verbose))
    return report.exit_code


def _check_file_names(*flags: tuple[str, str | None]) -> None:
    """A file-name argument that was given must not be empty (``--snapshot ""``)."""
    for flag, value in flags:
        if value is not None and not value.strip():
            raise UsageError(
                f"{flag} was given an empty file name",
                expected="the path of a Markdown file"
                if flag == "--bundle"
                else "the path of a JSON file",
                received=repr(value),
                fix=f"e.g. {flag} {'tfaccel-bundle.md' if flag == '--bundle' else 'snapshot.json'}",
            )


def _check_plan_flags(args: argparse.Namespace) -> None:
    """--model, --batch and --device go with --log; --batch and --device with --model."""
    if args.model is not None and args.log is None:
        raise UsageError(
            "--model answers an out-of-memory error of a log, and no --log was given",
            expected="tfaccel doctor --log FILE --model NAME|SCRIPT [--batch N] [--device KEY]",
            received=f"--model {args.model}",
            fix="add --log FILE (the log with the OOM error), or run tfaccel plan "
            f"{args.model} --batch N for the plan alone",
        )
    for flag, value in (("--batch", args.batch), ("--device", args.device)):
        if value is not None and args.model is None:
            raise UsageError(
                f"{flag} sizes the plan of --model, and no --model was given",
                expected="tfaccel doctor --log FILE --model NAME|SCRIPT " + flag + " ...",
                received=f"{flag} {value}",
                fix="add --model (a reference model name, or a script defining model_fn())",
            )
    if args.device is not None:
        from tfaccel.planning.targets import targets

        targets("float32", [args.device])  # an unknown key is refused before anything runs


def _answer_oom(log_report: Any, text: str, args: argparse.Namespace) -> None:
    """Replace the log's ``oom`` finding with one that carries the plan's answer."""
    from tfaccel.planning.advice import answer_log_oom, find_log_oom

    oom = find_log_oom(
        log_report,
        text,
        model=args.model,
        batch=args.batch,
        device_key=args.device,
        log_path=args.log,
    )
    if oom is None:
        return
    from tfaccel.cli._output import quiet_tensorflow

    quiet_tensorflow()
    from tfaccel.planning.source import model_fn_for

    answer_log_oom(log_report, oom, model_fn_for(args.model))
