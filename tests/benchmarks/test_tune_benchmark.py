"""benchmarks/bench_tune.py runs end to end (smoke: tiny model) and its figures are sane.

Benchmarks are not timed tests: this checks the script works and its numbers are consistent,
never a wall-clock bound or a speed-up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import STARTING_DIR, STARTING_ENVIRON, clean_env

ROOT = Path(__file__).resolve().parents[2]


def _bench_tune_smoke() -> subprocess.CompletedProcess[str]:
    """The run, in the session's starting environment and folder (it may run beside a test)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_tune.py"), "--smoke", "--json"],
        capture_output=True,
        text=True,
        env=clean_env(base=STARTING_ENVIRON),
        cwd=STARTING_DIR,
        timeout=300,
    )


AHEAD = {"bench_tune_smoke": _bench_tune_smoke}  # run ahead: tests/conftest.py's Ahead


@pytest.fixture(scope="module")
def bench_tune_smoke(_ahead: Any) -> subprocess.CompletedProcess[str]:
    done: subprocess.CompletedProcess[str] = _ahead.run(_bench_tune_smoke)
    return done


def test_bench_tune_smoke_runs_and_reports_sane_figures(
    bench_tune_smoke: subprocess.CompletedProcess[str],
) -> None:
    done = bench_tune_smoke
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["configurations"] == 2 and len(doc["grid"]["rows"]) == 2
    assert 0 < doc["tuner"]["seconds"] and 0 < doc["grid"]["seconds"]
    assert doc["tuner_share_of_grid_time"] == doc["tuner"]["seconds"] / doc["grid"]["seconds"]
    figures = doc["comparison"]["images_per_s"]
    assert set(figures) == {"default", "tuned", "grid_best"}
    assert figures["default"]["config"] == "bs32 float32 numpy xla=off"
    assert all(row["median"] > 0 and row["n"] == 3 for row in figures.values())
    ratio = figures["tuned"]["median"] / figures["default"]["median"]
    assert abs(doc["comparison"]["tuned_over_default"] - ratio) < 1e-9
    assert len(doc["checks"]) == 4 and all(isinstance(v, bool) for v in doc["checks"].values())
    use = doc["utilisation"]
    assert use["training_flops_per_image"] > 0 and use["ceiling"]["tflops"] > 0
    expected = use["training_flops_per_image"] * figures["tuned"]["median"] / 1e12
    assert abs(use["tuned_tflops"] - expected) < 1e-12
    assert abs(use["share_of_ceiling"] - expected / use["ceiling"]["tflops"]) < 1e-12
