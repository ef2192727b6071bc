"""One GPU as the runtime uses it: TensorFlow's index, matched to what NVML reports about it.

TensorFlow numbers the GPUs it sees from 0; CUDA_VISIBLE_DEVICES decides which NVML GPUs those
are (by index or UUID), and CUDA_DEVICE_ORDER may order them differently still. The match is
checked by name: a GPU whose names disagree is left unmatched, since unknown is better than wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tfaccel.snapshot import GpuInfo

if TYPE_CHECKING:
    from tfaccel.probe.tf_gpus import TfGpu

__all__ = ["GpuFacts", "match_gpus", "nvml_facts"]

_MIB = 1024 * 1024


@dataclass(frozen=True)
class GpuFacts:
    """One GPU: its TensorFlow index and what NVML or TensorFlow report about it."""

    index: int
    name: str = ""
    compute_capability: str | None = None  # "8.0"
    memory_total_bytes: int | None = None
    uuid: str | None = None

    @property
    def key(self) -> str:
        return f"GPU:{self.index}"

    @property
    def memory_total_mib(self) -> int | None:
        return None if self.memory_total_bytes is None else self.memory_total_bytes // _MIB

    @property
    def capability(self) -> float | None:
        """The compute capability as a number (8.0), None when unknown or unreadable."""
        try:
            return float(self.compute_capability) if self.compute_capability else None
        except ValueError:
            return None


def nvml_facts(info: GpuInfo) -> GpuFacts:
    """The facts of a GPU as NVML reports it (NVML's index)."""
    return GpuFacts(
        info.index, info.name, info.compute_capability, info.memory_total_bytes, info.uuid
    )


def match_gpus(
    tf_gpus: Sequence[TfGpu], nvml_gpus: Sequence[GpuFacts], cuda_visible_devices: str | None
) -> tuple[GpuFacts, ...]:
    """TensorFlow's GPUs, each completed with its NVML GPU's facts (pure).

    Args:
        tf_gpus: the GPUs TensorFlow sees (:func:`tfaccel.probe.tf_gpus.collect`).
        nvml_gpus: the GPUs NVML reports.
        cuda_visible_devices: CUDA_VISIBLE_DEVICES as set (None: unset).

    Returns:
        One GpuFacts per TensorFlow GPU, by TensorFlow index: TensorFlow's name and compute
        capability when it gives them, else NVML's; memory and UUID from NVML.
    """
    out = []
    for gpu in tf_gpus:
        match = _match_nvml(gpu.index, gpu.name, nvml_gpus, cuda_visible_devices)
        match = match or GpuFacts(gpu.index)
        out.append(
            GpuFacts(
                index=gpu.index,
                name=gpu.name or match.name,
                compute_capability=gpu.compute_capability or match.compute_capability,
                memory_total_bytes=match.memory_total_bytes,
                uuid=match.uuid,
            )
        )
    return tuple(out)


def _match_nvml(
    index: int, name: str, nvml_gpus: Sequence[GpuFacts], cuda_visible: str | None
) -> GpuFacts | None:
    """The NVML GPU behind TensorFlow's GPU ``index`` (CUDA_VISIBLE_DEVICES renumbers them)."""
    entries = [e.strip() for e in (cuda_visible or "").split(",") if e.strip()]
    entry = entries[index] if index < len(entries) else str(index)
    if entry.isdigit():
        match = next((g for g in nvml_gpus if g.index == int(entry)), None)
    else:
        match = next((g for g in nvml_gpus if g.uuid and g.uuid.startswith(entry)), None)
    if match is not None and name and match.name and match.name != name:
        return None  # numbering differs (CUDA_DEVICE_ORDER): better unknown than wrong
    return match
