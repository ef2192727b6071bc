"""Figures derived from a run: ceilings, utilisation, the device table, the headline.

Pure functions of a :class:`~tfaccel.bench.results.BenchRun` (measured now or read back from
the store), returning the typed records of :mod:`tfaccel.bench.records` (JSON-ready dicts)
that every renderer (terminal, Markdown, HTML, plots) shares.
"""

from __future__ import annotations

from tfaccel.bench import training
from tfaccel.bench.options import MICRO, MODEL_BENCHMARKS
from tfaccel.bench.records import (
    Check,
    DeviceRow,
    Headline,
    MicroRow,
    ModelRow,
    RooflineDevice,
    RooflinePoint,
    RunSummary,
)
from tfaccel.bench.results import BenchMeasurement, BenchRun
from tfaccel.bench.training import EPOCH_IMAGES
from tfaccel.core.timing import compare
from tfaccel.inventory.precision import POLICY_DTYPE

__all__ = [
    "BANDWIDTH_BENCHMARKS",
    "bandwidth_measurement",
    "device_labels",
    "device_table",
    "headline",
    "matmul_ceiling",
    "micro_rows",
    "model_rows",
    "roofline",
    "summarize_run",
]


def device_labels(run: BenchRun) -> dict[str, str]:
    """BenchTarget name -> human label ("cpu" -> "CPU Intel Xeon ...")."""
    return {str(t.get("name")): str(t.get("label", t.get("name"))) for t in run.targets}


def matmul_ceiling(run: BenchRun, device: str, dtype: str) -> float | None:
    """The best median matmul TFLOP/s measured on ``device`` in ``dtype`` (None if none)."""
    values = [m.summary.median for m in run.find("matmul", device=device, dtype=dtype)]
    return max(values) if values else None


BANDWIDTH_BENCHMARKS = ("bandwidth", "vector_add")
"""Where the measured bandwidth ceiling comes from, first choice first."""


def bandwidth_measurement(run: BenchRun, device: str) -> BenchMeasurement | None:
    """The measurement that is the bandwidth ceiling of ``device``: the ``bandwidth``
    benchmark (a buffer streamed in place, bytes read + written), else the in-place vector add;
    the best median when several configurations ran. None when neither was measured."""
    for benchmark in BANDWIDTH_BENCHMARKS:
        found = [m for m in run.measurements if m.benchmark == benchmark and m.device == device]
        if found:
            return max(found, key=lambda m: m.summary.median)
    return None


def _pct(value: float | None, of: float | None) -> float | None:
    return 100.0 * value / of if value is not None and of else None


def micro_rows(run: BenchRun) -> list[MicroRow]:
    """One row per micro measurement: median, IQR, % of spec peak and of best measured."""
    labels = device_labels(run)
    rows: list[MicroRow] = []
    for m in run.measurements:
        if m.benchmark not in MICRO:
            continue
        s = m.summary
        rows.append(
            {
                "benchmark": m.benchmark,
                "device": m.device,
                "device_label": labels.get(m.device, m.device),
                "config": m.label,
                "unit": m.unit,
                "median": s.median,
                "q1": s.q1,
                "q3": s.q3,
                "relative_iqr": s.relative_iqr,
                "n": s.n,
                "percent_of_peak": m.extra.get("percent_of_peak"),
                "percent_of_best": m.extra.get("percent_of_best"),
            }
        )
    return rows


def _default_of(run: BenchRun, m: BenchMeasurement) -> BenchMeasurement | None:
    found = [
        d
        for d in run.find(m.benchmark, device=m.device)
        if training.KERAS_DEFAULT.matches(d.config)
    ]
    return found[0] if found else None


def model_rows(run: BenchRun) -> list[ModelRow]:
    """One row per (model, device, configuration) with every derived training figure."""
    labels = device_labels(run)
    rows: list[ModelRow] = []
    for m in run.measurements:
        if m.benchmark not in MODEL_BENCHMARKS:
            continue
        s = m.summary
        dtype = POLICY_DTYPE.get(str(m.config.get("precision")), "float32")
        ceiling = matmul_ceiling(run, m.device, dtype)
        flops = m.extra.get("flops_per_image")
        achieved = s.median * flops / 1e12 if flops else None
        peak = m.extra.get("peak_tflops")
        steps = [float(v) for v in m.extra.get("step_time_s") or []]
        default = _default_of(run, m)
        vs_default = None
        if default is not None and default is not m:
            vs_default = compare(default.summary, s, higher_is_better=True)
        rows.append(
            {
                "model": m.benchmark,
                "device": m.device,
                "device_label": labels.get(m.device, m.device),
                "config": m.label,
                "settings": {k: v for k, v in m.config.items() if k != "device"},
                "images_per_s": s.median,
                "q1": s.q1,
                "q3": s.q3,
                "relative_iqr": s.relative_iqr,
                "n": s.n,
                "step_time_ms": 1000.0 * m.extra.get("global_batch", 0) / s.median,
                "step_time_samples_ms": [1000.0 * v for v in steps],
                "epoch_seconds": EPOCH_IMAGES / s.median,
                "flops_per_image": flops,
                "model_tflops": achieved,
                "matmul_ceiling_tflops": ceiling,
                "utilisation_percent": _pct(achieved, ceiling),
                "mfu_percent": _pct(achieved, peak),
                "speedup_vs_default": vs_default.ratio if vs_default else None,
                "vs_default": vs_default.verdict if vs_default else None,
                "vs_default_different": vs_default.different if vs_default else None,
            }
        )
    return rows


def device_table(run: BenchRun) -> list[DeviceRow]:
    """device | utilisation | time per epoch | speedup over CPU, per model (best configuration)."""
    rows = model_rows(run)
    best: dict[tuple[str, str], ModelRow] = {}
    for row in rows:
        key = (row["model"], row["device"])
        if key not in best or row["images_per_s"] > best[key]["images_per_s"]:
            best[key] = row
    out: list[DeviceRow] = []
    for (model, device), row in best.items():
        cpu = best.get((model, "cpu"))
        out.append(
            {
                "model": model,
                "device": device,
                "device_label": row["device_label"],
                "best_config": row["config"],
                "images_per_s": row["images_per_s"],
                "relative_iqr": row["relative_iqr"],
                "utilisation_percent": row["utilisation_percent"],
                "mfu_percent": row["mfu_percent"],
                "epoch_seconds": row["epoch_seconds"],
                "speedup_over_cpu": row["images_per_s"] / cpu["images_per_s"] if cpu else None,
            }
        )
    return out


def headline(run: BenchRun, model: str = "reference_cnn") -> Headline | None:
    """The Keras default against the best configuration found, with the ratio and the noise.

    Uses ``model`` on the first device where its Keras default was measured (falls back to
    any model). None when no Keras-default measurement exists.
    """
    candidates = [model, *(m for m in MODEL_BENCHMARKS if m != model)]
    for name in candidates:
        for m in run.measurements:
            if m.benchmark != name or _default_of(run, m) is not m:
                continue
            same = [o for o in run.measurements if o.benchmark == name and o.device == m.device]
            best = max(same, key=lambda o: o.summary.median)
            verdict = compare(m.summary, best.summary, higher_is_better=True)
            return {
                "model": name,
                "device": m.device,
                "device_label": device_labels(run).get(m.device, m.device),
                "default_config": m.label,
                "default_images_per_s": m.summary.median,
                "default_relative_iqr": m.summary.relative_iqr,
                "best_config": best.label,
                "best_images_per_s": best.summary.median,
                "best_relative_iqr": best.summary.relative_iqr,
                "ratio": verdict.ratio,
                "noise": verdict.noise,
                "different": verdict.different,
                "verdict": _headline_verdict(verdict.different, verdict.noise, best is m),
            }
    return None


def _headline_verdict(different: bool, noise: float, default_is_best: bool) -> str:
    if default_is_best:
        return "the Keras default was the best configuration measured"
    if different:
        return f"a difference beyond the noise (IQR up to {noise * 100:.1f}%)"
    return f"no difference: the gap is inside the noise (IQR up to {noise * 100:.1f}%)"


def roofline(run: BenchRun) -> list[RooflineDevice]:
    """Per device: the compute ceilings (measured and spec), the bandwidth ceiling, and points.

    A point is (arithmetic intensity FLOP/byte, achieved TFLOP/s) for each matmul
    configuration and the vector add, labelled as its row of the micro table. The bandwidth
    ceiling is one measured figure, named by ``bandwidth_source`` as the micro table names it.
    """
    out: list[RooflineDevice] = []
    for target in run.targets:
        device = str(target.get("name"))
        points: list[RooflinePoint] = []
        for m in run.measurements:
            if m.device != device:
                continue
            intensity = m.extra.get("arithmetic_intensity")
            if m.benchmark == "matmul" and intensity:
                points.append(
                    {
                        "label": f"matmul {m.label}",
                        "intensity": float(intensity),
                        "tflops": m.summary.median,
                        "dtype": m.config.get("dtype"),
                    }
                )
            elif m.benchmark == "vector_add":
                points.append(
                    {
                        "label": f"vector_add {m.label}",
                        "intensity": 1 / 12,
                        "tflops": m.summary.median / 12 / 1000,
                        "dtype": None,
                    }
                )
        ceilings: dict[str, float] = {}
        for dtype in ("float32", "bfloat16", "float16"):
            value = matmul_ceiling(run, device, dtype)
            if value is not None:
                ceilings[dtype] = value
        if not points and not ceilings:
            continue
        stream = bandwidth_measurement(run, device)
        out.append(
            {
                "device": device,
                "device_label": str(target.get("label", device)),
                "measured_tflops": ceilings,
                "spec_tflops": dict(target.get("peak_tflops") or {}),
                "bandwidth_gbs": stream.summary.median if stream is not None else None,
                "bandwidth_source": f"{stream.benchmark} {stream.label}" if stream else None,
                "spec_bandwidth_gbs": target.get("peak_bandwidth_gbs"),
                "points": points,
            }
        )
    return out


def summarize_run(run: BenchRun) -> RunSummary:
    """Every derived table of a run in one JSON-ready dict."""
    checks: list[Check] = [
        {
            "benchmark": m.benchmark,
            "device": m.device,
            "value": m.summary.median,
            "threshold": m.extra.get("threshold"),
            "passed": m.extra.get("passed"),
        }
        for m in run.measurements
        if m.benchmark == "digits"
    ]
    return {
        "headline": headline(run),
        "device_table": device_table(run),
        "models": model_rows(run),
        "micro": micro_rows(run),
        "roofline": roofline(run),
        "checks": checks,
    }
