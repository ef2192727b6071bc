"""``PerformanceCallback`` inside real Keras ``fit`` runs on the CPU (tiny reference CNN).

A pipeline made slow on purpose (a ``tf.py_function`` that sleeps in ``map``) is diagnosed
input-bound with the size of the wait it adds, and the synthetic re-run agrees; the same model
fed by ``tfaccel.data.pipeline`` is not input-bound; Python slept between steps is host
overhead; too few steps are refused. One TensorFlow runtime for the whole module.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from nvtx_helpers import RecordedRanges, record_ranges  # noqa: E402

import tfaccel.data  # noqa: E402
from tfaccel import models  # noqa: E402
from tfaccel.core.errors import UsageError  # noqa: E402
from tfaccel.core.timing import summarize  # noqa: E402
from tfaccel.keras import PerformanceCallback, instrument  # noqa: E402
from tfaccel.profile import ready_batch  # noqa: E402
from tfaccel.profile.input_wait import InputClock, difference  # noqa: E402
from tfaccel.profile.trace import device_busy_us  # noqa: E402

BATCH = 32
WARMUP = 3
STEPS = 25


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.random((BATCH * 16, 32, 32, 3), dtype=np.float32)
    return x, rng.integers(0, 10, BATCH * 16).astype(np.int32)


@pytest.fixture(scope="module")
def model(data: tuple[np.ndarray, np.ndarray]) -> Any:
    net = models.build("reference_cnn", tiny=True)
    net.compile(optimizer="rmsprop", loss="sparse_categorical_crossentropy")
    net.fit(*data, batch_size=BATCH, epochs=1, steps_per_epoch=3, verbose=0)  # trace it once
    return net


def _callback(**kwargs: Any) -> PerformanceCallback:
    options: dict[str, Any] = {"warmup_steps": WARMUP, "live": False, "summary": False}
    options.update(kwargs)
    return PerformanceCallback(**options)


def _fit(model: Any, ds: Any, callbacks: list[Any], steps: int = STEPS) -> None:
    model.fit(
        ds, steps_per_epoch=WARMUP + steps, epochs=1, verbose=0, shuffle=False, callbacks=callbacks
    )


def _fast(data: tuple[np.ndarray, np.ndarray]) -> Any:
    return tfaccel.data.pipeline(data, BATCH, seed=0, repeat=True, drop_remainder=True)


def _slow(data: tuple[np.ndarray, np.ndarray], sleep_s: float) -> Any:
    def sleepy(x: Any) -> Any:
        time.sleep(sleep_s)
        return x

    def slow_map(x: Any, y: Any) -> Any:
        x = tf.py_function(sleepy, [x], tf.float32)
        x.set_shape((BATCH, 32, 32, 3))
        return x, y

    base = tf.data.Dataset.from_tensor_slices(data).batch(BATCH, drop_remainder=True)
    return base.repeat().map(slow_map)


def test_tfaccel_pipeline_feeds_the_model_without_input_wait(model: Any, data: Any) -> None:
    callback = _callback()
    _fit(model, instrument(_fast(data)), [callback])
    measurement = callback.measurement()
    figures = measurement.figures()
    assert figures.steps == STEPS and figures.warmup_steps == WARMUP
    assert figures.input_share is not None and figures.input_share < 0.05
    assert figures.examples_per_s is not None and figures.examples_per_s > 0
    finding = callback.diagnose().get("input_bound")
    assert finding is not None and finding.status == "ok"
    # on a CPU-only run the re-run on a ready batch happens anyway (the pipeline shares cores)
    assert measurement.synthetic is not None and measurement.synthetic.steps == 20
    assert measurement.context.pipeline is not None  # the pipeline's own record was found
    assert measurement.context.batch_size == BATCH


def test_slow_pipeline_is_input_bound_by_the_wait_it_adds(model: Any, data: Any) -> None:
    calibration = _callback()
    _fit(model, instrument(_fast(data)), [calibration])
    busy = calibration.measurement().figures().busy_s
    assert busy is not None
    # the pipeline sleeps three times as long as a step computes: with tf.data's prefetch the
    # step waits about (sleep - compute), two thirds of each period, so a step that computes
    # slower than in the calibration (a busy machine) still leaves the wait a clear majority
    sleep_s = min(max(3 * busy.median, 0.015), 0.15)
    callback = _callback()
    _fit(model, instrument(_slow(data, sleep_s)), [callback])
    measurement = callback.measurement()
    figures = measurement.figures()
    assert figures.period_s is not None and figures.input_s is not None and figures.busy_s
    assert figures.period_s.median == pytest.approx(sleep_s, rel=0.35)  # the pipeline sets the pace
    # the wait is what the sleep adds beyond the compute it overlaps
    expected_wait = sleep_s - figures.busy_s.median
    assert figures.input_s.median == pytest.approx(expected_wait, abs=0.003 + 0.25 * sleep_s)
    assert figures.input_share is not None and 0.3 <= figures.input_share <= 0.9
    synthetic_run = measurement.synthetic
    assert synthetic_run is not None, measurement.synthetic_note
    # an independent path: the same train function on one ready batch, no pipeline at all
    assert synthetic_run.input_share >= 0.2
    finding = callback.diagnose().get("input_bound")
    assert finding is not None and finding.status == "fail"
    assert finding.numbers["confirmed"] is True
    assert "tfaccel.data.pipeline(" in (finding.fix or "")


def test_python_between_steps_is_host_overhead(model: Any, data: Any) -> None:
    class Busy(keras.callbacks.Callback):  # type: ignore[name-defined]
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            time.sleep(0.03)

    callback = _callback()
    _fit(model, instrument(_fast(data)), [callback, Busy()])
    figures = callback.measurement().figures()
    # the 30 ms sleep, and not the whole step: a loaded machine stretches a sleep, so the
    # upper bound leaves room for that. 30 ms stays above the 15% a "fail" needs beside the
    # 50-100 ms a loaded machine makes of the tiny step (6 ms was 14%: a "warn")
    assert figures.host_s is not None and 0.03 <= figures.host_s.median < 0.1
    finding = callback.diagnose().get("host_overhead")
    assert finding is not None and finding.status == "fail"
    assert "steps_per_execution" in (finding.fix or "")


def test_too_few_steps_are_refused(model: Any, data: Any) -> None:
    callback = _callback()
    _fit(model, instrument(_fast(data)), [callback], steps=4)
    diagnosis = callback.diagnose()
    assert diagnosis.refused is not None and "only 4 step(s)" in diagnosis.refused


def test_uninstrumented_data_says_the_wait_is_not_measured(model: Any, data: Any) -> None:
    callback = _callback(batch_size=BATCH, clock=InputClock())
    model.fit(*data, batch_size=BATCH, epochs=1, verbose=0, callbacks=[callback])
    measurement = callback.measurement()
    assert measurement.input_note is not None and "instrument" in measurement.input_note
    figures = measurement.figures()
    assert figures.input_share is None and figures.examples_per_s is not None
    finding = callback.diagnose().get("input_bound")
    assert finding is not None and finding.status == "skip"


def test_live_lines_summary_and_tensorboard_scalars(model: Any, data: Any, tmp_path: Path) -> None:
    stream = io.StringIO()
    callback = PerformanceCallback(
        warmup_steps=WARMUP, log_every=10, tensorboard_dir=str(tmp_path), stream=stream
    )
    _fit(model, instrument(_fast(data)), [callback], steps=20)
    out = stream.getvalue()
    assert out.count("tfaccel: step ") == 2 and "ex/s" in out
    assert "20 steps measured (3 warm-up excluded), keras fit on CPU" in out
    assert "Diagnosis:" in out
    tags = set()
    for event_file in tmp_path.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            tags |= {value.tag for value in event.summary.value}
    assert {"tfaccel/step_time_ms", "tfaccel/input_wait_percent"} <= tags


def test_max_steps_stops_fit_after_the_warmup(model: Any, data: Any) -> None:
    callback = _callback(max_steps=5)
    _fit(model, instrument(_fast(data)), [callback], steps=50)
    assert callback.measurement().figures().steps == 5


def test_trace_is_captured_and_its_top_ops_listed(model: Any, data: Any, tmp_path: Path) -> None:
    callback = _callback(trace_dir=str(tmp_path), trace_steps=4)
    _fit(model, instrument(_fast(data)), [callback], steps=14)
    measurement = callback.measurement()
    trace = measurement.trace
    assert trace is not None and trace.error is None and trace.steps == 4
    assert Path(trace.path).name.endswith(".xplane.pb")
    assert any("Conv2D" in op.type for op in trace.top(10))
    figures = measurement.figures()
    assert figures.traced_steps_excluded == 4 and figures.steps == 10


def test_steps_per_execution_makes_input_not_measurable(data: Any) -> None:
    net = models.mlp(input_shape=(32, 32, 3), hidden=(8,))
    net.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", steps_per_execution=2)
    callback = _callback(warmup_steps=1)
    net.fit(
        instrument(_fast(data)),
        steps_per_epoch=8,
        epochs=1,
        verbose=0,
        shuffle=False,
        callbacks=[callback],
    )
    measurement = callback.measurement()
    assert measurement.input_note is not None and "steps_per_execution" in measurement.input_note
    assert measurement.records[-1].examples == 2 * BATCH


def test_a_model_compiled_to_run_eagerly_is_a_finding_with_its_fix(data: Any) -> None:
    """compile(run_eagerly=True) (a debugging switch left on): every step runs op by op; the
    diagnosis says so first, with the one-word fix. The same model compiled as usual is ok."""
    for eager in (True, False):
        net = models.mlp(input_shape=(32, 32, 3), hidden=(8,))
        net.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", run_eagerly=eager)
        callback = _callback(warmup_steps=1)
        net.fit(*data, batch_size=BATCH, epochs=1, verbose=0, callbacks=[callback])
        finding = callback.diagnose().get("run_eagerly")
        assert finding is not None
        if eager:
            assert finding.status == "warn" and "run_eagerly=True" in finding.title
            assert finding.fix is not None and "drop run_eagerly=True" in finding.fix
        else:
            assert finding.status == "ok"


def test_synthetic_rerun_restores_the_weights(model: Any, data: Any) -> None:
    before = [w.copy() for w in model.get_weights()]
    batch = ready_batch.first_batch(_fast(data))
    run = ready_batch.rerun(model, batch, summarize([0.01] * 5), steps=3, warmup=1)
    assert run.steps == 3 and run.step_s.median > 0
    for a, b in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_instrument_keeps_the_elements_and_counts_them(data: Any) -> None:
    ds = tf.data.Dataset.from_tensor_slices(data).batch(BATCH)
    clock = InputClock()
    assert clock.read() is None
    wrapped = instrument(ds, clock)
    assert int(wrapped.cardinality()) == int(ds.cardinality())
    before = clock.read()
    for a, b in zip(ds, wrapped, strict=True):
        np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
    wait, examples, fetches = difference(before, clock.read())
    assert fetches == 16 and examples == BATCH * 16 and wait is not None and wait >= 0
    with pytest.raises(UsageError, match=r"tf\.data\.Dataset"):
        instrument(data)


def test_instrument_measures_the_wait_of_a_pipeline_without_prefetch() -> None:
    def sleepy(x: Any) -> Any:
        time.sleep(0.02)
        return x

    slow = tf.data.Dataset.range(100).map(lambda v: tf.py_function(sleepy, [v], tf.int64))
    clock = InputClock()
    it = iter(instrument(slow, clock))
    next(it)
    before = clock.read()
    for _ in range(6):
        next(it)
        time.sleep(0.005)  # the consumer's "step": shorter than the pipeline
    wait, examples, fetches = difference(before, clock.read())
    assert fetches == 6 and examples == 6 and wait is not None
    assert wait / 6 == pytest.approx(0.015, abs=0.008)  # 20 ms per element, 5 ms overlapped


def test_device_busy_time_from_an_xspace() -> None:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    for index, spans in enumerate([[(0, 10), (5, 20)], [(0, 5)]]):
        plane = space.planes.add(name=f"/device:GPU:{index}")
        line = plane.lines.add(name="Stream #1(Compute)", timestamp_ns=1000)
        for begin_us, end_us in spans:
            line.events.add(offset_ps=begin_us * 10**6, duration_ps=(end_us - begin_us) * 10**6)
        plane.lines.add(name="Steps").events.add(offset_ps=0, duration_ps=10**12)
    space.planes.add(name="/host:CPU")
    busy = device_busy_us(space.SerializeToString())
    assert busy == {"/device:GPU:0": 20.0, "/device:GPU:1": 5.0}


# --- NVTX ranges (recorded at the boundary of tfaccel.profile.nvtx_marks) ----------------------


@pytest.fixture
def ranges(monkeypatch: pytest.MonkeyPatch) -> RecordedRanges:
    return record_ranges(monkeypatch)


def test_each_step_and_the_rerun_are_nvtx_ranges(
    model: Any, data: Any, ranges: RecordedRanges
) -> None:
    callback = _callback()
    _fit(model, instrument(_fast(data)), [callback], steps=10)
    steps = [e for s in range(WARMUP + 10) for e in (("push", "step", s), ("pop",))]
    assert ranges.events == [*steps, ("push", "rerun", None), ("pop",)]  # CPU: re-run anyway
    assert callback.measurement().synthetic is not None


def _depth(events: list[tuple[Any, ...]]) -> int:
    return sum(1 if event[0] == "push" else -1 for event in events)


class _OpenRanges(keras.callbacks.Callback):  # type: ignore[name-defined]
    """Put after the PerformanceCallback: the ranges still open when each hook runs."""

    def __init__(self, ranges: RecordedRanges) -> None:
        super().__init__()
        self.ranges = ranges
        self.seen: list[tuple[str, int]] = []

    def on_train_begin(self, logs: Any = None) -> None:
        self.seen.append(("train_begin", _depth(self.ranges.events)))

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self.seen.append(("epoch_end", _depth(self.ranges.events)))


def test_a_step_that_finds_the_data_exhausted_is_closed_at_the_epoch_end(
    model: Any, data: Any, ranges: RecordedRanges
) -> None:
    # unknown cardinality: Keras calls the train function until the data runs out, and that
    # last call gets on_train_batch_begin but no on_train_batch_end
    ds = tf.data.Dataset.from_tensor_slices(data).batch(BATCH).filter(lambda x, y: True)
    callback, probe = _callback(confirm=False), _OpenRanges(ranges)
    model.fit(instrument(ds), epochs=2, verbose=0, callbacks=[callback, probe])
    batches = len(data[0]) // BATCH
    pushed = [e[2] for e in ranges.events if e[0] == "push"]
    # each epoch ends with a begin that finds the data exhausted: it records nothing (so the
    # next step has the same index) and its range is closed at the epoch's end
    assert pushed == [*range(batches + 1), *range(batches, 2 * batches + 1)]
    assert probe.seen == [("train_begin", 0), ("epoch_end", 0), ("epoch_end", 0)]
    assert _depth(ranges.events) == 0
    assert len(callback.measurement().records) == 2 * batches


def test_a_step_that_raised_is_closed_when_the_next_fit_begins(
    model: Any, data: Any, ranges: RecordedRanges
) -> None:
    x, y = data
    x = x[: BATCH * 6].copy()
    x[BATCH * 3] = np.nan  # the fourth batch fails its check inside the train function
    checked = tf.data.Dataset.from_tensor_slices((x, y[: BATCH * 6])).batch(BATCH)
    checked = checked.map(lambda a, b: (tf.debugging.check_numerics(a, "bad batch"), b))
    callback, probe = _callback(confirm=False), _OpenRanges(ranges)
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad batch"):
        model.fit(checked, epochs=1, verbose=0, callbacks=[callback, probe])
    assert _depth(ranges.events) == 1  # Keras calls no hook after the step that raised
    _fit(model, instrument(_fast(data)), [callback, probe], steps=2)
    assert probe.seen[-2:] == [("train_begin", 0), ("epoch_end", 0)]
    assert _depth(ranges.events) == 0
    pushed = [e[2] for e in ranges.events if e[0] == "push"]
    assert pushed == [0, 1, 2, 3, *range(3, 3 + WARMUP + 2)]


def test_nvtx_false_marks_no_step(model: Any, data: Any, ranges: RecordedRanges) -> None:
    callback = _callback(nvtx=False)
    _fit(model, instrument(_fast(data)), [callback], steps=2)
    assert ranges.events == []
    with pytest.raises(UsageError, match="nvtx"):
        PerformanceCallback(nvtx="yes")  # type: ignore[arg-type]
