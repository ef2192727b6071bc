"""``pipeline()``: a tuned ``tf.data`` input pipeline, every choice recorded with its reason.

The order of the stages follows the tf.data performance guide:

    source -> cache -> shuffle -> repeat -> [map] -> batch -> [map, vectorised] -> prefetch
           -> prefetch_to_device

* source: NumPy arrays (``x``, ``(x, y)``, ``(x, y, w)``, a dict of arrays or ``(dict, y)``),
  a ``tf.data.Dataset`` of unbatched elements, a list of TFRecord files (``.tfrecord``,
  ``.tfrecords``, ``.tfrec``, ``.record``; ``.gz`` read as GZIP) yielding serialized records
  for ``map_fn`` to parse, a list of image files (``.png``, ``.jpg``, ``.jpeg``, ``.bmp``,
  ``.gif``) or ``(image_paths, labels)``, decoded to uint8 RGB, or a generator function with
  ``output_signature``.
* cache ("auto"): the source (after file decoding, before ``map_fn``, so random augmentation
  stays random) is cached in memory when its estimated size is at most half of the memory
  available now (``MemAvailable``). Arrays are never cached (they already are in memory);
  sources of unknown size are not cached unless asked (``cache=True`` or a file path).
* shuffle (``shuffle_buffer=None``): the whole data set when it has at most 100,000 elements
  that take at most a tenth of the available memory, else 10,000 elements (at least 8
  batches), or fewer when that is more than a tenth of the memory.
* map (``vectorized=None``): ``map_fn`` runs after ``batch`` (once per batch, ~5x faster
  for element-wise work) when it is safe, decided by a check: the element shapes are fully
  known, and ``map_fn`` applied to a batch of the first 4 elements gives the per-element
  results stacked (same structure, shapes and values). Functions that use statistics of
  one example (``x - reduce_mean(x)``), reshape per example, or draw random numbers fail
  the check and run per element. ``vectorized=True``/``False`` skips the check.
* prefetch ``AUTOTUNE``; ``device="GPU:0"`` adds ``prefetch_to_device`` (2 batches) as the
  final stage, so the host-to-device copy overlaps the step.
* ``deterministic=True`` with a ``seed``: the same order every run.

TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import math
import os
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfaccel.errors import UsageError
from tfaccel.runtime.settings import (
    check_callable,
    check_file_target,
    check_flag,
    check_int,
    shown,
)

if TYPE_CHECKING:
    import tensorflow as tf

__all__ = ["Choice", "PipelineInfo", "available_memory_bytes", "describe", "pipeline"]

CACHE_FRACTION = 0.5  # cache when the estimate is at most this share of available memory
SHUFFLE_FRACTION = 0.1  # a shuffle buffer takes at most this share of available memory
FULL_SHUFFLE_MAX_ELEMENTS = 100_000
SHUFFLE_BUFFER_ELEMENTS = 10_000
VECTORIZE_CHECK_ELEMENTS = 4
DEVICE_PREFETCH_BATCHES = 2
TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfrec", ".record")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")

_INFO: weakref.WeakKeyDictionary[Any, PipelineInfo] = weakref.WeakKeyDictionary()
_WHERE = "tfaccel.data.pipeline"


@dataclass(frozen=True)
class Choice:
    """One decision of :func:`pipeline`: the option, the value chosen, and why."""

    option: str
    value: str
    reason: str


@dataclass(frozen=True)
class PipelineInfo:
    """What :func:`pipeline` built: the source, its size, and each choice with its reason.

    Attributes:
        source: kind of source ("arrays", "dataset", "tfrecord files", "image files",
            "generator").
        batch_size: examples per batch.
        elements: examples in the source, when known.
        element_bytes: estimated bytes of one source element, when known.
        choices: the decisions, in pipeline order.
    """

    source: str
    batch_size: int
    elements: int | None
    element_bytes: int | None
    choices: tuple[Choice, ...]

    def __getitem__(self, option: str) -> Choice:
        for choice in self.choices:
            if choice.option == option:
                return choice
        raise KeyError(option)

    @property
    def estimated_bytes(self) -> int | None:
        """Estimated size of the whole source in bytes, when known."""
        if self.elements is None or self.element_bytes is None:
            return None
        return self.elements * self.element_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "batch_size": self.batch_size,
            "elements": self.elements,
            "element_bytes": self.element_bytes,
            "choices": [
                {"option": c.option, "value": c.value, "reason": c.reason} for c in self.choices
            ],
        }

    def __str__(self) -> str:
        size = f"{self.elements} elements" if self.elements is not None else "size unknown"
        lines = [f"tfaccel.data.pipeline: {self.source}, {size}, batch {self.batch_size}"]
        width = max(len(c.option) for c in self.choices) if self.choices else 0
        lines += [f"  {c.option:<{width}}  {c.value}: {c.reason}" for c in self.choices]
        return "\n".join(lines)


def describe(dataset: Any) -> PipelineInfo:
    """The choices :func:`pipeline` made for ``dataset``.

    Raises:
        UsageError: ``dataset`` was not returned by :func:`pipeline`.

    Example:
        >>> ds = tfaccel.data.pipeline((x, y), 64)  # doctest: +SKIP
        >>> tfaccel.data.describe(ds)["cache"].reason  # doctest: +SKIP
        'the arrays are already in memory'
    """
    try:
        return _INFO[dataset]
    except (KeyError, TypeError):
        raise UsageError(
            "This dataset was not built by tfaccel.data.pipeline, so there is nothing to describe",
            expected="the dataset returned by tfaccel.data.pipeline(...)",
            received=type(dataset).__name__,
            fix="call describe() on the object pipeline() returned (later .map/.batch calls "
            "return new datasets without the record)",
        ) from None


def available_memory_bytes() -> int | None:
    """Memory available to new allocations now (``MemAvailable``), or None when unknown."""
    from tfaccel.probe import cpu

    return cpu.collect().memory_available_bytes


def pipeline(
    source: Any,
    batch_size: int,
    *,
    shuffle: bool = True,
    shuffle_buffer: int | None = None,
    cache: bool | str = "auto",
    map_fn: Callable[..., Any] | None = None,
    vectorized: bool | None = None,
    num_parallel_calls: int | str | None = "auto",
    prefetch: int | str | None = "auto",
    drop_remainder: bool = False,
    deterministic: bool | None = None,
    seed: int | None = None,
    device: str | None = None,
    output_signature: Any = None,
    repeat: bool | int = False,
) -> tf.data.Dataset:
    """Build a tuned ``tf.data`` pipeline; :func:`describe` tells what was chosen and why.

    Args:
        source: NumPy arrays (``x``, ``(x, y)``, ``(x, y, w)``, a dict, ``(dict, y)``), a
            ``tf.data.Dataset`` of unbatched elements, a list of TFRecord or image file paths,
            ``(image_paths, labels)``, or a generator function (with ``output_signature``).
        batch_size: examples per batch (>= 1).
        shuffle: shuffle the examples (and the file order for files).
        shuffle_buffer: elements in the shuffle buffer; None chooses (see the module notes).
        cache: "auto" (cache when it fits comfortably in memory), True (in memory), False,
            or a file path (``tf.data`` file cache).
        map_fn: applied to each element (or to each batch when vectorised), with
            ``num_parallel_calls`` parallelism; tuple elements are passed as arguments.
        vectorized: True applies ``map_fn`` after ``batch``; False before; None decides by
            the check described in the module notes.
        num_parallel_calls: "auto" (``tf.data.AUTOTUNE``), a number of threads, or None
            (sequential) for ``map_fn``, file reading and batching.
        prefetch: "auto" (``AUTOTUNE``), a number of batches, or 0/None for no prefetch.
        drop_remainder: drop the last, smaller batch (fixed shapes, e.g. for XLA or TPUs).
        deterministic: True keeps the order fixed (with ``seed``: the same every run);
            False lets parallel stages return elements out of order (faster); None keeps
            ``tf.data``'s default (ordered).
        seed: seed of the shuffles.
        device: "GPU:0" (or "/gpu:0") adds ``prefetch_to_device`` as the final stage;
            None or a CPU adds nothing.
        output_signature: the ``tf.TensorSpec`` structure of a generator's elements.
        repeat: True repeats forever, an int that many times (before batching).

    Returns:
        The ``tf.data.Dataset`` of batches.

    Raises:
        UsageError: an argument is not valid (a switch that is not a bool, a ``map_fn`` that
            cannot be called, a ``cache`` file that cannot be written: its directory is
            missing or read-only, or it is a directory), files are missing or of an unknown
            kind, the arrays differ in length or hold no examples, a dataset is empty, a
            generator has no ``output_signature``, or ``device`` names a GPU TensorFlow does
            not see. Every argument is checked before anything is built or written.

    Example:
        >>> ds = tfaccel.data.pipeline((x_train, y_train), 128, map_fn=augment, seed=0)
        >>> model.fit(ds, epochs=10)  # doctest: +SKIP
    """
    _check_arguments(
        batch_size=batch_size,
        shuffle=shuffle,
        shuffle_buffer=shuffle_buffer,
        cache=cache,
        map_fn=map_fn,
        vectorized=vectorized,
        num_parallel_calls=num_parallel_calls,
        prefetch=prefetch,
        drop_remainder=drop_remainder,
        deterministic=deterministic,
        seed=seed,
        device=device,
        repeat=repeat,
    )
    import tensorflow as tf

    _check_device(device)
    parallel = _parallelism(num_parallel_calls)
    choices: list[Choice] = []
    loaded = _load(source, output_signature, shuffle, seed, parallel, deterministic)
    ds, elements, element_bytes = loaded.dataset, loaded.elements, loaded.element_bytes
    choices.append(Choice("source", loaded.kind, loaded.note))
    available = available_memory_bytes()

    ds, choice = _cache(ds, cache, loaded, available)
    choices.append(choice)
    if shuffle:
        buffer, reason = _shuffle_buffer(
            shuffle_buffer, elements, element_bytes, batch_size, available
        )
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
        seeded = f"seed {seed}" if seed is not None else "unseeded: the order differs each run"
        choices.append(Choice("shuffle", f"buffer {buffer}", f"{reason}; {seeded}"))
    else:
        choices.append(Choice("shuffle", "off", "shuffle=False"))
    if repeat is not False:
        ds = ds.repeat() if repeat is True else ds.repeat(int(repeat))
        choices.append(Choice("repeat", "forever" if repeat is True else str(repeat), "asked"))

    map_after_batch = False
    if map_fn is not None:
        map_after_batch, reason = _vectorize(
            ds_source=loaded.dataset, map_fn=map_fn, vectorized=vectorized
        )
        where = "after batch (vectorised)" if map_after_batch else "per element"
        threads = "AUTOTUNE" if parallel == tf.data.AUTOTUNE else str(parallel or "sequential")
        choices.append(Choice("map", f"{where}, parallel {threads}", reason))
        if not map_after_batch:
            ds = ds.map(map_fn, num_parallel_calls=parallel, deterministic=deterministic)
    else:
        choices.append(Choice("map", "none", "no map_fn"))
    ds = ds.batch(
        batch_size,
        drop_remainder=drop_remainder,
        num_parallel_calls=parallel,
        deterministic=deterministic,
    )
    choices.append(
        Choice(
            "batch",
            str(batch_size),
            "last smaller batch dropped" if drop_remainder else "last batch kept",
        )
    )
    if map_fn is not None and map_after_batch:
        ds = ds.map(map_fn, num_parallel_calls=parallel, deterministic=deterministic)

    if deterministic is not None:
        options = tf.data.Options()
        options.deterministic = deterministic
        ds = ds.with_options(options)
    choices.append(_determinism_choice(deterministic, shuffle, seed))

    if prefetch == "auto":
        ds = ds.prefetch(tf.data.AUTOTUNE)
        choices.append(
            Choice("prefetch", "AUTOTUNE", "overlaps preparing the next batches with the step")
        )
    elif prefetch:
        ds = ds.prefetch(int(prefetch))
        choices.append(Choice("prefetch", str(prefetch), "asked"))
    else:
        choices.append(Choice("prefetch", "off", "prefetch=0; tf.data may still inject one"))
    ds, choice = _device_prefetch(ds, device)
    choices.append(choice)

    info = PipelineInfo(loaded.kind, batch_size, elements, element_bytes, tuple(choices))
    _INFO[ds] = info
    return ds


# --- arguments --------------------------------------------------------------------------------


def _check_arguments(
    *,
    batch_size: Any,
    shuffle: Any,
    shuffle_buffer: Any,
    cache: Any,
    map_fn: Any,
    vectorized: Any,
    num_parallel_calls: Any,
    prefetch: Any,
    drop_remainder: Any,
    deterministic: Any,
    seed: Any,
    device: Any,
    repeat: Any,
) -> None:
    """Check every argument before anything is built, imported or written."""

    def positive(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    check_int("batch_size", batch_size, where=_WHERE, fix="pass batch_size=64")
    check_flag("shuffle", shuffle, where=_WHERE)
    check_int("shuffle_buffer", shuffle_buffer, where=_WHERE, allow_none=True, fix="omit it")
    if cache not in ("auto", True, False):
        if not isinstance(cache, (str, os.PathLike)):
            raise _bad("cache", cache, "'auto', True, False or a file path", "cache='auto'")
        check_file_target("cache", cache, where=_WHERE)
    check_callable(
        "map_fn",
        map_fn,
        where=_WHERE,
        expected="a function applied to each element (tuple elements as arguments), or None",
        allow_none=True,
    )
    check_flag("vectorized", vectorized, where=_WHERE, allow_none=True)
    if num_parallel_calls not in ("auto", None) and not positive(num_parallel_calls):
        raise _bad(
            "num_parallel_calls", num_parallel_calls, "'auto', a positive integer or None", "'auto'"
        )
    if prefetch not in ("auto", None, 0) and not positive(prefetch):
        raise _bad("prefetch", prefetch, "'auto', a positive integer, 0 or None", "'auto'")
    check_flag("drop_remainder", drop_remainder, where=_WHERE)
    check_flag("deterministic", deterministic, where=_WHERE, allow_none=True)
    check_int("seed", seed, where=_WHERE, minimum=-(2**63), maximum=2**63 - 1, allow_none=True)
    if device is not None and not (
        isinstance(device, str) and (_CPU.match(device.strip()) or _GPU.match(device.strip()))
    ):
        raise _bad("device", device, "'GPU:0', '/gpu:1', 'CPU:0' or None", "device='GPU:0'")
    if not (isinstance(repeat, bool) or positive(repeat)):
        raise _bad("repeat", repeat, "True, False or a positive integer", "repeat=True")


def _check_device(device: str | None) -> None:
    """A GPU given as ``device`` is one TensorFlow sees (asked without starting its runtime)."""
    import tensorflow as tf

    if device is None or (match := _GPU.match(device.strip())) is None:
        return
    gpus = tf.config.get_visible_devices("GPU")
    count = sum(len(tf.config.get_logical_device_configuration(g) or [g]) for g in gpus)
    if int(match.group(1)) >= count:
        visible = ", ".join(f"GPU:{i}" for i in range(count)) or "none"
        raise UsageError(
            f"tfaccel.data.pipeline cannot prefetch to {device.strip()}: TensorFlow does not "
            "see that GPU",
            expected=f"a GPU TensorFlow lists: {visible}",
            received=f"device={shown(device)}",
            fix="pass device=None on this machine; 'tfaccel doctor' tells why a GPU is missing",
        )


def _bad(name: str, value: Any, expected: str, fix: str) -> UsageError:
    return UsageError(
        f"{_WHERE} got an invalid {name}",
        expected=expected,
        received=f"{name}={shown(value)}",
        fix=f"pass {fix}" if not fix.startswith("omit") else fix,
    )


def _parallelism(num_parallel_calls: int | str | None) -> int | None:
    import tensorflow as tf

    if num_parallel_calls == "auto":
        return int(tf.data.AUTOTUNE)
    return None if num_parallel_calls is None else int(num_parallel_calls)


# --- sources ----------------------------------------------------------------------------------


@dataclass
class _Loaded:
    dataset: Any
    kind: str
    note: str
    elements: int | None
    element_bytes: int | None
    in_memory: bool = False
    size_note: str = ""
    on_disk_bytes: int | None = None  # TFRecord: the records' bytes, the size of a cache


def _load(
    source: Any,
    output_signature: Any,
    shuffle: bool,
    seed: int | None,
    parallel: int | None,
    deterministic: bool | None,
) -> _Loaded:
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


def _from_arrays(source: Any) -> _Loaded:
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
    return _Loaded(
        ds,
        "arrays",
        f"{count} examples, {_size(total)} in memory; element shapes {shapes}",
        count,
        total // count if count else 0,
        in_memory=True,
    )


def _from_dataset(ds: Any) -> _Loaded:
    import tensorflow as tf

    cardinality = int(ds.cardinality().numpy())
    if cardinality == int(tf.data.INFINITE_CARDINALITY):
        return _Loaded(
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
    return _Loaded(ds, "dataset", note, elements, element_bytes)


def _from_generator(generator: Callable[[], Any], output_signature: Any) -> _Loaded:
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
    return _Loaded(
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
) -> _Loaded:
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
            raise _bad("source", "(tfrecord_paths, labels)", "TFRecord paths alone", "the paths")
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
        note = f"{len(names)} TFRecord files ({_size(on_disk)}), serialized records"
        if compressed:
            return _Loaded(ds, "tfrecord files", note, None, None, size_note="compressed records")
        return _Loaded(ds, "tfrecord files", note, None, None, on_disk_bytes=on_disk)
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
    return _Loaded(ds, "image files", note, len(names), sample)


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


def _sampled_bytes(ds: Any, count: int = VECTORIZE_CHECK_ELEMENTS) -> int | None:
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


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


# --- stages -----------------------------------------------------------------------------------


def _cache(
    ds: Any, cache: bool | str, loaded: _Loaded, available: int | None
) -> tuple[Any, Choice]:
    if cache is False:
        return ds, Choice("cache", "off", "cache=False")
    if cache is True:
        return ds.cache(), Choice("cache", "memory", "asked (cache=True)")
    if cache != "auto":
        path = os.fspath(cache)
        return ds.cache(path), Choice("cache", f"file {path}", "asked")
    if loaded.in_memory:
        return ds, Choice("cache", "off", "the arrays are already in memory")
    estimate = _estimate(loaded)
    if estimate is None:
        why = loaded.size_note or "the size of the source is unknown"
        return ds, Choice("cache", "off", f"{why}; pass cache=True to cache it anyway")
    if available is None:
        return ds, Choice(
            "cache", "off", f"estimated {_size(estimate)}, but the available memory is unknown"
        )
    budget = CACHE_FRACTION * available
    if estimate <= budget:
        return ds.cache(), Choice(
            "cache",
            "memory",
            f"estimated {_size(estimate)} fits in half of the {_size(available)} available",
        )
    return ds, Choice(
        "cache",
        "off",
        f"estimated {_size(estimate)} is more than half of the {_size(available)} available",
    )


def _estimate(loaded: _Loaded) -> int | None:
    if loaded.on_disk_bytes is not None:
        return loaded.on_disk_bytes
    if loaded.elements is None or loaded.element_bytes is None:
        return None
    return loaded.elements * loaded.element_bytes


def _shuffle_buffer(
    asked: int | None,
    elements: int | None,
    element_bytes: int | None,
    batch_size: int,
    available: int | None,
) -> tuple[int, str]:
    if asked is not None:
        return asked, "asked"
    memory_cap = None
    if element_bytes and available:
        memory_cap = max(1, int(SHUFFLE_FRACTION * available) // max(element_bytes, 1))
    if elements is not None and elements <= FULL_SHUFFLE_MAX_ELEMENTS:
        if memory_cap is None or elements <= memory_cap:
            return max(elements, 1), "the whole data set (a full shuffle)"
    buffer = max(SHUFFLE_BUFFER_ELEMENTS, 8 * batch_size)
    if memory_cap is not None and memory_cap < buffer:
        return memory_cap, "as many elements as fit in a tenth of the available memory"
    return buffer, f"{buffer} elements (the data set is large or of unknown size)"


def _vectorize(
    *, ds_source: Any, map_fn: Callable[..., Any], vectorized: bool | None
) -> tuple[bool, str]:
    if vectorized is not None:
        return vectorized, f"asked (vectorized={vectorized})"
    return _vectorizable(ds_source, map_fn)


def _vectorizable(ds: Any, map_fn: Callable[..., Any]) -> tuple[bool, str]:
    """Whether ``map_fn`` on a batch equals the per-element results stacked (see module notes)."""
    import numpy as np
    import tensorflow as tf

    for spec in tf.nest.flatten(ds.element_spec):
        if not spec.shape.is_fully_defined():
            return False, f"element shapes vary ({spec.shape}), so elements cannot be batched first"
    sample = ds.take(VECTORIZE_CHECK_ELEMENTS)
    try:
        per_element = list(sample.map(map_fn).as_numpy_iterator())
        batched = next(sample.batch(VECTORIZE_CHECK_ELEMENTS).map(map_fn).as_numpy_iterator())
    except StopIteration:
        return False, "the source is empty, so the check could not run"
    except Exception as exc:  # any failure of the user's function on a batch means "not safe"
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return False, f"map_fn fails on a batch ({type(exc).__name__}: {first_line[:120]})"
    if not per_element:
        return False, "the source is empty, so the check could not run"
    try:
        tf.nest.assert_same_structure(per_element[0], batched)
    except (ValueError, TypeError):
        return False, "map_fn returns a different structure for a batch"
    stacked_leaves = [
        np.stack(parts) for parts in zip(*(tf.nest.flatten(p) for p in per_element), strict=True)
    ]
    for stacked, got in zip(stacked_leaves, tf.nest.flatten(batched), strict=True):
        got = np.asarray(got)
        if stacked.shape != got.shape:
            return False, (
                f"map_fn gives shape {got.shape} on a batch, not the stacked per-element "
                f"shape {stacked.shape}"
            )
        if not _same_values(stacked, got):
            return False, (
                "map_fn gives other values on a batch than per element (per-example statistics "
                "or random numbers)"
            )
    return True, (
        f"map_fn on a batch of {len(per_element)} equals the per-element results, so it runs "
        "once per batch"
    )


def _same_values(a: Any, b: Any) -> bool:
    import numpy as np

    if a.dtype.kind in "fc":
        return bool(np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
    return bool(np.array_equal(a, b))


def _determinism_choice(deterministic: bool | None, shuffle: bool, seed: int | None) -> Choice:
    if deterministic is None:
        return Choice("deterministic", "default", "tf.data's default: elements keep their order")
    if not deterministic:
        return Choice(
            "deterministic", "off", "parallel stages may return elements out of order (faster)"
        )
    if shuffle and seed is None:
        return Choice(
            "deterministic",
            "on",
            "order fixed within a run, but the shuffle is unseeded: pass seed= for the same "
            "order every run",
        )
    return Choice("deterministic", "on", "the same order every run")


_GPU = re.compile(r"^/?(?:device:)?gpu:(\d+)$", re.IGNORECASE)
_CPU = re.compile(r"^/?(?:device:)?cpu:(\d+)$", re.IGNORECASE)


def _device_prefetch(ds: Any, device: str | None) -> tuple[Any, Choice]:
    import tensorflow as tf

    if device is None:
        return ds, Choice("device", "none", "no device given: batches stay on the host")
    text = device.strip()  # its form and its GPU were checked before anything was built
    match = _GPU.match(text)
    if match is None:
        return ds, Choice("device", "none", f"{text} is the host: nothing to copy")
    name = f"/device:GPU:{match.group(1)}"
    ds = ds.apply(
        tf.data.experimental.prefetch_to_device(name, buffer_size=DEVICE_PREFETCH_BATCHES)
    )
    return ds, Choice(
        "device",
        name,
        f"prefetch_to_device ({DEVICE_PREFETCH_BATCHES} batches): the copy overlaps the step",
    )
