"""What the results store measured on this machine, for ``jit="auto"`` and ``precision="auto"``.

``tfaccel bench`` and ``tfaccel tune`` store their results under the machine fingerprint of the
inventory; these lookups read them back by that digest and never probe the machine themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfaccel.errors import TfaccelError
from tfaccel.runtime.settings import PRECISIONS, Request

__all__ = ["REFERENCE_MODEL", "measured_jit", "measured_precision"]

REFERENCE_MODEL = "reference_cnn"  # the benchmark whose result stands in for any model


def measured_jit(request: Request, device: str, fingerprint: str) -> tuple[bool | None, str]:
    """XLA on or off as measured for this machine in the results store (``tfaccel bench``,
    ``tfaccel tune``); only asked when ``jit="auto"``.

    Args:
        request: the request (its ``jit`` and model name).
        device: where the model trains ("cpu", "gpu:0").
        fingerprint: the digest of this machine's fingerprint (``Inventory.fingerprint``).

    Returns:
        (True or False, how the measurement reads), or (None, why there is none).
    """

    def read(value: Any) -> tuple[bool, str] | None:
        return None if value is None else (bool(value), f"XLA {'faster' if value else 'slower'}")

    return _measured(request, device, fingerprint, "jit", read)


def measured_precision(request: Request, device: str, fingerprint: str) -> tuple[str | None, str]:
    """The fastest precision measured for this machine in the results store; only asked when
    ``precision="auto"``. Arguments and result as :func:`measured_jit`."""

    def read(value: Any) -> tuple[str, str] | None:
        if value in PRECISIONS and value != "auto":
            return str(value), f"{value} fastest"
        return None

    return _measured(request, device, fingerprint, "precision", read)


def _measured(
    request: Request,
    device: str,
    fingerprint: str,
    key: str,
    read: Callable[[Any], tuple[Any, str] | None],
) -> tuple[Any, str]:
    """Look ``key`` up in the results store for this machine: the model's own benchmark name
    first, then the reference CNN. A result inside the measured noise counts as no result, and
    a broken store is a reason, not an error: it must not stop training."""
    if request.get(key) != "auto":
        return None, "not looked up"
    from tfaccel import store

    nothing = f"no clear measurement on this machine's {device} in the results store"
    models = dict.fromkeys(m for m in (request.model_name, REFERENCE_MODEL) if m)
    try:
        for model in models:
            found = read(store.best_setting(fingerprint, model, key, device=device))
            if found is not None:
                value, verdict = found
                return value, f"measured here on {device} ({model}): {verdict}"
    except TfaccelError as exc:
        return None, f"the results store could not be read ({exc.what})"
    return None, nothing
