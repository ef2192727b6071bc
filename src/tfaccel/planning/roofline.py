"""Step and epoch time on a device from counted FLOPs and bytes: a roofline model.

``compute = FLOPs / (peak x utilisation)`` and ``memory = bytes / (bandwidth x 0.8)``; the step
takes the longer of the two, and that one is the reason. FLOPs are the matmul-class operations
of the traced step (2 per multiply-add, forward and backward); bytes are what every operation of
the step writes and reads once (no fusion assumed). Both are predictions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfaccel.core.records import Record
from tfaccel.planning.targets import BANDWIDTH_UTILISATION, Target
from tfaccel.store import ResultsStore, default_path

__all__ = ["OP_OVERHEAD_S", "StepTime", "measured_cpu_utilisation", "step_time"]

OP_OVERHEAD_S = {"gpu": 5e-6, "tpu": 0.0, "cpu": 0.0}
"""Seconds of dispatch per operation of the step: TensorFlow's executor launches one kernel per
operation on a GPU (CUDA launch latency is about 3-5 us; an assumption, the larger end); a TPU
runs the step as one XLA program; a CPU's measured utilisation already includes it."""


@dataclass
class StepTime(Record):
    """Predicted time of one training step on a target.

    Attributes:
        step_s: the predicted step time (None when the device's peak is unknown).
        compute_s / memory_s: the two roofline terms.
        bound: ``compute`` or ``bandwidth``: the longer term.
    """

    step_s: float | None
    compute_s: float | None
    memory_s: float | None
    bound: str | None


def step_time(target: Target, flops: int, nbytes: int, ops: int = 0) -> StepTime:
    """The roofline time of a step of ``flops``, ``nbytes`` and ``ops`` operations."""
    compute = None
    if target.peak_tflops:
        compute = flops / (target.peak_tflops * 1e12 * target.utilisation)
    memory = None
    if target.bandwidth_gbs:
        memory = nbytes / (target.bandwidth_gbs * 1e9 * BANDWIDTH_UTILISATION)
    overhead = ops * OP_OVERHEAD_S.get(target.kind, 0.0)
    terms = {k: v for k, v in (("compute", compute), ("bandwidth", memory)) if v is not None}
    if not terms:
        return StepTime(None, compute, memory, None)
    bound = max(terms, key=lambda k: terms[k])
    longest = terms[bound]
    if overhead > longest:
        bound = "overhead"
    return StepTime(longest + overhead, compute, memory, bound)


def measured_cpu_utilisation(
    fingerprint: str, precision: str, store: Any = None
) -> tuple[float, str] | None:
    """The best model-FLOPs utilisation a stored bench run of this machine measured on the
    CPU for ``precision`` (``mfu_percent`` of its training figures), with where it came from."""
    path = store if store is not None else default_path()
    if store is None and not default_path().is_file():
        return None
    try:
        with ResultsStore(path) as db:
            run = db.last_run(fingerprint)
            if run is None or "smoke" in str(run.details.get("notes", "")):
                return None  # a smoke run's tiny models say nothing of a real one
            best: tuple[float, str] | None = None
            for result in db.results(run.id):
                mfu = result.extra.get("mfu_percent")
                config = result.config
                if not mfu or config.get("device") != "cpu":
                    continue
                if config.get("precision", "float32") != precision:
                    continue
                share = float(mfu) / 100.0
                if best is None or share > best[0]:
                    best = (
                        share,
                        f"measured on this machine: {result.benchmark} trained at "
                        f"{share:.0%} of the CPU peak estimate (bench run {run.id})",
                    )
            return best
    except Exception:  # an unreadable store means no measurement, never a failed plan
        return None
