"""Where a pipeline's examples come from: arrays, a tf.data.Dataset, a generator, or files
(TFRecord, images), each loaded with what the pipeline needs to know of it (how many elements,
how large, whether it is already in memory). TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfaccel.core.errors import UsageError, shown

TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfrec", ".record")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
SAMPLED_ELEMENTS = 4  # elements read to estimate an element's size, when its spec cannot say
WHERE = "tfaccel.data.pipeline"  # how messages name the function


@dataclass
class Loaded:
    dataset: Any
    kind: str
    note: str
    elements: int | None
    element_bytes: int | None
    in_memory: bool = False
    size_note: str = ""
    on_disk_bytes: int | None = None  # TFRecord: the records' bytes, the size of a cache


def load(
    source: Any,
    output_signature: Any,
    shuffle: bool,
    seed: int | None,
    parallel: int | None,
    deterministic: bool | None,
) -> Loaded:
    import tensorflow as tf

    if isinstance(source, tf.data.Dataset):
        return _from_dataset(source)
    if callable(source):
        return _from_generator(source, output_signature)
    if _is_path_list(source):
        return _from_files(list(source), None, shuffle, seed, parallel, deterministic)
    if (
        isinstance(source, tuple)
        and len(source) == 2
        and _is_path_list(source[0])
        and not isinstance(source[1], (str, os.PathLike))
    ):
        return _from_files(list(source[0]), source[1], shuffle, seed, parallel, deterministic)
    return _from_arrays(source)


def _is_path_list(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(isinstance(v, (str, os.PathLike)) for v in value)
    )


def _from_arrays(source: Any) -> Loaded:
    import numpy as np
    import tensorflow as tf

    if isinstance(source, list):
        source = tuple(source)
    leaves = tf.nest.flatten(source)
    if not leaves:
        raise UsageError(
            "tfaccel.data.pipeline got an empty source",
            expected="NumPy arrays, a tf.data.Dataset, file paths or a generator function",
            received=shown(source),
            fix="pass (x, y) arrays",
        )
    arrays = []
    for leaf in leaves:
        if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
            raise UsageError(
                "tfaccel.data.pipeline cannot use this source",
                expected=(
                    "NumPy arrays ((x, y), a dict...), a tf.data.Dataset, a list of TFRecord or "
                    "image paths, or a generator function with output_signature"
                ),
                received=f"a structure holding {type(leaf).__name__}",
                fix="convert the data to NumPy arrays with np.asarray, or build a tf.data.Dataset",
            )
        arrays.append(np.asarray(leaf))
    lengths = {a.shape[0] if a.ndim else None for a in arrays}
    if len(lengths) != 1 or None in lengths:
        raise UsageError(
            "The arrays given to tfaccel.data.pipeline do not have the same number of examples",
            expected="arrays whose first dimensions are equal (one row per example)",
            received="first dimensions "
            + ", ".join(str(a.shape[:1]) for a in arrays[:8])
            + (f" and {len(arrays) - 8} more" if len(arrays) > 8 else ""),
            fix="check that x and y hold the same examples",
        )
    count = int(arrays[0].shape[0])
    if count == 0:
        raise UsageError(
            "The arrays given to tfaccel.data.pipeline hold no examples",
            expected="arrays with at least one example (row) each",
            received="shapes "
            + ", ".join(str(a.shape) for a in arrays[:8])
            + (f" and {len(arrays) - 8} more" if len(arrays) > 8 else ""),
            fix="check the data loading (a filter or a split that kept nothing)",
        )
    total = sum(int(a.nbytes) for a in arrays)
    ds = tf.data.Dataset.from_tensor_slices(source)
    shapes = ", ".join(str(tuple(a.shape[1:])) for a in arrays)
    return Loaded(
        ds,
        "arrays",
        f"{count} examples, {size_text(total)} in memory; element shapes {shapes}",
        count,
        total // count if count else 0,
        in_memory=True,
    )


def _from_dataset(ds: Any) -> Loaded:
    import tensorflow as tf

    cardinality = int(ds.cardinality().numpy())
    if cardinality == int(tf.data.INFINITE_CARDINALITY):
        return Loaded(
            ds,
            "dataset",
            "infinite (repeats)",
            None,
            _spec_bytes(ds),
            size_note="it repeats forever",
        )
    if cardinality == 0:
        raise UsageError(
            "The dataset given to tfaccel.data.pipeline is empty",
            expected="a tf.data.Dataset with at least one element",
            received="a dataset of 0 elements (ds.cardinality() == 0)",
            fix="check how the dataset is built (a take(0), a skip past its end, an empty source)",
        )
    elements = cardinality if cardinality >= 0 else None
    element_bytes = _spec_bytes(ds)
    if element_bytes is None and elements is not None:
        element_bytes = _sampled_bytes(ds)
    note = f"{elements} elements" if elements is not None else "number of elements unknown"
    return Loaded(ds, "dataset", note, elements, element_bytes)


def _from_generator(generator: Callable[[], Any], output_signature: Any) -> Loaded:
    import tensorflow as tf

    if output_signature is None:
        raise UsageError(
            "A generator given to tfaccel.data.pipeline needs output_signature",
            expected="output_signature=(tf.TensorSpec(shape, dtype), ...) describing one element",
            received="output_signature=None",
            fix="pass output_signature=(tf.TensorSpec((32, 32, 3), tf.float32), "
            "tf.TensorSpec((), tf.int32))",
        )
    ds = tf.data.Dataset.from_generator(generator, output_signature=output_signature)
    return Loaded(
        ds,
        "generator",
        "Python generator (runs under the GIL: one thread at a time)",
        None,
        _spec_bytes(ds),
        size_note="a generator's length is unknown",
    )


def _from_files(
    paths: list[Any],
    labels: Any,
    shuffle: bool,
    seed: int | None,
    parallel: int | None,
    deterministic: bool | None,
) -> Loaded:
    import numpy as np
    import tensorflow as tf

    names = [os.fspath(p) for p in paths]
    missing = [n for n in names if not os.path.isfile(n)]
    if missing:
        raise UsageError(
            f"{len(missing)} of the {len(names)} files given to tfaccel.data.pipeline do not exist",
            expected="paths of existing files",
            received=", ".join(repr(m) for m in missing[:3]) + (" ..." if len(missing) > 3 else ""),
            fix="check the paths (relative paths are read from the working directory "
            f"{os.getcwd()})",
        )
    kinds = {_file_kind(n) for n in names}
    if len(kinds) != 1 or None in kinds:
        raise UsageError(
            "tfaccel.data.pipeline reads one kind of file at a time, and only TFRecord or images",
            expected="all TFRecord (" + ", ".join(TFRECORD_SUFFIXES) + ", optionally .gz) or all "
            "images (" + ", ".join(IMAGE_SUFFIXES) + ")",
            received="suffixes " + ", ".join(sorted({Path(n).suffix or "(none)" for n in names})),
            fix="convert other formats to TFRecord, or read them with a generator function",
        )
    kind = kinds.pop()
    if kind == "tfrecord":
        if labels is not None:
            raise bad_argument(
                "source", "(tfrecord_paths, labels)", "TFRecord paths alone", "the paths"
            )
        files = tf.data.Dataset.from_tensor_slices(names)
        if shuffle:
            files = files.shuffle(len(names), seed=seed, reshuffle_each_iteration=True)
        compressed = names[0].endswith(".gz")
        ds = files.interleave(
            lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP" if compressed else ""),
            cycle_length=min(len(names), 8),
            num_parallel_calls=parallel,
            deterministic=deterministic,
        )
        on_disk = sum(os.path.getsize(n) for n in names)
        note = f"{len(names)} TFRecord files ({size_text(on_disk)}), serialized records"
        if compressed:
            return Loaded(ds, "tfrecord files", note, None, None, size_note="compressed records")
        return Loaded(ds, "tfrecord files", note, None, None, on_disk_bytes=on_disk)
    if labels is not None:
        label_array = np.asarray(labels)
        if label_array.shape[:1] != (len(names),):
            raise UsageError(
                "The image paths and labels given to tfaccel.data.pipeline differ in length",
                expected=f"{len(names)} labels, one per image",
                received=f"labels of shape {label_array.shape}",
                fix="pass (paths, labels) with one label per path",
            )
        ds = tf.data.Dataset.from_tensor_slices((names, label_array))
        ds = ds.map(
            lambda p, y: (_decode_image(p), y),
            num_parallel_calls=parallel,
            deterministic=deterministic,
        )
    else:
        ds = tf.data.Dataset.from_tensor_slices(names).map(
            _decode_image, num_parallel_calls=parallel, deterministic=deterministic
        )
    sample = _sampled_bytes(ds)
    note = f"{len(names)} image files decoded to uint8 RGB"
    return Loaded(ds, "image files", note, len(names), sample)


def _decode_image(path: Any) -> Any:
    import tensorflow as tf

    return tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)


def _file_kind(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(".gz"):
        lower = lower[:-3]
    if lower.endswith(TFRECORD_SUFFIXES):
        return "tfrecord"
    if lower.endswith(IMAGE_SUFFIXES) and not name.lower().endswith(".gz"):
        return "image"
    return None


def _spec_bytes(ds: Any) -> int | None:
    """Bytes of one element from the element spec, or None when a shape or size is unknown."""
    import tensorflow as tf

    total = 0
    for spec in tf.nest.flatten(ds.element_spec):
        shape = getattr(spec, "shape", None)
        dtype = getattr(spec, "dtype", None)
        if shape is None or dtype is None or not shape.is_fully_defined() or dtype == tf.string:
            return None
        total += math.prod(shape.as_list()) * dtype.size
    return total


def _sampled_bytes(ds: Any, count: int = SAMPLED_ELEMENTS) -> int | None:
    """Mean bytes of the first ``count`` elements (reads them), or None for an empty source."""
    import tensorflow as tf

    sizes = []
    for element in ds.take(count):
        size = 0
        for leaf in tf.nest.flatten(element):
            value = leaf.numpy()
            if isinstance(value, bytes):
                size += len(value)
            else:
                size += int(getattr(value, "nbytes", 0)) or sum(len(v) for v in value.ravel())
        sizes.append(size)
    return int(sum(sizes) / len(sizes)) if sizes else None


def bad_argument(name: str, value: Any, expected: str, fix: str) -> UsageError:
    return UsageError(
        f"{WHERE} got an invalid {name}",
        expected=expected,
        received=f"{name}={shown(value)}",
        fix=f"pass {fix}" if not fix.startswith("omit") else fix,
    )


def size_text(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
