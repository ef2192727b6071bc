"""A Dense layer's training matmuls and an element-wise op on a GPU, against a plan's per-op time.

A plan's GPU row times a step as the longer of ``FLOPs / (peak x 0.40)`` and
``bytes / (bandwidth x 0.80)`` over the whole step, plus 5 us per operation launched
(``planning/roofline.py``, ``planning/targets.py``); here each operation is taken alone, as an
approximation of its share. This times, on the GPU it runs on (no TensorFlow needed: PyTorch's
cuBLAS, the library TensorFlow calls), a Dense layer's three training matmuls (``x @ W``,
``x^T @ dy``, ``dy @ W^T``) and a ReLU over its output, each as a chain of ``CHAIN`` launches
captured in one CUDA graph (the device's time per operation, no host launch gaps), the median
of ``ROUNDS`` replays, and prints each against the plan's figure from the catalogue row of the
GPU it runs on (``accelerators.csv``).

    python benchmarks/results/gpu_layer_sizes.py [OUT.json]
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from tfaccel.inventory.specs import match_spec
from tfaccel.selftest.gpu_constants import graph_seconds

CHAIN = 50
ROUNDS = 7
BATCHES = (32, 128, 512, 2048)
LAYERS = ((128, 128), (512, 512), (1024, 1024), (4096, 4096))
UTILISATION, BANDWIDTH_SHARE, LAUNCH_S = 0.40, 0.80, 5e-6


def device_time(fn: Callable[[], object]) -> float:
    """Seconds per call of ``fn`` on the device: CHAIN calls in one CUDA graph, replayed."""
    return graph_seconds(torch, fn, chain=CHAIN, reps=ROUNDS)


def planned(flops: float, nbytes: float, peak: float, bandwidth: float) -> float:
    return max(flops / (peak * UTILISATION), nbytes / (bandwidth * BANDWIDTH_SHARE)) + LAUNCH_S


def main() -> None:
    name = torch.cuda.get_device_name(0)
    spec = match_spec(name)
    if spec is None or not (spec.fp32_tflops and spec.tf32_tflops and spec.bf16_tflops):
        sys.exit(f"{name} has no row with fp32, tf32 and bf16 rates in accelerators.csv")
    peaks = {"fp32": spec.fp32_tflops, "tf32": spec.tf32_tflops, "bf16": spec.bf16_tflops}
    bandwidth = (spec.bandwidth_gbs or 0.0) * 1e9
    rows = []
    for precision in ("fp32", "tf32", "bf16"):
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        size = 2 if precision == "bf16" else 4
        for inputs, units in LAYERS:
            for batch in BATCHES:
                x = torch.randn(batch, inputs, device="cuda", dtype=dtype)
                w = torch.randn(inputs, units, device="cuda", dtype=dtype)
                dy = torch.randn(batch, units, device="cuda", dtype=dtype)
                y = torch.empty(batch, units, device="cuda", dtype=dtype)
                dw = torch.empty(inputs, units, device="cuda", dtype=dtype)
                dx = torch.empty(batch, inputs, device="cuda", dtype=dtype)
                flops = 2.0 * batch * inputs * units
                cases = {
                    "x@W": (functools.partial(torch.matmul, x, w, out=y), flops),
                    "x^T@dy": (functools.partial(torch.matmul, x.t(), dy, out=dw), flops),
                    "dy@W^T": (functools.partial(torch.matmul, dy, w.t(), out=dx), flops),
                    "relu": (y.relu_, 0.0),
                }
                for name, (fn, f) in cases.items():
                    seconds = device_time(fn)
                    if name == "relu":
                        nbytes = 2.0 * batch * units * size
                    else:
                        nbytes = float(size * (batch * inputs + inputs * units + batch * units))
                    plan = planned(f, nbytes, peaks[precision] * 1e12, bandwidth)
                    rows.append(
                        {
                            "precision": precision,
                            "batch": batch,
                            "inputs": inputs,
                            "units": units,
                            "op": name,
                            "device_s": seconds,
                            "plan_s": plan,
                            "tflops": f / seconds / 1e12 if f else None,
                            "gbs": nbytes / seconds / 1e9,
                        }
                    )
                del x, w, dy, y, dw, dx
    torch.backends.cuda.matmul.allow_tf32 = False
    print(
        f"{torch.cuda.get_device_name(0)}; PyTorch {torch.__version__}; chain {CHAIN}, "
        f"median of {ROUNDS} graph replays; device time per operation, and the plan's"
    )
    print(
        f"{'prec':5s} {'batch':>5s} {'layer':>10s} {'op':>7s} {'device us':>10s} "
        f"{'plan us':>8s} {'plan/dev':>8s} {'TFLOP/s':>8s} {'GB/s':>7s}"
    )
    for r in rows:
        tf = f"{r['tflops']:8.1f}" if r["tflops"] else f"{'':8s}"
        print(
            f"{r['precision']:5s} {r['batch']:5d} {r['inputs']:>4d}x{r['units']:<5d} "
            f"{r['op']:>7s} {r['device_s'] * 1e6:10.2f} {r['plan_s'] * 1e6:8.2f} "
            f"{r['plan_s'] / r['device_s']:8.2f} {tf} {r['gbs']:7.0f}"
        )
    ratios = [r["plan_s"] / r["device_s"] for r in rows]
    q = statistics.quantiles(ratios, n=4)
    print(
        f"plan/device over {len(rows)} operations: median {statistics.median(ratios):.2f}, "
        f"quartiles {q[0]:.2f}-{q[2]:.2f}, min {min(ratios):.2f}, max {max(ratios):.2f}"
    )
    for precision in ("fp32", "tf32", "bf16"):
        sub = [r["plan_s"] / r["device_s"] for r in rows if r["precision"] == precision]
        print(
            f"  {precision}: median {statistics.median(sub):.2f}, min {min(sub):.2f}, "
            f"max {max(sub):.2f}"
        )
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
