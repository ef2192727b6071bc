"""``PerformanceCallback``: per-step input wait, step time, host overhead, memory, GPU use.

Imports Keras when loaded; reached through ``tfaccel.keras.PerformanceCallback``.

What a Keras 3 callback can see, and how each figure is measured:

* step boundaries: ``on_train_batch_begin`` / ``on_train_batch_end``. Keras converts the
  step's logs to Python numbers before calling a callback that defines
  ``on_train_batch_end`` (it is then not dispatched asynchronously), so the end time is after
  the device produced them: the step is device-synchronised (the optimizer's update may still
  finish at the start of the next step, which leaves the steady-state period unchanged).
* input wait: the batch is fetched inside the compiled train function, invisible to a
  callback. Wrap the dataset with ``tfaccel.keras.instrument`` (``tfaccel profile`` does it for
  you): each fetch then adds how long it waited to a small variable (see
  :mod:`tfaccel.profile.input_wait`), which the callback reads when the step begins and ends.
* host overhead: from one step's end to the next one's begin, within an epoch (validation
  and epoch-end work are not counted). Put this callback first in ``callbacks=[...]`` so the
  others' per-batch work counts as host overhead.
* confirmation: when the wait is >= 5% (or not measured), and always on a CPU-only run
  (where the pipeline takes cores from the model without making the step wait), the same
  steps are re-run on one ready batch at the end of ``fit`` (weights restored afterwards).
* NVTX: each step is a ``step`` range of the ``tfaccel`` domain (its payload the step's index),
  the re-run a ``rerun`` range, for Nsight Systems' timeline; nothing is marked without a
  profiler attached (:mod:`tfaccel.profile.nvtx_marks`). A step whose train function raised,
  or found the data exhausted, gets no ``on_train_batch_end``: its range is closed at the
  next hook (the epoch's end, the next step, or the next ``fit``).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import keras

from tfaccel.core.checks import MAX_COUNT, check_flag, check_int, shown_typed
from tfaccel.core.errors import UsageError
from tfaccel.data.pipeline import describe
from tfaccel.profile import nvtx_marks, ready_batch, text
from tfaccel.profile import session as session_module
from tfaccel.profile.bottlenecks import THRESHOLDS, Reports, find_bottlenecks
from tfaccel.profile.input_wait import INPUT_CLOCK, InputClock, difference
from tfaccel.profile.measurement import MIN_STEPS, Measurement, compute_figures
from tfaccel.profile.step_recorder import Recorder
from tfaccel.profile.timer import check_options

__all__ = ["PerformanceCallback"]

_NOT_INSTRUMENTED = (
    "not measured: the training dataset is not instrumented; pass "
    "tfaccel.keras.instrument(dataset) to fit (tfaccel profile does it for you)"
)
_MULTI_FETCH = (
    "not measured: steps_per_execution > 1 fetches several batches per call, and their waits "
    "overlap the compute"
)
_STRATEGY = (
    "not measured under a distribution strategy: its iterator prefetches to the devices in "
    "background threads, so the time a batch leaves the pipeline is not the time a step waited"
)


class PerformanceCallback(Reports, keras.callbacks.Callback):
    """Measures each training step and tells what limits training.

    Args:
        warmup_steps: first steps of each ``fit`` excluded from every figure.
        log_every: a live line (and TensorBoard scalars) every this many measured steps;
            0 for none.
        tensorboard_dir: write ``tfaccel/*`` scalars there (``tensorboard --logdir``).
        sample_gpu: sample GPU utilisation and memory through NVML in a background thread
            when TensorFlow sees a GPU.
        batch_size: examples per step when the dataset is not instrumented (images/s).
        live: print the live line (to ``stream``, default stderr).
        stream: where the live line and the final report go.
        summary: print the table and the diagnosis when ``fit`` ends.
        confirm: re-run the steps on one ready batch when the step waits for input, and on a
            CPU-only run (needs an instrumented dataset to take the batch from).
        max_steps: stop ``fit`` after the warm-up plus this many steps.
        trace_dir: capture a TensorFlow Profiler trace of ``trace_steps`` steps after warm-up.
        trace_steps: steps in the trace.
        clock: the input clock instrumented datasets write to (default the global one).
        nvtx: mark each step as an NVTX range (``step`` in the domain ``tfaccel``) for
            Nsight Systems' timeline; nothing is marked when no profiler is attached.

    Raises:
        UsageError: a count, switch or directory that is not valid, checked before anything
            is made (see :func:`tfaccel.profile.timer.check_options`).

    Example:
        >>> from tfaccel.keras import PerformanceCallback, instrument
        >>> callback = PerformanceCallback(warmup_steps=5, log_every=50)
        >>> model.fit(instrument(ds), epochs=3, callbacks=[callback])  # doctest: +SKIP
        >>> callback.diagnose().problems  # doctest: +SKIP
    """

    def __init__(
        self,
        warmup_steps: int | None = None,
        log_every: int = 50,
        tensorboard_dir: str | None = None,
        sample_gpu: bool = True,
        *,
        batch_size: int | None = None,
        live: bool | None = None,
        stream: TextIO | None = None,
        summary: bool | None = None,
        confirm: bool = True,
        max_steps: int | None = None,
        trace_dir: str | None = None,
        trace_steps: int | None = None,
        clock: InputClock | None = None,
        nvtx: bool = True,
    ) -> None:
        where = "tfaccel.keras.PerformanceCallback"
        check_options(
            where,
            warmup_steps=warmup_steps,
            batch_size=batch_size,
            log_every=log_every,
            live=live,
            sample_gpu=sample_gpu,
            tensorboard_dir=tensorboard_dir,
            trace_dir=trace_dir,
            trace_steps=trace_steps,
            stream=stream,
        )
        check_flag("summary", summary, where=where, allow_none=True)
        check_flag("confirm", confirm, where=where)
        check_flag("nvtx", nvtx, where=where)
        check_int("max_steps", max_steps, where=where, maximum=MAX_COUNT, allow_none=True)
        if clock is not None and not isinstance(clock, InputClock):
            raise UsageError(
                f"{where} got an invalid clock",
                expected="a tfaccel.profile.input_wait.InputClock, or None (the global one)",
                received=f"clock={shown_typed(clock)}",
                fix="leave clock out",
            )
        super().__init__()
        active = session_module.current_session()
        self.recorder: Recorder = session_module.recorder(
            "keras fit",
            warmup_steps=warmup_steps,
            live=live,
            trace_dir=trace_dir,
            trace_steps=trace_steps,
            log_every=log_every,
            stream=stream,
            sample_gpu=sample_gpu,
            tensorboard_dir=tensorboard_dir,
            batch_size=batch_size,
        )
        self.stream = stream
        self.summary = summary if summary is not None else active is None
        self.confirm = confirm
        self.max_steps = (
            max_steps if max_steps is not None else (active.max_steps if active else None)
        )
        self.clock = clock or INPUT_CLOCK
        self._begin = 0.0
        self._totals: tuple[float, int, int] | None = None
        self._segment_measured = 0
        self._input_problem: str | None = None
        self._marks = nvtx_marks.ranges(nvtx)
        self._marked = False  # a `step` range is open

    # --- fit hooks -----------------------------------------------------------------------

    def on_train_begin(self, logs: Any = None) -> None:
        self._close_step()  # left open by a fit that raised inside a step
        self.recorder.start_segment()
        self._segment_measured = 0
        self._describe_model()

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._totals = self.clock.read()  # fetches before the first step are no step's

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._close_step()  # the data ran out inside the epoch's last step
        self.recorder.break_chain()

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        now = time.perf_counter()
        self.recorder.begin(now)
        self._begin = now
        if self._marks is not None:
            self._close_step()  # one left open: a step that got no on_train_batch_end
            self._marks.push(nvtx_marks.STEP, len(self.recorder.records))
            self._marked = True

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        end = time.perf_counter()
        self._close_step()
        totals = self.clock.read()  # one read per step: the fetches since the last step ended
        wait, examples, count = difference(self._totals, totals)
        self._totals = totals
        input_s = None
        if count:
            if count > 1:
                self._input_problem = _MULTI_FETCH
            elif self._input_problem is None:
                input_s = wait
        elif self._input_problem is None:
            self.recorder.measurement.input_note = _NOT_INSTRUMENTED
        if self._input_problem is not None:
            self.recorder.measurement.input_note = self._input_problem
        busy = end - self._begin - (input_s or 0.0)
        self.recorder.end(self._begin, input_s, busy, examples)
        if not self.recorder.records[-1].warmup:
            self._segment_measured += 1  # for max_steps, per fit
            if self.max_steps is not None and self._segment_measured >= self.max_steps:
                self.model.stop_training = True

    def on_train_end(self, logs: Any = None) -> None:
        self._close_step()
        self.recorder.break_chain()
        if self.confirm:
            self._confirm()
        measurement = self.measurement()  # stops the GPU sampler until the next fit
        if self.summary:
            print(
                text.report(measurement, find_bottlenecks(measurement)),
                file=self.stream or sys.stderr,
            )

    # --- results -------------------------------------------------------------------------

    def measurement(self) -> Measurement:
        """What was measured so far (stops the GPU sampler)."""
        return self.recorder.finish()

    # --- internals -----------------------------------------------------------------------

    def _close_step(self) -> None:
        if self._marked:
            self._marked = False
            if self._marks is not None:
                self._marks.pop()

    def _describe_model(self) -> None:
        ctx = self.recorder.context
        model = self.model
        strategy = model.distribute_strategy
        ctx.replicas = int(getattr(strategy, "num_replicas_in_sync", 1))
        if type(strategy).__name__ != "_DefaultDistributionStrategy":
            self._input_problem = _STRATEGY
        ctx.steps_per_execution = int(getattr(model, "steps_per_execution", 1) or 1)
        ctx.run_eagerly = bool(getattr(model, "run_eagerly", False))
        ctx.model = getattr(model, "name", None)
        if ctx.steps_per_execution > 1:
            self._input_problem = _MULTI_FETCH
        ctx.parameters = int(model.count_params()) if model.built else None
        policy = getattr(model, "dtype_policy", None)
        ctx.precision_policy = getattr(policy, "name", None)
        ctx.sixteen_bit_share = _sixteen_bit_share(model)
        if self.clock.source is not None:
            try:
                ctx.pipeline = describe(self.clock.source).to_dict()
            except UsageError:
                ctx.pipeline = None

    def _confirm(self) -> None:
        m = self.recorder.measurement
        figures = compute_figures(self.recorder.records)
        if figures.steps < MIN_STEPS or figures.step_s is None:
            return
        share = figures.input_share
        on_cpu = self.recorder.context.device_kind == "cpu"  # the pipeline shares the cores
        if share is not None and share < THRESHOLDS["input_bound"][1] and not on_cpu:
            m.synthetic_note = "not run: the step does not wait for input"
            return
        if self.recorder.context.replicas > 1:
            m.synthetic_note = "not run: more than one replica (each would get the whole batch)"
            return
        if self.clock.source is None:
            m.synthetic_note = "not run: no instrumented dataset to take a batch from"
            return
        try:
            batch = ready_batch.first_batch(self.clock.source)
        except StopIteration:
            m.synthetic_note = "not run: the dataset gave no batch"
            return
        steps = min(20, figures.steps)
        marks = self._marks
        if marks is not None:
            marks.push(nvtx_marks.RERUN)
        try:
            m.synthetic = ready_batch.rerun(self.model, batch, figures.step_s, steps=steps)
        finally:
            if marks is not None:
                marks.pop()


def _sixteen_bit_share(model: Any) -> float | None:
    """Share of parameters in layers computing in float16 or bfloat16."""
    total = sixteen = 0
    for layer in _leaf_layers(model):
        count = sum(int(_size(w.shape)) for w in layer.weights)
        total += count
        if str(getattr(layer, "compute_dtype", "")) in ("float16", "bfloat16"):
            sixteen += count
    return sixteen / total if total else None


def _leaf_layers(layer: Any) -> list[Any]:
    children = list(getattr(layer, "layers", []) or [])
    if not children:
        return [layer]
    out: list[Any] = []
    for child in children:
        out += _leaf_layers(child)
    return out


def _size(shape: Any) -> int:
    size = 1
    for dim in shape:
        size *= int(dim)
    return size
