"""tfaccel.distribute against real TensorFlow in one process split into two logical CPUs.

The scenario below runs in a fresh process (TensorFlow's devices are fixed at start): the
strategy chosen for two logical CPUs, MirroredStrategy training against one device, resume
from a checkpoint, bad arguments, ``split`` against the unsplit model, and a small
``scaling`` run. The tests assert on what it printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import clean_env, emit, outcome, run_scenario

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def seen() -> dict[str, Any]:
    return run_scenario(__file__)


# --- strategy --------------------------------------------------------------------------------


def test_two_logical_cpus_give_a_mirrored_strategy_with_its_reason(seen: dict[str, Any]) -> None:
    choice = seen["choice"]
    assert (choice["kind"], choice["num_replicas"], choice["strategy"]) == (
        "mirrored",
        2,
        "MirroredStrategy",
    )
    assert "split into 2 logical devices" in seen["choice_text"]
    assert seen["same_choice_again"] is True


# --- data parallel ---------------------------------------------------------------------------


def test_mirrored_training_on_two_logical_cpus_matches_one_device(seen: dict[str, Any]) -> None:
    assert seen["mirrored_vs_one_device_max_diff"] < 1e-5
    mirrored, single = seen["mirrored"], seen["one_device"]
    assert mirrored["num_replicas"] == 2 and single["num_replicas"] == 1
    for a, b in zip(mirrored["history"], single["history"], strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["metrics"]["mae"] == pytest.approx(b["metrics"]["mae"], rel=1e-5)
    assert mirrored["history"][1]["loss"] < mirrored["history"][0]["loss"]


def test_linear_learning_rate_scaling_multiplies_by_the_replicas(seen: dict[str, Any]) -> None:
    assert seen["scaled_learning_rate"] == pytest.approx(0.2)


def test_a_run_resumed_from_its_checkpoint_ends_where_an_uninterrupted_run_does(
    seen: dict[str, Any],
) -> None:
    assert seen["first_part"]["global_step"] == 4
    resumed = seen["resumed"]
    assert (resumed["start_step"], resumed["global_step"], resumed["steps_run"]) == (4, 8, 4)
    assert seen["resumed_vs_straight_max_diff"] == 0.0
    assert seen["resumed_again"]["steps_run"] == 0  # nothing left to do
    # saved every 2 steps, the newest 3 kept (max_checkpoints)
    assert seen["checkpoint_files"] == ["checkpoint", "ckpt-4", "ckpt-6", "ckpt-8"]


def test_resuming_with_another_global_batch_is_refused(seen: dict[str, Any]) -> None:
    found = seen["resume_other_batch"]
    assert found["error"] == "CheckpointError"
    assert "global_batch_size=16" in found["message"] and "new checkpoint_dir" in found["message"]


def test_resuming_another_models_checkpoint_is_refused_and_leaves_it(
    seen: dict[str, Any],
) -> None:
    found = seen["resume_other_model"]
    assert found.get("error") == "CheckpointError", found
    message = found["message"]
    assert "was written by another model" in message
    assert "(3, 4)" in message and "(3, 5)" in message  # TF line: what does not match
    assert "value=" not in message and message.count("Received:") == 1
    assert "Expected: a checkpoint of this model" in message
    assert "ckpt-8" in message  # the checkpoint file, with its directory
    assert "pass a new checkpoint_dir, or delete" in message and "to start over" in message
    assert seen["resume_other_model_is_usage_error"]
    assert seen["resume_other_model_left_the_directory"]


@pytest.mark.parametrize(
    ("case", "error", "text"),
    [
        ("not_divisible", "UsageError", "15 examples cannot be split evenly over 2 replicas"),
        ("loss_object", "UsageError", "not a per-example function"),
        ("too_many_steps", "UsageError", "ran out of examples"),
        ("unknown_length", "UsageError", "pass steps_per_epoch"),
        ("zero_epochs", "UsageError", "invalid epochs"),
        ("every_without_dir", "UsageError", "no checkpoint_dir"),
    ],
)
def test_bad_training_arguments_are_clear_errors(
    seen: dict[str, Any], case: str, error: str, text: str
) -> None:
    found = seen["bad"][case]
    assert found.get("error") == error, found
    assert text in found["message"]


# --- model parallel --------------------------------------------------------------------------


def test_split_over_two_logical_devices_gives_the_unsplit_outputs(seen: dict[str, Any]) -> None:
    split = seen["split"]
    assert split["max_diff"] == 0.0
    assert split["variable_devices"] == ["CPU:0", "CPU:0", "CPU:1", "CPU:1"]


def test_split_balances_by_parameters_and_reports_the_crossing(seen: dict[str, Any]) -> None:
    placement = seen["split"]["placement"]
    stages = placement["stages"]
    assert [s["device"] for s in stages] == ["/device:CPU:0", "/device:CPU:1"]
    assert [s["params"] for s in stages] == [8 * 32 + 32, 32 * 16 + 16 + 16 * 3 + 3]
    (crossing,) = placement["crossings"]
    assert crossing["shape"] == [32] and crossing["dtype"] == "float32"
    assert crossing["bytes_per_example"] == 128
    assert seen["split"]["bytes_per_step_64"] == 128 * 64 * 2
    assert "output of" in seen["split"]["text"]


def test_split_at_given_boundaries_and_through_training(seen: dict[str, Any]) -> None:
    split = seen["split"]
    assert split["bounded_stage_layers"] == [1, 2]
    assert split["bounded_max_diff"] == 0.0
    assert split["fit_loss_finite"] is True


@pytest.mark.parametrize(
    ("case", "error", "text"),
    [
        ("missing_device", "RuntimeSetupError", "does not exist"),
        ("branching", "UsageError", "is not a chain of layers"),
        ("subclassed", "UsageError", "has no defined inputs"),
        ("too_many_devices", "UsageError", "3 devices for a chain of 2 layers"),
        ("bad_boundaries", "UsageError", "do not cut"),
    ],
)
def test_split_refuses_what_it_cannot_do(
    seen: dict[str, Any], case: str, error: str, text: str
) -> None:
    found = seen["split_bad"][case]
    assert found.get("error") == error, found
    assert text in found["message"]


# --- scaling ---------------------------------------------------------------------------------


def test_scaling_reports_sane_numbers_and_says_logical_cpus_share_cores(
    seen: dict[str, Any],
) -> None:
    report = seen["scaling"]
    assert [r["replicas"] for r in report["rows"]] == [1, 2]
    assert [r["global_batch"] for r in report["rows"]] == [8, 16]
    for row in report["rows"]:
        assert row["examples_per_second"] > 0 and row["step"]["median"] > 0
        assert 0 < row["efficiency"] <= 2.5
        assert 0 <= row["communication_share"] <= 1
    assert report["rows"][0]["speedup"] == pytest.approx(1.0)
    assert any("share" in note and "cores" in note for note in report["notes"])
    assert "examples/s" in seen["scaling_text"]
    assert seen["scaling_too_many"]["error"] == "UsageError"


def test_the_scaling_benchmark_prints_json() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_scaling.py"),
            "--replicas",
            "1,2",
            "--steps",
            "2",
            "--repeats",
            "1",
            "--per-replica-batch",
            "8",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [row["replicas"] for row in report["rows"]] == [1, 2]
    assert report["device_type"] in ("CPU", "GPU")


# --- the scenario ----------------------------------------------------------------------------


def _scenario() -> dict[str, Any]:
    import os
    import tempfile

    import tfaccel

    tfaccel.setup(logical_devices=2, deterministic=True)
    import keras
    import numpy as np
    import tensorflow as tf

    import tfaccel.distribute as dist

    out: dict[str, Any] = {}
    choice = dist.strategy(environ={})
    out["choice"], out["choice_text"] = choice.to_dict(), str(choice)
    out["same_choice_again"] = dist.strategy(environ={}) is choice

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype("float32")
    y = (x @ np.array([[1.0], [2.0], [-1.0]], "float32")).astype("float32")

    def model_fn() -> Any:
        return keras.Sequential(
            [keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)]
        )

    def dataset_fn(epoch: int) -> Any:
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64, seed=10 + epoch)

    common: dict[str, Any] = {
        "seed": 3,
        "learning_rate": 0.05,
        "optimizer_fn": lambda lr: keras.optimizers.Adam(lr),
        "verbose": False,
    }
    mirrored = dist.train(
        model_fn, dataset_fn, 2, 16, strategy=choice, metrics={"mae": "mae"}, **common
    )
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    single = dist.train(model_fn, dataset_fn, 2, 16, strategy=one, metrics={"mae": "mae"}, **common)
    out["mirrored"], out["one_device"] = mirrored.to_dict(), single.to_dict()
    out["mirrored_vs_one_device_max_diff"] = max(
        float(np.abs(a - b).max())
        for a, b in zip(mirrored.model.get_weights(), single.model.get_weights(), strict=True)
    )
    scaled = dist.train(
        model_fn, dataset_fn, 1, 16, strategy=choice, steps_per_epoch=1,
        scale_learning_rate=True, seed=3, learning_rate=0.1, verbose=False,
    )  # fmt: skip
    out["scaled_learning_rate"] = scaled.learning_rate

    # resume: 1 epoch with checkpoints, then on to 2 epochs from the same directory
    ckpt = tempfile.mkdtemp()
    kwargs = dict(common, strategy=choice, checkpoint_dir=ckpt, checkpoint_every=2)
    out["first_part"] = dist.train(model_fn, dataset_fn, 1, 16, **kwargs).to_dict()
    resumed = dist.train(model_fn, dataset_fn, 2, 16, **kwargs)
    out["resumed"] = resumed.to_dict()
    straight = dist.train(model_fn, dataset_fn, 2, 16, strategy=choice, **common)
    out["resumed_vs_straight_max_diff"] = max(
        float(np.abs(a - b).max())
        for a, b in zip(resumed.model.get_weights(), straight.model.get_weights(), strict=True)
    )
    out["resumed_again"] = dist.train(model_fn, dataset_fn, 2, 16, **kwargs).to_dict()
    out["checkpoint_files"] = sorted({name.split(".")[0] for name in os.listdir(ckpt)})
    out["resume_other_batch"] = outcome(lambda: dist.train(model_fn, dataset_fn, 3, 32, **kwargs))

    def other_model_fn() -> Any:  # another shape: Dense(5) where the checkpoint has Dense(4)
        return keras.Sequential(
            [keras.Input((3,)), keras.layers.Dense(5, activation="tanh"), keras.layers.Dense(1)]
        )

    def listing() -> dict[str, Any]:
        return {
            entry.name: (entry.stat().st_size, entry.stat().st_mtime_ns)
            for entry in os.scandir(ckpt)
        }

    before = listing()
    out["resume_other_model"] = outcome(
        lambda: dist.train(other_model_fn, dataset_fn, 3, 16, **kwargs)
    )
    out["resume_other_model_left_the_directory"] = listing() == before
    from tfaccel.core.errors import UsageError

    out["resume_other_model_is_usage_error"] = issubclass(dist.CheckpointError, UsageError)

    def bad(**changes: Any) -> dict[str, Any]:
        args: dict[str, Any] = {"epochs": 1, "global_batch_size": 16, "strategy": choice}
        args.update(changes)
        return outcome(lambda: dist.train(model_fn, args.pop("dataset_fn", dataset_fn), **args))

    out["bad"] = {
        "not_divisible": bad(global_batch_size=15),
        "loss_object": bad(loss=keras.losses.MeanSquaredError()),
        "too_many_steps": bad(steps_per_epoch=5),
        "unknown_length": bad(dataset_fn=lambda e: dataset_fn(e).filter(lambda a, b: True)),
        "zero_epochs": bad(epochs=0),
        "every_without_dir": bad(checkpoint_every=2),
    }
    out["split"], out["split_bad"] = _split_cases(keras, np, tf, dist)

    report = dist.scaling(replica_counts=(1, 2), per_replica_batch=8, steps=2, repeats=2)
    out["scaling"], out["scaling_text"] = report.to_dict(), str(report)
    out["scaling_too_many"] = outcome(lambda: dist.scaling(replica_counts=(4,)))
    return out


def _split_cases(keras: Any, np: Any, tf: Any, dist: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(3),
        ]
    )
    x = np.random.default_rng(1).normal(size=(5, 8)).astype("float32")
    parallel = dist.split(model, ["CPU:0", "CPU:1"])
    found: dict[str, Any] = {
        "max_diff": float(np.abs(parallel(x).numpy() - model(x).numpy()).max()),
        "variable_devices": [
            tf.DeviceSpec.from_string(v.value.device).to_string().split("device:")[-1]
            for v in parallel.weights
        ][:4],
        "placement": parallel.placement.to_dict(),
        "bytes_per_step_64": parallel.placement.bytes_per_step(64),
        "text": str(parallel.placement),
    }
    bounded = dist.split(model, ["/cpu:0", "/cpu:1"], boundaries=[1])
    found["bounded_stage_layers"] = [len(s.layers) for s in bounded.placement.stages]
    found["bounded_max_diff"] = float(np.abs(bounded(x).numpy() - model(x).numpy()).max())
    bounded.compile(optimizer="sgd", loss="mse")
    history = bounded.fit(x, np.zeros((5, 3), "float32"), epochs=1, verbose=0)
    found["fit_loss_finite"] = bool(np.isfinite(history.history["loss"][-1]))

    inputs = keras.Input((4,))
    a = keras.layers.Dense(4)(inputs)
    branching = keras.Model(inputs, keras.layers.Add()([a, keras.layers.Dense(4)(a)]))

    class Subclassed(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, inputs: Any) -> Any:
            return self.dense(inputs)

    subclassed = Subclassed()
    subclassed(tf.zeros((1, 3)))
    small = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2), keras.layers.Dense(1)])
    bad = {
        "missing_device": outcome(lambda: dist.split(model, ["CPU:0", "CPU:7"])),
        "branching": outcome(lambda: dist.split(branching, ["CPU:0", "CPU:1"])),
        "subclassed": outcome(lambda: dist.split(subclassed, ["CPU:0", "CPU:1"])),
        "too_many_devices": outcome(lambda: dist.split(small, ["CPU:0", "CPU:1", "CPU:0"])),
        "bad_boundaries": outcome(lambda: dist.split(model, ["CPU:0", "CPU:1"], boundaries=[3])),
    }
    return found, bad


if __name__ == "__main__":
    emit(_scenario())
