"""The GPUs the TensorFlow of this process sees, with the details it reports about each.

The one reader of ``tf.config.experimental.get_device_details``: the runtime, ``tfaccel tune``,
the profiler (through :mod:`tfaccel.inventory`) and ``doctor --deep`` (in its subprocess) all
read TensorFlow's GPUs here. TensorFlow is imported when :func:`collect` is called, never when
this module is; listing physical devices and their details does not start TensorFlow's runtime.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TfGpu", "collect", "compute_capability"]


@dataclass(frozen=True)
class TfGpu:
    """One physical GPU as TensorFlow reports it.

    Attributes:
        index: TensorFlow's numbering ("/physical_device:GPU:1" -> 1), which
            CUDA_VISIBLE_DEVICES renumbers from NVML's.
        name: the ``device_name`` detail ("NVIDIA A100-SXM4-40GB"), "" when TensorFlow gives none.
        compute_capability: "8.0", None when TensorFlow gives none (a CPU-only build).
        details: every detail TensorFlow reports, keys and values as text.
    """

    index: int
    name: str = ""
    compute_capability: str | None = None
    details: dict[str, str] = field(default_factory=dict)


def collect(tf: Any = None) -> list[TfGpu]:
    """The GPUs TensorFlow sees, in its order.

    Args:
        tf: the ``tensorflow`` module (default: import it); tests pass a fake.

    Returns:
        One TfGpu per ``tf.config.list_physical_devices("GPU")`` entry; empty without a GPU.
    """
    tf = tf if tf is not None else importlib.import_module("tensorflow")
    gpus = []
    for device in tf.config.list_physical_devices("GPU"):
        details = dict(tf.config.experimental.get_device_details(device))
        gpus.append(
            TfGpu(
                index=int(str(device.name).rsplit(":", 1)[-1]),
                name=str(details.get("device_name") or ""),
                compute_capability=compute_capability(details.get("compute_capability")),
                details={str(k): str(v) for k, v in details.items()},
            )
        )
    return gpus


def compute_capability(value: object) -> str | None:
    """TensorFlow's ``(major, minor)`` detail as text ("8.0"); None for anything else."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return f"{value[0]}.{value[1]}"
    return None
