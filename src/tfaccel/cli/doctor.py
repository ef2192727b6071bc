"""``tfaccel doctor``: why TensorFlow does or does not use the GPU, and the fix."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
from pathlib import Path
from typing import Any

from tfaccel.cli._args import add_capture_options, capture_timeout, integer, seconds
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
    "fit": "--fit",
    "timeout": "--timeout",
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
        help="with --log showing an out-of-memory error: the model that ran out: a reference "
        "model name, a script defining model_fn(), or your training script as written, run "
        "up to its model.fit as tfaccel plan runs it (its own arguments in the same quoted "
        "value: --model 'train.py --epochs 3'); the oom finding then says what the batch "
        "needs, what the device has, and the batch or gradient accumulation that fits (a "
        "prediction of tfaccel plan)",
    )
    p.add_argument(
        "--batch",
        type=integer("--batch", example=256),
        metavar="N",
        help="with --model: the batch that ran out (default: a training script's own batch, "
        "else the first dimension of the tensor the log failed to allocate)",
    )
    add_capture_options(
        p,
        "with --model SCRIPT: plan",
        timeout_help="with --model SCRIPT: the time the script may take to reach model.fit "
        "(default 300)",
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
        if getattr(args, name) is not None:
            check_file_name(getattr(args, name), argument_name=name, reading=True)
    _check_plan_flags(args)
    if args.save_snapshot:
        # before the probe, which may take minutes
        check_writable_file(
            args.save_snapshot,
            argument_name="path",
            replaces=(b'"schema_version"', "a snapshot tfaccel saved"),
        )
    if args.bundle:
        check_writable_file(
            args.bundle,
            argument_name="bundle",
            replaces=(b'"tfaccel_bundle"', "a bundle tfaccel wrote"),
        )
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
    if args.snapshot is not None:
        check_file_name(args.snapshot, argument_name="snapshot", reading=True)
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
    """--model, --batch, --device, --fit and --timeout go with --log; the last four with
    --model; a script named by --model must be a readable Python file, any other --model a
    reference model's name (checked before anything runs, without TensorFlow, whether or not
    the log holds an out-of-memory error)."""
    if args.model is not None and args.log is None:
        raise UsageError(
            "--model answers an out-of-memory error of a log, and no --log was given",
            expected="tfaccel doctor --log FILE --model NAME|SCRIPT [--batch N] [--device KEY]",
            received=f"--model {args.model}",
            fix="add --log FILE (the log with the OOM error), or run "
            + (
                f"tfaccel plan --batch N {args.model}"  # a script: plan's options before it
                if args.model.split()[:1] and args.model.split()[0].endswith(".py")
                else f"tfaccel plan --model {args.model} --batch N"
            )
            + " for the plan alone",
        )
    given = (
        ("--batch", args.batch),
        ("--device", args.device),
        ("--fit", args.fit),
        ("--timeout", args.timeout),
    )
    for flag, value in given:
        if value is not None and args.model is None:
            raise UsageError(
                f"{flag} sizes the plan of --model, and no --model was given",
                expected="tfaccel doctor --log FILE --model NAME|SCRIPT " + flag + " ...",
                received=f"{flag} {value}",
                fix="add --model (a reference model name, a script defining model_fn(), or "
                "your training script)",
            )
    capture_timeout(args.timeout)
    if args.model is not None:
        script, script_args = _script_words(args.model)
        if script is not None:
            from tfaccel.scripts import check_script, check_source, defines_hooks

            check_script(
                script,
                "doctor",
                expected="a Python file",
                directory=False,
                usage="the script's own arguments go in the same value: --model 'train.py "
                "--epochs 3'",
            )
            check_source(script, "doctor")
            if script_args and defines_hooks(script):
                raise UsageError(
                    f"The script {Path(script).name} defines model_fn(), which takes no "
                    "arguments, and --model gives it some",
                    expected="--model SCRIPT alone for a script defining model_fn()",
                    received=f"--model {args.model!r}",
                    fix=f"pass --model {shlex.quote(script)}",
                )
        else:
            from tfaccel.models import model_key

            model_key(args.model)  # an unknown name, also for a log with no OOM error
    if args.device is not None:
        from tfaccel.planning.targets import targets

        targets("float32", [args.device])  # an unknown key is refused before anything runs


def _script_words(model: str) -> tuple[str | None, list[str]]:
    """``(SCRIPT, ARGS)`` when ``--model`` names a script (its arguments in the same value,
    split as a shell splits them), else ``(None, [])`` for a reference model's name."""
    if os.path.isfile(model):
        return model, []
    try:
        words = shlex.split(model)
    except ValueError as exc:
        raise UsageError(
            "--model is not a script and its arguments as a shell would split them",
            expected="--model 'train.py --epochs 3' (a quote closed), or a reference model name",
            received=f"--model {model!r}: {exc}",
            fix="close the quote, or quote the whole value once",
        ) from None
    from tfaccel.planning.source import names_script

    if words and names_script(words[0]):
        return words[0], words[1:]
    return None, []


def _answer_oom(log_report: Any, text: str, args: argparse.Namespace) -> None:
    """Replace the log's ``oom`` finding with one that carries the plan's answer: for a
    reference model, a script defining ``model_fn()``, or a training script as written
    (captured at its ``fit`` here, as ``tfaccel plan SCRIPT`` does, only once the log shows an
    out-of-memory error)."""
    from tfaccel.cli._output import quiet_tensorflow
    from tfaccel.planning.advice import answer_log_oom, find_log_oom
    from tfaccel.scripts import defines_hooks

    script, script_args = _script_words(args.model)
    as_written = script is not None and not defines_hooks(script)
    captured: list[Any] = []

    def own_batch() -> tuple[int | None, str]:
        captured.append(_capture(script, script_args, args))
        workload = captured[0]
        return workload.batch_size, f"the script's own ({workload.batch_source})"

    oom = find_log_oom(
        log_report,
        text,
        model=args.model,
        batch=args.batch,
        device_key=args.device,
        log_path=args.log,
        own_batch=own_batch if as_written else None,
    )
    if oom is None:
        return
    quiet_tensorflow()
    if not as_written:
        from tfaccel.planning.source import model_fn_for

        answer_log_oom(log_report, oom, model_fn_for(script or args.model))
        return
    from tfaccel.planning.source import origin_note, workload_model

    workload = captured[0] if captured else _capture(script, script_args, args)
    model, optimizer, notes = workload_model(workload)
    evidence = [*oom.evidence, origin_note(workload), *notes]
    answer_log_oom(
        log_report, dataclasses.replace(oom, evidence=evidence), model, optimizer=optimizer
    )


def _capture(script: Any, script_args: list[str], args: argparse.Namespace) -> Any:
    """The workload of the training script ``--model`` names, taken at its ``--fit``-th fit."""
    from tfaccel.cli._output import quiet_tensorflow

    quiet_tensorflow()
    from tfaccel.workload import DEFAULT_TIMEOUT_S, capture, no_fit_explained

    timeout = capture_timeout(args.timeout) or DEFAULT_TIMEOUT_S
    with no_fit_explained(
        script,
        expected="a script that trains with model.fit (planned where it calls it), marks its "
        "own training loop, or defines model_fn()",
    ):
        return capture(script, script_args, fit=args.fit or 1, timeout=timeout, command="doctor")
