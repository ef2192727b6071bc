"""The only code that touches the system: /proc, /sys, NVML, dlopen, installed packages, env.

``snapshot()`` gathers everything into a plain :class:`~tfaccel.snapshot.Snapshot`.
It never imports TensorFlow in this process; ``deep=True`` imports it in a subprocess.
Two modules read a running process instead: :mod:`~tfaccel.probe.tf_gpus` (the GPUs the
TensorFlow of this process sees) and :mod:`~tfaccel.probe.readings` (readings while a run goes on).
"""

from __future__ import annotations

import datetime as _dt
import os

from tfaccel._version import __version__
from tfaccel.probe import cpu, deep, libs, nvml, packages, pci, readings, system, tf_gpus, tpu
from tfaccel.snapshot import DriverInfo, LibraryLoad, Snapshot

_deep = deep  # the module; `deep` is also snapshot()'s flag

__all__ = [
    "cpu",
    "deep",
    "fingerprint_snapshot",
    "libs",
    "nvml",
    "packages",
    "pci",
    "readings",
    "snapshot",
    "system",
    "tf_gpus",
    "tpu",
]


def snapshot(
    *,
    deep: bool = False,
    deep_timeout_s: float | None = None,
    libraries: bool = True,
    gpm_interval_s: float | None = None,
) -> Snapshot:
    """Probe this machine.

    Args:
        deep: also import TensorFlow in a subprocess and record what it reports.
        deep_timeout_s: seconds allowed for that import (default ``deep.DEFAULT_TIMEOUT_S``).
        libraries: also load the NVIDIA driver library and the CUDA libraries TensorFlow needs
            (``driver``, ``cuda_libs``). They stay loaded in this process, so a process that
            imports TensorFlow itself passes False and lets TensorFlow load its own.
        gpm_interval_s: also read the GPM metrics (SM, tensor-core, DRAM activity) of the GPUs
            that have them, over this many seconds (:func:`nvml.collect`); None: do not.

    Returns:
        A Snapshot; anything that could not be read is recorded as such, never raised.
    """
    env = system.collect_env()
    pci_devices = pci.collect()
    distributions, tf_build = packages.collect_packages()
    tools = packages.collect_tools(dict(os.environ))
    snap = Snapshot(
        created_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tfaccel_version=__version__,
        platform=system.collect_platform(),
        cpu=cpu.collect(),
        pci=pci_devices,
        nvml=nvml.collect(gpm_interval_s=gpm_interval_s),
        driver=libs.collect_driver() if libraries else DriverInfo(),
        distributions=distributions,
        tensorflow=tf_build,
        tools=tools,
        tpu=tpu.collect(pci_devices, distributions),
        env=env,
    )
    snap.driver.profiling_admin_only = system.nvidia_profiling_admin_only()
    if libraries and tf_build.is_cuda_build:
        snap.cuda_libs = _load_cuda_libs(
            tf_build.cuda_version, tf_build.cudnn_version, tools.nvidia_wheel_lib_dirs
        )
    if deep:
        timeout = deep_timeout_s if deep_timeout_s is not None else _deep.DEFAULT_TIMEOUT_S
        snap.deep = _deep.run(timeout_s=timeout)
    return snap


def fingerprint_snapshot() -> Snapshot:
    """A Snapshot of only what the machine fingerprint reads (:func:`tfaccel.inventory.
    machine_fingerprint`): the CPU, the NVML GPUs and driver, the TensorFlow distribution and
    version (:func:`packages.tensorflow_release`: no METADATA of other packages read) and
    tfaccel's version. Its fingerprint is that of :func:`snapshot` at the same moment, in
    a fraction of its time (``tfaccel run --tuned`` looks its results up by it)."""
    return Snapshot(
        created_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tfaccel_version=__version__,
        cpu=cpu.collect(),
        nvml=nvml.collect(),
        tensorflow=packages.tensorflow_release(),
    )


def _load_cuda_libs(
    cuda_version: str | None, cudnn_version: str | None, wheel_dirs: list[str]
) -> list[LibraryLoad]:
    return [
        libs.load_library(component, soname, wheel_dirs)
        for component, soname in libs.required_libraries(cuda_version, cudnn_version)
    ]
