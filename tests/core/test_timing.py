"""The timing core, with synthetic timings: interleaving, statistics, noise-aware comparison."""

from __future__ import annotations

import random

import pytest

from tfaccel.core.timing import compare, measure_interleaved, summarize


def test_summary_statistics() -> None:
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.n, s.median, s.q1, s.q3, s.minimum, s.maximum) == (5, 3.0, 2.0, 4.0, 1.0, 5.0)
    assert s.iqr == 2.0 and s.relative_iqr == pytest.approx(2 / 3)
    one = summarize([7.0])
    assert one.median == one.q1 == one.q3 == 7.0
    with pytest.raises(ValueError):
        summarize([])


def _noisy(center: float, spread: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_a_true_10_percent_difference_is_called(seed: int) -> None:
    a = summarize(_noisy(1.00, 0.02, 9, seed))
    b = summarize(_noisy(1.10, 0.02, 9, seed + 100))
    result = compare(a, b)
    assert result.different
    assert result.ratio == pytest.approx(1.10, rel=0.03)
    assert "worse" in result.verdict  # slower time, lower is better
    assert "better" in compare(a, b, higher_is_better=True).verdict


@pytest.mark.parametrize("seed", range(5))
def test_a_difference_inside_the_noise_is_not_called(seed: int) -> None:
    a = summarize(_noisy(1.00, 0.30, 9, seed))
    b = summarize(_noisy(1.03, 0.30, 9, seed + 100))
    result = compare(a, b)
    assert not result.different
    assert result.verdict.startswith("no difference")


def test_measure_interleaves_rotates_and_drops_warmup() -> None:
    order: list[str] = []

    def make(name: str, seconds: float):  # type: ignore[no-untyped-def]
        def run() -> float:
            order.append(name)
            return seconds

        return run

    seen: list[tuple[str, int]] = []
    samples = measure_interleaved(
        {"a": make("a", 1.0), "b": make("b", 2.0), "c": make("c", 3.0)},
        repeats=3,
        warmup=1,
        on_sample=lambda name, i, s: seen.append((name, i)),
    )
    assert samples == {"a": [1.0] * 3, "b": [2.0] * 3, "c": [3.0] * 3}
    assert order == list("abcbcacababc")  # warm-up round first, then rotated rounds
    assert len(seen) == 9 and ("a", 2) in seen


def test_measure_times_calls_that_return_none_with_the_clock() -> None:
    ticks = iter([0.0, 0.5, 1.0, 1.25, 2.0, 2.5])
    samples = measure_interleaved(
        {"x": lambda: None}, repeats=2, warmup=1, clock=lambda: next(ticks)
    )
    assert samples == {"x": [0.25, 0.5]}
    with pytest.raises(ValueError):
        measure_interleaved({"x": lambda: None}, repeats=0)
