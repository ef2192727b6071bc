"""Progress reports from workers to ``tfaccel launch``, which stops a group that hangs.

Under ``tfaccel launch --hang-timeout S`` each worker has ``TFACCEL_HEARTBEAT_DIR`` (a
directory of the launcher's) and ``TFACCEL_LAUNCH_RANK``; :func:`heartbeat` writes the step the
worker is starting to ``rank-R`` there (one small file, replaced atomically). The launcher
reads the files: a group whose files all stay the same for ``S`` seconds is hung, and the rank
at the lowest step (furthest behind) is named. ``tfaccel.distribute.train`` calls it before
every step; a script with its own loop calls it too. Outside ``tfaccel launch`` it does
nothing.

Example:
    >>> from tfaccel.distribute import heartbeat
    >>> for step in range(start, steps):
    ...     heartbeat(step + 1)        # starting step step + 1
    ...     train_step()
    >>> heartbeat(steps, done=True)    # training is over: no more heartbeats to expect
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from tfaccel.core.checks import check_environ, check_flag, is_int
from tfaccel.core.errors import UsageError

__all__ = ["HEARTBEAT_DIR_ENV", "Beat", "heartbeat", "read_heartbeats"]

HEARTBEAT_DIR_ENV = "TFACCEL_HEARTBEAT_DIR"
RANK_ENV = "TFACCEL_LAUNCH_RANK"


@dataclass(frozen=True)
class Beat:
    """One rank's last report.

    Attributes:
        step: the step it was starting (or, when ``done``, the last step it ran).
        done: it has finished training (the launcher stops watching it).
        count: heartbeats this process has sent (2 or more: it has finished a first step).
    """

    step: int
    done: bool = False
    count: int = 1


_sent = 0


def heartbeat(step: int, *, done: bool = False, environ: Mapping[str, str] | None = None) -> None:
    """Tell ``tfaccel launch`` that this worker is starting ``step`` (or is done).

    Args:
        step: the global step being started (1 for the first), or the last step with ``done``.
        done: training is over for this worker; the launcher stops watching it.
        environ: where ``TFACCEL_HEARTBEAT_DIR`` and ``TFACCEL_LAUNCH_RANK`` are read
            (default ``os.environ``); without them this does nothing.

    Raises:
        UsageError: ``step`` is not an integer >= 0, ``done`` not True or False, or
            ``environ`` not a mapping of text to text.

    Example:
        >>> heartbeat(12)
    """
    if not is_int(step) or step < 0:
        raise UsageError(
            f"heartbeat({step!r}) is not a step",
            expected="the global step being started, an integer >= 0",
            received=f"{step!r} ({type(step).__name__})",
            fix="call heartbeat(step) with the step number as an int",
        )
    check_flag("done", done, where="tfaccel.distribute.heartbeat()")
    check_environ("environ", environ, where="tfaccel.distribute.heartbeat()")
    env = os.environ if environ is None else environ
    directory, rank = env.get(HEARTBEAT_DIR_ENV), env.get(RANK_ENV)
    if not directory or rank is None:
        return
    global _sent
    _sent += 1
    path = os.path.join(directory, f"rank-{rank}")
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="ascii") as f:
            f.write(f"{'done' if done else 'step'} {step} {_sent}\n")
        os.replace(temporary, path)
    except OSError:
        return  # the launcher's directory is gone: the launcher is stopping this worker


def read_heartbeats(directory: str | os.PathLike[str], workers: int) -> dict[int, Beat]:
    """Each rank's last report in ``directory`` (ranks that have not reported are absent)."""
    found: dict[int, Beat] = {}
    for rank in range(workers):
        try:
            with open(os.path.join(directory, f"rank-{rank}"), encoding="ascii") as f:
                kind, step, count = f.read().split()
            found[rank] = Beat(int(step), done=kind == "done", count=int(count))
        except (OSError, ValueError):
            continue
    return found
