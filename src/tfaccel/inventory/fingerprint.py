"""The machine fingerprint: what makes two measurements comparable, hashed into a short key.

The results store keys bench and tune runs by its digest; ``setup(jit="auto",
precision="auto")`` looks measurements up by it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from tfaccel.snapshot import Snapshot

__all__ = ["Fingerprint", "machine_fingerprint"]


@dataclass(frozen=True)
class Fingerprint:
    """What makes two runs comparable; ``digest`` is a short hash of ``data``."""

    digest: str
    data: dict[str, Any]


def machine_fingerprint(snapshot: Snapshot) -> Fingerprint:
    """The fingerprint of a machine: devices, driver, TensorFlow and tfaccel versions (pure).

    CPU model, cores and flags, GPU names and memory, the driver, and the TensorFlow
    distribution and version: a change in any of them changes the digest.

    Args:
        snapshot: a probed Snapshot.

    Returns:
        A :class:`Fingerprint` whose ``digest`` keys runs in the results store.
    """
    cpu = snapshot.cpu
    data: dict[str, Any] = {
        "cpu_model": cpu.model,
        "cpu_physical_cores": cpu.physical_cores,
        "cpu_usable_cores": cpu.usable_cores,
        "cpu_flags": sorted(cpu.flags),
        "gpus": [
            {"name": g.name, "memory_total_bytes": g.memory_total_bytes} for g in snapshot.nvml.gpus
        ],
        "driver_version": snapshot.nvml.driver_version,
        "tf_version": snapshot.tensorflow.version,
        "tf_distribution": snapshot.tensorflow.distribution,
        "tfaccel_version": snapshot.tfaccel_version,
    }
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return Fingerprint(hashlib.sha256(text.encode()).hexdigest()[:16], data)
