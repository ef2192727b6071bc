"""Error lines that no known message claimed: what the report quotes instead of "no cause".

A log the matcher names nothing in may still hold an error: an absl/glog ``E``/``F`` line
(``E0000 00:00:... file.cc:42] ...``, ``2024-01-01 ... E tensorflow/...``), a Python exception
(``SomeError: ...``, the last line of a ``Traceback``), ``Check failed``, or a logger's
``ERROR:`` line. :func:`unrecognised_lines` finds those that no cause and no benign label
claimed, so the report can quote a few (trimmed) and say that it did not read them, never
"no cause found" over an error it did not understand.

Example:
    >>> text = "I0000 00:00:1.0 1 x.cc:1] fine\\nE0000 00:00:1.0 1 y.cc:9] Something broke"
    >>> [(u.line, u.text) for u in unrecognised_lines(text, set())]
    [(2, 'E0000 00:00:1.0 1 y.cc:9] Something broke')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tfaccel.core.records import Record

__all__ = ["MAX_QUOTED", "UnrecognisedLine", "unrecognised_lines"]

MAX_QUOTED = 5  # error lines quoted in the report
MAX_CHARS = 200  # each trimmed to this many characters

# What an error line looks like, matched at the start of a line: each alternative is one kind.
_ERROR_RE = re.compile(
    r"""[ \t]*`{0,3}(?:                                           # ```: a Markdown fence's
        (?:\d{4}-\d\d-\d\d[ T][\d:.,]+:?[ \t]+)?              # 2024-01-01 12:00:00.123:
        [EF](?:\d{4}[ \t]+\d\d:\d\d:[\d.]+[ \t]+\d+[ \t]+|[ \t]+)   # E0000 00:00:1.0 7 / E
        \S+:\d+\][ \t]*\S                                   # file.cc:42] message
      | (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Failure)        # ValueError: ... and
        (?:[ \t]+\([^)\n]*\))?:[ \t]*\S                          # X (see above for ...):
      | (?:ERROR|FATAL|CRITICAL)(?::[\w.]*:|:)[ \t]*\S          # ERROR:tensorflow: / ERROR:
    )""",
    re.VERBOSE,
)
_CHECK_FAILED = "Check failed:"
# Text that every error line holds, found with str.find (fast, in C) before a line is read:
# absl/glog lines start with E or F, or carry ": E " after a timestamp.
_MARKERS = (
    "\nE",
    "\nF",
    ": E ",
    ": F ",
    "Error:",
    "Error (",  # TensorFlow 1: XError (see above for traceback): ...
    "Exception:",
    "Failure:",
    "ERROR:",
    "FATAL",
    "CRITICAL:",
    _CHECK_FAILED,
)
_TRACEBACK = "Traceback (most recent call last):"


@dataclass
class UnrecognisedLine(Record):
    """An error line that named no known cause: its line number and its text (trimmed)."""

    line: int
    text: str


def unrecognised_lines(text: str, claimed: set[int]) -> list[UnrecognisedLine]:
    """Every error line whose start offset is not in ``claimed``, once per message, in order.

    Args:
        text: the log as the matcher scanned it.
        claimed: start offsets of the lines a cause or a benign label claimed.

    Returns:
        One :class:`UnrecognisedLine` per distinct message (the first line that shows it);
        a traceback whose last line is not an error line gives that last line.
    """
    starts = set(_traceback_ends(text))
    for start in _candidates(text):
        end = text.find("\n", start)
        candidate = text[start : end if end != -1 else len(text)]
        if _ERROR_RE.match(candidate) or _CHECK_FAILED in candidate:
            starts.add(start)
    found: list[UnrecognisedLine] = []
    seen: set[str] = set()
    line, previous = 1, 0
    for start in sorted(starts):
        if start in claimed:
            continue
        end = text.find("\n", start)
        raw = text[start : end if end != -1 else len(text)].strip()
        key = _message(raw)
        if not key or key in seen:
            continue
        seen.add(key)
        line += text.count("\n", previous, start)
        previous = start
        found.append(UnrecognisedLine(line, _trimmed(raw)))
    return found


def _candidates(text: str) -> set[int]:
    """The start of every line that holds one of :data:`_MARKERS` (the first line too)."""
    found = {0}
    for marker in _MARKERS:
        pos = text.find(marker)
        while pos != -1:
            found.add(text.rfind("\n", 0, pos + 1 if marker[0] == "\n" else pos) + 1)
            pos = text.find(marker, pos + 1)
    return found


def _traceback_ends(text: str) -> list[int]:
    """The start of the line that ends each traceback: the first unindented line after it that
    is not a ``File`` line (the exception, even one not named ``...Error``); none where that
    line is a Markdown fence (a paste cut before the exception)."""
    ends = []
    pos = text.find(_TRACEBACK)
    while pos != -1:
        cursor = text.find("\n", pos)
        while cursor != -1:
            start = cursor + 1
            cursor = text.find("\n", start)
            line = text[start : cursor if cursor != -1 else len(text)]
            if line.strip() and not line[:1].isspace() and not line.startswith(_TRACEBACK):
                if not line.startswith(("```", "~~~")):
                    ends.append(start)  # a Markdown fence: the paste ends before the error
                break
        pos = text.find(_TRACEBACK, pos + len(_TRACEBACK))
    return ends


def _message(line: str) -> str:
    """The part of a line that repeats: an absl/glog line's message, without its time, thread
    and source file (``E0000 00:00:1.0 7 x.cc:9] msg`` -> ``msg``)."""
    head, sep, rest = line.partition("] ")
    return rest.strip() if sep and len(head) < 160 and ":" in head else line


def _trimmed(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 3] + "..."
