"""tfaccel.kernels on a real NVIDIA GPU: the benchmark's figures, DLPack, larger shapes.

Marked ``gpu``: skipped with the reason where NVML sees no GPU. Also skipped where the CUDA
simulator is on (``NUMBA_ENABLE_CUDASIM=1``, set by the caller or by tests/kernels/test_kernels.py
on a machine without a GPU), since none of this means anything there. Figures are checked
for sanity, never against a wall-clock bound or the performance targets.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tfaccel import kernels
from tfaccel.core.errors import UsageError
from tfaccel.kernels import _launch, reference

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_backend() -> Any:
    """The numba-cuda backend module, on a real GPU."""
    pytest.importorskip(
        "numba_cuda", reason="Requires: numba-cuda (pip install 'tfaccel[kernels]')"
    )
    name = kernels.backend()
    if name == "simulator":
        pytest.skip("Requires: a real GPU; the CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1)")
    assert name == "cuda", (
        f"NVML sees a GPU but numba-cuda cannot use it: {kernels.unavailable_reason()}"
    )
    from tfaccel.kernels import cuda

    return cuda


@pytest.fixture(scope="module")
def tf_gpu() -> Any:
    tf = pytest.importorskip("tensorflow")
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        pytest.skip("Requires: TensorFlow with GPU support (pip install 'tensorflow[and-cuda]')")
    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:
            break  # TensorFlow already started; growth is whatever it was
    return tf


@pytest.mark.parametrize("tile", [8, 16, 32])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_on_the_gpu_at_larger_odd_shapes(tile: int, dtype: Any, gpu_backend: Any) -> None:
    rng = np.random.default_rng(tile)
    a = rng.standard_normal((257, 129)).astype(dtype)
    b = rng.standard_normal((129, 65)).astype(dtype)
    out = np.full((257, 65), np.nan, dtype=dtype)
    kernels.matmul(a, b, tile=tile, out=out)
    rtol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, reference.matmul(a, b), rtol=rtol, atol=1e-4)


@pytest.mark.parametrize("per_thread", [2, 4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_with_several_outputs_per_thread_on_the_gpu(
    per_thread: int, dtype: Any, gpu_backend: Any
) -> None:
    rng = np.random.default_rng(per_thread)
    a = rng.standard_normal((300, 257)).astype(dtype)
    b = rng.standard_normal((257, 133)).astype(dtype)
    out = np.full((300, 133), np.nan, dtype=dtype)
    kernels.matmul(a, b, tile=16, per_thread=per_thread, out=out)  # float64 at 8x8: 32 KiB
    rtol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, reference.matmul(a, b), rtol=rtol, atol=1e-4)


def test_a_block_the_registers_cannot_hold_is_refused_clearly(gpu_backend: Any) -> None:
    # 32x32 threads, each with 4x4 float32 sums in registers: 80 registers a thread for sm_90
    # by CUDA 12's ptxas (kernels.resources), 81920 for the block, over the 64K it may have.
    a = np.ones((130, 70), np.float32)
    b = np.ones((70, 129), np.float32)
    kernel = gpu_backend.matmul_kernel(32, np.dtype(np.float32), 4)
    try:
        kernels.matmul(a, b, tile=32, per_thread=4)
    except UsageError as exc:
        assert "more registers" in str(exc) and "per_thread" in str(exc.fix)
        registers = next(iter(kernel.get_regs_per_thread().values()))
        assert registers * 1024 > 65536, registers  # refused only when it does not fit
    else:  # a compiler that fits it in 64 registers: then it must be right
        registers = next(iter(kernel.get_regs_per_thread().values()))
        assert registers * 1024 <= 65536, registers
        np.testing.assert_array_equal(kernels.matmul(a, b, tile=32, per_thread=4), a @ b)
    with pytest.raises(UsageError, match="shared memory"):  # 2 x 256x32 float32: 64 KiB
        kernels.matmul(a, b, tile=32, per_thread=8)


def test_vector_add_on_the_gpu_loops_over_one_wave(gpu_backend: Any) -> None:
    limits = gpu_backend.device_limits()
    assert limits.resident_threads is not None and limits.resident_threads >= 2048
    n = 4 * limits.resident_threads + 77  # four waves and a ragged end
    launch = _launch.vector_launch(n, limits)
    assert launch.threads <= limits.resident_threads < n  # the kernel's loop covers the rest
    rng = np.random.default_rng(5)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    np.testing.assert_array_equal(kernels.vector_add(a, b, out=out), a + b)


def test_reduce_sum_on_the_gpu_over_many_blocks(gpu_backend: Any) -> None:
    x = np.random.default_rng(0).standard_normal(3_000_001)
    assert kernels.reduce_sum(x) == pytest.approx(float(np.sum(x)), rel=1e-9)
    ints = np.arange(1_000_003, dtype=np.int32)
    assert kernels.reduce_sum(ints) == reference.reduce_sum(ints)  # wraps the same way


def test_gpu_tensors_are_used_in_place_through_dlpack(gpu_backend: Any, tf_gpu: Any) -> None:
    """A GPU tf.Tensor reaches the kernel without a host copy: the device array the kernels
    see shares the tensor's memory (a write through it shows in the tensor)."""
    tf = tf_gpu
    with tf.device("/GPU:0"):
        a = tf.range(1000, dtype=tf.float32)
        b = tf.ones(1000, dtype=tf.float32)
    result = kernels.vector_add(a, b)
    assert not isinstance(result, np.ndarray)  # stays on the device
    np.testing.assert_array_equal(result.copy_to_host(), np.arange(1000) + 1)

    view = gpu_backend._from_tensorflow_gpu(a, "a")
    view[0:1] = np.array([42.0], dtype=np.float32)  # write through the shared memory
    gpu_backend.cuda.synchronize()
    assert a.numpy()[0] == 42.0


def test_the_benchmark_figures_are_sane(gpu_backend: Any, tf_gpu: Any) -> None:
    from tfaccel.kernels import bench

    result = bench.run(sizes=(512,), tiles=(8, 16, 32), vector_sizes=(1 << 22,), repeats=3)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["targets"] == {
        "vector_add_share_of_copy": 0.8,
        "matmul_share_of_cublas_float32": 0.5,
    }
    (row,) = result.vector_add
    assert row.kernel_gb_per_s > 0 and row.copy_gb_per_s > 0
    assert 0.05 < row.share_of_copy < 3.0  # a share, not a wall-clock bound
    (mm,) = result.matmul
    assert mm.cublas_tflops > 0 and {t.tile for t in mm.tiles} == {8, 16, 32}
    for tile in mm.tiles:
        assert tile.tflops > 0 and 0 < tile.share_of_cublas < 10
        assert tile.max_relative_error < 1e-4  # the kernel computed the same product
    assert mm.best_tile in {8, 16, 32}
    assert any("TensorFloat-32" in note for note in result.notes)
