"""What this hardware is and can do: the one model of it that the layers above ask.

:func:`build` turns a Snapshot into an :class:`Inventory` (pure): every device with its peaks
from the spec database shipped in ``accelerators.csv`` (each row cites its source; a model the
database does not know is reported as unknown, never guessed), the precisions that run fast
here and why, the tensor-core and bfloat16 thresholds, and the machine fingerprint that keys
stored measurements. :func:`current` probes this machine once and builds it, for callers that
hold no Snapshot; :func:`tensorflow_gpus` adds what the TensorFlow of this process sees.

Example:
    >>> from tfaccel import inventory
    >>> inv = inventory.current()
    >>> inv.precisions(()).best            # on the CPU alone   # doctest: +SKIP
    'mixed_bfloat16'
    >>> inv.fingerprint.digest                         # doctest: +SKIP
    '3f2a9c0d4e5b6a71'
"""

from __future__ import annotations

from tfaccel import probe
from tfaccel.inventory.devices import (
    CPU_FEATURES,
    CpuDevice,
    GpuDevice,
    Inventory,
    TensorFlowView,
    TpuDevice,
    build,
)
from tfaccel.inventory.fingerprint import Fingerprint, machine_fingerprint
from tfaccel.inventory.gpus import GpuFacts, match_gpus
from tfaccel.inventory.precision import (
    BF16_CPU_FLAGS,
    BF16_MIN_CC,
    TENSOR_CORE_MIN_CC,
    Precisions,
    fast_precisions,
    precision_warning,
)
from tfaccel.inventory.specs import AcceleratorSpec, Peak, cpu_peak, load_specs, match_spec
from tfaccel.probe import tf_gpus

__all__ = [
    "BF16_CPU_FLAGS",
    "BF16_MIN_CC",
    "CPU_FEATURES",
    "TENSOR_CORE_MIN_CC",
    "AcceleratorSpec",
    "CpuDevice",
    "Fingerprint",
    "GpuDevice",
    "GpuFacts",
    "Inventory",
    "Peak",
    "Precisions",
    "TensorFlowView",
    "TpuDevice",
    "build",
    "cpu_peak",
    "current",
    "current_fingerprint",
    "fast_precisions",
    "load_specs",
    "machine_fingerprint",
    "match_gpus",
    "match_spec",
    "precision_warning",
    "tensorflow_gpus",
]


def current() -> Inventory:
    """Probe this machine once and build its Inventory.

    The probe (``probe.snapshot``) imports no TensorFlow and loads no CUDA library into this
    process, so it is safe before and after TensorFlow is imported.

    Example:
        >>> inventory.current().cpu.usable_cores           # doctest: +SKIP
        16
    """
    return build(probe.snapshot(libraries=False))


def current_fingerprint() -> Fingerprint:
    """This machine's fingerprint, as ``current().fingerprint`` gives it, from a probe of only
    what it reads (:func:`tfaccel.probe.fingerprint_snapshot`: no reading of every installed
    package). For a lookup in the results store that needs nothing else of the Inventory."""
    return machine_fingerprint(probe.fingerprint_snapshot())


def tensorflow_gpus(inv: Inventory, cuda_visible_devices: str | None) -> tuple[GpuFacts, ...]:
    """The GPUs the TensorFlow of this process sees, each matched to its NVML GPU.

    Imports TensorFlow (without starting its runtime) and reads its GPUs' details
    (``tfaccel.probe.tf_gpus``); memory and UUID come from ``inv``'s NVML GPUs.

    Args:
        inv: this machine's Inventory.
        cuda_visible_devices: CUDA_VISIBLE_DEVICES as set (None: unset), usually
            ``inv.cuda_visible_devices``.

    Returns:
        One GpuFacts per GPU, by TensorFlow index; empty when TensorFlow sees none.
    """
    return match_gpus(tf_gpus.collect(), inv.nvml_gpus, cuda_visible_devices)
