"""How data-parallel training scales with the replicas, and what communication costs.

For each replica count ``k`` (1, 2, 4... devices), ``scaling()`` runs training steps of the
same model under a MirroredStrategy over the first ``k`` devices, with a fixed batch per
replica (weak scaling: the global batch grows with ``k``), on synthetic data already on the
devices (so the input pipeline is not measured). Separately it times the all-reduce of
gradient-sized tensors alone on the same devices. It reports, per ``k``:

- throughput (examples/s) and efficiency: throughput / (``k`` x throughput with one replica);
- the communication share: all-reduce time / step time. All-reduce may overlap with compute
  on GPUs, so this is the share communication *would* take without overlap.

Every configuration is timed by the shared timing core (:mod:`tfaccel.core.timing`): warm-up
excluded, configurations interleaved, medians and IQRs. Logical CPU devices share the same
cores, so on a CPU the efficiency says how much the split costs, not how GPUs would scale;
the report says so.

Example:
    >>> tfaccel.setup(logical_devices=4)          # first thing: split the CPU (no GPU here)
    >>> report = tfaccel.distribute.scaling(replica_counts=(1, 2, 4))
    >>> print(report)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tfaccel.core.checks import MAX_COUNT, check_callable, check_int, is_int, shown_typed
from tfaccel.core.errors import UsageError
from tfaccel.core.timing import Summary, measure_interleaved, summarize
from tfaccel.probe import cpu

__all__ = ["ScalingReport", "ScalingRow", "default_model", "scaling"]

CPU_NOTE = (
    "the replicas are logical devices of one CPU and share its {cores} cores: efficiency here "
    "measures the cost of splitting the work, and says little about how GPUs would scale"
)


@dataclass(frozen=True)
class ScalingRow:
    """One replica count.

    Attributes:
        replicas: devices used.
        global_batch: examples per step (replicas x per-replica batch).
        step: seconds per training step.
        allreduce: seconds per all-reduce of the gradients alone.
        examples_per_second: throughput at the median step time.
        speedup: throughput / throughput with one replica.
        efficiency: speedup / replicas.
        communication_share: median all-reduce time / median step time.
    """

    replicas: int
    global_batch: int
    step: Summary
    allreduce: Summary
    examples_per_second: float
    speedup: float
    efficiency: float
    communication_share: float


@dataclass(frozen=True)
class ScalingReport:
    """Throughput, efficiency and communication share per replica count.

    Attributes:
        rows: one per replica count, in increasing order.
        device_type: "CPU" (logical devices) or "GPU".
        model: the model's name and parameter count.
        gradient_bytes: bytes all-reduced per step (float32 gradients).
        per_replica_batch: examples per replica per step.
        notes: caveats to print with the table.
    """

    rows: tuple[ScalingRow, ...]
    device_type: str
    model: str
    gradient_bytes: int
    per_replica_batch: int
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for row in self.rows:
            d = asdict(row)
            d["step"], d["allreduce"] = row.step.to_dict(), row.allreduce.to_dict()
            rows.append(d)
        return {
            "device_type": self.device_type,
            "model": self.model,
            "gradient_bytes": self.gradient_bytes,
            "per_replica_batch": self.per_replica_batch,
            "rows": rows,
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        lines = [
            f"data-parallel scaling on {self.device_type} ({self.model}, "
            f"{self.gradient_bytes / 1e6:.2f} MB of gradients, "
            f"{self.per_replica_batch} examples per replica)",
            "  replicas  global batch  step ms (noise)    examples/s  speedup  efficiency  "
            "all-reduce ms  comm share",
        ]
        for r in self.rows:
            lines.append(
                f"  {r.replicas:>8}  {r.global_batch:>12}  {r.step.median * 1e3:>7.2f} "
                f"(+-{r.step.relative_iqr:>4.0%})  {r.examples_per_second:>12,.0f}  "
                f"{r.speedup:>6.2f}x  {r.efficiency:>10.0%}  {r.allreduce.median * 1e3:>13.3f}"
                f"  {r.communication_share:>10.0%}"
            )
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def default_model() -> Any:
    """The model ``scaling()`` uses by default: an MLP on 784 inputs (~0.67 M parameters)."""
    import keras

    return keras.Sequential(
        [
            keras.Input((784,)),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(10),
        ],
        name="mlp_784_512_512_10",
    )


def scaling(
    model_fn: Callable[[], Any] = default_model,
    *,
    replica_counts: Sequence[int] | None = None,
    per_replica_batch: int = 64,
    steps: int = 10,
    repeats: int = 5,
    warmup: int = 1,
) -> ScalingReport:
    """Measure data-parallel throughput per replica count (see the module docstring).

    Uses the GPUs when TensorFlow has any, else the logical CPU devices (split the CPU first
    with ``tfaccel.setup(logical_devices=N)``, before anything starts TensorFlow's runtime).

    Args:
        model_fn: builds a Keras model with a known input shape (default: ``default_model``).
        replica_counts: replica counts to measure; default: 1, 2, 4, ... up to the devices.
        per_replica_batch: examples per replica per step.
        steps: steps per timed sample (in one ``tf.function`` call).
        repeats: timed samples per configuration.
        warmup: untimed rounds first (tracing, allocation).

    Returns:
        A ScalingReport; ``print()`` it for the table.

    Raises:
        UsageError: a replica count is larger than the devices there are, or not positive.

    Example:
        >>> print(tfaccel.distribute.scaling(replica_counts=(1, 2), steps=5))
    """
    _check_arguments(model_fn, replica_counts, per_replica_batch, steps, repeats, warmup)
    import tensorflow as tf

    device_type = "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    devices = [d.name for d in tf.config.list_logical_devices(device_type)]
    counts = _counts(replica_counts, len(devices), device_type)
    for name, value in (("per_replica_batch", per_replica_batch), ("steps", steps)):
        if value < 1:
            raise UsageError(
                f"{name}={value} is not positive",
                expected="an integer >= 1",
                received=str(value),
                fix=f"pass {name}=1 or more",
            )
    setups = {k: _Setup(tf, model_fn, devices[:k], device_type, per_replica_batch) for k in counts}
    candidates: dict[str, Callable[[], float | None]] = {}
    for k, setup in setups.items():
        candidates[f"step:{k}"] = functools.partial(setup.time, "step", steps)
        candidates[f"allreduce:{k}"] = functools.partial(setup.time, "allreduce", steps)
    samples = measure_interleaved(candidates, repeats=repeats, warmup=warmup)
    per_step = {name: summarize([s / steps for s in values]) for name, values in samples.items()}
    rows = _rows(counts, per_step, per_replica_batch)
    first = setups[counts[0]]
    return ScalingReport(
        rows=rows,
        device_type=device_type,
        model=f"{first.model.name}, {first.params:,} parameters",
        gradient_bytes=first.params * 4,
        per_replica_batch=per_replica_batch,
        notes=_notes(device_type, rows),
    )


def _check_arguments(
    model_fn: Any,
    replica_counts: Any,
    per_replica_batch: Any,
    steps: Any,
    repeats: Any,
    warmup: Any,
) -> None:
    """Check every argument before TensorFlow is imported or a model is built."""
    where = "tfaccel.distribute.scaling()"
    check_callable(
        "model_fn", model_fn, where=where, expected="a function that returns a new keras.Model"
    )
    if replica_counts is not None and (
        isinstance(replica_counts, (str, bytes))
        or not isinstance(replica_counts, Sequence)
        or not all(is_int(k) for k in replica_counts)
    ):
        raise UsageError(
            f"{where} got an invalid replica_counts",
            expected="a list of replica counts (integers >= 1), or None for 1, 2, 4... devices",
            received=f"replica_counts={shown_typed(replica_counts)}",
            fix="pass replica_counts=[1, 2], or leave it out",
        )
    for name, value, minimum in (
        ("per_replica_batch", per_replica_batch, 1),
        ("steps", steps, 1),
        ("repeats", repeats, 1),
        ("warmup", warmup, 0),
    ):
        check_int(name, value, where=where, minimum=minimum, maximum=MAX_COUNT)


def _counts(requested: Sequence[int] | None, available: int, device_type: str) -> list[int]:
    if requested is None:
        counts, k = [], 1
        while k <= available:
            counts.append(k)
            k *= 2
        return counts
    counts = sorted(set(requested))
    if not counts or counts[0] < 1 or counts[-1] > available:
        raise UsageError(
            f"Cannot measure replica counts {list(requested)} with {available} "
            f"{device_type} device{'s' if available != 1 else ''}",
            expected=f"counts in 1..{available}",
            received=f"replica_counts={list(requested)}",
            fix="call tfaccel.setup(logical_devices=N) first to split the CPU (or a GPU) into "
            "N devices, or ask for fewer replicas",
        )
    return counts


class _Setup:
    """One replica count: its strategy, model, synthetic batch and timed functions."""

    def __init__(
        self, tf: Any, model_fn: Callable[[], Any], devices: list[str], kind: str, batch: int
    ) -> None:
        import keras

        ops = tf.distribute.NcclAllReduce() if kind == "GPU" and len(devices) > 1 else None
        if ops is None:
            ops = tf.distribute.ReductionToOneDevice(reduce_to_device=devices[0])
        self.strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=ops)
        with self.strategy.scope():
            self.model = model_fn()
            optimizer = keras.optimizers.SGD(0.001)
            optimizer.build(self.model.trainable_variables)
        self.params = int(sum(int(tf.size(v)) for v in self.model.trainable_variables))
        in_shape = tuple(self.model.inputs[0].shape[1:])
        out_shape = tuple(self.model.outputs[0].shape[1:])
        global_batch = batch * len(devices)
        model, strategy = self.model, self.strategy

        def data(context: Any) -> tuple[Any, Any]:
            seed = (context.replica_id_in_sync_group, 0)
            x = tf.random.stateless_normal((batch, *in_shape), seed=seed)
            y = tf.random.stateless_normal((batch, *out_shape), seed=seed)
            return x, y

        self.batch = strategy.experimental_distribute_values_from_function(data)

        def replica_step(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                error = tf.reshape(tf.cast(model(x, training=True), tf.float32) - y, (batch, -1))
                loss = tf.nn.compute_average_loss(
                    tf.reduce_mean(tf.square(error), axis=-1), global_batch_size=global_batch
                )
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        def replica_allreduce() -> Any:
            context = tf.distribute.get_replica_context()
            tensors = [tf.identity(v) for v in model.trainable_variables]
            summed = context.all_reduce(tf.distribute.ReduceOp.SUM, tensors)
            return tf.add_n([tf.reduce_sum(t[..., :1]) for t in summed])

        @tf.function
        def run_steps(n: Any) -> Any:
            total = tf.constant(0.0)
            for _ in tf.range(n):
                loss = strategy.run(replica_step, args=self.batch)
                total += strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
            return total

        @tf.function
        def run_allreduce(n: Any) -> Any:
            total = tf.constant(0.0)
            for _ in tf.range(n):
                out = strategy.run(replica_allreduce)
                total += strategy.reduce(tf.distribute.ReduceOp.SUM, out, axis=None)
            return total

        self.functions = {"step": run_steps, "allreduce": run_allreduce}

    def time(self, kind: str, steps: int) -> float:
        """Run ``steps`` steps (or all-reduces) in one call; return the seconds they took."""
        began = time.perf_counter()
        float(self.functions[kind](steps))  # the value forces the device to finish
        return time.perf_counter() - began


def _rows(counts: list[int], per_step: dict[str, Summary], batch: int) -> tuple[ScalingRow, ...]:
    # one replica's throughput: measured, or the smallest count's scaled down to one
    first = per_step[f"step:{counts[0]}"]
    base = batch / first.median
    rows = []
    for k in counts:
        step, allreduce = per_step[f"step:{k}"], per_step[f"allreduce:{k}"]
        throughput = k * batch / step.median
        speedup = throughput / base
        rows.append(
            ScalingRow(
                replicas=k,
                global_batch=k * batch,
                step=step,
                allreduce=allreduce,
                examples_per_second=throughput,
                speedup=speedup,
                efficiency=speedup / k,
                communication_share=min(1.0, allreduce.median / step.median),
            )
        )
    return tuple(rows)


def _notes(device_type: str, rows: tuple[ScalingRow, ...]) -> tuple[str, ...]:
    notes = []
    if device_type == "CPU" and any(r.replicas > 1 for r in rows):
        notes.append(CPU_NOTE.format(cores=cpu.collect().usable_cores or "its"))
    if rows and rows[0].replicas != 1:
        notes.append(f"speedup is relative to {rows[0].replicas} replicas scaled to one")
    notes.append(
        "communication share = all-reduce of the gradients alone / a whole step; on GPUs "
        "all-reduce can overlap the backward pass, so the share actually paid can be lower"
    )
    return tuple(notes)
