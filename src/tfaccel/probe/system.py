"""Operating system, Python and the environment variables that steer TensorFlow on GPUs."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

from tfaccel.snapshot import PlatformInfo

__all__ = ["ENV_VARS", "collect_env", "collect_platform"]

# Only these are recorded: a snapshot is meant to be attached to bug reports.
ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CONDA_PREFIX",
    "VIRTUAL_ENV",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "TF_GPU_THREAD_MODE",
    "TF_MIN_GPU_MULTIPROCESSOR_COUNT",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_CPP_MAX_VLOG_LEVEL",
    "TF_CPP_VMODULE",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_XLA_FLAGS",
    "XLA_FLAGS",
    "TF_CONFIG",
    "TF_USE_LEGACY_KERAS",
    "KERAS_BACKEND",
)


def collect_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``ENV_VARS`` and every ``TFACCEL_*`` one that are set."""
    env = os.environ if environ is None else environ
    keys = [k for k in ENV_VARS if k in env]
    keys += sorted(k for k in env if k.startswith("TFACCEL_"))
    return {k: env[k] for k in keys}


def collect_platform() -> PlatformInfo:
    """The OS, the architecture, the Python, and whether this is WSL or a container."""
    release = platform.release()
    return PlatformInfo(
        system=platform.system(),
        release=release,
        machine=platform.machine(),
        python_version=platform.python_version(),
        python_executable=sys.executable,
        is_wsl="microsoft" in release.lower() or "WSL_DISTRO_NAME" in os.environ,
        in_container=_in_container(),
        hostname=platform.node(),
    )


def _in_container() -> bool:
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return True
    try:
        cgroup = Path("/proc/1/cgroup").read_text(errors="replace")
    except OSError:
        return False
    return any(word in cgroup for word in ("docker", "kubepods", "containerd", "lxc"))
