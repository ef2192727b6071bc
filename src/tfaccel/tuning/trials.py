"""Trials on TensorFlow: build the user's model per configuration, feed it, time it.

A trial sets the Keras dtype policy while ``model_fn()`` builds the model (so its layers take
the precision), sets ``model.jit_compile``, and times ``fit`` exactly as ``tfaccel bench``
does (:mod:`tfaccel.bench.training`): the clock runs from the end of the first batch to the
moment the last update is visible on the host. The pipeline feed goes through
``tfaccel.data.pipeline``; the numpy feed is ``model.fit(x, y, batch_size=...)``.

TensorFlow and Keras are imported inside the functions.
"""

from __future__ import annotations

import gc
import importlib
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfaccel import inventory
from tfaccel.architecture import fingerprint
from tfaccel.core.errors import TfaccelError
from tfaccel.inventory.precision import POLICY_DTYPE
from tfaccel.tuning._errors import (
    ModelFnError,
    ModelReusedError,
    NotAppliedError,
    TuneError,
    first_line,
    user_traceback,
)
from tfaccel.tuning.data import TuneData, check_arrays
from tfaccel.tuning.space import OWN_FEED, Config

if TYPE_CHECKING:
    from tfaccel.inventory import Inventory

__all__ = [
    "Realised",
    "TfRunner",
    "build_model",
    "check_applied",
    "check_data",
    "device_name",
    "hardware_precisions",
    "realised",
    "resolve_pipeline",
]

"""The dtype each precision policy the tuner tries computes in."""


def check_data(data: Any) -> tuple[Any, Any, int]:
    """Check array training data: a pair ``(x, y)``, each an array or a dict of arrays, all of
    the same, non-zero length (see :func:`tfaccel.tuning.data.check_arrays`; the other forms
    ``tune`` reads are classified by :func:`tfaccel.tuning.data.classify`).

    Returns:
        (x, y, number of examples).

    Raises:
        TuneError: not a pair, lengths differ, or no examples.

    Example:
        >>> import numpy as np
        >>> check_data((np.zeros((10, 3)), np.zeros(10)))[2]
        10
    """
    return check_arrays(data)


def qualified_name(fn: Callable[..., Any]) -> str:
    """How to name the user's function in a message: ``module.qualname``."""
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{name}" if module and module != "builtins" else name


def build_model(model_fn: Callable[[], Any], precision: str, *, name: str | None = None) -> Any:
    """Call the user's ``model_fn`` under the Keras dtype policy ``precision``.

    The global policy is set while ``model_fn`` runs and restored after, so layers built without
    an explicit dtype take the precision.

    Args:
        model_fn: builds and compiles a Keras model.
        precision: a Keras dtype policy name.
        name: how to name the function in errors (default: its module and name).

    Returns:
        The compiled model.

    Raises:
        ModelFnError: ``model_fn`` raised (the message holds its traceback), or returned
            something that is not a compiled Keras model.
    """
    import keras

    shown = name or qualified_name(model_fn)
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(precision)
    try:
        model = model_fn()
    except Exception as exc:
        script = getattr(model_fn, "script_name", None)  # a script's model, built again
        if (
            script is not None
            and isinstance(exc, TfaccelError)
            and getattr(exc, "reason", None) != "raised"
        ):
            raise  # the script run again did not reach its fit (a timeout, an exit): as it is
        if script is not None and precision != getattr(model_fn, "policy", precision):
            raise ModelFnError(
                f"Building the model of {script} again under {precision} raised "
                f"{type(exc).__name__}: {first_line(exc)}",
                expected=f"the script's model to build under the {precision} policy",
                received="this traceback, from the script's code:\n" + user_traceback(exc),
                fix=f"make the model's own layers work under {precision} (make new tensors in "
                "self.compute_dtype, not float32), or leave that precision out: --space "
                "precision=float32",
            ) from exc
        raise ModelFnError(
            f"Your model_fn {shown} raised {type(exc).__name__}: {first_line(exc)}",
            expected="model_fn() to build, compile and return a keras.Model",
            received="this traceback, from your code:\n" + user_traceback(exc),
            fix=f"fix the error in {shown}; calling it alone reproduces it",
        ) from exc
    finally:
        keras.mixed_precision.set_global_policy(previous)
    if not isinstance(model, keras.Model):
        raise ModelFnError(
            f"Your model_fn {shown} did not return a Keras model",
            expected="a compiled keras.Model",
            received=type(model).__name__,
            fix="end model_fn with model.compile(optimizer=..., loss=...) and return model",
        )
    if not getattr(model, "compiled", False):
        raise ModelFnError(
            f"Your model_fn {shown} returned a model that is not compiled",
            expected="a compiled keras.Model (tune times model.fit, which needs a loss and an "
            "optimizer)",
            received=f"an uncompiled {type(model).__name__} named {model.name!r}",
            fix="call model.compile(optimizer=..., loss=...) in model_fn before returning it",
        )
    return model


@dataclass(frozen=True)
class Realised:
    """What a built, compiled model really computes in, read from the model itself.

    Attributes:
        compute_share: the share of the trainable weights in layers computing in each dtype
            (``{"float32": 0.25, "bfloat16": 0.75}``); by layer count when there are no
            trainable weights.
        jit: ``model.jit_compile`` as Keras holds it (Keras turns it off for a model that does
            not support XLA).
    """

    compute_share: dict[str, float]
    jit: bool

    @property
    def half_share(self) -> float:
        """The share of the weights in layers computing in a 16-bit dtype."""
        return sum(v for k, v in self.compute_share.items() if k in ("bfloat16", "float16"))

    def computes_in(self) -> str:
        """The main compute dtype and its share, e.g. ``float32`` or ``bfloat16 (75%)``."""
        if not self.compute_share:
            return "no layer"
        dtype = max(self.compute_share, key=lambda k: self.compute_share[k])
        share = self.compute_share[dtype]
        return dtype if share >= 0.999 else f"{dtype} ({share:.0%} of the weights)"


def realised(model: Any) -> Realised:
    """Read what ``model`` computes in: each leaf layer's ``compute_dtype``, weighted by its
    trainable weights, and ``model.jit_compile``.

    Example:
        >>> realised(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]))  # doctest: +SKIP
        Realised(compute_share={'float32': 1.0}, jit=False)
    """
    weights: dict[str, float] = {}
    counts: dict[str, float] = {}
    for layer in _leaf_layers(model):
        dtype = str(getattr(layer, "compute_dtype", None) or "float32")
        size = sum(_size(w) for w in getattr(layer, "trainable_weights", []))
        weights[dtype] = weights.get(dtype, 0.0) + size
        counts[dtype] = counts.get(dtype, 0.0) + 1.0
    chosen = weights if sum(weights.values()) > 0 else counts
    total = sum(chosen.values())
    share = {k: v / total for k, v in chosen.items() if v > 0} if total else {}
    return Realised(share, bool(getattr(model, "jit_compile", False)))


def _leaf_layers(model: Any) -> list[Any]:
    """The layers of ``model`` that hold no other layer (nested models and blocks opened)."""
    leaves, todo, seen = [], list(getattr(model, "layers", [])), set()
    while todo:
        layer = todo.pop(0)
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        inner = list(getattr(layer, "layers", None) or [])
        flatten = getattr(layer, "_flatten_layers", None)
        if not inner and callable(flatten):
            inner = list(flatten(include_self=False, recursive=False))
        if inner:
            todo += inner
        else:
            leaves.append(layer)
    return leaves


def _size(weight: Any) -> int:
    size = 1
    for dim in getattr(weight, "shape", ()):
        size *= int(dim or 1)
    return size


def check_applied(config: Config, found: Realised) -> None:
    """Raise when ``config``'s precision or XLA setting did not take effect on the model.

    The precision took effect when some layer computes in the dtype it asks for (a layer
    with its own ``dtype=`` keeps it); XLA when Keras kept ``jit_compile`` as asked.

    Raises:
        NotAppliedError: the trial would not measure the setting asked for.
    """
    want = POLICY_DTYPE.get(config.precision)
    if want is not None and found.compute_share and found.compute_share.get(want, 0.0) <= 0:
        raise NotAppliedError(
            f"{config.precision} asked, the model computes in {found.computes_in()}: its layers "
            "set their own dtype",
            setting="precision",
            expected=f"layers that follow the Keras global policy ({config.precision})",
            received=f"layers computing in {found.computes_in()}",
            fix="build the layers without dtype= in model_fn (the tuner sets the policy), or "
            "search the precision the model fixes only",
        )
    if config.jit != found.jit:
        raise NotAppliedError(
            f"XLA {'on' if config.jit else 'off'} asked, Keras kept jit_compile="
            f"{found.jit}" + (": the model does not support XLA" if config.jit else ""),
            setting="jit",
            expected=f"model.jit_compile == {config.jit}",
            received=f"model.jit_compile == {found.jit}",
            fix="search jit=[False] for this model",
        )


def resolve_pipeline() -> Callable[..., Any]:
    """``tfaccel.data.pipeline``, imported on first use.

    Raises:
        TuneError: the module is not installed with this tfaccel.
    """
    try:
        package = importlib.import_module("tfaccel.data")
        found = getattr(package, "pipeline", None)
        if found is None or not callable(found):
            found = getattr(importlib.import_module("tfaccel.data.pipeline"), "pipeline", None)
    except ImportError as exc:
        raise TuneError(
            "tfaccel.data.pipeline cannot be imported, so the pipeline feed cannot be tried",
            expected="tfaccel.data.pipeline",
            received=f"ImportError: {exc}",
            fix="reinstall tfaccel, or search the numpy feed only: space={'feed': ['numpy']}",
        ) from None
    if found is None or not callable(found):
        raise TuneError(
            "tfaccel.data has no pipeline function",
            expected="tfaccel.data.pipeline(source, batch_size, ...)",
            received=repr(found),
            fix="reinstall tfaccel, or search the numpy feed only: space={'feed': ['numpy']}",
        )
    return found


def device_name() -> str:
    """Where Keras trains by default: ``gpu:0`` when TensorFlow sees a GPU, else ``cpu``."""
    import tensorflow as tf

    return "gpu:0" if tf.config.list_physical_devices("GPU") else "cpu"


def hardware_precisions(inv: Inventory | None = None) -> tuple[str, ...]:
    """The precisions worth trying here: float32 and the 16-bit policies that the GPUs
    TensorFlow sees (else the TPU or the CPU) compute natively, simplest first.

    Args:
        inv: this machine's Inventory (default: :func:`tfaccel.inventory.current`).
    """
    inv = inv if inv is not None else inventory.current()
    gpus = inventory.tensorflow_gpus(inv, inv.cuda_visible_devices)
    return inv.precisions(gpus).fast


class TfRunner:
    """Runs trials of the user's model on TensorFlow (the :class:`~tfaccel.tuning.search.Runner`).

    Each prepared configuration keeps its own model and, for the pipeline feed, its dataset,
    until it is released.

    Args:
        model_fn: builds and compiles the model.
        x / y: the training arrays (an array or a dict of arrays each), when ``data`` is None.
        sample_s: the length of one timed sample (the step count adapts to it).
        pipeline_kwargs: more ``tfaccel.data.pipeline`` arguments, the same for every trial
            (``map_fn``, ``shuffle_buffer``, ``seed``...).
        pipeline_fn: the pipeline function (default: ``tfaccel.data.pipeline``).
        model_fn_name: how errors name ``model_fn``.
        data: the training data in any form ``tune`` reads (:func:`tfaccel.tuning.data.resolve`
            applied), instead of ``x`` and ``y``.
    """

    def __init__(
        self,
        model_fn: Callable[[], Any],
        x: Any,
        y: Any,
        *,
        sample_s: float = 1.0,
        pipeline_kwargs: Mapping[str, Any] | None = None,
        pipeline_fn: Callable[..., Any] | None = None,
        model_fn_name: str | None = None,
        data: TuneData | None = None,
    ) -> None:
        self.model_fn = model_fn
        if data is None:
            data = TuneData("arrays", x=x, y=y, examples=len(_Rows(x)))
        self.data = data
        self.x = data.x
        self.y = data.y
        self.sample_s = sample_s
        self.pipeline_kwargs = dict(pipeline_kwargs or {})
        self.pipeline_fn = pipeline_fn
        self.model_fn_name = model_fn_name
        self.model_name: str | None = None
        self.model_fingerprint: str | None = None  # the architecture results are stored under
        self._samplers: dict[Config, Any] = {}
        self._last_model: weakref.ref[Any] | None = None
        self.realised: dict[Config, Realised] = {}  # what each prepared trial computed in

    @property
    def device(self) -> str:
        """Where the trials train (``cpu`` or ``gpu:0``)."""
        return device_name()

    def prepare(self, config: Config) -> float | None:
        """Build the model for ``config`` and run the warm-up call (tracing, first steps);
        the warm-up's seconds per example."""
        from tfaccel.bench.datasets import ImageData  # local: tfaccel.bench imports numpy
        from tfaccel.bench.training import TrainConfig, TrainingSampler

        model = build_model(self.model_fn, config.precision, name=self.model_fn_name)
        self._check_new(model)
        if self.model_name is None:
            self.model_name = str(model.name)
            self.model_fingerprint = fingerprint(model)
        model.jit_compile = config.jit
        found = realised(model)
        self.realised[config] = found
        check_applied(config, found)
        model.steps_per_execution = config.steps_per_execution
        feed = "numpy" if config.feed == "numpy" else "tf.data"
        dataset = None if config.feed == "numpy" else self.dataset(config)
        sampler = TrainingSampler(
            model,
            TrainConfig(feed, config.batch_size, config.precision, config.jit),
            ImageData(_Rows(self.x), _Rows(self.y), "training data"),  # type: ignore[arg-type]
            dataset,
            1,
            self.sample_s,
        )
        warm = sampler()  # the warm-up: traces the train step, adapts the step count
        self._samplers[config] = sampler
        return warm

    def _check_new(self, model: Any) -> None:
        """Refuse a model_fn that returned the model of its previous call: each trial would
        train that one model, already trained, in the precision it was built with."""
        previous = self._last_model() if self._last_model is not None else None
        if previous is not None and previous is model:
            shown = self.model_fn_name or qualified_name(self.model_fn)
            raise ModelReusedError(
                f"Your model_fn {shown} returned the same model object on two calls",
                expected="model_fn must build a new model each call (each trial builds its "
                "own, under its precision)",
                received=f"the same {type(model).__name__} named {model.name!r} twice",
                fix="build the model inside model_fn (def model_fn(): model = keras.Sequential"
                "(...); model.compile(...); return model), not once outside it",
            )
        self._last_model = weakref.ref(model)

    def dataset(self, config: Config) -> Any:
        """The repeated, batched dataset of a pipeline-feed configuration.

        Arrays and a dataset or generator of examples go through ``tfaccel.data.pipeline``
        (``repeat=True``, ``drop_remainder=True``; a dataset or generator is not shuffled
        unless ``pipeline_kwargs`` asks); a PyDataset is read as it is, repeated.
        """
        if self.data.kind == "pydataset":
            return self.data.dataset
        if config.feed == OWN_FEED:  # a script's own dataset, exactly as it builds it
            return self.data.source.repeat()
        pipeline = self.pipeline_fn or resolve_pipeline()
        fixed = {"drop_remainder": True, "repeat": True}
        if self.data.arrays:
            source, defaults = (self.x, self.y), {}
        else:
            source, defaults = self.data.dataset, {"shuffle": False}
        return pipeline(
            source,
            config.batch_size,
            **{**defaults, **self.pipeline_kwargs, **config.pipeline_knobs(), **fixed},
        )

    def sample(self, config: Config) -> float:
        """One timed ``fit`` call: seconds per training example."""
        seconds: float = self._samplers[config]()
        return seconds

    def release(self, config: Config, *, failed: bool) -> None:
        """Drop the configuration's model; after a failure also clear Keras' session."""
        self._samplers.pop(config, None)
        if failed:
            import keras

            keras.backend.clear_session()  # collects garbage too
        else:
            gc.collect()

    def holds(self, config: Config) -> bool:
        """Whether ``config`` is prepared and not released."""
        return config in self._samplers

    def close(self) -> None:
        """Release every configuration."""
        self._samplers.clear()
        gc.collect()


class _Rows:
    """Arrays, a dict of arrays or a tuple of them (several inputs), sliced together by
    ``rows[:n]`` (the numpy feed slices the examples it fits on); ``shape`` starts with the
    number of rows, as an array's does."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __getitem__(self, rows: slice) -> Any:
        if isinstance(self.value, Mapping):
            return {name: part[rows] for name, part in self.value.items()}
        if isinstance(self.value, tuple):
            return tuple(part[rows] for part in self.value)
        return self.value[rows]

    def __len__(self) -> int:
        if isinstance(self.value, Mapping):
            return len(next(iter(self.value.values())))
        if isinstance(self.value, tuple):
            return len(self.value[0])
        return len(self.value)

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)
