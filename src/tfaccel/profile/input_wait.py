"""How long a training step waited for its batch, measured at the end of the input pipeline.

Keras ``fit`` pulls each batch inside its compiled train function (``iterator.get_next()``),
so no callback sees the wait. :func:`instrument` wraps a dataset so that every ``get_next``
records it::

    zip(starts, dataset).map(stamp)

``starts`` yields ``tf.timestamp()`` when the request arrives (``zip`` asks its inputs in
order), then ``dataset`` produces the batch (this is the wait), then ``stamp`` adds
``[now - start, 1, batch size]`` to a small float64 variable on the CPU (no Python runs in the
pipeline). The wrapper's stages are synchronous, so they run in the consumer's thread, at
the moment the step asks. tf.data would inject a ``prefetch`` after a synchronous last stage
(the ``inject_prefetch`` optimisation), which would move the stamp into a background thread:
the wrapper turns that optimisation off for its own last stage and adds, itself, the
``prefetch(AUTOTUNE)`` tf.data would have put at the end of the user's pipeline, so the
pipeline measured is the one that would have run.

A callback reads the variable when a step begins and when it ends: the difference is that
step's wait, its number of fetches and its examples. Cost: two small dataset stages per
batch (about 0.1 ms on this project's 2-core CPU) and two variable reads per step. Limits:
the host-to-device copy of the batch happens after the stamp (it counts as step time); under
a distribution strategy the iterator prefetches to the devices in background threads, so the
wait no longer marks the step's (the callback then reports input as not measured); a dataset
that already ends on a device (``prefetch_to_device``) cannot be wrapped.
"""

from __future__ import annotations

import weakref
from typing import Any

from tfaccel.core.errors import UsageError

__all__ = ["INPUT_CLOCK", "InputClock", "difference", "instrument"]


class InputClock:
    """Totals ``[wait seconds, fetches, examples]`` kept by instrumented pipelines.

    The totals live in a TensorFlow variable created by the first :func:`instrument` call;
    until then :meth:`read` returns None.
    """

    def __init__(self) -> None:
        self._variable: Any = None
        self._source: Any = None

    def variable(self) -> Any:
        """The totals variable (created on the CPU on first use)."""
        import tensorflow as tf

        if self._variable is None:
            with tf.init_scope(), tf.device("/CPU:0"):
                self._variable = tf.Variable(
                    tf.zeros([3], tf.float64), trainable=False, name="tfaccel_input_clock"
                )
        return self._variable

    def read(self) -> tuple[float, int, int] | None:
        """The totals now: wait seconds, fetches, examples (None before any instrumenting)."""
        if self._variable is None:
            return None
        wait, fetches, examples = self._variable.numpy().tolist()
        return wait, int(fetches), int(examples)

    @property
    def source(self) -> Any:
        """The last dataset instrumented, while it is alive (a synthetic batch comes from it)."""
        return self._source() if self._source is not None else None

    @source.setter
    def source(self, dataset: Any) -> None:
        try:
            self._source = weakref.ref(dataset)
        except TypeError:  # not weak-referenceable: keep it
            self._source = lambda: dataset


def difference(
    before: tuple[float, int, int] | None, after: tuple[float, int, int] | None
) -> tuple[float | None, int | None, int]:
    """What happened between two :meth:`InputClock.read`: wait, examples, fetches."""
    if after is None:
        return None, None, 0
    base = before or (0.0, 0, 0)
    fetches = after[1] - base[1]
    if fetches <= 0:
        return None, None, 0
    return max(0.0, after[0] - base[0]), after[2] - base[2], fetches


INPUT_CLOCK = InputClock()


def instrument(dataset: Any, clock: InputClock | None = None) -> Any:
    """Wrap ``dataset`` so each batch records how long the consumer waited for it.

    Args:
        dataset: a ``tf.data.Dataset`` of batches, as given to ``model.fit``.
        clock: where stamps go (default :data:`INPUT_CLOCK`, which
            ``tfaccel.keras.PerformanceCallback`` reads).

    Returns:
        A dataset with the same elements, cardinality and options.

    Raises:
        UsageError: ``dataset`` is not a ``tf.data.Dataset``, or already ends on a device.

    Example:
        >>> model.fit(tfaccel.keras.instrument(ds), callbacks=[PerformanceCallback()])
    """
    import tensorflow as tf

    target = INPUT_CLOCK if clock is None else clock
    if not isinstance(dataset, tf.data.Dataset):
        raise UsageError(
            "instrument() wraps a tf.data.Dataset",
            expected="a tf.data.Dataset",
            received=type(dataset).__name__,
            fix="build a dataset (tfaccel.data.pipeline((x, y), batch_size)) and wrap that",
        )
    placed = str(getattr(getattr(dataset, "_variant_tensor", None), "device", "") or "")
    if "GPU" in placed.upper() or "TPU" in placed.upper():
        raise UsageError(
            "This dataset already ends on a device (prefetch_to_device), so its input wait "
            "cannot be measured at the end of the pipeline",
            expected="a dataset whose last stage runs on the host",
            received=f"a dataset placed on {placed}",
            fix="instrument the dataset before prefetch_to_device, or profile without device "
            "prefetch to see the input wait",
        )
    options = dataset.options()
    ds = dataset
    injects = options.experimental_optimization.inject_prefetch is not False
    if injects and options.autotune.enabled is not False and not _ends_with_prefetch(dataset):
        ds = ds.prefetch(tf.data.AUTOTUNE)  # what tf.data's inject_prefetch would have added
    starts = (
        tf.data.Dataset.from_tensors(tf.constant(0, tf.int64))
        .repeat()
        .map(lambda _: tf.timestamp())
    )

    totals = target.variable()

    def stamp(start: Any, element: Any) -> Any:
        first = tf.nest.flatten(element)[0]
        examples = tf.cast(tf.reduce_prod(tf.shape(first)[:1]), tf.float64)  # 1 for a scalar
        tick = totals.assign_add(
            tf.stack([tf.timestamp() - start, tf.constant(1.0, tf.float64), examples])
        )
        with tf.control_dependencies([tick]):
            return tf.nest.map_structure(tf.identity, element)

    wrapped = tf.data.Dataset.zip((starts, ds)).map(stamp)
    no_inject = tf.data.Options()
    no_inject.experimental_optimization.inject_prefetch = False
    target.source = dataset
    return wrapped.with_options(no_inject)


def _ends_with_prefetch(dataset: Any) -> bool:
    return type(dataset).__name__ in ("_PrefetchDataset", "PrefetchDataset")
