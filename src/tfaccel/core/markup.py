"""Markup: the one Markdown escaper and the one HTML escaper of every renderer.

Text that came from the system (device names, paths, log lines, a finding's evidence) is shown
as text, never read as markup:

- :func:`md_text`: Markdown without markup or raw HTML (line breaks kept);
- :func:`md_cell`: the same for a table cell, where a ``|`` would open a column and a line
  break would end the row (``<br>`` instead);
- :func:`md_line`: the same on one line, every run of white space one space;
- :func:`html_text`: HTML text or attribute value (``<br>`` for line breaks with ``breaks``).

None is the empty text in each.
"""

from __future__ import annotations

import html
import re
from typing import Any

__all__ = ["html_text", "md_cell", "md_line", "md_text", "without_ansi"]

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
"""A terminal's colour or style code (CSI), or an operating system command (OSC: a title,
a link)."""
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def md_text(value: Any) -> str:
    """Text as Markdown shows it: markup and raw HTML escaped (line breaks kept)."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(_text(value), quote=False))


def md_cell(value: Any) -> str:
    """Text for a Markdown table cell: :func:`md_text`, line breaks as ``<br>``."""
    return _LINE_BREAK.sub("<br>", md_text(value))


def md_line(value: Any) -> str:
    """Text as Markdown shows it on one line: :func:`md_text` of the words, one space apart."""
    return md_text(" ".join(_text(value).split()))


def html_text(value: Any, *, breaks: bool = False) -> str:
    """Text for HTML, quotes escaped (safe in an attribute too); ``breaks``: line breaks as
    ``<br>``."""
    escaped = html.escape(_text(value), quote=True)
    return _LINE_BREAK.sub("<br>", escaped) if breaks else escaped


def without_ansi(text: str) -> str:
    """``text`` without terminal colour and style codes (Keras prints a layer's error in bold;
    a pasted log keeps its colours)."""
    return _ANSI.sub("", text) if "\x1b" in text else text
