"""``tfaccel.setup()`` and the placement audit on a real NVIDIA GPU (skipped without one).

Each scenario runs in a fresh process: memory growth with precision and XLA on auto; then a
memory limit split into two logical GPUs, and an audit whose step pins an op to the CPU.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from runtime_helpers import emit, outcome, run_scenario

pytestmark = pytest.mark.gpu


def _run(name: str) -> dict[str, Any]:
    seen = run_scenario(__file__, name)
    if not seen["gpus"]:
        pytest.skip("Requires: a TensorFlow build that sees the GPU (this one sees none)")
    return seen


def test_growth_precision_and_jit_on_a_gpu() -> None:
    seen = _run("growth")
    settings = seen["config"]["settings"]
    assert all(seen["growth"]) and settings["memory"]["status"] == "applied"
    expected = "mixed_float16" if min(float(cc) for cc in seen["cc"]) >= 7.0 else "float32"
    assert seen["policy"] == settings["precision"]["applied"] == expected
    assert settings["jit"]["applied"] is True and seen["jit"] == "autoclustering"


def test_limit_split_into_logical_gpus_and_cpu_fallback_audit() -> None:
    seen = _run("split")
    assert seen["logical"] == ["/device:GPU:0", "/device:GPU:1"]
    assert seen["clean"]["findings"] == [] and seen["clean"]["target"] == "GPU:0"
    fallback = seen["fallback"]
    assert [f["id"] for f in fallback["findings"]] == ["cpu_fallback"]
    assert fallback["host_device_copies"] >= 1
    assert seen["late"]["error"] == "RuntimeTooLateError"
    assert seen["late"]["config"]["settings"]["devices"]["status"] == "too_late"


def _growth() -> dict[str, Any]:
    from tfaccel import runtime
    from tfaccel.probe import tf_gpus

    config = runtime.setup(memory="growth", precision="auto", jit="auto")
    import keras
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return {
        "gpus": len(gpus),
        "config": config.to_dict(),
        "growth": [tf.config.experimental.get_memory_growth(g) for g in gpus],
        "cc": [g.compute_capability for g in tf_gpus.collect()],
        "policy": keras.mixed_precision.global_policy().name,
        "jit": tf.config.optimizer.get_jit(),
    }


def _split() -> dict[str, Any]:
    import tensorflow as tf

    from tfaccel import placement, runtime

    if not tf.config.list_physical_devices("GPU"):
        return {"gpus": 0}
    runtime.setup(devices=[0], memory=2048, logical_devices=2)
    logical = [d.name for d in tf.config.list_logical_devices("GPU")]

    @tf.function
    def clean(x: Any) -> Any:
        return tf.reduce_sum(tf.matmul(x, x))

    @tf.function
    def fallback(x: Any) -> Any:
        y = tf.matmul(x, x)
        with tf.device("CPU:0"):
            z = tf.reduce_sum(y)
        return z * 2.0

    x = tf.ones((64, 64))
    return {
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "logical": logical,
        "clean": placement.audit(clean, x).to_dict(),
        "fallback": placement.audit(fallback, x).to_dict(),
        "late": outcome(lambda: runtime.setup(devices="none")),
    }


if __name__ == "__main__":
    emit({"growth": _growth, "split": _split}[sys.argv[1]]())
