"""What the doctor's rule modules share: building findings, reading versions, and plain facts.

No rule lives here and no finding id is made here; the helpers answer the questions several
families ask of a Snapshot: is TensorFlow installed and is it a CUDA build, is there an NVIDIA
GPU, which platform is this, which GPUs does ``CUDA_VISIBLE_DEVICES`` leave visible. They do no
I/O and never import TensorFlow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tfaccel.core.findings import Finding, Status
from tfaccel.snapshot import GpuInfo, PciDevice, Snapshot

INSTALL_GPU = "pip install 'tensorflow[and-cuda]'"
NGC_CONTAINER = "docker run --gpus all -it --rm nvcr.io/nvidia/tensorflow:25.02-tf2-py3"
VLOG_DEBUG = (
    'TF_CPP_MAX_VLOG_LEVEL=3 python -c "import tensorflow as tf; '
    "print(tf.config.list_physical_devices('GPU'))\""
)
NO_NVIDIA_GPU = "no NVIDIA GPU on this machine"

# Every distribution that installs the ``tensorflow`` package (normalised names).
# fmt: off
TF_DISTRIBUTIONS = frozenset({
    "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-cpu-aws",
    "tensorflow-macos", "tensorflow-aarch64", "tensorflow-rocm", "intel-tensorflow",
    "tf-nightly", "tf-nightly-cpu", "tf-nightly-gpu", "tf-nightly-intel",
})
CPU_ONLY_DISTRIBUTIONS = frozenset({
    "tensorflow-cpu", "tensorflow-intel", "tensorflow-cpu-aws", "tensorflow-macos",
    "tensorflow-aarch64", "intel-tensorflow", "tf-nightly-cpu", "tf-nightly-intel",
})
# fmt: on


# --------------------------------------------------------------------------- findings


def make_finding(
    id: str,
    status: Status,
    title: str,
    evidence: list[str] | None = None,
    fix: str | None = None,
    source: str = "probe",
) -> Finding:
    return Finding(id, status, title, list(evidence or []), fix, source)


def skip(id: str, reason: str, evidence: list[str] | None = None) -> Finding:
    """The finding of a rule that does not apply here, saying why."""
    return make_finding(id, "skip", reason, evidence)


# --------------------------------------------------------------------------- versions


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """``"12.5.1"`` -> ``(12, 5, 1)``; ``"12.x"`` -> ``(12,)``; ``""``/``"abc"`` -> None."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    if match is None:
        return None
    return tuple(int(part[:9]) for part in match.group(1).split("."))


def major_minor(text: str | None) -> tuple[int, int] | None:
    """``"12.5.1"`` -> ``(12, 5)``; ``"12"`` -> ``(12, 0)``; unreadable -> None."""
    parts = parse_version(text)
    if parts is None:
        return None
    return parts[0], parts[1] if len(parts) > 1 else 0


def dotted(parts: tuple[int, ...]) -> str:
    """``(12, 5)`` -> ``"12.5"``."""
    return ".".join(str(p) for p in parts)


# --------------------------------------------------------------------------- TensorFlow


def normalise(name: str) -> str:
    """A distribution name as pip compares it: ``Tensorflow_CPU`` -> ``tensorflow-cpu``."""
    return re.sub(r"[-_.]+", "-", name).lower().strip()


def installed_distributions(s: Snapshot) -> dict[str, str]:
    """Installed distributions, normalised name -> version."""
    return {normalise(d.name): d.version for d in s.distributions if d.name}


def tf_distributions(s: Snapshot) -> dict[str, str]:
    """The installed distributions that install the ``tensorflow`` package."""
    return {n: v for n, v in installed_distributions(s).items() if n in TF_DISTRIBUTIONS}


def tf_installed(s: Snapshot) -> bool:
    return s.tensorflow.installed or bool(tf_distributions(s))


def tf_label(s: Snapshot) -> str:
    """``tensorflow-cpu 2.21.0``, for titles and evidence."""
    tf = s.tensorflow
    name = tf.distribution or "tensorflow"
    return f"{name} {tf.version}" if tf.version else name


def cuda_build(s: Snapshot) -> bool | None:
    """Whether the installed TensorFlow is a CUDA build; None when it cannot be told."""
    if s.tensorflow.is_cuda_build is not None:
        return s.tensorflow.is_cuda_build
    if s.tensorflow.is_rocm_build:
        return False
    name = normalise(s.tensorflow.distribution or "")
    if name in CPU_ONLY_DISTRIBUTIONS:
        return False
    return None


def gpu_skip_reason(s: Snapshot) -> str | None:
    """Why a rule about TensorFlow on the GPU does not apply here, or None when it does."""
    if not has_nvidia(s):
        return NO_NVIDIA_GPU
    if not tf_installed(s):
        return "TensorFlow is not installed"
    cuda = cuda_build(s)
    if cuda is False:
        return f"{tf_label(s)} is not a CUDA build (see cpu_only_build)"
    if cuda is None:
        return f"cannot tell whether {tf_label(s)} is a CUDA build (no build info)"
    return None


# --------------------------------------------------------------------------- platform and GPUs


def os_name(s: Snapshot) -> str:
    """``linux``, ``windows``, ``darwin``, ... (lower case)."""
    return s.platform.system.strip().lower()


def cpu_arch(s: Snapshot) -> str:
    """``x86_64`` or ``aarch64`` under whichever name the platform reported."""
    machine = s.platform.machine.strip().lower()
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def is_windows_native(s: Snapshot) -> bool:
    return os_name(s) == "windows"


def nvidia_pci(s: Snapshot) -> list[PciDevice]:
    """NVIDIA display/3D controllers (vendor 0x10de, PCI class 0x03xxxx)."""
    return [
        d
        for d in s.pci
        if d.vendor_id.strip().lower() == "0x10de" and d.class_id.strip().lower().startswith("0x03")
    ]


def has_nvidia(s: Snapshot) -> bool:
    return bool(nvidia_pci(s) or s.nvml.gpus)


def gpu_count(s: Snapshot) -> int:
    return len(s.nvml.gpus) if s.nvml.gpus else len(nvidia_pci(s))


def gpu_name(gpu: GpuInfo) -> str:
    return f"GPU {gpu.index} ({gpu.name or 'unnamed'})"


def gpu_summary(s: Snapshot) -> str:
    """Every NVIDIA GPU in one line: by NVML's name, else by PCI address."""
    if s.nvml.gpus:
        return ", ".join(gpu_name(g) for g in s.nvml.gpus)
    return ", ".join(f"PCI {d.address or '?'} (device {d.device_id or '?'})" for d in nvidia_pci(s))


def no_gpu_evidence(s: Snapshot) -> list[str]:
    """What shows that this machine has no NVIDIA GPU."""
    evidence = ["no NVIDIA PCI device (vendor 0x10de) found"]
    if s.nvml.error:
        evidence.append(f"NVML: {s.nvml.error}")
    elif not s.nvml.gpus:
        evidence.append("NVML lists no GPU")
    return evidence


@dataclass
class Visibility:
    """How ``CUDA_VISIBLE_DEVICES`` selects GPUs, read with CUDA's rules."""

    visible: int  # GPUs CUDA will show
    stopped_at: str | None  # the first entry CUDA rejects; it ignores that one and the rest


def visibility(value: str, gpus: list[GpuInfo], total: int) -> Visibility:
    """Count the GPUs ``CUDA_VISIBLE_DEVICES=value`` leaves visible.

    CUDA reads the list in order and stops at the first entry that names no GPU
    (``-1``, an index out of range, an unknown UUID).
    """
    uuids = [g.uuid for g in gpus if g.uuid]
    seen: set[str] = set()
    for raw in value.split(","):
        entry = raw.strip()
        if entry.isdigit() and int(entry[:9]) < total:
            seen.add(entry.lstrip("0") or "0")
            continue
        if entry.startswith(("GPU-", "MIG-")) and (
            not uuids or any(u.startswith(entry) for u in uuids)
        ):
            seen.add(entry)
            continue
        return Visibility(len(seen), entry)
    return Visibility(len(seen), None)
