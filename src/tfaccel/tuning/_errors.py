"""The errors of ``tfaccel.tune`` (no TensorFlow import here)."""

from __future__ import annotations

import os
import traceback

from tfaccel.core.errors import TfaccelError, UsageError
from tfaccel.core.markup import without_ansi

__all__ = [
    "BudgetError",
    "ModelFnError",
    "ModelReusedError",
    "NotAppliedError",
    "SpaceError",
    "TrialError",
    "TuneError",
    "first_line",
    "user_traceback",
]


class TuneError(TfaccelError):
    """``tfaccel.tune`` cannot search: bad input, or nothing could be measured."""


class SpaceError(TuneError, UsageError):
    """The search space names an unknown setting or a value the setting does not take."""


class BudgetError(TuneError):
    """The time budget cannot pay for one trial; the message says how much is needed."""


class ModelFnError(TuneError):
    """The user's ``model_fn`` raised, or did not return a compiled Keras model."""


class ModelReusedError(ModelFnError, UsageError):
    """``model_fn`` returned the same model object on two calls: every trial would train one
    model, already trained, in the precision it was first built with."""


class NotAppliedError(TuneError):
    """A trial's precision or XLA setting did not take effect on the model ``model_fn`` built
    (its layers set their own dtype, or Keras turned XLA off): the trial measures nothing of
    that setting, so it is not timed.

    Attributes:
        setting: ``precision`` or ``jit``.
    """

    def __init__(self, what: str, *, setting: str, **kwargs: str | None) -> None:
        super().__init__(what, **kwargs)
        self.setting = setting


class TrialError(TuneError):
    """The first trial (the simplest configuration) failed for a reason other than memory."""


def user_traceback(exc: BaseException, *, skip: int = 1, limit_chars: int = 4000) -> str:
    """The traceback of ``exc`` as the user's code sees it: without tfaccel's own frames
    (inside the package, wherever they are in the stack, its chained exceptions' too) and
    Keras's frame that re-raises every error, and without terminal colour codes.

    Args:
        exc: the exception the user's code raised.
        skip: outer frames to drop first (tfaccel's call into the user's function).
        limit_chars: keep at most this many characters (the end, where the cause is).

    Returns:
        The text of ``traceback.format_exception``, starting at the user's frames.
    """
    tb = exc.__traceback__
    for _ in range(skip):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    shown = traceback.TracebackException(type(exc), exc, tb)
    seen: set[int] = set()
    todo: list[traceback.TracebackException | None] = [shown]
    while todo:
        part = todo.pop()
        if part is None or id(part) in seen:
            continue
        seen.add(id(part))
        part.stack = traceback.StackSummary.from_list(
            [frame for frame in part.stack if not _not_the_users(frame.filename)]
        )
        todo += [part.__cause__, part.__context__]
    text = without_ansi("".join(shown.format())).rstrip()
    return text if len(text) <= limit_chars else "...\n" + text[-limit_chars:]


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""tfaccel's own folder: frames in its files are not the user's."""
_RE_RAISE = os.path.join("keras", "src", "utils", "traceback_utils.py")
"""Keras's frame that re-raises every error of a layer or fit (``raise e.with_traceback``)."""


def _not_the_users(filename: str) -> bool:
    """Whether a frame in ``filename`` is tfaccel's own or Keras's re-raise."""
    return os.path.abspath(filename).startswith(_PACKAGE) or filename.endswith(_RE_RAISE)


KERAS_HEADER = "Exception encountered when calling"
"""How Keras opens a layer's error; the cause is on a later line."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The line of ``exc``'s message that says what went wrong, at most ``limit`` characters:
    its first, or after Keras's header (:data:`KERAS_HEADER`) the next one that says more;
    without terminal colour codes. ``(no message)`` for an empty one."""
    lines = [line.strip() for line in without_ansi(str(exc)).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith(KERAS_HEADER):
        lines = lines[1:]
    return lines[0][:limit] if lines else "(no message)"
