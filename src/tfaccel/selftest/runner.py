"""Run commands one after another, each a process group of its own, within one budget.

A step that fails, crashes or hangs is recorded (its command, exit status, seconds, the end of
its output) and the next one runs: a hang is killed with every process it started at the step's
timeout, and when the budget is spent the remaining steps are skipped, with the reason. The step
list is data (:class:`Step`), so any list runs the same way: the GPU self-test's
(:func:`tfaccel.selftest.gpu.plan_gpu_steps`) or a test's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, Protocol

__all__ = [
    "MIN_STEP_S",
    "TAIL_CHARS",
    "Step",
    "StepProgress",
    "StepResult",
    "StepStatus",
    "run_steps",
]

StepStatus = Literal["passed", "failed", "skipped", "timed-out"]

MIN_STEP_S = 20.0
"""A step is started only with at least this much of the budget left (or its whole timeout)."""
TAIL_CHARS = 4000
"""How much of the end of each step's output a result keeps (its log file has all of it)."""


@dataclass(frozen=True)
class Step:
    """One step of the self-test: a command run as its own process.

    Attributes:
        name: a short slug (``devices-tf``), also the name of its log file.
        argv: the command.
        what: what it checks, in one line.
        timeout_s: the longest it may run (less when the budget has less left).
        cwd: its working directory (None: the self-test's directory).
        skip: why it will not run (known when the plan is built), or None.
        skipped_if: a regular expression over its output: a run that exits 0 and matches it
            did not test anything (no GPU for that tool, every test skipped) and is recorded
            as skipped, with the matched text (its ``reason`` group when it has one).
        unset_env: variables removed from its environment (``PREFIX_*`` names a prefix).
        exit_notes: what an exit status means, for the reason of a failure
            (``((1, "the doctor found a failure"),)``).
        env: variables set in its environment (``(("NUMBA_ENABLE_CUDASIM", "1"),)``).
        keeps_result: the step prints one JSON object on a line of its own: the last such
            line of its output is kept in its result (``result``), and a ``skipped`` status in
            it (with its ``reason``) records the step as skipped, and the ``reason`` of a step
            that failed is the step's reason.
    """

    name: str
    argv: tuple[str, ...]
    what: str
    timeout_s: float
    cwd: str | None = None
    skip: str | None = None
    skipped_if: str | None = None
    unset_env: tuple[str, ...] = ()
    exit_notes: tuple[tuple[int, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    keeps_result: bool = False

    @property
    def command(self) -> str:
        """The command as a shell line."""
        return shlex.join(self.argv)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the step as planned."""
        return {
            "name": self.name,
            "what": self.what,
            "command": self.command,
            "argv": list(self.argv),
            "cwd": self.cwd,
            "timeout_s": self.timeout_s,
            "skip": self.skip,
        }


@dataclass(frozen=True)
class StepResult:
    """What one step did.

    Attributes:
        step: the step.
        status: ``passed`` (exit 0), ``failed`` (another exit status, a signal, or it could
            not start), ``skipped`` (did not run, or ran and had nothing to test) or
            ``timed-out`` (killed, with its process group, at its timeout).
        seconds: how long it ran (0 when it did not run).
        exit_code: its exit status (negative: the signal that killed it), None when it did
            not run or was killed at the timeout.
        reason: why it failed, timed out or was skipped; None when it passed.
        output_tail: the end of its output (stdout and stderr, as interleaved).
        log: the file with its whole output, None when none was kept.
        timeout_s: the timeout it ran under, None when it did not run.
        result: the JSON object the step printed (``keeps_result``), None when none.
    """

    step: Step
    status: StepStatus
    seconds: float = 0.0
    exit_code: int | None = None
    reason: str | None = None
    output_tail: str = ""
    log: str | None = None
    timeout_s: float | None = None
    result: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.step.name

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: one entry of summary.json's ``steps``."""
        return {
            "name": self.step.name,
            "what": self.step.what,
            "command": self.step.command,
            "argv": list(self.step.argv),
            "cwd": self.step.cwd,
            "status": self.status,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "timeout_s": self.timeout_s,
            "reason": self.reason,
            "log": self.log,
            "output_tail": self.output_tail,
            "result": self.result,
        }


class StepProgress(Protocol):
    """Receives the self-test's progress (:class:`tfaccel.cli._output.RichProgress` is one)."""

    def status(self, description: str) -> None: ...

    def advance(self, label: str) -> None: ...


def run_steps(
    steps: Sequence[Step],
    *,
    budget_s: float,
    log_dir: Path | None = None,
    cwd: Path | None = None,
    progress: StepProgress | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[StepResult], bool]:
    """Run ``steps`` one after another, each a process of its own, within ``budget_s``.

    A step that fails, crashes or times out is recorded and the next one runs. A step gets
    its own timeout or what is left of the budget, whichever is shorter; with less than
    :data:`MIN_STEP_S` left (or its whole timeout, when shorter) it is skipped, with the reason.

    Args:
        steps: what to run.
        budget_s: seconds for all of them.
        log_dir: where each step's whole output is kept (``NN-name.log``); None keeps none.
        cwd: the working directory of steps that name none (default: this one).
        progress: told when each step starts and ends.
        clock: the clock the budget is measured with.

    Returns:
        One result per step, in order, and whether Ctrl-C stopped the run (the step it
        stopped is recorded as failed and the rest as skipped).
    """
    start = clock()
    results: list[StepResult] = []
    interrupted = False
    for number, step in enumerate(steps, 1):
        label = f"[{number}/{len(steps)}] {step.name}"
        if interrupted:
            result = StepResult(step, "skipped", reason="not run: the self-test was interrupted")
        elif step.skip is not None:
            result = StepResult(step, "skipped", reason=step.skip)
        else:
            left = budget_s - (clock() - start)
            needed = min(step.timeout_s, MIN_STEP_S)
            if left < needed:
                reason = (
                    f"the budget of {budget_s:g} s is spent: {max(left, 0):.0f} s left, "
                    f"{needed:g} s needed to start this step (--budget gives more)"
                )
                result = StepResult(step, "skipped", reason=reason)
            else:
                timeout = min(step.timeout_s, left)
                if progress is not None:
                    progress.status(f"{label}: running (up to {timeout:.0f} s)")
                log = log_dir / f"{number:02d}-{step.name}.log" if log_dir is not None else None
                result, interrupted = _run_one(step, timeout, log, cwd)
        if progress is not None:
            ran = f" in {result.seconds:.1f} s" if result.timeout_s is not None else ""
            progress.status(f"{label}: {result.status}{ran}")
            progress.advance(f"{label}: {result.status}")
        results.append(result)
    return results, interrupted


def _run_one(
    step: Step, timeout_s: float, log: Path | None, cwd: Path | None
) -> tuple[StepResult, bool]:
    """Run one step in a new process group; at its timeout, or on Ctrl-C, the whole group is
    killed. Returns the result and whether Ctrl-C stopped it."""
    env = _environment(step.unset_env)
    env.update(step.env)
    workdir = step.cwd or (str(cwd) if cwd is not None else None)
    with _log_file(log) as (handle, kept):
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(step.argv),
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            why = f"could not start: {type(exc).__name__}: {exc}"
            return StepResult(step, "failed", reason=why, log=kept, timeout_s=timeout_s), False
        timed_out = interrupted = False
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        except KeyboardInterrupt:
            interrupted = True
        _kill_group(proc)  # also what it left running after it ended
        if timed_out or interrupted:
            proc.wait()
            code = None
        seconds = time.monotonic() - started
        tail = _tail(handle)
        kept_result = _json_result(handle) if step.keeps_result else None
    if interrupted:
        status: StepStatus = "failed"
        reason: str | None = "interrupted (Ctrl-C); killed"
    else:
        status, reason = _judge(step, code, timed_out, timeout_s, tail)
        if status == "passed" and kept_result is not None:
            if kept_result.get("status") == "skipped":
                status, reason = "skipped", str(kept_result.get("reason") or "skipped")
        elif status == "failed" and kept_result is not None and kept_result.get("reason"):
            reason = str(kept_result["reason"])  # whole: the last line of the output is cut
    result = StepResult(step, status, seconds, code, reason, tail, kept, timeout_s, kept_result)
    return result, interrupted


def _judge(
    step: Step, code: int | None, timed_out: bool, timeout_s: float, tail: str
) -> tuple[StepStatus, str | None]:
    if timed_out:
        cut = " (what was left of the budget)" if timeout_s < step.timeout_s else ""
        return "timed-out", f"did not finish within {timeout_s:.0f} s{cut}; killed"
    if code == 0:
        if step.skipped_if is not None:
            found = re.search(step.skipped_if, tail, re.MULTILINE)
            if found is not None:
                groups = found.groupdict()
                return "skipped", (groups.get("reason") or found.group(0)).strip()
        return "passed", None
    assert code is not None
    if code < 0:
        try:
            what = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            what = f"killed by signal {-code}"
    else:
        what = f"exit status {code}"
    note = dict(step.exit_notes).get(code)
    if note is not None:
        return "failed", f"{what}: {note}"
    last = _last_line(tail)
    return "failed", f"{what}: {last}" if last else what


def _environment(unset: Sequence[str]) -> dict[str, str]:
    """This process's environment without the variables ``unset`` names (``PREFIX_*`` names a
    prefix); the children's output unbuffered, so a killed step's log ends where it stopped."""

    def dropped(name: str) -> bool:
        return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in unset)

    env = {k: v for k, v in os.environ.items() if not dropped(k)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextlib.contextmanager
def _log_file(path: Path | None) -> Iterator[tuple[IO[bytes], str | None]]:
    """A file for a step's output: ``path`` written under a temporary name and renamed into
    place when the step ends (a temporary file when ``path`` is None). Yields the open file and
    the path kept (None when nothing is kept)."""
    if path is None:
        with tempfile.TemporaryFile() as handle:
            yield handle, None
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w+b") as handle:
            yield handle, str(path)
            handle.flush()
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = ""
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _tail(handle: IO[bytes]) -> str:
    handle.flush()
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - TAIL_CHARS * 2))
    text = handle.read().decode("utf-8", errors="replace")
    return text[-TAIL_CHARS:]


def _json_result(handle: IO[bytes], limit: int = 4 << 20) -> dict[str, Any] | None:
    """The last line of the output (its last ``limit`` bytes) that is one JSON object."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - limit))
    return last_json_line(handle.read().decode("utf-8", errors="replace"))


def last_json_line(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is one JSON object, None when none is."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict):
                return found
    return None


def _last_line(text: str, limit: int = 300) -> str:
    """The last line of ``text`` that says something: not blank, not part of a JSON document
    (the error or the assertion that ended a run comes after the document, or instead of it)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line and line[0] not in '{}[]"':
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill the step and every process it started (its process group)."""
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is not None:
            killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - no process groups (Windows)
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
