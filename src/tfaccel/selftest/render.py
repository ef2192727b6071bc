"""The self-test on the terminal: one row per step, the end of each failure's output, the files;
and the ``--list`` text of a plan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tfaccel.selftest.runner import Step

if TYPE_CHECKING:
    from rich.console import RenderableType

    from tfaccel.selftest import SelftestResult

__all__ = ["command_of", "render_plan", "render_result"]

_STYLE = {"passed": "green", "failed": "bold red", "timed-out": "bold red", "skipped": "yellow"}
_FAILED_LINES = 8


def command_of(kind: str) -> str:
    """The command line that runs the self-test of ``kind`` (``gpu``, ``gpu-offline``,
    ``gpu-simulated``)."""
    return {
        "gpu-offline": "tfaccel selftest --gpu --offline",
        "gpu-simulated": "tfaccel selftest --gpu --offline --simulate",
    }.get(kind, "tfaccel selftest --gpu")


def render_result(result: SelftestResult) -> RenderableType:
    """The terminal screen: one row per step, the end of each failure's output, the files."""
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    # local: the report layer imports rich (and numpy), which selftest's import does not need
    from tfaccel.report.findings import Prose
    from tfaccel.report.text import whole_columns

    command = command_of(result.kind)
    if result.status == "skipped":
        return Prose(f"{command}: skipped: {result.reason}")
    machine = result.machine
    title = command
    if machine.get("gpus"):
        title += " on " + ", ".join(g["name"] for g in machine["gpus"])
    versions = [
        f"{name} {version}"
        for name, version in (
            ("driver", machine.get("driver_version")),
            ("CUDA", machine.get("cuda_driver_version")),
            ("TensorFlow", machine.get("tensorflow", {}).get("version")),
        )
        if version
    ]
    if versions:
        title += f" ({', '.join(versions)})"
    table = Table(title=escape(title), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("step")
    table.add_column("status")
    table.add_column("seconds", justify="right")
    table.add_column("what / why")
    for number, step in enumerate(result.steps, 1):
        style = _STYLE[step.status]
        note = step.reason if step.reason else step.step.what
        table.add_row(
            str(number),
            escape(step.name),
            f"[{style}]{step.status}[/{style}]",
            f"{step.seconds:.1f}" if step.timeout_s is not None else "-",  # it ran
            escape(note),
        )
    parts: list[RenderableType] = [whole_columns(table, frozenset({0, 1, 2, 3}))]
    for step in result.failed:
        lines = [line for line in step.output_tail.splitlines() if line.strip()]
        parts.append(Text(f"{step.name} ({step.status}), the end of its output:", style="bold"))
        parts.append(Text("\n".join("  " + line for line in lines[-_FAILED_LINES:]) or "  -"))
        if step.log:
            parts.append(Text(f"  whole output: {step.log}"))
    counts = ", ".join(f"{n} {status}" for status, n in result.counts().items() if n)
    verdict = {
        "passed": "no step failed",
        "failed": f"{len(result.failed)} step(s) failed",
        "interrupted": "interrupted",
    }.get(result.status, result.status)
    parts.append(Prose(f"{verdict} ({counts}) in {result.seconds:.0f} s", style="bold"))
    parts += [Text(f"{kind}: {path}") for kind, path in result.files().items()]
    return Group(*parts)


def render_plan(
    steps: Sequence[Step],
    *,
    budget_s: float,
    missing: str | None,
    command: str = "tfaccel selftest --gpu",
) -> str:
    """The ``--list`` text: each step, its timeout and its command (or why it will not run)."""
    lines = [f"{command}: {len(steps)} steps within a budget of {budget_s:g} s"]
    if missing is not None:
        lines.append(f"(here it would be skipped: {missing})")
    for number, step in enumerate(steps, 1):
        lines.append(f"{number:2d}. {step.name} (up to {step.timeout_s:g} s): {step.what}")
        if step.skip is not None:
            lines.append(f"    skipped: {step.skip}")
        if step.cwd is not None:
            lines.append(f"    in {step.cwd}")
        lines.append(f"    $ {step.command}")  # a snippet's lines as they are: it pastes as is
    return "\n".join(lines)
