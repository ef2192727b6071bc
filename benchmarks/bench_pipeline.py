"""``tfaccel.data.pipeline`` against a naive ``from_generator`` pipeline on the reference CNN.

Both feed the same synthetic 8-bit images, scaled to [0, 1] on the way in:

* ``tfaccel.data.pipeline``: arrays, full shuffle, the scaling as a vectorised map (once per
  batch), ``prefetch(AUTOTUNE)``;
* ``naive from_generator``: a Python generator yielding one example at a time, scaled with
  NumPy, then ``.batch`` (tf.data still injects a final prefetch, as it does for users);
* ``one ready batch``: the reference point with no input work at all (one scaled batch
  repeated from memory).

On a CPU-only machine the input pipeline runs on the cores the model trains on, so a costly
pipeline can slow the steps without making them wait: compare the examples/s with the ready
batch's as well as the input-wait shares.

One sample = one ``fit`` of ``--steps`` steps with a ``PerformanceCallback`` on the
instrumented dataset; the two are timed interleaved in one process. Reported per pipeline:
examples/s and the share of the step spent waiting for input (medians over the rounds, with
the quartiles).

    python benchmarks/bench_pipeline.py [--steps 30] [--repeats 5] [--batch-size 64] [--json]
    python benchmarks/bench_pipeline.py --tiny    # the tiny CNN: a fast device's stand-in
    python benchmarks/bench_pipeline.py --smoke   # tiny model, a few steps: checks it runs
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tfaccel.core.timing import compare, measure_interleaved, summarize

WARMUP_STEPS = 5


def run(*, steps: int, repeats: int, batch_size: int, tiny: bool) -> dict[str, Any]:
    """Time both pipelines; return per pipeline examples/s and input-wait share."""
    import numpy as np
    import tensorflow as tf

    import tfaccel.data
    from tfaccel import models
    from tfaccel.keras import PerformanceCallback, instrument
    from tfaccel.profile.command import scale_images

    model = models.build("reference_cnn", tiny=tiny)
    model.compile(optimizer="rmsprop", loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    count = batch_size * 32
    x = rng.integers(0, 256, size=(count, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, count).astype(np.int32)

    tuned = tfaccel.data.pipeline(
        (x, y), batch_size, map_fn=scale_images, seed=0, repeat=True, drop_remainder=True
    )

    def examples() -> Any:
        for i in itertools.count():
            yield x[i % count].astype(np.float32) / 255.0, y[i % count]

    signature = (tf.TensorSpec((32, 32, 3), tf.float32), tf.TensorSpec((), tf.int32))
    naive = tf.data.Dataset.from_generator(examples, output_signature=signature).batch(
        batch_size, drop_remainder=True
    )
    ready = tf.data.Dataset.from_tensors(next(iter(tuned))).repeat()
    figures: dict[str, list[Any]] = {
        "tfaccel.data.pipeline": [],
        "naive from_generator": [],
        "one ready batch": [],
    }

    def sample(name: str, dataset: Any) -> Callable[[], float]:
        def fit() -> float:
            callback = PerformanceCallback(
                warmup_steps=WARMUP_STEPS, live=False, summary=False, confirm=False
            )
            model.fit(
                instrument(dataset),
                steps_per_epoch=WARMUP_STEPS + steps,
                epochs=1,
                verbose=0,
                shuffle=False,
                callbacks=[callback],
            )
            f = callback.measurement().figures()
            figures[name].append(f)
            assert f.period_s is not None
            return f.period_s.median

        return fit

    candidates: dict[str, Callable[[], float | None]] = {
        "tfaccel.data.pipeline": sample("tfaccel.data.pipeline", tuned),
        "naive from_generator": sample("naive from_generator", naive),
        "one ready batch": sample("one ready batch", ready),
    }
    samples = measure_interleaved(candidates, repeats=repeats, warmup=1)
    kept = {name: values[-repeats:] for name, values in figures.items()}  # drop the warm-up
    rows = []
    naive_step = summarize(samples["naive from_generator"])
    for name, values in samples.items():
        step = summarize(values)
        speed = summarize([f.examples_per_s for f in kept[name]])
        share = summarize([f.input_share for f in kept[name]])
        rows.append(
            {
                "pipeline": name,
                "examples_per_s_median": speed.median,
                "examples_per_s_q1": speed.q1,
                "examples_per_s_q3": speed.q3,
                "step_ms_median": step.median * 1e3,
                "step_relative_iqr": step.relative_iqr,
                "input_wait_share_median": share.median,
                "input_wait_share_q1": share.q1,
                "input_wait_share_q3": share.q3,
                "step_vs_naive": compare(naive_step, step).verdict,
            }
        )
    return {
        "model": "reference_cnn" + (" (tiny)" if tiny else ""),
        "batch_size": batch_size,
        "steps_per_sample": steps,
        "repeats": repeats,
        "pipeline_choices": tfaccel.data.describe(tuned).to_dict()["choices"],
        "rows": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--tiny", action="store_true", help="the tiny CNN (a fast device's stand-in)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny model, 10 steps, 2 repeats")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        result = run(steps=10, repeats=2, batch_size=16, tiny=True)
    else:
        result = run(
            steps=args.steps, repeats=args.repeats, batch_size=args.batch_size, tiny=args.tiny
        )
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"Input pipelines on {result['model']}, batch {result['batch_size']}, "
        f"{result['steps_per_sample']} measured steps per sample, {result['repeats']} "
        "interleaved rounds"
    )
    for row in result["rows"]:
        q1, q3 = row["input_wait_share_q1"] * 100, row["input_wait_share_q3"] * 100
        print(
            f"  {row['pipeline']:<22} {row['examples_per_s_median']:8.0f} examples/s "
            f"(q1-q3 {row['examples_per_s_q1']:.0f}-{row['examples_per_s_q3']:.0f})  "
            f"input wait {row['input_wait_share_median'] * 100:5.1f}% (q1-q3 {q1:.1f}-{q3:.1f}%)"
            f"  step vs naive: {row['step_vs_naive']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
