"""What a bench run produces: measurements (samples + robust statistics), skips, the run.

Plain data with ``to_dict``/``from_dict``; converted to and from :mod:`tfaccel.store` records,
so a run read back from the database renders the same as one just measured.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tfaccel.bench.records import RunDocument
from tfaccel.core.records import Record, from_json, to_json
from tfaccel.core.timing import Summary, summarize
from tfaccel.core.units import fmt_bytes
from tfaccel.store import ResultRecord, RunRecord

__all__ = ["BenchMeasurement", "BenchRun", "Skipped", "config_label", "higher_is_better"]

_LOWER_IS_BETTER_UNITS = ("s", "ms")


def higher_is_better(unit: str) -> bool:
    """Rates (``.../s``) and accuracies are better higher; durations (``s``) lower."""
    return unit not in _LOWER_IS_BETTER_UNITS


_LABEL_KEYS = ("feed", "batch_size", "precision", "dtype", "jit", "n", "bytes", "direction")
_SHORT = {
    "numpy": "fit(numpy)",
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "mixed_bfloat16": "bf16 mixed",
    "mixed_float16": "fp16 mixed",
    "host_to_device": "host->device",
    "device_to_host": "device->host",
}


def config_label(config: dict[str, Any]) -> str:
    """A short human label of a configuration, without the device: 'tf.data bs256 bf16 XLA'."""
    parts: list[str] = [str(config["name"])] if config.get("name") else []
    for key in _LABEL_KEYS:
        if key not in config:
            continue
        value = config[key]
        if key == "batch_size":
            parts.append(f"bs{value}")
        elif key == "jit":
            parts.append("XLA" if value else "")
        elif key == "n":
            parts.append(f"n={value}")
        elif key == "bytes":
            parts.append(_size(int(value)))
        else:
            parts.append(_SHORT.get(str(value), str(value)))
    return " ".join(p for p in parts if p) or "default"


def _size(n: int) -> str:
    return fmt_bytes(n, digits=6, smallest="B", trim=True)


@dataclass
class BenchMeasurement:
    """One figure of one configuration: all its samples and what they relate to.

    Attributes:
        benchmark: ``matmul``, ``reference_cnn``...
        config: what identifies the configuration (``device`` always, then its settings).
        metric: ``tflops``, ``gb_per_s``, ``images_per_s``, ``test_accuracy``.
        unit: ``TFLOP/s``, ``GB/s``, ``images/s``, ``fraction``.
        samples: one value per timed repeat, in the metric's unit.
        extra: figures derived or needed to derive (FLOPs per image, peak, batch size...).
        model_fingerprint: the architecture fingerprint of the model a training figure was
            measured on (:func:`tfaccel.architecture.fingerprint`); None for micro benchmarks.
    """

    benchmark: str
    config: dict[str, Any]
    metric: str
    unit: str
    samples: list[float]
    extra: dict[str, Any] = field(default_factory=dict)
    model_fingerprint: str | None = None

    @property
    def summary(self) -> Summary:
        """Median, quartiles and range of the samples."""
        return summarize(self.samples)

    @property
    def device(self) -> str:
        """The device the figure was measured on (``cpu``, ``gpu:0``, ``gpus``)."""
        return str(self.config.get("device", ""))

    @property
    def label(self) -> str:
        """Human label of the configuration (without the device)."""
        return config_label({k: v for k, v in self.config.items() if k != "device"})

    @property
    def higher_is_better(self) -> bool:
        """Whether a larger value of this metric is an improvement."""
        return higher_is_better(self.unit)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the summary and label added."""
        return {**to_json(self), "summary": self.summary.to_dict(), "label": self.label}

    def to_record(self) -> ResultRecord:
        """The store's form of this measurement."""
        s = self.summary
        return ResultRecord(
            benchmark=self.benchmark,
            config=dict(self.config),
            metric=self.metric,
            unit=self.unit,
            median=s.median,
            q1=s.q1,
            q3=s.q3,
            n=s.n,
            samples=list(self.samples),
            extra=dict(self.extra),
            model_fingerprint=self.model_fingerprint,
        )

    @classmethod
    def from_record(cls, record: ResultRecord) -> BenchMeasurement:
        """Rebuild a measurement from a stored record."""
        return cls(
            benchmark=record.benchmark,
            config=dict(record.config),
            metric=record.metric,
            unit=record.unit,
            samples=list(record.samples),
            extra=dict(record.extra),
            model_fingerprint=record.model_fingerprint,
        )

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> BenchMeasurement:
        """Rebuild a measurement from :meth:`to_dict` output (the summary and label, derived
        from the samples, are not read)."""
        return from_json(cls, doc, where="measurement")


@dataclass
class Skipped(Record):
    """A benchmark (or one configuration of it) that was not run, and why."""

    benchmark: str
    device: str
    reason: str
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchRun:
    """Everything one bench run measured.

    Attributes:
        started_at / finished_at: ISO 8601 UTC.
        status: ``complete``, ``incomplete`` (interrupted) or ``running``.
        options: the :class:`~tfaccel.bench.options.BenchOptions` as a dict.
        fingerprint / fingerprint_data: the machine fingerprint (see :mod:`tfaccel.store`).
        tfaccel_version / tf_version: versions that measured it.
        targets: the devices measured, with their peaks (``BenchTarget.to_dict()``).
        measurements / skipped: the figures, and what was not run with the reason.
        notes: facts a reader needs (data source, conventions).
        run_id: the id in the results database, None when not stored.
    """

    started_at: str
    finished_at: str | None
    status: str
    options: dict[str, Any]
    fingerprint: str
    fingerprint_data: dict[str, Any]
    tfaccel_version: str
    tf_version: str | None
    targets: list[dict[str, Any]] = field(default_factory=list)
    measurements: list[BenchMeasurement] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    run_id: int | None = None

    def find(self, benchmark: str, **config: Any) -> list[BenchMeasurement]:
        """Measurements of ``benchmark`` whose config has all the given key/values."""
        return [
            m
            for m in self.measurements
            if m.benchmark == benchmark and all(m.config.get(k) == v for k, v in config.items())
        ]

    def details(self) -> dict[str, Any]:
        """What the store keeps in ``runs.details_json``."""
        return {
            "options": self.options,
            "targets": self.targets,
            "skipped": [s.to_dict() for s in self.skipped],
            "notes": self.notes,
        }

    def to_dict(self) -> RunDocument:
        """JSON-ready: the run with its details and every measurement (each with its summary
        and label)."""
        doc = {**to_json(self), "measurements": [m.to_dict() for m in self.measurements]}
        return typing.cast(RunDocument, doc)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> BenchRun:
        """Rebuild a run from :meth:`to_dict` output."""
        return from_json(cls, doc, where="run")

    @classmethod
    def from_store(cls, run: RunRecord, records: list[ResultRecord]) -> BenchRun:
        """Rebuild a run from the database."""
        details = run.details
        return cls(
            started_at=run.started_at,
            finished_at=run.finished_at,
            status=run.status,
            options=dict(details.get("options") or {}),
            fingerprint=run.fingerprint,
            fingerprint_data=run.fingerprint_data,
            tfaccel_version=run.tfaccel_version,
            tf_version=run.tf_version,
            targets=list(details.get("targets") or []),
            measurements=[BenchMeasurement.from_record(r) for r in records],
            skipped=[Skipped.from_dict(s) for s in details.get("skipped") or []],
            notes=list(details.get("notes") or []),
            run_id=run.id,
        )
