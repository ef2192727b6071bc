"""SIGTERM and SIGHUP taken as Ctrl-C: a command stops on its interrupt path.

A job scheduler ends a job with SIGTERM, a closed terminal sends SIGHUP; by default either
ends Python at once, with nothing said and nothing cleaned up. Inside :func:`stop_signals`
they raise :class:`Terminated`, a ``KeyboardInterrupt``, so that whatever handles Ctrl-C
(a tune's best-so-far, a bench run marked incomplete, children stopped, ``--json``'s
document) handles them too; the exit status is then 128 + the signal, as a shell reports it
(:func:`interrupt_code`). A process the work forks (a multiprocessing worker) gets the
default action back, so ``Pool.terminate()`` still ends its workers quietly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import NoReturn

from tfaccel.core.errors import TfaccelError

__all__ = [
    "STOP_SIGNALS",
    "Terminated",
    "hard_exit",
    "interrupt_code",
    "last_words",
    "stop_signals",
]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: stop as on Ctrl-C, then exit with 128 + ``number``."""

    def __init__(self, number: int) -> None:
        super().__init__(signal.Signals(number).name)
        self.number = number


def interrupt_code(exc: BaseException) -> int:
    """130 for Ctrl-C; 128 + the signal for :class:`Terminated`."""
    return 128 + exc.number if isinstance(exc, Terminated) else 130


def _terminate(number: int, frame: object) -> None:
    raise Terminated(number)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Inside the block, :data:`STOP_SIGNALS` raise :class:`Terminated` in the main thread
    where their action is the default (one ignored, or a handler someone installed, is
    kept); the default again after it."""
    installed = []
    if threading.current_thread() is threading.main_thread():
        for number in STOP_SIGNALS:
            with contextlib.suppress(OSError, ValueError):
                if signal.getsignal(number) is signal.SIG_DFL:
                    signal.signal(number, _terminate)
                    installed.append(number)
    try:
        yield
    finally:
        for number in installed:
            with contextlib.suppress(OSError, ValueError):
                if signal.getsignal(number) is _terminate:
                    signal.signal(number, signal.SIG_DFL)


def _default_in_child() -> None:
    """In a process forked inside the block, the signals' default action again."""
    for number in STOP_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(number) is _terminate:
                signal.signal(number, signal.SIG_DFL)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_default_in_child)


_last_words: list[Callable[[TfaccelError, int], object]] = []


@contextlib.contextmanager
def last_words(say: Callable[[TfaccelError, int], object]) -> Iterator[None]:
    """While the block runs, :func:`hard_exit` calls ``say(error, exit_code)`` before it ends
    the process: what must still be said where nothing unwinds (``--json``'s document, a
    child's result file). The innermost first; one that returns True has passed the error
    on to a process that will print it, and the line on stderr is left to that one."""
    _last_words.append(say)
    try:
        yield
    finally:
        _last_words.remove(say)


def hard_exit(error: TfaccelError, code: int) -> NoReturn:
    """End the process at once (``os._exit``: from any thread, past a script that catches
    every exception), after :func:`last_words` and ``tfaccel: error: ...`` on stderr."""
    passed_on = False
    for say in reversed(list(_last_words)):
        with contextlib.suppress(Exception):
            passed_on = say(error, code) is True or passed_on
    if not passed_on:
        with contextlib.suppress(OSError):
            os.write(2, f"tfaccel: error: {error}\n".encode())
    os._exit(code)
