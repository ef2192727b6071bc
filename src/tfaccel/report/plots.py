"""PNG plots of a bench run (matplotlib, Agg canvas; pyplot and its global state are not used).

Each function takes the JSON-ready summary (:func:`tfaccel.bench.summarize_run`) and returns
PNG bytes, or None when there is nothing to plot. Text from the system (device names) is
passed with ``$`` escaped, so matplotlib never interprets it as math.
"""

from __future__ import annotations

import io
import itertools
import math
from typing import TYPE_CHECKING, Any

from tfaccel.core.errors import TfaccelError
from tfaccel.core.units import fmt_num

if TYPE_CHECKING:
    from tfaccel.bench.records import RunSummary

__all__ = ["render_all", "roofline", "roofline_figure", "speedup", "step_times", "throughput"]

_DPI = 100
Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels
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


def _png(fig: Any, *, layout: bool = True) -> bytes:
    buffer = io.BytesIO()
    if layout:
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
    """Roofline per device: the measured bandwidth slope and matmul ceilings, the spec peaks,
    and every measured kernel as a labelled point.

    The slope is the one measured bandwidth figure of the summary (``bandwidth_gbs``, the
    micro-table row ``bandwidth_source`` names), drawn as its own line with its own legend
    entry; each dtype's measured matmul ceiling starts where it meets the slope. Labels are
    placed so that none overlaps another label, a point or the axes' edge.
    """
    fig = roofline_figure(summary)
    return None if fig is None else _png(fig, layout=False)


def roofline_figure(summary: RunSummary) -> Any:
    """The matplotlib Figure of :func:`roofline` (laid out, labels placed), or None."""
    devices = [d for d in summary.get("roofline") or [] if d.get("measured_tflops")]
    if not devices:
        return None
    fig = _figure(10.5 * len(devices), 6.0)
    axes = fig.subplots(1, len(devices), squeeze=False)
    placements = []
    for ax, dev in zip(axes[0, :], devices, strict=True):
        placements.append((ax, _roofline_axes(ax, dev)))
    fig.tight_layout()
    for ax, points in placements:
        _label_points(ax, points)
    return fig


def _gbs(value: float) -> str:
    return f"{fmt_num(value)} GB/s"


def _roofline_axes(ax: Any, dev: Any) -> list[tuple[float, float, str]]:
    """Draw one device's roofline; return its points (x, y, label) for :func:`_label_points`."""
    points = [
        (p["intensity"], p["tflops"], _text(p["label"]), p.get("dtype")) for p in dev["points"]
    ]
    intensities = [x for x, *_ in points] or [1.0]
    x_min = min(0.03, min(intensities) / 2)
    x_max = max(1000.0, max(intensities) * 2)
    ceilings = dict(sorted(dev["measured_tflops"].items()))
    top = max(ceilings.values())
    bandwidth = dev.get("bandwidth_gbs")
    colors = {dtype: _COLORS[i % len(_COLORS)] for i, dtype in enumerate(ceilings)}
    if bandwidth:
        ridge = top * 1000 / bandwidth
        source = dev.get("bandwidth_source") or "bandwidth benchmark"
        ax.plot(
            [x_min, ridge],
            [bandwidth * x_min / 1000, top],
            color="#333333",
            linewidth=1.6,
            label=_text(f"measured bandwidth {_gbs(bandwidth)}\n({source}; read + written)"),
        )
    spec_bandwidth = dev.get("spec_bandwidth_gbs")
    if spec_bandwidth:
        spec_top = max([top, *(dev.get("spec_tflops") or {}).values()])
        ax.plot(
            [x_min, spec_top * 1000 / spec_bandwidth],
            [spec_bandwidth * x_min / 1000, spec_top],
            color="#333333",
            linestyle="--",
            alpha=0.5,
            label=f"spec bandwidth {_gbs(spec_bandwidth)}",
        )
    for dtype, ceiling in ceilings.items():
        start = ceiling * 1000 / bandwidth if bandwidth else x_min
        ax.plot(
            [start, x_max],
            [ceiling, ceiling],
            color=colors[dtype],
            linewidth=1.6,
            label=f"measured {dtype} matmul {ceiling:.3g} TFLOP/s",
        )
        spec = (dev.get("spec_tflops") or {}).get(dtype)
        if spec:
            ax.axhline(
                spec,
                color=colors[dtype],
                linestyle="--",
                alpha=0.6,
                label=f"spec {dtype} peak {spec:.3g} TFLOP/s",
            )
    for x, y, _, dtype in points:
        ax.scatter(x, y, color=colors.get(dtype, "black"), edgecolor="black", s=22, zorder=4)
    if points:
        ax.scatter([], [], color="white", edgecolor="black", s=22, label="measured kernel (median)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_min, x_max)
    ys = [y for _, y, *_ in points] + list(ceilings.values())
    ys = [y for y in ys + list((dev.get("spec_tflops") or {}).values()) if y and y > 0]
    if ys:
        ax.set_ylim(min(ys) / 4, max(ys) * 2.5)
    ax.set_xlabel("arithmetic intensity, FLOP/byte")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(_text(f"{dev['device_label']} ({dev['device']})"), fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return [(x, y, label) for x, y, label, _ in points]


# Where a label may go, as offsets from its point in typographic points: rings of growing
# radius, every 15 degrees, nearest and most horizontal first; beyond the first ring a leader
# line joins label and point.
_RINGS = (9, 18, 30, 44, 60, 78, 98, 120, 145)
_DIRECTIONS = (
    0,
    180,
    *(a for step in range(15, 90, 15) for a in (step, 180 - step, -step, step - 180)),
    90,
    -90,
)
# What a place costs: covering a label or a point is never worth avoiding a line.
_COVER = 10_000.0
_LINE = 60.0
_LEADER = 400.0


def _label_points(ax: Any, points: list[tuple[float, float, str]]) -> None:
    """Label each point, choosing for each the nearest place where its text box overlaps no
    label placed before and no point, crosses no drawn line, is nearer its own point than any
    other, its leader line crosses no other label or leader, and it stays inside the axes (the
    least such trouble when there is no free place). The most crowded points go first."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    px_per_pt = fig.dpi / 72
    pad = 2.5 * px_per_pt
    anchors = [tuple(ax.transData.transform((x, y))) for x, y, _ in points]
    markers = [(px - 5, py - 5, px + 5, py + 5) for px, py in anchors]
    lines = [
        (tuple(a), tuple(b))
        for line in ax.lines
        for a, b in itertools.pairwise(line.get_transform().transform(line.get_xydata()))
    ]
    boxes: list[Box] = []
    leaders: list[tuple[tuple[float, float], tuple[float, float]]] = []

    def crowding(i: int) -> int:
        near = 60 * px_per_pt
        return sum(math.dist(anchors[i], a) < near for a in anchors)

    for i in sorted(range(len(points)), key=lambda i: (-crowding(i), points[i][0])):
        x, y, label = points[i]
        probe = ax.text(0, 0, label, fontsize=8)
        extent = probe.get_window_extent(renderer)
        probe.remove()
        width, height = extent.width, extent.height
        start = anchors[i]
        obstacles = boxes + [m for j, m in enumerate(markers) if j != i]
        others_at = [a for j, a in enumerate(anchors) if j != i]
        best: tuple[float, float, float, str, Box, bool] | None = None
        for radius in _RINGS:
            for angle in _DIRECTIONS:
                dx = radius * math.cos(math.radians(angle))
                dy = radius * math.sin(math.radians(angle))
                align = "left" if dx > 1 else "right" if dx < -1 else "center"
                end = (start[0] + dx * px_per_pt, start[1] + dy * px_per_pt)
                x0 = {"left": end[0], "right": end[0] - width, "center": end[0] - width / 2}[align]
                box = (x0 - pad, end[1] - height / 2 - pad, x0 + width + pad, end[1] + height / 2)
                box = (box[0], box[1], box[2], box[3] + pad)
                inside = (
                    box[0] >= frame.x0
                    and box[2] <= frame.x1
                    and box[1] >= frame.y0
                    and box[3] <= frame.y1
                )
                far = radius > _RINGS[0]
                cost = sum(_COVER + _overlap(box, o) for o in obstacles if _overlap(box, o))
                cost += _LINE * sum(_crosses(a, b, box) for a, b in lines)
                own = _distance(start, box)  # no other point may sit nearer the label
                cost += _LEADER * sum(_distance(a, box) <= own for a in others_at)
                if far:
                    cost += _LEADER * sum(_crosses(start, end, other) for other in boxes)
                    cost += _LEADER * sum(_intersect(start, end, *leader) for leader in leaders)
                cost += 0.0 if inside else 1e9
                if best is None or cost < best[0]:
                    best = (cost, dx, dy, align, box, far)
                if cost == 0:
                    break
            if best is not None and best[0] == 0:
                break
        assert best is not None
        _, dx, dy, align, box, far = best
        ax.annotate(
            label,
            (x, y),
            xytext=(dx, dy),
            textcoords="offset points",
            ha=align,
            va="center",
            fontsize=8,
            zorder=5,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
            arrowprops={"arrowstyle": "-", "color": "#666666", "lw": 0.7} if far else None,
        )
        boxes.append(box)
        if far:
            leaders.append((start, (start[0] + dx * px_per_pt, start[1] + dy * px_per_pt)))


def _crosses(a: tuple[float, float], b: tuple[float, float], box: Box) -> bool:
    """Whether the segment a-b passes through ``box`` (sampled every few pixels)."""
    steps = max(2, min(400, int(math.dist(a, b) / 3)))
    for k in range(1, steps):
        t = k / steps
        x, y = a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t
        if box[0] < x < box[2] and box[1] < y < box[3]:
            return True
    return False


def _intersect(
    a: tuple[float, float], b: tuple[float, float], c: tuple[float, float], d: tuple[float, float]
) -> bool:
    """Whether the segments a-b and c-d cross."""

    def turn(p: tuple[float, float], q: tuple[float, float], r: tuple[float, float]) -> float:
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    return (turn(a, b, c) * turn(a, b, d) < 0) and (turn(c, d, a) * turn(c, d, b) < 0)


def _distance(point: tuple[float, float], box: Box) -> float:
    """How far ``point`` is from the nearest edge of ``box`` (0 inside it)."""
    dx = max(box[0] - point[0], 0.0, point[0] - box[2])
    dy = max(box[1] - point[1], 0.0, point[1] - box[3])
    return math.hypot(dx, dy)


def _overlap(a: Box, b: Box) -> float:
    """The area two boxes (x0, y0, x1, y1) share."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


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
    ax.set_xlim(0, max([1.0, *values]) * 1.12)  # room for the last figure
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
