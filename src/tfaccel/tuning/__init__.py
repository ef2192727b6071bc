"""Find the fastest training configuration of a model on this machine: ``tfaccel.tune``.

Batch size (a memory search up to the largest that fits), precision, XLA, the input feed and
``tfaccel.data.pipeline``'s knobs, and thread counts are searched within a time budget; every
candidate is timed with the shared timing core (:mod:`tfaccel.core.timing`: interleaved rounds,
median and IQR), losers are dropped early (successive halving), and a configuration wins only
when it is faster beyond the noise, otherwise the simpler one does. The winner is stored in the
results database, where ``tfaccel.setup(precision="auto", jit="auto", model=model)`` finds it.

``tfaccel.tune(model_fn, data, ...)`` calls :func:`tune` here. Importing this package does not
import TensorFlow.

Example:
    >>> import tfaccel
    >>> result = tfaccel.tune(model_fn, (x_train, y_train), budget_s=300)   # doctest: +SKIP
    >>> print(result)                       # the winner, every trial, how to reproduce it
    >>> tfaccel.setup(**result.setup_kwargs())                               # doctest: +SKIP

Command line: ``tfaccel tune train.py --budget 300`` or ``tfaccel tune --model reference-cnn``.
"""

from __future__ import annotations

from tfaccel.tuning._errors import (
    BudgetError,
    ModelFnError,
    ModelReusedError,
    NotAppliedError,
    SpaceError,
    TrialError,
    TuneError,
)
from tfaccel.tuning.api import DEFAULT_BUDGET_S, tune, tune_model, tune_script
from tfaccel.tuning.batch import BatchSearch, find_batch_size, is_oom_error
from tfaccel.tuning.result import Speedup, TuneResult
from tfaccel.tuning.search import Decision, SearchSettings, Trial, pick_winner, search
from tfaccel.tuning.space import DEFAULT_SPACE, Config, Space, parse_space, simplicity

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
