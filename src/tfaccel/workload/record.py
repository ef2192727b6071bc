"""What a training workload is: the model as the script built it, its compile arguments, the
training data as given to ``fit``, the fit arguments, and where it came from.

A :class:`Workload` holds live objects (the Keras model, the dataset): it lives in the process
that captured it. :meth:`Workload.describe` is its JSON-ready summary, for messages and for a
result that travels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfaccel.workload import data as data_forms

__all__ = [
    "CompileArgs",
    "Origin",
    "Workload",
    "build_like_fit",
    "own_step_reason",
    "own_train_step",
]

KERAS_DEFAULT_BATCH = 32
"""The batch ``fit`` uses for arrays when ``batch_size`` is not given."""


@dataclass(frozen=True)
class Origin:
    """Where a workload came from.

    Attributes:
        script: the script's path (None: a model handed over in Python).
        args: the script's own arguments.
        fit: which ``fit`` call of the script it is (1 the first; 0: :func:`mark`).
        call: where that call is in the script, ``train.py:42``.
        method: the call the workload was taken at: ``fit``, ``train_on_batch`` (a script
            whose loop hands ``train_on_batch`` one batch at a time: that first batch is the
            data, and the epoch's length is not known) or ``mark``.
    """

    script: str | None = None
    args: tuple[str, ...] = ()
    fit: int = 1
    call: str | None = None
    method: str = "fit"

    def to_dict(self) -> dict[str, Any]:
        return {
            "script": self.script,
            "args": list(self.args),
            "fit": self.fit,
            "call": self.call,
            "method": self.method,
        }


@dataclass
class CompileArgs:
    """What ``model.compile`` was given (or, for :func:`mark`, the loop's own optimizer/loss).

    Attributes:
        optimizer: the optimizer object (None: the model was not compiled).
        loss, metrics, loss_weights, weighted_metrics: as given to ``compile``.
        steps_per_execution, jit_compile, run_eagerly: as given (``jit_compile`` "auto" when
            left to Keras).
    """

    optimizer: Any = None
    loss: Any = None
    metrics: Any = None
    steps_per_execution: int = 1
    jit_compile: Any = "auto"
    run_eagerly: bool = False
    loss_weights: Any = None
    weighted_metrics: Any = None

    @classmethod
    def of(cls, model: Any) -> CompileArgs:
        """The compile arguments of ``model`` (Keras 3 keeps them in ``_compile_config``)."""
        given = getattr(getattr(model, "_compile_config", None), "config", None) or {}
        return cls(
            optimizer=getattr(model, "optimizer", None),
            loss=given.get("loss", getattr(model, "loss", None)),
            metrics=given.get("metrics"),
            steps_per_execution=int(given.get("steps_per_execution") or 1),
            jit_compile=given.get("jit_compile", "auto"),
            run_eagerly=bool(given.get("run_eagerly", False)),
            loss_weights=given.get("loss_weights"),
            weighted_metrics=given.get("weighted_metrics"),
        )

    def step_kwargs(self) -> dict[str, Any]:
        """``compile`` arguments that give another model the training step the script's own
        compile gave its model (the plan's stand-in for a model it cannot trace as built):
        the optimizer, the loss and its weights, the metrics (``fit`` computes them in every
        step: an accuracy's arg-max over a language model's logits is as large as them), the
        steps per execution (``fit``'s loop shares its cost among them). Not ``run_eagerly``
        or ``jit_compile``: the plan traces the step itself."""
        return {
            "optimizer": self.optimizer,
            "loss": self.loss,
            "loss_weights": self.loss_weights,
            "metrics": self.metrics,
            "weighted_metrics": self.weighted_metrics,
            "steps_per_execution": self.steps_per_execution,
        }

    @property
    def optimizer_config(self) -> dict[str, Any] | None:
        """The optimizer's ``get_config()`` (JSON-ready where its values are)."""
        if self.optimizer is None:
            return None
        try:
            config: dict[str, Any] = dict(self.optimizer.get_config())
        except Exception:  # a hand-written optimizer without a config
            return None
        return config

    def to_dict(self) -> dict[str, Any]:
        opt = self.optimizer
        return {
            "optimizer": type(opt).__name__ if opt is not None else None,
            "optimizer_config": _plain(self.optimizer_config),
            "loss": _name(self.loss),
            "metrics": _plain(_name(self.metrics)),
            "weighted_metrics": _plain(_name(self.weighted_metrics)),
            "loss_weights": _plain(self.loss_weights),
            "steps_per_execution": self.steps_per_execution,
            "jit_compile": self.jit_compile,
            "run_eagerly": self.run_eagerly,
        }


@dataclass
class Workload:
    """One training workload, as the script runs it.

    Attributes:
        model: the Keras model, as built (and compiled) by the script, untrained past the point
            of capture.
        compile: its compile arguments.
        x, y: the training data exactly as given to ``fit`` (arrays, a dict of arrays, a
            ``tf.data.Dataset``, a generator, a ``PyDataset``); a generator whose first batch
            was read to learn its shape is an iterator yielding that batch and then the rest.
        fit_kwargs: every other argument ``fit`` was given (``batch_size``, ``epochs``,
            ``callbacks``, ``validation_data``, ``steps_per_epoch``...), as given.
        origin: where it came from.
    """

    model: Any
    compile: CompileArgs
    x: Any
    y: Any = None
    fit_kwargs: dict[str, Any] = field(default_factory=dict)
    origin: Origin = field(default_factory=Origin)
    _first: Any = field(default=None, repr=False)
    _peeked: bool = field(default=False, repr=False)

    @property
    def data_kind(self) -> str:
        """``arrays``, ``dict``, ``dataset``, ``generator``, ``pydataset`` or ``other``."""
        return data_forms.kind_of(self.x)

    @property
    def epochs(self) -> int:
        return int(self.fit_kwargs.get("epochs") or 1)

    @property
    def callbacks(self) -> list[Any]:
        given = self.fit_kwargs.get("callbacks")
        if given is None:
            return []
        return list(given) if isinstance(given, (list, tuple)) else [given]

    @property
    def strategy(self) -> str | None:
        """The class name of the ``tf.distribute`` strategy the model was built under (None:
        the default one, a single device)."""
        name = type(getattr(self.model, "distribute_strategy", None)).__name__
        return None if name in ("_DefaultDistributionStrategy", "NoneType") else name

    @property
    def validation_data(self) -> Any:
        return self.fit_kwargs.get("validation_data")

    def first_batch(self) -> Any:
        """The first training batch: ``x`` (the inputs only), read once and kept.

        Arrays are sliced; a dataset is iterated once (a new iterator: the dataset itself is
        unchanged); a ``PyDataset`` is indexed; a generator's first item is read, and ``x``
        becomes an iterator that yields it again first.
        """
        if not self._peeked:
            self._first, replacement = data_forms.first_batch(self.x, self.batch_argument)
            if replacement is not None:
                self.x = replacement
            self._peeked = True
        return self._first

    @property
    def batch_argument(self) -> int:
        """``fit``'s ``batch_size``, or Keras' default of 32 (what arrays are cut into)."""
        return int(self.fit_kwargs.get("batch_size") or KERAS_DEFAULT_BATCH)

    @property
    def batch_size(self) -> int | None:
        """The batch of one training step: ``batch_size`` for arrays (Keras' 32 when not
        given), the first batch's size for a dataset, a generator or a ``PyDataset``."""
        if self.data_kind in ("arrays", "dict"):
            return self.batch_argument
        return data_forms.leading_dim(self.first_batch())

    @property
    def batch_source(self) -> str:
        """How :attr:`batch_size` was learned, for a note."""
        if self.origin.method == "train_on_batch":
            return "the first batch given to train_on_batch"
        if self.data_kind in ("arrays", "dict"):
            if self.fit_kwargs.get("batch_size"):
                return f"fit(batch_size={self.fit_kwargs['batch_size']})"
            return f"Keras' default batch for arrays ({KERAS_DEFAULT_BATCH})"
        return f"the first batch of the {self.data_kind}"

    @property
    def examples(self) -> int | None:
        """Training examples per epoch, where the data says (None: unknown, e.g. a generator
        without ``steps_per_epoch``)."""
        if self.origin.method == "train_on_batch":
            return None  # one batch of the script's own loop: how many make an epoch is its own
        steps = self.fit_kwargs.get("steps_per_epoch")
        batch = self.batch_size
        if steps and batch:
            return int(steps) * batch
        count = data_forms.examples(self.x, batch)
        split = float(self.fit_kwargs.get("validation_split") or 0.0)
        if count is not None and split and self.data_kind in ("arrays", "dict"):
            count = int(count * (1.0 - split))
        return count

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary (no arrays, no model weights)."""
        model = self.model
        return {
            "origin": self.origin.to_dict(),
            "model": {
                "name": getattr(model, "name", None),
                "class": type(model).__name__,
                "built": bool(getattr(model, "built", False)),
            },
            "compile": self.compile.to_dict(),
            "data": {
                "kind": self.data_kind,
                "batch_size": self.batch_size,
                "batch_source": self.batch_source,
                "examples": self.examples,
                "validation": self.validation_data is not None
                or bool(self.fit_kwargs.get("validation_split")),
            },
            "epochs": self.epochs,
            "callbacks": [type(c).__name__ for c in self.callbacks],
        }


def _name(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _name(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_name(v) for v in value]
    return getattr(value, "name", None) or getattr(value, "__name__", None) or type(value).__name__


def _plain(value: Any) -> Any:
    """``value`` with what JSON cannot hold written as text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def own_train_step(model: Any) -> bool:
    """Whether ``model``'s class defines its own ``train_step`` (not Keras' standard one)."""
    import keras

    return getattr(type(model), "train_step", None) is not keras.Model.train_step


def own_step_reason(model: Any, compiled: CompileArgs | None = None) -> str | None:
    """Why ``fit`` runs code of the model's own in its step, which only the step itself
    shows (None: Keras' standard step on ``model(x)`` and the compiled loss):

    - its class defines ``train_step`` (a VAE, a GAN, keras.io's "customizing fit");
    - its class defines ``compute_loss`` (keras.io's knowledge distillation: a teacher's
      forward pass inside the loss);
    - it was compiled with an optimizer and no loss (``compiled``): its loss is what its
      layers add with ``add_loss`` (keras.io's OCR model and its CTC layer), and it may take
      its labels as an input.
    """
    import keras

    if own_train_step(model):
        return "its own train_step"
    if getattr(type(model), "compute_loss", None) is not keras.Model.compute_loss:
        return "its own compute_loss"
    if compiled is not None and compiled.optimizer is not None and compiled.loss is None:
        return "a loss its layers add (compiled without a loss)"
    return None


def build_like_fit(model: Any, inputs: Any) -> bool:
    """Build a model the script has not built yet (a subclassed model, never called), as its
    first ``fit`` step would: called once on ``inputs`` (a first batch's inputs). Its
    architecture fingerprint then covers its weights' shapes, not only its layer types.

    Returns:
        Whether the model is built now (a model without ``call``, such as a VAE whose
        ``train_step`` calls its parts, stays as it is: its parts are built already).
    """
    if getattr(model, "built", True) or inputs is None:
        return bool(getattr(model, "built", True))
    try:
        model(inputs, training=False)
    except Exception:  # no call() of its own, or inputs it does not take this way
        return False
    return bool(getattr(model, "built", False))
