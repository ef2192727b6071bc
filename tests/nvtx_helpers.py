"""Record the NVTX ranges a timer or callback marks, at the boundary of
:mod:`tfaccel.profile.nvtx_marks` (its ``ranges`` replaced), without an NVTX tool."""

from __future__ import annotations

from typing import Any

import pytest

from tfaccel.profile import nvtx_marks


class RecordedRanges:
    """Stands in for :class:`nvtx_marks.Ranges`: keeps what a timer pushes and pops."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def push(self, name: str, step: int | None = None) -> None:
        self.events.append(("push", name, step))

    def pop(self) -> None:
        self.events.append(("pop",))


def record_ranges(monkeypatch: pytest.MonkeyPatch) -> RecordedRanges:
    """Every timer or callback made from now on marks into the returned recorder (none with
    ``nvtx=False``)."""
    ranges = RecordedRanges()
    monkeypatch.setattr(nvtx_marks, "ranges", lambda enabled=True: ranges if enabled else None)
    return ranges
