"""Capture a script's workload in a fresh Python process, and bring back what a task makes of it.

A :class:`~tfaccel.workload.Workload` holds live objects (the model, a dataset) that cannot
leave the process that captured them. :func:`run_isolated` leaves the caller's process as it
was: a child process (``python -m tfaccel.workload.isolated REQUEST RESULT``) captures the
workload with :func:`~tfaccel.workload.capture`, calls the task (a function of tfaccel named
``module:function``, given the workload and the options) and writes its JSON-ready result back.
A :class:`~tfaccel.core.errors.TfaccelError` in the child (the script raised, exited, read
standard input...) is raised again here as the same class, with the same message.

The child's standard input is closed and its standard output goes to this process's standard
error (a script's prints never mix with a JSON document); a child still running
``timeout`` + :data:`START_ALLOWANCE_S` seconds after it started is killed with its process
group.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfaccel.core.errors import TfaccelError, UsageError
from tfaccel.core.jsonout import dumps
from tfaccel.core.stopping import last_words
from tfaccel.scripts import check_script
from tfaccel.workload.capture import DEFAULT_TIMEOUT_S, CaptureError, capture

__all__ = ["START_ALLOWANCE_S", "run_isolated"]

START_ALLOWANCE_S = 120.0
"""Time the child may take besides the script's own: Python, tfaccel, the task."""


def run_isolated(
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    *,
    task: str,
    options: Mapping[str, Any] | None = None,
    fit: int = 1,
    timeout: float = DEFAULT_TIMEOUT_S,
    command: str = "plan",
) -> Any:
    """Capture ``script``'s workload in a child process and return ``task(workload,
    **options)`` from it.

    Args:
        script, args, fit, timeout, command: as for :func:`~tfaccel.workload.capture`.
        task: ``"tfaccel.some.module:function"``, a function of tfaccel taking the workload and
            ``options`` (JSON values) and returning a JSON-ready value.
        options: its keyword arguments.

    Raises:
        UsageError: the script is not a readable Python file, or ``task`` is not tfaccel's.
        CaptureError: the script did not reach the ``fit`` (as ``capture`` says), or the child
            ran out of time.
        TfaccelError: the task's own error, as the same class.
    """
    path = check_script(script, command, expected="a Python file", directory=False)
    if not task.startswith("tfaccel.") or ":" not in task:
        raise UsageError(
            "The task to run on the workload is not a function of tfaccel",
            expected="'tfaccel.module:function'",
            received=f"task={task!r}",
            fix="name a function of tfaccel, e.g. 'tfaccel.planning.source:plan_document'",
        )
    request = {
        "script": str(path),
        "args": [str(a) for a in args],
        "fit": fit,
        "timeout": timeout,
        "command": command,
        "task": task,
        "options": dict(options or {}),
    }
    with tempfile.TemporaryDirectory(prefix="tfaccel-workload-") as folder:
        request_file = Path(folder, "request.json")
        result_file = Path(folder, "result.json")
        request_file.write_text(dumps(request))
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the folder tfaccel is imported from
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        argv = [
            sys.executable,
            "-m",
            "tfaccel.workload.isolated",
            str(request_file),
            str(result_file),
        ]
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=_stderr_fd(),
            env=env,
            start_new_session=True,
        )
        try:
            status = child.wait(timeout=timeout + START_ALLOWANCE_S)
        except subprocess.TimeoutExpired:
            _kill(child)
            raise CaptureError(
                f"The script {path.name} did not reach model.fit within {timeout:g} s",
                reason="timeout",
                expected=f"model.fit call #{fit} within the time limit",
                received=f"the capture process still running after "
                f"{timeout + START_ALLOWANCE_S:g} s; it was stopped",
                fix="give it more time, or make the slow part smaller with the script's own "
                "arguments",
            ) from None
        except BaseException:
            _kill(child)
            raise
        if not result_file.exists():
            raise TfaccelError(
                f"The capture process of {path.name} ended without a result (exit status {status})",
                expected="the result of the capture, or the error that stopped it",
                received=f"exit status {status}; its traceback, if any, is above",
                fix="run the script on its own (python SCRIPT ARGS...) to see how it ends",
            )
        answer = json.loads(result_file.read_text())
    if "error" in answer:
        raise _rebuilt(answer["error"])
    return answer["result"]


def _stderr_fd() -> int | None:
    try:
        return int(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return None


def _kill(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        child.kill()
    child.wait()


def _error_dict(exc: TfaccelError) -> dict[str, Any]:
    return {
        "module": type(exc).__module__,
        "class": type(exc).__qualname__,
        "what": exc.what,
        "expected": exc.expected,
        "received": exc.received,
        "fix": exc.fix,
        "reason": getattr(exc, "reason", None),
        "where": getattr(exc, "where", None),
        "fit_calls": getattr(exc, "fit_calls", 0),
    }


def _rebuilt(error: Mapping[str, Any]) -> TfaccelError:
    """The child's error, as its own class where that is tfaccel's, else a TfaccelError."""
    kw = {k: error.get(k) for k in ("expected", "received", "fix")}
    what = str(error.get("what"))
    if error.get("class") == "CaptureError":
        return CaptureError(
            what,
            reason=str(error.get("reason")),
            where=error.get("where"),
            fit_calls=int(error.get("fit_calls") or 0),
            **kw,
        )
    cls: Any = TfaccelError
    module = str(error.get("module") or "")
    if module.startswith("tfaccel."):
        try:
            found = getattr(importlib.import_module(module), str(error.get("class")), None)
        except ImportError:
            found = None
        if isinstance(found, type) and issubclass(found, TfaccelError):
            cls = found
    try:
        rebuilt: TfaccelError = cls(what, **kw)
    except TypeError:  # a subclass with another constructor
        rebuilt = TfaccelError(what, **kw)
    return rebuilt


def _task(name: str) -> Any:
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def _main(request_file: str, result_file: str) -> int:
    """The child: capture, run the task, write ``{"result": ...}`` or ``{"error": {...}}``."""
    request = json.loads(Path(request_file).read_text())

    def answer_with(answer: dict[str, Any]) -> None:
        Path(result_file).write_text(dumps(answer))

    def said(error: TfaccelError, code: int) -> bool:  # a hard stop: the parent says it
        answer_with({"error": _error_dict(error)})
        return True

    with last_words(said):
        try:
            workload = capture(
                request["script"],
                request["args"],
                fit=request["fit"],
                timeout=request["timeout"],
                command=request["command"],
            )
            answer_with({"result": _task(request["task"])(workload, **request["options"])})
        except TfaccelError as exc:
            answer_with({"error": _error_dict(exc)})
    return 0


if __name__ == "__main__":
    status = _main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # no TensorFlow teardown: the result is written
