"""The timed ``fit`` call of bench and tune (``TrainingSampler``): the steps it counts are the
steps that ran, with one or several steps per call of Keras' train function; real TensorFlow."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tfaccel.bench.datasets import ImageData
from tfaccel.bench.training import TrainConfig, TrainingSampler


def _model(steps_per_execution: int) -> Any:
    import keras

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(3)])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.steps_per_execution = steps_per_execution
    return model


def _data(rows: int) -> ImageData:
    rng = np.random.default_rng(0)
    x = rng.random((rows, 8)).astype("float32")
    return ImageData(x, rng.integers(0, 3, rows).astype("int32"), "test data")


@pytest.mark.parametrize(
    "spe, rows, batch",
    [(1, 640, 32), (4, 640, 32), (8, 320, 32)],  # 8 x 2 calls need 512 rows: only 320 here
    ids=["one-step", "four-steps", "short-data"],
)
def test_the_sampler_counts_the_steps_that_ran(spe: int, rows: int, batch: int) -> None:
    model = _model(spe)
    data = _data(rows)
    sampler = TrainingSampler(
        model, TrainConfig("numpy", batch, "float32", False), data, None, 1, 0.05
    )
    sampler()  # the warm-up sets the step count
    before = int(model.optimizer.iterations.numpy())
    seconds_per_image = sampler()
    ran = int(model.optimizer.iterations.numpy()) - before
    (_, first), (_, last) = sampler.marks[0], sampler.marks[-1]
    assert sampler.steps % spe == 0 and sampler.steps >= 2 * spe
    timed = min(last, -(-min(sampler.steps * batch, rows) // batch) - 1) - first
    assert timed == ran - spe  # every step after the first call of the train function
    assert seconds_per_image > 0
    assert sampler.step_times[-1] == pytest.approx(seconds_per_image * batch)
