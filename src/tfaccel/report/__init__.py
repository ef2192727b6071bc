"""Render results: the terminal (rich), JSON, Markdown, HTML and PNG plots.

:func:`make_report` is the ``tfaccel report`` workflow as one call: the devices, the doctor's
checks and a bench run (recorded and compared with the last run of this machine), written as
report.html (self-contained: plots embedded, nothing beside it needed), report.json (strict
JSON), report.md, and plots/*.png, the PNG files report.md links. The modules render:
:mod:`~tfaccel.report.text` for the terminal; :mod:`~tfaccel.report.document` builds report.json's
document, :mod:`~tfaccel.report.tables` its tables, :mod:`~tfaccel.report.markdown` and
:mod:`~tfaccel.report.html` render them, :mod:`~tfaccel.report.files` writes the directory;
:mod:`~tfaccel.report.plots` draws the PNG plots.

Importing this package imports neither TensorFlow nor the renderers; :func:`make_report` does.

Example:
    >>> from tfaccel import bench, report
    >>> options = bench.BenchOptions(profile="quick")
    >>> result = report.make_report(options, out="tfaccel-report")   # doctest: +SKIP
    >>> result.files.html, result.status                              # doctest: +SKIP
    (PosixPath('tfaccel-report/report.html'), 'ok')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfaccel import inventory, probe
from tfaccel.diagnosis import diagnose
from tfaccel.planning.source import reference_plans
from tfaccel.report.plots import render_all

if TYPE_CHECKING:
    from tfaccel.bench import BenchOptions, BenchResult, BenchStatus, Progress
    from tfaccel.diagnosis import DoctorReport
    from tfaccel.inventory import Inventory
    from tfaccel.report.document import ReportDocument
    from tfaccel.report.files import ReportFiles
    from tfaccel.snapshot import Snapshot

__all__ = ["DEFAULT_OUT", "ReportResult", "make_report"]

DEFAULT_OUT = "tfaccel-report"
PLAN_BATCH = 256
"""The batch the reference models are planned at when the bench sets none (its own default)."""


@dataclass(frozen=True)
class ReportResult:
    """What ``tfaccel report`` measured, judged and wrote.

    Attributes:
        bench: the bench run, its tables and its comparison with the last run.
        inventory: the devices.
        doctor: the doctor's findings.
        document: report.json's document (without the names of the files beside it).
        files: the files written.
    """

    bench: BenchResult
    inventory: Inventory
    doctor: DoctorReport
    document: ReportDocument
    files: ReportFiles

    @property
    def status(self) -> BenchStatus:
        """The bench's status: ``check_failed`` when the convergence check failed."""
        return self.bench.status

    @property
    def written(self) -> dict[str, str]:
        """Every file written, by kind -> path: ``html``, ``json``, ``markdown``, then
        ``plot:<name>`` for each PNG report.md links (report.html embeds them)."""
        return self.files.written()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the ``tfaccel report --json`` document (report.json's document and
        the paths written)."""
        return {**self.document, "written": self.written}


def make_report(
    options: BenchOptions | None = None,
    *,
    out: str | Path = DEFAULT_OUT,
    snapshot: Snapshot | None = None,
    db: str | Path | None = None,
    save: bool = True,
    progress: Progress | None = None,
) -> ReportResult:
    """Probe, diagnose and bench this machine, plan the reference models (memory, fit and
    epoch time on every accelerator, predicted), and write the report files into ``out``.

    The bench run is recorded in the results database and compared with the last complete
    run of this machine (neither with ``save=False``). ``out`` is checked before anything is
    measured; each file is written to a temporary name and renamed into place.

    Args:
        options: what to run (default: the full bench on every device).
        out: the directory for report.html, report.json, report.md and plots/, the PNG
            files report.md links; created when they are written, so a report that fails
            or is interrupted before leaves no new folder behind.
        snapshot: the machine's Snapshot (default: probed now).
        db: the results database (default ``$XDG_DATA_HOME/tfaccel/results.sqlite``).
        save: record the run and compare it with the last one (``--no-save``: False).
        progress: receives progress (e.g. a rich progress bar).

    Returns:
        A :class:`ReportResult`; its ``status`` is ``check_failed`` when the convergence
        check failed (the files are written all the same).

    Raises:
        UsageError: bad options or data, or ``out`` cannot be written.
        StoreError: the results database is locked, corrupt or cannot be written.
    """
    # local: bench, report.document and report.files import numpy and rich
    from tfaccel import bench
    from tfaccel.bench.history import announce
    from tfaccel.report.document import build_document
    from tfaccel.report.files import check_writable, write_report

    options = options or bench.BenchOptions()
    options.validate()
    out_dir = check_writable(out, create=False)  # made when the files are written
    snap = snapshot or probe.snapshot()
    inv = inventory.build(snap)
    doctor = diagnose(snap)
    measured = bench.run_with_history(
        options, snapshot=snap, db=db, save=save, compare=save, progress=progress
    )
    announce(progress, "planning the reference models")
    plans = reference_plans(options.batch_size or PLAN_BATCH, inventory=inv)
    announce(progress, "drawing the plots")
    document = build_document(
        measured.run,
        devices=inv.to_dict(),
        doctor=doctor.to_dict(),
        comparison=measured.comparison,
        summary=measured.summary,
        plan=plans,
    )
    files = write_report(out_dir, document, render_all(document["summary"]))
    return ReportResult(measured, inv, doctor, document, files)
