"""bench_plan.py's memory rows only: each row's peak measured in a fresh process and predicted by
the memory model in another, without bench_plan's step-time calibration after each row (the
memory figures do not depend on it). Prints bench_plan's table (the time columns are left as
bench_plan measured them, without the "now" prediction) and the memory summary of the
worked-from and held-out rows.

    python benchmarks/results/mem_run.py [--held-out] [--precision P] [--jobs N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_plan


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", action="store_true", help="the held-out rows (else the rest)")
    parser.add_argument("--only", action="append", default=[], help="only this architecture")
    parser.add_argument("--precision", choices=bench_plan.PRECISIONS, default="float32")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = {
        name: batches
        for name, batches in bench_plan.ROWS.items()
        if (name in bench_plan.HELD_OUT) == args.held_out and (not args.only or name in args.only)
    }
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(bench_plan.HEADER, flush=True)
    results = bench_plan.run(rows, "cpu:0", (args.precision,), max(1, args.jobs), now=False)
    label = "held-out" if args.held_out else "worked-from"
    bench_plan._report(f"{label} architectures", bench_plan.summary(results))
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": results}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
