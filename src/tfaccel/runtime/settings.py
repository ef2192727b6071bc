"""The settings ``setup()`` takes: their names, variables, accepted values, and the Request.

Every setting is given as an argument of ``setup()``, a ``TFACCEL_*`` variable or a
``tfaccel run`` option; :func:`parse_setting` checks and normalises each form, and
:func:`build_request` fills what the arguments leave unset from the variables.

The ``check_*`` functions at the end are the argument checks of the public API above this
layer (``tfaccel.device``, ``tfaccel.data.pipeline``, ``tfaccel.distribute.train``, the
profilers): one per kind of value, each raising a :class:`~tfaccel.core.errors.UsageError` that
names the function, the argument, what it accepts, what it got (cut to a line by
:func:`tfaccel.core.errors.shown`) and the fix, before anything is built, written or started.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

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
    "check_callable",
    "check_file_target",
    "check_flag",
    "check_int",
    "check_mapping",
    "check_model",
    "check_number",
    "check_text",
    "check_writable_dir",
    "parse_setting",
    "shown",
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
    return UsageError(what, expected=expected or usual, received=_received(value), fix=fix)


def _received(value: object) -> str:
    return f"{shown(value)} ({type(value).__name__})"


_MAX_DIGITS = 30  # longer digit strings are no count tfaccel takes (and int() of 4301 fails)


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdecimal():
        return int(value) if len(value) <= _MAX_DIGITS else _TOO_LARGE
    return None


_TOO_LARGE = 2**128  # stands for a digit string too long to convert; above every bound


def _bool(value: object) -> bool | None:
    if _is_bool(value):
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
    if isinstance(value, bool):
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
    if name not in _SWITCHES or _is_bool(value):
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
        received=f"model={_received(model)}",
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


# --- argument checks of the public API ----------------------------------------------------------
# A received value is echoed through tfaccel.core.errors.shown (re-exported here as ``shown``).


def _is_bool(value: object) -> bool:
    kind = type(value)  # NumPy's bool too (numpy.bool_, named "bool" since NumPy 2)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in _NP_BOOLS)


_NP_BOOLS = ("bool", "bool_")


def _argument_error(where: str, name: str, value: object, expected: str, fix: str) -> UsageError:
    return UsageError(
        f"{where} got an invalid {name}",
        expected=expected,
        received=f"{name}={_received(value)}",
        fix=fix,
    )


def check_flag(name: str, value: object, *, where: str, allow_none: bool = False) -> bool | None:
    """A switch: True or False (NumPy's bools too), or None where ``allow_none``.

    "yes", 1 or "false" are refused: text is truthy, so "false" would switch it on.

    Raises:
        UsageError: anything else.
    """
    if value is None and allow_none:
        return None
    if _is_bool(value):
        return bool(value)
    expected = "True or False" + (", or None" if allow_none else "")
    raise _argument_error(where, name, value, expected, f"pass {name}=True or {name}=False")


def check_int(
    name: str,
    value: object,
    *,
    where: str,
    minimum: int = 1,
    maximum: int | None = None,
    allow_none: bool = False,
    fix: str | None = None,
) -> int | None:
    """A whole number in ``[minimum, maximum]`` (NumPy's integers too), or None where allowed.

    Raises:
        UsageError: a bool, a float (even 2.0), text, or a number out of range.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, numbers.Integral) and not _is_bool(value):
        number = int(value)
        if number >= minimum and (maximum is None or number <= maximum):
            return number
    bound = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
    expected = f"an integer {bound}" + (", or None" if allow_none else "")
    raise _argument_error(where, name, value, expected, fix or f"pass {name}={max(minimum, 1)}")


def check_number(
    name: str,
    value: object,
    *,
    where: str,
    minimum: float = 0.0,
    above_minimum: bool = True,
    maximum: float | None = None,
    fix: str | None = None,
) -> float:
    """A finite real number above ``minimum`` (or at least it), at most ``maximum``.

    Raises:
        UsageError: a bool, text, NaN, an infinity, or a number out of range.
    """
    if isinstance(value, numbers.Real) and not _is_bool(value):
        number = float(value)
        low_ok = number > minimum if above_minimum else number >= minimum
        if math.isfinite(number) and low_ok and (maximum is None or number <= maximum):
            return number
    bound = ("> " if above_minimum else ">= ") + f"{minimum:g}"
    bound += f" and <= {maximum:g}" if maximum is not None else ""
    expected = f"a finite number {bound}"
    raise _argument_error(where, name, value, expected, fix or f"pass a number {bound}")


def check_callable(
    name: str, value: object, *, where: str, expected: str, allow_none: bool = False
) -> Callable[..., Any] | None:
    """A function (anything callable), or None where allowed.

    Raises:
        UsageError: anything that cannot be called.
    """
    if value is None and allow_none:
        return None
    if callable(value):
        return value
    fix = f"pass a function for {name}" + (", or leave it out" if allow_none else "")
    raise _argument_error(where, name, value, expected, fix)


def check_mapping(
    name: str, value: object, *, where: str, expected: str, allow_none: bool = True
) -> Mapping[Any, Any] | None:
    """A mapping (a dict, ``os.environ``), or None where allowed.

    Raises:
        UsageError: anything else.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, Mapping):
        return value
    fix = f"pass a dict for {name}" + (", or leave it out" if allow_none else "")
    raise _argument_error(where, name, value, expected, fix)


def check_text(name: str, value: object, *, where: str, expected: str, fix: str) -> str:
    """Text that is not empty or blank.

    Raises:
        UsageError: anything else.
    """
    if isinstance(value, str) and value.strip():
        return value
    raise _argument_error(where, name, value, expected, fix)


def _remote(path: str) -> bool:
    """gs://, s3://, hdfs://...: TensorFlow's file systems, which only writing can check."""
    return "://" in path


def _path(name: str, value: object, *, where: str, what: str) -> str:
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if isinstance(path, str) and path.strip():
            return path
    raise _argument_error(
        where, name, value, f"a path ({what}) as str or os.PathLike", f"pass {name}='{what}'"
    )


def check_writable_dir(name: str, value: object, *, where: str) -> str:
    """A directory this process can write in, or that it can create (``mkdir -p``).

    Nothing is created: a missing directory is checked through its nearest existing parent.
    Remote paths (``gs://...``) are left to TensorFlow.

    Raises:
        UsageError: the path is a file, a directory without write permission (or on a
            read-only file system), or below a file or a directory that cannot be written.
    """
    path = _path(name, value, where=where, what="a directory")
    if _remote(path):
        return path
    absolute = os.path.abspath(path)
    if os.path.exists(absolute) and not os.path.isdir(absolute):
        raise _path_error(where, name, path, "is a file, not a directory", "a directory")
    if os.path.isdir(absolute):
        if not _writable(absolute):
            raise _path_error(where, name, path, "is not writable", "a writable directory")
        return path
    parent = _existing_parent(absolute)
    if not os.path.isdir(parent):
        raise _path_error(
            where, name, path, f"cannot be created: {parent} is a file", "a directory path"
        )
    if not _writable(parent):
        raise _path_error(
            where,
            name,
            path,
            f"cannot be created: {parent} is not writable",
            "a directory that exists or can be created",
        )
    return path


def check_file_target(name: str, value: object, *, where: str) -> str:
    """A file path that can be written: its directory exists and is writable, and the path
    itself is not a directory. Nothing is created. Remote paths are left to TensorFlow.

    Raises:
        UsageError: the path is a directory, or its directory is missing, a file, or not
            writable.
    """
    path = _path(name, value, where=where, what="a file")
    if _remote(path):
        return path
    absolute = os.path.abspath(path)
    if os.path.isdir(absolute):
        raise _path_error(
            where,
            name,
            path,
            "is a directory",
            "a file name (inside that directory, e.g. " + repr(os.path.join(path, "cache")) + ")",
        )
    directory = os.path.dirname(absolute)
    if not os.path.exists(directory):
        raise _path_error(
            where,
            name,
            path,
            f"is in a directory that does not exist ({directory})",
            "a file in an existing directory (create it first: mkdir -p)",
        )
    if not os.path.isdir(directory):
        raise _path_error(
            where, name, path, f"is below a file ({directory})", "a file in a directory"
        )
    if not _writable(directory):
        raise _path_error(
            where,
            name,
            path,
            f"is in a directory that is not writable ({directory})",
            "a file in a writable directory",
        )
    return path


def _writable(directory: str) -> bool:
    return os.access(directory, os.W_OK | os.X_OK)


def _existing_parent(path: str) -> str:
    parent = os.path.dirname(path)
    while parent != os.path.dirname(parent) and not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    return parent


def _path_error(where: str, name: str, path: str, problem: str, expected: str) -> UsageError:
    return UsageError(
        f"{where} cannot write to {name}={shown(path)}: it {problem}",
        expected=expected,
        received=f"{name}={shown(path)}",
        fix="pass a path in a directory this user can write to (ls -ld shows the permissions)",
    )
