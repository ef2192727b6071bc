"""Capture the workload of an unchanged training script, at its ``fit`` call.

:func:`capture` runs the script as ``python SCRIPT ARGS...`` would (as ``__main__``, with its
``sys.argv``, its folder first on ``sys.path``) in this process, with ``keras.Model.fit``
patched: at the N-th ``fit`` call the model, its compile arguments, the data and the fit
arguments are recorded and the script is stopped there, by an exception of tfaccel's own (a
``BaseException``, so the script's ``except Exception`` does not catch it). Nothing trains, and
nothing the script would do after that point happens (no checkpoint, no CSV). Earlier ``fit``
calls (``fit=2``: the fine-tuning after a first fit) run one step each, without the script's
callbacks, so the model is built as the script leaves it.

A script whose own loop hands ``model.train_on_batch`` one batch at a time is taken at its
first ``train_on_batch`` call instead: that batch is the data (the epoch's length is the
loop's, not known here).

A script whose training is its own loop (``tf.GradientTape``) calls no ``fit``: one line,
``tfaccel.workload.mark(model, dataset, optimizer=opt, loss=loss_fn)`` before the loop, marks
the point (outside a capture, ``mark`` does nothing).

Standard input reads stop the script with a message (nothing waits for a keyboard), and a time
limit stops a script that does not reach ``fit`` in time (``SIGALRM``: main thread only).

This runs the user's code in this process and leaves what the script set (Keras' global
policy, TensorFlow's configuration, the model) behind: call it from a process that exists for
the job (the command line, a child process), as ``tfaccel run`` and ``tfaccel profile`` do.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import runpy
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from tfaccel.core.checks import check_number
from tfaccel.core.errors import TfaccelError, UsageError, argument
from tfaccel.core.stopping import hard_exit
from tfaccel.probe.deep import MAX_TIMEOUT_S
from tfaccel.scripts import check_script, check_source, end_forked_child, script_traceback
from tfaccel.workload.data import leading_dim
from tfaccel.workload.keras_fit import optimizer_base, replaced_fit, replaced_method
from tfaccel.workload.record import CompileArgs, Origin, Workload

__all__ = ["CaptureError", "capture", "mark", "no_fit_explained"]

DEFAULT_TIMEOUT_S = 300.0
MARK_FIX = (
    "add one line before the loop: `tfaccel.workload.mark(model, dataset, "
    "optimizer=optimizer, loss=loss_fn)` (it does nothing outside tfaccel)"
)
"""What a script that trains with its own loop adds to be captured."""


class CaptureError(TfaccelError):
    """The script did not reach the ``fit`` call to capture.

    Attributes:
        reason: ``no-fit`` (ended without it), ``raised``, ``exited``, ``stdin``, ``timeout``,
            ``own-loop`` (an optimizer step of the script's own training loop came first).
        where: the script's line it concerns (``train.py:12``), where known.
        fit_calls: the ``fit`` calls the script made before it stopped.
    """

    def __init__(
        self,
        what: str,
        *,
        reason: str,
        where: str | None = None,
        fit_calls: int = 0,
        **kw: Any,
    ) -> None:
        self.reason = reason
        self.where = where
        self.fit_calls = fit_calls
        super().__init__(what, **kw)


class _Stop(BaseException):
    """Raised inside the script to stop it; caught by :func:`capture` only."""


class _Captured(_Stop):
    def __init__(self, workload: Workload) -> None:
        super().__init__("workload captured")
        self.workload = workload


class _StdinRead(_Stop):
    pass


class _TimedOut(_Stop):
    pass


class _OwnLoop(_Stop):
    """An optimizer step outside ``fit`` and ``train_on_batch``: the script's own loop."""

    def __init__(self, optimizer: str, where: str | None) -> None:
        super().__init__("an optimizer step outside model.fit")
        self.optimizer = optimizer
        self.where = where


class _Capture:
    """The state of the capture in progress."""

    def __init__(self, script: str, args: Sequence[str], fit: int) -> None:
        self.script = script
        self.args = tuple(args)
        self.fit = fit
        self.fit_calls = 0
        self.in_keras = 0  # Keras's own fit or train_on_batch running (an earlier fit)

    def where(self, frame: FrameType | None) -> str | None:
        """``name:line`` of the first frame of the script at or above ``frame``."""
        target = os.path.abspath(self.script)
        while frame is not None:
            if os.path.abspath(frame.f_code.co_filename) == target:
                return f"{Path(self.script).name}:{_call_line(frame)}"
            frame = frame.f_back
        return None


_active: _Capture | None = None


def check_timeout(timeout: object) -> float:
    """The seconds a script may take to reach its ``fit``: a number above 0 and at most a day
    (``MAX_TIMEOUT_S``: the timer cannot take much more), else a UsageError naming the
    argument as its caller spells it (``--timeout`` on the command line)."""
    return check_number(
        "timeout",
        timeout,
        where="the time the script may take to reach model.fit",
        maximum=MAX_TIMEOUT_S,
        fix=f"pass {argument('timeout', 600)}, at most {MAX_TIMEOUT_S:g} (a day)",
    )


def mark(
    model: Any,
    x: Any,
    y: Any = None,
    *,
    batch_size: int | None = None,
    epochs: int | None = None,
    optimizer: Any = None,
    loss: Any = None,
) -> None:
    """Mark the training of a script that calls no ``fit`` (its own ``tf.GradientTape`` loop):
    the model, the data and (when the model is not compiled) the loop's optimizer and loss.

    Outside a capture it does nothing, so the line stays in the script. Under
    ``tfaccel plan train.py`` the workload is taken here and the script stops.

    Example:
        >>> tfaccel.workload.mark(model, ds, optimizer=opt, loss=loss_fn)  # doctest: +SKIP
    """
    state = _active
    if state is None:
        return
    compiled = CompileArgs.of(model)
    if optimizer is not None or loss is not None or compiled.optimizer is None:
        compiled = CompileArgs(
            optimizer=optimizer if optimizer is not None else compiled.optimizer,
            loss=loss if loss is not None else compiled.loss,
            metrics=compiled.metrics,
        )
    kwargs: dict[str, Any] = {"batch_size": batch_size, "epochs": epochs or 1}
    origin = Origin(state.script, state.args, 0, state.where(sys._getframe(1)), method="mark")
    raise _Captured(Workload(model, compiled, x, y, kwargs, origin))


def capture(
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    *,
    fit: int = 1,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    command: str = "plan",
) -> Workload:
    """Run ``script`` with ``args`` as ``__main__`` up to its ``fit``-th ``fit`` call (or its
    :func:`mark`), and return that workload; the script stops there.

    Args:
        script: the training script, unchanged.
        args: its own arguments (``sys.argv[1:]`` as it sees them).
        fit: which ``fit`` call (1: the first).
        timeout: seconds the script may take to reach it (None: no limit).
        command: the tfaccel command, for messages.

    Raises:
        UsageError: the script is not a readable Python file, or ``fit`` < 1.
        CaptureError: the script ended, exited, raised, read standard input or ran out of
            time before the ``fit`` call, each said with its line.
    """
    if isinstance(fit, bool) or not isinstance(fit, int) or fit < 1:
        raise UsageError(
            "Which fit call to capture is not a whole number of at least 1",
            expected="1 for the script's first model.fit, 2 for the second...",
            received=argument("fit", fit),
            fix="pass fit=1 (or --fit 2 for a fine-tuning fit after a first one)",
        )
    if timeout is not None:
        check_timeout(timeout)
    path = check_script(script, command, expected="a Python file", directory=False)
    check_source(path, command)
    global _active
    if _active is not None:
        raise UsageError(
            "A capture is already running in this process",
            expected="one capture at a time",
            received=f"a capture of {_active.script}",
            fix="capture one script after the other",
        )
    state = _Capture(str(path), args, fit)
    name = path.name
    _active = state
    parent = os.getpid()
    clean = False  # the script ran to its end, or to its fit, without raising
    try:
        with (
            _patched_fit(state),
            _patched_train_on_batch(state),
            _patched_optimizer_step(state),
            _no_stdin(),
            _alarm(timeout, name),
            _as_main(path, args),
        ):
            runpy.run_path(str(path), run_name="__main__")
        clean = True
    except _Captured as done:
        clean = True
        return done.workload
    except _StdinRead as exc:
        where = _script_line(exc, state)
        raise CaptureError(
            f"The script {name} reads standard input before its model.fit"
            + (f", at {where}" if where else ""),
            reason="stdin",
            fit_calls=state.fit_calls,
            where=where,
            expected="a script that runs without a keyboard (standard input is closed here)",
            received=f"a read of standard input (input(), sys.stdin) at {where or name}",
            fix="give that value as an argument of the script (argparse, with a default) "
            f"and pass it after the script: tfaccel {command} {name} --your-option VALUE",
        ) from None
    except _OwnLoop as exc:
        raise CaptureError(
            f"The script {name} trains with its own loop: an optimizer step"
            + (f" at {exc.where}" if exc.where else "")
            + (f" before model.fit call #{fit}" if state.fit_calls else " before any model.fit"),
            reason="own-loop",
            fit_calls=state.fit_calls,
            where=exc.where,
            expected="a script that trains with model.fit, or marks its own training loop",
            received=f"{exc.optimizer}.apply_gradients at {exc.where or name}, outside "
            "model.fit (stopped there: none of the loop's steps was applied)",
            fix=MARK_FIX,
        ) from None
    except _TimedOut as exc:
        where = _script_line(exc, state)
        raise CaptureError(
            f"The script {name} did not reach model.fit within {timeout:g} s",
            reason="timeout",
            fit_calls=state.fit_calls,
            where=where,
            expected=f"model.fit call #{fit} within the time limit",
            received=f"still running at {where or name} after {timeout:g} s"
            + (f", after {state.fit_calls} fit call(s)" if state.fit_calls else ""),
            fix="give it more time (--timeout SECONDS), or make the slow part (data "
            "download, preprocessing) smaller with the script's own arguments",
        ) from None
    except SystemExit as exc:
        where = _script_line(exc, state)
        raise CaptureError(
            f"The script {name} exited (sys.exit({exc.code!r})) before model.fit"
            + (f", at {where}" if where else ""),
            reason="exited",
            fit_calls=state.fit_calls,
            where=where,
            expected=f"a script that reaches model.fit call #{fit}",
            received=f"SystemExit({exc.code!r}) at {where or name}",
            fix=(
                f"the script refused its arguments (exit status 2, as argparse exits): where "
                f"one of them is an option of tfaccel {command}, put it before the script's "
                f"name (tfaccel {command} --timeout 600 {name}), the script's own after it; "
                f"run `python {name} ARGS...` to see what the script takes"
                if exc.code == 2 and any(str(a).startswith("-") for a in state.args)
                else "pass the script the arguments it needs after its name "
                f"(tfaccel {command} {name} ARGS...); run `python {name} ARGS...` to see why "
                "it exits"
            ),
        ) from None
    except KeyboardInterrupt:
        raise  # Ctrl-C (and tfaccel's SIGTERM): the command's interrupt path
    except BaseException as exc:  # the script's own error, even one not an Exception
        where = _script_line(exc, state)
        raise CaptureError(
            f"The script {name} raised {type(exc).__name__} before model.fit"
            + (f", at {where}" if where else "")
            + f": {exc}",
            reason="raised",
            fit_calls=state.fit_calls,
            where=where,
            expected=f"a script that reaches model.fit call #{fit} without error",
            received="this traceback, from your script:\n" + script_traceback(exc, path),
            fix=f"fix the error; `python {name} ARGS...` reproduces it",
        ) from exc
    finally:
        _active = None
        end_forked_child(parent, 0 if clean else 1)  # a child the script forked ends here
    calls = state.fit_calls
    raise CaptureError(
        f"The script {name} ended without "
        + (f"a model.fit call #{fit} (it made {calls})" if calls else "calling model.fit"),
        reason="no-fit",
        fit_calls=calls,
        expected="a script that trains with model.fit, or marks its own training loop",
        received=f"{calls} model.fit call(s)",
        fix=(
            f"pass --fit {calls} (or fewer)"
            if calls
            else f"if it trains with its own loop (tf.GradientTape), {MARK_FIX}"
        ),
    )


@contextlib.contextmanager
def no_fit_explained(
    script: str | os.PathLike[str], *, expected: str, what: str | None = None
) -> Iterator[None]:
    """Around a :func:`capture` by a command that also reads scripts defining ``model_fn()``:
    a script that ended without calling ``model.fit`` at all is said to define neither (its
    CaptureError is raised again with that headline, ``expected`` and the same fix); every
    other error passes unchanged. ``what`` (``"tune"``) adds "does not say what to tune" to
    the headline."""
    try:
        yield
    except CaptureError as exc:
        if exc.reason == "no-fit" and not exc.fit_calls:
            says = f"does not say what to {what}: it " if what else ""
            raise CaptureError(
                f"The script {Path(script).name} {says}defines no model_fn and ended without "
                "calling model.fit",
                reason=exc.reason,
                expected=expected,
                received="no model.fit call, no tfaccel.workload.mark, no model_fn",
                fix=exc.fix,
            ) from None
        raise


def _call_line(frame: FrameType) -> int:
    """The first line of the call ``frame`` is making (a call over several lines is named by
    its first, where Python says; 3.10 gives the line it is on)."""
    positions = getattr(inspect.getframeinfo(frame, context=0), "positions", None)
    start = getattr(positions, "lineno", None)
    return int(start) if start else frame.f_lineno


def _script_line(exc: BaseException, state: _Capture) -> str | None:
    """``name:line`` of the innermost frame of the script in ``exc``'s traceback."""
    target = os.path.abspath(state.script)
    tb: TracebackType | None = exc.__traceback__
    found: str | None = None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == target:
            found = f"{Path(state.script).name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


@contextlib.contextmanager
def _as_main(path: Path, args: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as ``python SCRIPT ARGS...`` sets them."""
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.argv = [str(path), *args]
    sys.path[0:1] = [str(path.resolve().parent)]
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def _patched_fit(state: _Capture) -> contextlib.AbstractContextManager[None]:
    def make(original: Any, signature: inspect.Signature) -> Any:
        def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
            state.fit_calls += 1
            if state.fit_calls < state.fit:  # an earlier fit: one step, to build what it builds
                bound = signature.bind(self, *args, **kwargs)
                quick = dict(bound.arguments)
                quick.pop("self", None)
                quick.update(
                    epochs=1, initial_epoch=0, steps_per_epoch=1, verbose=0, callbacks=None
                )
                if quick.get("validation_data") is not None or quick.get("validation_split"):
                    quick["validation_steps"] = 1
                with _in_keras(state):
                    return original(self, **quick)
            bound = signature.bind(self, *args, **kwargs)
            given = {k: v for k, v in bound.arguments.items() if k != "self"}
            x, y = given.pop("x", None), given.pop("y", None)
            origin = Origin(state.script, state.args, state.fit, state.where(sys._getframe(1)))
            raise _Captured(Workload(self, CompileArgs.of(self), x, y, given, origin))

        return fit

    return replaced_fit(make)


def _patched_train_on_batch(state: _Capture) -> contextlib.AbstractContextManager[None]:
    """A script whose own loop calls ``model.train_on_batch(x, y)`` (older Keras examples,
    GANs): its first call is the workload (that batch its data), when the first ``fit`` is
    the one asked for and none came before; later calls, and every call of a script asked
    for a later ``fit``, run as they are."""

    def make(original: Any, signature: inspect.Signature) -> Any:
        def train_on_batch(self: Any, *args: Any, **kwargs: Any) -> Any:
            if state.fit != 1 or state.fit_calls:
                with _in_keras(state):
                    return original(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs)
            given = {k: v for k, v in bound.arguments.items() if k not in ("self", "return_dict")}
            x, y = given.pop("x", None), given.pop("y", None)
            extra = {k: v for k, v in given.items() if v is not None}
            batch = leading_dim(x)
            fit_kwargs = {**extra, "batch_size": batch, "epochs": 1} if batch else extra
            where = state.where(sys._getframe(1))
            origin = Origin(state.script, state.args, 1, where, method="train_on_batch")
            raise _Captured(Workload(self, CompileArgs.of(self), x, y, fit_kwargs, origin))

        return train_on_batch

    return replaced_method("train_on_batch", make)


@contextlib.contextmanager
def _in_keras(state: _Capture) -> Iterator[None]:
    """While Keras's own ``fit`` or ``train_on_batch`` runs: its optimizer steps are its own."""
    state.in_keras += 1
    try:
        yield
    finally:
        state.in_keras -= 1


def _patched_optimizer_step(state: _Capture) -> contextlib.AbstractContextManager[None]:
    """A script that trains with its own loop (``tf.GradientTape``, then
    ``optimizer.apply_gradients``) and no :func:`mark`: stopped at its first optimizer step
    outside Keras's ``fit`` and ``train_on_batch``, before it is applied (its ``tf.function``
    is being traced there, or it runs eagerly), instead of training until the time limit."""

    def make(original: Any, signature: inspect.Signature) -> Any:
        def apply(self: Any, *args: Any, **kwargs: Any) -> Any:
            if state.in_keras:
                return original(self, *args, **kwargs)
            raise _OwnLoop(type(self).__name__, state.where(sys._getframe(1)))

        return apply

    return replaced_method("apply", make, optimizer_base())


class _NoStdin:
    """Standard input for the script: every read stops it (nothing waits for a keyboard)."""

    encoding = "utf-8"
    closed = False

    def readable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no standard input during a capture")

    def read(self, size: int | None = -1) -> str:
        raise _StdinRead("standard input read")

    def readline(self, size: int | None = -1) -> str:
        raise _StdinRead("standard input read")

    def readlines(self, hint: int = -1) -> list[str]:
        raise _StdinRead("standard input read")

    def __iter__(self) -> Iterator[str]:
        raise _StdinRead("standard input read")

    @property
    def buffer(self) -> Any:  # sys.stdin.buffer.read()
        raise _StdinRead("standard input read")

    def close(self) -> None:
        pass


@contextlib.contextmanager
def _no_stdin() -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = _NoStdin()
    try:
        yield
    finally:
        sys.stdin = saved


STOP_GRACE_S = 10.0
"""Seconds a script is given after its time limit to let the limit's exception through: one
that catches every exception (a bare ``except:`` in a loop) or sets its own SIGALRM handler is
then stopped with the process (:func:`_hard_stop`)."""


@contextlib.contextmanager
def _alarm(timeout: float | None, name: str = "the script") -> Iterator[None]:
    """Raise :class:`_TimedOut` in the script after ``timeout`` seconds, and again every
    second after (main thread only). Where the script lets none of them through for
    :data:`STOP_GRACE_S` after the first one reached it (or set its own SIGALRM handler),
    stop the process (:func:`_watch`)."""
    if not timeout or threading.current_thread() is not threading.main_thread():
        yield
        return
    delivered: list[float] = []  # when the first _TimedOut was raised in the script

    def expire(signum: int, frame: FrameType | None) -> None:
        if not delivered:
            delivered.append(time.monotonic())
        raise _TimedOut("time limit")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(timeout), 1.0)
    done = threading.Event()
    limit = time.monotonic() + float(timeout)
    watch = threading.Thread(
        target=_watch, args=(done, delivered, expire, limit, name, timeout), daemon=True
    )
    watch.start()
    try:
        yield
    finally:
        done.set()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _watch(
    done: threading.Event,
    delivered: list[float],
    handler: Any,
    limit: float,
    name: str,
    timeout: float,
) -> None:
    """Until ``done``: stop the process (:func:`_hard_stop`) once the time limit's exception
    reached the script :data:`STOP_GRACE_S` ago without ending it, or the script replaced
    ``handler`` and the limit is that long past. A script inside one long call of native
    code (an XLA compile) has not been told yet: it is waited for."""
    while not done.wait(0.5):
        now = time.monotonic()
        replaced = signal.getsignal(signal.SIGALRM) is not handler
        told = delivered[0] if delivered else (limit if replaced else None)
        if told is not None and now - told >= STOP_GRACE_S and not done.is_set():
            _hard_stop(name, timeout)


def _hard_stop(name: str, timeout: float) -> None:
    """The script kept running past its time limit and the grace after it, catching the
    exception that should stop it: say so and end the process (the script runs in it), after
    the last words of whoever registered them (:func:`tfaccel.core.stopping.last_words`:
    ``--json``'s document, an isolated capture's result)."""
    hard_exit(
        CaptureError(
            f"The script {name} did not reach model.fit within {timeout:g} s, and kept "
            f"running {STOP_GRACE_S:g} s after it was told to stop (it catches every "
            "exception, or handles SIGALRM itself): the process was stopped",
            reason="timeout",
            expected="model.fit reached within the time limit, or the limit's exception let "
            "through",
            received=f"the script still running {STOP_GRACE_S:g} s after its time limit",
            fix="give it more time (the command's --timeout SECONDS), or let exceptions that "
            "are not errors through its `except:` clauses (write `except Exception:`)",
        ),
        2,
    )
