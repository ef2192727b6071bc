"""``tfaccel.setup()`` against real TensorFlow on this CPU, in one fresh process.

The scenario below runs in a subprocess (TensorFlow's runtime cannot be reset): bad input
first (nothing may change), then a full setup, the same setup again, MirroredStrategy on the
two logical CPUs, precision "auto" with the CPU flags faked, a call after the runtime started,
``on_device()``, the model-dimension warning, and ``setup(precision="auto", jit="auto")`` over a
results store that measured this machine, its probes counted. The tests assert on what it
printed.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import emit, outcome, run_scenario, tf_state

BF16_FLAGS = {"avx512_bf16", "amx_bf16"}
SETUP_ARGS: dict[str, Any] = {
    "devices": "all",
    "memory": "growth",
    "logical_devices": 2,
    "threads": (2, 1),
    "precision": "auto",
    "jit": "auto",
    "deterministic": True,
    "seed": 7,
}


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@pytest.fixture(scope="module")
def seen() -> dict[str, Any]:
    return run_scenario(__file__)


# --- fresh runtime --------------------------------------------------------------------------


def test_importing_tfaccel_does_not_import_tensorflow(seen: dict[str, Any]) -> None:
    assert seen["tf_after_import"] is False


def test_each_setting_is_applied_and_visible_through_tf_config(seen: dict[str, Any]) -> None:
    state, settings = seen["state_applied"], seen["applied"]["settings"]
    assert state["started"] is False, "setup must not start the runtime"
    assert seen["logical_cpus"] == ["/device:CPU:0", "/device:CPU:1"]
    assert (state["intra"], state["inter"]) == (2, 1)
    assert state["jit"] == ""  # auto on a CPU: XLA auto-clustering off
    assert state["deterministic"] is True
    assert seen["seeded"] is True
    for name in ("logical_devices", "threads", "precision", "jit", "deterministic", "seed"):
        assert settings[name]["status"] == "applied", settings[name]
    assert settings["threads"]["applied"] == [2, 1]
    assert settings["jit"]["applied"] is False and "CPU" in settings["jit"]["reason"]


def test_gpu_settings_without_a_gpu_say_they_were_not_applied(seen: dict[str, Any]) -> None:
    settings = seen["applied"]["settings"]
    if seen["has_gpu"]:
        pytest.skip("TensorFlow sees a GPU here")
    assert settings["memory"]["status"] == "not_applicable"
    assert settings["memory"]["reason"].startswith("not applied: no GPU")
    assert settings["devices"]["status"] == "not_applicable"


def test_precision_auto_picks_bfloat16_on_this_cpu_when_it_has_the_flags(
    seen: dict[str, Any],
) -> None:
    expected = "mixed_bfloat16" if _cpu_flags() & BF16_FLAGS else "float32"
    precision = seen["applied"]["settings"]["precision"]
    assert precision["applied"] == expected == seen["state_applied"]["policy"]
    if expected == "mixed_bfloat16":
        assert "avx512_bf16" in precision["reason"] or "amx_bf16" in precision["reason"]


def test_precision_auto_with_the_cpu_flags_faked(seen: dict[str, Any]) -> None:
    assert seen["auto_without_bf16"]["applied"] == "float32"
    assert "lacks avx512_bf16/amx_bf16" in seen["auto_without_bf16"]["reason"]
    assert seen["auto_with_amx"]["applied"] == "mixed_bfloat16"
    assert "amx_bf16" in seen["auto_with_amx"]["reason"]


def test_setup_again_with_the_same_arguments_is_idempotent(seen: dict[str, Any]) -> None:
    assert seen["again"] == {"ok": seen["applied"]}


def test_config_prints_a_table(seen: dict[str, Any]) -> None:
    text = seen["text"]
    assert text.splitlines()[0] == "tfaccel runtime setup:"
    assert all(name in text for name in SETUP_ARGS)


def test_two_logical_cpus_train_with_mirrored_strategy(seen: dict[str, Any]) -> None:
    mirrored = seen["mirrored"]
    assert mirrored["replicas"] == 2
    assert len(mirrored["loss"]) == 2 and all(loss == loss for loss in mirrored["loss"])
    assert mirrored["loss"][-1] < mirrored["loss"][0]


# --- too late -------------------------------------------------------------------------------


def test_too_late_raises_names_settings_and_still_applies_precision_and_jit(
    seen: dict[str, Any],
) -> None:
    late = seen["too_late"]
    assert late["error"] == "RuntimeTooLateError"
    assert "logical_devices, threads can no longer change" in late["message"]
    assert "call tfaccel.setup(...) first" in late["message"]
    settings = late["config"]["settings"]
    assert settings["threads"]["status"] == "too_late"
    assert settings["threads"]["applied"] == [2, 1]  # what TensorFlow kept
    assert settings["logical_devices"]["status"] == "too_late"
    assert settings["precision"]["status"] == settings["jit"]["status"] == "applied"
    after = seen["state_after_too_late"]
    assert after["policy"] == "float32" and after["jit"] == "autoclustering"
    assert (after["intra"], after["inter"]) == (2, 1)


# --- bad input ------------------------------------------------------------------------------

BAD_INPUT = {
    "unknown_precision": ("UsageError", "precision='fast' is not a valid precision"),
    "negative_memory": ("UsageError", "memory=-1024 is not a valid GPU memory setting"),
    "zero_memory": ("UsageError", "memory=0 is not a valid GPU memory setting"),
    "fraction_over_one": ("UsageError", "memory=1.5 is not a valid GPU memory setting"),
    "over_total_memory": ("RuntimeSetupError", "memory=1000000 MiB is more than GPU:0 has"),
    "missing_gpu_index": ("RuntimeSetupError", "GPU 3 does not exist"),
    "malformed_env": ("UsageError", "environment variable TFACCEL_THREADS='many'"),
    "growth_and_limit": ("RuntimeSetupError", "growth and a memory limit cannot be combined"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_a_clear_error(seen: dict[str, Any], case: str) -> None:
    error, text = BAD_INPUT[case]
    found = seen["bad"][case]
    assert found.get("error") == error, found
    assert text in found["message"]
    assert "Expected:" in found["message"] and "Fix:" in found["message"]


def test_bad_input_changes_nothing(seen: dict[str, Any]) -> None:
    assert seen["after_bad"] == seen["before_bad"]
    assert seen["after_bad"]["started"] is False


def test_memory_on_gpus_tensorflow_cannot_see_is_not_applied(seen: dict[str, Any]) -> None:
    memory = seen["nvml_only"]["ok"]["settings"]["memory"]
    assert memory["status"] == "not_applicable"
    assert "NVML reports 1" in memory["reason"]


# --- on_device() and model dimensions -----------------------------------------------------------


def test_device_accepts_the_usual_spellings(seen: dict[str, Any]) -> None:
    assert seen["placed"] == {
        "cpu:1": "CPU:1",
        "/cpu:0": "CPU:0",
        "/device:CPU:1": "CPU:1",
        "CPU:0": "CPU:0",
    }


def test_device_that_does_not_exist_is_an_error_listing_those_that_do(
    seen: dict[str, Any],
) -> None:
    missing = seen["device_errors"]["GPU:0"]
    assert missing["error"] == "RuntimeSetupError"
    assert "'GPU:0' does not exist" in missing["message"]
    assert "one of CPU:0, CPU:1" in missing["message"]
    assert seen["device_errors"]["CPU:5"]["error"] == "RuntimeSetupError"
    assert seen["device_errors"]["banana"]["error"] == "UsageError"


def test_mixed_float16_warns_about_model_dimensions(seen: dict[str, Any]) -> None:
    dims = seen["dims"]
    assert dims["messages"] == [
        "layer 'odd' (Dense): input features 20, output features 10 not multiples of 8"
    ]
    assert dims["even"] == []
    assert any("layer 'odd'" in w for w in dims["config_warnings"])
    assert any("layer 'odd'" in w for w in dims["warned"])
    assert any("much slower" in w for w in dims["warned"])  # float16 on a CPU


def test_setup_auto_probes_the_machine_once(seen: dict[str, Any]) -> None:
    once = seen["probes_once"]
    assert once["snapshots"] == [{"libraries": False}]  # one look, no library loaded
    assert once["cpu_reads"] == once["nvml_reads"] == 1  # nothing probes beside it
    where = f"measured here on {once['device']} (reference_cnn)"
    assert once["jit"] == [True, f"{where}: XLA faster"]  # the lookups did run
    assert once["precision"] == ["float32", f"{where}: float32 fastest"]


# --- the scenario (runs in its own process) -------------------------------------------------


def _scenario() -> dict[str, Any]:
    import importlib

    for module in ("tfaccel", "tfaccel.runtime", "tfaccel.placement", "tfaccel.cli.run"):
        importlib.import_module(module)
    runtime = sys.modules["tfaccel.runtime"]
    out: dict[str, Any] = {"tf_after_import": "tensorflow" in sys.modules}
    out.update(_bad_input(runtime))
    _full_setup(runtime, out)
    out["mirrored"] = _mirrored_fit()
    out.update(_precision_with_faked_flags(runtime))
    out["too_late"] = outcome(
        lambda: runtime.setup(threads=1, logical_devices=3, precision="float32", jit=True)
    )
    out["state_after_too_late"] = tf_state()
    out.update(_devices(runtime))
    out["dims"] = _dims(runtime)
    out["probes_once"] = _probes_once(runtime)
    return out


def _bad_input(runtime: Any) -> dict[str, Any]:
    from tfaccel.probe import nvml
    from tfaccel.snapshot import GpuInfo, NvmlInfo

    valid: dict[str, Any] = dict(SETUP_ARGS, precision="mixed_bfloat16", jit=True, memory=None)
    no_threads = {k: v for k, v in valid.items() if k != "threads"}
    growth_env = {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    cases = {
        "unknown_precision": lambda: runtime.setup(**dict(valid, precision="fast")),
        "negative_memory": lambda: runtime.setup(**dict(valid, memory=-1024)),
        "zero_memory": lambda: runtime.setup(**dict(valid, memory=0)),
        "fraction_over_one": lambda: runtime.setup(**dict(valid, memory=1.5)),
        "missing_gpu_index": lambda: runtime.setup(**dict(valid, devices=[3])),
        "malformed_env": lambda: runtime.setup(**no_threads, environ={"TFACCEL_THREADS": "many"}),
        "growth_and_limit": lambda: runtime.setup(**dict(valid, memory=4096), environ=growth_env),
        "over_total_memory": lambda: runtime.setup(**dict(valid, memory=10**6, devices=None)),
    }
    before = tf_state()
    real_collect = nvml.collect
    gpu = GpuInfo(index=0, name="Fake GPU", memory_total_bytes=16 * 2**30, compute_capability="8.0")
    nvml.collect = lambda *a, **k: NvmlInfo(available=True, gpus=[gpu])  # NVML sees a GPU
    try:
        results = {}
        for name, call in cases.items():
            results[name] = outcome(call)
        nvml_only = outcome(lambda: runtime.setup(memory=4096))
    finally:
        nvml.collect = real_collect
    return {"bad": results, "before_bad": before, "after_bad": tf_state(), "nvml_only": nvml_only}


def _full_setup(runtime: Any, out: dict[str, Any]) -> None:
    import numpy as np
    import tensorflow as tf

    out["has_gpu"] = bool(tf.config.list_physical_devices("GPU"))
    config = runtime.setup(**SETUP_ARGS)
    out["seeded"] = np.random.random() == np.random.RandomState(7).random_sample()
    out["applied"], out["text"] = config.to_dict(), str(config)
    out["state_applied"] = tf_state()
    out["logical_cpus"] = [d.name for d in tf.config.list_logical_devices("CPU")]
    out["again"] = outcome(lambda: runtime.setup(**SETUP_ARGS))


def _mirrored_fit() -> dict[str, Any]:
    import keras
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
        )
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    return {"replicas": strategy.num_replicas_in_sync, "loss": history.history["loss"]}


def _precision_with_faked_flags(runtime: Any) -> dict[str, Any]:
    from tfaccel.probe import cpu
    from tfaccel.snapshot import CpuInfo

    real_collect, results = cpu.collect, {}
    try:
        for name, flags in (
            ("auto_without_bf16", ["avx2", "fma"]),
            ("auto_with_amx", ["amx_bf16"]),
        ):
            cpu.collect = lambda *a, flags=flags, **k: CpuInfo(flags=flags)
            results[name] = runtime.setup(precision="auto").to_dict()["settings"]["precision"]
    finally:
        cpu.collect = real_collect
    return results


def _devices(runtime: Any) -> dict[str, Any]:
    import tensorflow as tf

    placed = {}
    for spec in ("cpu:1", "/cpu:0", "/device:CPU:1", "CPU:0"):
        with runtime.on_device(spec):
            placed[spec] = tf.ones(1).device.rsplit("device:", 1)[-1]
    errors = {
        spec: outcome(partial(runtime.on_device, spec)) for spec in ("GPU:0", "CPU:5", "banana")
    }
    return {"placed": placed, "device_errors": errors}


def _dims(runtime: Any) -> dict[str, Any]:
    import warnings

    import keras

    odd = keras.Sequential([keras.Input((20,)), keras.layers.Dense(10, name="odd")])
    even = keras.Sequential([keras.Input((16,)), keras.layers.Dense(8, name="even")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = runtime.setup(precision="mixed_float16", model=odd)
    return {
        "messages": runtime.check_model_dims(odd),
        "even": runtime.check_model_dims(even),
        "config_warnings": list(config.warnings),
        "warned": [str(w.message) for w in caught],
    }


def _probes_once(runtime: Any) -> dict[str, Any]:
    """setup(precision="auto", jit="auto") with a results store holding this machine's
    measurement, counting the calls of the probing entry point (and of the readers inside it)."""
    import os
    import tempfile

    import tensorflow as tf

    from tfaccel import architecture, inventory, models, probe, store
    from tfaccel.probe import cpu, nvml

    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp()
    device = "gpu:0" if tf.config.list_physical_devices("GPU") else "cpu"
    fingerprint = inventory.current().fingerprint
    model = models.build("reference_cnn", tiny=True)
    measured = (
        (False, "float32", 100.0),
        (True, "float32", 300.0),
        (False, "mixed_bfloat16", 50.0),
        (True, "mixed_bfloat16", 60.0),
    )
    results = [
        store.ResultRecord(
            "reference_cnn",
            {"device": device, "jit": jit, "precision": precision},
            "images_per_s",
            "images/s",
            median,
            median * 0.99,
            median * 1.01,
            3,
            [median] * 3,
            model_fingerprint=architecture.fingerprint(model),
        )
        for jit, precision, median in measured
    ]
    with store.ResultsStore() as db:
        run = db.begin_run(
            fingerprint.digest,
            fingerprint_data=fingerprint.data,
            started_at="t0",
            tfaccel_version="0",
            tf_version=None,
        )
        db.finish_run(run, results, finished_at="t1")
    real = (probe.snapshot, cpu.collect, nvml.collect)
    snapshots: list[dict[str, Any]] = []
    reads = {"cpu": 0, "nvml": 0}

    def snapshot(**kwargs: Any) -> Any:
        snapshots.append(kwargs)
        return real[0](**kwargs)

    def counted(kind: str, read: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            reads[kind] += 1
            return read(*args, **kwargs)

        return call

    probe.snapshot, cpu.collect = snapshot, counted("cpu", real[1])
    nvml.collect = counted("nvml", real[2])
    try:
        config = runtime.setup(precision="auto", jit="auto", model=model)
    finally:
        probe.snapshot, cpu.collect, nvml.collect = real
    return {
        "device": device,
        "snapshots": snapshots,
        "cpu_reads": reads["cpu"],
        "nvml_reads": reads["nvml"],
        "jit": [config["jit"].applied, config["jit"].reason],
        "precision": [config["precision"].applied, config["precision"].reason],
    }


if __name__ == "__main__":
    emit(_scenario())
