"""``tfaccel.workload``: the one place that knows a training workload.

A :class:`Workload` is the model as the script builds it, its compile arguments, the training
data exactly as given to ``fit``, the fit arguments (batch size, epochs, callbacks, validation
data) and where it came from (the script, its arguments, which ``fit`` call).
:func:`capture` takes it from an unchanged script, stopping the script at its ``fit``;
:func:`mark` is the one line a script with its own training loop adds.

Example:
    >>> from tfaccel import workload                                     # doctest: +SKIP
    >>> w = workload.capture("train.py", ["--epochs", "3"])               # doctest: +SKIP
    >>> w.batch_size, w.compile.optimizer, w.data_kind                    # doctest: +SKIP
"""

from tfaccel.workload.capture import (
    DEFAULT_TIMEOUT_S,
    CaptureError,
    capture,
    mark,
    no_fit_explained,
)
from tfaccel.workload.record import CompileArgs, Origin, Workload

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "CaptureError",
    "CompileArgs",
    "Origin",
    "Workload",
    "capture",
    "mark",
    "no_fit_explained",
]
