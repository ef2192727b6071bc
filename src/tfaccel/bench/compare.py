"""Compare two runs of one machine: which figures changed beyond the measured noise.

Figures are matched by benchmark, configuration and metric; each pair goes through
:func:`tfaccel.core.timing.compare`, so a change inside the run-to-run noise reads "no difference".
"""

from __future__ import annotations

import json

from tfaccel.bench.records import ChangeStatus, ComparisonRow, RunComparison
from tfaccel.bench.results import BenchMeasurement, BenchRun
from tfaccel.core.timing import compare

__all__ = ["MIN_SAMPLES", "compare_runs"]

MIN_SAMPLES = 3


def _key(m: BenchMeasurement) -> tuple[str, str, str]:
    return (m.benchmark, json.dumps(m.config, sort_keys=True), m.metric)


def compare_runs(before: BenchRun, after: BenchRun) -> RunComparison:
    """Compare ``after`` with ``before``.

    Returns:
        ``{"before_run_id", "after_run_id", "before_started_at", "rows": [...], "counts"}``;
        each row has the benchmark, device, configuration label, unit, both medians, the ratio
        (after / before), ``status`` (``better``, ``worse``, ``same`` or ``not compared``) and
        the verdict text. ``counts`` tallies the statuses.
    """
    previous = {_key(m): m for m in before.measurements}
    rows: list[ComparisonRow] = []
    for m in after.measurements:
        old = previous.get(_key(m))
        if old is None:
            continue
        a, b = old.summary, m.summary
        status: ChangeStatus
        if min(a.n, b.n) < MIN_SAMPLES:
            status = "not compared"
            verdict = f"fewer than {MIN_SAMPLES} samples: the noise is unknown"
        else:
            c = compare(a, b, higher_is_better=m.higher_is_better)
            better = (b.median > a.median) == m.higher_is_better
            status = ("better" if better else "worse") if c.different else "same"
            verdict = c.verdict
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
