"""How often ``tfaccel bench --compare`` calls a change between runs of the same code.

Runs ``tfaccel bench --smoke`` (or ``--quick`` with ``--mode quick``) ``--runs`` times back to
back (default 3) into one results database, then, for each run after the first, compares it
with the run before it exactly as ``--compare`` does: :func:`tfaccel.bench.compare_runs` given
the newest earlier runs as history (at most :data:`~tfaccel.bench.history.HISTORY_RUNS`). The
noise of run ``i`` is thus learned only from the runs before it; the script checks that
:func:`~tfaccel.bench.history.earlier_runs`, which ``--compare`` reads, returns exactly those
runs and none recorded later. The code is the same in every run, so every change called is
false. Per run it prints the rows compared once the noise model is engaged (the row has
:data:`~tfaccel.bench.compare.MIN_HISTORY` earlier runs of its code), the rows the rule called a
change and those the within-run rule alone calls (the interquartile ranges do not overlap:
:func:`tfaccel.core.timing.compare`, what ``--compare`` did before it knew the noise between
runs); then the false-change rate over the engaged comparisons (the figure that counts, target:
at most 1 row in 20), over all comparisons, and how many rows said "not enough history".

Detection check: the last run is copied with every row made 1.5, 2 and 3 times slower
(throughputs divided, times multiplied) and compared with the last run, its history being all
the runs; the script prints, per row, which slowdowns the rule calls, with the band used, the
row's between-run spread (max/min of its medians over the runs, minus 1) and its within-run
noise (half the IQR over the median), so a row whose band is too wide to see a 2x slowdown
shows why.

    python benchmarks/bench_compare_noise.py [--mode smoke|quick] [--runs 3] [--db FILE] [--json]

``--db`` reuses (and appends to) a database, e.g. to analyse earlier runs again with
``--runs 0``; without it a temporary one is used and removed. Exit status 1 when the engaged
false-change rate is above 1 in 20 or the history is not held out.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from tfaccel.bench import BenchOptions, BenchRun, run_with_history
from tfaccel.bench.compare import MIN_HISTORY, MIN_SAMPLES, compare_runs
from tfaccel.bench.history import HISTORY_RUNS, earlier_runs, load_run
from tfaccel.core.timing import compare
from tfaccel.store import ResultsStore

TARGET = 1 / 20
FACTORS = (1.5, 2.0, 3.0)
"""The synthetic slowdowns the rule must call (the detection check)."""


def _key(m: Any) -> tuple[str, str, str]:
    return (m.benchmark, json.dumps(m.config, sort_keys=True), m.metric)


def within_run_calls(before: BenchRun, after: BenchRun, engaged: set[str]) -> tuple[int, int]:
    """Changes called by the within-run rule alone: (over all rows, over the ``engaged``)."""
    previous = {_key(m): m for m in before.measurements}
    called = called_engaged = 0
    for m in after.measurements:
        old = previous.get(_key(m))
        if old is None or min(old.summary.n, m.summary.n) < MIN_SAMPLES:
            continue
        different = compare(old.summary, m.summary).different
        called += different
        called_engaged += different and f"{m.benchmark} {m.device} {m.label} ({m.unit})" in engaged
    return called, called_engaged


def _slowed(run: BenchRun, factor: float) -> BenchRun:
    """A copy of ``run`` whose every row is ``factor`` times slower (throughputs divided,
    times multiplied), recorded as a later run of the same code."""
    measurements = [
        replace(m, samples=[v / factor if m.higher_is_better else v * factor for v in m.samples])
        for m in run.measurements
    ]
    return replace(run, measurements=measurements, run_id=(run.run_id or 0) + 1_000_000)


def _label(row: Any) -> str:
    return f"{row['benchmark']} {row['device']} {row['config']} ({row['unit']})"


def held_out(runs: list[BenchRun], store: ResultsStore) -> list[str]:
    """Check that the history ``--compare`` reads for each run (:func:`earlier_runs`, the
    run compared against included) holds only runs recorded before it, and that it is the one
    this analysis uses (the newest :data:`HISTORY_RUNS` of ``runs`` before it); the problems."""
    problems = []
    for i, run in enumerate(runs):
        ids = [r.run_id for r in earlier_runs(store, run)]
        if any(j is None or run.run_id is None or j >= run.run_id for j in ids):
            problems.append(f"run {run.run_id}: history holds later runs {ids}")
        if ids != [r.run_id for r in reversed(runs[:i])][:HISTORY_RUNS]:
            problems.append(f"run {run.run_id}: history {ids} is not the runs before it")
    return problems


def analyse(runs: list[BenchRun], factors: tuple[float, ...] = FACTORS) -> dict[str, Any]:
    """Per run after the first: both rules' calls; per row: the between-run spread; the rule
    on slowed copies of the last run."""
    per_run = []
    for i in range(1, len(runs)):
        # what --compare does: the newest earlier runs, the run compared against first
        history = list(reversed(runs[:i]))[:HISTORY_RUNS]
        rows = compare_runs(history[0], runs[i], history[1:])["rows"]
        engaged = [r for r in rows if r["status"] in ("better", "worse", "same")]
        short = [r for r in rows if "not enough history" in r["verdict"]]
        called = [r for r in engaged if r["status"] in ("better", "worse")]
        old_all, old_engaged = within_run_calls(runs[i - 1], runs[i], {_label(r) for r in engaged})
        per_run.append(
            {
                "run": runs[i].run_id,
                "index": i + 1,
                "earlier_runs": i,
                "against": runs[i - 1].run_id,
                "rows": len(rows),
                "engaged": len(engaged),
                "not_enough_history": len(short),
                "called": len(called),
                "within_run_rule_called": old_all,
                "within_run_rule_called_engaged": old_engaged,
                "changes": [f"{_label(r)}: {r['verdict']}" for r in called],
            }
        )
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
    typical = {  # the median step between consecutive runs, to set the largest against
        labels[k]: math.expm1(statistics.median(abs(math.log(b / a)) for a, b in pairwise(v)))
        for k, v in medians.items()
        if len(v) > 1
    }
    slowdown: dict[str, dict[str, Any]] = {}
    if len(runs) >= 2:
        last, history = runs[-1], list(reversed(runs[:-1]))[: HISTORY_RUNS - 1]
        within = {
            f"{m.benchmark} {m.device} {m.label} ({m.unit})": (
                (m.summary.q3 - m.summary.q1) / 2 / m.summary.median if m.summary.median else None
            )
            for m in last.measurements
        }
        for factor in factors:
            for r in compare_runs(last, _slowed(last, factor), history)["rows"]:
                row = slowdown.setdefault(
                    _label(r), {"band": r["between_run_band"], "history_runs": r["history_runs"],
                                "spread": spreads.get(_label(r)), "within_run": within.get(
                                    _label(r)), "called": {}})  # fmt: skip
                row["called"][str(factor)] = r["status"]
    total = [r for r in per_run if r["engaged"]]
    rows = sum(r["rows"] for r in per_run)
    engaged = sum(r["engaged"] for r in per_run)
    called = sum(r["called"] for r in per_run)
    return {
        "per_run": per_run,
        "engaged_runs": len(total),
        "rows": rows,
        "engaged": engaged,
        "not_enough_history": sum(r["not_enough_history"] for r in per_run),
        "called": called,
        "rate_engaged": called / engaged if engaged else None,
        "rate_all": called / rows if rows else None,
        "within_run_rule_called": sum(r["within_run_rule_called"] for r in per_run),
        "within_run_rule_called_engaged": sum(r["within_run_rule_called_engaged"] for r in per_run),
        "spreads": dict(sorted(spreads.items(), key=lambda kv: -kv[1])),
        "typical_steps": typical,
        "slowdown": slowdown,
        "factors": list(factors),
        "target": TARGET,
    }


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.1%})" if whole else f"{part}/0"


def _print(result: dict[str, Any], seconds: list[float]) -> None:
    for r in result["per_run"]:
        head = f"run #{r['index']} (id {r['run']}, {r['earlier_runs']} earlier runs)"
        if not r["engaged"]:
            print(f"{head}: not engaged, {r['not_enough_history']} of {r['rows']} rows "
                  f"'not enough history'; within-run rule alone called "
                  f"{r['within_run_rule_called']}")  # fmt: skip
            continue
        print(
            f"{head}: {r['engaged']} rows compared, new rule called {r['called']}, "
            f"within-run rule {r['within_run_rule_called_engaged']} "
            f"(of {r['rows']} rows: {r['within_run_rule_called']}); "
            f"not enough history {r['not_enough_history']}"
        )
        for change in r["changes"]:
            print(f"    {change}")
    if seconds:
        print("run times: " + ", ".join(f"{s:.0f} s" for s in seconds))
    print(
        f"engaged comparisons (>= {MIN_HISTORY} earlier runs of the code): "
        f"{result['engaged_runs']} runs, {result['engaged']} rows; new rule called "
        f"{_pct(result['called'], result['engaged'])} [target <= {TARGET:.0%}], within-run rule "
        f"{_pct(result['within_run_rule_called_engaged'], result['engaged'])}"
    )
    print(
        f"all comparisons: {result['rows']} rows; new rule called "
        f"{_pct(result['called'], result['rows'])}, within-run rule "
        f"{_pct(result['within_run_rule_called'], result['rows'])}; "
        f"'not enough history': {result['not_enough_history']}"
    )
    if result["slowdown"]:
        factors = result["factors"]
        print("synthetic slowdown of the last run (copied, medians x factor), per row: "
              "status at " + " / ".join(f"x{f:g}" for f in factors))  # fmt: skip
        hits = dict.fromkeys(map(str, factors), 0)
        for label, row in result["slowdown"].items():
            statuses = [row["called"].get(str(f), "-") for f in factors]
            for f, s in zip(factors, statuses, strict=True):
                hits[str(f)] += s == "worse"
            spread = "-" if row["spread"] is None else f"{row['spread'] * 100:.0f}%"
            within = "-" if row["within_run"] is None else f"+-{row['within_run'] * 100:.0f}%"
            print(f"  {' / '.join(statuses):20} band +-{row['band'] * 100:.0f}% (between-run "
                  f"spread {spread}, within the run {within})  {label}")  # fmt: skip
        n = len(result["slowdown"])
        print("  called worse: " + ", ".join(f"x{f:g} {hits[str(f)]}/{n}" for f in factors))
    print("between-run spread of each row over all runs (max/min of its medians - 1; in "
          "brackets the median step between consecutive runs):")  # fmt: skip
    for label, spread in result["spreads"].items():
        print(f"  {spread * 100:6.1f}%  ({result['typical_steps'][label] * 100:5.1f}%)  {label}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="bench runs to make (default 3)")
    parser.add_argument(
        "--mode", choices=("smoke", "quick"), default="smoke",
        help="the bench profile of each run: smoke (default) or quick",
    )  # fmt: skip
    parser.add_argument("--db", type=Path, help="results database (default: a temporary one)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "results.sqlite"
        seconds = []
        for i in range(args.runs):
            start = time.perf_counter()
            run_with_history(BenchOptions(profile=args.mode), db=db)
            seconds.append(time.perf_counter() - start)
            print(f"run {i + 1}/{args.runs}: {seconds[-1]:.0f} s", file=sys.stderr)
        with ResultsStore(db) as store:
            records = [
                r
                for r in reversed(store.runs(limit=1000))
                if r.status == "complete" and (r.details.get("kind") or "bench") == "bench"
            ]
            runs = [run for r in records if (run := load_run(store, r.id)) is not None]
            problems = held_out(runs, store)
    result = analyse(runs)
    result["held_out_problems"] = problems
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result, seconds)
        print(
            "held out: each run's history holds only the runs recorded before it"
            if not problems
            else "held out: NO\n  " + "\n  ".join(problems)
        )
    rate = result["rate_engaged"]
    return 0 if not problems and (rate is None or rate <= TARGET) else 1


if __name__ == "__main__":
    raise SystemExit(main())
