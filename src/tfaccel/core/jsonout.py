"""Strict JSON for every document tfaccel writes (``--json``, report.json).

Python's :func:`json.dumps` writes NaN and infinities as ``NaN`` and ``Infinity``, which are not
JSON: strict parsers (browsers' ``JSON.parse``, ``jq``, most languages) reject the whole file.
A ratio over a zero median or the spread of a single sample can be such a value, so every
document goes through :func:`finite` first: NaN and infinities become null, NumPy scalars
become plain numbers, and values JSON does not know (paths, dates) are written as text.

Example:
    >>> print(dumps({"ratio": float("inf"), "median": 2.5}, indent=None))
    {"ratio": null, "median": 2.5}
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

__all__ = ["dumps", "finite"]


def finite(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by None, recursively.

    Dicts, lists and tuples are rebuilt (tuples as lists); floats and NumPy scalars become
    Python floats and ints; anything else is returned as it is.
    """
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def dumps(document: Any, *, indent: int | None = 2) -> str:
    """``document`` as strict JSON text: no NaN or Infinity (null instead), unknown values as
    text.

    Raises:
        ValueError: never for a non-finite number; only for what :func:`json.dumps` refuses
            otherwise (a circular reference).
    """
    return json.dumps(finite(document), indent=indent, default=str, allow_nan=False)
