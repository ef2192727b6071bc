"""Training throughput of the reference models across devices and settings.

A configuration is how the model is fed and compiled: ``feed`` (``numpy``: Keras ``fit`` on
NumPy arrays, the "Keras default" with batch 32 and float32; ``tf.data``: a batched,
prefetched ``tf.data`` pipeline), batch size, precision (a Keras dtype policy) and XLA
(``jit_compile``). Each configuration gets its own model instance, built and compiled under
the target's distribution strategy; all configurations are then timed interleaved.

One timed sample is one ``fit`` call of ``steps`` batches; the clock runs from the end of the
first batch to the moment the last update is visible on the host (a weight is read back), so
``fit``'s start-up and the first batch are excluded and the device is synchronised.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tfaccel import models
from tfaccel.bench.datasets import ImageData
from tfaccel.bench.flops import count_model
from tfaccel.bench.micro import Tick, expected_retracing, measure, sync_devices
from tfaccel.bench.options import Profile
from tfaccel.bench.results import BenchMeasurement
from tfaccel.bench.targets import BenchTarget
from tfaccel.inventory.precision import POLICY_DTYPE

__all__ = [
    "CPU_FLOAT16_NOTE",
    "EPOCH_IMAGES",
    "KERAS_DEFAULT",
    "TrainConfig",
    "TrainingSampler",
    "configurations",
    "mixed_policies",
    "train_throughput",
]

EPOCH_IMAGES = 50_000
_MIN_STEPS = 3
_MAX_STEPS = 10_000


@dataclass(frozen=True)
class TrainConfig:
    """How a model is fed and compiled for one timed configuration."""

    feed: str
    batch_size: int
    precision: str
    jit: bool

    def to_config(self, device: str) -> dict[str, Any]:
        """The configuration dict stored with the result."""
        return {"device": device, **asdict(self)}

    def matches(self, config: Mapping[str, Any]) -> bool:
        """``config`` (a stored configuration, its device aside) is this one."""
        return all(config.get(key) == value for key, value in asdict(self).items())


KERAS_DEFAULT = TrainConfig("numpy", 32, "float32", False)
"""Keras ``fit`` on NumPy arrays at its default batch, float32, no XLA: the configuration every
other is measured against (:mod:`tfaccel.bench.analysis`, the report's what to change)."""


CPU_FLOAT16_NOTE = (
    "mixed_float16 training is not timed on the CPU: TensorFlow's float16 CPU training kernels "
    "are very slow (the reference CNN ran at 36 images/s against 2,198 with mixed_bfloat16 on "
    "an AVX512_FP16 Xeon); the matmul and conv2d micro benchmarks do measure float16"
)


def mixed_policies(target: BenchTarget) -> list[str]:
    """The 16-bit Keras policies worth timing on ``target``, preferred first.

    GPUs: mixed_float16 (tensor cores on every GPU from CC 7.0) then mixed_bfloat16 (CC 8.0+).
    CPUs: mixed_bfloat16 where the CPU has bf16 instructions (see :data:`CPU_FLOAT16_NOTE`).
    """
    if target.kind == "cpu":
        return ["mixed_bfloat16"] if "bfloat16" in target.dtypes else []
    order = (("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16"))
    return [policy for policy, dtype in order if dtype in target.dtypes]


def configurations(
    target: BenchTarget, profile: Profile, batch_size: int | None
) -> list[TrainConfig]:
    """The configurations to time on ``target``.

    ``short`` (quick runs): the Keras default, tf.data at ``batch_size`` (default 256) in
    float32 and in the preferred 16-bit policy of the device. ``all`` adds tf.data at batch 32
    (the feeding alone), every 16-bit policy, and XLA on for float32 and the preferred policy.
    """
    bs = batch_size or 256
    full = profile.model_configs == "all"
    mixed = mixed_policies(target)
    configs = [KERAS_DEFAULT]
    if full and bs != 32:
        configs.append(TrainConfig("tf.data", 32, "float32", False))
    configs.append(TrainConfig("tf.data", bs, "float32", False))
    configs += [TrainConfig("tf.data", bs, p, False) for p in (mixed if full else mixed[:1])]
    if full:
        configs.append(TrainConfig("tf.data", bs, "float32", True))
        if mixed:
            configs.append(TrainConfig("tf.data", bs, mixed[0], True))
    return configs


def _strategy(target: BenchTarget) -> Any:
    import tensorflow as tf

    if target.kind == "mirrored":
        return tf.distribute.MirroredStrategy(devices=list(target.tf_devices))
    if target.kind == "cpu" and not tf.config.list_physical_devices("GPU"):
        return tf.distribute.get_strategy()  # the default: what a user's script gets
    return tf.distribute.OneDeviceStrategy(target.tf_devices[0])


def _compile(model: Any, config: TrainConfig) -> None:
    models.compile_reference(model, config.precision, jit_compile=config.jit)


class TrainingSampler:
    """One configuration's model, data and step count; calling it times one ``fit``.

    The first call (the warm-up) also sets the step count so that later calls last about
    ``target_s``; every call returns seconds per training example, from the end of the first
    batch to the moment the last update is readable on the host.

    Args:
        model: a compiled Keras model.
        config: how it is fed (``numpy`` or ``tf.data``) and its batch size.
        data: the training examples (``numpy`` feed slices them).
        dataset: the repeated, batched ``tf.data`` dataset (``tf.data`` feed), else None.
        replicas: devices training together (the ``tf.data`` global batch is batch x replicas).
        target_s: wanted duration of one call.
    """

    def __init__(
        self,
        model: Any,
        config: TrainConfig,
        data: ImageData,
        dataset: Any,
        replicas: int,
        target_s: float,
    ) -> None:
        import keras

        self.model = model
        self.config = config
        self.data = data
        self.dataset = dataset
        self.global_batch = config.batch_size * (replicas if config.feed == "tf.data" else 1)
        self.target_s = target_s
        # Keras runs steps_per_execution steps per call of its train function and calls the
        # callbacks once per call, with the index of the last step it ran.
        self.per_call = max(1, int(getattr(model, "steps_per_execution", 1) or 1))
        self.steps = self._whole(_MIN_STEPS)
        self.calls = 0
        self.step_times: list[float] = []
        marks = self.marks = [(0.0, 0)]

        class Timer(keras.callbacks.Callback):
            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                marks.append((time.perf_counter(), batch))

        self.timer = Timer()

    def _whole(self, steps: int) -> int:
        """``steps`` rounded up to whole train-function calls, at least two of them (the clock
        starts at the end of the first)."""
        calls = max(2, math.ceil(steps / self.per_call))
        return calls * self.per_call

    def __call__(self) -> float:
        self.marks.clear()
        if self.config.feed == "numpy":
            n = self.steps * self.global_batch
            self.model.fit(
                self.data.x[:n],
                self.data.y[:n],
                batch_size=self.global_batch,
                epochs=1,
                verbose=0,
                callbacks=[self.timer],
            )
        else:
            self.model.fit(
                self.dataset,
                steps_per_epoch=self.steps,
                epochs=1,
                verbose=0,
                shuffle=False,
                callbacks=[self.timer],
            )
        _read_back(self.model)
        end = time.perf_counter()
        (start, first), (_, last) = self.marks[0], self.marks[-1]
        if self.config.feed == "numpy":  # Keras names the last step of a call that ran short
            rows = min(self.steps * self.global_batch, len(self.data))
            last = min(last, math.ceil(rows / self.global_batch) - 1)
        timed_steps = last - first
        if timed_steps < 1:
            raise ValueError(
                f"too few training steps to time: {len(self.marks)} train-function call(s) of "
                f"{self.per_call} step(s); give more data or a smaller batch"
            )
        seconds = end - start
        self.step_times.append(seconds / timed_steps)
        if self.calls == 0:  # adapt the step count once, from the warm-up call
            per_step = seconds / timed_steps
            wanted = math.ceil(self.target_s / max(per_step, 1e-6)) + 1
            limit = _MAX_STEPS
            if self.config.feed == "numpy":
                limit = max(_MIN_STEPS, len(self.data) // self.global_batch)
            steps = self._whole(max(_MIN_STEPS, min(limit, wanted)))
            if self.config.feed == "numpy" and steps > limit:
                steps = max(2, limit // self.per_call) * self.per_call
            self.steps = steps
        self.calls += 1
        return seconds / (timed_steps * self.global_batch)  # seconds per image


def _read_back(model: Any) -> None:
    """Block until the last update has been applied (reads the last weight to the host)."""
    model.trainable_variables[-1].numpy()
    sync_devices()


def _dataset(data: ImageData, global_batch: int) -> Any:
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((data.x, data.y))
    return ds.batch(global_batch, drop_remainder=True).repeat().prefetch(tf.data.AUTOTUNE)


def train_throughput(
    model_name: str,
    target: BenchTarget,
    configs: list[TrainConfig],
    data: ImageData,
    profile: Profile,
    *,
    repeats: int,
    warmup: int,
    tick: Tick,
) -> list[BenchMeasurement]:
    """Time training of ``model_name`` on ``target`` in each configuration, interleaved.

    Returns:
        One ``images_per_s`` measurement per configuration; ``extra`` holds the batch size,
        the step-time samples, counted FLOPs per training image, the time of a 50,000-image
        epoch, the achieved model TFLOP/s and the % of the spec peak (MFU).
    """
    flops = count_model(models.build(model_name, tiny=profile.tiny_models))
    strategy = _strategy(target)
    samplers: dict[str, TrainingSampler] = {}
    datasets: dict[int, Any] = {}
    for config in configs:
        with strategy.scope():
            model = models.build(model_name, tiny=profile.tiny_models, dtype=config.precision)
            _compile(model, config)
        dataset = None
        if config.feed == "tf.data":
            global_batch = config.batch_size * target.replicas
            if global_batch not in datasets:
                datasets[global_batch] = _dataset(data, global_batch)
            dataset = datasets[global_batch]
        name = f"{config.feed} bs{config.batch_size} {config.precision} jit={config.jit}"
        samplers[name] = TrainingSampler(
            model, config, data, dataset, target.replicas, profile.model_seconds
        )
    with expected_retracing():  # one train function per configuration, traced once each
        samples = measure(dict(samplers), repeats=repeats, warmup=warmup, tick=tick)
    out = []
    for name, sampler in samplers.items():
        config = sampler.config
        rates = [1.0 / s for s in samples[name]]
        m = BenchMeasurement(
            model_name,
            config.to_config(target.name),
            "images_per_s",
            "images/s",
            rates,
            {
                "global_batch": sampler.global_batch,
                "steps_per_sample": sampler.steps,
                "step_time_s": sampler.step_times[warmup:],
                "flops_per_image": flops.training,
                "forward_flops_per_image": flops.forward,
                "uncounted_layers": flops.uncounted,
                "replicas": target.replicas,
                "peak_tflops": target.peak_tflops.get(POLICY_DTYPE[config.precision]),
                "data": data.source,
            },
        )
        median = m.summary.median
        achieved = median * flops.training / 1e12
        peak = m.extra["peak_tflops"]
        m.extra["epoch_seconds"] = EPOCH_IMAGES / median
        m.extra["model_tflops"] = achieved
        m.extra["mfu_percent"] = 100.0 * achieved / peak if peak else None
        out.append(m)
    return out
