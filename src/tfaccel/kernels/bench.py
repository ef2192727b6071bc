"""The kernels against the hardware's limits, on a real GPU (``tfaccel bench --kernels``).

- ``vector_add`` bandwidth as a share of the device's copy bandwidth (a device-to-device
  copy of the same size): an elementwise kernel can at best move bytes as fast as a copy.
  Target: at least 80%.
- ``matmul`` TFLOP/s against ``tf.matmul`` (cuBLAS) at the same sizes, in float32 with
  TensorFloat-32 turned off so that both do full float32 arithmetic, for each tile size.
  Target: at least 50% of cuBLAS for large sizes.

These are targets; :func:`run` measures where the kernels stand on the GPU it runs on.
Timings follow :mod:`tfaccel.core.timing`: warm-up rounds discarded, candidates interleaved,
the device synchronised before the clock is read, medians and IQRs reported.

Example:
    >>> from tfaccel.kernels import bench
    >>> result = bench.run(sizes=(2048,), tiles=(16, 32))   # needs an NVIDIA GPU
    >>> result.to_dict()["matmul"][0]["tiles"]["16"]["share_of_cublas"]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfaccel import kernels
from tfaccel.core.checks import is_int
from tfaccel.core.errors import UsageError
from tfaccel.core.timing import Summary, measure_interleaved, summarize
from tfaccel.kernels import _launch
from tfaccel.kernels._errors import KernelBackendError

__all__ = [
    "DEFAULT_SIZES",
    "DEFAULT_TILES",
    "DEFAULT_VECTOR_SIZES",
    "TARGET_COPY_SHARE",
    "TARGET_CUBLAS_SHARE",
    "KernelBenchResult",
    "MatmulRow",
    "TileResult",
    "VectorAddRow",
    "render_text",
    "require_gpu",
    "run",
]

TARGET_COPY_SHARE = 0.80
TARGET_CUBLAS_SHARE = 0.50
DEFAULT_SIZES: tuple[int, ...] = (1024, 2048, 4096)
DEFAULT_TILES: tuple[int, ...] = (8, 16, 32)
DEFAULT_VECTOR_SIZES: tuple[int, ...] = (1 << 24, 1 << 26)  # elements: 64 and 256 MiB each
MIN_SAMPLE_S = 0.02  # each sample repeats the operation until it lasts about this long


@dataclass(frozen=True)
class VectorAddRow:
    """``vector_add`` against a device-to-device copy of one vector.

    Attributes:
        elements: vector length.
        dtype: element type.
        kernel_seconds: per-call time of the kernel (reads a and b, writes out: 3 arrays).
        copy_seconds: per-call time of the copy (reads one array, writes one: 2 arrays).
        kernel_gb_per_s: bytes moved by the kernel per second, 1e9 bytes.
        copy_gb_per_s: bytes moved by the copy per second.
        share_of_copy: kernel_gb_per_s / copy_gb_per_s.
        meets_target: share_of_copy >= TARGET_COPY_SHARE.
    """

    elements: int
    dtype: str
    kernel_seconds: Summary
    copy_seconds: Summary
    kernel_gb_per_s: float
    copy_gb_per_s: float
    share_of_copy: float
    meets_target: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "elements": self.elements,
            "dtype": self.dtype,
            "kernel_seconds": self.kernel_seconds.to_dict(),
            "copy_seconds": self.copy_seconds.to_dict(),
            "kernel_gb_per_s": self.kernel_gb_per_s,
            "copy_gb_per_s": self.copy_gb_per_s,
            "share_of_copy": self.share_of_copy,
            "target": TARGET_COPY_SHARE,
            "meets_target": self.meets_target,
        }


@dataclass(frozen=True)
class TileResult:
    """The tiled kernel at one tile size.

    Attributes:
        tile: tile side (tile*tile threads per block).
        seconds: per-call time.
        tflops: 2*n**3 / median seconds / 1e12.
        share_of_cublas: tflops / cuBLAS's tflops.
        max_relative_error: max |c - c_cublas| / max |c_cublas|, a sanity check.
    """

    tile: int
    seconds: Summary
    tflops: float
    share_of_cublas: float
    max_relative_error: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "tile": self.tile,
            "seconds": self.seconds.to_dict(),
            "tflops": self.tflops,
            "share_of_cublas": self.share_of_cublas,
            "max_relative_error": self.max_relative_error,
        }


@dataclass(frozen=True)
class MatmulRow:
    """``matmul`` of two (n, n) matrices at every tile size, against ``tf.matmul``.

    Attributes:
        size: n.
        dtype: element type.
        cublas_seconds: per-call time of ``tf.matmul``.
        cublas_tflops: its TFLOP/s.
        tiles: one result per tile size.
        best_tile: the tile with the highest TFLOP/s.
        meets_target: the best tile reaches TARGET_CUBLAS_SHARE of cuBLAS.
    """

    size: int
    dtype: str
    cublas_seconds: Summary
    cublas_tflops: float
    tiles: tuple[TileResult, ...]
    best_tile: int
    meets_target: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "dtype": self.dtype,
            "cublas_seconds": self.cublas_seconds.to_dict(),
            "cublas_tflops": self.cublas_tflops,
            "tiles": {str(t.tile): t.to_dict() for t in self.tiles},
            "best_tile": self.best_tile,
            "target": TARGET_CUBLAS_SHARE,
            "meets_target": self.meets_target,
        }


@dataclass(frozen=True)
class KernelBenchResult:
    """What ``tfaccel bench --kernels`` measured.

    Attributes:
        device: the GPU's name.
        compute_capability: e.g. ``"9.0"``.
        vector_add: one row per vector length.
        matmul: one row per matrix size.
        notes: conditions a reader needs (TF32 off, TensorFlow's memory...).
    """

    device: str
    compute_capability: str
    vector_add: tuple[VectorAddRow, ...]
    matmul: tuple[MatmulRow, ...]
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``tfaccel bench --kernels --json``)."""
        return {
            "device": self.device,
            "compute_capability": self.compute_capability,
            "targets": {
                "vector_add_share_of_copy": TARGET_COPY_SHARE,
                "matmul_share_of_cublas_float32": TARGET_CUBLAS_SHARE,
            },
            "vector_add": [row.to_dict() for row in self.vector_add],
            "matmul": [row.to_dict() for row in self.matmul],
            "notes": list(self.notes),
        }


def require_gpu() -> None:
    """Raise KernelBackendError unless the kernels run on a real GPU (not the simulator).

    Raises:
        KernelBackendError: no GPU, numba-cuda missing, or the simulator is on.
    """
    name = kernels.backend()
    if name == "cuda":
        return
    if name == "simulator":
        raise KernelBackendError(
            "the kernel benchmark needs an NVIDIA GPU: the CUDA simulator runs kernels at "
            "Python speed, so its timings mean nothing",
            expected="a CUDA GPU",
            received="numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)",
            fix="run it on a machine with an NVIDIA GPU, without NUMBA_ENABLE_CUDASIM",
        )
    raise KernelBackendError(
        "the kernel benchmark needs an NVIDIA GPU",
        expected="a CUDA GPU that numba-cuda can use",
        received=kernels.unavailable_reason() or "no GPU",
        fix="run it on a machine with an NVIDIA GPU (`tfaccel doctor` says what is missing)",
    )


def _check_sizes(name: str, values: Sequence[int], minimum: int) -> tuple[int, ...]:
    checked = tuple(values)
    if not checked or any(not is_int(v) or v < minimum for v in checked):
        raise UsageError(
            f"kernel benchmark: {name} must be a non-empty list of integers >= {minimum}",
            expected=f"e.g. {name}=(1024, 2048)",
            received=f"{name}={values!r}",
            fix=f"pass integers >= {minimum}",
        )
    return checked


def _sampler(step: Callable[[], Any], synchronize: Callable[[], None]) -> Callable[[], float]:
    """A candidate for measure_interleaved: ``step`` repeated to last ~MIN_SAMPLE_S.

    The repeat count is set once, from a first timed call (which also compiles).
    """
    synchronize()
    start = time.perf_counter()
    step()
    synchronize()
    once = max(time.perf_counter() - start, 1e-7)
    repeats = max(1, math.ceil(MIN_SAMPLE_S / once))

    def sample() -> float:
        synchronize()
        begin = time.perf_counter()
        for _ in range(repeats):
            step()
        synchronize()
        return (time.perf_counter() - begin) / repeats

    return sample


def _tensorflow(notes: list[str]) -> Any:
    """Import TensorFlow with memory growth on, so numba can still allocate."""
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:
            notes.append(
                "TensorFlow had started before the benchmark, without memory growth: it may "
                "hold most of the GPU's memory"
            )
            break
    return tf


def _bench_vector_add(
    elements: int, limits: Any, repeats: int, warmup: int, rng: np.random.Generator
) -> VectorAddRow:
    from numba import cuda

    from tfaccel.kernels import cuda as kcuda  # numba: loaded only to run on a GPU

    dtype = np.dtype(np.float32)
    a = cuda.to_device(rng.random(elements, dtype=np.float32))
    b = cuda.to_device(rng.random(elements, dtype=np.float32))
    out = cuda.device_array(elements, dtype=dtype)
    launch = _launch.vector_launch(elements, limits)
    kernel = kcuda.vector_add_kernel

    def add() -> None:
        kernel[launch.grid, launch.block](a, b, out)

    def copy() -> None:
        out.copy_to_device(a)

    samples = measure_interleaved(
        {"vector_add": _sampler(add, cuda.synchronize), "copy": _sampler(copy, cuda.synchronize)},
        repeats=repeats,
        warmup=warmup,
    )
    kernel_s, copy_s = summarize(samples["vector_add"]), summarize(samples["copy"])
    nbytes = elements * dtype.itemsize
    kernel_gbps = 3 * nbytes / kernel_s.median / 1e9
    copy_gbps = 2 * nbytes / copy_s.median / 1e9
    share = kernel_gbps / copy_gbps
    return VectorAddRow(
        elements=elements,
        dtype=str(dtype),
        kernel_seconds=kernel_s,
        copy_seconds=copy_s,
        kernel_gb_per_s=kernel_gbps,
        copy_gb_per_s=copy_gbps,
        share_of_copy=share,
        meets_target=share >= TARGET_COPY_SHARE,
    )


def _bench_matmul(
    size: int,
    tiles: Sequence[int],
    tf: Any,
    limits: Any,
    repeats: int,
    warmup: int,
    rng: np.random.Generator,
) -> MatmulRow:
    from numba import cuda

    from tfaccel.kernels import cuda as kcuda  # numba: loaded only to run on a GPU

    dtype = np.dtype(np.float32)
    a_host = rng.standard_normal((size, size), dtype=np.float32)
    b_host = rng.standard_normal((size, size), dtype=np.float32)
    a, b = cuda.to_device(a_host), cuda.to_device(b_host)
    c = cuda.device_array((size, size), dtype=dtype)
    with tf.device("/GPU:0"):
        ta, tb = tf.constant(a_host), tf.constant(b_host)
        reference = tf.matmul(ta, tb).numpy()

    def sync_all() -> None:
        tf.test.experimental.sync_devices()
        cuda.synchronize()

    def cublas() -> None:
        with tf.device("/GPU:0"):
            tf.matmul(ta, tb)

    candidates: dict[str, Callable[[], float | None]] = {"cublas": _sampler(cublas, sync_all)}
    errors: dict[int, float] = {}
    for tile in tiles:
        launch = _launch.matmul_launch(size, size, tile, dtype.itemsize, limits)
        kernel = kcuda.matmul_kernel(tile, dtype)

        def tiled(kernel: Any = kernel, launch: Any = launch) -> None:
            kernel[launch.grid, launch.block](a, b, c)

        candidates[f"tile {tile}"] = _sampler(tiled, cuda.synchronize)
        scale = float(np.abs(reference).max()) or 1.0
        errors[tile] = float(np.abs(c.copy_to_host() - reference).max()) / scale

    samples = measure_interleaved(candidates, repeats=repeats, warmup=warmup)
    flops = 2.0 * size**3
    cublas_s = summarize(samples["cublas"])
    cublas_tflops = flops / cublas_s.median / 1e12
    results = []
    for tile in tiles:
        seconds = summarize(samples[f"tile {tile}"])
        tflops = flops / seconds.median / 1e12
        results.append(
            TileResult(
                tile=tile,
                seconds=seconds,
                tflops=tflops,
                share_of_cublas=tflops / cublas_tflops,
                max_relative_error=errors[tile],
            )
        )
    best = max(results, key=lambda r: r.tflops)
    return MatmulRow(
        size=size,
        dtype=str(dtype),
        cublas_seconds=cublas_s,
        cublas_tflops=cublas_tflops,
        tiles=tuple(results),
        best_tile=best.tile,
        meets_target=best.share_of_cublas >= TARGET_CUBLAS_SHARE,
    )


def run(
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    tiles: Sequence[int] = DEFAULT_TILES,
    vector_sizes: Sequence[int] = DEFAULT_VECTOR_SIZES,
    repeats: int = 5,
    warmup: int = 1,
    seed: int = 0,
) -> KernelBenchResult:
    """Measure the kernels against the copy bandwidth and cuBLAS on the current GPU.

    Args:
        sizes: n of the (n, n) @ (n, n) float32 matmuls.
        tiles: tile sizes to compare (each tile*tile <= the device's threads per block).
        vector_sizes: lengths of the float32 vectors for vector_add and the copy.
        repeats: samples kept per candidate.
        warmup: rounds discarded first.
        seed: seed of the random inputs.

    Returns:
        KernelBenchResult, with ``to_dict()`` for JSON.

    Raises:
        KernelBackendError: no GPU, numba-cuda missing, or the CUDA simulator is on.
        UsageError: bad sizes or tiles.
    """
    require_gpu()
    sizes = _check_sizes("sizes", sizes, 1)
    tiles = _check_sizes("tiles", tiles, 1)
    vector_sizes = _check_sizes("vector_sizes", vector_sizes, 1)
    from numba import cuda

    from tfaccel.kernels import cuda as kcuda  # numba: loaded only to run on a GPU

    notes: list[str] = []
    tf = _tensorflow(notes)
    limits = kcuda.device_limits()
    device = cuda.get_current_device()
    major, minor = device.compute_capability
    rng = np.random.default_rng(seed)

    vector_rows = tuple(_bench_vector_add(n, limits, repeats, warmup, rng) for n in vector_sizes)
    tf32_was_enabled = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    notes.append("tf.matmul ran with TensorFloat-32 off: full float32 on both sides")
    try:
        matmul_rows = tuple(
            _bench_matmul(n, tiles, tf, limits, repeats, warmup, rng) for n in sizes
        )
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(tf32_was_enabled)
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    return KernelBenchResult(
        device=name,
        compute_capability=f"{major}.{minor}",
        vector_add=vector_rows,
        matmul=matmul_rows,
        notes=tuple(notes),
    )


def render_text(result: KernelBenchResult) -> str:
    """The result as plain text: one line per vector size, matmul size and tile."""
    lines = [f"{result.device} (compute capability {result.compute_capability})", ""]
    lines.append(f"vector_add vs device copy (target >= {TARGET_COPY_SHARE:.0%} of copy bandwidth)")
    for row in result.vector_add:
        lines.append(
            f"  {row.elements:>11,} x {row.dtype}: {row.kernel_gb_per_s:8.1f} GB/s vs copy "
            f"{row.copy_gb_per_s:8.1f} GB/s = {row.share_of_copy:6.1%} "
            f"(noise +-{row.kernel_seconds.relative_iqr:.1%})"
            f"{'' if row.meets_target else '  below target'}"
        )
    lines.append("")
    lines.append(
        f"matmul vs tf.matmul/cuBLAS (target >= {TARGET_CUBLAS_SHARE:.0%} for large sizes)"
    )
    for mm in result.matmul:
        lines.append(f"  {mm.size}^3 {mm.dtype}: cuBLAS {mm.cublas_tflops:7.2f} TFLOP/s")
        for tile in mm.tiles:
            best = "  <- best" if tile.tile == mm.best_tile else ""
            lines.append(
                f"    tile {tile.tile:>2}: {tile.tflops:7.2f} TFLOP/s = "
                f"{tile.share_of_cublas:6.1%} of cuBLAS (max rel. error "
                f"{tile.max_relative_error:.1e}){best}"
            )
    if result.notes:
        lines.append("")
        lines.extend(f"note: {note}" for note in result.notes)
    return "\n".join(lines)
