"""``tfaccel launch -n N [OPTIONS] SCRIPT [ARGS...]``: N local workers of one cluster.

Starts ``python SCRIPT ARGS`` N times with the ``TF_CONFIG`` of an N-worker cluster on free
loopback ports, prefixes each worker's output lines with its rank, stops every worker when one
fails (or on Ctrl-C) and exits with the failed worker's status; ``--restarts K`` restarts the
group up to K times. The work is :func:`tfaccel.distribute.launcher.launch`.

Also runnable alone: ``python -m tfaccel.cli.launch -n 2 train.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from typing import Any

from tfaccel.cli._args import number, refuse_unused, whole
from tfaccel.cli._output import json_document, print_json, warn_options_after_script
from tfaccel.core.errors import TfaccelError
from tfaccel.scripts import split_command

__all__ = ["add_parser", "main", "run"]

DESCRIPTION = (
    "Start N worker processes of one TensorFlow cluster on this machine: each runs "
    "'python SCRIPT ARGS' with its TF_CONFIG (a cluster of N workers on free ports of --host, "
    "127.0.0.1 by default) and TFACCEL_LAUNCH_RANK/_WORKERS/_ATTEMPT. The workers run in a "
    "private network namespace (loopback only, no outside network) where the system allows "
    "it, since TensorFlow's gRPC servers listen on every interface; otherwise a warning names "
    "the exposed ports first. Workers die with the launcher, however it dies. Output lines "
    "are prefixed with the worker's rank. When a worker fails the others are stopped "
    "(SIGTERM, then SIGKILL after --grace seconds, to each worker's process group) and the "
    "command exits with the failed worker's status (128+N when killed by signal N); with "
    "--hang-timeout S a group whose heartbeats stand still S seconds is stopped as hung "
    "(exit 124); a worker that saved on SIGTERM exits 75 (preempted). With --restarts K the "
    "whole group is restarted up to K times after any of these (a script training with "
    "tfaccel.distribute.train(checkpoint_dir=...) resumes from its last checkpoint). Ctrl-C "
    "stops every worker and exits 130. Options go before SCRIPT; everything after it is "
    "passed to the script."
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "launch",
        help="run a training script as N local workers of one cluster, restarting on failure",
        description=DESCRIPTION,
        allow_abbrev=False,
    )
    _arguments(p)
    p.set_defaults(handler=run)


def _arguments(p: argparse.ArgumentParser) -> None:
    from tfaccel.distribute.launcher import (
        DEFAULT_GRACE_S,
        DEFAULT_HOST,
        DEFAULT_STARTUP_TIMEOUT_S,
        OVERSUBSCRIBE_FACTOR,
    )

    p.add_argument(
        "-n",
        "--workers",
        type=whole("--workers", example=2),
        required=True,
        metavar="N",
        help=f"worker processes (>= 1; at most {OVERSUBSCRIBE_FACTOR} per usable core "
        "without --oversubscribe)",
    )
    p.add_argument(
        "--restarts",
        type=whole("--restarts", example=1),
        default=0,
        metavar="K",
        help="restart the whole group up to K times after a failure (default 0)",
    )
    p.add_argument(
        "--port-base",
        type=whole("--port-base", example=20000),
        metavar="P",
        help="use ports P..P+N-1 (checked to be free); default: free ports, new ones per restart",
    )
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"the address the workers reach each other at (default {DEFAULT_HOST})",
    )
    p.add_argument(
        "--grace",
        type=number("--grace", example=10),
        default=DEFAULT_GRACE_S,
        metavar="S",
        help=f"seconds from SIGTERM to SIGKILL when stopping workers (default {DEFAULT_GRACE_S:g})",
    )
    p.add_argument(
        "--hang-timeout",
        type=number("--hang-timeout", example=300),
        metavar="S",
        help="stop the group (and restart it, with --restarts) when no worker's heartbeat "
        "moves for S seconds; the worker furthest behind is named. Needs a script that "
        "reports its steps (tfaccel.distribute.train does; else tfaccel.distribute.heartbeat). "
        "Default: no hang watch",
    )
    p.add_argument(
        "--startup-timeout",
        type=number("--startup-timeout", example=600),
        default=None,
        metavar="S",
        help="with --hang-timeout, the allowance until every worker has finished its first "
        f"step (TensorFlow's import, the cluster's start, the first trace); default "
        f"{DEFAULT_STARTUP_TIMEOUT_S:g}",
    )
    p.add_argument(
        "--no-isolate",
        dest="isolate",
        action="store_false",
        help="give the workers this machine's network instead of a private loopback-only "
        "namespace (their gRPC ports are then open on every interface: a warning says which)",
    )
    p.add_argument(
        "--oversubscribe",
        action="store_true",
        help=f"start more than {OVERSUBSCRIBE_FACTOR} workers per usable core all the same",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (exit code, isolation, attempts with their ports, exit "
        "statuses, outcome and reason) on stdout; "
        "the workers' output then goes to stderr",
    )
    p.add_argument(
        "script_and_args",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [ARGS ...]",
        help="the Python script and its own arguments",
    )


def run(args: argparse.Namespace) -> int:
    """Launch the workers as the options say; return the exit status (see the description)."""
    from tfaccel.distribute.launcher import DEFAULT_STARTUP_TIMEOUT_S, launch

    script, script_args = split_command(
        args.script_and_args, command="launch", example="-n 2 train.py --epochs 3", check=False
    )  # launch() checks the script after its own arguments
    warn_options_after_script("launch", getattr(args, "own_options", ()), script, script_args)
    if args.hang_timeout is None:
        refuse_unused(
            (("--startup-timeout", args.startup_timeout),),
            applies="to --hang-timeout (the allowance of the hang watch for the first step)",
            expected="tfaccel launch -n 2 --hang-timeout 300 --startup-timeout 900 train.py",
            fix="add --hang-timeout S, or drop {flag}",
        )
    result = launch(
        script,
        script_args,
        workers=args.workers,
        restarts=args.restarts,
        host=args.host,
        port_base=args.port_base,
        grace_s=args.grace,
        isolate=args.isolate,
        oversubscribe=args.oversubscribe,
        hang_timeout_s=args.hang_timeout,
        startup_timeout_s=(
            args.startup_timeout if args.startup_timeout is not None else DEFAULT_STARTUP_TIMEOUT_S
        ),
        stdout=sys.stderr if args.json else sys.stdout,
    )
    if args.json:
        print_json(result.to_dict())
    return result.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """``tfaccel launch`` on its own: parse ``argv`` (default ``sys.argv[1:]``), run, return
    the exit status; a TfaccelError prints its message and returns its exit code (2)."""
    parser = argparse.ArgumentParser(
        prog="tfaccel launch", description=DESCRIPTION, allow_abbrev=False
    )
    _arguments(parser)
    args = parser.parse_args(argv)
    args.own_options = tuple(o for action in parser._actions for o in action.option_strings)
    try:
        with json_document() if args.json else contextlib.nullcontext():
            return run(args)
    except TfaccelError as exc:
        print(f"tfaccel: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tfaccel: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
