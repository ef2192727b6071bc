"""The errors of ``tfaccel.tune`` (no TensorFlow import here)."""

from __future__ import annotations

import traceback

from tfaccel.core.errors import TfaccelError, UsageError

__all__ = [
    "BudgetError",
    "ModelFnError",
    "ModelReusedError",
    "NotAppliedError",
    "SpaceError",
    "TrialError",
    "TuneError",
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
    """The traceback of ``exc`` without tfaccel's own outer frames.

    Args:
        exc: the exception the user's code raised.
        skip: outer frames to drop (tfaccel's call into the user's function).
        limit_chars: keep at most this many characters (the end, where the cause is).

    Returns:
        The text of ``traceback.format_exception``, starting at the user's frames.
    """
    tb = exc.__traceback__
    for _ in range(skip):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()
    return text if len(text) <= limit_chars else "...\n" + text[-limit_chars:]
