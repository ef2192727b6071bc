"""The plan's step time on this CPU: the calibrated per-op model on hand-built steps (every
term, the bound, the cases it refuses to predict), the calibration stored and read back by
machine fingerprint and oneDNN setting, the plan's rows and reasons, and the calibration
itself on real TensorFlow."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tfaccel.planning import Target, plan_step
from tfaccel.planning.roofline import (
    BOUNDS,
    PARALLEL_BYTES,
    CpuCalibration,
    calibrate_cpu,
    cpu_step_time,
    load_calibration,
    save_calibration,
)
from tfaccel.planning.trace import OpInfo, StepGraph, TensorInfo, Variable

MIB = 2**20


def _calibration(**changes: float | str) -> CpuCalibration:
    figures: dict[str, float | str] = {
        "step_overhead_s": 1e-3,
        "op_floor_s": 1e-6,
        "parallel_op_s": 10e-6,
        "matmul_flops_per_s": 1e11,
        "conv_flops_per_s": 2e11,
        "bandwidth_bytes_per_s": 1e10,
        "onednn": "1",
    }
    figures.update(changes)
    return CpuCalibration(**figures)  # type: ignore[arg-type]


def _op(name: str, op_type: str, inputs: tuple[int, ...], out: int, nbytes: int, flops: int = 0):
    return OpInfo(
        name=name,
        type=op_type,
        phase="forward",
        inputs=inputs,
        outputs=(TensorInfo(out, "float32", nbytes, 0),),
        flops_fixed=flops,
    )


def _graph(ops: list[OpInfo], policy: str = "float32") -> StepGraph:
    return StepGraph(
        ops=ops,
        inputs=(0,),
        variables=[Variable("w", "weight", 4)],
        trainable_parameters=1,
        weight_bytes=4,
        optimizer="SGD",
        policy=policy,
    )


def _step() -> StepGraph:
    """An input (no kernel), a MatMul of 2 GFLOP writing 4 MiB, an element-wise op reading
    that and writing 4 MiB, and a tiny op: every term of the model has a known value."""
    return _graph(
        [
            _op("x", "Placeholder", (), 0, 4 * MIB),
            _op("matmul", "MatMul", (0,), 1, 4 * MIB, flops=2 * 10**9),
            _op("relu", "Relu", (1,), 2, 4 * MIB),
            _op("tiny", "AddV2", (), 3, 64),
        ]
    )


def test_each_operation_costs_its_latency_and_the_longer_of_compute_and_traffic() -> None:
    time = cpu_step_time(_step(), 1, _calibration(), onednn="1")
    # MatMul: 2e9 / 1e11 = 20 ms compute (its 8 MiB move at 1e10 B/s take 0.84 ms), split.
    # Relu: 8 MiB at 1e10 B/s = 0.839 ms, split. Tiny: 64 B, with the small-op floor.
    assert time.compute_s == pytest.approx(0.020)
    assert time.memory_s == pytest.approx((8 * MIB + 64) / 1e10)
    assert time.op_floor_s == pytest.approx(2 * 10e-6 + 1e-6)
    assert time.step_overhead_s == pytest.approx(1e-3)
    parts = (time.compute_s, time.memory_s, time.op_floor_s, time.step_overhead_s)
    assert time.step_s == pytest.approx(sum(parts))
    assert time.bound == "compute" and time.why is None


def test_the_bound_is_the_largest_term() -> None:
    slow_host = cpu_step_time(_step(), 1, _calibration(step_overhead_s=0.5), onednn="1")
    assert slow_host.bound == "per-step overhead"
    many_tiny = _graph([_op(f"t{i}", "AddV2", (), i, 64) for i in range(500)])
    launches = cpu_step_time(many_tiny, 1, _calibration(step_overhead_s=1e-4), onednn="1")
    assert launches.bound == "per-op overhead"
    assert launches.op_floor_s == pytest.approx(500e-6)
    streaming = _graph([_op("copy", "Mul", (), 0, 64 * MIB)])
    assert cpu_step_time(streaming, 1, _calibration(), onednn="1").bound == "bandwidth"
    assert {"compute", "bandwidth", "per-op overhead", "per-step overhead"} == set(BOUNDS)


def test_an_operation_over_the_split_size_pays_the_parallel_latency() -> None:
    below = _graph([_op("a", "Relu", (), 0, PARALLEL_BYTES // 2 - 8)])
    above = _graph([_op("a", "Relu", (), 0, PARALLEL_BYTES)])
    calibration = _calibration()
    assert cpu_step_time(below, 1, calibration, onednn="1").op_floor_s == pytest.approx(1e-6)
    assert cpu_step_time(above, 1, calibration, onednn="1").op_floor_s == pytest.approx(10e-6)


def test_the_scale_multiplies_the_operations_not_the_step_overhead() -> None:
    plain = cpu_step_time(_step(), 1, _calibration(), onednn="1")
    scaled = cpu_step_time(_step(), 1, _calibration(scale=2.0), onednn="1")
    assert scaled.compute_s == pytest.approx(2 * plain.compute_s)
    assert scaled.op_floor_s == pytest.approx(2 * plain.op_floor_s)
    assert scaled.step_overhead_s == pytest.approx(plain.step_overhead_s)


def test_convolutions_run_at_the_convolution_rate() -> None:
    conv = _graph([_op("c", "Conv2DBackpropFilter", (), 0, 64, flops=2 * 10**9)])
    assert cpu_step_time(conv, 1, _calibration(), onednn="1").compute_s == pytest.approx(0.010)


def test_a_depthwise_input_gradient_costs_its_forwards_flops() -> None:
    # Each output of a depthwise convolution reads one input channel: its input gradient does
    # the forward's multiply-adds, not a full convolution's over every channel.
    import keras

    from tfaccel.planning.trace import trace_step

    model = keras.Sequential(
        [
            keras.Input((8, 8, 3)),
            keras.layers.Conv2D(32, 1),
            keras.layers.DepthwiseConv2D(3, padding="same"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ]
    )
    model.compile(optimizer="sgd", loss="mse")
    step = trace_step(model, 4)
    flops = {
        op.type: op.flops_fixed + 4 * op.flops_per_example
        for op in step.ops
        if op.type.startswith("Depthwise")
    }
    forward = flops["DepthwiseConv2dNative"]
    assert forward == 2 * 4 * 8 * 8 * 32 * 3 * 3
    assert flops["DepthwiseConv2dNativeBackpropInput"] == forward
    assert flops["DepthwiseConv2dNativeBackpropFilter"] == forward


@pytest.mark.parametrize(
    ("step", "calibration", "onednn", "reason"),
    [
        (_step(), None, "1", "tfaccel plan --calibrate"),
        (_step(), _calibration(), "0", "TF_ENABLE_ONEDNN_OPTS=1"),
        (_graph(_step().ops, "mixed_bfloat16"), _calibration(), "1", "bfloat16"),
        (_graph([_op("loop", "While", (), 0, 64)]), _calibration(), "1", "While loop"),
    ],
    ids=["not calibrated", "other oneDNN setting", "16-bit", "RNN loop"],
)
def test_a_time_it_cannot_stand_behind_is_not_predicted_and_says_why(
    step: StepGraph, calibration: CpuCalibration | None, onednn: str, reason: str
) -> None:
    time = cpu_step_time(step, 1, calibration, onednn=onednn)
    assert time.step_s is None and time.bound is None
    assert time.why is not None and reason in time.why


def test_a_calibration_is_stored_and_read_back_by_fingerprint_and_onednn(tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    assert load_calibration("machine-a", onednn="1", store=db) is None  # no database yet
    stored = _calibration(cost_s=3.5, scale=1.25)
    save_calibration(stored, "machine-a", {"cpu_model": "test"}, store=db)
    read = load_calibration("machine-a", onednn="1", store=db)
    assert read is not None and read.cost_s == pytest.approx(3.5)
    for metric in ("step_overhead_s", "op_floor_s", "parallel_op_s", "scale"):
        assert getattr(read, metric) == pytest.approx(getattr(stored, metric))
    assert "results database run" in read.source
    assert load_calibration("machine-b", onednn="1", store=db) is None
    assert load_calibration("machine-a", onednn="default", store=db) is None
    newer = _calibration(step_overhead_s=2e-3)
    save_calibration(newer, "machine-a", {"cpu_model": "test"}, store=db)
    latest = load_calibration("machine-a", onednn="1", store=db)
    assert latest is not None and latest.step_overhead_s == pytest.approx(2e-3)


def test_an_unreadable_database_means_no_calibration(tmp_path: Path) -> None:
    broken = tmp_path / "results.sqlite"
    broken.write_bytes(b"not a database at all" * 100)
    assert load_calibration("machine-a", onednn="1", store=broken) is None


def _cpu(calibration: CpuCalibration | None) -> Target:
    return Target(
        key="this-cpu",
        kind="cpu",
        name="test CPU",
        memory_bytes=2**34,
        usable_bytes=2**34,
        peak_tflops=1.0,
        bandwidth_gbs=None,
        utilisation=0.5,
        utilisation_source="test",
        source="test",
        this_machine=True,
        calibration=calibration,
    )


def test_the_plan_names_the_bound_of_this_cpus_time_or_says_how_to_get_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    (row,) = plan_step(_step(), 1, [_cpu(_calibration())], examples=10).devices
    assert row.step_s is not None and row.epoch_s == pytest.approx(10 * row.step_s)
    assert row.reason.startswith("compute-bound (compute 20.0 ms")
    assert row.to_dict()["bound"] == "compute"
    assert row.to_dict()["step_overhead_s"] == pytest.approx(1e-3)
    result = plan_step(_step(), 1, [_cpu(None)])
    (bare,) = result.devices
    assert bare.step_s is None and bare.to_dict()["time_not_predicted"]
    assert "time not predicted" in bare.reason and "--calibrate" in bare.reason
    assert any("--calibrate" in note for note in result.notes)
    assert "time not predicted" in str(result)


def test_the_calibration_measures_this_cpu() -> None:
    calibration = calibrate_cpu(rounds=1)
    for metric in (
        "step_overhead_s",
        "op_floor_s",
        "parallel_op_s",
        "matmul_flops_per_s",
        "conv_flops_per_s",
        "bandwidth_bytes_per_s",
        "scale",
    ):
        value = getattr(calibration, metric)
        assert math.isfinite(value) and value > 0, metric
    # Two cores reach well under 10 TFLOP/s and 1 TB/s; anything above is a folded constant.
    assert calibration.matmul_flops_per_s < 1e13 and calibration.conv_flops_per_s < 1e13
    assert calibration.bandwidth_bytes_per_s < 1e12
    assert calibration.op_floor_s < 1e-3 and calibration.step_overhead_s < 1.0
    assert calibration.cost_s > 0
