"""The bench runner on this machine: the training loop learns (digits convergence), an
interrupted run is recorded as incomplete without touching earlier runs, progress is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfaccel import bench
from tfaccel.bench.convergence import ACCURACY_THRESHOLD, digits_convergence
from tfaccel.bench.targets import Target
from tfaccel.store import ResultsStore

CPU = Target("cpu", "cpu", "CPU", ("/CPU:0",), ("float32",))


def test_digits_training_reaches_the_accuracy_threshold() -> None:
    pytest.importorskip("sklearn")
    m = digits_convergence(CPU, epochs=30)
    assert m.samples[0] >= ACCURACY_THRESHOLD == 0.95
    assert m.extra["passed"] is True
    assert m.extra["train_images"] + m.extra["test_images"] == 1797


class _Counting:
    def __init__(self, stop_after: int | None = None) -> None:
        self.total: int | None = None
        self.labels: list[str] = []
        self.stop_after = stop_after

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, label: str) -> None:
        self.labels.append(label)
        if self.stop_after is not None and len(self.labels) >= self.stop_after:
            raise KeyboardInterrupt


def test_progress_counts_every_timed_call_and_interrupts_are_recorded(tmp_path: Path) -> None:
    options = bench.BenchOptions(
        profile="smoke", only=("matmul", "vector_add"), device="cpu", repeats=2
    )
    with ResultsStore(tmp_path / "r.sqlite") as db:
        progress = _Counting()
        done = bench.run(options, store=db, progress=progress)
        assert done.status == "complete" and progress.total == len(progress.labels)
        assert any(label.startswith("vector_add on cpu") for label in progress.labels)
        with pytest.raises(KeyboardInterrupt):
            bench.run(options, store=db, progress=_Counting(stop_after=progress.total))
        runs = db.runs()
        assert [r.status for r in runs] == ["incomplete", "complete"]
        kept = {r.benchmark for r in db.results(runs[0].id)}
        assert kept == {"matmul"}  # measured before the interrupt, kept for the record
        assert db.last_run(done.fingerprint).id == done.run_id  # type: ignore[union-attr]
        again = bench.load_run(db, done.run_id)  # type: ignore[arg-type]
        assert again is not None and len(again.measurements) == len(done.measurements)
