"""``tfaccel run [OPTIONS] SCRIPT [ARGS...]``: set the runtime up, then run a script unchanged.

The script runs in this process as ``__main__`` (like ``python SCRIPT ARGS...``) after
``tfaccel.setup()`` applied the options, so it needs no tfaccel code. ``sys.argv`` is
``[SCRIPT, *ARGS]``; its exit status is this command's; an exception in it prints its own
traceback (not tfaccel's) and exits 1. tfaccel's options go before SCRIPT, everything after
SCRIPT belongs to the script (a tfaccel option found there gets a warning). With ``--json``
the script's stdout goes to stderr and, once it ended, stdout gets one JSON document: the
script, its arguments, its exit status and the applied configuration.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tfaccel.cli._args import integer, refuse_unused
from tfaccel.cli._output import print_json, warn_options_after_script
from tfaccel.core.errors import UsageError
from tfaccel.core.files import check_writable_file, write_atomic
from tfaccel.scripts import run_script, split_command

__all__ = ["add_parser", "run"]

FLAGS = {"json_config": "--json-config", "fit": "--fit"}

# option -> the setup() setting it sets; values are parsed by tfaccel.runtime.parse_setting
_OPTIONS = {
    "--devices": "devices",
    "--memory": "memory",
    "--precision": "precision",
    "--jit": "jit",
    "--threads": "threads",
    "--logical-devices": "logical_devices",
    "--seed": "seed",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="set up devices, memory, precision, XLA and threads, then run a script",
        description=(
            "Apply tfaccel.setup() with these options, then run SCRIPT in this process as "
            "__main__ with sys.argv = [SCRIPT, ARGS...]. Options go before SCRIPT; everything "
            "after it is passed to the script. Each option also has a TFACCEL_* variable "
            "(TFACCEL_MEMORY=growth); options win. The script's exit status is returned."
        ),
        allow_abbrev=False,  # `--json x.py` must not be read as `--json-config x.py`
    )
    p.add_argument("--devices", metavar="IDS", help="GPUs to use: indices ('0,1'), 'all' or 'none'")
    p.add_argument(
        "--memory",
        metavar="M",
        help="'growth', a per-GPU limit in MiB (4096) or a fraction of GPU memory (0.5)",
    )
    p.add_argument(
        "--precision",
        metavar="P",
        help="auto, float32, mixed_float16 or mixed_bfloat16 (Keras global policy)",
    )
    p.add_argument("--jit", metavar="J", help="XLA auto-clustering: auto, on or off")
    p.add_argument("--threads", metavar="N[,M]", help="intra-op threads, or intra,inter ('4,2')")
    p.add_argument(
        "--logical-devices",
        metavar="N",
        help="split the first GPU (or the CPU) into N logical devices",
    )
    p.add_argument("--deterministic", action="store_true", help="turn op determinism on (slower)")
    p.add_argument("--seed", metavar="N", help="seed Python, NumPy and TensorFlow")
    p.add_argument(
        "--json-config",
        metavar="FILE",
        help="also write the applied configuration as JSON to FILE",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="when the script has ended, print one JSON document on stdout (script, args, "
        "exit_status, config); the script's own stdout goes to stderr meanwhile",
    )
    p.add_argument(
        "--tuned",
        action="store_const",
        const="on",
        help="apply the configuration `tfaccel tune SCRIPT` stored for the model the script "
        "builds (found by its architecture): precision, XLA, steps per execution, feed; "
        "--tuned=all also its batch size (scale your learning rate with it). A script unchanged "
        "since its tune (same content and arguments) starts at once; otherwise it is first run "
        "up to its fit to read its model. Without a stored result the script runs as written",
    )
    # its own option string, so that `--tuned train.py` never reads the script as a value
    p.add_argument(
        "--tuned=all",
        dest="tuned",
        action="store_const",
        const="all",
        help="--tuned, and the batch size the tune found",
    )
    p.add_argument(
        "--db",
        metavar="PATH",
        help="with --tuned: the results database (default $XDG_DATA_HOME/tfaccel/results.sqlite)",
    )
    p.add_argument(
        "--fit",
        type=integer("--fit", example=2),
        default=None,
        metavar="N",
        help="with --tuned: the script's N-th model.fit is the one tuned (tfaccel tune --fit "
        "N), e.g. 2 for fine-tuning after a first fit; the winner applies from that call on "
        "(default 1)",
    )
    p.add_argument("--quiet", action="store_true", help="do not print the configuration to stderr")
    p.add_argument(
        "script_and_args",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [ARGS ...]",
        help="the Python script and its own arguments",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Set the runtime up as the options say, run the script, return its exit status."""
    from tfaccel import runtime

    mode = _tuned_mode(args)
    script, script_args = split_command(args.script_and_args)
    warn_options_after_script("run", getattr(args, "own_options", ()), script, script_args)
    settings = _settings(args)
    if mode is not None:
        _check_tuned(args, settings)
    else:
        refuse_unused(
            (("--fit", args.fit), ("--db", args.db)),
            applies="to --tuned (the fit the tune measured, the database it stored in)",
            expected="tfaccel run --tuned --fit 2 --db results.sqlite train.py",
            fix="add --tuned, or drop {flag}",
        )
    if args.json_config is not None:  # checked before anything is set up or run ('' too)
        check_writable_file(
            args.json_config,
            argument_name="json_config",
            replaces=(b'"settings"', "a configuration tfaccel wrote"),
        )
    config = runtime.setup(**settings)
    if not (args.quiet or args.json):
        print(config, file=sys.stderr)
    if args.json_config is not None:
        _write_config(Path(args.json_config), config.to_json())
    tuned = None
    if mode is None:
        status = run_script(script, script_args)
    else:
        from tfaccel.tuning.tuned import applied, prepare

        tuned = prepare(script, script_args, mode=mode, db=args.db, fit=args.fit or 1)
        with applied(tuned):
            status = run_script(script, script_args)
    if args.json:
        document = {
            "command": "run",
            "script": script,
            "args": script_args,
            "exit_status": status,
            "config": config.to_dict(),
        }
        if tuned is not None:
            document["tuned"] = tuned.to_dict()
        print_json(document)
    return status


def _tuned_mode(args: argparse.Namespace) -> str | None:
    """``on`` (``--tuned``), ``all`` (``--tuned=all``) or None."""
    value = getattr(args, "tuned", None)
    return None if value is None else str(value)


def _check_tuned(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    both = [f"--{name}" for name in ("precision", "jit") if name in settings]
    if both:
        raise UsageError(
            f"--tuned and {' '.join(both)} both set what the tune measured",
            expected="--tuned (the stored winner's settings) or the setting itself",
            received=f"--tuned with {' '.join(both)}",
            fix=f"drop {' '.join(both)}, or drop --tuned",
        )


def _write_config(path: Path, text: str) -> None:
    """The configuration as JSON, written atomically (:func:`tfaccel.core.files.write_atomic`)."""
    write_atomic(path, text + "\n", argument_name="json_config")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    from tfaccel.runtime import parse_setting

    settings: dict[str, Any] = {}
    for option, name in _OPTIONS.items():
        text = getattr(args, name)
        if text is not None:
            settings[name] = parse_setting(name, text, source=option)
    if args.deterministic:
        settings["deterministic"] = True
    return settings
