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

from dataclasses import dataclass, field
from typing import Any

from tfaccel.diagnosis.logmatch import LogReport, match_log
from tfaccel.diagnosis.logread import LogText, read_log_file
from tfaccel.diagnosis.rules import RULES, run_rules
from tfaccel.findings import Finding, counts
from tfaccel.snapshot import Snapshot

__all__ = [
    "RULES",
    "DoctorReport",
    "Finding",
    "LogReport",
    "LogText",
    "check",
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
        """How many findings and log causes have each status (:func:`tfaccel.findings.counts`)."""
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
    snapshot: Snapshot, log: str | LogText | None = None, log_source: str | None = None
) -> DoctorReport:
    """Run every rule on ``snapshot`` and, when given, match ``log``.

    Args:
        snapshot: what ``tfaccel.probe.snapshot()`` found (or a saved one).
        log: the text of a TensorFlow log or traceback, or a :class:`LogText` from
            :func:`read_log_file`.
        log_source: where the log came from (a path, ``<stdin>``), for the report.

    Returns:
        A :class:`DoctorReport`; its ``exit_code`` is 1 when anything failed.

    Example:
        >>> report = diagnose(Snapshot(), log="OOM when allocating tensor with shape[8,1024]")
        >>> report.log.causes[0].id, report.exit_code
        ('oom', 1)
    """
    log_report = match_log(log, source=log_source) if log is not None else None
    return DoctorReport(run_rules(snapshot), log_report)


def check(*, deep: bool = False, log: str | LogText | None = None) -> DoctorReport:
    """Probe this machine and diagnose it: ``tfaccel.doctor()``.

    Args:
        deep: also import TensorFlow in a subprocess and read what it logs.
        log: the text of a TensorFlow log or traceback to diagnose as well.
    """
    from tfaccel import probe

    return diagnose(probe.snapshot(deep=deep), log=log)
