"""``tfaccel.tune`` on each data form it reads, on real TensorFlow (CPU) with a tiny model:
arrays, dicts of arrays, a ``tf.data.Dataset`` (examples and batches), a generator function and
a ``keras.utils.PyDataset``; each asserts the feed the trials used and that the user's own
pipeline was read. Bad forms are refused before any model is built."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from tune_helpers import dense_model

import tfaccel.tuning
from tfaccel.tuning import SpaceError, TuneError, TuneResult

COUNT = 256
FAST = {"sample_s": 0.05, "final_rounds": 2, "store": False, "progress": False}
SPACE = {"batch_size": [32], "precision": ["float32"], "jit": [False], "steps_per_execution": [1]}
BUDGET_S = 60.0  # a ceiling (as in test_tune_tf): these spaces are done in a few seconds


def model_fn() -> Any:
    return dense_model(8, "data_net")


def named_model_fn() -> Any:
    """Two named inputs, one named output (dict x and dict y)."""
    import keras

    image, meta = keras.Input((8,), name="image"), keras.Input((3,), name="meta")
    hidden = keras.layers.Dense(8, activation="relu")(keras.layers.Concatenate()([image, meta]))
    label = keras.layers.Dense(3, activation="softmax", name="label")(hidden)
    model = keras.Model({"image": image, "meta": meta}, {"label": label}, name="named_net")
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model


def arrays() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((COUNT, 8), dtype=np.float32), rng.integers(0, 3, COUNT).astype(np.int32)


def tune(data: Any, space: dict[str, Any] | None = None, **options: Any) -> TuneResult:
    return tfaccel.tuning.tune(
        model_fn, data, BUDGET_S, {**SPACE, **(space or {})}, **FAST, **options
    )


def ran(result: TuneResult) -> list[Any]:
    """The configurations that were built and timed."""
    return [t.config for t in result.trials if t.status in ("ok", "dropped")]


def note(result: TuneResult, fragment: str) -> str:
    found = [n for n in result.notes if fragment in n]
    assert found, f"no note with {fragment!r} in {result.notes}"
    return found[0]


# --- arrays -----------------------------------------------------------------------------------


def test_arrays_search_both_feeds() -> None:
    result = tune(arrays())
    assert result.best is not None
    assert {c.feed for c in ran(result)} == {"numpy", "pipeline"}, str(result)
    assert not [n for n in result.notes if n.startswith("data:")]


def test_dict_inputs_and_labels_train_on_both_feeds() -> None:
    x, y = arrays()
    meta = np.random.default_rng(1).random((COUNT, 3), dtype=np.float32)
    data = ({"image": x, "meta": meta}, {"label": y})
    result = tfaccel.tuning.tune(named_model_fn, data, BUDGET_S, SPACE, **FAST)
    assert result.best is not None and result.model_name == "named_net"
    assert {c.feed for c in ran(result)} == {"numpy", "pipeline"}
    assert all(t.status in ("ok", "dropped") and t.samples for t in result.trials)


# --- tf.data.Dataset --------------------------------------------------------------------------


def counting_dataset(counter: Any) -> Any:
    """A dataset of single examples whose map counts the examples it is asked for."""
    import tensorflow as tf

    def count(x: Any, y: Any) -> tuple[Any, Any]:
        counter.assign_add(1)
        return x, y

    return tf.data.Dataset.from_tensor_slices(arrays()).map(count)


def test_dataset_of_examples_is_read_through_its_own_map_by_the_pipeline_feed() -> None:
    import tensorflow as tf

    counter = tf.Variable(0, dtype=tf.int64)
    result = tune(counting_dataset(counter), {"feed": ["numpy", "pipeline"]})
    assert result.best is not None and result.best.feed == "pipeline"
    assert {c.feed for c in ran(result)} == {"pipeline"}
    assert all(t.config.feed == "pipeline" for t in result.trials)  # numpy never even listed
    note(result, "the numpy feed was not tried")
    assert "single examples (by rank against the model); 256 examples" in note(result, "data:")
    assert result.best.cache is False  # a user's dataset is not cached unless asked
    # each timed sample read the dataset again: more examples than one pass, none cached
    assert int(counter.numpy()) > 2 * COUNT


def test_batched_dataset_is_unbatched_and_rebatched_at_each_trial_size() -> None:
    import tensorflow as tf

    # drop_remainder gives a static batch axis: the rank, not a None axis, tells it is batched
    batches = tf.data.Dataset.from_tensor_slices(arrays()).batch(16, drop_remainder=True)
    result = tune(batches, {"batch_size": [32, 64]})
    assert result.best is not None
    assert {c.batch_size for c in ran(result)} == {32, 64}
    text = note(result, "data:")
    assert "batches, unbatched and re-batched per trial (by rank" in text
    assert "about 256 examples" in text


def test_batched_argument_overrides_the_rank_rule_and_a_subclassed_model_needs_it() -> None:
    import keras
    import tensorflow as tf

    class Net(keras.Model):  # no Input: its input rank is unknown before it is called
        def __init__(self) -> None:
            super().__init__(name="subclassed_net")
            self.out = keras.layers.Dense(3, activation="softmax")

        def call(self, x: Any) -> Any:
            return self.out(x)

    def subclassed() -> Any:
        model = Net()
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
        return model

    batches = tf.data.Dataset.from_tensor_slices(arrays()).batch(50)
    with pytest.raises(TuneError, match="batched=True") as info:
        tfaccel.tuning.tune(subclassed, batches, BUDGET_S, SPACE, **FAST)
    assert "a model without defined inputs" in str(info.value)
    result = tfaccel.tuning.tune(subclassed, batches, BUDGET_S, SPACE, **FAST, batched=True)
    assert result.best is not None and result.best.batch_size == 32
    assert "(by the batched argument)" in note(result, "data:")


# --- a generator function ---------------------------------------------------------------------


def test_generator_function_is_wrapped_and_read_again_by_each_trial() -> None:
    x, y = arrays()
    calls = {"iterators": 0, "yields": 0}

    def examples() -> Iterator[tuple[np.ndarray, np.int32]]:
        calls["iterators"] += 1
        for i in range(COUNT):
            calls["yields"] += 1
            yield x[i], y[i]

    result = tune(examples, {"batch_size": [32, 64]})
    assert result.best is not None
    assert {c.feed for c in ran(result)} == {"pipeline"}
    assert {c.batch_size for c in ran(result)} == {32, 64}
    assert "generator function of single examples" in note(result, "data:")
    assert "256 examples (counted)" in note(result, "data:")
    # the first element (the signature) and one counting pass, then the trials' reads
    assert calls["iterators"] > 2 and calls["yields"] > 1 + COUNT + 32


# --- keras.utils.PyDataset --------------------------------------------------------------------


def test_pydataset_is_fit_directly_at_its_own_batch_size() -> None:
    import keras

    x, y = arrays()

    class Batches(keras.utils.PyDataset):
        def __init__(self) -> None:
            super().__init__()
            self.reads = 0

        def __len__(self) -> int:
            return COUNT // 32

        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
            self.reads += 1
            rows = slice(32 * index, 32 * (index + 1))
            return x[rows], y[rows]

    batches = Batches()
    space = {"batch_size": [64, 128], "steps_per_execution": [1, 2], "prefetch": ["auto", 1]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tune(batches, space)
    assert result.best is not None
    assert {(c.batch_size, c.feed) for c in ran(result)} == {(32, "pipeline")}
    assert {c.steps_per_execution for c in ran(result)} == {1, 2}  # still searched
    assert {t.config.prefetch for t in result.trials} == {"auto"}
    assert "batch_size fixed to the PyDataset's 32" in note(result, "batch_size fixed")
    note(result, "prefetch not tried")
    # a timed sample is longer than one pass: fit read it repeated and never ran out of data
    assert batches.reads > 2 * len(batches)
    assert not [w for w in caught if "ran out of data" in str(w.message)]


# --- refused before anything is built ---------------------------------------------------------


def never_built() -> Any:
    raise AssertionError("model_fn must not be called for data that is refused")


def test_a_generator_object_is_refused_with_the_fix() -> None:
    def examples() -> Iterator[tuple[int, int]]:
        yield 1, 2

    with pytest.raises(TuneError, match="can be read only once") as info:
        tfaccel.tuning.tune(never_built, examples(), BUDGET_S, SPACE, **FAST)
    assert "data=make_examples, not data=make_examples()" in str(info.value)


@pytest.mark.parametrize("data", ["train.csv", 42, {1, 2}, [np.zeros((4, 8))]])
def test_an_unsupported_type_is_refused(data: Any) -> None:
    with pytest.raises(TuneError, match="not a pair") as info:
        tfaccel.tuning.tune(never_built, data, BUDGET_S, SPACE, **FAST)
    text = str(info.value)
    assert "tf.data.Dataset" in text and "PyDataset" in text and "Fix:" in text


def test_dataset_elements_that_are_not_pairs_are_refused() -> None:
    import tensorflow as tf

    features_only = tf.data.Dataset.from_tensor_slices(arrays()[0])
    with pytest.raises(TuneError, match=r"not \(x, y\) pairs"):
        tfaccel.tuning.tune(never_built, features_only, BUDGET_S, SPACE, **FAST)


def test_numpy_feed_only_with_a_dataset_is_refused() -> None:
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(arrays())
    with pytest.raises(TuneError, match="numpy feed cannot read a dataset"):
        tune(dataset, {"feed": ["numpy"]}, batched=False)


def test_threads_need_array_data_in_a_script(tmp_path: Any) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import numpy as np\n"
        "def model_fn():\n"
        "    raise AssertionError('not built: the space is refused first')\n"
        "def data():\n"
        "    for i in range(8):\n"
        "        yield np.zeros(8, 'float32'), np.int32(0)\n"
    )
    with pytest.raises(SpaceError, match="with a generator as the training data"):
        tfaccel.tuning.tune_script(script, BUDGET_S, {"threads": [None, 1]}, **FAST)
