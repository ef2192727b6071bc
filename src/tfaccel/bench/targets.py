"""The devices a bench run measures (targets), what each supports and its peak rates.

``build_targets`` is pure (inventory + how many GPUs TensorFlow sees); ``resolve_targets``
asks TensorFlow. TensorFlow's GPU:N is taken to be NVML's GPU N, which holds when
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or when the GPUs are all of one model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from tfaccel.core.errors import UsageError
from tfaccel.inventory import Inventory, Peak

__all__ = ["BenchTarget", "build_targets", "cpu_dtypes", "gpu_dtypes", "resolve_targets"]

DTYPE_PEAK_FIELD = {"float32": "fp32_tflops", "bfloat16": "bf16_tflops", "float16": "fp16_tflops"}


@dataclass(frozen=True)
class BenchTarget:
    """One device (or group of devices) to measure.

    Attributes:
        name: ``cpu``, ``gpu:N`` or ``gpus`` (all GPUs with MirroredStrategy).
        kind: ``cpu``, ``gpu`` or ``mirrored``.
        label: what a user calls it ("GPU:0 NVIDIA A100-SXM4-80GB").
        tf_devices: TensorFlow device names ("/CPU:0", "/GPU:0"...).
        dtypes: matmul dtypes the device runs natively, float32 first.
        peak_tflops: dtype -> spec peak TFLOP/s (summed over replicas); missing when unknown.
        peak_bandwidth_gbs: spec memory bandwidth, None when unknown (CPUs).
        peak_note: where the peaks come from.
    """

    name: str
    kind: str
    label: str
    tf_devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    peak_tflops: dict[str, float] = field(default_factory=dict)
    peak_bandwidth_gbs: float | None = None
    peak_note: str = ""

    @property
    def replicas(self) -> int:
        """Number of devices trained on together."""
        return len(self.tf_devices)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        doc = asdict(self)
        doc["tf_devices"] = list(self.tf_devices)
        doc["dtypes"] = list(self.dtypes)
        return doc


def cpu_dtypes(flags: Iterable[str]) -> tuple[str, ...]:
    """float32; bfloat16 with AVX512_BF16/AMX_BF16/Arm BF16; float16 with AVX512_FP16/AMX_FP16."""
    present = set(flags)
    dtypes = ["float32"]
    if present & {"avx512_bf16", "amx_bf16", "bf16"}:
        dtypes.append("bfloat16")
    if present & {"avx512_fp16", "amx_fp16"}:
        dtypes.append("float16")
    return tuple(dtypes)


def gpu_dtypes(compute_capability: str | None) -> tuple[str, ...]:
    """float32; float16 from CC 6.0 (fast on 6.0 and >= 7.0 tensor cores); bfloat16 from 8.0."""
    try:
        cc = float(compute_capability) if compute_capability else None
    except ValueError:
        cc = None
    dtypes = ["float32"]
    if cc is None or cc >= 7.0 or cc == 6.0:
        dtypes.append("float16")
    if cc is None or cc >= 8.0:
        dtypes.append("bfloat16")
    return tuple(dtypes)


def _peaks(peak: Peak | None, tf32: bool, replicas: int = 1) -> dict[str, float]:
    if peak is None:
        return {}
    out: dict[str, float] = {}
    for dtype, attr in DTYPE_PEAK_FIELD.items():
        value = getattr(peak, attr)
        if dtype == "float32" and tf32 and peak.tf32_tflops is not None:
            value = peak.tf32_tflops  # TensorFlow runs float32 matmuls as TF32 on Ampere+
        if value is not None:
            out[dtype] = value * replicas
    return out


def build_targets(
    spec: str,
    inv: Inventory,
    tf_gpus: int,
    *,
    tf32: bool = True,
    cpu_flags: Iterable[str] | None = None,
) -> list[BenchTarget]:
    """The targets of a ``--device`` value.

    Args:
        spec: ``cpu``, ``gpu:N``, ``gpus`` or ``all`` (already normalised).
        inv: the machine's inventory (names, peaks, compute capabilities).
        tf_gpus: how many GPUs TensorFlow registers.
        tf32: whether TensorFlow runs float32 matmuls as TF32 (the float32 peak is then TF32's).
        cpu_flags: the CPU's flags as /proc/cpuinfo spells them (default: read back from the
            inventory's feature labels).

    Raises:
        UsageError: a GPU that TensorFlow does not see.
    """
    cpu = BenchTarget(
        name="cpu",
        kind="cpu",
        label=f"CPU {inv.cpu.model or '(model unknown)'}",
        tf_devices=("/CPU:0",),
        dtypes=cpu_dtypes(cpu_flags if cpu_flags is not None else _cpu_flags(inv)),
        peak_tflops=_peaks(inv.cpu.peak, tf32=False),
        peak_bandwidth_gbs=None,
        peak_note=f"estimate: {inv.cpu.peak.formula}",
    )
    gpus = [_gpu_target(i, inv, tf32) for i in range(tf_gpus)]
    if spec == "cpu":
        return [cpu]
    if spec == "all":
        return [cpu, *gpus] + ([_mirrored(gpus)] if len(gpus) >= 2 else [])
    seen = ", ".join(g.name for g in gpus) or "none"
    fix = "run 'tfaccel doctor' to see why TensorFlow does not use the GPU"
    if spec == "gpus":
        if not gpus:
            raise UsageError(
                "--device gpus needs a GPU, and TensorFlow sees none",
                expected="at least one GPU registered by TensorFlow",
                received="GPUs TensorFlow sees: none",
                fix=fix,
            )
        return [_mirrored(gpus)]
    index = int(spec.split(":", 1)[1])
    if index >= len(gpus):
        raise UsageError(
            f"TensorFlow does not see the device {spec!r}",
            expected="one of: cpu" + "".join(f", {g.name}" for g in gpus),
            received=f"{spec} (GPUs TensorFlow sees: {seen})",
            fix=fix if not gpus else f"pick one of {seen}",
        )
    return [gpus[index]]


def _cpu_flags(inv: Inventory) -> list[str]:
    # The inventory keeps user-facing feature labels; map the ones that matter back to flags.
    labels = set(inv.cpu.features)
    mapping = {
        "AVX512_BF16": "avx512_bf16",
        "AMX_BF16": "amx_bf16",
        "BF16 (Arm)": "bf16",
        "AVX512_FP16": "avx512_fp16",
    }
    return [flag for label, flag in mapping.items() if label in labels]


def _gpu_target(index: int, inv: Inventory, tf32: bool) -> BenchTarget:
    dev = inv.gpus[index] if index < len(inv.gpus) else None
    name = dev.info.name if dev is not None else "(NVML did not report it)"
    cc = dev.info.compute_capability if dev is not None else None
    peak = dev.peak if dev is not None else None
    note = dev.peak_note if dev is not None else "unknown: NVML did not report this GPU"
    if tf32 and peak is not None and peak.tf32_tflops is not None:
        note += "; float32 peak is TF32 (TensorFlow's default on Ampere and newer)"
    return BenchTarget(
        name=f"gpu:{index}",
        kind="gpu",
        label=f"GPU:{index} {name}",
        tf_devices=(f"/GPU:{index}",),
        dtypes=gpu_dtypes(cc),
        peak_tflops=_peaks(peak, tf32),
        peak_bandwidth_gbs=peak.bandwidth_gbs if peak is not None else None,
        peak_note=note,
    )


def _mirrored(gpus: list[BenchTarget]) -> BenchTarget:
    common = [d for d in gpus[0].dtypes if all(d in g.dtypes for g in gpus)]
    peaks: dict[str, float] = {}
    for dtype in common:
        values = [g.peak_tflops.get(dtype) for g in gpus]
        if all(v is not None for v in values):
            peaks[dtype] = sum(v for v in values if v is not None)
    return BenchTarget(
        name="gpus",
        kind="mirrored",
        label=f"{len(gpus)} GPUs (MirroredStrategy)",
        tf_devices=tuple(d for g in gpus for d in g.tf_devices),
        dtypes=tuple(common),
        peak_tflops=peaks,
        peak_bandwidth_gbs=None,
        peak_note="sum of the GPUs' peaks",
    )


def resolve_targets(
    spec: str, inv: Inventory, cpu_flags: Iterable[str] | None = None
) -> list[BenchTarget]:
    """:func:`build_targets` with the GPU count and TF32 setting asked of TensorFlow."""
    import tensorflow as tf

    tf_gpus = len(tf.config.list_physical_devices("GPU"))
    tf32 = bool(tf.config.experimental.tensor_float_32_execution_enabled())
    return build_targets(spec, inv, tf_gpus, tf32=tf32, cpu_flags=cpu_flags)
