"""The architecture fingerprint of a Keras model: which model a stored measurement was made on.

``tfaccel bench`` and ``tfaccel tune`` store each training measurement with the fingerprint of
the model they timed; ``setup(precision="auto", jit="auto", model=model)`` applies a stored
measurement only to a model with the same fingerprint.

What it covers: the model's layers in order (nested models flattened), each as its class name,
the shapes of its weights and the shape of its output (batch dimension left out), and the
model's input shapes (so a Sequential model and the same layers built functionally agree).
What it leaves out: names (Keras numbers them per process), dtypes and
dtype policies (the same model in float32 and in mixed_bfloat16 is one architecture: precision
is what a measurement decides), and hyper-parameters that change no shape (dropout rates,
activation functions, initialisers). Two models whose layers have the same types and shapes in
the same order but are wired differently share a fingerprint.

It needs a built model (``keras.Input`` first, or called once) to see shapes; it never trains,
never imports Keras, and reads only public attributes (``layers``, ``weights``, ``output``,
``inputs``), so it runs on any object that has them.

Example:
    >>> model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(8)])  # doctest: +SKIP
    >>> fingerprint(model)                                                      # doctest: +SKIP
    '5b0d1c9e2f7a4c31'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

__all__ = ["fingerprint", "short", "structure"]

Shape = list[int | None]


def fingerprint(model: Any) -> str:
    """A stable 16-hex-digit digest of the model's architecture (see the module's notes).

    Args:
        model: a Keras model (or layer); built, to cover its shapes.

    Returns:
        The digest of :func:`structure`'s document: equal for models of the same architecture,
        in any precision and any process.
    """
    text = json.dumps(structure(model), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def short(digest: str) -> str:
    """The first 8 digits of a fingerprint, for messages."""
    return digest[:8]


def structure(model: Any) -> dict[str, Any]:
    """What :func:`fingerprint` hashes: the input shapes and, per layer, its class name, the
    shapes of its weights and the shape of its output."""
    return {
        "inputs": [_shape(t, batch=True) for t in _list(_attribute(model, "inputs"))],
        "layers": [
            {
                "type": type(layer).__name__,
                "weights": [_shape(w) for w in _list(_attribute(layer, "weights"))],
                "output": _output(layer),
            }
            for layer in _leaves(model)
        ],
    }


def _leaves(model: Any) -> Iterator[Any]:
    """The layers of ``model`` in order, each nested model replaced by its own layers."""
    layers = _list(_attribute(model, "layers"))
    if not layers:
        if model is not None:
            yield model  # a single layer, or a model that lists no layers
        return
    for layer in layers:
        if layer is model or type(layer).__name__ == "InputLayer":  # its shape is in "inputs"
            continue
        if _list(_attribute(layer, "layers")):
            yield from _leaves(layer)
        else:
            yield layer


def _attribute(obj: Any, name: str) -> Any:
    """``obj.name``, or None when reading it raises (an unbuilt model's ``output``...)."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict):
        return [value[k] for k in sorted(value)]
    return [value]


def _shape(tensor: Any, *, batch: bool = False) -> Shape | None:
    """The shape of a tensor or variable as a list (None for unknown dimensions), without the
    batch dimension when ``batch``; None when it has no readable shape."""
    shape = _attribute(tensor, "shape")
    if shape is None:
        return None
    try:
        dims: Shape = [None if d is None else int(d) for d in tuple(shape)]
    except (TypeError, ValueError):
        return None
    return dims[1:] if batch else dims


def _output(layer: Any) -> Shape | list[Shape | None] | None:
    """The output shape(s) of a layer without the batch dimension (None when not built or
    shared between several calls)."""
    output = _attribute(layer, "output")
    if output is None:
        return None
    if isinstance(output, (list, tuple, dict)):
        return [_shape(t, batch=True) for t in _list(output)]
    return _shape(output, batch=True)
