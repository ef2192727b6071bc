"""The plan's CPU step time against measured steps, in one process, calibrated every round.

Each round calibrates this CPU (``roofline.calibrate_cpu``, not stored), then times ``--steps``
training steps (after two warm-up steps at the start) of every row in turn, in a rotating
order; each row's prediction in a round comes from that round's calibration, so that the
calibration and the steps it predicts share a shared machine's speed of the moment. Prints per
row the median measured step time (all rounds' steps) with its IQR, and the median over the
rounds of each model's prediction with its error and bound:

- ``now``: this step-time model (``roofline.cpu_step_time``);
- ``scale 1``: this model without the reference step's scale (every operation as its
  kernels were measured alone);
- ``before``: this model with every product of many matrices (attention's scores and
  context) at the one batched rate the calibration measures, whatever its FLOPs per byte (as
  before ``roofline._batched_rate``; :data:`PATCHES`);
- ``train_on_batch``: the same rows' ``train_on_batch`` steps, timed in the same rounds,
  against this model's prediction for steps called so.

Steps are ``fit``'s (``roofline.fit_step_times``: one batch repeated, each step from one
batch's start to the next's), as a script's ``fit`` runs them.

    python benchmarks/results/time_check.py [--rounds 3] [--steps 5] [NAME[:BATCH] ...]

Default rows: every architecture of ``bench_plan.ROWS`` at its smallest batch, float32.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_plan

from tfaccel.core.timing import summarize


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


VARIANTS: dict[str, tuple[dict[str, float], int | None]] = {
    "now": ({}, None),
    "scale 1": ({"scale": 1.0}, None),
    "before": ({}, None),
}
"""Each column: the calibration's figures taken as not measured (0), and the cores loops run
side by side on (None: this machine's; 1: one after another)."""
PATCHES: dict[str, dict[str, Any]] = {
    "before": {
        "_batched_rate": lambda intensity, calibration: calibration.batched_matmul_flops_per_s
    }
}
"""Each column's functions of ``roofline`` replaced while it is predicted: ``before``, every
product of many matrices at the one batched rate, whatever its FLOPs per byte."""


@contextlib.contextmanager
def patched(key: str) -> Iterator[None]:
    """``roofline`` with the column ``key``'s :data:`PATCHES` while inside."""
    from tfaccel.planning import roofline

    saved = {name: getattr(roofline, name) for name in PATCHES.get(key, {})}
    for name, value in PATCHES.get(key, {}).items():
        setattr(roofline, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(roofline, name, value)


CALL = "train_on_batch"
"""The last column: the rows' ``train_on_batch`` steps, predicted as called so."""


def reference_graphs() -> dict[str, Any]:
    """Each of ``roofline.REFERENCE_STEPS``' training steps, traced at its batch, by name."""
    from tfaccel.planning import roofline, trace_step

    return {
        name: trace_step(step.make(), step.batch) for name, step in roofline.REFERENCE_STEPS.items()
    }


def _without(calibration: Any, references: dict[str, Any], zeros: dict[str, float]) -> Any:
    """``calibration`` with the figures ``zeros`` not measured, and the reference steps' scales
    derived again without them (``references``: :func:`reference_graphs`)."""
    from tfaccel.planning import roofline

    if not zeros:
        return calibration
    if "scale" in zeros:  # the operations as measured alone, no reference step's scale
        return dataclasses.replace(calibration, **zeros)
    plain = dataclasses.replace(calibration, **zeros)
    if "metric_reset_s" in zeros:  # the tiny model's loss tracker: 2 variables reset per step
        plain.step_overhead_s += 2 * calibration.metric_reset_s
    scales = {}
    for name, graph in references.items():  # each step's time as this calibration has it
        batch = roofline.REFERENCE_STEPS[name].batch
        own = dataclasses.replace(calibration, scale=calibration.reference_scales[name])
        terms = roofline._op_terms(graph.ops, batch, calibration)
        measured = sum(roofline.as_stepped(terms, own).values())
        scales[name] = roofline.reference_scale(graph, plain, measured, batch)
    return plain.with_reference_scales(scales)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", help="NAME or NAME:BATCH (default: all, smallest)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    wanted = args.rows or [f"{name}:{batches[0]}" for name, batches in bench_plan.ROWS.items()]

    from tfaccel.planning import roofline, trace_step

    print(f"command: python benchmarks/results/time_check.py {' '.join(argv or sys.argv[1:])}")
    print(f"date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    print(bench_plan.cpu_line())
    print(f"load average at start: {_load()}  (cores: {os.cpu_count()})", flush=True)
    rows = []
    for spec in wanted:
        name, _, batch_text = spec.partition(":")
        batch = int(batch_text) if batch_text else bench_plan.ROWS[name][0]
        model, batch_of, _ = bench_plan.build(name, "float32")
        x, y = batch_of(batch)
        for _ in range(bench_plan.WARMUP_STEPS):
            model.train_on_batch(x, y)
        roofline.fit_step_times(model, (x, y), bench_plan.WARMUP_STEPS)
        row: dict[str, Any] = {
            "name": name,
            "batch": batch,
            "step": (model, x, y),
            "graph": trace_step(model, batch),
            "samples": [],
            "call samples": [],
            "bands": [],
            CALL: [],
        }
        row.update({key: [] for key in VARIANTS})
        rows.append(row)
    references = reference_graphs()
    for round_index in range(args.rounds):
        calibration = roofline.calibrate_cpu()
        problems = roofline.calibration_problems(calibration, bench_plan._rate_ceiling())
        print(
            f"round {round_index + 1}: {calibration.describe()}"
            + (f" [would not be stored: {problems[0]}]" if problems else ""),
            flush=True,
        )
        figures = {key: _without(calibration, references, z) for key, (z, _) in VARIANTS.items()}
        shift = round_index % len(rows)
        for row in rows[shift:] + rows[:shift]:
            model, x, y = row["step"]
            times = roofline.fit_step_times(model, (x, y), args.steps)
            calls = []
            for _ in range(args.steps):
                started = time.perf_counter()
                model.train_on_batch(x, y)
                calls.append(time.perf_counter() - started)
            row["samples"] += times
            row["call samples"] += calls
            median = statistics.median(times)
            for key, (_, cores) in VARIANTS.items():
                with patched(key):
                    predicted = roofline.cpu_step_time(
                        row["graph"], row["batch"], figures[key], cores=cores
                    )
                row[key].append((predicted.step_s, predicted.bound, predicted.step_s / median - 1))
                if key == "now":
                    row["bands"].append((roofline.step_band(predicted), median))
            called = roofline.cpu_step_time(
                row["graph"], row["batch"], calibration, call="train_on_batch"
            )
            row[CALL].append(
                (called.step_s, called.bound, called.step_s / statistics.median(calls) - 1)
            )
    print(f"load average at end: {_load()}")
    print(
        "step ms: median (IQR) of all rounds' fit steps; then per model: the median over "
        "rounds of the prediction from that round's calibration, its error against that "
        "round's median step, and the bound (of the round with the median error); call ms: "
        "the same rows' train_on_batch steps, and the prediction for steps called so"
    )
    header = f"{'model':<15}{'batch':>6} {'step ms':>9} {'IQR':>7} "
    for key in VARIANTS:
        header += f"  {key[:9] + ' ms':>12} {'error':>7}  {'bound':<16}"
    header += f"  {'call ms':>9} {'IQR':>7}  {'predicted':>9} {'error':>7}  {'bound':<16}"
    print(header.rstrip())
    for group, held in (("worked-from", False), ("held-out", True)):
        print(f"-- {group} architectures")
        errors: dict[str, list[float]] = {key: [] for key in (*VARIANTS, CALL)}
        for row in rows:
            if (row["name"] in bench_plan.HELD_OUT) != held:
                continue
            measured = summarize(row["samples"])
            line = (
                f"{row['name']:<15}{row['batch']:>6} {measured.median * 1e3:9.1f} "
                f"{(measured.q3 - measured.q1) * 1e3:7.1f} "
            )
            for key in VARIANTS:
                ranked = sorted(row[key], key=lambda p: p[2])
                step_s, bound, _ = ranked[len(ranked) // 2]
                error = statistics.median(p[2] for p in row[key])
                errors[key].append(error)
                line += f"  {step_s * 1e3:12.1f} {error * 100:+6.1f}%  {bound:<16}"
            calls = summarize(row["call samples"])
            ranked = sorted(row[CALL], key=lambda p: p[2])
            step_s, bound, _ = ranked[len(ranked) // 2]
            error = statistics.median(p[2] for p in row[CALL])
            errors[CALL].append(error)
            line += (
                f"  {calls.median * 1e3:9.1f} {(calls.q3 - calls.q1) * 1e3:7.1f}  "
                f"{step_s * 1e3:9.1f} {error * 100:+6.1f}%  {bound:<16}"
            )
            bands = [(band, median) for band, median in row["bands"] if band]
            if bands:  # the step times the plan's notes allow, in each round
                inside = sum(band[0] <= median <= band[1] for band, median in bands)
                low, high = bands[len(bands) // 2][0]
                line += f"  notes: {low * 1e3:.1f}-{high * 1e3:.1f} ms, {inside}/{len(bands)} in"
            print(line.rstrip())
        for key, found in errors.items():
            if found:
                within = sum(abs(e) <= bench_plan.TIME_LIMIT for e in found)
                print(
                    f"   {key}: {within}/{len(found)} within +-{bench_plan.TIME_LIMIT:.0%}, "
                    f"median |error| {statistics.median(abs(e) for e in found) * 100:.1f}%, "
                    f"worst {max(found, key=abs) * 100:+.1f}%"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
