"""The spec database (``accelerators.csv``) and the peak rates of a device.

Each row of the database cites its source. A model the database does not know is reported as
unknown, never guessed; the CPU's peak is a formula, labelled as an estimate.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from importlib import resources

from tfaccel.snapshot import CpuInfo

__all__ = ["AcceleratorSpec", "Peak", "cpu_peak", "load_specs", "match_spec", "spec_peak"]


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


def spec_peak(spec: AcceleratorSpec) -> Peak:
    """The datasheet peaks of a database row."""
    return Peak(
        fp32_tflops=spec.fp32_tflops,
        tf32_tflops=spec.tf32_tflops,
        fp16_tflops=spec.fp16_tflops,
        bf16_tflops=spec.bf16_tflops,
        bandwidth_gbs=spec.bandwidth_gbs,
        spec=spec.name,
        source=spec.source,
    )


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


def _num(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None
