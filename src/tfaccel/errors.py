"""Errors raised to users.

Every message says what is wrong, what was expected, what was received and the fix,
so the CLI can print it as it is, without a traceback.
"""

from __future__ import annotations

__all__ = ["LogInputError", "RuntimeSetupError", "SnapshotError", "TfaccelError", "UsageError"]


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
