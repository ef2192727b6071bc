"""Name the known causes in a TensorFlow log or traceback.

The patterns (:mod:`tfaccel.diagnosis.log.patterns`) each hold a literal anchor that every
matching line contains; the text is searched for anchors with ``str.find`` (fast, in C) and only
the lines that hold one are looked at further, so a 32 MiB log is matched in about a second.
Each cause found is a :class:`~tfaccel.core.findings.Finding` (source ``log``): its evidence
holds the details read from the lines (a missing library, a tensor's shape and size),
then up to five of
the lines with their numbers; its numbers hold ``count`` (matching lines in all) and
``line_numbers`` (those of the lines shown). Lines that TensorFlow prints on every healthy start
are labelled benign and never called a cause.

Example:
    >>> report = match_log("W0000 00:00:1.0 1 gpu_device.cc:2344] Cannot dlopen some GPU libraries")
    >>> [cause.id for cause in report.causes]
    ['missing_cuda_libs']
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tfaccel.core.findings import Finding, Status
from tfaccel.core.markup import without_ansi
from tfaccel.core.records import Record
from tfaccel.diagnosis.log.facts import read_facts
from tfaccel.diagnosis.log.infer import infer
from tfaccel.diagnosis.log.patterns import (
    BENIGN,
    CAUSES,
    PATTERNS,
    RELIEVED,
    UNNAMED_LIBRARY_FIX,
    Pattern,
)
from tfaccel.diagnosis.log.read import LogText, count_lines, window_text
from tfaccel.diagnosis.log.shape import strip_quotes, wrapped_groups
from tfaccel.diagnosis.log.unrecognised import MAX_QUOTED, UnrecognisedLine, unrecognised_lines

__all__ = ["BUNDLE_HINT", "BenignMatch", "LogReport", "UnrecognisedLine", "match_log"]

MAX_LINES_SHOWN = 5
MAX_LINE_CHARS = 300
MAX_DETAILS = 8
DETAIL_LINES = 100  # details are read from the first lines of a cause only
JOIN_LIMIT_CHARS = 1024 * 1024  # wrapped lines are joined in texts up to this size (pastes)
# What to do with error lines the matcher did not recognise.
BUNDLE_HINT = (
    "tfaccel doctor --log {log} --bundle tfaccel-bundle.md (on the machine that wrote the log) "
    "writes one redacted file with the log, versions and findings: attach it to a bug report"
)


@dataclass
class BenignMatch(Record):
    """Log noise that is not a problem, counted under one label."""

    label: str
    count: int
    first_line: int


@dataclass
class LogReport:
    """What the log matcher found.

    Attributes:
        causes: known causes, as findings (source ``log``), in the order they first appear.
        benign: noise lines, labelled.
        line_count: lines in the scanned text.
        bytes_scanned: bytes of input that were scanned.
        notes: remarks on the input (which part of a big file was scanned, its encoding).
        source: where the text came from (a path, ``<stdin>``), when known.
        unrecognised: error lines (``E``/``F`` lines, exceptions, ``Check failed``) that no
            cause and no benign label claimed, once per message, the first
            :data:`~tfaccel.diagnosis.log.unrecognised.MAX_QUOTED` of them.
        unrecognised_count: how many such distinct error lines the log holds.
    """

    causes: list[Finding] = field(default_factory=list)
    benign: list[BenignMatch] = field(default_factory=list)
    line_count: int = 0
    bytes_scanned: int = 0
    notes: list[str] = field(default_factory=list)
    source: str | None = None
    unrecognised: list[UnrecognisedLine] = field(default_factory=list)
    unrecognised_count: int = 0

    @property
    def matched(self) -> bool:
        """True when at least one known cause matched."""
        return bool(self.causes)

    @property
    def summary(self) -> str:
        """One line: which causes matched, or that none did; and the error lines not read."""
        unread = (
            f"{self.unrecognised_count} error line(s) not recognised"
            if self.unrecognised_count
            else ""
        )
        if not self.causes:
            if unread:
                return f"no known cause matched, but {unread}; {self.line_count} lines read"
            return f"no known cause matched; {self.line_count} lines read"
        ids = ", ".join(cause.id for cause in self.causes)
        named = f"{len(self.causes)} known cause(s) in {self.line_count} lines: {ids}"
        return f"{named}; {unread}" if unread else named

    @property
    def next_step(self) -> str | None:
        """What to do about error lines not recognised (None when there are none)."""
        if not self.unrecognised_count:
            return None
        given = shlex.quote(self.source) if self.source and self.source != "<stdin>" else "LOG"
        return BUNDLE_HINT.format(log=given)

    def findings(self, source: str = "log") -> list[Finding]:
        """The causes tagged with ``source`` (``deep`` for the log of ``doctor --deep``)."""
        return [dataclasses.replace(cause, source=source) for cause in self.causes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "matched": self.matched,
            "summary": self.summary,
            "causes": [cause.to_dict() for cause in self.causes],
            "benign": [b.to_dict() for b in self.benign],
            "line_count": self.line_count,
            "bytes_scanned": self.bytes_scanned,
            "notes": list(self.notes),
            "unrecognised": [u.to_dict() for u in self.unrecognised],
            "unrecognised_count": self.unrecognised_count,
            "next_step": self.next_step,
        }


def match_log(text: str | LogText, source: str | None = None) -> LogReport:
    """Find the known causes and the benign noise in a TensorFlow log or traceback.

    Args:
        text: the log text, or a :class:`~tfaccel.diagnosis.LogText` from
            :func:`~tfaccel.diagnosis.read_log_file`. Text longer than 32 Mi characters is
            scanned in its first 8 Mi and last 24 Mi characters.
        source: where the text came from, shown in the report.

    Returns:
        A :class:`LogReport`; ``report.matched`` is False when no known cause matched.

    Example:
        >>> match_log("OOM when allocating tensor with shape[64,512,512]").causes[0].id
        'oom'
    """
    if isinstance(text, LogText):
        body, notes, scanned = text.text, list(text.notes), text.bytes_scanned
        source = source or text.source
    else:
        body, notes = window_text(text)
        scanned = len(body.encode("utf-8", errors="replace"))
    body = strip_quotes(_clean(body))
    causes, benign, claimed = _scan(body)
    causes = infer(causes, read_facts(body))
    unread = unrecognised_lines(body, claimed)
    return LogReport(
        causes,
        benign,
        count_lines(body),
        scanned,
        notes,
        source,
        unread[:MAX_QUOTED],
        len(unread),
    )


def _clean(text: str) -> str:
    """Strip ANSI colour codes and treat carriage returns (progress bars) as line breaks."""
    text = without_ansi(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


@dataclass
class _Hits:
    """Matches of one cause (or one benign label) while scanning."""

    first_lines: list[tuple[int, str]] = field(default_factory=list)  # (start offset, text)
    status: Status = "warn"
    details: dict[str, None] = field(default_factory=dict)  # ordered set
    starts: set[int] = field(default_factory=set)  # every line counted, by its start offset

    @property
    def count(self) -> int:
        return len(self.starts)

    def add(self, start: int, line: str) -> None:
        """Count a line; keep it if it is among the first ``MAX_LINES_SHOWN`` in the text."""
        self.starts.add(start)
        kept = self.first_lines
        if len(kept) == MAX_LINES_SHOWN and start > kept[-1][0]:
            return
        bisect.insort(kept, (start, _shown(line)))
        del kept[MAX_LINES_SHOWN:]

    def remove(self, start: int) -> None:
        """Give a line back (a wrapped message that names a more specific cause claims it)."""
        self.starts.discard(start)
        self.first_lines = [(s, text) for s, text in self.first_lines if s != start]


def _take_back(cause_hits: dict[str, _Hits], cause: str, start: int) -> None:
    """Give ``cause``'s hit at ``start`` back, once; a cause left with none is dropped."""
    hits = cause_hits.get(cause)
    if hits is not None:
        hits.remove(start)
        if not hits.starts:
            del cause_hits[cause]


def _shown(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 3] + "..."


def _lines_with(text: str, anchor: str) -> Iterator[tuple[int, str]]:
    """Yield every line holding ``anchor`` as ``(start offset, line)``, each line once."""
    pos = text.find(anchor)
    while pos != -1:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        end = len(text) if end == -1 else end
        yield start, text[start:end]
        pos = text.find(anchor, end)


def _scan(text: str) -> tuple[list[Finding], list[BenignMatch], set[int]]:
    claimed: dict[int, str] = {}  # line start -> cause id or benign label
    claimed_by: dict[int, Pattern] = {}  # line start -> the pattern that claimed it for a cause
    cause_hits: dict[str, _Hits] = {}
    for pattern in PATTERNS:
        for start, line in _lines_with(text, pattern.anchor):
            if start in claimed or (pattern.regex and not pattern.regex.search(line)):
                continue
            claimed[start] = pattern.cause
            claimed_by[start] = pattern
            _record(cause_hits.setdefault(pattern.cause, _Hits()), pattern, start, line)
    groups = list(wrapped_groups(text)) if len(text) <= JOIN_LIMIT_CHARS else []
    any_anchor = _any_anchor()  # a joined line without an anchor can name nothing
    groups = [g for g in groups if any_anchor.search(g.joined) or any_anchor.search(g.glued)]
    for group in groups:
        _scan_wrapped(group.starts, (group.joined, group.glued), claimed, claimed_by, cause_hits)
    benign_hits: dict[str, _Hits] = {}
    for group in groups:  # a message that goes on to say the run is not stopped (RELIEVED)
        for label, (goes_on, anchors) in RELIEVED.items():
            if goes_on in group.joined and any(a in group.joined for a in anchors):
                _relieve(group.starts, label, anchors, claimed, claimed_by, cause_hits)
                benign_hits.setdefault(label, _Hits()).add(group.starts[0], group.joined)
    for label, anchors in BENIGN.items():
        for anchor in anchors:
            for start, line in _lines_with(text, anchor):
                if start not in claimed:
                    claimed[start] = label
                    benign_hits.setdefault(label, _Hits()).add(start, line)
    for group in groups:
        if not any(start in claimed for start in group.starts):
            joined_label = _benign_label((group.joined, group.glued))
            if joined_label is not None:
                claimed.update(dict.fromkeys(group.starts, joined_label))
                benign_hits.setdefault(joined_label, _Hits()).add(group.starts[0], group.joined)
    causes, benign = _build_results(text, cause_hits, benign_hits)
    return causes, benign, set(claimed)


def _relieve(
    starts: tuple[int, ...],
    label: str,
    anchors: tuple[str, ...],
    claimed: dict[int, str],
    claimed_by: dict[int, Pattern],
    cause_hits: dict[str, _Hits],
) -> None:
    """Give the lines of a message whose claiming pattern's anchor is one of ``anchors`` to
    the benign ``label`` (:data:`RELIEVED`), each counted hit taken back once (a message
    claimed as a whole, wrapped over lines, counted one hit for all); lines other causes
    claimed keep them."""
    for s in starts:
        old = claimed_by.get(s)
        if old is None or old.anchor not in anchors:
            continue
        del claimed_by[s]
        claimed[s] = label
        _take_back(cause_hits, old.cause, s)


@functools.cache
def _any_anchor() -> re.Pattern[str]:
    """One regex for every anchor, cause or benign: a joined line without one is skipped."""
    anchors = {p.anchor for p in PATTERNS} | {a for group in BENIGN.values() for a in group}
    return re.compile("|".join(re.escape(a) for a in sorted(anchors, key=len, reverse=True)))


def _record(hits: _Hits, pattern: Pattern, start: int, line: str) -> None:
    hits.add(start, line)
    if pattern.status == "fail":
        hits.status = "fail"
    if pattern.detail and hits.count <= DETAIL_LINES:
        value = pattern.detail(line)
        if value and len(hits.details) < MAX_DETAILS:
            hits.details[value] = None


def _scan_wrapped(
    starts: tuple[int, ...],
    variants: tuple[str, str],
    claimed: dict[int, str],
    claimed_by: dict[int, Pattern],
    cause_hits: dict[str, _Hits],
) -> None:
    """Match one message wrapped over several lines, as joined at a space and mid-word.

    Where a line of it already named a cause, the joined message only adds the details that
    line alone did not hold (a name cut off by the wrap), unless the joined message matches a
    more specific pattern (one listed earlier) of another cause: then that cause claims the
    message's lines (``CUDA_ERROR_OUT_OF_MEMORY`` alone is ``oom``; wrapped after
    ``failed call to cuDevicePrimaryCtxRetain:`` it is ``gpu_memory_in_use``).
    """
    claimed_here = [claimed_by[s] for s in starts if s in claimed_by]
    if claimed_here:
        pattern = claimed_here[0]
        better = _earlier_match(variants, _pattern_rank()[id(pattern)])
        if better is not None and better.cause != pattern.cause:
            for s in starts:
                old = claimed_by.pop(s, None)
                if old is not None:
                    _take_back(cause_hits, old.cause, s)
                claimed[s] = better.cause
                claimed_by[s] = better
            _record(cause_hits.setdefault(better.cause, _Hits()), better, starts[0], variants[0])
            return
        hits = cause_hits[pattern.cause]
        if pattern.detail and len(hits.details) < MAX_DETAILS:
            for variant in variants:
                value = pattern.detail(variant)
                if value:
                    hits.details.setdefault(value, None)
                    break
        return
    if any(s in claimed for s in starts):
        return
    for pattern in PATTERNS:
        for variant in variants:
            if pattern.anchor in variant and (
                pattern.regex is None or pattern.regex.search(variant)
            ):
                for s in starts:
                    claimed[s] = pattern.cause
                    claimed_by[s] = pattern
                hits = cause_hits.setdefault(pattern.cause, _Hits())
                _record(hits, pattern, starts[0], variants[0])
                if variant is not variants[0] and pattern.detail:
                    value = pattern.detail(variant)
                    if value and len(hits.details) < MAX_DETAILS:
                        hits.details.setdefault(value, None)
                return


@functools.cache
def _pattern_rank() -> dict[int, int]:
    """Each pattern's place in :data:`PATTERNS` (earlier is more specific), by identity."""
    return {id(p): i for i, p in enumerate(PATTERNS)}


def _earlier_match(variants: tuple[str, str], before: int) -> Pattern | None:
    """The first of the patterns listed before ``before`` that the joined message matches."""
    for pattern in PATTERNS[:before]:
        for variant in variants:
            if pattern.anchor in variant and (
                pattern.regex is None or pattern.regex.search(variant)
            ):
                return pattern
    return None


def _benign_label(variants: tuple[str, str]) -> str | None:
    for label, anchors in BENIGN.items():
        if any(anchor in variant for anchor in anchors for variant in variants):
            return label
    return None


def _build_results(
    text: str, cause_hits: dict[str, _Hits], benign_hits: dict[str, _Hits]
) -> tuple[list[Finding], list[BenignMatch]]:
    wanted = [start for hits in cause_hits.values() for start, _ in hits.first_lines]
    wanted += [hits.first_lines[0][0] for hits in benign_hits.values()]
    numbers = _line_numbers(text, wanted)
    in_order = sorted(cause_hits.items(), key=lambda item: item[1].first_lines[0][0])
    causes = [_cause(cause, hits, numbers) for cause, hits in in_order]
    benign = [
        BenignMatch(label, hits.count, numbers[hits.first_lines[0][0]])
        for label, hits in benign_hits.items()
    ]
    benign.sort(key=lambda b: b.first_line)
    return causes, benign


def _cause(cause: str, hits: _Hits, numbers: dict[int, int]) -> Finding:
    """One cause as a finding: the details, then the first lines, then how many matched."""
    lines = [(numbers[start], line) for start, line in hits.first_lines]
    evidence = list(hits.details) + [f"line {number}: {line}" for number, line in lines]
    if hits.count > len(lines):
        evidence.append(f"{hits.count} matching lines in all")
    fix = CAUSES[cause].fix
    if cause == "missing_cuda_libs" and not hits.details:
        fix = UNNAMED_LIBRARY_FIX  # "Cannot dlopen some GPU libraries" alone: make TF name it
    return Finding(
        cause,
        hits.status,
        CAUSES[cause].title,
        evidence,
        fix,
        source="log",
        numbers={
            "count": hits.count,
            "line_numbers": [number for number, _ in lines],
            "strength": "message",
        },
    )


def _line_numbers(text: str, starts: list[int]) -> dict[int, int]:
    """Map line start offsets to 1-based line numbers, counting newlines once, in order."""
    result: dict[int, int] = {}
    line, previous = 1, 0
    for start in sorted(set(starts)):
        line += text.count("\n", previous, start)
        previous = start
        result[start] = line
    return result
