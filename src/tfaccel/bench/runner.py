"""Run a bench: validate the options, plan the tasks, measure, record in the results store.

The plan is made before anything is measured, so the progress bar knows its total and bad
input (unknown names, a batch larger than the data, a corrupt CIFAR-10 directory, a GPU
TensorFlow does not see) fails before minutes of measuring.
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol

from tfaccel import architecture, inventory, models, probe
from tfaccel._version import __version__
from tfaccel.bench import micro
from tfaccel.bench.convergence import digits_convergence
from tfaccel.bench.datasets import ImageData, load_cifar10, synthetic
from tfaccel.bench.flops import CONVENTION
from tfaccel.bench.options import MICRO, MODEL_BENCHMARKS, BenchOptions, Profile
from tfaccel.bench.results import BenchMeasurement, BenchRun, Skipped
from tfaccel.bench.targets import BenchTarget, resolve_targets
from tfaccel.bench.training import CPU_FLOAT16_NOTE, EPOCH_IMAGES, configurations, train_throughput
from tfaccel.core.errors import UsageError

if TYPE_CHECKING:
    from tfaccel.bench.training import TrainConfig
    from tfaccel.snapshot import Snapshot
    from tfaccel.store import ResultsStore

__all__ = ["Progress", "Task", "model_fingerprint", "run"]


class Progress(Protocol):
    """Receives progress: the total number of timed calls, then one ``advance`` per call.

    An object that also has ``status(description)`` is told what happens between
    measurements (importing TensorFlow, drawing the plots) by the workflows
    :func:`tfaccel.bench.run_with_history` and :func:`tfaccel.report.make_report`.
    """

    def start(self, total: int) -> None:
        """Called once, before the first measurement."""

    def advance(self, label: str) -> None:
        """Called after each timed call (warm-up included), with what is being measured."""


class _NoProgress:
    def start(self, total: int) -> None:
        return None

    def advance(self, label: str) -> None:
        return None


@dataclass
class Task:
    """One benchmark on one target: how many progress ticks it takes and how to run it."""

    benchmark: str
    target: BenchTarget
    ticks: int
    run: Callable[[Callable[[str], None]], list[BenchMeasurement]]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _model_data(options: BenchOptions, profile: Profile) -> dict[str, ImageData]:
    spec = options.data_spec
    wanted = [m for m in MODEL_BENCHMARKS if m in options.only]
    if not wanted:
        return {}
    cifar = load_cifar10(spec.path or "") if spec.kind == "cifar10" else None
    count = spec.images or profile.synthetic_images
    out: dict[str, ImageData] = {}
    for name in wanted:
        shape = models.MODELS[name].input_shape
        if cifar is not None and shape == (32, 32, 3):
            out[name] = cifar.train
        else:
            out[name] = synthetic(count, shape, models.MODELS[name].classes)
    return out


def _check_batch(
    options: BenchOptions, data: dict[str, ImageData], targets: list[BenchTarget]
) -> None:
    for name, images in data.items():
        for target in targets:
            for config in configurations(target, options.profile_spec, options.batch_size):
                batch = config.batch_size * (target.replicas if config.feed == "tf.data" else 1)
                if batch > len(images):
                    raise UsageError(
                        f"The batch size {batch} is larger than the data for {name} "
                        f"({len(images)} images from {images.source})",
                        expected=f"a batch of at most {len(images)} images",
                        received=f"batch {batch} (configuration {config.feed} "
                        f"bs{config.batch_size} on {target.name})",
                        fix="pass a smaller --batch-size, or more data "
                        f"(e.g. --data synthetic:{batch * 4})",
                    )


def _plan(
    options: BenchOptions, targets: list[BenchTarget], data: dict[str, ImageData]
) -> tuple[list[Task], list[Skipped]]:
    tasks: list[Task] = []
    skipped: list[Skipped] = []
    for name in (n for n in MICRO if n in options.only):
        _plan_micro(name, options, targets, tasks, skipped)
    for name in (n for n in MODEL_BENCHMARKS if n in options.only):
        _plan_model(name, options, targets, data[name], tasks, skipped)
    if "digits" in options.only:
        run_digits = partial(_run_digits, targets[0], options.profile_spec.digits_epochs)
        tasks.append(Task("digits", targets[0], 1, run_digits))
    return tasks, skipped


def _plan_micro(
    name: str,
    options: BenchOptions,
    targets: list[BenchTarget],
    tasks: list[Task],
    skipped: list[Skipped],
) -> None:
    profile = options.profile_spec
    fn = {
        "matmul": micro.matmul,
        "bandwidth": micro.bandwidth,
        "transfer": micro.transfer,
        "vector_add": micro.vector_add,
        "conv2d": micro.conv2d,
    }[name]
    for t in targets:
        if t.kind == "mirrored":
            skipped.append(Skipped(name, t.name, "micro benchmarks run on each GPU alone"))
            continue
        if name == "transfer" and t.kind == "cpu":
            reason = "host<->device transfer applies to accelerators; this target is the host CPU"
            skipped.append(Skipped(name, t.name, reason))
            continue
        per_round = {
            "matmul": len(t.dtypes) * len(profile.matmul_sizes),
            "conv2d": len(t.dtypes),
            "transfer": 2,
        }.get(name, 1)
        run_micro = partial(_run_micro, fn, t, profile, options.repeats, options.warmup)
        tasks.append(Task(name, t, per_round * (options.repeats + options.warmup), run_micro))
        if name in ("matmul", "conv2d"):
            for dtype in ("bfloat16", "float16"):
                if dtype not in t.dtypes:
                    reason = f"{dtype} is not native on this device"
                    skipped.append(Skipped(name, t.name, reason, {"dtype": dtype}))


def _plan_model(
    name: str,
    options: BenchOptions,
    targets: list[BenchTarget],
    images: ImageData,
    tasks: list[Task],
    skipped: list[Skipped],
) -> None:
    profile = options.profile_spec
    for t in targets:
        configs = configurations(t, profile, options.batch_size)
        run_model = partial(_run_model, name, t, configs, images, options)
        tasks.append(Task(name, t, len(configs) * (options.repeats + options.warmup), run_model))
    if profile.model_configs == "short":
        reason = (
            "XLA, batch-32 tf.data and the other 16-bit policies are measured in the full run "
            f"(without --{profile.name})"
        )
        skipped.append(Skipped(name, "every device", reason))
    for t in targets:
        if t.kind == "cpu" and "float16" in t.dtypes and profile.model_configs == "all":
            skipped.append(Skipped(name, t.name, CPU_FLOAT16_NOTE, {"precision": "mixed_float16"}))


def _run_micro(
    fn: Callable[..., list[BenchMeasurement]],
    target: BenchTarget,
    profile: Profile,
    repeats: int,
    warmup: int,
    tick: Callable[[str], None],
) -> list[BenchMeasurement]:
    return fn(target, profile, repeats=repeats, warmup=warmup, tick=tick)


def _run_model(
    name: str,
    target: BenchTarget,
    configs: list[TrainConfig],
    images: ImageData,
    options: BenchOptions,
    tick: Callable[[str], None],
) -> list[BenchMeasurement]:
    measured = train_throughput(
        name,
        target,
        configs,
        images,
        options.profile_spec,
        repeats=options.repeats,
        warmup=options.warmup,
        tick=tick,
    )
    digest = model_fingerprint(name, tiny=options.profile_spec.tiny_models)
    for m in measured:
        m.model_fingerprint = digest
    return measured


@functools.cache
def model_fingerprint(name: str, *, tiny: bool) -> str:
    """The architecture fingerprint of the reference model ``name`` as the bench builds it
    (the tiny version in ``--smoke`` runs), stored with each of its training figures."""
    return architecture.fingerprint(models.build(name, tiny=tiny))


def _run_digits(
    target: BenchTarget, epochs: int, tick: Callable[[str], None]
) -> list[BenchMeasurement]:
    measurement = digits_convergence(target, epochs=epochs)
    tick("digits")
    return [measurement]


def run(
    options: BenchOptions | None = None,
    *,
    store: ResultsStore | None = None,
    progress: Progress | None = None,
    snapshot: Snapshot | None = None,
) -> BenchRun:
    """Measure this machine.

    Args:
        options: what to run (default: the full bench on every device).
        store: where to record the run (None: not recorded).
        progress: receives progress (e.g. a rich progress bar).
        snapshot: the machine's Snapshot (default: probed now).

    Returns:
        The :class:`BenchRun`; ``run_id`` is set when it was recorded.

    Raises:
        UsageError: bad options or data (the message says which and how to fix it), or
            synthetic data larger than this machine's memory (said before any is allocated).
        StoreError: the results database cannot be written.
    """
    options = options or BenchOptions()
    options.validate()
    profile = options.profile_spec
    snap = snapshot or probe.snapshot()  # no TensorFlow: the machine as it is
    options.check_memory(snap.cpu.memory_available_bytes)  # before any data is allocated
    data = _model_data(options, profile)  # reads and checks CIFAR-10 before importing TF
    inv = inventory.build(snap)
    fingerprint = inv.fingerprint
    targets = resolve_targets(options.device, inv, snap.cpu.flags)
    _check_batch(options, data, targets)
    tasks, skipped = _plan(options, targets, data)
    import tensorflow as tf

    bench_run = BenchRun(
        started_at=_now(),
        finished_at=None,
        status="running",
        options=options.to_dict(),
        fingerprint=fingerprint.digest,
        fingerprint_data=fingerprint.data,
        tfaccel_version=__version__,
        tf_version=tf.__version__,
        targets=[t.to_dict() for t in targets],
        skipped=skipped,
        notes=[
            f"profile {profile.name}; {options.repeats} timed repeats after {options.warmup} "
            "warm-up, configurations interleaved; figures are medians with the interquartile "
            "range",
            f"model FLOPs: {CONVENTION}",
            f"epoch = {EPOCH_IMAGES:,} images; MFU = model FLOP/s / spec peak of the "
            "precision's dtype",
            *(f"{name} data: {images.source}" for name, images in data.items()),
        ],
    )
    if profile.tiny_models:
        bench_run.notes.insert(0, "smoke profile: tiny sizes, the figures are not meaningful")
    if store is not None:
        bench_run.run_id = store.begin_run(
            fingerprint.digest,
            fingerprint_data=fingerprint.data,
            started_at=bench_run.started_at,
            tfaccel_version=__version__,
            tf_version=tf.__version__,
            details=bench_run.details(),
        )
    sink = progress or _NoProgress()
    sink.start(sum(t.ticks for t in tasks))
    try:
        for task in tasks:
            tick = partial(_tick, sink, f"{task.benchmark} on {task.target.name}")
            try:
                bench_run.measurements += task.run(tick)
            except tf.errors.OpError as exc:
                message = (exc.message or str(exc)).strip().splitlines()[0][:300]
                bench_run.skipped.append(
                    Skipped(
                        task.benchmark, task.target.name, f"failed: {type(exc).__name__}: {message}"
                    )
                )
    except BaseException:
        _finish(store, bench_run, "incomplete")
        raise
    _finish(store, bench_run, "complete")
    return bench_run


def _tick(sink: Progress, task_label: str, name: str) -> None:
    sink.advance(f"{task_label}: {name}")


def _finish(store: ResultsStore | None, bench_run: BenchRun, status: str) -> None:
    bench_run.status = status
    bench_run.finished_at = _now()
    if store is not None and bench_run.run_id is not None:
        store.finish_run(
            bench_run.run_id,
            (m.to_record() for m in bench_run.measurements),
            finished_at=bench_run.finished_at,
            status=status,
            details=bench_run.details(),
        )
