"""Helpers shared by the tuner's tests on real TensorFlow (tests/tuning/test_tune_*.py).

- ``dense_model``: the tiny compiled Keras model a trial builds: 8 inputs, one hidden layer,
  3 classes.

A helper used by more than one of these modules goes here.
"""

from __future__ import annotations

from typing import Any


def dense_model(hidden: int, name: str) -> Any:
    """8 inputs, a ``hidden``-unit relu layer and a 3-way softmax, compiled with sgd; keras is
    imported here, when a trial builds the model."""
    import keras

    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dense(3, activation="softmax"),
        ],
        name=name,
    )
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model
