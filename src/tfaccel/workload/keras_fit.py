"""Replace ``keras.Model.fit`` (or another method of ``keras.Model``) for the duration of a
block, and put it back as it was.

The one place that patches ``fit``: :func:`tfaccel.workload.capture` stops a script at its
``fit`` (or first ``train_on_batch``) call with it, ``tfaccel profile`` adds its callback to
every ``fit`` call.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["replaced_fit", "replaced_method"]


@contextlib.contextmanager
def replaced_fit(
    make: Callable[[Callable[..., Any], inspect.Signature], Callable[..., Any]],
) -> Iterator[None]:
    """While the block runs, ``keras.Model.fit`` is ``make(original, signature)``: the
    function ``make`` returns, given Keras' own ``fit`` and its signature. Afterwards
    ``keras.Model`` has its own ``fit`` again, or none (the inherited one) where it had none."""
    with replaced_method("fit", make):
        yield


@contextlib.contextmanager
def replaced_method(
    name: str,
    make: Callable[[Callable[..., Any], inspect.Signature], Callable[..., Any]],
) -> Iterator[None]:
    """:func:`replaced_fit` for the method ``name`` of ``keras.Model`` (``train_on_batch``)."""
    import keras

    original = getattr(keras.Model, name)
    own = name in keras.Model.__dict__
    setattr(keras.Model, name, make(original, inspect.signature(original)))
    try:
        yield
    finally:
        if own:
            setattr(keras.Model, name, original)
        else:
            delattr(keras.Model, name)
