"""The ``tfaccel report`` document: report.json's content and the names of its sibling files.

:func:`build_document` assembles it (what to change, devices, doctor, bench run, derived
tables, comparison with the last run). The document and its rows are the typed records of
:mod:`tfaccel.bench.records`; a report.json read back renders the same as the document just
built.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, TypedDict

from tfaccel._version import __version__
from tfaccel.bench.analysis import summarize_run
from tfaccel.bench.records import RunComparison, RunDocument, RunSummary
from tfaccel.report.changes import Changes, what_to_change

if TYPE_CHECKING:
    from tfaccel.bench.results import BenchRun

__all__ = [
    "PLOT_TITLES",
    "SCHEMA",
    "ReportDocument",
    "ReportFileNames",
    "SavedReportDocument",
    "build_document",
    "document_changes",
]

SCHEMA = "tfaccel-report/1"
PLOT_TITLES = {
    "throughput": "Training throughput per configuration",
    "roofline": "Roofline: matmul and bandwidth ceilings",
    "step_times": "Step-time distributions",
    "speedup": "Speedups",
}


class ReportDocument(TypedDict):
    """report.json (without its file names): the run, its tables, devices and doctor, and
    what to change (:func:`tfaccel.report.changes.what_to_change`)."""

    schema: str
    generated_at: str
    tfaccel_version: str
    changes: Changes
    summary: RunSummary
    comparison: RunComparison | None
    devices: dict[str, Any] | None
    doctor: dict[str, Any] | None
    bench: RunDocument
    plan: list[dict[str, Any]] | None


class ReportFileNames(TypedDict):
    """Where report.json says its sibling files are, relative to its directory (``plots``:
    the PNG files report.md links; report.html embeds the same plots and needs none of them).
    """

    html: str
    json: str
    markdown: str
    plots: dict[str, str]


class SavedReportDocument(ReportDocument):
    """report.json as written: the document and the names of the files beside it."""

    files: ReportFileNames


def build_document(
    run: BenchRun,
    *,
    devices: dict[str, Any] | None = None,
    doctor: dict[str, Any] | None = None,
    comparison: RunComparison | None = None,
    summary: RunSummary | None = None,
    plan: list[dict[str, Any]] | None = None,
) -> ReportDocument:
    """The report.json document.

    Args:
        run: a :class:`tfaccel.bench.BenchRun`.
        devices: ``Inventory.to_dict()``.
        doctor: ``DoctorReport.to_dict()``.
        comparison: :func:`tfaccel.bench.compare_runs` output, or None.
        summary: :func:`tfaccel.bench.summarize_run` of ``run`` (derived when not given).
        plan: :func:`tfaccel.planning.source.reference_plans` rows, or None.
    """
    summary = summarize_run(run) if summary is None else summary
    return {
        "schema": SCHEMA,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "tfaccel_version": __version__,
        "changes": what_to_change(summary, doctor, plan),
        "summary": summary,
        "comparison": comparison,
        "devices": devices,
        "doctor": doctor,
        "bench": run.to_dict(),
        "plan": plan,
    }


def document_changes(doc: ReportDocument) -> Changes:
    """The document's ``changes``, derived again for a report.json written without them."""
    return doc.get("changes") or what_to_change(doc["summary"], doc.get("doctor"), doc.get("plan"))
