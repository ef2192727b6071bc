"""Where the model of a plan comes from: a user's script defining ``model_fn()``, or a tfaccel
reference model by name.

The script runs as a module named ``__tfaccel_plan__``, so its training code under
``if __name__ == "__main__":`` does not run; ``model_fn`` (or ``tfaccel_tune()`` returning a dict
with ``model_fn``, as for ``tfaccel tune``) is read from it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tfaccel import models
from tfaccel.core.errors import TfaccelError
from tfaccel.planning.api import PlanError, plan
from tfaccel.scripts import check_script, load_script, script_traceback

__all__ = [
    "REFERENCE_EXAMPLES",
    "model_fn_for",
    "reference_model_fn",
    "reference_plans",
    "script_model_fn",
]

SCRIPT_MODULE_NAME = "__tfaccel_plan__"
REFERENCE_EXAMPLES = {"reference_cnn": 50_000, "resnet20": 50_000, "mlp": 60_000}
"""Training examples per epoch of the reference models' data sets (CIFAR-10, MNIST)."""


def script_model_fn(path: str) -> Callable[[], Any]:
    """The ``model_fn`` a script defines.

    Raises:
        UsageError: the path is not a readable Python file (:func:`check_script`).
        PlanError: the script raised while loading, or defines no model_fn.
    """
    script = check_script(
        path, "plan", expected="a Python file defining model_fn()", directory=False
    )
    namespace = load_script(script, SCRIPT_MODULE_NAME, PlanError)
    model_fn = namespace.get("model_fn")
    hook = namespace.get("tfaccel_tune")
    if not callable(model_fn) and callable(hook):
        try:
            spec = hook()
        except Exception as exc:
            raise PlanError(
                f"tfaccel_tune() in {script.name} raised {type(exc).__name__}: {exc}",
                expected="a tfaccel_tune() that returns dict(model_fn=..., ...)",
                received="this traceback, from your script:\n" + script_traceback(exc, script),
                fix=f"fix the error in {script.name}",
            ) from exc
        model_fn = spec.get("model_fn") if isinstance(spec, dict) else None
    if not callable(model_fn):
        raise PlanError(
            f"The script {script.name} defines no model_fn",
            expected="a module-level function model_fn() returning a keras.Model",
            received="defined: "
            + (", ".join(n for n in ("model_fn", "tfaccel_tune") if n in namespace) or "neither"),
            fix="add def model_fn(): ... returning the model (compiled, to plan with its "
            "optimizer); keep training under if __name__ == '__main__':",
        )
    return model_fn


def model_fn_for(model: str) -> Callable[[], Any]:
    """The ``model_fn`` of ``model``: a script's (an existing file, or a name ending in .py or
    holding a path separator), else a reference model's by name.

    Raises:
        UsageError: unknown model name; PlanError: the script cannot be run.
    """
    if model.endswith(".py") or os.path.sep in model or os.path.isfile(model):
        return script_model_fn(model)
    return reference_model_fn(model)[1]


def reference_model_fn(name: str) -> tuple[str, Callable[[], Any]]:
    """``(key, model_fn)`` of a reference model (dashes may stand for underscores), compiled
    as ``tfaccel bench`` compiles it (RMSprop, sparse categorical cross-entropy).

    Raises:
        UsageError: unknown model name.
    """
    key = name.replace("-", "_")
    if key not in models.MODELS:
        models.build(key)  # raises the UsageError listing the names

    def model_fn() -> Any:
        import keras

        model = models.build(key, dtype=keras.mixed_precision.global_policy().name)
        model.compile(
            optimizer=keras.optimizers.RMSprop(learning_rate=1e-4),
            loss="sparse_categorical_crossentropy",
        )
        return model

    return key, model_fn


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
