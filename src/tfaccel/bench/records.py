"""The records a bench run hands to its renderers, each key written down once.

TypedDicts: at run time they are the plain dicts of the JSON documents (``tfaccel bench
--json``, report.json), so a document read back from a file renders like one just measured;
for the type checker every key a renderer reads is declared here. Units are in the names
(``_percent``, ``_ms``, ``_seconds``); None means "not available" (no peak known, no Keras
default measured...).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = [
    "CHANGED",
    "ChangeStatus",
    "Check",
    "ComparisonRow",
    "DeviceRow",
    "Headline",
    "MicroRow",
    "ModelRow",
    "RooflineDevice",
    "RooflinePoint",
    "RunComparison",
    "RunDocument",
    "RunSummary",
    "SkippedDocument",
]

ChangeStatus = Literal["better", "worse", "same", "not compared"]
CHANGED: tuple[ChangeStatus, ...] = ("better", "worse")


class MicroRow(TypedDict):
    """One micro-benchmark figure: median and spread, % of the spec peak and of the best."""

    benchmark: str
    device: str
    device_label: str
    config: str
    unit: str
    median: float
    q1: float
    q3: float
    relative_iqr: float
    n: int
    percent_of_peak: float | None
    percent_of_best: float | None


class ModelRow(TypedDict):
    """One training configuration of one model on one device, with every derived figure."""

    model: str
    device: str
    device_label: str
    config: str
    settings: dict[str, Any]
    images_per_s: float
    q1: float
    q3: float
    relative_iqr: float
    n: int
    step_time_ms: float
    step_time_samples_ms: list[float]
    epoch_seconds: float
    flops_per_image: float | None
    model_tflops: float | None
    matmul_ceiling_tflops: float | None
    utilisation_percent: float | None
    mfu_percent: float | None
    speedup_vs_default: float | None
    vs_default: str | None
    vs_default_different: bool | None


class DeviceRow(TypedDict):
    """The best configuration of one model on one device, against the CPU."""

    model: str
    device: str
    device_label: str
    best_config: str
    images_per_s: float
    relative_iqr: float
    utilisation_percent: float | None
    mfu_percent: float | None
    epoch_seconds: float
    speedup_over_cpu: float | None


class Headline(TypedDict):
    """The Keras default against the best configuration measured, with the noise."""

    model: str
    device: str
    device_label: str
    default_config: str
    default_images_per_s: float
    default_relative_iqr: float
    best_config: str
    best_images_per_s: float
    best_relative_iqr: float
    ratio: float
    noise: float
    different: bool
    verdict: str


class RooflinePoint(TypedDict):
    """One measured kernel on the roofline: FLOP per byte moved, TFLOP/s achieved (a kernel
    whose arithmetic intensity is not known is not a point). ``label`` names it as the micro
    table does (benchmark and configuration); ``dtype`` is the matmul's (None otherwise)."""

    label: str
    intensity: float
    tflops: float
    dtype: str | None


class RooflineDevice(TypedDict):
    """The ceilings of one device (measured and spec) and its measured points.

    ``bandwidth_gbs`` is one micro-table figure, bytes read + written per second, and
    ``bandwidth_source`` names its row (``bandwidth x*s in place 256 MiB``); a report.json
    written before it existed has no ``bandwidth_source``.
    """

    device: str
    device_label: str
    measured_tflops: dict[str, float]
    spec_tflops: dict[str, float]
    bandwidth_gbs: float | None
    bandwidth_source: str | None
    spec_bandwidth_gbs: float | None
    points: list[RooflinePoint]


class Check(TypedDict):
    """A correctness check (the digits convergence): its value against the threshold."""

    benchmark: str
    device: str
    value: float
    threshold: float | None
    passed: bool | None


class RunSummary(TypedDict):
    """Every derived table of a run (:func:`tfaccel.bench.summarize_run`)."""

    headline: Headline | None
    device_table: list[DeviceRow]
    models: list[ModelRow]
    micro: list[MicroRow]
    roofline: list[RooflineDevice]
    checks: list[Check]


class ComparisonRow(TypedDict):
    """One figure measured in both runs: both medians, the ratio and the verdict."""

    benchmark: str
    device: str
    config: str
    unit: str
    before: float
    after: float
    ratio: float | None
    status: ChangeStatus
    verdict: str
    between_run_band: float
    """The relative band a change had to exceed (the noise between runs of this row)."""
    history_runs: int
    """Earlier runs of one code that measured that band (below 3: no change is called)."""


class RunComparison(TypedDict):
    """A run against an earlier run of the same machine (:func:`tfaccel.bench.compare_runs`)."""

    before_run_id: int | None
    after_run_id: int | None
    before_started_at: str
    rows: list[ComparisonRow]
    counts: dict[str, int]


class SkippedDocument(TypedDict):
    """A benchmark (or one configuration of it) that was not run, and why."""

    benchmark: str
    device: str
    reason: str
    config: dict[str, Any]


class RunDocument(TypedDict):
    """A whole run as JSON (:meth:`tfaccel.bench.BenchRun.to_dict`)."""

    run_id: int | None
    started_at: str
    finished_at: str | None
    status: str
    fingerprint: str
    fingerprint_data: dict[str, Any]
    tfaccel_version: str
    tf_version: str | None
    options: dict[str, Any]
    targets: list[dict[str, Any]]
    skipped: list[SkippedDocument]
    notes: list[str]
    measurements: list[dict[str, Any]]
