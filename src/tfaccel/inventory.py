"""Snapshot -> Inventory: the devices of a machine, what they can do, and their peaks.

Pure functions of a Snapshot plus the spec database shipped in ``accelerators.csv``
(each row cites its source). A model the database does not know is reported as unknown,
never guessed.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

from tfaccel.snapshot import CpuInfo, GpuInfo, Snapshot, TpuInfo

__all__ = [
    "BF16_CPU_FLAGS",
    "BF16_MIN_CC",
    "CPU_FEATURES",
    "TENSOR_CORE_MIN_CC",
    "AcceleratorSpec",
    "CpuDevice",
    "GpuDevice",
    "Inventory",
    "Peak",
    "TensorFlowView",
    "TpuDevice",
    "build",
    "cpu_peak",
    "load_specs",
    "match_spec",
]

# What makes a precision fast, by device. The one place for these thresholds: runtime, tune and
# profile ask here.
TENSOR_CORE_MIN_CC = 7.0  # float16 tensor cores: Volta (7.0) and newer
BF16_MIN_CC = 8.0  # bfloat16 tensor cores: Ampere (8.0) and newer
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # CPU instructions that compute in bfloat16

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


@dataclass(frozen=True)
class AcceleratorSpec:
    """One row of the spec database."""

    key: str
    kind: str
    name: str
    match: str
    fp32_tflops: float | None
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    memory_gb: float | None
    bandwidth_gbs: float | None
    compute_capability: str | None
    source: str


@dataclass
class Peak:
    """Peak rates of one device (dense; 16-bit = tensor-core rate with FP32 accumulate)."""

    fp32_tflops: float | None = None
    tf32_tflops: float | None = None
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    bandwidth_gbs: float | None = None
    spec: str | None = None  # the database row it came from
    source: str | None = None
    estimate: bool = False  # True for a formula (the CPU), False for a datasheet row
    formula: str | None = None


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
    """Every device of the machine, with peaks; ``to_dict()`` is the ``--json`` document."""

    cpu: CpuDevice
    gpus: list[GpuDevice] = field(default_factory=list)
    tpu: TpuDevice | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_error: str | None = None
    nvidia_pci_without_nvml: int = 0
    tensorflow: TensorFlowView | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@functools.lru_cache(maxsize=1)
def load_specs() -> tuple[AcceleratorSpec, ...]:
    """Read ``accelerators.csv``."""
    text = resources.files("tfaccel").joinpath("accelerators.csv").read_text("utf-8")
    rows = []
    for row in csv.DictReader(text.splitlines()):
        rows.append(
            AcceleratorSpec(
                key=row["key"],
                kind=row["kind"],
                name=row["name"],
                match=row["match"],
                fp32_tflops=_num(row["fp32_tflops"]),
                tf32_tflops=_num(row["tf32_tflops"]),
                fp16_tflops=_num(row["fp16_tflops"]),
                bf16_tflops=_num(row["bf16_tflops"]),
                memory_gb=_num(row["memory_gb"]),
                bandwidth_gbs=_num(row["bandwidth_gbs"]),
                compute_capability=row["compute_capability"] or None,
                source=row["source"],
            )
        )
    return tuple(rows)


def match_spec(name: str, kind: str = "gpu") -> AcceleratorSpec | None:
    """The first database row of ``kind`` whose pattern matches ``name`` (case-insensitive)."""
    for spec in load_specs():
        if spec.kind == kind and re.search(spec.match, name, flags=re.IGNORECASE):
            return spec
    return None


def build(snap: Snapshot) -> Inventory:
    """Turn a Snapshot into an Inventory (pure)."""
    inv = Inventory(
        cpu=_cpu(snap.cpu),
        gpus=[_gpu(g) for g in snap.nvml.gpus],
        driver_version=snap.nvml.driver_version,
        cuda_driver_version=snap.nvml.cuda_driver_version,
        nvml_error=snap.nvml.error,
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


def cpu_peak(cpu: CpuInfo) -> Peak:
    """Estimate the CPU's peak FLOP/s: cores x clock x FLOPs per cycle per core.

    FLOPs per cycle assume two vector FMA units (the common server design): AVX-512 64 fp32,
    AVX2+FMA 32, AVX 16, SSE 8, NEON 16; bf16: AMX 1024, AVX512_BF16 128. Parts with one
    FMA unit reach half. The clock is the one the system reports (the maximum when cpufreq
    exposes it, else the nominal "cpu MHz", which turbo can exceed: seen here, a float32
    matmul measured 106% of the estimate). Labelled as an estimate; ``tfaccel bench`` measures.
    """
    flags = set(cpu.flags)
    cores = cpu.usable_cores or cpu.physical_cores or cpu.logical_cores
    if cpu.physical_cores and cores:
        cores = min(cores, cpu.physical_cores)  # SMT siblings share the FMA units
    clock = cpu.max_mhz or cpu.base_mhz
    if "avx512f" in flags:
        fp32, isa = 64, "AVX-512"
    elif "avx2" in flags and "fma" in flags:
        fp32, isa = 32, "AVX2+FMA"
    elif "avx" in flags:
        fp32, isa = 16, "AVX"
    elif "asimd" in flags or "neon" in flags:
        fp32, isa = 16, "NEON"
    else:
        fp32, isa = 8, "SSE"
    bf16_per_cycle = 1024 if "amx_bf16" in flags else 128 if "avx512_bf16" in flags else None
    if not cores or not clock:
        return Peak(estimate=True, formula="unknown: core count or clock not readable")
    ghz = clock / 1000.0
    peak = Peak(estimate=True, source="formula (see cpu_peak)")
    peak.fp32_tflops = cores * ghz * fp32 / 1000.0
    clock_kind = "max" if cpu.max_mhz else "reported"
    peak.formula = f"{cores} cores x {ghz:.2f} GHz ({clock_kind}) x {fp32} fp32 FLOP/cycle ({isa})"
    if bf16_per_cycle:
        peak.bf16_tflops = cores * ghz * bf16_per_cycle / 1000.0
        bf16_isa = "AMX" if bf16_per_cycle == 1024 else "AVX512_BF16"
        peak.formula += f"; bf16 {bf16_per_cycle} FLOP/cycle ({bf16_isa})"
    return peak


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
    return GpuDevice(info=gpu, peak=_peak(spec), peak_note=f"datasheet: {spec.name}")


def _tpu(tpu: TpuInfo) -> TpuDevice:
    if not tpu.accelerator_type:
        return TpuDevice(
            info=tpu, peak=None, peak_note="TPU type unknown (TPU_ACCELERATOR_TYPE unset)"
        )
    spec = match_spec(tpu.accelerator_type, "tpu")
    if spec is None:
        note = f"unknown TPU type {tpu.accelerator_type!r}"
        return TpuDevice(info=tpu, peak=None, peak_note=note)
    return TpuDevice(info=tpu, peak=_peak(spec), peak_note=f"datasheet: {spec.name}, per chip")


def _peak(spec: AcceleratorSpec) -> Peak:
    return Peak(
        fp32_tflops=spec.fp32_tflops,
        tf32_tflops=spec.tf32_tflops,
        fp16_tflops=spec.fp16_tflops,
        bf16_tflops=spec.bf16_tflops,
        bandwidth_gbs=spec.bandwidth_gbs,
        spec=spec.name,
        source=spec.source,
    )


def _num(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None
