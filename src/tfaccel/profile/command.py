"""What ``tfaccel profile`` runs: a reference model for N steps, or a user's script.

* :func:`profile_model` trains a reference model (``tfaccel.models``) for warm-up + N steps on
  synthetic images fed by ``tfaccel.data.pipeline`` (or, ``input="generator"``, a naive
  per-example ``from_generator`` pipeline), with a PerformanceCallback on an instrumented
  dataset; when asked, a second short run captures a profiler trace (traced steps are slower,
  so they are kept out of the figures).
* :func:`profile_script` runs a script as ``__main__`` with ``keras.Model.fit`` patched
  (:mod:`tfaccel.profile.fit_patch`) and a session that collects every StepTimer it creates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfaccel import data, models
from tfaccel.core.errors import UsageError
from tfaccel.profile import trace
from tfaccel.profile.bottlenecks import Diagnosis, find_bottlenecks
from tfaccel.profile.fit_patch import patch_fit, patch_train_on_batch
from tfaccel.profile.input_wait import instrument
from tfaccel.profile.measurement import Measurement
from tfaccel.profile.session import Session, open_session

__all__ = [
    "INPUTS",
    "ModelProfile",
    "NoStepsError",
    "ScriptProfile",
    "check_model_request",
    "profile_model",
    "profile_script",
]

INPUTS = ("pipeline", "generator")
MAX_EXAMPLES = 8192


class NoStepsError(UsageError):
    """The script ran to its end without a step for the profiler to time."""


@dataclass
class ModelProfile:
    """The result of :func:`profile_model`."""

    model: str
    batch_size: int
    input: str
    precision: str
    steps: int
    warmup_steps: int
    measurement: Measurement
    diagnosis: Diagnosis
    pipeline: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": {
                "model": self.model,
                "batch_size": self.batch_size,
                "input": self.input,
                "precision": self.precision,
                "steps": self.steps,
                "warmup_steps": self.warmup_steps,
            },
            "pipeline": self.pipeline,
            "measurement": self.measurement.to_dict(),
            "diagnosis": self.diagnosis.to_dict(),
        }


@dataclass
class ScriptProfile:
    """The result of :func:`profile_script`: one run per timer the script used."""

    script: str
    args: list[str]
    exit_status: int
    fit_calls: int
    runs: list[tuple[str, Measurement, Diagnosis]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": {"script": self.script, "args": self.args},
            "exit_status": self.exit_status,
            "fit_calls": self.fit_calls,
            "runs": [
                {"label": label, "measurement": m.to_dict(), "diagnosis": d.to_dict()}
                for label, m, d in self.runs
            ],
        }


def _check_counts(steps: int | None, warmup: int, trace_steps: int) -> None:
    if steps is not None and steps < 1:
        raise UsageError(
            "The number of steps to profile must be at least 1",
            expected="--steps N with N >= 1 (10 or more for a diagnosis)",
            received=f"--steps {steps}",
            fix="pass --steps 50",
        )
    if warmup < 0:
        raise UsageError(
            "The number of warm-up steps cannot be negative",
            expected="--warmup N with N >= 0",
            received=f"--warmup {warmup}",
            fix="pass --warmup 5",
        )
    if trace_steps < 1:
        raise UsageError(
            "The number of traced steps must be at least 1",
            expected="--trace-steps N with N >= 1",
            received=f"--trace-steps {trace_steps}",
            fix="pass --trace-steps 20",
        )


def check_model_request(
    name: str,
    *,
    steps: int = 50,
    warmup: int = 5,
    batch_size: int = 64,
    input: str = "pipeline",
    trace_dir: str | None = None,
    trace_steps: int = 20,
) -> None:
    """Refuse what :func:`profile_model` would refuse, without importing TensorFlow.

    Raises:
        UsageError: steps < 1, warmup < 0, an unknown model, input or batch size.
        TraceError: ``trace_dir`` is given and the trace cannot be written there.
    """
    _check_counts(steps, warmup, trace_steps)
    if trace_dir:
        trace.check_logdir(trace_dir)  # before the training run, not when the trace starts
    if input not in INPUTS:
        raise UsageError(
            f"Unknown input kind {input!r}",
            expected="one of " + ", ".join(INPUTS),
            received=repr(input),
            fix="pass --input pipeline",
        )
    if batch_size < 1:
        raise UsageError(
            "The batch size must be at least 1",
            expected="--batch-size B with B >= 1",
            received=str(batch_size),
            fix="pass --batch-size 64",
        )

    models.model_key(name)  # an unknown name is refused, with the names


def profile_model(
    name: str,
    *,
    steps: int = 50,
    warmup: int = 5,
    batch_size: int = 64,
    input: str = "pipeline",
    precision: str = "float32",
    tiny: bool = False,
    trace_dir: str | None = None,
    trace_steps: int = 20,
    live: bool = True,
    log_every: int | None = None,
) -> ModelProfile:
    """Train a reference model for ``warmup + steps`` steps and diagnose it.

    Raises:
        UsageError: steps < 1, warmup < 0, an unknown model, input or batch size.
        TraceError: ``trace_dir`` is given and the trace cannot be written there (checked
            before the model is built).
    """
    check_model_request(
        name,
        steps=steps,
        warmup=warmup,
        batch_size=batch_size,
        input=input,
        trace_dir=trace_dir,
        trace_steps=trace_steps,
    )

    key = models.model_key(name)
    model = build_model(key, precision=precision, tiny=tiny)
    info = models.MODELS[key]
    dataset, pipeline_info = _dataset(
        info.input_shape, info.classes, batch_size, steps + warmup, input
    )

    from tfaccel.profile.keras_callback import PerformanceCallback  # local: imports TensorFlow

    callback = PerformanceCallback(
        warmup_steps=warmup,
        log_every=log_every if log_every is not None else max(10, steps // 5),
        live=live,
        summary=False,
        batch_size=batch_size,
    )
    model.fit(
        instrument(dataset),
        steps_per_epoch=warmup + steps,
        epochs=1,
        verbose=0,
        shuffle=False,
        callbacks=[callback],
    )
    measurement = callback.measurement()
    if trace_dir:
        tracer = PerformanceCallback(
            warmup_steps=2,
            log_every=0,
            live=False,
            summary=False,
            confirm=False,
            trace_dir=trace_dir,
            trace_steps=trace_steps,
            batch_size=batch_size,
            sample_gpu=False,
        )
        model.fit(
            instrument(dataset),
            steps_per_epoch=2 + trace_steps,
            epochs=1,
            verbose=0,
            shuffle=False,
            callbacks=[tracer],
        )
        measurement.trace = tracer.measurement().trace
        measurement.notes.append(
            f"the trace comes from a separate run of {trace_steps} steps (a trace slows steps down)"
        )
    return ModelProfile(
        model=key,
        batch_size=batch_size,
        input=input,
        precision=precision,
        steps=steps,
        warmup_steps=warmup,
        measurement=measurement,
        diagnosis=find_bottlenecks(measurement),
        pipeline=pipeline_info,
    )


def build_model(name: str, *, precision: str = "float32", tiny: bool = False) -> Any:
    """The reference model ``profile --model`` trains, compiled as it compiles it."""
    model = models.build(name, tiny=tiny, dtype=precision)
    _compile(model, precision)
    return model


def _compile(model: Any, precision: str) -> None:
    models.compile_reference(model, precision)


def _dataset(
    shape: tuple[int, ...], classes: int, batch_size: int, steps: int, kind: str
) -> tuple[Any, dict[str, Any] | None]:
    """Synthetic 8-bit images, scaled to [0, 1] on the way in: by a vectorised map in
    ``tfaccel.data.pipeline``, or per example in Python by the naive generator."""
    import numpy as np
    import tensorflow as tf

    count = max(batch_size, min(MAX_EXAMPLES, batch_size * steps))
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(count, *shape), dtype=np.uint8)
    y = rng.integers(0, classes, size=count, dtype=np.int32)
    if kind == "pipeline":
        ds = data.pipeline(
            (x, y), batch_size, map_fn=scale_images, seed=0, repeat=True, drop_remainder=True
        )
        return ds, data.describe(ds).to_dict()

    def examples() -> Any:
        for i in itertools.count():
            yield x[i % count].astype(np.float32) / 255.0, y[i % count]

    signature = (tf.TensorSpec(shape, tf.float32), tf.TensorSpec((), tf.int32))
    naive = tf.data.Dataset.from_generator(examples, output_signature=signature)
    return naive.batch(batch_size, drop_remainder=True), None


def scale_images(x: Any, y: Any) -> tuple[Any, Any]:
    """uint8 pixels to float32 in [0, 1]; the label unchanged."""
    import tensorflow as tf

    return tf.cast(x, tf.float32) / 255.0, y


def profile_script(
    script: str,
    args: list[str],
    run: Callable[[str, list[str]], int],
    *,
    steps: int | None = None,
    warmup: int = 5,
    trace_dir: str | None = None,
    trace_steps: int = 20,
    live: bool = True,
) -> ScriptProfile:
    """Run ``script`` with ``args`` as ``__main__``, timing its ``fit`` calls and StepTimers.

    Args:
        script: path of the script (checked by the caller).
        args: the script's own arguments.
        run: runs the script as ``__main__`` and returns its exit status (the CLI passes
            ``tfaccel.scripts.run_script``, which prints the script's own traceback).
        steps: stop each ``fit`` after the warm-up plus this many steps (None: never).
        warmup: warm-up steps of each ``fit`` (and of StepTimers created without a value).
        trace_dir: capture a trace of ``trace_steps`` steps after the first warm-up.
        trace_steps: steps in the trace.
        live: print the live line.

    Returns:
        The script's exit status and one (label, measurement, diagnosis) per timer.

    Raises:
        UsageError: steps < 1 or warmup < 0.
        TraceError: ``trace_dir`` is given and the trace cannot be written there (checked
            before the script runs).
        NoStepsError: the script ended normally without a step to time.
    """
    _check_counts(steps, warmup, trace_steps)
    if trace_dir:
        trace.check_logdir(trace_dir)

    session = Session(
        warmup_steps=warmup,
        max_steps=steps,
        trace_dir=trace_dir,
        trace_steps=trace_steps,
        live=live,
    )
    with open_session(session), patch_fit(session), patch_train_on_batch(session):
        status = run(script, args)
    result = ScriptProfile(script, list(args), status, session.fit_calls)
    counts: dict[str, int] = {}
    finished = [(r, r.finish()) for r in session.recorders]
    fitted = [r for r, m in finished if m.records and r.context.source == "keras fit"]
    for recorder, measurement in finished:
        if not measurement.records:
            continue
        label = recorder.context.source
        if len(fitted) > 1 and recorder in fitted and recorder.context.model:
            label += f" of {recorder.context.model}"  # one run per model the script fits
        counts[label] = counts.get(label, 0) + 1
        if counts[label] > 1:
            label += f" #{counts[label]}"
        result.runs.append((label, measurement, find_bottlenecks(measurement)))
    if not result.runs and status == 0:
        raise NoStepsError(
            f"The script {script!r} ran to its end without a training step to time",
            expected="a script that calls model.fit (Keras) or times its loop with "
            "tfaccel.profile.StepTimer",
            received=f"{session.fit_calls} model.fit call(s), no StepTimer step",
            fix="profile the script that trains, or wrap its loop: `with timer.step(): ...` "
            "(see docs/profile.md)",
        )
    return result
