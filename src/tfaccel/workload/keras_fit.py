"""Replace ``keras.Model.fit`` (or another method of ``keras.Model``) for the duration of a
block, and put it back as it was.

The one place that patches ``fit``: :func:`tfaccel.workload.capture` stops a script at its
``fit`` (or first ``train_on_batch``) call with it, and at an optimizer step its own loop takes
outside them; ``tfaccel profile`` adds its callback to every ``fit`` call.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["optimizer_base", "replaced_fit", "replaced_method"]


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
    owner: type | None = None,
) -> Iterator[None]:
    """:func:`replaced_fit` for the method ``name`` of ``owner`` (default ``keras.Model``:
    ``train_on_batch``; the Keras optimizers' base class: ``apply``)."""
    if owner is None:
        import keras

        owner = keras.Model
    original = getattr(owner, name)
    own = name in owner.__dict__
    setattr(owner, name, make(original, inspect.signature(original)))
    try:
        yield
    finally:
        if own:
            setattr(owner, name, original)
        else:
            delattr(owner, name)


def optimizer_base() -> type:
    """The class that defines the Keras optimizers' ``apply`` (every ``apply_gradients``
    and every wrapper's ``apply`` ends in it)."""
    import keras

    return next(c for c in keras.optimizers.Optimizer.__mro__ if "apply" in c.__dict__)
