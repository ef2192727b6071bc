"""``tfaccel tune SCRIPT [ARGS...] | --model NAME``: find the fastest configuration, store it
for setup().

SCRIPT is a training script as written: it runs with ARGS up to its ``model.fit``, where its
model, compile arguments and data are taken (nothing trains); the trials vary what wraps them,
and the script's own configuration is timed against the winner. A script defining
``model_fn()`` (or ``tfaccel_tune()``) is read as before, and its words after SCRIPT are this
command's own options.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from tfaccel.cli._args import (
    OwnOptions,
    add_capture_options,
    add_script_arguments,
    capture_timeout,
    fraction,
    integer,
    refuse_unused,
    script_words,
    seconds,
)
from tfaccel.cli._output import print_json, quiet_tensorflow, warn_options_after_script
from tfaccel.core.errors import UsageError

__all__ = ["EXIT_INTERRUPTED", "FLAGS", "add_parser", "run"]

EXIT_INTERRUPTED = 130

# The arguments of tfaccel.tuning.tune_model / tune_script -> this command's flags, so an error
# raised by the library names what the user typed (tfaccel.cli.main applies it).
FLAGS = {
    "budget_s": "--budget",
    "space": "--space",
    "batch_cap": "--batch-cap",
    "margin": "--margin",
    "sample_s": "--sample-seconds",
    "final_rounds": "--rounds",
    "store": "--db",
    "name": "--model",
    "path": "SCRIPT",
    "smoke": "--smoke",
    "fit": "--fit",
    "timeout": "--timeout",
}
WEEK_S = 7 * 24 * 3600.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tune",
        help="find the fastest batch size, precision, XLA and input settings for a model",
        description=(
            "Search batch size (up to the largest that fits in memory), precision, XLA, the "
            "input feed (fit on arrays or tfaccel.data.pipeline) and its knobs, and thread "
            "counts, within a time budget. Candidates are timed interleaved; losers are dropped "
            "early; a configuration wins only when it is faster beyond the noise, else the "
            "simpler one does. The winner is stored in the results database, where "
            "tfaccel.setup(precision='auto', jit='auto') finds it. SCRIPT is your training "
            "script as written: it runs with ARGS up to its model.fit (--fit N: the N-th), "
            "where its model, compile arguments and data are taken and it stops (nothing "
            "trains, its callbacks never run); each precision's model is the script's, built "
            "again under that precision; your own batch, precision and compile are timed "
            "against the winner, and kept unless it is faster beyond the noise. A SCRIPT "
            "defining model_fn() and data (or tfaccel_tune()) is read as before. Ctrl-C stops "
            "and prints the best so far."
        ),
    )
    _add_options(p)
    add_script_arguments(p)
    p.set_defaults(handler=run)


def _add_options(p: Any) -> None:
    p.add_argument(
        "--model",
        metavar="NAME",
        help="tune a reference model on synthetic data instead: reference-cnn, mlp, resnet20",
    )
    p.add_argument(
        "--budget",
        type=seconds("--budget", example=300, maximum=WEEK_S),
        default=None,
        metavar="SECONDS",
        help="time the search may take (default 300)",
    )
    p.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="KEY=VALUES",
        help="values to search for one setting, repeatable: batch_size=64,128,256 (or auto), "
        "precision=float32,mixed_bfloat16 (or auto), jit=off,on, steps_per_execution=1,8, "
        "feed=numpy,pipeline, "
        "cache=auto,off, prefetch=auto,1,0, num_parallel_calls=auto,1, threads=default,2:1",
    )
    p.add_argument(
        "--batch-cap",
        type=integer("--batch-cap", example=1024),
        metavar="N",
        help="largest batch size to try",
    )
    p.add_argument(
        "--margin",
        type=fraction("--margin", example=0.1),
        default=0.1,
        metavar="F",
        help="fraction kept below the largest batch that fitted in memory (default 0.1)",
    )
    p.add_argument(
        "--sample-seconds",
        type=seconds("--sample-seconds", example=1.0, maximum=3600.0),
        default=1.0,
        metavar="S",
        help="length of one timed sample (default 1.0)",
    )
    p.add_argument(
        "--rounds",
        type=integer("--rounds", example=5, maximum=1000),
        default=5,
        metavar="N",
        help="interleaved rounds of the final comparison (default 5)",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="with --model: the tiny model on 512 examples (checks the machinery only)",
    )
    p.add_argument(
        "--db",
        metavar="PATH",
        help="results database (default $XDG_DATA_HOME/tfaccel/results.sqlite)",
    )
    p.add_argument("--no-save", action="store_true", help="do not store the result")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_capture_options(
        p,
        "tune",
        timeout_help="the time the script may take to reach model.fit, each time it runs "
        "(default 300)",
    )


def run(args: argparse.Namespace) -> int:
    """Tune the script or model; print the result (text or JSON); 130 when interrupted.

    A script's budget counts from here: TensorFlow's import and the script's run to its fit
    are spent from it, as the user's clock sees them."""
    started = time.monotonic()
    from tfaccel.cli.bench import check_db
    from tfaccel.models import model_key
    from tfaccel.scripts import defines_hooks, split_command
    from tfaccel.tuning.api import DEFAULT_BUDGET_S, check_numbers, tune_model, tune_script
    from tfaccel.tuning.hooks import check_tune_script
    from tfaccel.tuning.space import parse_space, parse_space_text

    words = script_words(args)
    args.script = words[0] if words else None
    script_args: list[str] = []
    if words and words[0]:
        args.script, script_args = split_command(words, command="tune", check=False)
        if script_args and (not os.path.isfile(args.script) or defines_hooks(args.script)):
            # a script defining model_fn takes no arguments: these are tune's own options
            OwnOptions("tune", _add_options).parse_args(script_args, namespace=args)
            script_args = []
        elif script_args:
            warn_options_after_script(
                "tune", getattr(args, "own_options", ()), args.script, script_args
            )
    if bool(args.script) == bool(args.model):
        raise UsageError(
            "Tell tfaccel tune what to tune: a SCRIPT or --model, "
            + ("not both" if args.model else "neither was given"),
            expected="tfaccel tune train.py, or tfaccel tune --model reference-cnn",
            received=f"SCRIPT={args.script!r}, --model={args.model!r}",
            fix="pass exactly one of them",
        )
    if args.model:
        refuse_unused(
            (("--fit", args.fit), ("--timeout", args.timeout)),
            applies="to a training script (the fit it is tuned at, the time to reach it)",
            expected="tfaccel tune --fit 2 train.py, or tfaccel tune --model reference-cnn",
            fix="drop {flag}: a reference model is built, not run up to a fit",
        )
    else:
        refuse_unused(
            (("--smoke", args.smoke),),
            applies="to --model",
            expected="tfaccel tune --model reference-cnn --smoke",
            fix="drop {flag}, or tune a reference model",
        )
    options: dict[str, Any] = {
        "space": parse_space_text(args.space) or None,
        "batch_cap": args.batch_cap,
        "margin": args.margin,
        "sample_s": args.sample_seconds,
        "final_rounds": args.rounds,
        "store": False if args.no_save else (args.db or True),
        "progress": not args.no_progress,
    }
    if args.budget is not None:
        options["budget_s"] = args.budget
    check_numbers(**{"budget_s": DEFAULT_BUDGET_S, **options})  # before TensorFlow starts
    check_db(args, compare=False)
    parse_space(options["space"])  # the values too, before TensorFlow starts
    if args.model:
        model_key(args.model)  # an unknown name, before TensorFlow starts
    else:
        check_tune_script(args.script)
        timeout = capture_timeout(args.timeout)  # a bad --timeout, before TensorFlow starts
    quiet_tensorflow()  # TensorFlow's start-up notices and retracing warnings, unless --verbose
    if args.model:
        result = tune_model(args.model, smoke=args.smoke, **options)
    else:
        result = tune_script(
            args.script,
            args=script_args,
            fit=args.fit or 1,
            timeout=timeout,
            started=started,
            **options,
        )
    if args.json:
        print_json(result.to_dict())
    else:
        print(result)
    return EXIT_INTERRUPTED if result.interrupted else 0
