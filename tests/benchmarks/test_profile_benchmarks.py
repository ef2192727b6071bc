"""benchmarks/bench_callback.py and bench_pipeline.py run end to end (smoke: the tiny CNN, a
few steps, in this process) and their figures are sane. No wall-clock bound is checked."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("tensorflow")

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_callback_benchmark_reports_the_overhead(capsys: pytest.CaptureFixture[str]) -> None:
    assert _load("bench_callback").main(["--smoke", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = {row["config"]: row for row in result["rows"]}
    assert set(rows) == {"plain", "callback", "callback+instrument"}
    assert rows["plain"]["ratio_to_plain"] == 1.0
    for row in rows.values():
        assert row["step_ms_median"] > 0 and row["step_ms_q1"] <= row["step_ms_q3"]
        assert 0.2 < row["ratio_to_plain"] < 5


def test_pipeline_benchmark_reports_speed_and_input_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _load("bench_pipeline").main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert "tfaccel.data.pipeline" in out and "naive from_generator" in out
    assert "one ready batch" in out
    assert out.count("examples/s") == 3 and out.count("input wait") == 3
