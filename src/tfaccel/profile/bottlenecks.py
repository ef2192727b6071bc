"""What limits training, in plain words: rules over a :class:`Measurement`, pure functions.

Thresholds (the TensorFlow Profiler's conventions):

* input-bound: input time / step time >= 20% highly, >= 5% moderately; confirmed by the
  same steps re-run on one batch already on the device, when that run exists;
* host (Python) overhead between steps: >= 15% high, >= 3% moderate;
* kernel launch: >= 15% / >= 3% (needs a trace of a GPU run);
* host<->device copies: counted as input time, so the input thresholds (needs a GPU trace);
* data-parallel collectives: >= 15% / >= 3% of step time (more than one replica, a trace);
* 16-bit share of device compute < 10% on a GPU with tensor cores (compute capability >= 7.0,
  ``tfaccel.inventory.TENSOR_CORE_MIN_CC``);
* tf.data saturating the CPU: process CPU time / (wall time x usable cores) >= 90% while the
  step waits for input;
* memory headroom: a batch at least twice as large fits in 80% of the device memory (an
  estimate: memory = fixed part + per-example part x batch);
* low GPU activity: SM activity (NVML GPM, Hopper and newer) below 50%, which NVIDIA's DCGM
  documentation calls likely ineffective use (80% or more is necessary, not sufficient);
  on older GPUs ``utilization.gpu`` below 50% (no kernel ran half the time), the only metric
  there, which says nothing about how many SMs a kernel used. The finding names its metric.
* two speeds: stretches of steps at two separate durations, the slow at least 1.3x the fast
  (:mod:`tfaccel.profile.two_speeds`), with the cores each kept busy where that was read.

Each check gives one :class:`~tfaccel.core.findings.Finding` (source ``profile``): ``fail``
above the high threshold (act on it first), ``warn`` above the moderate one,
``info`` for a suggestion
(a larger batch), ``ok``, or ``skip`` with the reason in its evidence. A finding carries its
evidence, the numbers behind it, the fix and the predicted gain: removing a share ``s`` of the
step time speeds it up at most ``1 / (1 - s)``.

The diagnosis refuses when no step was recorded or fewer than :data:`MIN_STEPS` steps remain
after warm-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tfaccel.core.findings import PROBLEMS, STATUSES, Finding, Status
from tfaccel.core.units import MISSING, fmt_bytes, fmt_ms
from tfaccel.inventory import TENSOR_CORE_MIN_CC
from tfaccel.profile import text
from tfaccel.profile.measurement import MIN_STEPS, Figures, Measurement
from tfaccel.profile.two_speeds import two_speeds

__all__ = ["THRESHOLDS", "Diagnosis", "find_bottlenecks", "speedup"]

THRESHOLDS: dict[str, tuple[float, float]] = {
    "input_bound": (0.20, 0.05),
    "host_overhead": (0.15, 0.03),
    "launch_bound": (0.15, 0.03),
    "host_device_copies": (0.20, 0.05),
    "collectives": (0.15, 0.03),
}
SIXTEEN_BIT_LOW = 0.10
CPU_SATURATED = 0.90
MEMORY_TARGET = 0.80
SMALL_OP_US = 20.0
ACTIVITY_LOW = 0.50  # SM activity (or utilization.gpu, where it is all there is) below this
SM_ACTIVITY_EFFECTIVE = 0.80  # DCGM: necessary, not sufficient, for effective use


@dataclass
class Diagnosis:
    """The findings over a run, or ``refused`` with the reason."""

    figures: Figures
    refused: str | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        """Findings that call for a change (``fail``, ``warn``, ``info``), most severe first."""
        return [f for f in self.ranked if f.status in PROBLEMS]

    @property
    def ranked(self) -> list[Finding]:
        """Every finding, most severe first: fail, warn, info, skip, ok (check order within)."""
        return sorted(self.findings, key=lambda f: STATUSES.index(f.status), reverse=True)

    def get(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "refused": self.refused,
            "findings": [f.to_dict() for f in self.findings],
        }


def speedup(share: float) -> float:
    """The most a step can speed up when a share ``share`` of it disappears."""
    return math.inf if share >= 1 else 1.0 / (1.0 - share)


def find_bottlenecks(measurement: Measurement, *, min_steps: int = MIN_STEPS) -> Diagnosis:
    """Diagnose a run.

    Args:
        measurement: what a PerformanceCallback or StepTimer recorded.
        min_steps: measured steps (after warm-up) needed to diagnose.

    Returns:
        A Diagnosis; ``refused`` says why when there are no step boundaries or too few steps.

    Example:
        >>> diagnosis = tfaccel.profile.find_bottlenecks(timer.measurement())  # doctest: +SKIP
        >>> [f.id for f in diagnosis.problems]  # doctest: +SKIP
        ['input_bound']
    """
    figures = measurement.figures()
    if not measurement.records:
        return Diagnosis(
            figures,
            refused=(
                "no step boundaries were recorded: nothing called model.fit with a "
                "PerformanceCallback or used StepTimer.step(), so there are no steps to time"
            ),
        )
    if figures.steps < min_steps:
        return Diagnosis(
            figures,
            refused=(
                f"only {figures.steps} step(s) measured after {figures.warmup_steps} warm-up "
                f"step(s); a diagnosis needs at least {min_steps} (warm-up steps are excluded "
                "because they include tracing, autotuning and first allocations): run more "
                "steps or lower warmup_steps"
            ),
        )
    rules = (
        _input_bound,
        _host_overhead,
        _launch_bound,
        _host_device_copies,
        _memory_headroom,
        _sixteen_bit,
        _tf_data_cpu,
        _collectives,
        _replica_imbalance,
        _gpu_activity,
        two_speeds,
        _eager_steps,
    )
    return Diagnosis(figures, findings=[rule(measurement, figures) for rule in rules])


class Reports:
    """``diagnose()`` and ``report()`` for a timer or callback that has ``measurement()``."""

    def measurement(self) -> Measurement:
        raise NotImplementedError

    def diagnose(self, *, min_steps: int = MIN_STEPS) -> Diagnosis:
        """Diagnose the measured steps (see :func:`tfaccel.profile.find_bottlenecks`)."""
        return find_bottlenecks(self.measurement(), min_steps=min_steps)

    def report(self) -> str:
        """The final table, the top ops of a trace when one was taken, and the diagnosis."""
        measurement = self.measurement()
        return text.report(measurement, find_bottlenecks(measurement))


# --- helpers ----------------------------------------------------------------------------------


def _level(finding_id: str, share: float) -> Status:
    high, moderate = THRESHOLDS[finding_id]
    return "fail" if share >= high else "warn" if share >= moderate else "ok"


def _finding(
    finding_id: str,
    status: Status,
    title: str,
    evidence: str,
    *,
    numbers: dict[str, Any] | None = None,
    fix: str | None = None,
    gain: str | None = None,
) -> Finding:
    return Finding(finding_id, status, title, [evidence], fix, "profile", dict(numbers or {}), gain)


def _ms(seconds: float | None) -> str:
    return fmt_ms(seconds)


def _pct(share: float | None) -> str:
    return MISSING if share is None else f"{share * 100:.1f}%"


def _gain(share: float, figures: Figures, what: str) -> str:
    factor = speedup(share)
    text = f"up to x{factor:.2f} faster steps if the {what} disappears"
    if figures.examples_per_s:
        text += (
            f" ({figures.examples_per_s:.0f} -> {figures.examples_per_s * factor:.0f} examples/s)"
        )
    return text


def _graded(
    finding_id: str,
    share: float,
    f: Figures,
    title: str,
    evidence: str,
    numbers: dict[str, Any],
    *,
    fix: str,
    lost: str,
    thresholds: str | None = None,
) -> Finding:
    """A finding graded by the share of the step it costs (``THRESHOLDS[thresholds or id]``);
    the fix and the predicted gain are offered only when it is not ok."""
    status = _level(thresholds or finding_id, share)
    if status == "ok":
        return _finding(finding_id, "ok", title, evidence, numbers=numbers)
    gain = _gain(share, f, lost)
    return _finding(finding_id, status, title, evidence, numbers=numbers, fix=fix, gain=gain)


def _skip(finding_id: str, title: str, reason: str) -> Finding:
    return _finding(finding_id, "skip", title, reason)


def _period(figures: Figures) -> float | None:
    return figures.period_s.median if figures.period_s else None


# --- rules ------------------------------------------------------------------------------------


def _input_bound(m: Measurement, f: Figures) -> Finding:
    title = "Input-bound: the step waits for the input pipeline"
    synthetic = m.synthetic
    share = f.input_share
    source = "measured at the iterator"
    if share is None and synthetic is not None:
        share, source = synthetic.input_share, "from the synthetic re-run"
    if share is None:
        why = m.input_note or "the input wait was not measured"
        return _skip("input_bound", title, why)
    numbers: dict[str, Any] = {
        "input_share": share,
        "input_ms": f.input_s.median * 1e3 if f.input_s else None,
        "step_ms": (_period(f) or 0.0) * 1e3,
        "source": source,
    }
    evidence = (
        f"{_pct(share)} of the step time is spent waiting for input ({source}; median wait "
        f"{_ms(f.input_s.median if f.input_s else None)} of a {_ms(_period(f))} step)"
    )
    if synthetic is not None:
        confirmed = synthetic.input_share >= THRESHOLDS["input_bound"][1] and synthetic.different
        numbers.update(
            synthetic_step_ms=synthetic.step_s.median * 1e3,
            real_step_ms=synthetic.real_step_s.median * 1e3,
            synthetic_input_share=synthetic.input_share,
            confirmed=confirmed,
        )
        evidence += (
            f". Re-run on one ready batch, no pipeline: {_ms(synthetic.step_s.median)} per "
            f"step against {_ms(synthetic.real_step_s.median)} with the real input, "
            + (
                f"so the input costs {_pct(synthetic.input_share)}: confirmed"
                if confirmed
                else "no faster beyond the noise: not confirmed (the wait overlaps work the step "
                "does anyway)"
            )
        )
        if not confirmed and _level("input_bound", share) != "ok":  # a suggestion, no gain
            return _finding(
                "input_bound", "info", title, evidence, numbers=numbers, fix=_input_fix(m)
            )
    return _graded(
        "input_bound",
        share,
        f,
        title,
        evidence,
        numbers,
        fix=_input_fix(m),
        lost="input wait",
    )


def _input_fix(m: Measurement) -> str:
    batch = m.context.batch_size or 64
    device = ', device="GPU:0"' if m.context.device_kind == "gpu" else ""
    pipeline = m.context.pipeline
    if pipeline:
        choices = {c["option"]: c["value"] for c in pipeline.get("choices", [])}
        levers = []
        if choices.get("cache") == "off":
            levers.append("cache=True (or cache='/fast/disk/file') when the decoded data fits")
        if "per element" in choices.get("map", ""):
            levers.append("vectorized=True when map_fn works on whole batches")
        levers.append("preprocess once offline (decode, resize) and store the result")
        return (
            "The pipeline is already a tfaccel.data.pipeline ("
            + ", ".join(
                f"{k}: {v}" for k, v in choices.items() if k in ("cache", "map", "prefetch")
            )
            + "). Remaining levers: "
            + "; ".join(levers)
            + "."
        )
    return (
        "Feed the model through a tuned pipeline (parallel map, cache when it fits, prefetch):\n"
        f"    ds = tfaccel.data.pipeline((x, y), batch_size={batch}, map_fn=preprocess, "
        f"seed=0{device})\n"
        "    model.fit(ds, ...)\n"
        "or, in your own tf.data pipeline: .map(f, num_parallel_calls=tf.data.AUTOTUNE), "
        ".cache() where it fits, .prefetch(tf.data.AUTOTUNE) last, and no Python generator "
        "(from_generator runs under the GIL, one element at a time)."
    )


def _eager_steps(m: Measurement, f: Figures) -> Finding:
    """A model compiled with ``run_eagerly=True``: every step runs op by op from Python."""
    title = "Eager steps: the model is compiled with run_eagerly=True"
    if m.context.source != "keras fit":
        return _skip("run_eagerly", title, "not a Keras fit (a custom loop's step is its own)")
    if not m.context.run_eagerly:
        return _finding("run_eagerly", "ok", title, "the step runs as a traced graph")
    return _finding(
        "run_eagerly",
        "warn",
        title,
        f"every step ({_ms(_period(f))}) runs its operations one by one from Python instead "
        "of as one traced graph; every other figure here is of the eager step",
        numbers={"step_ms": (_period(f) or 0.0) * 1e3},
        fix="drop run_eagerly=True from model.compile (a debugging switch; False is the "
        "default): the step is traced once and runs as a graph",
        gain="not measured here: often several times faster steps for a small model, whose "
        "eager step is mostly Python",
    )


def _host_overhead(m: Measurement, f: Figures) -> Finding:
    title = "Host overhead: Python runs between the steps"
    if f.host_share is None:
        return _skip(
            "host_overhead",
            title,
            "no two consecutive steps were timed (each epoch or loop ran one step)",
        )
    share = f.host_share
    numbers = {
        "host_share": share,
        "host_ms": f.host_s.median * 1e3 if f.host_s else None,
        "step_ms": (_period(f) or 0.0) * 1e3,
    }
    evidence = (
        f"{_pct(share)} of the time passes between the end of one step and the start of the "
        f"next (median {_ms(f.host_s.median if f.host_s else None)} of a {_ms(_period(f))} step)"
    )
    if m.context.source == "keras fit":
        fix = (
            "Run several steps per Python call and keep per-step Python light:\n"
            "    model.compile(..., steps_per_execution=16)\n"
            "and move work out of per-batch callbacks (on_train_batch_end: .numpy(), printing, "
            "file writes) to on_epoch_end."
        )
    else:
        fix = (
            "Compile the step and keep Python out of the loop:\n"
            "    @tf.function\n"
            "    def train_step(batch): ...\n"
            "and avoid .numpy(), print() and NumPy work on tensors between steps (log every N "
            "steps, not every step)."
        )
    return _graded(
        "host_overhead",
        share,
        f,
        title,
        evidence,
        numbers,
        fix=fix,
        lost="time between steps",
    )


def _launch_bound(m: Measurement, f: Figures) -> Finding:
    title = "Launch-bound: many small ops, the device idles between kernel launches"
    if m.context.device_kind != "gpu":
        return _skip(
            "launch_bound",
            title,
            "not applicable on the CPU: ops run on the host threads, there are no kernel launches",
        )
    trace = m.trace
    if trace is None or not trace.ops:
        return _skip(
            "launch_bound",
            title,
            "needs a profiler trace of device ops (tfaccel profile --trace DIR)"
            + (f"; {trace.error}" if trace is not None and trace.error else ""),
        )
    device_ops = [op for op in trace.ops if op.where == "Device"]
    busy = sum(op.self_time_us for op in device_ops)
    idle = trace.idle_us.get("Device", 0.0)
    count = sum(op.occurrences for op in device_ops)
    if not device_ops or busy + idle <= 0 or count == 0:
        return _skip("launch_bound", title, "the trace holds no device op")
    mean_op_us = busy / count
    idle_share = idle / (busy + idle)
    explained = (f.input_share or 0.0) + (f.host_share or 0.0)
    share = max(0.0, idle_share - explained) if mean_op_us < SMALL_OP_US else 0.0
    steps = max(trace.steps, 1)
    numbers = {
        "launch_share_estimate": share,
        "device_idle_share": idle_share,
        "device_ops_per_step": count / steps,
        "mean_device_op_us": mean_op_us,
    }
    evidence = (
        f"{count / steps:.0f} device ops per step, {mean_op_us:.1f} us each on average; the "
        f"device is idle {_pct(idle_share)} of the traced time, {_pct(explained)} of it "
        f"explained by input wait and host overhead: an estimated {_pct(share)} goes to launching "
        f"kernels (ops shorter than {SMALL_OP_US:.0f} us on average count as small)"
    )
    return _graded(
        "launch_bound",
        share,
        f,
        title,
        evidence,
        numbers,
        fix=(
            "Fuse small ops with XLA and give each launch more work:\n"
            "    model.compile(..., jit_compile=True)   # or tfaccel.setup(jit='auto')\n"
            "and a larger batch size; steps_per_execution=16 also cuts per-step launches."
        ),
        lost="launch gap",
    )


def _host_device_copies(m: Measurement, f: Figures) -> Finding:
    title = "Host<->device copies in every step"
    if m.context.device_kind != "gpu":
        return _skip("host_device_copies", title, "not applicable: no accelerator, no copies")
    trace = m.trace
    if trace is None or not trace.ops:
        return _skip(
            "host_device_copies",
            title,
            "needs a profiler trace of device ops (tfaccel profile --trace DIR)",
        )
    copy_us, copies = trace.copy_us()
    steps = max(trace.steps, 1)
    period = _period(f)
    if period is None or period <= 0:
        return _skip("host_device_copies", title, "no complete step period was measured")
    share = copy_us / 1e6 / steps / period
    numbers = {
        "copy_share": share,
        "copies_per_step": copies / steps,
        "copy_us_per_step": copy_us / steps,
    }
    evidence = (
        f"{copies / steps:.1f} host<->device copies per step taking {copy_us / steps:.0f} us "
        f"({_pct(share)} of a {_ms(period)} step)"
    )
    return _graded(
        "host_device_copies",
        share,
        f,
        title,
        evidence,
        numbers,
        fix=(
            "Copy the next batch while the step runs, and keep tensors on the device:\n"
            "    ds = tfaccel.data.pipeline(..., "
            f'batch_size={m.context.batch_size or 64}, device="GPU:0")\n'
            "and no .numpy() / NumPy operations on tensors inside the step."
        ),
        lost="copy time",
    )


def _memory_headroom(m: Measurement, f: Figures) -> Finding:
    title = "Memory headroom: a larger batch would fit"
    mem, batch = m.memory, m.context.batch_size
    if mem is None or mem.peak_bytes is None or not mem.limit_bytes:
        return _skip("memory_headroom", title, "device memory or its size was not read")
    if not batch:
        return _skip("memory_headroom", title, "the batch size is unknown")
    fixed = mem.fixed_bytes
    if mem.kind == "gpu" and fixed is None and m.context.parameters:
        fixed = m.context.parameters * 16  # fp32 weights, gradients, two optimizer slots
    fixed = fixed or 0
    per_example = (mem.peak_bytes - fixed) / batch
    used = mem.peak_bytes / mem.limit_bytes
    numbers: dict[str, Any] = {
        "peak_bytes": mem.peak_bytes,
        "limit_bytes": mem.limit_bytes,
        "fixed_bytes_estimate": fixed,
        "batch_size": batch,
        "peak_share": used,
    }
    what = "TensorFlow's peak" if mem.kind == "gpu" else "the process's peak RSS"
    evidence = (
        f"{what} is {_gib(mem.peak_bytes)} of {_gib(mem.limit_bytes)} ({_pct(used)}) "
        f"at batch {batch}"
    )
    if per_example <= 0:
        return _finding(
            "memory_headroom",
            "ok",
            title,
            evidence + "; the per-example part cannot be separated",
            numbers=numbers,
        )
    largest = int((MEMORY_TARGET * mem.limit_bytes - fixed) // per_example)
    numbers.update(per_example_bytes=per_example, largest_batch_estimate=largest)
    if largest < 2 * batch:
        return _finding(
            "memory_headroom",
            "ok",
            title,
            evidence + f"; batch {2 * batch} would not fit in {_pct(MEMORY_TARGET)} of it",
            numbers=numbers,
        )
    # one step at a time: at most 4x, a power of two, below what fits
    suggested = min(2 ** int(math.log2(largest)), 4 * batch)
    estimate = fixed + per_example * suggested
    numbers["suggested_batch_size"] = suggested
    return _finding(
        "memory_headroom",
        "info",
        title,
        evidence
        + (
            f"; about {_mib(per_example)} per example above {_gib(fixed)} fixed"
            if mem.kind == "gpu"
            else f"; at most {_mib(per_example)} per example above the {_gib(fixed)} the "
            "process held before training (all of its growth since, tracing and the "
            "allocator's pools too, counted as the batch's: an upper bound, so the batch "
            "that fits is at least the one said)"
        ),
        fix=(
            f"batch_size={suggested} (estimated peak {_gib(estimate)} of {_gib(mem.limit_bytes)}; "
            f"about {largest} would fit in {_pct(MEMORY_TARGET)}); scale the learning rate with "
            "the batch (linearly, with a warm-up) and check accuracy"
        ),
        gain=(
            "examples/s usually rises with the batch until the device is saturated: measure it "
            f"(profile again with batch_size={suggested})"
        ),
        numbers=numbers,
    )


def _gib(n: float) -> str:
    return fmt_bytes(n, unit="GiB", digits=2)


def _mib(n: float) -> str:
    return fmt_bytes(n, unit="MiB", digits=2)


def _sixteen_bit(m: Measurement, f: Figures) -> Finding:
    title = "16-bit compute share is low on a GPU with tensor cores"
    ctx = m.context
    if ctx.device_kind != "gpu":
        return _skip(
            "low_16bit_share", title, "not applicable: no GPU (tensor cores are GPU units)"
        )
    if ctx.compute_capability is None or ctx.compute_capability < TENSOR_CORE_MIN_CC:
        cc = "unknown" if ctx.compute_capability is None else f"{ctx.compute_capability:.1f}"
        return _skip(
            "low_16bit_share",
            title,
            f"the GPU has no tensor cores (compute capability {cc} < {TENSOR_CORE_MIN_CC:.1f})",
        )
    trace = m.trace
    if trace is not None and trace.tensor_core_share is not None:
        share, source = trace.tensor_core_share, "kernel time on tensor cores, from the trace"
    elif ctx.sixteen_bit_share is not None:
        share, source = ctx.sixteen_bit_share, "parameters in layers computing in 16 bits"
    else:
        return _skip("low_16bit_share", title, "the model's precision is unknown")
    numbers = {"sixteen_bit_share": share, "source": source, "policy": ctx.precision_policy}
    evidence = f"{_pct(share)} ({source}); policy {ctx.precision_policy or 'unknown'}"
    if share >= SIXTEEN_BIT_LOW:
        return _finding("low_16bit_share", "ok", title, evidence, numbers=numbers)
    return _finding(
        "low_16bit_share",
        "fail",
        title,
        evidence,
        fix=(
            "Turn mixed precision on before building the model:\n"
            '    tfaccel.setup(precision="auto")   # mixed_float16 on compute capability >= 7.0\n'
            "(Keras wraps the optimizer in a LossScaleOptimizer; keep the last activation in "
            "float32, and layer sizes multiples of 8)"
        ),
        gain="up to ~3x on tensor-core GPUs (published; less on Ampere and newer, where TF32 "
        "already speeds float32): measure it",
        numbers=numbers,
    )


def _tf_data_cpu(m: Measurement, f: Figures) -> Finding:
    title = "tf.data saturates the CPU"
    cores = m.context.usable_cores
    if m.cpu_seconds is None or not m.wall_seconds or not cores:
        return _skip("tf_data_cpu", title, "process CPU time over the measured steps was not read")
    busy = m.cpu_seconds / (m.wall_seconds * cores)
    input_share = f.input_share
    if input_share is None and m.synthetic is not None:
        input_share = m.synthetic.input_share
    numbers = {"cpu_busy_share": busy, "usable_cores": cores, "input_share": input_share}
    evidence = f"the process used {_pct(busy)} of {cores} usable cores"
    if m.context.device_kind == "cpu":
        evidence += " (the model runs on the same cores as the pipeline)"
    waits = input_share is not None and input_share >= THRESHOLDS["input_bound"][1]
    contention = _contention(m, f)
    if contention is not None:
        return contention
    if not waits:
        return _finding(
            "tf_data_cpu",
            "ok",
            title,
            evidence + "; the step does not wait for input",
            numbers=numbers,
        )
    if busy < CPU_SATURATED:
        return _finding(
            "tf_data_cpu",
            "ok",
            title,
            evidence + "; the CPU has room, so more parallelism helps (num_parallel_calls="
            "tf.data.AUTOTUNE, interleave reads, no Python generator)",
            numbers=numbers,
        )
    return _finding(
        "tf_data_cpu",
        "fail",
        title,
        evidence + ", while the step waits for input: more parallel calls cannot help",
        fix=(
            "Do less work per epoch on the CPU: cache decoded data (tfaccel.data.pipeline("
            "..., cache=True) or a cache file), vectorise the map (vectorized=True), "
            "preprocess once offline, or move augmentation into the model (Keras preprocessing "
            "layers run on the accelerator)"
        ),
        gain=_gain(input_share or 0.0, f, "input wait"),
        numbers=numbers,
    )


def _contention(m: Measurement, f: Figures) -> Finding | None:
    """On a CPU-only run the pipeline takes cores from the model: the step barely waits, but
    the same steps without the pipeline (the synthetic re-run) are faster beyond the noise."""
    synthetic = m.synthetic
    waits = f.input_share or 0.0
    if m.context.device_kind != "cpu" or synthetic is None or not synthetic.different:
        return None
    share = synthetic.input_share - waits  # what the wait does not explain
    status = _level("input_bound", share)
    if status == "ok":
        return None
    return _finding(
        "tf_data_cpu",
        status,
        "The input pipeline takes CPU time from the model",
        f"the step waits for input only {_pct(waits)} of the time, but the same steps on one "
        f"ready batch take {_ms(synthetic.step_s.median)} instead of "
        f"{_ms(synthetic.real_step_s.median)}: the pipeline's work on the same "
        f"{m.context.usable_cores or '?'} cores costs {_pct(share)} of the step",
        fix=(
            "Make the pipeline cheaper per example: no Python generator (from_generator holds "
            "the GIL), a vectorised map (tfaccel.data.pipeline(..., vectorized=True)), cache "
            "decoded data (cache=True), or preprocess once offline"
        ),
        gain=_gain(share, f, "pipeline's CPU time"),
        numbers={"contention_share": share, "input_share": waits, "cpu_busy_share": None},
    )


def _collectives(m: Measurement, f: Figures) -> Finding:
    title = "Data-parallel collectives take a large share of the step"
    if m.context.replicas <= 1:
        return _skip("collectives", title, "one replica: no data-parallel collectives")
    trace = m.trace
    if trace is None or not trace.ops:
        return _skip("collectives", title, "needs a profiler trace (tfaccel profile --trace DIR)")
    period = _period(f)
    if not period:
        return _skip("collectives", title, "no complete step period was measured")
    per_step = trace.collective_us() / 1e6 / max(trace.steps, 1)
    share = per_step / period
    numbers = {
        "collective_share": share,
        "collective_ms_per_step": per_step * 1e3,
        "replicas": m.context.replicas,
    }
    evidence = (
        f"collective ops take {_ms(per_step)} per step ({_pct(share)} of {_ms(period)}) "
        f"over {m.context.replicas} replicas"
    )
    return _graded(
        "collectives",
        share,
        f,
        title,
        evidence,
        numbers,
        fix=(
            "Communicate less often or less: a larger per-replica batch, mixed precision "
            "(half the gradient bytes), or gradient accumulation; on one machine prefer "
            "NCCL all-reduce (MirroredStrategy's default on GPUs)"
        ),
        lost="collective time",
    )


def _replica_imbalance(m: Measurement, f: Figures) -> Finding:
    title = "Replicas are imbalanced"
    if m.context.replicas <= 1:
        return _skip("replica_imbalance", title, "one replica: nothing to balance")
    trace = m.trace
    if trace is None or len(trace.device_busy_us) < 2:
        return _skip(
            "replica_imbalance",
            title,
            "needs a GPU trace with one busy timeline per device (tfaccel profile --trace DIR "
            "on GPUs)",
        )
    busy = trace.device_busy_us
    most, least = max(busy.values()), min(busy.values())
    share = (most - least) / most if most > 0 else 0.0
    numbers = {"device_busy_us": busy, "imbalance_share": share}
    evidence = (
        f"device busy time ranges {least / 1e3:.1f}-{most / 1e3:.1f} ms ({_pct(share)} apart)"
    )
    return _graded(
        "replica_imbalance",
        share,
        f,
        title,
        evidence,
        numbers,
        fix="Give every replica the same work: equal per-replica batches (drop_remainder=True), "
        "identical GPUs, nothing else running on the slow one (nvidia-smi)",
        lost="wait for the slowest replica",
        thresholds="collectives",
    )


def _gpu_activity(m: Measurement, f: Figures) -> Finding:
    """How much of the GPU worked: SM activity where NVML GPM measured it, else
    ``utilization.gpu``, which only says that some kernel ran, and is named as such."""
    title = "Low GPU activity: the GPU works only part of the time"
    if m.context.device_kind != "gpu":
        return _skip("low_gpu_activity", title, "not applicable: no GPU")
    gpm = [g for g in m.gpus if g.sm_activity_mean_percent is not None]
    util = [g for g in m.gpus if g.utilization_mean_percent is not None]
    if not gpm and not util:
        why = m.gpu_note or "no NVML sample of the GPU was taken during the measured steps"
        return _skip("low_gpu_activity", title, why)
    fix = (
        "Find what keeps the GPU waiting first (input_bound, host_overhead, launch_bound above); "
        "then give each launch more work: a larger batch, XLA to fuse small ops "
        "(model.compile(..., jit_compile=True)), mixed precision for the tensor cores "
        '(tfaccel.setup(precision="auto"))'
    )
    if gpm:
        share = _mean([(g.sm_activity_mean_percent or 0.0) / 100 for g in gpm])
        tensor = _mean_of([g.tensor_activity_mean_percent for g in gpm])
        dram = _mean_of([g.dram_bandwidth_mean_percent for g in gpm])
        busy = _mean_of([g.utilization_mean_percent for g in gpm])
        numbers: dict[str, Any] = {
            "metric": "sm_activity",
            "metric_label": "SM activity",
            "metric_source": "gpm",
            "activity_share": share,
            "tensor_activity_share": tensor,
            "dram_bandwidth_share": dram,
            "utilization_gpu_share": busy,
            "gpus": [g.index for g in gpm],
        }
        evidence = (
            f"SM activity {_pct(share)} (NVML GPM: the share of SMs with work, averaged over "
            f"time; {len(gpm)} GPU(s)); tensor cores {_pct(tensor)}, DRAM bandwidth "
            f"{_pct(dram)}; utilization.gpu read {_pct(busy)} (the share of time any kernel ran)"
        )
        if share >= ACTIVITY_LOW:
            more = "" if share >= SM_ACTIVITY_EFFECTIVE else "; below the 80% DCGM calls necessary"
            return _finding("low_gpu_activity", "ok", title, evidence + more, numbers=numbers)
        evidence += "; below 50%, which NVIDIA's DCGM documentation calls likely ineffective use"
        return _finding("low_gpu_activity", "warn", title, evidence, numbers=numbers, fix=fix)
    share = _mean([(g.utilization_mean_percent or 0.0) / 100 for g in util])
    note = next((g.gpm_note for g in util if g.gpm_note), None) or "no GPM"
    numbers = {
        "metric": "utilization.gpu",
        "metric_label": "utilization.gpu",
        "metric_source": "utilization.gpu",
        "activity_share": share,
        "gpm_note": note,
        "gpus": [g.index for g in util],
    }
    evidence = (
        f"utilization.gpu {_pct(share)}: the share of time any kernel ran ({len(util)} GPU(s)), "
        f"the only metric here ({note}); it cannot tell how many SMs a kernel kept busy"
    )
    if share >= ACTIVITY_LOW:
        evidence += ", so the SM activity is unknown"
        return _finding("low_gpu_activity", "ok", title, evidence, numbers=numbers)
    evidence += f"; no kernel ran {_pct(1 - share)} of the time"
    return _finding("low_gpu_activity", "warn", title, evidence, numbers=numbers, fix=fix)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _mean_of(percents: list[float | None]) -> float | None:
    """The mean of the known percentages, as a share; None when none is known."""
    known = [p / 100 for p in percents if p is not None]
    return _mean(known) if known else None
