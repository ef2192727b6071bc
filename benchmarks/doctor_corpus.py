"""How often ``tfaccel doctor --log`` names the cause that a public issue's thread established.

Reads every log of ``tests/data/doctor-corpus`` (each with its source and the cause the thread
established, in ``index-*.jsonl``) and the shared logs of ``tests/data/doctor-logs``, matches
it as ``tfaccel doctor --log`` does, and prints the accuracy per cause and overall, and every
miss. A log is:

* right when the cause the thread established is among the causes named, as a ``fail`` or a
  ``warn`` (an inference is only a ``warn``), and no other cause ``fail`` s unless the
  thread's cause does too;
* for an ``undecidable`` log (the log alone cannot show the cause), right when nothing
  ``fail`` s; for a ``clean`` log, right when nothing ``fail`` s or ``warn`` s.

Logs may carry a ``split`` in the index: ``dev-DATE`` for those a cause's patterns were written
from, ``fresh-DATE`` for those put aside before its patterns were written and not looked at
while writing them (a held-out check of how the patterns generalise); logs without one are
``earlier``. The accuracy is printed per split, and the fresh splits together on their own line.
A dev split whose logs were measured while still fresh (before its patterns were written) keeps
what the doctor said of each then, ``fresh_verdict`` (``right``, ``nothing named``, ``wrong
cause: ...``): its held-out figure is printed beside it ("when fresh").
A clean log's error lines that no cause claimed (the report's ``unrecognised``) are counted too:
noise the report would quote.

Usage:
    python benchmarks/doctor_corpus.py [--json] [--min-accuracy 0.95]

Exit status 1 when the accuracy is below ``--min-accuracy`` or an undecidable or clean log
got a ``fail``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from tfaccel.diagnosis import match_log, read_log_file

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "doctor-corpus"
SHARED = ROOT / "tests" / "data" / "doctor-logs"


@dataclass
class Case:
    file: Path
    cause: str  # the cause id, "undecidable" or "clean"
    source: str
    established: str
    split: str = "earlier"
    fresh_verdict: str | None = None  # what the doctor said while the log was fresh


@dataclass
class Outcome:
    case: Case
    named: list[tuple[str, str]]  # (id, status) of each cause named
    right: bool
    why: str
    unrecognised: int = 0


def load_cases() -> list[Case]:
    """Every indexed log of the corpus and of the shared logs."""
    cases = []
    for index in [*sorted(CORPUS.glob("index-*.jsonl")), SHARED / "index.jsonl"]:
        for line in index.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            cause = entry["cause"] or "clean"
            if entry.get("decidable") is False:
                cause = "undecidable"
            established = entry.get("established") or entry.get("fix") or ""
            split = entry.get("split") or "earlier"
            cases.append(
                Case(
                    index.parent / entry["file"],
                    cause,
                    entry["source"],
                    established,
                    split,
                    entry.get("fresh_verdict"),
                )
            )
    return cases


def judge(case: Case) -> Outcome:
    report = match_log(read_log_file(str(case.file)))
    named = [(c.id, c.status) for c in report.causes]
    failing = {cause for cause, status in named if status == "fail"}
    if case.cause == "undecidable":
        right = not failing
        why = "" if right else f"undecidable, yet fail: {sorted(failing)}"
    elif case.cause == "clean":
        right = not [n for n in named if n[1] in ("fail", "warn")]
        why = "" if right else f"clean, yet named {named}"
    else:
        ids = {cause for cause, status in named if status in ("fail", "warn")}
        wrong_fail = failing - {case.cause}
        right = case.cause in ids and (not wrong_fail or case.cause in failing)
        if case.cause not in ids:
            why = f"expected {case.cause} as a fail or warn, named {named or 'nothing'}"
        elif not right:
            why = f"expected {case.cause}, but {sorted(wrong_fail)} fail and it does not"
        else:
            why = ""
    return Outcome(case, named, right, why, report.unrecognised_count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--min-accuracy", type=float, default=0.95)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    outcomes = [judge(case) for case in load_cases()]
    elapsed = time.perf_counter() - started
    per_cause: dict[str, Counter[str]] = defaultdict(Counter)
    for o in outcomes:
        per_cause[o.case.cause]["right" if o.right else "wrong"] += 1
    right = sum(o.right for o in outcomes)
    accuracy = right / len(outcomes) if outcomes else 0.0
    unsafe = [
        o
        for o in outcomes
        if o.case.cause in ("undecidable", "clean") and any(s == "fail" for _, s in o.named)
    ]
    ok = accuracy >= args.min_accuracy and not unsafe
    per_split: dict[str, Counter[str]] = defaultdict(Counter)
    for o in outcomes:
        per_split[o.case.split]["right" if o.right else "wrong"] += 1
        if o.case.split.startswith("fresh"):
            per_split["fresh (all)"]["right" if o.right else "wrong"] += 1
    when_fresh: dict[str, Counter[str]] = defaultdict(Counter)  # a dev split's held-out figure
    for o in outcomes:
        if o.case.fresh_verdict is not None:
            when_fresh[o.case.split]["right" if o.case.fresh_verdict == "right" else "wrong"] += 1
    noisy_clean = [o for o in outcomes if o.case.cause == "clean" and o.unrecognised]
    if args.json:
        print(
            json.dumps(
                {
                    "logs": len(outcomes),
                    "right": right,
                    "accuracy": accuracy,
                    "seconds": elapsed,
                    "per_cause": {c: dict(n) for c, n in sorted(per_cause.items())},
                    "per_split": {c: dict(n) for c, n in sorted(per_split.items())},
                    "when_fresh": {c: dict(n) for c, n in sorted(when_fresh.items())},
                    "clean_with_unrecognised_lines": [o.case.file.name for o in noisy_clean],
                    "misses": [
                        {"file": o.case.file.name, "source": o.case.source, "why": o.why}
                        for o in outcomes
                        if not o.right
                    ],
                    "fail_on_undecidable_or_clean": len(unsafe),
                    "passed": ok,
                },
                indent=2,
            )
        )
        return 0 if ok else 1
    print(f"{'cause':<28} {'logs':>5} {'right':>6} {'accuracy':>9}")
    for cause, n in sorted(per_cause.items()):
        total = n["right"] + n["wrong"]
        print(f"{cause:<28} {total:>5} {n['right']:>6} {n['right'] / total:>9.0%}")
    print(f"{'overall':<28} {len(outcomes):>5} {right:>6} {accuracy:>9.1%}")
    print(f"{'split':<28} {'logs':>5} {'right':>6} {'accuracy':>9}  when fresh")
    for split, n in sorted(per_split.items()):
        total = n["right"] + n["wrong"]
        fresh = when_fresh.get(split)
        then = f"  {fresh['right']}/{fresh['right'] + fresh['wrong']}" if fresh else ""
        print(f"{split:<28} {total:>5} {n['right']:>6} {n['right'] / total:>9.1%}{then}")
    print(f"matched {len(outcomes)} logs in {elapsed:.2f} s")
    print(f"fail on an undecidable or clean log: {len(unsafe)}")
    print(f"clean logs with error lines not recognised: {len(noisy_clean)}")
    for o in outcomes:
        if not o.right:
            print(f"MISS {o.case.file.name} ({o.case.source}): {o.why}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
