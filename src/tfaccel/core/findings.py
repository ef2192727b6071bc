"""One shape for everything tfaccel finds: the doctor's checks, profile's limits, placement.

A :class:`Finding` is one checked fact about the machine, a log or a run: a stable ``id``, a
``status`` on the scale below, a one-line ``title``, the ``evidence`` that was seen, the
``numbers`` behind it, the ``fix`` that mends it and the ``gain`` the fix is predicted to bring.
Every renderer (terminal, JSON, Markdown, HTML) takes this one shape.

The status scale, from best to worst (:data:`STATUSES`):

* ``ok``: checked, and nothing to change.
* ``skip``: does not apply here, or could not be checked; the evidence says why.
* ``info``: a suggestion that may help; nothing is wrong.
* ``warn``: works, but slower or less well than it could.
* ``fail``: does not work as intended (the GPU is not used, the run fails), or is the dominant
  limit of a run: act on it first.

Ids are stable slugs (``missing_cuda_libs``, ``input_bound``): they may be added, never renamed.

Example:
    >>> f = Finding("oom", "fail", "out of GPU memory", evidence=["OOM when allocating"])
    >>> f.to_dict()["status"], worst([f, Finding("x", "ok", "fine")])
    ('fail', 'fail')
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "PROBLEMS",
    "STATUSES",
    "Finding",
    "Status",
    "counts",
    "text_lines",
    "worst",
]

Status = Literal["ok", "skip", "info", "warn", "fail"]
STATUSES: tuple[Status, ...] = ("ok", "skip", "info", "warn", "fail")
PROBLEMS: tuple[Status, ...] = ("fail", "warn", "info")  # call for a change, most severe first


@dataclass
class Finding:
    """The outcome of one check.

    Attributes:
        id: stable slug (``missing_cuda_libs``); never renamed.
        status: one of :data:`STATUSES` (see the module's docstring for the scale).
        title: one line a user reads first.
        evidence: what was seen, one fact per line.
        numbers: the figures behind the finding, by name (``{"input_share": 0.31}``).
        fix: the exact command or change that mends it; None when there is nothing to do.
        gain: the predicted effect of the fix (``"up to x1.45 faster"``), when one is known.
        source: where it was found: ``probe`` (the machine), ``log`` (a TensorFlow log),
            ``deep`` (the TensorFlow subprocess of ``doctor --deep``), ``profile`` (a measured
            run) or ``placement`` (an audited training step).
    """

    id: str
    status: Status
    title: str
    evidence: list[str] = field(default_factory=list)
    fix: str | None = None
    source: str = "probe"
    numbers: dict[str, Any] = field(default_factory=dict)
    gain: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(
                f"Finding {self.id!r}: status must be one of {', '.join(STATUSES)}. "
                f"Received: status={self.status!r}"
            )

    @property
    def is_problem(self) -> bool:
        """True for ``fail``, ``warn`` and ``info``: the findings that call for a change."""
        return self.status in PROBLEMS

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; its keys are the attribute names."""
        return {
            "id": self.id,
            "status": self.status,
            "title": self.title,
            "evidence": list(self.evidence),
            "numbers": dict(self.numbers),
            "fix": self.fix,
            "gain": self.gain,
            "source": self.source,
        }


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    """How many findings have each status: ``{"ok": n, "skip": n, "info": n, ...}``."""
    result: dict[str, int] = dict.fromkeys(STATUSES, 0)
    for f in findings:
        result[f.status] += 1
    return result


def worst(findings: Iterable[Finding]) -> Status:
    """The most severe status among ``findings`` (``ok`` when there are none)."""
    rank = {status: i for i, status in enumerate(STATUSES)}
    return max((f.status for f in findings), key=rank.__getitem__, default="ok")


def text_lines(findings: Iterable[Finding], *, indent: str = "  ", width: int = 100) -> list[str]:
    """Plain text of ``findings`` for logs and the ``str()`` of reports (no terminal styling).

    Each finding is ``[STATUS] id: title``, then its evidence and gain, wrapped at ``width``
    without breaking a word, and its fix, never wrapped, so that a command in it can be copied
    whole. A line indented by four spaces (a command on its own line) is kept as it is.
    """
    lines: list[str] = []
    inner = indent + "  "
    for f in findings:
        lines.append(f"{indent}[{f.status.upper()}] {f.id}: {f.title}")
        for evidence in f.evidence:
            lines += _wrapped("evidence", evidence, inner, width)
        if f.fix:
            lines += _wrapped("fix", f.fix, inner, None)
        if f.gain:
            lines += _wrapped("gain", f.gain, inner, width)
    return lines


def _wrapped(label: str, body: str, indent: str, width: int | None) -> list[str]:
    out: list[str] = []
    for i, para in enumerate(body.splitlines()):
        if para.startswith("    "):
            out.append(indent + "    " + para.strip())
            continue
        first = f"{indent}{label}: " if i == 0 else indent + "  "
        if width is None:
            out.append(first + para)
            continue
        out += textwrap.wrap(
            para,
            width=width,
            initial_indent=first,
            subsequent_indent=indent + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return out
