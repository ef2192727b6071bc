"""Benchmarks on this machine, against the physical limit, other devices and last time.

Micro benchmarks (matmul, memory copy, host<->device transfer, vector add, conv2d) give the
ceilings; model benchmarks (the Keras CIFAR-10 CNN, an MLP, ResNet-20) give training images/s
per device and setting, related to those ceilings and to the spec peak (MFU); a convergence
check on scikit-learn's digits proves the training loop learns. Timing goes through
:mod:`tfaccel.timing` (warm-up excluded, configurations interleaved, median and IQR).

Importing this package does not import TensorFlow; :func:`run` does.

Example:
    >>> from tfaccel import bench
    >>> options = bench.BenchOptions(profile="quick", only=("matmul",))
    >>> result = bench.run(options)                          # doctest: +SKIP
    >>> bench.summarize_run(result)["micro"][0]["median"]    # doctest: +SKIP
    0.71
"""

from __future__ import annotations

from tfaccel.bench.analysis import summarize_run
from tfaccel.bench.compare import compare_runs
from tfaccel.bench.options import BENCHMARKS, PROFILES, BenchOptions
from tfaccel.bench.results import BenchRun, Measurement, Skipped
from tfaccel.bench.runner import Progress, run
from tfaccel.store import ResultsStore

__all__ = [
    "BENCHMARKS",
    "PROFILES",
    "BenchOptions",
    "BenchRun",
    "Measurement",
    "Progress",
    "Skipped",
    "compare_runs",
    "load_run",
    "previous_run",
    "run",
    "summarize_run",
]


def load_run(store: ResultsStore, run_id: int) -> BenchRun | None:
    """Read run ``run_id`` and its results back from the store (None when absent)."""
    record = store.get_run(run_id)
    if record is None:
        return None
    return BenchRun.from_store(record, store.results(run_id))


def previous_run(store: ResultsStore, current: BenchRun) -> BenchRun | None:
    """The newest complete run of the same machine fingerprint before ``current``."""
    record = store.last_run(current.fingerprint, before=current.run_id)
    if record is None:
        return None
    return BenchRun.from_store(record, store.results(record.id))
