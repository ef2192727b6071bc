"""PNG plots of a bench run (matplotlib, Agg canvas; pyplot and its global state are not used).

Each function takes the JSON-ready summary (:func:`tfaccel.bench.summarize_run`) and returns
PNG bytes, or None when there is nothing to plot. Text from the system (device names) is
passed with ``$`` escaped, so matplotlib never interprets it as math.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from tfaccel.errors import TfaccelError

if TYPE_CHECKING:
    from tfaccel.bench.records import RunSummary

__all__ = ["render_all", "roofline", "speedup", "step_times", "throughput"]

_DPI = 100
_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3")


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise TfaccelError(
            "matplotlib is not installed, so the report's plots cannot be drawn",
            expected="matplotlib (the 'bench' extra)",
            received="no module named matplotlib",
            fix="pip install 'tfaccel[bench]'",
        ) from None
    fig = Figure(figsize=(width, height), dpi=_DPI)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


def _text(value: Any) -> str:
    return str(value).replace("$", r"\$")


def throughput(summary: RunSummary) -> bytes | None:
    """Training images/s per configuration (median, IQR as error bars), one panel per model."""
    rows = summary.get("models") or []
    models = list(dict.fromkeys(r["model"] for r in rows))
    if not models:
        return None
    heights = [max(1.6, 0.38 * sum(r["model"] == m for r in rows) + 0.9) for m in models]
    fig = _figure(10, sum(heights))
    axes = fig.subplots(len(models), 1, squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax, model in zip(axes[:, 0], models, strict=True):
        mine = [r for r in rows if r["model"] == model]
        labels = [_text(f"{r['device']}: {r['config']}") for r in mine]
        medians = [r["images_per_s"] for r in mine]
        low = [r["images_per_s"] - r["q1"] for r in mine]
        high = [r["q3"] - r["images_per_s"] for r in mine]
        colors = [_COLORS[i % len(_COLORS)] for i in range(len(mine))]
        ax.barh(range(len(mine)), medians, xerr=[low, high], color=colors, capsize=3)
        ax.set_yticks(range(len(mine)), labels)
        ax.invert_yaxis()
        ax.set_xlabel("training images/s (median, bars = IQR)")
        ax.set_title(_text(model))
        for i, r in enumerate(mine):
            ax.annotate(f"  {r['images_per_s']:,.0f}", (r["q3"], i), va="center", fontsize=8)
        ax.set_xlim(0, max(r["q3"] for r in mine) * 1.15)
        ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def step_times(summary: RunSummary) -> bytes | None:
    """Distribution of the timed step times (ms) per configuration, as box plots."""
    rows = [r for r in summary.get("models") or [] if r.get("step_time_samples_ms")]
    if not rows:
        return None
    fig = _figure(10, max(2.5, 0.35 * len(rows) + 1.2))
    ax = fig.add_subplot(1, 1, 1)
    ax.boxplot(
        [r["step_time_samples_ms"] for r in rows],
        orientation="horizontal",
        tick_labels=[_text(f"{r['model']} {r['device']}: {r['config']}") for r in rows],
    )
    ax.invert_yaxis()
    values = [v for r in rows for v in r["step_time_samples_ms"] if v > 0]
    wide = bool(values) and max(values) / min(values) > 20
    if wide:
        ax.set_xscale("log")
    scale = "; log scale" if wide else ""
    ax.set_xlabel(f"step time, ms (whiskers over the timed samples{scale})")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def roofline(summary: RunSummary) -> bytes | None:
    """Roofline per device: measured matmul and bandwidth ceilings, spec peaks, measured points."""
    devices = [d for d in summary.get("roofline") or [] if d.get("measured_tflops")]
    if not devices:
        return None
    fig = _figure(9 * len(devices), 4.5)
    axes = fig.subplots(1, len(devices), squeeze=False)
    for ax, dev in zip(axes[0, :], devices, strict=True):
        intensities = [p["intensity"] for p in dev["points"]] or [1.0]
        x_min = min(0.03, min(intensities) / 2)
        x_max = max(1000.0, max(intensities) * 2)
        xs = [x_min * (x_max / x_min) ** (i / 100) for i in range(101)]
        bandwidth = dev.get("bandwidth_gbs")
        for i, (dtype, ceiling) in enumerate(sorted(dev["measured_tflops"].items())):
            color = _COLORS[i % len(_COLORS)]
            if bandwidth:
                ys = [min(ceiling, bandwidth * x / 1000) for x in xs]
            else:
                ys = [ceiling for _ in xs]
            ax.plot(xs, ys, color=color, label=f"measured {dtype} ({ceiling:.3g} TFLOP/s)")
            spec = (dev.get("spec_tflops") or {}).get(dtype)
            if spec:
                ax.axhline(
                    spec,
                    color=color,
                    linestyle="--",
                    alpha=0.6,
                    label=f"spec {dtype} peak ({spec:.3g})",
                )
        if bandwidth:
            ax.plot([], [], " ", label=f"measured bandwidth {bandwidth:.3g} GB/s (slope)")
        for point in dev["points"]:
            ax.scatter(point["intensity"], point["tflops"], color="black", s=14, zorder=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity, FLOP/byte")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(_text(dev["device_label"]), fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return _png(fig)


def speedup(summary: RunSummary) -> bytes | None:
    """Speedup of each configuration over the Keras default, and of each device over the CPU."""
    rows = [(r, x) for r in summary.get("models") or [] if (x := r["speedup_vs_default"])]
    devices = [(r, x) for r in summary.get("device_table") or [] if (x := r["speedup_over_cpu"])]
    show_devices = len({r["device"] for r, _ in devices}) > 1
    panels = 1 + int(show_devices)
    if not rows and not show_devices:
        return None
    fig = _figure(10, max(2.5, 0.35 * max(len(rows), len(devices)) + 1.5) * panels)
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    ax = axes[0]
    labels = [_text(f"{r['model']} {r['device']}: {r['config']}") for r, _ in rows]
    values = [x for _, x in rows]
    ax.barh(range(len(rows)), values, color=_COLORS[2])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over the Keras default (fit on NumPy, batch 32, float32)")
    for i, value in enumerate(values):
        ax.annotate(f" x{value:.2f}", (value, i), va="center", fontsize=8)
    if show_devices:
        ax = axes[1]
        labels = [_text(f"{r['model']} {r['device_label']}") for r, _ in devices]
        values = [x for _, x in devices]
        ax.barh(range(len(devices)), values, color=_COLORS[0])
        ax.set_yticks(range(len(devices)), labels)
        ax.invert_yaxis()
        ax.set_xscale("log" if max(values) > 20 else "linear")
        ax.set_xlabel("speedup over the CPU (best configuration of each)")
    return _png(fig)


def render_all(summary: RunSummary) -> dict[str, bytes]:
    """Every plot that has data: name -> PNG bytes (throughput, step_times, roofline, speedup)."""
    out: dict[str, bytes] = {}
    for name, fn in (
        ("throughput", throughput),
        ("roofline", roofline),
        ("step_times", step_times),
        ("speedup", speedup),
    ):
        png = fn(summary)
        if png is not None:
            out[name] = png
    return out
