"""Convergence check: the training loop learns real data (the UCI handwritten digits, bundled).

Timing a training loop says nothing about whether it trains. This check fits a small MLP on
the 8x8 digits (1,347 training and 450 test images, stratified, fixed seed) with the same
Keras ``fit`` path the benchmarks use, and requires a test accuracy of at least 0.95.
"""

from __future__ import annotations

import time

from tfaccel import models
from tfaccel.bench.datasets import digits_split
from tfaccel.bench.results import BenchMeasurement
from tfaccel.bench.targets import BenchTarget

__all__ = ["ACCURACY_THRESHOLD", "digits_convergence"]

ACCURACY_THRESHOLD = 0.95


def digits_convergence(target: BenchTarget, *, epochs: int = 30, seed: int = 0) -> BenchMeasurement:
    """Train an MLP (64 hidden units) on the digits and measure its test accuracy.

    Args:
        target: where to train (its first device).
        epochs: training epochs (batch 32, Adam 1e-2... 30 reach ~0.97).
        seed: seeds Keras, NumPy and Python (``keras.utils.set_random_seed``) for the run.

    Returns:
        A ``test_accuracy`` measurement (one sample) whose ``extra["passed"]`` says whether it
        reached :data:`ACCURACY_THRESHOLD`.

    Raises:
        DataError: the bundled digits cannot be read (a damaged install).
    """
    import keras
    import tensorflow as tf

    train, test = digits_split(seed=seed)
    keras.utils.set_random_seed(seed)
    start = time.perf_counter()
    with tf.device(target.tf_devices[0]):
        model = models.mlp(input_shape=(8, 8), hidden=(64,), dropout=0.0)
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate=3e-3),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
        )
        model.fit(train.x, train.y, batch_size=32, epochs=epochs, verbose=0)
        _, accuracy = model.evaluate(test.x, test.y, verbose=0)
    return BenchMeasurement(
        "digits",
        {"device": target.name, "name": "MLP 64 on digits"},
        "test_accuracy",
        "fraction",
        [float(accuracy)],
        {
            "threshold": ACCURACY_THRESHOLD,
            "passed": float(accuracy) >= ACCURACY_THRESHOLD,
            "epochs": epochs,
            "train_images": len(train),
            "test_images": len(test),
            "seconds": time.perf_counter() - start,
        },
    )
