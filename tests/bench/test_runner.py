"""The bench runner on this machine: the training loop learns (digits convergence), an
interrupted run is recorded as incomplete without touching earlier runs, progress is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfaccel import bench
from tfaccel.bench import runner
from tfaccel.bench.convergence import ACCURACY_THRESHOLD, digits_convergence
from tfaccel.bench.targets import BenchTarget
from tfaccel.core.errors import UsageError
from tfaccel.snapshot import Snapshot
from tfaccel.store import ResultsStore

CPU = BenchTarget("cpu", "cpu", "CPU", ("/CPU:0",), ("float32",))


def test_digits_training_reaches_the_accuracy_threshold() -> None:
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


@pytest.mark.parametrize("profile, flag", [("smoke", "--smoke"), ("quick", "--quick")])
def test_what_a_short_run_leaves_out_names_the_flag_of_the_run(profile: str, flag: str) -> None:
    from tfaccel.bench.datasets import synthetic
    from tfaccel.bench.runner import _plan

    options = bench.BenchOptions(profile=profile, only=("mlp",), device="cpu")
    data = {"mlp": synthetic(64, (28, 28), 10)}
    _, skipped = _plan(options, [CPU], data)
    [reason] = [s.reason for s in skipped if s.benchmark == "mlp"]
    assert reason.endswith(f"measured in the full run (without {flag})")
    other = "--quick" if flag == "--smoke" else "--smoke"
    assert other not in reason


def test_bandwidth_counts_bytes_read_and_written_in_place() -> None:
    from tfaccel.bench import micro
    from tfaccel.bench.options import PROFILES

    [m] = micro.bandwidth(CPU, PROFILES["smoke"], repeats=2, warmup=0, tick=lambda _: None)
    assert m.config == {"device": "cpu", "name": "x*s in place", "bytes": 4 * 1024 * 1024}
    assert m.label == "x*s in place 4 MiB" and m.unit == "GB/s"
    assert m.extra["bytes_moved_per_pass"] == 2 * 4 * 1024 * 1024
    assert m.extra["counted"] == "bytes read + written" and m.summary.median > 0


def test_synthetic_data_beyond_memory_is_refused_before_any_is_allocated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def allocate(*args: object, **kwargs: object) -> None:
        raise AssertionError("synthetic data was allocated")

    monkeypatch.setattr(runner, "synthetic", allocate)
    snap = Snapshot()
    snap.cpu.memory_available_bytes = 8 * 2**30
    options = bench.BenchOptions(profile="smoke", only=("mlp",), data="synthetic:100000000000")
    with pytest.raises(UsageError) as info:
        bench.run(options, snapshot=snap)
    message = str(info.value)
    assert "does not fit in this machine's memory" in message and "Fix:" in message
