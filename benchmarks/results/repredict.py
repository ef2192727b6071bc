"""Re-predict the rows of a bench_plan.py --json run with the current memory model, against the
peaks that run measured (the measurement does not depend on the model): prints the same table.

    python benchmarks/results/repredict.py RUN.json|RUN.txt ... [NAME ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_plan


def _rows(path: str) -> list[dict[str, object]]:
    """The rows of a run: its --json file, or the table it printed."""
    if path.endswith(".json"):
        rows: list[dict[str, object]] = json.loads(Path(path).read_text())["rows"]
        return rows
    found = []
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[0] in bench_plan.ROWS and parts[1].isdigit():
            found.append(
                {
                    "model": parts[0],
                    "batch": int(parts[1]),
                    "precision": parts[2],
                    "held_out": parts[0] in bench_plan.HELD_OUT,
                    "measured_bytes": round(float(parts[4]) * 2**20),
                    "measured_step_s": float(parts[6]) / 1e3,
                }
            )
    return found


def main(argv: list[str]) -> int:
    paths = [a for a in argv if a.endswith((".json", ".txt"))]
    only = {a for a in argv if a not in paths}
    rows = []
    print(bench_plan.HEADER)
    for old in [row for path in paths for row in _rows(path)]:
        if only and old["model"] not in only:
            continue
        new = bench_plan.child("predict", old["model"], old["batch"], old["precision"], "cpu:0")
        measured = int(old["measured_bytes"])
        row = dict(old, predicted_bytes=new["peak"], peak_op=new["peak_op"], parts=new["parts"])
        row["error"] = (new["peak"] - measured) / measured
        row["predicted_step_s"], row["bound"] = new["step_s"], new["bound"]
        row["time_not_predicted"] = new.get("time_not_predicted") or "-"
        for key in ("measured_step_iqr_s", "now_step_s", "now_error"):
            row.setdefault(key, None)  # step-time columns a re-prediction does not measure
        row.setdefault("load", 0.0)
        step = row.get("measured_step_s")
        row["time_error"] = (
            (new["step_s"] - step) / step if new["step_s"] is not None and step else None
        )
        rows.append(row)
        print(bench_plan._line(row), flush=True)
    worked = bench_plan.summary([r for r in rows if not r["held_out"]])
    held = bench_plan.summary([r for r in rows if r["held_out"]])
    bench_plan._report("worked-from architectures", worked)
    bench_plan._report("held-out architectures", held)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
