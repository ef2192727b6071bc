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

__all__ = [
    "ENV_VARS",
    "collect_env",
    "collect_platform",
    "detect_emulation",
    "nvidia_profiling_admin_only",
    "parse_nvidia_params",
]

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
    machine = platform.machine()
    emulator, emulator_evidence = detect_emulation(
        platform.system(), machine, _read_text("/proc/cpuinfo"), _proc_translated()
    )
    geteuid = getattr(os, "geteuid", None)
    return PlatformInfo(
        system=platform.system(),
        release=release,
        machine=machine,
        python_version=platform.python_version(),
        python_executable=sys.executable,
        is_wsl="microsoft" in release.lower() or "WSL_DISTRO_NAME" in os.environ,
        in_container=_in_container(),
        hostname=platform.node(),
        libc=libc,
        libc_version=libc_version,
        install_dir=install_dir,
        install_dir_free_bytes=free,
        emulator=emulator,
        emulator_evidence=emulator_evidence,
        is_admin=geteuid() == 0 if geteuid is not None else None,
    )


def detect_emulation(
    system: str, machine: str, cpuinfo: str | None, proc_translated: int | None
) -> tuple[str | None, str | None]:
    """Whether this Python's x86_64 code runs translated on another CPU, and what showed it.

    Args:
        system: ``platform.system()``.
        machine: ``platform.machine()``: what the Python binary was built for.
        cpuinfo: the text of ``/proc/cpuinfo`` (Linux), or None.
        proc_translated: macOS ``sysctl.proc_translated`` (1 under Rosetta 2), or None.

    Returns:
        ``("rosetta", evidence)``, ``("qemu-user", evidence)`` or ``(None, None)``.
    """
    arch = machine.strip().lower()
    if system == "Darwin" and proc_translated == 1:
        return (
            "rosetta",
            f"sysctl.proc_translated = 1 (this {arch or 'x86_64'} Python runs under Rosetta 2)",
        )
    if system == "Linux" and arch in ("x86_64", "amd64", "i686", "i386") and cpuinfo:
        # qemu-user passes the host's /proc/cpuinfo through: an Arm CPU's keys under x86 code
        for line in cpuinfo.splitlines():
            key = line.partition(":")[0].strip().lower()
            if key in ("cpu implementer", "cpu architecture"):
                return "qemu-user", (
                    f"an {arch} Python, while /proc/cpuinfo describes an Arm CPU "
                    f"({line.strip()[:60]})"
                )
    return None, None


def _proc_translated() -> int | None:
    """macOS ``sysctl.proc_translated``: 1 under Rosetta 2, 0 native; None elsewhere."""
    if sys.platform != "darwin":
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        value = ctypes.c_int(0)
        size = ctypes.c_size_t(ctypes.sizeof(value))
        rc = libc.sysctlbyname(
            b"sysctl.proc_translated", ctypes.byref(value), ctypes.byref(size), None, 0
        )
    except (OSError, AttributeError):
        return None
    return int(value.value) if rc == 0 else None


def parse_nvidia_params(text: str) -> bool | None:
    """``RmProfilingAdminOnly: 1`` in /proc/driver/nvidia/params -> True; absent -> None."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("RmProfilingAdminOnly", "RestrictProfilingToAdminUsers"):
            value = value.strip()
            if value.isdigit():
                return value != "0"
    return None


def nvidia_profiling_admin_only(root: str = "/") -> bool | None:
    """Whether the NVIDIA driver lets only root read GPU performance counters (CUPTI)."""
    text = _read_text(str(Path(root) / "proc/driver/nvidia/params"))
    return parse_nvidia_params(text) if text is not None else None


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")[:1_000_000]
    except OSError:
        return None


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
