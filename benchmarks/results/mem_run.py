"""bench_plan.py's memory rows alone: for each row one fresh process trains ``bench_plan.STEPS``
steps and reads the CPU allocator's peak exactly as ``bench_plan.measure`` does (from a reset
before the first step), then traces the step and predicts it with the memory model as
``bench_plan.predict`` does; no step timing or calibration (the memory figures do not depend on
either). Prints the rows (predicted, measured, error, the order that gave the peak, the
operation at the peak) and bench_plan's summary for the worked-from or held-out set.

With ``--repeat N`` each row is measured in N fresh processes, interleaved (every row once, then
every row again: a row's repeats are spread over the run, not back to back); the row then shows
the median measured peak, its min-max spread and the error against the median (the summary
too), and ``--json`` keeps every measurement. A child also reports the allocator's peak after
each of its steps (``peaks``, cumulative from the reset), to tell which step reached it.

    python benchmarks/results/mem_run.py [--held-out] [--precision P] [--only NAME]...
        [--batch N]... [--jobs N] [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_plan

MIB = 2**20


def row_child(name: str, batch: int, dtype: str, predict: bool = True) -> dict[str, Any]:
    """Measure the row's peak, then (``predict``) predict it (in this process, after the
    measurement)."""
    import tensorflow as tf

    from tfaccel import planning
    from tfaccel.planning import memory

    peaks = []
    with tf.device("CPU:0"):
        model, batch_of, _ = bench_plan.build(name, dtype)
        x, y = batch_of(batch)
        tf.config.experimental.reset_memory_stats("CPU:0")
        for _ in range(bench_plan.STEPS):
            model.train_on_batch(x, y)
            peaks.append(tf.config.experimental.get_memory_info("CPU:0")["peak"])
        measured = peaks[-1]
    if not predict:
        return {
            "model": name,
            "batch": batch,
            "precision": dtype,
            "measured_bytes": measured,
            "peaks": peaks,
            "load": os.getloadavg()[0],
        }
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
        "peaks": peaks,
        "load": os.getloadavg()[0],
    }


def one_row(name: str, batch: int, dtype: str, predict: bool = True) -> dict[str, Any]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="1")
    command = [sys.executable, __file__, "--child", name, str(batch), dtype]
    command += [] if predict else ["--measure-only"]
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


def combined(first: dict[str, Any], measured: list[dict[str, Any]]) -> dict[str, Any]:
    """A row measured more than once: its prediction (``first``'s), the median measured peak
    (the error is against it) and every measurement in order."""
    peaks = [m["measured_bytes"] for m in measured]
    median = statistics.median(peaks)
    return dict(
        first,
        measured_bytes=median,
        error=first["predicted_bytes"] / median - 1,
        measured_all=peaks,
        steps_all=[m["peaks"] for m in measured],
        loads=[m["load"] for m in measured],
    )


def repeated_line(row: dict[str, Any]) -> str:
    peaks, loads = row["measured_all"], row["loads"]
    low, high = min(peaks), max(peaks)
    return (
        f"{row['model']:<14} {row['batch']:>5} {row['precision']:<15} "
        f"{row['predicted_bytes'] / MIB:>9.1f} {row['measured_bytes'] / MIB:>9.1f} "
        f"{low / MIB:>6.1f}-{high / MIB:<6.1f} {len(peaks):>2} "
        f"{row['error'] * 100:>+7.1f}% {(row['predicted_bytes'] / high - 1) * 100:>+7.1f}% "
        f"{row['order']:<9} {min(loads):>4.1f}-{max(loads):<4.1f} {row['peak_op']}\n"
        f"{'':<21}measured each time (MiB): {' '.join(f'{p / MIB:.1f}' for p in peaks)}"
    )


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        predict = "--measure-only" not in argv
        print(json.dumps(row_child(argv[1], int(argv[2]), argv[3], predict)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", action="store_true", help="the held-out rows (else the rest)")
    parser.add_argument("--only", action="append", default=[], help="only this architecture")
    parser.add_argument("--batch", action="append", type=int, default=[], help="only this batch")
    parser.add_argument("--precision", choices=bench_plan.PRECISIONS, default="float32")
    parser.add_argument("--jobs", type=int, default=1, help="rows measured at once")
    parser.add_argument(
        "--repeat", type=int, default=1, help="fresh processes per row, interleaved over rows"
    )
    parser.add_argument("--json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    keys = [
        (name, batch, args.precision)
        for name, batches in bench_plan.ROWS.items()
        if (name in bench_plan.HELD_OUT) == args.held_out and (not args.only or name in args.only)
        for batch in batches
        if not args.batch or batch in args.batch
    ]
    if args.repeat < 1:
        parser.error(f"--repeat takes 1 or more processes per row, not {args.repeat}")
    print(bench_plan.cpu_line())
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    rows = []
    if args.repeat == 1:
        print(
            f"{'model':<14} {'batch':>5} {'precision':<15} {'predicted':>9} {'measured':>9} "
            f"{'error':>8} {'order':<9} {'load':>5}  operation at the predicted peak"
        )
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for row in pool.map(lambda key: one_row(*key), keys):
                rows.append(row)
                print(line(row), flush=True)
    else:
        runs = [(key, n) for n in range(args.repeat) for key in keys]  # interleaved
        found: dict[tuple[str, int, str], list[dict[str, Any]]] = {key: [] for key in keys}
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            done = pool.map(lambda run: one_row(*run[0], predict=run[1] == 0), runs)
            for (key, n), row in zip(runs, done, strict=True):
                found[key].append(row)
                print(
                    f"# {key[0]} {key[1]} run {n + 1}: {row['measured_bytes'] / MIB:.2f} MiB "
                    f"(after each step: {' '.join(f'{p / MIB:.2f}' for p in row['peaks'])}), "
                    f"load {row['load']:.1f}",
                    flush=True,
                )
        print(
            f"{'model':<14} {'batch':>5} {'precision':<15} {'predicted':>9} {'median':>9} "
            f"{'min-max':<13} {'n':>2} {'error':>8} {'vs max':>8} {'order':<9} {'load':<9} "
            "operation at the predicted peak"
        )
        for key in keys:
            rows.append(combined(found[key][0], found[key]))
            print(repeated_line(rows[-1]), flush=True)
    label = "held-out" if args.held_out else "worked-from"
    bench_plan._report(f"{label} architectures", bench_plan.summary(rows))
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
