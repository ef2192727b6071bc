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

import inspect
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
_HOOK_KEYS = ("model_fn", "data", "space", "model_name", "pipeline_kwargs")


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
    """Run ``path`` as module ``__tfaccel_tune__`` and read its tune hooks.

    Raises:
        UsageError: the path is not a readable Python file (:func:`scripts.check_script`).
        TuneError: the script raised while loading, or defines neither hook form.
    """
    script = check_tune_script(path)
    namespace = scripts.load_script(script, SCRIPT_MODULE_NAME, TuneError)
    shown = script.name
    hook = namespace.get("tfaccel_tune")
    if callable(hook):
        spec = _call_hook(hook, shown, script)
    elif callable(namespace.get("model_fn")) and "data" in namespace:
        spec = {"model_fn": namespace["model_fn"], "data": namespace["data"]}
    else:
        raise _no_hooks(shown, namespace)
    data = spec["data"]
    if callable(data) and not inspect.isgeneratorfunction(data):
        data = _call_user(data, f"data() in {shown}", script)
    space = spec.get("space")
    pipeline_kwargs = spec.get("pipeline_kwargs")
    return Hooks(
        model_fn=spec["model_fn"],
        data=data,
        source=shown,
        model_fn_name=f"model_fn in {shown}",
        space=dict(space) if space else None,
        model_name=spec.get("model_name"),
        pipeline_kwargs=dict(pipeline_kwargs) if pipeline_kwargs else None,
        recipe={"script": str(script.resolve())},
    )


def _call_hook(hook: Callable[[], Any], shown: str, script: Path) -> dict[str, Any]:
    spec = _call_user(hook, f"tfaccel_tune() in {shown}", script)
    if not isinstance(spec, Mapping) or "model_fn" not in spec or "data" not in spec:
        raise TuneError(
            f"tfaccel_tune() in {shown} did not return a dict with model_fn and data",
            expected="{'model_fn': function, 'data': (x, y)} (optional keys: space, "
            "model_name, pipeline_kwargs)",
            received=repr(spec)[:200],
            fix="return dict(model_fn=model_fn, data=(x_train, y_train))",
        )
    unknown = [k for k in spec if k not in _HOOK_KEYS]
    if unknown:
        raise TuneError(
            f"tfaccel_tune() in {shown} returned unknown keys",
            expected="keys among " + ", ".join(_HOOK_KEYS),
            received=", ".join(repr(k) for k in unknown),
            fix="remove them",
        )
    if not callable(spec["model_fn"]):
        raise TuneError(
            f"tfaccel_tune() in {shown} returned a model_fn that is not callable",
            expected="a function returning a compiled keras.Model",
            received=type(spec["model_fn"]).__name__,
            fix="return the function itself (model_fn), not its result (model_fn())",
        )
    return dict(spec)


def _call_user(fn: Callable[[], Any], shown: str, script: Path) -> Any:
    try:
        return fn()
    except Exception as exc:
        raise TuneError(
            f"{shown} raised {type(exc).__name__}: {exc}",
            expected=f"{shown} to run without error",
            received="this traceback, from your script:\n" + scripts.script_traceback(exc, script),
            fix=f"fix the error in {shown}",
        ) from exc


def _no_hooks(shown: str, namespace: Mapping[str, Any]) -> TuneError:
    found = [name for name in ("model_fn", "data", "tfaccel_tune") if name in namespace]
    return TuneError(
        f"The script {shown} does not say what to tune",
        expected="a function tfaccel_tune() returning dict(model_fn=..., data=(x, y)), or "
        "module-level model_fn() (returning a compiled keras.Model) and data ((x, y), or a "
        "function returning it)",
        received="defined: " + (", ".join(found) or "none of them"),
        fix="add def model_fn(): ... and def data(): return x_train, y_train to the script; "
        "keep its training code under if __name__ == '__main__':",
    )


def check_tune_script(path: str | os.PathLike[str]) -> Path:
    """The script ``tfaccel tune`` loads, checked without running it or starting TensorFlow.

    Raises:
        UsageError: the path is not a readable Python file (:func:`scripts.check_script`).
    """
    return scripts.check_script(
        path,
        "tune",
        expected="a Python file defining model_fn() and data(), or tfaccel_tune(), or your "
        "training script as written",
        directory=False,
    )


def check_reference_model(name: str) -> str:
    """The key of a reference model in :data:`tfaccel.models.MODELS` (dashes may stand for
    underscores), checked without importing TensorFlow.

    Raises:
        UsageError: unknown model name (the message lists the names).
    """
    key = name.replace("-", "_")
    if key not in models.MODELS:
        models.build(key)  # raises the UsageError listing the names
    return key


def reference_hooks(name: str, *, smoke: bool = False, examples: int | None = None) -> Hooks:
    """Hooks for a tfaccel reference model on synthetic data (``tfaccel tune --model``).

    The model is compiled as ``tfaccel bench`` compiles it
    (:func:`tfaccel.models.compile_reference`).

    Args:
        name: a name of :data:`tfaccel.models.MODELS` (dashes may stand for underscores).
        smoke: the tiny model on a few examples (a quick check; the figures mean nothing).
        examples: synthetic examples (default 10,000; 512 with ``smoke``).

    Raises:
        UsageError: unknown model name.
    """
    from tfaccel.bench.datasets import synthetic  # local: tfaccel.bench imports numpy

    key = check_reference_model(name)
    info = models.MODELS[key]
    count = examples or (SMOKE_EXAMPLES if smoke else DEFAULT_EXAMPLES)
    images = synthetic(count, info.input_shape, info.classes)

    def model_fn() -> Any:
        import keras

        precision = keras.mixed_precision.global_policy().name
        model = models.build(key, tiny=smoke, dtype=precision)
        models.compile_reference(model, precision)
        return model

    return Hooks(
        model_fn=model_fn,
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
