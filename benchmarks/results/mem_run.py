"""bench_plan.py's memory rows alone: for each row one fresh process trains ``bench_plan.STEPS``
steps and reads the CPU allocator's peak exactly as ``bench_plan.measure`` does (from a reset
before the first step), then traces the step and predicts it with the memory model as
``bench_plan.predict`` does; no step timing or calibration (the memory figures do not depend on
either). Prints the rows (predicted, measured, error, the order that gave the peak, the
operation at the peak) and bench_plan's summary for the worked-from or held-out set.

    python benchmarks/results/mem_run.py [--held-out] [--precision P] [--only NAME]...
        [--batch N]... [--jobs N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_plan

MIB = 2**20


def row_child(name: str, batch: int, dtype: str) -> dict[str, Any]:
    """Measure the row's peak, then predict it (in this process, after the measurement)."""
    import tensorflow as tf

    from tfaccel import planning
    from tfaccel.planning import memory

    with tf.device("CPU:0"):
        model, batch_of, _ = bench_plan.build(name, dtype)
        x, y = batch_of(batch)
        tf.config.experimental.reset_memory_stats("CPU:0")
        for _ in range(bench_plan.STEPS):
            model.train_on_batch(x, y)
        measured = tf.config.experimental.get_memory_info("CPU:0")["peak"]
    model, _, _ = bench_plan.build(name, dtype)
    step = planning.trace_step(model, batch)
    estimate = memory.simulate(step, batch, rules=planning.allocator_rules("cpu:0"))
    return {
        "model": name,
        "batch": batch,
        "precision": dtype,
        "held_out": name in bench_plan.HELD_OUT,
        "measured_bytes": measured,
        "predicted_bytes": estimate.peak_bytes,
        "error": estimate.peak_bytes / measured - 1,
        "order": next((n[7:] for n in estimate.notes if n.startswith("order: ")), ""),
        "peak_op": estimate.peak_op,
        "parts": estimate.parts,
        "load": os.getloadavg()[0],
    }


def one_row(name: str, batch: int, dtype: str) -> dict[str, Any]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="1")
    command = [sys.executable, __file__, "--child", name, str(batch), dtype]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(f"{name} {batch} {dtype} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def line(row: dict[str, Any]) -> str:
    return (
        f"{row['model']:<14} {row['batch']:>5} {row['precision']:<15} "
        f"{row['predicted_bytes'] / MIB:>9.1f} {row['measured_bytes'] / MIB:>9.1f} "
        f"{row['error'] * 100:>+7.1f}% {row['order']:<9} {row['load']:>5.1f}  {row['peak_op']}"
    )


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        print(json.dumps(row_child(argv[1], int(argv[2]), argv[3])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", action="store_true", help="the held-out rows (else the rest)")
    parser.add_argument("--only", action="append", default=[], help="only this architecture")
    parser.add_argument("--batch", action="append", type=int, default=[], help="only this batch")
    parser.add_argument("--precision", choices=bench_plan.PRECISIONS, default="float32")
    parser.add_argument("--jobs", type=int, default=1, help="rows measured at once")
    parser.add_argument("--json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    keys = [
        (name, batch, args.precision)
        for name, batches in bench_plan.ROWS.items()
        if (name in bench_plan.HELD_OUT) == args.held_out and (not args.only or name in args.only)
        for batch in batches
        if not args.batch or batch in args.batch
    ]
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(
        f"{'model':<14} {'batch':>5} {'precision':<15} {'predicted':>9} {'measured':>9} "
        f"{'error':>8} {'order':<9} {'load':>5}  operation at the predicted peak"
    )
    rows = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(lambda key: one_row(*key), keys):
            rows.append(row)
            print(line(row), flush=True)
    label = "held-out" if args.held_out else "worked-from"
    bench_plan._report(f"{label} architectures", bench_plan.summary(rows))
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
