"""The training data ``tfaccel.tune`` accepts, and how a trial feeds each form.

Five forms; the user's own pipeline is kept and the tuner varies only what wraps it:

* ``arrays``: ``(x, y)`` with NumPy arrays, or dicts of them (``({"image": X1, "meta": X2}, y)``,
  dict labels too) for models with named inputs or outputs. Both feeds: ``fit`` on the arrays
  (sliced together) and ``tfaccel.data.pipeline((x, y), ...)``.
* ``dataset``: a ``tf.data.Dataset`` of ``(x, y)`` (or ``(x, y, sample_weight)``) elements, single
  examples or batches. Batches are unbatched (``dataset.unbatch()``) so that each trial batches
  at its own size. Whether the elements are batches is the ``batched`` argument; left None, it
  is decided by rank: an element whose inputs have the rank of the model's inputs (batch axis
  included) is a batch, one rank less is one example, anything else is an error asking for
  ``batched=``.
* ``generator``: a function returning an iterator of ``(x, y)`` elements, wrapped with
  ``tf.data.Dataset.from_generator``; the ``output_signature`` is read from the first element
  (every element must have its shapes and dtypes). A generator *object* can be read once only,
  so it is refused with the fix. Then as a ``dataset``.
* ``pydataset``: a ``keras.utils.PyDataset``: its batches are fixed, so its batch size is the
  only one tried and ``fit`` reads it directly (repeated so a timed sample may be longer than
  one pass; its ``workers``, ``use_multiprocessing`` and ``max_queue_size`` are kept).

``dataset``, ``generator`` and ``pydataset`` are fed as ``tf.data`` (the ``pipeline`` feed only).
Their size: the cardinality when TensorFlow knows it; otherwise the tuner counts the examples up
to a limit (the largest batch the search may try) and treats a larger or infinite source as
holding that many, so it never reads a whole data set into memory and never hangs on an
infinite one.

:func:`classify` runs before TensorFlow is imported (a Dataset or a PyDataset means it already
is) and recognises each form through :mod:`tfaccel.workload.data`, the one reader of them;
:func:`resolve` builds the examples dataset and counts; :func:`fit_space` narrows the search
space to what the form allows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tfaccel.tuning._errors import TuneError, user_traceback
from tfaccel.tuning.space import KNOB_DEFAULTS, KNOBS, Space
from tfaccel.workload import data as data_forms

__all__ = ["EXPECTED", "KINDS", "TuneData", "check_arrays", "classify", "fit_space", "resolve"]

KINDS = ("arrays", "dataset", "generator", "pydataset")
EXPECTED = (
    "data=(x, y) with NumPy arrays or dicts of arrays, a tf.data.Dataset of (x, y) elements, "
    "a function returning an iterator of (x, y) examples, or a keras.utils.PyDataset"
)


@dataclass
class TuneData:
    """The training data of a search, in one of :data:`KINDS`.

    Attributes:
        kind: the form.
        x / y: the arrays (``arrays``: an array or a dict of arrays each).
        source: the user's object (``dataset``, ``generator``, ``pydataset``).
        examples: examples the data holds (at most the count limit for sources of unknown or
            infinite size); the search caps batch sizes with it.
        batch_size: a PyDataset's fixed batch size.
        batched: whether a dataset's or generator's elements are batches.
        infinite: the source repeats forever.
        dataset: the ``tf.data.Dataset`` of single examples trials batch (``dataset``,
            ``generator``), built by :func:`resolve`.
        notes: what the result should say about the data.
    """

    kind: str
    x: Any = None
    y: Any = None
    source: Any = None
    examples: int = 0
    batch_size: int | None = None
    batched: bool | None = None
    infinite: bool = False
    dataset: Any = None
    notes: list[str] = field(default_factory=list)

    @property
    def arrays(self) -> bool:
        """Whether the data is arrays (both feeds work)."""
        return self.kind == "arrays"


def classify(data: Any) -> TuneData:
    """Which form ``data`` is; arrays are checked in full. No TensorFlow import.

    Raises:
        TuneError: an unsupported form, a generator object, or bad arrays (see
            :func:`check_arrays`).

    Example:
        >>> import numpy as np
        >>> classify(({"a": np.zeros((4, 2))}, np.zeros(4))).examples
        4
    """
    kind = data_forms.kind_of(data)
    if kind in ("dataset", "pydataset"):
        return TuneData(kind, source=data)
    if kind == "generator" and not data_forms.sized(data):
        raise TuneError(
            "The training data is a generator object, which can be read only once",
            expected="a function returning a new iterator of (x, y) examples each time it is "
            "called (each trial reads the data again)",
            received=type(data).__name__,
            fix="pass the generator function itself: data=make_examples, not data=make_examples()",
        )
    if callable(data):
        return TuneData("generator", source=data)
    x, y, count = check_arrays(data)
    return TuneData("arrays", x=x, y=y, examples=count)


def check_arrays(data: Any) -> tuple[Any, Any, int]:
    """Check ``(x, y)`` arrays: x and y each an array, a dict of arrays or a list of arrays
    (several inputs: returned as a tuple), all of one non-zero length.

    Returns:
        (x, y, number of examples).

    Raises:
        TuneError: not a pair, a part without a length, lengths that differ, or no examples.

    Example:
        >>> import numpy as np
        >>> check_arrays((np.zeros((10, 3)), np.zeros(10)))[2]
        10
    """
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TuneError(
            "The training data is not a pair (x, y) nor another form tune reads",
            expected=EXPECTED,
            received=type(data).__name__
            + (f" of length {len(data)}" if data_forms.sized(data) else ""),
            fix="pass data=(x_train, y_train), or a tf.data.Dataset of (x, y)",
        )
    x, y = (_inputs(part) for part in data)
    parts = {**_parts("x", x), **_parts("y", y)}
    unsized = {name: type(v).__name__ for name, v in parts.items() if not data_forms.sized(v)}
    if unsized:
        raise TuneError(
            "The training data's x or y has no length",
            expected="arrays (or dicts of arrays) with one row per example",
            received=", ".join(f"{name}: {kind}" for name, kind in unsized.items()),
            fix="pass NumPy arrays, e.g. data=(np.asarray(x), np.asarray(y))",
        )
    lengths = {name: len(v) for name, v in parts.items()}
    if len(set(lengths.values())) > 1:
        raise TuneError(
            "The training data's x and y have different lengths",
            expected="one row per example in every array (one label row per example)",
            received=", ".join(f"{n} rows of {name}" for name, n in lengths.items()),
            fix="pass matching arrays",
        )
    count = next(iter(lengths.values()))
    if count == 0:
        raise TuneError(
            "The training data is empty",
            expected="at least one example (two batches for the numpy feed)",
            received="arrays with 0 rows",
            fix="pass the training arrays, not an empty split",
        )
    return x, y, count


def _inputs(value: Any) -> Any:
    """A list of arrays (a model of several inputs, ``fit([a, b], y)``) as a tuple of them;
    anything else as it is."""
    if isinstance(value, list) and value and all(_is_array(part) for part in value):
        return tuple(value)
    return value


def _is_array(value: Any) -> bool:
    """An array or tensor with at least one axis (rows)."""
    shape = getattr(value, "shape", None)
    return shape is not None and len(shape) >= 1


def _parts(name: str, value: Any) -> dict[str, Any]:
    """``{"x": x}``, or ``{"x['image']": ..., ...}`` for a dict (an empty dict has no length),
    or ``{"x[0]": ..., "x[1]": ...}`` for a tuple of arrays (several inputs)."""
    if isinstance(value, Mapping) and value:
        return {f"{name}[{key!r}]": part for key, part in value.items()}
    if isinstance(value, tuple) and value and all(_is_array(part) for part in value):
        return {f"{name}[{index}]": part for index, part in enumerate(value)}
    return {name: value}


def resolve(
    data: TuneData,
    *,
    batched: bool | None,
    count_limit: int,
    build_model: Callable[[], Any],
) -> TuneData:
    """Build what the trials read and count the examples (TensorFlow runs here).

    Args:
        data: from :func:`classify`.
        batched: whether a dataset's or generator's elements are batches (None: by rank, which
            calls ``build_model`` once to read the model's input ranks).
        count_limit: count at most this many examples of a source of unknown size.
        build_model: builds the model (float32), for its input ranks.

    Raises:
        TuneError: elements that are not ``(x, y)``, an empty source, a first element that is
            not a tensor structure, or batching that cannot be decided.
    """
    if data.kind == "arrays":
        return data
    if data.kind == "pydataset":
        return _resolve_pydataset(data, count_limit)
    import tensorflow as tf

    if data.kind == "generator":
        data.dataset = _from_generator(data.source)
        described = "generator function"
    else:
        data.dataset = data.source
        described = "tf.data.Dataset"
    spec = data.dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise TuneError(
            f"The {described}'s elements are not (x, y) pairs",
            expected="elements (x, y) or (x, y, sample_weight), x and y tensors or dicts of "
            "tensors",
            received=f"elements of structure {_structure(spec)}",
            fix="map the dataset to (x, y) pairs, e.g. dataset.map(lambda e: (e['image'], "
            "e['label']))",
        )
    data.batched = batched if batched is not None else _batched_by_rank(spec[0], build_model)
    cardinality = int(data.dataset.cardinality())
    if cardinality == 0:
        raise TuneError(
            f"The {described} is empty",
            expected="at least one element",
            received="a dataset of 0 elements (cardinality() == 0)",
            fix="check how the dataset is built (a take(0), a filter that keeps nothing)",
        )
    data.infinite = cardinality == int(tf.data.INFINITE_CARDINALITY)
    static_batch = data_forms.leading_dim(spec[0]) if data.batched else 1
    if data.batched:
        data.dataset = data.dataset.unbatch()
    if data.infinite:
        data.examples = count_limit
        size = f"infinite; counted as {count_limit:,} examples (the largest batch tried)"
    elif cardinality > 0 and static_batch is not None:
        data.examples = cardinality * static_batch
        size = (
            f"{data.examples:,} examples"
            if static_batch == 1
            else f"about {data.examples:,} examples"
        )
    else:
        counted = int(data.dataset.take(count_limit).reduce(0, lambda count, _: count + 1))
        if counted == 0:
            raise TuneError(
                f"The {described} yields no examples",
                expected="at least one (x, y) example",
                received="an empty iteration",
                fix="check the source of the data",
            )
        data.examples = counted
        size = (
            f"{counted:,} examples (counted)"
            if counted < count_limit
            else f"at least {counted:,} examples (counted up to the largest batch tried)"
        )
    kind = "batches, unbatched and re-batched per trial" if data.batched else "single examples"
    how = "by the batched argument" if batched is not None else "by rank against the model"
    data.notes.append(
        f"data: a {described} of {kind} ({how}); {size}; each trial wraps it in "
        "tfaccel.data.pipeline(dataset, batch_size, shuffle=False, repeat=True, ...) (the "
        "pipeline feed only); to reproduce, pass your dataset where the code says (x, y)"
    )
    return data


def _from_generator(fn: Callable[[], Any]) -> Any:
    """``tf.data.Dataset.from_generator(fn)`` with the output signature of its first element."""
    import tensorflow as tf

    name = getattr(fn, "__qualname__", None) or repr(fn)
    try:
        iterator = fn()
    except Exception as exc:
        raise TuneError(
            f"The data function {name} raised {type(exc).__name__}: {exc}",
            expected="a function that takes no arguments and returns an iterator of (x, y)",
            received="this traceback, from your code:\n" + user_traceback(exc),
            fix=f"fix {name}; calling it alone reproduces the error",
        ) from exc
    if not hasattr(iterator, "__next__"):
        raise TuneError(
            f"The data function {name} does not return an iterator",
            expected="a generator function (one that yields (x, y) examples)",
            received=f"it returned {type(iterator).__name__}",
            fix="yield the examples: def examples(): for i in ...: yield x[i], y[i]",
        )
    try:
        first = next(iterator)
    except StopIteration:
        raise TuneError(
            f"The data function {name} yields nothing",
            expected="at least one (x, y) example",
            received="an empty iterator",
            fix="check the source of the data",
        ) from None
    except Exception as exc:
        raise TuneError(
            f"The data function {name} raised {type(exc).__name__} on its first element: {exc}",
            expected="an iterator of (x, y) examples",
            received="this traceback, from your code:\n" + user_traceback(exc),
            fix=f"fix {name}; next({name}()) alone reproduces the error",
        ) from exc
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
    if not isinstance(first, tuple) or len(first) not in (2, 3):
        raise TuneError(
            f"The data function {name} does not yield (x, y) pairs",
            expected="tuples (x, y) or (x, y, sample_weight)",
            received=f"a first element of type {type(first).__name__}",
            fix="yield x, y",
        )
    try:
        signature = tf.nest.map_structure(data_forms.spec_of, first)
    except (TypeError, ValueError) as exc:
        raise TuneError(
            f"The first element of the data function {name} is not made of tensors",
            expected="arrays, numbers or strings (or dicts of them) in each (x, y)",
            received=f"{type(exc).__name__}: {exc}"[:300],
            fix="yield NumPy arrays",
        ) from exc
    return tf.data.Dataset.from_generator(fn, output_signature=signature)


def _structure(spec: Any) -> str:
    import tensorflow as tf

    text = repr(tf.nest.map_structure(lambda s: type(s).__name__, spec))
    return text[:200]


def _batched_by_rank(x_spec: Any, build_model: Callable[[], Any]) -> bool:
    """Whether elements whose inputs are ``x_spec`` are batches, by the model's input ranks."""
    import tensorflow as tf

    model = build_model()
    try:
        inputs = list(model.inputs or [])
    except (AttributeError, ValueError):
        inputs = []
    model_ranks = {getattr(t, "name", str(i)): len(t.shape) for i, t in enumerate(inputs)}
    del model
    specs = tf.nest.flatten(x_spec)
    if isinstance(x_spec, Mapping) and set(x_spec) == set(model_ranks):
        pairs = [(x_spec[name].shape.rank, model_ranks[name]) for name in x_spec]
    elif len(specs) == len(model_ranks):
        pairs = [(s.shape.rank, r) for s, r in zip(specs, model_ranks.values(), strict=True)]
    else:
        pairs = []
    differences = {rank - data_rank for data_rank, rank in pairs if data_rank is not None}
    if pairs and differences == {0}:
        return True
    if pairs and differences == {1}:
        return False
    received = "element inputs of rank " + ", ".join(str(s.shape.rank) for s in specs)
    received += (
        "; model inputs of rank " + ", ".join(str(r) for r in model_ranks.values())
        if model_ranks
        else "; a model without defined inputs (a subclassed model?)"
    )
    raise TuneError(
        "Cannot tell whether the dataset's elements are batches or single examples",
        expected="inputs of the model's input rank (batches) or one less (examples), or the "
        "batched argument",
        received=received,
        fix="pass batched=True (the elements are batches) or batched=False (single examples)",
    )


def _resolve_pydataset(data: TuneData, count_limit: int) -> TuneData:
    import tensorflow as tf

    pydataset = data.source
    try:
        batches = pydataset.num_batches
    except NotImplementedError:
        batches = None
    first = pydataset[0]
    x = data_forms.inputs_of(first)
    leaves = tf.nest.flatten(x)
    sizes = {len(leaf) for leaf in leaves if data_forms.sized(leaf)}
    if not isinstance(first, tuple) or len(first) not in (2, 3) or len(sizes) != 1:
        raise TuneError(
            "The PyDataset's batches are not (x, y) pairs of arrays",
            expected="pydataset[i] returning (x, y) or (x, y, sample_weight), x an array or a "
            "dict of arrays of one batch",
            received=f"pydataset[0] of type {type(first).__name__}",
            fix="return x_batch, y_batch from __getitem__",
        )
    data.batch_size = sizes.pop()
    data.infinite = batches is None
    data.examples = count_limit if batches is None else max(1, batches) * data.batch_size
    data.dataset = repeated(pydataset) if batches is not None else pydataset
    count = "an infinite number of" if batches is None else f"{batches:,}"
    data.notes.append(
        f"data: a keras.utils.PyDataset of {count} batches of {data.batch_size}: fit reads it "
        f"directly (repeated over a timed sample), so the batch size is fixed to "
        f"{data.batch_size} and the pipeline knobs do not apply; its workers="
        f"{pydataset.workers}, use_multiprocessing={pydataset.use_multiprocessing} are kept"
    )
    return data


def repeated(pydataset: Any) -> Any:
    """A PyDataset that cycles through ``pydataset`` forever (``num_batches`` None), with its
    workers, multiprocessing and queue settings, so ``fit(steps_per_epoch=n)`` never runs out."""
    return _repeated_class()(pydataset)


@functools.cache
def _repeated_class() -> type:
    import keras

    class RepeatedPyDataset(keras.utils.PyDataset):
        def __init__(self, inner: Any) -> None:
            super().__init__(
                workers=inner.workers,
                use_multiprocessing=inner.use_multiprocessing,
                max_queue_size=inner.max_queue_size,
            )
            self.inner = inner
            self.length = int(inner.num_batches)

        @property
        def num_batches(self) -> None:
            return None

        def __getitem__(self, index: int) -> Any:
            return self.inner[index % self.length]

        def on_epoch_begin(self) -> None:
            self.inner.on_epoch_begin()

        def on_epoch_end(self) -> None:
            self.inner.on_epoch_end()

    RepeatedPyDataset.__module__ = __name__
    RepeatedPyDataset.__qualname__ = "RepeatedPyDataset"
    return RepeatedPyDataset


def __getattr__(name: str) -> Any:
    # pickle finds RepeatedPyDataset by name (PyDataset workers in spawned processes); it is
    # made on first use because its base class needs Keras.
    if name == "RepeatedPyDataset":
        return _repeated_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def fit_space(space: Space, data: TuneData, given: Mapping[str, Any]) -> tuple[Space, list[str]]:
    """The part of ``space`` the data's form can run, and notes on what was left out.

    Args:
        space: the parsed space.
        data: the resolved data.
        given: the keys the user gave (a default may be replaced, a given value is reported).

    Raises:
        TuneError: the space asks for the numpy feed only, and the data is not arrays.
    """
    if data.arrays:
        return space, []
    notes = []
    if "numpy" in space.feed:
        if space.feed == ("numpy",):
            raise TuneError(
                f"The numpy feed cannot read a {data.kind}",
                expected="arrays (x, y) for feed='numpy'",
                received=f"space feed={list(space.feed)} with a {data.kind}",
                fix="drop 'feed' from the space (the pipeline feed reads it), or pass arrays",
            )
        notes.append(
            f"the numpy feed was not tried: it needs arrays, and the data is a {data.kind}"
        )
        space = replace(space, feed=("pipeline",))
    if data.kind == "pydataset":
        assert data.batch_size is not None
        if "batch_size" in given and space.batch_size != (data.batch_size,):
            notes.append(
                f"batch_size fixed to the PyDataset's {data.batch_size} (the space asked "
                f"{space.batch_size})"
            )
        space = replace(space, batch_size=(data.batch_size,))
        changed = [k for k in KNOBS if getattr(space, k) != (KNOB_DEFAULTS[k],)]
        if changed:
            notes.append(f"{', '.join(changed)} not tried: they are tfaccel.data.pipeline knobs")
        return replace(space, **{k: (KNOB_DEFAULTS[k],) for k in KNOBS}), notes
    if "cache" not in given:
        notes.append(
            "cache=False unless the space lists cache values: a cache of your dataset would "
            "freeze any random augmentation in it"
        )
        space = replace(space, cache=(False,))
    elif data.infinite and any(v is True or isinstance(v, str) for v in space.cache):
        notes.append("caching was not tried: the dataset is infinite")
        kept = tuple(v for v in space.cache if v is False or v == "auto")
        space = replace(space, cache=kept or (False,))
    return space, notes
