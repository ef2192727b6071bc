"""Compare two runs of one machine: which figures changed beyond the noise between runs.

Figures are matched by benchmark, configuration (the device included) and metric. The noise
*inside* one run (the interquartile range of its samples) is not the noise *between* runs: on
a shared 2-core machine a fit runs at one of two speeds, up to 1.8x apart, in stretches, so
two runs of the same code can differ by far more than either run's IQR. A change is therefore
called only when the new median lies outside both:

1. the within-run noise: the two runs' interquartile ranges do not overlap
   (:func:`tfaccel.core.timing.compare`), and
2. the between-run band around the earlier median, estimated from the history of that row.

How the between-run noise is estimated (:func:`between_run_noise`): take the medians of the
row in the earlier complete runs of this machine fingerprint (the run compared against
included). Group them by code: the tfaccel version and the model's architecture fingerprint,
so a change of code is never counted as noise. The spread is the largest
``|log(median_i / median_j)|`` over pairs of runs of the same code, i.e. the range of the log
medians within a group. With ``k`` runs the range underestimates the spread of the next run
against the last one, the more so the smaller ``k``, so the band is :func:`safety_factor`
``(k)`` times the spread: 2.5 up to 6 runs, then ``1 + 10 / k`` down to 1.5 at 20 runs, never
below ``MIN_BAND`` (5%). Simulated (40,000 series each), a new run of the same code then
falls outside the band at most 3% of the time with k = 5, 2% with k = 6 and under 1% from
k = 8 on, whether the log medians are normal, heavy-tailed (Student t, 3 degrees of freedom)
or at two speeds 1.8x apart (30% of runs slow), before the IQR condition removes more; with
k = 3 and 2.5 times the spread it was 6 to 11%. With fewer than ``MIN_HISTORY`` (5) runs of
one code no change is called: the row reads ``not compared``, "not enough history to call a
change (k earlier runs)". Measured on a shared 2-core machine
(``benchmarks/bench_compare_noise.py``: back-to-back runs of unchanged code, each row compared
with the run before it): of 16 ``bench --smoke`` runs, when 3 earlier runs were enough, 5 of
the 22 rows compared with 3 or 4 earlier runs were called a change; with 5 or more, none of
121; of 14 ``bench --quick`` runs, none of 99. A fixed default band would not do: those runs
moved rows of the same code by 2.4x to 8x (smoke) and 2.5x to 14x (quick), so wide that a
copy of the last run made 3x slower was not called on any row either.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from tfaccel.bench.records import ChangeStatus, ComparisonRow, RunComparison
from tfaccel.bench.results import BenchMeasurement, BenchRun
from tfaccel.core.timing import Summary, compare

__all__ = [
    "MIN_BAND",
    "MIN_HISTORY",
    "MIN_SAMPLES",
    "SAFETY",
    "SAFETY_FLOOR",
    "NoiseBand",
    "between_run_noise",
    "compare_runs",
    "judge_change",
    "row_histories",
    "safety_factor",
]

MIN_SAMPLES = 3
"""Fewer samples in either run: the within-run noise is unknown, nothing is called."""
MIN_HISTORY = 5
"""Earlier runs of one code needed to measure the between-run spread of a row."""
MIN_BAND = 0.05
"""The narrowest between-run band, however stable the history looks."""
SAFETY = 2.5
"""The band is this many times the spread measured over up to 6 runs of history."""
SAFETY_FLOOR = 1.5
"""... and at least this many times the spread however long the history
(:func:`safety_factor`)."""

RowKey = tuple[str, str, str]


@dataclass(frozen=True)
class NoiseBand:
    """The between-run noise of one row, from its history.

    Attributes:
        runs: earlier runs in the largest group of one code (version and model).
        spread: the largest ``|log(median_i / median_j)|`` between runs of one code (0 when no
            group has two runs).
        band: the relative half-width a change must exceed: a ratio inside
            ``[1 / (1 + band), 1 + band]`` is noise.
        measured: whether ``runs`` reached :data:`MIN_HISTORY` (else no change is called).
    """

    runs: int
    spread: float
    band: float
    measured: bool

    def describe(self) -> str:
        """The band as the verdict names it."""
        if self.measured:
            return f"between runs +-{self.band * 100:.1f}% from {self.runs} earlier runs"
        return (
            f"not enough history to call a change ({self.runs} earlier "
            f"run{'s' if self.runs != 1 else ''} of this code, {MIN_HISTORY} needed)"
        )


def safety_factor(runs: int) -> float:
    """How many times the spread measured over ``runs`` earlier runs the band is.

    :data:`SAFETY` (2.5) up to 6 runs, then ``1 + 10 / runs``, never below :data:`SAFETY_FLOOR`
    (1.5, from 20 runs): the range of more runs is a fuller measure of the spread, so it needs
    less margin; simulated, the chance that a new run of the same code falls outside the band
    stays at or under about 1% from 6 runs on (see the module docstring).
    """
    return min(SAFETY, max(SAFETY_FLOOR, 1 + 10 / runs)) if runs > 0 else SAFETY


def between_run_noise(history: Iterable[tuple[Hashable, float]]) -> NoiseBand:
    """The between-run band of one row from its earlier medians.

    Args:
        history: ``(code, median)`` of each earlier run that measured the row; ``code`` is
            anything that tells versions apart (e.g. ``(tfaccel_version, model_fingerprint)``).
            Medians that are not positive finite numbers are ignored.

    Returns:
        A :class:`NoiseBand` (see the module docstring for the rule).
    """
    groups: dict[Hashable, list[float]] = {}
    for code, median in history:
        if math.isfinite(median) and median > 0:
            groups.setdefault(code, []).append(math.log(median))
    runs = max((len(logs) for logs in groups.values()), default=0)
    spread = max((max(logs) - min(logs) for logs in groups.values()), default=0.0)
    measured = runs >= MIN_HISTORY
    log_band = max(math.log1p(MIN_BAND), safety_factor(runs) * spread)
    return NoiseBand(runs=runs, spread=spread, band=math.expm1(log_band), measured=measured)


def judge_change(
    before: Summary, after: Summary, noise: NoiseBand, *, higher_is_better: bool
) -> tuple[ChangeStatus, str]:
    """Whether ``after`` changed from ``before`` beyond the noise within and between runs.

    Returns:
        ``(status, verdict)``: ``better`` or ``worse`` only when the interquartile ranges do
        not overlap and the ratio lies outside the between-run band; else ``same``;
        ``not compared`` when either run has fewer than :data:`MIN_SAMPLES` samples or the
        row has fewer than :data:`MIN_HISTORY` earlier runs of one code.
    """
    if min(before.n, after.n) < MIN_SAMPLES:
        return "not compared", f"fewer than {MIN_SAMPLES} samples: the noise is unknown"
    if not noise.measured:
        ratio = after.median / before.median if before.median else float("inf")
        return "not compared", f"x{ratio:.2f}: {noise.describe()}"
    within = compare(before, after, higher_is_better=higher_is_better)
    ratio = within.ratio
    outside_band = (
        before.median > 0
        and after.median > 0
        and (abs(math.log(after.median / before.median)) > math.log1p(noise.band))
    )
    noises = f"{noise.describe()}; within the run +-{within.noise * 100:.1f}%"
    if within.different and outside_band:
        better = (after.median > before.median) == higher_is_better
        word: ChangeStatus = "better" if better else "worse"
        return word, f"x{ratio:.2f}: {word} beyond the noise ({noises})"
    return "same", f"no change called: x{ratio:.2f} is inside the noise ({noises})"


def _key(m: BenchMeasurement) -> RowKey:
    return (m.benchmark, json.dumps(m.config, sort_keys=True), m.metric)


def row_histories(runs: Iterable[BenchRun]) -> dict[RowKey, list[tuple[Hashable, float]]]:
    """Each row's ``(code, median)`` over ``runs`` (each run once, by run id), where code is
    the run's tfaccel version and the row's model fingerprint."""
    seen: set[int] = set()
    out: dict[RowKey, list[tuple[Hashable, float]]] = {}
    for run in runs:
        if run.run_id is not None:
            if run.run_id in seen:
                continue
            seen.add(run.run_id)
        for m in run.measurements:
            if m.samples:
                code = (run.tfaccel_version, m.model_fingerprint)
                out.setdefault(_key(m), []).append((code, m.summary.median))
    return out


def compare_runs(
    before: BenchRun, after: BenchRun, history: Sequence[BenchRun] = ()
) -> RunComparison:
    """Compare ``after`` with ``before``, knowing the noise between runs.

    Args:
        before: the run compared against.
        after: the new run.
        history: earlier runs of the same machine fingerprint (``before`` is added when
            missing); each row's between-run band is estimated from them
            (:func:`between_run_noise`). With fewer than :data:`MIN_HISTORY` of them a row
            reads ``not compared``: not enough history to call a change.

    Returns:
        ``{"before_run_id", "after_run_id", "before_started_at", "rows": [...], "counts"}``;
        each row has the benchmark, device, configuration label, unit, both medians, the ratio
        (after / before), ``status`` (``better``, ``worse``, ``same`` or ``not compared``), the
        verdict text, the between-run band used and how many earlier runs measured it.
        ``counts`` tallies the statuses.
    """
    histories = row_histories([before, *history])
    previous = {_key(m): m for m in before.measurements}
    rows: list[ComparisonRow] = []
    for m in after.measurements:
        old = previous.get(_key(m))
        if old is None:
            continue
        a, b = old.summary, m.summary
        noise = between_run_noise(histories.get(_key(m), []))
        status, verdict = judge_change(a, b, noise, higher_is_better=m.higher_is_better)
        rows.append(
            {
                "benchmark": m.benchmark,
                "device": m.device,
                "config": m.label,
                "unit": m.unit,
                "before": a.median,
                "after": b.median,
                "ratio": b.median / a.median if a.median else None,
                "status": status,
                "verdict": verdict,
                "between_run_band": noise.band,
                "history_runs": noise.runs,
            }
        )
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return {
        "before_run_id": before.run_id,
        "after_run_id": after.run_id,
        "before_started_at": before.started_at,
        "rows": rows,
        "counts": counts,
    }
