"""Render results for a terminal with rich. Rendering only: no probing, no decisions.

What is printed is printed whole. On a terminal, rich takes the terminal's width, wraps prose
at spaces and lets a line that cannot be broken (a path, a command) run past the edge rather
than cut it; a table never shrinks a column below its longest word (a number: its whole cell).
Anywhere else (a pipe, a file, a CI log) the width is unbounded: nothing is wrapped or cut.
"""

from __future__ import annotations

import re
import sys
from typing import IO, TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.constrain import Constrain
from rich.errors import MarkupError
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from tfaccel.core.units import MISSING, fmt_bytes
from tfaccel.inventory import Inventory, Peak
from tfaccel.report.findings import Prose, findings_terminal
from tfaccel.snapshot import GpuInfo

if TYPE_CHECKING:
    from tfaccel.bench import BenchResult
    from tfaccel.report import ReportResult
    from tfaccel.report.tables import Table as ReportTable

__all__ = [
    "UNBOUNDED_WIDTH",
    "WholeConsole",
    "console",
    "fmt_bytes",
    "gpu_activity_line",
    "is_terminal",
    "render_bench",
    "render_inventory",
    "render_peak",
    "render_report",
    "whole_columns",
]

_STATUS_STYLE = {"ok": "green", "better": "green", "fail": "bold red", "worse": "bold red"}


# The width rich is given when the output is not a terminal: wider than any line tfaccel prints,
# so nothing is wrapped or cut (renderers here never pad a line to the full width).
UNBOUNDED_WIDTH = 100_000
RULE_WIDTH = 80  # a section rule is never wider than this

_TRAILING_SPACE = re.compile(r"[ \t]+(?=\n)")


class WholeConsole(Console):
    """A rich Console whose ``print`` never cuts a line.

    A line wider than the console is printed whole (the terminal wraps it where it must):
    nothing is cropped at the edge, and plain text is neither folded nor cut. Paragraphs that
    should wrap at spaces are :class:`~tfaccel.report.findings.Prose`; table cells wrap at
    spaces in their columns (see :func:`whole_columns`).
    """

    def print(self, *objects: Any, **options: Any) -> None:
        options.setdefault("crop", False)
        options.setdefault("overflow", "ignore")
        super().print(*objects, **options)


class _NoTrailingSpace:
    """A text stream that drops the spaces rich pads table cells with at the end of a line."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.encoding = getattr(stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        self._stream.write(_TRAILING_SPACE.sub("", text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._stream.fileno()


def is_terminal(stream: IO[str]) -> bool:
    """Whether ``stream`` is an interactive terminal (False for pipes, files and captures)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def console(stderr: bool = False) -> Console:
    """A console for stdout (or stderr) that prints every line whole.

    On a terminal it takes the terminal's width (or ``COLUMNS``); elsewhere the width is
    unbounded and trailing spaces are dropped. Colour follows rich's rules (none in a pipe
    unless ``FORCE_COLOR`` is set).
    """
    stream = sys.stderr if stderr else sys.stdout
    if is_terminal(stream):
        return WholeConsole(stderr=stderr, highlight=False)
    return WholeConsole(
        file=_NoTrailingSpace(stream),  # type: ignore[arg-type]
        width=UNBOUNDED_WIDTH,
        highlight=False,
    )


def whole_columns(table: Table, whole: frozenset[int] = frozenset()) -> Table:
    """Keep every cell of ``table`` readable however narrow the console: no column gets
    narrower than its longest word, and the columns in ``whole`` (numbers, commands) not
    narrower than their longest cell. A table that cannot fit then runs past the edge instead
    of being cut with an ellipsis. Returns ``table``."""
    for index, column in enumerate(table.columns):
        longest = 1
        for cell in column.cells:
            plain = _plain(cell)
            if index in whole:
                longest = max([longest, *(cell_len(line) for line in plain.splitlines())])
            else:
                longest = max([longest, *(cell_len(word) for word in plain.split())])
        header = _plain(column.header)
        longest = max([longest, *(cell_len(word) for word in header.split())])
        column.min_width = max(column.min_width or 0, longest)
    return table


def _plain(cell: Any) -> str:
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        try:
            return Text.from_markup(cell).plain
        except MarkupError:
            return cell
    return str(cell)


def _na(value: Any, suffix: str = "") -> str:
    return MISSING if value is None else f"{value}{suffix}"


def _rate(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def render_peak(peak: Peak | None) -> str:
    """One line of peak rates, e.g. 'fp32 19.5, tf32 156, bf16 312 TFLOP/s; 1555 GB/s'."""
    if peak is None:
        return "n/a"
    rates = [
        f"{name} {_rate(value)}"
        for name, value in (
            ("fp32", peak.fp32_tflops),
            ("tf32", peak.tf32_tflops),
            ("fp16", peak.fp16_tflops),
            ("bf16", peak.bf16_tflops),
        )
        if value is not None
    ]
    text = (", ".join(rates) + " TFLOP/s") if rates else "no rate known"
    if peak.bandwidth_gbs is not None:
        text += f"; {peak.bandwidth_gbs:g} GB/s"
    return text


def render_inventory(inv: Inventory) -> RenderableType:
    """The ``tfaccel devices`` screen."""
    parts: list[RenderableType] = [_cpu_table(inv)]
    parts.append(_gpu_section(inv))
    if inv.tpu is not None:
        tpu = inv.tpu
        line = (
            f"TPU {tpu.info.accelerator_type or 'type unknown'}: "
            f"{_na(tpu.info.chip_count)} chip(s), libtpu {_na(tpu.info.libtpu_version)}; "
            f"peak {render_peak(tpu.peak)} ({tpu.peak_note})"
        )
        parts.append(Text(line))
    else:
        parts.append(Text.from_markup("[bold]TPU[/bold] none found"))
    if inv.tensorflow is not None:
        parts.append(_tf_table(inv))
    return Group(*parts)


def _cpu_table(inv: Inventory) -> Table:
    cpu = inv.cpu
    table = Table(title="CPU", title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("model", escape(f"{cpu.model or 'unknown'} ({cpu.vendor or 'vendor unknown'})"))
    cores = (
        f"{_na(cpu.physical_cores)} physical, {_na(cpu.logical_cores)} logical, "
        f"{_na(cpu.usable_cores)} usable by this process"
    )
    if cpu.cgroup_cpu_limit is not None:
        cores += f", cgroup quota {cpu.cgroup_cpu_limit:g} cores"
    table.add_row("cores", cores)
    table.add_row("DL features", " ".join(cpu.features) or "none of AVX2/AVX-512/AMX/NEON")
    table.add_row(
        "memory",
        f"{fmt_bytes(cpu.memory_total_bytes)} total, "
        f"{fmt_bytes(cpu.memory_available_bytes)} available",
    )
    table.add_row("clock", f"{cpu.clock_mhz:g} MHz" if cpu.clock_mhz else "n/a")
    table.add_row("peak (estimate)", escape(render_peak(cpu.peak)))
    table.add_row("", escape(f"= {cpu.peak.formula}"))
    return whole_columns(table, frozenset({0}))


def _gpu_section(inv: Inventory) -> RenderableType:
    if not inv.gpus:
        reason = f"NVML: {inv.nvml_error}" if inv.nvml_error else "NVML reports none"
        line = f"[bold]NVIDIA GPUs[/bold] none ({escape(reason)})"
        if inv.nvidia_pci_without_nvml:
            line += (
                f"; but {inv.nvidia_pci_without_nvml} NVIDIA device(s) on the PCI bus: "
                "run 'tfaccel doctor'"
            )
        return Text.from_markup(line)
    title = (
        f"NVIDIA GPUs (driver {_na(inv.driver_version)}, "
        f"driver supports CUDA up to {_na(inv.cuda_driver_version)})"
    )
    table = Table(title=escape(title), title_justify="left")
    for col in ("#", "name", "CC", "SMs", "memory used/total", "util.gpu", "temp", "power", "peak"):
        table.add_column(col)
    for dev in inv.gpus:
        g = dev.info
        memory = f"{fmt_bytes(g.memory_used_bytes)} / {fmt_bytes(g.memory_total_bytes)}"
        power = (
            f"{g.power_draw_watts:.0f}/{g.power_limit_watts:.0f} W"
            if g.power_draw_watts is not None and g.power_limit_watts is not None
            else "n/a"
        )
        peak = render_peak(dev.peak) if dev.peak else dev.peak_note
        table.add_row(
            str(g.index),
            escape(g.name),
            _na(g.compute_capability),
            _na(g.multiprocessor_count),
            memory,
            _na(g.utilization_gpu_percent, "%"),
            _na(g.temperature_celsius, " C"),
            power,
            escape(peak),
        )
    lines = [Text(gpu_activity_line(dev.info)) for dev in inv.gpus]
    return Group(whole_columns(table, frozenset({0, 2, 3, 4, 5, 6, 7})), *lines)


def gpu_activity_line(g: GpuInfo) -> str:
    """What a GPU's SMs, tensor cores and memory bandwidth were doing (NVML GPM), or which
    metric stands in for it: ``utilization.gpu``, the share of time any kernel ran."""
    head = f"GPU {g.index} activity: "
    reading = g.gpm
    if reading is not None:
        parts = [
            ("SM", reading.sm_activity_percent),
            ("SM occupancy", reading.sm_occupancy_percent),
            ("tensor cores", reading.tensor_activity_percent),
            ("DRAM bandwidth", reading.dram_bandwidth_percent),
        ]
        shown = ", ".join(
            f"{label} {'n/a' if value is None else f'{value:.0f}%'}" for label, value in parts
        )
        return head + f"{shown} (NVML GPM over {reading.interval_s * 1e3:.0f} ms)"
    if g.gpm_supported:
        return head + f"NVML GPM supported, no reading ({g.gpm_note or 'not read'})"
    why = f"; {g.gpm_note}" if g.gpm_note else ""
    return head + (
        "utilization.gpu only (pre-Hopper / not supported): util.gpu is the share of time any "
        f"kernel ran, not SM usage{why}"
    )


def _tf_table(inv: Inventory) -> Table:
    tfv = inv.tensorflow
    assert tfv is not None
    table = Table(title="TensorFlow", title_justify="left", show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("version", escape(_na(tfv.version)))
    build = ", ".join(f"{k}={v}" for k, v in tfv.build.items()) or "build info not found"
    table.add_row("build", escape(build))
    table.add_row("physical devices", escape(", ".join(tfv.physical_devices) or "none"))
    table.add_row("logical devices", escape(", ".join(tfv.logical_devices) or "none"))
    for i, details in enumerate(tfv.gpu_details):
        table.add_row(f"GPU:{i} details", escape(", ".join(f"{k}={v}" for k, v in details.items())))
    if tfv.error:
        table.add_row("error", escape(tfv.error))
    return whole_columns(table, frozenset({0}))


def _report_table(table: ReportTable) -> Table:
    from tfaccel.report.tables import Status  # local: imports numpy

    def cell(value: Any) -> str:
        text = escape(str(value))
        colour = _STATUS_STYLE.get(str(value)) if isinstance(value, Status) else None
        return f"[{colour}]{text}[/{colour}]" if colour else text

    view = Table(title=escape(table.title), title_justify="left")
    for i, name in enumerate(table.header):
        view.add_column(escape(name), justify="right" if i in table.numeric else "left")
    for row in table.rows:
        view.add_row(*(cell(c) for c in row))
    return whole_columns(view, table.numeric)


def render_bench(result: BenchResult) -> RenderableType:
    """The ``tfaccel bench`` screen: the headline and the report's tables, the changes beyond
    the noise since the last run (every status counted, only the better and worse figures
    listed), and what was not measured."""
    # local: report.tables imports numpy
    from tfaccel.report.tables import comparison_table, headline_text, report_tables

    summary, comparison = result.summary, result.comparison
    parts: list[RenderableType] = []
    if headline := summary["headline"]:
        parts.append(Prose(headline_text(headline), style="bold"))
    parts += [_report_table(t) for t in report_tables(summary, None)]
    if comparison is not None and comparison["rows"]:
        changes = comparison_table(comparison, changes_only=True)
        counts = ", ".join(f"{v} {k}" for k, v in sorted(comparison["counts"].items()))
        parts.append(Prose(f"{changes.title}: {counts}"))
        if changes.rows:
            parts.append(_report_table(changes))
    for s in result.run.skipped:
        reason = f"not measured: {s.benchmark} on {s.device}: {s.reason}"
        parts.append(Prose(reason, style="dim", hang="  "))
    return Group(*parts)


def render_report(result: ReportResult) -> RenderableType:
    """The ``tfaccel report`` screen: what to change, devices, doctor, bench, the plan, and
    the files written."""
    from tfaccel.report.changes import model_line  # local: imports the tuning records
    from tfaccel.report.document import document_changes

    changes = document_changes(result.document)
    parts: list[RenderableType] = []
    if changes["findings"] or changes["models"]:
        parts.append(_rule("what to change"))
        parts += [Prose(line, indent="- ", hang="  ") for line in changes["findings"]]
        models = [model_line(c, quote="`") for c in changes["models"]]
        parts += [Prose(line, indent="- ", hang="  ") for line in models]
    parts += [
        _rule("tfaccel devices"),
        render_inventory(result.inventory),
        _rule("tfaccel doctor"),
        findings_terminal(result.document["doctor"] or {}),
        _rule("tfaccel bench"),
        render_bench(result.bench),
    ]
    from tfaccel.report.tables import plan_table  # local: imports numpy

    if (plan := plan_table(result.document.get("plan"))).rows:
        parts += [_rule("tfaccel plan"), _report_table(plan)]
    parts.append(_rule("files"))
    width = max(map(len, result.written), default=0)
    parts += [Text(f"{kind:{width}}  {path}") for kind, path in result.written.items()]
    return Group(*parts)


def _rule(title: str) -> RenderableType:
    """A section rule, as wide as the terminal up to :data:`RULE_WIDTH` (and no wider in a pipe)."""
    return Constrain(Rule(title), RULE_WIDTH)
