"""The argument checks of the public API: one function per kind of value.

Each check raises a :class:`~tfaccel.core.errors.UsageError` that names the function, the
argument, what it accepts, what it got (cut to a line by :func:`~tfaccel.core.errors.shown`,
with its type) and the fix, before anything is built, written or started. The predicates
:func:`is_bool`, :func:`is_int` and :func:`is_real` are the one answer to "is this a switch,
a count, a number?" (a bool is no number here; NumPy's bools and numbers count) for callers
that word their own errors. The path checks create nothing; whether a file can be written is
decided by the one rule of :mod:`tfaccel.core.files`.
"""

from __future__ import annotations

import math
import numbers
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from tfaccel.core.errors import UsageError, shown
from tfaccel.core.files import (
    nearest_existing,
    path_problem,
    remote_path,
    trailing_slash,
    try_writing_in,
)

__all__ = [
    "MAX_COUNT",
    "check_callable",
    "check_dir_argument",
    "check_environ",
    "check_file_argument",
    "check_flag",
    "check_int",
    "check_mapping",
    "check_number",
    "check_text",
    "in_range",
    "is_bool",
    "is_int",
    "is_real",
    "shown_typed",
]


MAX_COUNT = 2**31 - 1
"""The largest count (a batch, a number of steps, epochs, rounds or workers) a check takes:
TensorFlow holds such counts as 32-bit integers in places, and anything larger is a mistake."""


def is_bool(value: object) -> bool:
    """True or False, Python's or NumPy's (``numpy.bool_``): what tells a switch from 1 or 0."""
    kind = type(value)  # NumPy's bool too (numpy.bool_, named "bool" since NumPy 2)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in _NP_BOOLS)


_NP_BOOLS = ("bool", "bool_")


def is_int(value: object) -> TypeGuard[int]:
    """A whole number, Python's or NumPy's, and not a bool (``True`` is an int to Python).

    Typed as an int: NumPy's integers compare and compute as one (``int()`` makes one).
    """
    return isinstance(value, numbers.Integral) and not is_bool(value)


def is_real(value: object) -> TypeGuard[float]:
    """A real number (an int, a float, NumPy's too), and not a bool; typed as a float."""
    return isinstance(value, numbers.Real) and not is_bool(value)


def in_range(
    number: float,
    *,
    minimum: float | None = None,
    above_minimum: bool = False,
    maximum: float | None = None,
    below_maximum: bool = False,
) -> bool:
    """``number`` is finite and within the bounds (each inclusive unless told otherwise).

    An integer is finite whatever its size (``math.isfinite`` would overflow on a huge one).
    """
    if not isinstance(number, numbers.Integral) and not math.isfinite(number):
        return False
    if minimum is not None and not (number > minimum if above_minimum else number >= minimum):
        return False
    return maximum is None or (number < maximum if below_maximum else number <= maximum)


def shown_typed(value: object) -> str:
    """``value`` as :func:`~tfaccel.core.errors.shown` shows it, with its type: ``'2' (str)``."""
    return f"{shown(value)} ({type(value).__name__})"


def _argument_error(where: str, name: str, value: object, expected: str, fix: str) -> UsageError:
    return UsageError(
        f"{where} got an invalid {name}",
        expected=expected,
        received=f"{name}={shown_typed(value)}",
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
    if is_bool(value):
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
    if is_int(value):
        number = int(value)
        if in_range(number, minimum=minimum, maximum=maximum):
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
    if is_real(value):
        number = float(value)
        if in_range(number, minimum=minimum, above_minimum=above_minimum, maximum=maximum):
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


def check_environ(name: str, value: object, *, where: str) -> Mapping[str, str] | None:
    """An environment to read variables from: None, or a mapping of text to text
    (``os.environ``, a dict of str to str).

    Raises:
        UsageError: anything else, or a name or value that is not text (``{"SEED": 5}``).
    """
    expected = "a mapping of variable names to values, both text (os.environ, a dict), or None"
    mapping = check_mapping(name, value, where=where, expected=expected)
    if mapping is None:
        return None
    for key, item in mapping.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise UsageError(
                f"{where} got an invalid {name}: every name and value must be text",
                expected=expected,
                received=f"{name}[{shown(key)}]={shown_typed(item)}",
                fix=f"pass the value as text, e.g. {name}={{{shown(key)}: {shown(str(item))}}}",
            )
    return mapping


def check_text(name: str, value: object, *, where: str, expected: str, fix: str) -> str:
    """Text that is not empty or blank.

    Raises:
        UsageError: anything else.
    """
    if isinstance(value, str) and value.strip():
        return value
    raise _argument_error(where, name, value, expected, fix)


def _path(name: str, value: object, *, where: str, what: str) -> str:
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if isinstance(path, str) and path.strip():
            found = None if remote_path(path) else path_problem(path)
            if found is None:
                return path
            problem, received = found
            raise UsageError(
                f"{where} cannot use {name}={shown(path)}: it {problem}",
                expected=f"a path ({what}) of at most NAME_MAX bytes a name and PATH_MAX in "
                "all, without NUL bytes",
                received=f"{name}: {received}",
                fix=f"pass {name}='{what}' with a shorter name and no NUL byte",
            )
    raise _argument_error(
        where, name, value, f"a path ({what}) as str or os.PathLike", f"pass {name}='{what}'"
    )


def check_dir_argument(name: str, value: object, *, where: str) -> str:
    """A directory this process can write in, or that it can create (``mkdir -p``).

    Nothing is created: a missing directory is checked through its nearest existing folder,
    by the rule of :func:`tfaccel.core.files.check_writable_dir`. Remote paths (``gs://...``)
    are left to TensorFlow.

    Raises:
        UsageError: the path is a file, a directory without write permission (or on a
            read-only file system), or below a file or a directory that cannot be written.
    """
    path = _path(name, value, where=where, what="a directory")
    if remote_path(path):
        return path
    target = Path(os.path.abspath(path))
    try:
        found = nearest_existing(target)
    except (OSError, ValueError) as exc:
        raise _path_error(where, name, path, f"cannot be used ({exc})", "a directory") from None
    if found is None:
        raise _path_error(where, name, path, "has no existing folder above it", "a directory")
    existing, info = found
    is_dir = stat.S_ISDIR(info.st_mode)
    if existing == target:
        if not is_dir:
            raise _path_error(where, name, path, "is a file, not a directory", "a directory")
        if not _writable(existing):
            raise _path_error(where, name, path, "is not writable", "a writable directory")
        return path
    if not is_dir:
        raise _path_error(
            where, name, path, f"cannot be created: {existing} is a file", "a directory path"
        )
    if not _writable(existing):
        raise _path_error(
            where,
            name,
            path,
            f"cannot be created: {existing} is not writable",
            "a directory that exists or can be created",
        )
    return path


def check_file_argument(name: str, value: object, *, where: str) -> str:
    """A file path that can be written: its directory exists and a file can be created in it
    (the rule of :mod:`tfaccel.core.files`), and the path itself is not a directory. Nothing
    is created. Remote paths are left to TensorFlow.

    Raises:
        UsageError: the path is a directory (or ends with a slash), or its directory is
            missing, a file, or not writable.
    """
    path = _path(name, value, where=where, what="a file")
    if remote_path(path):
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
    file = trailing_slash(path)  # abspath drops the slash: "a-file/" would pass as "a-file"
    if file is not None:
        raise _path_error(
            where,
            name,
            path,
            "ends with a slash, so it names a directory",
            "a file name without a trailing slash (e.g. " + repr(file) + ")",
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
    if not _writable(Path(directory)):
        raise _path_error(
            where,
            name,
            path,
            f"is in a directory that is not writable ({directory})",
            "a file in a writable directory",
        )
    return path


def _writable(directory: Path) -> bool:
    try:
        try_writing_in(directory)
    except (OSError, ValueError):
        return False
    return True


def _path_error(where: str, name: str, path: str, problem: str, expected: str) -> UsageError:
    return UsageError(
        f"{where} cannot write to {name}={shown(path)}: it {problem}",
        expected=expected,
        received=f"{name}={shown(path)}",
        fix="pass a path in a directory this user can write to (ls -ld shows the permissions)",
    )
