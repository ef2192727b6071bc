"""How long `tfaccel devices` and `tfaccel doctor` (on this machine and on a pasted log) take,
against `python -c pass`.

Each command runs as a fresh process, interleaved with the baseline, so the figures include
interpreter start-up; the target is under 1 second each on a 2-core machine.

    python benchmarks/startup.py [--repeats 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from tfaccel.core.timing import compare, measure_interleaved, summarize

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "tfaccel devices": [sys.executable, "-m", "tfaccel", "devices"],
    "tfaccel devices --json": [sys.executable, "-m", "tfaccel", "devices", "--json"],
    "tfaccel doctor": [sys.executable, "-m", "tfaccel", "doctor"],
    "tfaccel doctor --json": [sys.executable, "-m", "tfaccel", "doctor", "--json"],
    "tfaccel doctor --log FILE": [
        sys.executable,
        "-m",
        "tfaccel",
        "doctor",
        "--log",
        str(
            Path(__file__).resolve().parent.parent
            / "tests/data/doctor-corpus/d_win_tf62080_transcript_214.log"
        ),
    ],
}
TARGET_S = 1.0


def _runner(argv: list[str]):  # type: ignore[no-untyped-def]
    def run() -> None:
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if done.returncode not in (0, 1):  # doctor exits 1 when it finds failures
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}")

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    samples = measure_interleaved(
        {name: _runner(argv) for name, argv in COMMANDS.items()}, repeats=args.repeats, warmup=2
    )
    base = summarize(samples["python -c pass"])
    rows = []
    for name, values in samples.items():
        s = summarize(values)
        rows.append(
            {
                "command": name,
                "median_s": s.median,
                "iqr_s": s.iqr,
                "max_s": s.maximum,
                "over_baseline_s": s.median - base.median,
                "vs_baseline": compare(base, s).verdict,
                "under_target": s.median < TARGET_S,
            }
        )
    if args.json:
        print(json.dumps({"target_s": TARGET_S, "repeats": args.repeats, "rows": rows}, indent=2))
    else:
        head = f"{'command':26} {'median':>8} {'IQR':>7} {'max':>7} {'+baseline':>10}"
        print(f"{head}  under {TARGET_S:g} s")
        for r in rows:
            print(
                f"{r['command']:26} {r['median_s']:8.3f} {r['iqr_s']:7.3f} {r['max_s']:7.3f} "
                f"{r['over_baseline_s']:10.3f}  {'yes' if r['under_target'] else 'NO'}"
            )
    return 0 if all(r["under_target"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
