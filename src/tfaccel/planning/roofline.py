"""Step and epoch time on a device: a roofline of counted FLOPs and bytes, and on this CPU a
per-operation model calibrated on this machine.

On a catalogued accelerator, ``compute = FLOPs / (peak x utilisation)`` and ``memory = bytes /
(bandwidth x 0.8)``; the step takes the longer of the two, and that one is the reason. FLOPs
are the matmul-class operations of the traced step (2 per multiply-add, forward and backward);
bytes are what every operation of the step writes and reads once (no fusion assumed).

On this machine's CPU a training step of a small model is not FLOP-bound: it is launch- and
host-bound, and the roofline alone was 2-10x below the measured step time. There the plan sums,
over the traced operations, ``max(per-op floor, FLOPs / measured rate, bytes / measured
bandwidth)`` (the matmul, batched matmul, convolution or depthwise convolution rate; a max
pooling per element of what it pools; a random-number operation per element it makes; a
transpose, and an ``Einsum``'s copies of its operands, at a measured transpose bandwidth), times
a reference step's measured over modelled time, and adds a per-step overhead (the Python side of
``train_on_batch`` / ``fit``, the function call, reading the loss back). A ``While`` loop's body
counts once per iteration, times an LSTM's measured over modelled loop time instead; loops with
no path between them (a ``Bidirectional`` layer's two directions) run side by side on the cores.
The figures are measured on this machine by :func:`calibrate_cpu` (a few seconds: tiny Keras
models, small kernels, a reference CNN step and an LSTM, all interleaved) and stored in the
results database under the machine fingerprint; without them the CPU time is not predicted, and
the plan says how to get them. A calibration above the CPU's peak or lost in its own noise is
not stored (:func:`calibration_problems`). Each prediction names the term that bounds it:
``compute``, ``bandwidth``, ``per-op overhead`` or ``per-step overhead``. Every figure is a
prediction.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from tfaccel.core.errors import TfaccelError
from tfaccel.core.records import Record
from tfaccel.core.timing import measure_interleaved, summarize
from tfaccel.planning.targets import BANDWIDTH_UTILISATION, Target
from tfaccel.planning.trace import ALIASING, LoopBody, OpInfo, StepGraph
from tfaccel.probe.cpu import usable_cores
from tfaccel.store import ResultRecord, ResultsStore, check_store, default_path

__all__ = [
    "BOUNDS",
    "CALIBRATION_KIND",
    "LOOP_OPS",
    "OP_OVERHEAD_S",
    "SECONDARY_FIGURES",
    "CalibrationError",
    "CpuCalibration",
    "StepTime",
    "as_stepped",
    "calibrate",
    "calibrate_cpu",
    "calibration_problems",
    "cpu_step_time",
    "fit_step_times",
    "kernel_pass_note",
    "load_calibration",
    "loop_note",
    "onednn_setting",
    "op_costs",
    "rate_ceiling",
    "save_calibration",
    "step_band",
    "step_time",
    "stored_cpu_figures",
    "unpredicted",
    "with_host_floor",
    "without_lost_figures",
]

OP_OVERHEAD_S = {"gpu": 5e-6, "tpu": 0.0, "cpu": 0.0}
"""Seconds of dispatch per operation of the step on a catalogued device: TensorFlow's executor
launches one kernel per operation on a GPU (CUDA launch latency is about 3-5 us; an assumption,
the larger end); a TPU runs the step as one XLA program. This machine's CPU uses its measured
per-op floor instead (:class:`CpuCalibration`)."""
BOUNDS = ("compute", "bandwidth", "per-op overhead", "per-step overhead")
"""The terms a predicted step time can be bound by."""
CALIBRATION_KIND = "plan-calibration"
"""``details["kind"]`` of a calibration run in the results database."""
CALIBRATE_HINT = "run `tfaccel plan --calibrate` once on this machine (10-30 s)"
LOOP_OPS = frozenset({"While", "StatelessWhile"})
"""Operations whose body runs many times out of the traced graph (an RNN's time loop)."""
_NOT_RUN = ALIASING | {"Const", "NoOp", "VarHandleOp", "Placeholder", "Shape"}
_CALIBRATION_METRICS = {
    "step_overhead_s": "s",
    "op_floor_s": "s",
    "parallel_op_s": "s",
    "matmul_flops_per_s": "FLOP/s",
    "conv_flops_per_s": "FLOP/s",
    "bandwidth_bytes_per_s": "B/s",
    "depthwise_flops_per_s": "FLOP/s",
    "max_pool_element_s": "s",
    "random_element_s": "s",
    "transpose_bytes_per_s": "B/s",
    "batched_matmul_flops_per_s": "FLOP/s",
    "narrow_conv_flops_per_s": "FLOP/s",
    "row_conv_flops_per_s": "FLOP/s",
    "metric_reset_s": "s",
    "fit_overhead_s": "s",
    "filter_pass_s": "s",
    "filter_pass_unaligned_s": "s",
    "conv_call_s": "s",
    "scale": "x",
    "scale_low": "x",
    "scale_high": "x",
    "loop_scale": "x",
}


@dataclass
class StepTime(Record):
    """Predicted time of one training step on a target.

    Attributes:
        step_s: the predicted step time (None when it is not predicted: ``why`` says why).
        compute_s / memory_s: the roofline terms; on this CPU, the time of the operations
            bound by their FLOPs / by the bytes they move.
        bound: the term the time is bound by, one of :data:`BOUNDS` (None: not predicted).
        op_floor_s: on this CPU, the time of the operations too small to be bound by
            anything but the per-op floor (a catalogued GPU: launches x 5 us).
        step_overhead_s: on this CPU, the measured per-step overhead.
        kernel_passes_s: on this CPU, the part of ``compute_s`` that is convolutions' input
            gradients reading their kernels once per image
            (:attr:`CpuCalibration.filter_pass_s`), whose cost per kernel element moves with
            the kernel's shape (:data:`PASS_SPREAD`; see :func:`kernel_pass_note`).
        loops_s: on this CPU, the part of the step in ``While`` loops' bodies (recurrent
            layers), at the loop scale measured on one LSTM (:data:`LOOP_SPREAD`; see
            :func:`loop_note`).
        why: where ``step_s`` is None, the reason.
    """

    step_s: float | None
    compute_s: float | None
    memory_s: float | None
    bound: str | None
    op_floor_s: float | None = None
    step_overhead_s: float | None = None
    kernel_passes_s: float | None = None
    loops_s: float | None = None
    why: str | None = None


@dataclass
class CpuCalibration(Record):
    """What a training step costs on this CPU beyond its FLOPs, measured by
    :func:`calibrate_cpu`.

    Attributes:
        step_overhead_s: the fixed cost of one ``train_on_batch`` call (Python, the function
            call, the loss read back), apart from its operations and its metrics' resets
            (:attr:`metric_reset_s`); measured over :data:`CALL_BURST` calls in a row, as a
            script's loop makes them (one call at a time, each after the calibration's larger
            workloads, took 0.8 ms more on this 2-core EPYC: 2.9 against 2.1 ms at load 1.2).
        op_floor_s: the time of a small operation of a training step (run inline).
        parallel_op_s: the latency of an operation moving :data:`PARALLEL_BYTES` or more,
            which the thread pool splits across the cores, beyond its work.
        matmul_flops_per_s: the FLOP rate of a Dense layer's three training matmuls (512 x
            512 weights; batch 1024 less batch 64: calls as long as a training step's, so that
            they share the cores as one does).
        conv_flops_per_s: the FLOP rate of a 3x3 convolution's forward and both gradients
            (32 x 32, 32 -> 64 channels; batch 32 less batch 4).
        bandwidth_bytes_per_s: bytes an element-wise operation reads and writes per second
            (16 MiB tensors less 256 KiB ones).
        depthwise_flops_per_s: the FLOP rate of a 3x3 depthwise convolution's forward and
            both gradients (32 x 32 x 64; batch 32 less batch 4): a fraction of the
            convolution rate, each output reading only its own channel (0: not measured, a
            calibration made by hand; depthwise convolutions then run at the convolution rate).
        max_pool_element_s: the seconds a 2x2 max pooling's forward and gradient together
            take per element of the pooled tensor ([32, 32, 32, 16] less [4, 32, 32, 16]);
            each of the two operations is taken as half (an assumption), bound by
            ``compute`` (0: not measured, a calibration made by hand: max pooling by its
            bytes).
        random_element_s: the seconds a random-number operation (a dropout's uniform
            numbers, an initializer's normal ones) takes per element it makes ([2^20] less
            [2^14] stateless uniform floats): counter-based generators compute, they do not
            just move bytes (0: not measured, a calibration made by hand: random numbers by
            their bytes).
        transpose_bytes_per_s: bytes a transpose reads and writes per second (a chain of 10
            attention-style [batch, length, heads, depth] -> [batch, heads, length, depth]
            transposes of 1 Mi floats less 64 Ki ones): strided copies, 4-6 times slower
            than an element-wise operation's streaming on this 2-core EPYC. A ``Transpose``
            moves its bytes at it, and an ``Einsum`` copies its operands laid out in another
            order at it too (0: not measured, a calibration made by hand: the bandwidth).
        batched_matmul_flops_per_s: the FLOP rate of attention-shaped batched matmuls, their
            forward and both gradients (per matrix [64, 16] x [16, 64], as a head of 16 over
            64 tokens scores them; 512 matrices less 64): small matrices, which on this 2-core
            EPYC ran at about a sixth of a large matmul's rate. Every ``BatchMatMul`` and
            ``Einsum`` whose two operands grow with the batch runs at it (in Keras's
            attention: the scores, the context, and the gradients of its projections'
            weights) where its FLOPs per byte are as few as these matrices', and faster where
            they are more, up to the matmul rate (:func:`_batched_rate`); one by a weight,
            which TensorFlow runs as one large matmul, at the matmul rate (0: not measured, a
            calibration made by hand: the matmul rate).
        narrow_conv_flops_per_s: the FLOP rate of a convolution that sums over few inputs
            per output (3x3 over 3 channels, an image model's first layer: 27 products per
            output, against 288 for :attr:`conv_flops_per_s`'s), its forward and kernel
            gradient (32 x 32, 3 -> 16 channels; batch 32 less batch 4): about a fifth of the
            convolution rate on this 2-core EPYC. A convolution summing over ``K`` products
            per output runs at a rate interpolated between the two in log ``K`` (0: not
            measured, a calibration made by hand: every convolution at the convolution rate).
        row_conv_flops_per_s: the FLOP rate of a convolution whose window is one row of more
            than one column (a Keras ``Conv1D``, which TensorFlow runs as a 2-D convolution one
            row high, :attr:`OpInfo.window` ``(1, k)``), its forward and both gradients (kernel
            7, 64 -> 64 channels over 128 steps; batch 32 less batch 4): 1.15-1.3 times the 3x3
            convolution's rate on this 2-core EPYC (load 2), and a Conv1D over 8 channels ran
            at 0.8 times it, where the 3x3 interpolation gives 0.5. Every such convolution runs
            at it, whatever it sums per output (0: not measured, a calibration made by hand:
            the 3x3 convolution's rates).
        metric_reset_s: the seconds ``train_on_batch`` takes to reset one metric variable
            before a step (it resets every metric of the model, each variable assigned zeros
            from Python): a tiny model's ``reset_metrics()`` followed by the resets of two
            metrics (mean absolute and squared errors, 2 variables each) less the model's
            alone, over 4. At load 3, one such metric made a tiny model's
            ``train_on_batch`` 0.32-0.35 ms slower where its 10 operations cost 0.01, as much
            as 350 small operations. A step pays it for :attr:`StepGraph.metric_variables` (its loss
            tracker's included); ``fit`` resets its metrics once per epoch, not per step
            (:attr:`fit_overhead_s`) (0: not measured).
        fit_overhead_s: the fixed cost of one step of ``fit`` (its loop: the iterator, the
            function call, the callbacks), apart from its operations: ``fit`` resets its
            metrics once per epoch, not per step, and keeps its logs as tensors. The median of
            the tiny model's ``fit`` steps on one repeated batch (:data:`FIT_STEPS` a round,
            each from one batch's start to the next's), less its operations. On this 2-core
            EPYC (load 1.2) a tiny model's ``fit`` step took 0.97 ms where its
            ``train_on_batch`` took 1.77, and 1.42 against 2.40 with two metrics (0: not
            measured, a calibration made by hand: :attr:`step_overhead_s` stands for it).
        filter_pass_s: the seconds an input's gradient of a convolution (``Conv2DBackpropInput``)
            takes per element of its kernel and per image, where TensorFlow's CPU kernel runs
            it as one matmul per image split across the cores (:func:`_passes_per_image`):
            each image's product reads the whole kernel again, laid out anew, whatever few
            positions it has; for a kernel whose rows (its output channels' bytes) are a
            multiple of :data:`ALIGNED_ROW_BYTES`, whose reads down a column fall in few cache
            sets. Measured on a 3x3 convolution of 512 -> 512 channels over 3 x 3 positions
            (:data:`PASS_CHANNELS`), batch 4 less batch 1, its products' FLOPs at the
            convolution rate taken off: 1.1-1.3 ns on this quiet 2-core EPYC, where a
            ResNet50's last stages at a 64 x 64 input spent 9 times their FLOPs' time in these
            operations (0: not measured).
        filter_pass_unaligned_s: the same for a kernel of rows whose largest power-of-two
            divisor is :data:`UNALIGNED_ROW_BYTES` or less (500 output channels: 2000 bytes);
            between the two, interpolated in the log of that divisor (:func:`_pass_cost`). On
            this 2-core EPYC (1x1 over 2 x 2 positions, 512 input channels) 1.5-2.2 ns with
            512, 1024 or 2048 output channels, 0.8-1.2 with 384, 640, 768, 1280 or 1536, 0.4-0.9
            with 448, 480, 500, 520, 576, 960, 1000 or 1040 (0: not measured, the aligned
            figure for every kernel).
        conv_call_s: the fixed seconds of one convolution kernel's call in a training step
            (a forward, an input's or a kernel's gradient, depthwise or not:
            :data:`CONV_CALL_OPS`), beyond the per-op floor and its work: a Keras model of
            :data:`FLOOR_DEPTH` 1x1 ``Conv2D(8)`` layers over 4 x 4 x 8 trained with
            ``train_on_batch`` (:data:`CALL_BURST` calls in a row) less the tiny model of as
            many ``Dense(8)`` layers, over its convolution calls (:data:`CONV_CALLS_TIMED`).
            With oneDNN (TensorFlow's default on x86 Linux) a convolution costs far more to
            call than its work: on a 2-core AMD EPYC with AVX-512, such a layer took 200-250
            us of a ``fit`` step more than a ``Dense`` of the same size, and 10 us more with
            ``TF_ENABLE_ONEDNN_OPTS=0``. It is multiplied by neither :attr:`scale` nor
            :attr:`loop_scale`: it is measured in a step (0: not measured, a calibration made
            by hand).
        scale: a reference training step's measured time (less the step overhead and what
            is measured as a step runs it) over the sum of its operations' modelled times:
            what scheduling, cores shared with other work and caches add to the kernels
            measured alone; the middle of :attr:`reference_scales`. Every operation of the
            step (not of a loop's body) is multiplied by it.
        scale_low / scale_high: the lowest and highest of :attr:`reference_scales`: how far
            that addition moves between architectures on this CPU (0: one reference step
            measured, a calibration made by hand).
        reference_scales: each reference step's scale (:data:`REFERENCE_STEPS`), by name
            (not stored: :attr:`scale`, :attr:`scale_low` and :attr:`scale_high` are).
        loop_scale: an LSTM's measured time per iteration of its loops (the step time at 40
            time steps less that at 8, its other operations' modelled difference taken off,
            over 32) over its loop bodies' modelled time per iteration (64 units, batch 32, 32
            features: its matmuls split across the cores, as a recurrent layer's do): the
            operations of a ``While`` body run inside the loop's own executor, one iteration
            after another, at a cost of their own. Every loop body's operation is multiplied
            by it instead of :attr:`scale`.
        precision: the compute precision measured (``float32``).
        onednn: ``TF_ENABLE_ONEDNN_OPTS`` as it was (``default`` when unset): oneDNN changes
            every kernel's speed, so a calibration applies only under the same setting.
        cost_s: seconds the calibration took (TensorFlow's import not counted).
        source: where it came from (the results database run).
        load: the 1, 5 and 15-minute load averages when the measurement ended.
        note: why this stored calibration was read, where that needs saying (a newer one
            measured under load passed over, or only loaded ones stored).
        differences: each measured difference of two medians the figures come from, with
            its noise: name -> (seconds of the difference, the larger interquartile range
            of the two medians' samples) (not stored; :func:`calibration_problems` judges
            them).
        unmeasured: the differences of :data:`SECONDARY_FIGURES` lost in their noise, whose
            figures :func:`without_lost_figures` left not measured (0, their stand-ins), in
            the order of that table (not stored: a stored 0 says it).
    """

    step_overhead_s: float
    op_floor_s: float
    parallel_op_s: float
    matmul_flops_per_s: float
    conv_flops_per_s: float
    bandwidth_bytes_per_s: float
    depthwise_flops_per_s: float = 0.0
    max_pool_element_s: float = 0.0
    random_element_s: float = 0.0
    transpose_bytes_per_s: float = 0.0
    batched_matmul_flops_per_s: float = 0.0
    narrow_conv_flops_per_s: float = 0.0
    row_conv_flops_per_s: float = 0.0
    metric_reset_s: float = 0.0
    fit_overhead_s: float = 0.0
    filter_pass_s: float = 0.0
    filter_pass_unaligned_s: float = 0.0
    conv_call_s: float = 0.0
    scale: float = 1.0
    scale_low: float = 0.0
    scale_high: float = 0.0
    loop_scale: float = 1.0
    precision: str = "float32"
    onednn: str = "default"
    cost_s: float = 0.0
    source: str = "measured now"
    load: tuple[float, ...] = ()
    note: str = ""
    differences: dict[str, tuple[float, float]] = field(default_factory=dict)
    unmeasured: tuple[str, ...] = ()
    reference_scales: dict[str, float] = field(default_factory=dict)

    def _per_step(self) -> str:
        """The per-step costs in words: a fit step's, and a train_on_batch call's with its
        resets (only the call's, as any step's, where fit's was not measured)."""
        resets = f"{self.metric_reset_s * 1e6:.0f} us per metric variable reset"
        call = f"{self.step_overhead_s * 1e3:.2f} ms per"
        if not self.fit_overhead_s:
            return f"{call} step + {resets}"
        fit = f"{self.fit_overhead_s * 1e3:.2f} ms per fit step"
        return f"{fit} ({call} train_on_batch call + {resets})"

    def with_reference_scales(self, scales: dict[str, float]) -> CpuCalibration:
        """A copy whose :attr:`scale` is the middle of the reference steps' ``scales`` (by
        name), with them and their lowest and highest (0 for one step: no spread measured)."""
        values = list(scales.values())
        spread = len(values) > 1
        return replace(
            self,
            reference_scales=dict(scales),
            scale=statistics.median(values),
            scale_low=min(values) if spread else 0.0,
            scale_high=max(values) if spread else 0.0,
        )

    def _scales(self) -> str:
        """Where :attr:`scale` came from, in words: one reference step, or the middle of
        several and their spread."""
        if not (self.scale_low and self.scale_high):
            return "measured on a reference step"
        steps = len(self.reference_scales) or len(REFERENCE_STEPS)
        return (
            f"the middle of {self.scale_low:.2f}-{self.scale_high:.2f}, measured on {steps} "
            "reference steps"
        )

    def describe(self) -> str:
        """The calibration in words, for a plan's notes (a figure not measured says so, and
        what stands in for it)."""

        def rate(value: float, unit: str, stand_in: str) -> str:
            digits = 0 if unit == "GFLOP/s" else 1
            return f"{value / 1e9:.{digits}f} {unit}" if value else f"not measured: {stand_in}"

        def each(value: float, stand_in: str) -> str:
            return f"{value * 1e9:.1f} ns per element" if value else f"not measured: {stand_in}"

        passes = (
            f"{self.filter_pass_s * 1e9:.1f} ns per kernel element, "
            + (
                f"{self.filter_pass_unaligned_s * 1e9:.1f} with rows not aligned"
                if self.filter_pass_unaligned_s
                else "rows not aligned not measured: the same"
            )
            if self.filter_pass_s
            else "not measured: not modelled"
        )
        conv_calls = (
            f"{self.conv_call_s * 1e6:.0f} us more, measured in a step"
            if self.conv_call_s
            else "not measured: the same"
        )
        return (
            f"this CPU's step time = {self._per_step()} + per "
            f"operation {self.op_floor_s * 1e6:.1f} us (small) or {self.parallel_op_s * 1e6:.0f} "
            f"us (split across cores; a convolution's call: {conv_calls}) + the longer of FLOPs / "
            f"{self.matmul_flops_per_s / 1e9:.0f} GFLOP/s (matmul), "
            f"{rate(self.batched_matmul_flops_per_s, 'GFLOP/s', 'the matmul rate')} (batched "
            f"matmul), {self.conv_flops_per_s / 1e9:.0f} GFLOP/s (conv; "
            f"{rate(self.narrow_conv_flops_per_s, 'GFLOP/s', 'the conv rate')} over 3 channels, "
            f"{rate(self.row_conv_flops_per_s, 'GFLOP/s', 'the conv rate')} one row high "
            f"(Conv1D)) or "
            f"{rate(self.depthwise_flops_per_s, 'GFLOP/s', 'the conv rate')} (depthwise conv) "
            f"and bytes / {self.bandwidth_bytes_per_s / 1e9:.1f} GB/s (max pooling: "
            f"{each(self.max_pool_element_s, 'its bytes')}, forward and gradient; "
            f"an input's gradient read per image: {passes}; "
            f"random numbers: {each(self.random_element_s, 'their bytes')}; transposes: "
            f"{rate(self.transpose_bytes_per_s, 'GB/s', 'the bandwidth')}), "
            f"x {self.scale:.2f} ({self._scales()}; a While loop's body: "
            f"x {self.loop_scale:.2f}, measured on an LSTM); {self.source}"
            + (f", at load average {self.load[0]:.2f}" if self.load else "")
            + (
                f"; lost in their noise, not measured: {', '.join(self.unmeasured)}"
                if self.unmeasured
                else ""
            )
            + (f" ({self.note})" if self.note else "")
        )


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
        return StepTime(None, compute, memory, None, why="the device's peak rate is unknown")
    bound = max(terms, key=lambda k: terms[k])
    longest = terms[bound]
    if overhead > longest:
        bound = "per-op overhead"
    return StepTime(longest + overhead, compute, memory, bound, op_floor_s=overhead or None)


def with_host_floor(
    time: StepTime, step: StepGraph, calibration: CpuCalibration | None, call: str = "fit"
) -> StepTime:
    """A catalogued device's roofline ``time`` with the host's per-step cost as its floor: a
    step cannot take less than the loop on the host that calls it (``fit``'s, or a
    ``train_on_batch`` call's: :func:`per_step_overhead`, measured on this machine's CPU by
    its ``calibration``). The host enqueues a step while the device runs the one before, so
    the longer of the two counts, not their sum. Assumed: that device's host runs the loop as
    fast as this CPU does. Unchanged without a calibration or a prediction."""
    if calibration is None or time.step_s is None:
        return time
    host = per_step_overhead(step, calibration, call)
    if host <= time.step_s:
        return replace(time, step_overhead_s=host)
    return replace(time, step_s=host, bound="per-step overhead", step_overhead_s=host)


def cpu_step_time(
    step: StepGraph,
    batch: int,
    calibration: CpuCalibration | None,
    *,
    onednn: str | None = None,
    cores: int | None = None,
    call: str = "fit",
) -> StepTime:
    """The step time of ``step`` at ``batch`` on this CPU: the measured per-step overhead of
    the loop that ``call`` s it (:data:`STEP_CALLS`: a ``fit`` step's,
    :attr:`CpuCalibration.fit_overhead_s`; a ``train_on_batch`` call's,
    :attr:`CpuCalibration.step_overhead_s`, with the reset of the model's metrics' variables
    that every call makes, :attr:`CpuCalibration.metric_reset_s`) plus,
    for every operation that runs a kernel, its latency (the small-op floor, or the parallel
    latency for one moving :data:`PARALLEL_BYTES` or more) and the longer of its FLOPs at the
    measured matmul or convolution rate and its bytes at the measured bandwidth (operations
    run one after another; pure). The bound is the largest of the four sums.

    The step's operations are multiplied by :attr:`CpuCalibration.scale`. A ``While`` loop's
    body (:attr:`StepGraph.loops`, nested loops too) adds its operations' terms ``iterations``
    times, multiplied by :attr:`CpuCalibration.loop_scale` instead; loops with no path
    between them run side by side on ``cores`` threads (default: the cores this process may
    run on; see :func:`_side_by_side`).

    Not predicted (``step_s`` None, ``why`` set) without a calibration, for a precision or a
    oneDNN setting other than the calibration's (``onednn``: the setting of the process that
    will train, default this process's), and for a ``While`` loop whose body was not traced or
    whose iterations the graph does not give.
    """
    if calibration is None:
        return unpredicted(f"this CPU is not calibrated: {CALIBRATE_HINT}")
    compute_dtype = (
        "bfloat16" if "bfloat16" in step.policy else "float16" if "16" in step.policy else "float32"
    )
    if compute_dtype != calibration.precision:
        return unpredicted(
            f"calibrated for {calibration.precision} only; {compute_dtype} kernels on this CPU "
            "run at other rates (not measured)"
        )
    setting = onednn if onednn is not None else onednn_setting()
    if setting != calibration.onednn:
        return unpredicted(
            f"calibrated with TF_ENABLE_ONEDNN_OPTS={calibration.onednn}, but this process has "
            f"{setting}: {CALIBRATE_HINT} under the same setting"
        )
    loops = sum(1 for op in step.ops if op.type in LOOP_OPS)
    if loops > len(step.loops):
        return unpredicted(
            f"the step runs {loops} While loop{'s' if loops > 1 else ''} (a recurrent layer) "
            f"and {len(step.loops)} traced: the body's operations, run once per iteration, are "
            "not known"
        )
    threads = cores if cores is not None else usable_cores()
    terms = as_stepped(_op_terms(step.ops, batch, calibration, threads), calibration)
    passes = terms[KERNEL_PASSES]
    for term, into in FOLDED_TERMS.items():
        terms[into] += terms.pop(term)
    each: list[dict[str, float]] = []
    for loop in step.loops:
        loop_terms = _loop_terms(loop, batch, calibration, threads)
        if isinstance(loop_terms, str):
            return unpredicted(loop_terms)
        each.append(loop_terms)
    side_by_side = _side_by_side(step, [sum(t.values()) for t in each], cores)
    looped = 0.0
    for loop_terms in each:
        for term, seconds in loop_terms.items():
            if term in FOLDED_TERMS:
                terms[FOLDED_TERMS[term]] += seconds * side_by_side
                passes += seconds * side_by_side if term == KERNEL_PASSES else 0.0
            else:
                terms[term] += seconds * calibration.loop_scale * side_by_side
                looped += seconds * calibration.loop_scale * side_by_side
    terms["per-step overhead"] = per_step_overhead(step, calibration, call)
    bound = max(terms, key=lambda k: terms[k])
    return StepTime(
        step_s=sum(terms.values()),
        compute_s=terms["compute"],
        memory_s=terms["bandwidth"],
        bound=bound,
        op_floor_s=terms["per-op overhead"],
        step_overhead_s=terms["per-step overhead"],
        kernel_passes_s=passes,
        loops_s=looped,
    )


STEP_CALLS = ("fit", "train_on_batch")
"""How a training step is called: by ``fit`` (its loop; a custom loop calling its own
``tf.function`` is planned as one) or by a script's own loop of ``train_on_batch`` calls."""


def per_step_overhead(step: StepGraph, calibration: CpuCalibration, call: str = "fit") -> float:
    """The fixed seconds of one step of ``step`` beyond its operations, called by ``call``
    (:data:`STEP_CALLS`): ``fit``'s loop (:attr:`CpuCalibration.fit_overhead_s`, shared by
    the :attr:`StepGraph.steps_per_execution` steps of one call: on this 2-core EPYC a tiny
    model's ``fit`` step took 1.01 ms at 1, 0.26 at 8 and 0.22 at 32 steps per execution,
    where its operations take about 0.2), or a
    ``train_on_batch`` call, which resets the model's metrics' variables
    (:attr:`StepGraph.metric_variables`) before every step (also what a calibration without
    ``fit``'s figure gives a ``fit`` step)."""
    if call not in STEP_CALLS:
        raise ValueError(f"call is {call!r}, not one of {STEP_CALLS}")
    if call == "fit" and calibration.fit_overhead_s:
        return calibration.fit_overhead_s / step.steps_per_execution
    return calibration.step_overhead_s + step.metric_variables * calibration.metric_reset_s


PASS_SPREAD = (0.5, 2.5)
"""How far the cost per kernel element of input gradients run one matmul per image moved from
the modelled one (:func:`_pass_cost`) with other kernel shapes on this 2-core EPYC, quiet:
1.0-2.5x (a 3x3 512 -> 512 over 2 x 2 positions 2x its cost over 3 x 3; 1x1 1024 -> 1024 2x;
448 or 480 output channels 2.2x the unaligned figure), and down to half, an allowance."""
PASS_NOTE_SHARE = 0.2
"""The share of a predicted step in kernel passes from which the plan says how far the
prediction may be off for them (:func:`kernel_pass_note`)."""


def kernel_pass_note(time: StepTime) -> str | None:
    """Where convolutions' input gradients reading their kernels once per image make
    :data:`PASS_NOTE_SHARE` or more of a predicted step: what share, and the step times that
    the spread of their cost with the kernel's shape (:data:`PASS_SPREAD`) allows; else None."""
    return _part_note(
        time,
        time.kernel_passes_s,
        PASS_SPREAD,
        PASS_NOTE_SHARE,
        "convolutions' input gradients reading their whole kernel once per image "
        "(TensorFlow's CPU kernel for them, where each image's product is its own matmul), at "
        "the cost per kernel element measured on two 3x3 kernels; other kernel shapes cost "
        f"{PASS_SPREAD[0]:g}-{PASS_SPREAD[1]:g}x as much on the CPU that was measured on",
    )


def _part_note(
    time: StepTime, part: float | None, spread: tuple[float, float], share: float, what: str
) -> str | None:
    """``what`` a ``part`` of a predicted step is and how far it may be off, with its share and
    the step times it allows (:func:`_part_band`); None where it is under ``share``."""
    band = _part_band(time.step_s, part, spread, share)
    if band is None or not time.step_s or not part:
        return None
    return (
        f"{part / time.step_s:.0%} of the predicted step is {what}, so the step may take "
        f"{band[0] * 1e3:.0f}-{band[1] * 1e3:.0f} ms"
    )


def _part_band(
    step: float | None, part: float | None, spread: tuple[float, float], share: float
) -> tuple[float, float] | None:
    """The step times a ``part`` of a predicted ``step`` allows at ``spread`` times its
    predicted time, where it is ``share`` or more of the step; else None."""
    if not step or not part or part < share * step:
        return None
    low, high = (step + part * (factor - 1) for factor in spread)
    return low, high


LOOP_SPREAD = (0.8, 1.8)
"""How far the measured step of models whose step is mostly ``While`` loops' bodies moved from
the predicted one on this 2-core EPYC, quiet, with the loop scale measured on an LSTM: an LSTM,
a bidirectional LSTM and a GRU with attention 0.96-1.2x, an OCR model's bidirectional LSTMs
0.9x, a masked bidirectional GRU over 200 steps 1.65x; the band is taken over the loops'
share of the step (:func:`loop_note`)."""
LOOP_NOTE_SHARE = 0.2
"""The share of a predicted step in loops' bodies from which the plan says how far the
prediction may be off for them (:func:`loop_note`)."""


def loop_note(time: StepTime) -> str | None:
    """Where ``While`` loops' bodies (recurrent layers) make :data:`LOOP_NOTE_SHARE` or more of
    a predicted step: what share, and the step times that the spread of other recurrent
    models' measured loops (:data:`LOOP_SPREAD`) allows; else None."""
    return _part_note(
        time,
        time.loops_s,
        LOOP_SPREAD,
        LOOP_NOTE_SHARE,
        "While loops' bodies (recurrent layers: one iteration per time step), timed at the "
        "scale measured on an LSTM; other recurrent models' loops ran "
        f"{LOOP_SPREAD[0]:g}-{LOOP_SPREAD[1]:g}x that on the CPU that was measured on",
    )


def step_band(time: StepTime) -> tuple[float, float] | None:
    """The step times that the notes of a prediction allow (:func:`kernel_pass_note`,
    :func:`loop_note`: each part's spread where it is a large enough share of the step, taken
    together), or None where no such note is given (the prediction stands alone)."""
    step = time.step_s
    bands = [
        band
        for band in (
            _part_band(step, time.kernel_passes_s, PASS_SPREAD, PASS_NOTE_SHARE),
            _part_band(step, time.loops_s, LOOP_SPREAD, LOOP_NOTE_SHARE),
        )
        if band is not None
    ]
    if not step or not bands:
        return None
    return step + sum(b[0] - step for b in bands), step + sum(b[1] - step for b in bands)


def _side_by_side(step: StepGraph, seconds: list[float], cores: int | None = None) -> float:
    """The wall time of ``step``'s loops (``seconds`` each, in the order of
    :attr:`StepGraph.loops`) over the sum of their times: loops with no path between them
    (the two directions of a ``Bidirectional`` layer, and their gradients) run side by side on
    the executor's threads. The wall time is the longer of the longest chain of loops that
    depend on one another and the sum shared out over ``cores`` (default: the cores this
    process may run on). 1.0 for loops that all depend on one another, or for one loop."""
    total = sum(seconds)
    if len(seconds) < 2 or total <= 0:
        return 1.0
    if cores is None:
        cores = usable_cores()
    producer = {t.index: position for position, op in enumerate(step.ops) for t in op.outputs}
    where = {op.name: position for position, op in enumerate(step.ops) if op.type in LOOP_OPS}
    if any(loop.name not in where for loop in step.loops):
        return 1.0  # a loop not among the step's operations: assume one after another
    positions = [where[loop.name] for loop in step.loops]
    loop_at = {position: n for n, position in enumerate(positions)}
    before: list[set[int]] = []  # per loop, the loops it (transitively) reads from
    for position in positions:
        seen: set[int] = set()
        stack = [position]
        found: set[int] = set()
        while stack:
            for tensor in step.ops[stack.pop()].inputs:
                source = producer.get(tensor)
                if source is None or source in seen:
                    continue
                seen.add(source)
                if source in loop_at:
                    found.add(loop_at[source])
                stack.append(source)
        before.append(found)
    longest = dict.fromkeys(range(len(positions)), 0.0)  # the longest chain ending with each
    # a loop reads from every loop its readers read from, and more: fewer first is an order
    for n in sorted(range(len(positions)), key=lambda k: len(before[k])):
        longest[n] = seconds[n] + max((longest[m] for m in before[n]), default=0.0)
    wall = max(max(longest.values()), total / max(cores, 1))
    return min(wall / total, 1.0)


def as_stepped(costs: dict[str, float], calibration: CpuCalibration) -> dict[str, float]:
    """Modelled seconds by term (:func:`op_costs`, one operation's or a sum's) as a step's own
    operations pay them: times :attr:`CpuCalibration.scale`, but the terms measured as they
    run in a step (:data:`FOLDED_TERMS`; a loop's body takes
    :attr:`CpuCalibration.loop_scale` instead)."""
    return {
        term: seconds if term in FOLDED_TERMS else seconds * calibration.scale
        for term, seconds in costs.items()
    }


def reference_scale(
    reference: StepGraph,
    calibration: CpuCalibration,
    measured_s: float,
    batch: int,
) -> float:
    """The scale of a reference step (:data:`REFERENCE_STEPS`) that took ``measured_s``
    beyond the per-step overhead at ``batch``, modelled with ``calibration``'s figures: what
    its terms measured as a step runs them (:data:`FOLDED_TERMS`) leave of it, over the rest
    of its modelled time."""
    terms = _op_terms(reference.ops, batch, calibration)
    fixed = sum(terms[term] for term in FOLDED_TERMS)
    return max(measured_s - fixed, 1e-6) / max(sum(terms.values()) - fixed, 1e-9)


def _op_terms(
    ops: list[OpInfo], batch: int, calibration: CpuCalibration, threads: int | None = None
) -> dict[str, float]:
    """The modelled seconds of ``ops`` (run once each), by the term that bounds each, before
    :attr:`CpuCalibration.scale`: the sums of :func:`op_costs`."""
    terms = dict.fromkeys(_TERMS, 0.0)
    for _, costs in op_costs(ops, batch, calibration, threads):
        for term, seconds in costs.items():
            terms[term] += seconds
    return terms


def op_costs(
    ops: list[OpInfo], batch: int, calibration: CpuCalibration, threads: int | None = None
) -> Iterator[tuple[OpInfo, dict[str, float]]]:
    """Each operation of ``ops`` that runs a kernel, with its modelled seconds by term, before
    :attr:`CpuCalibration.scale`: its latency (``per-op overhead``) and the longer of its
    compute and its memory traffic (``compute`` or ``bandwidth``; an Einsum's copies of its
    operands also ``bandwidth``); an input's gradient of a convolution that reads its kernel
    once per image (:func:`_passes_per_image`, on ``threads`` intra-op threads, default the
    cores this process may use) adds those reads (:attr:`CpuCalibration.filter_pass_s`) as
    their own term, :data:`KERNEL_PASSES`. Operations folded into constants or not run are
    left out."""
    if threads is None:
        threads = usable_cores()
    sizes: dict[int, int] = {}
    per_example: set[int] = set()  # tensors that grow with the batch
    for op in ops:
        for t in op.outputs:
            sizes[t.index] = t.bytes_at(batch)
            if t.per_example > 0:
                per_example.add(t.index)
        if op.type in _NOT_RUN or op.folded:  # folded: a constant before the step runs
            continue
        nbytes = sum(sizes[t.index] for t in op.outputs) + sum(sizes.get(i, 0) for i in op.inputs)
        flops = op.flops_fixed + op.flops_per_example * batch
        itemsize = _itemsize(op)
        made = sizes[op.outputs[0].index] / itemsize if op.outputs else 0.0  # output elements
        rate = _rate(op, calibration, per_example, flops / max(2 * made, 1), flops / max(nbytes, 1))
        compute, memory = flops / rate, nbytes / calibration.bandwidth_bytes_per_s
        if op.type in MAX_POOLING_OPS:  # per element of the pooled tensor, not per FLOP
            largest = max(
                [sizes[t.index] for t in op.outputs] + [sizes.get(i, 0) for i in op.inputs]
            )
            compute = largest / itemsize * calibration.max_pool_element_s / 2
        elif op.type in RANDOM_OPS and calibration.random_element_s > 0:
            compute = made * calibration.random_element_s
        costs = dict.fromkeys(_TERMS, 0.0)
        if op.type in CONV_CALL_OPS:
            costs[CONV_CALLS] = calibration.conv_call_s
        if op.type in INPUT_GRADIENT_OPS and calibration.filter_pass_s > 0:
            passes = _passes_per_image(op, batch, threads)
            costs[KERNEL_PASSES] = passes * _pass_cost(op, calibration)
        copies = 0.0
        if calibration.transpose_bytes_per_s > 0:
            if op.type in TRANSPOSE_OPS:
                memory = nbytes / calibration.transpose_bytes_per_s
            elif op.type == "Einsum":  # its operands copied into its own layout, read back
                copies = 2 * op.scratch_at(batch) / calibration.transpose_bytes_per_s
        split = nbytes >= PARALLEL_BYTES or compute > calibration.parallel_op_s
        costs["per-op overhead"] = calibration.parallel_op_s if split else calibration.op_floor_s
        costs["compute" if compute > memory else "bandwidth"] += max(compute, memory)
        costs["bandwidth"] += copies
        yield op, costs


MAX_POOLING_OPS = frozenset({"MaxPool", "MaxPoolV2", "MaxPoolGrad", "MaxPoolGradV2"})
"""Operations timed per element of the tensor they pool, not by their bytes
(:attr:`CpuCalibration.max_pool_element_s`, half each for the forward and the gradient): on
this 2-core EPYC a 2x2 max pooling's forward and gradient took 8-16 ns per input element at
load 9-11, 10-20 times what their bytes (about 15 per element) take at the bandwidth measured
alongside."""
RANDOM_OPS = frozenset(
    {
        "RandomUniform",
        "RandomStandardNormal",
        "TruncatedNormal",
        "StatelessRandomUniform",
        "StatelessRandomUniformV2",
        "StatelessRandomNormal",
        "StatelessRandomNormalV2",
        "StatelessTruncatedNormal",
        "StatelessTruncatedNormalV2",
        "StatelessRandomUniformFullIntV2",
        "StatelessRandomUniformIntV2",
    }
)
"""Random-number operations, timed per element they make
(:attr:`CpuCalibration.random_element_s`, measured on uniform floats; normal and truncated
normal numbers are taken at the same cost, an assumption). A dropout makes one per element of
the tensor it drops from: on this 2-core EPYC about 3-6 ns each, 10-50 times what the bytes
take."""
BATCHED_MATMUL_OPS = frozenset({"BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum"})
"""Operations timed at :attr:`CpuCalibration.batched_matmul_flops_per_s`."""
TRANSPOSE_OPS = frozenset({"Transpose", "ConjugateTranspose"})
"""Operations that move their bytes at :attr:`CpuCalibration.transpose_bytes_per_s`."""
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def _itemsize(op: OpInfo) -> int:
    """Bytes per element of ``op``'s first output (4 where it has none or its type is not a
    float)."""
    return _ITEMSIZE.get(op.outputs[0].dtype, 4) if op.outputs else 4


def _in_log_between(at: float, low: tuple[float, float], high: tuple[float, float]) -> float:
    """The rate at ``at`` between two measured points (``(where, rate)`` each), interpolated in
    log ``where`` and log rate; the nearer point's rate outside them."""
    if at <= low[0] or high[0] <= low[0]:
        return low[1]
    if at >= high[0]:
        return high[1]
    share = math.log(at / low[0]) / math.log(high[0] / low[0])
    return low[1] * (high[1] / low[1]) ** share


def _conv_rate(products: float, calibration: CpuCalibration) -> float:
    """The FLOP rate of a convolution that sums ``products`` products per output (the
    kernel's window x its input channels; a kernel gradient's: the batch x the positions):
    the convolution rate from :data:`CONV_PRODUCTS` up, the narrow convolution's at
    :data:`NARROW_CONV_PRODUCTS` and below, interpolated in log ``products`` between."""
    wide, narrow = calibration.conv_flops_per_s, calibration.narrow_conv_flops_per_s
    if narrow <= 0:
        return wide
    return _in_log_between(products, (NARROW_CONV_PRODUCTS, narrow), (CONV_PRODUCTS, wide))


CONV_PRODUCTS, NARROW_CONV_PRODUCTS = 3 * 3 * 32, 3 * 3 * 3
"""Products per output of the calibration's convolution (3x3 over 32 channels) and narrow
convolution (3x3 over 3). Measured forward on this 2-core EPYC, one interleaved run at load
2.5 (3x3 -> 64 channels, 16 x 32 x 32): 27 products per output ran at 31 GFLOP/s, 72 at 84,
144 at 117, 288 at 139 and 576 at 141."""


def _batched_rate(intensity: float, calibration: CpuCalibration) -> float:
    """The FLOP rate of a batched matmul of many matrices (attention's scores and context,
    their gradients) that does ``intensity`` FLOPs per byte it reads and writes: the batched
    rate at the calibration's attention-shaped matrices' :data:`BATCHED_INTENSITY` and below,
    the matmul rate at the calibration's Dense matmuls' :data:`MATMUL_INTENSITY` and above,
    interpolated in log intensity between (a roofline: small matrices are bound by moving
    their operands, larger ones by their arithmetic)."""
    return _in_log_between(
        intensity,
        (BATCHED_INTENSITY, calibration.batched_matmul_flops_per_s),
        (MATMUL_INTENSITY, calibration.matmul_flops_per_s),
    )


BATCHED_INTENSITY, MATMUL_INTENSITY = 16 / 3, 256 / 6
"""FLOPs per byte read and written of the calibration's batched matmuls (per matrix, [64, 16] x
[16, 64]; their gradients alike: 16/3), and of batched matmuls of 256 x 256 matrices (256/6),
which ran at the Dense layer's matmul rate (0.96x and 0.89x it) on a quiet 2-core AVX-512
EPYC (forward and both gradients, interleaved, two runs, ``benchmarks/results/
batched_shapes.py``). There, this interpolation gave 0.84-1.13x the measured rate for products
of 64 x 64 up to 500 x 500 matrices (the one batched rate: 0.32-0.61x), and attention's over
128 tokens with heads of 16 0.88-1.38x; a ViT's over 26 patches with heads of 64 ran at
0.65-0.73x the calibration's rate (its matrices smaller), so its modelled rate was 1.37-1.56x
it."""


def _rate(
    op: OpInfo,
    calibration: CpuCalibration,
    per_example: set[int],
    products: float,
    intensity: float,
) -> float:
    """The FLOP rate of ``op``: a depthwise convolution's (its forward or a gradient) where
    measured; a one-row convolution's (a ``Conv1D``'s, :func:`_one_row`) where measured; a
    convolution's for the ``products`` it sums per output (:func:`_conv_rate`); a
    batched matmul's for a product of many matrices (a ``BatchMatMul`` or ``Einsum`` whose
    operands both grow with the batch, ``per_example``: attention's scores and context) at its
    ``intensity``, FLOPs per byte (:func:`_batched_rate`); else a matmul's (a batched matmul by
    weights, which TensorFlow runs as one matmul)."""
    if op.type.startswith("Depthwise") and calibration.depthwise_flops_per_s > 0:
        return calibration.depthwise_flops_per_s
    if (
        op.type in BATCHED_MATMUL_OPS
        and calibration.batched_matmul_flops_per_s > 0
        and len(op.inputs) >= 2
        and all(i in per_example for i in op.inputs[:2])
    ):
        return _batched_rate(intensity, calibration)
    if "Conv" in op.type:
        if op.type.startswith("Depthwise"):  # not measured: a convolution's
            return calibration.conv_flops_per_s
        if _one_row(op) and calibration.row_conv_flops_per_s > 0:
            return calibration.row_conv_flops_per_s
        return _conv_rate(products, calibration)
    return calibration.matmul_flops_per_s


KERNEL_PASSES = "kernel passes"
"""The term of :func:`_op_terms` that holds the kernel reads of input gradients run one matmul
per image (:attr:`CpuCalibration.filter_pass_s`). :func:`as_stepped` leaves it without
:attr:`CpuCalibration.scale` and :func:`cpu_step_time` adds it to the compute term (an
assumption): it is measured on the operation as a
step runs it, alone on all the cores, where the scale stands for what a step of small
operations adds to each (on a ResNet50 at a 64 x 64 input, scaled, the step was predicted 56%
long; unscaled, 17% short, ``benchmarks/results/time_unseen_quiet3.txt``)."""
CONV_CALLS = "convolution calls"
"""The term of :func:`_op_terms` that holds the convolution kernels' fixed costs
(:attr:`CpuCalibration.conv_call_s`): not multiplied by :attr:`CpuCalibration.scale`, and
added to the per-op overhead by :func:`cpu_step_time`."""
CONV_CALL_OPS = frozenset(
    {
        "Conv2D",
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "DepthwiseConv2dNative",
        "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter",
        "Conv3D",
        "Conv3DBackpropInputV2",
        "Conv3DBackpropFilterV2",
    }
)
"""Operations that pay :attr:`CpuCalibration.conv_call_s` each (a Keras ``Conv1D``,
``Conv2D``, ``Conv2DTranspose``, ``DepthwiseConv2D``, ``SeparableConv2D`` or ``Conv3D``, their
gradients)."""
_TERMS = ("compute", "bandwidth", "per-op overhead", KERNEL_PASSES, CONV_CALLS)
"""The terms :func:`op_costs` gives each operation's seconds by."""
FOLDED_TERMS = {KERNEL_PASSES: "compute", CONV_CALLS: "per-op overhead"}
"""The terms measured as a step runs them, which neither :attr:`CpuCalibration.scale` nor
:attr:`CpuCalibration.loop_scale` multiplies (:func:`as_stepped`), and the term of a
:class:`StepTime` each is counted in (:func:`cpu_step_time`)."""
INPUT_GRADIENT_OPS = frozenset({"Conv2DBackpropInput"})
"""Operations whose CPU kernel may read the whole convolution kernel once per image
(:func:`_passes_per_image`): TensorFlow's ``Conv2DCustomBackpropInputOp``, the one it registers
for ``Conv2DBackpropInput`` on the CPU (a Keras ``Conv2D``'s input gradient, a
``Conv2DTranspose``'s forward)."""
PARALLEL_CONTRACTION_BYTES = 256 * 2**10
"""The per-thread working set from which TensorFlow's CPU ``Conv2DBackpropInput`` runs each
image's product as one matmul split across the intra-op threads instead of giving whole images
to each thread (its ``l2_cache_size``, in elements of the tensor's type)."""


ALIGNED_ROW_BYTES, UNALIGNED_ROW_BYTES = 2048, 256
"""A kernel whose rows (output channels x the element's bytes) are a multiple of the first is
read per image at :attr:`CpuCalibration.filter_pass_s`; one whose rows' largest power-of-two
divisor is the second or less, at :attr:`CpuCalibration.filter_pass_unaligned_s`: reading a
column of the kernel steps by a row, and rows of a large power of two land in few of the
cache's sets, which evict one another."""


def _pass_cost(op: OpInfo, calibration: CpuCalibration) -> float:
    """Seconds per kernel element and image of ``op``'s kernel reads: the aligned figure for
    rows a multiple of :data:`ALIGNED_ROW_BYTES`, the unaligned one for rows whose largest
    power-of-two divisor is :data:`UNALIGNED_ROW_BYTES` or less, geometric between (the
    aligned figure alone where the unaligned one was not measured)."""
    aligned, unaligned = calibration.filter_pass_s, calibration.filter_pass_unaligned_s
    if unaligned <= 0 or aligned <= 0 or not op.kernel:
        return aligned
    row = op.kernel[-1] * _itemsize(op)
    divisor = row & -row  # the largest power of two dividing it
    share = math.log2(
        min(max(divisor, UNALIGNED_ROW_BYTES), ALIGNED_ROW_BYTES) / UNALIGNED_ROW_BYTES
    )
    share /= math.log2(ALIGNED_ROW_BYTES / UNALIGNED_ROW_BYTES)
    return unaligned * (aligned / unaligned) ** share


def _passes_per_image(op: OpInfo, batch: int, threads: int) -> float:
    """Kernel elements read once per image by ``op`` at ``batch``: batch x its kernel's elements
    where TensorFlow's CPU kernel for a convolution's input gradient takes the path of one
    matmul per image split across the cores, else 0 (another operation; a kernel shape not
    traced; whole images per thread, each matmul small enough to stay in a core's cache).

    That kernel's rule (``conv_grad_input_ops.h``): per image, the products' three matrices
    (the output gradient ``positions x out channels``, the kernel ``window x in channels x out
    channels`` and the columns ``positions x window x in channels``) make its work unit; where
    the unit over the intra-op ``threads`` reaches :data:`PARALLEL_CONTRACTION_BYTES`, or the
    batch is 1, every image's product is its own parallel contraction, which lays the whole
    kernel out again. The positions are the FLOPs' (``2 x batch x positions x kernel``)."""
    if op.type not in INPUT_GRADIENT_OPS or len(op.kernel) != 4:
        return 0.0
    *window, inputs, outputs = op.kernel
    kernel = math.prod(window) * inputs * outputs
    flops = op.flops_fixed + op.flops_per_example * batch
    if kernel <= 0 or flops <= 0:
        return 0.0
    positions = flops / (2 * batch * kernel)
    unit = positions * outputs + kernel + positions * math.prod(window) * inputs
    parallel = batch == 1 or unit / max(threads, 1) >= PARALLEL_CONTRACTION_BYTES / _itemsize(op)
    return float(batch * kernel) if parallel else 0.0


def _one_row(op: OpInfo) -> bool:
    """Whether ``op`` is a convolution whose window is one row of more than one column (a
    ``Conv1D``'s, run as a 2-D convolution one row high; a 1x1 convolution is not)."""
    return len(op.window) == 2 and op.window[0] == 1 and op.window[1] > 1


def _loop_terms(
    loop: LoopBody, batch: int, calibration: CpuCalibration, threads: int | None = None
) -> dict[str, float] | str:
    """The modelled seconds of a While loop's iterations, before the scale: ``iterations`` x
    (its body's and condition's operations, each with the same terms as the step's, and its
    nested loops); or why they are not known (its or a nested loop's iterations unknown)."""
    if loop.iterations is None:
        return loop.why or f"the While loop {loop.name} runs an unknown number of iterations"
    terms = _op_terms(list(loop.ops), batch, calibration, threads)
    for inner in loop.loops:
        inner_terms = _loop_terms(inner, batch, calibration, threads)
        if isinstance(inner_terms, str):
            return inner_terms
        for term, seconds in inner_terms.items():
            terms[term] += seconds
    return {term: loop.iterations * seconds for term, seconds in terms.items()}


def unpredicted(why: str) -> StepTime:
    """A step time not predicted, and ``why``."""
    return StepTime(None, None, None, None, why=why)


def onednn_setting() -> str:
    """``TF_ENABLE_ONEDNN_OPTS`` of this process (``default`` when unset)."""
    value = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip()
    return value or "default"


# -- calibration on this machine ---------------------------------------------------------------

ROUNDS = 7
PARALLEL_BYTES = 256 * 2**10
"""An operation that moves at least this many bytes is split across the cores by TensorFlow's
thread pool, and pays the parallel per-op latency (an assumption: Eigen splits element-wise
work of tens of thousands of elements and more; measured per-op costs jump there)."""


def calibrate_cpu(rounds: int = ROUNDS) -> CpuCalibration:
    """Measure this CPU's per-step overhead, per-op latencies, matmul, convolution and depthwise
    convolution FLOP rates, bandwidth, and the scales of a reference step and of a loop's body,
    in float32 (imports TensorFlow; 17-18 s on a quiet 2-core AVX-512 EPYC).

    Every workload below runs in one interleaved measurement (each round runs each once, in a
    rotating order; the medians of ``rounds`` rounds after two warm-up ones), so that all the
    figures see the same stretches of a shared machine's speed. Every figure is a difference of
    two medians, so the fixed costs of the call cancel: the floor and the step overhead from two
    tiny Keras models trained with ``train_on_batch``, :data:`CALL_BURST` calls in a row (a
    Dense(4) alone, and behind :data:`FLOOR_DEPTH` Dense(8) layers: the floor is the
    difference of their step times over the difference of their traced operations, the
    overhead what the smaller one's step takes beyond its operations and its loss tracker's
    resets); a metric variable's reset from the ``reset_metrics()`` of the Dense(4) alone and
    with two metrics' resets (4 variables more), as many in a row; a ``fit`` step's overhead
    from the Dense(4)'s ``fit`` steps on one batch (:data:`FIT_STEPS`); the parallel latency
    and the bandwidth from chains of 50 element-wise operations on 64 Ki and 4 Mi floats;
    the rates from a Dense layer's three training matmuls at batch 64 and 1024 (512 x
    512), attention-shaped batched matmuls' ([64, 16] x [16, 64] per matrix) at 64 and 512
    matrices, a 3x3 convolution's forward and both gradients at batch 4 and 32 (over 32
    channels; over 3, its forward and kernel gradient), a Conv1D's (kernel 7, one row high) at
    batch 4 and 32, and a 3x3 depthwise convolution's at
    batch 4 and 32; the time of a 2x2 max pooling's forward and gradient per element from 4 and
    32 images; that of a random-number operation per element from 16 Ki and 1 Mi uniform floats;
    the bytes a transpose moves per second from chains of 10 transposes of 64 Ki and 1 Mi
    floats; a convolution's call from a stack of :data:`FLOOR_DEPTH` 1x1 ``Conv2D(8)`` layers
    trained like the larger tiny model, less it (:data:`CONV_CALLS_TIMED`). Two reference
    training steps (:data:`REFERENCE_STEPS`: a small CNN, two convolutions, two Dense(512)
    layers with dropout and a softmax, batch 64; three Dense(1024) layers, batch 256), each
    measured and modelled with those figures, less its convolutions' calls, give a scale each:
    :attr:`CpuCalibration.scale` is their middle; an LSTM (:data:`LOOP_UNITS` units, batch
    :data:`LOOP_BATCH`) trained over 8 and 40 time steps gives
    :attr:`CpuCalibration.loop_scale`.
    """
    import keras
    import numpy as np
    import tensorflow as tf

    from tfaccel.planning.trace import trace_step

    started = time.perf_counter()

    def tiny(depth: int) -> Any:
        stack = [keras.Input((8,))]
        stack += [keras.layers.Dense(8, activation="relu") for _ in range(depth)]
        model = keras.Sequential([*stack, keras.layers.Dense(4)])
        model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
        return model

    x, y = np.ones((8, 8), np.float32), np.ones((8, 4), np.float32)
    small, large = tiny(0), tiny(FLOOR_DEPTH)
    convs = keras.Sequential(  # as many layers as ``large``, each a 1x1 convolution
        [keras.Input((4, 4, 8))]
        + [keras.layers.Conv2D(8, 1, activation="relu") for _ in range(FLOOR_DEPTH)]
        + [keras.layers.Flatten(), keras.layers.Dense(4)]
    )
    convs.compile(optimizer=keras.optimizers.Adam(), loss="mse")
    images_x = np.ones((8, 4, 4, 8), np.float32)
    metrics = [keras.metrics.MeanAbsoluteError(), keras.metrics.MeanSquaredError()]

    def burst(call: Callable[[], Any]) -> Callable[[], Any]:
        """``call`` :data:`CALL_BURST` times in a row, as a script's loop calls it."""
        return lambda: [call() for _ in range(CALL_BURST)]

    def more_resets() -> None:  # what reset_metrics() does for a model with these two metrics
        small.reset_metrics()
        for metric in metrics:
            metric.reset_state()

    fit_steps: list[float] = []  # each fit step, from one batch's start to the next's

    def fit_run() -> None:
        fit_steps.extend(fit_step_times(small, (x, y), FIT_STEPS))

    chain_ops = 50

    def chain(elements: int) -> Callable[[], Any]:
        start = tf.Variable(tf.ones([elements]))  # variables: nothing constant-folds

        @tf.function
        def run() -> Any:
            value = start.read_value()
            for index in range(chain_ops):
                value = tf.nn.relu(value) if index % 2 else value - 0.5
            return value[0]

        return lambda: run().numpy()

    def gradients(
        shape: list[int], weights: list[int], forward: Callable[[Any, Any], Any]
    ) -> Callable[[], Any]:
        """The forward and both gradients of ``forward(inputs, weights)``."""
        a = tf.Variable(tf.random.normal(shape))
        w = tf.Variable(tf.random.normal(weights))

        @tf.function
        def run() -> Any:
            with tf.GradientTape() as tape:
                out = tf.reduce_sum(forward(a, w))
            da, dw = tape.gradient(out, [a, w])
            return tf.reduce_sum(da[:1]) + tf.reduce_sum(dw[:1])

        return lambda: run().numpy()

    def dense(batch: int) -> Callable[[], Any]:
        return gradients([batch, 512], [512, 512], tf.matmul)

    def narrow(batch: int) -> Callable[[], Any]:
        images = tf.Variable(tf.random.normal([batch, 32, 32, 3]))
        kernel = tf.Variable(tf.random.normal([3, 3, 3, 16]))

        @tf.function
        def run() -> Any:  # an image model's first layer: no gradient of its input
            with tf.GradientTape() as tape:
                out = tf.reduce_sum(tf.nn.conv2d(images, kernel, 1, "SAME"))
            return tf.reduce_sum(tape.gradient(out, kernel)[:1])

        return lambda: run().numpy()

    def batched(matrices: int) -> Callable[[], Any]:
        return gradients([matrices, 64, 16], [matrices, 16, 64], tf.matmul)

    def row_conv(batch: int) -> Callable[[], Any]:  # a Conv1D's: one row high
        return gradients([batch, 128, 64], [7, 64, 64], lambda a, w: tf.nn.conv1d(a, w, 1, "SAME"))

    def conv(batch: int) -> Callable[[], Any]:
        return gradients(
            [batch, 32, 32, 32], [3, 3, 32, 64], lambda a, w: tf.nn.conv2d(a, w, 1, "SAME")
        )

    def depthwise(batch: int) -> Callable[[], Any]:
        return gradients(
            [batch, 32, 32, 64],
            [3, 3, 64, 1],
            lambda a, w: tf.nn.depthwise_conv2d(a, w, [1, 1, 1, 1], "SAME"),
        )

    # batch 4 takes the path of a matmul per image too: 36 threads per 512 output channels
    widen = max(1, math.ceil(usable_cores() / 36))
    side = PASS_POSITIONS

    def input_gradient(batch: int, outputs: int = PASS_CHANNELS) -> Callable[[], Any]:
        pass_outputs = outputs * widen  # a 3x3 convolution over 3 x 3 positions
        kernel = tf.Variable(tf.random.normal([3, 3, PASS_CHANNELS, pass_outputs]))
        grads = tf.Variable(tf.random.normal([batch, side, side, pass_outputs]))

        @tf.function
        def run() -> Any:
            made = tf.nn.conv2d_transpose(
                grads, kernel, [batch, side, side, PASS_CHANNELS], 1, padding="SAME"
            )
            return tf.reduce_sum(made[:1])

        return lambda: run().numpy()

    def max_pool(batch: int) -> Callable[[], Any]:
        images = tf.Variable(tf.random.normal([batch, 32, 32, 16]))

        @tf.function
        def run() -> Any:
            with tf.GradientTape() as tape:
                tape.watch(images)
                out = tf.reduce_sum(tf.nn.max_pool2d(images, 2, 2, "VALID"))
            return tf.reduce_sum(tape.gradient(out, images)[:1])

        return lambda: run().numpy()

    def random(elements: int) -> Callable[[], Any]:
        seed = tf.Variable([1, 2], dtype=tf.int64)  # a variable: nothing constant-folds

        @tf.function
        def run() -> Any:
            return tf.random.stateless_uniform([elements], seed)[0]

        return lambda: run().numpy()

    def transposes(elements: int) -> Callable[[], Any]:
        start = tf.Variable(tf.ones([16, elements // 2048, 8, 16]))

        @tf.function
        def run() -> Any:
            value = start.read_value()
            for _ in range(TRANSPOSE_CHAIN):  # [b, l, h, d] -> [b, h, l, d], as attention's
                # read back as [b, l, h, d]: a reshape, free, that keeps the optimizer from
                # folding two transposes into none
                value = tf.reshape(tf.transpose(value, [0, 2, 1, 3]), [16, -1, 8, 16])
            return value[0, 0, 0, 0]

        return lambda: run().numpy()

    def recurrent(steps: int) -> tuple[Any, Callable[[], Any]]:
        model = keras.Sequential(
            [
                keras.Input((steps, LOOP_FEATURES)),
                keras.layers.LSTM(LOOP_UNITS),
                keras.layers.Dense(4),
            ]
        )
        model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
        data = (
            np.ones((LOOP_BATCH, steps, LOOP_FEATURES), np.float32),
            np.ones((LOOP_BATCH, 4), np.float32),
        )
        return model, lambda: model.train_on_batch(*data)

    references = {
        name: (make(), batch, np.ones((batch, *shape), np.float32), np.zeros((batch,), np.int32))
        for name, (make, shape, batch) in REFERENCE_STEPS.items()
    }
    short_rnn, short_step = recurrent(LOOP_STEPS[0])
    long_rnn, long_step = recurrent(LOOP_STEPS[1])
    sizes = (2**16, 2**22)
    pairs = {
        "per-op floor": (
            burst(lambda: small.train_on_batch(x, y)),
            burst(lambda: large.train_on_batch(x, y)),
        ),
        "metric resets": (burst(small.reset_metrics), burst(more_resets)),
        "bandwidth": (chain(sizes[0]), chain(sizes[1])),
        "matmul": (dense(64), dense(1024)),
        "batched matmul": (batched(BATCHED_SIZES[0]), batched(BATCHED_SIZES[1])),
        "convolution": (conv(4), conv(32)),
        "narrow convolution": (narrow(4), narrow(32)),
        "one-row convolution": (row_conv(4), row_conv(32)),
        "depthwise convolution": (depthwise(4), depthwise(32)),
        "max pooling": (max_pool(4), max_pool(32)),
        "input gradient passes": (input_gradient(1), input_gradient(4)),
        "unaligned input gradient passes": (
            input_gradient(1, UNALIGNED_CHANNELS),
            input_gradient(4, UNALIGNED_CHANNELS),
        ),
        "random numbers": (random(RANDOM_SIZES[0]), random(RANDOM_SIZES[1])),
        "transposes": (transposes(TRANSPOSE_SIZES[0]), transposes(TRANSPOSE_SIZES[1])),
        "loop": (short_step, long_step),
    }
    calls = {
        f"{name} {end}": call
        for name, (a, b) in pairs.items()
        for end, call in (("a", a), ("b", b))
    }
    for name, (model, _, images, labels) in references.items():
        calls[f"reference: {name}"] = partial(model.train_on_batch, images, labels)
    calls["convolution stack"] = burst(lambda: convs.train_on_batch(images_x, y))
    calls["fit steps"] = fit_run
    timed: dict[str, Callable[[], float | None]] = {  # fit times each of its steps itself
        name: _untimed(call) if name == "fit steps" else _after_itself(call)
        for name, call in calls.items()
    }
    summaries = {
        name: summarize(samples)
        for name, samples in measure_interleaved(timed, repeats=rounds, warmup=2).items()
    }
    differences: dict[str, tuple[float, float]] = {}
    medians: dict[str, tuple[float, float]] = {}
    ends = {name: (f"{name} a", f"{name} b") for name in pairs}
    # the convolution stack against the Dense stack of as many layers, timed once for both
    ends["convolution calls"] = ("per-op floor b", "convolution stack")
    for name, (smaller, larger) in ends.items():
        a, b = summaries[smaller], summaries[larger]
        medians[name] = (a.median, b.median)
        differences[name] = (b.median - a.median, max(a.q3 - a.q1, b.q3 - b.q1))

    for name in ("per-op floor", "metric resets", "convolution calls"):  # a burst's, per call
        medians[name] = (medians[name][0] / CALL_BURST, medians[name][1] / CALL_BURST)
        difference, noise = differences[name]
        differences[name] = (difference / CALL_BURST, noise / CALL_BURST)
    t_small, t_large = medians["per-op floor"]
    ops_small = trace_step(small, 8).launches
    ops_large = trace_step(large, 8).launches
    floor = max((t_large - t_small) / max(ops_large - ops_small, 1), 1e-7)
    reset_variables = sum(len(metric.variables) for metric in metrics)
    metric_reset = max(differences["metric resets"][0] / max(reset_variables, 1), 0.0)
    fixed = t_small - ops_small * floor - len(small.metrics_variables) * metric_reset
    overhead = max(fixed, 0.0)
    differences["per-step overhead"] = (fixed, differences["per-op floor"][1])
    stepped = summarize(fit_steps[-rounds * FIT_STEPS :])  # the warm-up rounds' left out
    fit_fixed = stepped.median - ops_small * floor
    differences["per fit step overhead"] = (fit_fixed, stepped.q3 - stepped.q1)
    t_few, t_many = medians["bandwidth"]
    moved = [8 * n for n in sizes]  # each operation reads and writes n floats
    bandwidth = (moved[1] - moved[0]) / max((t_many - t_few) / chain_ops, 1e-9)
    parallel = max(t_few / chain_ops - moved[0] / bandwidth, floor)
    matmul_rate = 3 * 2 * (1024 - 64) * 512 * 512 / max(differences["matmul"][0], 1e-9)
    matrices = BATCHED_SIZES[1] - BATCHED_SIZES[0]
    batched_rate = 3 * 2 * matrices * 64 * 64 * 16 / max(differences["batched matmul"][0], 1e-9)
    conv_rate = 3 * 2 * (32 - 4) * 32 * 32 * 64 * 9 * 32 / max(differences["convolution"][0], 1e-9)
    narrow_rate = (
        2 * 2 * (32 - 4) * 32 * 32 * 16 * 27 / max(differences["narrow convolution"][0], 1e-9)
    )
    row_rate = (
        3 * 2 * (32 - 4) * 128 * 64 * 7 * 64 / max(differences["one-row convolution"][0], 1e-9)
    )
    # each output of a depthwise convolution multiplies its own channel's 3x3 window
    depthwise_rate = (
        3 * 2 * (32 - 4) * 32 * 32 * 64 * 9 / max(differences["depthwise convolution"][0], 1e-9)
    )
    pooled = (32 - 4) * 32 * 32 * 16
    filter_passes = []
    for name, outputs in (
        ("input gradient passes", PASS_CHANNELS),
        ("unaligned input gradient passes", UNALIGNED_CHANNELS),
    ):
        kernel_elements = 9 * PASS_CHANNELS * outputs * widen
        # its products (wide: 9 x 512 per output) at the convolution rate
        pass_products = 2 * (4 - 1) * side * side * kernel_elements / conv_rate
        filter_passes.append(
            max((differences[name][0] - pass_products) / ((4 - 1) * kernel_elements), 0.0)
        )
    calibration = CpuCalibration(
        step_overhead_s=overhead,
        op_floor_s=floor,
        parallel_op_s=parallel,
        matmul_flops_per_s=matmul_rate,
        conv_flops_per_s=conv_rate,
        bandwidth_bytes_per_s=bandwidth,
        depthwise_flops_per_s=depthwise_rate,
        batched_matmul_flops_per_s=batched_rate,
        narrow_conv_flops_per_s=narrow_rate,
        row_conv_flops_per_s=row_rate,
        metric_reset_s=metric_reset,
        fit_overhead_s=max(fit_fixed, 0.0),
        filter_pass_s=filter_passes[0],
        filter_pass_unaligned_s=filter_passes[1],
        conv_call_s=max(differences["convolution calls"][0], 0.0) / CONV_CALLS_TIMED,
        max_pool_element_s=max(differences["max pooling"][0], 0.0) / pooled,
        random_element_s=max(differences["random numbers"][0], 0.0)
        / (RANDOM_SIZES[1] - RANDOM_SIZES[0]),
        transpose_bytes_per_s=8
        * (TRANSPOSE_SIZES[1] - TRANSPOSE_SIZES[0])
        / max(differences["transposes"][0] / TRANSPOSE_CHAIN, 1e-9),
        onednn=onednn_setting(),
        differences=differences,
    )
    calibration = without_lost_figures(calibration)  # before the scales, which use them
    calibration = calibration.with_reference_scales(
        {
            name: reference_scale(
                trace_step(model, batch),
                calibration,
                summaries[f"reference: {name}"].median - overhead,
                batch,
            )
            for name, (model, batch, _, _) in references.items()
        }
    )
    short, long = trace_step(short_rnn, LOOP_BATCH), trace_step(long_rnn, LOOP_BATCH)
    outside = [  # the operations outside the loops, as a step pays them
        sum(as_stepped(_op_terms(rnn.ops, LOOP_BATCH, calibration), calibration).values())
        for rnn in (short, long)
    ]
    inside = _loops_seconds(long, calibration) - _loops_seconds(short, calibration)
    measured_inside = differences["loop"][0] - (outside[1] - outside[0])
    calibration.loop_scale = max(measured_inside, 1e-9) / max(inside, 1e-12)
    calibration.cost_s = time.perf_counter() - started
    calibration.load = tuple(round(v, 2) for v in os.getloadavg())
    return calibration


REFERENCE_BATCH = 64
FLOOR_DEPTH = 16
"""Dense(8) layers of the calibration's larger tiny model (the per-op floor: its step less the
smaller one's, over their difference in operations, 816). With 8 (408 more operations) a
quiet machine's difference, 0.03 ms, was under its noise (IQR 0.14 ms) and the floor fell to
its lower bound; at load 3.5, 80 interleaved rounds gave 1.52-1.63 us per operation from 4,
8, 16 and 32 layers alike. 32 layers took 11 s to build, trace and compile, 16 take 5."""
CONV_CALLS_TIMED = 3 * FLOOR_DEPTH - 1
"""The convolution calls of a step of the calibration's stack of :data:`FLOOR_DEPTH` 1x1
``Conv2D(8, activation="relu")`` layers over 4 x 4 x 8 (:attr:`CpuCalibration.conv_call_s`):
each layer's forward and kernel gradient, each but the first's input gradient. Its other
operations are taken as those of the tiny model of as many ``Dense(8)`` layers it is compared
with: their modelled difference, 16 small operations more (a flattening, reshapes), is under
0.3 us a call. Timed as bare convolutions over the same shapes (no bias, no activation, no
optimizer) in one function, a call cost 37-44 us more than a matmul's, where the Keras layers'
cost 61-103 us: a layer's convolution with its bias and activation runs as one fused kernel, as
in a model."""
CALL_BURST = 8
"""Calls in a row the calibration times for the tiny models' ``train_on_batch`` and the metric
resets (their medians per call): a script's loop makes its calls one after another. Timed one
at a time, each after the calibration's larger workloads, a tiny model's call took 2.9 ms
where eight in a row took 2.1 each (this 2-core EPYC, load 1.2)."""
FIT_STEPS = 10
"""The ``fit`` steps the calibration times per round on the tiny model (one repeated batch),
each from one batch's start to the next's: their median, less the model's operations, is a
``fit`` step's overhead (:attr:`CpuCalibration.fit_overhead_s`); the call's own start (its
iterator, its callbacks) is not in them."""
BATCHED_SIZES = (64, 512)
"""The matrices of the calibration's two attention-shaped batched matmuls."""
RANDOM_SIZES = (2**14, 2**20)
"""The element counts of the calibration's two random-number operations."""
TRANSPOSE_SIZES, TRANSPOSE_CHAIN = (2**16, 2**20), 10
"""The element counts of the calibration's two chains of transposes, and their length."""
"""The batch of the calibration's reference step (:func:`reference_model`)."""


def reference_model() -> Any:
    """The calibration's first reference training step (:data:`REFERENCE_STEPS`), compiled: a
    small CNN on 32 x 32 x 3 images (two 3x3 convolutions, a 2x2 max pooling, two Dense(512)
    layers with dropout, a softmax over 10; Adam), trained at :data:`REFERENCE_BATCH`."""
    import keras

    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(), loss="sparse_categorical_crossentropy")
    return model


def large_reference_model() -> Any:
    """A reference training step of large matmuls, compiled: three Dense(1024) layers over
    1024 features and a softmax over 10 (Adam), trained at batch 256: each of their matmuls
    about 2 ms alone."""
    import keras

    model = keras.Sequential(
        [keras.Input((1024,))]
        + [keras.layers.Dense(1024, activation="relu") for _ in range(3)]
        + [keras.layers.Dense(10, activation="softmax")]
    )
    model.compile(optimizer=keras.optimizers.Adam(), loss="sparse_categorical_crossentropy")
    return model


class ReferenceStep(NamedTuple):
    """One of the calibration's reference training steps: the compiled model's maker, its
    input's shape (one example's), its batch; its labels are of 10 classes."""

    make: Callable[[], Any]
    shape: tuple[int, ...]
    batch: int


REFERENCE_STEPS: dict[str, ReferenceStep] = {
    "a small CNN": ReferenceStep(reference_model, (32, 32, 3), REFERENCE_BATCH),
    "large matmuls": ReferenceStep(large_reference_model, (1024,), 256),
}
"""The calibration's reference training steps (:class:`ReferenceStep`, by name): each one's
measured time over its modelled time is a scale, and :attr:`CpuCalibration.scale` is their
middle (:meth:`CpuCalibration.with_reference_scales`). How much a step adds to its operations
measured alone moves with the architecture, and these two lie apart: on a 2-core AMD EPYC with
AVX-512, the large matmuls' scale was 0.66-0.83 times the small CNN's (whose 5408 x 512 Dense
layer's matmuls are skinny at batch 64) in eight calibrations, where the scales 15
architectures needed were 0.64-1.15 times it (a Transformer encoder block of large matmuls the
lowest, a small MLP the highest). With their middle, in two runs each (each row also predicted
with the small CNN's scale alone, in the same run), ``time_check.py`` put 10 of the 11
architectures the model was worked from within 30% both times (median 9.9% and 17.1%; 18.1%
and 10.8% with the small CNN's), the 4 set aside 4 of 4 (7.3% and 16.4%; 6.8% and 8.1%), and
``time_unseen.py`` 15 and 14 of 19 scripts never seen (median 19% and 16%; 12 and 14 of 19,
22% and 20%). A stack of eight 3x3 convolutions with batch normalization (batch 8) was tried
as a third: its scale moved 1.2-2.9 between calibrations, with its convolutions' calls."""


PASS_CHANNELS, PASS_POSITIONS, UNALIGNED_CHANNELS = 512, 3, 500
"""The calibration's input gradients (:attr:`CpuCalibration.filter_pass_s` and
:attr:`CpuCalibration.filter_pass_unaligned_s`): 3x3 convolutions of 512 -> 512 and 512 -> 500
channels (as many times more output channels as 36 cores go into the cores, so that batch 4
also takes the path of one matmul per image, :func:`_passes_per_image`) over 3 x 3 positions,
as a VGG's or a ResNet's last stages have at a small input. With one figure for every kernel,
measured on a 1x1 2048 -> 512 over one position (2.5 ns quiet), a VGG16 and a MobileNetV2
were predicted 46-47% long; measured on the 3x3 512 -> 512 (1.1-1.3 ns), an InceptionV3 at
75 x 75, whose channels are 192, 320, 384, 448 and 768, 89% long."""
LOOP_STEPS = (8, 40)
"""The time steps of the calibration's two LSTMs (:attr:`CpuCalibration.loop_scale`)."""
LOOP_BATCH, LOOP_UNITS, LOOP_FEATURES = 32, 64, 32
"""The calibration's LSTMs: batch, units, input features."""


def _loops_seconds(step: StepGraph, calibration: CpuCalibration) -> float:
    """The modelled seconds of ``step``'s loops' bodies, before any scale (0 for a loop of
    unknown iterations: the calibration's LSTMs have a fixed length)."""
    seconds = 0.0
    for loop in step.loops:
        terms = _loop_terms(loop, LOOP_BATCH, calibration)
        seconds += 0.0 if isinstance(terms, str) else sum(terms.values())
    return seconds


def fit_step_times(model: Any, data: Any, steps: int) -> list[float]:
    """The seconds of ``steps`` steps of ``model.fit`` on the batch ``data`` (as ``fit`` hands
    a batch to ``train_step``: ``(x, y)``, ``(x, y, sample_weight)``) repeated, each from one
    batch's start to the next's: the loop's own cost (the iterator, the callbacks) is in them,
    the epoch's start is not (imports TensorFlow)."""
    import keras
    import tensorflow as tf

    starts: list[float] = []

    class Starts(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            starts.append(time.perf_counter())

    model.fit(
        tf.data.Dataset.from_tensors(data).repeat(),
        epochs=1,
        steps_per_epoch=steps + 1,
        verbose=0,
        shuffle=False,
        callbacks=[Starts()],
    )
    return [later - earlier for earlier, later in itertools.pairwise(starts)]


def _untimed(call: Callable[[], Any]) -> Callable[[], None]:
    """``call`` returning None, so that it is timed from call to return."""

    def run() -> None:
        call()

    return run


def _after_itself(call: Callable[[], Any]) -> Callable[[], float]:
    """``call`` made twice in a row, returning the seconds of the second: a workload timed as a
    training step runs, right after one like it. Timed right after another workload, one can
    pay for what that left behind: on a 2-core AMD EPYC with AVX-512 (load 1.1), a 3x3
    convolution's forward and kernel gradient over 3 channels at batch 4 took 0.80 ms right
    after a batch-32 convolution over 32 channels, more than at batch 32 (0.67 ms); right
    after itself, 0.49 ms. Every calibration on that CPU was refused for it ("the larger
    workload measured no slower")."""

    def run() -> float:
        call()
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    return run


# -- is a calibration one to keep ----------------------------------------------------------------

BOOST_ALLOWANCE = 2.0
"""How far a measured FLOP rate may exceed the CPU's peak estimate where that estimate uses
the reported (nominal) clock: boost clocks run above it, up to about twice (Intel Xeon: 2.0 GHz
nominal, 3.9-4.0 GHz turbo; AMD EPYC 7763: 2.45 and 3.5 GHz). This project's 2-core AMD EPYC,
reported at 2.45 GHz (a 157 GFLOP/s estimate), measured the calibration's matmul at 246-249
GFLOP/s on a quiet machine (1.58x; 1.45x was refused every time). Where the estimate uses the
maximum clock: 1.05 (timing noise)."""
LOOP_SCALE_RANGE = (1 / 3, 10.0)
"""The calibration LSTM's measured loop time over its modelled time that a kept calibration
may have: 4.3-4.4 on this project's quiet 2-core EPYC (the loop's many small operations each
cost more than the per-op floor of a step's inline operations, 0.1 us there), 1.0-3.3 at load
7-12."""
SCALE_RANGE = (1 / 3, 3.0)
"""The reference step's measured time over its modelled time that a kept calibration may
have: beyond it, the kernels and the reference step were measured under different loads
(0.84-2.56 between calibrations on a shared 2-core machine; 3.34 in one taken at load 4)."""
_UNCHECKED = ("per-op floor", "metric resets")
"""Differences whose figure is bounded below instead (the floor by 0.1 us, a metric
variable's reset by 0); a floor a busy machine made too large shows as a negative per-step
overhead, which is checked."""
CALIBRATION_ATTEMPTS = 3
"""Measurements :func:`calibrate` takes before it refuses to store one."""
_NOISE_CHECKED = (
    "bandwidth",
    "convolution calls",
    "matmul",
    "batched matmul",
    "convolution",
    "narrow convolution",
    "one-row convolution",
    "depthwise convolution",
    "max pooling",
    "input gradient passes",
    "unaligned input gradient passes",
    "random numbers",
    "transposes",
    "loop",
)
"""The differences a figure is the quotient of: each must be larger than its noise (measured
on 2 cores at load 7: the tiny models' difference, 0.6-3.3 ms, under their IQR, 2.2-8.0 ms,
gave floors of 1.6 and 8.2 us, against 1.1-1.3 us at load 1.4). The per-op floor is not
among them: on a quiet machine the tiny models' difference is small beside its noise because
the floor is (0.03 ms under a 0.14 ms IQR, a floor of 0.1 us), and the floor then falls to
its lower bound; a busy machine is told by the other figures."""


SECONDARY_FIGURES = {
    "batched matmul": "batched_matmul_flops_per_s",
    "narrow convolution": "narrow_conv_flops_per_s",
    "one-row convolution": "row_conv_flops_per_s",
    "depthwise convolution": "depthwise_flops_per_s",
    "max pooling": "max_pool_element_s",
    "input gradient passes": "filter_pass_s",
    "unaligned input gradient passes": "filter_pass_unaligned_s",
    "random numbers": "random_element_s",
    "transposes": "transpose_bytes_per_s",
    "convolution calls": "conv_call_s",
}
"""The calibration's differences whose figures a plan can do without (difference name ->
:class:`CpuCalibration` field): each, not measured (0), has its stand-in (a narrow or one-row
convolution at the convolution rate, a batched matmul at the matmul rate, a transpose at the
bandwidth, a convolution's call at the per-op floor, ...; see :class:`CpuCalibration`). On a
2-core AMD EPYC with AVX-512 (load 0.5-1.5) a 3x3 convolution over 3 channels took 0.03-0.07 ms
more at batch 32 than at batch 4, within its noise (0.14-0.22 ms) in every calibration, where
the other figures were clean: every calibration was refused for it, and no plan on that CPU had
a step time."""
MAX_UNMEASURED = 4
"""Secondary figures a calibration may leave not measured (:func:`without_lost_figures`), under
half of the ten; more lost in their noise is a busy machine's calibration, refused
(:func:`calibration_problems`). On that AVX-512 EPYC, quiet (load 0.4-0.6), two calibrations of
three lost two or three: the narrow convolution, the batched matmul and the input gradient's
kernel reads (0.1 ns per element there, where the AVX2 EPYC's were 1.1-1.3)."""


def _lost(difference: float, noise: float) -> bool:
    """Whether a difference of two medians says nothing: not positive, or within its noise."""
    return difference <= 0 or difference <= noise


def without_lost_figures(calibration: CpuCalibration) -> CpuCalibration:
    """``calibration`` with each figure of :data:`SECONDARY_FIGURES` whose difference was lost
    in its noise (not positive, or not larger than the larger interquartile range of its two
    medians) left not measured (0: its stand-in), and those named in
    :attr:`CpuCalibration.unmeasured`; ``calibration`` itself where none was, or where more
    than :data:`MAX_UNMEASURED` were (a busy machine's: :func:`calibration_problems` names
    them). Pure."""
    lost = tuple(
        name
        for name in SECONDARY_FIGURES
        if name in calibration.differences and _lost(*calibration.differences[name])
    )
    if not lost or len(lost) > MAX_UNMEASURED:
        return calibration
    found = replace(calibration, unmeasured=lost)
    for name in lost:
        setattr(found, SECONDARY_FIGURES[name], 0.0)
    return found


class CalibrationError(TfaccelError):
    """This CPU's calibration was not self-consistent (a busy machine): nothing stored."""


def rate_ceiling(peak_flops: float | None, formula: str | None) -> float | None:
    """The highest FLOP rate a calibration may measure on a CPU whose peak estimate is
    ``peak_flops`` FLOP/s (``formula`` says which clock it used), or None (unknown)."""
    if not peak_flops:
        return None
    return peak_flops * (1.05 if formula and "(max)" in formula else BOOST_ALLOWANCE)


WINOGRAD_SAVING = 2.25
"""How far a convolution's counted rate may exceed the CPU's peak: the FLOPs are counted as a
direct convolution's, and oneDNN computes 3x3 convolutions by Winograd's F(2x2, 3x3), which
does 16 multiplications where the direct form does 36 (2.25x fewer). On this project's 2-core
AMD EPYC (AVX2, peak estimate 157 GFLOP/s, 227 with the boost allowance) a quiet machine
measured 230-231 GFLOP/s for the calibration's convolutions."""


def calibration_problems(calibration: CpuCalibration, ceiling: float | None) -> list[str]:
    """Why ``calibration`` is not one to store (empty: it is one); pure.

    - A FLOP rate above ``ceiling`` (:func:`rate_ceiling`; a convolution's above
      :data:`WINOGRAD_SAVING` times it): no core runs above its peak, so the difference of
      two medians it came from was shrunk by a busy machine.
    - A difference of two medians (:attr:`CpuCalibration.differences`) that is not positive
      (the larger workload measured no slower), or, for the per-op floor, a rate or the
      bandwidth, not larger than the noise of its two medians (the larger interquartile
      range): the figure is the load's, not the CPU's.
      A secondary figure left not measured for it (:attr:`CpuCalibration.unmeasured`,
      :func:`without_lost_figures`) is not a problem.
    - A reference step's scale (:attr:`CpuCalibration.reference_scales`, or
      :attr:`CpuCalibration.scale` where they are not known) outside :data:`SCALE_RANGE`, or
      :attr:`CpuCalibration.loop_scale` outside :data:`LOOP_SCALE_RANGE`.
    """
    problems = []
    if ceiling:
        for label, rate, limit, how in (
            ("matmul", calibration.matmul_flops_per_s, ceiling, "boost allowed"),
            (
                "convolution",
                calibration.conv_flops_per_s,
                ceiling * WINOGRAD_SAVING,
                f"boost allowed, x{WINOGRAD_SAVING:g} for Winograd convolutions",
            ),
        ):
            if rate > limit:
                problems.append(
                    f"the {label} rate measured {rate / 1e9:.0f} GFLOP/s, above the "
                    f"{limit / 1e9:.0f} GFLOP/s this CPU can reach (its peak estimate, {how})"
                )
    for name, (difference, noise) in calibration.differences.items():
        if name in _UNCHECKED or name in calibration.unmeasured:
            continue
        if difference <= 0:
            problems.append(
                f"{name}: the larger workload measured no slower than the smaller "
                f"({difference * 1e3:+.3f} ms)"
            )
        elif name in _NOISE_CHECKED and difference <= noise:
            problems.append(
                f"{name}: the difference it is measured from ({difference * 1e3:.3f} ms) is "
                f"within the noise of its timings (IQR {noise * 1e3:.3f} ms)"
            )
    steps = [
        (f"the reference step of {name}", scale, SCALE_RANGE)
        for name, scale in calibration.reference_scales.items()
    ] or [("the reference step", calibration.scale, SCALE_RANGE)]
    for what, scale, (low, high) in (
        *steps,
        ("the calibration LSTM's loops", calibration.loop_scale, LOOP_SCALE_RANGE),
    ):
        if not low <= scale <= high:
            problems.append(
                f"{what} took {scale:.2f}x its modelled time (expected {low:.2f}-{high:.1f}x)"
            )
    return problems


# -- the results database ----------------------------------------------------------------------


def calibrate(
    inventory: Any = None,
    *,
    store: str | Path | None = None,
    measure: Callable[[], CpuCalibration] = calibrate_cpu,
    attempts: int = CALIBRATION_ATTEMPTS,
) -> CpuCalibration:
    """Calibrate this CPU (``measure``, default :func:`calibrate_cpu`) and store the result in
    the results database under this machine's fingerprint, where every later plan on this
    machine reads it (``tfaccel plan --calibrate``). A measurement with problems
    (:func:`calibration_problems`: rates above the CPU's peak, differences lost in the noise)
    is measured again, up to ``attempts`` times in all; none is stored silently.

    Raises:
        CalibrationError: every attempt had problems (a busy machine): what they were and
            the load, nothing stored.
        StoreError: the database cannot be written (refused before anything is measured,
            where the path or the file says so).
    """
    from tfaccel import inventory as inventory_module

    inv = inventory if inventory is not None else inventory_module.current()
    peak = getattr(inv.cpu, "peak", None)
    ceiling = rate_ceiling(
        (peak.fp32_tflops or 0.0) * 1e12 if peak else None, peak.formula if peak else None
    )
    check_store(store)  # a database the result cannot be stored in: refused before measuring
    problems: list[str] = []
    for _ in range(max(attempts, 1)):
        calibration = measure()
        problems = calibration_problems(calibration, ceiling)
        if not problems:
            break
    else:
        load = " ".join(f"{v:.2f}" for v in (calibration.load or os.getloadavg()))
        cores = getattr(inv.cpu, "usable_cores", None) or os.cpu_count()
        raise CalibrationError(
            f"This machine was too busy to calibrate its CPU: {max(attempts, 1)} measurements, "
            f"none self-consistent; nothing stored (load average {load} on {cores} cores)",
            expected="rates under the CPU's peak and differences larger than their noise",
            received="; ".join(problems),
            fix="run `tfaccel plan --calibrate` again when the machine is quieter (`uptime`: "
            "a load average under the core count)",
        )
    run_id = save_calibration(
        calibration, inv.fingerprint.digest, inv.fingerprint.data, store=store
    )
    calibration.source = f"measured on this machine now (results database run {run_id})"
    return calibration


def save_calibration(
    calibration: CpuCalibration,
    fingerprint: str,
    fingerprint_data: dict[str, Any],
    *,
    store: str | Path | None = None,
) -> int:
    """Store ``calibration`` in the results database as a run of kind
    :data:`CALIBRATION_KIND` under the machine ``fingerprint``; returns the run's id.

    Raises:
        StoreError: the database cannot be written.
    """
    from tfaccel._version import __version__

    # the probe's version (read from the installed files); else the module's, if imported
    tf_version = fingerprint_data.get("tf_version") or getattr(
        sys.modules.get("tensorflow"), "__version__", None
    )
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    config = {"device": "cpu", "precision": calibration.precision, "onednn": calibration.onednn}
    results = [
        ResultRecord(
            benchmark="plan_calibration",
            config=config,
            metric=metric,
            unit=unit,
            median=float(getattr(calibration, metric)),
            q1=float(getattr(calibration, metric)),
            q3=float(getattr(calibration, metric)),
            n=1,
            samples=[float(getattr(calibration, metric))],
            extra={"cost_s": calibration.cost_s},
        )
        for metric, unit in _CALIBRATION_METRICS.items()
    ]
    with ResultsStore(store) as db:
        run_id = db.begin_run(
            fingerprint,
            fingerprint_data=fingerprint_data,
            started_at=now,
            tfaccel_version=__version__,
            tf_version=tf_version,
            details={
                "kind": CALIBRATION_KIND,
                "cost_s": calibration.cost_s,
                "load": list(calibration.load),
            },
        )
        db.finish_run(run_id, results, finished_at=now)
    return run_id


def load_calibration(
    fingerprint: str, *, onednn: str | None = None, store: str | Path | None = None
) -> CpuCalibration | None:
    """The newest calibration of this machine stored under ``onednn`` (default: this
    process's setting), or None (none stored, or the database cannot be read: a plan never
    fails for it)."""
    return stored_cpu_figures(fingerprint, None, onednn=onednn, store=store)[1]


def stored_cpu_figures(
    fingerprint: str,
    precision: str | None,
    *,
    onednn: str | None = None,
    store: str | Path | None = None,
) -> tuple[tuple[float, str] | None, CpuCalibration | None]:
    """What the results database holds on this machine's CPU, read in one opening: the best
    utilisation (model-FLOPs, ``mfu_percent``) its last bench run measured on the CPU for
    ``precision``, with where it came from (None: not looked for), and its newest
    calibration under ``onednn`` (see :func:`load_calibration`). Either is None where none
    is stored, or where the database cannot be read (a plan never fails for it)."""
    path = Path(store).expanduser() if store is not None else default_path()
    if not path.is_file():
        return None, None
    setting = onednn if onednn is not None else onednn_setting()
    try:
        with ResultsStore(path, read_only=True) as db:
            measured = _utilisation(db, fingerprint, precision) if precision else None
            return measured, _calibration(db, fingerprint, setting)
    except Exception:  # an unreadable store means nothing stored, never a failed plan
        return None, None


def _calibration(db: ResultsStore, fingerprint: str, setting: str) -> CpuCalibration | None:
    """The newest calibration of this machine under ``setting`` that was measured while the
    machine was quiet (its load average under the cores this process may use); where none
    was, the newest at all. One measured while other programs shared the cores reads every
    rate low, and would make every plan's step time long until the next ``--calibrate``."""
    newest: CpuCalibration | None = None  # the newest one measured under load
    newest_run = 0
    quiet_below = float(usable_cores())
    for run in db.runs(fingerprint, limit=200):
        if run.status != "complete" or run.details.get("kind") != CALIBRATION_KIND:
            continue
        figures = {r.metric: r for r in db.results(run.id, "plan_calibration")}
        if not figures or not set(_CALIBRATION_METRICS) <= set(figures):
            continue
        config = next(iter(figures.values())).config
        if config.get("onednn") != setting:
            continue
        measured: dict[str, Any] = {m: figures[m].median for m in _CALIBRATION_METRICS}
        found = CpuCalibration(
            **measured,
            precision=str(config.get("precision", "float32")),
            onednn=setting,
            cost_s=float(run.details.get("cost_s", 0.0)),
            source=f"measured on this machine {run.started_at} (results database run {run.id})",
            load=tuple(float(v) for v in run.details.get("load", ())),
        )
        if not found.load or found.load[0] < quiet_below:
            if newest is not None:  # a newer one, measured under load, passed over
                found.note = (
                    f"a newer one (results database run {newest_run}) was measured at "
                    f"load average {newest.load[0]:.2f} on {quiet_below:g} cores and is not used"
                )
            return found
        if newest is None:
            newest, newest_run = found, run.id
    if newest is not None and newest.load:
        newest.note = (
            f"other programs shared the {quiet_below:g} cores while it was measured: its times "
            "read long; run `tfaccel plan --calibrate` on a quiet machine"
        )
    return newest


def _utilisation(db: ResultsStore, fingerprint: str, precision: str) -> tuple[float, str] | None:
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
