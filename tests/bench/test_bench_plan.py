"""What a bench run measures and how its figures are related, without TensorFlow:
options, device targets and peaks, configurations, derived tables, run-to-run comparison."""

from __future__ import annotations

import pytest

from tfaccel import inventory
from tfaccel.bench import BenchMeasurement, BenchResult, BenchRun, compare_runs, summarize_run
from tfaccel.bench.analysis import device_table, headline, model_rows
from tfaccel.bench.options import (
    PROFILES,
    BenchOptions,
    parse_data_spec,
    parse_device_spec,
    parse_only,
)
from tfaccel.bench.targets import build_targets, cpu_dtypes, gpu_dtypes
from tfaccel.bench.training import KERAS_DEFAULT, configurations
from tfaccel.core.errors import UsageError
from tfaccel.snapshot import GpuInfo, Snapshot


def _inventory(gpus: int = 0, gpu_name: str = "NVIDIA A100-SXM4-80GB") -> inventory.Inventory:
    snap = Snapshot()
    snap.cpu.model, snap.cpu.physical_cores, snap.cpu.max_mhz = "Test CPU", 4, 3000.0
    snap.cpu.flags = ["avx2", "fma", "avx512f", "avx512_bf16"]
    snap.nvml.gpus = [
        GpuInfo(index=i, name=gpu_name, compute_capability="8.0", memory_total_bytes=80 << 30)
        for i in range(gpus)
    ]
    return inventory.build(snap)


def test_only_accepts_names_and_groups_and_rejects_the_rest() -> None:
    assert parse_only("conv2d, matmul") == ("matmul", "conv2d")
    assert parse_only("micro") == ("matmul", "bandwidth", "transfer", "vector_add", "conv2d")
    assert "resnet20" in parse_only(None)
    with pytest.raises(UsageError, match="Unknown benchmark 'matmull'") as info:
        parse_only("matmul,matmull")
    assert "reference_cnn" in str(info.value)
    with pytest.raises(UsageError, match="names no benchmark"):
        parse_only(" , ")


def test_device_and_data_specs() -> None:
    assert parse_device_spec("GPU") == "gpu:0"
    assert parse_device_spec("gpu:3") == "gpu:3"
    for bad in ("tpu", "gpu:x", "cuda:0", ""):
        with pytest.raises(UsageError, match="Unknown device"):
            parse_device_spec(bad)
    assert parse_data_spec("synthetic:500").images == 500
    assert parse_data_spec("cifar10:/data/c").path == "/data/c"
    for bad in ("cifar10", "synthetic:0", "imagenet:/x", "synthetic:-3"):
        with pytest.raises(UsageError, match="--data"):
            parse_data_spec(bad)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("batch_size", 0, "positive integer"),
        ("batch_size", -8, "positive integer"),
        ("repeats", 0, "at least 1"),
        ("profile", "fast", "Unknown profile"),
        ("device", "npu", "Unknown device"),
        ("data", "mnist", "--data"),
    ],
)
def test_bad_options_are_rejected_before_any_measurement(
    field: str, value: object, message: str
) -> None:
    options = BenchOptions(**{field: value})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=message):
        options.validate()


def test_dtypes_follow_the_hardware() -> None:
    assert cpu_dtypes(["avx2"]) == ("float32",)
    assert cpu_dtypes(["avx512_bf16", "amx_bf16", "avx512_fp16"]) == (
        "float32",
        "bfloat16",
        "float16",
    )
    assert gpu_dtypes("6.1") == ("float32",)  # Pascal consumer parts: fp16 at 1/64 rate
    assert gpu_dtypes("7.5") == ("float32", "float16")
    assert gpu_dtypes("9.0") == ("float32", "float16", "bfloat16")


def test_targets_and_peaks() -> None:
    (cpu,) = build_targets("cpu", _inventory(), 0, cpu_flags=["avx512f", "avx512_bf16"])
    assert cpu.dtypes == ("float32", "bfloat16")
    assert cpu.peak_tflops["float32"] == pytest.approx(4 * 3.0 * 64 / 1000)
    inv = _inventory(gpus=2)
    targets = build_targets("all", inv, 2, tf32=True)
    assert [t.name for t in targets] == ["cpu", "gpu:0", "gpu:1", "gpus"]
    gpu0, mirrored = targets[1], targets[3]
    assert gpu0.peak_tflops["float32"] == 156  # TF32: TensorFlow's float32 matmul on Ampere
    assert build_targets("gpu:0", inv, 2, tf32=False)[0].peak_tflops["float32"] == 19.5
    assert gpu0.peak_bandwidth_gbs == 2039 and "A100" in gpu0.label
    assert mirrored.kind == "mirrored" and mirrored.replicas == 2
    assert mirrored.peak_tflops["bfloat16"] == 2 * 312


def test_a_gpu_tensorflow_does_not_see_is_a_clear_error() -> None:
    with pytest.raises(UsageError, match="does not see the device 'gpu:1'") as info:
        build_targets("gpu:1", _inventory(gpus=1), 1)
    assert "gpu:0" in str(info.value)
    with pytest.raises(UsageError, match="TensorFlow sees none"):
        build_targets("gpus", _inventory(), 0)
    with pytest.raises(UsageError, match="GPUs TensorFlow sees: none"):
        build_targets("gpu:0", _inventory(), 0)


def test_configurations_short_and_full() -> None:
    cpu = build_targets("cpu", _inventory(), 0, cpu_flags=["avx512_bf16"])[0]
    short = configurations(cpu, PROFILES["quick"], None)
    assert short[0] == KERAS_DEFAULT
    assert [(c.feed, c.batch_size, c.precision, c.jit) for c in short[1:]] == [
        ("tf.data", 256, "float32", False),
        ("tf.data", 256, "mixed_bfloat16", False),
    ]
    full = configurations(cpu, PROFILES["full"], 128)
    assert ("tf.data", 32, "float32", False) in [
        (c.feed, c.batch_size, c.precision, c.jit) for c in full
    ]
    assert {c.jit for c in full} == {False, True}
    fp16_cpu = build_targets("cpu", _inventory(), 0, cpu_flags=["avx512_bf16", "avx512_fp16"])[0]
    assert "float16" in fp16_cpu.dtypes  # measured by matmul and conv2d...
    assert all(
        c.precision != "mixed_float16" for c in configurations(fp16_cpu, PROFILES["full"], None)
    )
    gpu = build_targets("gpu:0", _inventory(gpus=1), 1)[0]
    assert configurations(gpu, PROFILES["quick"], None)[2].precision == "mixed_float16"


def _m(benchmark: str, median: float, spread: float = 0.01, **config: object) -> BenchMeasurement:
    samples = [median * (1 + spread * f) for f in (-2, -1, 0, 1, 2)]
    unit = "images/s" if benchmark in ("reference_cnn", "mlp") else "TFLOP/s"
    extra: dict[str, object] = {}
    if unit == "images/s":
        extra = {
            "flops_per_image": 1e8,
            "global_batch": config.get("batch_size", 32),
            "peak_tflops": 1.0,
            "step_time_s": [0.01, 0.011],
        }
    return BenchMeasurement(benchmark, {"device": "cpu", **config}, "m", unit, samples, extra)


def _run(measurements: list[BenchMeasurement], run_id: int = 1) -> BenchRun:
    return BenchRun(
        started_at="2025-01-01T00:00:00+00:00",
        finished_at=None,
        status="complete",
        options={},
        fingerprint="fp",
        fingerprint_data={},
        tfaccel_version="0.1.0",
        tf_version="2.21.0",
        targets=[
            {"name": "cpu", "label": "CPU Test", "peak_tflops": {"float32": 1.0}},
            {"name": "gpu:0", "label": "GPU:0 Test", "peak_tflops": {"float32": 10.0}},
        ],
        measurements=measurements,
        run_id=run_id,
    )


def _model_run() -> BenchRun:
    default = {"feed": "numpy", "batch_size": 32, "precision": "float32", "jit": False}
    fast = {"feed": "tf.data", "batch_size": 256, "precision": "mixed_bfloat16", "jit": False}
    gpu = _m("reference_cnn", 8000.0, **default)
    gpu.config["device"] = "gpu:0"
    return _run(
        [
            _m("matmul", 0.5, dtype="float32", n=1024),
            _m("matmul", 0.2, dtype="bfloat16", n=1024),
            _m("reference_cnn", 800.0, **default),
            _m("reference_cnn", 1600.0, **fast),
            gpu,
        ]
    )


def test_headline_utilisation_and_device_table() -> None:
    run = _model_run()
    h = headline(run)
    assert h is not None and h["device"] == "cpu"
    assert h["default_images_per_s"] == 800.0 and h["best_images_per_s"] == 1600.0
    assert h["ratio"] == pytest.approx(2.0) and h["different"]
    rows = {r["config"]: r for r in model_rows(run) if r["device"] == "cpu"}
    default = rows["fit(numpy) bs32 fp32"]
    assert default["model_tflops"] == pytest.approx(800 * 1e8 / 1e12)
    assert default["utilisation_percent"] == pytest.approx(100 * 0.08 / 0.5)  # of fp32 matmul
    assert default["mfu_percent"] == pytest.approx(8.0)
    assert default["epoch_seconds"] == pytest.approx(50_000 / 800)
    assert default["step_time_ms"] == pytest.approx(1000 * 32 / 800)
    assert rows["tf.data bs256 bf16 mixed"]["utilisation_percent"] == pytest.approx(80.0)
    table = {r["device"]: r for r in device_table(run)}
    assert table["cpu"]["best_config"] == "tf.data bs256 bf16 mixed"
    assert table["gpu:0"]["speedup_over_cpu"] == pytest.approx(5.0)
    assert set(summarize_run(run)) >= {"headline", "device_table", "models", "micro", "roofline"}


def test_comparison_calls_a_true_change_and_not_the_noise() -> None:
    before = _run(
        [
            _m("matmul", 1.0, dtype="float32"),
            _m("matmul", 2.0, dtype="bfloat16"),
            _m("conv2d", 1.0),
        ],
        run_id=1,
    )
    after = _run(
        [
            _m("matmul", 0.9, dtype="float32"),
            _m("matmul", 2.02, dtype="bfloat16"),
            _m("conv2d", 1.0, spread=0.3),
            _m("vector_add", 1.0),
        ],
        run_id=2,
    )
    # stable so far: with the earlier run, the five runs the noise between runs needs
    history = [_run(list(before.measurements), run_id=i) for i in (-3, -2, -1, 0)]
    result = compare_runs(before, after, history)
    status = {(r["benchmark"], r["config"]): r["status"] for r in result["rows"]}
    assert status[("matmul", "fp32")] == "worse"  # 10% slower, noise +-1%, stable history
    assert status[("matmul", "bf16")] == "same"  # 1% faster: inside the noise
    assert status[("conv2d", "default")] == "same"
    assert ("vector_add", "default") not in status  # not in the earlier run
    assert result["counts"] == {"worse": 1, "same": 2}
    few = _run([BenchMeasurement("digits", {"device": "cpu"}, "acc", "fraction", [0.96])])
    assert compare_runs(few, few)["rows"][0]["status"] == "not compared"


def test_run_round_trips_through_dict_and_store_records() -> None:
    run = _model_run()
    again = BenchRun.from_dict(run.to_dict())
    assert [m.samples for m in again.measurements] == [m.samples for m in run.measurements]
    record = run.measurements[2].to_record()
    assert record.median == pytest.approx(800.0) and record.n == 5
    assert BenchMeasurement.from_record(record).config == run.measurements[2].config


def _digits(accuracy: float) -> BenchMeasurement:
    return BenchMeasurement(
        "digits",
        {"device": "cpu", "name": "MLP 64 on digits"},
        "test_accuracy",
        "fraction",
        [accuracy],
        {"threshold": 0.95, "passed": accuracy >= 0.95},
    )


def test_a_failed_convergence_check_is_the_status_of_the_result() -> None:
    learned = BenchResult.from_run(_run([_digits(0.97)]))
    assert learned.status == "ok" and learned.failed_checks == []
    failed = BenchResult.from_run(_run([_m("matmul", 0.5, dtype="float32"), _digits(0.42)]))
    assert failed.status == "check_failed"
    assert [(c["benchmark"], c["value"]) for c in failed.failed_checks] == [("digits", 0.42)]
    unchecked = BenchResult.from_run(_run([_m("matmul", 0.5, dtype="float32")]))
    assert unchecked.status == "ok"  # no check ran, so none failed
    doc = failed.to_dict()
    assert set(doc) == {"run", "summary", "comparison", "db"}
    assert doc["summary"]["checks"][0]["passed"] is False and doc["db"] is None
    assert doc["run"]["measurements"][1]["benchmark"] == "digits"
