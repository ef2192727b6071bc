"""``StepTimer``: the figures of ``PerformanceCallback`` for a custom training loop.

Example:
    >>> timer = StepTimer(warmup_steps=5, batch_size=64)
    >>> it = iter(dataset)
    >>> for _ in range(steps):
    ...     with timer.input():
    ...         batch = next(it)
    ...     with timer.step() as step:
    ...         loss = train_step(batch)
    ...         step.wait(loss)          # the clock stops when loss is on the host
    >>> print(timer.report())            # table and diagnosis
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

from tfaccel.core.checks import (
    MAX_COUNT,
    check_dir_argument,
    check_flag,
    check_int,
    shown_typed,
)
from tfaccel.core.errors import UsageError
from tfaccel.profile import nvtx_marks
from tfaccel.profile import session as session_module
from tfaccel.profile.bottlenecks import Reports
from tfaccel.profile.measurement import Measurement
from tfaccel.profile.step_recorder import Recorder

__all__ = ["StepHandle", "StepTimer", "check_options"]

_NO_INPUT_NOTE = (
    "not measured: wrap the fetch in `with timer.input(): batch = next(it)` to measure it"
)


class StepHandle:
    """Given by ``timer.step()``; :meth:`wait` names the values the clock waits for."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.examples: int | None = None

    def wait(self, *values: Any) -> None:
        """Stop the clock only when these values (tensors, arrays) are on the host."""
        self.values.extend(values)


class StepTimer(Reports):
    """Times the steps of a custom loop: input wait, step (device synchronised), host overhead.

    A step starts at the first ``input()`` (or ``step()``) after the previous step, and ends
    when its ``step()`` block ends and the device has finished: the values given to
    ``StepHandle.wait`` are read back, else (``sync=True``) every GPU is synchronised
    (``tf.test.experimental.sync_devices``; on the CPU, TensorFlow's ops have finished when
    they return). Python between steps is host overhead.

    Args:
        warmup_steps: first steps excluded from every figure.
        batch_size: examples per step (for examples/s); ``step(examples=n)`` overrides it.
        log_every: a live line every this many measured steps (0: never).
        live: print the live line to ``stream`` (default stderr).
        stream: where the live line goes.
        sample_gpu: sample GPU utilisation through NVML when TensorFlow sees a GPU.
        tensorboard_dir: write the live figures as TensorBoard scalars there.
        trace_dir: capture a TensorFlow Profiler trace of ``trace_steps`` steps after warm-up.
        trace_steps: steps in the trace.
        sync: synchronise the GPUs at the end of a step without ``wait`` values.
        nvtx: mark each step and its phases as NVTX ranges (``step``, ``input``, ``compute``
            in the domain ``tfaccel``) for Nsight Systems' timeline; they cost nothing when
            no profiler is attached (see :mod:`tfaccel.profile.nvtx_marks`).

    Raises:
        UsageError: a count, switch or directory that is not valid (see :func:`check_options`).

    Example:
        >>> with timer.step() as step:
        ...     step.wait(train_step(batch))
    """

    def __init__(
        self,
        *,
        warmup_steps: int | None = None,
        batch_size: int | None = None,
        log_every: int = 50,
        live: bool | None = None,
        stream: TextIO | None = None,
        sample_gpu: bool = True,
        tensorboard_dir: str | None = None,
        trace_dir: str | None = None,
        trace_steps: int | None = None,
        sync: bool = True,
        nvtx: bool = True,
    ) -> None:
        check_options(
            "tfaccel.profile.StepTimer",
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
        check_flag("sync", sync, where="tfaccel.profile.StepTimer")
        check_flag("nvtx", nvtx, where="tfaccel.profile.StepTimer")
        self._recorder: Recorder = session_module.recorder(
            "custom loop",
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
        self.sync = sync
        self._start: float | None = None
        self._input_s = 0.0
        self._had_input = False
        self._gpu: bool | None = None
        self._marks = nvtx_marks.ranges(nvtx)
        self._marked = False  # a `step` range is open

    @property
    def recorder(self) -> Recorder:
        return self._recorder

    def _begin(self, now: float) -> None:
        if self._start is None:
            self._start = now
            self._recorder.begin(now)
        marks = self._marks
        if marks is not None and not self._marked:
            marks.push(nvtx_marks.STEP, len(self._recorder.records))
            self._marked = True

    def _clear(self) -> None:
        """Forget the step in progress and close its range."""
        self._start, self._input_s, self._had_input = None, 0.0, False
        self._close_step()

    def _abandon(self) -> None:
        """The step ended in an exception: it records nothing, and the time until the next
        one is not host overhead."""
        self._clear()
        self._recorder.break_chain()

    def _close_step(self) -> None:
        if self._marked:
            self._marked = False
            if self._marks is not None:
                self._marks.pop()

    @contextlib.contextmanager
    def input(self) -> Iterator[None]:
        """Time fetching the next batch: ``with timer.input(): batch = next(it)``.

        An exception inside it (``StopIteration`` at the end of the data) ends the step:
        nothing is recorded for it, and the exception propagates.
        """
        begin = time.perf_counter()
        self._begin(begin)
        marks = self._marks
        if marks is not None:
            marks.push(nvtx_marks.INPUT)
        try:
            yield
        except BaseException:
            if marks is not None:
                marks.pop()
            self._abandon()
            raise
        self._input_s += time.perf_counter() - begin
        self._had_input = True
        if marks is not None:
            marks.pop()

    @contextlib.contextmanager
    def step(self, examples: int | None = None) -> Iterator[StepHandle]:
        """Time one training step; an exception inside it records nothing and propagates."""
        check_int("examples", examples, where="StepTimer.step", allow_none=True)
        begin = time.perf_counter()
        self._begin(begin)
        marks = self._marks
        if marks is not None:
            marks.push(nvtx_marks.COMPUTE)
        handle = StepHandle()
        handle.examples = examples
        try:
            yield handle
            self._synchronise(handle.values)
        except BaseException:
            if marks is not None:
                marks.pop()
            self._abandon()
            raise
        end = time.perf_counter()
        if marks is not None:
            marks.pop()
        start = self._start if self._start is not None else begin
        input_s = self._input_s if self._had_input else None
        if input_s is None:
            self._recorder.measurement.input_note = _NO_INPUT_NOTE
        try:
            self._recorder.end(start, input_s, end - begin, handle.examples)
        finally:
            self._clear()

    def _synchronise(self, values: list[Any]) -> None:
        if values:
            for value in values:
                _to_host(value)
            return
        if not self.sync or "tensorflow" not in sys.modules:
            return
        import tensorflow as tf

        if self._gpu is None:
            self._gpu = bool(tf.config.list_logical_devices("GPU"))
        sync = getattr(tf.test.experimental, "sync_devices", None)
        if self._gpu and sync is not None:
            sync()

    def pause(self) -> None:
        """The time until the next step is not host overhead (evaluation, checkpointing)."""
        self._recorder.break_chain()

    def measurement(self) -> Measurement:
        """Stop sampling and return what was measured."""
        self._close_step()  # a step begun by input() and never ended
        return self._recorder.finish()

    def __enter__(self) -> StepTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_step()
        self._recorder.finish()


def check_options(
    where: str,
    *,
    warmup_steps: object,
    batch_size: object,
    log_every: object,
    live: object,
    sample_gpu: object,
    tensorboard_dir: object,
    trace_dir: object,
    trace_steps: object,
    stream: object = None,
) -> None:
    """The options a step timer and the Keras callback share, checked before either is made.

    Raises:
        UsageError: a count that is not a whole number in range (``trace_steps=0`` included,
            which would otherwise mean the default), a switch that is not a bool, or a
            directory that cannot be written.
    """
    most = MAX_COUNT
    check_int("warmup_steps", warmup_steps, where=where, minimum=0, maximum=most, allow_none=True)
    check_int("batch_size", batch_size, where=where, maximum=most, allow_none=True)
    check_int(
        "log_every", log_every, where=where, minimum=0, maximum=most, fix="pass log_every=50, or 0"
    )
    check_flag("live", live, where=where, allow_none=True)
    check_flag("sample_gpu", sample_gpu, where=where)
    check_int(
        "trace_steps",
        trace_steps,
        where=where,
        maximum=most,
        allow_none=True,
        fix="pass trace_steps=20",
    )
    if stream is not None and not callable(getattr(stream, "write", None)):
        raise UsageError(
            f"{where} got an invalid stream",
            expected="a text stream with a write() method (sys.stdout, an open file), or None",
            received=f"stream={shown_typed(stream)}",
            fix="pass stream=sys.stdout, or leave it out for stderr",
        )
    for name, directory in (("tensorboard_dir", tensorboard_dir), ("trace_dir", trace_dir)):
        if directory is not None:
            check_dir_argument(name, directory, where=where)


def _to_host(value: Any) -> None:
    import numpy as np

    if isinstance(value, (list, tuple)):
        for item in value:
            _to_host(item)
    elif isinstance(value, dict):
        for item in value.values():
            _to_host(item)
    elif hasattr(value, "numpy"):
        value.numpy()
    else:
        np.asarray(value)
