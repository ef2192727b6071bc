"""NVTX ranges around training steps, so that Nsight Systems' timeline shows them.

:class:`~tfaccel.profile.StepTimer` and ``PerformanceCallback`` mark their steps in the NVTX
domain ``tfaccel`` (:data:`DOMAIN`), push/pop ranges nested on the training thread. Names are
fixed (``nsys stats`` groups by name); the step number is the payload:

* ``step``: StepTimer, from the step's first ``input()`` or ``step()`` to the end of
  ``step()``; the callback, from ``on_train_batch_begin`` to ``on_train_batch_end`` (input wait
  and compute both happen inside Keras' compiled train function, out of Python's sight).
  Payload: the step's index (its StepRecord's ``index``, warm-up included: the ``step_num``
  of the TensorFlow Profiler's step markers).
* ``input``, inside ``step``: StepTimer's ``input()`` block (fetching the batch).
* ``compute``, inside ``step``: StepTimer's ``step()`` block, until its results are on the
  host (device synchronised).
* ``rerun``: the callback's confirmation, the re-run on one ready batch at the end of ``fit``.

Nothing is marked, at the cost of one ``is None`` test per range, when no NVTX tool is attached
to the process (``nvtx.get_domain`` then returns a dummy domain: the usual case, outside
``nsys profile``), when the ``nvtx`` package is missing or switched off (``NVTX_DISABLE=1``),
or when the timer was made with ``nvtx=False``.

With a tool attached, a range costs what ``Domain.push_range`` with event attributes made once
costs: on this project's CPU, with a tool that only counts, about 0.13 us per push and pop and
0.28 us with the payload set, against 1.2 us for the module functions
``nvtx.push_range``/``pop_range`` and 0.3 us for ``Domain.start_range``/``end_range``; a
callback step's range about 0.4 us, a timer step's three about 0.7 us
(``benchmarks/bench_callback.py --nvtx``).
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["COLORS", "DOMAIN", "NAMES", "Ranges", "available", "load_nvtx", "ranges"]

DOMAIN = "tfaccel"
STEP, INPUT, COMPUTE, RERUN = "step", "input", "compute", "rerun"
NAMES = (STEP, INPUT, COMPUTE, RERUN)
COLORS = {  # ARGB, as the timeline draws them
    STEP: 0xFF76B900,
    INPUT: 0xFFF28E1C,
    COMPUTE: 0xFF2F7FC1,
    RERUN: 0xFF9E9E9E,
}


class Ranges:
    """Pushes and pops ranges of the ``tfaccel`` domain while an NVTX tool records them.

    Made by :func:`ranges`; the event attributes of each name are made once, so a range costs
    one attribute look-up and two calls into the NVTX library.
    """

    def __init__(self, domain: Any) -> None:
        self._domain = domain
        self._attributes = {
            name: domain.get_event_attributes(message=name, color=COLORS[name]) for name in NAMES
        }

    def push(self, name: str, step: int | None = None) -> None:
        """Open a range ``name`` (one of :data:`NAMES`), with ``step`` as its payload."""
        attributes = self._attributes[name]
        if step is not None:
            attributes.payload = step
        self._domain.push_range(attributes)

    def pop(self) -> None:
        """Close the innermost open range of this thread."""
        self._domain.pop_range()


@functools.cache
def load_nvtx() -> Any:
    """The ``nvtx`` package, or None where it cannot be imported.

    Imported on first use, not with this module: it imports NumPy, which ``tfaccel`` commands
    that do not train should not pay for.
    """
    try:
        import nvtx
    except ImportError:  # a dependency of tfaccel, but an environment may lack it: no marks
        return None
    return nvtx


def available() -> bool:
    """Whether the ``nvtx`` package can be imported (it is a dependency of tfaccel)."""
    return load_nvtx() is not None


def ranges(enabled: bool = True) -> Ranges | None:
    """The ranges a timer marks, or None when nothing would record them.

    Args:
        enabled: False to mark nothing (a timer's ``nvtx=False``).

    Returns:
        None when ``enabled`` is False, the ``nvtx`` package is missing or switched off
        (``NVTX_DISABLE``), or no NVTX tool such as Nsight Systems is attached to this
        process; else the :class:`Ranges` of the ``tfaccel`` domain.
    """
    nvtx = load_nvtx() if enabled else None
    if nvtx is None or not nvtx.enabled():
        return None
    domain = nvtx.get_domain(DOMAIN)
    if not isinstance(domain, nvtx.Domain):  # the dummy domain: no tool is attached
        return None
    return Ranges(domain)
