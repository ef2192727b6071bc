"""Training data: the CIFAR-10 reader on tiny pickles written here (valid, truncated, wrong
shape, bad labels, hostile), the bundled digits' split, synthetic images."""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tfaccel.bench import datasets
from tfaccel.bench.datasets import CIFAR10_FILES, DataError, digits_split, load_cifar10, synthetic

PER_BATCH = 8


def _batch(n: int = PER_BATCH, *, seed: int = 0, **override: Any) -> dict[bytes, Any]:
    rng = np.random.default_rng(seed)
    batch: dict[bytes, Any] = {
        b"batch_label": b"training batch",
        b"labels": [int(v) for v in rng.integers(0, 10, n)],
        b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
        b"filenames": [b"x.png"] * n,
    }
    batch.update({key.encode(): value for key, value in override.items()})
    return batch


def _write_dir(root: Path, **replace: Any) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(CIFAR10_FILES):
        content = replace.get(name, _batch(seed=i))
        data = content if isinstance(content, bytes) else pickle.dumps(content, protocol=2)
        (root / name).write_bytes(data)
    return root


def test_valid_batches_load_as_images(tmp_path: Path) -> None:
    root = _write_dir(tmp_path / "cifar")
    data = load_cifar10(root, images_per_batch=PER_BATCH)
    assert data.train.x.shape == (5 * PER_BATCH, 32, 32, 3)
    assert (
        data.train.x.dtype == np.float32 and 0.0 <= data.train.x.min() <= data.train.x.max() <= 1.0
    )
    assert data.test.y.shape == (PER_BATCH,) and data.test.y.dtype == np.int32
    # channel-major rows become HWC: pixel (0, 0) of image 0 is (R, G, B) = data[0, [0, 1024, 2048]]
    raw = pickle.loads((root / "data_batch_1").read_bytes())[b"data"]
    np.testing.assert_allclose(data.train.x[0, 0, 0] * 255, raw[0, [0, 1024, 2048]], atol=1e-3)


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        ({"data_batch_3": b""}, "corrupt or not a CIFAR-10"),
        ({"data_batch_2": "truncated"}, "truncated"),
        ({"test_batch": _batch(data=np.zeros((PER_BATCH, 1024), np.uint8))}, "wrong shape"),
        ({"test_batch": _batch(data=np.zeros((PER_BATCH, 3072), np.float32))}, "wrong shape"),
        ({"data_batch_1": _batch(labels=[10] * PER_BATCH)}, "outside 0-9"),
        ({"data_batch_1": _batch(labels=[1] * (PER_BATCH - 1))}, "wrong count"),
        ({"data_batch_4": [1, 2, 3]}, "does not hold a dict"),
        ({"data_batch_5": {b"labels": [0]}}, "lacks 'data'"),
    ],
)
def test_bad_batches_are_clear_errors(
    tmp_path: Path, replace: dict[str, Any], message: str
) -> None:
    if replace.get("data_batch_2") == "truncated":
        replace = {"data_batch_2": pickle.dumps(_batch(), protocol=2)[:5000]}
    root = _write_dir(tmp_path / "cifar", **replace)
    with pytest.raises(DataError, match=message) as info:
        load_cifar10(root, images_per_batch=PER_BATCH)
    assert info.value.fix and "cifar-10-python.tar.gz" in info.value.fix


def test_missing_directory_and_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_cifar10(tmp_path / "nope")
    root = _write_dir(tmp_path / "cifar")
    (root / "test_batch").unlink()
    with pytest.raises(DataError, match=r"'.*test_batch' is missing"):
        load_cifar10(root, images_per_batch=PER_BATCH)


def test_real_size_is_required_by_default(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"\(10000, 3072\)"):
        load_cifar10(_write_dir(tmp_path / "cifar"))


class _Hostile:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("echo pwned > /dev/null",))


def test_a_pickle_that_runs_code_is_refused(tmp_path: Path) -> None:
    root = _write_dir(tmp_path / "cifar", data_batch_1={b"data": _Hostile(), b"labels": []})
    with pytest.raises(DataError, match="refusing to load"):
        load_cifar10(root, images_per_batch=PER_BATCH)


def test_digits_split_is_stratified_and_scaled() -> None:
    train, test = digits_split()
    assert len(train) + len(test) == 1797
    assert 0.24 < len(test) / 1797 < 0.26
    assert set(np.unique(test.y)) == set(range(10))
    assert train.x.shape[1:] == (8, 8) and train.x.max() == 1.0 and train.x.min() == 0.0


def test_the_bundled_digits_are_the_uci_digits() -> None:
    """The class counts of the UCI set (178, 182, 177, 183, 181, 182, 181, 179, 174, 180: its
    documented distribution) and its pixel counts 0-16, as float32 images and int32 labels."""
    train, test = digits_split()
    x, y = np.concatenate([train.x, test.x]), np.concatenate([train.y, test.y])
    assert np.bincount(y).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert train.x.dtype == np.float32 and train.y.dtype == np.int32
    assert {round(v * 16) for v in np.unique(x)} == set(range(17))  # pixel counts 0-16


@pytest.mark.parametrize(
    ("content", "said"),
    [(b"not gzip", "cannot be read"), (gzip.compress(b"1,2,3\n4,5,6\n"), "is not the digits")],
)
def test_a_damaged_digits_file_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, said: str
) -> None:
    bad = tmp_path / "digits.csv.gz"
    bad.write_bytes(content)
    monkeypatch.setattr(datasets, "DIGITS_FILE", bad)
    with pytest.raises(DataError, match=said) as e:
        digits_split()
    assert "reinstall tfaccel" in str(e.value.fix)


def test_synthetic_is_deterministic() -> None:
    a, b = synthetic(16, (4, 4, 3)), synthetic(16, (4, 4, 3))
    np.testing.assert_array_equal(a.x, b.x)
    assert a.x.dtype == np.float32 and a.y.dtype == np.int32 and len(a) == 16
