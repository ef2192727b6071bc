"""The one timing core: warm-up excluded, configurations interleaved, median and IQR,
and a difference called only when it is larger than the measured noise.

Measuring A A A A then B B B B on a shared machine measures the machine's mood as much as
A and B; running A B A B (rotating who goes first each round) spreads that drift over both.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tfaccel.core.records import to_json

__all__ = ["Comparison", "Summary", "compare", "measure_interleaved", "summarize"]


@dataclass(frozen=True)
class Summary:
    """Robust statistics of one configuration's samples (seconds, or any unit)."""

    n: int
    median: float
    q1: float
    q3: float
    minimum: float
    maximum: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def relative_iqr(self) -> float:
        """IQR / median: the noise of this configuration as a fraction."""
        return self.iqr / self.median if self.median else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {**to_json(self), "iqr": self.iqr, "relative_iqr": self.relative_iqr}


@dataclass(frozen=True)
class Comparison:
    """B against A: ``ratio`` = median(B) / median(A); ``different`` only beyond the noise."""

    ratio: float
    different: bool
    noise: float  # the larger relative IQR of the two
    verdict: str


def summarize(samples: Sequence[float]) -> Summary:
    """Median, quartiles and range of ``samples``.

    Raises:
        ValueError: no samples.
    """
    if not samples:
        raise ValueError("no samples to summarize")
    data = sorted(float(s) for s in samples)
    if len(data) == 1:
        q1 = q3 = data[0]
    else:
        q1, _, q3 = statistics.quantiles(data, n=4, method="inclusive")
    return Summary(
        n=len(data),
        median=statistics.median(data),
        q1=q1,
        q3=q3,
        minimum=data[0],
        maximum=data[-1],
    )


def compare(a: Summary, b: Summary, *, higher_is_better: bool = False) -> Comparison:
    """Compare B with A. A difference is called only when the interquartile ranges do not
    overlap, so a gap inside the run-to-run noise reads "no difference".
    """
    ratio = b.median / a.median if a.median else float("inf")
    noise = max(a.relative_iqr, b.relative_iqr)
    different = b.q1 > a.q3 or a.q1 > b.q3
    if not different:
        verdict = f"no difference (x{ratio:.2f} is inside the noise of +-{noise * 100:.1f}%)"
    else:
        b_larger = b.median > a.median
        better = b_larger == higher_is_better
        verdict = (
            f"x{ratio:.2f}: {'better' if better else 'worse'} beyond the noise ({noise * 100:.1f}%)"
        )
    return Comparison(ratio=ratio, different=different, noise=noise, verdict=verdict)


def measure_interleaved(
    candidates: Mapping[str, Callable[[], float | None]],
    *,
    repeats: int = 5,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
    on_sample: Callable[[str, int, float], None] | None = None,
) -> dict[str, list[float]]:
    """Run every candidate ``repeats`` times, interleaved (A B C, B C A, C A B, ...).

    A candidate returns the seconds it measured itself (e.g. after synchronising a device),
    or None to be timed from call to return. The first ``warmup`` rounds are discarded.

    Args:
        candidates: name -> callable.
        repeats: rounds kept per candidate (>= 1).
        warmup: rounds run first and discarded.
        clock: the clock used when a candidate returns None.
        on_sample: called with (name, round, seconds) after each kept sample (progress bars).

    Returns:
        name -> the kept samples in seconds, in round order.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    names = list(candidates)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(warmup + repeats):
        shift = round_index % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            start = clock()
            reported = candidates[name]()
            elapsed = reported if reported is not None else clock() - start
            if round_index >= warmup:
                samples[name].append(elapsed)
                if on_sample is not None:
                    on_sample(name, round_index - warmup, elapsed)
    return samples
