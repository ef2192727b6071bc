"""``train()``: one data-parallel training loop for every strategy.

Keras 3's ``model.fit`` trains under MirroredStrategy but fails under
MultiWorkerMirroredStrategy (``ValueError: Attempt to convert a value (PerReplica:...)``).
Rather than one path per strategy, ``train()`` always runs its own loop, the one TensorFlow's
custom-training guide describes, so a script behaves the same on one CPU, on two logical
devices, on eight GPUs and on a cluster:

- ``strategy.run`` takes one step on every replica, in a ``tf.function``;
- each replica's loss is averaged over the *global* batch (``tf.nn.compute_average_loss``),
  so the all-reduced (summed) gradients are those of the global batch's mean loss;
- the input is ``distribute_datasets_from_function`` over ``dataset_fn(epoch)``, each global
  batch split exactly over the replicas (:mod:`tfaccel.distribute.batches`);
- loss and metrics are summed across replicas (``strategy.reduce``) and averaged per epoch;
- checkpoints (model, optimizer, step, epoch) every ``checkpoint_every`` steps and at the end;
  a new run with the same ``checkpoint_dir`` resumes at the saved step, in the same place in
  the data;
- with ``checkpoint_dir``, SIGTERM saves at the next step boundary, every worker at the same
  step (:mod:`tfaccel.distribute.preemption`), and exits with status 75;
- before each step a heartbeat tells ``tfaccel launch`` the step being started
  (:mod:`tfaccel.distribute.heartbeat`), so it can tell a hung group from a slow one.

Example:
    >>> import tfaccel.distribute as dist
    >>> result = dist.train(
    ...     model_fn=lambda: keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)]),
    ...     dataset_fn=lambda epoch: tf.data.Dataset.from_tensor_slices((x, y)),
    ...     epochs=3, global_batch_size=64, learning_rate=0.05, scale_learning_rate=True,
    ...     checkpoint_dir="ckpt", checkpoint_every=50, seed=0)
    >>> print(result)
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfaccel.core.checks import (
    MAX_COUNT,
    check_callable,
    check_dir_argument,
    check_flag,
    check_int,
    check_mapping,
    check_number,
)
from tfaccel.core.errors import UsageError, shown
from tfaccel.distribute.batches import DatasetFn, check_divisible, input_fn, steps_per_epoch
from tfaccel.distribute.checkpoint import Checkpointer
from tfaccel.distribute.choice import StrategyChoice
from tfaccel.distribute.choice import strategy as choose_strategy
from tfaccel.distribute.heartbeat import heartbeat
from tfaccel.distribute.preemption import Preempted, SigtermFlag

__all__ = ["EpochLog", "StepLog", "TrainResult", "train"]


@dataclass(frozen=True)
class StepLog:
    """One global step, as ``on_step`` receives it.

    Attributes:
        step: the global step just finished (1 for the first).
        epoch: its epoch (0-based).
        loss: the mean loss over the global batch.
        metrics: metric name -> mean over the global batch.
    """

    step: int
    epoch: int
    loss: float
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class EpochLog:
    """The steps of one epoch run by this call (fewer than a full epoch after a resume).

    Attributes:
        epoch: the epoch (0-based).
        steps: global steps run.
        loss: mean of their losses.
        metrics: metric name -> mean over their examples.
        seconds: wall time of those steps.
    """

    epoch: int
    steps: int
    loss: float
    metrics: Mapping[str, float]
    seconds: float


@dataclass
class TrainResult:
    """What ``train()`` did.

    Attributes:
        model: the trained Keras model (its variables are the strategy's).
        history: one EpochLog per epoch this call ran steps of.
        global_step: the step reached (``epochs * steps_per_epoch`` when done).
        start_step: the step this call started at (> 0 after a resume).
        steps_per_epoch: global steps per epoch.
        global_batch_size: examples per global step.
        num_replicas: replicas in sync.
        learning_rate: the learning rate used (after linear scaling, if asked).
        strategy: the strategy and why it was chosen, as text.
        checkpoint: the newest checkpoint (on the chief), None without ``checkpoint_dir``.
        seconds: wall time of the steps run.
    """

    model: Any
    history: list[EpochLog]
    global_step: int
    start_step: int
    steps_per_epoch: int
    global_batch_size: int
    num_replicas: int
    learning_rate: float
    strategy: str
    checkpoint: str | None
    seconds: float

    @property
    def steps_run(self) -> int:
        return self.global_step - self.start_step

    @property
    def examples_per_second(self) -> float:
        """Training throughput of this call, over all replicas."""
        return self.steps_run * self.global_batch_size / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, without the model."""
        return {
            "history": [dataclasses.asdict(log) for log in self.history],
            "global_step": self.global_step,
            "start_step": self.start_step,
            "steps_run": self.steps_run,
            "steps_per_epoch": self.steps_per_epoch,
            "global_batch_size": self.global_batch_size,
            "num_replicas": self.num_replicas,
            "learning_rate": self.learning_rate,
            "strategy": self.strategy,
            "checkpoint": self.checkpoint,
            "seconds": self.seconds,
            "examples_per_second": self.examples_per_second,
        }

    def __str__(self) -> str:
        resumed = f", resumed at step {self.start_step}" if self.start_step else ""
        lines = [
            f"trained {self.steps_run} steps to step {self.global_step}{resumed} "
            f"({self.examples_per_second:,.0f} examples/s over {_replicas(self.num_replicas)}, "
            f"learning rate {self.learning_rate:g})",
            f"  strategy: {self.strategy}",
        ]
        lines += [f"  {_epoch_line(log)}" for log in self.history]
        if self.checkpoint:
            lines.append(f"  checkpoint: {self.checkpoint}")
        return "\n".join(lines)


def _replicas(count: int) -> str:
    return f"{count} replica{'s' if count != 1 else ''}"


def _epoch_line(log: EpochLog) -> str:
    metrics = "".join(f" {name} {value:.4g}" for name, value in log.metrics.items())
    steps = f"{log.steps} step{'s' if log.steps != 1 else ''}"
    return f"epoch {log.epoch}: {steps}, loss {log.loss:.4g}{metrics} ({log.seconds:.2f} s)"


def train(
    model_fn: Callable[[], Any],
    dataset_fn: DatasetFn,
    epochs: int,
    global_batch_size: int,
    *,
    steps_per_epoch: int | None = None,
    loss: str | Callable[[Any, Any], Any] = "mse",
    metrics: Mapping[str, str | Callable[[Any, Any], Any]] | None = None,
    optimizer_fn: Callable[[float], Any] | None = None,
    learning_rate: float = 0.01,
    scale_learning_rate: bool = False,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    max_checkpoints: int = 3,
    strategy: StrategyChoice | Any | None = None,
    seed: int | None = None,
    on_step: Callable[[StepLog], None] | None = None,
    verbose: bool = True,
) -> TrainResult:
    """Train ``model_fn()`` data-parallel under ``strategy``, with checkpoints and resume.

    Args:
        model_fn: builds the Keras model; called inside ``strategy.scope()``. A model without
            an input shape is built from the dataset's first element.
        dataset_fn: ``dataset_fn(epoch) -> tf.data.Dataset`` of single ``(features, labels)``
            examples, unbatched, in an order that depends only on ``epoch`` (shuffle with a
            seed such as ``1000 + epoch``). ``train()`` batches and splits it.
        epochs: epochs to reach (a resumed run stops at the same place).
        global_batch_size: examples per step over all replicas; a multiple of the replicas.
        steps_per_epoch: global steps per epoch; default: the full global batches in
            ``dataset_fn(0)`` (required when its length is unknown).
        loss: per-example loss: a Keras loss name ("mse", "sparse_categorical_crossentropy")
            or ``fn(y_true, y_pred)`` returning one value per example.
        metrics: name -> per-example metric (a Keras function name such as
            "sparse_categorical_accuracy", or ``fn(y_true, y_pred)``).
        optimizer_fn: ``optimizer_fn(learning_rate) -> keras optimizer``; default SGD.
        learning_rate: the learning rate.
        scale_learning_rate: multiply it by the replicas (the linear scaling rule, for a rate
            tuned on one device running ``global_batch_size / replicas`` per step).
        checkpoint_dir: where to save and resume from; shared by all workers of a cluster.
            With it, SIGTERM (in the main thread) is a preemption notice: every worker saves
            at the same next step boundary and ``Preempted`` (``SystemExit(75)``) is raised.
        checkpoint_every: save every N global steps (besides the end); needs checkpoint_dir.
        max_checkpoints: checkpoints kept.
        strategy: a StrategyChoice or a ``tf.distribute.Strategy``; default
            :func:`tfaccel.distribute.strategy` (create it first thing in the script).
        seed: seed Python, NumPy and TensorFlow before the model is built (same initial
            weights on every worker).
        on_step: called after every global step with a StepLog, on every worker.
        verbose: print a line per epoch (on the chief only).

    Returns:
        A TrainResult (model, per-epoch history, steps, throughput, checkpoint).

    Raises:
        UsageError: a bad argument (checked before anything is built: a count that is not a
            positive integer, a learning rate that is not a finite number > 0, a switch that
            is not a bool, a ``checkpoint_dir`` that cannot be written: a file, a read-only
            directory, or a missing directory whose parent cannot be written),
            ``global_batch_size`` not divisible by the replicas, or a dataset shorter than
            ``steps_per_epoch`` global batches.
        CheckpointError: the checkpoint in ``checkpoint_dir`` cannot be resumed by this run.
        Preempted: SIGTERM arrived (with ``checkpoint_dir``); the checkpoint of the step it
            stopped at is saved. Uncaught, the process exits with status 75.
        ClusterConfigError: ``TF_CONFIG`` is malformed (when the strategy is chosen here).

    Example:
        >>> result = tfaccel.distribute.train(make_model, make_examples, epochs=2,
        ...                                   global_batch_size=64, checkpoint_dir="ckpt",
        ...                                   checkpoint_every=20, seed=0)
        >>> result.history[-1].loss
    """
    _check_arguments(
        model_fn=model_fn,
        dataset_fn=dataset_fn,
        epochs=epochs,
        global_batch_size=global_batch_size,
        steps_per_epoch=steps_per_epoch,
        metrics=metrics,
        optimizer_fn=optimizer_fn,
        learning_rate=learning_rate,
        scale_learning_rate=scale_learning_rate,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        max_checkpoints=max_checkpoints,
        seed=seed,
        on_step=on_step,
        verbose=verbose,
    )
    loss_fn = _per_example(loss, "loss")
    metric_fns = {
        name: _per_example(spec, f"metric {name!r}") for name, spec in (metrics or {}).items()
    }
    choice = _as_choice(strategy)
    dist = choice.strategy
    check_divisible(global_batch_size, choice.num_replicas, choice.name)
    import keras
    import tensorflow as tf

    rate = learning_rate * (choice.num_replicas if scale_learning_rate else 1)
    steps = _steps_per_epoch(dataset_fn, global_batch_size, steps_per_epoch)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    with dist.scope():
        model = model_fn()
        _build(model, dataset_fn)
        optimizer = optimizer_fn(rate) if optimizer_fn else keras.optimizers.SGD(rate)
        optimizer.build(model.trainable_variables)
    keeper = None
    if checkpoint_dir is not None:
        keeper = Checkpointer(
            checkpoint_dir,
            {"model": model, "optimizer": optimizer},
            is_chief=choice.is_chief,
            task=choice.task,
            max_to_keep=max_checkpoints,
        )
    start = (
        keeper.restore(global_batch_size=global_batch_size, steps_per_epoch=steps) if keeper else 0
    )
    step_fn = _step_function(tf, dist, model, optimizer, loss_fn, metric_fns, global_batch_size)
    run = _Run(choice, keeper, global_batch_size, steps, checkpoint_every, on_step, verbose)
    with run.sigterm.catching(enabled=keeper is not None):
        history, seconds = run.epochs(step_fn, dataset_fn, start, epochs)
    if run.sigterm.is_set:  # after the last step's flag was read: the end is saved, say so
        raise Preempted(max(start, epochs * steps))
    return TrainResult(
        model=model,
        history=history,
        global_step=max(start, epochs * steps),
        start_step=start,
        steps_per_epoch=steps,
        global_batch_size=global_batch_size,
        num_replicas=choice.num_replicas,
        learning_rate=rate,
        strategy=str(choice),
        checkpoint=keeper.latest if keeper and choice.is_chief else None,
        seconds=seconds,
    )


def _steps_per_epoch(dataset_fn: DatasetFn, global_batch_size: int, requested: int | None) -> int:
    """Steps per epoch, refusing a dataset known to be shorter than ``requested`` batches."""
    dataset = dataset_fn(0)
    steps = steps_per_epoch(dataset, global_batch_size, requested)
    cardinality = int(dataset.cardinality())
    if requested is not None and 0 <= cardinality < requested * global_batch_size:
        raise _short_dataset(requested, global_batch_size, f"{cardinality} examples")
    return steps


def _short_dataset(steps: int, global_batch_size: int, received: str) -> UsageError:
    return UsageError(
        "dataset_fn(epoch) ran out of examples before the end of the epoch",
        expected=f"at least steps_per_epoch x global_batch_size = {steps} x "
        f"{global_batch_size} examples each epoch",
        received=received,
        fix="lower steps_per_epoch, or .repeat() the dataset in dataset_fn",
    )


class _Run:
    """The epoch loop: steps, logs, checkpoints."""

    def __init__(
        self,
        choice: StrategyChoice,
        keeper: Checkpointer | None,
        global_batch_size: int,
        steps: int,
        checkpoint_every: int | None,
        on_step: Callable[[StepLog], None] | None,
        verbose: bool,
    ) -> None:
        self.choice = choice
        self.keeper = keeper
        self.global_batch_size = global_batch_size
        self.steps = steps
        self.checkpoint_every = checkpoint_every
        self.on_step = on_step
        self.verbose = verbose and choice.is_chief
        self.sigterm = SigtermFlag()

    def epochs(
        self, step_fn: Callable[[Any, Any], Any], dataset_fn: DatasetFn, start: int, epochs: int
    ) -> tuple[list[EpochLog], float]:
        import tensorflow as tf

        history: list[EpochLog] = []
        total_seconds = 0.0
        step = start
        last_saved = start
        for epoch in range(start // self.steps, epochs):
            skip = step - epoch * self.steps
            make = input_fn(dataset_fn, epoch, self.global_batch_size, self.steps, skip)
            iterator = iter(self.choice.strategy.distribute_datasets_from_function(make))
            losses: list[float] = []
            sums: dict[str, float] = {}
            began = time.perf_counter()
            for _ in range(skip, self.steps):
                heartbeat(step + 1)
                stop = tf.constant(1.0 if self.sigterm.is_set else 0.0)
                try:
                    loss_value, metric_values, stopping = step_fn(iterator, stop)
                except tf.errors.OutOfRangeError:
                    raise _short_dataset(
                        self.steps, self.global_batch_size, f"fewer examples in epoch {epoch}"
                    ) from None
                step += 1
                losses.append(float(loss_value))
                for name, value in metric_values.items():
                    sums[name] = sums.get(name, 0.0) + float(value)
                if self.on_step is not None:
                    per_example = {
                        k: float(v) / self.global_batch_size for k, v in metric_values.items()
                    }
                    self.on_step(StepLog(step, epoch, losses[-1], per_example))
                if self.keeper and self.checkpoint_every and step % self.checkpoint_every == 0:
                    self._save(step)
                    last_saved = step
                if float(stopping) > 0 and step < epochs * self.steps:
                    self._preempted(step, last_saved)
            seconds = time.perf_counter() - began
            total_seconds += seconds
            examples = len(losses) * self.global_batch_size
            log = EpochLog(
                epoch=epoch,
                steps=len(losses),
                loss=sum(losses) / len(losses) if losses else float("nan"),
                metrics={name: value / examples for name, value in sums.items()},
                seconds=seconds,
            )
            history.append(log)
            if self.verbose:
                print(_epoch_line(log), file=sys.stdout, flush=True)
        if self.keeper and step != last_saved:
            self._save(step)
        heartbeat(step, done=True)
        return history, total_seconds

    def _preempted(self, step: int, last_saved: int) -> None:
        """A worker got SIGTERM: all save this step (the same on every worker) and stop."""
        if step != last_saved:
            self._save(step)
        heartbeat(step, done=True)
        if self.verbose:
            print(f"preempted (SIGTERM): saved step {step}; exiting", file=sys.stdout, flush=True)
        raise Preempted(step)

    def _save(self, step: int) -> None:
        assert self.keeper is not None
        self.keeper.save(
            step=step,
            epoch=step // self.steps,
            global_batch_size=self.global_batch_size,
            steps_per_epoch=self.steps,
        )


def _step_function(
    tf: Any,
    dist: Any,
    model: Any,
    optimizer: Any,
    loss_fn: Callable[[Any, Any], Any],
    metric_fns: Mapping[str, Callable[[Any, Any], Any]],
    global_batch_size: int,
) -> Callable[[Any, Any], Any]:
    """One global step: a step on each replica, then loss and metric sums over replicas.

    ``stop`` (1.0 when this worker got SIGTERM) rides in the all-reduce of the loss, so every
    worker gets the same count of replicas told to stop, after the same step.
    """

    def replica_step(features: Any, labels: Any, stop: Any) -> tuple[Any, dict[str, Any]]:
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            per_example = tf.cast(loss_fn(labels, predictions), tf.float32)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
            scaled = optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        sums = {
            name: tf.reduce_sum(tf.cast(fn(labels, predictions), tf.float32))
            for name, fn in metric_fns.items()
        }
        return tf.stack([loss, stop]), sums

    @tf.function
    def step(iterator: Any, stop: Any) -> tuple[Any, dict[str, Any], Any]:
        features, labels = next(iterator)
        loss_and_stop, sums = dist.run(replica_step, args=(features, labels, stop))
        total = dist.reduce(tf.distribute.ReduceOp.SUM, loss_and_stop, axis=None)
        reduced = {
            k: dist.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in sums.items()
        }
        return total[0], reduced, total[1]

    return step


def _as_choice(strategy: StrategyChoice | Any | None) -> StrategyChoice:
    if strategy is None:
        return choose_strategy()
    if isinstance(strategy, StrategyChoice):
        return strategy
    if not hasattr(strategy, "run") or not hasattr(strategy, "num_replicas_in_sync"):
        raise UsageError(
            "strategy is not a tf.distribute.Strategy",
            expected="None, tfaccel.distribute.strategy() or a tf.distribute.Strategy",
            received=type(strategy).__name__,
            fix="pass strategy=tfaccel.distribute.strategy() or leave it out",
        )
    import tensorflow as tf

    kinds = (
        (tf.distribute.MultiWorkerMirroredStrategy, "multi_worker"),
        (tf.distribute.TPUStrategy, "tpu"),
        (tf.distribute.MirroredStrategy, "mirrored"),
    )
    kind = next((name for cls, name in kinds if isinstance(strategy, cls)), "one_device")
    extended = strategy.extended
    task_type = getattr(extended, "_task_type", None)
    task_id = getattr(extended, "_task_id", None)
    return StrategyChoice(
        strategy,
        kind,
        "given by the caller",
        int(strategy.num_replicas_in_sync),
        is_chief=bool(extended.should_checkpoint),
        task=f"{task_type}:{task_id}" if task_type is not None else None,
    )


def _per_example(spec: str | Callable[[Any, Any], Any], what: str) -> Callable[[Any, Any], Any]:
    """A function ``(y_true, y_pred) -> one value per example`` for a name or a callable."""
    import inspect

    import keras

    if callable(spec) and not isinstance(spec, (keras.losses.Loss, keras.metrics.Metric)):
        return spec
    if isinstance(spec, str):
        for module in (keras.losses, keras.metrics):
            found = getattr(module, spec, None)
            if inspect.isfunction(found):
                return found
        try:
            found = keras.losses.get(spec)
        except ValueError:
            found = None
        if inspect.isfunction(found):
            return found
    raise UsageError(
        f"The {what} {shown(spec)} is not a per-example function",
        expected="a Keras loss/metric function name ('mse', 'mean_absolute_error', "
        "'sparse_categorical_crossentropy', 'sparse_categorical_accuracy') or "
        "fn(y_true, y_pred) returning one value per example",
        received=f"{shown(spec)} ({type(spec).__name__})",
        fix="pass the function (keras.losses.mean_squared_error) rather than a Loss or "
        "Metric object, whose reduction would average over the local batch only",
    )


def _build(model: Any, dataset_fn: DatasetFn) -> None:
    """Build a model that has no input shape yet from the dataset's element shape."""
    if model.built:
        return
    spec = dataset_fn(0).element_spec[0]
    model.build((None, *spec.shape))


def _check_arguments(
    *,
    model_fn: object,
    dataset_fn: object,
    epochs: object,
    global_batch_size: object,
    steps_per_epoch: object,
    metrics: object,
    optimizer_fn: object,
    learning_rate: object,
    scale_learning_rate: object,
    checkpoint_dir: object,
    checkpoint_every: object,
    max_checkpoints: object,
    seed: object,
    on_step: object,
    verbose: object,
) -> None:
    """Check every argument before a strategy, a model or a file is made."""
    where = "tfaccel.distribute.train"
    check_callable("model_fn", model_fn, where=where, expected="a function that builds the model")
    check_callable(
        "dataset_fn",
        dataset_fn,
        where=where,
        expected="a function dataset_fn(epoch) -> tf.data.Dataset of single examples",
    )
    for name, value, allow_none in (
        ("epochs", epochs, False),
        ("global_batch_size", global_batch_size, False),
        ("steps_per_epoch", steps_per_epoch, True),
        ("checkpoint_every", checkpoint_every, True),
        ("max_checkpoints", max_checkpoints, False),
    ):
        check_int(
            name,
            value,
            where=where,
            maximum=MAX_COUNT,
            allow_none=allow_none,
            fix=f"pass {name}=1 or more",
        )
    check_mapping(
        "metrics",
        metrics,
        where=where,
        expected="a dict of name -> per-example metric (a Keras function name or "
        "fn(y_true, y_pred)), or None",
    )
    check_callable(
        "optimizer_fn",
        optimizer_fn,
        where=where,
        expected="a function optimizer_fn(learning_rate) -> Keras optimizer, or None",
        allow_none=True,
    )
    check_number("learning_rate", learning_rate, where=where, fix="pass learning_rate=0.01")
    check_flag("scale_learning_rate", scale_learning_rate, where=where)
    check_int("seed", seed, where=where, minimum=0, maximum=2**32 - 1, allow_none=True)
    check_callable(
        "on_step",
        on_step,
        where=where,
        expected="a function on_step(StepLog) called after every step, or None",
        allow_none=True,
    )
    check_flag("verbose", verbose, where=where)
    if checkpoint_every is not None and checkpoint_dir is None:
        raise UsageError(
            "checkpoint_every is set but there is no checkpoint_dir to save into",
            expected="checkpoint_dir with checkpoint_every",
            received=f"checkpoint_every={checkpoint_every}, checkpoint_dir=None",
            fix="pass checkpoint_dir='ckpt' (shared by all workers on a cluster)",
        )
    if checkpoint_dir is not None:
        check_dir_argument("checkpoint_dir", checkpoint_dir, where=where)
