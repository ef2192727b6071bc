"""Numeric argument types the commands share, checked where argparse parses the command line.

Every numeric option takes a type from here, so NaN, infinity, a negative count or a value out
of range is refused while parsing, with the flag, what it takes, what it got and an example
(argparse prints ``tfaccel CMD: error: argument --flag: ...`` and exits 2).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from tfaccel.core.checks import in_range
from tfaccel.core.errors import UsageError

__all__ = [
    "OwnOptions",
    "add_capture_options",
    "add_script_arguments",
    "capture_timeout",
    "fraction",
    "integer",
    "number",
    "refuse_unused",
    "script_words",
    "seconds",
    "whole",
]

DAY_S = 24 * 3600.0


def _refuse(flag: str, what: str, expected: str, text: str, example: object) -> NoReturn:
    error = UsageError(what, expected=expected, received=repr(text), fix=f"e.g. {flag} {example}")
    raise argparse.ArgumentTypeError(str(error))


def _plain(text: str) -> str:
    """``text`` as Python's int() and float() should read it, or "" (read as no number) when
    it holds what they also take but no one means: digits of other scripts ('٣' is 3 to
    Python) or the underscores of Python's own literals ('4_0' is 40)."""
    return text if text.isascii() and "_" not in text else ""


def seconds(
    flag: str, *, example: float, maximum: float = DAY_S, minimum: float = 0.0
) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds above ``minimum``, at most ``maximum``."""
    expected = f"a finite number of seconds above {minimum:g} and at most {_duration(maximum)}"

    def parse(text: str) -> float:
        try:
            value = float(_plain(text))
        except ValueError:
            _refuse(flag, "not a number of seconds", expected, text, example)
        if not math.isfinite(value):
            _refuse(flag, "not a finite number of seconds", expected, text, example)
        if not in_range(value, minimum=minimum, above_minimum=True, maximum=maximum):
            _refuse(flag, "the number of seconds is out of range", expected, text, example)
        return value

    parse.__name__ = "seconds"
    return parse


def integer(
    flag: str, *, example: int, minimum: int = 1, maximum: int = 2**31 - 1
) -> Callable[[str], int]:
    """An argparse type: an integer from ``minimum`` to ``maximum``."""
    what = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
    expected = f"{what}, at most {maximum:,}"

    def parse(text: str) -> int:
        try:
            value = int(_plain(text.strip()))
        except ValueError:
            _refuse(flag, "not an integer", expected, text, example)
        if not in_range(value, minimum=minimum, maximum=maximum):
            _refuse(flag, "the number is out of range", expected, text, example)
        return value

    parse.__name__ = "integer"
    return parse


def fraction(flag: str, *, example: float) -> Callable[[str], float]:
    """An argparse type: a fraction in [0, 1)."""
    expected = "a number from 0 up to (not including) 1"

    def parse(text: str) -> float:
        try:
            value = float(_plain(text))
        except ValueError:
            _refuse(flag, "not a fraction", expected, text, example)
        if not in_range(value, minimum=0, maximum=1, below_maximum=True):
            _refuse(flag, "the fraction is out of range", expected, text, example)
        return value

    parse.__name__ = "fraction"
    return parse


def _duration(seconds: float) -> str:
    for unit, size in (("week", 7 * DAY_S), ("day", DAY_S), ("hour", 3600.0)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{seconds:g} ({count} {unit}{'s' if count > 1 else ''})"
    return f"{seconds:g}"


def whole(flag: str, *, example: int) -> Callable[[str], int]:
    """An argparse type: an integer as plain text (ASCII digits, no underscores); its range
    is left to the function the command calls, which words its own error."""
    expected = "an integer written in ASCII digits, such as " + str(example)

    def parse(text: str) -> int:
        try:
            return int(_plain(text.strip()))
        except ValueError:
            _refuse(flag, "not an integer", expected, text, example)

    parse.__name__ = "whole"
    return parse


def number(flag: str, *, example: float) -> Callable[[str], float]:
    """An argparse type: a number as plain text (ASCII, no underscores); its range (NaN and the
    infinities included) is left to the function the command calls."""
    expected = f"a number written in ASCII digits, such as {example:g}"

    def parse(text: str) -> float:
        try:
            return float(_plain(text))
        except ValueError:
            _refuse(flag, "not a number", expected, text, example)

    parse.__name__ = "number"
    return parse


def add_capture_options(p: Any, command: str, *, timeout_help: str) -> None:
    """``--fit N`` and ``--timeout SECONDS``: which ``model.fit`` of a script ``command`` (plan,
    tune) takes its workload at, and how long the script may take to get there (checked by
    :func:`capture_timeout`)."""
    p.add_argument(
        "--fit",
        type=integer("--fit", example=2),
        default=None,
        metavar="N",
        help=f"{command} the script's N-th model.fit call, e.g. 2 for fine-tuning after a first "
        "fit (default 1)",
    )
    p.add_argument(
        "--timeout",
        type=number("--timeout", example=600),
        default=None,
        metavar="SECONDS",
        help=timeout_help,
    )


def add_script_arguments(p: Any) -> None:
    """The positional ``SCRIPT [ARGS ...]`` of a command that takes a training script and
    its own arguments (plan, tune)."""
    p.add_argument(
        "script_and_args",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [ARGS ...]",
        help="the training script and its own arguments",
    )


def script_words(args: argparse.Namespace) -> list[str]:
    """The words of :func:`add_script_arguments`: SCRIPT and its ARGS, a leading ``--`` left
    out."""
    words = list(args.script_and_args or [])
    return words[1:] if words and words[0] == "--" else words


def capture_timeout(value: float | None) -> float | None:
    """The ``--timeout`` of :func:`add_capture_options`: None (the default) or a number of
    seconds above 0 and at most a day (``MAX_TIMEOUT_S``, as
    :func:`tfaccel.workload.capture.check_timeout` takes it), else a UsageError."""
    from tfaccel.probe.deep import MAX_TIMEOUT_S

    if value is None:
        return None
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise UsageError(
            "--timeout is not a number of seconds above 0 and at most a day",
            expected="the seconds the script may take to reach model.fit, more than 0 and at "
            f"most {MAX_TIMEOUT_S:g}",
            received=f"--timeout {value:g}",
            fix="e.g. --timeout 600",
        )
    return value


class OwnOptions(argparse.ArgumentParser):
    """A command's (plan, tune) own options, read from the words after a script defining
    model_fn(), which takes no arguments; a mistake there is a UsageError."""

    def __init__(self, command: str, add_options: Callable[[Any], None]) -> None:
        super().__init__(prog=f"tfaccel {command}", add_help=False)
        self.command = command
        add_options(self)

    def error(self, message: str) -> NoReturn:
        raise UsageError(
            f"tfaccel {self.command}: {message}",
            expected=f"tfaccel {self.command} [OPTIONS] SCRIPT",
            received="words after a script defining model_fn(), which takes no arguments",
            fix=f"put tfaccel {self.command}'s options before the script",
        )


def refuse_unused(
    given: Iterable[tuple[str, object]], *, applies: str, expected: str, fix: str
) -> None:
    """Refuse the first option of ``given`` (``(flag, value)``; a value of None or False: not
    given) that the command line gave where it does nothing: it applies ``applies`` only
    (``"to --model"``; a reason after it in brackets, ``"to --model (built by tfaccel)"``).
    An option is never ignored without a word.

    Raises:
        UsageError: what was given, what it applies to, ``expected`` and ``fix``.
    """
    for flag, value in given:
        if value is not None and value is not False:
            shown = flag if value is True else f"{flag} {value}"
            head, _, why = applies.partition(" (")
            raise UsageError(
                f"{flag} applies {head} only" + (f" ({why}" if why else ""),
                expected=expected,
                received=shown,
                fix=fix.format(flag=flag),
            )
