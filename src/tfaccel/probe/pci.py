"""PCI devices from sysfs: finds NVIDIA GPUs and TPUs even when no driver is loaded."""

from __future__ import annotations

from pathlib import Path

from tfaccel.snapshot import PciDevice

__all__ = ["VENDORS", "collect"]

VENDORS = {"0x10de": "NVIDIA", "0x1ae0": "Google"}


def collect(root: str = "/") -> list[PciDevice]:
    """List the NVIDIA display/3D controllers and Google (TPU) devices on the PCI bus."""
    base = Path(root) / "sys/bus/pci/devices"
    found: list[PciDevice] = []
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return found
    for entry in entries:
        vendor = _read(entry / "vendor")
        if vendor not in VENDORS:
            continue
        class_id = _read(entry / "class") or ""
        if vendor == "0x10de" and not class_id.startswith("0x03"):
            continue  # NVIDIA audio/USB functions of a graphics card
        driver = entry / "driver"
        found.append(
            PciDevice(
                address=entry.name,
                vendor_id=vendor,
                device_id=_read(entry / "device") or "",
                class_id=class_id,
                driver=driver.resolve().name if driver.exists() else None,
            )
        )
    return found


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip().lower()
    except OSError:
        return None
