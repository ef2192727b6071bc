"""Input checks shared by every backend, so a bad call fails the same way on each.

Nothing here imports numba or TensorFlow: an operand is recognised by what it offers
(``__cuda_array_interface__``, numba's ``__cuda_ndarray__``, a TensorFlow class), and
its shape and dtype are read without moving any data.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tfaccel.core.checks import is_int
from tfaccel.core.errors import UsageError

__all__ = [
    "FLOAT_DTYPES",
    "SUM_DTYPES",
    "Operand",
    "bias_relu_operands",
    "check_out",
    "check_tile",
    "is_device_array",
    "matmul_operands",
    "read_operand",
    "reduce_sum_operand",
    "to_host",
    "vector_add_operands",
]

OperandKind = Literal["numpy", "tensorflow", "device"]

FLOAT_DTYPES: tuple[np.dtype[Any], ...] = (np.dtype(np.float32), np.dtype(np.float64))
# vector_add and reduce_sum also take int32: integer adds wrap around like NumPy's int32.
SUM_DTYPES: tuple[np.dtype[Any], ...] = (*FLOAT_DTYPES, np.dtype(np.int32))


@dataclass(frozen=True)
class Operand:
    """An argument as the kernels see it: where it lives, its shape and its dtype.

    Attributes:
        name: the parameter name, used in error messages.
        kind: ``"numpy"`` (host memory), ``"tensorflow"`` (an eager tf.Tensor) or
            ``"device"`` (a CUDA device array: numba's, or any object with
            ``__cuda_array_interface__``).
        shape: the shape.
        dtype: the NumPy dtype.
        value: the object itself (a NumPy array when it was converted from a list).
    """

    name: str
    kind: OperandKind
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    value: Any

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _is_tensorflow(value: Any) -> bool:
    return type(value).__module__.startswith("tensorflow")


def is_device_array(value: Any) -> bool:
    """True for a CUDA device array: numba's (real or simulated) or a CAI exporter."""
    return hasattr(value, "__cuda_array_interface__") or hasattr(value, "__cuda_ndarray__")


def read_operand(value: Any, name: str, op: str) -> Operand:
    """Read the shape and dtype of ``value`` without copying it.

    Args:
        value: a NumPy array, an eager tf.Tensor, a CUDA device array, or anything
            ``np.asarray`` accepts.
        name: the parameter name, for messages.
        op: the public function name, for messages.

    Raises:
        UsageError: a symbolic tensor, or an object that is not an array.
    """
    if is_device_array(value):
        return Operand(name, "device", tuple(value.shape), np.dtype(value.dtype), value)
    if _is_tensorflow(value):
        if not hasattr(value, "numpy"):
            raise UsageError(
                f"{op}: {name} is a symbolic tf.Tensor (inside tf.function or a Keras graph)",
                expected="an eager tf.Tensor, a NumPy array or a CUDA device array",
                received=f"{name}={value!r}",
                fix="call the kernel eagerly, or from a graph through tf.py_function",
            )
        shape = tuple(int(d) for d in value.shape)
        return Operand(name, "tensorflow", shape, np.dtype(value.dtype.as_numpy_dtype), value)
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    return Operand(name, "numpy", array.shape, array.dtype, array)


def check_dtype(operand: Operand, allowed: Collection[np.dtype[Any]], op: str) -> None:
    """Raise UsageError unless ``operand.dtype`` is one of ``allowed``."""
    if operand.dtype in allowed:
        return
    names = ", ".join(str(d) for d in allowed)
    raise UsageError(
        f"{op}: {operand.name} has an unsupported dtype",
        expected=f"one of {names}",
        received=f"{operand.name}.dtype={operand.dtype}",
        fix=f"cast it first, e.g. {operand.name}.astype(np.float32) "
        f"or tf.cast({operand.name}, tf.float32)",
    )


def check_ndim(operand: Operand, ndim: int, op: str, what: str) -> None:
    """Raise UsageError unless ``operand`` has ``ndim`` dimensions."""
    if len(operand.shape) == ndim:
        return
    raise UsageError(
        f"{op}: {operand.name} has the wrong number of dimensions",
        expected=f"a {ndim}-D array ({what})",
        received=f"{operand.name}.shape={operand.shape} ({len(operand.shape)}-D)",
        fix=f"reshape it, e.g. {operand.name}.reshape(-1)"
        if ndim == 1
        else f"reshape it to {ndim}-D",
    )


def check_nonempty(operand: Operand, op: str) -> None:
    """Raise UsageError when ``operand`` has no elements (a launch needs at least one)."""
    if operand.size > 0:
        return
    raise UsageError(
        f"{op}: {operand.name} is empty, and a kernel launch needs at least one element",
        expected="an array with at least one element",
        received=f"{operand.name}.shape={operand.shape}",
        fix="skip the call for empty inputs (the result of an empty input is empty, or 0 "
        "for reduce_sum)",
    )


def check_same_dtype(first: Operand, second: Operand, op: str) -> None:
    """Raise UsageError when the two operands' dtypes differ (there is no implicit cast)."""
    if first.dtype == second.dtype:
        return
    raise UsageError(
        f"{op}: {first.name} and {second.name} have different dtypes",
        expected="the same dtype for both (the kernels do not promote types)",
        received=f"{first.name}.dtype={first.dtype}, {second.name}.dtype={second.dtype}",
        fix=f"cast one of them, e.g. {second.name}.astype({first.name}.dtype)",
    )


def check_tile(tile: Any, op: str = "matmul") -> int:
    """Return ``tile`` as an int, or raise UsageError unless it is a positive integer."""
    if not is_int(tile) or tile < 1:
        raise UsageError(
            f"{op}: tile must be a positive integer (the side of the square shared-memory tile)",
            expected="an int such as 8, 16 or 32 (tile*tile threads per block)",
            received=f"tile={tile!r}",
            fix="pass tile=16",
        )
    return int(tile)


PER_THREAD = (1, 2, 4, 8)
"""``matmul``'s outputs per thread along each side (1: the one-output-per-thread kernel)."""


def check_per_thread(per_thread: Any, op: str = "matmul") -> int:
    """Return ``per_thread`` as an int, or raise UsageError unless it is 1, 2, 4 or 8."""
    if not is_int(per_thread) or int(per_thread) not in PER_THREAD:
        raise UsageError(
            f"{op}: per_thread must be 1, 2, 4 or 8 (each thread computes per_thread x "
            "per_thread outputs)",
            expected="one of 1, 2, 4, 8",
            received=f"per_thread={per_thread!r}",
            fix="pass per_thread=8 with tile=16 (the fastest measured), or leave it at 1",
        )
    return int(per_thread)


def check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype[Any], op: str) -> Operand:
    """Check an ``out=`` buffer: a writeable, C-contiguous array of the result's shape and dtype.

    Raises:
        UsageError: wrong type, shape, dtype, or a read-only or non-contiguous host array.
    """
    if not (isinstance(out, np.ndarray) or is_device_array(out)):
        raise UsageError(
            f"{op}: out must be a NumPy array or a CUDA device array",
            expected=f"an array of shape {shape} and dtype {dtype}",
            received=f"out of type {type(out).__name__}",
            fix="leave out=None to get a new array",
        )
    described = read_operand(out, "out", op)
    if described.shape != shape or described.dtype != dtype:
        raise UsageError(
            f"{op}: out does not match the result",
            expected=f"shape {shape} and dtype {dtype}",
            received=f"shape {described.shape} and dtype {described.dtype}",
            fix=f"allocate it as np.empty({shape}, dtype=np.{dtype})",
        )
    if isinstance(out, np.ndarray) and not (out.flags.c_contiguous and out.flags.writeable):
        raise UsageError(
            f"{op}: out must be a writeable, C-contiguous array (results are copied into it whole)",
            expected="out.flags.c_contiguous and out.flags.writeable",
            received=f"c_contiguous={out.flags.c_contiguous}, writeable={out.flags.writeable}",
            fix="pass np.empty_like(out) and copy the result where you need it",
        )
    return described


def to_host(operand: Operand) -> npt.NDArray[Any]:
    """The operand as a C-contiguous NumPy array.

    A non-contiguous array (a slice with a step, a transpose) is copied into a contiguous
    one; the data go to the device anyway, so the copy replaces a copy rather than adding
    one. A device array is copied to the host.
    """
    value = operand.value
    if operand.kind == "tensorflow":
        value = value.numpy()
    elif operand.kind == "device":
        copy_to_host = getattr(value, "copy_to_host", None)
        if copy_to_host is None:
            raise UsageError(
                f"{operand.name} is a device array that this path cannot read back",
                expected="a NumPy array, a tf.Tensor or a numba device array",
                received=f"{operand.name} of type {type(value).__name__}",
                fix=f"wrap it first: numba.cuda.as_cuda_array({operand.name})",
            )
        value = copy_to_host()
    return np.ascontiguousarray(value)


def vector_add_operands(a: Any, b: Any) -> tuple[Operand, Operand]:
    """Check ``vector_add``'s inputs: two 1-D, non-empty arrays of one length and dtype."""
    op = "vector_add"
    first, second = read_operand(a, "a", op), read_operand(b, "b", op)
    for operand in (first, second):
        check_ndim(operand, 1, op, "a vector")
        check_dtype(operand, SUM_DTYPES, op)
        check_nonempty(operand, op)
    check_same_dtype(first, second, op)
    if first.shape != second.shape:
        raise UsageError(
            f"{op}: a and b have different lengths",
            expected="two vectors of the same length",
            received=f"a.shape={first.shape}, b.shape={second.shape}",
            fix="slice or pad one of them to the other's length",
        )
    return first, second


def matmul_operands(a: Any, b: Any) -> tuple[Operand, Operand]:
    """Check ``matmul``'s inputs: (m, k) and (k, n), non-empty, float32 or float64."""
    op = "matmul"
    first, second = read_operand(a, "a", op), read_operand(b, "b", op)
    for operand in (first, second):
        check_ndim(operand, 2, op, "a matrix")
        check_dtype(operand, FLOAT_DTYPES, op)
        check_nonempty(operand, op)
    check_same_dtype(first, second, op)
    if first.shape[1] != second.shape[0]:
        raise UsageError(
            f"{op}: the inner dimensions do not match",
            expected="a of shape (m, k) and b of shape (k, n)",
            received=f"a.shape={first.shape}, b.shape={second.shape}",
            fix="transpose one of them (e.g. b.T) or check which axis holds k",
        )
    return first, second


def reduce_sum_operand(x: Any) -> Operand:
    """Check ``reduce_sum``'s input: a 1-D, non-empty array (ravel others first)."""
    op = "reduce_sum"
    operand = read_operand(x, "x", op)
    check_ndim(operand, 1, op, "a vector; ravel other shapes first")
    check_dtype(operand, SUM_DTYPES, op)
    check_nonempty(operand, op)
    return operand


def bias_relu_operands(x: Any, bias: Any) -> tuple[Operand, Operand]:
    """Check ``bias_relu``'s inputs: x of shape (m, n) and bias of shape (n,)."""
    op = "bias_relu"
    first, second = read_operand(x, "x", op), read_operand(bias, "bias", op)
    check_ndim(first, 2, op, "a batch of rows, shape (m, n)")
    check_ndim(second, 1, op, "one value per column of x, shape (n,)")
    for operand in (first, second):
        check_dtype(operand, FLOAT_DTYPES, op)
        check_nonempty(operand, op)
    check_same_dtype(first, second, op)
    if second.shape[0] != first.shape[1]:
        raise UsageError(
            f"{op}: bias does not match the last axis of x",
            expected=f"bias of shape ({first.shape[1]},) for x of shape {first.shape}",
            received=f"bias.shape={second.shape}",
            fix="pass one bias value per column of x",
        )
    return first, second
