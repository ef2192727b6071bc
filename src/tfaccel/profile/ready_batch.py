"""Re-run a Keras model's training steps on one batch that is ready on the device.

The model's own compiled train function (the one ``fit`` calls, with its per-call Python
work, so only the input differs) is fed one batch repeated from memory
(``Dataset.from_tensors(batch).repeat()``; on a GPU, ``prefetch_to_device`` puts it on the
GPU ahead of each step): no input pipeline to wait for. If the real steps took longer, the
difference is what the input costs. The model's weights and optimizer state are saved before
and restored after, so the extra steps do not train it.
"""

from __future__ import annotations

import time
from typing import Any

from tfaccel.core.timing import Summary, summarize
from tfaccel.profile.measurement import SyntheticRun

__all__ = ["first_batch", "rerun"]


def first_batch(dataset: Any) -> Any:
    """One element of ``dataset`` (runs the pipeline once)."""
    return next(iter(dataset.take(1)))


def rerun(
    model: Any,
    batch: Any,
    real_step_s: Summary,
    *,
    steps: int = 20,
    warmup: int = 3,
    restore: bool = True,
) -> SyntheticRun:
    """Time ``steps`` training steps of ``model`` on ``batch`` placed on the device.

    Args:
        model: a compiled Keras model.
        batch: one element as ``fit`` gets it (e.g. ``(x, y)``).
        real_step_s: the real run's step times (input wait plus step), to compare with.
        steps: timed steps.
        warmup: steps run first and discarded (tracing the function).
        restore: put the weights and optimizer state back afterwards.

    Returns:
        The synthetic steps' times against the real ones.
    """
    import tensorflow as tf

    ready = tf.data.Dataset.from_tensors(batch).repeat()
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        ready = ready.apply(tf.data.experimental.prefetch_to_device(gpus[0].name, 1))
    iterator = iter(ready)
    train_function = model.make_train_function() or model.train_function
    variables = list(model.variables)
    if getattr(model, "optimizer", None) is not None:
        variables += list(model.optimizer.variables)
    saved = [(v, v.numpy()) for v in variables] if restore else []
    times = []
    try:
        for i in range(warmup + steps):
            begin = time.perf_counter()
            _wait(train_function(iterator))
            if i >= warmup:
                times.append(time.perf_counter() - begin)
    finally:
        for variable, value in saved:
            variable.assign(value)
    return SyntheticRun(steps=steps, step_s=summarize(times), real_step_s=real_step_s)


def _wait(logs: Any) -> None:
    """Read every logged value to the host, as Keras does before calling the callbacks."""
    import tensorflow as tf

    for leaf in tf.nest.flatten(logs):
        if hasattr(leaf, "numpy"):
            leaf.numpy()
