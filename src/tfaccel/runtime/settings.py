"""The settings ``setup()`` takes: their names, variables, accepted values, and the Request.

Every setting is given as an argument of ``setup()``, a ``TFACCEL_*`` variable or a
``tfaccel run`` option; :func:`parse_setting` checks and normalises each form, and
:func:`build_request` fills what the arguments leave unset from the variables.

The generic argument checks of the public API live in :mod:`tfaccel.core.checks`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from tfaccel.core.checks import is_bool, shown_typed
from tfaccel.core.errors import UsageError, shown
from tfaccel.inventory.precision import PRECISIONS as POLICIES
from tfaccel.runtime.model import check_model_dims

__all__ = [
    "ENV_VARS",
    "FIXED_AT_START",
    "MAX_LOGICAL_DEVICES",
    "MAX_MEMORY_MIB",
    "MAX_THREADS",
    "PRECISIONS",
    "SETTINGS",
    "Request",
    "build_request",
    "check_model",
    "parse_setting",
]

SETTINGS = (
    "devices",
    "memory",
    "logical_devices",
    "threads",
    "precision",
    "jit",
    "deterministic",
    "seed",
)
"""The settings ``setup()`` takes, in the order a RuntimeConfig lists them."""

FIXED_AT_START = frozenset({"devices", "memory", "logical_devices", "threads"})
"""Settings TensorFlow fixes when its runtime starts; the others can change at any time."""

ENV_VARS = {name: "TFACCEL_" + name.upper() for name in SETTINGS}
"""The environment variable of each setting (``TFACCEL_PRECISION``...); arguments win over them."""

PRECISIONS = ("auto", *POLICIES)

MAX_LOGICAL_DEVICES = 64
"""The most logical devices ``setup()`` splits one device into. TensorFlow sets no limit of its
own on the CPU (on a GPU each needs a memory limit of at least 1 MiB), but logical devices add
no hardware: they share the same cores, or the same GPU's cores and memory, and
MirroredStrategy builds and runs the step once per replica; they exist to run multi-device
code on one device, which takes 2 to 8 of them."""

MAX_THREADS = 4096
"""The most threads per TensorFlow pool ``setup()`` asks for: TensorFlow creates them all when
its runtime starts, and this is several times the cores of the largest machines."""

MAX_MEMORY_MIB = 2**24
"""The largest memory limit ``setup()`` accepts, in MiB (16 TiB): far above any GPU, so a larger
number is a limit given in bytes (4 GiB is ``memory=4096``, not ``4 * 1024**3``)."""

DevicesValue: TypeAlias = 'Literal["all", "none"] | tuple[int, ...]'
MemoryValue: TypeAlias = 'Literal["growth"] | int | float'
JitValue: TypeAlias = 'Literal["auto"] | bool'
ThreadsValue: TypeAlias = "tuple[int, int | None]"


@dataclass(frozen=True)
class Request:
    """The parsed, validated request: a value per setting (None: not requested).

    Attributes:
        values: setting name -> parsed value (see ``parse_setting``).
        sources: setting name -> "argument", the variable it came from, or "default".
        env_growth: TF_FORCE_GPU_ALLOW_GROWTH is "true" (TensorFlow's own memory growth switch).
        cuda_visible_devices: CUDA_VISIBLE_DEVICES as set, to match TensorFlow's GPUs to NVML's.
        model_name: the model's name, for the measured-XLA lookup.
        model_dims: dimension problems of the model (see :func:`check_model_dims`).
    """

    values: Mapping[str, Any]
    sources: Mapping[str, str]
    env_growth: bool = False
    cuda_visible_devices: str | None = None
    model_name: str | None = None
    model_dims: tuple[str, ...] = ()

    def get(self, name: str) -> Any:
        return self.values.get(name)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

# setting -> (what it is, the values it accepts, an example as Python, an example as text)
_FORMS: dict[str, tuple[str, str, str, str]] = {
    "devices": (
        "GPU selection",
        "GPU indices (0, [0, 1] or the text '0,1'), 'all' or 'none'",
        "[0, 1]",
        "0,1",
    ),
    "memory": (
        "GPU memory setting",
        f"'growth', a limit in MiB (an integer from 1 to {MAX_MEMORY_MIB}, e.g. 4096) or a "
        "fraction of the GPU's memory in (0, 1] (e.g. 0.5)",
        "'growth'",
        "growth",
    ),
    "precision": ("precision", "one of " + ", ".join(PRECISIONS), "'auto'", "auto"),
    "jit": ("XLA setting", "'auto', true or false", "'auto'", "auto"),
    "threads": (
        "thread count",
        f"an integer from 1 to {MAX_THREADS} (intra-op threads) or two of them, intra and "
        "inter ('4,2')",
        "(4, 2)",
        "4,2",
    ),
    "logical_devices": (
        "logical device count",
        f"an integer from 1 to {MAX_LOGICAL_DEVICES}. TensorFlow sets no limit on the CPU and "
        "needs at least 1 MiB of memory limit per logical GPU, but logical devices add no "
        "hardware: they share one device's cores and memory, and MirroredStrategy builds and "
        "runs the step once per replica; 2 to 8 are enough to run multi-device code",
        "2",
        "2",
    ),
    "deterministic": ("determinism switch", "true or false", "True", "true"),
    "seed": ("seed", "an integer in [0, 2**32)", "42", "42"),
}


def parse_setting(name: str, value: object, *, source: str | None = None) -> Any:
    """Parse and check one setting, given as a Python value or as text (variable, option).

    Args:
        name: a name from ``SETTINGS``.
        value: the value; text forms are those of the ``TFACCEL_*`` variables
            ("0,1", "growth", "4096", "0.5", "auto", "true", "4,2").
        source: how to name the value in an error ("--memory", "TFACCEL_MEMORY");
            default: the argument ``name=``.

    Returns:
        The normalised value: devices -> "all" | "none" | tuple of indices; memory ->
        "growth" | MiB (int) | fraction (float); jit -> "auto" | bool; threads ->
        (intra, inter or None); the others -> str, int or bool.

    Raises:
        UsageError: the value is not one the setting accepts.

    Example:
        >>> parse_setting("threads", "4,2", source="TFACCEL_THREADS")
        (4, 2)
    """
    parser = _PARSERS.get(name)
    if parser is None:
        raise UsageError(
            f"{shown(name)} is not a tfaccel.setup() setting",
            expected="one of " + ", ".join(SETTINGS),
            received=shown(name),
        )
    parsed = parser(value.strip() if isinstance(value, str) else value)
    if parsed is None:
        raise _invalid(name, value, source)
    return parsed


def _invalid(
    name: str, value: object, source: str | None, expected: str | None = None
) -> UsageError:
    noun, usual, example, text_example = _FORMS[name]
    text = shown(value)
    if source is None:
        what, fix = f"The argument {name}={text} is not a valid {noun}", f"pass {name}={example}"
    elif source.startswith("--"):
        plain = shown(value, quoted=False)
        what, fix = f"{source} {plain} is not a valid {noun}", f"pass {source} {text_example}"
    else:
        what = f"The environment variable {source}={text} is not a valid {noun}"
        fix = f"set {source}={text_example}, or unset it"
    number = _int(value.strip() if isinstance(value, str) else value)
    if name == "memory" and number is not None and MAX_MEMORY_MIB < number < _TOO_LARGE:
        what += " (the limit is in MiB, not bytes: 4 GiB is 4096)"
    return UsageError(what, expected=expected or usual, received=shown_typed(value), fix=fix)


_MAX_DIGITS = 30  # longer digit strings are no count tfaccel takes (and int() of 4301 fails)


def _int(value: object) -> int | None:
    if is_bool(value):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdecimal():
        return int(value) if len(value) <= _MAX_DIGITS else _TOO_LARGE
    return None


_TOO_LARGE = 2**128  # stands for a digit string too long to convert; above every bound


def _bool(value: object) -> bool | None:
    if is_bool(value):
        return bool(value)
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    return None


def _parse_devices(value: object) -> DevicesValue | None:
    if isinstance(value, str) and value.lower() in ("all", "none"):
        return "all" if value.lower() == "all" else "none"
    if isinstance(value, str):
        items: list[object] = [part.strip() for part in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    indices = [_int(item) for item in items]
    if not indices or any(i is None or i < 0 for i in indices):
        return None
    return tuple(sorted({i for i in indices if i is not None}))


def _parse_memory(value: object) -> MemoryValue | None:
    if isinstance(value, str):
        if value.lower() == "growth":
            return "growth"
        text = value
        number: object = _int(text)
        if number is None:
            try:
                number = float(text)
            except ValueError:
                return None
        value = number
    if is_bool(value):
        return None
    if isinstance(value, int):
        return value if 0 < value <= MAX_MEMORY_MIB else None
    if isinstance(value, float):
        return value if 0.0 < value <= 1.0 and math.isfinite(value) else None
    return None


def _parse_precision(value: object) -> str | None:
    return value if isinstance(value, str) and value in PRECISIONS else None


def _parse_jit(value: object) -> JitValue | None:
    if isinstance(value, str) and value.lower() == "auto":
        return "auto"
    return _bool(value)


def _parse_threads(value: object) -> ThreadsValue | None:
    if isinstance(value, str) and "," in value:
        value = tuple(part.strip() for part in value.split(","))
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            return None
        intra, inter = _int(value[0]), _int(value[1])
        if value[1] is None and _in_range(intra, 1, MAX_THREADS):
            return (intra, None) if intra is not None else None  # a single count, normalised
        if not (_in_range(intra, 1, MAX_THREADS) and _in_range(inter, 1, MAX_THREADS)):
            return None
        return (intra, inter) if intra is not None and inter is not None else None
    count = _int(value)
    return (count, None) if count is not None and _in_range(count, 1, MAX_THREADS) else None


def _in_range(value: int | None, low: int, high: int) -> bool:
    return value is not None and low <= value <= high


def _parse_logical_devices(value: object) -> int | None:
    count = _int(value)
    return count if count is not None and _in_range(count, 1, MAX_LOGICAL_DEVICES) else None


def _parse_seed(value: object) -> int | None:
    seed = _int(value)
    return seed if seed is not None and 0 <= seed < 2**32 else None


_PARSERS: dict[str, Any] = {
    "devices": _parse_devices,
    "memory": _parse_memory,
    "precision": _parse_precision,
    "jit": _parse_jit,
    "threads": _parse_threads,
    "logical_devices": _parse_logical_devices,
    "deterministic": _bool,
    "seed": _parse_seed,
}


def build_request(arguments: Mapping[str, object], env: Mapping[str, str], model: Any) -> Request:
    """Parse the arguments, fill what they leave unset from the TFACCEL_* variables.

    Raises:
        UsageError: an argument or variable is not valid, or a switch given as an argument is
            not a bool (text such as "yes" is read from variables and options only).
    """
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in SETTINGS:
        var = ENV_VARS[name]
        if arguments.get(name) is not None:
            _check_switch(name, arguments[name])
            values[name], sources[name] = parse_setting(name, arguments[name]), "argument"
        elif env.get(var, "").strip():
            values[name], sources[name] = parse_setting(name, env[var], source=var), var
        else:
            values[name], sources[name] = None, "default"
    growth = env.get("TF_FORCE_GPU_ALLOW_GROWTH", "").strip().lower() == "true"
    return Request(
        values=values,
        sources=sources,
        env_growth=growth,
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        model_name=getattr(model, "name", None) if model is not None else None,
        model_dims=tuple(check_model_dims(model)) if model is not None else (),
    )


# A switch given to setup() as a Python argument is a bool: "yes", "no", "false" are text,
# read from the TFACCEL_* variables and the tfaccel run options only ("no" would be truthy).
_SWITCHES = {
    "deterministic": "True or False (a bool)",
    "jit": "True, False (a bool) or 'auto'",
}


def _check_switch(name: str, value: object) -> None:
    if name not in _SWITCHES or is_bool(value):
        return
    if name == "jit" and isinstance(value, str) and value.strip().lower() == "auto":
        return
    variable = ENV_VARS[name]
    raise _invalid(
        name,
        value,
        None,
        expected=f"{_SWITCHES[name]}; text such as 'yes' or 'false' is read only from "
        f"{variable} and the tfaccel run options",
    )


def check_model(model: object) -> None:
    """``model`` is None or a Keras model (Keras 3 or tf_keras), checked without importing Keras.

    Raises:
        UsageError: anything else (a name, a path, a layer, a function that builds one).
    """
    if model is None or _is_keras_model(model):
        return
    raise UsageError(
        "The argument model of tfaccel.setup() is not a Keras model",
        expected="a Keras model (keras.Model, keras.Sequential or a subclass) or None",
        received=f"model={shown_typed(model)}",
        fix="pass the model object itself, e.g. setup(precision='auto', model=model), "
        "or leave model out",
    )


def _is_keras_model(value: object) -> bool:
    # a Keras model exists only once its package is imported: look there, import nothing
    for package in ("keras", "tf_keras"):
        model_class = getattr(sys.modules.get(package), "Model", None)
        if isinstance(model_class, type) and isinstance(value, model_class):
            return True
    return False
