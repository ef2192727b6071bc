"""``tfaccel devices``: which devices this machine has and what they can do."""

from __future__ import annotations

import argparse
from typing import Any

from tfaccel.cli._args import seconds
from tfaccel.cli._output import print_json, show_tensorflow_log

__all__ = ["FLAGS", "add_parser", "run"]

# The library's argument names -> this command's flags, for the messages of its errors
# (tfaccel.cli.main applies it).
FLAGS = {"timeout_s": "--tf-timeout"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "devices",
        help="list the CPU, NVIDIA GPUs and TPUs, their features and peaks",
        description=(
            "List the CPU (cores, DL instruction sets, memory, estimated peak), NVIDIA GPUs "
            "through NVML (memory, compute capability, SMs, driver, utilization.gpu, datasheet "
            "peaks; on GPUs with NVML GPM, Hopper and newer, a 0.15 s reading of SM, "
            "tensor-core and DRAM bandwidth activity) and TPUs. Does not import TensorFlow "
            "unless --tf is given; what TensorFlow logs then is shown with --verbose."
        ),
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument(
        "--tf",
        action="store_true",
        help="also ask TensorFlow (in a subprocess) which devices it registers, and its build",
    )
    p.add_argument(
        "--tf-timeout",
        type=seconds("--tf-timeout", example=120),
        default=120.0,
        metavar="S",
        help="seconds allowed for --tf (default 120)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """List the devices (text or JSON); with --tf, what TensorFlow registers too."""
    from tfaccel import inventory, probe
    from tfaccel.probe import deep

    if args.tf and args.tf_timeout < deep.MIN_IMPORT_S:
        raise deep.timeout_too_short(args.tf_timeout)  # before the probe, said at once
    snap = probe.snapshot(
        deep=args.tf, deep_timeout_s=args.tf_timeout, gpm_interval_s=probe.nvml.GPM_READING_S
    )
    if snap.deep is not None:
        show_tensorflow_log(snap.deep.log)
    inv = inventory.build(snap)
    if args.json:
        print_json(inv.to_dict())
        return 0
    from tfaccel.report.text import console, render_inventory

    console().print(render_inventory(inv))
    return 0
