"""Tune a training script as written: its workload, captured at ``fit``, as the tuner's hooks.

``tfaccel tune train.py ARGS...`` on a script without ``model_fn``/``tfaccel_tune()`` runs the
script up to its ``fit`` (:func:`tfaccel.workload.capture`) and tunes what it captured:

* **the data** as given to ``fit``: arrays ``(x, y)`` (both feeds), or the script's own
  ``tf.data.Dataset`` (its ``.map``s, its shuffling and its source kept; its batches unbatched
  and re-batched at each trial's batch size by ``tfaccel.data.pipeline``), or its
  ``keras.utils.PyDataset``; a generator is read once, its first batches joined into arrays;
* **the model** of each trial, built under the trial's precision. Keras takes the precision
  when the layers are built, so a model of another precision is the script's own model built
  again: the script is captured again (run again up to its ``fit``, in this process) with the
  Keras global policy set first, so subclassed models, custom ``train_step``s and the script's
  own compile all come out as the script makes them. Only a Sequential or functional model, in
  the precision the script built it in, is cloned instead (``keras.models.clone_model``, then
  compiled with the script's compile arguments and a fresh copy of its optimizer), and only
  when the clone is checked to be the same model (architecture fingerprint, every layer's
  dtype policy); otherwise it is captured again too;
* **the baseline**: the script's own configuration (its batch, precision, XLA setting and
  steps per execution; its arrays through ``fit``, or its dataset exactly as it builds it,
  repeated: the ``as-given`` feed), timed interleaved with the search's winner at the end;
  when the winner is not faster beyond the noise, the answer is the script's own ("keep
  yours").

What the trials do not run is listed in the result: the script's callbacks (checkpoints,
TensorBoard, CSV logs, BackupAndRestore), validation, class and sample weights.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tfaccel.core.timing import compare, measure_interleaved, summarize
from tfaccel.inventory.precision import PRECISIONS
from tfaccel.tuning._errors import TuneError
from tfaccel.tuning.hooks import Hooks
from tfaccel.tuning.search import Decision, Runner, SearchOutcome, SearchSettings, Trial
from tfaccel.tuning.space import OWN_FEED, Config, Space
from tfaccel.workload import DEFAULT_TIMEOUT_S, Workload, capture
from tfaccel.workload import data as data_forms
from tfaccel.workload.record import build_like_fit, own_step_reason

__all__ = [
    "ScriptWorkload",
    "against_baseline",
    "baseline_config",
    "capture_script",
    "workload_hooks",
]

_FIT_NOT_USED = {
    "validation_data": "validation (validation_data)",
    "validation_split": "validation (validation_split)",
    "class_weight": "class_weight",
    "sample_weight": "sample_weight",
    "initial_epoch": "initial_epoch",
}


@dataclass
class ScriptWorkload:
    """What ``tune`` needs from a script's workload.

    Attributes:
        hooks: the model function (clone or capture again, per precision) and the data.
        batch_size, precision, jit, steps_per_execution, feed: the script's own configuration.
        batched: whether the data's elements are batches (a dataset given to ``fit``: yes).
        not_run: what the script does at its ``fit`` that the trials do not run.
        described: :meth:`Workload.describe` of the first capture.
        models: how each precision's models were made (``cloned`` or ``captured again``).
        policy: the script's own dtype policy (``precision`` is float32 when the trials could
            not take it as it is).
        workload: the captured workload itself (the memory search plans its model as
            ``tfaccel plan SCRIPT`` does).
    """

    hooks: Hooks
    batch_size: int
    precision: str
    jit: bool
    steps_per_execution: int
    feed: str
    batched: bool | None
    not_run: list[str]
    described: dict[str, Any]
    models: dict[str, str] = field(default_factory=dict)
    policy: str = "float32"
    workload: Workload | None = None


def capture_script(
    path: str | os.PathLike[str],
    args: Sequence[str] = (),
    *,
    fit: int = 1,
    timeout: float | None = None,
) -> ScriptWorkload:
    """Capture ``path`` (run with ``args`` up to its ``fit``-th ``fit``) and read it for tune.

    Runs the script in this process (:func:`tfaccel.workload.capture`).

    Raises:
        CaptureError: the script did not reach its ``fit``.
        TuneError: data in a form the trials cannot read again (a generator object).
    """
    limit = DEFAULT_TIMEOUT_S if timeout is None else timeout
    with settled_runtime():
        workload = capture(path, args, fit=fit, timeout=limit, command="tune")
    return workload_hooks(workload, timeout=limit)


_RUNTIME_SETTERS = (
    ("config.experimental", "set_memory_growth"),
    ("config", "set_visible_devices"),
    ("config.experimental", "set_visible_devices"),
    ("config", "set_logical_device_configuration"),
    ("config.experimental", "set_virtual_device_configuration"),
    ("config.threading", "set_intra_op_parallelism_threads"),
    ("config.threading", "set_inter_op_parallelism_threads"),
)


@contextlib.contextmanager
def settled_runtime() -> Iterator[None]:
    """While a script runs again in a process whose TensorFlow runtime has started, its
    runtime settings (``set_memory_growth``, visible devices, thread pools) that TensorFlow
    refuses once started (``RuntimeError``) are skipped: the first run applied them, or the
    process has its own."""
    import tensorflow as tf

    saved: list[tuple[Any, str, Any]] = []

    def tolerant(original: Any) -> Any:
        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            except RuntimeError:  # "cannot be modified after being initialized"
                return None

        return call

    for path, name in _RUNTIME_SETTERS:
        owner: Any = tf
        for part in path.split("."):
            owner = getattr(owner, part, None)
        original = getattr(owner, name, None)
        if owner is None or original is None:
            continue
        saved.append((owner, name, original))
        setattr(owner, name, tolerant(original))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _training_part(x: Any, y: Any, split: Any) -> tuple[Any, Any]:
    """``(x, y)`` as ``fit(..., validation_split=split)`` trains on them: the first
    ``floor(n * (1 - split))`` rows (Keras's ``train_validation_split`` holds out the last
    ones, before any shuffling), so no trial takes a batch larger than the examples the
    script trains on."""
    if not split:
        return x, y
    import tensorflow as tf

    rows = data_forms.examples(x, None)
    if not rows:
        return x, y
    keep = math.floor(rows * (1.0 - float(split)))

    def head(part: Any) -> Any:
        return None if part is None else tf.nest.map_structure(lambda a: a[:keep], part)

    return head(x), head(y)


def workload_hooks(workload: Workload, *, timeout: float = DEFAULT_TIMEOUT_S) -> ScriptWorkload:
    """The hooks and the baseline of a captured workload (see the module's notes)."""
    model = workload.model
    name = Path(workload.origin.script).name if workload.origin.script else "the script"
    strategy = workload.strategy
    kind = workload.data_kind
    labels_dropped = False
    generator_note = ""
    # a step of the model's own (its train_step or compute_loss, or a loss its layers add with
    # labels among its inputs, as keras.io's OCR model) may take x alone
    x_alone = own_step_reason(model, workload.compile) is not None
    if kind in ("arrays", "dict"):
        if workload.y is None and x_alone:
            # fit(x) alone, read by the model's own train_step (a VAE): the trials feed
            # (x, placeholder labels) and each trial's model drops the labels before its
            # train_step, which sees x as the script's fit gives it
            labels_dropped = True
        elif workload.y is None:
            raise TuneError(
                f"The script {name} gives fit arrays without labels (y)",
                expected="model.fit(x, y, ...) on arrays, or a tf.data.Dataset of (x, y)",
                received="model.fit(x) with x arrays and no y",
                fix="tune a script whose fit gets (x, y), or a dataset of (x, y) pairs",
            )
        y = _placeholder_labels(workload.x) if labels_dropped else workload.y
        data: Any = _training_part(workload.x, y, workload.fit_kwargs.get("validation_split"))
        feed, batched = "numpy", None
    elif kind in ("dataset", "pydataset"):
        data, batched = workload.x, (True if kind == "dataset" else None)
        feed = OWN_FEED if kind == "dataset" else "pipeline"  # a PyDataset is read as it is
        if kind == "dataset" and not _pairs(data) and x_alone:
            # batches of x alone, read by the model's own train_step (a GAN on images): as
            # for fit(x) on arrays, the trials carry placeholder labels the model drops
            data, labels_dropped = _with_placeholder_labels(data), True
    elif kind == "generator":
        # a generator is read once: its first batches become arrays the trials read again
        batch = workload.batch_size  # read before the batches are (the first one kept)
        gx, gy, read_note = _generator_arrays(workload, name)
        generator_note = read_note
        if gy is None and x_alone:
            labels_dropped = True
        elif gy is None:
            raise TuneError(
                f"The script {name}'s generator gives batches without labels",
                expected="a generator of (x, y) batches",
                received="batches of x alone",
                fix="yield (x, y) pairs from the generator",
            )
        data = (gx, _placeholder_labels(gx) if labels_dropped else gy)
        feed, batched = "numpy", None
    else:
        raise TuneError(
            f"The script {name} gives fit its data as a {kind}, which the trials cannot read again",
            expected="arrays (x, y), a tf.data.Dataset, a keras.utils.PyDataset or a generator "
            "of (x, y) batches (every trial reads the data again)",
            received=f"model.fit given a {type(workload.x).__name__}",
            fix="give fit a tf.data.Dataset (tf.data.Dataset.from_generator(make_examples, "
            "output_signature=...)) or arrays",
        )
    batch = workload.batch_size
    if batch is None:
        raise TuneError(
            f"The batch size of {name}'s training data could not be read",
            expected="data whose first batch has a batch dimension",
            received=f"{kind} data",
            fix="give fit batches of arrays",
        )
    policy = _policy_of(model)
    precision = policy if policy in PRECISIONS else "float32"
    factory = _Models(workload, timeout, drop_labels=labels_dropped)
    origin = workload.origin
    hooks = Hooks(
        model_fn=factory,
        data=data,
        source=name,
        model_fn_name=f"the model of {name} (built again under each precision)",
        recipe={
            "script": str(Path(origin.script).resolve()) if origin.script else "",
            "args": list(origin.args),
            "fit": max(1, origin.fit),
            "timeout": timeout,
            "workload": True,
        },
    )
    not_run = [f"callback {type(c).__name__}" for c in workload.callbacks]
    given = workload.fit_kwargs
    not_run += [
        text
        for key, text in _FIT_NOT_USED.items()
        if given.get(key) is not None and given.get(key) not in (0, 0.0)
    ]
    if origin.fit == 0:
        not_run.append(
            "the script's own training loop (marked): the trials time Keras' fit with its "
            "optimizer and loss"
        )
    notes: list[str] = [generator_note] if generator_note else []
    if labels_dropped:
        notes.append(
            "fit gets x alone, read by the model's own train_step: the trials carry "
            "placeholder labels, dropped before that train_step sees its batch"
        )
    if strategy is not None:
        replicas = int(getattr(model.distribute_strategy, "num_replicas_in_sync", 1) or 1)
        notes.append(
            f"built under {strategy} ({replicas} replica(s) here): each trial's model is the "
            f"script's, built again in its own strategy.scope(); batch sizes are global"
        )
    out = ScriptWorkload(
        hooks=hooks,
        batch_size=int(batch),
        precision=precision,
        jit=bool(getattr(model, "jit_compile", False)),
        steps_per_execution=int(getattr(model, "steps_per_execution", 1) or 1),
        feed=feed,
        batched=batched,
        not_run=list(dict.fromkeys(not_run)),
        described={**workload.describe(), "notes": notes},
        models=factory.how,
        policy=policy,
        workload=workload,
    )
    if policy != precision:
        out.not_run.append(f"the script's dtype policy {policy} (tried as float32)")
    return out


GENERATOR_BATCHES = 64
"""Batches of a script's generator read into arrays for the trials (fewer where
``steps_per_epoch`` says an epoch has fewer, or :data:`GENERATOR_BYTES` is reached)."""

GENERATOR_BYTES = 256 * 2**20


def _generator_arrays(workload: Workload, name: str) -> tuple[Any, Any, str]:
    """The first batches of the script's generator, read once and joined into arrays (x, y;
    y None for batches of x alone), and a note saying what was read."""
    import numpy as np
    import tensorflow as tf

    steps = workload.fit_kwargs.get("steps_per_epoch")
    limit = min(int(steps), GENERATOR_BATCHES) if steps else GENERATOR_BATCHES
    batches: list[Any] = []
    size = 0
    try:
        for batch in workload.x:
            batch = tf.nest.map_structure(np.asarray, batch)
            batches.append(batch)
            size += sum(int(a.nbytes) for a in tf.nest.flatten(batch))
            if len(batches) >= limit or size >= GENERATOR_BYTES:
                break
    except Exception as exc:  # the user's generator raised: said with its own message
        raise TuneError(
            f"The script {name}'s generator raised {type(exc).__name__} while its batches were "
            f"read for the trials: {exc}",
            expected="a generator that yields batches",
            received=f"{type(exc).__name__} after {len(batches)} batch(es)",
            fix="run the script on its own to see the error",
        ) from exc
    pairs = all(isinstance(b, tuple) and len(b) in (2, 3) for b in batches)
    xs = [b[0] for b in batches] if pairs else batches
    x = tf.nest.map_structure(lambda *parts: np.concatenate(parts), *xs)
    y = (
        tf.nest.map_structure(lambda *parts: np.concatenate(parts), *[b[1] for b in batches])
        if pairs
        else None
    )
    rows = len(tf.nest.flatten(x)[0])
    note = (
        f"fit gets a generator, read once: its first {len(batches)} batch(es) ({rows:,} "
        "examples) became the arrays every trial and your own configuration read (the numpy "
        "feed); the generator's own Python is not timed"
    )
    return x, y, note


def _policy_of(model: Any) -> str:
    policy = getattr(model, "dtype_policy", None)
    return str(getattr(policy, "name", None) or "float32")


class _Models:
    """The model function of a script's workload: a new compiled model per call, built under
    the Keras global policy in force (set by the trial)."""

    def __init__(self, workload: Workload, timeout: float, *, drop_labels: bool = False) -> None:
        self.workload = workload
        self.timeout = timeout
        self.policy = _policy_of(workload.model)
        # a model of a tf.distribute strategy is built again by the script, under its strategy
        self.clone_ok: bool | None = False if workload.strategy is not None else None
        self.drop_labels = drop_labels
        self.how: dict[str, str] = {}
        origin = workload.origin.script
        self.script_name = Path(origin).name if origin else "the script"
        """The script whose model this builds again (its errors are said as the script's)."""

    def __call__(self) -> Any:
        import keras

        policy = keras.mixed_precision.global_policy().name
        model = None
        if policy == self.policy and self.clone_ok is not False:
            model = self._clone()
            if model is not None:
                self.how[policy] = "cloned (keras.models.clone_model), the script's compile"
        if model is None:
            model = self._capture_again()
            self.how[policy] = "the script captured again under this policy"
        # built as its first fit step would build it, so its fingerprint covers its shapes
        build_like_fit(model, self.workload.first_batch())
        if self.drop_labels:
            _drop_labels(model)
        return model

    def _clone(self) -> Any:
        import keras

        from tfaccel.architecture import fingerprint

        original = self.workload.model
        if type(original) not in (keras.Sequential, _functional_class()):
            self.clone_ok = False
            return None
        try:
            clone = keras.models.clone_model(original)
            _compile_like(clone, original, self.workload)
            same = fingerprint(clone) == fingerprint(original) and _dtypes(clone) == _dtypes(
                original
            )
        except Exception:
            same, clone = False, None
        self.clone_ok = same
        return clone if same else None

    def _capture_again(self) -> Any:
        origin = self.workload.origin
        if not origin.script:
            raise TuneError(
                "The model cannot be built again: the workload has no script",
                expected="a workload captured from a script",
                received="a workload without origin.script",
                fix="tune the script: tfaccel tune train.py",
            )
        with settled_runtime():
            again = capture(
                origin.script,
                origin.args,
                fit=max(1, origin.fit),
                timeout=self.timeout,
                command="tune",
            )
        model = again.model
        if not getattr(model, "compiled", False) and again.compile.optimizer is not None:
            model.compile(optimizer=again.compile.optimizer, loss=again.compile.loss)
        return model


def _placeholder_labels(x: Any) -> Any:
    """One byte per example: the labels the trials carry for a ``fit(x)`` without labels."""
    import numpy as np

    from tfaccel.workload.data import examples

    return np.zeros(int(examples(x, None) or 0), dtype="uint8")


def _pairs(dataset: Any) -> bool:
    """Whether a dataset's elements are ``(x, y)`` or ``(x, y, sample_weight)``."""
    spec = dataset.element_spec
    return isinstance(spec, tuple) and len(spec) in (2, 3)


def _with_placeholder_labels(dataset: Any) -> Any:
    """``dataset`` of batches of x alone as ``(x, labels)``: one float 0 per example."""
    import tensorflow as tf

    def pair(*parts: Any) -> Any:
        x = parts[0] if len(parts) == 1 else parts
        first = tf.nest.flatten(x)[0]
        return x, tf.zeros(tf.shape(first)[:1], tf.float32)

    return dataset.map(pair)


def _drop_labels(model: Any) -> None:
    """``model.train_step`` given ``(x, labels)`` calls the model's own with ``x`` alone."""
    own = type(model).train_step

    def train_step(data: Any) -> Any:
        return own(model, data[0] if isinstance(data, tuple) else data)

    model.train_step = train_step


def _functional_class() -> type:
    from keras.src.models.functional import Functional

    return Functional


def _dtypes(model: Any) -> list[str]:
    return [str(getattr(layer.dtype_policy, "name", "")) for layer in model.layers]


def _compile_like(clone: Any, original: Any, workload: Workload) -> None:
    """Compile ``clone`` with ``original``'s compile arguments, each stateful object (the
    optimizer, metric objects) a fresh copy."""
    import keras

    config = dict(getattr(getattr(original, "_compile_config", None), "config", None) or {})
    if not config:  # not compiled by the script (its own loop, marked)
        config = {"optimizer": workload.compile.optimizer, "loss": workload.compile.loss}
    optimizer = config.get("optimizer")
    if optimizer is not None and not isinstance(optimizer, str):
        config["optimizer"] = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    for key in ("metrics", "weighted_metrics"):
        if config.get(key) is not None:
            config[key] = _fresh(config[key])
    clone.compile(**config)


def _fresh(value: Any) -> Any:
    """Metric objects copied from their config (strings and functions as they are)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_fresh(v) for v in value)
    from_config = getattr(type(value), "from_config", None)
    get_config = getattr(value, "get_config", None)
    if callable(from_config) and callable(get_config):
        try:
            return from_config(get_config())
        except Exception:
            return value
    return value


def baseline_config(script: ScriptWorkload, space: Space) -> Config:
    """The script's own configuration as a :class:`Config` of ``space`` (its batch, precision,
    XLA setting, steps per execution and feed; the pipeline knobs the space starts from)."""
    base = space.base(script.batch_size, script.precision, script.feed)
    return replace(base, jit=script.jit, steps_per_execution=script.steps_per_execution)


def against_baseline(
    outcome: SearchOutcome,
    runner: Runner,
    baseline: Config,
    settings: SearchSettings,
    *,
    is_oom: Callable[[BaseException], bool],
) -> dict[str, Any]:
    """Time the script's own configuration and the search's winner together
    (``settings.final_rounds`` interleaved rounds) and keep the winner only when it is faster
    beyond the noise; otherwise the script's own configuration is the answer ("keep yours").

    ``outcome`` is updated: its decision, the two trials' samples (one rung more) and notes.

    Returns:
        The verdict, JSON-ready: ``kept`` (the script's own configuration is the answer),
        ``ratio`` (winner / baseline images/s), ``noise``, ``says``.
    """
    assert outcome.decision is not None
    winner = outcome.decision.winner
    trials = {t.config: t for t in outcome.trials}
    if winner == baseline:
        says = "the search's winner is your own configuration: keep yours"
        if baseline in trials:
            trials[baseline].note = "your own configuration, the search's winner"
        outcome.decision = Decision(
            winner, outcome.decision.fastest, f"{outcome.decision.reason}; {says}"
        )
        return {"kept": True, "ratio": 1.0, "noise": None, "rounds": 0, "says": says}
    trial = trials.get(baseline)
    if trial is None:
        trial = Trial(baseline, order=len(trials))
        outcome.trials.append(trial)
    try:
        if not _holds(runner, baseline):
            began = time.monotonic()
            runner.prepare(baseline)
            trial.prepare_s = time.monotonic() - began
        if not _holds(runner, winner):
            runner.prepare(winner)
        samples = measure_interleaved(
            {
                "baseline": lambda: runner.sample(baseline),
                "winner": lambda: runner.sample(winner),
            },
            repeats=max(3, settings.final_rounds),
            warmup=0,
        )
    except Exception as exc:  # the script's own configuration could not be timed here
        what = "out of memory" if is_oom(exc) else f"{type(exc).__name__}: {exc}"
        says = f"your own configuration {baseline.label()} could not be timed ({what})"
        trial.status, trial.note = ("oom" if is_oom(exc) else "error"), says
        outcome.notes.append(says)
        return {"kept": False, "ratio": None, "noise": None, "rounds": 0, "says": says}
    rates = {name: [1.0 / s for s in values if s > 0] for name, values in samples.items()}
    rung = 1 + max((t.last_rung or 0) for t in outcome.trials)
    trial.rung_samples[rung] = rates["baseline"]
    trial.status, trial.note = "ok", "your own configuration"
    trials[winner].rung_samples[rung] = rates["winner"]
    verdict = compare(
        summarize(rates["baseline"]), summarize(rates["winner"]), higher_is_better=True
    )
    rounds = len(rates["winner"])
    if verdict.different and verdict.ratio > 1:
        says = (
            f"x{verdict.ratio:.2f} over your own configuration {baseline.label()}, beyond the "
            f"noise (+-{verdict.noise * 100:.1f}%), timed together in {rounds} interleaved rounds"
        )
        outcome.decision = Decision(winner, winner, f"{outcome.decision.reason}; {says}")
        return {
            "kept": False,
            "ratio": verdict.ratio,
            "noise": verdict.noise,
            "rounds": rounds,
            "says": says,
        }
    how = "inside the noise" if not verdict.different else "slower beyond the noise"
    says = (
        f"keep yours: {winner.label()} measured x{verdict.ratio:.2f} against your own "
        f"configuration {baseline.label()}, {how} (+-{verdict.noise * 100:.1f}%, {rounds} "
        "interleaved rounds)"
    )
    trials[winner].note = "the search's winner; not faster than yours beyond the noise"
    outcome.decision = Decision(baseline, winner, says)
    return {
        "kept": True,
        "ratio": verdict.ratio,
        "noise": verdict.noise,
        "rounds": rounds,
        "says": says,
    }


def _holds(runner: Any, config: Config) -> bool:
    holds = getattr(runner, "holds", None)
    return bool(holds(config)) if callable(holds) else False
