"""Render a doctor report (its ``to_dict()`` document) for a terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

__all__ = ["STATUS_STYLE", "render_doctor"]

STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def render_doctor(doc: dict[str, Any], *, verbose: bool = False) -> RenderableType:
    """The ``tfaccel doctor`` screen from ``DoctorReport.to_dict()``.

    Every check gets one line; the evidence and the fix follow for warnings and failures
    (for every check with ``verbose``).
    """
    parts: list[RenderableType] = []
    findings = doc.get("findings") or []
    if findings:
        parts.append(_findings_table(findings, verbose))
    log = doc.get("log")
    if log is not None:
        parts.append(_log_section(log))
    summary = doc.get("summary") or {}
    counts = ", ".join(f"{summary.get(s, 0)} {s}" for s in ("fail", "warn", "ok", "skip"))
    verdict = "failures found" if doc.get("exit_code") else "no failures"
    parts.append(Text.from_markup(f"[bold]{verdict}[/bold] ({counts})"))
    return Group(*parts)


def _findings_table(findings: list[dict[str, Any]], verbose: bool) -> Table:
    table = Table(box=None, show_header=False, pad_edge=False, expand=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True, style="bold")
    table.add_column("what was seen")
    for f in findings:
        status = str(f.get("status", ""))
        style = STATUS_STYLE.get(status, "none")
        lines = [escape(str(f.get("title", "")))]
        if verbose or status in ("warn", "fail"):
            lines += [f"[dim]- {escape(str(e))}[/dim]" for e in f.get("evidence") or []]
            if f.get("fix"):
                lines.append(f"[bold]fix:[/bold] {escape(str(f['fix']))}")
        table.add_row(
            f"[{style}]{escape(status)}[/{style}]", escape(str(f.get("id", ""))), "\n".join(lines)
        )
    return table


def _log_section(log: dict[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    causes = log.get("causes") or []
    header = f"[bold]Log[/bold] {escape(str(log.get('source') or ''))}".rstrip()
    parts.append(Text.from_markup(header))
    for note in log.get("notes") or []:
        parts.append(Text.from_markup(f"  [dim]{escape(str(note))}[/dim]"))
    if not causes:
        lines = log.get("line_count", "?")
        parts.append(Text(f"  no known cause matched ({lines} lines read)"))
    for cause in causes:
        style = STATUS_STYLE.get(str(cause.get("status")), "")
        status, cause_id = escape(str(cause.get("status"))), escape(str(cause.get("id")))
        title = escape(str(cause.get("title", "")))
        parts.append(
            Text.from_markup(f"  [{style}]{status}[/{style}] [bold]{cause_id}[/bold]: {title}")
        )
        for line in cause.get("lines") or []:
            parts.append(Text(f"    line {line.get('line')}: {str(line.get('text'))[:200]}"))
        for detail in cause.get("details") or []:
            parts.append(Text(f"    - {detail}"))
        if cause.get("fix"):
            parts.append(Text.from_markup(f"    fix: {escape(str(cause['fix']))}"))
    benign = log.get("benign") or []
    if benign:
        labels = ", ".join(
            f"{b.get('label')} (x{b.get('count')})" if isinstance(b, dict) else str(b)
            for b in benign
        )
        parts.append(Text(f"  benign noise, nothing to fix: {labels}"))
    return Group(*parts)
