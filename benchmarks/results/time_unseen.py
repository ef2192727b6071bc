"""The plan's CPU step time on training scripts it has never seen, against their measured step.

For each ``SCRIPT [ARGS]`` (given as one quoted argument; ``--fit N`` first picks a later
``fit``), one fresh process: captures the script at its ``fit`` (``tfaccel.workload.capture``,
nothing trained), times the script's own compiled model's training step on the first batch
as ``fit`` hands it (``fit`` steps on that batch repeated, ``roofline.fit_step_times``; a
script whose own loop calls ``train_on_batch``, those calls; 3 warm-up; then the timed steps in
two halves, one before and one after the calibration, each at least 10 steps and more while under
``HALF_S`` seconds; median and IQR of all), calibrates this CPU in the same process between
the two halves (``roofline.calibrate_cpu``, not stored), and plans the workload
as ``tfaccel plan SCRIPT`` does, once per model of ``time_check.VARIANTS`` (the calibration
read by the plan is replaced by that variant's). Prints per script the measured step and each
variant's predicted step with its error.

    python benchmarks/results/time_unseen.py --dir DIR "train.py" "finetune.py --fit 2" ...

Six such scripts, in the shape of keras.io examples and never used to build the step-time
model, are in ``benchmarks/results/unseen_scripts/``; their figures on a quiet 2-core EPYC are
in ``time_unseen_quiet.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
HALF_S = 3.0
"""Seconds of timed steps wanted on each side of the calibration (at least 10 steps each):
with 10 steps in all, before the calibration only, a 4 ms step measured 2.7 ms in one quiet
pass and 4.2 in the next."""


def _timed(step: Any) -> list[float]:
    """At least 10 runs of ``step``, more while they take under :data:`HALF_S` (up to 200)."""
    times: list[float] = []
    while len(times) < 10 or (sum(times) < HALF_S and len(times) < 200):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return times


def _fit_timed(model: Any, element: Any) -> list[float]:
    """At least 10 ``fit`` steps on the batch ``element`` (``roofline.fit_step_times``),
    more while they take under :data:`HALF_S` (up to 200)."""
    from tfaccel.planning import roofline

    times = roofline.fit_step_times(model, element, 10)
    more = min(190, int(HALF_S / max(statistics.median(times), 1e-6)) - 10)
    if more > 0:
        times += roofline.fit_step_times(model, element, more)
    return times


def child(script: str, args: list[str]) -> dict[str, Any]:
    """Measure then plan one script (in this process; the working directory is its folder)."""
    sys.path.insert(0, str(HERE))
    import keras
    import time_check

    from tfaccel.planning import api, roofline, source
    from tfaccel.workload import capture

    fit = 1
    if args[:1] == ["--fit"]:
        fit, args = int(args[1]), args[2:]
    workload = capture(script, args, fit=fit)
    element = source.fit_element(workload)
    x, y, weight = keras.utils.unpack_x_y_sample_weight(element)
    by_call = workload.origin.method == "train_on_batch"

    def step() -> None:
        workload.model.train_on_batch(x, y, sample_weight=weight)

    for _ in range(3):
        step()
    if not by_call:
        roofline.fit_step_times(workload.model, element, 2)
    times = _timed(step) if by_call else _fit_timed(workload.model, element)
    calibration = roofline.calibrate_cpu()
    times += _timed(step) if by_call else _fit_timed(workload.model, element)
    quartiles = statistics.quantiles(times, n=4)
    references = time_check.reference_graphs()
    out: dict[str, Any] = {
        "measured_s": statistics.median(times),
        "iqr_s": quartiles[2] - quartiles[0],
        "steps": len(times),
        "load": os.getloadavg()[0],
        "predicted": {},
    }
    real = api.cpu_step_time
    for key, (zeros, cores) in time_check.VARIANTS.items():
        figures = time_check._without(calibration, references, zeros)
        roofline._calibration = lambda db, fp, setting, f=figures: f  # type: ignore[assignment]

        def timed(
            step: Any, batch: int, c: Any, *, onednn: Any = None, call: str = "fit", k: Any = cores
        ) -> Any:
            return real(step, batch, c, onednn=onednn, cores=k, call=call)

        api.cpu_step_time = timed  # type: ignore[assignment]
        try:
            with time_check.patched(key):
                row = source.plan_workload(workload, devices=["this-cpu"]).devices[0]
        finally:
            api.cpu_step_time = real
        out["predicted"][key] = row.step_s
        if key == "now":  # the step times the plan's notes allow, where it gives them
            out["band"] = roofline.step_band(row.time)
        out["batch"] = row.batch_size if hasattr(row, "batch_size") else None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="+", help='"SCRIPT [ARGS]", one quoted argument each')
    parser.add_argument("--dir", default=".", help="the scripts' folder (their working directory)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        os.chdir(args.dir)
        words = shlex.split(args.scripts[0])
        print("RESULT " + json.dumps(child(words[0], words[1:])))
        return 0
    sys.path.insert(0, str(HERE.parent))
    import bench_plan

    print(bench_plan.cpu_line())
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    for spec in args.scripts:
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--dir", args.dir, spec],
            capture_output=True,
            text=True,
        )
        line = next((w for w in done.stdout.splitlines() if w.startswith("RESULT ")), None)
        if line is None:
            print(f"{spec}: failed: {done.stderr[-600:]}", flush=True)
            continue
        found = json.loads(line[len("RESULT ") :])
        measured = found["measured_s"]
        text = (
            f"{spec:<22} measured {measured * 1e3:8.1f} ms (IQR {found['iqr_s'] * 1e3:.1f}, "
            f"{found['steps']} steps, load {found['load']:.1f})"
        )
        for key, step_s in found["predicted"].items():
            text += f" | {key}: " + (
                f"{step_s * 1e3:.1f} ({(step_s / measured - 1) * 100:+.0f}%)" if step_s else "-"
            )
        band = found.get("band")
        if band:
            inside = band[0] <= measured <= band[1]
            text += (
                f" | the plan's notes: {band[0] * 1e3:.1f}-{band[1] * 1e3:.1f} "
                f"({'measured within' if inside else 'measured outside'})"
            )
        print(text, flush=True)
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
