"""A batched matmul's FLOP rate on this CPU by the shape of its matrices, against the plan's.

The plan's time model measures one batched rate (``CpuCalibration.
batched_matmul_flops_per_s``, on [64, 16] x [16, 64] matrices, as a head of 16 over 64 tokens
scores them) and runs a product of many matrices at it where it does as few FLOPs per byte,
faster where it does more, up to the matmul rate (``roofline._batched_rate``). This times, in
one interleaved measurement (each round runs each workload once, in a rotating order; the
medians of ``--rounds`` rounds), each shape's forward product and both its gradients, as the
calibration times them, and the calibration's Dense matmuls (512 x 512 at batch 1024 less 64);
it prints per shape its FLOPs per byte, the measured rate, the rate the interpolation gives
from the two measured here and the one batched rate, each against the measured one.

    python benchmarks/results/batched_shapes.py [--rounds 11]

Shapes: the calibration's; attention's scores and context in the benchmark's encoder block
(8 heads of 16 over 128 tokens); a time-series Transformer's (heads of 64 over 500 tokens);
heads of 64 and 256 over 64 tokens; a ViT's (heads of 64 over 26 patches); 256 x 256.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

SHAPES = {
    "the calibration's [64,16] x [16,64]": (512, 64, 16, 64),
    "encoder scores [128,16] x [16,128]": (128, 128, 16, 128),
    "encoder context [128,128] x [128,16]": (128, 128, 128, 16),
    "series scores [500,64] x [64,500]": (64, 500, 64, 500),
    "series context [500,500] x [500,64]": (64, 500, 500, 64),
    "[64,64] x [64,64]": (512, 64, 64, 64),
    "[64,256] x [256,64]": (512, 64, 256, 64),
    "ViT scores [26,64] x [64,26]": (512, 26, 64, 26),
    "[256,256] x [256,256]": (64, 256, 256, 256),
}
"""Name: (matrices, m, k, n) of an ``m x k`` by ``k x n`` product per matrix."""


def training(shape: list[int], other: list[int]) -> Callable[[], Any]:
    """The forward ``matmul`` of two variables of these shapes and both gradients, as the
    calibration times a product."""
    import tensorflow as tf

    a = tf.Variable(tf.random.normal(shape))
    b = tf.Variable(tf.random.normal(other))

    @tf.function
    def run() -> Any:
        with tf.GradientTape() as tape:
            out = tf.reduce_sum(tf.matmul(a, b))
        da, db = tape.gradient(out, [a, b])
        return tf.reduce_sum(da[:1]) + tf.reduce_sum(db[:1])

    return lambda: run().numpy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import bench_plan

    from tfaccel.planning import roofline

    print(f"command: python benchmarks/results/batched_shapes.py {' '.join(argv or sys.argv[1:])}")
    print(bench_plan.cpu_line())
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    work = {name: training([b, m, k], [b, k, n]) for name, (b, m, k, n) in SHAPES.items()}
    work["dense 64"] = training([64, 512], [512, 512])
    work["dense 1024"] = training([1024, 512], [512, 512])
    names = list(work)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # a warm-up call each
        work[name]()
    for round_index in range(args.rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            for _ in range(3):
                work[name]()
            times[name].append((time.perf_counter() - started) / 3)
    median = {name: statistics.median(t) for name, t in times.items()}
    matmul = 3 * 2 * (1024 - 64) * 512 * 512 / (median["dense 1024"] - median["dense 64"])
    b, m, k, n = SHAPES["the calibration's [64,16] x [16,64]"]
    batched = 3 * 2 * b * m * k * n / median["the calibration's [64,16] x [16,64]"]
    figures = roofline.CpuCalibration(
        step_overhead_s=0.0,
        op_floor_s=0.0,
        parallel_op_s=0.0,
        matmul_flops_per_s=matmul,
        conv_flops_per_s=matmul,
        bandwidth_bytes_per_s=1e10,
        batched_matmul_flops_per_s=batched,
    )
    print(
        f"the Dense matmuls' rate {matmul / 1e9:.1f} GFLOP/s; the calibration's batched "
        f"matmuls' {batched / 1e9:.1f}"
    )
    print(
        f"{'product (per matrix)':<38} {'matrices':>8} {'FLOP/B':>7} {'ms':>8} "
        f"{'GFLOP/s':>8} {'interpolated':>13} {'one rate':>9}"
    )
    for name, (b, m, k, n) in SHAPES.items():
        flops = 3 * 2 * b * m * k * n
        intensity = 2 * m * k * n / (4 * (m * k + k * n + m * n))
        rate = flops / median[name]
        modelled = roofline._batched_rate(intensity, figures)
        spread = statistics.quantiles(times[name], n=4)
        print(
            f"{name:<38} {b:>8} {intensity:7.1f} {median[name] * 1e3:8.2f} {rate / 1e9:8.1f} "
            f"{modelled / rate:12.2f}x {batched / rate:8.2f}x  "
            f"(IQR {flops / spread[2] / 1e9:.0f}-{flops / spread[0] / 1e9:.0f} GFLOP/s)",
            flush=True,
        )
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("interpolated, one rate: the modelled rate over the measured one (above 1: too fast)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
