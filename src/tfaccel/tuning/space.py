"""The search space of ``tfaccel.tune``: what can vary, what each value means, which is simpler.

Pure: no TensorFlow. A :class:`Space` holds the values to try per setting; a :class:`Config` is
one point of it. :func:`simplicity` orders configurations from the simplest (the Keras default:
``fit`` on NumPy arrays, float32, no XLA) to the most involved, and the search uses that order
to break ties: a configuration wins only when it is faster beyond the measured noise.

Example:
    >>> space = parse_space({"batch_size": [32, 256], "jit": False})
    >>> space.batch_size, space.jit
    ((32, 256), (False,))
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from tfaccel.core.checks import is_bool, is_int
from tfaccel.core.errors import UsageError, shown
from tfaccel.core.records import Record
from tfaccel.inventory.precision import PRECISIONS
from tfaccel.runtime import parse_setting
from tfaccel.tuning._errors import SpaceError

__all__ = [
    "DEFAULT_SPACE",
    "FEEDS",
    "KNOBS",
    "KNOB_DEFAULTS",
    "OWN_FEED",
    "PRECISIONS",
    "SPACE_KEYS",
    "Config",
    "Space",
    "parse_space",
    "parse_space_text",
    "simplicity",
]

FEEDS = ("numpy", "pipeline")
"""``numpy``: ``model.fit(x, y, batch_size=...)``; ``pipeline``: ``tfaccel.data.pipeline``."""

OWN_FEED = "as-given"
"""The feed of a script's own configuration when its data is a ``tf.data.Dataset``: the
dataset exactly as the script builds it (its batches, its prefetch), repeated. Not a value a
space can search: only the script's baseline has it."""

KNOBS = ("cache", "prefetch", "num_parallel_calls")
"""The ``tfaccel.data.pipeline`` arguments the search can vary (pipeline feed only)."""

KNOB_DEFAULTS: dict[str, Any] = {"cache": "auto", "prefetch": "auto", "num_parallel_calls": "auto"}
"""The pipeline's own defaults: the simplest value of each knob."""

SPACE_KEYS = ("batch_size", "precision", "jit", "steps_per_execution", "feed", *KNOBS, "threads")
"""Every key a search space may have."""

DEFAULT_SPACE: dict[str, Any] = {
    "batch_size": "auto",
    "precision": "auto",
    "jit": (False, True),
    "steps_per_execution": (1, 8),
    "feed": FEEDS,
    "cache": ("auto",),
    "prefetch": ("auto",),
    "num_parallel_calls": ("auto",),
    "threads": (None,),
}
"""What ``tune`` searches when a key is not given: batch sizes found by the memory search,
the precisions this hardware runs fast, XLA off and on, one or eight training steps per call
of Keras' train function (``steps_per_execution``), both feeds, the pipeline's own knob
defaults and TensorFlow's default thread pools."""

KnobValue: TypeAlias = "bool | int | str | None"
ThreadsValue: TypeAlias = "tuple[int, int | None] | None"

_PRECISION_RANK = {name: rank for rank, name in enumerate(PRECISIONS)}


@dataclass(frozen=True)
class Config(Record):
    """One configuration of the search: how the model is fed, batched, compiled and run.

    Attributes:
        batch_size: examples per training step.
        precision: Keras dtype policy (``float32``, ``mixed_bfloat16``, ``mixed_float16``).
        jit: XLA compilation of the train step (``model.compile(jit_compile=...)``).
        steps_per_execution: training steps per call of Keras' train function (fewer returns
            to Python per step: ``model.compile(steps_per_execution=...)``).
        feed: ``numpy`` (``fit`` on the arrays) or ``pipeline`` (``tfaccel.data.pipeline``).
        cache / prefetch / num_parallel_calls: ``tfaccel.data.pipeline`` arguments (pipeline
            feed only; the numpy feed keeps the defaults).
        threads: (intra-op, inter-op or None) threads, or None for TensorFlow's default.
    """

    batch_size: int
    precision: str = "float32"
    jit: bool = False
    feed: str = "numpy"
    cache: KnobValue = "auto"
    prefetch: KnobValue = "auto"
    num_parallel_calls: KnobValue = "auto"
    threads: ThreadsValue = None
    steps_per_execution: int = 1

    def pipeline_knobs(self) -> dict[str, KnobValue]:
        """The ``tfaccel.data.pipeline`` knob arguments of this configuration."""
        return {name: getattr(self, name) for name in KNOBS}

    def label(self) -> str:
        """A short name: ``bs256 mixed_bfloat16 pipeline xla=off`` (+ changed knobs, threads)."""
        parts = [f"bs{self.batch_size}", self.precision, self.feed, f"xla={_onoff(self.jit)}"]
        if self.steps_per_execution != 1:
            parts.append(f"spe={self.steps_per_execution}")
        parts += [
            f"{name}={value}"
            for name, value in self.pipeline_knobs().items()
            if value != KNOB_DEFAULTS[name]
        ]
        if self.threads is not None:
            intra, inter = self.threads
            parts.append(f"threads={intra}" + (f",{inter}" if inter is not None else ""))
        return " ".join(parts)


def _onoff(value: bool) -> str:
    return "on" if value else "off"


def simplicity(config: Config) -> tuple[int, ...]:
    """The order in which ties are broken: smaller is simpler.

    float32 < mixed_bfloat16 < mixed_float16 (loss scaling), then XLA off < on, then fewer
    steps per execution, then the numpy feed < the pipeline, then fewer pipeline knobs
    changed from their defaults, then TensorFlow's thread defaults < set counts, then the
    smaller batch size.

    Example:
        >>> simplicity(Config(32)) < simplicity(Config(32, precision="mixed_bfloat16"))
        True
    """
    changed = sum(value != KNOB_DEFAULTS[name] for name, value in config.pipeline_knobs().items())
    threads = 0 if config.threads is None else 1 + sum(t or 0 for t in config.threads)
    return (
        _PRECISION_RANK.get(config.precision, len(PRECISIONS)),
        int(config.jit),
        config.steps_per_execution,
        FEEDS.index(config.feed) if config.feed in FEEDS else len(FEEDS),
        changed,
        threads,
        config.batch_size,
    )


@dataclass(frozen=True)
class Space:
    """The values to try per setting, each tuple ordered simplest first.

    ``batch_size`` and ``precision`` may be ``"auto"``: the batch sizes come from the memory
    search (powers of two up to the largest that fits), the precisions from the hardware
    (:meth:`tfaccel.inventory.Inventory.precisions`: float32 and the 16-bit policies it
    computes natively).
    """

    batch_size: tuple[int, ...] | Literal["auto"] = "auto"
    precision: tuple[str, ...] | Literal["auto"] = "auto"
    jit: tuple[bool, ...] = (False, True)
    steps_per_execution: tuple[int, ...] = (1, 8)
    feed: tuple[str, ...] = FEEDS
    cache: tuple[KnobValue, ...] = ("auto",)
    prefetch: tuple[KnobValue, ...] = ("auto",)
    num_parallel_calls: tuple[KnobValue, ...] = ("auto",)
    threads: tuple[ThreadsValue, ...] = (None,)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        d: dict[str, Any] = {}
        for key in SPACE_KEYS:
            value = getattr(self, key)
            d[key] = value if isinstance(value, str) else [_jsonable(v) for v in value]
        return d

    def secondary(self) -> dict[str, tuple[Any, ...]]:
        """Settings tried one at a time on the leading configuration: XLA, the steps per
        execution and the knobs."""
        return {key: getattr(self, key) for key in ("jit", "steps_per_execution", *KNOBS)}

    def base(self, batch_size: int, precision: str, feed: str) -> Config:
        """The configuration with these primary values and the simplest secondary ones."""
        return Config(
            batch_size=batch_size,
            precision=precision,
            jit=self.jit[0],
            steps_per_execution=self.steps_per_execution[0],
            feed=feed,
            cache=self.cache[0] if feed == "pipeline" else KNOB_DEFAULTS["cache"],
            prefetch=self.prefetch[0] if feed == "pipeline" else KNOB_DEFAULTS["prefetch"],
            num_parallel_calls=(
                self.num_parallel_calls[0]
                if feed == "pipeline"
                else KNOB_DEFAULTS["num_parallel_calls"]
            ),
            threads=self.threads[0],
        )

    def variants(self, config: Config) -> list[Config]:
        """Configurations differing from ``config`` in one secondary setting (XLA, the steps per
        execution or a knob).

        Knobs vary only for the pipeline feed; threads are not varied here (see
        :mod:`tfaccel.tuning.threads`).
        """
        out = []
        for key, values in self.secondary().items():
            if key in KNOBS and config.feed != "pipeline":
                continue
            out += [replace(config, **{key: v}) for v in values if v != getattr(config, key)]
        return out


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def parse_space(space: Mapping[str, Any] | None = None) -> Space:
    """Check a search space and fill the keys it leaves out from :data:`DEFAULT_SPACE`.

    Args:
        space: key -> a value or a sequence of values to try. Keys: ``batch_size`` (positive
            ints, or ``"auto"``), ``precision`` (:data:`PRECISIONS`, or ``"auto"``), ``jit``
            (bools), ``steps_per_execution`` (positive ints), ``feed`` (``numpy``,
            ``pipeline``), ``cache``, ``prefetch``, ``num_parallel_calls``
            (``tfaccel.data.pipeline`` values), ``threads``
            (None, an intra-op count, or (intra, inter)).

    Returns:
        The :class:`Space`, each tuple de-duplicated and ordered simplest first.

    Raises:
        SpaceError: an unknown key, an empty list, or a value the setting does not take.

    Example:
        >>> parse_space({"precision": "float32", "feed": ["pipeline"]}).precision
        ('float32',)
    """
    if space is not None and not isinstance(space, Mapping):
        raise SpaceError(
            "The search space is not a mapping of keys to values",
            expected="a dict such as {'precision': ['float32', 'mixed_float16']}, or None",
            received=f"space={shown(space)} ({type(space).__name__})",
            fix="pass space={'jit': [False, True]}, a dict of the keys to search",
        )
    given = dict(space or {})
    unknown = [k for k in given if k not in SPACE_KEYS]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(str(key), SPACE_KEYS, n=1)
        raise SpaceError(
            f"The search space has an unknown key {key!r}",
            expected="keys among " + ", ".join(SPACE_KEYS),
            received="keys " + ", ".join(repr(k) for k in given),
            fix=f"rename it to {close[0]!r}" if close else "remove it",
        )
    values = {**DEFAULT_SPACE, **given}
    return Space(
        batch_size=_auto_or(values["batch_size"], "batch_size", _check_batch),
        precision=_auto_or(values["precision"], "precision", _check_precision),
        jit=_values("jit", values["jit"], _check_jit, key=int),
        steps_per_execution=_values(
            "steps_per_execution", values["steps_per_execution"], _check_spe, key=int
        ),
        feed=_values("feed", values["feed"], _check_feed, key=FEEDS.index),
        cache=_knob_values("cache", values["cache"], _check_cache),
        prefetch=_knob_values("prefetch", values["prefetch"], _check_prefetch),
        num_parallel_calls=_knob_values(
            "num_parallel_calls", values["num_parallel_calls"], _check_parallel
        ),
        threads=_values("threads", values["threads"], _check_threads, key=_threads_rank),
    )


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def _auto_or(value: Any, name: str, check: Any) -> Any:
    if isinstance(value, str) and value == "auto":
        return "auto"
    key = (lambda v: v) if name == "batch_size" else _PRECISION_RANK.__getitem__
    return _values(name, value, check, key=key)


def _values(name: str, value: Any, check: Any, *, key: Any) -> tuple[Any, ...]:
    items = _as_list(value)
    if name == "threads" and isinstance(value, tuple) and len(value) == 2:
        if all(is_int(v) for v in value):
            items = [value]  # one (intra, inter) pair, not two values
    if not items:
        raise SpaceError(
            f"The search space gives no value for {name!r}",
            expected="at least one value",
            received="an empty list",
            fix=f"give one value, or leave {name!r} out to search its default values",
        )
    checked = [check(name, item) for item in items]
    unique = list(dict.fromkeys(checked))
    return tuple(sorted(unique, key=key))


def _knob_values(name: str, value: Any, check: Any) -> tuple[KnobValue, ...]:
    default = KNOB_DEFAULTS[name]
    return _values(name, value, check, key=lambda v: (v != default, str(v)))


def _bad(name: str, value: Any, expected: str) -> SpaceError:
    return SpaceError(
        f"The search space value {value!r} is not valid for {name!r}",
        expected=expected,
        received=repr(value),
        fix=f"give {name!r} values that are {expected}",
    )


def _check_batch(name: str, value: Any) -> int:
    if not is_int(value) or value < 1:
        raise _bad(name, value, "positive integers, or 'auto'")
    return int(value)


def _check_precision(name: str, value: Any) -> str:
    if value not in PRECISIONS:
        raise _bad(name, value, "among " + ", ".join(PRECISIONS) + ", or 'auto'")
    return str(value)


def _check_jit(name: str, value: Any) -> bool:
    if not is_bool(value):
        raise _bad(name, value, "True or False")
    return bool(value)


def _check_spe(name: str, value: Any) -> int:
    if not is_int(value) or value < 1:
        raise _bad(name, value, "positive integers (training steps per train-function call)")
    return int(value)


def _check_feed(name: str, value: Any) -> str:
    if value not in FEEDS:
        raise _bad(name, value, "among " + ", ".join(FEEDS))
    return str(value)


def _check_cache(name: str, value: Any) -> KnobValue:
    if is_bool(value):
        return bool(value)
    if value == "auto":
        return value
    if isinstance(value, str) and value:
        return value  # a cache file path
    raise _bad(name, value, "'auto', True, False or a cache file path")


def _check_prefetch(name: str, value: Any) -> KnobValue:
    if value is None or value == "auto" or (is_int(value) and value >= 0):
        return value
    raise _bad(name, value, "'auto', an integer >= 0 (buffered batches) or None (no prefetch)")


def _check_parallel(name: str, value: Any) -> KnobValue:
    if value is None or value == "auto" or (is_int(value) and value >= 1):
        return value
    raise _bad(name, value, "'auto', an integer >= 1 or None (sequential)")


def _check_threads(name: str, value: Any) -> ThreadsValue:
    if value is None:
        return None

    try:
        parsed: tuple[int, int | None] = parse_setting("threads", value)
    except UsageError:
        expected = "None (TensorFlow's default), an intra-op count, or (intra, inter)"
        raise _bad(name, value, expected) from None
    return parsed


def _threads_rank(value: ThreadsValue) -> tuple[int, int]:
    if value is None:
        return (0, 0)
    return (1, value[0] + (value[1] or 0))


def parse_space_text(items: Sequence[str]) -> dict[str, Any]:
    """Parse ``--space KEY=V1,V2`` options into a space mapping (checked by :func:`parse_space`).

    Words: ``auto``; integers; ``on``/``off``/``true``/``false`` for XLA and cache; ``none``
    (prefetch, num_parallel_calls; ``default`` for threads); threads as ``INTRA`` or
    ``INTRA:INTER``; anything else is kept as text (a cache file path).

    Raises:
        SpaceError: an item without ``=``, or a repeated key.

    Example:
        >>> parse_space_text(["batch_size=32,256", "jit=off", "threads=default,2:1"])
        {'batch_size': [32, 256], 'jit': [False], 'threads': [None, (2, 1)]}
    """
    space: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key or not text.strip():
            raise SpaceError(
                f"The --space item {item!r} is not KEY=VALUES",
                expected="KEY=V1,V2 with KEY among " + ", ".join(SPACE_KEYS),
                received=repr(item),
                fix="for example --space batch_size=64,128,256 --space jit=off",
            )
        if key in space:
            raise SpaceError(
                f"The --space key {key!r} is given twice",
                expected="each key once, its values separated by commas",
                received=repr(item),
                fix=f"merge them: --space {key}=V1,V2,V3",
            )
        words = [w.strip() for w in text.split(",")]
        space[key] = (
            "auto"
            if words == ["auto"] and key in ("batch_size", "precision")
            else [_word(key, w) for w in words]
        )
    return space


def _word(key: str, word: str) -> Any:
    lower = word.lower()
    if key == "threads":
        if lower in ("none", "default"):
            return None
        intra, _, inter = word.partition(":")
        if intra.isdigit() and (not inter or inter.isdigit()):
            return (int(intra), int(inter)) if inter else int(intra)
        return word
    if lower == "none":
        return None
    if lower in ("on", "true", "yes"):
        return True
    if lower in ("off", "false", "no"):
        return False
    if word.isdigit():
        return int(word)
    return word
