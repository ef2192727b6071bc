"""Which oneDNN kernel runs a depthwise convolution's filter gradient on this CPU, and what it
costs: the shapes where the plan's one depthwise rate is far off.

For each shape (batch, height = width, channels, kernel, stride; ``SAME`` padding, float32):
one fresh process runs ``DepthwiseConv2dNativeBackpropFilter`` (and, for comparison, the
forward ``DepthwiseConv2dNative``) under ``ONEDNN_VERBOSE=1`` with
``TF_ENABLE_ONEDNN_OPTS=1``, and reads the implementation oneDNN chose for the backward-weights
primitive (``jit_dw:...``: its depthwise kernel; ``jit:...``: its generic grouped-convolution
kernel). Then the median of 5 rounds of 3 calls of each, in the same process. Prints the
kernel, the times, the rate in FLOPs (2 per multiply-add of the output positions and kernel
taps, as the plan counts them) and a fit of the generic kernel's cost: 16 x those FLOPs at
``--rate`` plus ``--block-ns`` per channel and kernel tap (a 16 x 16 block of weights per
group, written and reduced).

oneDNN's depthwise backward-weights kernel (``jit_uni_dw_conv_bwd_weights_kernel_t::
init_conf``) takes kernels up to 3 wide whose input holds the whole kernel (height at least
the kernel's), paddings up to half the kernel; anything else (a 5 x 5 kernel: EfficientNet's
blocks 3, 5, 6; MobileNetV2's last blocks on 2 x 2 maps) falls to the generic kernel.

    python benchmarks/results/depthwise_filter_paths.py [--rate 150e9] [--block-ns 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

SHAPES = [
    # EfficientNetB0's depthwise layers at 224 x 224 input, batch 8 (3x3 and 5x5)
    (8, 56, 144, 3, 1),
    (8, 56, 144, 5, 1),
    (8, 28, 240, 3, 1),
    (8, 28, 240, 5, 1),
    (8, 14, 672, 3, 1),
    (8, 14, 672, 5, 1),
    (8, 7, 1152, 3, 1),
    (8, 7, 1152, 5, 1),
    # strided 5x5 (EfficientNet's block starts)
    (8, 56, 144, 5, 2),
    (8, 28, 240, 5, 2),
    # maps smaller than the kernel: a 64 x 64 input's last blocks
    (16, 2, 960, 3, 1),
    (16, 4, 960, 3, 1),
    (8, 2, 1152, 5, 1),
    (8, 1, 1152, 5, 1),
    (32, 2, 960, 3, 1),
]

CHILD = """
import json, statistics, sys, time
import tensorflow as tf
b, h, c, k, s = map(int, sys.argv[1:6])
x = tf.random.normal([b, h, h, c])
out = -(-h // s)
dy = tf.random.normal([b, out, out, c])
w = tf.ones([k, k, c, 1])
grad = tf.function(lambda: tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
    input=x, filter_sizes=[k, k, c, 1], out_backprop=dy, strides=[1, s, s, 1], padding="SAME"))
forward = tf.function(lambda: tf.raw_ops.DepthwiseConv2dNative(
    input=x, filter=w, strides=[1, s, s, 1], padding="SAME"))
def timed(f):
    f()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(3):
            f()
        rounds.append((time.perf_counter() - start) / 3)
    return statistics.median(rounds)
print(json.dumps({"grad_s": timed(grad), "forward_s": timed(forward), "out": out}))
"""


def one(shape: tuple[int, ...]) -> dict[str, Any]:
    env = dict(os.environ, ONEDNN_VERBOSE="1", TF_ENABLE_ONEDNN_OPTS="1", TF_CPP_MIN_LOG_LEVEL="3")
    args = [str(v) for v in shape]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env, check=True
    )
    kernel = "?"
    for line in (done.stdout + done.stderr).splitlines():
        parts = line.split(",")
        if len(parts) > 7 and parts[5] == "convolution" and parts[7] == "backward_weights":
            kernel = parts[6]
            break
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["kernel"] = kernel
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=150e9, help="FLOP/s of the fit")
    parser.add_argument("--block-ns", type=float, default=100.0, help="ns per channel x tap")
    args = parser.parse_args(argv)
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(
        f"{'batch':>5} {'size':>4} {'chan':>5} {'k':>2} {'s':>2}  {'backward-weights kernel':<22}"
        f"{'grad ms':>9} {'GFLOP/s':>8} {'fwd ms':>8} {'GFLOP/s':>8} {'fit ms':>8}"
    )
    for shape in SHAPES:
        batch, size, channels, kernel, _stride = shape
        found = one(shape)
        out = int(found["out"])
        flops = 2 * batch * out * out * channels * kernel * kernel
        grad, fwd = float(found["grad_s"]), float(found["forward_s"])
        name = str(found["kernel"])
        fit = 16 * flops / args.rate + channels * kernel * kernel * args.block_ns * 1e-9
        fitted = "-" if name.startswith("jit_dw") else f"{fit * 1e3:.2f}"
        print(
            f"{batch:>5} {size:>4} {channels:>5} {kernel:>2} {shape[4]:>2}  {name:<22}"
            f"{grad * 1e3:>9.2f} {flops / grad / 1e9:>8.1f} "
            f"{fwd * 1e3:>8.2f} {flops / fwd / 1e9:>8.1f} {fitted:>8}"
        )
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
