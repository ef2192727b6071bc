"""Where the model and the data come from: a user's script, or a tfaccel reference model.

A script tells ``tfaccel tune SCRIPT`` what to tune in one of two ways:

1. a function ``tfaccel_tune()`` returning a dict with ``model_fn`` and ``data`` (and, if
   wanted, ``space``, ``model_name``, ``pipeline_kwargs``); or
2. module-level ``model_fn`` (a function returning a compiled Keras model) and ``data`` (the
   pair ``(x, y)`` or any other form ``tfaccel.tune`` reads, or a function returning it; a
   generator function, one that yields, is the data itself and is not called here).

The script is run as a module named ``__tfaccel_tune__``, so its training code under
``if __name__ == "__main__":`` does not run. :class:`Hooks` also knows how to be rebuilt in
another process (its ``recipe``), which the thread search needs.

Example:
    A script ``train.py``::

        def model_fn():
            model = keras.Sequential([...], name="my_net")
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
            return model

        def data():
            return x_train, y_train

        if __name__ == "__main__":
            model_fn().fit(*data(), epochs=10)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfaccel import models, scripts
from tfaccel.tuning._errors import TuneError

__all__ = ["SCRIPT_MODULE_NAME", "Hooks", "hooks_from_recipe", "load_script", "reference_hooks"]

SCRIPT_MODULE_NAME = "__tfaccel_tune__"
DEFAULT_EXAMPLES = 10_000
SMOKE_EXAMPLES = 512


@dataclass
class Hooks:
    """What ``tune`` needs from a script or a reference model.

    Attributes:
        model_fn: builds and compiles the model.
        data: the training data, in a form :func:`tfaccel.tuning.data.classify` reads.
        source: where they came from, for messages ("train.py", "reference model ...").
        model_fn_name: how errors name ``model_fn``.
        space: a space the script asks for (None: the default).
        model_name: the name to store the result under (None: the model's own name).
        pipeline_kwargs: fixed ``tfaccel.data.pipeline`` arguments.
        recipe: how another process rebuilds these hooks (JSON-ready).
    """

    model_fn: Callable[[], Any]
    data: Any
    source: str
    model_fn_name: str
    space: dict[str, Any] | None = None
    model_name: str | None = None
    pipeline_kwargs: dict[str, Any] | None = None
    recipe: dict[str, Any] = field(default_factory=dict)


def load_script(path: str | Path) -> Hooks:
    """Run ``path`` as module ``__tfaccel_tune__`` and read its tune hooks
    (:func:`tfaccel.scripts.read_hooks`).

    Raises:
        UsageError: the path is not a readable Python file (:func:`scripts.check_script`).
        TuneError: the script raised while loading, or defines neither hook form.
    """
    script = check_tune_script(path)
    read = scripts.read_hooks(script, SCRIPT_MODULE_NAME, TuneError)
    return Hooks(
        model_fn=read.model_fn,
        data=read.data,
        source=script.name,
        model_fn_name=f"model_fn in {script.name}",
        space=read.space,
        model_name=read.model_name,
        pipeline_kwargs=read.pipeline_kwargs,
        recipe={"script": str(script.resolve())},
    )


def check_tune_script(path: str | os.PathLike[str]) -> Path:
    """The script ``tfaccel tune`` loads, checked without running it or starting TensorFlow.

    Raises:
        UsageError: the path is not a readable Python file (:func:`scripts.check_script`), or
            Python cannot compile it (:func:`scripts.check_source`).
    """
    script = scripts.check_script(
        path,
        "tune",
        expected="a Python file defining model_fn() and data(), or tfaccel_tune(), or your "
        "training script as written",
        directory=False,
    )
    scripts.check_source(script, "tune")
    return script


def reference_hooks(name: str, *, smoke: bool = False, examples: int | None = None) -> Hooks:
    """Hooks for a tfaccel reference model on synthetic data (``tfaccel tune --model``).

    The model is compiled as ``tfaccel bench`` compiles it
    (:func:`tfaccel.models.reference_model_fn`).

    Args:
        name: a name of :data:`tfaccel.models.MODELS` (:func:`tfaccel.models.model_key`).
        smoke: the tiny model on a few examples (a quick check; the figures mean nothing).
        examples: synthetic examples (default 10,000; 512 with ``smoke``).

    Raises:
        UsageError: unknown model name.
    """
    from tfaccel.bench.datasets import synthetic  # local: tfaccel.bench imports numpy

    key = models.model_key(name)
    info = models.MODELS[key]
    count = examples or (SMOKE_EXAMPLES if smoke else DEFAULT_EXAMPLES)
    images = synthetic(count, info.input_shape, info.classes)
    return Hooks(
        model_fn=models.reference_model_fn(key, tiny=smoke),
        data=(images.x, images.y),
        source=f"reference model {key} ({info.title}), {images.source}",
        model_fn_name=f"the reference model {key}",
        model_name=key,
        recipe={"model": key, "smoke": smoke, "examples": count},
    )


def hooks_from_recipe(recipe: Mapping[str, Any]) -> Hooks:
    """Rebuild :class:`Hooks` from their ``recipe`` (in another process)."""
    if recipe.get("workload"):  # a script as written: captured again at its fit
        from tfaccel.tuning.script import capture_script

        return capture_script(
            recipe["script"],
            recipe.get("args", ()),
            fit=int(recipe.get("fit", 1)),
            timeout=recipe.get("timeout"),
        ).hooks
    if "script" in recipe:
        return load_script(recipe["script"])
    return reference_hooks(
        recipe["model"], smoke=bool(recipe.get("smoke")), examples=recipe.get("examples")
    )
