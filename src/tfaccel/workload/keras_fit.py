"""Replace ``keras.Model.fit`` for the duration of a block, and put it back as it was.

The one place that patches ``fit``: :func:`tfaccel.workload.capture` stops a script at its
``fit`` call with it, ``tfaccel profile`` adds its callback to every ``fit`` call.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["replaced_fit"]


@contextlib.contextmanager
def replaced_fit(
    make: Callable[[Callable[..., Any], inspect.Signature], Callable[..., Any]],
) -> Iterator[None]:
    """While the block runs, ``keras.Model.fit`` is ``make(original, signature)``: the
    function ``make`` returns, given Keras' own ``fit`` and its signature. Afterwards
    ``keras.Model`` has its own ``fit`` again, or none (the inherited one) where it had none."""
    import keras

    original = keras.Model.fit
    own = "fit" in keras.Model.__dict__
    keras.Model.fit = make(original, inspect.signature(original))
    try:
        yield
    finally:
        if own:
            keras.Model.fit = original
        else:
            del keras.Model.fit
