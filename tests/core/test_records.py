"""One way from a record to JSON and back: every annotation kind, every refusal, a round trip."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfaccel.core.errors import UsageError
from tfaccel.core.records import RecordError, from_json, json_key, to_json


@dataclass
class Inner:
    name: str
    count: int = 0


@dataclass
class Outer:
    label: str
    ratio: float | None = None
    mode: Literal["fast", "slow"] = "fast"
    flags: dict[str, bool] = field(default_factory=dict)
    inner: list[Inner] = field(default_factory=list)
    threads: tuple[int, int | None] | None = None
    sizes: tuple[int, ...] = ()
    raw: Any = None
    renamed: int = field(default=1, metadata=json_key("renamed_count"))


def test_a_record_round_trips_through_json_text() -> None:
    record = Outer(
        "a",
        0.5,
        "slow",
        {"x": True},
        [Inner("i", 3)],
        (4, None),
        (1, 2, 3),
        {"free": [1]},
        7,
    )
    doc = json.loads(json.dumps(to_json(record)))
    assert doc["threads"] == [4, None] and doc["renamed_count"] == 7 and "renamed" not in doc
    assert from_json(Outer, doc) == record


def test_missing_keys_take_defaults_and_unknown_keys_are_ignored() -> None:
    assert from_json(Outer, {"label": "b", "added_later": 1}) == Outer("b")


@pytest.mark.parametrize(
    ("doc", "path", "expected"),
    [
        ({}, "outer.label", "required"),
        ({"label": 3}, "outer.label", "a string"),
        ({"label": "a", "ratio": "1"}, "outer.ratio", "a number"),
        ({"label": "a", "ratio": float("nan")}, "outer.ratio", "finite"),
        ({"label": "a", "mode": "medium"}, "outer.mode", '"fast", "slow"'),
        ({"label": "a", "flags": {"x": 1}}, "outer.flags.x", "true or false"),
        (
            {"label": "a", "inner": [{"name": "i", "count": True}]},
            "outer.inner[0].count",
            "integer",
        ),
        (
            {"label": "a", "inner": [{"name": "i", "count": 2**70}]},
            "outer.inner[0].count",
            "64 bits",
        ),
        ({"label": "a", "threads": [1, 2, 3]}, "outer.threads", "2 items"),
        ({"label": "a", "sizes": "12"}, "outer.sizes", "a list"),
        ({"label": "a", "inner": {"name": "i"}}, "outer.inner", "a list"),
    ],
)
def test_a_wrong_value_is_refused_naming_its_path(
    doc: dict[str, Any], path: str, expected: str
) -> None:
    with pytest.raises(RecordError) as info:
        from_json(Outer, doc, where="outer")
    assert f"'{path}'" in info.value.what and expected in info.value.expected


def test_the_caller_chooses_the_error() -> None:
    class FileError(UsageError):
        pass

    def error(path: str, expected: str, value: Any, out_of_range: bool) -> UsageError:
        return FileError(f"bad {path}", expected=expected, received=repr(value), fix="redo")

    with pytest.raises(FileError, match=r"bad doc\.label"):
        from_json(Outer, {"label": None}, where="doc", error=error)


@given(
    label=st.text(max_size=20),
    ratio=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    counts=st.lists(st.integers(min_value=-(2**63), max_value=2**64 - 1), max_size=5),
    sizes=st.lists(st.integers(min_value=0, max_value=2**32), max_size=4),
)
def test_any_record_round_trips(
    label: str, ratio: float | None, counts: list[int], sizes: list[int]
) -> None:
    record = Outer(label, ratio, inner=[Inner(str(c), c) for c in counts], sizes=tuple(sizes))
    assert from_json(Outer, json.loads(json.dumps(to_json(record)))) == record
