"""The diagnosis rules over hand-built measurements, the StepTimer on sleeps, the text, the NVML
sampler against a fake binding. No TensorFlow is needed here."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fake_nvml import gpu, make_binding
from hypothesis import given, settings
from hypothesis import strategies as st

from tfaccel.core.findings import STATUSES
from tfaccel.core.timing import summarize
from tfaccel.probe import nvml, process
from tfaccel.profile import (
    MIN_STEPS,
    Measurement,
    RunContext,
    StepRecord,
    StepTimer,
    compute_figures,
    find_bottlenecks,
    speedup,
)
from tfaccel.profile import text as profile_text
from tfaccel.profile.measurement import MemoryUsage, SyntheticRun
from tfaccel.profile.sampling import GpuMonitor, visible_nvml_indices
from tfaccel.profile.trace import OpStat, TraceSummary, parse_kernel_stats, parse_op_stats


def _records(
    n: int,
    *,
    input_s: float | None = 0.0,
    busy_s: float = 0.010,
    host_s: float | None = 0.0,
    examples: int | None = 32,
    warmup: int = 0,
) -> list[StepRecord]:
    out, t = [], 0.0
    for i in range(warmup + n):
        out.append(StepRecord(i, t, input_s, busy_s, host_s, examples, i < warmup))
        t += (input_s or 0.0) + busy_s + (host_s or 0.0)
    return out


def _measurement(records: list[StepRecord], **context: Any) -> Measurement:
    return Measurement(records=records, context=RunContext(**context))


# --- figures ----------------------------------------------------------------------------------


def test_figures_split_the_step_and_exclude_warmup() -> None:
    records = _records(20, input_s=0.004, busy_s=0.004, host_s=0.002, warmup=3)
    records[0] = StepRecord(0, 0.0, 1.0, 5.0, 1.0, 32, True)  # a slow warm-up step is ignored
    f = compute_figures(records)
    assert f.steps == 20 and f.warmup_steps == 3
    assert f.input_share == pytest.approx(0.4) and f.busy_share == pytest.approx(0.4)
    assert f.host_share == pytest.approx(0.2)
    assert f.period_s is not None and f.period_s.median == pytest.approx(0.010)
    assert f.examples_per_s == pytest.approx(3200)


def test_traced_steps_are_left_out_when_enough_others_remain() -> None:
    records = _records(MIN_STEPS + 5)
    records = [
        StepRecord(r.index, r.start, r.input_s, 1.0, r.host_s, r.examples, r.warmup, traced=True)
        if r.index < 5
        else r
        for r in records
    ]
    f = compute_figures(records)
    assert f.traced_steps_excluded == 5 and f.steps == MIN_STEPS
    assert f.busy_s is not None and f.busy_s.median == pytest.approx(0.010)


# --- refusals ---------------------------------------------------------------------------------


def test_no_step_boundaries_is_refused_with_the_reason() -> None:
    diagnosis = find_bottlenecks(Measurement())
    assert diagnosis.refused is not None and "no step boundaries" in diagnosis.refused
    assert "Diagnosis refused" in profile_text.findings_text(diagnosis)


def test_too_few_steps_after_warmup_is_refused() -> None:
    diagnosis = find_bottlenecks(_measurement(_records(4, warmup=5)))
    assert diagnosis.refused is not None
    assert "only 4 step(s) measured after 5 warm-up" in diagnosis.refused
    assert f"at least {MIN_STEPS}" in diagnosis.refused and not diagnosis.findings


# --- input-bound --------------------------------------------------------------------------------


@pytest.mark.parametrize(("input_s", "status"), [(0.004, "fail"), (0.001, "warn"), (0.0002, "ok")])
def test_input_bound_thresholds(input_s: float, status: str) -> None:
    records = _records(20, input_s=input_s, busy_s=0.010 - input_s)
    diagnosis = find_bottlenecks(_measurement(records))
    finding = diagnosis.get("input_bound")
    assert finding is not None and finding.status == status and finding.source == "profile"
    if status != "ok":
        assert finding.fix and "tfaccel.data.pipeline(" in finding.fix
        factor = speedup(input_s / 0.010)
        assert f"x{factor:.2f}" in (finding.gain or "")


def test_input_wait_not_measured_is_skipped_with_the_reason() -> None:
    m = _measurement(_records(20, input_s=None))
    m.input_note = "not measured: because"
    finding = find_bottlenecks(m).get("input_bound")
    assert finding is not None and finding.status == "skip"
    assert finding.evidence == ["not measured: because"]
    assert finding.fix is None and finding.gain is None


def test_synthetic_rerun_confirms_or_not() -> None:
    m = _measurement(_records(20, input_s=0.005, busy_s=0.005))
    real = summarize([0.010] * 20)
    m.synthetic = SyntheticRun(20, summarize([0.005] * 20), real)
    finding = find_bottlenecks(m).get("input_bound")
    assert finding is not None and finding.numbers["confirmed"] is True
    assert "confirmed" in finding.evidence[0] and "50.0%" in finding.evidence[0]
    m.synthetic = SyntheticRun(20, summarize([0.0099] * 20), real)
    finding = find_bottlenecks(m).get("input_bound")
    assert finding is not None and finding.numbers["confirmed"] is False
    assert "not confirmed" in finding.evidence[0]
    # the measured wait (50%) alone would be a fail: unconfirmed, it is a suggestion
    assert finding.status == "info" and finding.gain is None and finding.fix


def test_synthetic_rerun_alone_gives_the_input_share() -> None:
    m = _measurement(_records(20, input_s=None, busy_s=0.010))
    m.synthetic = SyntheticRun(20, summarize([0.006] * 20), summarize([0.010] * 20))
    finding = find_bottlenecks(m).get("input_bound")
    assert finding is not None and finding.status == "fail"
    assert finding.numbers["source"] == "from the synthetic re-run"


def test_pipeline_taking_cores_from_a_cpu_model_is_found_by_the_rerun() -> None:
    m = _measurement(_records(20, input_s=0.0001, busy_s=0.0099), usable_cores=2)
    m.cpu_seconds, m.wall_seconds = 0.3, 0.2
    m.synthetic = SyntheticRun(20, summarize([0.0075] * 20), summarize([0.010] * 20))
    diagnosis = find_bottlenecks(m)
    assert diagnosis.get("input_bound").status == "ok"  # type: ignore[union-attr]
    finding = diagnosis.get("tf_data_cpu")
    assert finding is not None and finding.status == "fail"
    assert finding.title == "The input pipeline takes CPU time from the model"
    assert finding.numbers["contention_share"] == pytest.approx(0.24)
    assert "from_generator" in (finding.fix or "")
    m.synthetic = SyntheticRun(
        20, summarize([0.0099, 0.0101] * 10), summarize([0.0098, 0.0102] * 10)
    )
    assert find_bottlenecks(m).get("tf_data_cpu").status == "ok"  # type: ignore[union-attr]


def test_pipeline_already_tuned_changes_the_advice() -> None:
    m = _measurement(_records(20, input_s=0.005, busy_s=0.005))
    m.context.pipeline = {
        "choices": [
            {"option": "cache", "value": "off", "reason": ""},
            {"option": "map", "value": "per element, parallel AUTOTUNE", "reason": ""},
        ]
    }
    finding = find_bottlenecks(m).get("input_bound")
    assert finding is not None and finding.fix is not None
    assert "already a tfaccel.data.pipeline" in finding.fix
    assert "vectorized=True" in finding.fix and "cache=True" in finding.fix


def test_problems_are_ranked_most_severe_first_in_the_shared_shape() -> None:
    gib = 2**30
    records = _records(20, input_s=0.004, busy_s=0.0056, host_s=0.0004)
    m = _measurement(
        records, device_kind="gpu", compute_capability=8.0, batch_size=64, parameters=1000
    )
    m.memory = MemoryUsage(
        "gpu", "GPU:0", current_bytes=gib, peak_bytes=2 * gib, limit_bytes=16 * gib
    )
    m.context.sixteen_bit_share = 0.99  # ok
    diagnosis = find_bottlenecks(m)
    assert [(f.id, f.status) for f in diagnosis.problems] == [
        ("input_bound", "fail"),
        ("host_overhead", "warn"),
        ("memory_headroom", "info"),
    ]
    ranked = [f.status for f in diagnosis.ranked]
    assert ranked[:3] == ["fail", "warn", "info"] and ranked[-1] == "ok"
    assert ranked == sorted(ranked, key=STATUSES.index, reverse=True)
    data = json.loads(json.dumps(diagnosis.to_dict()))
    assert all(
        set(f) == {"id", "status", "title", "evidence", "numbers", "fix", "gain", "source"}
        for f in data["findings"]
    )
    assert {f["source"] for f in data["findings"]} == {"profile"}
    assert data["findings"][0]["evidence"] == diagnosis.findings[0].evidence


# --- host overhead ------------------------------------------------------------------------------


def test_host_overhead_advice_depends_on_the_loop() -> None:
    records = _records(20, busy_s=0.008, host_s=0.002)
    keras = find_bottlenecks(_measurement(records, source="keras fit")).get("host_overhead")
    loop = find_bottlenecks(_measurement(records, source="custom loop")).get("host_overhead")
    assert (
        keras is not None and keras.status == "fail" and "steps_per_execution" in (keras.fix or "")
    )
    assert loop is not None and "@tf.function" in (loop.fix or "")
    assert "x1.25" in (loop.gain or "")


def test_host_overhead_needs_consecutive_steps() -> None:
    finding = find_bottlenecks(_measurement(_records(20, host_s=None))).get("host_overhead")
    assert finding is not None and finding.status == "skip"


# --- device rules -------------------------------------------------------------------------------


def test_gpu_rules_are_skipped_on_the_cpu_with_reasons() -> None:
    diagnosis = find_bottlenecks(_measurement(_records(20)))
    for finding_id, words in [
        ("launch_bound", "not applicable on the CPU"),
        ("host_device_copies", "no accelerator"),
        ("low_16bit_share", "no GPU"),
        ("collectives", "one replica"),
        ("replica_imbalance", "one replica"),
    ]:
        finding = diagnosis.get(finding_id)
        assert finding is not None and finding.status == "skip" and words in finding.evidence[0]


def test_gpu_rules_without_a_trace_ask_for_one() -> None:
    m = _measurement(_records(20), device_kind="gpu", compute_capability=8.0)
    diagnosis = find_bottlenecks(m)
    for finding_id in ("launch_bound", "host_device_copies"):
        finding = diagnosis.get(finding_id)
        assert finding is not None and "--trace" in finding.evidence[0]


def _trace(**kwargs: Any) -> TraceSummary:
    return TraceSummary(path="x.xplane.pb", steps=10, **kwargs)


def test_copies_and_launch_from_a_gpu_trace() -> None:
    ops = [
        OpStat("MemcpyHToD", "MemcpyHToD", "Device", 10, 30_000.0, 30_000.0),  # 3 ms per step
        OpStat("a/Relu", "Relu", "Device", 20_000, 40_000.0, 40_000.0),  # 2 us each
    ]
    m = _measurement(_records(20, busy_s=0.010), device_kind="gpu", compute_capability=8.0)
    m.trace = _trace(ops=ops, idle_us={"Device": 30_000.0})
    diagnosis = find_bottlenecks(m)
    copies = diagnosis.get("host_device_copies")
    assert copies is not None and copies.status == "fail"
    assert copies.numbers["copy_share"] == pytest.approx(0.3)
    assert 'device="GPU:0"' in (copies.fix or "")
    launch = diagnosis.get("launch_bound")
    assert launch is not None and launch.status == "fail"
    assert launch.numbers["launch_share_estimate"] == pytest.approx(0.3)
    assert "jit_compile=True" in (launch.fix or "")


def test_sixteen_bit_share() -> None:
    m = _measurement(_records(20), device_kind="gpu", compute_capability=8.6)
    m.trace = _trace(ops=[], tensor_core_share=0.02)
    finding = find_bottlenecks(m).get("low_16bit_share")
    assert finding is not None and finding.status == "fail"
    assert 'tfaccel.setup(precision="auto")' in (finding.fix or "")
    m.trace = None
    m.context.sixteen_bit_share = 0.99
    finding = find_bottlenecks(m).get("low_16bit_share")
    assert finding is not None and finding.status == "ok"
    m.context.compute_capability = 6.1
    finding = find_bottlenecks(m).get("low_16bit_share")
    assert finding is not None and finding.status == "skip"
    assert "no tensor cores (compute capability 6.1 < 7.0)" in finding.evidence[0]


def test_memory_headroom_suggests_a_larger_batch_with_the_estimate() -> None:
    gib = 2**30
    m = _measurement(_records(20), device_kind="gpu", batch_size=64, parameters=1_000_000)
    m.memory = MemoryUsage(
        "gpu", "GPU:0", current_bytes=gib, peak_bytes=2 * gib, limit_bytes=16 * gib
    )
    finding = find_bottlenecks(m).get("memory_headroom")
    assert finding is not None and finding.status == "info"
    assert finding.numbers["suggested_batch_size"] == 256  # at most 4x per step
    assert finding.fix is not None and finding.fix.startswith("batch_size=256")
    m.memory.peak_bytes = 12 * gib
    finding = find_bottlenecks(m).get("memory_headroom")
    assert finding is not None and finding.status == "ok"


def test_cpu_saturated_while_waiting_for_input() -> None:
    m = _measurement(_records(20, input_s=0.005, busy_s=0.005), usable_cores=2)
    m.cpu_seconds, m.wall_seconds = 1.9, 1.0
    finding = find_bottlenecks(m).get("tf_data_cpu")
    assert finding is not None and finding.status == "fail" and "cache" in (finding.fix or "")
    m.cpu_seconds = 0.5
    finding = find_bottlenecks(m).get("tf_data_cpu")
    assert finding is not None and finding.status == "ok" and "has room" in finding.evidence[0]


def test_collectives_and_replica_imbalance_need_replicas_and_a_trace() -> None:
    m = _measurement(_records(20, busy_s=0.010), replicas=2, device_kind="gpu")
    diagnosis = find_bottlenecks(m)
    finding = diagnosis.get("collectives")
    assert finding is not None and finding.status == "skip" and "trace" in finding.evidence[0]
    ops = [OpStat("NcclAllReduce", "NcclAllReduce", "Device", 10, 20_000.0, 20_000.0)]
    busy = {"/device:GPU:0": 100_000.0, "/device:GPU:1": 60_000.0}
    m.trace = _trace(ops=ops, device_busy_us=busy)
    diagnosis = find_bottlenecks(m)
    collectives = diagnosis.get("collectives")
    assert collectives is not None and collectives.status == "fail"
    assert collectives.numbers["collective_share"] == pytest.approx(0.2)
    imbalance = diagnosis.get("replica_imbalance")
    assert imbalance is not None and imbalance.status == "fail"
    assert imbalance.numbers["imbalance_share"] == pytest.approx(0.4)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(0, 1)),
            st.floats(0, 1),
            st.one_of(st.none(), st.floats(0, 1)),
            st.one_of(st.none(), st.integers(0, 512)),
            st.booleans(),
        ),
        max_size=30,
    )
)
def test_any_records_give_a_diagnosis_or_a_refusal(rows: list[Any]) -> None:
    records = [StepRecord(i, float(i), *row) for i, row in enumerate(rows)]
    m = _measurement(records)
    diagnosis = find_bottlenecks(m)
    assert (diagnosis.refused is None) == (diagnosis.figures.steps >= MIN_STEPS)
    profile_text.report(m, diagnosis)
    f = diagnosis.figures
    if f.input_share is not None and f.busy_share is not None and f.host_share is not None:
        assert f.input_share + f.busy_share + f.host_share == pytest.approx(1.0)


# --- StepTimer ----------------------------------------------------------------------------------


def _loop(timer: StepTimer, steps: int, *, wait: float, work: float, host: float) -> None:
    for _ in range(steps):
        with timer.input():
            time.sleep(wait)
        with timer.step():
            time.sleep(work)
        time.sleep(host)


def test_step_timer_splits_input_step_and_host() -> None:
    timer = StepTimer(warmup_steps=2, batch_size=16, live=False)
    _loop(timer, 22, wait=0.008, work=0.008, host=0.004)
    m = timer.measurement()
    f = m.figures()
    assert f.steps == 20 and f.warmup_steps == 2
    assert f.input_share == pytest.approx(0.4, abs=0.1)
    assert f.host_share == pytest.approx(0.2, abs=0.1)
    assert f.input_s is not None and 0.008 <= f.input_s.median < 0.012
    diagnosis = timer.diagnose()
    assert {p.id for p in diagnosis.problems} >= {"input_bound", "host_overhead"}
    assert diagnosis.get("host_overhead").fix is not None  # type: ignore[union-attr]
    assert "@tf.function" in (diagnosis.get("host_overhead").fix or "")  # type: ignore[union-attr]


def test_step_timer_with_too_few_steps_refuses() -> None:
    timer = StepTimer(warmup_steps=3, live=False)
    _loop(timer, 6, wait=0.0, work=0.001, host=0.0)
    diagnosis = timer.diagnose()
    assert diagnosis.refused is not None and "only 3 step(s)" in diagnosis.refused
    assert "Diagnosis refused" in timer.report()


def test_step_timer_without_input_blocks_says_so() -> None:
    timer = StepTimer(warmup_steps=0, live=False)
    for _ in range(12):
        with timer.step():
            time.sleep(0.001)
    m = timer.measurement()
    assert m.input_note is not None and "timer.input()" in m.input_note
    finding = find_bottlenecks(m).get("input_bound")
    assert finding is not None and finding.status == "skip"


def test_step_timer_exception_records_nothing_and_propagates() -> None:
    timer = StepTimer(warmup_steps=0, live=False)
    with pytest.raises(ZeroDivisionError):
        with timer.step():
            1 / 0  # noqa: B018
    with timer.step():
        pass
    assert len(timer.measurement().records) == 1


def test_step_timer_pause_keeps_evaluation_out_of_host_overhead() -> None:
    timer = StepTimer(warmup_steps=0, live=False)
    with timer.step():
        pass
    timer.pause()
    time.sleep(0.02)
    with timer.step():
        pass
    records = timer.measurement().records
    assert records[0].host_s is None


def test_step_timer_waits_for_values_and_prints_live_lines(tmp_path: Path) -> None:
    class Slow:
        read = 0

        def numpy(self) -> int:
            Slow.read += 1
            return 0

    out = tmp_path / "live.txt"
    with out.open("w") as stream, StepTimer(warmup_steps=1, log_every=5, stream=stream) as timer:
        for _ in range(11):
            with timer.step(examples=8) as step:
                step.wait(Slow(), [Slow()])
    assert Slow.read == 22
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and lines[0].startswith("tfaccel: step 5 |") and "ex/s" in lines[0]


# --- text -------------------------------------------------------------------------------------


def test_report_shows_the_table_and_the_findings() -> None:
    m = _measurement(_records(20, input_s=0.005, busy_s=0.004, host_s=0.001), usable_cores=2)
    m.memory = MemoryUsage(
        "process", "CPU", current_bytes=2**30, peak_bytes=2**31, limit_bytes=2**34
    )
    m.cpu_seconds, m.wall_seconds = 0.2, 0.2
    m.trace = _trace(ops=[OpStat("model/conv/Conv2D", "Conv2D", "Host", 10, 5000.0, 6000.0)])
    report = profile_text.report(m, find_bottlenecks(m))
    assert "20 steps measured (0 warm-up excluded)" in report
    assert "waiting for input     5.00 ms" in report
    assert (
        "[FAIL] input_bound: Input-bound" in report and "evidence:" in report and "gain:" in report
    )
    assert "    fix: Feed the model through a tuned pipeline" in report
    assert "skipped launch_bound: not applicable on the CPU" in report
    assert "0.500 ms" in report and "model/conv/Conv2D" in report
    assert "RSS 1.00 GiB now, peak 2.00 GiB of 16.00 GiB" in report
    assert "1.00 of 2 usable cores busy" in report


def test_trace_without_converter_lists_nothing_and_says_why() -> None:
    text = profile_text.top_ops_text(TraceSummary("t.xplane.pb", 5, error="no converter"))
    assert "ops not listed: no converter" in text


# --- trace tables -------------------------------------------------------------------------------


def _table(cols: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    return {
        "cols": [{"id": c, "label": c, "type": "string"} for c in cols],
        "rows": [{"c": [{"v": v} for v in row]} for row in rows],
    }


def test_op_stats_table_is_parsed_and_idle_kept_apart() -> None:
    cols = [
        "rank",
        "host_or_device",
        "type",
        "operation",
        "occurrences",
        "total_time",
        "total_self_time",
    ]
    rows = [
        [1, "Host", "IDLE", "IDLE", 0, 900.0, 900.0],
        [2, "Device", "Conv2D", "m/conv", 4, 120.0, 100.0],
        [3, "Device", "MemcpyHToD", "MemcpyHToD", 4, 40.0, 40.0],
        [4, "Device", "Relu", "m/relu", 4, 300.0, 250.0],
    ]
    ops, idle = parse_op_stats(json.dumps([_table(cols, rows), _table(cols, rows[1:])]))
    assert [op.name for op in ops] == ["m/relu", "m/conv", "MemcpyHToD"]
    assert idle == {"Host": 900.0}
    summary = _trace(ops=ops)
    assert summary.copy_us() == (40.0, 4) and summary.has_device_ops()


def test_kernel_stats_give_the_tensor_core_share() -> None:
    cols = ["kernel_name", "is_kernel_using_tensor_core", "total_duration_us"]
    data = json.dumps([_table(cols, [["a", True, 30.0], ["b", False, 70.0]])])
    assert parse_kernel_stats(data) == pytest.approx(0.3)
    assert parse_kernel_stats(json.dumps([_table(cols, [])])) is None


# --- NVML sampler and process memory ------------------------------------------------------------


def test_gpu_monitor_samples_utilisation_in_the_background() -> None:
    binding = make_binding([gpu(), gpu()])
    monitor = GpuMonitor(interval_s=0.01, indices=[1], nvml=binding)
    assert monitor.start()
    time.sleep(0.08)
    begin, end = 0.0, time.perf_counter() + 1
    monitor.stop()
    usage = monitor.usage(begin, end)
    assert [u.index for u in usage] == [1] and usage[0].samples >= 3
    assert usage[0].utilization_mean_percent is not None
    assert binding.calls[-1] == "shutdown"


def test_gpu_monitor_without_nvml_says_why() -> None:
    monitor = GpuMonitor(nvml=make_binding([], init_error="Driver Not Loaded"))
    assert not monitor.start() and monitor.note is not None and "Driver Not Loaded" in monitor.note
    assert "no GPU" in str(nvml.open_sampler(nvml=make_binding([])))


def test_visible_device_indices() -> None:
    assert visible_nvml_indices(None) is None
    assert visible_nvml_indices("2,0") == [2, 0]
    assert visible_nvml_indices("GPU-1234") is None


def test_process_memory_and_cpu_time(tmp_path: Path) -> None:
    rss = process.rss_bytes()
    peak = process.peak_rss_bytes()
    assert rss is not None and rss > 0 and peak is not None and peak >= rss // 2
    assert process.cpu_seconds() > 0
    assert process.rss_bytes(str(tmp_path / "missing")) is None


def test_importing_the_profiler_imports_neither_tensorflow_nor_keras() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tfaccel.profile, tfaccel.keras, tfaccel.data, tfaccel.cli.profile\n"
        "from tfaccel.keras import instrument\n"
        "loaded = [m for m in ('tensorflow', 'keras') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
