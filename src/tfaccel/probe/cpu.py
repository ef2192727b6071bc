"""The host CPU: model, cores, ISA flags, clock and memory, from /proc and /sys (Linux).

Elsewhere the fields it cannot read stay None; nothing here raises for a missing file.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

from tfaccel.snapshot import CpuInfo

__all__ = ["collect", "parse_cgroup_cpu_max", "parse_cpuinfo", "parse_meminfo"]


def collect(root: str = "/") -> CpuInfo:
    """Read the CPU of this machine.

    Args:
        root: filesystem root to read /proc and /sys under (tests point it at a fake tree).

    Returns:
        CpuInfo; fields that cannot be read are None.
    """
    base = Path(root)
    info = parse_cpuinfo(_read(base / "proc/cpuinfo") or "")
    info.logical_cores = info.logical_cores or os.cpu_count()
    info.usable_cores = usable_cores()
    if not info.model:
        info.model = platform.processor() or None
    mem = parse_meminfo(_read(base / "proc/meminfo") or "")
    info.memory_total_bytes = mem.get("MemTotal")
    info.memory_available_bytes = mem.get("MemAvailable")
    info.cgroup_cpu_limit = parse_cgroup_cpu_max(_read(base / "sys/fs/cgroup/cpu.max") or "")
    max_khz = _read(base / "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if max_khz and max_khz.strip().isdigit():
        info.max_mhz = int(max_khz.strip()) / 1000.0
    return info


def parse_cpuinfo(text: str) -> CpuInfo:
    """Parse the text of /proc/cpuinfo (x86 and Arm forms)."""
    info = CpuInfo()
    processors = 0
    cores: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    phys = core = "0"
    mhz: list[float] = []
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if processors:
                cores.add((phys, core))
            continue
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key == "processor":
            processors += 1
            phys = core = str(processors)  # unique unless physical id/core id follow
        elif key in ("model name", "hardware") and not info.model:
            info.model = value
        elif key in ("vendor_id", "cpu implementer") and not info.vendor:
            info.vendor = value
        elif key == "physical id":
            phys = value
            sockets.add(value)
        elif key == "core id":
            core = value
        elif key in ("flags", "features") and not info.flags:
            info.flags = sorted(set(value.lower().split()))
        elif key == "cpu mhz":
            try:
                mhz.append(float(value))
            except ValueError:
                pass
    info.logical_cores = processors or None
    info.physical_cores = len(cores) or None
    info.sockets = len(sockets) or (1 if processors else None)
    info.base_mhz = max(mhz) if mhz else None
    return info


def parse_meminfo(text: str) -> dict[str, int]:
    """Parse /proc/meminfo into bytes per key."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+):\s+(\d+)\s*(kB)?", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * (1024 if m.group(3) else 1)
    return out


def parse_cgroup_cpu_max(text: str) -> float | None:
    """Cores allowed by a cgroup v2 ``cpu.max`` ("200000 100000" -> 2.0); None when unlimited."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if period > 0 else None


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; else the CPU count), at least 1."""
    getter = getattr(os, "sched_getaffinity", None)
    count = len(getter(0)) if getter is not None else os.cpu_count()
    return max(1, count or 1)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
