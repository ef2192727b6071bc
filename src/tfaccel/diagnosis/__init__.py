"""Why TensorFlow does or does not use the accelerators: rules over a Snapshot, and logs.

``tfaccel.doctor()`` (and ``tfaccel doctor``) call :func:`check` here.

``diagnose`` is a pure function: it reads a :class:`~tfaccel.snapshot.Snapshot` (and, when
given, the text of a TensorFlow log) and returns a :class:`DoctorReport`. It touches nothing on
the machine and never imports TensorFlow; ``tfaccel.probe`` does the looking.

Example:
    >>> from tfaccel.snapshot import Snapshot
    >>> report = diagnose(Snapshot())
    >>> report.exit_code
    0
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tfaccel import probe
from tfaccel.core.checks import is_bool
from tfaccel.core.errors import LogInputError, UsageError, shown
from tfaccel.core.findings import Finding, counts
from tfaccel.diagnosis.log.match import LogReport, match_log
from tfaccel.diagnosis.log.read import LogText, detect_encoding, read_log_file, window_text
from tfaccel.diagnosis.rules import RULES, run_rules
from tfaccel.snapshot import Snapshot

__all__ = [
    "RULES",
    "DoctorReport",
    "Finding",
    "LogReport",
    "LogText",
    "check",
    "check_log",
    "diagnose",
    "match_log",
    "read_log_file",
]


@dataclass
class DoctorReport:
    """The findings of every rule, and what a log showed.

    Attributes:
        findings: one or more per rule, in rule order.
        log: the log matcher's report when a log was given, else None.
    """

    findings: list[Finding] = field(default_factory=list)
    log: LogReport | None = None

    @property
    def exit_code(self) -> int:
        """1 when any finding or log cause failed, else 0 (``tfaccel doctor``'s exit code)."""
        return 1 if self.counts()["fail"] else 0

    def counts(self) -> dict[str, int]:
        """How many findings and log causes have each status (`core.findings.counts`)."""
        causes = self.log.causes if self.log is not None else []
        return counts([*self.findings, *causes])

    def finding(self, id: str) -> Finding | None:
        """The first finding with this id, or None."""
        return next((f for f in self.findings if f.id == id), None)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-ready values (``tfaccel doctor --json``)."""
        return {
            "findings": [f.to_dict() for f in self.findings],
            "log": self.log.to_dict() if self.log is not None else None,
            "summary": self.counts(),
            "exit_code": self.exit_code,
        }


def diagnose(
    snapshot: Snapshot,
    log: str | bytes | LogText | None = None,
    log_source: str | None = None,
) -> DoctorReport:
    """Run every rule on ``snapshot`` and, when given, match ``log``.

    Args:
        snapshot: what ``tfaccel.probe.snapshot()`` found (or a saved one).
        log: the text of a TensorFlow log or traceback, its bytes (decoded as
            :func:`read_log_file` decodes a file: UTF-8, undecodable bytes replaced and
            counted in the report's notes), or a :class:`LogText` from :func:`read_log_file`.
        log_source: where the log came from (a path, ``<stdin>``), for the report.

    Returns:
        A :class:`DoctorReport`; its ``exit_code`` is 1 when anything failed.

    Raises:
        UsageError: ``snapshot`` is not a Snapshot, ``log`` is not text, bytes or a LogText
            (a path: read it with :func:`read_log_file`), or ``log_source`` is not text.

    Example:
        >>> report = diagnose(Snapshot(), log="OOM when allocating tensor with shape[8,1024]")
        >>> report.log.causes[0].id, report.exit_code
        ('oom', 1)
    """
    if not isinstance(snapshot, Snapshot):
        raise UsageError(
            "diagnose() needs a Snapshot of a machine",
            expected="a tfaccel.snapshot.Snapshot: tfaccel.probe.snapshot(), or a saved one "
            "read with tfaccel.snapshot.load_snapshot(path)",
            received=f"snapshot={_shown(snapshot)}",
            fix="pass tfaccel.probe.snapshot(), or call tfaccel.doctor() to probe this machine",
        )
    text = check_log(log, where="diagnose()", allow_empty=True)
    if log_source is not None and not isinstance(log_source, str):
        raise UsageError(
            "diagnose() got an invalid log_source",
            expected="where the log came from as text (a path, '<stdin>'), or None",
            received=f"log_source={_shown(log_source)}",
            fix="pass log_source=str(path), or leave it out",
        )
    log_report = match_log(text, source=log_source) if text is not None else None
    return DoctorReport(run_rules(snapshot), log_report)


def check(*, deep: bool = False, log: str | bytes | LogText | None = None) -> DoctorReport:
    """Probe this machine and diagnose it: ``tfaccel.doctor()``.

    Both arguments are checked before anything is probed.

    Args:
        deep: also import TensorFlow in a subprocess and read what it logs (a bool).
        log: the text of a TensorFlow log or traceback to diagnose as well, its bytes
            (decoded as UTF-8, undecodable bytes replaced), or a :class:`LogText`.

    Raises:
        UsageError: ``deep`` is not a bool, or ``log`` is not text, bytes or a LogText.
        LogInputError: ``log`` is empty or holds only whitespace.
    """
    if not is_bool(deep):
        raise UsageError(
            "tfaccel.doctor() got an invalid deep",
            expected="True or False",
            received=f"deep={_shown(deep)}",
            fix="pass deep=True to also import TensorFlow in a subprocess, or leave it out",
        )
    text = check_log(log, where="tfaccel.doctor()")
    return diagnose(probe.snapshot(deep=bool(deep)), log=text)


# --- the log argument -------------------------------------------------------------------------


def check_log(log: object, *, where: str, allow_empty: bool = False) -> str | LogText | None:
    """The ``log`` argument as the matcher takes it: text, a :class:`LogText`, or None.

    Bytes are decoded as :func:`read_log_file` decodes a file (UTF-8, or UTF-16 after its
    byte-order mark; undecodable bytes replaced, and the report's notes count them), since a
    log read in binary mode is still a log.

    Args:
        log: the argument.
        where: the function it was given to, for the message.
        allow_empty: accept empty or blank text (the pure :func:`diagnose` matches any text;
            ``tfaccel.doctor()`` refuses it, as ``tfaccel doctor --log`` refuses an empty file).

    Raises:
        UsageError: ``log`` is of another type (a path is read with :func:`read_log_file`).
        LogInputError: it is empty or holds only whitespace, unless ``allow_empty``.
    """
    if log is None or isinstance(log, LogText):
        return log
    if isinstance(log, (bytes, bytearray, memoryview)):
        data = bytes(log)
        decoded = _decoded(data)
        if not decoded.text.strip() and not allow_empty:
            raise _empty_log(where, f"log={_shown(data)}")
        return decoded
    if isinstance(log, str):
        if not log.strip() and not allow_empty:
            raise _empty_log(where, f"log={_shown(log)}")
        return log
    fix = "pass the text: log=open(path).read()"
    if isinstance(log, os.PathLike):
        fix = "read the file first: log=tfaccel.diagnosis.read_log_file(path)"
    raise UsageError(
        f"{where} got an invalid log",
        expected="the text of a TensorFlow log or traceback (str or bytes), a LogText from "
        "tfaccel.diagnosis.read_log_file(path), or None",
        received=f"log={_shown(log)}",
        fix=fix,
    )


def _decoded(data: bytes) -> LogText:
    encoding = detect_encoding(data)
    text = data.decode(encoding, errors="replace")
    replaced = text.count("\ufffd") - data.count("\ufffd".encode())
    body, notes = window_text(text)
    name = encoding.upper().replace("UTF-8-SIG", "UTF-8")
    if replaced > 0:
        notes.insert(
            0,
            f"given as bytes, decoded as {name}: {replaced:,} undecodable byte "
            "sequence(s) replaced",
        )
    elif encoding == "utf-16":
        notes.insert(0, "given as bytes, decoded as UTF-16 (byte-order mark)")
    elif encoding.startswith("utf-16"):
        notes.insert(0, f"given as bytes, decoded as {name} (no byte-order mark)")
    scanned = len(data) if len(body) == len(text) else len(body.encode("utf-8", "replace"))
    return LogText(body, "<bytes>", len(data), min(scanned, len(data)), notes)


def _empty_log(where: str, received: str) -> LogInputError:
    return LogInputError(
        f"The log given to {where} is empty",
        expected="the text of a TensorFlow log or traceback",
        received=received,
        fix="save TensorFlow's output with `python train.py 2>&1 | tee tf.log` and pass "
        "log=tfaccel.diagnosis.read_log_file('tf.log'), or leave log out",
    )


def _shown(value: object) -> str:
    """The value as a message shows it (cut to a line: a log can be megabytes long), and its
    type."""
    return f"{shown(value)} ({type(value).__name__})"
