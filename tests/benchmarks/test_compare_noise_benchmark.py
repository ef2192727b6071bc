"""benchmarks/bench_compare_noise.py analyses a hand-built series of runs (no bench is run):
which comparisons engage the noise model, the false-change rates and the synthetic slowdowns."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from tfaccel.bench.results import BenchMeasurement
from tfaccel.store import ResultsStore

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    path = ROOT / "benchmarks" / "bench_compare_noise.py"
    spec = importlib.util.spec_from_file_location("bench_compare_noise", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(config: str, median: float) -> BenchMeasurement:
    samples = [median * (1 + 0.01 * f) for f in (-2, -1, 0, 1, 2)]
    return BenchMeasurement("matmul", {"device": "cpu", "n": config}, "gflops", "GFLOP/s", samples)


def _record(store: ResultsStore, day: int, stable: float, noisy: float) -> None:
    run_id = store.begin_run(
        "fp", fingerprint_data={}, started_at=f"2025-01-{day:02d}T00:00:00+00:00",
        tfaccel_version="0.1.0", tf_version="2.21.0", details={"kind": "bench"},
    )  # fmt: skip
    rows = [_row("stable", stable), _row("noisy", noisy)]
    store.finish_run(run_id, (m.to_record() for m in rows), finished_at="2025-01-01T00:01:00")


def test_the_analysis_counts_engaged_rows_and_slowdowns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "results.sqlite"
    # one row within 1% between runs, one at two speeds 1.4x apart; 8 runs of the same code
    noisy_medians = [100.0, 140.0, 100.0, 138.0, 101.0, 139.0, 100.0, 140.0]
    with ResultsStore(db) as store:
        for day, noisy in enumerate(noisy_medians, start=1):
            _record(store, day, 100.0 + day % 2, noisy)
    assert _load().main(["--runs", "0", "--db", str(db), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["held_out_problems"] == []
    # runs 2-5 have 1-4 earlier runs: not engaged; runs 6-8 have 5-7: engaged
    assert [r["engaged"] for r in result["per_run"]] == [0, 0, 0, 0, 2, 2, 2]
    assert result["not_enough_history"] == 8 and result["engaged"] == 6
    assert result["called"] == 0 and result["rate_engaged"] == 0.0
    # the within-run rule alone calls every 1.4x step of the noisy row
    assert result["within_run_rule_called_engaged"] == 3
    slow = {label.split(" ")[2]: row for label, row in result["slowdown"].items()}
    assert slow["n=stable"]["called"] == {"1.5": "worse", "2.0": "worse", "3.0": "worse"}
    # band 2.25 x log(1.4) (8 runs): x2.1 either way; only x3 is called
    assert slow["n=noisy"]["called"] == {"1.5": "same", "2.0": "same", "3.0": "worse"}
