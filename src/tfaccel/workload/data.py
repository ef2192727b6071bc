"""The forms training data takes in ``fit``: what each is, its first batch, its size.

Arrays (NumPy, tensors, a list or tuple of them), a dict of arrays, a ``tf.data.Dataset``, a
generator or other iterator, a ``keras.utils.PyDataset``. TensorFlow and Keras are imported only
when the data is one of theirs. The one reader of these forms: the workload, tune's data
(:mod:`tfaccel.tuning.data`) and profile's patched ``fit`` (:mod:`tfaccel.profile.fit_patch`)
all ask here.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["examples", "first_batch", "inputs_of", "kind_of", "leading_dim", "sized", "spec_of"]


def kind_of(x: Any) -> str:
    """``arrays``, ``dict``, ``dataset``, ``generator``, ``pydataset`` or ``other``.

    ``generator`` is an iterator object (read once); a function returning one is ``other``.
    """
    if x is None:
        return "other"
    module = type(x).__module__ or ""
    if module.startswith("tensorflow") and _is_dataset(x):
        return "dataset"
    if _is_pydataset(x):
        return "pydataset"
    if isinstance(x, Mapping):
        return "dict"
    if isinstance(x, Iterator):
        return "generator"
    if hasattr(x, "shape") or isinstance(x, (list, tuple)):
        return "arrays"
    return "other"


def _is_dataset(x: Any) -> bool:
    import tensorflow as tf

    return isinstance(x, tf.data.Dataset)


def _is_pydataset(x: Any) -> bool:
    if "keras" not in (type(x).__module__ or "") and not any(
        "keras" in (c.__module__ or "") for c in type(x).__mro__
    ):
        return False
    import keras

    return isinstance(x, keras.utils.PyDataset)


def inputs_of(element: Any) -> Any:
    """The inputs of a batch as a dataset, generator or PyDataset yields it: ``x`` of
    ``(x, y)`` or ``(x, y, sample_weight)``, else the element itself."""
    if isinstance(element, tuple) and 1 <= len(element) <= 3:
        return element[0]
    return element


def first_batch(x: Any, batch_size: int) -> tuple[Any, Any]:
    """``(inputs of the first batch, replacement for x or None)``.

    A generator's first item is consumed to be read: the replacement yields it again first.
    """
    kind = kind_of(x)
    if kind == "arrays":
        if isinstance(x, (list, tuple)):
            return [a[:batch_size] for a in x], None
        return x[:batch_size], None
    if kind == "dict":
        return {k: v[:batch_size] for k, v in x.items()}, None
    if kind == "dataset":
        return inputs_of(next(iter(x))), None
    if kind == "pydataset":
        return inputs_of(x[0]), None
    if kind == "generator":
        first = next(x)
        return inputs_of(first), itertools.chain([first], x)
    return None, None


def leading_dim(batch: Any) -> int | None:
    """The batch dimension of the first array in ``batch``, or of the first ``tf.TensorSpec``
    of an element spec (None: no array, a scalar, an unknown rank or dimension)."""
    leaf = _first_leaf(batch)
    shape = getattr(leaf, "shape", None)
    if shape is None:
        return None
    try:
        rank = len(shape)
    except (TypeError, ValueError):  # a TensorShape of unknown rank
        return None
    if rank == 0 or shape[0] is None:
        return None
    return int(shape[0])


def sized(value: Any) -> bool:
    """Whether ``value`` has a length of rows (a dict, whose length counts keys, has not)."""
    if isinstance(value, Mapping):
        return False
    try:
        len(value)
    except TypeError:
        return False
    return True


def spec_of(value: Any) -> Any:
    """The ``tf.TensorSpec`` of one value (an array, a number, a string) as TensorFlow holds it.

    Raises:
        TypeError, ValueError: TensorFlow cannot make a tensor of it.
    """
    import tensorflow as tf

    tensor = tf.convert_to_tensor(value)
    return tf.TensorSpec(tensor.shape, tensor.dtype)


def _first_leaf(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _first_leaf(next(iter(value.values()), None))
    if isinstance(value, (list, tuple)):
        return _first_leaf(value[0]) if value else None
    return value


def examples(x: Any, batch: int | None) -> int | None:
    """Training examples per epoch: the arrays' length; a dataset's or PyDataset's batches
    times ``batch`` (its last batch may be smaller); None for a generator or an endless
    dataset."""
    kind = kind_of(x)
    if kind in ("arrays", "dict"):
        leaf = _first_leaf(x)
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape):
            return int(shape[0])
        return len(leaf) if hasattr(leaf, "__len__") else None
    if kind == "dataset" and batch:
        count = int(x.cardinality())
        return count * batch if count > 0 else None
    if kind == "pydataset" and batch:
        try:
            return len(x) * batch
        except TypeError:
            return None
    return None
