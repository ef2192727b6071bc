"""Find the fastest training configuration of a model on this machine: ``tfaccel.tune``.

Batch size (a memory search up to the largest that fits), precision, XLA, the input feed and
``tfaccel.data.pipeline``'s knobs, and thread counts are searched within a time budget; every
candidate is timed with the shared timing core (:mod:`tfaccel.timing`: interleaved rounds,
median and IQR), losers are dropped early (successive halving), and a configuration wins only
when it is faster beyond the noise, otherwise the simpler one does. The winner is stored in the
results database, where ``tfaccel.setup(precision="auto", jit="auto", model=model)`` finds it.

``tfaccel.tune`` is both this package and a function: ``tfaccel.tune(model_fn, data, ...)``
calls :func:`tune`. Importing it does not import TensorFlow.

Example:
    >>> import tfaccel
    >>> result = tfaccel.tune(model_fn, (x_train, y_train), budget_s=300)   # doctest: +SKIP
    >>> print(result)                       # the winner, every trial, how to reproduce it
    >>> tfaccel.setup(**result.setup_kwargs())                               # doctest: +SKIP

Command line: ``tfaccel tune train.py --budget 300`` or ``tfaccel tune --model reference-cnn``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

from tfaccel.tune._errors import BudgetError, ModelFnError, SpaceError, TrialError, TuneError
from tfaccel.tune.api import DEFAULT_BUDGET_S, tune, tune_model, tune_script
from tfaccel.tune.batch import BatchSearch, find_batch_size, is_oom_error
from tfaccel.tune.result import Speedup, TuneResult
from tfaccel.tune.search import Decision, SearchSettings, Trial, pick_winner, search
from tfaccel.tune.space import DEFAULT_SPACE, Config, Space, parse_space, simplicity

__all__ = [
    "DEFAULT_BUDGET_S",
    "DEFAULT_SPACE",
    "BatchSearch",
    "BudgetError",
    "Config",
    "Decision",
    "ModelFnError",
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


class _CallableModule(types.ModuleType):
    """``tfaccel.tune`` is both this package and the call ``tfaccel.tune(...)``: once the package
    is imported it replaces the function of that name on ``tfaccel``, so the package itself must
    be callable."""

    def __call__(
        self,
        model_fn: Callable[[], Any],
        data: Any,
        budget_s: float = DEFAULT_BUDGET_S,
        space: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> TuneResult:
        return tune(model_fn, data, budget_s, space, **options)


sys.modules[__name__].__class__ = _CallableModule
