"""Errors raised to users.

Every message says what is wrong, what was expected, what was received and the fix,
so the CLI can print it as it is, without a traceback.

A message names an argument the way its caller spells it: :func:`argument` gives the Python
name (``budget_s=4``) by default, and the command-line flag (``--budget 4``) inside
:func:`argument_names`, which each command wraps around its work with its table of flags.
"""

from __future__ import annotations

import contextlib
import contextvars
import shlex
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

__all__ = [
    "LogInputError",
    "RuntimeSetupError",
    "SnapshotError",
    "TfaccelError",
    "UsageError",
    "argument",
    "argument_names",
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
        ``name`` / ``name=repr(value)`` from Python; the flag / ``flag value`` (quoted for a
        shell) inside :func:`argument_names` that maps ``name``.
    """
    flag = _NAMES.get().get(name)
    if value is _NO_VALUE:
        return flag or name
    if flag is None:
        return f"{name}={value!r}"
    if flag.startswith("-"):
        return f"{flag} {shlex.quote(str(value))}"
    return shlex.quote(str(value))  # a positional argument: the value alone


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
