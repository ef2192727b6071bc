"""The comparison across runs knows the noise between runs: hand-built histories of one row
(stable, moved 2x, noisy, too short) and the verdicts they lead to."""

from __future__ import annotations

import math

import pytest

from tfaccel.bench.compare import (
    MIN_BAND,
    SAFETY,
    between_run_noise,
    compare_runs,
    judge_change,
)
from tfaccel.bench.results import BenchMeasurement, BenchRun
from tfaccel.core.timing import summarize

V1 = ("0.1.0", None)


def _samples(median: float, spread: float = 0.01) -> list[float]:
    return [median * (1 + spread * f) for f in (-2, -1, 0, 1, 2)]


def _run(run_id: int, median: float, *, version: str = "0.1.0", spread: float = 0.01) -> BenchRun:
    m = BenchMeasurement(
        "reference_cnn", {"device": "cpu", "batch_size": 32}, "images_per_s", "images/s",
        _samples(median, spread),
    )  # fmt: skip
    return BenchRun(
        started_at=f"2025-01-0{run_id}T00:00:00+00:00",
        finished_at=None,
        status="complete",
        options={},
        fingerprint="fp",
        fingerprint_data={},
        tfaccel_version=version,
        tf_version="2.21.0",
        measurements=[m],
        run_id=run_id,
    )


def _verdict(medians: list[float], new: float) -> tuple[str, str]:
    runs = [_run(i + 1, m) for i, m in enumerate(medians)]
    row = compare_runs(runs[-1], _run(len(runs) + 1, new), runs[:-1])["rows"][0]
    return row["status"], row["verdict"]


def test_a_stable_history_gives_the_narrowest_band() -> None:
    noise = between_run_noise([(V1, 100.0), (V1, 100.5), (V1, 99.8)])
    assert noise.measured and noise.runs == 3
    assert noise.band == pytest.approx(max(MIN_BAND, math.expm1(SAFETY * math.log(100.5 / 99.8))))
    assert _verdict([100.0, 100.5, 99.8], 100.3)[0] == "same"
    assert _verdict([100.0, 100.5, 99.8], 90.0)[0] == "worse"  # 10% slower: beyond a 5% band


def test_a_row_that_moved_2x_is_called_both_ways() -> None:
    status, verdict = _verdict([100.0, 101.0, 99.0, 100.0], 50.0)
    assert status == "worse" and "x0.50: worse beyond the noise" in verdict
    assert "from 4 earlier runs" in verdict
    assert _verdict([100.0, 101.0, 99.0, 100.0], 200.0)[0] == "better"


def test_a_noisy_history_widens_the_band_beyond_the_within_run_iqr() -> None:
    # two speeds, 1.4x apart, between runs; each run's own IQR is +-1%
    medians = [100.0, 140.0, 100.0, 138.0]
    noise = between_run_noise([(V1, m) for m in medians])
    assert noise.band > 1.0  # 2.5 x log(1.4): more than 2x either way
    status, verdict = _verdict(medians, 70.0)  # 30% below the last run: inside that band
    assert status == "same" and "inside the noise" in verdict
    # the within-run rule alone (the IQRs do not overlap) would have called it
    assert summarize(_samples(70.0)).q3 < summarize(_samples(100.0)).q1


def test_too_little_history_calls_nothing_and_says_so() -> None:
    noise = between_run_noise([(V1, 100.0), (V1, 101.0)])
    assert not noise.measured and noise.runs == 2
    status, verdict = _verdict([100.0, 101.0], 50.0)  # even 2x is not called
    assert status == "not compared"
    assert verdict == (
        "x0.50: not enough history to call a change (2 earlier runs of this code, 3 needed)"
    )
    assert "(1 earlier run of this code" in _verdict([100.0], 50.0)[1]
    assert between_run_noise([]).runs == 0


def test_runs_of_other_code_are_not_counted_as_noise() -> None:
    # v1 at 100, v2 at 200: the step between versions is a change, not noise
    history = [(("0.1.0", None), 100.0)] * 3 + [(("0.2.0", None), 200.0)]
    noise = between_run_noise(history)
    assert noise.runs == 3 and noise.spread == 0.0 and noise.band == pytest.approx(MIN_BAND)
    old = [_run(i, 100.0) for i in (1, 2, 3)]
    new = _run(4, 200.0, version="0.2.0")
    row = compare_runs(old[-1], new, old[:-1])["rows"][0]
    assert row["status"] == "better" and row["history_runs"] == 3


def test_both_rules_must_agree_and_few_samples_are_not_compared() -> None:
    stable = between_run_noise([(V1, 100.0)] * 3)
    # 10% apart, beyond the 5% band, but each run's IQR is +-30%: the IQRs overlap
    a, b = summarize(_samples(100.0, 0.3)), summarize(_samples(90.0, 0.3))
    assert judge_change(a, b, stable, higher_is_better=True)[0] == "same"
    one = summarize([1.0])
    assert judge_change(one, one, stable, higher_is_better=True)[0] == "not compared"
