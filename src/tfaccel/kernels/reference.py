"""NumPy references of the kernels, with the same signatures and the same input checks.

They define what each kernel must compute: the tests compare every CUDA kernel with its
reference, and ``fallback="numpy"`` runs them where there is no GPU.

Example:
    >>> import numpy as np
    >>> from tfaccel.kernels import reference
    >>> reference.bias_relu(np.array([[-1.0, 2.0]]), np.array([0.5, 0.5]))
    array([[0. , 2.5]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tfaccel.kernels import _checks

__all__ = ["bias_relu", "matmul", "reduce_sum", "vector_add"]


def _deliver(result: npt.NDArray[Any], out: Any, op: str) -> Any:
    if out is None:
        return result
    _checks.check_out(out, result.shape, result.dtype, op)
    if isinstance(out, np.ndarray):
        out[...] = result
    else:
        out.copy_to_device(result)
    return out


def vector_add(a: Any, b: Any, *, out: Any = None) -> Any:
    """``a + b`` for two vectors of one length and dtype.

    Args:
        a: 1-D array (float32, float64 or int32).
        b: 1-D array of the same length and dtype.
        out: optional array to write the result into (returned).

    Returns:
        A new NumPy array, or ``out``.

    Raises:
        UsageError: wrong ndim, dtype, length, or an empty input.
    """
    first, second = _checks.vector_add_operands(a, b)
    result = np.add(_checks.to_host(first), _checks.to_host(second), dtype=first.dtype)
    return _deliver(result, out, "vector_add")


def matmul(a: Any, b: Any, tile: int = 16, *, per_thread: int = 1, out: Any = None) -> Any:
    """``a @ b`` for an (m, k) and a (k, n) matrix of one float dtype.

    Args:
        a: (m, k) float32 or float64 matrix.
        b: (k, n) matrix of the same dtype.
        tile: checked like the kernel's tile size, otherwise unused.
        per_thread: checked like the kernel's, otherwise unused.
        out: optional (m, n) array to write the result into (returned).

    Returns:
        A new NumPy (m, n) array, or ``out``.

    Raises:
        UsageError: wrong ndim, dtype, inner dimensions, tile, per_thread, or an empty input.
    """
    _checks.check_tile(tile)
    _checks.check_per_thread(per_thread)
    first, second = _checks.matmul_operands(a, b)
    result = np.matmul(_checks.to_host(first), _checks.to_host(second))
    return _deliver(result.astype(first.dtype, copy=False), out, "matmul")


def reduce_sum(x: Any, *, out: Any = None) -> Any:
    """The sum of a vector's elements, in its own dtype (int32 wraps around).

    Args:
        x: 1-D array (float32, float64 or int32).
        out: optional array of shape (1,) to write the sum into.

    Returns:
        The sum as a NumPy scalar of ``x``'s dtype (also written to ``out`` when given).

    Raises:
        UsageError: wrong ndim, dtype, or an empty input.
    """
    operand = _checks.reduce_sum_operand(x)
    total = np.sum(_checks.to_host(operand), dtype=operand.dtype)
    _deliver(np.array([total], dtype=operand.dtype), out, "reduce_sum")
    return operand.dtype.type(total)


def bias_relu(x: Any, bias: Any, *, out: Any = None) -> Any:
    """``max(0, x + bias)``, with ``bias`` added to each row of ``x``; NaN stays NaN.

    Args:
        x: (m, n) float32 or float64 array.
        bias: (n,) array of the same dtype.
        out: optional (m, n) array to write the result into (returned).

    Returns:
        A new NumPy (m, n) array, or ``out``.

    Raises:
        UsageError: wrong ndim, dtype, bias length, or an empty input.
    """
    first, second = _checks.bias_relu_operands(x, bias)
    summed = _checks.to_host(first) + _checks.to_host(second)
    result = np.maximum(summed, first.dtype.type(0)).astype(first.dtype, copy=False)
    return _deliver(result, out, "bias_relu")
