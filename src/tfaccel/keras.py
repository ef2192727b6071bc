"""Keras integration: ``PerformanceCallback`` and ``instrument``.

``PerformanceCallback`` is loaded on first use (it subclasses ``keras.callbacks.Callback``, so
it imports Keras and TensorFlow); importing this module imports neither.

Example:
    >>> from tfaccel.keras import PerformanceCallback, instrument
    >>> callback = PerformanceCallback(warmup_steps=5, log_every=50)
    >>> model.fit(instrument(ds), epochs=3, callbacks=[callback])  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tfaccel.profile.input_wait import instrument

if TYPE_CHECKING:
    from tfaccel.profile.keras_callback import PerformanceCallback

__all__ = ["PerformanceCallback", "instrument"]


def __getattr__(name: str) -> Any:
    if name == "PerformanceCallback":
        from tfaccel.profile.keras_callback import PerformanceCallback  # local: imports TensorFlow

        return PerformanceCallback
    raise AttributeError(f"module 'tfaccel.keras' has no attribute {name!r}")
