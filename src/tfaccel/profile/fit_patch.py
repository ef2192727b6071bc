"""Profile an unchanged script: ``keras.Model.fit`` gains a PerformanceCallback for a while.

While :func:`patch_fit` is active, every ``fit`` call

* puts the session's ``PerformanceCallback`` first in ``callbacks`` (unless the script passes
  its own, which is then used), one callback for the whole script so its figures add up;
* instruments the training data for the input wait: a ``tf.data.Dataset`` through the
  public :func:`tfaccel.profile.input_wait.instrument`; arrays, generators and ``PyDataset`` through
  Keras' data adapter (``keras.src.trainers.data_adapters.get_data_adapter``, the dataset Keras
  builds is wrapped the same way). That is a Keras internal: where it is missing, the input
  wait is reported as not measured, with the reason.

While :func:`patch_train_on_batch` is active, a loop that hands its batches to
``model.train_on_batch`` is timed as it is: each model's calls are the steps of a
:class:`~tfaccel.profile.StepTimer` made at its first call (``train_on_batch`` returns its
results on the host, so each call is a whole step); the Python between calls, the loop's own
slicing of its next batch included, is host overhead.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Iterator
from typing import Any

from tfaccel.core.errors import UsageError
from tfaccel.profile.input_wait import instrument
from tfaccel.profile.session import Session
from tfaccel.workload.data import kind_of, leading_dim
from tfaccel.workload.keras_fit import replaced_fit, replaced_method
from tfaccel.workload.record import KERAS_DEFAULT_BATCH

__all__ = ["patch_fit", "patch_train_on_batch"]


def patch_fit(session: Session) -> contextlib.AbstractContextManager[None]:
    """Patch ``keras.Model.fit`` for the duration of the block (see the module notes)."""

    def make(original: Any, signature: inspect.Signature) -> Any:
        def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self, *args, **kwargs)
            if not _eager():  # tf.compat.v1.disable_eager_execution(): no callback can read
                return original(*bound.args, **bound.kwargs)  # the fit runs (or fails) as is
            arguments = bound.arguments
            session.fit_calls += 1
            callback = _callback(session, arguments, self)
            x = arguments.get("x")
            if type(self.distribute_strategy).__name__ != "_DefaultDistributionStrategy":
                return original(*bound.args, **bound.kwargs)  # input not measurable: leave it be
            try:
                with _instrumented_input(x, callback) as replacement:
                    if replacement is not None:
                        arguments["x"] = replacement
                    return original(*bound.args, **bound.kwargs)
            finally:
                callback.set_model(None)  # the next fit sets it again; a model gone is freed

        return fit

    return replaced_fit(make)


def _eager() -> bool:
    """Whether TensorFlow runs eagerly (a script may have called
    ``tf.compat.v1.disable_eager_execution()``, under which Keras 3's ``fit`` does not run)."""
    import tensorflow as tf

    return bool(tf.executing_eagerly())


_LOOP_INPUT_NOTE = (
    "not measured: the loop prepares each batch itself before its train_on_batch call; that "
    "time is counted as host overhead"
)


def patch_train_on_batch(session: Session) -> contextlib.AbstractContextManager[None]:
    """Time every ``keras.Model.train_on_batch`` call for the duration of the block (see the
    module notes); the timers register with ``session`` as the script's own would."""
    timers: dict[int, Any] = {}

    def make(original: Any, signature: inspect.Signature) -> Any:
        def train_on_batch(self: Any, *args: Any, **kwargs: Any) -> Any:
            from tfaccel.profile.timer import StepTimer  # local: the timer reads the session

            timer = timers.get(id(self))
            if timer is None:
                timer = timers[id(self)] = StepTimer()
                timer.recorder.context.source = f"train_on_batch loop ({self.name})"
            x = signature.bind(self, *args, **kwargs).arguments.get("x")
            with timer.step(examples=leading_dim(x)):
                result = original(self, *args, **kwargs)
            timer.recorder.measurement.input_note = _LOOP_INPUT_NOTE
            return result

        return train_on_batch

    return replaced_method("train_on_batch", make)


def _callback(session: Session, arguments: dict[str, Any], model: Any) -> Any:
    """The PerformanceCallback of ``model``'s fits (the script's own, or the session's for
    this model: a script that fits several models is profiled one run per model)."""
    from tfaccel.profile.keras_callback import PerformanceCallback  # local: imports TensorFlow

    given = arguments.get("callbacks")
    callbacks = list(given) if isinstance(given, (list, tuple)) else ([given] if given else [])
    mine = [c for c in callbacks if isinstance(c, PerformanceCallback)]
    if mine:
        callback = mine[0]
    else:
        known = session.callbacks.get(id(model))
        if known is not None and known[0]() is model:
            callback = known[1]
        else:  # a new model (an id of a model gone may come back: the reference says)
            callback = PerformanceCallback()
            session.callbacks[id(model)] = (weakref.ref(model), callback)
        callbacks.insert(0, callback)
    arguments["callbacks"] = callbacks
    x = arguments.get("x")
    batch = arguments.get("batch_size")
    if callback.recorder.context.batch_size is None and kind_of(x) in ("arrays", "dict"):
        callback.recorder.context.batch_size = int(batch or KERAS_DEFAULT_BATCH)
    return callback


@contextlib.contextmanager
def _instrumented_input(x: Any, callback: Any) -> Iterator[Any]:
    """Yield a replacement for ``x`` (an instrumented dataset) or None, and hook Keras' data
    adapter for the other kinds of input while the block runs."""
    if kind_of(x) == "dataset":
        replacement = None
        try:
            replacement = instrument(x, callback.clock)
        except UsageError as exc:
            callback.recorder.measurement.notes.append(f"input wait not measured: {exc.what}")
        yield replacement
        return
    try:
        from keras.src.trainers import data_adapters
    except ImportError:
        data_adapters = None
    if data_adapters is None or not hasattr(data_adapters, "get_data_adapter"):
        callback.recorder.measurement.notes.append(
            "input wait not measured: this Keras has no data-adapter hook; pass "
            "tfaccel.keras.instrument(dataset) to fit"
        )
        yield None
        return
    original = data_adapters.get_data_adapter
    calls = {"n": 0}

    def get_data_adapter(*args: Any, **kwargs: Any) -> Any:
        adapter = original(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 1:  # the training data; a second call is the validation data
            make = adapter.get_tf_dataset

            def get_tf_dataset() -> Any:
                return instrument(make(), callback.clock)

            adapter.get_tf_dataset = get_tf_dataset
        return adapter

    data_adapters.get_data_adapter = get_data_adapter
    try:
        yield None
    finally:
        data_adapters.get_data_adapter = original
