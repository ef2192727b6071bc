"""Benchmarks on this machine, against the physical limit, other devices and last time.

Micro benchmarks (matmul, memory copy, host<->device transfer, vector add, conv2d) give the
ceilings; model benchmarks (the Keras CIFAR-10 CNN, an MLP, ResNet-20) give training images/s
per device and setting, related to those ceilings and to the spec peak (MFU); a convergence
check on the UCI handwritten digits proves the training loop learns. Timing goes through
:mod:`tfaccel.core.timing` (warm-up excluded, configurations interleaved, median and IQR).

:func:`run` measures; :func:`run_with_history` is the ``tfaccel bench`` workflow: it also
records the run in the results database and compares it with the last run of this machine.
The records handed to renderers are typed in :mod:`tfaccel.bench.records`.

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
from tfaccel.bench.history import (
    BenchDocument,
    BenchResult,
    BenchStatus,
    load_run,
    previous_run,
    run_with_history,
)
from tfaccel.bench.options import BENCHMARKS, PROFILES, BenchOptions
from tfaccel.bench.records import RunComparison, RunSummary
from tfaccel.bench.results import BenchMeasurement, BenchRun, Skipped
from tfaccel.bench.runner import Progress, run

__all__ = [
    "BENCHMARKS",
    "PROFILES",
    "BenchDocument",
    "BenchMeasurement",
    "BenchOptions",
    "BenchResult",
    "BenchRun",
    "BenchStatus",
    "Progress",
    "RunComparison",
    "RunSummary",
    "Skipped",
    "compare_runs",
    "load_run",
    "previous_run",
    "run",
    "run_with_history",
    "summarize_run",
]
