"""tfaccel.bench.history: the earlier runs a bench run is compared with, read from a real
results database (hand-built runs, no measurement)."""

from __future__ import annotations

from pathlib import Path

from bench_helpers import sample_run

from tfaccel.bench.history import earlier_runs, previous_run
from tfaccel.bench.results import BenchRun
from tfaccel.store import ResultsStore


def _record(db: ResultsStore, run: BenchRun, *, kind: str | None = None, status: str) -> int:
    details = run.details() | ({"kind": kind} if kind else {})
    run_id = db.begin_run(
        run.fingerprint,
        fingerprint_data=run.fingerprint_data,
        started_at=run.started_at,
        tfaccel_version=run.tfaccel_version,
        tf_version=run.tf_version,
        details=details,
    )
    records = (m.to_record() for m in run.measurements)
    db.finish_run(run_id, records, finished_at="2025-01-01T00:02:00+00:00", status=status)
    return run_id


def test_earlier_runs_are_the_complete_bench_runs_however_many_others_came_between(
    tmp_path: Path,
) -> None:
    run = sample_run()
    limit = 2
    with ResultsStore(tmp_path / "results.sqlite") as db:
        bench_runs = [_record(db, run, status="complete") for _ in range(3)]
        _record(db, run, status="incomplete")
        for _ in range(6 * limit):  # more tune runs of this machine since then than 5 x limit
            _record(db, run, kind="tune", status="complete")
        other = sample_run()
        other.fingerprint = "another-machine"
        _record(db, other, status="complete")
        record = db.get_run(_record(db, run, status="complete"))
        assert record is not None
        current = BenchRun.from_store(record, [])

        history = earlier_runs(db, current, limit=limit)
        assert [r.run_id for r in history] == bench_runs[:0:-1]
        assert len(history[0].measurements) == len(run.measurements)
        before = previous_run(db, current)
        assert before is not None and before.run_id == history[0].run_id
        unrecorded = sample_run()  # not recorded: every earlier run counts, newest first
        assert [r.run_id for r in earlier_runs(db, unrecorded)] == [record.id, *bench_runs[::-1]]
