"""GPU memory: memory other processes hold, and the memory errors that show only in a log.

Finding ids: ``gpu_memory_in_use`` (another process holds most of a GPU's memory: out-of-memory
risk), ``oom`` (out of memory) and ``config_after_init`` (memory growth or device settings
changed after the runtime started). The last two show in a log or traceback, not in a
Snapshot: here they say ``skip`` and point at ``tfaccel doctor --log``, where the log reader
finds them.
"""

from __future__ import annotations

from tfaccel.core.findings import Finding
from tfaccel.core.units import fmt_bytes
from tfaccel.diagnosis.rules._common import NO_NVIDIA_GPU, gpu_name, has_nvidia, make_finding, skip
from tfaccel.snapshot import GpuInfo, Snapshot

LOG_HINT = "seen only in a log or traceback: run `tfaccel doctor --log FILE`"
MEMORY_IN_USE_SHARE = 0.5


def gpu_memory_in_use(s: Snapshot) -> Finding:
    """Another process holds most of a GPU's memory: TensorFlow will run out."""
    if not has_nvidia(s):
        return skip("gpu_memory_in_use", NO_NVIDIA_GPU)
    known = [g for g in s.nvml.gpus if g.memory_total_bytes and g.memory_used_bytes is not None]
    if not known:
        return skip("gpu_memory_in_use", "no GPU's memory use is known")
    evidence = [_memory_line(g) for g in known]
    busy = [
        g
        for g in known
        if _share(g.memory_used_bytes or 0, g.memory_total_bytes or 1) > MEMORY_IN_USE_SHARE
    ]
    if not busy:
        return make_finding("gpu_memory_in_use", "ok", "GPU memory is mostly free", evidence)
    return make_finding(
        "gpu_memory_in_use",
        "warn",
        f"Most memory of {', '.join(gpu_name(g) for g in busy)} is already in use: OOM risk",
        evidence,
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv "
        "(then stop those processes, or export CUDA_VISIBLE_DEVICES=<a free GPU's index>)",
    )


def _memory_line(gpu: GpuInfo) -> str:
    used = gpu.memory_used_bytes or 0
    total = gpu.memory_total_bytes or 1
    share = f"{_share(used, total):.0%}"
    return f"{gpu_name(gpu)}: {_gib(used)} GiB of {_gib(total)} GiB used ({share})"


def _share(used: int, total: int) -> float:
    """used / total, exact for integers of any size (a float division would overflow)."""
    if total == 0:
        return 0.0
    return max(-(10**9), min(used * 1000 // total, 10**9)) / 1000


def _gib(n: int) -> str:
    """Bytes as GiB with one decimal, without the unit (exact for any size)."""
    return fmt_bytes(n, unit="GiB", suffix=False)


def oom(s: Snapshot) -> Finding:
    """Out-of-memory shows in a log, not in a snapshot (gpu_memory_in_use warns ahead)."""
    return skip("oom", LOG_HINT)


def config_after_init(s: Snapshot) -> Finding:
    """Device configuration after the runtime started shows in a traceback only."""
    return skip("config_after_init", LOG_HINT)
