"""What an out-of-memory log says about the device and the batch.

TensorFlow's GPU allocator prints its limit when it fails (``Limit: 3059430195`` in the BFC
allocator's stats, ``memory_limit_: ...``), and the device was created with a size (``Created
TensorFlow device (... with 9858 MB memory)``). The failing tensor's shape
(``OOM when allocating tensor with shape[255,256,256,69]``) often starts with the batch.
:func:`oom_context` reads them, so a plan can say which batch fits that device.

Example:
    >>> ctx = oom_context("Limit:   3059430195\\nOOM when allocating tensor with shape[64,3]")
    >>> ctx.usable_bytes, ctx.shape
    (3059430195, (64, 3))
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["OomContext", "oom_context"]

_LIMIT_RES = (
    re.compile(r"^\s*Limit:\s+(?P<n>\d{6,})\s*$", re.MULTILINE),
    re.compile(r"memory_limit_:\s*(?P<n>\d{6,})"),
)
_CREATED_RE = re.compile(
    r"Created (?:TensorFlow )?device \(?\S*GPU:\d+ with (?P<mb>\d+) ?MB memory"
)
_SHAPE_RE = re.compile(r"OOM when allocating tensor with shape ?\[(?P<shape>[\d, ]+)\]")


@dataclass(frozen=True)
class OomContext:
    """The device size and failing shape an out-of-memory log shows.

    Attributes:
        usable_bytes: what the allocator could hand out (None: the log does not say).
        usable_from: the log line it was read from.
        shape: the shape of the tensor that did not fit (None: not in the log).
    """

    usable_bytes: int | None
    usable_from: str | None
    shape: tuple[int, ...] | None

    @property
    def batch_guess(self) -> int | None:
        """The first dimension of the failing tensor: the batch, in most models."""
        return self.shape[0] if self.shape and self.shape[0] > 0 else None


def oom_context(text: str) -> OomContext:
    """The allocator's limit (or the device's size) and the failing shape, when the log has them."""
    usable = source = None
    for pattern in _LIMIT_RES:
        match = pattern.search(text)
        if match is not None:
            usable, source = int(match.group("n")), _line_of(text, match.start())
            break
    if usable is None:
        match = _CREATED_RE.search(text)
        if match is not None:
            usable, source = int(match.group("mb")) * 2**20, _line_of(text, match.start())
    shape = None
    match = _SHAPE_RE.search(text)
    if match is not None:
        dims = [d.strip() for d in match.group("shape").split(",")]
        if dims and all(d.isdigit() and len(d) < 10 for d in dims):
            shape = tuple(int(d) for d in dims)
    return OomContext(usable, source, shape)


def _line_of(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    line = " ".join(text[start : end if end >= 0 else len(text)].split())
    return line if len(line) <= 200 else line[:197] + "..."
