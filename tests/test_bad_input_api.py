"""Bad arguments to the Python API: one table, each row a clear TfaccelError that changes nothing.

Every row calls a public entry point with one bad argument and expects the error class and a
fragment of its message. Around each call the test records the scratch directory (the working
directory during the call, holding the temporary ``HOME`` and the results database's folder:
kind, size, SHA-256 and modification time of every entry, tests/files_around.py), the
environment and TensorFlow's configuration, and asserts that none of them changed: no file or
directory created or touched, no runtime setting applied. The rows share
this process's TensorFlow (imported once, for the configuration read-back); the arrays are tiny.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from files_around import assert_unchanged, snapshot
from runtime_helpers import tf_state

import tfaccel
from tfaccel import diagnosis, placement
from tfaccel.core.errors import (
    LogInputError,
    RuntimeSetupError,
    SnapshotError,
    TfaccelError,
    UsageError,
)
from tfaccel.diagnosis import LogText
from tfaccel.distribute import ClusterConfigError
from tfaccel.planning import PlanError
from tfaccel.runtime import parse_setting
from tfaccel.snapshot import Snapshot, load_snapshot
from tfaccel.store import StoreError
from tfaccel.tuning import SpaceError, TuneError

LONGEST_MESSAGE = 1500  # characters: a message never echoes a huge value in full


@dataclass(frozen=True)
class At:
    """A path in the scratch area, made by the fixture before the row runs.

    ``where`` is one of: "file" (an existing file), "dir" (an existing, empty directory),
    "readonly" (a directory this process cannot write), "missing" (a directory that does not
    exist), "link" (a symbolic link to "dir"), "file/" (the file's path with a trailing
    slash); ``below`` is joined to it.
    """

    where: str
    below: str = ""


@dataclass(frozen=True)
class Made:
    """A value the caller makes before the call (a dataset), made before the state is read."""

    make: Callable[[], Any]


def _empty_dataset() -> Any:
    import tensorflow as tf

    return tf.data.Dataset.range(0)


def _x(n: int = 6) -> np.ndarray:
    return np.arange(n * 2, dtype=np.float32).reshape(n, 2)


def _y(n: int = 6) -> np.ndarray:
    return np.arange(n, dtype=np.int64)


def _train(**changes: Any) -> Any:
    arguments: dict[str, Any] = {
        "model_fn": lambda: None,
        "dataset_fn": lambda epoch: None,
        "epochs": 1,
        "global_batch_size": 2,
        "verbose": False,
    }
    arguments.update(changes)
    return tfaccel.distribute.train(**arguments)


def _pipeline(**changes: Any) -> Any:
    arguments: dict[str, Any] = {"source": (_x(), _y()), "batch_size": 2}
    arguments.update(changes)
    return tfaccel.data.pipeline(**arguments)


def _timer(**options: Any) -> Any:
    from tfaccel.profile import StepTimer

    return StepTimer(**options)


def _callback(**options: Any) -> Any:
    from tfaccel.keras import PerformanceCallback

    return PerformanceCallback(**options)


def _no_model() -> Any:
    raise ValueError("no model today")


def _subclassed_model() -> Any:
    import keras

    class Net(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.dense = keras.layers.Dense(3)

        def call(self, x: Any) -> Any:
            return self.dense(x)

    return Net()


def _sequential_without_input() -> Any:
    import keras

    return keras.Sequential([keras.layers.Dense(3)])


def _keeper(objects: Any, **options: Any) -> Any:
    """A Checkpointer in ./ckpt (not created: every row is refused first) for ``objects``."""
    from tfaccel.distribute import Checkpointer

    return Checkpointer("ckpt", objects, **options)


def _checkpointer(directory: Any, **options: Any) -> Any:
    from tfaccel.distribute import Checkpointer

    return Checkpointer(directory, {}, **options)


class _Thing:
    """A class of no use to any call: passed as the class itself, or as an instance."""


def _generator() -> Any:
    return (i for i in range(2))


def _tune(**changes: Any) -> Any:
    arguments: dict[str, Any] = {
        "model_fn": _no_model,
        "data": (_x(), _y()),
        "store": False,
        "progress": False,
    }
    arguments.update(changes)
    return tfaccel.tune(**arguments)


def _launch(**changes: Any) -> Any:
    arguments: dict[str, Any] = {"script": "/no-such-dir/train.py", "workers": 2}
    arguments.update(changes)
    return tfaccel.distribute.launch(**arguments)


def _heartbeat(*args: Any, **options: Any) -> Any:
    return tfaccel.distribute.heartbeat(*args, environ={}, **options)


def _matmul(**options: Any) -> Any:
    square = np.ones((4, 4), np.float32)
    return tfaccel.kernels.matmul(square, square, **options)


_V = np.ones(4, np.float32)
_C = np.ones(4, np.complex64)
_TF_CONFIG_NAN = '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": NaN}}'


# (id, callable, positional arguments, keyword arguments, error class, message fragment)
ROWS: list[tuple[str, Callable[..., Any], tuple[Any, ...], dict[str, Any], type, str]] = [
    # --- the doctor ----------------------------------------------------------------------------
    ("doctor-log-int", tfaccel.doctor, (), {"log": 123}, UsageError, "log=123 (int)"),
    ("doctor-log-list", tfaccel.doctor, (), {"log": ["a"]}, UsageError, "invalid log"),
    ("doctor-log-path", tfaccel.doctor, (), {"log": Path("tf.log")}, UsageError, "read_log_file"),
    ("doctor-log-blank", tfaccel.doctor, (), {"log": " \n"}, LogInputError, "is empty"),
    ("doctor-log-blank-bytes", tfaccel.doctor, (), {"log": b"\n\n"}, LogInputError, "is empty"),
    ("doctor-deep-text", tfaccel.doctor, (), {"deep": "no"}, UsageError, "deep='no' (str)"),
    ("check-log-int", diagnosis.check, (), {"log": 1.5}, UsageError, "log=1.5 (float)"),
    ("diagnose-log-int", diagnosis.diagnose, (Snapshot(),), {"log": 123}, UsageError, "log=123"),
    ("diagnose-no-snapshot", diagnosis.diagnose, ("snap",), {}, UsageError, "needs a Snapshot"),
    (
        "diagnose-log-source",
        diagnosis.diagnose,
        (Snapshot(), "OOM"),
        {"log_source": 5},
        UsageError,
        "log_source=5 (int)",
    ),
    ("devices-tf-text", tfaccel.devices, (), {"tf": "yes"}, UsageError, "tf='yes' (str)"),
    # --- tfaccel.plan (refused before the model is traced) ---------------------------------------
    ("plan-batch-zero", tfaccel.plan, (_no_model,), {"batch_size": 0}, UsageError, "batch_size=0"),
    (
        "plan-batch-float",
        tfaccel.plan,
        (_no_model,),
        {"batch_size": 2.5},
        UsageError,
        "batch_size=2.5",
    ),
    (
        "plan-batch-bool",
        tfaccel.plan,
        (_no_model,),
        {"batch_size": True},
        UsageError,
        "batch_size=True",
    ),
    (
        "plan-precision",
        tfaccel.plan,
        (_no_model,),
        {"precision": "fp8"},
        UsageError,
        "precision='fp8'",
    ),
    (
        "plan-unknown-device",
        tfaccel.plan,
        (_no_model,),
        {"devices": ["a100-41gb"]},
        UsageError,
        "Unknown device key 'a100-41gb'",
    ),
    ("plan-devices-int", tfaccel.plan, (_no_model,), {"devices": [3]}, UsageError, "devices=[3]"),
    (
        "plan-subclassed-model",
        tfaccel.plan,
        (Made(_subclassed_model),),
        {"devices": ["this-cpu"]},
        UsageError,
        "keras.Input(shape=(...))",
    ),
    (
        "plan-sequential-without-input",
        tfaccel.plan,
        (Made(_sequential_without_input),),
        {"devices": ["this-cpu"]},
        UsageError,
        "call model.build((None, ...))",
    ),
    (
        "tune-a-model-as-model-fn",
        tfaccel.tune,
        (Made(_sequential_without_input), (_x(), _y())),
        {},
        UsageError,
        "model_fn=lambda: build_model()",
    ),
    (
        "pipeline-drop-remainder-on-less-than-a-batch",
        _pipeline,
        (),
        {"batch_size": 8, "drop_remainder": True},
        UsageError,
        "6 examples are fewer than one batch of 8",
    ),
    ("plan-examples-zero", tfaccel.plan, (_no_model,), {"examples": 0}, UsageError, "examples=0"),
    (
        "plan-step-call",
        tfaccel.plan,
        (_no_model,),
        {"step_call": "evaluate"},
        UsageError,
        "step_call='evaluate'",
    ),
    (
        "plan-price-negative",
        tfaccel.plan,
        (_no_model,),
        {"prices": {"a100-40gb": -1.0}},
        UsageError,
        "prices={'a100-40gb': -1.0}",
    ),
    ("plan-not-a-model", tfaccel.plan, (42,), {}, UsageError, "model=42"),
    (
        "plan-model-fn-raises",
        tfaccel.plan,
        (_no_model,),
        {},
        PlanError,
        "model_fn raised ValueError",
    ),
    ("plan-model-fn-returns-none", tfaccel.plan, (lambda: None,), {}, PlanError, "did not return"),
    # --- tfaccel.on_device ---------------------------------------------------------------------
    ("device-int", tfaccel.on_device, (123,), {}, UsageError, "spec=123 (int)"),
    ("device-none", tfaccel.on_device, (None,), {}, UsageError, "spec=None"),
    ("device-blank", tfaccel.on_device, ("  ",), {}, UsageError, "spec='  ' (str)"),
    ("device-huge", tfaccel.on_device, ("x" * 100_000,), {}, UsageError, "(100,000 characters)"),
    # --- tfaccel.data.pipeline -----------------------------------------------------------------
    ("pipeline-map-fn", _pipeline, (), {"map_fn": 5}, UsageError, "map_fn=5 (int)"),
    (
        "pipeline-cache-read-only",
        _pipeline,
        (),
        {"cache": At("readonly", "cache")},
        UsageError,
        "is not writable",
    ),
    (
        "pipeline-cache-missing-dir",
        _pipeline,
        (),
        {"cache": At("missing", "cache")},
        UsageError,
        "does not exist",
    ),
    ("pipeline-cache-is-dir", _pipeline, (), {"cache": At("dir")}, UsageError, "is a directory"),
    ("pipeline-cache-blank", _pipeline, (), {"cache": ""}, UsageError, "invalid cache"),
    (
        "pipeline-cache-below-file",
        _pipeline,
        (),
        {"cache": At("file", "cache")},
        UsageError,
        "is below a file",
    ),
    (
        "pipeline-empty-arrays",
        _pipeline,
        (),
        {"source": (np.zeros((0, 4), "float32"), np.zeros(0, "int64"))},
        UsageError,
        "shapes (0, 4), (0,)",
    ),
    (
        "pipeline-lengths",
        _pipeline,
        (),
        {"source": (_x(6), _y(5))},
        UsageError,
        "first dimensions (6,), (5,)",
    ),
    (
        "pipeline-empty-dataset",
        _pipeline,
        (),
        {"source": Made(_empty_dataset)},
        UsageError,
        "dataset of 0 elements",
    ),
    ("pipeline-shuffle-text", _pipeline, (), {"shuffle": "no"}, UsageError, "shuffle='no'"),
    ("pipeline-vectorized-int", _pipeline, (), {"vectorized": 1}, UsageError, "vectorized=1"),
    ("pipeline-seed-float", _pipeline, (), {"seed": 1.5}, UsageError, "seed=1.5 (float)"),
    ("pipeline-batch-float", _pipeline, (), {"batch_size": 2.0}, UsageError, "batch_size=2.0"),
    ("pipeline-device-form", _pipeline, (), {"device": "TPU:0"}, UsageError, "invalid device"),
    ("pipeline-device-gpu", _pipeline, (), {"device": "GPU:7"}, UsageError, "does not see"),
    # --- tfaccel.distribute --------------------------------------------------------------------
    (
        "train-checkpoint-file",
        _train,
        (),
        {"checkpoint_dir": At("file")},
        UsageError,
        "is a file, not a directory",
    ),
    (
        "train-checkpoint-read-only",
        _train,
        (),
        {"checkpoint_dir": At("readonly")},
        UsageError,
        "is not writable",
    ),
    (
        "train-checkpoint-parent-read-only",
        _train,
        (),
        {"checkpoint_dir": At("readonly", "runs/ckpt")},
        UsageError,
        "cannot be created",
    ),
    (
        "train-checkpoint-below-file",
        _train,
        (),
        {"checkpoint_dir": At("file", "ckpt")},
        UsageError,
        "is a file",
    ),
    ("train-lr-nan", _train, (), {"learning_rate": math.nan}, UsageError, "learning_rate=nan"),
    ("train-lr-inf", _train, (), {"learning_rate": math.inf}, UsageError, "a finite number"),
    ("train-lr-negative", _train, (), {"learning_rate": -0.1}, UsageError, "learning_rate=-0.1"),
    ("train-model-fn", _train, (), {"model_fn": "mlp"}, UsageError, "model_fn='mlp' (str)"),
    ("train-epochs-zero", _train, (), {"epochs": 0}, UsageError, "epochs=0"),
    ("train-seed", _train, (), {"seed": 2**32}, UsageError, "from 0 to 4294967295"),
    ("train-keep-zero", _train, (), {"max_checkpoints": 0}, UsageError, "max_checkpoints=0"),
    ("train-verbose-text", _train, (), {"verbose": "yes"}, UsageError, "verbose='yes'"),
    ("train-metrics-list", _train, (), {"metrics": ["mae"]}, UsageError, "metrics=['mae']"),
    ("train-loss-int", _train, (), {"loss": 5}, UsageError, "not a per-example function"),
    ("checkpointer-file", _checkpointer, (At("file"),), {}, UsageError, "is a file"),
    (
        "strategy-environ",
        tfaccel.distribute.strategy,
        (),
        {"environ": "TF_CONFIG={}"},
        UsageError,
        "invalid environ",
    ),
    # --- tfaccel.setup and the run options -----------------------------------------------------
    (
        "setup-model-text",
        tfaccel.setup,
        (),
        {"model": "notamodel"},
        UsageError,
        "model='notamodel'",
    ),
    ("setup-model-fn", tfaccel.setup, (), {"model": _x}, UsageError, "not a Keras model"),
    (
        "setup-deterministic-text",
        tfaccel.setup,
        (),
        {"deterministic": "yes"},
        UsageError,
        "deterministic='yes'",
    ),
    (
        "setup-deterministic-int",
        tfaccel.setup,
        (),
        {"deterministic": 1},
        UsageError,
        "True or False",
    ),
    ("setup-jit-text", tfaccel.setup, (), {"jit": "off"}, UsageError, "jit='off'"),
    (
        "setup-logical-huge",
        tfaccel.setup,
        (),
        {"logical_devices": 100_000},
        UsageError,
        "from 1 to 64",
    ),
    (
        "setup-logical-digits",
        tfaccel.setup,
        (),
        {"logical_devices": "9" * 100_000},
        UsageError,
        "(100,000 characters)",
    ),
    (
        "run-option-logical-huge",
        parse_setting,
        ("logical_devices", "100000"),
        {"source": "--logical-devices"},
        UsageError,
        "--logical-devices 100000 is not a valid logical device count",
    ),
    ("setup-threads-huge", tfaccel.setup, (), {"threads": 10**9}, UsageError, "from 1 to 4096"),
    ("setup-memory-bytes", tfaccel.setup, (), {"memory": 4 * 1024**3}, UsageError, "not bytes"),
    ("setup-memory-nan", tfaccel.setup, (), {"memory": math.nan}, UsageError, "memory=nan"),
    ("setup-seed-huge", tfaccel.setup, (), {"seed": 10**5000}, UsageError, "about 5,001 digits"),
    ("setup-environ-text", tfaccel.setup, (), {"environ": "A=1"}, UsageError, "invalid environ"),
    (
        "setup-gpu-index",
        tfaccel.setup,
        (),
        {"devices": list(range(64, 10_064))},
        RuntimeSetupError,
        "(10,000 items)",
    ),
    # --- odd numbers, types and text: NaN, infinities, huge, complex, NumPy scalars, bools
    # and floats for counts, classes and generators for values, NUL bytes, near-miss names
    ("audit-setup-memory-inf", tfaccel.setup, (), {"memory": math.inf}, UsageError, "memory=inf"),
    ("audit-setup-memory-complex", tfaccel.setup, (), {"memory": 1j}, UsageError, "memory=1j"),
    (
        "audit-setup-memory-float16-nan",
        tfaccel.setup,
        (),
        {"memory": np.float16("nan")},
        UsageError,
        "memory=np.float16(nan)",
    ),
    (
        "audit-setup-precision-float23",
        tfaccel.setup,
        (),
        {"precision": "float23"},
        UsageError,
        "precision='float23'",
    ),
    (
        "audit-setup-precision-mixed-bf16",
        tfaccel.setup,
        (),
        {"precision": "mixed_bf16"},
        UsageError,
        "precision='mixed_bf16'",
    ),
    (
        "audit-setup-precision-nul",
        tfaccel.setup,
        (),
        {"precision": "float16\x00"},
        UsageError,
        "not a valid precision",
    ),
    (
        "audit-setup-precision-list",
        tfaccel.setup,
        (),
        {"precision": ["float32"]},
        UsageError,
        "precision=['float32']",
    ),
    (
        "audit-setup-precision-10k",
        tfaccel.setup,
        (),
        {"precision": "f" * 10_000},
        UsageError,
        "(10,000 characters)",
    ),
    ("audit-setup-jit-two", tfaccel.setup, (), {"jit": 2}, UsageError, "jit=2"),
    ("audit-setup-threads-float", tfaccel.setup, (), {"threads": 2.5}, UsageError, "threads=2.5"),
    ("audit-setup-threads-bool", tfaccel.setup, (), {"threads": True}, UsageError, "threads=True"),
    (
        "audit-setup-threads-triple",
        tfaccel.setup,
        (),
        {"threads": (1, 2, 3)},
        UsageError,
        "threads=(1, 2, 3)",
    ),
    (
        "audit-setup-threads-int64-beyond",
        tfaccel.setup,
        (),
        {"threads": np.int64(2**62)},
        UsageError,
        "from 1 to 4096",
    ),
    (
        "audit-setup-logical-two-point-zero",
        tfaccel.setup,
        (),
        {"logical_devices": 2.0},
        UsageError,
        "logical_devices=2.0",
    ),
    ("audit-setup-seed-negative", tfaccel.setup, (), {"seed": -1}, UsageError, "seed=-1"),
    ("audit-setup-seed-bool", tfaccel.setup, (), {"seed": True}, UsageError, "seed=True"),
    ("audit-setup-devices-bytes", tfaccel.setup, (), {"devices": b"0"}, UsageError, "b'0'"),
    (
        "audit-setup-devices-generator",
        tfaccel.setup,
        (),
        {"devices": Made(_generator)},
        UsageError,
        "not a valid GPU selection",
    ),
    ("audit-setup-model-class", tfaccel.setup, (), {"model": _Thing}, UsageError, "not a Keras"),
    (
        "audit-setup-deterministic-int64",
        tfaccel.setup,
        (),
        {"deterministic": np.int64(1)},
        UsageError,
        "deterministic=np.int64(1)",
    ),
    (
        "audit-plan-batch-1e30",
        tfaccel.plan,
        (_no_model,),
        {"batch_size": 10**30},
        UsageError,
        "at most 16,777,216",
    ),
    (
        "audit-plan-batch-text",
        tfaccel.plan,
        (_no_model,),
        {"batch_size": "4"},
        UsageError,
        "batch_size='4'",
    ),
    (
        "audit-plan-batch-complex",
        tfaccel.plan,
        (_no_model,),
        {"batch_size": 4 + 0j},
        UsageError,
        "not a positive integer",
    ),
    (
        "audit-plan-precision-mixed-bf16",
        tfaccel.plan,
        (_no_model,),
        {"precision": "mixed_bf16"},
        UsageError,
        "precision='mixed_bf16'",
    ),
    (
        "audit-plan-devices-generator",
        tfaccel.plan,
        (_no_model,),
        {"devices": Made(_generator)},
        UsageError,
        "not a list of device keys",
    ),
    (
        "audit-plan-price-inf",
        tfaccel.plan,
        (_no_model,),
        {"prices": {"a100-40gb": math.inf}},
        UsageError,
        "not a finite number",
    ),
    (
        "audit-plan-price-bool",
        tfaccel.plan,
        (_no_model,),
        {"prices": {"a100-40gb": True}},
        UsageError,
        "not a finite number",
    ),
    (
        "audit-plan-inventory-text",
        tfaccel.plan,
        (_no_model,),
        {"inventory": "this machine"},
        UsageError,
        "invalid inventory",
    ),
    ("audit-doctor-deep-none", tfaccel.doctor, (), {"deep": None}, UsageError, "deep=None"),
    ("audit-doctor-log-dict", tfaccel.doctor, (), {"log": {}}, UsageError, "invalid log"),
    ("audit-devices-tf-one", tfaccel.devices, (), {"tf": 1}, UsageError, "tf=1 (int)"),
    ("audit-device-bytes", tfaccel.on_device, (b"/cpu:0",), {}, UsageError, "invalid spec"),
    (
        "audit-device-nul",
        tfaccel.on_device,
        ("/cpu:0\x00",),
        {},
        UsageError,
        "is not a device name",
    ),
    (
        "audit-device-near-miss",
        tfaccel.on_device,
        ("gpu23",),
        {},
        UsageError,
        "'gpu23' is not a device",
    ),
    ("audit-tune-budget-complex", _tune, (), {"budget_s": 1j}, TuneError, "budget_s=1j"),
    (
        "audit-tune-budget-float16-nan",
        _tune,
        (),
        {"budget_s": np.float16("nan")},
        TuneError,
        "budget_s=np.float16(nan)",
    ),
    ("audit-tune-budget-text", _tune, (), {"budget_s": "300"}, TuneError, "budget_s='300'"),
    ("audit-tune-margin-one", _tune, (), {"margin": 1.0}, TuneError, "margin=1.0"),
    ("audit-tune-sample-inf", _tune, (), {"sample_s": math.inf}, TuneError, "sample_s=inf"),
    ("audit-tune-rounds-bool", _tune, (), {"final_rounds": True}, TuneError, "final_rounds=True"),
    (
        "audit-tune-batch-cap-two-point-zero",
        _tune,
        (),
        {"batch_cap": 2.0},
        TuneError,
        "batch_cap=2.0",
    ),
    ("audit-tune-space-list", _tune, (), {"space": ["jit"]}, SpaceError, "not a mapping"),
    (
        "audit-tune-space-float23",
        _tune,
        (),
        {"space": {"precision": ["float23"]}},
        SpaceError,
        "'float23'",
    ),
    ("audit-tune-is-oom-int", _tune, (), {"is_oom": 5}, UsageError, "is_oom=5 (int)"),
    (
        "audit-tune-pipeline-kwargs-list",
        _tune,
        (),
        {"pipeline_kwargs": [1]},
        UsageError,
        "invalid pipeline_kwargs",
    ),
    ("audit-tune-model-fn-none", _tune, (), {"model_fn": None}, TuneError, "not callable"),
    (
        "audit-pipeline-batch-1e30",
        _pipeline,
        (),
        {"batch_size": 10**30},
        UsageError,
        "from 1 to 2147483647",
    ),
    (
        "audit-pipeline-batch-int64-beyond",
        _pipeline,
        (),
        {"batch_size": np.int64(2**62)},
        UsageError,
        "from 1 to 2147483647",
    ),
    (
        "audit-pipeline-batch-nan",
        _pipeline,
        (),
        {"batch_size": math.nan},
        UsageError,
        "batch_size=nan",
    ),
    ("audit-pipeline-batch-text", _pipeline, (), {"batch_size": "4"}, UsageError, "batch_size='4'"),
    (
        "audit-pipeline-shuffle-buffer-1e30",
        _pipeline,
        (),
        {"shuffle_buffer": 10**30},
        UsageError,
        "invalid shuffle_buffer",
    ),
    (
        "audit-pipeline-parallel-1e30",
        _pipeline,
        (),
        {"num_parallel_calls": 10**30},
        UsageError,
        "invalid num_parallel_calls",
    ),
    (
        "audit-pipeline-parallel-near-miss",
        _pipeline,
        (),
        {"num_parallel_calls": "autp"},
        UsageError,
        "num_parallel_calls='autp'",
    ),
    (
        "audit-pipeline-prefetch-two-point-zero",
        _pipeline,
        (),
        {"prefetch": 2.0},
        UsageError,
        "prefetch=2.0",
    ),
    (
        "audit-pipeline-prefetch-1e30",
        _pipeline,
        (),
        {"prefetch": 10**30},
        UsageError,
        "invalid prefetch",
    ),
    ("audit-pipeline-repeat-1e30", _pipeline, (), {"repeat": 10**30}, UsageError, "invalid repeat"),
    ("audit-pipeline-repeat-float", _pipeline, (), {"repeat": 2.5}, UsageError, "repeat=2.5"),
    (
        "audit-pipeline-cache-nul",
        _pipeline,
        (),
        {"cache": "cache\x00"},
        UsageError,
        "holds a NUL byte",
    ),
    ("audit-pipeline-cache-10k", _pipeline, (), {"cache": "c" * 10_000}, UsageError, "NAME_MAX"),
    (
        "audit-pipeline-cache-bytes",
        _pipeline,
        (),
        {"cache": b"cache"},
        UsageError,
        "cache=b'cache'",
    ),
    (
        "audit-pipeline-device-list",
        _pipeline,
        (),
        {"device": ["CPU:0"]},
        UsageError,
        "invalid device",
    ),
    (
        "audit-pipeline-source-none",
        _pipeline,
        (),
        {"source": None},
        UsageError,
        "cannot use this source",
    ),
    (
        "audit-pipeline-map-fn-instance",
        _pipeline,
        (),
        {"map_fn": _Thing()},
        UsageError,
        "invalid map_fn",
    ),
    ("audit-train-epochs-1e30", _train, (), {"epochs": 10**30}, UsageError, "from 1 to 2147483647"),
    (
        "audit-train-batch-text",
        _train,
        (),
        {"global_batch_size": "4"},
        UsageError,
        "global_batch_size='4'",
    ),
    (
        "audit-train-lr-complex",
        _train,
        (),
        {"learning_rate": 0.1j},
        UsageError,
        "learning_rate=0.1j",
    ),
    (
        "audit-train-lr-float16-nan",
        _train,
        (),
        {"learning_rate": np.float16("nan")},
        UsageError,
        "learning_rate=np.float16(nan)",
    ),
    ("audit-train-lr-zero", _train, (), {"learning_rate": 0.0}, UsageError, "learning_rate=0.0"),
    (
        "audit-train-checkpoint-every-bool",
        _train,
        (),
        {"checkpoint_every": True},
        UsageError,
        "checkpoint_every=True",
    ),
    (
        "audit-train-checkpoint-dir-nul",
        _train,
        (),
        {"checkpoint_dir": "ckpt\x00"},
        UsageError,
        "holds a NUL byte",
    ),
    (
        "audit-train-checkpoint-dir-10k",
        _train,
        (),
        {"checkpoint_dir": "c" * 10_000},
        UsageError,
        "NAME_MAX",
    ),
    (
        "audit-launch-workers-1e30",
        _launch,
        (),
        {"workers": 10**30},
        UsageError,
        "from 1 to 2147483647",
    ),
    (
        "audit-launch-workers-two-point-zero",
        _launch,
        (),
        {"workers": 2.0},
        UsageError,
        "Cannot start 2.0 workers",
    ),
    ("audit-launch-port-base-zero", _launch, (), {"port_base": 0}, UsageError, "--port-base 0"),
    (
        "audit-launch-port-base-float",
        _launch,
        (),
        {"port_base": 20000.5},
        UsageError,
        "--port-base 20000.5",
    ),
    ("audit-launch-host-blank", _launch, (), {"host": " "}, UsageError, "is not an address"),
    ("audit-launch-script-none", _launch, (), {"script": None}, UsageError, "no script path"),
    ("audit-launch-grace-inf", _launch, (), {"grace_s": math.inf}, UsageError, "--grace inf"),
    (
        "audit-launch-startup-inf",
        _launch,
        (),
        {"startup_timeout_s": math.inf},
        UsageError,
        "--startup-timeout inf",
    ),
    (
        "audit-launch-hang-complex",
        _launch,
        (),
        {"hang_timeout_s": 1j},
        UsageError,
        "--hang-timeout 1j",
    ),
    ("audit-heartbeat-done-text", _heartbeat, (1,), {"done": "yes"}, UsageError, "done='yes'"),
    ("audit-heartbeat-step-float", _heartbeat, (1.5,), {}, UsageError, "heartbeat(1.5)"),
    (
        "audit-tf-config-int",
        tfaccel.distribute.parse_tf_config,
        (5,),
        {},
        ClusterConfigError,
        "is not text",
    ),
    (
        "audit-tf-config-index-nan",
        tfaccel.distribute.parse_tf_config,
        (_TF_CONFIG_NAN,),
        {},
        ClusterConfigError,
        "task index nan",
    ),
    (
        "audit-scaling-steps-float",
        tfaccel.distribute.scaling,
        (),
        {"steps": 2.5},
        UsageError,
        "steps=2.5",
    ),
    (
        "audit-scaling-repeats-bool",
        tfaccel.distribute.scaling,
        (),
        {"repeats": True},
        UsageError,
        "repeats=True",
    ),
    (
        "audit-scaling-warmup-negative",
        tfaccel.distribute.scaling,
        (),
        {"warmup": -1},
        UsageError,
        "warmup=-1",
    ),
    (
        "audit-scaling-counts-text",
        tfaccel.distribute.scaling,
        (),
        {"replica_counts": "2"},
        UsageError,
        "replica_counts='2'",
    ),
    ("audit-scaling-model-fn-int", tfaccel.distribute.scaling, (3,), {}, UsageError, "model_fn=3"),
    (
        "audit-decide-strategy-dict",
        tfaccel.distribute.decide_strategy,
        ({},),
        {},
        UsageError,
        "got no Facts",
    ),
    (
        "audit-checkpointer-keep-float",
        _checkpointer,
        ("ckpt",),
        {"max_to_keep": 2.5},
        UsageError,
        "max_to_keep=2.5",
    ),
    (
        "audit-checkpointer-dir-nul",
        _checkpointer,
        ("ckpt\x00",),
        {},
        UsageError,
        "holds a NUL byte",
    ),
    ("audit-matmul-tile-float", _matmul, (), {"tile": 16.0}, UsageError, "tile=16.0"),
    ("audit-matmul-tile-bool", _matmul, (), {"tile": True}, UsageError, "tile=True"),
    ("audit-matmul-tile-text", _matmul, (), {"tile": "16"}, UsageError, "tile='16'"),
    ("audit-matmul-per-thread-3", _matmul, (), {"per_thread": 3}, UsageError, "per_thread=3"),
    ("audit-matmul-per-thread-0", _matmul, (), {"per_thread": 0}, UsageError, "per_thread=0"),
    (
        "audit-matmul-per-thread-float",
        _matmul,
        (),
        {"per_thread": 8.0},
        UsageError,
        "per_thread=8.0",
    ),
    (
        "audit-matmul-per-thread-bool",
        _matmul,
        (),
        {"per_thread": True},
        UsageError,
        "per_thread=True",
    ),
    (
        "audit-vector-add-complex",
        tfaccel.kernels.vector_add,
        (_C, _C),
        {},
        UsageError,
        "dtype=complex64",
    ),
    (
        "audit-vector-add-fallback-near-miss",
        tfaccel.kernels.vector_add,
        (_V, _V),
        {"fallback": "numpi"},
        UsageError,
        "fallback must be None",
    ),
    (
        "audit-reduce-sum-empty",
        tfaccel.kernels.reduce_sum,
        (np.ones(0, np.float32),),
        {},
        UsageError,
        "x is empty",
    ),
    (
        "audit-reduce-sum-objects",
        tfaccel.kernels.reduce_sum,
        (np.array(["a"], object),),
        {},
        UsageError,
        "dtype=object",
    ),
    (
        "audit-callback-log-every-1e30",
        _callback,
        (),
        {"log_every": 10**30},
        UsageError,
        "from 0 to 2147483647",
    ),
    (
        "audit-callback-stream-text",
        _callback,
        (),
        {"stream": "stdout"},
        UsageError,
        "stream='stdout'",
    ),
    ("audit-callback-clock-int", _callback, (), {"clock": 5}, UsageError, "clock=5 (int)"),
    (
        "audit-callback-max-steps-nan",
        _callback,
        (),
        {"max_steps": math.nan},
        UsageError,
        "max_steps=nan",
    ),
    (
        "audit-callback-tensorboard-nul",
        _callback,
        (),
        {"tensorboard_dir": "tb\x00"},
        UsageError,
        "holds a NUL byte",
    ),
    (
        "audit-timer-batch-int64-beyond",
        _timer,
        (),
        {"batch_size": np.int64(2**62)},
        UsageError,
        "from 1 to 2147483647",
    ),
    (
        "audit-timer-trace-steps-1e30",
        _timer,
        (),
        {"trace_steps": 10**30},
        UsageError,
        "invalid trace_steps",
    ),
    ("audit-timer-stream-int", _timer, (), {"stream": 1}, UsageError, "stream=1 (int)"),
    ("audit-timer-log-every-text", _timer, (), {"log_every": "50"}, UsageError, "log_every='50'"),
    (
        "audit-timer-trace-dir-nul",
        _timer,
        (),
        {"trace_dir": "trace\x00"},
        UsageError,
        "holds a NUL byte",
    ),
    # --- a second audit: the Checkpointer's objects and switches, environments that are not
    # text, TF_CONFIG garbage, a trailing slash on a file, symbolic links to directories given
    # as files, look-alike Unicode, negative zero and NaN where counts go
    ("audit2-checkpointer-objects-list", _keeper, ([],), {}, UsageError, "objects=[] (list)"),
    ("audit2-checkpointer-objects-none", _keeper, (None,), {}, UsageError, "objects=None"),
    (
        "audit2-checkpointer-object-not-trackable",
        _keeper,
        ({"model": 5},),
        {},
        UsageError,
        "objects['model']=5 (int)",
    ),
    (
        "audit2-checkpointer-object-a-path",
        _keeper,
        ({"model": "model.keras"},),
        {},
        UsageError,
        "it is not a trackable object",
    ),
    (
        "audit2-checkpointer-name-it-holds-itself",
        _keeper,
        ({"step": 5},),
        {},
        UsageError,
        "the checkpoint holds that name itself",
    ),
    ("audit2-checkpointer-name-empty", _keeper, ({"": 5},), {}, UsageError, "the name ''"),
    ("audit2-checkpointer-name-int", _keeper, ({1: 5},), {}, UsageError, "the key 1 (int)"),
    (
        "audit2-checkpointer-is-chief-text",
        _keeper,
        ({},),
        {"is_chief": "no"},
        UsageError,
        "is_chief='no' (str)",
    ),
    ("audit2-checkpointer-is-chief-int", _keeper, ({},), {"is_chief": 1}, UsageError, "is_chief=1"),
    (
        "audit2-checkpointer-is-chief-none",
        _keeper,
        ({},),
        {"is_chief": None},
        UsageError,
        "is_chief=None",
    ),
    ("audit2-checkpointer-task-int", _keeper, ({},), {"task": 3}, UsageError, "task=3 (int)"),
    ("audit2-checkpointer-task-blank", _keeper, ({},), {"task": " "}, UsageError, "task=' '"),
    (
        "audit2-checkpointer-dir-trailing-slash-on-a-file",
        _checkpointer,
        (At("file/"),),
        {},
        UsageError,
        "is a file, not a directory",
    ),
    (
        "audit3-load-snapshot-trailing-slash-on-a-file",
        load_snapshot,
        (At("file/"),),
        {},
        SnapshotError,
        "ends with a slash, so it names a directory",
    ),
    (
        "audit3-read-log-file-trailing-slash-on-a-file",
        diagnosis.read_log_file,
        (At("file/"),),
        {},
        LogInputError,
        "ends with a slash, so it names a directory",
    ),
    (
        "audit2-heartbeat-environ-text",
        tfaccel.distribute.heartbeat,
        (1,),
        {"environ": "X=1"},
        UsageError,
        "invalid environ",
    ),
    (
        "audit2-heartbeat-environ-value-int",
        tfaccel.distribute.heartbeat,
        (1,),
        {"environ": {"TFACCEL_LAUNCH_RANK": 0}},
        UsageError,
        "every name and value must be text",
    ),
    ("audit2-heartbeat-step-nan", _heartbeat, (math.nan,), {}, UsageError, "heartbeat(nan)"),
    (
        "audit2-setup-environ-value-int",
        tfaccel.setup,
        (),
        {"environ": {"TFACCEL_SEED": 5}},
        UsageError,
        "environ['TFACCEL_SEED']=5 (int)",
    ),
    (
        "audit2-setup-environ-name-int",
        tfaccel.setup,
        (),
        {"environ": {5: "x"}},
        UsageError,
        "every name and value must be text",
    ),
    *(
        (
            f"audit2-setup-env-{variable}-{label}",
            tfaccel.setup,
            (),
            {"environ": {variable: value}},
            UsageError,
            f"The environment variable {variable}=",
        )
        for variable, label, value in (
            ("TFACCEL_MEMORY", "text", "lots"),
            ("TFACCEL_THREADS", "negative", "-3"),
            ("TFACCEL_JIT", "perhaps", "perhaps"),
            ("TFACCEL_PRECISION", "fp7", "fp7"),
            ("TFACCEL_DETERMINISTIC", "maybe", "maybe"),
            ("TFACCEL_SEED", "fullwidth-digit", "\uff17"),
        )
    ),
    (
        "audit2-strategy-environ-value-int",
        tfaccel.distribute.strategy,
        (),
        {"environ": {"TF_CONFIG": 5}},
        UsageError,
        "every name and value must be text",
    ),
    *(
        (
            f"audit2-strategy-tf-config-{label}",
            tfaccel.distribute.strategy,
            (),
            {"environ": {"TF_CONFIG": text}},
            ClusterConfigError,
            fragment,
        )
        for label, text, fragment in (
            ("a-list", "[]", "TF_CONFIG is a JSON list, not an object"),
            ("null", "null", "not an object"),
            ("cut-short", "{", "TF_CONFIG is not valid JSON"),
            ("100k-nested-brackets", "[" * 100_000, "nests its arrays and objects too deeply"),
        )
    ),
    (
        "audit2-tf-config-no-workers",
        tfaccel.distribute.parse_tf_config,
        ('{"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}',),
        {},
        ClusterConfigError,
        "is not a non-empty list of addresses",
    ),
    (
        "audit2-tf-config-index-minus-zero",
        tfaccel.distribute.parse_tf_config,
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": -0.0}}',),
        {},
        ClusterConfigError,
        "task index -0.0 is not an integer",
    ),
    (
        "audit2-tf-config-type-blank",
        tfaccel.distribute.parse_tf_config,
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": " ", "index": 0}}',),
        {},
        ClusterConfigError,
        "task type ' ' is not a job",
    ),
    ("audit2-tune-runner-int", _tune, (), {"runner": 5}, TuneError, "runner=5"),
    (
        "audit2-tune-store-trailing-slash-on-a-file",
        _tune,
        (),
        {"store": At("file/"), "model_fn": Made(lambda: _sequential_without_input)},
        StoreError,
        "ends with a slash, so it names a directory",
    ),
    (
        "audit2-tune-store-symlink-to-a-directory",
        _tune,
        (),
        {"store": At("link"), "model_fn": Made(lambda: _sequential_without_input)},
        StoreError,
        "is a directory",
    ),
    (
        "audit2-pipeline-cache-trailing-slash-on-a-file",
        _pipeline,
        (),
        {"cache": At("file/")},
        UsageError,
        "ends with a slash, so it names a directory",
    ),
    (
        "audit2-pipeline-cache-trailing-slash-new-name",
        _pipeline,
        (),
        {"cache": "new-cache/"},
        UsageError,
        "ends with a slash",
    ),
    (
        "audit2-pipeline-cache-symlink-to-a-directory",
        _pipeline,
        (),
        {"cache": At("link")},
        UsageError,
        "is a directory",
    ),
    (
        "audit2-pipeline-batch-minus-zero",
        _pipeline,
        (),
        {"batch_size": -0.0},
        UsageError,
        "batch_size=-0.0",
    ),
    (
        "audit2-timer-tensorboard-trailing-slash-on-a-file",
        _timer,
        (),
        {"tensorboard_dir": At("file/")},
        UsageError,
        "is a file, not a directory",
    ),
    (
        "audit2-train-batch-nan",
        _train,
        (),
        {"global_batch_size": math.nan},
        UsageError,
        "global_batch_size=nan",
    ),
    ("audit2-train-epochs-minus-zero", _train, (), {"epochs": -0.0}, UsageError, "epochs=-0.0"),
    ("audit2-launch-workers-nan", _launch, (), {"workers": math.nan}, UsageError, "-n nan"),
    ("audit2-launch-workers-minus-zero", _launch, (), {"workers": -0.0}, UsageError, "-n -0.0"),
    (
        "audit2-scaling-batch-inf",
        tfaccel.distribute.scaling,
        (),
        {"per_replica_batch": math.inf},
        UsageError,
        "per_replica_batch=inf",
    ),
    (
        "audit2-plan-examples-inf",
        tfaccel.plan,
        (_no_model,),
        {"examples": math.inf},
        UsageError,
        "examples",
    ),
    (
        "audit2-plan-device-blank",
        tfaccel.plan,
        (_no_model,),
        {"devices": [" "]},
        UsageError,
        "Unknown device key",
    ),
    (
        "audit2-device-zero-width-space",
        tfaccel.on_device,
        ("\u200bcpu:0",),
        {},
        UsageError,
        "is not a device name",
    ),
    (
        "audit2-device-fullwidth-letters",
        tfaccel.on_device,
        ("\uff43\uff50\uff55:0",),
        {},
        UsageError,
        "is not a device name",
    ),
    ("audit2-setup-seed-nan", tfaccel.setup, (), {"seed": math.nan}, UsageError, "seed=nan"),
    (
        "audit2-setup-logical-minus-zero",
        tfaccel.setup,
        (),
        {"logical_devices": -0.0},
        UsageError,
        "logical_devices=-0.0",
    ),
    (
        "audit2-setup-devices-fullwidth-digit",
        tfaccel.setup,
        (),
        {"devices": "\uff10"},
        UsageError,
        "not a valid GPU selection",
    ),
    ("audit2-doctor-log-empty-bytes", tfaccel.doctor, (), {"log": b""}, LogInputError, "is empty"),
    # --- the profilers and the placement audit -------------------------------------------------
    ("timer-warmup", _timer, (), {"warmup_steps": -1}, UsageError, "warmup_steps=-1"),
    ("timer-trace-steps", _timer, (), {"trace_steps": 0}, UsageError, "trace_steps=0"),
    ("timer-sync-text", _timer, (), {"sync": "false"}, UsageError, "sync='false'"),
    (
        "timer-tensorboard-file",
        _timer,
        (),
        {"tensorboard_dir": At("file")},
        UsageError,
        "is a file",
    ),
    ("callback-max-steps", _callback, (), {"max_steps": 0}, UsageError, "max_steps=0"),
    ("callback-log-every", _callback, (), {"log_every": "50"}, UsageError, "log_every='50'"),
    (
        "callback-trace-dir",
        _callback,
        (),
        {"trace_dir": At("readonly", "trace")},
        UsageError,
        "cannot be created",
    ),
    ("audit-not-callable", placement.audit, (5,), {}, UsageError, "fn=5 (int)"),
    (
        "audit-target-int",
        placement.audit,
        (lambda: None,),
        {"target": 0},
        UsageError,
        "target=0 (int)",
    ),
]


# --- the scratch area and what "nothing changed" means ------------------------------------------


@pytest.fixture(scope="module")
def read_only_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory this process cannot write in: a chmod 555 one, or for a user that the
    permission bits do not stop (root), /proc/sys (where no file can be created)."""
    made = tmp_path_factory.mktemp("read-only")
    made.chmod(0o555)
    try:
        if not os.access(made, os.W_OK):
            yield made
        elif os.path.isdir("/proc/sys") and not os.access("/proc/sys", os.W_OK):
            yield Path("/proc/sys")
        else:
            pytest.skip("no directory this process cannot write in (root without /proc/sys)")
    finally:
        made.chmod(0o755)


@dataclass
class Scratch:
    root: Path
    read_only: Path

    def resolve(self, value: Any) -> Any:
        if isinstance(value, At):
            base = {
                "file": self.root / "a-file",
                "dir": self.root / "a-dir",
                "readonly": self.read_only,
                "missing": self.root / "no-such-dir",
                "link": self.root / "a-link",
                "file/": self.root / "a-file",
            }[value.where]
            if value.where == "file/":
                return str(base) + os.sep
            return str(base / value.below) if value.below else str(base)
        if isinstance(value, Made):
            return value.make()
        if isinstance(value, tuple):
            return tuple(self.resolve(v) for v in value)
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        return value


def _untouched_outside(scratch: Scratch, arguments: Any) -> list[str]:
    """Paths given in a row that lie outside the scratch area (the read-only directory) and
    exist after the call: there should be none."""
    paths = [a for a in _flat(arguments) if isinstance(a, str) and a.startswith(os.sep)]
    outside = [p for p in paths if not p.startswith(str(scratch.root))]
    return [p for p in outside if p != str(scratch.read_only) and os.path.lexists(p)]


def _flat(value: Any) -> Iterator[Any]:
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _flat(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _flat(v)
    else:
        yield value


@pytest.fixture
def scratch(
    tmp_path: Path, read_only_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Scratch]:
    (tmp_path / "a-file").write_text("not a directory\n")
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "a-link").symlink_to(tmp_path / "a-dir")
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path)  # relative paths a call might write land here
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ~ and the default store land here
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the results database folder
    yield Scratch(tmp_path, read_only_dir)


@pytest.mark.parametrize(
    ("call", "args", "kwargs", "error", "fragment"),
    [pytest.param(*row[1:], id=row[0]) for row in ROWS],
)
def test_bad_argument_is_a_clear_error_and_changes_nothing(
    scratch: Scratch,
    call: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: type[TfaccelError],
    fragment: str,
) -> None:
    args, kwargs = scratch.resolve(args), scratch.resolve(kwargs)
    state = tf_state()  # first: importing TensorFlow sets variables of its own
    files, environ = snapshot([scratch.root]), dict(os.environ)

    with pytest.raises(TfaccelError) as caught:
        call(*args, **kwargs)

    message = str(caught.value)
    assert type(caught.value) is error, message
    assert fragment in message
    assert "Expected:" in message and "Received:" in message and "Fix:" in message
    assert len(message) < LONGEST_MESSAGE, f"{len(message)} characters: {message[:300]}"
    assert_unchanged(files, [scratch.root])  # the working directory, HOME and the store's folder
    assert _untouched_outside(scratch, (args, kwargs)) == []
    assert dict(os.environ) == environ
    assert tf_state() == state, "TensorFlow's configuration changed"


# --- what the rows refuse stays accepted in its valid form ---------------------------------------


def test_a_log_given_as_bytes_is_decoded_and_the_replacements_are_noted() -> None:
    data = b"OOM when allocating tensor with shape[8,1024]\n\xff\xfe progress\n"
    report = diagnosis.diagnose(Snapshot(), log=data)
    assert report.log is not None and [c.id for c in report.log.causes] == ["oom"]
    assert report.log.notes == [
        "given as bytes, decoded as UTF-8: 2 undecodable byte sequence(s) replaced"
    ]
    as_text = diagnosis.diagnose(Snapshot(), log=data.decode("utf-8", "replace"))
    assert as_text.log is not None and as_text.log.causes == report.log.causes


def test_a_log_given_as_utf16_bytes_with_a_byte_order_mark_is_read() -> None:
    data = "OOM when allocating tensor with shape[8,1024]\n".encode("utf-16")
    log = diagnosis.check_log(data, where="test")
    assert isinstance(log, LogText) and log.text.startswith("OOM when allocating")


def test_diagnose_still_matches_any_text_blank_included() -> None:
    report = diagnosis.diagnose(Snapshot(), log="")
    assert report.log is not None and report.log.line_count == 0


def test_a_cache_file_in_a_writable_directory_is_accepted(tmp_path: Path) -> None:
    cache = tmp_path / "new" / "cache"
    (tmp_path / "new").mkdir()
    ds = tfaccel.data.pipeline((_x(), _y()), 2, cache=str(cache), shuffle=False)
    assert [int(v) for batch in ds for v in batch[1].numpy()] == list(range(6))
    assert tfaccel.data.describe(ds)["cache"].value == f"file {cache}"


def test_a_checkpoint_dir_that_can_be_created_is_accepted_and_not_created_early(
    tmp_path: Path,
) -> None:
    from tfaccel.core.checks import check_dir_argument

    target = tmp_path / "runs" / "a" / "ckpt"
    assert check_dir_argument("checkpoint_dir", target, where="test") == str(target)
    assert not (tmp_path / "runs").exists()
    assert check_dir_argument("checkpoint_dir", "gs://bucket/ckpt", where="test") == (
        "gs://bucket/ckpt"
    )


def test_setup_arguments_in_their_valid_forms_still_parse() -> None:
    from tfaccel.runtime.settings import build_request

    request = build_request(
        {"deterministic": np.True_, "jit": "auto", "logical_devices": "64", "threads": "4,2"},
        {"TFACCEL_SEED": "7", "TFACCEL_DETERMINISTIC": "yes"},
        None,
    )
    assert request.get("deterministic") is True and request.get("jit") == "auto"
    assert request.get("logical_devices") == 64 and request.get("threads") == (4, 2)
    assert request.get("seed") == 7
    env_only = build_request({}, {"TFACCEL_DETERMINISTIC": "yes", "TFACCEL_JIT": "off"}, None)
    assert env_only.get("deterministic") is True and env_only.get("jit") is False


def test_setup_takes_a_keras_model() -> None:
    keras = pytest.importorskip("keras")
    from tfaccel.runtime.settings import build_request

    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(8, name="even")])
    assert build_request({}, {}, model).model_name == model.name


def test_the_run_command_refuses_a_huge_logical_device_count_in_one_short_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tfaccel.cli import main

    script = tmp_path / "script.py"
    script.write_text("open(__file__ + '.ran', 'w').close()\n")
    code = main(["run", "--logical-devices", "1" + "0" * 100_000, str(script)])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "script.py.ran").exists()
    assert "--logical-devices 1000000" in err and "(100,001 characters)" in err
    assert max(len(line) for line in err.splitlines()) < LONGEST_MESSAGE
