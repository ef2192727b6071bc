"""The comparison across runs knows the noise between runs: hand-built histories of one row
(stable, moved 2x, noisy, too short) and the verdicts they lead to."""

from __future__ import annotations

import math

import pytest

from tfaccel.bench.compare import (
    MIN_BAND,
    MIN_HISTORY,
    SAFETY,
    SAFETY_FLOOR,
    between_run_noise,
    compare_runs,
    judge_change,
    safety_factor,
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
        started_at=f"2025-01-{run_id:02d}T00:00:00+00:00",
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


STABLE = [100.0, 100.5, 99.8, 100.2, 100.1]


def test_a_stable_history_gives_the_narrowest_band() -> None:
    noise = between_run_noise([(V1, m) for m in STABLE])
    assert noise.measured and noise.runs == MIN_HISTORY == 5
    assert noise.band == pytest.approx(max(MIN_BAND, math.expm1(SAFETY * math.log(100.5 / 99.8))))
    assert _verdict(STABLE, 100.3)[0] == "same"
    assert _verdict(STABLE, 90.0)[0] == "worse"  # 10% slower: beyond a 5% band


def test_a_row_that_moved_2x_is_called_both_ways() -> None:
    history = [100.0, 101.0, 99.0, 100.0, 100.5, 99.5]
    status, verdict = _verdict(history, 50.0)
    assert status == "worse" and "x0.50: worse beyond the noise" in verdict
    assert "from 6 earlier runs" in verdict
    assert _verdict(history, 200.0)[0] == "better"


def test_a_noisy_history_widens_the_band_beyond_the_within_run_iqr() -> None:
    # two speeds, 1.4x apart, between runs; each run's own IQR is +-1%
    medians = [100.0, 140.0, 100.0, 138.0, 101.0]
    noise = between_run_noise([(V1, m) for m in medians])
    assert noise.band > 1.0  # 2.5 x log(1.4): more than 2x either way
    status, verdict = _verdict(medians, 70.0)  # 30% below the last run: inside that band
    assert status == "same" and "inside the noise" in verdict
    # the within-run rule alone (the IQRs do not overlap) would have called it
    assert summarize(_samples(70.0)).q3 < summarize(_samples(100.0)).q1


def test_too_little_history_calls_nothing_and_says_so() -> None:
    noise = between_run_noise([(V1, m) for m in STABLE[:4]])
    assert not noise.measured and noise.runs == 4
    status, verdict = _verdict(STABLE[:4], 50.0)  # even 2x is not called
    assert status == "not compared"
    assert verdict == (
        "x0.50: not enough history to call a change (4 earlier runs of this code, 5 needed)"
    )
    assert "(2 earlier runs of this code" in _verdict([100.0, 101.0], 50.0)[1]
    assert "(1 earlier run of this code" in _verdict([100.0], 50.0)[1]
    assert between_run_noise([]).runs == 0


def test_runs_of_other_code_are_not_counted_as_noise() -> None:
    # v1 at 100, v2 at 200: the step between versions is a change, not noise
    history = [(("0.1.0", None), 100.0)] * 5 + [(("0.2.0", None), 200.0)]
    noise = between_run_noise(history)
    assert noise.runs == 5 and noise.spread == 0.0 and noise.band == pytest.approx(MIN_BAND)
    old = [_run(i, 100.0) for i in (1, 2, 3, 4, 5)]
    new = _run(6, 200.0, version="0.2.0")
    row = compare_runs(old[-1], new, old[:-1])["rows"][0]
    assert row["status"] == "better" and row["history_runs"] == 5


def test_both_rules_must_agree_and_few_samples_are_not_compared() -> None:
    stable = between_run_noise([(V1, 100.0)] * 5)
    # 10% apart, beyond the 5% band, but each run's IQR is +-30%: the IQRs overlap
    a, b = summarize(_samples(100.0, 0.3)), summarize(_samples(90.0, 0.3))
    assert judge_change(a, b, stable, higher_is_better=True)[0] == "same"
    one = summarize([1.0])
    assert judge_change(one, one, stable, higher_is_better=True)[0] == "not compared"


def test_the_margin_shrinks_as_the_history_grows_but_not_below_the_floor() -> None:
    factors = [safety_factor(k) for k in range(1, 41)]
    assert factors[:6] == [SAFETY] * 6  # up to 6 runs: 2.5 times the spread
    assert safety_factor(10) == pytest.approx(2.0) and safety_factor(20) == SAFETY_FLOOR
    assert factors == sorted(factors, reverse=True) and min(factors) == SAFETY_FLOOR
    assert safety_factor(0) == SAFETY


def test_a_long_history_calls_a_change_a_short_one_must_leave() -> None:
    # the same 10% spread between runs, measured over 5 runs and over 20
    def medians(k: int) -> list[float]:
        return [100.0 if i % 2 else 110.0 for i in range(k - 1)] + [100.0]

    short, long = (between_run_noise([(V1, m) for m in medians(k)]) for k in (5, 20))
    assert short.spread == pytest.approx(long.spread) == pytest.approx(math.log(1.1))
    assert short.band == pytest.approx(math.expm1(2.5 * math.log(1.1)))  # +-27%
    assert long.band == pytest.approx(math.expm1(1.5 * math.log(1.1)))  # +-15%
    # 20% slower than the last run: inside the short history's band, beyond the long one's
    assert _verdict(medians(5), 100.0 / 1.2)[0] == "same"
    assert _verdict(medians(20), 100.0 / 1.2)[0] == "worse"
    # a step inside the spread already seen is never called, however long the history
    assert _verdict(medians(20), 100.0 / 1.1)[0] == "same"
