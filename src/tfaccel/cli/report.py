"""``tfaccel report``: the devices and the doctor's checks of this machine, together."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="devices and doctor together: what this machine has and whether TensorFlow uses it",
        description="Print 'tfaccel devices' and 'tfaccel doctor' for this machine in one report.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tfaccel import doctor, inventory, probe

    snap = probe.snapshot()
    inv = inventory.build(snap)
    report = doctor.diagnose(snap)
    if args.json:
        doc = {"devices": inv.to_dict(), "doctor": report.to_dict()}
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from rich.rule import Rule

    from tfaccel.report.doctor_text import render_doctor
    from tfaccel.report.text import console, render_inventory

    out = console()
    out.print(Rule("tfaccel devices"))
    out.print(render_inventory(inv))
    out.print(Rule("tfaccel doctor"))
    out.print(render_doctor(report.to_dict()))
    return 0
