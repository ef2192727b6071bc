"""The values doctor produces: findings from rules and matches from the log matcher."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "warn", "fail", "skip"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail", "skip")


@dataclass
class Finding:
    """The outcome of one check.

    Attributes:
        id: stable slug (``missing_cuda_libs``); never renamed.
        status: ``ok`` (checked, fine), ``warn`` (works, but worse than it could),
            ``fail`` (the GPU or TensorFlow will not work as intended),
            ``skip`` (does not apply here).
        title: one line a user reads first.
        evidence: what was seen, one fact per line.
        fix: the exact command or change that mends it; None when there is nothing to do.
        source: ``probe`` (from the machine), ``log`` (from a TensorFlow log),
            ``deep`` (the TensorFlow subprocess of ``doctor --deep``).
    """

    id: str
    status: Status
    title: str
    evidence: list[str] = field(default_factory=list)
    fix: str | None = None
    source: str = "probe"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
