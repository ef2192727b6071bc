"""Memory and GPU utilisation while steps run.

* Device memory: on a GPU, TensorFlow's allocator (``tf.config.experimental.get_memory_info``:
  bytes of live tensors now and at the peak, not the pool TF reserved); on the CPU, the
  process's resident memory (RSS now, and its peak from ``getrusage``).
* GPU utilisation and memory used: NVML, sampled every ``interval_s`` in a background thread
  (:class:`GpuMonitor`), summarised over the measured steps only. Where the GPU offers NVML
  GPM (Hopper and newer), the summary carries SM activity, tensor-core activity and DRAM
  bandwidth, and names ``"gpm"`` as its source; elsewhere only ``utilization.gpu`` (the share
  of time any kernel ran) is there, and the summary names that instead.

The process and NVML readings go through the probe layer's one door for readings of a
running process, its ``readings`` module.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tfaccel.probe import readings
from tfaccel.profile.measurement import GpuUsage, MemoryUsage

__all__ = ["GpuMonitor", "read_memory", "summarize_gpu", "visible_nvml_indices"]


def visible_nvml_indices(cuda_visible_devices: str | None) -> list[int] | None:
    """The NVML indices of the GPUs this process may use: the integers of
    ``CUDA_VISIBLE_DEVICES`` (None: all). UUIDs and other forms also give None (all)."""
    if cuda_visible_devices is None:
        return None
    parts = [p.strip() for p in cuda_visible_devices.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        return None
    return [int(p) for p in parts]


class GpuMonitor:
    """Samples NVML utilisation and memory of the visible GPUs in a daemon thread.

    Args:
        interval_s: seconds between samples. GPM metrics need more than 0.1 s between two
            samples; at shorter intervals a GPM reading spans several samples.
        indices: NVML indices to sample (None: all).
        nvml: the binding module (tests pass a fake).
    """

    def __init__(
        self, interval_s: float = 0.2, indices: list[int] | None = None, nvml: Any = None
    ) -> None:
        self.interval_s = interval_s
        self.indices = indices
        self._nvml = nvml
        self._samples: list[tuple[float, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampler: Any = None
        self.note: str | None = None
        self.gpm_notes: dict[int, str] = {}  # NVML index -> why it has no GPM readings

    def start(self) -> bool:
        """Open NVML and start sampling; False (with :attr:`note` set) when NVML is unusable."""
        if self._thread is not None and self._thread.is_alive():
            return True
        opened = readings.open_gpu_sampler(self.indices, nvml=self._nvml)
        if isinstance(opened, str):
            self.note = opened
            return False
        self._sampler = opened
        self._stop = threading.Event()
        self._take()
        self._thread = threading.Thread(target=self._run, name="tfaccel-gpu-monitor", daemon=True)
        self._thread.start()
        return True

    def _take(self) -> None:
        self._samples.append((time.perf_counter(), self._sampler.sample()))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def stop(self) -> None:
        """Stop sampling (the samples stay; :meth:`start` resumes)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.interval_s + 1)
            self._thread = None
        if self._sampler is not None:
            self._take()
            self.gpm_notes.update(self._sampler.gpm_notes)
            self._sampler.close()
            self._sampler = None

    def usage(self, since: float, until: float) -> list[GpuUsage]:
        """Per-GPU summary of the samples taken in [since, until]."""
        per_gpu: dict[int, list[Any]] = {}
        for stamp, gpu_samples in list(self._samples):
            if since <= stamp <= until:
                for reading in gpu_samples:
                    per_gpu.setdefault(reading.index, []).append(reading)
        notes = dict(self.gpm_notes)
        if self._sampler is not None:
            notes.update(self._sampler.gpm_notes)
        return [summarize_gpu(index, per_gpu[index], notes.get(index)) for index in sorted(per_gpu)]


def summarize_gpu(index: int, readings: list[Any], gpm_note: str | None = None) -> GpuUsage:
    """The summary of one GPU's NVML samples (:class:`tfaccel.probe.readings.GpuSample`).

    The GPM figures come from the samples that carry a GPM reading; with none, the source is
    ``utilization.gpu`` and ``gpm_note`` (why there is no GPM) is kept.
    """
    utils = [r.utilization_gpu_percent for r in readings if r.utilization_gpu_percent is not None]
    mems = [r.memory_used_bytes for r in readings if r.memory_used_bytes is not None]
    gpm = [r.gpm for r in readings if r.gpm is not None]
    usage = GpuUsage(
        index=index,
        samples=len(readings),
        utilization_mean_percent=_mean(utils),
        utilization_max_percent=_max(utils),
        memory_used_max_bytes=max(mems) if mems else None,
    )
    sm = [g.sm_activity_percent for g in gpm if g.sm_activity_percent is not None]
    if not sm:
        usage.gpm_note = gpm_note or (
            "NVML GPM computed no SM activity"
            if gpm
            else "no GPM reading in the measured steps (one needs more than 100 ms)"
        )
        return usage
    tensor = [g.tensor_activity_percent for g in gpm if g.tensor_activity_percent is not None]
    dram = [g.dram_bandwidth_percent for g in gpm if g.dram_bandwidth_percent is not None]
    usage.metric_source = "gpm"
    usage.gpm_samples = len(gpm)
    usage.sm_activity_mean_percent, usage.sm_activity_max_percent = _mean(sm), _max(sm)
    usage.tensor_activity_mean_percent = _mean(tensor)
    usage.tensor_activity_max_percent = _max(tensor)
    usage.dram_bandwidth_mean_percent, usage.dram_bandwidth_max_percent = _mean(dram), _max(dram)
    return usage


def _mean(values: list[float] | list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def _max(values: list[float] | list[int]) -> float | None:
    return float(max(values)) if values else None


def read_memory(device_kind: str, usage: MemoryUsage | None = None) -> MemoryUsage:
    """Read memory now into ``usage`` (a new one when None): the GPU with the highest peak,
    or this process's RSS."""
    if device_kind == "gpu":
        import tensorflow as tf

        best: tuple[str, int, int] | None = None
        for device in tf.config.list_logical_devices("GPU"):
            name = device.name.replace("/device:", "")
            info = tf.config.experimental.get_memory_info(name)
            current, peak = int(info.get("current", 0)), int(info.get("peak", 0))
            if best is None or peak > best[2]:
                best = (name, current, peak)
        if best is not None:
            usage = usage or MemoryUsage(kind="gpu", device=best[0])
            usage.current_bytes, usage.peak_bytes = best[1], best[2]
            usage.note = "TensorFlow tensors (get_memory_info), not the pool TF reserved"
            return usage
    usage = usage or MemoryUsage(kind="process", device="CPU")
    usage.current_bytes = readings.rss_bytes()
    peaks = [b for b in (readings.peak_rss_bytes(), usage.current_bytes, usage.peak_bytes) if b]
    usage.peak_bytes = max(peaks) if peaks else None
    usage.note = "process resident memory (RSS); the peak is since the process started"
    return usage
