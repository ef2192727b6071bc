"""tfaccel: make TensorFlow/Keras training use the hardware it runs on, and show it.

Importing tfaccel is cheap: it never imports TensorFlow. The public functions load their
modules on first use.

Example:
    >>> import tfaccel
    >>> inv = tfaccel.devices()          # CPU, GPUs, TPUs and their peaks; no TensorFlow import
    >>> report = tfaccel.doctor()        # why TensorFlow does (not) use the GPU
    >>> tfaccel.plan(model, batch_size=256)  # fit and time per accelerator  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tfaccel._version import __version__
from tfaccel.core.errors import TfaccelError

__all__ = ["TfaccelError", "__version__", "device", "devices", "doctor", "plan", "setup", "tune"]

# Every public submodule is an attribute of ``tfaccel`` (``tfaccel.data.pipeline(...)`` after a
# plain ``import tfaccel``), imported on first use so that ``import tfaccel`` stays cheap.
SUBMODULES = frozenset(
    {
        "architecture",
        "bench",
        "core",
        "diagnosis",
        "data",
        "distribute",
        "inventory",
        "keras",
        "kernels",
        "models",
        "placement",
        "planning",
        "probe",
        "profile",
        "report",
        "runtime",
        "selftest",
        "snapshot",
        "store",
        "tuning",
    }
)


def __getattr__(name: str) -> Any:
    if name in SUBMODULES:
        return importlib.import_module(f"tfaccel.{name}")
    raise AttributeError(f"module 'tfaccel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | SUBMODULES)


if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from contextlib import AbstractContextManager

    from tfaccel.diagnosis import DoctorReport
    from tfaccel.inventory import Inventory
    from tfaccel.planning import Plan
    from tfaccel.runtime import RuntimeConfig
    from tfaccel.tuning import TuneResult


def devices(*, tf: bool = False) -> Inventory:
    """Return the devices of this machine and what they can do (``tfaccel devices``).

    Args:
        tf: also ask TensorFlow (in a subprocess) which devices it registers (a bool).

    Raises:
        UsageError: ``tf`` is not a bool.
    """
    from tfaccel import inventory, probe
    from tfaccel.runtime.settings import check_flag

    check_flag("tf", tf, where="tfaccel.devices()")
    return inventory.build(probe.snapshot(deep=tf))


def doctor(*, deep: bool = False, log: str | bytes | None = None) -> DoctorReport:
    """Diagnose why TensorFlow does or does not use the accelerators (``tfaccel doctor``).

    Args:
        deep: import TensorFlow in a subprocess and read what it logs (a bool).
        log: the text of a TensorFlow log or traceback to diagnose as well: a str, or bytes
            (decoded as UTF-8, undecodable bytes replaced and counted in the report's notes).

    Raises:
        UsageError: ``deep`` is not a bool, or ``log`` is not text or bytes.
        LogInputError: ``log`` is empty or blank.
    """
    from tfaccel.diagnosis import check

    return check(deep=deep, log=log)


def setup(*args: Any, **kwargs: Any) -> RuntimeConfig:
    """Configure the TensorFlow runtime; see :func:`tfaccel.runtime.setup`."""
    from tfaccel import runtime

    return runtime.setup(*args, **kwargs)


def device(spec: str) -> AbstractContextManager[Any]:
    """``tf.device`` that refuses a device which does not exist; see :func:`tfaccel.runtime.device`.

    Accepts ``'GPU:0'``, ``'/gpu:0'``, ``'/device:GPU:0'``, ``'cpu:0'``; anything that is not
    such text is refused with a UsageError before TensorFlow is imported.
    """
    from tfaccel import runtime

    return runtime.device(spec)


def tune(
    model_fn: Callable[[], Any],
    data: Any,
    budget_s: float = 300.0,
    space: Mapping[str, Any] | None = None,
    **options: Any,
) -> TuneResult:
    """Find the fastest training configuration on this machine; see :func:`tfaccel.tuning.tune`."""
    from tfaccel.tuning.api import tune as run

    return run(model_fn, data, budget_s, space, **options)


def plan(
    model: Any,
    batch_size: int = 32,
    precision: str | None = None,
    optimizer: Any = None,
    devices: Sequence[str] | None = None,
    **options: Any,
) -> Plan:
    """Predict memory, fit, largest batch and time on each accelerator (``tfaccel plan``);
    see :func:`tfaccel.planning.plan`."""
    from tfaccel.planning.api import plan as make

    return make(model, batch_size, precision, optimizer, devices, **options)
