"""Plain-text rendering of profiles: the live line, the final table, the findings, the top ops.

Plain text (no terminal control codes), so it mixes with Keras' progress bar and reads the same
in a log file. ``tfaccel profile`` prints :func:`tables` and :func:`heading` from here and the
findings through the terminal renderer, :func:`tfaccel.report.findings.findings_terminal`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tfaccel.core.findings import text_lines
from tfaccel.core.units import MISSING, fmt_bytes, fmt_ms
from tfaccel.profile.measurement import Figures, GpuUsage, Measurement, MemoryUsage

if TYPE_CHECKING:
    from tfaccel.core.findings import Finding
    from tfaccel.profile.bottlenecks import Diagnosis

__all__ = [
    "findings_text",
    "gpu_lines",
    "heading",
    "live_line",
    "report",
    "summary_table",
    "tables",
    "top_ops_text",
]


def _ms(summary: Any) -> str:
    return fmt_ms(None if summary is None else summary.median)


def _spread(summary: Any) -> str:
    if summary is None:
        return ""
    return f"{summary.q1 * 1e3:.2f}-{summary.q3 * 1e3:.2f} ms"


def _pct(share: float | None) -> str:
    return MISSING if share is None else f"{share * 100:.1f}%"


def _bytes(n: float | None) -> str:
    return fmt_bytes(n, digits=2, smallest="B")


def live_line(
    step: int,
    figures: Figures,
    memory: MemoryUsage | None,
    gpus: Sequence[GpuUsage],
    input_note: str | None = None,
) -> str:
    """One line for the steps since the previous line."""
    parts = [f"tfaccel: step {step}"]
    parts.append(f"{_ms(figures.period_s or figures.step_s)}/step")
    shares = []
    if figures.input_share is not None:
        shares.append(f"input {_pct(figures.input_share)}")
    elif input_note:
        shares.append("input ?")
    if figures.host_share is not None:
        shares.append(f"host {_pct(figures.host_share)}")
    if shares:
        parts.append(" ".join(shares))
    if figures.examples_per_s is not None:
        parts.append(f"{figures.examples_per_s:.0f} ex/s")
    for gpu in gpus:
        if gpu.sm_activity_mean_percent is not None:
            tensor = gpu.tensor_activity_mean_percent
            parts.append(
                f"GPU{gpu.index} SM {_percent(gpu.sm_activity_mean_percent)}"
                + ("" if tensor is None else f" tensor {_percent(tensor)}")
            )
        elif gpu.utilization_mean_percent is not None:
            parts.append(f"GPU{gpu.index} util.gpu {_percent(gpu.utilization_mean_percent)}")
    if memory is not None and memory.current_bytes is not None:
        label = "mem" if memory.kind == "gpu" else "rss"
        parts.append(f"{label} {_bytes(memory.current_bytes)} (peak {_bytes(memory.peak_bytes)})")
    return " | ".join(parts)


def summary_table(m: Measurement) -> str:
    """The final figures of a run."""
    f = m.figures()
    ctx = m.context
    device = ctx.gpu_name or ctx.device_kind.upper()
    head = (
        f"tfaccel profile: {f.steps} steps measured ({f.warmup_steps} warm-up excluded"
        + (f", {f.traced_steps_excluded} traced excluded" if f.traced_steps_excluded else "")
        + f"), {ctx.source} on {device}"
    )
    rows = [("", "median", "q1-q3", "share")]
    rows.append(("step", _ms(f.period_s or f.step_s), _spread(f.period_s or f.step_s), "100%"))
    if f.input_s is not None:
        rows.append(
            ("  waiting for input", _ms(f.input_s), _spread(f.input_s), _pct(f.input_share))
        )
    else:
        rows.append(("  waiting for input", "not measured", "", ""))
    rows.append(("  in the step (synced)", _ms(f.busy_s), _spread(f.busy_s), _pct(f.busy_share)))
    rows.append(("  host, between steps", _ms(f.host_s), _spread(f.host_s), _pct(f.host_share)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [head]
    lines += [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    extra = []
    if f.examples_per_s is not None:
        extra.append(
            ("throughput", f"{f.examples_per_s:.0f} examples/s ({f.steps_per_s:.1f} steps/s)")
        )
    elif f.steps_per_s is not None:
        extra.append(("throughput", f"{f.steps_per_s:.1f} steps/s (batch size unknown)"))
    if m.input_note:
        extra.append(("input", m.input_note))
    if m.memory is not None:
        mem = m.memory
        what = "TF tensors" if mem.kind == "gpu" else "RSS"
        limit = f" of {_bytes(mem.limit_bytes)}" if mem.limit_bytes else ""
        extra.append(
            (
                "memory",
                f"{what} {_bytes(mem.current_bytes)} now, peak {_bytes(mem.peak_bytes)}"
                f"{limit} ({mem.device})",
            )
        )
    for gpu in m.gpus:
        extra += gpu_lines(gpu)
    if not m.gpus and m.gpu_note:
        extra.append(("GPU", m.gpu_note))
    if m.cpu_seconds is not None and m.wall_seconds and ctx.usable_cores:
        busy = m.cpu_seconds / m.wall_seconds
        extra.append(
            (
                "CPU",
                f"{busy:.2f} of {ctx.usable_cores} usable cores busy "
                f"({_pct(busy / ctx.usable_cores)})",
            )
        )
    if m.synthetic is not None:
        s = m.synthetic
        extra.append(
            (
                "synthetic re-run",
                f"{_ms(s.step_s)} per step on one ready batch (no pipeline) vs "
                f"{_ms(s.real_step_s)} with the real input ({s.steps} steps)",
            )
        )
    elif m.synthetic_note:
        extra.append(("synthetic re-run", m.synthetic_note))
    width = max((len(k) for k, _ in extra), default=0)
    lines += [f"  {k.ljust(width)}  {v}" for k, v in extra]
    lines += [f"  note: {n}" for n in m.notes]
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}%"


def _mean_max(mean: float | None, top: float | None) -> str:
    return f"{_percent(mean)} mean (max {_percent(top)})"


def gpu_lines(gpu: GpuUsage) -> list[tuple[str, str]]:
    """The final table's rows for one GPU: utilization.gpu and memory, then what its SMs,
    tensor cores and memory bandwidth did (NVML GPM), or why that is not known."""
    util = _mean_max(gpu.utilization_mean_percent, gpu.utilization_max_percent)
    if gpu.metric_source == "gpm":
        sm = _mean_max(gpu.sm_activity_mean_percent, gpu.sm_activity_max_percent)
        tensor = _mean_max(gpu.tensor_activity_mean_percent, gpu.tensor_activity_max_percent)
        dram = _mean_max(gpu.dram_bandwidth_mean_percent, gpu.dram_bandwidth_max_percent)
        activity = (
            f"SM activity {sm}, tensor cores {tensor}, DRAM bandwidth {dram} "
            f"(NVML GPM, {gpu.gpm_samples} intervals)"
        )
    else:
        activity = (
            "utilization.gpu only: SM, tensor-core and DRAM bandwidth activity not measured"
            f": {gpu.gpm_note or 'no GPM'}"
        )
    return [
        (
            f"GPU {gpu.index}",
            f"utilization.gpu {util} = share of time any kernel ran; memory used max "
            f"{_bytes(gpu.memory_used_max_bytes)}; {gpu.samples} NVML samples",
        ),
        (f"GPU {gpu.index} activity", activity),
    ]


def heading(diagnosis: Diagnosis) -> str:
    """``Diagnosis refused: why``, or ``Diagnosis:`` (and a line when nothing limits the run)."""
    if diagnosis.refused:
        return "Diagnosis refused: " + diagnosis.refused
    if not diagnosis.problems:
        return "Diagnosis:\n  nothing limits this run beyond the checks' thresholds"
    return "Diagnosis:"


def findings_text(diagnosis: Diagnosis) -> str:
    """The diagnosis: problems with evidence, fix and gain; then what is fine or skipped."""
    lines = [heading(diagnosis)]
    if diagnosis.refused:
        return lines[0]
    lines += text_lines(diagnosis.problems)
    fine = [f for f in diagnosis.findings if f.status == "ok"]
    if fine:
        lines.append("  fine: " + "; ".join(f"{f.id} ({_short(f)})" for f in fine))
    for finding in diagnosis.findings:
        if finding.status == "skip":
            lines.append(f"  skipped {finding.id}: {'; '.join(finding.evidence)}")
    return "\n".join(lines)


_PRIMARY = {
    "input_bound": ("input_share", "input wait"),
    "host_overhead": ("host_share", "host overhead"),
    "launch_bound": ("launch_share_estimate", "launch estimate"),
    "host_device_copies": ("copy_share", "copies"),
    "memory_headroom": ("peak_share", "peak memory"),
    "low_16bit_share": ("sixteen_bit_share", "16-bit share"),
    "tf_data_cpu": ("cpu_busy_share", "CPU busy"),
    "collectives": ("collective_share", "collectives"),
    "replica_imbalance": ("imbalance_share", "imbalance"),
    "low_gpu_activity": ("activity_share", "GPU activity"),
}


def _short(finding: Finding) -> str:
    key, label = _PRIMARY.get(finding.id, ("", ""))
    label = str(finding.numbers.get("metric_label", label))
    value = finding.numbers.get(key)
    if isinstance(value, float):
        return f"{label} {value * 100:.1f}%"
    return "within thresholds"


def top_ops_text(trace: Any, n: int = 10) -> str:
    """The ``n`` ops with the largest self time in a trace, per step."""
    if trace is None:
        return ""
    head = (
        f"Trace: {trace.path or 'not written'} (open with: tensorboard --logdir <DIR>, Profile tab)"
    )
    if trace.error:
        return head + "\n  ops not listed: " + trace.error
    steps = max(trace.steps, 1)
    total = sum(op.self_time_us for op in trace.ops) or 1.0
    rows = [("self/step", "share", "where", "type", "op")]
    for op in trace.top(n):
        rows.append(
            (
                f"{op.self_time_us / steps / 1e3:.3f} ms",
                f"{op.self_time_us / total * 100:.1f}%",
                op.where,
                op.type,
                op.name if len(op.name) <= 70 else "..." + op.name[-67:],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [head, f"  top {len(rows) - 1} ops by self time over {trace.steps} traced steps:"]
    for row in rows:
        lines.append(
            "  "
            + "  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True))
            + "  "
            + row[4]
        )
    return "\n".join(lines)


def tables(measurement: Measurement, *, top: int = 10) -> str:
    """The final table and, when a trace was taken, its top ops."""
    parts = [summary_table(measurement)]
    if measurement.trace is not None:
        parts.append(top_ops_text(measurement.trace, top))
    return "\n\n".join(parts)


def report(measurement: Measurement, diagnosis: Diagnosis, *, top: int = 10) -> str:
    """Table, top ops (when traced) and findings."""
    return tables(measurement, top=top) + "\n\n" + findings_text(diagnosis)
