"""Cloud TPU signals readable without starting the TPU runtime: env, device files, PCI."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping

from tfaccel.snapshot import Distribution, PciDevice, TpuInfo

__all__ = ["GOOGLE_PCI_VENDOR", "TPU_ENV_VARS", "collect", "from_signals"]

TPU_ENV_VARS = (
    "TPU_NAME",
    "TPU_ACCELERATOR_TYPE",
    "ACCELERATOR_TYPE",
    "TPU_WORKER_ID",
    "TPU_WORKER_HOSTNAMES",
    "TPU_CHIPS_PER_PROCESS_BOUNDS",
    "TPU_PROCESS_BOUNDS",
    "COLAB_TPU_ADDR",
    "XRT_TPU_CONFIG",
)
GOOGLE_PCI_VENDOR = "0x1ae0"


def collect(
    pci: list[PciDevice] | None = None, distributions: list[Distribution] | None = None
) -> TpuInfo:
    """Look for a TPU on this host: TPU env vars, /dev/accel* or /dev/vfio/N, Google PCI devices."""
    files = sorted(glob.glob("/dev/accel*"))
    if any(d.vendor_id == GOOGLE_PCI_VENDOR for d in pci or []):
        files += sorted(p for p in glob.glob("/dev/vfio/*") if p.rsplit("/", 1)[-1].isdigit())
    return from_signals(os.environ, files, pci or [], distributions or [])


def from_signals(
    environ: Mapping[str, str],
    device_files: list[str],
    pci: list[PciDevice],
    distributions: list[Distribution],
) -> TpuInfo:
    """Combine the signals into a TpuInfo (pure; tests call it directly)."""
    env = {k: environ[k] for k in TPU_ENV_VARS if k in environ}
    google = [d for d in pci if d.vendor_id == GOOGLE_PCI_VENDOR]
    libtpu = next((d.version for d in distributions if d.name.startswith("libtpu")), None)
    accel_type = env.get("TPU_ACCELERATOR_TYPE") or env.get("ACCELERATOR_TYPE")
    chips: int | None = len(google) or len(device_files) or None
    if chips is None and accel_type:
        m = re.search(r"-(\d+)$", accel_type)
        chips = int(m.group(1)) if m else None
    present = bool(google or device_files or accel_type or "COLAB_TPU_ADDR" in env)
    return TpuInfo(
        present=present,
        accelerator_type=accel_type,
        chip_count=chips if present else None,
        device_files=device_files,
        env=env,
        libtpu_version=libtpu,
    )
