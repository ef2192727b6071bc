"""Custom CUDA kernels written in Python with numba-cuda: correct everywhere, fast on a GPU.

One API, two backends with the same function names (:mod:`~tfaccel.kernels.cuda`, the
numba-cuda kernels, and :mod:`~tfaccel.kernels.reference`, their NumPy references):

- ``vector_add(a, b)``: ``a + b`` for two vectors.
- ``matmul(a, b, tile=16, per_thread=1)``: ``a @ b`` with a tiled shared-memory kernel,
  each thread computing ``per_thread`` x ``per_thread`` outputs.
- ``reduce_sum(x)``: the sum of a vector, by shared-memory tree reductions.
- ``bias_relu(x, bias)``: ``max(0, x + bias)`` fused in one pass.

Inputs are NumPy arrays, eager tf.Tensors or CUDA device arrays; results are NumPy arrays,
or numba device arrays when an input was on the GPU (a device array, or a GPU tf.Tensor
taken through DLPack without a host round trip). Every function accepts ``out=`` (an array
to write into) and ``fallback=``: ``None`` (default) raises :class:`KernelBackendError`
where no kernel can run, ``"numpy"`` computes with the reference there instead.

What each kernel asks of a GPU (registers, shared memory, spills, occupancy), read from its
compiled code for several targets without a GPU: :mod:`~tfaccel.kernels.resources`
(``python benchmarks/bench_kernels.py --resources``); it raises
:class:`KernelCompilerError` where the compiler is missing.

Importing this package is cheap: numba is imported on the first kernel call. Without a GPU,
run the kernels on numba-cuda's simulator by setting ``NUMBA_ENABLE_CUDASIM=1`` in the
environment before numba is imported; it warns once that it is for correctness, not speed.

Example:
    >>> import numpy as np
    >>> from tfaccel import kernels
    >>> a = np.random.rand(33, 17).astype(np.float32)
    >>> b = np.random.rand(17, 9).astype(np.float32)
    >>> c = kernels.matmul(a, b, tile=8)     # on the GPU, or the simulator
    >>> np.allclose(c, a @ b, rtol=1e-5)
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from tfaccel.core.errors import UsageError
from tfaccel.kernels import _checks, reference
from tfaccel.kernels._errors import (
    KernelBackendError,
    KernelCompilerError,
    SimulatorWarning,
    missing_numba,
)

if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "Backend",
    "Fallback",
    "KernelBackendError",
    "KernelCompilerError",
    "SimulatorWarning",
    "available",
    "backend",
    "bias_relu",
    "matmul",
    "reduce_sum",
    "unavailable_reason",
    "vector_add",
]

Backend = Literal["cuda", "simulator", "none"]
Fallback = Literal["numpy"] | None


def _cuda_module() -> ModuleType:
    """Import the numba-cuda backend, or raise KernelBackendError naming the install."""
    try:
        from tfaccel.kernels import cuda  # local: imports numba, an optional heavy package
    except ImportError as exc:
        raise missing_numba(exc) from exc
    return cuda


def backend() -> Backend:
    """Where the kernels run: ``"cuda"`` (a GPU), ``"simulator"`` or ``"none"``.

    Imports numba (and, for a GPU, loads the CUDA driver) on the first call.
    ``"none"`` also when numba-cuda is not installed; :func:`unavailable_reason` says why.
    """
    try:
        cuda = _cuda_module()
    except KernelBackendError:
        return "none"
    name: Backend = cuda.backend_name()
    return name


def available() -> bool:
    """True when a kernel call can run here, on a GPU or on the simulator."""
    return backend() != "none"


def unavailable_reason() -> str | None:
    """Why no kernel can run here (numba missing, no driver, no GPU...), or None."""
    try:
        cuda = _cuda_module()
    except KernelBackendError as exc:
        return exc.received
    reason: str | None = cuda.unavailable_reason()
    return reason


def _implementation(fallback: Fallback) -> ModuleType:
    if fallback not in (None, "numpy"):
        raise UsageError(
            'fallback must be None or "numpy"',
            expected='None (raise where no kernel can run) or "numpy" (use the reference)',
            received=f"fallback={fallback!r}",
            fix='pass fallback="numpy" or leave it out',
        )
    if fallback == "numpy" and not available():
        return reference
    return _cuda_module()


def vector_add(a: Any, b: Any, *, out: Any = None, fallback: Fallback = None) -> Any:
    """``a + b`` for two vectors of one length and dtype (float32, float64 or int32).

    Args:
        a: 1-D array: NumPy, eager tf.Tensor or CUDA device array.
        b: 1-D array of the same length and dtype.
        out: optional array to write the result into; it is returned.
        fallback: ``"numpy"`` to use the NumPy reference where no kernel can run.

    Returns:
        A NumPy array; a numba device array when an input was on the GPU; or ``out``.

    Raises:
        UsageError: wrong ndim, dtype, length, or an empty input.
        KernelBackendError: numba-cuda missing, or no GPU and no simulator.

    Example:
        >>> kernels.vector_add(np.arange(3.0), np.ones(3))
        array([1., 2., 3.])
    """
    _checks.vector_add_operands(a, b)  # bad input is reported first, on any machine
    result = _implementation(fallback).vector_add(a, b, out=out)
    return result


def matmul(
    a: Any,
    b: Any,
    tile: int = 16,
    *,
    per_thread: int = 1,
    out: Any = None,
    fallback: Fallback = None,
) -> Any:
    """``a @ b`` with a tiled shared-memory kernel; any shapes, tile a parameter.

    Args:
        a: (m, k) float32 or float64 matrix.
        b: (k, n) matrix of the same dtype.
        tile: side of the square tile, and of the (tile, tile) thread block:
            tile*tile must not exceed the device's threads per block (so tile <= 32).
        per_thread: outputs each thread computes along each side, kept in registers: 1
            (the textbook kernel), 2, 4 or 8. ``tile=16, per_thread=8`` was the fastest
            measured on an H200, 2.7x the one-output kernel (docs/kernels.md).
        out: optional (m, n) array to write the result into; it is returned.
        fallback: ``"numpy"`` to use the NumPy reference where no kernel can run.

    Returns:
        A NumPy (m, n) array; a numba device array when an input was on the GPU; or ``out``.

    Raises:
        UsageError: wrong ndim, dtype, inner dimensions, tile, per_thread, an empty input,
            or a block the device cannot run.
        KernelBackendError: numba-cuda missing, or no GPU and no simulator.
    """
    _checks.check_tile(tile)
    _checks.check_per_thread(per_thread)
    _checks.matmul_operands(a, b)
    result = _implementation(fallback).matmul(a, b, tile, per_thread=per_thread, out=out)
    return result


def reduce_sum(x: Any, *, out: Any = None, fallback: Fallback = None) -> Any:
    """The sum of a vector's elements in its own dtype (int32 wraps around like NumPy's).

    Args:
        x: 1-D array (float32, float64 or int32); ravel other shapes first.
        out: optional (1,) array to write the sum into.
        fallback: ``"numpy"`` to use the NumPy reference where no kernel can run.

    Returns:
        A NumPy scalar of ``x``'s dtype; a (1,) numba device array when ``x`` was on the
        GPU or ``out`` is a device array.

    Raises:
        UsageError: wrong ndim, dtype, or an empty input.
        KernelBackendError: numba-cuda missing, or no GPU and no simulator.
    """
    _checks.reduce_sum_operand(x)
    result = _implementation(fallback).reduce_sum(x, out=out)
    return result


def bias_relu(x: Any, bias: Any, *, out: Any = None, fallback: Fallback = None) -> Any:
    """``max(0, x + bias)`` in one pass, ``bias`` added along the last axis; NaN stays NaN.

    Args:
        x: (m, n) float32 or float64 array.
        bias: (n,) array of the same dtype.
        out: optional (m, n) array to write the result into; it is returned.
        fallback: ``"numpy"`` to use the NumPy reference where no kernel can run.

    Returns:
        A NumPy (m, n) array; a numba device array when an input was on the GPU; or ``out``.

    Raises:
        UsageError: wrong ndim, dtype, bias length, or an empty input.
        KernelBackendError: numba-cuda missing, or no GPU and no simulator.
    """
    _checks.bias_relu_operands(x, bias)
    result = _implementation(fallback).bias_relu(x, bias, out=out)
    return result
