"""Honest utilisation: NVML GPM (SM, tensor-core and DRAM bandwidth activity) where a GPU has
it, ``utilization.gpu`` named as such where it does not. NVML is the fake binding of
``fake_nvml``, whose GPM counters grow with the activity each test sets; no GPU is needed."""

from __future__ import annotations

import json
import re
import time
from types import SimpleNamespace
from typing import Any

import pytest
from fake_nvml import (
    ANY_TENSOR_UTIL,
    NO_PERMISSION,
    SM_UTIL,
    NVMLError,
    gpm_activity,
    gpu,
    h100,
    make_binding,
)

from tfaccel import inventory
from tfaccel.cli import main
from tfaccel.probe import nvml, readings
from tfaccel.profile import MIN_STEPS, Measurement, RunContext, StepRecord, find_bottlenecks
from tfaccel.profile import text as profile_text
from tfaccel.profile.measurement import GpuUsage
from tfaccel.profile.sampling import GpuMonitor, summarize_gpu
from tfaccel.report.text import gpu_activity_line
from tfaccel.snapshot import GpmReading, Snapshot

A_GPM_READ = nvml.GPM_MIN_INTERVAL_S + 0.01  # the shortest interval NVML computes GPM over

# --- the probe: support, one reading, the errors -------------------------------------------


def test_each_gpu_says_whether_it_has_gpm_and_why_not() -> None:
    binding = make_binding([h100(), gpu(), gpu(gpm=NO_PERMISSION)])
    hopper, ampere, refused = nvml.collect(binding).gpus
    assert (hopper.gpm_supported, hopper.gpm_note, hopper.gpm) == (True, None, None)
    assert ampere.gpm_supported is False and "Hopper" in (ampere.gpm_note or "")
    assert refused.gpm_supported is None and "Insufficient Permissions" in (refused.gpm_note or "")
    assert not binding.live_gpm_samples  # asking allocates nothing


def test_an_old_driver_or_binding_without_gpm_is_a_reason_not_a_crash() -> None:
    (old_driver,) = nvml.collect(
        make_binding([h100()], gpm_in_driver=False), gpm_interval_s=0.2
    ).gpus
    assert old_driver.gpm_supported is False and old_driver.gpm is None
    assert "Function Not Found" in (old_driver.gpm_note or "")
    assert "driver" in (old_driver.gpm_note or "")
    (old_binding,) = nvml.collect(make_binding([h100()], gpm_functions=False)).gpus
    assert old_binding.gpm_supported is None and "nvidia-ml-py" in (old_binding.gpm_note or "")


def test_a_reading_is_what_nvml_computes_between_two_samples_of_each_gpu() -> None:
    binding = make_binding(
        [h100(sm=62, occupancy=31, tensor=45, dram=38), gpu(), h100(sm=12, tensor=3, dram=70)]
    )
    info = nvml.collect(binding, gpm_interval_s=A_GPM_READ)
    busy, ampere, memory_bound = info.gpus
    assert busy.gpm is not None and memory_bound.gpm is not None
    assert busy.gpm.sm_activity_percent == pytest.approx(62)
    assert busy.gpm.sm_occupancy_percent == pytest.approx(31)
    assert busy.gpm.tensor_activity_percent == pytest.approx(45)
    assert busy.gpm.tensor_metric == "ANY_TENSOR_UTIL"
    assert busy.gpm.dram_bandwidth_percent == pytest.approx(38)
    assert busy.gpm.interval_s > nvml.GPM_MIN_INTERVAL_S
    assert memory_bound.gpm.sm_activity_percent == pytest.approx(12)
    assert memory_bound.gpm.dram_bandwidth_percent == pytest.approx(70)
    assert ampere.gpm is None and ampere.gpm_supported is False
    assert busy.utilization_gpu_percent == 99  # utilization.gpu stays what NVML said
    assert not binding.live_gpm_samples and binding.calls == ["init", "shutdown"]


def test_without_any_tensor_counter_the_fp16_tensor_metric_is_named() -> None:
    binding = make_binding([h100(tensor=None, hmma=40)])
    (g,) = nvml.collect(binding, gpm_interval_s=A_GPM_READ).gpus
    assert g.gpm is not None and g.gpm.tensor_metric == "HMMA_TENSOR_UTIL"
    assert g.gpm.tensor_activity_percent == pytest.approx(40)
    binding = make_binding([h100(tensor=None, hmma=None)])
    (g,) = nvml.collect(binding, gpm_interval_s=A_GPM_READ).gpus
    assert (
        g.gpm is not None and g.gpm.tensor_activity_percent is None and g.gpm.tensor_metric is None
    )
    assert g.gpm.sm_activity_percent == pytest.approx(62)


def test_a_refused_sample_frees_the_buffers_and_says_why() -> None:
    binding = make_binding([gpu("NVIDIA H100", gpm=gpm_activity(), gpm_sample_error=NO_PERMISSION)])
    (g,) = nvml.collect(binding, gpm_interval_s=A_GPM_READ).gpus
    assert g.gpm_supported is True and g.gpm is None
    assert "nvmlGpmSampleGet" in (g.gpm_note or "") and "Insufficient Permissions" in (
        g.gpm_note or ""
    )
    assert not binding.live_gpm_samples


def test_without_a_gpm_gpu_there_is_no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(nvml, "time", SimpleNamespace(sleep=pauses.append))
    binding = make_binding([gpu(), gpu()])
    info = nvml.collect(binding, gpm_interval_s=nvml.GPM_READING_S)
    assert pauses == [] and all(g.gpm is None for g in info.gpus)
    assert binding.calls == ["init", "shutdown"]  # one NVML session


def test_readings_are_taken_in_the_one_nvml_session_of_collect() -> None:
    binding = make_binding([gpu(), h100(sm=70)])
    info = nvml.collect(binding, gpm_interval_s=A_GPM_READ)
    assert info.gpus[0].gpm is None and info.gpus[1].gpm is not None
    assert info.gpus[1].gpm.sm_activity_percent == pytest.approx(70)
    assert binding.calls == ["init", "shutdown"]
    assert not binding.live_gpm_samples


def test_each_entry_says_why_nvml_is_unusable(monkeypatch: pytest.MonkeyPatch) -> None:
    down = make_binding([h100()], init_error="Driver Not Loaded")
    assert nvml.collect(down, gpm_interval_s=A_GPM_READ).error == "Driver Not Loaded"
    assert nvml.open_sampler(nvml=down) == "NVML cannot be initialised: Driver Not Loaded"
    missing = "the NVML binding is not installed (no pynvml); pip install nvidia-ml-py"
    monkeypatch.setattr(nvml, "load_binding", lambda: missing)
    assert nvml.collect().error == missing and nvml.open_sampler() == missing


def test_a_gpm_reading_survives_the_snapshot_round_trip() -> None:
    snap = Snapshot()
    snap.nvml = nvml.collect(make_binding([h100(), gpu()]), gpm_interval_s=A_GPM_READ)
    again = Snapshot.from_dict(json.loads(snap.to_json()))
    assert again.nvml.gpus == snap.nvml.gpus
    assert isinstance(again.nvml.gpus[0].gpm, GpmReading)


# --- the sampler: repeated readings ------------------------------------------------------------


def test_the_sampler_reads_gpm_only_after_100_ms_and_frees_its_buffers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]  # the probe's clock, moved by hand: "under 100 ms" must not depend on load
    clock = SimpleNamespace(perf_counter=lambda: now[0], sleep=time.sleep)
    monkeypatch.setattr(nvml, "time", clock)
    binding = make_binding([h100(sm=55), gpu()])
    sampler = readings.open_gpu_sampler(nvml=binding)
    assert isinstance(sampler, nvml.Sampler)
    assert set(sampler.gpm_notes) == {1} and "Hopper" in sampler.gpm_notes[1]
    now[0] += 0.09
    first = sampler.sample()
    assert [s.gpm for s in first] == [None, None]  # under 100 ms since the first GPM sample
    now[0] += 0.02
    hopper, ampere = sampler.sample()
    assert hopper.gpm is not None and hopper.gpm.sm_activity_percent == pytest.approx(55)
    assert hopper.gpm.interval_s == pytest.approx(0.11)
    assert ampere.gpm is None and ampere.utilization_gpu_percent == 37
    sampler.close()
    assert not binding.live_gpm_samples and binding.calls[-1] == "shutdown"


def test_a_gpu_lost_mid_run_gives_a_reason_not_a_crash() -> None:
    hopper = h100()
    binding = make_binding([hopper])
    sampler = nvml.open_sampler(nvml=binding)
    assert isinstance(sampler, nvml.Sampler)
    time.sleep(A_GPM_READ)
    assert sampler.sample()[0].gpm is not None
    hopper["gpm_sample_error"] = NVMLError("GPU is lost", 15)
    time.sleep(A_GPM_READ)
    (after,) = sampler.sample()
    assert after.gpm is None and after.utilization_gpu_percent == 99
    assert "GPU is lost" in sampler.gpm_notes[0]
    sampler.close()
    assert not binding.live_gpm_samples


def test_the_monitor_summarises_gpm_where_it_exists_and_names_the_fallback() -> None:
    hopper = h100(sm=62, tensor=45, dram=38)
    binding = make_binding([hopper, gpu()])
    monitor = GpuMonitor(interval_s=A_GPM_READ, nvml=binding)
    assert monitor.start()
    begin = time.perf_counter()
    time.sleep(4 * A_GPM_READ)
    hopper["gpm"][SM_UTIL] = 20.0  # the SMs quieten down
    time.sleep(4 * A_GPM_READ)
    monitor.stop()
    gpm_usage, fallback = monitor.usage(begin, time.perf_counter())
    assert gpm_usage.metric_source == "gpm" and gpm_usage.gpm_samples >= 4
    assert gpm_usage.sm_activity_max_percent == pytest.approx(62)
    assert 20 <= (gpm_usage.sm_activity_mean_percent or 0) < 62
    assert gpm_usage.tensor_activity_mean_percent == pytest.approx(45)
    assert gpm_usage.dram_bandwidth_max_percent == pytest.approx(38)
    assert gpm_usage.utilization_mean_percent == 99 and gpm_usage.gpm_note is None
    assert fallback.metric_source == "utilization.gpu" and fallback.sm_activity_mean_percent is None
    assert "Hopper" in (fallback.gpm_note or "") and fallback.utilization_mean_percent == 37
    assert not binding.live_gpm_samples


def test_the_monitor_on_an_old_driver_falls_back_with_the_reason() -> None:
    monitor = GpuMonitor(interval_s=0.01, nvml=make_binding([h100()], gpm_in_driver=False))
    assert monitor.start()
    time.sleep(0.05)
    monitor.stop()
    (usage,) = monitor.usage(0.0, time.perf_counter())
    assert usage.metric_source == "utilization.gpu" and usage.samples >= 2
    assert "Function Not Found" in (usage.gpm_note or "")


def _sample(util: int, sm: float | None = None, tensor: float | None = None) -> readings.GpuSample:
    gpm = None if sm is None else GpmReading(0.2, sm, 20.0, tensor, "ANY_TENSOR_UTIL", 30.0)
    return readings.GpuSample(0, util, 2**30, gpm)


def test_summaries_take_mean_and_max_of_the_samples_that_carry_each_metric() -> None:
    usage = summarize_gpu(0, [_sample(100), _sample(100, 30, 10), _sample(90, 50, None)])
    assert usage.metric_source == "gpm" and usage.gpm_samples == 2
    assert (usage.sm_activity_mean_percent, usage.sm_activity_max_percent) == (40.0, 50.0)
    assert (usage.tensor_activity_mean_percent, usage.tensor_activity_max_percent) == (10.0, 10.0)
    assert usage.utilization_mean_percent == pytest.approx(96.67, abs=0.01)
    plain = summarize_gpu(3, [_sample(40), _sample(60)], "this GPU has no GPM")
    assert plain.metric_source == "utilization.gpu" and plain.gpm_note == "this GPU has no GPM"
    assert (plain.utilization_mean_percent, plain.utilization_max_percent) == (50.0, 60.0)


# --- what the profile prints and concludes ------------------------------------------------------


def _gpm_usage(sm: float, util: float = 99.0) -> GpuUsage:
    return GpuUsage(
        index=0,
        samples=40,
        utilization_mean_percent=util,
        utilization_max_percent=100.0,
        memory_used_max_bytes=30 * 2**30,
        metric_source="gpm",
        gpm_samples=39,
        sm_activity_mean_percent=sm,
        sm_activity_max_percent=sm + 18,
        tensor_activity_mean_percent=12.0,
        tensor_activity_max_percent=20.0,
        dram_bandwidth_mean_percent=55.0,
        dram_bandwidth_max_percent=71.0,
    )


def _util_usage(util: float) -> GpuUsage:
    return GpuUsage(0, 40, util, util + 10, 2**30, gpm_note="this GPU has no GPM (Hopper...)")


def _gpu_run(*gpus: GpuUsage) -> Measurement:
    records = [StepRecord(i, i * 0.01, 0.0, 0.01, 0.0, 32, False) for i in range(MIN_STEPS + 5)]
    context = RunContext(device_kind="gpu", gpu_name="NVIDIA H100", compute_capability=9.0)
    return Measurement(records=records, context=context, gpus=list(gpus))


def test_the_summary_labels_each_metric() -> None:
    table = profile_text.summary_table(_gpu_run(_gpm_usage(sm=44)))
    assert "utilization.gpu 99% mean (max 100%) = share of time any kernel ran" in table
    assert (
        "SM activity 44% mean (max 62%), tensor cores 12% mean (max 20%), DRAM bandwidth 55% "
        "mean (max 71%) (NVML GPM, 39 intervals)"
    ) in table
    old = profile_text.summary_table(_gpu_run(_util_usage(37)))
    assert "utilization.gpu 37% mean (max 47%) = share of time any kernel ran" in old
    assert "utilization.gpu only: SM, tensor-core and DRAM bandwidth activity not measured" in old
    assert "SM activity" not in old.replace("activity not measured", "")


def test_the_live_line_names_the_metric() -> None:
    figures = _gpu_run().figures()
    assert "GPU0 SM 44% tensor 12%" in profile_text.live_line(20, figures, None, [_gpm_usage(44)])
    assert "GPU0 util.gpu 37%" in profile_text.live_line(20, figures, None, [_util_usage(37)])


def test_a_gpu_that_looks_busy_by_utilization_gpu_but_not_by_sm_activity_is_flagged() -> None:
    finding = find_bottlenecks(_gpu_run(_gpm_usage(sm=30, util=99))).get("low_gpu_activity")
    assert finding is not None and finding.status == "warn"
    assert finding.numbers["metric"] == "sm_activity" and finding.numbers["metric_source"] == "gpm"
    assert finding.numbers["activity_share"] == pytest.approx(0.30)
    assert "SM activity 30.0% (NVML GPM" in finding.evidence[0]
    assert "utilization.gpu read 99.0%" in finding.evidence[0]
    assert finding.fix and "jit_compile=True" in finding.fix
    busy = find_bottlenecks(_gpu_run(_gpm_usage(sm=85))).get("low_gpu_activity")
    assert busy is not None and busy.status == "ok" and "80%" not in busy.evidence[0]
    middling = find_bottlenecks(_gpu_run(_gpm_usage(sm=60))).get("low_gpu_activity")
    assert middling is not None and middling.status == "ok" and not middling.fix
    assert middling.evidence[0].endswith("; below the 80% DCGM calls necessary")
    text = profile_text.findings_text(find_bottlenecks(_gpu_run(_gpm_usage(sm=85))))
    assert "low_gpu_activity (SM activity 85.0%)" in text


def test_without_gpm_the_finding_uses_utilization_gpu_and_says_what_it_is() -> None:
    idle = find_bottlenecks(_gpu_run(_util_usage(30))).get("low_gpu_activity")
    assert idle is not None and idle.status == "warn"
    assert idle.numbers["metric"] == "utilization.gpu"
    assert "the share of time any kernel ran" in idle.evidence[0]
    assert "no kernel ran 70.0% of the time" in idle.evidence[0]
    assert "no GPM" in idle.evidence[0]
    busy = find_bottlenecks(_gpu_run(_util_usage(95))).get("low_gpu_activity")
    assert busy is not None and busy.status == "ok"
    assert "SM activity is unknown" in busy.evidence[0]
    text = profile_text.findings_text(find_bottlenecks(_gpu_run(_util_usage(95))))
    assert "low_gpu_activity (utilization.gpu 95.0%)" in text


def test_the_activity_finding_is_skipped_without_a_gpu_or_samples() -> None:
    cpu = _gpu_run()
    cpu.context.device_kind = "cpu"
    skipped = find_bottlenecks(cpu).get("low_gpu_activity")
    assert skipped is not None and skipped.status == "skip" and "no GPU" in skipped.evidence[0]
    unsampled = _gpu_run()
    unsampled.gpu_note = "GPU sampling off (sample_gpu=False)"
    skipped = find_bottlenecks(unsampled).get("low_gpu_activity")
    assert skipped is not None and skipped.status == "skip"
    assert skipped.evidence == ["GPU sampling off (sample_gpu=False)"]


# --- tfaccel devices ------------------------------------------------------------------------------


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`tfaccel devices` on a machine with an H100 (GPM) and an A100 (no GPM)."""
    binding = make_binding([h100(sm=62, occupancy=31, tensor=45, dram=38), gpu()])
    monkeypatch.setattr(nvml, "load_binding", lambda: binding)
    return binding


def test_devices_json_carries_the_gpm_reading_or_the_reason(
    two_gpus: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["devices", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    hopper, ampere = (g["info"] for g in doc["gpus"])
    assert hopper["gpm_supported"] is True
    assert hopper["gpm"]["sm_activity_percent"] == pytest.approx(62)
    assert hopper["gpm"]["tensor_activity_percent"] == pytest.approx(45)
    assert hopper["gpm"]["tensor_metric"] == "ANY_TENSOR_UTIL"
    assert hopper["gpm"]["dram_bandwidth_percent"] == pytest.approx(38)
    assert hopper["gpm"]["interval_s"] >= nvml.GPM_READING_S
    assert ampere["gpm_supported"] is False and ampere["gpm"] is None
    assert "Hopper" in ampere["gpm_note"] and ampere["utilization_gpu_percent"] == 37
    assert not two_gpus.live_gpm_samples


def test_devices_text_shows_gpm_or_says_utilization_gpu_only(
    two_gpus: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    line = "GPU 0 activity: SM 62%, SM occupancy 31%, tensor cores 45%, DRAM bandwidth 38%"
    assert re.search(re.escape(line) + r" \(NVML GPM over \d+ ms\)$", out, re.M), out
    assert (
        "GPU 1 activity: utilization.gpu only (pre-Hopper / not supported): util.gpu is the "
        "share of time any kernel ran, not SM usage; this GPU has no GPM"
    ) in out


def test_the_activity_line_of_a_gpu_supported_but_not_read() -> None:
    snap = Snapshot()
    snap.nvml = nvml.collect(make_binding([h100(), gpu("NVIDIA H100", gpm=NO_PERMISSION)]))
    supported, refused = inventory.build(snap).gpus
    assert gpu_activity_line(supported.info) == (
        "GPU 0 activity: NVML GPM supported, no reading (not read)"
    )
    line = gpu_activity_line(refused.info)
    assert line.startswith("GPU 1 activity: utilization.gpu only (pre-Hopper / not supported)")
    assert "Insufficient Permissions" in line


def test_fake_counters_follow_the_activity_set() -> None:
    """The fake computes each metric from its counters, so a test cannot pass on a constant."""
    hopper = h100(tensor=10)
    binding = make_binding([hopper])
    handles = [(0, binding.nvmlDeviceGetHandleByIndex(0))]
    first = nvml.read_gpm(binding, handles, A_GPM_READ)[0]
    hopper["gpm"][ANY_TENSOR_UTIL] = 80.0
    second = nvml.read_gpm(binding, handles, A_GPM_READ)[0]
    assert isinstance(first, GpmReading) and isinstance(second, GpmReading)
    assert first.tensor_activity_percent == pytest.approx(10)
    assert second.tensor_activity_percent == pytest.approx(80)
    assert not binding.live_gpm_samples
