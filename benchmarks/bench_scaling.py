"""Data-parallel scaling: throughput per replica count, efficiency, communication share.

Runs ``tfaccel.distribute.scaling()``: training steps of an MLP (784-512-512-10, ~0.67 M
parameters) under a MirroredStrategy over 1, 2, 4... devices with a fixed batch per replica,
and the all-reduce of its gradients alone, interleaved by the shared timing core. On GPUs it
uses the GPUs; without, it splits the CPU into logical devices first, which share the same
cores, so the efficiency it prints there says little about GPUs (the output says so).

    python benchmarks/bench_scaling.py [--replicas 1,2,4] [--per-replica-batch 64]
                                       [--steps 10] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"replica counts must be >= 1: {text!r}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=_counts, default=None, help="e.g. 1,2,4")
    parser.add_argument("--per-replica-batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed sample")
    parser.add_argument("--repeats", type=int, default=5, help="timed samples per configuration")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()

    import tensorflow as tf

    import tfaccel
    from tfaccel.core.errors import TfaccelError
    from tfaccel.distribute import scaling

    gpus = len(tf.config.list_physical_devices("GPU"))
    counts = args.replicas
    if gpus == 0:  # split the CPU before anything starts TensorFlow's runtime
        tfaccel.setup(logical_devices=max(counts or [4]))
    elif counts is None:
        counts = [k for k in (1, 2, 4, 8, 16) if k <= gpus]
    try:
        report = scaling(
            replica_counts=counts,
            per_replica_batch=args.per_replica_batch,
            steps=args.steps,
            repeats=args.repeats,
        )
    except TfaccelError as exc:
        print(f"bench_scaling: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
