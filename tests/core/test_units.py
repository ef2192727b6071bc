"""tfaccel.core.units: one formatter per kind of figure, one marker for a missing one."""

from __future__ import annotations

import math

import pytest

from tfaccel.core.units import (
    MISSING,
    fmt_bytes,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_rate,
    fmt_seconds,
)


def test_one_marker_for_a_missing_figure() -> None:
    assert MISSING == "n/a"
    for formatter in (fmt_bytes, fmt_ms, fmt_num, fmt_pct, fmt_seconds):
        assert formatter(None) == MISSING
        assert formatter(math.nan) == MISSING
    assert fmt_rate(None, "images/s") == "n/a images/s"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0 B"),
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536 * 2**20, "1.5 GiB"),
        (720 * 2**20, "720.0 MiB"),
        (2**60, "1.0 EiB"),
        (-3 * 2**30, "-3.0 GiB"),
        (12.7, "13 B"),
    ],
)
def test_bytes_in_the_largest_unit_reached(value: float, expected: str) -> None:
    assert fmt_bytes(value) == expected


def test_bytes_of_any_size_without_overflow() -> None:
    huge = 10**40
    text = fmt_bytes(huge)
    assert text.endswith(" EiB") and "," in text and "e+" not in text
    assert fmt_bytes(huge, unit="GiB", suffix=False).replace(",", "").split(".")[0] == str(
        (huge * 10 + 2**29) // 2**30 // 10
    )
    assert fmt_bytes(math.inf) == "inf B"


def test_bytes_in_a_fixed_unit() -> None:
    assert fmt_bytes(22.5 * 2**30, unit="GiB") == "22.5 GiB"
    assert fmt_bytes(24 * 2**30, unit="GiB", suffix=False) == "24.0"
    assert fmt_bytes(2**30, unit="GiB", digits=2) == "1.00 GiB"
    assert fmt_bytes(0, unit="GiB", digits=2) == "0.00 GiB"
    assert fmt_bytes(-1, unit="GiB") == "0.0 GiB"  # no "-0.0"
    # rounded half up, in exact integer arithmetic
    assert fmt_bytes(1280, unit="KiB") == "1.3 KiB"
    assert fmt_bytes(1279, unit="KiB") == "1.2 KiB"


def test_bytes_options() -> None:
    assert fmt_bytes(2**19, smallest="MiB") == "0.5 MiB"
    assert fmt_bytes(4 * 2**20, trim=True) == "4 MiB"
    assert fmt_bytes(1536, trim=True, digits=6) == "1.5 KiB"
    assert fmt_bytes(5, digits=2) == "5 B"
    assert fmt_bytes(12345, unit="B") == "12,345 B"
    assert fmt_bytes(-0.4, unit="B") == "0 B"


def test_durations() -> None:
    assert fmt_ms(0.01234) == "12.34 ms"
    assert fmt_ms(0.01234, digits=1) == "12.3 ms"
    assert fmt_ms(0) == "0.00 ms"
    assert fmt_seconds(0.0123) == "12.3 ms"
    assert fmt_seconds(75) == "75.0 s"
    assert fmt_seconds(300) == "5 min 0 s"


def test_figures_and_rates() -> None:
    assert fmt_num(1234.5) == "1,234"
    assert fmt_num(12.34) == "12.3"
    assert fmt_num(0.1234) == "0.123"
    assert fmt_num(-250) == "-250"
    assert fmt_pct(12.345) == "12.3%"
    assert fmt_pct(0.5) == "0.50%"
    assert fmt_rate(1234.5, "images/s") == "1,234 images/s"
    assert fmt_rate(22.4, "GB/s") == "22.4 GB/s"
