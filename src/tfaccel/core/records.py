"""Records: one way to turn a dataclass into a JSON object and back, the shape written once.

A record is a dataclass. :func:`to_json` gives the JSON object of one (nested records, lists,
tuples and dicts followed; a tuple becomes a list), and :func:`from_json` rebuilds it from
such an object, converting each field by its annotation (``int``, ``float``, ``str``,
``bool``, ``X | None``, ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``, ``Literal[...]``,
nested records, ``Any``) and refusing a value of the wrong type with a message that names the
field's path. Unknown keys are ignored (a newer writer may add fields); missing keys take the
field's default, and a missing field without one is refused.

A field may carry metadata for JSON: ``field(metadata=json_key("name"))`` writes and reads
it under another key; ``field(metadata=NOT_IN_JSON)`` keeps it out of the JSON object (it is
then rebuilt from its default). A record class that derives from :class:`Record` gets
``to_dict()`` and ``from_dict()`` from these two functions; one whose document adds derived
values writes ``{**to_json(self), "iqr": self.iqr}``.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Row:
    ...     name: str
    ...     threads: tuple[int, ...] = ()
    >>> to_json(Row("a", (1, 2)))
    {'name': 'a', 'threads': [1, 2]}
    >>> from_json(Row, {"name": "a", "threads": [1, 2]})
    Row(name='a', threads=(1, 2))
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, Union

from tfaccel.core.errors import TfaccelError, UsageError

__all__ = [
    "MAX_INT",
    "MIN_INT",
    "NOT_IN_JSON",
    "Record",
    "RecordError",
    "from_json",
    "json_excerpt",
    "json_key",
    "to_json",
]

R = TypeVar("R")

MIN_INT = -(2**63)  # signed and unsigned 64-bit counters, as NVML and the kernel report them
MAX_INT = 2**64 - 1
INT_RANGE = f"from {MIN_INT:,} to {MAX_INT:,} (64 bits)"

_KEY = "tfaccel.json_key"
_OMIT = "tfaccel.not_in_json"
NOT_IN_JSON: Mapping[str, bool] = types.MappingProxyType({_OMIT: True})


class RecordError(UsageError):
    """A JSON object is not the record it should be: a field has the wrong type or is missing."""


def json_key(name: str) -> dict[str, str]:
    """Field metadata: the field is written and read under the JSON key ``name``."""
    return {_KEY: name}


def _key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get(_KEY, f.name))


class Record:
    """A dataclass whose JSON form is its fields: ``to_dict()`` and ``from_dict()``."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this record (:func:`to_json`)."""
        return typing.cast(dict[str, Any], to_json(self))

    @classmethod
    def from_dict(cls: type[R], data: Any) -> R:
        """Rebuild the record from :meth:`to_dict`'s object (:func:`from_json`).

        Raises:
            RecordError: a field has the wrong type or a required one is missing.
        """
        return from_json(cls, data, where=cls.__name__)


def to_json(value: Any) -> Any:
    """The JSON form of ``value``: records as objects (under their JSON keys), tuples as lists.

    A record inside is written by its own ``to_dict()`` where it has one (a timing summary adds
    its IQR), else by its fields.

    Values that are neither records nor containers are returned as they are (the JSON writer,
    :func:`tfaccel.core.jsonout.dumps`, decides how a NaN or an infinity is written).
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            _key(f): _nested(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not f.metadata.get(_OMIT)
        }
    return _nested(value)


def _nested(value: Any) -> Any:
    """A value inside a record: a record by its own ``to_dict()`` where it has one (so the
    derived values it adds travel with it), else by its fields."""
    if isinstance(value, (list, tuple)):
        return [_nested(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _nested(v) for k, v in value.items()}
    if not isinstance(value, type) and callable(getattr(value, "to_dict", None)):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(value)
    return value


ErrorFactory = Callable[[str, str, Any, bool], TfaccelError]


def from_json(
    cls: type[R],
    data: Any,
    *,
    where: str = "record",
    error: ErrorFactory | None = None,
) -> R:
    """Rebuild the record ``cls`` from its JSON object, checking every field by its annotation.

    Args:
        cls: the dataclass.
        data: the JSON object (a dict, as :func:`to_json` gives or ``json.loads`` reads).
        where: the name of the whole, the first part of a field's path in a message
            (``snapshot.gpus[0].name``).
        error: ``(path, expected, value, out_of_range) -> TfaccelError``: the error to raise
            for a wrong value (a snapshot file's own error with its own fix, say);
            ``out_of_range`` is True for a number of the right type beyond 64 bits or not
            finite. A :class:`RecordError` when left out.

    Raises:
        RecordError: (or what ``error`` makes) a value of the wrong type, an integer beyond 64
            bits, a number that is not finite, or a missing field without a default.
    """
    make = error or _record_error
    return typing.cast(R, _convert(cls, data, where, make))


def _convert(tp: Any, value: Any, path: str, error: ErrorFactory) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, path, error)
            except TfaccelError as exc:
                errors.append(exc)
        raise errors[0] if errors else error(path, str(tp), value, False)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _record(tp, value, path, error)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if not any(value == a and type(value) is type(a) for a in allowed):
            raise error(path, "one of " + ", ".join(json.dumps(a) for a in allowed), value, False)
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise error(path, "a list", value, False)
        args = typing.get_args(tp)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise error(path, f"a list of {len(args)} items", value, False)
            return tuple(
                _convert(a, v, f"{path}[{i}]", error)
                for i, (a, v) in enumerate(zip(args, value, strict=True))
            )
        item = args[0] if args else Any
        items = [_convert(item, v, f"{path}[{i}]", error) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise error(path, "an object", value, False)
        _, val_tp = typing.get_args(tp) or (str, Any)
        return {str(k): _convert(val_tp, v, f"{path}.{k}", error) for k, v in value.items()}
    return _scalar(tp, value, path, error)


def _record(tp: type[Any], value: Any, path: str, error: ErrorFactory) -> Any:
    if not isinstance(value, dict):
        raise error(path, tp.__name__ + " object", value, False)
    hints = typing.get_type_hints(tp)
    kwargs = {}
    for f in dataclasses.fields(tp):
        if not f.init or f.metadata.get(_OMIT):
            continue
        key = _key(f)
        if key in value:
            kwargs[f.name] = _convert(hints[f.name], value[key], f"{path}.{key}", error)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise error(f"{path}.{key}", "a value (the field is required)", _Missing(), False)
    return tp(**kwargs)


def _scalar(tp: Any, value: Any, path: str, error: ErrorFactory) -> Any:
    if tp is Any or tp is object:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise error(path, "true or false", value, False)
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise error(path, "an integer", value, False)
        if not MIN_INT <= value <= MAX_INT:
            raise error(path, f"an integer {INT_RANGE}", value, True)
        return value
    if tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise error(path, "a number", value, False)
        if isinstance(value, int) and not MIN_INT <= value <= MAX_INT:
            raise error(path, f"a finite number; an integer {INT_RANGE}", value, True)
        if not math.isfinite(value):
            raise error(path, f"a finite number; an integer {INT_RANGE}", value, True)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise error(path, "a string", value, False)
        return value
    raise error(path, str(tp), value, False)


class _Missing:
    """The value of a field that is not there, as a message shows it."""

    def __repr__(self) -> str:
        return "nothing"


def json_excerpt(value: Any) -> str:
    """A short text of a JSON value for a message (never the whole of a big one)."""
    if isinstance(value, _Missing):
        return "nothing (the key is missing)"
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, int) and not isinstance(value, bool) and not MIN_INT <= value <= MAX_INT:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def _record_error(path: str, expected: str, value: Any, out_of_range: bool) -> TfaccelError:
    return RecordError(
        f"The field '{path}' has the wrong type",
        expected=expected,
        received=json_excerpt(value),
        fix="pass the document as tfaccel wrote it (its --json output), without editing it",
    )
