"""What limits training, measured per step and said in plain words.

* :class:`StepTimer` times a custom loop (``with timer.input(): ...``, ``with timer.step(): ...``);
  ``tfaccel.keras.PerformanceCallback`` does the same inside ``model.fit``.
* :func:`find_bottlenecks` turns a :class:`Measurement` into findings (input-bound, host overhead,
  launch-bound, copies, memory headroom, 16-bit share, CPU saturation, collectives), each a
  :class:`tfaccel.core.findings.Finding` with its evidence, the fix and the predicted gain;
  it refuses with too few steps.
* :mod:`tfaccel.profile.trace` captures a TensorFlow Profiler trace and lists the top ops.

Importing this package imports neither TensorFlow nor Keras.

Example:
    >>> from tfaccel.profile import StepTimer
    >>> timer = StepTimer(warmup_steps=5, batch_size=64)
    >>> for _ in range(100):  # doctest: +SKIP
    ...     with timer.input():
    ...         batch = next(it)
    ...     with timer.step() as step:
    ...         step.wait(train_step(batch))
    >>> print(timer.report())  # doctest: +SKIP
"""

from __future__ import annotations

from tfaccel.core.findings import Finding
from tfaccel.profile.bottlenecks import THRESHOLDS, Diagnosis, find_bottlenecks, speedup
from tfaccel.profile.measurement import (
    MIN_STEPS,
    Figures,
    Measurement,
    RunContext,
    StepRecord,
    compute_figures,
)
from tfaccel.profile.timer import StepHandle, StepTimer

__all__ = [
    "MIN_STEPS",
    "THRESHOLDS",
    "Diagnosis",
    "Figures",
    "Finding",
    "Measurement",
    "RunContext",
    "StepHandle",
    "StepRecord",
    "StepTimer",
    "compute_figures",
    "find_bottlenecks",
    "speedup",
]
