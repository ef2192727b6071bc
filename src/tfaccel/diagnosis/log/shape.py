"""Undo what pasting does to a log: quote prefixes, and messages hard-wrapped over lines.

Logs reach the doctor through terminals, e-mail and issue trackers. Two things happen there:

* e-mail replies and Markdown quotes put ``> `` (or ``> > ``) before every line;
  :func:`strip_quotes` removes it and keeps every line where it was (line numbers stay those of
  the paste), but never touches a Python prompt (``>>> ``);
* narrow terminals and mail programs wrap one message over two or three lines, at a space or in
  the middle of a word, often indenting the rest; :func:`wrapped_groups` finds the runs of lines
  that read as one message, so the matcher can look at them joined.

A line starts a new message when it looks like the start of one: a log prefix (``2024-01-01
12:00:00``, ``W0000 00:00:...``), a traceback line, a prompt (``>>>``, ``$``, ``In [1]:``), a
listing row (``tensorflow   2.16.1``), a bracket, a bullet, a blank line. Any other line is
taken to continue the line before it, up to :data:`MAX_GROUP_LINES` lines (a message cut in
prose can leave a line as short as ``Loaded runtime CuD``). A wrong join costs little: the
matcher looks at joined lines only where no single line named a cause.

Example:
    >>> strip_quotes("> > Could not load dynamic library\\n>>> import tensorflow as tf")
    'Could not load dynamic library\\n>>> import tensorflow as tf'
    >>> text = "W dso_loader.cc:55] Could not load dynamic\\n    library 'libcudart.so.11.0'"
    >>> [g.joined for g in wrapped_groups(text)]
    ["W dso_loader.cc:55] Could not load dynamic library 'libcudart.so.11.0'"]
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["MAX_GROUP_LINES", "Group", "strip_quotes", "wrapped_groups"]

MAX_GROUP_LINES = 6  # a message is joined over at most this many lines

# One or more quote marks at the start of a line: "> ", ">> ", "> > ", but not a prompt ">>> ".
_QUOTES_RE = re.compile(r"^(?:[ \t]*>(?!>>(?:[ \t]|$))[ \t]?)+", re.MULTILINE)

_RECORD_START_RE = re.compile(
    r"""
      \s*$                                              # a blank line
    | \s*\d{4}-\d\d-\d\d[ T]\d                          # 2024-01-01 12:00:00...
    | \s*\d\d?:\d\d:\d\d                                # 12:00:00
    | [IWEF]\d{4}\s+\d\d:\d\d:\d                         # absl / glog: W0000 00:00:...
    | [IWEF]\s(?:tensorflow|external|xla|third_party)/  # W tensorflow/core/...
    | \s*(?:Traceback\b|File\s"|During\shandling|The\sabove\sexception)
    | \s*(?:>>>|\.\.\.(?:\s|$)|In\s?\[\d*\]:|Out\[\d+\]:)   # Python and IPython prompts
    | \s*[\w.]*(?:Error|Exception|Warning)\b            # ImportError: ..., UserWarning
    | \s*(?:\$|\#|%|PS\s[A-Za-z]:\\)\s?                  # shell prompts
    | \s*[A-Za-z]:\\[^>\n]*>                            # C:\Users\me>
    | \s*\(\S+\)\s                                      # (venv) user@host:~$
    | \s*\S+@\S+:\S*[$\#]                               # user@host:~$
    | \s*[\[{(<]                                        # [PhysicalDevice(...)], {...}
    | \s*(?:WARNING|ERROR|INFO|DEBUG|CRITICAL|FATAL)\b
    | \s*(?:Successfully|Collecting|Requirement|Downloading|Installing|Using\scached)\b
    | \s*[-=*\#~_`|]{3,}                                # rules, fences, tables
    | \S+[ \t]{2,}\S                                    # a listing row: name   version
    | \s*[\w.-]+==\d                                    # pip freeze
    | \s*[-*+]\s                                        # a bullet
    | \s*\d+[.)]\s                                      # a numbered item
    | \s*\#{1,6}\s                                      # a Markdown heading
    """,
    re.VERBOSE,
)


def strip_quotes(text: str) -> str:
    """Remove e-mail and Markdown quote prefixes (``> ``); a ``>>> `` prompt stays.

    Every line stays on its line, so line numbers are those of the text as given.
    """
    if ">" not in text:
        return text
    return _QUOTES_RE.sub("", text)


@dataclass(frozen=True)
class Group:
    """Lines that read as one wrapped message.

    Attributes:
        starts: the offset in the text of each of its lines (two or more).
        joined: the lines joined with a space (a wrap at a space).
        glued: the lines joined with nothing (a wrap in the middle of a word).
    """

    starts: tuple[int, ...]
    joined: str
    glued: str


def wrapped_groups(text: str) -> Iterator[Group]:
    """Yield each run of lines that reads as one message wrapped over several lines."""
    starts: list[int] = []
    parts: list[str] = []
    offset = 0
    previous_blank = True
    for line in text.split("\n"):
        starts_record = _RECORD_START_RE.match(line) is not None
        if parts and not previous_blank and not starts_record and len(parts) < MAX_GROUP_LINES:
            starts.append(offset)
            parts.append(line.strip())
        else:
            if len(parts) > 1:
                yield _group(starts, parts)
            starts, parts = [offset], [line.rstrip()]
        previous_blank = not line.strip()
        offset += len(line) + 1
    if len(parts) > 1:
        yield _group(starts, parts)


def _group(starts: list[int], parts: list[str]) -> Group:
    first = parts[0]
    rest = [p for p in parts[1:] if p]
    return Group(tuple(starts), " ".join([first.rstrip(), *rest]), first.rstrip() + "".join(rest))
