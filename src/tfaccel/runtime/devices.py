"""``tfaccel.on_device()``: ``tf.device`` for a device that exists, or a clear error."""

from __future__ import annotations

import importlib
from contextlib import AbstractContextManager
from typing import Any

from tfaccel.core.checks import check_text
from tfaccel.core.errors import RuntimeSetupError, UsageError, shown

__all__ = ["on_device"]

_EXPECTED = "a device name such as 'GPU:0', '/gpu:0', '/device:GPU:0' or 'CPU:0'"


def on_device(spec: str) -> AbstractContextManager[Any]:
    """``tf.device`` for a device that exists, or a clear error (TF would silently fall back).

    Accepts the usual spellings: "GPU:0", "gpu:0", "/gpu:0", "/device:GPU:0", "CPU:1",
    "/job:localhost/replica:0/task:0/device:GPU:0". Checking starts TensorFlow's runtime
    (it lists the logical devices), so call ``setup()`` before it.

    Args:
        spec: the device.

    Returns:
        The ``tf.device`` context manager for it.

    Raises:
        UsageError: ``spec`` is not text, or the text is not a device name (checked before
            TensorFlow is imported or started).
        RuntimeSetupError: no such device; the message lists those that exist.

    Example:
        >>> with tfaccel.on_device("GPU:0"):
        ...     y = tf.matmul(x, x)
    """
    text = check_text(
        "spec",
        spec,
        where="tfaccel.on_device()",
        expected=_EXPECTED,
        fix="name a device type and index as text, e.g. tfaccel.on_device('GPU:0')",
    ).strip()
    tf = importlib.import_module("tensorflow")
    try:
        wanted = tf.DeviceSpec.from_string(text)
    except (ValueError, TypeError):
        wanted = None
    if wanted is None or not wanted.device_type:
        raise UsageError(
            f"{shown(spec)} is not a device name",
            expected=_EXPECTED,
            received=shown(spec),
            fix="name a device type and index, e.g. 'GPU:0'",
        )
    existing = [tf.DeviceSpec.from_string(d.name) for d in tf.config.list_logical_devices()]
    if not any(_same_device(wanted, have) for have in existing):
        names = ", ".join(f"{d.device_type}:{d.device_index}" for d in existing)
        raise RuntimeSetupError(
            f"The device {shown(spec)} does not exist",
            expected=f"one of {names}",
            received=shown(spec),
            fix="use one of those; logical devices come from setup(devices=, logical_devices=)",
        )
    return tf.device(wanted.to_string())


def _same_device(wanted: Any, have: Any) -> bool:
    if wanted.device_type.upper() != have.device_type.upper():
        return False
    if wanted.device_index is not None and wanted.device_index != have.device_index:
        return False
    return wanted.job in (None, "localhost", have.job)
