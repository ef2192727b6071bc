"""Readings of a run in progress: the profiler's one door to the system.

What the machine is (cores, memory, GPUs, what they compute fast) comes from
:mod:`tfaccel.inventory`. What changes from one step to the next is read here: this process's
resident memory and CPU time (:mod:`tfaccel.probe.process`) and the utilisation and memory use
of its GPUs (an NVML sampler, :mod:`tfaccel.probe.nvml`).
"""

from __future__ import annotations

from tfaccel.probe.nvml import GpuSample, Sampler
from tfaccel.probe.nvml import open_sampler as open_gpu_sampler
from tfaccel.probe.process import cpu_seconds, peak_rss_bytes, rss_bytes

__all__ = ["GpuSample", "Sampler", "cpu_seconds", "open_gpu_sampler", "peak_rss_bytes", "rss_bytes"]
