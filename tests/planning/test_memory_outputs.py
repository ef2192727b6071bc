"""The step traced for the memory model on a model of several named outputs, each with its own
loss (the keras.io functional API's ticket model): targets in the outputs' structure."""

from __future__ import annotations

from typing import Any

from tfaccel.planning import AllocatorRules, simulate
from tfaccel.planning.trace import trace_step

EXACT = AllocatorRules("exact", granularity=1)


def _two_outputs(as_dict: bool) -> Any:
    import keras

    features = keras.Input(shape=(6,), name="features")
    hidden = keras.layers.Dense(8, activation="relu")(features)
    priority = keras.layers.Dense(1, name="priority")(hidden)
    department = keras.layers.Dense(4, name="department")(hidden)
    losses: Any
    if as_dict:
        outputs: Any = {"priority": priority, "department": department}
        losses = {"priority": "mse", "department": "sparse_categorical_crossentropy"}
        weights: Any = {"priority": 1.0, "department": 0.2}
    else:
        outputs = [priority, department]
        losses = ["mse", "sparse_categorical_crossentropy"]
        weights = [1.0, 0.2]
    model = keras.Model(features, outputs)
    model.compile(optimizer="sgd", loss=losses, loss_weights=weights)
    return model


def test_a_dict_of_named_outputs_gets_a_dict_of_targets_each_for_its_own_loss() -> None:
    for as_dict in (True, False):
        step = trace_step(_two_outputs(as_dict), 16)
        placeholders = [op for op in step.ops if op.type == "Placeholder" and op.phase == "other"]
        # The features, and a target per output: integer labels for the sparse loss.
        dtypes = sorted(t.dtype for op in placeholders for t in op.outputs)
        assert dtypes.count("int64") == 1, dtypes
        assert simulate(step, 16, rules=EXACT, margin=0.0).peak_bytes > 0
