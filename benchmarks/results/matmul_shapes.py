"""A matmul's FLOP rate on this CPU by shape and by which operand is transposed, alone.

A Dense layer's training step runs three matmuls: the forward ``x @ W``, the kernel's gradient
``x^T @ dy`` (``transpose_a``) and the input's gradient ``dy @ W^T`` (``transpose_b``). The
plan's time model runs every ``MatMul`` at one measured rate (``CpuCalibration.
matmul_flops_per_s``, the three together). This times each product alone, as a chain of
``--chain`` products in one ``tf.function`` (each reading the last one's result, so that none
is skipped), the median of ``--rounds`` calls, and prints its rate and its time against the
same shape untransposed.

    python benchmarks/results/matmul_shapes.py [--chain 20] [--rounds 7]

Default shapes: the calibration's small CNN's 5408 x 512 Dense layer at batch 64, its large
matmuls' 1024 x 1024 at batch 256, and a small 128 x 128 at batch 32.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = ((64, 5408, 512), (256, 1024, 1024), (32, 128, 128))
"""(batch, inputs, units) of a Dense layer: ``x`` is batch x inputs, ``W`` inputs x units."""


def seconds(
    m: int, k: int, n: int, transpose_a: bool, transpose_b: bool, chain: int, rounds: int
) -> float:
    """The median seconds of one ``m x k`` by ``k x n`` product, operands laid out as the
    transposes say."""
    import tensorflow as tf

    a = tf.random.normal((k, m) if transpose_a else (m, k))
    b = tf.random.normal((n, k) if transpose_b else (k, n))

    @tf.function
    def run(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        total = tf.constant(0.0)
        for _ in range(chain):
            product = tf.linalg.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
            total += product[0, 0]
            a = a + 0.0 * total  # the next product reads this one's result
        return total

    run(a, b).numpy()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run(a, b).numpy()
        times.append(time.perf_counter() - started)
    return statistics.median(times) / chain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import bench_plan

    print(f"command: python benchmarks/results/matmul_shapes.py {' '.join(argv or sys.argv[1:])}")
    print(bench_plan.cpu_line())
    print(f"{'product':<44} {'GFLOP/s':>8} {'us':>8}  vs forward")
    for batch, inputs, units in SHAPES:
        products = (  # (what, m, k, n, transpose_a, transpose_b)
            (
                f"forward x @ W   ({batch}x{inputs} @ {inputs}x{units})",
                batch,
                inputs,
                units,
                False,
                False,
            ),
            (
                f"kernel grad x^T @ dy ({inputs}x{batch} @ {batch}x{units})",
                inputs,
                batch,
                units,
                True,
                False,
            ),
            (
                f"input grad dy @ W^T ({batch}x{units} @ {units}x{inputs})",
                batch,
                units,
                inputs,
                False,
                True,
            ),
        )
        forward = None
        for what, m, k, n, ta, tb in products:
            took = seconds(m, k, n, ta, tb, args.chain, args.rounds)
            forward = forward or took
            print(
                f"{what:<44} {2 * m * k * n / took / 1e9:8.1f} {took * 1e6:8.1f}  "
                f"{took / forward:.2f}x",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
