"""The batch-size memory search and the out-of-memory predicate: pure, no TensorFlow.

:func:`find_batch_size` grows the batch by powers of two until a trial runs out of memory, the
cap or the data set size, then bisects between the last size that fitted and the first that did
not, and keeps a safety margin below the boundary. It takes the trial as a callable and
classifies its exceptions with an ``is_oom`` predicate (by type, never by message text), so it
is tested on an injected boundary.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_BATCH_CAP",
    "BatchSearch",
    "auto_batch_sizes",
    "find_batch_size",
    "is_oom_error",
]

DEFAULT_BATCH_CAP = 1024
"""The largest batch ``batch_size="auto"`` tries unless ``batch_cap`` says otherwise."""


# --------------------------------------------------------------------------- OOM


def is_oom_error(exc: BaseException) -> bool:
    """True for an out-of-memory error: ``tf.errors.ResourceExhaustedError`` or ``MemoryError``.

    Classified by type, never by message text. TensorFlow is not imported: an exception can only
    be TensorFlow's when TensorFlow is already loaded.

    Example:
        >>> is_oom_error(MemoryError()), is_oom_error(ValueError("out of memory"))
        (True, False)
    """
    if isinstance(exc, MemoryError):
        return True
    tf = sys.modules.get("tensorflow")
    errors = getattr(tf, "errors", None)
    exhausted = getattr(errors, "ResourceExhaustedError", None)
    return isinstance(exhausted, type) and isinstance(exc, exhausted)


# --------------------------------------------------------------------------- batch size


@dataclass(frozen=True)
class BatchSearch:
    """What the memory search found.

    Attributes:
        largest_fit: the largest batch size that ran (0: not even the smallest tried).
        first_oom: the smallest size that ran out of memory, None when none did.
        result: the size to use: ``largest_fit``, less the margin when a boundary was found.
        limit: the most the search would try: min(cap, data set size).
        tried: (batch size, "ok" or "oom") in the order tried.
        planned_only: ``result`` is the limit, taken from the plan untried (it predicted
            several times the limit fits: ``trust_plan``).
    """

    largest_fit: int
    first_oom: int | None
    result: int
    limit: int
    tried: tuple[tuple[int, str], ...]
    planned_only: bool = False

    @property
    def boundary_found(self) -> bool:
        """A size ran out of memory, so ``result`` carries the safety margin."""
        return self.first_oom is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "largest_fit": self.largest_fit,
            "first_oom": self.first_oom,
            "result": self.result,
            "limit": self.limit,
            "tried": [list(t) for t in self.tried],
            "planned_only": self.planned_only,
        }


def find_batch_size(
    try_batch: Callable[[int], object],
    *,
    dataset_size: int,
    cap: int | None = None,
    start: int = 32,
    margin: float = 0.1,
    granularity: int = 8,
    is_oom: Callable[[BaseException], bool] = is_oom_error,
    planned: int | None = None,
    trust_plan: float | None = None,
) -> BatchSearch:
    """Find the largest batch size that fits in memory, never beyond the data or the cap.

    Grows from ``start`` by powers of two (clamped to the limit) until a size runs out of
    memory or the limit is reached; then bisects between the last size that fitted and the
    first that did not, over multiples of ``granularity`` (every integer below it). With a
    ``planned`` size (the largest batch :func:`tfaccel.plan` predicts), the search starts
    there instead and brackets the boundary within the plan's error (+-25% first, then by
    powers of two): a good prediction finds the limit in a few trials. When a
    boundary was found, ``result`` is ``largest_fit * (1 - margin)`` rounded down to a multiple
    of ``granularity`` (at least 1): memory use varies between runs (fragmentation, other
    processes), and a size that just fitted once may not fit the next time.

    Args:
        try_batch: runs one trial at a batch size; returns when it fitted, raises otherwise.
        dataset_size: examples in the data set (a batch never exceeds it).
        cap: the largest size to try (None: only the data set size limits it).
        start: the first size tried.
        margin: the fraction kept free below the boundary (0 <= margin < 1).
        granularity: bisection step (8 keeps sizes tensor-core friendly).
        is_oom: classifies an exception from ``try_batch``: True continues the search, False
            re-raises it.
        planned: the predicted largest size that fits (None: grow from ``start``).
        trust_plan: when ``planned`` is at least this many times the limit, the limit is
            the result without a trial (None: always tried). The plan's memory error is
            within +-25%; a trial at the limit costs the most of any (on a CPU with tens of
            GiB, the limit is the data set or the cap, far below the memory), and the
            timing screen runs that size anyway if the budget reaches it.

    Returns:
        A :class:`BatchSearch`; ``result == 0`` when even the smallest size did not fit.

    Raises:
        ValueError: a non-positive data set size, cap, start or granularity, or a margin
            outside [0, 1).
        Exception: whatever ``try_batch`` raised that ``is_oom`` does not call an OOM.

    Example:
        >>> def fits(bs):
        ...     if bs > 100:
        ...         raise MemoryError
        >>> find_batch_size(fits, dataset_size=50_000, margin=0.1).result
        80
    """
    if planned is not None and planned < 1:
        raise ValueError(f"planned must be >= 1 or None, got {planned}")
    if dataset_size < 1 or start < 1 or granularity < 1 or (cap is not None and cap < 1):
        raise ValueError(
            f"dataset_size, start, granularity and cap must be >= 1, got {dataset_size}, "
            f"{start}, {granularity}, {cap}"
        )
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    limit = dataset_size if cap is None else min(cap, dataset_size)
    if planned is not None and trust_plan is not None and planned >= trust_plan * limit:
        return BatchSearch(0, None, limit, limit, (), planned_only=True)
    tried: list[tuple[int, str]] = []

    def attempt(size: int) -> bool:
        try:
            try_batch(size)
        except Exception as exc:
            if not is_oom(exc):
                raise
            tried.append((size, "oom"))
            return False
        tried.append((size, "ok"))
        return True

    if planned is not None:
        first = limit if planned >= limit else _round_down(planned, granularity)
        fit, oom = _bracket(attempt, first, limit)
    else:
        fit, oom = _grow(attempt, min(start, limit), limit)
    if oom is not None:
        fit, oom = _bisect(attempt, fit, oom, granularity)
    result = fit
    if oom is not None and fit > 0:
        result = _round_down(max(1, math.floor(fit * (1.0 - margin))), granularity)
    return BatchSearch(fit, oom, result, limit, tuple(tried))


def _grow(
    attempt: Callable[[int], bool], size: int, limit: int, fit: int = 0
) -> tuple[int, int | None]:
    """Double from ``size`` until a size fails or the limit fits (``fit``: the largest size
    that fitted before ``size``)."""
    while True:
        if not attempt(size):
            return fit, size
        fit = size
        if size >= limit:
            return fit, None
        size = min(size * 2, limit)


PLAN_STEP = 1.25
PLAN_STEPS = 2
"""The first steps away from a planned size: the plan's memory error is within +-20%."""


def _bracket(attempt: Callable[[int], bool], size: int, limit: int) -> tuple[int, int | None]:
    """From the planned ``size``: the last size that fitted and the first that did not (None:
    the limit fitted), in steps of :data:`PLAN_STEP` first, then by powers of two."""
    if attempt(size):
        fit = size
        for _ in range(PLAN_STEPS):
            if fit >= limit:
                return fit, None
            larger = min(limit, max(fit + 1, math.ceil(fit * PLAN_STEP)))
            if not attempt(larger):
                return fit, larger
            fit = larger
        if fit >= limit:
            return fit, None
        return _grow(attempt, min(fit * 2, limit), limit, fit)
    oom = size
    smaller = max(1, min(size - 1, math.floor(size / PLAN_STEP)))
    while size > 1:
        if attempt(smaller):
            return smaller, oom
        oom, size = smaller, smaller
        smaller = max(1, smaller // 2)
    return 0, oom


def _bisect(
    attempt: Callable[[int], bool], fit: int, oom: int, granularity: int
) -> tuple[int, int]:
    """Largest fitting size strictly between ``fit`` and ``oom`` (sizes fit monotonically)."""
    candidates = _between(fit, oom, granularity)
    lo, hi = -1, len(candidates)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if attempt(candidates[mid]):
            lo = mid
        else:
            hi = mid
    if lo >= 0:
        fit = candidates[lo]
    if hi < len(candidates):
        oom = candidates[hi]
    if fit == 0 and granularity > 1 and oom > 1:
        return _bisect(attempt, 0, oom, 1)  # nothing fitted on the coarse grid: every integer
    return fit, oom


def _between(lo: int, hi: int, granularity: int) -> list[int]:
    if granularity <= 1 or hi <= granularity:
        return list(range(lo + 1, hi))
    first = (lo // granularity + 1) * granularity
    return list(range(first, hi, granularity))


def _round_down(size: int, granularity: int) -> int:
    return size - size % granularity if size >= granularity else size


def auto_batch_sizes(result: int, start: int = 32) -> tuple[int, ...]:
    """The batch sizes worth timing below the memory limit: powers of two from ``start``.

    Example:
        >>> auto_batch_sizes(920)
        (32, 64, 128, 256, 512, 920)
    """
    if result < 1:
        return ()
    sizes = []
    size = min(start, result)
    while size < result:
        sizes.append(size)
        size *= 2
    sizes.append(result)
    return tuple(sizes)
