"""Render findings: for a terminal (rich), as Markdown, and as an HTML fragment.

Each renderer takes either a list of findings, or the doctor's report: a
:class:`~tfaccel.diagnosis.DoctorReport` or the document of its ``to_dict()`` (``findings``,
``log``, ...), as report files hold it; the report adds its log part (the causes found in a log,
its notes, the benign noise) and a summary line. A finding may be a
:class:`~tfaccel.core.findings.Finding` or its ``to_dict()``. Each finding shows its status, id and
title, then its evidence, fix and predicted gain. Text from the system (paths, log lines) is
escaped for each format. The JSON form is ``Finding.to_dict()``; nothing here computes anything.

Example:
    >>> from tfaccel.core.findings import Finding
    >>> found = [Finding("oom", "fail", "The GPU ran out of memory", ["line 3: OOM"], "halve it")]
    >>> print(findings_markdown(found))
    | status | check | finding | fix |
    |---|---|---|---|
    | fail | oom | The GPU ran out of memory<br>- line 3: OOM | halve it |
    <BLANKLINE>
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from tfaccel.core.findings import Finding, counts
from tfaccel.core.markup import html_text, md_cell, md_line

__all__ = [
    "STATUS_STYLE",
    "Prose",
    "findings_html",
    "findings_markdown",
    "findings_terminal",
    "wrap_words",
]

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
        if not number["fail"] and (self.log or {}).get("unrecognised_count"):
            verdict = "no known failure, but error lines not recognised (see above)"
        return verdict, ", ".join(f"{number[s]} {s}" for s in _SUMMARY_ORDER)

    def no_cause(self) -> str:
        lines = (self.log or {}).get("line_count", "?")
        if (self.log or {}).get("unrecognised_count"):
            return (
                f"no known cause matched ({lines} lines read), but the log holds error lines "
                "that tfaccel does not recognise"
            )
        return f"no known cause matched ({lines} lines read)"

    def unrecognised(self) -> list[str]:
        """The error lines no known cause claimed: a heading, the quoted lines, the next step."""
        log = self.log or {}
        count = log.get("unrecognised_count") or 0
        if not count:
            return []
        quoted = log.get("unrecognised") or []
        other = " other" if self.causes else ""
        out = [f"not recognised: {count}{other} error line(s) match no known cause:"]
        out += [f"line {u.get('line')}: {u.get('text')}" for u in quoted]
        if count > len(quoted):
            out.append(f"... and {count - len(quoted)} more")
        out.append(f"next: {log.get('next_step') or ''}".rstrip())
        return out

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

# Text narrower than this is not worth wrapping for: lines then run past a narrow terminal's edge.
_MIN_TEXT_WIDTH = 24
# What wrapping keeps together: a word, in which a `backquoted command` and a quoted string that
# starts the word ('libcudnn.so.8', "import tensorflow as tf; ...") count as one character.
_ATOM = re.compile(r"""(?:`[^`]*`|(?<!\S)'[^'\s][^']*'|(?<!\S)"[^"\s][^"]*"|\S)+""")


def findings_terminal(subject: Findings, *, verbose: bool = False) -> RenderableType:
    """The findings for a terminal: one line each, then the evidence, fix and gain.

    Each finding's first line is its status, id and title. Below the title come its evidence
    (``- ...``), ``fix:`` and ``gain:``. Evidence, titles and notes wrap at spaces to the
    terminal's width, never inside a `command` or a quoted string; a fix is never wrapped, so
    its command can be copied as printed. On an unbounded console (a pipe, a file) nothing
    wraps.

    Args:
        subject: a list of findings, or the doctor's report (see the module's docstring).
        verbose: show the evidence, fix and gain of every finding; otherwise only of those
            that call for a change (``fail``, ``warn``, ``info``).

    Returns:
        A rich renderable: ``console.print(findings_terminal(report))``.
    """
    parts = _parts(subject)
    blocks: list[RenderableType] = []
    if parts.findings:
        blocks.append(_FindingRows(parts.findings, verbose))
    if parts.log is not None:
        blocks.append(_terminal_log(parts, verbose))
    if parts.report:
        verdict, detail = parts.summary()
        blocks.append(Text.assemble((verdict, "bold"), f" ({detail})"))
    return Group(*blocks)


def wrap_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken at spaces only: a `command`, a
    quoted string or a word longer than ``width`` stays whole on a line of its own. The text
    of a line is kept as it was, spaces included.

    >>> wrap_words("run `tfaccel doctor --deep` now", 12)
    ['run', '`tfaccel doctor --deep`', 'now']
    """
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        start = end = len(paragraph) - len(paragraph.lstrip())
        begin = 0  # where this line starts: the paragraph's indent, then each wrapped word
        for atom in _ATOM.finditer(paragraph):
            if end > start and cell_len(paragraph[begin : atom.end()]) > width:
                lines.append(paragraph[begin:end])
                begin = start = atom.start()
            end = atom.end()
        lines.append(paragraph[begin:end])
    return lines


def _whole(text: Text) -> Text:
    """A line printed as it is: rich neither wraps nor cuts it."""
    text.no_wrap = True
    text.overflow = "ignore"
    text.end = "\n"
    return text


def _wrapped(text: str, width: int, first: str, rest: str, style: str = "") -> list[RenderableType]:
    """``text`` wrapped to ``width``, its first line after ``first``, the others after ``rest``."""
    lines = wrap_words(text, max(width, _MIN_TEXT_WIDTH))
    out: list[RenderableType] = [_whole(Text(first + lines[0], style=style))]
    out += [_whole(Text(rest + line, style=style)) for line in lines[1:]]
    return out


class Prose:
    """A paragraph for the terminal, wrapped at spaces to its width (see :func:`wrap_words`):
    never inside a `command`, a quoted string or a word, which run past the edge if they must.
    On an unbounded console it is one line."""

    def __init__(self, text: str, style: str = "", indent: str = "", hang: str = "") -> None:
        self.text, self.style, self.indent, self.hang = text, style, indent, hang

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width - max(len(self.indent), len(self.hang))
        yield from _wrapped(self.text, width, self.indent, self.hang, self.style)


class _FindingRows:
    """Findings as aligned rows: status, id, title; evidence, fix and gain under the title."""

    def __init__(self, findings: list[Finding], verbose: bool, indent: int = 0) -> None:
        self.findings = findings
        self.verbose = verbose
        self.indent = indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        status_width = max(len(f.status) for f in self.findings)
        id_width = max(cell_len(f.id) for f in self.findings)
        hang = " " * (self.indent + status_width + 2 + id_width + 2)
        width = options.max_width - len(hang)
        for f in self.findings:
            lines = wrap_words(f.title, max(width, _MIN_TEXT_WIDTH))
            head = Text(" " * self.indent)
            head.append(f.status.ljust(status_width), style=STATUS_STYLE[f.status])
            head.append("  ")
            head.append(f.id.ljust(id_width), style="bold")
            head.append(f"  {lines[0]}".rstrip())
            yield _whole(head)
            for line in lines[1:]:
                yield _whole(Text(hang + line))
            if not (self.verbose or f.is_problem):
                continue
            for evidence in f.evidence:
                yield from _wrapped(evidence, width - 2, f"{hang}- ", f"{hang}  ", style="dim")
            if f.fix:  # never wrapped: a command in it must stay on one line to be copied
                first, *more = f.fix.splitlines() or [""]
                yield _whole(Text.assemble(hang, ("fix: ", "bold"), first))
                for line in more:
                    yield _whole(Text(f"{hang}     {line}".rstrip()))
            if f.gain:
                gain = wrap_words(f.gain, max(width - 6, _MIN_TEXT_WIDTH))
                yield _whole(Text.assemble(hang, ("gain: ", "bold"), gain[0]))
                for line in gain[1:]:
                    yield _whole(Text(f"{hang}      {line}"))


class _LogPart:
    """The log part of a doctor's report: its source, notes, causes and benign noise."""

    def __init__(self, parts: _Parts, verbose: bool) -> None:
        self.parts = parts
        self.verbose = verbose

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        parts, width = self.parts, options.max_width - 2
        log = parts.log or {}
        yield _whole(Text.assemble(("Log", "bold"), f" {log.get('source') or ''}".rstrip()))
        for note in log.get("notes") or []:
            yield from _wrapped(str(note), width, "  ", "  ", style="dim")
        if parts.causes:
            yield _FindingRows(list(parts.causes), self.verbose, indent=2)
        else:
            yield from _wrapped(parts.no_cause(), width, "  ", "  ")
        unread = parts.unrecognised()
        if unread:
            yield from _wrapped(unread[0], width, "  ", "  ", style="yellow")
            for line in unread[1:-1]:
                yield from _wrapped(line, width, "    ", "      ")
            yield from _wrapped(unread[-1], width, "  ", "  ")
        benign = parts.benign()
        if benign:
            yield from _wrapped(benign, width, "  ", "  ")


def _terminal_log(parts: _Parts, verbose: bool) -> RenderableType:
    return _LogPart(parts, verbose)


# -- Markdown ----------------------------------------------------------------------------------


def findings_markdown(subject: Findings) -> str:
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
        out += [f"**Log** {md_cell(str(log.get('source') or ''))}".rstrip(), ""]
        notes = [f"- {md_cell(str(note))}" for note in log.get("notes") or []]
        out += [*notes, ""] if notes else []
        out += _md_table(list(parts.causes)) if parts.causes else [md_cell(parts.no_cause()), ""]
        unread = parts.unrecognised()
        if unread:
            out += [md_cell(unread[0]), ""]
            out += [f"- {md_line(line)}" for line in unread[1:-1]]
            out += ["", md_cell(unread[-1]), ""]
        benign = parts.benign()
        out += [md_cell(benign), ""] if benign else []
    if parts.report:
        verdict, detail = parts.summary()
        out += [f"**{verdict}** ({detail})", ""]
    return "\n".join(out)


def _md_table(findings: list[Finding]) -> list[str]:
    rows = ["| status | check | finding | fix |", "|---|---|---|---|"]
    for f in findings:
        finding = md_cell(f.title) + "".join(f"<br>- {md_cell(e)}" for e in f.evidence)
        fix = md_cell(f.fix or "") + (f"<br>gain: {md_cell(f.gain)}" if f.gain else "")
        rows.append(f"| {f.status} | {md_cell(f.id)} | {finding} | {fix} |")
    return [*rows, ""]


# -- HTML --------------------------------------------------------------------------------------


def findings_html(subject: Findings) -> str:
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
        out.append(f"<p><b>Log</b> {html_text(str(log.get('source') or ''), breaks=True)}</p>")
        out += [
            f'<p class="note">{html_text(str(note), breaks=True)}</p>'
            for note in log.get("notes") or []
        ]
        out.append(
            _html_table(list(parts.causes))
            if parts.causes
            else f"<p>{html_text(parts.no_cause(), breaks=True)}</p>"
        )
        unread = parts.unrecognised()
        if unread:
            items = "".join(f"<li><code>{html_text(line)}</code></li>" for line in unread[1:-1])
            out.append(f"<p>{html_text(unread[0])}</p><ul>{items}</ul>")
            out.append(f"<p>{html_text(unread[-1])}</p>")
        benign = parts.benign()
        if benign:
            out.append(f"<p>{html_text(benign, breaks=True)}</p>")
    if parts.report:
        verdict, detail = parts.summary()
        out.append(f"<p><b>{verdict}</b> ({detail})</p>")
    return "\n".join(out)


def _html_table(findings: list[Finding]) -> str:
    rows = []
    for f in findings:
        evidence = "".join(f"<br><small>{html_text(e, breaks=True)}</small>" for e in f.evidence)
        gain = f"<br><small>gain: {html_text(f.gain, breaks=True)}</small>" if f.gain else ""
        title, fix = html_text(f.title, breaks=True), html_text(f.fix, breaks=True)
        rows.append(
            f'<tr><td><span class="{f.status}">{f.status}</span></td>'
            f"<td>{html_text(f.id, breaks=True)}</td>"
            f"<td>{title}{evidence}</td><td>{fix}{gain}</td></tr>"
        )
    return (
        '<table class="findings"><thead><tr><th>status</th><th>check</th><th>finding</th>'
        f"<th>fix</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
