"""Where a row's allocator peak is set: the first training step (the one that builds the
optimizer's slots) or the steps after. One fresh process per run, one row:

- ``plain``: the peak from a reset before the first step, read after each step (as
  ``bench_plan.py`` measures it);
- ``reset_after_first``: the same, with the peak reset again after the first step;
- ``build_first``: the optimizer built before the first step (and Python's garbage collected),
  the peak reset after, then read after each step;
- ``build_no_gc``: the same without collecting Python's garbage;
- ``no_gc``: as ``plain``, with Python's garbage collector off from the start.

    python benchmarks/results/mem_first_step.py [--runs 3] [NAME [BATCH]]   (default: tabular 256)
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_plan

MODES = ("plain", "reset_after_first", "build_first", "build_no_gc", "no_gc")
MIB = 2**20


def one(name: str, batch: int, mode: str) -> str:
    """One run in this process: a line of (step, peak MiB, current MiB) after each step."""
    import tensorflow as tf

    if mode == "no_gc":
        gc.disable()
    model, batch_of, _ = bench_plan.build(name, "float32")
    x, y = batch_of(batch)
    tf.config.experimental.reset_memory_stats("CPU:0")
    found = []
    if mode in ("build_first", "build_no_gc"):
        model.optimizer.build(model.trainable_variables)
        if mode == "build_first":
            gc.collect()
        info = tf.config.experimental.get_memory_info("CPU:0")
        found.append(f"built {info['peak'] / MIB:.2f}/{info['current'] / MIB:.2f}")
        tf.config.experimental.reset_memory_stats("CPU:0")
    for step in range(bench_plan.STEPS):
        model.train_on_batch(x, y)
        info = tf.config.experimental.get_memory_info("CPU:0")
        found.append(f"{step + 1}: {info['peak'] / MIB:.2f}/{info['current'] / MIB:.2f}")
        if mode == "reset_after_first" and step == 0:
            tf.config.experimental.reset_memory_stats("CPU:0")
    return f"{mode:<18} " + "  ".join(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", default="tabular")
    parser.add_argument("batch", nargs="?", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # one run, in-process
    args = parser.parse_args(argv)
    if args.mode:
        print(one(args.name, args.batch, args.mode), flush=True)
        return 0
    print(f"command: python benchmarks/results/mem_first_step.py {' '.join(sys.argv[1:])}")
    print(bench_plan.cpu_line())
    print(f"{args.name} {args.batch}: after each step, peak/current MiB (fresh process per line)")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    for _ in range(args.runs):
        for mode in MODES:
            command = [sys.executable, __file__, args.name, str(args.batch), "--mode", mode]
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            lines = [line for line in done.stdout.splitlines() if line.startswith(mode)]
            print(lines[-1] if lines else f"{mode}: failed ({done.stderr.strip()[-200:]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
