"""``tfaccel.placement.audit`` on real TensorFlow steps (one fresh process), and its code scan.

The scenario splits the CPU into two logical devices, so a step that pins an op to the other
one shows an op off the target and a copy between devices, as a GPU step with a CPU fallback
would.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from runtime_helpers import emit, run_scenario

from tfaccel import placement


@pytest.fixture(scope="module")
def audits() -> dict[str, Any]:
    return run_scenario(__file__)


def _ids(report: dict[str, Any]) -> list[str]:
    return [f["id"] for f in report["findings"]]


def test_clean_step_flags_nothing(audits: dict[str, Any]) -> None:
    clean = audits["clean"]
    assert clean["findings"] == [] and clean["ran"] is True
    assert clean["target"] == "CPU:0"
    assert clean["ops_per_device"]["CPU:0"] >= 3  # matmul, read, sum: plumbing not counted
    assert clean["off_target_ops"] == [] and clean["transfers"] == []
    assert "findings: none" in audits["clean_text"]


def test_numpy_call_inside_a_tf_function_is_flagged(audits: dict[str, Any]) -> None:
    report = audits["numpy_in_tf_function"]
    assert _ids(report) == ["numpy_conversion", "trace_failed"]
    assert "calls .numpy()" in report["findings"][0]["title"]
    assert "test_placement.py:" in report["findings"][0]["title"]  # where it is
    assert "'SymbolicTensor' object has no attribute 'numpy'" in report["findings"][1]["title"]
    assert [f["status"] for f in report["findings"]] == ["warn", "fail"]
    assert {f["source"] for f in report["findings"]} == {"placement"}
    assert audits["numpy_in_tf_function_text"].count("[FAIL] trace_failed: tracing") == 1


def test_eager_step_with_numpy_is_flagged(audits: dict[str, Any]) -> None:
    report = audits["eager_numpy"]
    assert _ids(report)[:3] == ["not_tf_function", "numpy_call", "numpy_conversion"]
    assert "calls numpy.mean" in report["findings"][1]["title"]


def test_py_function_and_numpy_function_are_flagged(audits: dict[str, Any]) -> None:
    report = audits["py_function"]
    assert _ids(report) == ["py_function"] and report["ran"] is True
    assert "EagerPyFunc" in report["findings"][0]["title"]
    assert "PyFunc" in report["findings"][0]["title"]


def test_op_off_the_target_device_and_the_copy_are_counted(audits: dict[str, Any]) -> None:
    report = audits["pinned"]
    assert _ids(report) == ["off_target"]
    assert {op["op"] for op in report["off_target_ops"]} >= {"Sum"}
    assert all(op["device"] == "CPU:1" for op in report["off_target_ops"])
    assert report["transfers"] == [{"source": "CPU:0", "destination": "CPU:1", "count": 1}]
    assert report["host_device_copies"] == 0  # both ends are the host


def test_target_selects_where_the_step_runs(audits: dict[str, Any]) -> None:
    report = audits["clean_on_cpu1"]
    assert report["target"] == "CPU:1" and report["findings"] == []
    assert set(report["ops_per_device"]) == {"CPU:1"}


def test_keras_train_step_is_clean_and_run_eagerly_is_flagged(audits: dict[str, Any]) -> None:
    train = audits["keras_train"]
    assert train["step"] == "train step of Keras model 'tiny'"
    assert train["findings"] == [] and train["ops_per_device"]["CPU:0"] > 10
    assert audits["keras_forward"]["step"] == "forward pass of Keras model 'tiny'"
    assert _ids(audits["keras_eager"]) == ["not_tf_function"]


def test_xla_compiled_step_says_why_its_placement_is_unknown(audits: dict[str, Any]) -> None:
    report = audits["compiled"]
    assert report["ran"] is False and report["findings"] == []
    assert "jit_compile=True" in report["note"]


def test_missing_target_is_an_error(audits: dict[str, Any]) -> None:
    assert audits["bad_target"]["error"] == "RuntimeSetupError"
    assert "'GPU:3' does not exist" in audits["bad_target"]["message"]


def test_report_is_json_serialisable(audits: dict[str, Any]) -> None:
    (finding,) = json.loads(json.dumps(audits["pinned"]))["findings"]
    assert finding["id"] == "off_target" and finding["status"] == "warn"
    assert set(finding) == {"id", "status", "title", "evidence", "numbers", "fix", "gain", "source"}
    assert finding["fix"].startswith("check tf.device scopes")


# --- the bytecode scan, without TensorFlow ---------------------------------------------------


def _clean(x: Any) -> Any:
    return x * np.float32(2.0) + np.pi  # NumPy constants and dtypes are not NumPy work


def _converts(x: Any) -> Any:
    return x.numpy() + 1


def _calls_numpy(x: Any) -> Any:
    def inner(y: Any) -> Any:
        return np.sum(y)

    return inner(x)


def test_scan_of_clean_code_finds_nothing() -> None:
    assert placement._python_findings([_clean]) == []


def test_scan_finds_numpy_conversion_and_nested_numpy_calls() -> None:
    converts = placement._python_findings([_converts])
    assert [(f.id, f.status, f.source) for f in converts] == [
        ("numpy_conversion", "warn", "placement")
    ]
    assert "_converts (" in converts[0].title
    calls = placement._python_findings([_calls_numpy])
    assert [f.id for f in calls] == ["numpy_call"] and "numpy.sum" in calls[0].title
    assert placement._python_findings([_converts, _converts]) == converts  # each once


# --- the scenario (runs in its own process) -------------------------------------------------


def _scenario() -> dict[str, Any]:
    from tfaccel import runtime

    runtime.setup(logical_devices=2)
    import keras
    import tensorflow as tf

    w = tf.Variable(tf.ones((4, 4)))
    x = tf.ones((2, 4))

    @tf.function
    def clean(x: Any) -> Any:
        return tf.reduce_sum(tf.matmul(x, w))

    @tf.function
    def numpy_in_tf_function(x: Any) -> Any:
        return tf.constant(x.numpy().sum())

    def eager_numpy(x: Any) -> Any:
        return np.mean(tf.matmul(x, w).numpy())

    @tf.function
    def py_function(x: Any) -> Any:
        doubled = tf.py_function(lambda t: t * 2, [x], tf.float32)
        return doubled + tf.numpy_function(lambda a: a, [x], tf.float32)

    @tf.function
    def pinned(x: Any) -> Any:
        y = tf.matmul(x, w)
        with tf.device("/CPU:1"):
            return tf.reduce_sum(y)

    @tf.function
    def stateless(x: Any) -> Any:
        return tf.reduce_sum(tf.matmul(x, tf.transpose(x)))

    @tf.function(jit_compile=True)
    def compiled(x: Any) -> Any:
        return tf.reduce_sum(x * 2.0)

    steps = [clean, numpy_in_tf_function, eager_numpy, py_function, pinned, compiled]
    out: dict[str, Any] = {fn.__name__: placement.audit(fn, x).to_dict() for fn in steps}
    out["clean_text"] = str(placement.audit(clean, x))
    out["numpy_in_tf_function_text"] = str(placement.audit(numpy_in_tf_function, x))
    out["clean_on_cpu1"] = placement.audit(stateless, x, target="/device:CPU:1").to_dict()
    out.update(_keras_audits(keras))
    try:
        placement.audit(clean, x, target="GPU:3")
    except runtime.RuntimeSetupError as exc:
        out["bad_target"] = {"error": type(exc).__name__, "message": str(exc)}
    return out


def _keras_audits(keras: Any) -> dict[str, Any]:
    def tiny() -> Any:
        model = keras.Sequential(
            [keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1)], name="tiny"
        )
        return model

    x, y = np.ones((8, 4), np.float32), np.ones((8, 1), np.float32)
    model = tiny()
    forward = placement.audit(model, x).to_dict()
    model.compile(optimizer="sgd", loss="mse")
    eager = tiny()
    eager.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    return {
        "keras_forward": forward,
        "keras_train": placement.audit(model, x, y).to_dict(),
        "keras_eager": placement.audit(eager, x, y).to_dict(),
    }


if __name__ == "__main__":
    emit(_scenario())
