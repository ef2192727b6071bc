"""A training run that ran out of memory: the plan says which batch fits on this device.

``tfaccel profile --model`` calls :func:`oom_answer` when the run raises an out-of-memory error
(``tf.errors.ResourceExhaustedError`` or ``MemoryError``): the ``oom`` finding then says what
the batch needs, what the device has, and the batch or gradient accumulation that fits.
"""

from __future__ import annotations

from typing import Any

from tfaccel.core.findings import Finding

__all__ = ["oom_answer"]


def oom_answer(
    exc: BaseException, model_fn: Any, batch_size: int, precision: str | None
) -> Finding:
    """The ``oom`` finding for ``exc``, raised while training ``model_fn``'s model at
    ``batch_size`` on the device Keras trains on here.

    When the plan cannot be made, the finding says why and keeps the general advice.
    """
    from tfaccel import inventory
    from tfaccel.planning.advice import memory_advice, oom_finding
    from tfaccel.planning.targets import training_device

    message = str(exc).strip().splitlines()
    seen = f"{type(exc).__name__}: {message[0] if message else ''}"[:300]
    device = training_device(inventory.current())
    if device.usable_bytes is not None:
        try:
            advice = memory_advice(
                model_fn,
                batch_size,
                device.usable_bytes,
                device=device.words,
                precision=precision,
                rules=device.rules,
            )
        except Exception as failed:  # the run's own error stays the news
            why = f"no plan: {type(failed).__name__}: {failed}"
        else:
            return oom_finding(advice, evidence=[seen], source="profile")
    else:
        why = f"no plan: {device.words}"
    return Finding(
        "oom",
        "fail",
        f"Out of memory at batch {batch_size}",
        [seen, why],
        "a smaller batch (tfaccel plan shows the largest that fits), "
        "or keras.mixed_precision.set_global_policy('mixed_float16')",
        source="profile",
        numbers={"batch_size": batch_size},
    )
