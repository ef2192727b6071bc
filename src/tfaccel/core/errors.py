"""Errors raised to users.

Every message says what is wrong, what was expected, what was received and the fix,
so the CLI can print it as it is, without a traceback.

A message names an argument the way its caller spells it: :func:`argument` gives the Python
name (``budget_s=4``) by default, and the command-line flag (``--budget 4``) inside
:func:`argument_names`, which the command line wraps around each command with the command's
table of flags. A value a user gave is echoed through :func:`shown`, cut to about a line.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import reprlib
import shlex
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, TypeGuard

__all__ = [
    "LogInputError",
    "RuntimeSetupError",
    "SnapshotError",
    "TfaccelError",
    "UsageError",
    "argument",
    "argument_names",
    "shown",
]

_NAMES: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "tfaccel_argument_names", default=MappingProxyType({})
)
_NO_VALUE: Any = object()


@contextlib.contextmanager
def argument_names(names: Mapping[str, str]) -> Iterator[None]:
    """Within the block, :func:`argument` spells the arguments in ``names`` as mapped.

    Args:
        names: Python argument name -> how the caller spells it, e.g. ``{"budget_s":
            "--budget"}`` for ``tfaccel tune``. Nested blocks add to the outer table.

    Example:
        >>> with argument_names({"budget_s": "--budget"}):
        ...     argument("budget_s", 4)
        '--budget 4'
        >>> argument("budget_s", 4)
        'budget_s=4'
    """
    token = _NAMES.set({**_NAMES.get(), **names})
    try:
        yield
    finally:
        _NAMES.reset(token)


def argument(name: str, value: Any = _NO_VALUE) -> str:
    """The argument ``name`` (with ``value``, when given) as the caller spells it.

    Returns:
        ``name`` / ``name=value`` from Python (the value as :func:`shown` shows it); the flag /
        ``flag value`` (quoted for a shell) inside :func:`argument_names` that maps ``name``.
        A value longer than :data:`ARGUMENT_CHARS` is cut, with its size; an integer of more
        than about 48 digits is described.

    Example:
        >>> argument("steps", 10**5000)
        'steps=an integer of about 5,001 digits'
    """
    flag = _NAMES.get().get(name)
    if value is _NO_VALUE:
        return flag or name
    if flag is None:
        return f"{name}={shown(value, limit=ARGUMENT_CHARS)}"
    if flag.startswith("-"):
        return f"{flag} {_typed(value)}"
    return _typed(value)  # a positional argument: the value alone


# --- values in messages ----------------------------------------------------------------------

SHOWN_CHARS = 60
"""The longest a received value is echoed in a message; longer values are cut, with their size."""
ARGUMENT_CHARS = 4096
"""The longest a value :func:`argument` writes out (a fix says what to type): PATH_MAX on Linux,
so a path is never cut, while a value of megabytes is."""
_LONG_INT_BITS = 160  # about 48 digits: longer integers are described, not written out


@functools.lru_cache(maxsize=4)
def _repr(limit: int) -> reprlib.Repr:
    cut = reprlib.Repr()
    cut.maxstring = cut.maxother = limit
    cut.maxlist = cut.maxtuple = cut.maxdict = cut.maxset = 6
    cut.maxlevel = 3
    return cut


def shown(value: object, *, quoted: bool = True, limit: int = SHOWN_CHARS) -> str:
    """``value`` as a message shows it: its repr, cut to about a line, with the full size.

    Args:
        value: anything a user passed.
        quoted: False shows text as it was typed (a command-line value), without quotes.
        limit: about the most characters shown (text is cut 10 characters shorter).

    Example:
        >>> shown("9" * 1000)
        "'99999999999999999999999999999999999999999999999999'… (1,000 characters)"
        >>> shown(10**5000)
        'an integer of about 5,001 digits'
    """
    if isinstance(value, str):
        cut = value[: limit - 10]
        text = repr(cut) if quoted else cut
        return text if len(value) == len(cut) else f"{text}… ({len(value):,} characters)"
    if _long_int(value):
        return _int_size(value)
    cutter = _repr(limit)
    try:
        text = cutter.repr(value)
    except Exception:  # a repr that fails is no reason to hide the real error
        text = f"<{type(value).__name__} object>"
    if len(text) > limit * 2:
        text = text[: limit * 2] + "…"
    if isinstance(value, (list, tuple, set, frozenset, dict)) and len(value) > cutter.maxlist:
        text += f" ({len(value):,} items)"
    elif isinstance(value, (bytes, bytearray)) and len(value) > limit:
        text += f" ({len(value):,} bytes)"
    return text


def _typed(value: object) -> str:
    """``value`` as it is typed on a command line: quoted for a shell; cut only beyond
    :data:`ARGUMENT_CHARS`, with its size."""
    if _long_int(value):
        return _int_size(value)
    try:
        text = str(value)
    except Exception:
        return shown(value)
    cut = text[: ARGUMENT_CHARS - 10]
    word = shlex.quote(cut)
    return word if cut == text else f"{word}… ({len(text):,} characters)"


def _long_int(value: object) -> TypeGuard[int]:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value.bit_length() > _LONG_INT_BITS
    )


def _int_size(value: int) -> str:
    digits = int(value.bit_length() * math.log10(2)) + 1  # repr of 4301+ digits raises
    return f"an integer of about {digits:,} digits"


class TfaccelError(Exception):
    """Base class of every error tfaccel raises for a user to act on.

    Args:
        what: what is wrong.
        expected: what was expected.
        received: what was received.
        fix: the change that makes it work.
    """

    exit_code = 2

    def __init__(
        self,
        what: str,
        *,
        expected: str | None = None,
        received: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.what = what
        self.expected = expected
        self.received = received
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        parts = [self.what.rstrip(".") + "."]
        if self.expected is not None:
            parts.append(f"Expected: {self.expected}.")
        if self.received is not None:
            parts.append(f"Received: {self.received}.")
        if self.fix is not None:
            parts.append(f"Fix: {self.fix}")
        return " ".join(parts)


class UsageError(TfaccelError):
    """A command-line argument or API argument is not valid."""


class SnapshotError(TfaccelError):
    """A saved snapshot file cannot be read or does not have the expected form."""


class LogInputError(TfaccelError):
    """A log given to ``doctor --log`` cannot be diagnosed (missing, binary, empty...)."""


class RuntimeSetupError(TfaccelError):
    """``tfaccel.setup`` was asked for something it cannot apply."""
