"""The two-speeds rule: stretches of steps at two separate durations, with the cores each kept
busy; pure (step records built here, as a recorder would write them)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfaccel.profile import StepRecord, find_bottlenecks
from tfaccel.profile.measurement import Measurement, RunContext
from tfaccel.profile.two_speeds import MIN_STEPS_TWO_SPEEDS, split_speeds, two_speeds


def _run(durations: list[float], cores: list[float] | None = None, warmup: int = 2) -> Measurement:
    """Steps back to back with these durations; ``cores``: CPU cores busy during each step."""
    records, t, cpu = [], 0.0, 0.0
    for i, seconds in enumerate([0.5] * warmup + durations):
        busy = cores[i - warmup] if cores is not None and i >= warmup else 1.0
        cpu += seconds * busy
        records.append(
            StepRecord(i, t, 0.0, seconds, 0.0, 32, i < warmup, cpu_s=cpu if cores else None)
        )
        t += seconds
    return Measurement(records=records, context=RunContext(device_kind="cpu", usable_cores=2))


def _wobble(value: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [value * rng.uniform(0.95, 1.05) for _ in range(n)]


def test_two_regimes_in_stretches_are_found_with_their_cores() -> None:
    fast, slow = _wobble(0.110, 10, 1), _wobble(0.225, 8, 2)
    durations = fast[:5] + slow[:4] + fast[5:] + slow[4:]
    cores = [1.85] * 5 + [1.0] * 4 + [1.85] * 5 + [1.0] * 4
    finding = two_speeds(_run(durations, cores))
    assert finding.status == "warn" and finding.id == "two_speeds"
    numbers = finding.numbers
    assert 0.105 < numbers["fast_step_s"] < 0.116 and 0.21 < numbers["slow_step_s"] < 0.24
    assert numbers["stretches"] == 4 and abs(numbers["slow_share"] - 8 / 18) < 1e-9
    assert numbers["fast_cores_busy"] == pytest.approx(1.85, abs=0.05)
    assert numbers["slow_cores_busy"] == pytest.approx(1.0, abs=0.05)
    assert numbers["cause"] == "fewer_cores_busy"
    text = " ".join(finding.evidence)
    assert "two speeds: 10 steps at" in text and "in 4 stretches" in text
    assert "cause: the slow steps did the same work on fewer cores" in text
    assert finding.fix and "median of many short samples" in finding.fix


def test_without_cpu_readings_the_speeds_are_reported_without_a_cause() -> None:
    durations = _wobble(0.1, 8, 3) + _wobble(0.2, 8, 4)
    finding = two_speeds(_run(durations))
    assert finding.status == "warn" and "cause" not in finding.numbers
    assert not any(line.startswith("cause:") for line in finding.evidence)


def test_slow_steps_as_busy_as_fast_ones_name_no_single_core_cause() -> None:
    durations = _wobble(0.1, 8, 5) + _wobble(0.2, 8, 6)
    finding = two_speeds(_run(durations, [1.9] * 16))
    assert finding.status == "warn" and "cause" not in finding.numbers
    assert finding.numbers["slow_cores_busy"] > 1.8


def test_one_speed_with_noise_or_a_spread_is_ok() -> None:
    assert two_speeds(_run(_wobble(0.1, 30, 7))).status == "ok"
    spread = [0.1 + 0.01 * i for i in range(20)]  # a steady ramp is not two regimes
    assert two_speeds(_run(spread)).status == "ok"


def test_a_few_slow_outliers_are_not_a_second_speed() -> None:
    durations = _wobble(0.1, 28, 8)
    durations[5] = durations[17] = 0.3  # 2 of 30: below the share a regime needs
    assert two_speeds(_run(durations)).status == "ok"


def test_too_few_steps_is_a_skip_naming_the_count() -> None:
    finding = two_speeds(_run(_wobble(0.1, MIN_STEPS_TWO_SPEEDS - 1, 9)))
    assert finding.status == "skip"
    assert f"needs at least {MIN_STEPS_TWO_SPEEDS}" in finding.evidence[0]


def test_diagnose_runs_the_rule() -> None:
    durations = _wobble(0.1, 10, 10) + _wobble(0.2, 10, 11)
    diagnosis = find_bottlenecks(_run(durations, [1.8] * 10 + [0.9] * 10))
    found = diagnosis.get("two_speeds")
    assert found is not None and found.status == "warn"
    assert found in diagnosis.problems


@settings(max_examples=60, deadline=None)
@given(
    fast=st.floats(0.001, 10.0),
    ratio=st.floats(1.5, 4.0),
    n_fast=st.integers(6, 30),
    n_slow=st.integers(6, 30),
    seed=st.integers(0, 10_000),
)
def test_split_recovers_planted_regimes(
    fast: float, ratio: float, n_fast: int, n_slow: int, seed: int
) -> None:
    rng = random.Random(seed)
    labels = [False] * n_fast + [True] * n_slow
    rng.shuffle(labels)
    durations = [fast * ratio * rng.uniform(0.97, 1.03) if s else fast * rng.uniform(0.97, 1.03)
                 for s in labels]  # fmt: skip
    found = split_speeds(durations)
    assert found is not None
    assert set(found.slow) == {i for i, s in enumerate(labels) if s}
    assert abs(found.ratio / ratio - 1) < 0.08
