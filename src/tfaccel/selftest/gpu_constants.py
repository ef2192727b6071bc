"""``plan-gpu``: what a plan assumes of a GPU, measured on this one, with no TensorFlow.

A plan's GPU rows rest on a few figures that are not measured where the plan is made: the
catalogue's datasheet rates (``accelerators.csv``), the share of them a training step reaches
(:data:`tfaccel.planning.targets.DEFAULT_UTILISATION`,
:data:`~tfaccel.planning.targets.BANDWIDTH_UTILISATION`), a launch cost per operation
(:data:`tfaccel.planning.roofline.OP_OVERHEAD_S`) and cuDNN's workspace per convolution
(:data:`tfaccel.planning.memory.CONV_WORKSPACE`). This step measures each on the GPU through
the libraries TensorFlow calls (cuBLAS, cuDNN), from PyTorch, or from CuPy where PyTorch is
missing (no convolutions then), and checks that each assumption is one this GPU bears out:

- the catalogue has a row for this GPU;
- a device-to-device copy moves no more than the datasheet's bandwidth (+5%), and at least
  the share of it the plan assumes;
- the fastest matrix product of each precision runs no faster than the datasheet's peak (+10%)
  and at least at the utilisation the plan assumes;
- one tiny kernel takes the device no longer than the plan's per-operation cost (a floor: that
  cost stands for TensorFlow's launch of each operation, which is not measured here; the launch
  from Python is reported beside it);
- no convolution takes a larger workspace than the plan holds for it.

The figures (each matrix product's share of the peak by shape, the launch cost from Python)
come with it: they are what a GPU row's time is made of. Nothing here is TensorFlow's own
figure: the per-operation cost of TensorFlow's executor and the algorithms its autotuner picks
are not measured.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "CONV_CASES",
    "MATMUL_SHAPES",
    "NO_LIBRARY",
    "graph_seconds",
    "judge",
    "measure",
    "plan_gpu_step",
]

MATMUL_SHAPES = (
    (8192, 8192, 8192),
    (4096, 4096, 4096),
    (256, 4096, 4096),
    (1024, 1024, 1024),
    (32, 1024, 1024),
    (128, 256, 256),
)
"""(m, k, n): two at the device's best, then a Dense layer's sizes at training batches."""
CONV_CASES: tuple[tuple[str, tuple[int, int, int, int], dict[str, int]], ...] = (
    ("3x3, 64 channels, 56x56", (64, 64, 56, 56), {"out": 64, "k": 3, "stride": 1, "groups": 1}),
    (
        "7x7 stride 2 stem, 224x224",
        (64, 3, 224, 224),
        {"out": 64, "k": 7, "stride": 2, "groups": 1},
    ),
    ("1x1, 256 channels, 28x28", (64, 256, 28, 28), {"out": 256, "k": 1, "stride": 1, "groups": 1}),
    ("3x3, 32 channels, 32x32", (128, 32, 32, 32), {"out": 32, "k": 3, "stride": 1, "groups": 1}),
    (
        "depthwise 3x3, 96 channels",
        (64, 96, 112, 112),
        {"out": 96, "k": 3, "stride": 1, "groups": 96},
    ),
)
"""(label, NCHW input shape, the convolution): a ResNet block, a stem, a pointwise and a small
convolution, and a depthwise one."""
_TINY_OPS = 2000


def _median_event_s(
    run: Callable[[], None], event: Callable[[], Any], sync: Callable[[], None], reps: int
) -> float:
    """The median of ``reps`` timings of ``run`` between two device events, after a warm-up."""
    for _ in range(2):
        run()
    sync()
    times = []
    for _ in range(reps):
        start, end = event(), event()
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(_elapsed_ms(start, end) / 1e3)
    return statistics.median(times)


def _elapsed_ms(start: Any, end: Any) -> float:
    """Milliseconds between two recorded events: PyTorch's method, or CuPy's function."""
    if hasattr(start, "elapsed_time"):
        return float(start.elapsed_time(end))
    import cupy

    return float(cupy.cuda.get_elapsed_time(start, end))


def graph_seconds(torch: Any, run: Callable[[], Any], chain: int = 20, reps: int = 7) -> float:
    """Device seconds per call of ``run``: ``chain`` calls captured in one CUDA graph, the
    median of ``reps`` replays (no host launch gap between them, as a one-call timing has)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture, as CUDA graphs ask
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(chain):
            run()

    def event() -> Any:
        return torch.cuda.Event(enable_timing=True)

    return _median_event_s(graph.replay, event, torch.cuda.synchronize, reps) / chain


def _torch_figures() -> dict[str, Any]:
    import torch

    dev = torch.device("cuda")
    sync = torch.cuda.synchronize

    def event() -> Any:
        return torch.cuda.Event(enable_timing=True)

    out: dict[str, Any] = {"library": f"PyTorch {torch.__version__}"}
    props = torch.cuda.get_device_properties(0)
    out["name"] = props.name
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    out["cudnn"] = cudnn
    a = torch.empty(1 << 29, device=dev)  # 2 GiB: far past the L2, the launch lost in it
    b = torch.empty_like(a)
    copy_s = _median_event_s(functools.partial(b.copy_, a), event, sync, 10)
    out["copy_gbs"] = 2 * a.nbytes / copy_s / 1e9
    del a, b
    torch.cuda.empty_cache()
    matmuls = []
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    try:
        for precision, dtype, tf32 in (
            ("fp32", torch.float32, False),
            ("tf32", torch.float32, True),
            ("bf16", torch.bfloat16, False),
            ("fp16", torch.float16, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            for m, k, n in MATMUL_SHAPES:
                x = torch.randn(m, k, device=dev, dtype=dtype)
                w = torch.randn(k, n, device=dev, dtype=dtype)
                y = torch.empty(m, n, device=dev, dtype=dtype)
                chain = 3 if m * k * n > 10**11 else 20
                seconds = graph_seconds(torch, functools.partial(torch.matmul, x, w, out=y), chain)
                matmuls.append(
                    {
                        "precision": precision,
                        "mkn": [m, k, n],
                        "seconds": seconds,
                        "tflops": 2 * m * k * n / seconds / 1e12,
                    }
                )
                del x, w, y
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    out["matmul"] = matmuls
    out["matmul_timing"] = "device time: a chain of launches in one CUDA graph"
    tiny = torch.zeros(1, device=dev)

    def many() -> None:
        for _ in range(_TINY_OPS):
            tiny.add_(1)

    out["launch_from_python_s"] = _median_event_s(many, event, sync, 5) / _TINY_OPS
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        many()  # warm up on a side stream before capture, as CUDA graphs ask
    sync()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        many()
    out["kernel_floor_s"] = _median_event_s(graph.replay, event, sync, 5) / _TINY_OPS
    out["conv"] = _torch_conv_workspaces(torch) if cudnn else []
    return out


def _torch_conv_workspaces(torch: Any) -> list[dict[str, Any]]:
    """Each convolution's workspace: the allocator's peak during its forward pass and during
    its backward pass (both gradients) over the tensors made then, the larger of the two."""
    benchmark = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True  # the fastest algorithm, as TensorFlow autotunes
    rows = []
    try:
        for precision, dtype, layout in (
            ("fp32", torch.float32, "NCHW"),
            ("bf16", torch.bfloat16, "NHWC"),
        ):
            for label, shape, c in CONV_CASES:
                conv = torch.nn.Conv2d(
                    shape[1],
                    c["out"],
                    c["k"],
                    stride=c["stride"],
                    padding=c["k"] // 2,
                    groups=c["groups"],
                    bias=False,
                ).to("cuda", dtype)
                x = torch.randn(*shape, device="cuda", dtype=dtype)
                if layout == "NHWC":
                    conv = conv.to(memory_format=torch.channels_last)
                    x = x.to(memory_format=torch.channels_last)
                x.requires_grad_(True)
                for _ in range(2):  # cuDNN's search, and its workspaces, before the measured run
                    conv(x).backward(torch.ones_like(conv(x)))
                x.grad, conv.weight.grad = None, None
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                y = conv(x)
                torch.cuda.synchronize()
                forward = torch.cuda.max_memory_allocated() - base - y.nbytes
                grad = torch.ones_like(y)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                y.backward(grad)
                torch.cuda.synchronize()
                made = x.grad.nbytes + conv.weight.grad.nbytes
                backward = torch.cuda.max_memory_allocated() - base - made
                rows.append(
                    {
                        "case": label,
                        "precision": precision,
                        "layout": layout,
                        "depthwise": c["groups"] > 1,
                        "workspace_bytes": max(0, forward, backward),
                        "tensor_bytes": x.nbytes + y.nbytes,
                    }
                )
                del conv, x, y, grad
                torch.cuda.empty_cache()
    finally:
        torch.backends.cudnn.benchmark = benchmark
    return rows


def _cupy_figures() -> dict[str, Any]:
    import cupy

    sync = cupy.cuda.Device().synchronize
    out: dict[str, Any] = {"library": f"CuPy {cupy.__version__}"}
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"]
    out["name"] = name.decode() if isinstance(name, bytes) else str(name)
    a = cupy.empty(1 << 29, dtype=cupy.float32)
    b = cupy.empty_like(a)
    copy_s = _median_event_s(functools.partial(cupy.copyto, b, a), cupy.cuda.Event, sync, 10)
    out["copy_gbs"] = 2 * a.nbytes / copy_s / 1e9
    del a, b
    matmuls = []
    for precision, dtype in (("fp32", cupy.float32), ("fp16", cupy.float16)):
        for m, k, n in MATMUL_SHAPES:
            x = cupy.ones((m, k), dtype=dtype)
            w = cupy.ones((k, n), dtype=dtype)
            y = cupy.empty((m, n), dtype=dtype)
            reps = 8 if m * k * n > 10**11 else 30
            seconds = _median_event_s(
                functools.partial(cupy.matmul, x, w, out=y), cupy.cuda.Event, sync, reps
            )
            matmuls.append(
                {
                    "precision": precision,
                    "mkn": [m, k, n],
                    "seconds": seconds,
                    "tflops": 2 * m * k * n / seconds / 1e12,
                }
            )
    out["matmul"] = matmuls
    out["matmul_timing"] = (
        "one launch between two events: a small product's includes the launch gap"
    )
    tiny = cupy.zeros(1, dtype=cupy.float32)

    def many() -> None:
        for _ in range(_TINY_OPS):
            cupy.add(tiny, 1, out=tiny)

    out["launch_from_python_s"] = _median_event_s(many, cupy.cuda.Event, sync, 5) / _TINY_OPS
    out["conv"] = []
    out["conv_not_measured"] = "CuPy has no convolution: install PyTorch to measure cuDNN's"
    return out


NO_LIBRARY = (
    "neither PyTorch nor CuPy can reach the GPU to measure cuBLAS and cuDNN: pip install torch "
    "(cuBLAS and cuDNN) or cupy-cuda12x (cuBLAS only)"
)


def measure() -> dict[str, Any] | None:
    """This GPU's figures, through PyTorch where it reaches the GPU, else CuPy (None: neither
    can)."""
    try:
        import torch

        if torch.cuda.is_available():
            return _torch_figures()
    except (ImportError, OSError):
        pass
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # not installed, or no driver or device it can use
        return None
    return _cupy_figures()


def _check(what: str, expected: Any, received: Any, ok: bool) -> dict[str, Any]:
    return {"what": what, "expected": expected, "received": received, "ok": bool(ok)}


_PEAK_FIELD = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops",
    "bf16": "bf16_tflops",
    "fp16": "fp16_tflops",
}


def judge(figures: dict[str, Any], spec: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The checks of ``figures`` (from :func:`measure`) against the catalogue row ``spec``
    (None: this GPU has none) and the plan's assumptions; and the derived figures."""
    from tfaccel.planning.memory import CONV_WORKSPACE
    from tfaccel.planning.roofline import OP_OVERHEAD_S
    from tfaccel.planning.targets import BANDWIDTH_UTILISATION, DEFAULT_UTILISATION

    checks = [
        _check(
            "catalogue row for this GPU",
            "a row of accelerators.csv",
            spec.key if spec is not None else figures.get("name"),
            spec is not None,
        )
    ]
    derived: dict[str, Any] = {}
    if spec is not None and spec.bandwidth_gbs:
        share = figures["copy_gbs"] / spec.bandwidth_gbs
        derived["copy_of_datasheet"] = round(share, 3)
        checks.append(
            _check(
                f"copy bandwidth (GB/s) against the datasheet's {spec.bandwidth_gbs:g}",
                f"<= {1.05 * spec.bandwidth_gbs:.0f} and >= {BANDWIDTH_UTILISATION:.0%} of it "
                "(the plan's share)",
                round(figures["copy_gbs"], 1),
                BANDWIDTH_UTILISATION <= share <= 1.05,
            )
        )
    utilisation = DEFAULT_UTILISATION["gpu"]
    shares: dict[str, dict[str, float]] = {}
    for precision in dict.fromkeys(row["precision"] for row in figures.get("matmul", [])):
        rows = [r for r in figures["matmul"] if r["precision"] == precision]
        best = max(r["tflops"] for r in rows)
        peak = getattr(spec, _PEAK_FIELD[precision], None) if spec is not None else None
        if not peak:
            continue
        shares[precision] = {
            "x".join(map(str, r["mkn"])): round(r["tflops"] / peak, 3) for r in rows
        }
        checks.append(
            _check(
                f"fastest {precision} matrix product (TFLOP/s) against the datasheet's {peak:g}",
                f"<= {1.10 * peak:.0f} and >= {utilisation:.0%} of it (the plan's utilisation)",
                round(best, 1),
                utilisation * peak <= best <= 1.10 * peak,
            )
        )
    derived["matmul_of_datasheet"] = shares
    floor = figures.get("kernel_floor_s")
    if floor is not None:
        checks.append(
            _check(
                "a tiny kernel's time on the device (us, CUDA graph replay)",
                f"<= {OP_OVERHEAD_S['gpu'] * 1e6:g} (the plan's cost per operation, which stands "
                "for the host's launch of each as well)",
                round(floor * 1e6, 2),
                floor <= OP_OVERHEAD_S["gpu"],
            )
        )
    derived["launch_from_python_us"] = round(figures["launch_from_python_s"] * 1e6, 2)
    worst: dict[str, float] = {}
    for row in figures.get("conv", []):
        key = (
            "depthwise"
            if row["depthwise"]
            else "float32"
            if row["precision"] == "fp32"
            else "16-bit"
        )
        share = row["workspace_bytes"] / row["tensor_bytes"]
        row["workspace_of_tensors"] = round(share, 3)
        worst[key] = max(worst.get(key, 0.0), share)
    for key, share in worst.items():
        checks.append(
            _check(
                f"largest cuDNN workspace of a {key} convolution, over its input and output bytes",
                f"<= {CONV_WORKSPACE[key]:g} (the plan's)",
                round(share, 3),
                share <= CONV_WORKSPACE[key],
            )
        )
    derived["conv_workspace_largest"] = {k: round(v, 3) for k, v in worst.items()}
    return checks, derived


def plan_gpu_step() -> dict[str, Any]:
    """The ``plan-gpu`` step's document."""
    from tfaccel.inventory.specs import match_spec

    start = time.perf_counter()
    figures = measure()
    if figures is None:
        return {"step": "plan-gpu", "status": "skipped", "reason": NO_LIBRARY}
    spec = match_spec(figures["name"])
    checks, derived = judge(figures, spec)
    failed = [c["what"] for c in checks if not c["ok"]]
    doc: dict[str, Any] = {
        "step": "plan-gpu",
        "status": "failed" if failed else "passed",
        "checks": checks,
        "figures": figures,
        "derived": derived,
        "seconds": round(time.perf_counter() - start, 1),
    }
    if failed:
        doc["reason"] = "not borne out here: " + "; ".join(failed)
    return doc
