"""What PerformanceCallback costs: the reference CNN's step time with and without it.

Three configurations of the same compiled model and the same ``tfaccel.data.pipeline`` input,
timed interleaved (A B C, B C A, ...) in one process, one sample = one ``fit`` of ``--steps``
steps, in seconds per step:

* ``plain``: ``fit`` with no callback at all (Keras then dispatches batch-end work
  asynchronously);
* ``callback``: ``PerformanceCallback`` (live line every 50 steps, no end-of-fit re-run);
* ``callback+instrument``: the same with the dataset wrapped by ``tfaccel.keras.instrument``
  (the input-wait stamps), as ``tfaccel profile`` runs it.

The target: the callback's overhead under 2% of the step time. Three estimates:

* the ratio of the medians;
* the median of the per-round ratios (each round runs the three back to back, so a slow
  spell of the shared machine tends to hit a round's samples together);
* the ratio of the lower quartiles: on a shared machine whose step time jumps between two
  levels (other work on the same cores), the samples taken in the quiet state;
* direct: the time spent inside the callback's per-step hooks (measured around them in every
  step of the callback runs) plus the cost of one input stamp (a tight loop over a ready
  batch with and without ``instrument``, interleaved), over the plain step time. It leaves
  out what the callback changes in Keras (batch-end logs converted synchronously), which the
  two ratios include, but it is not drowned by the machine's noise.

    python benchmarks/bench_callback.py [--steps 40] [--repeats 15] [--batch-size 64] [--json]
    python benchmarks/bench_callback.py --smoke   # tiny model, a few steps: checks it runs

``--nvtx`` measures what the NVTX ranges (``tfaccel.profile.nvtx_marks``) cost instead: four
configurations interleaved in one process, each timer with ``nvtx=False`` and ``nvtx=True``:

* ``callback nvtx off`` / ``callback nvtx on``: ``fit`` with ``PerformanceCallback`` on the
  instrumented dataset, as ``tfaccel profile`` runs it (one ``step`` range per step);
* ``timer nvtx off`` / ``timer nvtx on``: a custom loop of the same model's compiled train
  step under ``StepTimer`` (``step``, ``input`` and ``compute`` ranges per step).

NVTX ranges cost something only when a tool records them (Nsight Systems); without one,
``nvtx=True`` takes the same path as ``nvtx=False``. So, unless ``--no-tool``, the benchmark
compiles a minimal NVTX tool (``tests/data/nvtx_recorder.c``, with ``cc``; it counts the ranges
and keeps nothing) and runs itself again with ``NVTX_INJECTION64_PATH`` pointing to it: the
ranges are then really emitted, as under ``nsys profile`` (whose own recording cost comes on
top and is not measured here). Reported: medians and quartiles per configuration, the ratios
on/off (of the medians, and the median of the per-round ratios with its quartiles), the
direct cost (the NVTX calls of one step in a tight loop, over the step time), and the ranges
the tool counted. Target: under 1% of the reference CNN's step.

    python benchmarks/bench_callback.py --nvtx [--steps 40] [--repeats 15] [--json]
    python benchmarks/bench_callback.py --nvtx --smoke --no-tool   # checks it runs
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tfaccel.core.timing import Summary, compare, measure_interleaved, summarize

TARGET_OVERHEAD = 0.02
TARGET_NVTX_OVERHEAD = 0.01
NVTX_TOOL_SOURCE = Path(__file__).resolve().parent.parent / "tests" / "data" / "nvtx_recorder.c"


def run(*, steps: int, repeats: int, batch_size: int, tiny: bool) -> dict[str, Any]:
    """Time the three configurations; return medians, spreads and the overhead ratios."""
    from tfaccel.keras import instrument

    model, ds = _reference(batch_size, tiny)
    sink = io.StringIO()

    def fit(dataset: Any, callbacks: list[Any]) -> float:
        return _fit_seconds(model, dataset, callbacks, steps)

    hook_seconds: list[float] = []

    def callback() -> Any:
        return _timed_callback(hook_seconds, stream=sink, summary=False, confirm=False)

    # one callback and one instrumented dataset for all the rounds, as in a long training:
    # their one-off costs (first trace of the stamp, reading /proc) are not per step
    with_callback, with_both, instrumented = callback(), callback(), instrument(ds)
    candidates: dict[str, Callable[[], float | None]] = {
        "plain": lambda: fit(ds, []),
        "callback": lambda: fit(ds, [with_callback]),
        "callback+instrument": lambda: fit(instrumented, [with_both]),
    }
    samples = measure_interleaved(candidates, repeats=repeats, warmup=1)
    base = summarize(samples["plain"])
    hook_us = 2 * 1e6 * sum(hook_seconds) / len(hook_seconds)  # begin + end: mean per step
    stamp_us = _stamp_cost_us(ds, repeats)
    rows = []
    for name, values in samples.items():
        s = summarize(values)
        ratio = s.median / base.median
        paired = summarize([v / p for v, p in zip(values, samples["plain"], strict=True)])
        rows.append(
            {
                **_step_row(name, s),
                "ratio_to_plain": ratio,
                "overhead_percent": (ratio - 1) * 100,
                "paired_ratio_median": paired.median,
                "paired_ratio_q1": paired.q1,
                "paired_ratio_q3": paired.q3,
                "paired_overhead_percent": (paired.median - 1) * 100,
                "q1_ratio": s.q1 / base.q1,
                "verdict": compare(base, s).verdict,
                "under_target": paired.median - 1 < TARGET_OVERHEAD,
            }
        )
    direct = (hook_us + stamp_us) / (base.median * 1e6)
    return {
        "direct": {
            "hook_us_per_step": hook_us,
            "stamp_us_per_batch": stamp_us,
            "plain_step_ms": base.median * 1e3,
            "overhead_percent": direct * 100,
            "under_target": direct < TARGET_OVERHEAD,
        },
        "model": "reference_cnn" + (" (tiny)" if tiny else ""),
        "batch_size": batch_size,
        "steps_per_sample": steps,
        "repeats": repeats,
        "target_overhead_percent": TARGET_OVERHEAD * 100,
        "rows": rows,
    }


def _reference(batch_size: int, tiny: bool) -> tuple[Any, Any]:
    """The reference CNN, compiled, and a repeating ``tfaccel.data.pipeline`` of 16 batches."""
    import numpy as np

    import tfaccel.data
    from tfaccel import models

    model = models.build("reference_cnn", tiny=tiny)
    model.compile(optimizer="rmsprop", loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    count = batch_size * 16
    x = rng.random((count, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, count).astype(np.int32)
    ds = tfaccel.data.pipeline((x, y), batch_size, seed=0, repeat=True, drop_remainder=True)
    return model, ds


def _fit_seconds(model: Any, dataset: Any, callbacks: list[Any], steps: int) -> float:
    """Seconds per step of one ``fit`` of ``steps`` steps."""
    begin = time.perf_counter()
    model.fit(
        dataset,
        steps_per_epoch=steps,
        epochs=1,
        verbose=0,
        shuffle=False,
        callbacks=callbacks,
    )
    return (time.perf_counter() - begin) / steps


def _timed_callback(times: list[float], **options: Any) -> Any:
    """A ``PerformanceCallback(**options)`` that appends the seconds each of its step hooks
    takes to ``times``."""
    from tfaccel.keras import PerformanceCallback

    class TimedCallback(PerformanceCallback):
        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            begin = time.perf_counter()
            super().on_train_batch_begin(batch, logs)
            times.append(time.perf_counter() - begin)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            begin = time.perf_counter()
            super().on_train_batch_end(batch, logs)
            times.append(time.perf_counter() - begin)

    return TimedCallback(**options)


def _step_row(name: str, s: Summary) -> dict[str, Any]:
    """A configuration's step time: median and quartiles in ms, and its relative IQR."""
    return {
        "config": name,
        "step_ms_median": s.median * 1e3,
        "step_ms_q1": s.q1 * 1e3,
        "step_ms_q3": s.q3 * 1e3,
        "relative_iqr": s.relative_iqr,
    }


def _stamp_cost_us(ds: Any, repeats: int, elements: int = 200) -> float:
    """Microseconds one input stamp adds to fetching a batch that is ready."""
    import tensorflow as tf

    from tfaccel.profile.input_wait import InputClock, instrument

    ready = tf.data.Dataset.from_tensors(next(iter(ds))).repeat(elements)

    def loop(dataset: Any) -> Callable[[], float]:
        def iterate() -> float:
            begin = time.perf_counter()
            for _ in dataset:
                pass
            return (time.perf_counter() - begin) / elements

        return iterate

    samples = measure_interleaved(
        {"plain": loop(ready), "stamped": loop(instrument(ready, InputClock()))},
        repeats=max(repeats, 5),
        warmup=1,
    )
    return max(0.0, summarize(samples["stamped"]).median - summarize(samples["plain"]).median) * 1e6


# --- NVTX on / off ----------------------------------------------------------------------------


def run_nvtx(*, steps: int, repeats: int, batch_size: int, tiny: bool) -> dict[str, Any]:
    """Time PerformanceCallback and StepTimer with NVTX ranges off and on, interleaved."""
    import keras
    import tensorflow as tf

    from tfaccel.keras import instrument
    from tfaccel.profile import StepTimer, nvtx_marks

    model, ds = _reference(batch_size, tiny)
    model.optimizer.build(model.trainable_variables)
    sink = io.StringIO()
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    @tf.function
    def train_step(features: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        model.optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    hook_seconds: dict[bool, list[float]] = {False: [], True: []}

    def fit(nvtx: bool) -> Callable[[], float]:
        options = {"stream": sink, "summary": False, "confirm": False, "nvtx": nvtx}
        callbacks = [_timed_callback(hook_seconds[nvtx], **options)]
        dataset = instrument(ds)
        return lambda: _fit_seconds(model, dataset, callbacks, steps)

    def loop(nvtx: bool) -> Callable[[], float]:
        timer = StepTimer(warmup_steps=0, log_every=0, live=False, sample_gpu=False, nvtx=nvtx)
        batches = iter(ds)

        def sample() -> float:
            begin = time.perf_counter()
            for _ in range(steps):
                with timer.input():
                    features, labels = next(batches)
                with timer.step() as step:
                    step.wait(train_step(features, labels))
            return (time.perf_counter() - begin) / steps

        return sample

    # one timer and one instrumented dataset per configuration for all the rounds, as in a
    # long training: their one-off costs are not per step
    candidates: dict[str, Callable[[], float | None]] = {
        "callback nvtx off": fit(nvtx=False),
        "callback nvtx on": fit(nvtx=True),
        "timer nvtx off": loop(nvtx=False),
        "timer nvtx on": loop(nvtx=True),
    }
    tool = _attached_tool()
    before = _tool_counts(tool)
    samples = measure_interleaved(candidates, repeats=repeats, warmup=1)
    after = _tool_counts(tool)
    rows = [_step_row(name, summarize(values)) for name, values in samples.items()]
    pairs = []
    marks = nvtx_marks.ranges()
    direct_us = {"callback": _marks_cost_us(marks, 1), "timer": _marks_cost_us(marks, 3)}
    for kind in ("callback", "timer"):
        off, on = samples[f"{kind} nvtx off"], samples[f"{kind} nvtx on"]
        base, measured = summarize(off), summarize(on)
        paired = summarize([b / a for a, b in zip(off, on, strict=True)])
        cost = direct_us[kind]
        direct = None if cost is None else cost / (base.median * 1e6)
        pairs.append(
            {
                "timer": kind,
                "ratio_of_medians": measured.median / base.median,
                "paired_ratio_median": paired.median,
                "paired_ratio_q1": paired.q1,
                "paired_ratio_q3": paired.q3,
                "overhead_percent": (paired.median - 1) * 100,
                "verdict": compare(base, measured).verdict,
                "direct_us_per_step": cost,
                "direct_percent": None if direct is None else direct * 100,
                "under_target": (paired.median - 1 if direct is None else direct)
                < TARGET_NVTX_OVERHEAD,
            }
        )
    hooks = {
        ("on" if on else "off"): 2 * 1e6 * sum(t) / len(t) if t else None
        for on, t in hook_seconds.items()
    }
    return {
        "mode": "nvtx",
        "model": "reference_cnn" + (" (tiny)" if tiny else ""),
        "batch_size": batch_size,
        "steps_per_sample": steps,
        "repeats": repeats,
        "target_overhead_percent": TARGET_NVTX_OVERHEAD * 100,
        "tool": {
            "attached": marks is not None,
            "path": tool,
            "ranges_pushed": None if before is None or after is None else after[0] - before[0],
            "ranges_popped": None if before is None or after is None else after[1] - before[1],
        },
        "callback_hook_us_per_step": hooks,
        "rows": rows,
        "pairs": pairs,
    }


def _marks_cost_us(marks: Any, ranges: int, rounds: int = 20000) -> float | None:
    """Microseconds the NVTX calls of one step take (``ranges`` ranges: the callback's one,
    the timer's three), in a tight loop; None without a tool (nothing is called)."""
    if marks is None:
        return None
    from tfaccel.profile import nvtx_marks

    def one_round() -> None:
        marks.push(nvtx_marks.STEP, 7)
        for _ in range(ranges - 1):
            marks.push(nvtx_marks.INPUT)
            marks.pop()
        marks.pop()

    def all_rounds() -> None:
        for _ in range(rounds):
            one_round()

    seconds = measure_interleaved({"calls": all_rounds}, repeats=5, warmup=0)["calls"]
    return min(seconds) / rounds * 1e6  # the best of 5


def _attached_tool() -> str | None:
    path = os.environ.get("NVTX_INJECTION64_PATH")
    return path if path and os.path.isfile(path) else None


def _tool_counts(path: str | None) -> tuple[int, int] | None:
    """(ranges pushed, popped) so far, read from the loaded tool; None for another tool."""
    if path is None:
        return None
    import ctypes

    try:
        tool = ctypes.CDLL(path)  # the library NVTX loaded: dlopen gives the same one
        pushed = ctypes.c_ulonglong.in_dll(tool, "nvtx_recorder_pushes").value
        popped = ctypes.c_ulonglong.in_dll(tool, "nvtx_recorder_pops").value
    except (OSError, ValueError):
        return None
    return pushed, popped


def _run_with_tool(argv: list[str]) -> int | None:
    """Build the counting NVTX tool and run this benchmark again with it attached; None when
    there is no C compiler (the run then goes on without a tool, and says so)."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        print("no C compiler (cc): measuring without an NVTX tool attached", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        tool = os.path.join(tmp, "nvtx_recorder.so")
        subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", tool, str(NVTX_TOOL_SOURCE)], check=True
        )
        env = {**os.environ, "NVTX_INJECTION64_PATH": tool}
        env.pop("NVTX_RECORD_FILE", None)  # count only: writing every range would cost more
        return subprocess.run([sys.executable, __file__, *argv], env=env, check=False).returncode


def _print_nvtx(result: dict[str, Any]) -> None:
    tool = result["tool"]
    print(
        f"NVTX ranges on vs off on {result['model']}, batch {result['batch_size']}, "
        f"{result['steps_per_sample']} steps per sample, {result['repeats']} interleaved rounds"
    )
    if tool["attached"]:
        print(
            f"  NVTX tool attached ({tool['path'] or 'another tool'}): "
            f"{tool['ranges_pushed']} ranges pushed, {tool['ranges_popped']} popped"
        )
    else:
        print("  no NVTX tool attached: nvtx=True takes the same path as nvtx=False")
    for row in result["rows"]:
        print(
            f"  {row['config']:<18} {row['step_ms_median']:8.2f} ms/step "
            f"(q1-q3 {row['step_ms_q1']:.2f}-{row['step_ms_q3']:.2f}, "
            f"IQR {row['relative_iqr'] * 100:.1f}%)"
        )
    for pair in result["pairs"]:
        direct = (
            "no NVTX call"
            if pair["direct_us_per_step"] is None
            else f"{pair['direct_us_per_step']:.2f} us of NVTX calls per step = "
            f"{pair['direct_percent']:.4f}%"
        )
        print(
            f"  {pair['timer']:<8} on/off: medians x{pair['ratio_of_medians']:.3f}, per-round "
            f"x{pair['paired_ratio_median']:.3f} (q1-q3 {pair['paired_ratio_q1']:.3f}-"
            f"{pair['paired_ratio_q3']:.3f}): {pair['overhead_percent']:+.2f}%  "
            f"{pair['verdict']}; direct: {direct}"
        )
    hooks = result["callback_hook_us_per_step"]
    if hooks.get("off") is not None and hooks.get("on") is not None:
        print(
            f"  callback hooks per step: {hooks['off']:.1f} us off, {hooks['on']:.1f} us on "
            f"(target: under {result['target_overhead_percent']:.0f}% of the step)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--smoke", action="store_true", help="tiny model, 8 steps, 2 repeats")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--nvtx", action="store_true", help="NVTX ranges on vs off")
    parser.add_argument(
        "--no-tool", action="store_true", help="--nvtx: do not attach the counting NVTX tool"
    )
    args = parser.parse_args(argv)
    if args.nvtx and not args.no_tool and _attached_tool() is None:
        status = _run_with_tool(list(sys.argv[1:] if argv is None else argv))
        if status is not None:
            return status
    measure = run_nvtx if args.nvtx else run
    if args.smoke:
        result = measure(steps=8, repeats=2, batch_size=16, tiny=True)
    else:
        result = measure(
            steps=args.steps, repeats=args.repeats, batch_size=args.batch_size, tiny=False
        )
    if args.json:
        print(json.dumps(result, indent=2))
    elif args.nvtx:
        _print_nvtx(result)
    else:
        _print(result)
    return 0


def _print(result: dict[str, Any]) -> None:
    print(
        f"PerformanceCallback overhead on {result['model']}, batch {result['batch_size']}, "
        f"{result['steps_per_sample']} steps per sample, {result['repeats']} interleaved rounds"
    )
    direct = result["direct"]
    print(
        f"  direct: {direct['hook_us_per_step']:.0f} us in the hooks per step + "
        f"{direct['stamp_us_per_batch']:.0f} us per input stamp = "
        f"{direct['overhead_percent']:.2f}% of a {direct['plain_step_ms']:.2f} ms step"
    )
    for row in result["rows"]:
        print(
            f"  {row['config']:<20} {row['step_ms_median']:8.2f} ms/step "
            f"(q1-q3 {row['step_ms_q1']:.2f}-{row['step_ms_q3']:.2f})  "
            f"medians x{row['ratio_to_plain']:.3f}  q1 x{row['q1_ratio']:.3f}  "
            f"per-round x{row['paired_ratio_median']:.3f} "
            f"(q1-q3 {row['paired_ratio_q1']:.3f}-{row['paired_ratio_q3']:.3f}): overhead "
            f"{row['paired_overhead_percent']:+.2f}%  {row['verdict']}"
        )


if __name__ == "__main__":
    sys.exit(main())
