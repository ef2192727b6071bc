"""Micro benchmarks: matmul, memory bandwidth, host<->device transfer, vector add, conv2d.

Each timed sample runs a ``tf.function`` loop of k iterations on the target device (k chosen
so a sample lasts about ``Profile.micro_seconds``), then reads a scalar that depends on the
last iteration with ``.numpy()`` and synchronises the devices, so the clock stops when the
device has finished. Every iteration consumes the previous one's output, so no iteration can be
skipped or merged by the graph optimiser. TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from tfaccel.bench.flops import conv_flops
from tfaccel.bench.options import Profile
from tfaccel.bench.results import BenchMeasurement
from tfaccel.bench.targets import BenchTarget
from tfaccel.core.timing import measure_interleaved

__all__ = [
    "BANDWIDTH_KERNEL",
    "Tick",
    "bandwidth",
    "conv2d",
    "expected_retracing",
    "matmul",
    "matmul_candidates",
    "matmul_results",
    "measure",
    "sync_devices",
    "transfer",
    "vector_add",
]

Tick = Callable[[str], None]
_ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}
_MAX_ITERATIONS = 100_000


class _RetracingFilter(logging.Filter):
    """Drops TensorFlow's "triggered tf.function retracing" warning, which the benchmarks
    trigger on purpose: one loop function traced once per shape and dtype."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "triggered tf.function retracing" not in record.getMessage()


@contextlib.contextmanager
def expected_retracing() -> Iterator[None]:
    """Silence TensorFlow's retracing warning while benchmarks trace on purpose."""
    logger = logging.getLogger("tensorflow")
    quiet = _RetracingFilter()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def sync_devices() -> None:
    """Wait for every device to finish its queued work (``tf.test.experimental.sync_devices``)."""
    import tensorflow as tf

    sync = getattr(tf.test.experimental, "sync_devices", None)
    if sync is not None:
        sync()


def _timed(call: Callable[[], Any]) -> float:
    """Seconds from the call to the device being idle again."""
    start = time.perf_counter()
    result = call()
    if hasattr(result, "numpy"):
        result.numpy()
    sync_devices()
    return time.perf_counter() - start


def _iterations(run_k: Callable[[int], Any], target_s: float) -> int:
    """Run once to trace and warm up, time one iteration, return k for ``target_s``."""
    with expected_retracing():
        _timed(lambda: run_k(1))
    one = max(_timed(lambda: run_k(1)), 1e-6)
    return max(1, min(_MAX_ITERATIONS, math.ceil(target_s / one)))


def _run_loop(loop: Any, device: str, tensors: tuple[Any, ...], k: int) -> Any:
    import tensorflow as tf

    with tf.device(device):
        return loop(*tensors, tf.constant(k))


def _timed_loop(
    loop: Any, device: str, tensors: tuple[Any, ...], target_s: float
) -> tuple[Callable[[], float], int]:
    """A timed call of ``loop(*tensors, k)`` on ``device`` lasting about ``target_s``, and k.

    ``loop`` is a ``tf.function`` running k dependent iterations; k is chosen by timing one.
    """
    run_k = partial(_run_loop, loop, device, tensors)
    k = _iterations(run_k, target_s)
    return partial(_timed, partial(run_k, k)), k


def measure(
    candidates: dict[str, Callable[[], float | None]],
    *,
    repeats: int,
    warmup: int,
    tick: Tick,
) -> dict[str, list[float]]:
    """:func:`~tfaccel.core.timing.measure_interleaved`, ticking the progress bar each call."""

    def ticking(name: str, fn: Callable[[], float | None]) -> Callable[[], float | None]:
        def call() -> float | None:
            value = fn()
            tick(name)
            return value

        return call

    wrapped = {name: ticking(name, fn) for name, fn in candidates.items()}
    return measure_interleaved(wrapped, repeats=repeats, warmup=warmup)


def _percent(value: float, peak: float | None) -> float | None:
    return 100.0 * value / peak if peak else None


def _tflops(
    benchmark: str,
    target: BenchTarget,
    config: dict[str, Any],
    flops_per_sample: float,
    seconds: list[float],
    extra: dict[str, Any],
) -> BenchMeasurement:
    """TFLOP/s of each timed sample (``flops_per_sample`` in ``seconds``), with the spec peak of
    the configuration's dtype and the % of it reached."""
    peak = target.peak_tflops.get(config["dtype"])
    m = BenchMeasurement(
        benchmark,
        {"device": target.name, **config},
        "tflops",
        "TFLOP/s",
        [flops_per_sample / s / 1e12 for s in seconds],
        {**extra, "peak_tflops": peak},
    )
    m.extra["percent_of_peak"] = _percent(m.summary.median, peak)
    return m


MatmulPlan = dict[str, tuple[str, int, int]]


def matmul_candidates(
    target: BenchTarget,
    sizes: tuple[int, ...],
    seconds: float,
    dtypes: tuple[str, ...] | None = None,
) -> tuple[dict[str, Callable[[], float | None]], MatmulPlan]:
    """The timed callables of the matmul benchmark, one per (dtype, size), and their plan.

    Each callable runs k chained n x n matmuls in a ``tf.function`` loop (k chosen so that a
    call lasts about ``seconds``) and returns the seconds until the device is idle.

    Returns:
        (name -> callable, name -> (dtype, n, k)); pass the samples to :func:`matmul_results`.
    """
    import tensorflow as tf

    device = target.tf_devices[0]
    candidates: dict[str, Callable[[], float | None]] = {}
    plan: MatmulPlan = {}
    for dtype in dtypes or target.dtypes:
        for n in sizes:
            with tf.device(device):
                a = tf.cast(tf.random.normal((n, n), seed=1), dtype)
                # scaled so that repeated products keep their magnitude
                b = tf.cast(tf.random.normal((n, n), seed=2) / math.sqrt(n), dtype)
            name = f"{dtype} n={n}"
            candidates[name], k = _timed_loop(_matmul_loop(), device, (a, b), seconds)
            plan[name] = (dtype, n, k)
    return candidates, plan


def _matmul_loop() -> Any:
    import tensorflow as tf

    @tf.function
    def loop(a: Any, b: Any, k: Any) -> Any:
        c = a
        for _ in tf.range(k):
            c = tf.matmul(c, b)
        return tf.cast(c[0, 0], tf.float32)

    return loop


def matmul_results(
    target: BenchTarget, samples: dict[str, list[float]], plan: MatmulPlan
) -> list[BenchMeasurement]:
    """Turn timed matmul samples (seconds) into TFLOP/s measurements with % of peak and best."""
    out = []
    for name, (dtype, n, k) in plan.items():
        flops = 2.0 * n**3
        extra = {
            "flops_per_matmul": flops,
            "iterations": k,
            "arithmetic_intensity": flops / (3 * n * n * _ITEMSIZE[dtype]),
        }
        out.append(
            _tflops("matmul", target, {"dtype": dtype, "n": n}, flops * k, samples[name], extra)
        )
    for m in out:
        best = max(o.summary.median for o in out if o.config["dtype"] == m.config["dtype"])
        m.extra["percent_of_best"] = _percent(m.summary.median, best)
    return out


def matmul(
    target: BenchTarget, profile: Profile, *, repeats: int, warmup: int, tick: Tick
) -> list[BenchMeasurement]:
    """Square matmuls (n x n times n x n, 2n^3 FLOPs) at each profile size and dtype.

    Figures: TFLOP/s, % of the device's spec peak for that dtype, and % of the best measured
    on that device for that dtype (the measured ceiling).
    """
    candidates, plan = matmul_candidates(target, profile.matmul_sizes, profile.micro_seconds)
    samples = measure(candidates, repeats=repeats, warmup=warmup, tick=tick)
    return matmul_results(target, samples, plan)


BANDWIDTH_KERNEL = "x*s in place"
"""The ``bandwidth`` kernel's name in its configuration (and so in its label)."""


def bandwidth(
    target: BenchTarget, profile: Profile, *, repeats: int, warmup: int, tick: Tick
) -> list[BenchMeasurement]:
    """Stream a large buffer through the device in place (``x = x * s``, s = 1 given at run
    time): GB/s of bytes read + written, 2 x ``Profile.copy_bytes`` per pass.

    The result is written over its input (TensorFlow forwards the buffer), so every byte
    counted is a byte moved. A copy into a second buffer would under-count on a CPU: each
    destination cache line is read before it is written (write-allocate), so 3 bytes move for
    2 counted, and such a copy reads about half the bandwidth of this kernel or of the in-place
    vector add. This figure is the roofline's bandwidth ceiling.
    """
    import tensorflow as tf

    @tf.function
    def loop(x: Any, scale: Any, k: Any) -> Any:
        for _ in tf.range(k):
            x = x * scale
        return x[0]

    nbytes = profile.copy_bytes
    device = target.tf_devices[0]
    with tf.device(device):
        x = tf.zeros((nbytes // 4,), tf.float32)
        one = tf.constant(1.0, tf.float32)
    call, k = _timed_loop(loop, device, (x, one), profile.micro_seconds)
    samples = measure({"stream": call}, repeats=repeats, warmup=warmup, tick=tick)
    rates = [2 * nbytes * k / s / 1e9 for s in samples["stream"]]
    m = BenchMeasurement(
        "bandwidth",
        {"device": target.name, "name": BANDWIDTH_KERNEL, "bytes": nbytes},
        "gb_per_s",
        "GB/s",
        rates,
        {
            "bytes_moved_per_pass": 2 * nbytes,
            "counted": "bytes read + written",
            "iterations": k,
            "peak_bandwidth_gbs": target.peak_bandwidth_gbs,
        },
    )
    m.extra["percent_of_peak"] = _percent(m.summary.median, target.peak_bandwidth_gbs)
    return [m]


def vector_add(
    target: BenchTarget, profile: Profile, *, repeats: int, warmup: int, tick: Tick
) -> list[BenchMeasurement]:
    """Element-wise ``x = x + y`` in float32, in place: GB/s (12 bytes read + written per
    element) and GFLOP/s (1)."""
    import tensorflow as tf

    @tf.function
    def loop(x: Any, y: Any, k: Any) -> Any:
        for _ in tf.range(k):
            x = x + y
        return x[0]

    n = profile.vector_elements
    device = target.tf_devices[0]
    with tf.device(device):
        x = tf.zeros((n,), tf.float32)
        y = tf.ones((n,), tf.float32)
    call, k = _timed_loop(loop, device, (x, y), profile.micro_seconds)
    samples = measure({"add": call}, repeats=repeats, warmup=warmup, tick=tick)
    rates = [12 * n * k / s / 1e9 for s in samples["add"]]
    m = BenchMeasurement(
        "vector_add",
        {"device": target.name, "dtype": "float32", "n": n},
        "gb_per_s",
        "GB/s",
        rates,
        {
            "bytes_per_add": 12 * n,
            "counted": "bytes read + written",
            "flops_per_add": n,
            "iterations": k,
            "arithmetic_intensity": 1 / 12,
            "peak_bandwidth_gbs": target.peak_bandwidth_gbs,
        },
    )
    m.extra["gflops"] = m.summary.median / 12
    m.extra["percent_of_peak"] = _percent(m.summary.median, target.peak_bandwidth_gbs)
    return [m]


def transfer(
    target: BenchTarget, profile: Profile, *, repeats: int, warmup: int, tick: Tick
) -> list[BenchMeasurement]:
    """Host->device and device->host copies of ``Profile.transfer_bytes`` (GPU targets only).

    Host->device: a host tensor copied with ``tf.identity`` under the GPU's device scope.
    Device->host: ``.numpy()`` of a GPU tensor (pageable host memory, as user code gets).
    """
    import tensorflow as tf

    nbytes = profile.transfer_bytes
    device = target.tf_devices[0]
    with tf.device("/CPU:0"):
        host = tf.random.uniform((nbytes // 4,), dtype=tf.float32)
    with tf.device(device):
        on_device = tf.identity(host)

    def to_device() -> float:
        def call() -> Any:
            with tf.device(device):
                moved = tf.identity(host)
            return moved[0]

        return _timed(call)

    def to_host() -> float:
        sync_devices()
        return _timed(lambda: on_device.numpy())

    to_device(), to_host()  # first copies allocate
    samples = measure(
        {"host_to_device": to_device, "device_to_host": to_host},
        repeats=repeats,
        warmup=warmup,
        tick=tick,
    )
    return [
        BenchMeasurement(
            "transfer",
            {"device": target.name, "direction": direction, "bytes": nbytes},
            "gb_per_s",
            "GB/s",
            [nbytes / s / 1e9 for s in values],
            {"bytes_per_copy": nbytes},
        )
        for direction, values in samples.items()
    ]


def conv2d(
    target: BenchTarget, profile: Profile, *, repeats: int, warmup: int, tick: Tick
) -> list[BenchMeasurement]:
    """A 3x3 'same' convolution forward + backward (gradients w.r.t. input and filter).

    FLOPs per step = 3 x forward (see :mod:`tfaccel.bench.flops`); the filter takes a tiny SGD
    step each iteration so that no iteration repeats the previous one.
    """
    import tensorflow as tf

    batch, hw, cin, cout = profile.conv

    def make_loop() -> Any:
        @tf.function
        def loop(x: Any, w: Any, k: Any) -> Any:
            acc = tf.constant(0.0, tf.float32)
            for _ in tf.range(k):
                with tf.GradientTape() as tape:
                    tape.watch([x, w])
                    y = tf.nn.conv2d(x, w, strides=1, padding="SAME")
                    loss = tf.reduce_sum(tf.cast(y, tf.float32))
                dx, dw = tape.gradient(loss, [x, w])
                w = w - tf.cast(1e-6, w.dtype) * dw
                acc += tf.cast(dx[0, 0, 0, 0], tf.float32)
            return acc

        return loop

    device = target.tf_devices[0]
    forward = conv_flops((3, 3), cin, cout, (hw, hw)) * batch
    candidates: dict[str, Callable[[], float | None]] = {}
    iterations: dict[str, int] = {}
    with tf.device(device):
        for dtype in target.dtypes:
            x = tf.cast(tf.random.uniform((batch, hw, hw, cin)), dtype)
            w = tf.cast(tf.random.normal((3, 3, cin, cout)) * 0.1, dtype)
            loop = make_loop()
            candidates[dtype], iterations[dtype] = _timed_loop(
                loop, device, (x, w), profile.micro_seconds
            )
    samples = measure(candidates, repeats=repeats, warmup=warmup, tick=tick)
    shape = f"{batch}x{hw}x{hw}x{cin}->{cout} k3"
    return [
        _tflops(
            "conv2d",
            target,
            {"dtype": dtype, "name": shape},
            3 * forward * iterations[dtype],
            values,
            {"flops_per_step": 3 * forward, "iterations": iterations[dtype]},
        )
        for dtype, values in samples.items()
    ]
