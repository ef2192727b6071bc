"""A bench run in the history of this machine: measure, record, compare with the last run.

:func:`run_with_history` is the whole ``tfaccel bench`` workflow (and the bench part of
``tfaccel report``): it opens the results database, runs :func:`tfaccel.bench.run`, records
the run, compares it with the newest earlier complete run of the same machine fingerprint (each
row against the noise between runs seen in the earlier runs, :mod:`tfaccel.bench.compare`) and
returns one :class:`BenchResult`. Rendering it is the caller's business (``tfaccel.report``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from tfaccel.bench.analysis import summarize_run
from tfaccel.bench.compare import compare_runs
from tfaccel.bench.options import BenchOptions
from tfaccel.bench.records import Check, RunComparison, RunDocument, RunSummary
from tfaccel.bench.results import BenchRun
from tfaccel.bench.runner import Progress, run
from tfaccel.store import ResultsStore, open_read_only

if TYPE_CHECKING:
    from tfaccel.snapshot import Snapshot

__all__ = [
    "HISTORY_RUNS",
    "BenchDocument",
    "BenchResult",
    "BenchStatus",
    "announce",
    "earlier_runs",
    "load_run",
    "open_store",
    "previous_run",
    "run_with_history",
]

BenchStatus = Literal["ok", "check_failed"]

HISTORY_RUNS = 20
"""How many earlier runs of this machine the between-run noise is estimated from."""


class BenchDocument(TypedDict):
    """``tfaccel bench --json``: the run, its derived tables, the comparison, the database."""

    run: RunDocument
    summary: RunSummary
    comparison: RunComparison | None
    db: str | None


@dataclass(frozen=True)
class BenchResult:
    """One bench run with what was derived from it.

    Attributes:
        run: what was measured (``run_id`` set when it was recorded).
        summary: the derived tables (:func:`tfaccel.bench.summarize_run`).
        comparison: against the newest earlier complete run of this machine; None when no
            comparison was asked for or no earlier run exists.
        db_path: the results database that was opened, None when none was.
    """

    run: BenchRun
    summary: RunSummary
    comparison: RunComparison | None = None
    db_path: Path | None = None

    @classmethod
    def from_run(
        cls,
        run: BenchRun,
        comparison: RunComparison | None = None,
        db_path: Path | None = None,
    ) -> BenchResult:
        """Derive the summary of ``run`` and keep it with the comparison."""
        return cls(run, summarize_run(run), comparison, db_path)

    @property
    def failed_checks(self) -> list[Check]:
        """The correctness checks (the digits convergence) that did not pass."""
        return [c for c in self.summary["checks"] if c["passed"] is False]

    @property
    def status(self) -> BenchStatus:
        """``check_failed`` when a correctness check failed (the training loop did not
        learn), else ``ok``. Figures are never judged against a bound: only checks fail."""
        return "check_failed" if self.failed_checks else "ok"

    def to_dict(self) -> BenchDocument:
        """JSON-ready: the ``tfaccel bench --json`` document."""
        return {
            "run": self.run.to_dict(),
            "summary": self.summary,
            "comparison": self.comparison,
            "db": None if self.db_path is None else str(self.db_path),
        }


def load_run(store: ResultsStore, run_id: int) -> BenchRun | None:
    """Read run ``run_id`` and its results back from the store (None when absent)."""
    record = store.get_run(run_id)
    if record is None:
        return None
    return BenchRun.from_store(record, store.results(run_id))


def previous_run(store: ResultsStore, current: BenchRun) -> BenchRun | None:
    """The newest complete run of the same machine fingerprint before ``current`` (the newest
    of all when ``current`` was not recorded)."""
    record = store.last_run(current.fingerprint, before=current.run_id)
    if record is None:
        return None
    return BenchRun.from_store(record, store.results(record.id))


def earlier_runs(
    store: ResultsStore, current: BenchRun, *, limit: int = HISTORY_RUNS
) -> list[BenchRun]:
    """The newest ``limit`` complete bench runs of the same machine fingerprint before
    ``current`` (all of them when ``current`` was not recorded), newest first: the first is
    :func:`previous_run`."""
    records = store.complete_runs(current.fingerprint, before=current.run_id, limit=limit)
    return [BenchRun.from_store(r, store.results(r.id)) for r in records]


def announce(progress: Progress | None, description: str) -> None:
    """Tell ``progress`` what is happening between measurements, when it can show it (a
    ``status(description)`` method, as the CLI's progress bar has)."""
    status = getattr(progress, "status", None)
    if callable(status):
        status(description)


def open_store(db: str | Path | None, *, save: bool, compare: bool) -> ResultsStore | None:
    """The results database a run uses: opened for writing when it records (created when
    missing), read only when it only compares (nothing is created; None when the default
    database does not exist yet), None when it does neither.

    Raises:
        StoreError: the path cannot be a database (:func:`tfaccel.store.check_store_path`),
            or the database is another program's, corrupt, newer or locked.
    """
    if save:
        return ResultsStore(db)
    return open_read_only(db) if compare else None


def run_with_history(
    options: BenchOptions | None = None,
    *,
    snapshot: Snapshot | None = None,
    db: str | Path | ResultsStore | None = None,
    save: bool = True,
    compare: bool = False,
    progress: Progress | None = None,
) -> BenchResult:
    """Measure this machine, record the run and compare it with the last one.

    The ``tfaccel bench`` workflow as one call; :func:`tfaccel.bench.run` alone measures
    without the database.

    Args:
        options: what to run (default: the full bench on every device).
        snapshot: the machine's Snapshot (default: probed now).
        db: the results database (default ``$XDG_DATA_HOME/tfaccel/results.sqlite``), or one
            the caller opened with :func:`open_store` and closes (``tfaccel bench`` opens it
            before it probes the machine, so a bad ``--db`` is refused first, and once).
        save: record the run in the database (``tfaccel bench --no-save``: False).
        compare: compare with the newest earlier complete run of this machine
            (``--compare``); the database is read even when the run is not recorded,
            then opened read only: nothing is created (a missing ``db`` is refused).
        progress: receives progress (e.g. a rich progress bar).

    Returns:
        A :class:`BenchResult`; its ``status`` is ``check_failed`` when the convergence check
        failed.

    Raises:
        UsageError: bad options or data (the message says which and how to fix it).
        StoreError: the results database is locked, corrupt or cannot be written.

    Example:
        >>> from tfaccel import bench
        >>> options = bench.BenchOptions(profile="smoke", only=("matmul",))
        >>> result = bench.run_with_history(options, compare=True)     # doctest: +SKIP
        >>> result.status, result.comparison["counts"]                  # doctest: +SKIP
        ('ok', {'same': 2})
    """
    options = options or BenchOptions()
    options.validate()
    owned = not isinstance(db, ResultsStore)
    store = db if isinstance(db, ResultsStore) else open_store(db, save=save, compare=compare)
    try:
        announce(progress, "importing TensorFlow")
        measured = run(options, store=store if save else None, progress=progress, snapshot=snapshot)
        comparison = None
        if compare and store is not None:
            history = earlier_runs(store, measured)  # the first is the previous run
            if history:
                comparison = compare_runs(history[0], measured, history)
    finally:
        if store is not None and owned:
            store.close()
    return BenchResult.from_run(measured, comparison, None if store is None else store.path)
