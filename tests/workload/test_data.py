"""The one reader of the forms training data takes (``tfaccel.workload.data``), and the
callers that ask it: tune's data (``tuning.data.classify``) and profile's patched ``fit``."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tfaccel.tuning._errors import TuneError
from tfaccel.tuning.data import classify
from tfaccel.workload import data as forms

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")


class _Batches(keras.utils.PyDataset):
    def __len__(self) -> int:
        return 3

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((16, 4), "float32"), np.zeros((16, 1), "float32")


def _examples() -> Iterator[tuple[np.ndarray, np.ndarray]]:
    yield np.zeros(4, "float32"), np.zeros(1, "float32")


X = np.zeros((40, 4), "float32")
Y = np.zeros(40, "int64")


@pytest.mark.parametrize(
    ("make", "kind", "tune_kind"),
    [
        (lambda: X, "arrays", None),
        (lambda: (X, Y), "arrays", "arrays"),
        (lambda: {"a": X}, "dict", None),
        (lambda: tf.data.Dataset.from_tensor_slices((X, Y)).batch(8), "dataset", "dataset"),
        (lambda: _Batches(), "pydataset", "pydataset"),
        (lambda: _examples(), "generator", None),  # read once: tune refuses it
        (lambda: _examples, "other", "generator"),  # a generator function: tune calls it
    ],
)
def test_each_form_is_recognised_once_for_the_workload_and_tune(
    make: object, kind: str, tune_kind: str | None
) -> None:
    data = make()  # type: ignore[operator]
    assert forms.kind_of(data) == kind
    if tune_kind is not None:
        assert classify(data).kind == tune_kind
    elif kind == "generator":
        with pytest.raises(TuneError, match="generator object, which can be read only once"):
            classify(data)
    else:
        with pytest.raises(TuneError, match="not a pair"):
            classify(data)


def test_the_batch_dimension_of_arrays_and_of_element_specs() -> None:
    assert forms.leading_dim(X[:8]) == 8
    assert forms.leading_dim({"a": X[:5], "b": X[:5]}) == 5
    assert forms.leading_dim([X[:3]]) == 3
    batched = tf.data.Dataset.from_tensor_slices((X, Y)).batch(8, drop_remainder=True)
    assert forms.leading_dim(batched.element_spec[0]) == 8
    ragged = tf.data.Dataset.from_tensor_slices((X, Y)).batch(8)  # last batch smaller
    assert forms.leading_dim(ragged.element_spec[0]) is None
    unknown_rank = tf.TensorSpec(shape=None, dtype=tf.float32)
    assert forms.leading_dim(unknown_rank) is None
    assert forms.leading_dim(np.float32(1.0)) is None and forms.leading_dim("text") is None


def test_sized_and_spec_of() -> None:
    assert forms.sized(X) and forms.sized([1, 2]) and not forms.sized({"a": X})
    assert not forms.sized(_examples()) and not forms.sized(3)
    spec = forms.spec_of(np.zeros((2, 3), "float32"))
    assert spec == tf.TensorSpec((2, 3), tf.float32)
    assert forms.spec_of("word") == tf.TensorSpec((), tf.string)
