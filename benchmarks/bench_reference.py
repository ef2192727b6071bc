"""The reference CNN: the Keras default against the best configuration, and matmul cross-checked.

In one process, on the CPU (or --device gpu:0):

1. The Keras CIFAR-10 CNN (the reference CNN) trained with the Keras default (``fit`` on
   NumPy arrays, batch 32, float32) and with tf.data at batch 256 + prefetch in float32 and in
   the device's 16-bit mixed precision, each with XLA off and on, all interleaved; prints
   images/s medians, their IQR, the best configuration and its ratio over the default with the
   verdict of the shared timing core.
2. The bench's matmul figure (``tfaccel.bench.micro``: k chained matmuls in a ``tf.function``)
   at 2048^3 in float32 and bfloat16, interleaved with a plain timing: the same k matmuls as
   eager ``tf.matmul(a, b)`` calls, the clock stopped by ``.numpy()`` of the last result; prints
   both and their ratio, which should be within 10%. (A single eager call timed with a full
   ``.numpy()`` of its 2048x2048 result reads ~15% lower in bfloat16 here: that is the copy to
   NumPy, not the matmul.)

The matmul ceilings also give the models' utilisation (of the measured ceiling).

    python benchmarks/bench_reference.py [--repeats 5] [--seconds 2] [--device cpu] [--json]

Exit status 1 when a matmul figure disagrees with the plain timing by more than 10%.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tfaccel import inventory, probe
from tfaccel.bench import micro
from tfaccel.bench.analysis import headline, model_rows
from tfaccel.bench.datasets import synthetic
from tfaccel.bench.options import PROFILES
from tfaccel.bench.results import BenchMeasurement, BenchRun
from tfaccel.bench.targets import resolve_targets
from tfaccel.bench.training import KERAS_DEFAULT, TrainConfig, train_throughput
from tfaccel.core.timing import compare, measure_interleaved, summarize

AGREEMENT = 0.10
MATMUL_N = 2048


def _plain_matmuls(a: Any, b: Any, k: int) -> float:
    import tensorflow as tf

    start = time.perf_counter()
    for _ in range(k):
        c = tf.matmul(a, b)
    c.numpy()
    return time.perf_counter() - start


def models_part(
    target: Any, args: argparse.Namespace, matmuls: list[BenchMeasurement]
) -> dict[str, Any]:
    from dataclasses import replace

    profile = replace(PROFILES["full"], model_seconds=args.seconds)
    mixed = "mixed_bfloat16" if "bfloat16" in target.dtypes else "mixed_float16"
    configs = [KERAS_DEFAULT] + [
        TrainConfig("tf.data", 256, precision, jit)
        for precision in ("float32", mixed)
        for jit in (False, True)
    ]
    data = synthetic(10_000, (32, 32, 3))
    done = [0]
    total = len(configs) * (args.repeats + 1)

    def tick(name: str) -> None:
        done[0] += 1
        print(f"\r  reference CNN {done[0]}/{total}: {name:40}", end="", file=sys.stderr)

    measurements = train_throughput(
        "reference_cnn", target, configs, data, profile, repeats=args.repeats, warmup=1, tick=tick
    )
    print(file=sys.stderr)
    run = BenchRun(
        started_at="",
        finished_at=None,
        status="complete",
        options={},
        fingerprint="",
        fingerprint_data={},
        tfaccel_version="",
        tf_version=None,
        targets=[target.to_dict()],
        measurements=[*matmuls, *measurements],
    )
    return {"rows": model_rows(run), "headline": headline(run)}


def matmul_part(
    target: Any, args: argparse.Namespace
) -> tuple[list[dict[str, Any]], list[BenchMeasurement]]:
    import tensorflow as tf

    dtypes = tuple(d for d in target.dtypes if d in ("float32", "bfloat16"))[:2]
    candidates, plan = micro.matmul_candidates(target, (MATMUL_N,), 0.5, dtypes)
    for dtype in dtypes:
        with tf.device(target.tf_devices[0]):
            a = tf.cast(tf.random.normal((MATMUL_N, MATMUL_N), seed=3), dtype)
            b = tf.cast(tf.random.normal((MATMUL_N, MATMUL_N), seed=4), dtype)

        def plain(a: Any = a, b: Any = b, k: int = plan[f"{dtype} n={MATMUL_N}"][2]) -> float:
            with tf.device(target.tf_devices[0]):
                return _plain_matmuls(a, b, k)

        candidates[f"plain {dtype}"] = plain
    samples = measure_interleaved(candidates, repeats=max(args.repeats, 7), warmup=2)
    bench_figures = {m.config["dtype"]: m for m in micro.matmul_results(target, samples, plan)}
    flops = 2.0 * MATMUL_N**3
    out = []
    for dtype in dtypes:
        k = plan[f"{dtype} n={MATMUL_N}"][2]
        plain_rates = [flops * k / s / 1e12 for s in samples[f"plain {dtype}"]]
        b, p = bench_figures[dtype].summary, summarize(plain_rates)
        ratio = b.median / p.median
        out.append(
            {
                "dtype": dtype,
                "bench_tflops": b.median,
                "bench_relative_iqr": b.relative_iqr,
                "plain_tflops": p.median,
                "plain_relative_iqr": p.relative_iqr,
                "ratio": ratio,
                "agrees_within_10_percent": abs(ratio - 1) <= AGREEMENT,
                "matmuls_per_sample": k,
                "verdict": compare(p, b, higher_is_better=True).verdict,
            }
        )
    return out, list(bench_figures.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="target seconds per sample")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-models", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    snap = probe.snapshot()
    target = resolve_targets(args.device, inventory.build(snap), snap.cpu.flags)[0]
    result: dict[str, Any] = {"device": target.label}
    result["matmul"], matmuls = matmul_part(target, args)
    if not args.skip_models:
        result["reference_cnn"] = models_part(target, args, matmuls)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0 if all(r["agrees_within_10_percent"] for r in result["matmul"]) else 1


def _print(result: dict[str, Any]) -> None:
    print(f"device: {result['device']}")
    cnn = result.get("reference_cnn")
    if cnn:
        print("\nreference CNN, training images/s (median, IQR as % of the median):")
        for r in cnn["rows"]:
            speedup = r["speedup_vs_default"]
            vs = "-" if speedup is None else f"x{speedup:.2f}"
            util = r["utilisation_percent"]
            print(
                f"  {r['config']:28} {r['images_per_s']:8.0f}  IQR {r['relative_iqr'] * 100:5.1f}%"
                f"  of matmul {util or 0:5.1f}%  MFU {r['mfu_percent'] or 0:5.2f}%  vs default {vs}"
            )
        h = cnn["headline"]
        print(
            f"\n  Keras default {h['default_images_per_s']:.0f} img/s -> best ({h['best_config']}) "
            f"{h['best_images_per_s']:.0f} img/s: ratio x{h['ratio']:.2f}; {h['verdict']}"
        )
    print(f"\nmatmul {MATMUL_N}^3, TFLOP/s: the bench's figure against a plain tf.matmul:")
    for r in result["matmul"]:
        print(
            f"  {r['dtype']:9} bench {r['bench_tflops']:.3f}"
            f" (IQR {r['bench_relative_iqr'] * 100:.1f}%)"
            f"  plain {r['plain_tflops']:.3f} (IQR {r['plain_relative_iqr'] * 100:.1f}%)"
            f"  ratio {r['ratio']:.3f}"
            f"  within 10%: {'yes' if r['agrees_within_10_percent'] else 'NO'}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
