"""What a profiled run measured: one record per step, and the figures computed from them.

A step's time is split three ways, so the parts add up to the time from one step's start to
the next one's:

* ``input_s``: waiting for the next batch (the iterator's ``get_next`` inside the step for
  Keras ``fit``; the ``timer.input()`` block for a custom loop);
* ``busy_s``: the rest of the step, until its results are on the host (device synchronised);
* ``host_s``: from the end of the step to the start of the next one (Python between steps:
  callbacks, logging, the loop itself).

Warm-up steps (tracing, autotuning, first allocations) are recorded but excluded from every
figure. Plain data, no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tfaccel.core.records import NOT_IN_JSON, Record, to_json
from tfaccel.core.timing import Summary, compare, summarize

__all__ = [
    "MIN_STEPS",
    "Figures",
    "GpuUsage",
    "Measurement",
    "MemoryUsage",
    "RunContext",
    "StepRecord",
    "SyntheticRun",
    "compute_figures",
]

MIN_STEPS = 10  # measured steps (after warm-up) needed before a diagnosis


@dataclass(frozen=True)
class StepRecord:
    """One step. ``input_s`` None: not measured; ``host_s`` None: no next step to measure to."""

    index: int
    start: float
    input_s: float | None
    busy_s: float
    host_s: float | None
    examples: int | None
    warmup: bool
    traced: bool = False
    cpu_s: float | None = None  # the process's CPU seconds so far, read at the step's end

    @property
    def step_s(self) -> float:
        """Time inside the step: input wait plus busy."""
        return (self.input_s or 0.0) + self.busy_s

    @property
    def period_s(self) -> float | None:
        """From this step's start to the next one's, when the next one is known."""
        return None if self.host_s is None else self.step_s + self.host_s


@dataclass
class MemoryUsage:
    """Memory of the device the steps ran on: TF's allocator on a GPU, process RSS on the CPU.

    ``fixed_bytes`` is the part that does not grow with the batch (weights, optimizer state,
    the runtime), as far as it is known; ``limit_bytes`` what the device has.
    """

    kind: str  # "gpu" (tf.config.experimental.get_memory_info) or "process" (RSS)
    device: str
    current_bytes: int | None = None
    peak_bytes: int | None = None
    limit_bytes: int | None = None
    fixed_bytes: int | None = None
    note: str = ""


@dataclass
class GpuUsage:
    """NVML samples of one GPU over the measured steps (``nvidia-smi --query-gpu=...``).

    ``utilization_*`` is NVML's ``utilization.gpu``: the share of time any kernel ran, not
    the share of the SMs at work. Where the GPU offers NVML GPM (Hopper and newer),
    ``metric_source`` is ``"gpm"`` and the ``sm_activity_*``, ``tensor_activity_*`` and
    ``dram_bandwidth_*`` figures are set (over ``gpm_samples`` intervals); otherwise it is
    ``"utilization.gpu"`` and ``gpm_note`` says why.
    """

    index: int
    samples: int
    utilization_mean_percent: float | None
    utilization_max_percent: float | None
    memory_used_max_bytes: int | None
    metric_source: str = "utilization.gpu"  # or "gpm"
    gpm_note: str | None = None
    gpm_samples: int = 0
    sm_activity_mean_percent: float | None = None
    sm_activity_max_percent: float | None = None
    tensor_activity_mean_percent: float | None = None
    tensor_activity_max_percent: float | None = None
    dram_bandwidth_mean_percent: float | None = None
    dram_bandwidth_max_percent: float | None = None


@dataclass
class SyntheticRun:
    """The same steps re-run on one batch already on the device (no input pipeline)."""

    steps: int
    step_s: Summary
    real_step_s: Summary

    @property
    def input_share(self) -> float:
        """Share of the real step that the synthetic run did not need: the input's cost."""
        real = self.real_step_s.median
        return max(0.0, (real - self.step_s.median) / real) if real > 0 else 0.0

    @property
    def different(self) -> bool:
        """Whether the synthetic steps are faster beyond the noise (quartiles apart)."""
        return compare(self.real_step_s, self.step_s).different and self.input_share > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "step_s": self.step_s.to_dict(),
            "real_step_s": self.real_step_s.to_dict(),
            "input_share": self.input_share,
            "different": self.different,
        }


@dataclass
class RunContext:
    """Facts about the run that the diagnosis needs besides the times."""

    source: str = "custom loop"  # "keras fit" or "custom loop"
    device_kind: str = "cpu"  # "cpu" or "gpu"
    gpu_name: str | None = None
    compute_capability: float | None = None
    replicas: int = 1
    batch_size: int | None = None
    parameters: int | None = None
    sixteen_bit_share: float | None = None  # share of parameters in 16-bit compute layers
    precision_policy: str | None = None
    usable_cores: int | None = None
    pipeline: dict[str, Any] | None = None  # tfaccel.data.describe(...).to_dict()
    steps_per_execution: int = 1
    run_eagerly: bool = False  # the model's step runs op by op (compile(run_eagerly=True))
    model: str | None = None  # the Keras model's name, where a fit was measured


@dataclass
class Measurement:
    """Everything a profiled run measured; :func:`compute_figures` turns it into figures."""

    records: list[StepRecord] = field(default_factory=list, metadata=NOT_IN_JSON)
    context: RunContext = field(default_factory=RunContext)
    input_note: str | None = None  # why input wait is not measured, when it is not
    memory: MemoryUsage | None = None
    gpus: list[GpuUsage] = field(default_factory=list)
    gpu_note: str | None = None
    cpu_seconds: float | None = None  # process CPU time over the measured steps
    wall_seconds: float | None = None
    synthetic: SyntheticRun | None = None
    synthetic_note: str | None = None
    trace: Any = None  # tfaccel.profile.trace.TraceSummary
    notes: list[str] = field(default_factory=list)

    def figures(self) -> Figures:
        return compute_figures(self.records)

    def to_dict(self) -> dict[str, Any]:
        """The figures, then every field but the step records."""
        return {"figures": self.figures().to_dict(), **to_json(self)}


@dataclass(frozen=True)
class Figures(Record):
    """Figures over the measured steps (warm-up excluded).

    Shares are totals over the steps whose next step is known (sum of input / sum of
    periods), as the TensorFlow Profiler computes them; times are medians with quartiles.
    """

    steps: int
    warmup_steps: int
    traced_steps_excluded: int
    step_s: Summary | None  # input + busy
    period_s: Summary | None  # input + busy + host
    input_s: Summary | None
    busy_s: Summary | None
    host_s: Summary | None
    input_share: float | None
    busy_share: float | None
    host_share: float | None
    examples_per_s: float | None
    steps_per_s: float | None


def compute_figures(records: Sequence[StepRecord]) -> Figures:
    """Figures of the non-warm-up steps; steps taken under a profiler trace are left out when
    at least :data:`MIN_STEPS` others remain (a trace slows steps down)."""
    measured = [r for r in records if not r.warmup]
    untraced = [r for r in measured if not r.traced]
    excluded = 0
    if len(untraced) >= MIN_STEPS and len(untraced) < len(measured):
        excluded = len(measured) - len(untraced)
        measured = untraced
    warmup = sum(1 for r in records if r.warmup)
    if not measured:
        return Figures(0, warmup, excluded, *([None] * 10))
    full = [r for r in measured if r.period_s is not None]
    inputs = [r.input_s for r in measured if r.input_s is not None]
    hosts = [r.host_s for r in full if r.host_s is not None]
    periods = [r.period_s for r in full if r.period_s is not None]
    total = sum(periods)
    input_share = busy_share = host_share = examples_per_s = steps_per_s = None
    if full and total > 0:
        host_share = sum(hosts) / total
        with_input = [r for r in full if r.input_s is not None]
        if len(with_input) == len(full):
            input_share = sum(r.input_s or 0.0 for r in full) / total
            busy_share = sum(r.busy_s for r in full) / total
        counted = [r.examples for r in full]
        if all(e is not None for e in counted):
            examples_per_s = sum(e or 0 for e in counted) / total
        steps_per_s = len(full) / total
    return Figures(
        steps=len(measured),
        warmup_steps=warmup,
        traced_steps_excluded=excluded,
        step_s=summarize([r.step_s for r in measured]),
        period_s=summarize(periods) if periods else None,
        input_s=summarize(inputs) if len(inputs) == len(measured) else None,
        busy_s=summarize([r.busy_s for r in measured]),
        host_s=summarize(hosts) if hosts else None,
        input_share=input_share,
        busy_share=busy_share,
        host_share=host_share,
        examples_per_s=examples_per_s,
        steps_per_s=steps_per_s,
    )
