"""Helpers shared by the tuner's tests (tests/tuning/test_tune_*.py).

- ``dense_model``: the tiny compiled Keras model a trial builds: 8 inputs, one hidden layer,
  3 classes.
- ``store_tune_result``: a tune run written to a database as tune writes it.
- ``FakeRunner``, ``FakeClock``, ``FakeOom`` and ``run_search``: the search on injected
  timings (no TensorFlow).

A helper used by more than one of these modules goes here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfaccel.tuning import Config, SearchSettings, search
from tfaccel.tuning.space import parse_space


def dense_model(hidden: int, name: str) -> Any:
    """8 inputs, a ``hidden``-unit relu layer and a 3-way softmax, compiled with sgd; keras is
    imported here, when a trial builds the model."""
    import keras

    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dense(3, activation="softmax"),
        ],
        name=name,
    )
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model


class FakeOom(Exception):
    """Stands for tf.errors.ResourceExhaustedError."""


def is_fake_oom(exc: BaseException) -> bool:
    return isinstance(exc, FakeOom)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# Relative noise pattern of successive samples: median 1.0, IQR about 4%.
WOBBLE = (1.00, 0.97, 1.03, 0.98, 1.02, 0.99, 1.01)


class FakeRunner:
    """Prepares and times configurations at the speeds (images/s) ``speed(config)`` gives."""

    def __init__(
        self,
        clock: FakeClock,
        speed: Callable[[Config], float],
        *,
        prepare_s: float = 2.0,
        sample_s: float = 1.0,
        wobble: tuple[float, ...] = WOBBLE,
        oom_at_prepare: Callable[[Config], bool] = lambda c: False,
        oom_at_sample: Callable[[Config, int], bool] = lambda c, n: False,
        error_at_prepare: Callable[[Config], bool] = lambda c: False,
        interrupt_after: int | None = None,
        example_s: Callable[[Config], float] | None = None,
    ) -> None:
        self.clock = clock
        self.example_s = example_s  # seconds per example of a step: steps cost batch x this
        self.speed = speed
        self.prepare_s = prepare_s
        self.sample_s = sample_s
        self.wobble = wobble
        self.oom_at_prepare = oom_at_prepare
        self.oom_at_sample = oom_at_sample
        self.error_at_prepare = error_at_prepare
        self.interrupt_after = interrupt_after
        self.held: set[Config] = set()
        self.prepared: list[Config] = []
        self.released: list[tuple[Config, bool]] = []
        self.samples: dict[Config, int] = {}
        self.total_samples = 0

    def step_s(self, config: Config) -> float:
        return 0.0 if self.example_s is None else self.example_s(config) * config.batch_size

    def prepare(self, config: Config) -> float | None:
        self.clock.now += self.prepare_s + 3 * self.step_s(config)  # the warm-up's 3 steps
        self.prepared.append(config)
        if self.oom_at_prepare(config):
            raise FakeOom("OOM when allocating tensor")
        if self.error_at_prepare(config):
            raise ValueError("Input 0 of layer 'dense' is incompatible with the layer")
        self.held.add(config)
        return None if self.example_s is None else self.example_s(config)

    def sample(self, config: Config) -> float:
        assert config in self.held, f"{config.label()} timed after it was released"
        count = self.samples.get(config, 0)
        self.samples[config] = count + 1
        self.total_samples += 1
        if self.interrupt_after is not None and self.total_samples > self.interrupt_after:
            raise KeyboardInterrupt
        self.clock.now += max(self.sample_s, 2 * self.step_s(config))
        if self.oom_at_sample(config, count):
            raise FakeOom("OOM when allocating tensor")
        rate = self.speed(config) * self.wobble[count % len(self.wobble)]
        return 1.0 / rate

    def release(self, config: Config, *, failed: bool) -> None:
        self.held.discard(config)
        self.released.append((config, failed))


def run_search(
    runner: FakeRunner,
    space: dict[str, object],
    *,
    budget_s: float = 1000.0,
    dataset_size: int = 10_000,
    **settings: object,
):  # type: ignore[no-untyped-def]
    fixed = {"jit": False, "steps_per_execution": 1, "feed": ["numpy"], "precision": ["float32"]}
    parsed = parse_space({**fixed, **space})
    return search(
        parsed,
        runner,
        dataset_size=dataset_size,
        settings=SearchSettings(budget_s=budget_s, **settings),  # type: ignore[arg-type]
        is_oom=is_fake_oom,
        clock=runner.clock,
    )


def store_tune_result(
    db: Any, digest: str, model_name: str, *, script: Any = None, **config: Any
) -> None:
    """Write a complete tune run to the database ``db`` as ``tfaccel tune`` records it: its
    winner ``config`` (over the defaults of a batch-16 float32 numpy trial on the CPU) for the
    model of architecture ``digest``, x1.8 over the script's own configuration; ``script``:
    its script record (``tfaccel.tuning.record.script_record``), or none (a result stored
    before tune recorded its scripts)."""
    from tfaccel import inventory
    from tfaccel.store import ResultRecord, ResultsStore

    full = {
        "device": "cpu",
        "batch_size": 16,
        "precision": "float32",
        "jit": False,
        "feed": "numpy",
        "cache": "auto",
        "prefetch": "auto",
        "num_parallel_calls": "auto",
        "threads": None,
        "steps_per_execution": 1,
        **config,
    }
    fp = inventory.current().fingerprint
    details = {
        "kind": "tune",
        "speedup": {"ratio": 1.8, "baseline": "bs16 float32 numpy xla=off", "rung": 2},
        "baseline_verdict": {"kept": False, "ratio": 1.8, "noise": 0.05, "says": "x1.80"},
    }
    if script is not None:
        details["script"] = script
    with ResultsStore(db) as store:
        run = store.begin_run(
            fp.digest,
            fingerprint_data=fp.data,
            started_at="2026-11-26T00:59:00+00:00",
            tfaccel_version="test",
            tf_version=None,
            details=details,
        )
        record = ResultRecord(
            model_name, full, "images_per_s", "images/s", 1000.0, 950.0, 1050.0, 5,
            [1000.0] * 5, model_fingerprint=digest,
        )  # fmt: skip
        store.finish_run(run, [record], finished_at="2026-11-26T01:00:00+00:00", details=details)
