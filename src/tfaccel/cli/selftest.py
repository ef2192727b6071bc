"""``tfaccel selftest --gpu``: everything that needs a GPU, each step its own process, one summary.

The workflow is :func:`tfaccel.selftest.run_gpu_selftest`; this module parses the flags,
calls it (or, with ``--list``, shows its steps), renders the result and maps it to the exit code:
0 when no step failed (or there is no GPU: skipped, with the reason), 1 when a step failed or
timed out, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tfaccel.cli._args import seconds
from tfaccel.cli._output import RichProgress, print_json
from tfaccel.core.errors import UsageError

__all__ = ["FLAGS", "add_parser", "run"]

# The library's argument names -> this command's flags, for the messages of its errors
# (tfaccel.cli.main applies it).
FLAGS = {"out": "--out", "budget_s": "--budget"}

DEFAULT_BUDGET_S = 570.0  # tfaccel.selftest.DEFAULT_BUDGET_S, without importing it here
EXIT_CODE = {"passed": 0, "skipped": 0, "failed": 1, "interrupted": 130}


def add_parser(sub: Any) -> None:
    """Register ``tfaccel selftest`` on the CLI's subparsers."""
    p = sub.add_parser(
        "selftest",
        help="check tfaccel on this machine's GPU: the gpu tests, every command and setup "
        "mode, one summary",
        description=(
            "With --gpu: run every test marked gpu, devices --tf, doctor --deep, "
            "tfaccel.setup() in each GPU mode (memory growth, limit, fraction, logical GPUs, "
            "mixed_float16 with loss scaling, mixed_bfloat16, XLA) checked against TensorFlow, "
            "bench --quick, bench --kernels, profile, a short tune, the benchmark scripts of "
            "the clone and report, each as its own process with its own timeout, within one "
            "budget; a failure is recorded and the next step runs. Writes summary.json, each "
            "step's log and the report into --out. Without an NVIDIA GPU it says why and exits "
            "0, in about a second. Exit status 1 when a step failed or timed out. With "
            "--offline: only what needs no TensorFlow, with the packages already installed "
            "(summary.json and one steps.log); --simulate rehearses it without a GPU."
        ),
    )
    p.add_argument(
        "--gpu", action="store_true", help="run the GPU self-test (the one self-test there is)"
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="only the checks that need no TensorFlow and install nothing: devices against "
        "nvidia-smi, utilisation under load, doctor, the kernels (NumPy, copy bandwidth, "
        "cuBLAS), compute-sanitizer, Nsight Compute, NVTX, what a plan assumes of a GPU "
        "(PyTorch or CuPy), the gpu tests of tests/kernels; "
        "each runs where its modules and tools are found, else is skipped with the reason. "
        "One log file: steps.log",
    )
    p.add_argument(
        "--simulate",
        action="store_true",
        help="with --offline (implied): rehearse without a GPU, the kernels on numba-cuda's "
        "CUDA simulator; summary.json lists the steps that need the real GPU",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="directory for summary.json, logs/ and the report files "
        "(default ./gpu-check-YYYYMMDD-HHMMSS)",
    )
    p.add_argument(
        "--budget",
        type=seconds("--budget", example=int(DEFAULT_BUDGET_S)),
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=f"time for all the steps (default {DEFAULT_BUDGET_S:g}); the steps left when it "
        "is spent are skipped, with the reason",
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="print the steps (name, timeout, command) and run nothing",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the GPU self-test (or list its steps), print the table or the JSON document."""
    if not args.gpu:
        given = [
            flag for flag in ("--simulate", "--offline", "--list") if getattr(args, flag[2:], False)
        ]
        raise UsageError(
            "tfaccel selftest was not told which self-test to run"
            + (f" ({', '.join(given)} choose how the GPU self-test runs)" if given else ""),
            expected="--gpu (the GPU self-test, the one there is)",
            received="no --gpu" + (f", {' '.join(given)}" if given else ""),
            fix="tfaccel selftest --gpu (or make gpu-check)",
        )
    from tfaccel import selftest

    out = selftest.check_out_dir(args.out if args.out is not None else selftest.default_out())
    offline = args.offline or args.simulate
    if args.list:
        return _list(args, out, offline)
    with RichProgress("looking for an NVIDIA GPU") as progress:
        if offline:
            result = selftest.run_offline_selftest(
                out, budget_s=args.budget, progress=progress, simulate=args.simulate
            )
        else:
            result = selftest.run_gpu_selftest(out, budget_s=args.budget, progress=progress)
    if args.json:
        print_json(result.to_dict())
        return EXIT_CODE[result.status]
    from tfaccel.report.text import console
    from tfaccel.selftest.render import render_result

    console().print(render_result(result))
    return EXIT_CODE[result.status]


def _list(args: argparse.Namespace, out: Path, offline: bool) -> int:
    """``--list``: the steps as they would run here, and whether the self-test would skip."""
    from tfaccel import selftest

    missing, _ = selftest.probe_machine()
    kind = ("gpu-simulated" if args.simulate else "gpu-offline") if offline else "gpu"
    if offline:
        from tfaccel.selftest.offline import discover, plan_offline_steps

        steps = plan_offline_steps(
            discover(),
            gpu=missing is None,
            simulate=args.simulate,
            root=selftest.checkout_root(),
        )
        if args.simulate:
            missing = None
    else:
        steps = selftest.plan_gpu_steps(out.resolve())
    if args.json:
        print_json(
            {
                "command": "selftest",
                "kind": kind,
                "would_skip": missing,
                "budget_s": args.budget,
                "out": str(out.resolve()),
                "steps": [step.to_dict() for step in steps],
            }
        )
        return 0
    from tfaccel.selftest.render import command_of, render_plan

    text = render_plan(steps, budget_s=args.budget, missing=missing, command=command_of(kind))
    sys.stdout.write(text + "\n")
    return 0
