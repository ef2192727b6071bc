"""The settings ``setup()`` takes: their names, variables, accepted values, and the Request.

Every setting is given as an argument of ``setup()``, a ``TFACCEL_*`` variable or a
``tfaccel run`` option; :func:`parse_setting` checks and normalises each form, and
:func:`build_request` fills what the arguments leave unset from the variables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from tfaccel.errors import UsageError
from tfaccel.runtime.model import check_model_dims

__all__ = [
    "ENV_VARS",
    "FIXED_AT_START",
    "PRECISIONS",
    "SETTINGS",
    "Request",
    "build_request",
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

PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")

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
        "'growth', a limit in MiB (an integer > 0, e.g. 4096) or a fraction of the GPU's "
        "memory in (0, 1] (e.g. 0.5)",
        "'growth'",
        "growth",
    ),
    "precision": ("precision", "one of " + ", ".join(PRECISIONS), "'auto'", "auto"),
    "jit": ("XLA setting", "'auto', true or false", "'auto'", "auto"),
    "threads": (
        "thread count",
        "an integer >= 1 (intra-op threads) or two of them, intra and inter ('4,2')",
        "(4, 2)",
        "4,2",
    ),
    "logical_devices": ("logical device count", "an integer >= 1", "2", "2"),
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
            f"{name!r} is not a tfaccel.setup() setting",
            expected="one of " + ", ".join(SETTINGS),
            received=repr(name),
        )
    parsed = parser(value.strip() if isinstance(value, str) else value)
    if parsed is None:
        raise _invalid(name, value, source)
    return parsed


def _invalid(name: str, value: object, source: str | None) -> UsageError:
    noun, expected, example, text_example = _FORMS[name]
    if source is None:
        what, fix = f"The argument {name}={value!r} is not a valid {noun}", f"pass {name}={example}"
    elif source.startswith("--"):
        what, fix = f"{source} {value} is not a valid {noun}", f"pass {source} {text_example}"
    else:
        what = f"The environment variable {source}={value!r} is not a valid {noun}"
        fix = f"set {source}={text_example}, or unset it"
    return UsageError(what, expected=expected, received=repr(value), fix=fix)


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
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
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
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
        if value[1] is None and intra is not None and intra >= 1:
            return (intra, None)  # the normalised form of a single count
        if intra is None or inter is None or intra < 1 or inter < 1:
            return None
        return (intra, inter)
    count = _int(value)
    return (count, None) if count is not None and count >= 1 else None


def _parse_logical_devices(value: object) -> int | None:
    count = _int(value)
    return count if count is not None and count >= 1 else None


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
    """Parse the arguments, fill what they leave unset from the TFACCEL_* variables."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in SETTINGS:
        var = ENV_VARS[name]
        if arguments.get(name) is not None:
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
