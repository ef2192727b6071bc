"""The profiling session ``tfaccel profile SCRIPT`` opens around a user's script.

While a session is open, every :class:`~tfaccel.profile.StepTimer` and
``PerformanceCallback`` created registers its recorder here and takes the session's settings
where the user gave none (the trace directory, the step limit), so the command can report on
what the script measured without the script knowing about it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tfaccel.profile.step_recorder import Recorder

__all__ = ["Session", "current_session", "open_session", "recorder"]


@dataclass
class Session:
    """Settings for the timers of one script run, and the recorders they created.

    Attributes:
        warmup_steps: warm-up steps for timers created without an explicit value.
        max_steps: stop ``fit`` after warm-up plus this many steps (None: never).
        trace_dir: capture a profiler trace of ``trace_steps`` steps after the warm-up.
        trace_steps: steps in the trace.
        live: print the live line.
        recorders: the recorders created during the session, in order.
    """

    warmup_steps: int = 5
    max_steps: int | None = None
    trace_dir: str | None = None
    trace_steps: int = 20
    live: bool = True
    recorders: list[Any] = field(default_factory=list)
    fit_calls: int = 0
    callbacks: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    """The PerformanceCallback added to the fit calls of each model, by the model's id (with
    a weak reference to the model: a model gone is not kept alive, and its id reused by
    another is told apart): the fits of one model are one run, each model its own."""

    def register(self, recorder: Any) -> None:
        self.recorders.append(recorder)
        if self.trace_dir and any(r.trace_dir for r in self.recorders[:-1]):
            recorder.trace_dir = None  # one trace per session: the first timer's


_CURRENT: Session | None = None


def current_session() -> Session | None:
    """The open session, if any."""
    return _CURRENT


@contextlib.contextmanager
def open_session(session: Session) -> Iterator[Session]:
    """Make ``session`` current for the duration of the block."""
    global _CURRENT
    previous, _CURRENT = _CURRENT, session
    try:
        yield session
    finally:
        _CURRENT = previous


def recorder(
    source: str,
    *,
    warmup_steps: int | None,
    live: bool | None,
    trace_dir: str | None,
    trace_steps: int | None,
    **options: Any,
) -> Any:
    """A :class:`~tfaccel.profile.step_recorder.Recorder` for a new timer or callback: the
    arguments the user left as None take the open session's settings (or the defaults), and
    the recorder is registered with the session.

    Args:
        source: "keras fit" or "custom loop".
        warmup_steps, live, trace_dir, trace_steps: as given by the user, None for unset.
        **options: passed to the Recorder as they are.
    """
    active = current_session()
    made = Recorder(
        source=source,
        warmup_steps=(
            warmup_steps if warmup_steps is not None else (active.warmup_steps if active else 5)
        ),
        live=live if live is not None else (active.live if active else True),
        trace_dir=trace_dir or (active.trace_dir if active else None),
        trace_steps=trace_steps or (active.trace_steps if active else 20),
        **options,
    )
    if active is not None:
        active.register(made)
    return made
