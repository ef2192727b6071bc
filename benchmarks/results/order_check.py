"""The order a real training step runs in, against the orders the plan simulates.

For each ``NAME:BATCH`` (an architecture of ``bench_plan.py``, float32, CPU): one fresh process
trains 4 steps with ``TF_CPP_VMODULE=log_memory=2`` (every allocation and every operation's
output, with its kernel's name) and reads the allocator's peak; another traces the step as the
plan does. The logged order of the last step is compared with graph order and with the
executor's order the plan emulates (``tfaccel.planning.memory.executor_schedule``): Spearman's
rank correlation and the median number of places an operation moves, over the operations with
an output of 256 KiB or more found in the log (the ones the CPU allocator counts); and the
peak the plan simulates in each order, and in the logged order, against the measured peak.

    python benchmarks/results/order_check.py mlp:256 gru_attention:32 encoder_block:64
"""

from __future__ import annotations

import heapq
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MIB = 2**20
COUNTED = 256 * 1024
LINE = re.compile(r"__LOG_MEMORY__ MemoryLog(\w+) \{(.*)\}\s*$")


def log_child(name: str, batch: int, dtype: str = "float32") -> None:
    """Train 4 steps, marking each on stderr; print the allocator's peak."""
    import bench_plan
    import tensorflow as tf

    with tf.device("CPU:0"):
        model, batch_of, _ = bench_plan.build(name, dtype)
        x, y = batch_of(batch)
        tf.config.experimental.reset_memory_stats("CPU:0")
        for n in range(4):
            print(f"__STEP__ {n}", file=sys.stderr, flush=True)
            model.train_on_batch(x, y)
        print(json.dumps({"peak": tf.config.experimental.get_memory_info("CPU:0")["peak"]}))


def trace_child(name: str, batch: int, path: str) -> None:
    import pickle

    import bench_plan

    from tfaccel.planning import trace_step

    model, _, _ = bench_plan.build(name, "float32")
    with open(path, "wb") as handle:
        pickle.dump(trace_step(model, batch), handle)


def logged_first(log: str) -> dict[str, int]:
    """Kernel name -> the place of its first allocation or output in the last step."""
    lines = log.splitlines()
    start = max(n for n, line in enumerate(lines) if line.startswith("__STEP__"))
    first: dict[str, int] = {}
    for line in lines[start:]:
        found = LINE.search(line)
        if not found or found.group(1) not in ("TensorOutput", "TensorAllocation"):
            continue
        kernel = re.search(r'kernel_name: "([^"]*)"', found.group(2))
        if kernel:
            first.setdefault(kernel.group(1), len(first))
    return first


def logged_order(step: Any, first: dict[str, int]) -> list[int]:
    """The step's operations in the logged order: each logged one at its place, the others
    (fused away or never logged) as soon as what they read is there."""
    ops = step.ops
    producer = {t.index: n for n, op in enumerate(ops) for t in op.outputs}
    key: dict[int, tuple[int, int, int]] = {}
    for n, op in enumerate(ops):  # graph order: producers first
        if op.name in first:
            key[n] = (first[op.name], 0, n)
        else:
            before = [key[producer[i]][0] for i in op.inputs if i in producer]
            key[n] = (max(before, default=-1), 1, n)
    deps = [{producer[i] for i in op.inputs if i in producer} - {n} for n, op in enumerate(ops)]
    users: list[list[int]] = [[] for _ in ops]
    for n, found in enumerate(deps):
        for p in found:
            users[p].append(n)
    pending = [len(found) for found in deps]
    ready = [(key[n], n) for n in range(len(ops)) if not pending[n]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(n)
        for user in users[n]:
            pending[user] -= 1
            if not pending[user]:
                heapq.heappush(ready, (key[user], user))
    return order


def spearman(ranks: list[int]) -> float:
    """Rank correlation of ``ranks`` (a permutation of 0..n-1) with 0..n-1."""
    count = len(ranks)
    if count < 2:
        return float("nan")
    return 1 - 6 * sum((r - n) ** 2 for n, r in enumerate(ranks)) / (count * (count**2 - 1))


def compare(order: list[int], step: Any, first: dict[str, int], batch: int) -> tuple[float, int]:
    """Rank correlation with the log, and median places moved, over the counted operations."""
    counted = [
        n
        for n in order
        if step.ops[n].name in first
        and any(t.bytes_at(batch) >= COUNTED for t in step.ops[n].outputs)
    ]
    by_log = {n: r for r, n in enumerate(sorted(counted, key=lambda n: first[step.ops[n].name]))}
    ranks = [by_log[n] for n in counted]
    moved = statistics.median(abs(p - r) for p, r in enumerate(ranks)) if ranks else 0
    return spearman(ranks), int(moved)


def check(name: str, batch: int) -> str:
    import pickle

    from tfaccel.planning.memory import (
        CPU_ONEDNN_RULES,
        Schedule,
        _simulate,
        executor_schedule,
        graph_schedule,
    )

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="log_memory=2")
    env["TF_ENABLE_ONEDNN_OPTS"] = "1"
    me = [sys.executable, __file__]
    done = subprocess.run(
        [*me, "--log", name, str(batch)], capture_output=True, text=True, env=env, check=True
    )
    measured = json.loads(done.stdout.strip().splitlines()[-1])["peak"]
    first = logged_first(done.stderr)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "step.pkl")
        quiet = dict(env, TF_CPP_MIN_LOG_LEVEL="3", TF_CPP_VMODULE="")
        subprocess.run([*me, "--trace", name, str(batch), path], env=quiet, check=True)
        with open(path, "rb") as handle:
            step = pickle.load(handle)
    count = len(step.ops)
    schedules = {
        "graph": graph_schedule(step),
        "executor": executor_schedule(step, batch),
    }
    logged = logged_order(step, first)
    peaks = {
        k: _simulate(step, batch, CPU_ONEDNN_RULES, 0.0, s).peak_bytes for k, s in schedules.items()
    }
    peaks["logged order"] = _simulate(
        step, batch, CPU_ONEDNN_RULES, 0.0, Schedule(logged, list(range(count)))
    ).peak_bytes
    graph_rho, graph_moved = compare(schedules["graph"].order, step, first, batch)
    exec_rho, exec_moved = compare(schedules["executor"].order, step, first, batch)
    return (
        f"{name:<14} {batch:>5} {measured / MIB:>8.1f} "
        + " ".join(f"{peaks[k] / MIB:>8.1f}" for k in ("graph", "executor", "logged order"))
        + f" {max(peaks['graph'], peaks['executor']) / MIB:>8.1f}"
        + f"   {graph_rho:>6.3f} {graph_moved:>5d}  {exec_rho:>6.3f} {exec_moved:>5d}"
    )


def main(argv: list[str]) -> int:
    if argv[:1] == ["--log"]:
        log_child(argv[1], int(argv[2]))
        return 0
    if argv[:1] == ["--trace"]:
        trace_child(argv[1], int(argv[2]), argv[3])
        return 0
    print(
        "peak MiB: measured | simulated in graph order, executor order, the logged order | the "
        "plan (higher of graph and executor);\norder vs the log over the counted operations: "
        "Spearman's rho and median places moved, graph order then executor order"
    )
    print(
        f"{'model':<14} {'batch':>5} {'measured':>8} {'graph':>8} {'executor':>8} {'logged':>8} "
        f"{'plan':>8}   {'rho':>6} {'moved':>5}  {'rho':>6} {'moved':>5}"
    )
    for row in argv:
        name, _, batch = row.partition(":")
        print(check(name, int(batch)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
