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

import os
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfaccel.core.checks import (
    MAX_COUNT,
    check_callable,
    check_file_argument,
    check_flag,
    check_int,
    is_int,
)
from tfaccel.core.errors import UsageError, shown
from tfaccel.data.sources import (
    WHERE,
    Loaded,
    bad_argument,
    load,
    size_text,
)
from tfaccel.probe import cpu

if TYPE_CHECKING:
    import tensorflow as tf

__all__ = ["Choice", "PipelineInfo", "available_memory_bytes", "describe", "pipeline"]

CACHE_FRACTION = 0.5  # cache when the estimate is at most this share of available memory
SHUFFLE_FRACTION = 0.1  # a shuffle buffer takes at most this share of available memory
FULL_SHUFFLE_MAX_ELEMENTS = 100_000
SHUFFLE_BUFFER_ELEMENTS = 10_000
VECTORIZE_CHECK_ELEMENTS = 4
DEVICE_PREFETCH_BATCHES = 2

_INFO: weakref.WeakKeyDictionary[Any, PipelineInfo] = weakref.WeakKeyDictionary()


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
    examples = _rounds(repeat, _array_size(source))
    if drop_remainder and examples is not None:  # arrays: refused before TensorFlow starts
        _check_one_batch(examples, batch_size)
    loaded = load(source, output_signature, shuffle, seed, parallel, deterministic)
    ds, elements, element_bytes = loaded.dataset, loaded.elements, loaded.element_bytes
    choices.append(Choice("source", loaded.kind, loaded.note))
    examples = _rounds(repeat, elements)
    if drop_remainder and examples is not None:  # a dataset of known cardinality
        _check_one_batch(examples, batch_size)
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
        return is_int(value) and 1 <= value <= MAX_COUNT

    check_int("batch_size", batch_size, where=WHERE, maximum=MAX_COUNT, fix="pass batch_size=64")
    check_flag("shuffle", shuffle, where=WHERE)
    check_int(
        "shuffle_buffer",
        shuffle_buffer,
        where=WHERE,
        maximum=MAX_COUNT,
        allow_none=True,
        fix="omit it",
    )
    if cache not in ("auto", True, False):
        if not isinstance(cache, (str, os.PathLike)):
            raise bad_argument("cache", cache, "'auto', True, False or a file path", "cache='auto'")
        check_file_argument("cache", cache, where=WHERE)
    check_callable(
        "map_fn",
        map_fn,
        where=WHERE,
        expected="a function applied to each element (tuple elements as arguments), or None",
        allow_none=True,
    )
    check_flag("vectorized", vectorized, where=WHERE, allow_none=True)
    if num_parallel_calls not in ("auto", None) and not positive(num_parallel_calls):
        raise bad_argument(
            "num_parallel_calls",
            num_parallel_calls,
            f"'auto', an integer from 1 to {MAX_COUNT} or None",
            "'auto'",
        )
    if prefetch not in ("auto", None, 0) and not positive(prefetch):
        raise bad_argument(
            "prefetch", prefetch, f"'auto', an integer from 0 to {MAX_COUNT} or None", "'auto'"
        )
    check_flag("drop_remainder", drop_remainder, where=WHERE)
    check_flag("deterministic", deterministic, where=WHERE, allow_none=True)
    check_int("seed", seed, where=WHERE, minimum=-(2**63), maximum=2**63 - 1, allow_none=True)
    if device is not None and not (
        isinstance(device, str) and (_CPU.match(device.strip()) or _GPU.match(device.strip()))
    ):
        raise bad_argument("device", device, "'GPU:0', '/gpu:1', 'CPU:0' or None", "device='GPU:0'")
    if not (isinstance(repeat, bool) or positive(repeat)):
        raise bad_argument(
            "repeat", repeat, f"True, False or an integer from 1 to {MAX_COUNT}", "repeat=True"
        )


def _rounds(repeat: bool | int, elements: int | None) -> int | None:
    """The examples the pipeline batches: ``elements`` times the repeats; None when unknown
    or repeated forever."""
    if elements is None or repeat is True:
        return None
    return elements * (int(repeat) if repeat else 1)


def _array_size(source: Any) -> int | None:
    """The examples of a NumPy array source, or of a tuple/list/dict of them; else None."""
    first = next(iter(source.values()), None) if isinstance(source, dict) else source
    if isinstance(first, (tuple, list)) and first:
        first = first[0]
        first = next(iter(first.values()), None) if isinstance(first, dict) else first
    shape = getattr(first, "shape", None)
    if type(first).__module__ == "numpy" and shape:
        return int(shape[0])
    return None


def _check_one_batch(examples: int, batch_size: int) -> None:
    """Refuse ``drop_remainder=True`` on fewer examples than one batch: it yields nothing."""
    if examples < batch_size:
        raise UsageError(
            f"tfaccel.data.pipeline() would yield no batch: {examples:,} examples are fewer "
            f"than one batch of {batch_size:,}, and drop_remainder=True drops that last, "
            "smaller batch",
            expected=f"at least batch_size={batch_size:,} examples with drop_remainder=True",
            received=f"{examples:,} examples (the source's known size), batch_size={batch_size:,}",
            fix=f"pass batch_size={max(examples, 1):,} or less, drop_remainder=False, or more "
            "data (repeat=N repeats it before batching)",
        )


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


def _parallelism(num_parallel_calls: int | str | None) -> int | None:
    import tensorflow as tf

    if num_parallel_calls == "auto":
        return int(tf.data.AUTOTUNE)
    return None if num_parallel_calls is None else int(num_parallel_calls)


# --- stages -----------------------------------------------------------------------------------


def _cache(ds: Any, cache: bool | str, loaded: Loaded, available: int | None) -> tuple[Any, Choice]:
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
            "cache", "off", f"estimated {size_text(estimate)}, but the available memory is unknown"
        )
    budget = CACHE_FRACTION * available
    if estimate <= budget:
        return ds.cache(), Choice(
            "cache",
            "memory",
            f"estimated {size_text(estimate)} fits in half of the {size_text(available)} available",
        )
    return ds, Choice(
        "cache",
        "off",
        f"estimated {size_text(estimate)} is more than half of the "
        f"{size_text(available)} available",
    )


def _estimate(loaded: Loaded) -> int | None:
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
