"""Predicted against measured training memory: the check of ``tfaccel plan``'s memory model.

For each model x batch size x precision, one fresh process builds the model, trains a few real
steps (``train_on_batch``, Adam) and reads the allocator's peak with
``tf.config.experimental.get_memory_info(DEVICE)["peak"]`` (after ``reset_memory_stats``);
another fresh process predicts the peak with ``tfaccel.planning.estimate_memory`` from the
traced step, under the same allocator's counting rules, before anything runs. The table shows
predicted, measured and the error; the summary the median and the worst absolute error.

    python benchmarks/bench_plan.py                    # 5 models x 3 batches x 2 precisions, CPU
    python benchmarks/bench_plan.py --smoke            # two cheap rows
    python benchmarks/bench_plan.py --device gpu:0     # against the GPU allocator's peak

Exit status 1 when a row is off by more than 20% or the median by more than 10%.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

ROWS: dict[str, tuple[int, ...]] = {
    "mlp": (64, 256, 1024),
    "reference_cnn": (32, 128, 256),
    "resnet20": (32, 64, 128),
    "transformer": (16, 32, 64),
    "embedding": (32, 128, 512),
}
SMOKE_ROWS: dict[str, tuple[int, ...]] = {"mlp": (256,)}
PRECISIONS = ("float32", "mixed_bfloat16")
ROW_LIMIT = 0.20
MEDIAN_LIMIT = 0.10
STEPS = 3
HEADER = f"{'model':<14} {'batch':>5} {'precision':<15} {'predicted':>9} {'measured':>9}  error"


def transformer(*, dtype: str = "float32", length: int = 64, vocab: int = 2000) -> Any:
    """A small Transformer encoder classifier: token + position embedding, two blocks of
    4-head self-attention (d=64) and a 128-unit feed-forward, pooled, softmax over 10."""
    import keras
    from keras import layers

    tokens = keras.Input(shape=(length,), dtype="int32")
    x = layers.Embedding(vocab, 64, dtype=dtype)(tokens)
    positions = layers.Embedding(length, 64, dtype=dtype)(keras.ops.arange(length))
    x = x + positions
    for _ in range(2):
        attention = layers.MultiHeadAttention(4, 16, dtype=dtype)(x, x)
        x = layers.LayerNormalization(dtype=dtype)(x + attention)
        hidden = layers.Dense(128, activation="relu", dtype=dtype)(x)
        x = layers.LayerNormalization(dtype=dtype)(x + layers.Dense(64, dtype=dtype)(hidden))
    x = layers.GlobalAveragePooling1D(dtype=dtype)(x)
    x = layers.Dense(10, dtype=dtype)(x)
    outputs = layers.Activation("softmax", dtype="float32")(x)
    return keras.Model(tokens, outputs, name="transformer")


def embedding(*, dtype: str = "float32", length: int = 100, vocab: int = 20000) -> Any:
    """A text classifier: a 20,000 x 64 embedding, a 1-D convolution, pooling, two dense."""
    import keras
    from keras import layers

    return keras.Sequential(
        [
            keras.Input(shape=(length,), dtype="int32"),
            layers.Embedding(vocab, 64, dtype=dtype),
            layers.Conv1D(128, 5, activation="relu", dtype=dtype),
            layers.GlobalMaxPooling1D(dtype=dtype),
            layers.Dense(64, activation="relu", dtype=dtype),
            layers.Dense(10, dtype=dtype),
            layers.Activation("softmax", dtype="float32"),
        ],
        name="embedding",
    )


def build(name: str, dtype: str) -> tuple[Any, Any, Any]:
    """The compiled model and one batch-maker ``(batch) -> (x, y)``."""
    import keras
    import numpy as np

    from tfaccel import models

    if name in models.MODELS:
        info = models.MODELS[name]
        model = models.build(name, dtype=dtype)

        def batch_of(n: int) -> tuple[Any, Any]:
            rng = np.random.default_rng(0)
            x = rng.random((n, *info.input_shape), dtype=np.float32)
            return x, rng.integers(0, info.classes, size=(n,))

    else:
        model = {"transformer": transformer, "embedding": embedding}[name](dtype=dtype)
        length, vocab = int(model.inputs[0].shape[1]), 2000 if name == "transformer" else 20000

        def batch_of(n: int) -> tuple[Any, Any]:
            rng = np.random.default_rng(0)
            x = rng.integers(0, vocab, size=(n, length), dtype=np.int32)
            return x, rng.integers(0, 10, size=(n,))

    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    return model, batch_of, None


def measure(name: str, batch: int, dtype: str, device: str) -> dict[str, Any]:
    """Train ``STEPS`` real steps; the allocator's peak, from a reset before the first."""
    import tensorflow as tf

    tf_device = device.upper()
    with tf.device(tf_device):
        model, batch_of, _ = build(name, dtype)
        x, y = batch_of(batch)
        tf.config.experimental.reset_memory_stats(tf_device)
        for _ in range(STEPS):
            model.train_on_batch(x, y)
        info = tf.config.experimental.get_memory_info(tf_device)
    return {"peak": int(info["peak"])}


def predict(name: str, batch: int, dtype: str, device: str) -> dict[str, Any]:
    """The plan's memory prediction, under the allocator rules of ``device``."""
    from tfaccel import planning

    model, _, _ = build(name, dtype)
    rules = planning.allocator_rules(device)
    estimate = planning.estimate_memory(model, batch, rules=rules)
    return {"peak": estimate.peak_bytes, "parts": estimate.parts, "peak_op": estimate.peak_op}


def child(kind: str, name: str, batch: int, dtype: str, device: str) -> dict[str, Any]:
    """Run ``measure`` or ``predict`` in a fresh Python process."""
    # The CPU allocator the prediction models is oneDNN's, which TensorFlow turns on by default
    # only on processors with AVX-512 or AMX: elsewhere the default allocator keeps no
    # statistics at all ("Allocator stats not available"), so the measurement asks for it.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="1")
    command = [sys.executable, __file__, "--child", kind, name, str(batch), dtype, device]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} {name} {batch} {dtype} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(rows: dict[str, tuple[int, ...]], device: str) -> list[dict[str, Any]]:
    results = []
    for name, batches in rows.items():
        for batch in batches:
            for dtype in PRECISIONS:
                started = time.perf_counter()
                measured = child("measure", name, batch, dtype, device)["peak"]
                predicted_doc = child("predict", name, batch, dtype, device)
                predicted = predicted_doc["peak"]
                error = (predicted - measured) / measured if measured else float("nan")
                row = {
                    "model": name,
                    "batch": batch,
                    "precision": dtype,
                    "predicted_bytes": predicted,
                    "measured_bytes": measured,
                    "error": error,
                    "seconds": time.perf_counter() - started,
                    "peak_op": predicted_doc["peak_op"],
                }
                results.append(row)
                print(_line(row), flush=True)
    return results


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['model']:<14} {row['batch']:>5} {row['precision']:<15} "
        f"{row['predicted_bytes'] / 2**20:>9.1f} {row['measured_bytes'] / 2**20:>9.1f} "
        f"{row['error'] * 100:>+7.1f}%"
    )


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [abs(r["error"]) for r in results]
    worst = max(results, key=lambda r: abs(r["error"]))
    median = statistics.median(errors)
    return {
        "rows": len(results),
        "median_abs_error": median,
        "worst_abs_error": abs(worst["error"]),
        "worst_row": f"{worst['model']} batch {worst['batch']} {worst['precision']}",
        "passed": median <= MEDIAN_LIMIT and all(e <= ROW_LIMIT for e in errors),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu:0", help="cpu:0 (default) or gpu:0")
    parser.add_argument("--smoke", action="store_true", help="two cheap rows")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, name, batch, dtype, device = args.child
        doer = measure if kind == "measure" else predict
        print(json.dumps(doer(name, int(batch), dtype, device)))
        return 0
    rows = SMOKE_ROWS if args.smoke else ROWS
    print(f"peak training memory on {args.device}: predicted (tfaccel plan) vs measured (MiB)")
    print(HEADER)
    results = run(rows, args.device)
    doc = summary(results)
    print(
        f"median |error| {doc['median_abs_error'] * 100:.1f}% (limit {MEDIAN_LIMIT:.0%}), "
        f"worst {doc['worst_abs_error'] * 100:.1f}% ({doc['worst_row']}; limit {ROW_LIMIT:.0%})"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"device": args.device, "rows": results, "summary": doc}, handle, indent=1)
    return 0 if doc["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
