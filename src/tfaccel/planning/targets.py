"""The accelerators a plan is made for: every row of the spec database, and this machine.

A target holds what the plan needs of a device: its memory, the part of it TensorFlow can use,
its peak rate for the precision trained in, its memory bandwidth, and the utilisation the
roofline time is multiplied by (measured on this machine when a bench run stored one, else a
labelled default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfaccel import inventory
from tfaccel.core.errors import UsageError, argument
from tfaccel.core.records import Record
from tfaccel.inventory import AcceleratorSpec, GpuFacts, Inventory, fast_precisions, load_specs
from tfaccel.planning.memory import AllocatorRules, fit_rules

__all__ = [
    "CUDA_CONTEXT_BYTES",
    "DEFAULT_UTILISATION",
    "Target",
    "TrainingDevice",
    "cpu_target",
    "spec_target",
    "targets",
    "tf_gpu_reserve_bytes",
    "training_device",
]

GIB = 2**30
CUDA_CONTEXT_BYTES = GIB // 2
"""Device memory the CUDA context, cuBLAS and cuDNN take before TensorFlow's allocator starts
(about 0.3-0.6 GiB on current drivers; an assumption, the larger end)."""

DEFAULT_UTILISATION = {"gpu": 0.40, "tpu": 0.40, "cpu": 0.50}
"""Share of the datasheet peak a Keras training step reaches when nothing measured says
otherwise: good large-scale training runs at 40-56% MFU (PaLM, MFU surveys); a labelled default,
replaced by a measurement of this machine when one is stored."""
BANDWIDTH_UTILISATION = 0.80
"""Share of the datasheet memory bandwidth a streaming kernel reaches (STREAM-like copies reach
80-90% on current GPUs)."""


@dataclass
class Target(Record):
    """A device a plan is made for.

    Attributes:
        key: the spec database key (``a100-40gb``), or ``this-cpu`` / ``gpu:N`` for this machine.
        kind: ``gpu``, ``tpu`` or ``cpu``.
        name: the device's name.
        memory_bytes: its memory (datasheet GB read as GiB, as vendors size HBM and GDDR).
        usable_bytes: what TensorFlow's allocator can hand out (see :func:`tf_gpu_reserve_bytes`).
        peak_tflops: peak for the precision planned (tensor-core rate for 16-bit; TF32 for
            float32 on GPUs that have it, which TensorFlow uses by default).
        bandwidth_gbs: memory bandwidth.
        utilisation: share of the peak a training step reaches, and ``utilisation_source``.
        source: where the figures come from.
        this_machine: a device of this machine.
        calibration: this machine's CPU only: its measured per-step and per-op costs and
            rates (a :class:`~tfaccel.planning.roofline.CpuCalibration`; None: not
            calibrated, and its time is not predicted).
        compute_capability: a GPU's (which layout its 16-bit convolutions run in; None:
            not a GPU, or unknown).
    """

    key: str
    kind: str
    name: str
    memory_bytes: int | None
    usable_bytes: int | None
    peak_tflops: float | None
    bandwidth_gbs: float | None
    utilisation: float
    utilisation_source: str
    source: str
    this_machine: bool = False
    calibration: Any = None
    compute_capability: str | None = None

    @property
    def rules(self) -> AllocatorRules:
        """The rules a batch must fit under here (:func:`~tfaccel.planning.memory.fit_rules`)."""
        return fit_rules(self.kind, self.compute_capability)


@dataclass(frozen=True)
class TrainingDevice:
    """The device Keras trains on here, as a plan sees it.

    Attributes:
        usable_bytes: what its allocator can hand out (None: unknown).
        words: the device in words, with its usable size.
        kind: ``gpu`` or ``cpu`` (which allocator rules apply).
    """

    usable_bytes: int | None
    words: str
    kind: str
    compute_capability: str | None = None

    @property
    def rules(self) -> AllocatorRules:
        """The rules a batch must fit under here (:func:`~tfaccel.planning.memory.fit_rules`)."""
        return fit_rules(self.kind, self.compute_capability)


def training_device(inv: Inventory) -> TrainingDevice:
    """GPU:0 of the TensorFlow of this process (its memory less the CUDA context and
    TensorFlow's reserve), else this CPU's available RAM. Imports TensorFlow (without starting
    its runtime) to see which GPUs it uses."""
    gpus = inventory.tensorflow_gpus(inv, inv.cuda_visible_devices)
    if gpus:
        total = gpus[0].memory_total_bytes
        if not total:
            return TrainingDevice(None, "GPU:0 (its memory is unknown)", "gpu")
        usable = (
            total - CUDA_CONTEXT_BYTES - tf_gpu_reserve_bytes(total, gpus[0].compute_capability)
        )
        return TrainingDevice(
            usable,
            f"GPU:0 {gpus[0].name} ({usable / GIB:.1f} GiB usable)",
            "gpu",
            gpus[0].compute_capability,
        )
    ram = inv.cpu.memory_available_bytes or inv.cpu.memory_total_bytes
    if not ram:
        return TrainingDevice(None, "the CPU (its RAM is unknown)", "cpu")
    return TrainingDevice(ram, f"the CPU ({ram / GIB:.1f} GiB of RAM available)", "cpu")


def tf_gpu_reserve_bytes(memory_bytes: int, compute_capability: str | None) -> int:
    """Memory TensorFlow leaves to the system on a GPU (``MinSystemMemory`` in
    tensorflow/core/common_runtime/gpu/gpu_device.cc): 225 MiB under 2 GiB, else 500 MiB up to
    compute capability 6.x, 1050 MiB for 7.x and 1536 MiB from 8.0."""
    if memory_bytes < 2 * GIB:
        return 225 * 2**20
    major = int(float(compute_capability or "8.0"))
    return (500 if major <= 6 else 1050 if major == 7 else 1536) * 2**20


def _peak_for(
    spec_rates: dict[str, float | None],
    precision: str,
    kind: str,
    compute_capability: str | None = None,
) -> float | None:
    """The peak a training step in ``precision`` can reach: the 16-bit tensor-core rate only
    where the device computes that policy natively (:func:`tfaccel.inventory.fast_precisions`:
    bfloat16 from compute capability 8.0, float16 from 7.0; TPUs: bfloat16), else the float32
    rate (16-bit math without the units for it runs no faster than float32)."""
    if kind == "tpu":
        # TPUs run float32 matmuls in bf16 passes by default, and have no float16 units.
        return spec_rates.get("bf16")
    if "16" in precision:
        facts = [GpuFacts(0, compute_capability=compute_capability)] if kind == "gpu" else []
        if kind != "gpu" or precision in fast_precisions(facts).fast:
            half = "bf16" if "bfloat16" in precision else "fp16"
            rate = spec_rates.get(half)
            if rate:
                return rate
    return spec_rates.get("tf32") or spec_rates.get("fp32")


def spec_target(spec: AcceleratorSpec, precision: str) -> Target:
    """A target from one spec database row."""
    memory = int(spec.memory_gb * GIB) if spec.memory_gb else None
    usable = None
    if memory is not None:
        usable = memory
        if spec.kind == "gpu":
            usable -= CUDA_CONTEXT_BYTES + tf_gpu_reserve_bytes(memory, spec.compute_capability)
    rates = {
        "fp32": spec.fp32_tflops,
        "tf32": spec.tf32_tflops,
        "fp16": spec.fp16_tflops,
        "bf16": spec.bf16_tflops,
    }
    return Target(
        key=spec.key,
        kind=spec.kind,
        name=spec.name,
        memory_bytes=memory,
        usable_bytes=usable,
        peak_tflops=_peak_for(rates, precision, spec.kind, spec.compute_capability),
        bandwidth_gbs=spec.bandwidth_gbs,
        utilisation=DEFAULT_UTILISATION[spec.kind],
        utilisation_source="default (no measurement of this device): "
        f"{DEFAULT_UTILISATION[spec.kind]:.0%} of peak",
        source=spec.source,
        compute_capability=spec.compute_capability,
    )


def cpu_target(
    inv: Inventory,
    precision: str,
    measured: tuple[float, str] | None = None,
    calibration: Any = None,
) -> Target:
    """This machine's CPU: its RAM, the peak estimate, a measured utilisation if stored, and
    its time calibration (:func:`tfaccel.planning.roofline.load_calibration`) if stored."""
    cpu = inv.cpu
    peak = cpu.peak
    rate = peak.bf16_tflops if "bfloat16" in precision and peak.bf16_tflops else peak.fp32_tflops
    if measured is not None:
        utilisation, how = measured
    else:
        utilisation = DEFAULT_UTILISATION["cpu"]
        how = f"default (no stored bench run on this machine): {utilisation:.0%} of peak"
    memory = cpu.memory_total_bytes
    return Target(
        key="this-cpu",
        kind="cpu",
        name=cpu.model or "this CPU",
        memory_bytes=memory,
        usable_bytes=cpu.memory_available_bytes or memory,
        peak_tflops=rate,
        bandwidth_gbs=None,
        utilisation=utilisation,
        utilisation_source=how,
        source=peak.formula or "CPU peak estimate",
        this_machine=True,
        calibration=calibration,
    )


def targets(
    precision: str,
    devices: list[str] | None = None,
    *,
    inv: Inventory | None = None,
    measured_cpu: tuple[float, str] | None = None,
    calibration: Any = None,
) -> list[Target]:
    """The targets of a plan: every GPU and TPU row of the database and this CPU (and this
    machine's GPUs, matched to their rows), or only the ``devices`` named by key;
    ``calibration`` is this CPU's time calibration, if any.

    Raises:
        UsageError: a key in ``devices`` that the database does not know.
    """
    specs = {s.key: s for s in load_specs()}
    here: list[Target] = []
    if inv is not None:
        here.append(cpu_target(inv, precision, measured_cpu, calibration))
        for index, gpu in enumerate(inv.gpus):
            if gpu.peak is None or gpu.peak.spec is None:
                continue
            row = next((s for s in specs.values() if s.name == gpu.peak.spec), None)
            if row is None:
                continue
            target = spec_target(row, precision)
            target.key, target.this_machine = f"gpu:{index}", True
            if gpu.info.memory_total_bytes:
                target.memory_bytes = gpu.info.memory_total_bytes
                target.usable_bytes = (
                    gpu.info.memory_total_bytes
                    - CUDA_CONTEXT_BYTES
                    - tf_gpu_reserve_bytes(gpu.info.memory_total_bytes, row.compute_capability)
                )
            here.append(target)
    if devices:
        keys = [d.strip().lower() for d in devices]
        known = {t.key for t in here} | set(specs)
        unknown = [k for k in keys if k not in known]
        if unknown:
            raise UsageError(
                f"Unknown device key {unknown[0]!r}",
                expected="keys of the spec database: " + ", ".join(specs) + ", or this-cpu",
                received=argument("devices", devices if len(devices) > 1 else devices[0]),
                fix="pick keys from `tfaccel plan --list-devices` (e.g. --device a100-40gb)",
            )
        chosen = [t for t in here if t.key in keys]
        chosen += [spec_target(specs[k], precision) for k in keys if k in specs]
        return chosen
    return here + [spec_target(s, precision) for s in specs.values() if s.kind in ("gpu", "tpu")]
