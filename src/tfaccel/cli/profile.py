"""``tfaccel profile``: what limits training, measured and said in plain words.

Two forms:

* ``tfaccel profile [OPTIONS] SCRIPT [ARGS...]`` runs the script as ``__main__`` (like
  ``tfaccel run``) with a ``PerformanceCallback`` added to each ``model.fit`` and the training
  data instrumented, or reports the ``tfaccel.profile.StepTimer`` its custom loop uses.
* ``tfaccel profile --model reference-cnn [--steps N] [--batch-size B] [--trace DIR]`` trains a
  reference model for N steps on synthetic data.

With ``--nsys``, either form runs as the child of Nsight Systems' ``nsys profile``
(:mod:`tfaccel.profile.nsys`), whose report (``--nsys-output DIR``) holds the CUDA timeline with
tfaccel's NVTX step ranges; without nsys installed, the error says how to get it.

Both print a table (step time split into input wait, step and host overhead; examples/s;
memory; GPU use), the top ops of a trace with ``--trace DIR``, and the diagnosis: each
finding with its evidence, the fix and the predicted gain, through the terminal renderer of
every finding (``tfaccel.report.findings``). ``--json`` prints one JSON document on stdout
instead; the live lines, and a script's own stdout, go to stderr. With ``--model``,
TensorFlow's start-up noise is kept off the terminal unless ``--verbose``; a script's own
output and TensorFlow's log in it are left as they are.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from tfaccel.cli._args import integer, refuse_unused
from tfaccel.cli._output import print_json, quiet_tensorflow, warn_options_after_script
from tfaccel.core.errors import UsageError
from tfaccel.inventory.precision import PRECISIONS

if TYPE_CHECKING:
    from tfaccel.profile import Diagnosis, Measurement

__all__ = ["FLAGS", "add_parser", "run"]

MODEL_DEFAULTS = {"batch_size": 64, "input": "pipeline", "precision": "float32"}
"""The ``--model`` options' values when not given (None in the parser, so that one given
with a script, where it does nothing, is refused)."""

# The library's argument names -> this command's flags, for the messages of its errors
# (tfaccel.cli.main applies it).
FLAGS = {"trace_dir": "--trace", "output_dir": "--nsys-output"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "profile",
        help="measure what limits training (input, Python, memory...) and what to change",
        description=(
            "Profile a script's model.fit (or its tfaccel.profile.StepTimer loop), or a "
            "reference model with --model. Options go before SCRIPT; everything after it is "
            "passed to the script, whose exit status is returned. With --json the script's own "
            "stdout goes to stderr."
        ),
        allow_abbrev=False,
    )
    p.add_argument(
        "--model",
        metavar="NAME",
        help="profile a reference model instead of a script: reference-cnn, mlp, resnet20",
    )
    p.add_argument(
        "--steps",
        type=integer("--steps", example=50),
        metavar="N",
        help="--model: measured steps after warm-up (default 50); script: stop each fit "
        "after warm-up + N steps (default: run to the end)",
    )
    p.add_argument(
        "--warmup",
        type=integer("--warmup", example=5, minimum=0),
        default=5,
        metavar="N",
        help="warm-up steps (default 5)",
    )
    p.add_argument(
        "--batch-size",
        type=integer("--batch-size", example=64),
        default=None,
        metavar="B",
        help="--model: batch size (default 64)",
    )
    p.add_argument(
        "--input",
        choices=("pipeline", "generator"),
        default=None,
        help="--model: feed through tfaccel.data.pipeline (default) or a naive from_generator",
    )
    p.add_argument(
        "--precision",
        default=None,
        choices=PRECISIONS,
        help="--model: Keras dtype policy (default float32)",
    )
    p.add_argument("--tiny", action="store_true", help="--model: the small version (smoke runs)")
    p.add_argument(
        "--trace",
        metavar="DIR",
        help="capture a TensorFlow Profiler trace in DIR (tensorboard --logdir DIR) and list "
        "the top ops by self time",
    )
    p.add_argument(
        "--trace-steps",
        type=integer("--trace-steps", example=20),
        default=20,
        metavar="N",
        help="steps in the trace (default 20)",
    )
    p.add_argument(
        "--top",
        type=integer("--top", example=10),
        default=10,
        metavar="N",
        help="ops listed (default 10)",
    )
    p.add_argument(
        "--nsys",
        action="store_true",
        help="run the profile under Nsight Systems (nsys profile --trace=cuda,nvtx,cudnn,cublas,"
        "osrt): a .nsys-rep report with the CUDA timeline and tfaccel's NVTX step ranges "
        "(needs nsys; not with --trace)",
    )
    p.add_argument(
        "--nsys-output",
        metavar="DIR",
        default=None,
        help="--nsys: the directory of the report tfaccel-YYYYmmdd-HHMMSS.nsys-rep (default: "
        "the working directory)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (a script's own stdout goes to stderr)",
    )
    p.add_argument("--quiet", action="store_true", help="no live line during training")
    p.add_argument(
        "script_and_args",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [ARGS ...]",
        help="the Python script and its own arguments",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Profile the model or the script; print the report; return 0 or the script's status."""
    from tfaccel.profile import command

    if args.model and args.script_and_args:
        raise UsageError(
            "Give either --model or a SCRIPT, not both",
            expected="tfaccel profile --model NAME, or tfaccel profile [OPTIONS] SCRIPT",
            received=f"--model {args.model} and {args.script_and_args[0]!r}",
            fix="drop one of them",
        )
    if args.model is not None:
        from tfaccel.models import model_key

        model_key(args.model)  # an unknown or empty name, before TensorFlow starts
    if not args.nsys:
        refuse_unused(
            (("--nsys-output", args.nsys_output),),
            applies="to --nsys",
            expected="tfaccel profile --nsys --nsys-output DIR train.py",
            fix="add --nsys, or drop {flag}",
        )
    if args.model:
        for name, default in MODEL_DEFAULTS.items():
            if getattr(args, name) is None:
                setattr(args, name, default)
    else:
        refuse_unused(
            (
                ("--batch-size", args.batch_size),
                ("--input", args.input),
                ("--precision", args.precision),
                ("--tiny", args.tiny),
            ),
            applies="to --model (a reference model, built and fed by tfaccel)",
            expected="tfaccel profile --model reference-cnn --batch-size 128, or tfaccel "
            "profile train.py",
            fix="drop {flag}: a script is profiled as it trains, with its own batch size, input "
            "and precision (tfaccel run --precision mixed_bfloat16 train.py sets a precision "
            "without changing the script)",
        )
    if args.nsys:
        return _run_under_nsys(args)
    if args.model:
        request: dict[str, Any] = {
            "steps": 50 if args.steps is None else args.steps,
            "warmup": args.warmup,
            "batch_size": args.batch_size,
            "input": args.input,
            "trace_dir": args.trace,
            "trace_steps": args.trace_steps,
        }
        # A mistake is said at once, before TensorFlow starts.
        command.check_model_request(args.model, **request)
        quiet_tensorflow()
        try:
            profile = command.profile_model(
                args.model, precision=args.precision, tiny=args.tiny, live=not args.quiet, **request
            )
        except Exception as exc:
            from tfaccel.tuning.batch import is_oom_error

            if not is_oom_error(exc):
                raise
            return _out_of_memory(args, exc)
        if args.json:
            print_json({"command": "profile", **profile.to_dict()})
        else:
            _print_report(profile.measurement, profile.diagnosis, args.top)
        return 0
    from tfaccel.scripts import run_script, split_command

    script, script_args = split_command(
        args.script_and_args, command="profile", example="--steps 100 train.py"
    )
    warn_options_after_script("profile", getattr(args, "own_options", ()), script, script_args)
    result = command.profile_script(
        script,
        script_args,
        run_script,
        steps=args.steps,
        warmup=args.warmup,
        trace_dir=args.trace,
        trace_steps=args.trace_steps,
        live=not args.quiet,
    )
    if args.json:
        print_json({"command": "profile", **result.to_dict()})
    else:
        for label, measurement, diagnosis in result.runs:
            if len(result.runs) > 1:
                print(f"== {label} ==")
            _print_report(measurement, diagnosis, args.top)
    return result.exit_status


def _run_under_nsys(args: argparse.Namespace) -> int:
    """Check the request, then run this same profile as the child of ``nsys profile``."""
    from tfaccel.profile import command, nsys

    if args.trace:
        raise UsageError(
            "Give either --trace or --nsys, not both",
            expected="--trace DIR (a TensorFlow Profiler trace) or --nsys (an Nsight Systems "
            "report): both trace CUDA through CUPTI, which only one of them can hold",
            received=f"--trace {args.trace} --nsys",
            fix="drop --trace: the Nsight Systems report has the kernels and the NVTX steps",
        )
    inner = ["--warmup", str(args.warmup)]
    if args.steps is not None:
        inner += ["--steps", str(args.steps)]
    if args.quiet:
        inner.append("--quiet")
    if args.verbose:
        inner.append("--verbose")
    if args.model:
        steps = 50 if args.steps is None else args.steps
        command.check_model_request(
            args.model,
            steps=steps,
            warmup=args.warmup,
            batch_size=args.batch_size,
            input=args.input,
        )
        inner += ["--model", args.model, "--batch-size", str(args.batch_size)]
        inner += ["--input", args.input, "--precision", args.precision]
        if args.tiny:
            inner.append("--tiny")
    else:
        from tfaccel.scripts import split_command

        script, script_args = split_command(
            args.script_and_args, command="profile", example="--nsys train.py"
        )
        warn_options_after_script("profile", getattr(args, "own_options", ()), script, script_args)
        inner += [script, *script_args]
    program = [sys.executable, "-m", "tfaccel", "profile", *inner]
    try:
        run = nsys.profile(program, output_dir=args.nsys_output or ".")
    except nsys.NsysNotFoundError as exc:
        if args.json:
            print_json({"command": "profile", "nsys": exc.to_dict()})
        raise
    if args.json:
        print_json({"command": "profile", "nsys": run.to_dict()})
    elif run.report_written:
        print(
            f"tfaccel profile: the Nsight Systems report is {run.report}\n"
            f"  open it with nsys-ui, or summarise it: nsys stats --report "
            f"nvtx_sum,cuda_gpu_kern_sum {run.report}"
        )
    for note in run.notes:
        print(f"tfaccel profile: {note}", file=sys.stderr)
    if not run.report_written and run.exit_status == 0:
        return 1
    return run.exit_status


def _print_report(measurement: Measurement, diagnosis: Diagnosis, top: int) -> None:
    """The tables as plain text, then the findings, most severe first, with their evidence."""
    from tfaccel.profile import text
    from tfaccel.report.findings import findings_terminal
    from tfaccel.report.text import console

    print(text.tables(measurement, top=top), text.heading(diagnosis), sep="\n\n")
    if diagnosis.refused is None:
        console().print(findings_terminal(diagnosis.ranked, verbose=True))


def _out_of_memory(args: argparse.Namespace, exc: BaseException) -> int:
    """The run ran out of memory: print the plan's answer (the batch that fits) and exit 1."""
    import functools

    from tfaccel.core.findings import text_lines
    from tfaccel.planning.advice import answer_oom_error
    from tfaccel.profile.command import build_model

    model_fn = functools.partial(build_model, args.model, precision=args.precision, tiny=args.tiny)
    finding = answer_oom_error(exc, model_fn, args.batch_size, args.precision)
    if args.json:
        print_json({"command": "profile", "model": args.model, "findings": [finding.to_dict()]})
    else:
        print("\n".join(text_lines([finding])))
    return 1
