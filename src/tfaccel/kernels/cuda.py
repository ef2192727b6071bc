"""The CUDA kernels, written in Python with numba-cuda, and the host code that launches them.

Importing this module imports numba; ``tfaccel.kernels`` imports it only when a kernel is
called. Each public function has the signature of its NumPy reference in
:mod:`tfaccel.kernels.reference`.

Inputs may be NumPy arrays, eager tf.Tensors or CUDA device arrays (numba's, or any
object with ``__cuda_array_interface__``). Host data are copied to the device, run, and
copied back into a NumPy result; device arrays, and tf.Tensors that live on a GPU (taken
through DLPack, without a host round trip), give a numba device array.

Tile and block sizes size the shared-memory arrays, which must be known when a kernel is
compiled: the factories below build one kernel per (size, dtype) and keep it.
"""

from __future__ import annotations

import importlib
import math
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any, Literal

import numba
import numpy as np
from numba import cuda as _numba_cuda

from tfaccel.core.errors import UsageError
from tfaccel.kernels import _checks, _launch
from tfaccel.kernels._compat import restore_numpy_aliases
from tfaccel.kernels._errors import (
    KernelBackendError,
    SimulatorWarning,
    incompatible_numba,
    no_gpu,
)
from tfaccel.kernels._launch import SIMULATOR_LIMITS, DeviceLimits

try:
    from numba.cuda.core import config as _numba_config
except ImportError:  # numba-cuda before its own config module
    from numba.core import config as _numba_config

# numba-cuda reads NumPy's names when it first compiles a kernel, not when it is imported.
restore_numpy_aliases()

__all__ = [
    "backend_name",
    "bias_relu",
    "device_limits",
    "is_simulator",
    "matmul",
    "reduce_sum",
    "unavailable_reason",
    "vector_add",
]

# numba-cuda annotates its intrinsics (cuda.grid, cuda.threadIdx...) as the host-side
# objects they are in Python, which is not how kernel code uses them: type-check as Any.
cuda: Any = _numba_cuda

KDLCUDA = 2  # DLPack's device type for CUDA memory

# Tests set this to fill reduce_sum's scratch buffer with NaN (or a sentinel for int32),
# so a block that forgets to write its partial sum makes the result wrong.
_POISON_SCRATCH = False

_kernels: dict[tuple[str, int, str], Any] = {}
_kernels_lock = threading.Lock()
_limits: dict[int, DeviceLimits] = {}
_warned_simulator = False


# --------------------------------------------------------------------------------------
# The kernels. A kernel is a function run by every thread of the launch; a thread finds
# its element from its block's index in the grid (cuda.blockIdx), its own index in the
# block (cuda.threadIdx) and the block's size (cuda.blockDim). cuda.grid(1) is
# blockIdx.x * blockDim.x + threadIdx.x, cuda.gridsize(1) the number of threads launched.


@cuda.jit
def vector_add_kernel(a: Any, b: Any, out: Any) -> None:
    """``out[i] = a[i] + b[i]``: each thread takes every ``gridsize``-th element from its own."""
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a[i] + b[i]


def _cached(key: tuple[str, int, str], build: Callable[[], Any]) -> Any:
    with _kernels_lock:
        kernel = _kernels.get(key)
        if kernel is None:
            kernel = _kernels[key] = build()
        return kernel


def matmul_kernel(tile: int, dtype: np.dtype[Any], per_thread: int = 1) -> Any:
    """The tiled shared-memory matmul kernel for one tile size, dtype and number of outputs
    per thread (built once); per_thread > 1 is :func:`_register_tiled`'s kernel.

    Each (tile, tile) block computes one (tile, tile) tile of ``c = a @ b``. It walks along
    k one tile at a time: its threads copy a tile of ``a`` and a tile of ``b`` into shared
    memory (one element each), wait for each other, and each thread adds ``tile`` products
    from shared memory. Every element of ``a`` and ``b`` is read from global memory
    ``n / tile`` and ``m / tile`` times instead of ``n`` and ``m`` times.
    """

    def build() -> Any:
        element = numba.from_dtype(dtype)
        zero = dtype.type(0)

        def matmul_tiled(a: Any, b: Any, c: Any) -> None:
            # One shared array per line: the simulator tells them apart by source line.
            tile_a = cuda.shared.array(shape=(tile, tile), dtype=element)
            tile_b = cuda.shared.array(shape=(tile, tile), dtype=element)
            tx = cuda.threadIdx.x
            ty = cuda.threadIdx.y
            row = cuda.blockIdx.y * tile + ty
            col = cuda.blockIdx.x * tile + tx
            m = a.shape[0]
            k = a.shape[1]
            n = b.shape[1]
            acc = zero
            for start in range(0, k, tile):
                # Outside the matrices a thread loads 0, so a partial tile adds nothing.
                if row < m and start + tx < k:
                    tile_a[ty, tx] = a[row, start + tx]
                else:
                    tile_a[ty, tx] = zero
                if start + ty < k and col < n:
                    tile_b[ty, tx] = b[start + ty, col]
                else:
                    tile_b[ty, tx] = zero
                cuda.syncthreads()  # both tiles are complete before anyone reads them
                for i in range(tile):
                    acc += tile_a[ty, i] * tile_b[i, tx]
                cuda.syncthreads()  # everyone has read them before they are overwritten
            if row < m and col < n:
                c[row, col] = acc

        return cuda.jit(matmul_tiled)

    if per_thread > 1:
        return _cached(
            (f"matmul-{per_thread}", tile, dtype.str), _register_tiled(tile, dtype, per_thread)
        )
    return _cached(("matmul", tile, dtype.str), build)


def _register_tiled(tile: int, dtype: np.dtype[Any], per: int) -> Callable[[], Any]:
    """The builder of the register-tiled matmul: each thread of a (tile, tile) block keeps a
    (per, per) block of outputs in registers.

    The block computes a (side, side) tile of ``c``, side = tile * per. Along k it copies a
    (side, tile) slice of ``a`` and a (tile, side) slice of ``b`` into shared memory (``per``
    elements per thread each), then for each of the tile values of k every thread reads
    ``per`` values of ``a`` and ``per`` of ``b`` from shared memory and adds ``per * per``
    products: ``2 * per`` shared reads for ``per * per`` multiply-adds, where the one-output
    kernel does 2 for 1. A thread's outputs are ``tile`` rows and columns apart, so the
    threads of a warp still read and write neighbouring addresses.
    """

    def build() -> Any:
        element = numba.from_dtype(dtype)
        zero = dtype.type(0)
        side = tile * per

        def matmul_register_tiled(a: Any, b: Any, c: Any) -> None:
            # One shared array per line: the simulator tells them apart by source line.
            slice_a = cuda.shared.array(shape=(side, tile), dtype=element)
            slice_b = cuda.shared.array(shape=(tile, side), dtype=element)
            acc = cuda.local.array(shape=(per, per), dtype=element)
            column_a = cuda.local.array(shape=per, dtype=element)
            row_b = cuda.local.array(shape=per, dtype=element)
            tx = cuda.threadIdx.x
            ty = cuda.threadIdx.y
            row0 = cuda.blockIdx.y * side
            col0 = cuda.blockIdx.x * side
            m = a.shape[0]
            k = a.shape[1]
            n = b.shape[1]
            for i in range(per):
                for j in range(per):
                    acc[i, j] = zero
            for start in range(0, k, tile):
                # Outside the matrices a thread loads 0, so a partial tile adds nothing.
                for r in range(per):
                    row = row0 + ty + r * tile
                    if row < m and start + tx < k:
                        slice_a[ty + r * tile, tx] = a[row, start + tx]
                    else:
                        slice_a[ty + r * tile, tx] = zero
                for r in range(per):
                    col = col0 + tx + r * tile
                    if start + ty < k and col < n:
                        slice_b[ty, tx + r * tile] = b[start + ty, col]
                    else:
                        slice_b[ty, tx + r * tile] = zero
                cuda.syncthreads()  # both slices are complete before anyone reads them
                for kk in range(tile):
                    for i in range(per):
                        column_a[i] = slice_a[ty + i * tile, kk]
                    for j in range(per):
                        row_b[j] = slice_b[kk, tx + j * tile]
                    for i in range(per):
                        for j in range(per):
                            acc[i, j] += column_a[i] * row_b[j]
                cuda.syncthreads()  # everyone has read them before they are overwritten
            for i in range(per):
                row = row0 + ty + i * tile
                for j in range(per):
                    col = col0 + tx + j * tile
                    if row < m and col < n:
                        c[row, col] = acc[i, j]

        return cuda.jit(matmul_register_tiled)

    return build


def reduce_kernel(threads: int, dtype: np.dtype[Any]) -> Any:
    """The block-sum kernel for one (power-of-two) block size and dtype (built once).

    Each thread sums a strided share of ``x`` into a register, writes it to shared memory,
    then the block halves the number of live values until one is left (a tree: log2(threads)
    steps, with a barrier after each), and thread 0 writes the block's sum to
    ``partial[blockIdx.x]``.
    """

    def build() -> Any:
        element = numba.from_dtype(dtype)
        zero = dtype.type(0)

        def reduce_block_sums(x: Any, partial: Any) -> None:
            sums = cuda.shared.array(shape=threads, dtype=element)
            tid = cuda.threadIdx.x
            acc = zero
            for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
                acc += x[i]
            sums[tid] = acc
            cuda.syncthreads()
            step = threads // 2
            while step > 0:
                if tid < step:
                    sums[tid] += sums[tid + step]
                cuda.syncthreads()  # outside the if: every thread of the block must reach it
                step //= 2
            if tid == 0:
                partial[cuda.blockIdx.x] = sums[0]

        return cuda.jit(reduce_block_sums)

    return _cached(("reduce", threads, dtype.str), build)


def bias_relu_kernel(dtype: np.dtype[Any]) -> Any:
    """The fused ``max(0, x + bias)`` kernel for one dtype (built once).

    Fused: one read of ``x`` and one write of ``out``, where ``x + bias`` then ``relu`` as
    two kernels would write and read an intermediate array. A 2-D grid: x over columns,
    y over rows; each thread loops when the grid was capped at the device's limits.
    """

    def build() -> Any:
        zero = dtype.type(0)

        def bias_relu_fused(x: Any, bias: Any, out: Any) -> None:
            col0, row0 = cuda.grid(2)
            cols, rows = cuda.gridsize(2)
            for r in range(row0, x.shape[0], rows):
                for c in range(col0, x.shape[1], cols):
                    v = x[r, c] + bias[c]
                    out[r, c] = zero if v < zero else v  # NaN is not < 0: it stays NaN

        return cuda.jit(bias_relu_fused)

    return _cached(("bias_relu", 0, dtype.str), build)


# --------------------------------------------------------------------------------------
# The runtime: simulator or GPU, limits, one-time warning.


def is_simulator() -> bool:
    """True when numba-cuda runs kernels on its CPU simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    return bool(_numba_config.ENABLE_CUDASIM)


def backend_name() -> Literal["cuda", "simulator", "none"]:
    """``"simulator"``, ``"cuda"`` (a usable GPU) or ``"none"``."""
    if is_simulator():
        return "simulator"
    return "cuda" if cuda.is_available() else "none"


def unavailable_reason() -> str | None:
    """Why no kernel can run here, or None when one can."""
    if backend_name() != "none":
        return None
    error = cuda.cuda_error()
    if error is not None:
        return "numba-cuda: " + " ".join(str(error).split()).rstrip(".")
    return (
        "numba-cuda found the CUDA driver but not NVVM, the compiler it needs "
        "(pip install 'numba-cuda[cu12]', or [cu13] for a CUDA 13 driver)"
    )


def _shared_arrays_one_per_block() -> None:
    """Make the simulator's ``cuda.shared.array`` allocate one array per block, as a GPU does.

    numba-cuda's simulator (0.30) looks an allocation up and, when missing, creates it, with no
    lock between the two, while each thread of a block runs in its own Python thread. Two
    threads can then each create one, and the thread whose array is replaced in the table
    works on a private copy: the others read ``np.empty`` garbage where it wrote. Seen as one
    wrong column of a tiled matmul, about one full test run in four on a busy 2-core machine.
    The same lookup, keyed the same way (the caller's file and line), under one lock.
    """
    from numba.cuda.simulator import kernelapi

    shared = kernelapi.FakeCUDAShared
    if getattr(shared.array, "tfaccel_locked", False):
        return
    original: Any = shared.array
    lock = threading.Lock()

    def array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        if alignment is not None or shape == 0:  # refused, or the one dynamic buffer
            return original(self, shape, dtype, alignment)
        if isinstance(dtype, kernelapi.types.Type):  # the simulator's own conversion
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with lock:
            found = self._allocations.get(caller)
            if found is None:
                found = self._allocations[caller] = np.empty(shape, dtype)
        return found

    array.tfaccel_locked = True  # type: ignore[attr-defined]
    shared.array = array  # type: ignore[method-assign]


def _ready() -> None:
    global _warned_simulator
    if is_simulator():
        _shared_arrays_one_per_block()
        if not _warned_simulator:
            _warned_simulator = True
            warnings.warn(
                "tfaccel.kernels runs on numba-cuda's CUDA simulator "
                "(NUMBA_ENABLE_CUDASIM=1): results are checked, speed is Python's, "
                "not a GPU's",
                SimulatorWarning,
                stacklevel=4,  # the caller of tfaccel.kernels.<kernel>
            )
        return
    reason = unavailable_reason()
    if reason is not None:
        raise no_gpu(reason)


def device_limits() -> DeviceLimits:
    """The current device's launch limits (the simulator's are those of a real GPU)."""
    if is_simulator():
        return SIMULATOR_LIMITS
    device = cuda.get_current_device()
    limits = _limits.get(device.id)
    if limits is None:
        limits = _limits[device.id] = DeviceLimits(
            max_threads_per_block=int(device.MAX_THREADS_PER_BLOCK),
            max_grid_x=int(device.MAX_GRID_DIM_X),
            max_grid_y=int(device.MAX_GRID_DIM_Y),
            max_shared_bytes_per_block=int(device.MAX_SHARED_MEMORY_PER_BLOCK),
            resident_threads=_resident_threads(device),
        )
    return limits


def _resident_threads(device: Any) -> int | None:
    """Multiprocessors x threads each holds; None where the driver's binding names neither.

    numba-cuda reads ``CU_DEVICE_ATTRIBUTE_<name>``: CUDA's bindings spell the second
    ``MAX_THREADS_PER_MULTIPROCESSOR``, numba's older ctypes binding
    ``MAX_THREADS_PER_MULTI_PROCESSOR``.
    """
    for name in ("MAX_THREADS_PER_MULTIPROCESSOR", "MAX_THREADS_PER_MULTI_PROCESSOR"):
        try:
            return int(device.MULTIPROCESSOR_COUNT) * int(getattr(device, name))
        except AttributeError:
            continue
    return None


# --------------------------------------------------------------------------------------
# Moving operands: host arrays are copied, device arrays and GPU tensors are not.


class _TensorFlowExporter:
    """A GPU tf.Tensor as a DLPack producer a consumer may ask for a stream.

    ``tf.Tensor.__dlpack__`` refuses any consumer stream; ``tf.experimental.dlpack.to_dlpack``
    takes none and returns once the tensor's data are ready, so the stream is dropped.
    """

    def __init__(self, tensor: Any) -> None:
        self._tensor = tensor

    def __dlpack_device__(self) -> tuple[int, int]:
        device_type, device_id = self._tensor.__dlpack_device__()
        return int(device_type), int(device_id)

    def __dlpack__(self, **_consumer_options: Any) -> Any:
        import tensorflow as tf

        return tf.experimental.dlpack.to_dlpack(self._tensor)


def _on_gpu(tensor: Any) -> bool:
    dlpack_device = getattr(tensor, "__dlpack_device__", None)
    return dlpack_device is not None and int(dlpack_device()[0]) == KDLCUDA


def _from_tensorflow_gpu(tensor: Any, name: str) -> Any:
    """A numba device array over a GPU tf.Tensor's memory, without a copy (DLPack)."""
    exporter = _TensorFlowExporter(tensor)
    from_dlpack = getattr(cuda, "from_dlpack", None)
    if from_dlpack is not None:
        return from_dlpack(exporter)
    utils = importlib.import_module("cuda.core.utils")
    view = utils.StridedMemoryView.from_dlpack(exporter, stream_ptr=-1)
    current = cuda.get_current_device().id
    if view.device_id != current:
        raise UsageError(
            f"{name} is on GPU {view.device_id}, and the kernels run on GPU {current}",
            expected="inputs on the current numba device",
            received=f"{name}.device={tensor.device}",
            fix=f"create it under tf.device('/GPU:{current}'), or call "
            f"numba.cuda.select_device({view.device_id}) first",
        )
    itemsize = view.dtype.itemsize
    strides = None if view.strides is None else tuple(s * itemsize for s in view.strides)
    interface = {
        "shape": tuple(view.shape),
        "strides": strides,
        "typestr": view.dtype.str,
        "data": (view.ptr, bool(view.readonly)),
        "version": 3,
    }
    # The device array keeps the view alive, and the view keeps TensorFlow's buffer.
    return cuda.from_cuda_array_interface(interface, owner=view, sync=False)


class _Staged:
    """The operands of one call, on the device; remembers whether any came from there."""

    def __init__(self, *operands: _checks.Operand) -> None:
        self.on_device = False
        self.shared_with_tensorflow = False
        self.arrays: list[Any] = [self._to_device(op) for op in operands]

    def _to_device(self, operand: _checks.Operand) -> Any:
        value = operand.value
        if operand.kind == "device":
            self.on_device = True
            return value if hasattr(value, "__cuda_ndarray__") else cuda.as_cuda_array(value)
        if operand.kind == "tensorflow" and not is_simulator() and _on_gpu(value):
            self.on_device = self.shared_with_tensorflow = True
            return _from_tensorflow_gpu(value, operand.name)
        return cuda.to_device(_checks.to_host(operand))

    def output(self, out: Any, shape: tuple[int, ...], dtype: np.dtype[Any], op: str) -> Any:
        """The device buffer the kernel writes: ``out`` itself, a copy of it, or a new one.

        A host ``out`` is copied in whole, so whatever it held (the tests' NaN) is what the
        kernel finds in every element it does not write.
        """
        if out is None:
            return cuda.device_array(shape, dtype=dtype)
        _checks.check_out(out, shape, dtype, op)
        return cuda.to_device(out) if isinstance(out, np.ndarray) else out

    def deliver(self, result: Any, out: Any) -> Any:
        """``out`` filled, or the device result (device inputs), or a new NumPy array."""
        if self.shared_with_tensorflow:
            # TensorFlow may free or reuse its buffers once the call returns.
            cuda.synchronize()
        if isinstance(out, np.ndarray):
            result.copy_to_host(out)
            return out
        if out is not None or self.on_device:
            return result
        return result.copy_to_host()


def _library_errors() -> tuple[type[BaseException], ...]:
    """The errors numba-cuda raises when a CUDA library it needs cannot be loaded."""
    if is_simulator():
        return ()
    error_module = importlib.import_module("numba.cuda.cudadrv.error")
    found: list[type[BaseException]] = [
        error_module.CudaSupportError,
        error_module.NvvmSupportError,
        error_module.NvrtcSupportError,
    ]
    try:
        found.append(importlib.import_module("cuda.pathfinder").DynamicLibNotFoundError)
    except (ImportError, AttributeError):
        pass  # an older cuda-python without the path finder raises the errors above
    return tuple(found)


def _raised_inside_numba(exc: BaseException) -> bool:
    """Whether ``exc`` came out of numba or numba-cuda's own code (one frame of its traceback
    lies in their packages; NumPy's module ``__getattr__`` may be the innermost), not out of
    a kernel's Python (the simulator runs it: its innermost frame is tfaccel's)."""
    files = []
    tb = exc.__traceback__
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename.replace("\\", "/"))
        tb = tb.tb_next
    if not files or "/tfaccel/" in files[-1]:
        return False
    return any("/numba/" in name or "/numba_cuda/" in name for name in files[1:])


def _run(
    kernel: Any,
    launch: _launch.Launch,
    *args: Any,
    op: str = "the kernel",
    given: str = "",
    smaller: str = "launch fewer threads per block",
) -> None:
    """``kernel[grid, block](*args)``, turning a missing CUDA library, a numba-cuda that
    breaks on this NumPy while it compiles, or a block too big for the GPU's registers into
    a clear error (``op``, its ``given`` parameters and the ``smaller`` way to launch it
    name the call in that last one)."""
    try:
        kernel[launch.grid, launch.block](*args)
    except _library_errors() as exc:
        raise KernelBackendError(
            "numba-cuda cannot load a CUDA library it needs to compile or launch the kernel",
            expected="the driver, NVVM and NVRTC libraries of one CUDA major version",
            received=f"{type(exc).__name__}: {str(exc).strip()}",
            fix="pip install 'numba-cuda[cu12]' (CUDA 12, as TensorFlow's GPU wheels use), "
            "or 'numba-cuda[cu13]' with a CUDA 13 driver",
        ) from exc
    except (AttributeError, ImportError) as exc:  # CudaSupportError is one: handled above
        if not _raised_inside_numba(exc):
            raise
        raise incompatible_numba(exc) from exc
    except Exception as exc:
        if not _out_of_resources(exc):
            raise
        raise _too_big_a_block(launch, exc, op, given or f"block={launch.block}", smaller) from exc


def _out_of_resources(exc: BaseException) -> bool:
    """A launch the multiprocessor cannot hold: more registers than a block may have
    (``CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES``, 701), however numba-cuda's binding words it."""
    text = f"{type(exc).__name__}: {exc}"
    return "OUT_OF_RESOURCES" in text or "[701]" in text


def _too_big_a_block(
    launch: _launch.Launch, exc: BaseException, op: str, given: str, fix: str
) -> UsageError:
    """The error for a launch the GPU refused for want of registers: the operation, its
    parameters, the block and the driver's words, and how to make the block smaller."""
    return UsageError(
        f"{op}: a block of {math.prod(launch.block)} threads needs more registers than one "
        "block may have on this GPU",
        expected="fewer threads per block, or fewer outputs per thread",
        received=f"{given}, block={launch.block}: {type(exc).__name__}: {str(exc).strip()[:200]}",
        fix=fix,
    )


def _scratch(n: int, dtype: np.dtype[Any]) -> Any:
    if not _POISON_SCRATCH:
        return cuda.device_array(n, dtype=dtype)
    poison = np.nan if dtype.kind == "f" else np.iinfo(dtype).min
    return cuda.to_device(np.full(n, poison, dtype=dtype))


# --------------------------------------------------------------------------------------
# The host API: check, stage, configure, launch, deliver.


def vector_add(a: Any, b: Any, *, out: Any = None) -> Any:
    """``a + b`` on the GPU (see :func:`tfaccel.kernels.reference.vector_add`).

    Raises:
        UsageError: bad inputs (see the reference).
        KernelBackendError: no GPU and no simulator.
    """
    first, second = _checks.vector_add_operands(a, b)
    _ready()
    launch = _launch.vector_launch(first.shape[0], device_limits())
    staged = _Staged(first, second)
    result = staged.output(out, first.shape, first.dtype, "vector_add")
    _run(vector_add_kernel, launch, *staged.arrays, result)
    return staged.deliver(result, out)


def matmul(a: Any, b: Any, tile: int = 16, *, per_thread: int = 1, out: Any = None) -> Any:
    """``a @ b`` with the tiled shared-memory kernel (see the reference's docstring).

    Args:
        a: (m, k) float32 or float64 matrix.
        b: (k, n) matrix of the same dtype.
        tile: the side of the thread block (tile*tile threads) and of the k-slices.
        per_thread: outputs per thread along each side (1, 2, 4 or 8).
        out: optional (m, n) array to write into.

    Raises:
        UsageError: bad inputs, or a tile the device cannot run.
        KernelBackendError: no GPU and no simulator.
    """
    tile = _checks.check_tile(tile)
    per_thread = _checks.check_per_thread(per_thread)
    first, second = _checks.matmul_operands(a, b)
    _ready()
    m, n = first.shape[0], second.shape[1]
    launch = _launch.matmul_launch(m, n, tile, first.dtype.itemsize, device_limits(), per_thread)
    kernel = matmul_kernel(tile, first.dtype, per_thread)
    staged = _Staged(first, second)
    result = staged.output(out, (m, n), first.dtype, "matmul")
    smaller = (
        f"pass tile=16 (256 threads) or a smaller per_thread (per_thread={per_thread // 2})"
        if per_thread > 1
        else "pass tile=16 (256 threads)"
    )
    _run(
        kernel,
        launch,
        *staged.arrays,
        result,
        op="matmul",
        given=f"tile={tile}, per_thread={per_thread}, dtype={first.dtype}",
        smaller=smaller,
    )
    return staged.deliver(result, out)


def reduce_sum(x: Any, *, out: Any = None) -> Any:
    """The sum of a vector: block tree reductions, then one block sums the block sums.

    Two passes rather than atomics: float atomics add in a different order on each run,
    two passes give the same sum every time.

    Returns:
        A NumPy scalar of ``x``'s dtype; a (1,) device array when ``x`` is on the device.

    Raises:
        UsageError: bad inputs (see the reference).
        KernelBackendError: no GPU and no simulator.
    """
    operand = _checks.reduce_sum_operand(x)
    _ready()
    limits = device_limits()
    first = _launch.reduce_launch(operand.shape[0], limits)
    staged = _Staged(operand)
    result = staged.output(out, (1,), operand.dtype, "reduce_sum")
    (data,) = staged.arrays
    block_sums = reduce_kernel(first.block[0], operand.dtype)
    if first.grid[0] == 1:
        _run(block_sums, first, data, result)
    else:
        partials = _scratch(first.grid[0], operand.dtype)
        _run(block_sums, first, data, partials)
        second = _launch.finish_reduce_launch(first.grid[0], limits)
        _run(reduce_kernel(second.block[0], operand.dtype), second, partials, result)
    delivered = staged.deliver(result, out)
    if isinstance(delivered, np.ndarray):
        return operand.dtype.type(delivered[0])
    return delivered


def bias_relu(x: Any, bias: Any, *, out: Any = None) -> Any:
    """``max(0, x + bias)`` in one pass (see :func:`tfaccel.kernels.reference.bias_relu`).

    Raises:
        UsageError: bad inputs (see the reference).
        KernelBackendError: no GPU and no simulator.
    """
    first, second = _checks.bias_relu_operands(x, bias)
    _ready()
    m, n = first.shape
    launch = _launch.bias_relu_launch(m, n, device_limits())
    staged = _Staged(first, second)
    result = staged.output(out, first.shape, first.dtype, "bias_relu")
    _run(bias_relu_kernel(first.dtype), launch, *staged.arrays, result)
    return staged.deliver(result, out)
