"""The Keras model given to ``setup(model=...)``: layer sizes that tensor cores run slowly."""

from __future__ import annotations

from typing import Any

__all__ = ["check_model_dims"]


def check_model_dims(model: Any) -> list[str]:
    """List a Keras model's layers whose dimensions are not multiples of 8.

    Tensor cores run float16 matrix math fastest when the input and output features of a
    layer (units, filters, channels) are multiples of 8; ``setup(precision=..., model=model)``
    warns with these messages when the policy is mixed_float16.

    Args:
        model: a built Keras model (or layer).

    Returns:
        One message per layer with such a dimension; empty when all are multiples of 8.

    Example:
        >>> model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(10)])
        >>> check_model_dims(model)
        ["layer 'dense' (Dense): input features 20, output features 10 are not multiples of 8"]
    """
    messages = []
    for layer in _layers(model):
        weights = getattr(layer, "kernel", None)
        if weights is None:
            weights = getattr(layer, "embeddings", None)
        shape = tuple(getattr(weights, "shape", ()))
        if len(shape) < 2:
            continue
        dims = {"input features": shape[-2], "output features": shape[-1]}
        bad = [f"{what} {size}" for what, size in dims.items() if int(size) % 8]
        if bad:
            name = f"layer {layer.name!r} ({type(layer).__name__})"
            messages.append(f"{name}: {', '.join(bad)} not multiples of 8")
    return messages


def _layers(model: Any) -> list[Any]:
    found = [model]
    for layer in getattr(model, "layers", None) or []:
        found += _layers(layer) if layer is not model else []
    return found
