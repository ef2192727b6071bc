"""The part the Keras callback and the custom-loop timer share: records, warm-up, samplers,
the live line, TensorBoard scalars and the trace window.

The front ends call :meth:`Recorder.begin` when a step starts and :meth:`Recorder.end` when its
results are on the host; :meth:`Recorder.break_chain` where the time to the next step is not
host overhead (an epoch's validation); :meth:`Recorder.finish` returns the
:class:`~tfaccel.profile.measurement.Measurement`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any, TextIO

from tfaccel import inventory
from tfaccel.core.errors import UsageError
from tfaccel.probe import readings
from tfaccel.profile import sampling, text, trace
from tfaccel.profile.measurement import (
    Measurement,
    MemoryUsage,
    RunContext,
    StepRecord,
    compute_figures,
)

__all__ = ["Recorder"]


class Recorder:
    """Collects step records and what is sampled around them.

    Args:
        source: "keras fit" or "custom loop" (the diagnosis words its advice for it).
        warmup_steps: steps excluded at the start of each segment (each ``fit`` call).
        log_every: print a live line (and write TensorBoard scalars) every this many measured
            steps; 0 for never.
        live: print the live line (to ``stream``).
        stream: where the live line goes (default ``sys.stderr``).
        sample_gpu: sample NVML utilisation in a background thread when TF sees a GPU.
        tensorboard_dir: write scalars there (``tf.summary``) every ``log_every`` steps.
        trace_dir: capture a profiler trace of ``trace_steps`` steps after the warm-up.
        trace_steps: steps in the trace.
        batch_size: examples per step when the pipeline does not say.
    """

    def __init__(
        self,
        *,
        source: str,
        warmup_steps: int = 5,
        log_every: int = 50,
        live: bool = True,
        stream: TextIO | None = None,
        sample_gpu: bool = True,
        tensorboard_dir: str | None = None,
        trace_dir: str | None = None,
        trace_steps: int = 20,
        batch_size: int | None = None,
    ) -> None:
        if warmup_steps < 0 or log_every < 0 or trace_steps < 1:
            raise UsageError(
                "Invalid profiling settings",
                expected="warmup_steps >= 0, log_every >= 0 and trace_steps >= 1",
                received=f"warmup_steps={warmup_steps}, log_every={log_every}, "
                f"trace_steps={trace_steps}",
                fix="warmup_steps=5, log_every=50",
            )
        self.warmup_steps = warmup_steps
        self.log_every = log_every
        self.live = live
        self.stream = stream
        self.sample_gpu = sample_gpu
        self.tensorboard_dir = tensorboard_dir
        self.trace_dir = trace_dir
        self.trace_steps = trace_steps
        self.records: list[StepRecord] = []
        self.context = RunContext(source=source, batch_size=batch_size)
        self.measurement = Measurement(context=self.context)
        self._segment_steps = 0
        self._measured = 0
        self._chain = False
        self._started = False
        self._finished = False
        self._monitor: Any = None
        self._writer: Any = None
        self._memory: MemoryUsage | None = None
        self._window_start = 0
        self._first_measured: float | None = None
        self._last_end: float | None = None
        self._cpu_first: float | None = None
        self._cpu_last: float | None = None
        self._tracing = False
        self._traced = 0
        self._trace_done = False
        self._marker: Any = None

    # --- lifecycle -----------------------------------------------------------------------

    def start_segment(self) -> None:
        """A new run of steps (a ``fit`` call): warm-up again, no host gap across."""
        if not self._started:
            self._start()
        elif self._finished:  # sampling stopped at the end of the previous segment
            self._finished = False
            if self._monitor is not None:
                self._monitor.start()
        self._segment_steps = 0
        self._chain = False

    def _start(self) -> None:
        self._started = True
        inv = inventory.current()
        self.context.usable_cores = inv.cpu.usable_cores
        if "tensorflow" in sys.modules:
            import tensorflow as tf

            if tf.config.list_logical_devices("GPU"):
                self.context.device_kind = "gpu"
                first = next(iter(inventory.tensorflow_gpus(inv, inv.cuda_visible_devices)), None)
                total = None
                if first is not None:
                    self.context.gpu_name = first.name or None
                    self.context.compute_capability = first.capability
                    total = first.memory_total_bytes
                self._memory = MemoryUsage(kind="gpu", device="GPU:0", limit_bytes=total)
            if self.tensorboard_dir:
                self._writer = tf.summary.create_file_writer(self.tensorboard_dir)
        if self._memory is None:
            self._memory = sampling.read_memory("cpu")
            self._memory.fixed_bytes = self._memory.current_bytes
            self._memory.limit_bytes = inv.cpu.memory_total_bytes
        if self.sample_gpu and self.context.device_kind == "gpu":
            indices = sampling.visible_nvml_indices(inv.cuda_visible_devices)
            self._monitor = sampling.GpuMonitor(indices=indices)
            if not self._monitor.start():
                self.measurement.gpu_note = self._monitor.note
                self._monitor = None
        elif self.context.device_kind != "gpu":
            self.measurement.gpu_note = "no GPU: TensorFlow sees none"
        else:
            self.measurement.gpu_note = "GPU sampling off (sample_gpu=False)"

    def break_chain(self) -> None:
        """The time until the next step is not host overhead (end of an epoch or a fit)."""
        self._chain = False

    def finish(self) -> Measurement:
        """Stop sampling and tracing; return the measurement (safe to call twice)."""
        if self._tracing:
            self._stop_trace()
        if self._trace_done and self.measurement.trace is None:
            self.measurement.trace = trace.read_trace(self.trace_dir or ".", self._traced)
        if not self._finished and self._started:
            self._finished = True
            if self._monitor is not None:
                self._monitor.stop()
        m = self.measurement
        m.records = list(self.records)
        if self._memory is not None and self._started:
            m.memory = sampling.read_memory(self.context.device_kind, self._memory)
        if self._monitor is not None and self._first_measured is not None and self._last_end:
            m.gpus = self._monitor.usage(self._first_measured, self._last_end)
        if self._first_measured is not None and self._last_end is not None:
            m.wall_seconds = self._last_end - self._first_measured
            if self._cpu_first is not None and self._cpu_last is not None:
                m.cpu_seconds = self._cpu_last - self._cpu_first
        if self._writer is not None:
            self._writer.flush()
        return m

    # --- steps ---------------------------------------------------------------------------

    def begin(self, now: float) -> None:
        """A step starts at ``now`` (perf_counter)."""
        if not self._started:
            self.start_segment()
        if self._chain and self.records:
            last = self.records[-1]
            host = now - last.start - last.step_s
            self.records[-1] = replace(last, host_s=max(host, 0.0))
        measured = self._segment_steps >= self.warmup_steps
        if measured and self._first_measured is None:
            self._first_measured = now
            self._cpu_first = readings.cpu_seconds()
        if measured and self.trace_dir and not self._trace_done and not self._tracing:
            self._start_trace()
        if self._tracing:
            self._marker = trace.step_marker(len(self.records))
            self._marker.__enter__()

    def end(self, start: float, input_s: float | None, busy_s: float, examples: int | None) -> None:
        """The step that began at ``start`` ended; it waited ``input_s`` and was busy ``busy_s``."""
        if self._marker is not None:
            self._marker.__exit__(None, None, None)
            self._marker = None
        warm = self._segment_steps < self.warmup_steps
        if examples is None:
            examples = self.context.batch_size
        elif self.context.batch_size is None:
            self.context.batch_size = examples  # the pipeline said it
        cpu_now = readings.cpu_seconds()
        record = StepRecord(
            index=len(self.records),
            start=start,
            input_s=input_s,
            busy_s=max(busy_s, 0.0),
            host_s=None,
            examples=examples,
            warmup=warm,
            traced=self._tracing,
            cpu_s=cpu_now,
        )
        self.records.append(record)
        self._segment_steps += 1
        self._chain = True
        if not warm:
            self._last_end = start + record.step_s
            self._cpu_last = cpu_now
        if self._tracing:
            self._traced += 1
            if self._traced >= self.trace_steps:
                self._stop_trace()
        if not warm:
            self._measured += 1
            if self.log_every and self._measured % self.log_every == 0:
                self._report(self._measured)

    def measured_steps(self) -> int:
        """Steps recorded after their segment's warm-up."""
        return self._measured

    # --- live output ---------------------------------------------------------------------

    def _report(self, measured: int) -> None:
        window = [r for r in self.records[self._window_start :] if not r.warmup]
        self._window_start = len(self.records)
        figures = compute_figures(window)
        if self._memory is not None:
            self._memory = sampling.read_memory(self.context.device_kind, self._memory)
        gpus = []
        if self._monitor is not None and window:
            gpus = self._monitor.usage(window[0].start, time.perf_counter())
        if self.live:
            line = text.live_line(
                measured, figures, self._memory, gpus, self.measurement.input_note
            )
            print(line, file=self.stream or sys.stderr, flush=True)
        if self._writer is not None:
            self._write_scalars(measured, figures, gpus)

    def _write_scalars(self, step: int, figures: Any, gpus: list[Any]) -> None:
        import tensorflow as tf

        values: dict[str, float | None] = {
            "step_time_ms": figures.period_s.median * 1e3 if figures.period_s else None,
            "input_wait_percent": _percent(figures.input_share),
            "host_overhead_percent": _percent(figures.host_share),
            "examples_per_second": figures.examples_per_s,
            "memory_bytes": float(self._memory.current_bytes)
            if self._memory and self._memory.current_bytes is not None
            else None,
        }
        for gpu in gpus:
            values[f"gpu{gpu.index}_utilization_percent"] = gpu.utilization_mean_percent
        with self._writer.as_default():
            for name, value in values.items():
                if value is not None:
                    tf.summary.write(
                        f"tfaccel/{name}",
                        tf.constant(value, tf.float32),
                        step=step,
                        metadata=_scalar_metadata(),
                    )

    # --- trace ---------------------------------------------------------------------------

    def _start_trace(self) -> None:
        assert self.trace_dir is not None
        trace.start(self.trace_dir)
        self._tracing = True
        self._traced = 0

    def _stop_trace(self) -> None:
        self._tracing = False
        self._trace_done = True
        trace.stop()  # read in finish(), not between two steps


def _scalar_metadata() -> Any:
    """What ``tf.summary.scalar`` attaches, written without the tensorboard package (which
    ``tf.summary.scalar`` needs): TensorBoard shows these as scalars."""
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata()
    metadata.plugin_data.plugin_name = "scalars"
    metadata.data_class = summary_pb2.DATA_CLASS_SCALAR
    return metadata


def _percent(share: float | None) -> float | None:
    return None if share is None else 100.0 * share
