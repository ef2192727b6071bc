"""Snapshot -> Inventory: every device of the machine, what it can do, and its peaks (pure)."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tfaccel.core.records import NOT_IN_JSON, to_json
from tfaccel.inventory.fingerprint import Fingerprint, machine_fingerprint
from tfaccel.inventory.gpus import GpuFacts, nvml_facts
from tfaccel.inventory.precision import Precisions, fast_precisions
from tfaccel.inventory.specs import Peak, cpu_peak, match_spec, spec_peak
from tfaccel.snapshot import CpuInfo, GpuInfo, Snapshot, TpuInfo

__all__ = [
    "CPU_FEATURES",
    "CpuDevice",
    "GpuDevice",
    "Inventory",
    "TensorFlowView",
    "TpuDevice",
    "build",
]

# /proc/cpuinfo flag -> the name users know, for the ISA features that matter for DL.
CPU_FEATURES: dict[str, str] = {
    "avx": "AVX",
    "avx2": "AVX2",
    "fma": "FMA",
    "avx512f": "AVX-512",
    "avx512_vnni": "AVX512_VNNI",
    "avx512_bf16": "AVX512_BF16",
    "avx512_fp16": "AVX512_FP16",
    "amx_tile": "AMX",
    "amx_bf16": "AMX_BF16",
    "amx_int8": "AMX_INT8",
    "asimd": "NEON",
    "neon": "NEON",
    "sve": "SVE",
    "sve2": "SVE2",
    "bf16": "BF16 (Arm)",
}

# Inventory fields that model the machine for the layers above, not part of the devices document.


@dataclass
class CpuDevice:
    model: str | None
    vendor: str | None
    physical_cores: int | None
    logical_cores: int | None
    usable_cores: int | None
    cgroup_cpu_limit: float | None
    features: list[str]
    memory_total_bytes: int | None
    memory_available_bytes: int | None
    clock_mhz: float | None
    peak: Peak


@dataclass
class GpuDevice:
    info: GpuInfo
    peak: Peak | None
    peak_note: str


@dataclass
class TpuDevice:
    info: TpuInfo
    peak: Peak | None
    peak_note: str


@dataclass
class TensorFlowView:
    """What TensorFlow registers (from the ``--tf`` subprocess) and how it was built."""

    version: str | None
    build: dict[str, str]
    physical_devices: list[str]
    logical_devices: list[str]
    gpu_details: list[dict[str, str]]
    error: str | None


@dataclass
class Inventory:
    """Every device of the machine with its peaks, and what the layers above ask about it.

    ``to_dict()`` is the ``tfaccel devices --json`` document: the devices. The fields after
    ``tensorflow`` model the machine for the runtime, ``tfaccel tune``, the profiler and the
    results store, and are not part of that document.

    Attributes:
        cpu_flags: the CPU's ISA flags, lower case as /proc/cpuinfo spells them.
        cuda_visible_devices: CUDA_VISIBLE_DEVICES when the machine was probed (None: unset):
            which NVML GPUs TensorFlow numbers from 0.
        fingerprint: the machine fingerprint that keys stored measurements.
    """

    cpu: CpuDevice
    gpus: list[GpuDevice] = field(default_factory=list)
    tpu: TpuDevice | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_error: str | None = None
    nvidia_pci_without_nvml: int = 0
    tensorflow: TensorFlowView | None = None
    cpu_flags: tuple[str, ...] = field(default=(), kw_only=True, metadata=NOT_IN_JSON)
    cuda_visible_devices: str | None = field(default=None, kw_only=True, metadata=NOT_IN_JSON)
    fingerprint: Fingerprint = field(kw_only=True, metadata=NOT_IN_JSON)

    @property
    def nvml_gpus(self) -> tuple[GpuFacts, ...]:
        """The GPUs NVML reports, by NVML index."""
        return tuple(nvml_facts(gpu.info) for gpu in self.gpus)

    def precisions(self, gpus: Sequence[GpuFacts] | None = None) -> Precisions:
        """The precisions that run fast here, and why (:func:`fast_precisions`).

        Args:
            gpus: the GPUs the model trains on (default: every GPU NVML reports; pass ``()``
                for the CPU alone, or :func:`tfaccel.inventory.tensorflow_gpus` for the GPUs
                TensorFlow sees).
        """
        chosen = self.nvml_gpus if gpus is None else gpus
        return fast_precisions(chosen, self.cpu_flags, tpu=self.tpu is not None)

    def to_dict(self) -> dict[str, Any]:
        """The devices document (``tfaccel devices --json``)."""
        return typing.cast(dict[str, Any], to_json(self))


def build(snap: Snapshot) -> Inventory:
    """Turn a Snapshot into an Inventory (pure)."""
    inv = Inventory(
        cpu=_cpu(snap.cpu),
        gpus=[_gpu(g) for g in snap.nvml.gpus],
        driver_version=snap.nvml.driver_version,
        cuda_driver_version=snap.nvml.cuda_driver_version,
        nvml_error=snap.nvml.error,
        cpu_flags=tuple(snap.cpu.flags),
        cuda_visible_devices=snap.env.get("CUDA_VISIBLE_DEVICES"),
        fingerprint=machine_fingerprint(snap),
    )
    nvidia_pci = [d for d in snap.pci if d.vendor_id == "0x10de"]
    inv.nvidia_pci_without_nvml = max(0, len(nvidia_pci) - len(snap.nvml.gpus))
    if snap.tpu.present:
        inv.tpu = _tpu(snap.tpu)
    if snap.deep is not None and snap.deep.ran:
        inv.tensorflow = TensorFlowView(
            version=snap.deep.tf_version or snap.tensorflow.version,
            build=dict(snap.tensorflow.build_info),
            physical_devices=list(snap.deep.physical_devices),
            logical_devices=list(snap.deep.logical_devices),
            gpu_details=list(snap.deep.gpu_details),
            error=snap.deep.error,
        )
    return inv


def _cpu(cpu: CpuInfo) -> CpuDevice:
    features: list[str] = []
    for flag, label in CPU_FEATURES.items():
        if flag in cpu.flags and label not in features:
            features.append(label)
    return CpuDevice(
        model=cpu.model,
        vendor=cpu.vendor,
        physical_cores=cpu.physical_cores,
        logical_cores=cpu.logical_cores,
        usable_cores=cpu.usable_cores,
        cgroup_cpu_limit=cpu.cgroup_cpu_limit,
        features=features,
        memory_total_bytes=cpu.memory_total_bytes,
        memory_available_bytes=cpu.memory_available_bytes,
        clock_mhz=cpu.max_mhz or cpu.base_mhz,
        peak=cpu_peak(cpu),
    )


def _gpu(gpu: GpuInfo) -> GpuDevice:
    spec = match_spec(gpu.name, "gpu")
    if spec is None:
        note = f"unknown model: no row of the spec database matches {gpu.name!r}"
        return GpuDevice(info=gpu, peak=None, peak_note=note)
    return GpuDevice(info=gpu, peak=spec_peak(spec), peak_note=f"datasheet: {spec.name}")


def _tpu(tpu: TpuInfo) -> TpuDevice:
    if not tpu.accelerator_type:
        return TpuDevice(
            info=tpu, peak=None, peak_note="TPU type unknown (TPU_ACCELERATOR_TYPE unset)"
        )
    spec = match_spec(tpu.accelerator_type, "tpu")
    if spec is None:
        note = f"unknown TPU type {tpu.accelerator_type!r}"
        return TpuDevice(info=tpu, peak=None, peak_note=note)
    return TpuDevice(info=tpu, peak=spec_peak(spec), peak_note=f"datasheet: {spec.name}, per chip")
