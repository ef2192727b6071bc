"""Operating system, Python and the environment variables that steer TensorFlow on GPUs."""

from __future__ import annotations

import os
import platform
import shutil
import sys
import sysconfig
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
    """The OS, the architecture, the Python, the C library, whether this is WSL or a
    container, and the free space where pip installs."""
    release = platform.release()
    libc, libc_version = _libc()
    install_dir, free = _install_space()
    return PlatformInfo(
        system=platform.system(),
        release=release,
        machine=platform.machine(),
        python_version=platform.python_version(),
        python_executable=sys.executable,
        is_wsl="microsoft" in release.lower() or "WSL_DISTRO_NAME" in os.environ,
        in_container=_in_container(),
        hostname=platform.node(),
        libc=libc,
        libc_version=libc_version,
        install_dir=install_dir,
        install_dir_free_bytes=free,
    )


def _libc() -> tuple[str, str]:
    """``("glibc", "2.39")``; ``("", "")`` where the C library is not glibc or unknown."""
    try:
        name, version = platform.libc_ver()
    except (OSError, ValueError):
        return "", ""
    return (name, version) if name == "glibc" else ("", "")


def _install_space() -> tuple[str | None, int | None]:
    """Where pip installs for this Python, and the free bytes on that file system."""
    try:
        path = Path(sysconfig.get_paths()["purelib"])
    except (KeyError, OSError, ValueError):
        return None, None
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        return str(path), shutil.disk_usage(probe).free
    except OSError:
        return str(path), None


def _in_container() -> bool:
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return True
    try:
        cgroup = Path("/proc/1/cgroup").read_text(errors="replace")
    except OSError:
        return False
    return any(word in cgroup for word in ("docker", "kubepods", "containerd", "lxc"))
