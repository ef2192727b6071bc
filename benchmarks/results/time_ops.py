"""The plan's CPU step time by operation type, against TensorFlow's profiler: where it is off.

For each row (an architecture of ``bench_plan.ROWS``, at its smallest batch unless given, or a
training script captured at its first ``fit`` in its own folder, as ``tfaccel plan SCRIPT``
captures it), in
one process calibrated once (``roofline.calibrate_cpu``, not stored): the median of ``--steps``
``fit`` steps (``roofline.fit_step_times``), the plan's prediction, then as many steps again
under TensorFlow's profiler (``tfaccel.profile.trace``), whose per-op self times are summed by
type. Each operation of the traced step is modelled on its own (``roofline.op_costs``, times
the reference step's scale; kernel passes unscaled, as the plan counts them) and summed by
type; loops' bodies are one line, ``(While bodies)``, modelled (times the loop scale) against
nothing, since the profiler names their operations by their own types.

The profiler names operations by the kernel that ran them: oneDNN's (``_Mkl``, ``_MklNative``
prefixes) and the graph optimiser's fused ones. They are named back by the graph type they
stand for (:func:`graph_type`); a fused operation's time counts under its first part (a
``_FusedConv2D``'s bias and activation under ``Conv2D``), so ``BiasAdd`` and the activations
it absorbed show modelled time and little or none profiled.

Prints per row the measured step, the prediction and its error, the profiled self time per
step summed over operations and its ratio to the measured step (above 1: operations ran side
by side on the cores, which the plan's sum takes as one after another), then per type: the
operations the plan counts and the profiler saw per step, the modelled and profiled
milliseconds per step and their ratio. The profiler adds a little time to every operation, so
profiled times of small operations read high.

With ``--each PART``, each operation whose type contains PART follows its row's table: its
FLOPs, modelled and profiled microseconds (matched by name; a forward convolution fused with
its activation is named by the activation and left out).

    python benchmarks/results/time_ops.py [--steps 10] [--types 14] [--each Conv] [NAME[:BATCH] ...]
    python benchmarks/results/time_ops.py encoder_block "unseen_scripts/ts_transformer.py"
"""

from __future__ import annotations

import argparse
import collections
import os
import shlex
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_plan

KERNEL_PREFIXES = ("_MklNative", "_Mkl")
"""Prefixes of the operation types oneDNN's kernels run under (the first that matches is
taken off)."""
RUN_AS = {
    "Conv2DBackpropFilterWithBias": "Conv2DBackpropFilter",
    "_UnaryOpsComposition": "(unary compositions)",
}
"""Types, after the prefixes are taken off, that stand for another graph type (the graph
optimiser's chain of unary operations stands for several)."""


PARTIAL = 0.5
"""A step without loops whose profile holds fewer than this share of the operations the plan
counts is marked partial: on a DenseNet121 at batch 8 (over 9,000 operations a step) the
profiler kept under a tenth of them (684-688 a step, over 1 or 5 steps, with the host tracer at
level 2 or 3), and its self times summed to less than the step."""


def graph_type(profiled: str) -> str:
    """The graph operation type a profiled one stands for: oneDNN's prefix off, then the
    graph optimiser's ``_Fused`` or oneDNN's ``Fused`` (not the graph's own ``FusedBatchNorm``
    types): ``_MklNativeFusedConv2D`` -> ``Conv2D``, ``_MklMatMul`` -> ``MatMul``,
    ``_FusedMatMul`` -> ``MatMul``, ``_MklNativeFusedBatchNormV3`` -> ``FusedBatchNormV3``."""
    name = profiled
    for prefix in KERNEL_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            name = name[len(prefix) :]
            break
    if name.startswith("_Fused") and len(name) > len("_Fused"):
        name = name[len("_Fused") :]
    elif name.startswith("Fused") and not name.startswith("FusedBatchNorm"):
        name = name[len("Fused") :]
    return RUN_AS.get(name, name)


def modelled_by_type(
    graph: Any, batch: int, calibration: Any, loops_s: float | None
) -> tuple[dict[str, float], Any]:
    """Per graph type, the modelled seconds of the step's operations outside loops (as the
    plan counts them, ``roofline.as_stepped``), with ``(While bodies)`` for the loops
    (``loops_s``, the prediction's); and how many of each."""
    from tfaccel.planning import roofline

    seconds: dict[str, float] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for op, costs in roofline.op_costs(graph.ops, batch, calibration):
        seconds[op.type] += sum(roofline.as_stepped(costs, calibration).values())
        count[op.type] += 1
    if loops_s:
        seconds["(While bodies)"] = loops_s
    return seconds, count


def profiled_by_type(
    model: Any, data: Any, steps: int
) -> tuple[dict[str, float], Any, str, dict[str, float]]:
    """Per graph type, the profiler's self seconds per step over ``steps`` ``fit`` steps, and
    how many operations per step; with the trace's error, if any, and the self seconds per
    step of each operation by its name in the step's graph (:data:`CALL_PREFIX` off; a fused
    operation is named by its last part, an activation, and matches no graph operation)."""
    import tensorflow as tf

    from tfaccel.planning import roofline
    from tfaccel.profile import trace

    with tempfile.TemporaryDirectory(prefix="time_ops_") as folder:
        tf.profiler.experimental.start(folder)
        try:
            roofline.fit_step_times(model, data, steps)
        finally:
            tf.profiler.experimental.stop()
        summary = trace.read_trace(folder, steps + 1)  # fit runs one step more than it times
    seconds: dict[str, float] = collections.Counter()
    count: dict[str, float] = collections.Counter()
    named: dict[str, float] = collections.defaultdict(float)
    for op in summary.ops:
        kind = graph_type(op.type)
        seconds[kind] += op.self_time_us / 1e6 / (steps + 1)
        count[kind] += op.occurrences / (steps + 1)
        named[op.name.rpartition(CALL_PREFIX)[2]] += op.self_time_us / 1e6 / (steps + 1)
    return seconds, count, summary.error or "", named


CALL_PREFIX = "StatefulPartitionedCall/"
"""What the profiler puts before the names of a ``tf.function``'s operations."""


def each_op(
    graph: Any, batch: int, calibration: Any, named: dict[str, float], part: str
) -> list[str]:
    """A line for each operation of the step whose type contains ``part``, smallest FLOPs
    first: its type, MFLOP, modelled microseconds (as the plan counts them) and profiled self
    microseconds per step, and their ratio; those the profile does not name (a fused forward
    convolution, named by its activation) left out, and counted on the last line."""
    from tfaccel.planning import roofline

    def flops(op: Any) -> float:
        return float(op.flops_fixed + op.flops_per_example * batch)

    lines, missing = [], 0
    found = [
        pair for pair in roofline.op_costs(graph.ops, batch, calibration) if part in pair[0].type
    ]
    for op, costs in sorted(found, key=lambda pair: flops(pair[0])):
        if op.name not in named:
            missing += 1
            continue
        modelled = sum(roofline.as_stepped(costs, calibration).values())
        profiled = named[op.name]
        lines.append(
            f"    {op.type[:34]:<35}{flops(op) / 1e6:9.1f}{modelled * 1e6:10.1f}"
            f"{profiled * 1e6:10.1f}"
            f"{profiled / max(modelled, 1e-12):7.2f}  {op.name[-48:]}"
        )
    header = f"    {'each ' + part + ' operation':<35}{'MFLOP':>9}{'model us':>10}{'prof us':>10}"
    return [header + f"{'x':>7}", *lines, f"    ({missing} not named by the profile)"]


def _script_row(spec: str) -> tuple[str, int, Any, Any, Any]:
    """A training script's row (``"SCRIPT [ARGS]"``): captured at its first ``fit``, in its
    own folder (``tfaccel.workload.capture``, nothing trained): its name, batch, model and
    first batch as ``fit`` hands it, and its step traced as ``tfaccel plan SCRIPT`` traces it
    (a subclassed model called on inputs shaped like its data, a model with its own
    ``train_step`` through that step)."""
    from tfaccel.planning import api, source
    from tfaccel.workload import capture

    words = shlex.split(spec)
    path = Path(words[0]).resolve()
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        workload = capture(str(path), words[1:])
        planned, optimizer, _ = source.workload_model(workload)
        prepared, _ = api._prepare(planned, None, optimizer)
        batch = workload.batch_size
        graph = api.traced(prepared, batch)
        return path.name, batch, workload.model, source.fit_element(workload), graph
    finally:
        os.chdir(here)  # the next row's path is the caller's


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "rows",
        nargs="*",
        help='NAME or NAME:BATCH, or "SCRIPT [ARGS]" (one quoted argument; default: every '
        "architecture at its smallest batch)",
    )
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--types", type=int, default=14, help="types shown per row")
    parser.add_argument(
        "--each",
        default="",
        help="also list each operation whose type contains this (Conv: every convolution)",
    )
    args = parser.parse_args(argv)
    wanted = args.rows or [f"{name}:{batches[0]}" for name, batches in bench_plan.ROWS.items()]

    from tfaccel.planning import roofline, trace_step

    print(f"command: python benchmarks/results/time_ops.py {' '.join(argv or sys.argv[1:])}")
    print(f"date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    print(bench_plan.cpu_line())
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    rows = []
    for spec in wanted:
        if shlex.split(spec)[0].endswith(".py"):
            name, batch, model, data, graph = _script_row(spec)
        else:
            name, _, batch_text = spec.partition(":")
            batch = int(batch_text) if batch_text else bench_plan.ROWS[name][0]
            model, batch_of, _ = bench_plan.build(name, "float32")
            data = batch_of(batch)
            graph = trace_step(model, batch)
        roofline.fit_step_times(model, data, bench_plan.WARMUP_STEPS)
        rows.append((name, batch, model, data, graph))
    calibration = roofline.calibrate_cpu()
    print(calibration.describe(), flush=True)
    for name, batch, model, data, graph in rows:
        measured = statistics.median(roofline.fit_step_times(model, data, args.steps))
        prediction = roofline.cpu_step_time(graph, batch, calibration)
        predicted = prediction.step_s or 0.0
        modelled, counted = modelled_by_type(graph, batch, calibration, prediction.loops_s)
        profiled, seen, error, named = profiled_by_type(model, data, args.steps)
        total = sum(profiled.values())
        counted_ops, seen_ops = sum(counted.values()), sum(seen.values())
        partial = not graph.loops and seen_ops < PARTIAL * counted_ops
        print(
            f"\n{name} {batch}: measured {measured * 1e3:.1f} ms, predicted "
            f"{predicted * 1e3:.1f} ms ({predicted / measured - 1:+.0%}); profiled self time "
            f"{total * 1e3:.1f} ms per step, {total / measured:.2f}x the step; "
            f"{counted_ops} operations planned, {seen_ops:.0f} profiled per step"
            + (" [the profile is partial: it kept fewer operations than ran]" if partial else "")
            + (f" [{error}]" if error else "")
        )
        print(f"  {'type':<28}{'ops':>6}{'seen':>7}{'model ms':>10}{'profiled':>10}{'ratio':>7}")
        kinds = sorted(set(modelled) | set(profiled), key=lambda k: -max(modelled[k], profiled[k]))
        for kind in kinds[: args.types]:
            ratio = f"{modelled[kind] / profiled[kind]:7.2f}" if profiled[kind] else f"{'-':>7}"
            print(
                f"  {kind[:27]:<28}{counted[kind]:6d}{seen[kind]:7.1f}"
                f"{modelled[kind] * 1e3:10.2f}{profiled[kind] * 1e3:10.2f}{ratio}"
            )
        rest_m = sum(modelled[k] for k in kinds[args.types :])
        rest_p = sum(profiled[k] for k in kinds[args.types :])
        print(f"  {'(the other types)':<28}{'':13}{rest_m * 1e3:10.2f}{rest_p * 1e3:10.2f}")
        if args.each:
            print("\n".join(each_op(graph, batch, calibration, named, args.each)))
    print(f"\nload average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
