"""``tfaccel devices``: which devices this machine has and what they can do."""

from __future__ import annotations

import argparse
from typing import Any

from tfaccel.cli._output import print_json, show_tensorflow_log

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "devices",
        help="list the CPU, NVIDIA GPUs and TPUs, their features and peaks",
        description=(
            "List the CPU (cores, DL instruction sets, memory, estimated peak), NVIDIA GPUs "
            "through NVML (memory, compute capability, SMs, driver, utilisation, datasheet "
            "peaks) and TPUs. Does not import TensorFlow unless --tf is given; what TensorFlow "
            "logs then is shown with --verbose."
        ),
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument(
        "--tf",
        action="store_true",
        help="also ask TensorFlow (in a subprocess) which devices it registers, and its build",
    )
    p.add_argument(
        "--tf-timeout", type=float, default=120.0, metavar="S", help="seconds allowed for --tf"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tfaccel import inventory, probe

    snap = probe.snapshot(deep=args.tf, deep_timeout_s=args.tf_timeout)
    if snap.deep is not None:
        show_tensorflow_log(snap.deep.log)
    inv = inventory.build(snap)
    if args.json:
        print_json(inv.to_dict())
        return 0
    from tfaccel.report.text import console, render_inventory

    console().print(render_inventory(inv))
    return 0
