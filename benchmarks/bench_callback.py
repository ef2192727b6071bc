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
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tfaccel.timing import compare, measure_interleaved, summarize

TARGET_OVERHEAD = 0.02


def run(*, steps: int, repeats: int, batch_size: int, tiny: bool) -> dict[str, Any]:
    """Time the three configurations; return medians, spreads and the overhead ratios."""
    import numpy as np

    import tfaccel.data
    from tfaccel import models
    from tfaccel.keras import PerformanceCallback, instrument

    model = models.build("reference_cnn", tiny=tiny)
    model.compile(optimizer="rmsprop", loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    count = batch_size * 16
    x = rng.random((count, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, count).astype(np.int32)
    ds = tfaccel.data.pipeline((x, y), batch_size, seed=0, repeat=True, drop_remainder=True)
    sink = io.StringIO()

    def fit(dataset: Any, callbacks: list[Any]) -> float:
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

    hook_seconds: list[float] = []

    class TimedCallback(PerformanceCallback):
        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            begin = time.perf_counter()
            super().on_train_batch_begin(batch, logs)
            hook_seconds.append(time.perf_counter() - begin)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            begin = time.perf_counter()
            super().on_train_batch_end(batch, logs)
            hook_seconds.append(time.perf_counter() - begin)

    def callback() -> Any:
        return TimedCallback(stream=sink, summary=False, confirm=False)

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
                "config": name,
                "step_ms_median": s.median * 1e3,
                "step_ms_q1": s.q1 * 1e3,
                "step_ms_q3": s.q3 * 1e3,
                "relative_iqr": s.relative_iqr,
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


def _stamp_cost_us(ds: Any, repeats: int, elements: int = 200) -> float:
    """Microseconds one input stamp adds to fetching a batch that is ready."""
    import tensorflow as tf

    from tfaccel.profile.clock import InputClock, instrument

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--smoke", action="store_true", help="tiny model, 8 steps, 2 repeats")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        result = run(steps=8, repeats=2, batch_size=16, tiny=True)
    else:
        result = run(steps=args.steps, repeats=args.repeats, batch_size=args.batch_size, tiny=False)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
