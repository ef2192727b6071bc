"""The tables of a report, as plain cell values every renderer shows (HTML, Markdown, and the
terminal in ``tfaccel bench``): devices, training, micro benchmarks, checks, the comparison with
the last run, the plan of the reference models and the inventory of devices.

Figures are written by :mod:`tfaccel.core.units`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfaccel.bench.records import CHANGED, Headline, ModelRow, RunComparison, RunSummary
from tfaccel.core.units import MISSING, fmt_bytes, fmt_num, fmt_pct, fmt_seconds

__all__ = [
    "PLAN_TITLE",
    "WIDE_SPREAD",
    "Status",
    "Table",
    "checks_table",
    "comparison_table",
    "device_rows",
    "devices_table",
    "headline_text",
    "iqr_text",
    "micro_table",
    "plan_table",
    "report_tables",
    "spread_advice",
    "spread_text",
    "training_table",
]


def iqr_text(rel_iqr: Any) -> str:
    """A relative interquartile range as a percentage: 0.0123 -> '1.2%'; None -> 'n/a'."""
    return MISSING if rel_iqr is None else f"{float(rel_iqr) * 100:.1f}%"


WIDE_SPREAD = 0.10
"""A figure whose within-run relative IQR is above this is too noisy to trust: re-run it."""


def spread_text(rel_iqr: Any) -> str:
    """:func:`iqr_text`, marked ``(wide: re-run)`` above :data:`WIDE_SPREAD`."""
    text = iqr_text(rel_iqr)
    return f"{text} (wide: re-run)" if rel_iqr is not None and rel_iqr > WIDE_SPREAD else text


def spread_advice(*rel_iqrs: float | None) -> str | None:
    """The advice to re-run when any of the figures' relative IQRs is above
    :data:`WIDE_SPREAD`, else None."""
    wide = [r for r in rel_iqrs if r is not None and r > WIDE_SPREAD]
    if not wide:
        return None
    return (
        f"spread too wide to trust (IQR {iqr_text(max(wide))} > {WIDE_SPREAD * 100:.0f}%): "
        "re-run on an idle machine"
    )


def _vs_default(row: ModelRow) -> str:
    if row.get("speedup_vs_default") is None:
        return "-"
    where = "beyond" if row.get("vs_default_different") else "inside"
    return f"x{row['speedup_vs_default']:.2f} ({where} the noise)"


def _speedup(value: Any) -> str:
    return MISSING if value is None else f"x{float(value):.2f}"


@dataclass(frozen=True)
class Status:
    """A table cell that names a status (``ok``, ``fail``, ``better``, ``worse``...)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class Table:
    """One table of a report: plain cell values (``Status`` for coloured ones)."""

    key: str
    title: str
    header: list[str]
    rows: list[list[Any]]
    numeric: frozenset[int] = field(default_factory=frozenset)

    def without(self, columns: set[int]) -> Table:
        """This table less the ``columns`` given (by index)."""
        keep = [i for i in range(len(self.header)) if i not in columns]
        return Table(
            self.key,
            self.title,
            [self.header[i] for i in keep],
            [[row[i] for i in keep] for row in self.rows],
            frozenset(new for new, old in enumerate(keep) if old in self.numeric),
        )

    def without_empty_columns(self) -> Table:
        """This table less the columns empty in every row (``n/a``, ``-`` or nothing); a
        table without rows is returned as it is."""
        if not self.rows:
            return self
        empty = {
            i
            for i in range(len(self.header))
            if all(str(row[i]).strip() in _EMPTY for row in self.rows)
        }
        return self.without(empty)


_EMPTY = frozenset({"", MISSING, "-", "None"})


def headline_text(h: Headline) -> str:
    """The headline in one sentence: Keras default vs best configuration, ratio and noise,
    and the advice to re-run when a figure's spread is too wide to trust."""
    advice = spread_advice(h["default_relative_iqr"], h["best_relative_iqr"])
    text = (
        f"{h['model']} on {h['device_label']}: Keras default ({h['default_config']}) "
        f"{fmt_num(h['default_images_per_s'])} images/s "
        f"(IQR {iqr_text(h['default_relative_iqr'])}); "
        f"best configuration ({h['best_config']}) {fmt_num(h['best_images_per_s'])} images/s "
        f"(IQR {iqr_text(h['best_relative_iqr'])}); ratio x{h['ratio']:.2f}: {h['verdict']}"
    )
    return f"{text}; {advice}" if advice else text


def report_tables(summary: RunSummary, comparison: RunComparison | None) -> list[Table]:
    """The tables of a report, in order: devices, training, micro, checks, comparison.

    Tables without rows are left out, and so are the columns empty in every row.
    """
    tables = [
        devices_table(summary),
        training_table(summary),
        micro_table(summary),
        checks_table(summary),
    ]
    if comparison is not None:
        tables.append(comparison_table(comparison))
    return [t.without_empty_columns() for t in tables if t.rows]


def devices_table(summary: RunSummary) -> Table:
    """Each model's best configuration per device: utilisation, MFU, epoch, speedup (over the
    CPU: left out when the CPU is the only device measured)."""
    table = Table(
        "devices",
        "Devices compared (best configuration of each)",
        [
            "model",
            "device",
            "best configuration",
            "images/s",
            "utilisation (of matmul)",
            "MFU (of spec peak)",
            "time per 50,000-image epoch",
            "speedup over CPU",
        ],
        [
            [
                r["model"],
                r["device_label"],
                r["best_config"],
                fmt_num(r["images_per_s"]),
                fmt_pct(r["utilisation_percent"]),
                fmt_pct(r["mfu_percent"]),
                fmt_seconds(r["epoch_seconds"]),
                _speedup(r["speedup_over_cpu"]),
            ]
            for r in summary["device_table"]
        ],
        frozenset({3, 4, 5, 6, 7}),
    )
    only_cpu = all(str(r["device"]).startswith("cpu") for r in summary["device_table"])
    return table.without({7}) if only_cpu else table


def training_table(summary: RunSummary) -> Table:
    """Every training configuration measured, with its derived figures."""
    return Table(
        "training",
        "Training throughput",
        [
            "model",
            "device",
            "configuration",
            "images/s",
            "IQR",
            "step time",
            "epoch",
            "model TFLOP/s",
            "utilisation",
            "MFU",
            "vs the Keras default",
        ],
        [
            [
                r["model"],
                r["device"],
                r["config"],
                fmt_num(r["images_per_s"]),
                spread_text(r["relative_iqr"]),
                fmt_seconds(r["step_time_ms"] / 1000),
                fmt_seconds(r["epoch_seconds"]),
                fmt_num(r["model_tflops"]),
                fmt_pct(r["utilisation_percent"]),
                fmt_pct(r["mfu_percent"]),
                _vs_default(r),
            ]
            for r in summary["models"]
        ],
        frozenset(range(3, 10)),
    )


def micro_table(summary: RunSummary) -> Table:
    """The micro benchmarks against the spec peak and the best measured."""
    return Table(
        "micro",
        "Micro benchmarks",
        [
            "benchmark",
            "device",
            "configuration",
            "median",
            "unit",
            "IQR",
            "% of spec peak",
            "% of best measured",
        ],
        [
            [
                r["benchmark"],
                r["device"],
                r["config"],
                fmt_num(r["median"]),
                r["unit"],
                spread_text(r["relative_iqr"]),
                fmt_pct(r["percent_of_peak"]),
                fmt_pct(r["percent_of_best"]),
            ]
            for r in summary["micro"]
        ],
        frozenset({3, 5, 6, 7}),
    )


def checks_table(summary: RunSummary) -> Table:
    """The correctness checks: value, threshold, ok or fail."""
    return Table(
        "checks",
        "Checks",
        ["check", "device", "test accuracy", "threshold", "result"],
        [
            [
                c["benchmark"],
                c["device"],
                f"{c['value']:.3f}",
                c["threshold"],
                Status("ok" if c["passed"] else "fail"),
            ]
            for c in summary.get("checks") or []
        ],
    )


def comparison_table(comparison: RunComparison, *, changes_only: bool = False) -> Table:
    """The figures measured in both runs (only those that changed beyond the noise, better or
    worse, with ``changes_only``)."""
    rows = [r for r in comparison["rows"] if not changes_only or r["status"] in CHANGED]
    return Table(
        "comparison",
        f"Against run {comparison['before_run_id']} ({comparison['before_started_at']})",
        ["benchmark", "device", "configuration", "before", "after", "unit", "status", "verdict"],
        [
            [
                r["benchmark"],
                r["device"],
                r["config"],
                fmt_num(r["before"]),
                fmt_num(r["after"]),
                r["unit"],
                Status(r["status"]),
                r["verdict"],
            ]
            for r in rows
        ],
        frozenset({3, 4}),
    )


PLAN_TITLE = "Plan of the reference models (predictions: nothing was trained for them)"


def plan_table(plan: list[dict[str, Any]] | None) -> Table:
    """Each reference model's plan: memory at the batch, this machine, the fastest accelerator.

    The memory is counted as this machine's device counts it: the GPU allocator's when it has
    a GPU, else the host RAM the CPU trains in. Columns empty in every row are left out.
    """
    rows: list[list[Any]] = []
    plans = plan or []
    gpu = any(
        d.get("kind") != "cpu" for row in plans for d in row.get("this_machine") or []
    ) or not any(row.get("this_machine") for row in plans)
    for row in plans:
        if "error" in row:
            rows.append([row["model"], row["batch_size"], "-", f"no plan: {row['error']}", "-"])
            continue
        here = "; ".join(_plan_cell(d) for d in row["this_machine"]) or "-"
        fastest = row["fastest"]
        rows.append(
            [
                row["model"],
                row["batch_size"],
                fmt_bytes(_plan_memory(row, gpu), unit="GiB", digits=2),
                here,
                f"{fastest['name']}: {_plan_cell(fastest, named=False)}",
            ]
        )
    memory = "memory (GPU allocator)" if gpu else "memory (host RAM)"
    header = ["model", "batch", memory, "this machine", "fastest in database"]
    return Table("plan", PLAN_TITLE, header, rows, frozenset({1})).without_empty_columns()


def _plan_memory(row: dict[str, Any], gpu: bool) -> Any:
    """The bytes a plan needs: the GPU allocator's count, or the CPU's (host RAM) without a GPU."""
    if not gpu:
        for device in row.get("this_machine") or []:
            if device.get("kind") == "cpu" and device.get("needed_bytes") is not None:
                return device["needed_bytes"]
    return row["needed_bytes"]


def _plan_cell(device: dict[str, Any], named: bool = True) -> str:
    name = f"{device['key']}: " if named else ""
    if device["fits"]:
        fit = f"fits (max batch {device['max_batch']:,})"
    elif device["gradient_accumulation_steps"]:
        fit = f"accumulate {device['gradient_accumulation_steps']} x {device['micro_batch']}"
    else:
        fit = "does not fit"
    epoch = device.get("epoch_s")
    return name + fit + (f", epoch {fmt_seconds(epoch)}" if epoch is not None else "")


def device_rows(devices: dict[str, Any]) -> list[list[Any]]:
    cpu = devices.get("cpu") or {}
    peak = cpu.get("peak") or {}
    rows: list[list[Any]] = [
        [
            "CPU",
            cpu.get("model"),
            f"{cpu.get('physical_cores')} physical / {cpu.get('usable_cores')} usable cores; "
            + " ".join(cpu.get("features") or []),
            f"fp32 {fmt_num(peak.get('fp32_tflops'))}, bf16 {fmt_num(peak.get('bf16_tflops'))} "
            f"TFLOP/s (estimate: {peak.get('formula')})",
        ]
    ]
    for gpu in devices.get("gpus") or []:
        info, gpeak = gpu.get("info") or {}, gpu.get("peak") or {}
        memory = info.get("memory_total_bytes")
        rows.append(
            [
                f"GPU {info.get('index')}",
                info.get("name"),
                f"CC {info.get('compute_capability')}, {fmt_bytes(memory or None, unit='GiB')}",
                f"fp32 {fmt_num(gpeak.get('fp32_tflops'))}, "
                f"bf16 {fmt_num(gpeak.get('bf16_tflops'))} TFLOP/s, "
                f"{fmt_num(gpeak.get('bandwidth_gbs'))} GB/s ({gpu.get('peak_note')})",
            ]
        )
    if not devices.get("gpus"):
        rows.append(["GPU", "none", devices.get("nvml_error") or "NVML reports none", ""])
    return rows
