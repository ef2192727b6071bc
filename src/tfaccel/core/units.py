"""Units: bytes, durations, rates and plain figures as every message and table writes them.

One formatter per kind of figure, and one marker for a figure that is not known,
:data:`MISSING` (``n/a``): a question mark reads as doubt about a value that is there, and a
dash reads as a minus sign or as "nothing to compare".

- :func:`fmt_bytes`: binary units (B, KiB ... EiB), chosen by size or fixed by the caller
  (``unit="GiB"`` where a message compares two sizes); integers in exact arithmetic, so any
  size prints and none overflows.
- :func:`fmt_ms` and :func:`fmt_seconds`: durations given in seconds.
- :func:`fmt_num`, :func:`fmt_pct` and :func:`fmt_rate`: figures, percentages and rates
  (``1,234 images/s``).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "BYTE_UNITS",
    "MISSING",
    "fmt_bytes",
    "fmt_ms",
    "fmt_num",
    "fmt_pct",
    "fmt_rate",
    "fmt_seconds",
]

MISSING = "n/a"
"""What a formatter writes for a figure that is not known (None, NaN)."""

BYTE_UNITS: dict[str, int] = {
    "B": 1,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "PiB": 2**50,
    "EiB": 2**60,
}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_bytes(
    value: float | None,
    *,
    unit: str | None = None,
    digits: int = 1,
    smallest: str = "B",
    trim: bool = False,
    suffix: bool = True,
) -> str:
    """A size in bytes: ``1536 * 2**20`` -> ``'1.5 GiB'``; None -> ``'n/a'``.

    Args:
        value: the size in bytes (negative sizes keep their sign).
        unit: the unit to write it in; None: the largest unit the size reaches, from
            ``smallest`` up to EiB.
        digits: decimals after the point (bytes are written as a whole number).
        smallest: the smallest unit chosen when ``unit`` is None (``"MiB"``: 512 KiB is
            written ``0.5 MiB``).
        trim: drop trailing zeros of the decimals (``4 MiB``, ``1.5 GiB``).
        suffix: write the unit after the figure.
    """
    if _missing(value):
        return MISSING
    assert value is not None
    if isinstance(value, float) and math.isinf(value):
        return f"{'-' if value < 0 else ''}inf" + (f" {unit or smallest}" if suffix else "")
    if unit is None:
        names = list(BYTE_UNITS)
        unit = smallest
        for name in names[names.index(smallest) :]:
            if abs(value) >= BYTE_UNITS[name]:
                unit = name
    scale = BYTE_UNITS[unit]
    if unit == "B":
        figure = _scaled(value, 1, 0)
    else:
        figure = _scaled(value, scale, digits)
        if trim and "." in figure:
            figure = figure.rstrip("0").rstrip(".")
    return f"{figure} {unit}" if suffix else figure


def _scaled(value: float, scale: int, digits: int) -> str:
    """``value / scale`` with ``digits`` decimals, rounded half up; exact for integers."""
    sign = "-" if value < 0 else ""
    if isinstance(value, int):
        steps = (abs(value) * 10**digits * 2 + scale) // (2 * scale)
    else:
        steps = math.floor(abs(value) * 10**digits / scale + 0.5)
    whole, part = divmod(steps, 10**digits)
    whole_text = f"{whole:,}" if whole >= 10**4 else f"{whole}"
    if steps == 0:
        sign = ""
    return f"{sign}{whole_text}.{part:0{digits}d}" if digits else f"{sign}{whole_text}"


def fmt_ms(seconds: float | None, digits: int = 2) -> str:
    """A duration given in seconds, in milliseconds: ``0.01234`` -> ``'12.34 ms'``."""
    if _missing(seconds):
        return MISSING
    assert seconds is not None
    return f"{seconds * 1e3:.{digits}f} ms"


def fmt_seconds(value: Any) -> str:
    """0.0123 -> '12.3 ms'; 75 -> '75.0 s'; 300 -> '5 min 0 s'; None -> 'n/a'."""
    if _missing(value):
        return MISSING
    v = float(value)
    if v < 1:
        return f"{v * 1000:.3g} ms"
    if v < 120:
        return f"{v:.1f} s"
    minutes, seconds = divmod(round(v), 60)
    return f"{minutes} min {seconds} s"


def fmt_num(value: Any) -> str:
    """1234.5 -> '1,234'; 12.34 -> '12.3'; 0.1234 -> '0.123'; None -> 'n/a'."""
    if _missing(value):
        return MISSING
    v = float(value)
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def fmt_pct(value: Any) -> str:
    """A percentage: 12.345 -> '12.3%'; 0.5 -> '0.50%'; None -> 'n/a'."""
    if _missing(value):
        return MISSING
    v = float(value)
    return f"{v:.2f}%" if abs(v) < 1 else f"{v:.1f}%"


def fmt_rate(value: Any, unit: str) -> str:
    """A rate with its unit: ``(1234.5, 'images/s')`` -> ``'1,234 images/s'``."""
    return f"{fmt_num(value)} {unit}"
