"""What the results store measured on this machine, for ``jit="auto"`` and ``precision="auto"``.

``tfaccel bench`` and ``tfaccel tune`` store each training figure under the machine
fingerprint of the inventory and the architecture fingerprint of the model measured
(:mod:`tfaccel.architecture`). These lookups read a measurement back only for the model being
set up: the same machine, the same device and the same architecture. A measurement of another
model (the reference CNN for a 16-feature MLP) is never borrowed; without a model
(``setup()`` with no ``model=``) nothing is looked up. Either way the reason says that the
setting is decided by the hardware rule. The lookups never probe the machine themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfaccel import store
from tfaccel.architecture import short
from tfaccel.core.errors import TfaccelError
from tfaccel.runtime.settings import PRECISIONS, Request

__all__ = ["BY_RULE", "measured_jit", "measured_precision"]

BY_RULE = "decided by rule"
"""How every "no measurement" reason ends: the setting falls back to the hardware rule."""


def measured_jit(
    request: Request, device: str, fingerprint: str, *, model_fingerprint: str | None = None
) -> tuple[bool | None, str]:
    """XLA on or off as measured for this machine and model in the results store
    (``tfaccel bench``, ``tfaccel tune``); only asked when ``jit="auto"``.

    Args:
        request: the request (its ``jit`` and model name).
        device: where the model trains ("cpu", "gpu:0").
        fingerprint: the digest of this machine's fingerprint (``Inventory.fingerprint``).
        model_fingerprint: the architecture fingerprint of the model given to ``setup``
            (:func:`tfaccel.architecture.fingerprint`); None when no model was given.

    Returns:
        (True or False, how the measurement reads), or (None, why there is none, ending in
        "decided by rule").
    """

    def read(value: Any) -> tuple[bool, str] | None:
        return None if value is None else (bool(value), f"XLA {'faster' if value else 'slower'}")

    return _measured(request, device, fingerprint, model_fingerprint, "jit", read)


def measured_precision(
    request: Request, device: str, fingerprint: str, *, model_fingerprint: str | None = None
) -> tuple[str | None, str]:
    """The fastest precision measured for this machine and model in the results store; only
    asked when ``precision="auto"``. Arguments and result as :func:`measured_jit`."""

    def read(value: Any) -> tuple[str, str] | None:
        if value in PRECISIONS and value != "auto":
            return str(value), f"{value} fastest"
        return None

    return _measured(request, device, fingerprint, model_fingerprint, "precision", read)


def _measured(
    request: Request,
    device: str,
    fingerprint: str,
    model_fingerprint: str | None,
    key: str,
    read: Callable[[Any], tuple[Any, str] | None],
) -> tuple[Any, str]:
    """Look ``key`` up in the results store for this machine, device and model architecture.
    A result inside the measured noise counts as no result, and a broken store is a reason,
    not an error: it must not stop training."""
    if request.get(key) != "auto":
        return None, "not looked up"
    if model_fingerprint is None:
        return None, f"no model given to setup(model=...), so no measurement applies; {BY_RULE}"

    model = f"model {request.model_name!r}" if request.model_name else "this model"
    try:
        found = store.best_measured(
            fingerprint, key, model_fingerprint=model_fingerprint, device=device
        )
    except TfaccelError as exc:
        return None, f"the results store could not be read ({exc.what}); {BY_RULE}"
    if found is None:
        return None, (
            f"no measurement for this model ({model}, architecture {short(model_fingerprint)}) "
            f"on this machine's {device}; {BY_RULE}"
        )
    value = read(found.value)
    if value is None:
        where = f"measured here on {device} ({found.benchmark})"
        if found.values < 2:
            return None, f"{where} with one {key} setting only, nothing compared; {BY_RULE}"
        return None, f"{where}: no {key} setting faster beyond the noise; {BY_RULE}"
    setting, verdict = value
    return setting, f"measured here on {device} ({found.benchmark}): {verdict}"
