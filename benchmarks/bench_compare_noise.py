"""How often ``tfaccel bench --compare`` calls a change between runs of the same code.

Runs ``tfaccel bench --smoke`` ``--runs`` times back to back (default 3) into one throwaway
results database, then, for each run after the first, compares it with the run before it
twice: with the within-run rule alone (the interquartile ranges do not overlap:
:func:`tfaccel.core.timing.compare`, what ``--compare`` did before it knew the noise between
runs) and with :func:`tfaccel.bench.compare_runs` given the earlier runs as history. The code is
the same in every run, so every change called is false: the script prints, per run, the rows
called a change out of those compared and the false-change rate of both rules, then each
row's between-run spread over all the runs (the range of its log medians, as a percentage).
Target: at most 1 row in 20 called a change by the new rule.

    python benchmarks/bench_compare_noise.py [--runs 3] [--db FILE] [--json]

``--db`` reuses (and appends to) a database, e.g. to analyse earlier runs again with
``--runs 0``; without it a temporary one is used and removed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tfaccel.bench import BenchOptions, BenchRun, run_with_history
from tfaccel.bench.compare import MIN_SAMPLES, compare_runs
from tfaccel.bench.history import load_run
from tfaccel.core.timing import compare
from tfaccel.store import ResultsStore

TARGET = 1 / 20


def _key(m: Any) -> tuple[str, str, str]:
    return (m.benchmark, json.dumps(m.config, sort_keys=True), m.metric)


def within_run_calls(before: BenchRun, after: BenchRun) -> tuple[int, int]:
    """(changes called, rows compared) by the within-run rule alone."""
    previous = {_key(m): m for m in before.measurements}
    called = total = 0
    for m in after.measurements:
        old = previous.get(_key(m))
        if old is None or min(old.summary.n, m.summary.n) < MIN_SAMPLES:
            continue
        total += 1
        called += compare(old.summary, m.summary).different
    return called, total


def analyse(runs: list[BenchRun]) -> dict[str, Any]:
    """Per run after the first: both rules' calls; per row: the between-run spread."""
    per_run = []
    for i in range(1, len(runs)):
        old_called, _compared = within_run_calls(runs[i - 1], runs[i])
        comparison = compare_runs(runs[i - 1], runs[i], runs[: i - 1])
        rows = comparison["rows"]  # "not enough history" rows count as not called
        new_called = sum(r["status"] in ("better", "worse") for r in rows)
        per_run.append(
            {
                "run": runs[i].run_id,
                "against": runs[i - 1].run_id,
                "rows": len(rows),
                "within_run_rule_called": old_called,
                "within_run_rule_rate": old_called / len(rows) if rows else None,
                "called": new_called,
                "rate": new_called / len(rows) if rows else None,
                "changes": [f"{r['benchmark']} {r['config']}: {r['verdict']}" for r in rows
                            if r["status"] in ("better", "worse")],
            }
        )  # fmt: skip
    medians: dict[tuple[str, str, str], list[float]] = {}
    labels: dict[tuple[str, str, str], str] = {}
    for run in runs:
        for m in run.measurements:
            if m.samples and m.summary.median > 0:
                medians.setdefault(_key(m), []).append(m.summary.median)
                labels[_key(m)] = f"{m.benchmark} {m.device} {m.label} ({m.unit})"
    spreads = {
        labels[k]: math.expm1(max(map(math.log, v)) - min(map(math.log, v)))
        for k, v in medians.items()
        if len(v) > 1
    }
    rows = sum(r["rows"] for r in per_run)
    called = sum(r["called"] for r in per_run)
    old = sum(r["within_run_rule_called"] for r in per_run)
    return {
        "per_run": per_run,
        "spreads": dict(sorted(spreads.items(), key=lambda kv: -kv[1])),
        "rows": rows,
        "called": called,
        "rate": called / rows if rows else None,
        "within_run_rule_called": old,
        "within_run_rule_rate": old / rows if rows else None,
        "target": TARGET,
    }


def _print(result: dict[str, Any], seconds: list[float]) -> None:
    timed = seconds[1:] + [math.nan] * len(result["per_run"])
    for s, r in zip(timed, result["per_run"], strict=False):
        print(
            f"run {r['run']} against run {r['against']}: {r['called']} of {r['rows']} rows "
            f"called a change (false-change rate {r['rate']:.0%}); the within-run rule alone: "
            f"{r['within_run_rule_called']} of {r['rows']} ({r['within_run_rule_rate']:.0%})"
            + (f"  [run took {s:.0f} s]" if not math.isnan(s) else "")
        )
        for change in r["changes"]:
            print(f"    {change}")
    if result["rows"]:
        print(
            f"overall: {result['called']} of {result['rows']} ({result['rate']:.1%}) against "
            f"{result['within_run_rule_called']} ({result['within_run_rule_rate']:.1%}) with "
            f"the within-run rule; target <= {TARGET:.0%}"
        )
    print("between-run spread of each row (max/min of its medians - 1):")
    for label, spread in result["spreads"].items():
        print(f"  {spread * 100:6.1f}%  {label}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="bench --smoke runs (default 3)")
    parser.add_argument("--db", type=Path, help="results database (default: a temporary one)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "results.sqlite"
        seconds = []
        for i in range(args.runs):
            start = time.perf_counter()
            run_with_history(BenchOptions(profile="smoke"), db=db)
            seconds.append(time.perf_counter() - start)
            print(f"run {i + 1}/{args.runs}: {seconds[-1]:.0f} s", file=sys.stderr)
        with ResultsStore(db) as store:
            records = [
                r
                for r in reversed(store.runs(limit=1000))
                if r.status == "complete" and (r.details.get("kind") or "bench") == "bench"
            ]
            runs = [run for r in records if (run := load_run(store, r.id)) is not None]
    result = analyse(runs)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result, seconds)
    return 0 if result["rate"] is None or result["rate"] <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
