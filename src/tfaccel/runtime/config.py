"""What ``setup()`` reports: per setting, what was applied, left as it was, and why."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from tfaccel.core.errors import RuntimeSetupError

__all__ = ["JsonValue", "RuntimeConfig", "RuntimeTooLateError", "Setting", "Status"]

Status = Literal["applied", "unchanged", "not_applicable", "too_late"]
JsonValue: TypeAlias = (
    "bool | int | float | str | Sequence[JsonValue] | Mapping[str, JsonValue] | None"
)


@dataclass(frozen=True)
class Setting:
    """What ``setup()`` did with one setting.

    Attributes:
        name: the setting ("precision").
        requested: the value asked for, None when neither an argument nor a variable set it.
        source: where the request came from: "argument", a variable name, or "default".
        applied: the value in effect afterwards (for "too_late": the one TensorFlow kept).
        status: "applied", "unchanged" (not requested: left as it was), "not_applicable"
            (requested, but there is nothing to apply it to, such as GPU memory without a GPU)
            or "too_late" (TensorFlow's runtime had started).
        reason: why, in one sentence.
    """

    name: str
    requested: JsonValue
    source: str
    applied: JsonValue
    status: Status
    reason: str


@dataclass(frozen=True)
class RuntimeConfig:
    """What ``setup()`` applied, left as it was, and why, per setting.

    Printable (``str(config)`` is a table) and JSON-serialisable (``config.to_json()``).
    ``setup()`` called again with the same arguments returns an equal RuntimeConfig.

    Example:
        >>> config = tfaccel.setup(precision="auto")
        >>> config["precision"].status, config["precision"].reason
        ('applied', 'this CPU has avx512_bf16, amx_bf16: ...')
    """

    settings: tuple[Setting, ...]
    warnings: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> Setting:
        for setting in self.settings:
            if setting.name == name:
                return setting
        raise KeyError(name)

    @property
    def too_late(self) -> list[str]:
        """The settings that could not change because the runtime had started."""
        return [s.name for s in self.settings if s.status == "too_late"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"settings": {name: {...}}, "warnings": [...]}``."""
        return {
            "settings": {s.name: dataclasses.asdict(s) for s in self.settings},
            "warnings": list(self.warnings),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def __str__(self) -> str:
        rows = [("setting", "status", "value", "why")]
        rows += [(s.name, s.status, _show(s.applied), s.reason) for s in self.settings]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = ["tfaccel runtime setup:"]
        for row in rows:
            cells = [row[i].ljust(widths[i]) for i in range(3)]
            lines.append("  " + "  ".join([*cells, row[3]]).rstrip())
        lines += [f"  warning: {text}" for text in self.warnings]
        return "\n".join(lines)


class RuntimeTooLateError(RuntimeSetupError):
    """``setup()`` ran after TensorFlow's runtime started, so some settings could not change.

    The settings that can still change were applied before this was raised; ``config`` holds
    the full outcome (statuses "too_late" for the others).

    Attributes:
        config: the RuntimeConfig of the call.
    """

    def __init__(self, config: RuntimeConfig) -> None:
        self.config = config
        applied = [s.name for s in config.settings if s.status == "applied"]
        super().__init__(
            "TensorFlow's runtime had already started, so "
            f"{', '.join(config.too_late)} can no longer change",
            expected=(
                "tfaccel.setup() called before any TensorFlow op, model, or "
                "tf.config.list_logical_devices() (each of these starts the runtime)"
            ),
            received=f"a started runtime; applied anyway: {', '.join(applied) or 'nothing'}",
            fix=(
                "call tfaccel.setup(...) first, right after the imports; or set the "
                "TFACCEL_* variables, or start the script with 'tfaccel run [OPTIONS] SCRIPT'"
            ),
        )


def _show(value: JsonValue) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_show(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(_show(v) for v in value) or "-"
    return str(value)
