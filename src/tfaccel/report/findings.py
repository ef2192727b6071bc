"""Render findings: for a terminal (rich), as Markdown, and as an HTML fragment.

Each renderer takes either a list of findings, or the doctor's report: a
:class:`~tfaccel.diagnosis.DoctorReport` or the document of its ``to_dict()`` (``findings``,
``log``, ...), as report files hold it; the report adds its log part (the causes found in a log,
its notes, the benign noise) and a summary line. A finding may be a
:class:`~tfaccel.findings.Finding` or its ``to_dict()``. Each finding shows its status, id and
title, then its evidence, fix and predicted gain. Text from the system (paths, log lines) is
escaped for each format. The JSON form is ``Finding.to_dict()``; nothing here computes anything.

Example:
    >>> from tfaccel.findings import Finding
    >>> found = [Finding("oom", "fail", "The GPU ran out of memory", ["line 3: OOM"], "halve it")]
    >>> print(render_markdown(found))
    | status | check | finding | fix |
    |---|---|---|---|
    | fail | oom | The GPU ran out of memory<br>- line 3: OOM | halve it |
    <BLANKLINE>
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tfaccel.findings import Finding, counts

__all__ = ["STATUS_STYLE", "render_html", "render_markdown", "render_terminal"]

STATUS_STYLE = {"ok": "green", "skip": "dim", "info": "cyan", "warn": "yellow", "fail": "bold red"}
_SUMMARY_ORDER = ("fail", "warn", "info", "ok", "skip")


@runtime_checkable
class _Report(Protocol):
    """A report object whose ``to_dict()`` is the document (``DoctorReport``)."""

    def to_dict(self) -> dict[str, Any]: ...


FindingLike: TypeAlias = "Finding | Mapping[str, Any]"
Findings: TypeAlias = "Iterable[FindingLike] | Mapping[str, Any] | _Report"


@dataclass
class _Parts:
    """What a renderer shows: findings, and for a doctor's report its log and summary."""

    findings: list[Finding]
    report: bool = False
    log: Mapping[str, Any] | None = None
    causes: tuple[Finding, ...] = ()

    def summary(self) -> tuple[str, str]:
        """The verdict (``failures found``) and the count of each status."""
        number = counts([*self.findings, *self.causes])
        verdict = "failures found" if number["fail"] else "no failures"
        return verdict, ", ".join(f"{number[s]} {s}" for s in _SUMMARY_ORDER)

    def no_cause(self) -> str:
        lines = (self.log or {}).get("line_count", "?")
        return f"no known cause matched ({lines} lines read)"

    def benign(self) -> str | None:
        benign = (self.log or {}).get("benign") or []
        labels = [f"{b.get('label')} (x{b.get('count')})" for b in benign]
        return "benign noise, nothing to fix: " + ", ".join(labels) if labels else None


def _finding(value: FindingLike) -> Finding:
    """A Finding from a Finding or its ``to_dict()``; a status off the scale raises ValueError."""
    if isinstance(value, Finding):
        return value
    return Finding(
        id=str(value["id"]),
        status=value["status"],
        title=str(value.get("title") or ""),
        evidence=[str(e) for e in value.get("evidence") or []],
        fix=None if value.get("fix") is None else str(value["fix"]),
        source=str(value.get("source") or "probe"),
        numbers=dict(value.get("numbers") or {}),
        gain=None if value.get("gain") is None else str(value["gain"]),
    )


def _parts(subject: Findings) -> _Parts:
    if isinstance(subject, Mapping):
        doc: Mapping[str, Any] = subject
    elif isinstance(subject, _Report):
        doc = subject.to_dict()
    else:
        return _Parts([_finding(f) for f in subject])
    log = doc.get("log")
    causes = tuple(_finding(c) for c in (log or {}).get("causes") or [])
    return _Parts([_finding(f) for f in doc.get("findings") or []], True, log, causes)


# -- terminal ----------------------------------------------------------------------------------


def render_terminal(subject: Findings, *, verbose: bool = False) -> RenderableType:
    """The findings for a terminal: one line each, then the evidence, fix and gain.

    Args:
        subject: a list of findings, or the doctor's report (see the module's docstring).
        verbose: show the evidence, fix and gain of every finding; otherwise only of those
            that call for a change (``fail``, ``warn``, ``info``).

    Returns:
        A rich renderable: ``console.print(render_terminal(report))``.
    """
    parts = _parts(subject)
    blocks: list[RenderableType] = []
    if parts.findings:
        blocks.append(_terminal_table(parts.findings, verbose))
    if parts.log is not None:
        blocks.append(_terminal_log(parts, verbose))
    if parts.report:
        verdict, detail = parts.summary()
        blocks.append(Text.assemble((verdict, "bold"), f" ({detail})"))
    return Group(*blocks)


def _terminal_table(findings: list[Finding], verbose: bool) -> Table:
    table = Table(box=None, show_header=False, pad_edge=False, expand=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True, style="bold")
    table.add_column("finding", overflow="fold")
    for f in findings:
        details = Text(f.title)
        if verbose or f.is_problem:
            for evidence in f.evidence:
                details.append(f"\n- {evidence}", style="dim")
            for label, value in (("fix", f.fix), ("gain", f.gain)):
                if value:
                    details.append(f"\n{label}: ", style="bold")
                    details.append(value)
        table.add_row(Text(f.status, style=STATUS_STYLE[f.status]), Text(f.id), details)
    return table


def _terminal_log(parts: _Parts, verbose: bool) -> RenderableType:
    log = parts.log or {}
    lines: list[RenderableType] = [Text.assemble(("Log", "bold"), f" {log.get('source') or ''}")]
    lines += [Text(f"  {note}", style="dim") for note in log.get("notes") or []]
    if parts.causes:
        lines.append(Padding(_terminal_table(list(parts.causes), verbose), (0, 0, 0, 2)))
    else:
        lines.append(Text(f"  {parts.no_cause()}"))
    benign = parts.benign()
    if benign:
        lines.append(Text(f"  {benign}"))
    return Group(*lines)


# -- Markdown ----------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")


def _md(value: str) -> str:
    """Escape text for Markdown: no markup, no raw HTML, line breaks as ``<br>``."""
    text = _MD_SPECIAL.sub(r"\\\1", html.escape(value, quote=False))
    return text.replace("\r\n", "\n").replace("\n", "<br>")


def render_markdown(subject: Findings) -> str:
    """The findings as a Markdown table: status, check, finding (title, evidence), fix (gain).

    Args:
        subject: a list of findings, or the doctor's report (see the module's docstring).

    Returns:
        Markdown text ending with a blank line, with no heading (the caller adds its own).
    """
    parts = _parts(subject)
    out: list[str] = []
    if parts.findings:
        out += _md_table(parts.findings)
    if parts.log is not None:
        log = parts.log
        out += [f"**Log** {_md(str(log.get('source') or ''))}".rstrip(), ""]
        notes = [f"- {_md(str(note))}" for note in log.get("notes") or []]
        out += [*notes, ""] if notes else []
        out += _md_table(list(parts.causes)) if parts.causes else [_md(parts.no_cause()), ""]
        benign = parts.benign()
        out += [_md(benign), ""] if benign else []
    if parts.report:
        verdict, detail = parts.summary()
        out += [f"**{verdict}** ({detail})", ""]
    return "\n".join(out)


def _md_table(findings: list[Finding]) -> list[str]:
    rows = ["| status | check | finding | fix |", "|---|---|---|---|"]
    for f in findings:
        finding = _md(f.title) + "".join(f"<br>- {_md(e)}" for e in f.evidence)
        fix = _md(f.fix or "") + (f"<br>gain: {_md(f.gain)}" if f.gain else "")
        rows.append(f"| {f.status} | {_md(f.id)} | {finding} | {fix} |")
    return [*rows, ""]


# -- HTML --------------------------------------------------------------------------------------


def _e(value: str) -> str:
    """Escape text for HTML, line breaks as ``<br>``."""
    return html.escape(value, quote=True).replace("\n", "<br>")


def render_html(subject: Findings) -> str:
    """The findings as an HTML fragment: a ``<table class="findings">``, every text escaped.

    Each status is a ``<span class="ok|skip|info|warn|fail">``, for the page's stylesheet.

    Args:
        subject: a list of findings, or the doctor's report (see the module's docstring).

    Returns:
        HTML to place inside a page's ``<body>`` (no heading: the caller adds its own).
    """
    parts = _parts(subject)
    out: list[str] = []
    if parts.findings:
        out.append(_html_table(parts.findings))
    if parts.log is not None:
        log = parts.log
        out.append(f"<p><b>Log</b> {_e(str(log.get('source') or ''))}</p>")
        out += [f'<p class="note">{_e(str(note))}</p>' for note in log.get("notes") or []]
        out.append(
            _html_table(list(parts.causes)) if parts.causes else f"<p>{_e(parts.no_cause())}</p>"
        )
        benign = parts.benign()
        if benign:
            out.append(f"<p>{_e(benign)}</p>")
    if parts.report:
        verdict, detail = parts.summary()
        out.append(f"<p><b>{verdict}</b> ({detail})</p>")
    return "\n".join(out)


def _html_table(findings: list[Finding]) -> str:
    rows = []
    for f in findings:
        evidence = "".join(f"<br><small>{_e(e)}</small>" for e in f.evidence)
        gain = f"<br><small>gain: {_e(f.gain)}</small>" if f.gain else ""
        rows.append(
            f'<tr><td><span class="{f.status}">{f.status}</span></td><td>{_e(f.id)}</td>'
            f"<td>{_e(f.title)}{evidence}</td><td>{_e(f.fix or '')}{gain}</td></tr>"
        )
    return (
        '<table class="findings"><thead><tr><th>status</th><th>check</th><th>finding</th>'
        f"<th>fix</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
