"""Find the fastest training configuration of a model on this machine: ``tfaccel.tune``.

Batch size (a memory search up to the largest that fits), precision, XLA, the input feed and
``tfaccel.data.pipeline``'s knobs, and thread counts are searched within a time budget; every
candidate is timed with the shared timing core (:mod:`tfaccel.core.timing`: interleaved rounds,
median and IQR), losers are dropped early (successive halving), and a configuration wins only
when it is faster beyond the noise, otherwise the simpler one does. The winner is stored in the
results database, where ``tfaccel.setup(precision="auto", jit="auto", model=model)`` finds it.

``tfaccel.tune(model_fn, data, ...)`` calls :func:`tune` here. Importing this package does not
import TensorFlow, nor :func:`tune`'s module until it is first used (it imports planning and the
doctor, which ``tfaccel run --tuned``, importing :mod:`tfaccel.tuning.tuned`, does not need).

Example:
    >>> import tfaccel
    >>> result = tfaccel.tune(model_fn, (x_train, y_train), budget_s=300)   # doctest: +SKIP
    >>> print(result)                       # the winner, every trial, how to reproduce it
    >>> tfaccel.setup(**result.setup_kwargs())                               # doctest: +SKIP

Command line: ``tfaccel tune train.py --budget 300`` or ``tfaccel tune --model reference-cnn``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The light modules, imported now (`search` is both a module here and its function: bound now,
# the name stays the function, which a later first import of the module would overwrite).
from tfaccel.tuning._errors import (
    BudgetError,
    ModelFnError,
    ModelReusedError,
    NotAppliedError,
    SpaceError,
    TrialError,
    TuneError,
)
from tfaccel.tuning.batch import BatchSearch, find_batch_size, is_oom_error
from tfaccel.tuning.result import Speedup, TuneResult
from tfaccel.tuning.search import Decision, SearchSettings, Trial, pick_winner, search
from tfaccel.tuning.space import DEFAULT_SPACE, Config, Space, parse_space, simplicity

# imported on first use: the search's API, which imports planning and the doctor
_LAZY = {
    "DEFAULT_BUDGET_S": "api",
    "tune": "api",
    "tune_model": "api",
    "tune_script": "api",
}

__all__ = [
    "DEFAULT_BUDGET_S",
    "DEFAULT_SPACE",
    "BatchSearch",
    "BudgetError",
    "Config",
    "Decision",
    "ModelFnError",
    "ModelReusedError",
    "NotAppliedError",
    "SearchSettings",
    "Space",
    "SpaceError",
    "Speedup",
    "Trial",
    "TrialError",
    "TuneError",
    "TuneResult",
    "find_batch_size",
    "is_oom_error",
    "parse_space",
    "pick_winner",
    "search",
    "simplicity",
    "tune",
    "tune_model",
    "tune_script",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tfaccel.tuning' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tfaccel.tuning.{module}"), name)
    globals()[name] = value  # found once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:
    from tfaccel.tuning.api import DEFAULT_BUDGET_S, tune, tune_model, tune_script
