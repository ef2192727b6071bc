"""Where the model of a plan comes from: a user's training script as written (its workload,
captured at ``fit``), a script defining ``model_fn()``, or a tfaccel reference model by name.

:func:`tfaccel.scripts.defines_hooks` tells the two kinds of script apart without running
either. A script defining ``model_fn`` (or ``tfaccel_tune()`` returning a dict with
``model_fn``, as for ``tfaccel tune``) runs as a module named ``__tfaccel_plan__``, so its
training code under ``if __name__ == "__main__":`` does not run. Any other script is run
unchanged up to its ``fit`` (:func:`tfaccel.workload.capture`) and :func:`plan_workload` plans
what it captured, in the same process.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tfaccel import models
from tfaccel.core.errors import TfaccelError, UsageError
from tfaccel.planning.api import PlanError, own_step_data, plan
from tfaccel.planning.result import Plan
from tfaccel.planning.trace import remembered_step_data
from tfaccel.scripts import check_script, read_hooks
from tfaccel.workload import DEFAULT_TIMEOUT_S, Workload
from tfaccel.workload import data as data_forms
from tfaccel.workload.isolated import run_isolated
from tfaccel.workload.record import own_step_reason

__all__ = [
    "REFERENCE_EXAMPLES",
    "model_fn_for",
    "names_script",
    "origin_note",
    "plan_workload",
    "reference_model_fn",
    "reference_plans",
    "script_model_fn",
    "workload_model",
]

SCRIPT_MODULE_NAME = "__tfaccel_plan__"
REFERENCE_EXAMPLES = {"reference_cnn": 50_000, "resnet20": 50_000, "mlp": 60_000}
"""Training examples per epoch of the reference models' data sets (CIFAR-10, MNIST)."""


def script_model_fn(path: str) -> Callable[[], Any]:
    """The ``model_fn`` a script defines (:func:`tfaccel.scripts.read_hooks`, the model only).

    Raises:
        UsageError: the path is not a readable Python file (:func:`check_script`).
        PlanError: the script raised while loading, or defines no model_fn.
    """
    script = check_script(
        path, "plan", expected="a Python file defining model_fn()", directory=False
    )
    return read_hooks(script, SCRIPT_MODULE_NAME, PlanError, data=False).model_fn


def names_script(model: str) -> bool:
    """Whether ``--model`` names a script (an existing file, or a name ending in .py or
    holding a path separator) rather than a reference model."""
    return model.endswith(".py") or os.path.sep in model or os.path.isfile(model)


def model_fn_for(model: str) -> Callable[[], Any]:
    """The ``model_fn`` of ``model``: a script's (:func:`names_script`), else a reference
    model's by name.

    Raises:
        UsageError: unknown model name; PlanError: the script cannot be run.
    """
    if names_script(model):
        return script_model_fn(model)
    return reference_model_fn(model)[1]


def reference_model_fn(name: str) -> tuple[str, Callable[[], Any]]:
    """``(key, model_fn)`` of a reference model (:func:`tfaccel.models.model_key`), compiled
    as ``tfaccel bench`` compiles it (:func:`tfaccel.models.reference_model_fn`).

    Raises:
        UsageError: unknown model name.
    """
    key = models.model_key(name)
    return key, models.reference_model_fn(key)


def reference_plans(batch_size: int, inventory: Any = None) -> list[dict[str, Any]]:
    """The plan of every reference model at ``batch_size`` (float32), as report rows: the
    memory it needs, this machine's devices, and the fastest accelerator of the database.

    A model whose plan fails gets a row with its ``error`` instead (the report goes on).
    """
    rows: list[dict[str, Any]] = []
    for key in models.MODELS:
        _, model_fn = reference_model_fn(key)
        try:
            result = plan(
                model_fn,
                batch_size=batch_size,
                precision="float32",
                examples=REFERENCE_EXAMPLES.get(key),
                inventory=inventory,
            )
        except TfaccelError as exc:
            rows.append({"model": key, "batch_size": batch_size, "error": str(exc)})
            continue
        rows.append(
            {
                "model": key,
                "batch_size": batch_size,
                "precision": result.precision,
                "parameters": result.parameters,
                "needed_bytes": result.memory.total_bytes,
                "this_machine": [r.to_dict() for r in result.devices if r.target.this_machine],
                "fastest": result.devices[0].to_dict(),
                "prediction": True,
            }
        )
    return rows


def workload_model(workload: Workload) -> tuple[Any, Any, list[str]]:
    """``(model, optimizer, notes)``: what :func:`tfaccel.plan` is given for ``workload``.

    A model whose class has its own ``train_step`` (a VAE's, a GAN's, keras.io's "customizing
    fit" model) is planned through that step: built as ``fit`` builds it, and traced on the
    first batch as ``fit`` hands it to the step (its structure and dtypes: ``x`` alone,
    ``(x, y)``, ``(x, y, sample_weight)``, dicts), with every optimizer it holds
    (:func:`tfaccel.planning.trace.remember_step_data`). Any other model with symbolic inputs
    of known shape (Sequential on ``keras.Input``, functional) is planned as the script built
    and compiled it. A model without them (subclassed, a Sequential never built) or with an
    open dimension (``keras.Input((None,))`` for sequences of any length) is called on
    ``keras.Input`` tensors shaped like the first training batch, inside a functional model
    compiled as the script compiled its own: its metrics, loss weights and steps per execution
    too, which ``fit``'s steps run with (``CompileArgs.step_kwargs``). A model the script did
    not compile (its own loop, :func:`tfaccel.workload.mark`) gets the loop's optimizer and
    loss.

    Raises:
        PlanError: the model cannot be called on inputs shaped like its data; a model with its
            own ``train_step`` built under a ``tf.distribute`` strategy.
    """
    import keras

    model = workload.model
    compiled = workload.compile
    notes: list[str] = []
    strategy = workload.strategy
    why = own_step_reason(model, compiled) if workload.origin.fit else None  # not a marked loop
    if why is not None:
        model = _own_step_model(workload)
        return model, None, [own_step_note(model, why) or ""]
    if strategy is not None:  # one replica's step: the model cloned outside the strategy
        try:
            model = keras.models.clone_model(model)
        except Exception as exc:
            raise PlanError(
                f"The model {model.name!r} was built under a {strategy} and cannot be "
                f"cloned outside it to trace one replica's step ({type(exc).__name__}: {exc})",
                expected="a Sequential or functional model under the strategy",
                received=f"{type(model).__name__} {model.name!r} of {strategy}",
                fix="let the script build the model without its strategy (an option of its "
                "own), and plan the per-replica batch with --batch",
            ) from exc
        optimizer = compiled.optimizer
        if optimizer is not None and not isinstance(optimizer, str):
            optimizer = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
        compiled = dataclasses.replace(compiled, optimizer=optimizer)
        notes.append(f"built under {strategy}: one replica's training step is planned")
    try:
        symbolic = bool(model.inputs) and bool(model.outputs)
    except (AttributeError, ValueError):
        symbolic = False
    open_shape = symbolic and any(
        d is None for tensor in model.inputs for d in tuple(tensor.shape)[1:]
    )
    if not symbolic or open_shape:
        batch = workload.first_batch()
        try:
            inputs = _inputs_like(batch, keras)
            outputs = model(inputs)
            names = list(getattr(model, "output_names", None) or [])
            model = keras.Model(inputs, outputs, name=model.name)
            if len(names) == len(model.outputs):  # the stand-in's are the inner model's name:
                model.output_names = names  # a loss or metrics keyed by output find theirs
        except Exception as exc:
            raise PlanError(
                f"The model {model.name!r} could not be called on inputs shaped like its "
                f"training data ({type(exc).__name__}: {exc})",
                expected="a model whose call() runs on keras.Input tensors of the data's shape",
                received=f"{type(workload.model).__name__} {workload.model.name!r}, first "
                f"batch {_shapes(batch)}",
                fix="start the model with keras.Input(shape=...) (Sequential or functional)",
            ) from exc
        why = "an input shape not fully known" if open_shape else "no symbolic inputs"
        notes.append(
            f"{type(workload.model).__name__} {workload.model.name!r} has {why}: "
            f"planned on inputs shaped like its first batch, {_shapes(batch)}"
        )
    if workload.compile.run_eagerly:
        notes.append(
            "the script compiles its model with run_eagerly=True: its steps run op by op from "
            "Python, often several times slower than the traced step these times are for; "
            "drop run_eagerly=True (a debugging switch) to train at them"
        )
    optimizer = None
    if compiled.optimizer is not None and compiled.loss is not None:
        if model is not workload.model or not getattr(model, "compiled", False):
            model.compile(**compiled.step_kwargs())
    elif compiled.optimizer is not None:
        optimizer = compiled.optimizer
    return model, optimizer, notes


def _own_step_model(workload: Workload) -> Any:
    """The workload's model, built as ``fit`` builds it, with the first batch as ``fit`` hands
    it to its own ``train_step`` remembered for the trace; a note says so.

    Raises:
        PlanError: the model was built under a ``tf.distribute`` strategy (its step cannot
            be traced as one replica's outside it).
    """
    model = workload.model
    cls = type(model).__name__
    if workload.strategy is not None:
        raise PlanError(
            f"{cls} has its own train_step and was built under a {workload.strategy}: the plan "
            "cannot trace one replica's step outside the strategy",
            expected="a model with its own train_step built without a tf.distribute strategy",
            received=f"{cls} {model.name!r} of {workload.strategy}",
            fix="let the script build the model without its strategy (an option of its own), "
            "and plan the per-replica batch with --batch",
        )
    element = fit_element(workload)
    try:
        own_step_data(model, element)
    except UsageError as exc:
        raise PlanError(
            f"The first training batch of {cls} cannot be traced: {exc.what}",
            expected=exc.expected,
            received=exc.received,
            fix=exc.fix,
        ) from exc
    return model


def own_step_note(model: Any, why: str = "its own train_step") -> str | None:
    """The note of a model planned through its own step (None: it is not); ``why``: what
    of its own the step runs (:func:`tfaccel.workload.record.own_step_reason`)."""
    data = remembered_step_data(model)
    if data is None:
        return None
    return (
        f"{type(model).__name__} has {why}: its train_step traced as fit runs it, on the "
        f"first batch as fit hands it to the step, {data.describe()}, with every optimizer "
        "it applies"
    )


def fit_element(workload: Workload) -> Any:
    """The first batch as ``fit`` hands it to ``train_step``: arrays cut at ``fit``'s batch
    and packed as Keras packs them (``x`` alone, ``(x, y)``, ``(x, y, sample_weight)``; a
    ``class_weight`` becomes a sample weight), a dataset's first element, a ``PyDataset``'s
    first item, a generator's first item (yielded again first)."""
    import itertools

    import keras

    kind = workload.data_kind
    if kind in ("arrays", "dict"):
        x = workload.first_batch()
        n = workload.batch_argument
        y = _cut(workload.y, n)
        weight = _cut(workload.fit_kwargs.get("sample_weight"), n)
        if weight is None and workload.fit_kwargs.get("class_weight") and y is not None:
            import numpy as np

            rows = data_forms.leading_dim(x) or n
            weight = np.ones((rows,), "float32")
        return keras.utils.pack_x_y_sample_weight(x, y, weight)
    if kind == "dataset":
        return next(iter(workload.x))
    if kind == "pydataset":
        return workload.x[0]
    if kind == "generator":
        workload.first_batch()  # x is now an iterator that yields the first item again
        first = next(workload.x)
        workload.x = itertools.chain([first], workload.x)
        return first
    raise PlanError(
        "The training data of the workload cannot be read",
        expected="arrays, a dict of arrays, a tf.data.Dataset, a generator or a PyDataset",
        received=f"model.fit given a {type(workload.x).__name__}",
        fix="give fit one of those",
    )


def _cut(value: Any, n: int) -> Any:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {k: v[:n] for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(v[:n] for v in value)
    return value[:n]


def _inputs_like(batch: Any, keras: Any) -> Any:
    def one(array: Any) -> Any:
        dtype = getattr(array.dtype, "name", None) or str(array.dtype)
        return keras.Input(shape=tuple(int(d) for d in array.shape[1:]), dtype=dtype)

    if isinstance(batch, Mapping):
        return {
            name: keras.Input(
                shape=tuple(int(d) for d in value.shape[1:]),
                dtype=getattr(value.dtype, "name", None) or str(value.dtype),
                name=str(name),
            )
            for name, value in batch.items()
        }
    if isinstance(batch, (list, tuple)):
        return [one(a) for a in batch]
    return one(batch)


def _shapes(batch: Any) -> str:
    if isinstance(batch, Mapping):
        return "{" + ", ".join(f"{k}: {_shapes(v)}" for k, v in batch.items()) + "}"
    if isinstance(batch, (list, tuple)):
        return "[" + ", ".join(_shapes(v) for v in batch) + "]"
    shape = getattr(batch, "shape", None)
    return str(tuple(shape)) if shape is not None else type(batch).__name__


def origin_note(workload: Workload) -> str:
    """``the workload of train.py:42 (model.fit #1), captured before it trained``."""
    origin = workload.origin
    where = origin.call or (Path(origin.script).name if origin.script else "the script")
    if origin.method == "train_on_batch":
        how = "its first model.train_on_batch: one batch; the epoch's length is its loop's"
    else:
        how = f"model.fit #{origin.fit}" if origin.fit else "tfaccel.workload.mark"
    return f"the workload of {where} ({how}), captured before it trained"


def plan_workload(
    workload: Workload,
    *,
    batch_size: int | None = None,
    precision: str | None = None,
    optimizer: Any = None,
    devices: Sequence[str] | None = None,
    examples: int | None = None,
    prices: Mapping[str, float] | None = None,
    inventory: Any = None,
) -> Plan:
    """Plan a captured workload: its model, at its batch (or ``batch_size``), with its own
    optimizer (or ``optimizer``), and its examples per epoch where the data says (or
    ``examples``). The notes say where each came from.

    Raises:
        UsageError, PlanError: as :func:`tfaccel.plan`.
    """
    model, own_optimizer, notes = workload_model(workload)
    notes.insert(0, origin_note(workload))
    batch = batch_size
    if batch is None:
        batch = workload.batch_size
        if batch is None:
            raise PlanError(
                "The batch size of the training data could not be read",
                expected="data whose first batch has a batch dimension",
                received=f"{workload.data_kind} data",
                fix="pass the batch size: tfaccel plan --batch N SCRIPT",
            )
        notes.append(f"batch {batch}: {workload.batch_source}")
        strategy = getattr(workload.model, "distribute_strategy", None)
        replicas = int(getattr(strategy, "num_replicas_in_sync", 1))
        if workload.strategy is not None and replicas > 1:
            batch = max(1, batch // replicas)
            notes.append(f"batch {batch} per replica: the global batch over {replicas} replicas")
    if examples is None and workload.examples:
        examples = workload.examples
        counted = (
            " (its batches x the batch size: its last batch may be smaller, so at most this)"
            if workload.data_kind in ("dataset", "pydataset")
            and not workload.fit_kwargs.get("steps_per_epoch")
            else ""
        )
        notes.append(
            f"{examples:,} examples per epoch: from the training data ({workload.data_kind})"
            + counted
        )
    result = plan(
        model,
        batch_size=batch,
        precision=precision,
        optimizer=optimizer if optimizer is not None else own_optimizer,
        devices=devices,
        examples=examples,
        prices=prices,
        inventory=inventory,
        step_call="train_on_batch" if workload.origin.method == "train_on_batch" else "fit",
    )
    result.notes[0:0] = notes
    return result


def plan_document(workload: Workload, **options: Any) -> dict[str, Any]:
    """The ``tfaccel plan --json`` document of a workload: the plan, and the workload's summary
    (``options`` as for :func:`plan_workload`)."""
    result = plan_workload(workload, **options)
    return {**result.to_dict(), "workload": workload.describe()}


def plan_script(
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    *,
    fit: int = 1,
    timeout: float = DEFAULT_TIMEOUT_S,
    batch_size: int | None = None,
    precision: str | None = None,
    optimizer: str | None = None,
    devices: Sequence[str] | None = None,
    examples: int | None = None,
    prices: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Plan an unchanged script from Python, leaving this process as it was: the script runs up
    to its ``fit`` in a child process, which plans the workload there and returns the
    ``tfaccel plan --json`` document.

    Raises:
        UsageError: the script is not a readable Python file; a bad option.
        CaptureError: the script did not reach its ``fit`` (the reason, with its line).
        PlanError: the model cannot be traced.

    Example:
        >>> plan_script("train.py", ["--epochs", "1"], devices=["a100-40gb"])  # doctest: +SKIP
    """
    options = {
        "batch_size": batch_size,
        "precision": precision,
        "optimizer": optimizer,
        "devices": list(devices) if devices is not None else None,
        "examples": examples,
        "prices": dict(prices) if prices is not None else None,
    }
    document: dict[str, Any] = run_isolated(
        script,
        args,
        task="tfaccel.planning.source:plan_document",
        options=options,
        fit=fit,
        timeout=timeout,
    )
    return document
