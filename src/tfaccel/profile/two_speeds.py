"""Two speeds: steps that run in stretches at one of two clearly separate durations; pure.

A training process can alternate between a fast and a slow regime: whole stretches of steps
take about twice as long, then the fast speed comes back. On 2-core AMD EPYC machines the
reference CNN on TensorFlow 2.21's CPU build does this (see docs/tune.md, "Two speeds"): in
the slow stretches the process keeps one core busy and the other idle, while its two compute
threads do the same CPU work as in the fast ones, in turn instead of together. Averaged over
a run, such a process reports a speed it never ran at, and one run of a configuration says
little about it.

:func:`split` finds the two regimes in a list of step durations (the split that best
separates them, Otsu's criterion on one dimension); :func:`two_speeds` turns it into a
finding, with the cores each regime kept busy when the process CPU time was read per step.

Thresholds: the slow regime at least :data:`MIN_RATIO` times the fast one (medians), each
regime at least :data:`MIN_SHARE` of the steps (and 3 steps), the regimes apart (the fast
regime's 90th percentile below the slow one's 10th, and the split explaining at least
:data:`MIN_SEPARATION` of the variance: 0.75 for evenly spread durations, near 1 for two
tight regimes), at least :data:`MIN_STEPS_TWO_SPEEDS` measured steps.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfaccel.core.findings import Finding
from tfaccel.core.units import fmt_ms
from tfaccel.profile.measurement import Measurement, StepRecord

__all__ = [
    "MIN_RATIO",
    "MIN_SEPARATION",
    "MIN_SHARE",
    "MIN_STEPS_TWO_SPEEDS",
    "Split",
    "split_speeds",
    "two_speeds",
]

MIN_RATIO = 1.3
MIN_SHARE = 0.15
MIN_STEPS_TWO_SPEEDS = 12
MIN_SEPARATION = 0.85
SINGLE_CORE_SHARE = 0.7  # slow steps busy on at most this share of the fast ones' cores


@dataclass(frozen=True)
class Split:
    """Two regimes of step durations.

    Attributes:
        fast / slow: the indices (into the given durations) of each regime's steps.
        fast_s / slow_s: each regime's median duration.
        stretches: runs of consecutive steps in one regime (2 = one switch).
    """

    fast: tuple[int, ...]
    slow: tuple[int, ...]
    fast_s: float
    slow_s: float
    stretches: int

    @property
    def ratio(self) -> float:
        return self.slow_s / self.fast_s

    @property
    def slow_share(self) -> float:
        return len(self.slow) / (len(self.fast) + len(self.slow))


def split_speeds(durations: Sequence[float]) -> Split | None:
    """The two regimes of ``durations`` (in time order), or None when there are not two.

    Example:
        >>> found = split_speeds([1.0, 1.1, 0.9, 1.0, 2.0, 2.1, 1.9, 2.0, 1.0, 1.05, 0.95, 1.0])
        >>> round(found.ratio, 1), found.stretches
        (2.0, 3)
        >>> split_speeds([1.0, 1.1, 0.9, 1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.05, 0.95, 1.0]) is None
        True
    """
    values = [float(v) for v in durations]
    n = len(values)
    least = max(3, int(MIN_SHARE * n + 0.999))
    if n < 2 * least:
        return None
    order = sorted(range(n), key=values.__getitem__)
    ranked = [values[i] for i in order]
    total = sum(ranked)
    best_k, best_score, running = 0, -1.0, 0.0
    for k in range(1, n):
        running += ranked[k - 1]
        if k < least or n - k < least:
            continue
        mean_a, mean_b = running / k, (total - running) / (n - k)
        score = k * (n - k) * (mean_b - mean_a) ** 2  # between-class variance (Otsu)
        if score > best_score:
            best_k, best_score = k, score
    variance = sum((v - total / n) ** 2 for v in ranked)
    if not best_k or variance <= 0 or best_score / (n * n) / variance * n < MIN_SEPARATION:
        return None  # between-class variance / total variance (Otsu's separability)
    fast_values, slow_values = ranked[:best_k], ranked[best_k:]
    fast_s, slow_s = statistics.median(fast_values), statistics.median(slow_values)
    if fast_s <= 0 or slow_s / fast_s < MIN_RATIO:
        return None
    if _quantile(fast_values, 0.9) >= _quantile(slow_values, 0.1):
        return None  # a spread, not two regimes
    fast = tuple(sorted(order[:best_k]))
    slow = tuple(sorted(order[best_k:]))
    slow_set = set(slow)
    stretches = 1 + sum((i in slow_set) != (i - 1 in slow_set) for i in range(1, n))
    return Split(fast, slow, fast_s, slow_s, stretches)


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def two_speeds(m: Measurement, figures: Any = None) -> Finding:
    """The ``two_speeds`` finding of a measured run (``warn`` when two regimes are found);
    ``figures`` is accepted for the rule signature of :func:`tfaccel.profile.find_bottlenecks`."""
    title = "Steps run at two speeds"
    steps = [r for r in m.records if not r.warmup and not r.traced]
    if len(steps) < MIN_STEPS_TWO_SPEEDS:
        return _result(
            "skip",
            title,
            f"{len(steps)} measured step(s); telling two speeds apart needs at least "
            f"{MIN_STEPS_TWO_SPEEDS}",
        )
    durations = [r.period_s if r.period_s is not None else r.step_s for r in steps]
    found = split_speeds(durations)
    if found is None:
        spread = statistics.pstdev(durations) / statistics.mean(durations)
        return _result(
            "ok",
            title,
            f"one speed: {len(steps)} steps around {_ms(statistics.median(durations))} "
            f"(coefficient of variation {spread * 100:.0f}%)",
            numbers={"steps": len(steps)},
        )
    numbers: dict[str, Any] = {
        "fast_step_s": found.fast_s,
        "slow_step_s": found.slow_s,
        "ratio": found.ratio,
        "slow_share": found.slow_share,
        "stretches": found.stretches,
        "steps": len(steps),
    }
    evidence = [
        f"two speeds: {len(found.fast)} steps at {_ms(found.fast_s)} and {len(found.slow)} at "
        f"{_ms(found.slow_s)} (x{found.ratio:.2f} slower), in {found.stretches} stretches",
        f"the run's average ({_ms(statistics.mean(durations))} per step) is a speed it never "
        "ran at; a single run of a configuration says little about it",
    ]
    cores = _cores(steps, found)
    cause = None
    if cores is not None:
        fast_cores, slow_cores = cores
        numbers.update(fast_cores_busy=fast_cores, slow_cores_busy=slow_cores)
        evidence.append(
            f"the process kept {slow_cores:.1f} cores busy in the slow steps and "
            f"{fast_cores:.1f} in the fast ones"
        )
        if fast_cores >= 1.5 and slow_cores <= SINGLE_CORE_SHARE * fast_cores:
            cause = (
                "the slow steps did the same work on fewer cores at a time: TensorFlow's "
                "compute threads ran in turn instead of together (on the CPU, oneDNN runs a "
                "kernel on one thread when TensorFlow calls it from inside its own thread "
                "pool); other programs on the machine can also take the cores"
            )
            numbers["cause"] = "fewer_cores_busy"
    if cause is not None:
        evidence.append("cause: " + cause)
    fix = (
        "Judge speed by the median of many short samples interleaved with the configurations "
        "you compare, not by one run (tfaccel tune and tfaccel bench do this); keep other "
        "programs off the machine while timing; see docs/tune.md, 'Two speeds', for what "
        "was measured and ruled out"
    )
    return Finding("two_speeds", "warn", title, evidence, fix, "profile", numbers)


def _cores(steps: Sequence[StepRecord], found: Split) -> tuple[float, float] | None:
    """Median cores busy per regime, from the process CPU time read at each step's end."""
    busy: dict[int, float] = {}
    for i in range(1, len(steps)):
        before, after = steps[i - 1], steps[i]
        if before.cpu_s is None or after.cpu_s is None or after.index != before.index + 1:
            continue  # only back-to-back steps: not across a traced step or a filtered one
        wall = (after.start + after.step_s) - (before.start + before.step_s)
        if wall > 0:
            busy[i] = (after.cpu_s - before.cpu_s) / wall
    fast = [busy[i] for i in found.fast if i in busy]
    slow = [busy[i] for i in found.slow if i in busy]
    if len(fast) < 2 or len(slow) < 2:
        return None
    return statistics.median(fast), statistics.median(slow)


def _result(
    status: Any, title: str, evidence: str, *, numbers: dict[str, Any] | None = None
) -> Finding:
    return Finding("two_speeds", status, title, [evidence], None, "profile", dict(numbers or {}))


def _ms(seconds: float) -> str:
    return fmt_ms(seconds, digits=1)
