"""The decisions of ``tfaccel.setup()``, without TensorFlow: hand-built hardware and state.

``runtime.decide`` is a pure function of a Request, the Hardware facts and TensorFlow's
current RuntimeState, so the GPU rules are tested here on a machine without a GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from runtime_helpers import clean_env

from tfaccel import runtime
from tfaccel.core.errors import RuntimeSetupError, UsageError
from tfaccel.runtime import GpuFacts, Hardware, RuntimeState, SetupPlan
from tfaccel.runtime.apply import outcome, pending
from tfaccel.runtime.measured import measured_jit
from tfaccel.runtime.settings import build_request

GIB = 2**30
A100 = GpuFacts(0, "NVIDIA A100-SXM4-40GB", "8.0", 40 * GIB)
A100_1 = GpuFacts(1, "NVIDIA A100-SXM4-40GB", "8.0", 40 * GIB)
P100 = GpuFacts(0, "Tesla P100-PCIE-16GB", "6.0", 16 * GIB)
TWO_GPUS = Hardware(gpus=(A100, A100_1), nvml_gpus=(A100, A100_1))
CPU_BF16 = Hardware(cpu_flags=frozenset({"avx512f", "avx512_bf16", "amx_bf16"}))
CPU_PLAIN = Hardware(cpu_flags=frozenset({"avx2", "fma"}))
FRESH_TWO_GPUS = RuntimeState(visible_gpus=(0, 1))


def _decide(
    hw: Hardware,
    state: RuntimeState | None = None,
    env: dict[str, str] | None = None,
    model: Any = None,
    **arguments: Any,
) -> SetupPlan:
    request = build_request(arguments, env or {}, model)
    default_state = RuntimeState(visible_gpus=tuple(g.index for g in hw.gpus))
    return runtime.decide(request, hw, state or default_state)


# --- parsing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "parsed"),
    [
        ("devices", "0,1", (0, 1)),
        ("devices", [1, 0, 1], (0, 1)),
        ("devices", 2, (2,)),
        ("devices", "ALL", "all"),
        ("devices", "none", "none"),
        ("memory", "growth", "growth"),
        ("memory", "4096", 4096),
        ("memory", "0.5", 0.5),
        ("memory", 1.0, 1.0),
        ("precision", "mixed_bfloat16", "mixed_bfloat16"),
        ("jit", "auto", "auto"),
        ("jit", "off", False),
        ("jit", True, True),
        ("threads", "4", (4, None)),
        ("threads", "4,2", (4, 2)),
        ("threads", (3, 1), (3, 1)),
        ("logical_devices", "2", 2),
        ("deterministic", "yes", True),
        ("seed", "0", 0),
    ],
)
def test_parse_setting_accepts_values_and_text(name: str, value: Any, parsed: Any) -> None:
    assert runtime.parse_setting(name, value) == parsed
    assert runtime.parse_setting(name, parsed) == parsed  # the normalised form parses again


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("devices", "gpu0"),
        ("devices", [-1]),
        ("devices", []),
        ("devices", True),
        ("memory", -1024),
        ("memory", 0),
        ("memory", 0.0),
        ("memory", 1.5),
        ("memory", "4GB"),
        ("memory", True),
        ("precision", "fp16"),
        ("jit", "maybe"),
        ("threads", 0),
        ("threads", "4,2,1"),
        ("threads", (4, 0)),
        ("logical_devices", 0),
        ("deterministic", "sometimes"),
        ("seed", -1),
        ("seed", 2**32),
    ],
)
def test_parse_setting_rejects_bad_values_with_what_expected_received_fix(
    name: str, value: Any
) -> None:
    with pytest.raises(UsageError) as err:
        runtime.parse_setting(name, value)
    message = str(err.value)
    assert f"{name}={value!r}" in message
    assert "Expected:" in message and "Received:" in message and "Fix:" in message


def test_malformed_env_value_names_the_variable() -> None:
    with pytest.raises(UsageError) as err:
        build_request({}, {"TFACCEL_MEMORY": "lots"}, None)
    assert "environment variable TFACCEL_MEMORY='lots'" in str(err.value)
    assert "set TFACCEL_MEMORY=growth, or unset it" in str(err.value)


def test_malformed_option_names_the_option() -> None:
    with pytest.raises(UsageError) as err:
        runtime.parse_setting("threads", "x", source="--threads")
    assert str(err.value).startswith("--threads x is not a valid thread count")


def test_arguments_win_over_env_and_env_fills_the_rest() -> None:
    env = {"TFACCEL_PRECISION": "float32", "TFACCEL_JIT": "on", "TFACCEL_SEED": ""}
    request = build_request({"precision": "mixed_bfloat16"}, env, None)
    assert request.get("precision") == "mixed_bfloat16"
    assert request.sources["precision"] == "argument"
    assert request.get("jit") is True and request.sources["jit"] == "TFACCEL_JIT"
    assert request.get("seed") is None and request.sources["seed"] == "default"


def test_setup_rejects_a_bad_argument_before_importing_anything() -> None:
    with pytest.raises(UsageError, match="not a valid precision"):
        runtime.setup(precision="fast")


def test_importing_tfaccel_modules_does_not_import_tensorflow() -> None:
    code = (
        "import sys, tfaccel, tfaccel.runtime, tfaccel.placement, tfaccel.cli.run;"
        "print('tensorflow' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_env()
    )
    assert done.stdout.strip() == "False", done.stderr


# --- devices --------------------------------------------------------------------------------


def test_devices_selects_and_hides_gpus() -> None:
    assert _decide(TWO_GPUS, devices=[1]).visible_gpus == (1,)
    assert _decide(TWO_GPUS, devices="all").visible_gpus == (0, 1)
    hidden = _decide(TWO_GPUS, devices="none", precision="auto")
    assert hidden.visible_gpus == ()
    assert hidden.settings["devices"].reason == "GPUs hidden: TensorFlow runs on the CPU"
    assert hidden.precision == "float32"  # auto on the CPU the GPUs were hidden from


def test_nonexistent_gpu_index_lists_the_ones_that_exist() -> None:
    with pytest.raises(RuntimeSetupError) as err:
        _decide(TWO_GPUS, devices=[0, 5])
    message = str(err.value)
    assert "GPU 5 does not exist" in message
    assert "one of the GPUs TensorFlow sees: 0, 1" in message
    assert "devices=[0, 5]" in message


def test_gpu_index_when_tensorflow_sees_none_but_nvml_does_points_to_doctor() -> None:
    with pytest.raises(RuntimeSetupError) as err:
        _decide(Hardware(nvml_gpus=(A100,)), devices=[0])
    assert "NVML reports 1 GPU(s) but this TensorFlow sees none" in str(err.value)


# --- memory ---------------------------------------------------------------------------------


def test_memory_growth_on_every_visible_gpu() -> None:
    plan = _decide(TWO_GPUS, memory="growth")
    assert plan.growth == ("GPU:0", "GPU:1") and plan.virtual == {}
    assert plan.settings["memory"].applied == {"GPU:0": "growth", "GPU:1": "growth"}


def test_memory_limit_in_mib_and_as_a_fraction() -> None:
    plan = _decide(TWO_GPUS, devices=[1], memory=4096)
    assert plan.virtual == {"GPU:1": (4096,)}
    assert plan.settings["memory"].reason == "GPU:1 limited to 4096 MiB of 40960 MiB"
    assert _decide(TWO_GPUS, memory=0.25).virtual == {"GPU:0": (10240,), "GPU:1": (10240,)}


def test_memory_over_the_gpu_total_is_an_error() -> None:
    with pytest.raises(RuntimeSetupError, match="memory=50000 MiB is more than GPU:0 has"):
        _decide(TWO_GPUS, memory=50000)


def test_fraction_needs_the_total_memory() -> None:
    unknown = Hardware(gpus=(GpuFacts(0, "GPU", "8.0", None),))
    with pytest.raises(RuntimeSetupError, match="total memory of GPU:0 is unknown"):
        _decide(unknown, memory=0.5)


def test_growth_from_env_and_a_limit_are_rejected() -> None:
    with pytest.raises(RuntimeSetupError) as err:
        _decide(TWO_GPUS, env={"TF_FORCE_GPU_ALLOW_GROWTH": "true"}, memory=4096)
    assert "growth and a memory limit cannot be combined" in str(err.value)
    assert "unset TF_FORCE_GPU_ALLOW_GROWTH" in str(err.value)


def test_growth_and_logical_gpus_are_rejected() -> None:
    with pytest.raises(RuntimeSetupError, match="each logical GPU needs a memory limit"):
        _decide(TWO_GPUS, memory="growth", logical_devices=2)


def test_growth_on_a_gpu_that_already_has_a_limit_is_rejected() -> None:
    state = RuntimeState(visible_gpus=(0, 1), virtual={"GPU:0": (2048,)})
    with pytest.raises(RuntimeSetupError, match="GPU:0 already has a memory limit"):
        _decide(TWO_GPUS, state, memory="growth")


def test_limit_on_a_gpu_that_already_grows_is_rejected() -> None:
    state = RuntimeState(visible_gpus=(0, 1), growth={"GPU:0": True})
    with pytest.raises(RuntimeSetupError, match="GPU:0 already has memory growth on"):
        _decide(TWO_GPUS, state, memory=2048)


def test_memory_without_a_gpu_is_recorded_as_not_applied() -> None:
    setting = _decide(CPU_PLAIN, memory="growth").settings["memory"]
    assert (setting.status, setting.reason) == ("not_applicable", "not applied: no GPU")


def test_memory_checks_nvml_gpus_when_tensorflow_sees_none() -> None:
    with pytest.raises(RuntimeSetupError, match="more than GPU:0 has"):
        _decide(Hardware(nvml_gpus=(P100,)), memory=20000)


# --- logical devices ------------------------------------------------------------------------


def test_logical_devices_split_the_cpu_without_a_gpu() -> None:
    plan = _decide(CPU_PLAIN, logical_devices=3)
    assert plan.virtual == {"CPU:0": (None, None, None)}
    assert plan.settings["logical_devices"].applied == 3


def test_logical_devices_split_the_first_gpu_sharing_its_limit() -> None:
    plan = _decide(TWO_GPUS, memory=8192, logical_devices=2)
    assert plan.virtual == {"GPU:0": (4096, 4096), "GPU:1": (8192,)}
    assert plan.virtual_owners["GPU:0"] == {"memory", "logical_devices"}


def test_logical_gpus_without_a_limit_share_90_percent() -> None:
    assert _decide(TWO_GPUS, devices=[1], logical_devices=4).virtual == {"GPU:1": (9216,) * 4}


# --- precision ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hardware", "policy", "why"),
    [
        (TWO_GPUS, "mixed_float16", "compute capability >= 7.0 (GPU:0 8.0, GPU:1 8.0)"),
        (Hardware(gpus=(P100,)), "float32", "below 7.0 or unknown (GPU:0 6.0)"),
        (Hardware(tpu_present=True), "mixed_bfloat16", "a TPU is attached"),
        (CPU_BF16, "mixed_bfloat16", "this CPU has avx512_bf16, amx_bf16"),
        (CPU_PLAIN, "float32", "the CPU lacks avx512_bf16/amx_bf16"),
    ],
)
def test_precision_auto(hardware: Hardware, policy: str, why: str) -> None:
    setting = _decide(hardware, precision="auto").settings["precision"]
    assert setting.applied == policy and why in setting.reason


def test_explicit_slow_precisions_warn() -> None:
    assert "much slower" in _decide(CPU_PLAIN, precision="mixed_float16").warnings[0]
    assert "emulated" in _decide(CPU_PLAIN, precision="mixed_bfloat16").warnings[0]
    assert "no speed-up" in _decide(Hardware(gpus=(P100,)), precision="mixed_float16").warnings[0]
    assert _decide(CPU_BF16, precision="mixed_bfloat16").warnings == []


def _layer(name: str, shape: tuple[int, ...]) -> SimpleNamespace:
    return SimpleNamespace(name=name, kernel=SimpleNamespace(shape=shape))


def test_model_dims_not_multiple_of_8_warn_under_mixed_float16() -> None:
    model = SimpleNamespace(
        name="m", layers=[_layer("ok", (16, 64)), _layer("conv", (3, 3, 3, 30))]
    )
    assert runtime.check_model_dims(model) == [
        "layer 'conv' (SimpleNamespace): input features 3, output features 30 not multiples of 8"
    ]
    plan = _decide(TWO_GPUS, model=model, precision="auto")
    assert any("layer 'conv'" in w for w in plan.warnings)
    assert _decide(CPU_BF16, model=model, precision="auto").warnings == []


# --- jit, threads, determinism ------------------------------------------------------------------


def test_jit_auto_is_on_for_gpu_off_for_cpu_unless_measured() -> None:
    assert _decide(TWO_GPUS, jit="auto").jit is True
    assert _decide(CPU_PLAIN, jit="auto").jit is False
    measured = Hardware(measured_jit=True, measured_jit_reason="measured on this machine: faster")
    plan = _decide(measured, jit="auto")
    assert plan.jit is True and plan.settings["jit"].reason == "measured on this machine: faster"


def test_jit_on_a_cpu_says_to_measure() -> None:
    assert "measure it" in _decide(CPU_PLAIN, jit=True).settings["jit"].reason


def test_threads_above_usable_cores_are_applied_with_a_note() -> None:
    setting = _decide(Hardware(usable_cores=2), threads=8).settings["threads"]
    assert setting.applied == [8, 0] and "more than the 2 core(s)" in setting.reason


def test_unrequested_settings_are_unchanged_and_report_the_current_value() -> None:
    state = RuntimeState(threads=(4, 2), jit=True, precision="mixed_bfloat16")
    plan = _decide(CPU_PLAIN, state)
    assert all(s.status == "unchanged" for s in plan.settings.values())
    assert plan.settings["threads"].applied == [4, 2]
    assert plan.settings["jit"].applied is True
    assert plan.settings["precision"].applied == "mixed_bfloat16"


def test_deterministic_without_seed_says_to_seed() -> None:
    assert "pass seed=" in _decide(CPU_PLAIN, deterministic=True).settings["deterministic"].reason


# --- RuntimeConfig --------------------------------------------------------------------------


def test_runtime_config_round_trips_through_json_and_prints_each_setting() -> None:
    plan = _decide(TWO_GPUS, memory=4096, precision="auto", jit="auto", seed=1)
    config = outcome(plan, FRESH_TWO_GPUS, set())
    data = json.loads(config.to_json())
    assert list(data["settings"]) == list(runtime.SETTINGS)
    assert data["settings"]["memory"]["applied"] == {"GPU:0": 4096, "GPU:1": 4096}
    text = str(config)
    for name in runtime.SETTINGS:
        assert f"\n  {name} " in text
    assert "GPU:0=4096, GPU:1=4096" in text
    assert config["jit"].applied is True and config == outcome(plan, FRESH_TWO_GPUS, set())


def test_too_late_settings_report_what_tensorflow_kept() -> None:
    state = RuntimeState(started=True, visible_gpus=(0, 1), threads=(8, 2))
    plan = _decide(TWO_GPUS, state, threads=2, devices=[0], precision="auto")
    assert pending(plan, state) == {"devices", "threads"}
    config = outcome(plan, state, {"devices", "threads"})
    assert config.too_late == ["devices", "threads"]
    assert config["threads"].applied == [8, 2] and config["devices"].applied == ["GPU:0", "GPU:1"]
    error = runtime.RuntimeTooLateError(config)
    assert error.config is config
    assert "devices, threads can no longer change" in str(error)
    assert "applied anyway: precision" in str(error)


def test_a_repeated_request_changes_nothing_so_it_is_never_too_late() -> None:
    state = RuntimeState(
        started=True, visible_gpus=(0,), growth={"GPU:0": True, "GPU:1": False}, threads=(2, 1)
    )
    plan = _decide(TWO_GPUS, state, devices=[0], memory="growth", threads=(2, 1))
    assert pending(plan, state) == set()


# --- the results store behind jit="auto" -----------------------------------------------------

MACHINE = "0123456789abcdef"  # a fingerprint digest: the lookups take it, they never probe
MODEL = "fedcba9876543210"  # a model's architecture fingerprint


def _record_xla_run(jit_medians: dict[bool, float]) -> None:
    from tfaccel import store

    results = [
        store.ResultRecord(
            benchmark="reference_cnn",
            config={"jit": jit, "device": "cpu"},
            metric="images_per_s",
            unit="images/s",
            median=median,
            q1=median * 0.98,
            q3=median * 1.02,
            n=5,
            samples=[median] * 5,
            model_fingerprint=MODEL,
        )
        for jit, median in jit_medians.items()
    ]
    with store.ResultsStore() as db:
        run = db.begin_run(
            MACHINE, fingerprint_data={}, started_at="t0", tfaccel_version="0", tf_version=None
        )
        db.finish_run(run, results, finished_at="t1")


def test_jit_auto_uses_the_measurement_in_the_results_store(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    request = build_request({"jit": "auto"}, {}, None)
    assert measured_jit(request, "cpu", MACHINE, model_fingerprint=MODEL)[0] is None  # no db yet
    _record_xla_run({True: 400.0, False: 1200.0})
    assert measured_jit(request, "cpu", MACHINE, model_fingerprint=MODEL) == (
        False,
        "measured here on cpu (reference_cnn): XLA slower",
    )
    # measured on the CPU only, on this machine only, and on this model only
    assert measured_jit(request, "gpu:0", MACHINE, model_fingerprint=MODEL)[0] is None
    assert measured_jit(request, "cpu", "another-machine", model_fingerprint=MODEL)[0] is None
    assert measured_jit(request, "cpu", MACHINE, model_fingerprint="another-model")[0] is None
    value, reason = measured_jit(request, "cpu", MACHINE)  # no model: no borrowed measurement
    assert value is None and reason.endswith("decided by rule")


def test_jit_auto_survives_a_broken_results_store(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    broken = tmp_path / "tfaccel" / "results.sqlite"
    broken.parent.mkdir()
    broken.write_bytes(b"this is not a database" * 100)
    request = build_request({"jit": "auto"}, {}, None)
    value, reason = measured_jit(request, "cpu", MACHINE, model_fingerprint=MODEL)
    assert value is None and reason.startswith("the results store could not be read")
