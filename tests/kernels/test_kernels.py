"""tfaccel.kernels against the NumPy references, on numba-cuda's CUDA simulator.

Simulator or GPU: numba-cuda decides once, when ``numba.cuda`` is first imported, from
``NUMBA_ENABLE_CUDASIM``. This module sets it at import time (collection, before any test
runs and before tfaccel.kernels imports numba, which it does at the first kernel call)
unless NVML sees a GPU or the variable is already set: on a GPU machine the same checks run
on the GPU. No other test module imports numba; should one ever import it first, without
the simulator, ``backend_in_use`` fails these tests with that explanation instead of
letting them pass without running a kernel.

The simulator runs every CUDA thread as a Python thread, so shapes stay small (13x7 @ 7x19,
33x17 @ 17x9) and reduction tests shrink the device limits to reach several blocks, a
second pass and capped grids with few elements. Every output buffer is poisoned (NaN, or
a sentinel for int32) before the launch, so an element no thread writes fails the test.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfaccel.probe import nvml

if not nvml.collect().gpus:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

from tfaccel import kernels
from tfaccel.core.errors import UsageError
from tfaccel.kernels import _launch, reference
from tfaccel.kernels._launch import SIMULATOR_LIMITS, DeviceLimits

ROOT = Path(__file__).resolve().parents[2]
HAVE_NUMBA_CUDA = all(importlib.util.find_spec(m) is not None for m in ("numba", "numba_cuda"))
needs_kernels = pytest.mark.skipif(
    not HAVE_NUMBA_CUDA,
    reason="Requires: numba and numba-cuda (pip install 'tfaccel[kernels]')",
)
pytestmark = pytest.mark.filterwarnings("ignore::tfaccel.kernels.SimulatorWarning")

RNG_SEED = 20240611
FLOATS = [np.float32, np.float64]
TOLERANCE = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


def _random(shape: tuple[int, ...], dtype: Any, seed: int = RNG_SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _poisoned(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    fill = np.nan if dtype.kind == "f" else np.iinfo(dtype).min
    return np.full(shape, fill, dtype=dtype)


def _assert_matches(result: np.ndarray, expected: np.ndarray) -> None:
    assert result.dtype == expected.dtype and result.shape == expected.shape
    if result.dtype.kind == "f":
        assert not np.isnan(result).any(), "an element was never written (NaN poison left)"
        np.testing.assert_allclose(result, expected, rtol=TOLERANCE[result.dtype], atol=1e-6)
    else:
        np.testing.assert_array_equal(result, expected)


def _assert_clear(err: UsageError) -> None:
    assert err.what and err.expected and err.received and err.fix


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def backend_in_use() -> str:
    """The backend the kernel tests run on; fails loudly when there is none."""
    if not HAVE_NUMBA_CUDA:
        pytest.skip("Requires: numba and numba-cuda (pip install 'tfaccel[kernels]')")
    name = kernels.backend()
    if name == "none":
        pytest.fail(
            "no kernel backend: NUMBA_ENABLE_CUDASIM was set by this module, so numba.cuda "
            f"must have been imported earlier without it ({kernels.unavailable_reason()}); "
            "run the kernel tests alone, or set NUMBA_ENABLE_CUDASIM=1 for the whole run",
            pytrace=False,
        )
    return name


@pytest.fixture(scope="module", autouse=True)
def _fast_simulator_barriers() -> Iterator[None]:
    """The simulator polls its Python threads at every syncthreads: a short GIL switch
    interval makes those barriers cheap (seconds instead of tens of seconds here)."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(previous)


@pytest.fixture
def kcuda(backend_in_use: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The CUDA backend module, with reduce_sum's scratch buffer poisoned."""
    from tfaccel.kernels import cuda

    monkeypatch.setattr(cuda, "_POISON_SCRATCH", True)
    return cuda


def _small_limits(monkeypatch: pytest.MonkeyPatch, cuda: Any, **limits: int) -> None:
    """Pretend the device is smaller, to reach multi-block and capped-grid paths cheaply."""
    fields = {
        "max_threads_per_block": 1024,
        "max_grid_x": 2**31 - 1,
        "max_grid_y": 65535,
        "max_shared_bytes_per_block": 48 * 1024,
    }
    fields.update(limits)
    monkeypatch.setattr(cuda, "device_limits", lambda: DeviceLimits(**fields))


# --- launch configurations (no device needed) ---------------------------------------------


def test_vector_launch_rounds_short_vectors_to_a_warp_and_covers_long_ones() -> None:
    assert _launch.vector_launch(1, SIMULATOR_LIMITS) == _launch.Launch((1,), (32,))
    assert _launch.vector_launch(33, SIMULATOR_LIMITS) == _launch.Launch((1,), (64,))
    assert _launch.vector_launch(10_000, SIMULATOR_LIMITS) == _launch.Launch((40,), (256,))
    small = DeviceLimits(128, 3, 3, 1024)
    assert _launch.vector_launch(10_000, small) == _launch.Launch((3,), (128,))  # kernel loops


def test_vector_launch_gives_a_long_vector_one_wave_of_the_device() -> None:
    h200 = DeviceLimits(1024, 2**31 - 1, 65535, 48 * 1024, resident_threads=132 * 2048)
    # 2^28 elements: 1056 blocks of 256 (8 per multiprocessor), not a million of them
    assert _launch.vector_launch(1 << 28, h200) == _launch.Launch((1056,), (256,))
    assert _launch.vector_launch(10_000, h200) == _launch.Launch((40,), (256,))  # under a wave
    tiny = DeviceLimits(1024, 2**31 - 1, 65535, 48 * 1024, resident_threads=100)
    assert _launch.vector_launch(10_000, tiny) == _launch.Launch((1,), (256,))  # at least one


@given(
    n=st.integers(1, 10**9),
    threads=st.sampled_from([32, 64, 256, 1024]),
    resident=st.one_of(st.none(), st.integers(32, 300_000)),
)
@settings(max_examples=80, deadline=None)
def test_vector_launch_respects_limits_and_covers_every_element(
    n: int, threads: int, resident: int | None
) -> None:
    limits = DeviceLimits(threads, 65535, 65535, 48 * 1024, resident_threads=resident)
    launch = _launch.vector_launch(n, limits)
    assert launch.block[0] <= threads and launch.block[0] % 32 == 0
    assert launch.grid[0] <= limits.max_grid_x
    wave = max(1, resident // launch.block[0]) if resident is not None else None
    if wave is not None:
        assert launch.grid[0] <= wave
    # every element is covered: by one thread each, or by the kernel's grid-stride loop
    # over a grid that was capped (by the device's maximum or by one wave)
    assert launch.threads >= n or launch.grid[0] in (limits.max_grid_x, wave)


@given(n=st.integers(1, 10**8), threads=st.sampled_from([64, 256, 1024]))
@settings(max_examples=50, deadline=None)
def test_reduce_launch_leaves_at_most_one_block_of_partials(n: int, threads: int) -> None:
    limits = DeviceLimits(threads, 2**31 - 1, 65535, 48 * 1024)
    first = _launch.reduce_launch(n, limits)
    (t,) = first.block
    assert t & (t - 1) == 0 and 32 <= t <= min(256, threads)  # a power of two for the tree
    assert first.grid[0] <= threads
    second = _launch.finish_reduce_launch(first.grid[0], limits)
    assert second.grid == (1,) and second.block[0] >= first.grid[0]
    assert second.block[0] <= threads


def test_matmul_launch_has_one_block_per_output_tile() -> None:
    launch = _launch.matmul_launch(33, 9, 8, 4, SIMULATOR_LIMITS)
    assert launch.grid == (2, 5) and launch.block == (8, 8)  # x: columns, y: rows


def test_matmul_launch_with_several_outputs_per_thread_covers_larger_tiles() -> None:
    # 2048 x 2048 with 16x16 threads each computing 8x8: 128x128 per block, 16 x 16 blocks
    assert _launch.matmul_launch(2048, 2048, 16, 4, SIMULATOR_LIMITS, 8) == _launch.Launch(
        (16, 16), (16, 16)
    )
    assert _launch.matmul_launch(33, 9, 4, 4, SIMULATOR_LIMITS, 2).grid == (2, 5)  # 8x8 tiles
    # two 256x32 float64 slices: 128 KiB, over the 48 KiB a block may have
    with pytest.raises(UsageError, match="shared memory") as err:
        _launch.matmul_launch(64, 64, 32, 8, SIMULATOR_LIMITS, 8)
    _assert_clear(err.value)
    assert "per_thread=8" in str(err.value.received)


def test_matmul_launch_rejects_tiles_the_device_cannot_run() -> None:
    with pytest.raises(UsageError, match="tile=33") as err:
        _launch.matmul_launch(64, 64, 33, 4, SIMULATOR_LIMITS)
    _assert_clear(err.value)
    assert "tile <= 32" in str(err.value.expected)
    tight = DeviceLimits(1024, 2**31 - 1, 65535, 4 * 1024)
    with pytest.raises(UsageError, match="shared memory") as err:
        _launch.matmul_launch(64, 64, 32, 4, tight)
    _assert_clear(err.value)
    with pytest.raises(UsageError, match="more blocks") as err:
        _launch.matmul_launch(65536 * 4 + 1, 8, 4, 4, SIMULATOR_LIMITS)
    _assert_clear(err.value)


def test_bias_relu_launch_narrows_to_small_shapes_and_caps_the_grid() -> None:
    assert _launch.bias_relu_launch(3, 5, SIMULATOR_LIMITS) == _launch.Launch((1, 1), (5, 3))
    assert _launch.bias_relu_launch(100, 70, SIMULATOR_LIMITS) == _launch.Launch((3, 13), (32, 8))
    capped = _launch.bias_relu_launch(10**6, 10**3, DeviceLimits(256, 4, 4, 1024))
    assert capped.grid == (4, 4) and capped.block == (32, 8)


# --- bad input: clear errors, the same from the API and the reference ---------------------

V3 = np.zeros(3, np.float32)
M23 = np.zeros((2, 3), np.float32)
M34 = np.zeros((3, 4), np.float32)

BAD_CALLS: list[tuple[str, str, tuple[Any, ...], dict[str, Any], str]] = [
    ("vector_add", "lengths", (V3, np.zeros(4, np.float32)), {}, "different lengths"),
    ("vector_add", "dtype", (V3.astype(np.float16),) * 2, {}, "unsupported dtype"),
    ("vector_add", "int64", (np.arange(3), np.arange(3)), {}, "unsupported dtype"),
    ("vector_add", "mixed", (V3, V3.astype(np.float64)), {}, "different dtypes"),
    ("vector_add", "empty", (V3[:0], V3[:0]), {}, "is empty"),
    ("vector_add", "ndim", (M23, M23), {}, "number of dimensions"),
    ("vector_add", "out-shape", (V3, V3), {"out": np.zeros(4, np.float32)}, "out does not"),
    ("vector_add", "out-dtype", (V3, V3), {"out": np.zeros(3)}, "out does not"),
    (
        "vector_add",
        "out-strided",
        (V3, V3),
        {"out": np.zeros(6, np.float32)[::2]},
        "C-contiguous",
    ),
    ("vector_add", "out-list", (V3, V3), {"out": [0.0, 0.0, 0.0]}, "out must be"),
    ("matmul", "inner", (M23, M23), {}, "inner dimensions"),
    ("matmul", "int32", (M23.astype(np.int32), M34.astype(np.int32)), {}, "unsupported"),
    ("matmul", "complex", (M23.astype(np.complex64), M34.astype(np.complex64)), {}, "dtype"),
    ("matmul", "ndim", (V3, M34), {}, "number of dimensions"),
    ("matmul", "empty", (np.zeros((0, 3), np.float32), M34), {}, "is empty"),
    ("matmul", "tile-zero", (M23, M34, 0), {}, "positive integer"),
    ("matmul", "tile-float", (M23, M34, 2.5), {}, "positive integer"),
    ("matmul", "tile-bool", (M23, M34, True), {}, "positive integer"),
    ("reduce_sum", "ndim", (M23,), {}, "number of dimensions"),
    ("reduce_sum", "empty", (V3[:0],), {}, "is empty"),
    ("reduce_sum", "bool", (np.ones(3, bool),), {}, "unsupported dtype"),
    ("reduce_sum", "out-shape", (V3,), {"out": np.zeros((), np.float32)}, "out does not"),
    ("bias_relu", "bias-length", (M23, V3[:2]), {}, "bias does not match"),
    ("bias_relu", "bias-ndim", (M23, M23), {}, "number of dimensions"),
    ("bias_relu", "x-ndim", (V3, V3), {}, "number of dimensions"),
    ("bias_relu", "int32", (M23.astype(np.int32), V3.astype(np.int32)), {}, "unsupported"),
    ("bias_relu", "empty", (np.zeros((0, 3), np.float32), V3), {}, "is empty"),
    (
        "bias_relu",
        "out-readonly",
        (M23, V3),
        {"out": np.broadcast_to(np.zeros(3, np.float32), (2, 3))},
        "writeable",
    ),
]


@pytest.mark.parametrize(
    ("op", "args", "kwargs", "message"),
    [pytest.param(op, a, k, m, id=f"{op}-{case}") for op, case, a, k, m in BAD_CALLS],
)
def test_bad_input_is_a_clear_usage_error(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    for implementation in (kernels, reference):
        with pytest.raises(UsageError, match=message) as err:
            getattr(implementation, op)(*args, **kwargs)
        _assert_clear(err.value)


def test_a_symbolic_tensor_is_refused_with_the_fix() -> None:
    symbolic = type("SymbolicTensor", (), {"__module__": "tensorflow.python.framework.ops"})()
    with pytest.raises(UsageError, match="symbolic") as err:
        kernels.vector_add(symbolic, symbolic)
    assert "tf.py_function" in str(err.value.fix)


def test_an_unknown_fallback_is_refused() -> None:
    with pytest.raises(UsageError, match="fallback") as err:
        kernels.vector_add(V3, V3, fallback="cupy")  # type: ignore[arg-type]
    _assert_clear(err.value)


# --- the references ---------------------------------------------------------------------


def test_references_define_the_semantics() -> None:
    x = np.array([[-1.0, np.nan, 2.0]], np.float32)
    np.testing.assert_array_equal(
        reference.bias_relu(x, np.array([0.5, 0.0, -3.0], np.float32)),
        np.array([[0.0, np.nan, 0.0]], np.float32),
    )
    big = np.array([2**31 - 1, 1], np.int32)
    assert reference.reduce_sum(big) == np.int32(-(2**31))  # wraps like int32 on a GPU
    assert reference.reduce_sum(big).dtype == np.int32
    assert reference.matmul(M23, M34, tile=7).dtype == np.float32
    out = _poisoned((3,), np.float32)
    assert reference.vector_add(V3, V3, out=out) is out and not np.isnan(out).any()


# --- no backend, no numba, import cost ----------------------------------------------------


def test_importing_kernels_does_not_import_numba() -> None:
    code = "import sys, tfaccel.kernels; print('numba' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"


def test_without_numba_the_error_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tfaccel.kernels.cuda", None)  # import fails
    monkeypatch.delattr(kernels, "cuda", raising=False)
    with pytest.raises(kernels.KernelBackendError, match="numba") as err:
        kernels.vector_add(V3, V3)
    assert "pip install 'tfaccel[kernels]'" in str(err.value.fix)
    assert kernels.backend() == "none" and not kernels.available()
    assert "ImportError" in str(kernels.unavailable_reason())
    result = kernels.vector_add(V3 + 1, V3, fallback="numpy")
    np.testing.assert_array_equal(result, V3 + 1)


@needs_kernels
def test_without_a_gpu_the_error_says_how_to_use_the_simulator(
    kcuda: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kcuda, "is_simulator", lambda: False)
    monkeypatch.setattr(kcuda, "backend_name", lambda: "none")
    monkeypatch.setattr(kcuda, "unavailable_reason", lambda: "CUDA driver library not found")
    with pytest.raises(kernels.KernelBackendError, match="no usable CUDA GPU") as err:
        kernels.matmul(M23, M34)
    assert err.value.received == "CUDA driver library not found"
    assert "NUMBA_ENABLE_CUDASIM=1" in str(err.value.fix)
    assert "before numba is imported" in str(err.value.fix)
    assert not kernels.available()
    np.testing.assert_array_equal(kernels.matmul(M23, M34, fallback="numpy"), M23 @ M34)


# --- the kernels on the simulator, against the references -----------------------------------


@needs_kernels
def test_the_simulator_warns_once_that_it_is_for_correctness(
    kcuda: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kcuda.backend_name() != "simulator":
        pytest.skip("runs on a GPU here, not on the simulator")
    assert kernels.backend() == "simulator" and kernels.available()
    assert kernels.unavailable_reason() is None
    monkeypatch.setattr(kcuda, "_warned_simulator", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernels.vector_add(V3, V3)
        kernels.vector_add(V3, V3)
    found = [w for w in caught if issubclass(w.category, kernels.SimulatorWarning)]
    assert len(found) == 1 and "not a GPU's" in str(found[0].message)
    assert found[0].filename == __file__  # points at the caller's line


@needs_kernels
@pytest.mark.parametrize(
    ("m", "k", "n", "tile", "dtype"),
    [
        (13, 7, 19, 4, np.float32),
        (13, 7, 19, 8, np.float64),
        (13, 7, 19, 16, np.float32),
        (33, 17, 9, 4, np.float64),
        (33, 17, 9, 8, np.float32),
        (33, 17, 9, 16, np.float64),
        (1, 1, 1, 8, np.float32),
        (8, 16, 8, 8, np.float32),  # exact multiples: no partial tile
    ],
)
def test_matmul_matches_numpy(m: int, k: int, n: int, tile: int, dtype: Any, kcuda: Any) -> None:
    a, b = _random((m, k), dtype, 1), _random((k, n), dtype, 2)
    out = _poisoned((m, n), dtype)
    result = kernels.matmul(a, b, tile=tile, out=out)
    assert result is out
    _assert_matches(out, reference.matmul(a, b))


@needs_kernels
@pytest.mark.parametrize(
    ("m", "k", "n", "tile", "per_thread", "dtype"),
    [
        (37, 19, 41, 4, 2, np.float32),  # partial tiles on every side
        (37, 19, 41, 2, 8, np.float64),
        (9, 23, 5, 4, 4, np.float32),  # smaller than one block's tile
        (1, 1, 1, 2, 8, np.float32),
        (32, 8, 32, 4, 8, np.float32),  # exact multiples: no partial tile
    ],
)
def test_matmul_with_several_outputs_per_thread_matches_numpy(
    m: int, k: int, n: int, tile: int, per_thread: int, dtype: Any, kcuda: Any
) -> None:
    a, b = _random((m, k), dtype, 3), _random((k, n), dtype, 4)
    out = _poisoned((m, n), dtype)
    assert kernels.matmul(a, b, tile=tile, per_thread=per_thread, out=out) is out
    _assert_matches(out, reference.matmul(a, b))


@needs_kernels
def test_a_block_too_big_for_the_registers_is_a_usage_error(kcuda: Any) -> None:
    class OutOfResources:  # a launch the GPU refuses, as numba-cuda's binding raises it
        def __getitem__(self, config: Any) -> OutOfResources:
            return self

        def __call__(self, *args: Any) -> None:
            raise RuntimeError(
                "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: This indicates that a launch did not "
                "occur because it did not have appropriate resources."
            )

    with pytest.raises(UsageError, match="more registers") as err:
        kcuda._run(
            OutOfResources(),
            _launch.Launch(grid=(1, 1), block=(32, 32)),
            op="matmul",
            given="tile=32, per_thread=4, dtype=float32",
            smaller="pass tile=16 (256 threads) or a smaller per_thread (per_thread=2)",
        )
    _assert_clear(err.value)
    assert str(err.value).startswith("matmul: a block of 1024 threads")
    assert "tile=32, per_thread=4" in str(err.value.received)
    assert "per_thread=2" in str(err.value.fix)

    class Other(OutOfResources):
        def __call__(self, *args: Any) -> None:
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")

    with pytest.raises(RuntimeError, match="ILLEGAL_ADDRESS"):  # not every launch error
        kcuda._run(Other(), _launch.Launch(grid=(1,), block=(32,)))


@needs_kernels
def test_the_simulators_shared_array_is_one_per_block(kcuda: Any) -> None:
    """numba-cuda's simulator creates a block's shared array on the first thread that asks, with
    no lock: two threads could each make one, and one then computed on a private copy (a wrong
    column of the tiled matmul, now and then). Sixteen threads asking at once get one array."""
    import threading

    from numba.cuda.simulator import kernelapi

    kcuda._shared_arrays_one_per_block()
    for _ in range(20):
        shared, got, start = kernelapi.FakeCUDAShared(0), [], threading.Barrier(16)

        def take(shared: Any = shared, got: list[Any] = got, start: Any = start) -> None:
            start.wait()
            got.append(shared.array((4, 4), np.float32))

        threads = [threading.Thread(target=take) for _ in range(16)]
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(interval)
        assert len(got) == 16 and len({id(array) for array in got}) == 1


@needs_kernels
def test_matmul_refuses_a_tile_larger_than_the_device_allows(
    kcuda: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UsageError, match="tile=33") as err:
        kernels.matmul(M23, M34, tile=33)  # 1089 threads > 1024
    _assert_clear(err.value)
    _small_limits(monkeypatch, kcuda, max_threads_per_block=64)
    with pytest.raises(UsageError, match="tile <= 8"):
        kernels.matmul(M23, M34, tile=16)
    _assert_matches(kernels.matmul(M23 + 1, M34 + 1, tile=8), (M23 + 1) @ (M34 + 1))


@needs_kernels
@given(
    m=st.integers(1, 12),
    k=st.integers(1, 12),
    n=st.integers(1, 12),
    tile=st.sampled_from([2, 3, 4, 8]),
)
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_matmul_matches_numpy_for_any_shape(m: int, k: int, n: int, tile: int, kcuda: Any) -> None:
    a, b = _random((m, k), np.float64, m), _random((k, n), np.float64, n)
    out = _poisoned((m, n), np.float64)
    _assert_matches(kernels.matmul(a, b, tile, out=out), a @ b)


@needs_kernels
@pytest.mark.parametrize("length", [1, 31, 33, 300])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_vector_add_matches_numpy(length: int, dtype: Any, kcuda: Any) -> None:
    a, b = _random((length,), dtype, 1), _random((length,), dtype, 2)
    out = _poisoned((length,), dtype)
    assert kernels.vector_add(a, b, out=out) is out
    _assert_matches(out, reference.vector_add(a, b))
    _assert_matches(kernels.vector_add(a, b), a + b)  # a new array without out=


@needs_kernels
def test_vector_add_loops_when_the_grid_is_capped(
    kcuda: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_limits(monkeypatch, kcuda, max_threads_per_block=32, max_grid_x=2)
    a, b = _random((200,), np.float32, 1), _random((200,), np.float32, 2)
    out = _poisoned((200,), np.float32)
    _assert_matches(kernels.vector_add(a, b, out=out), a + b)


@needs_kernels
def test_vector_add_loops_over_one_wave_of_threads(
    kcuda: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_limits(monkeypatch, kcuda, resident_threads=64)  # under one block of 256
    # 1000 elements: one block of 256 threads (not 4), each taking 4 elements a grid apart
    assert _launch.vector_launch(1000, kcuda.device_limits()) == _launch.Launch((1,), (256,))
    a, b = _random((1000,), np.float32, 3), _random((1000,), np.float32, 4)
    out = _poisoned((1000,), np.float32)
    _assert_matches(kernels.vector_add(a, b, out=out), a + b)


class _Device:
    """A numba-cuda Device as its driver binding names the attributes (the hardware edge)."""

    def __init__(self, **attributes: int) -> None:
        self.__dict__.update(attributes)


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"MULTIPROCESSOR_COUNT": 132, "MAX_THREADS_PER_MULTIPROCESSOR": 2048}, 270_336),
        ({"MULTIPROCESSOR_COUNT": 84, "MAX_THREADS_PER_MULTI_PROCESSOR": 1536}, 129_024),
        ({"MULTIPROCESSOR_COUNT": 84}, None),
    ],
    ids=["cuda-bindings", "numba-ctypes", "neither"],
)
@needs_kernels
def test_resident_threads_read_under_either_name(
    kcuda: Any, attributes: dict[str, int], expected: int | None
) -> None:
    assert kcuda._resident_threads(_Device(**attributes)) == expected


@needs_kernels
@pytest.mark.parametrize("length", [1, 2, 3, 33, 100])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_reduce_sum_matches_numpy(length: int, dtype: Any, kcuda: Any) -> None:
    x = _random((length,), dtype)
    out = _poisoned((1,), dtype)
    total = kernels.reduce_sum(x, out=out)
    expected = reference.reduce_sum(x)
    assert type(total) is type(expected)
    _assert_matches(np.array([total]), np.array([expected]))
    _assert_matches(out, np.array([expected]))


@needs_kernels
@pytest.mark.parametrize(
    ("length", "limits"),
    [
        (300, {"max_threads_per_block": 64}),  # 5 blocks of 64, then one block of 32
        (1000, {"max_threads_per_block": 32}),  # 32 partials, each thread loops
        (257, {"max_threads_per_block": 64, "max_grid_x": 3}),  # capped grid
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_reduce_sum_over_several_blocks_and_a_second_pass(
    length: int, limits: dict[str, int], dtype: Any, kcuda: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_limits(monkeypatch, kcuda, **limits)
    x = _random((length,), dtype)
    _assert_matches(np.array([kernels.reduce_sum(x)]), np.array([reference.reduce_sum(x)]))


@needs_kernels
@pytest.mark.parametrize(("m", "n"), [(1, 1), (13, 7), (9, 40)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_bias_relu_matches_numpy(m: int, n: int, dtype: Any, kcuda: Any) -> None:
    x, bias = _random((m, n), dtype, 1), _random((n,), dtype, 2)
    out = _poisoned((m, n), dtype)
    assert kernels.bias_relu(x, bias, out=out) is out
    _assert_matches(out, reference.bias_relu(x, bias))
    assert ((out >= 0).all() and (out == 0).any()) or m * n == 1


@needs_kernels
def test_bias_relu_loops_over_a_capped_grid_and_keeps_nan(
    kcuda: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_limits(monkeypatch, kcuda, max_grid_x=1, max_grid_y=2)
    x, bias = _random((37, 45), np.float32, 1), _random((45,), np.float32, 2)
    x[3, 4] = np.nan
    result = kernels.bias_relu(x, bias)
    assert np.isnan(result[3, 4])
    result[3, 4] = 0.0
    expected = reference.bias_relu(x, bias)
    expected[3, 4] = 0.0
    _assert_matches(result, expected)


@needs_kernels
def test_non_contiguous_host_inputs_are_copied_and_give_the_right_result(kcuda: Any) -> None:
    wide = _random((9, 14), np.float32)
    a = wide[:, ::2]  # a (9, 7) view with a step
    b = _random((9, 7), np.float32, 3).T  # a transpose, (7, 9)
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    _assert_matches(kernels.matmul(a, b, tile=4), reference.matmul(a, b))
    column = wide[:, 0]
    _assert_matches(np.array([kernels.reduce_sum(column)]), np.array([column.sum()]))


@needs_kernels
def test_device_arrays_in_give_device_arrays_out(kcuda: Any) -> None:
    a, b = _random((13, 7), np.float32, 1), _random((7, 19), np.float32, 2)
    d_a, d_b = kcuda.cuda.to_device(a), kcuda.cuda.to_device(b)
    d_out = kcuda.cuda.to_device(_poisoned((13, 19), np.float32))
    assert kernels.matmul(d_a, d_b, tile=8, out=d_out) is d_out
    _assert_matches(d_out.copy_to_host(), a @ b)
    result = kernels.matmul(d_a, b, tile=8)  # one on the device: the result stays there
    assert not isinstance(result, np.ndarray)
    _assert_matches(result.copy_to_host(), a @ b)
    strided = kcuda.cuda.to_device(_random((9, 14), np.float32))[:, ::2]
    _assert_matches(
        kernels.bias_relu(strided, b[:, 0]).copy_to_host(),
        reference.bias_relu(strided.copy_to_host(), b[:, 0]),
    )
    total = kernels.reduce_sum(kcuda.cuda.to_device(a[0]))
    assert total.shape == (1,)
    _assert_matches(total.copy_to_host(), np.array([reference.reduce_sum(a[0])]))


@needs_kernels
def test_tensorflow_tensors_are_accepted(kcuda: Any) -> None:
    tf = pytest.importorskip("tensorflow")
    with tf.device("/CPU:0"):
        x = tf.constant(_random((13, 7), np.float32))
        bias = tf.constant(_random((7,), np.float32, 2))
    result = kernels.bias_relu(x, bias)
    assert isinstance(result, np.ndarray)
    _assert_matches(result, reference.bias_relu(x.numpy(), bias.numpy()))
    with pytest.raises(UsageError, match="different dtypes"):
        kernels.bias_relu(x, tf.cast(bias, tf.float64))


# --- the benchmark, without a GPU ---------------------------------------------------------------


@needs_kernels
def test_the_benchmark_refuses_to_time_the_simulator(backend_in_use: str) -> None:
    from tfaccel.kernels import bench

    if backend_in_use != "simulator":
        pytest.skip("a GPU is present: tests/kernels/test_kernels_gpu.py runs the benchmark")
    with pytest.raises(kernels.KernelBackendError, match="needs an NVIDIA GPU") as err:
        bench.run(sizes=(64,), tiles=(8,))
    assert "simulator" in str(err.value.received)


@needs_kernels
def test_the_benchmark_script_skips_with_the_reason_without_a_gpu() -> None:
    if nvml.collect().gpus:
        pytest.skip("a GPU is present: the script would run the benchmark")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_kernels.py"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "needs an NVIDIA GPU" in json.loads(done.stdout)["skipped"]
    assert done.stderr.startswith("skipped: ")


# Compiling every kernel for real GPUs (PTX by NVVM, cubins by ptxas, for sm_70 to sm_120, with
# their registers, shared memory, spills and occupancy) is tests/kernels/test_kernels_compile.py's job:
# it needs numba without the simulator this module turns on, so it runs in subprocesses.
