"""The input of data-parallel training: each global batch split over the replicas, exactly.

``dataset_fn(epoch)`` gives the examples of an epoch, one by one, in an order that depends on
the epoch only. Global batch ``k`` of the epoch is examples ``[k*G, (k+1)*G)``, whatever the
number of workers and replicas: each worker keeps its contiguous slice of every global batch
and hands one piece of it to each of its replicas. So one process, two logical devices and
two workers all take the same gradient step from the same examples, and resuming at step
``s`` of an epoch is skipping ``s`` global batches.

Example:
    >>> def dataset_fn(epoch):
    ...     ds = tf.data.Dataset.from_tensor_slices((x, y))
    ...     return ds.shuffle(len(x), seed=1000 + epoch)   # a new order each epoch, reproducible
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfaccel.core.errors import UsageError

__all__ = ["DatasetFn", "check_divisible", "input_fn", "steps_per_epoch"]

DatasetFn = Callable[[int], Any]
"""``dataset_fn(epoch) -> tf.data.Dataset`` of single ``(features, labels)`` examples."""


def check_divisible(global_batch_size: int, num_replicas: int, strategy: str) -> int:
    """The per-replica batch size, or a clear error when the replicas cannot share it evenly.

    Raises:
        UsageError: ``global_batch_size`` is not a multiple of ``num_replicas``.

    Example:
        >>> check_divisible(64, 4, "MirroredStrategy")
        16
    """
    if global_batch_size % num_replicas:
        lower = global_batch_size - global_batch_size % num_replicas
        raise UsageError(
            f"The global batch of {global_batch_size} examples cannot be split evenly over "
            f"{num_replicas} replicas",
            expected=f"a global_batch_size that is a multiple of {num_replicas} (the replicas "
            f"of {strategy})",
            received=f"global_batch_size={global_batch_size}",
            fix=f"use global_batch_size={lower or num_replicas} or "
            f"{lower + num_replicas} (per replica: global_batch_size / {num_replicas})",
        )
    return global_batch_size // num_replicas


def steps_per_epoch(dataset: Any, global_batch_size: int, requested: int | None) -> int:
    """The global steps of one epoch: ``requested``, or the full global batches in ``dataset``.

    Raises:
        UsageError: the dataset's length is unknown or infinite and no ``requested`` count
            was given, or it holds less than one global batch.
    """
    if requested is not None:
        return requested
    import tensorflow as tf

    cardinality = int(dataset.cardinality())
    if cardinality in (int(tf.data.INFINITE_CARDINALITY), int(tf.data.UNKNOWN_CARDINALITY)):
        kind = "infinite" if cardinality == int(tf.data.INFINITE_CARDINALITY) else "unknown"
        raise UsageError(
            f"The number of steps per epoch cannot be known: dataset_fn(0) has {kind} length",
            expected="steps_per_epoch=N, or a dataset of known length (from_tensor_slices, "
            "range, or .apply(tf.data.experimental.assert_cardinality(n)))",
            received=f"a dataset of {kind} cardinality",
            fix="pass steps_per_epoch to train()",
        )
    if cardinality < global_batch_size:
        raise UsageError(
            "dataset_fn(0) has fewer examples than one global batch",
            expected=f"at least global_batch_size={global_batch_size} examples",
            received=f"{cardinality} examples",
            fix="use a smaller global_batch_size or more data",
        )
    return cardinality // global_batch_size


def input_fn(
    dataset_fn: DatasetFn, epoch: int, global_batch_size: int, steps: int, skip: int
) -> Callable[[Any], Any]:
    """The function ``strategy.distribute_datasets_from_function`` calls once per worker.

    Args:
        dataset_fn: the user's examples of an epoch.
        epoch: the epoch to read.
        global_batch_size: examples per global step.
        steps: global steps in the epoch.
        skip: global steps of the epoch already done (resuming).

    Returns:
        ``fn(input_context) -> tf.data.Dataset`` of this worker's per-replica batches: one
        per local replica and global step, in replica order.
    """

    def make(context: Any) -> Any:
        import tensorflow as tf

        workers = context.num_input_pipelines
        per_worker = global_batch_size // workers
        per_replica = context.get_per_replica_batch_size(global_batch_size)
        dataset = dataset_fn(epoch).batch(per_worker, drop_remainder=True)
        dataset = dataset.take(steps * workers).skip(skip * workers)
        if workers > 1:
            dataset = dataset.shard(workers, context.input_pipeline_id)
        if per_replica != per_worker:
            dataset = dataset.rebatch(per_replica, drop_remainder=True)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return make
