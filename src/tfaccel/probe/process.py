"""This process: resident memory (current and peak) and CPU time, for the step profiler.

Linux reads ``/proc/self/statm``; elsewhere the current RSS is None. The peak comes from
``getrusage`` (``ru_maxrss``: KiB on Linux, bytes on macOS).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["cpu_seconds", "peak_rss_bytes", "rss_bytes"]


def rss_bytes(statm: str = "/proc/self/statm") -> int | None:
    """Resident set size now (``VmRSS``), or None where ``/proc`` is not available."""
    try:
        fields = Path(statm).read_text(encoding="ascii").split()
    except OSError:
        return None
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int | None:
    """The largest resident set size this process has had (``VmHWM``), or None."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def cpu_seconds() -> float:
    """User plus system CPU time of this process, all threads."""
    times = os.times()
    return times.user + times.system
