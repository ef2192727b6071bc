"""Training data for the benchmarks: synthetic images, CIFAR-10 from disk, the UCI digits.

NumPy only (no TensorFlow). The CIFAR-10 reader takes the "python version" of the data set
(``data_batch_1`` .. ``data_batch_5`` and ``test_batch``, each a pickled dict with ``data``, a
uint8 array of N x 3072 pixels, and ``labels``, N integers 0-9) and checks every property it
relies on. It unpickles with an allow-list of classes, so a crafted file cannot run code.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tfaccel.core.errors import UsageError
from tfaccel.core.units import fmt_bytes

__all__ = [
    "CIFAR10_FILES",
    "DIGITS_FILE",
    "CifarData",
    "DataError",
    "ImageData",
    "check_synthetic_memory",
    "digits_split",
    "load_cifar10",
    "synthetic",
    "synthetic_bytes",
]

MEMORY_SHARE = 0.5
"""Share of the available memory synthetic data may take: training also needs room for
TensorFlow, the model and the input pipeline's copies."""

CIFAR10_FILES: tuple[str, ...] = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch")
CIFAR10_IMAGES_PER_BATCH = 10_000
_PIXELS = 32 * 32 * 3
_FIX = (
    "download and extract the python version (cifar-10-python.tar.gz from "
    "https://www.cs.toronto.edu/~kriz/cifar.html) again, then pass --data cifar10:DIR "
    "with the extracted cifar-10-batches-py directory"
)


class DataError(UsageError):
    """A data set given with ``--data`` cannot be used."""


@dataclass
class ImageData:
    """Images (N x H x W x C float32 in [0, 1], or N x ... for other shapes) and int32 labels."""

    x: np.ndarray
    y: np.ndarray
    source: str

    def __len__(self) -> int:
        return int(self.x.shape[0])


@dataclass
class CifarData:
    """CIFAR-10: 50,000 training and 10,000 test images, 32x32x3, float32 in [0, 1]."""

    train: ImageData
    test: ImageData


def synthetic(count: int, shape: tuple[int, ...], classes: int = 10, seed: int = 0) -> ImageData:
    """Random images in [0, 1) and random labels: enough to time training, nothing to learn.

    Args:
        count: number of examples.
        shape: shape of one example (e.g. (32, 32, 3)).
        classes: labels are drawn from 0 .. classes - 1.
        seed: random seed (same data every run).

    Raises:
        DataError: the arrays cannot be allocated (the message says how much they need).
    """
    rng = np.random.default_rng(seed)
    try:
        x = rng.random((count, *shape), dtype=np.float32)
        y = rng.integers(0, classes, size=count, dtype=np.int32)
    except (MemoryError, ValueError) as exc:
        raise DataError(
            f"The synthetic data set of {count:,} examples cannot be allocated",
            expected=f"{_size(synthetic_bytes(count, shape))} of free memory",
            received=f"{type(exc).__name__}: {str(exc)[:200]}",
            fix="ask for fewer examples, e.g. --data synthetic:10000",
        ) from None
    return ImageData(x=x, y=y, source=f"synthetic ({count} random examples)")


def synthetic_bytes(count: int, shape: tuple[int, ...]) -> int:
    """Bytes :func:`synthetic` allocates: float32 examples of ``shape`` and int32 labels."""
    pixels = 1
    for size in shape:
        pixels *= int(size)
    return count * (4 * pixels + 4)


def check_synthetic_memory(
    count: int,
    shapes: dict[str, tuple[int, ...]],
    available_bytes: int | None,
    *,
    spec: str,
) -> None:
    """Refuse, before anything is allocated, synthetic data that does not fit in memory.

    Args:
        count: examples per model.
        shapes: the input shape of each model the data is made for (each gets its own set).
        available_bytes: the memory available on this machine (None: not known, no check).
        spec: the ``--data`` value, for the message.

    Raises:
        DataError: the data sets need more than ``MEMORY_SHARE`` of the available memory;
            the message gives both sizes and the largest count that fits.
    """
    if available_bytes is None or available_bytes <= 0 or not shapes:
        return
    per_example = sum(synthetic_bytes(1, shape) for shape in shapes.values())
    needed = count * per_example
    allowed = int(available_bytes * MEMORY_SHARE)
    if needed <= allowed:
        return
    fits = allowed // per_example
    raise DataError(
        f"The synthetic data of {count:,} examples does not fit in this machine's memory: "
        f"it needs {_size(needed)}",
        expected=f"at most {_size(allowed)} ({MEMORY_SHARE:.0%} of the {_size(available_bytes)} "
        f"available), that is at most {fits:,} examples "
        f"({_size(per_example)} per example for {', '.join(shapes)})",
        received=f"--data {spec}",
        fix=f"pass --data synthetic:{max(fits, 1)} or fewer"
        if fits >= 1
        else "free some memory, or run fewer model benchmarks (--only)",
    )


def _size(n: int) -> str:
    return fmt_bytes(n)


class _SafeUnpickler(pickle.Unpickler):
    """Unpickles only what a CIFAR batch holds: builtins, NumPy arrays, encoded bytes."""

    ALLOWED: ClassVar[frozenset[tuple[str, str]]] = frozenset(
        {
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("_codecs", "encode"),  # bytes pickled by Python 3 with protocol 2
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _read_batch(path: Path, images_per_batch: int) -> tuple[np.ndarray, np.ndarray]:
    name = path.name
    if not path.is_file():
        raise DataError(
            f"The CIFAR-10 file {str(path)!r} is missing",
            expected="the files " + ", ".join(CIFAR10_FILES) + " in the directory",
            received="present: "
            + (", ".join(sorted(p.name for p in path.parent.iterdir())) or "nothing"),
            fix=_FIX,
        )
    try:
        raw = path.read_bytes()
        batch = _SafeUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except (
        OSError,
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        MemoryError,
    ) as exc:
        detail = (
            "truncated (ends early)"
            if isinstance(exc, EOFError)
            else str(exc) or type(exc).__name__
        )
        raise DataError(
            f"The CIFAR-10 file {name!r} is corrupt or not a CIFAR-10 python batch",
            expected="a pickled dict with 'data' and 'labels'",
            received=detail,
            fix=_FIX,
        ) from None
    if not isinstance(batch, dict):
        raise DataError(
            f"The CIFAR-10 file {name!r} does not hold a dict",
            expected="a pickled dict with 'data' and 'labels'",
            received=type(batch).__name__,
            fix=_FIX,
        )
    data = batch.get(b"data", batch.get("data"))
    labels = batch.get(b"labels", batch.get("labels"))
    if not isinstance(data, np.ndarray) or labels is None:
        raise DataError(
            f"The CIFAR-10 file {name!r} lacks 'data' or 'labels'",
            expected="keys 'data' (a uint8 array) and 'labels' (a list of integers)",
            received="keys " + ", ".join(repr(k) for k in batch),
            fix=_FIX,
        )
    if data.dtype != np.uint8 or data.shape != (images_per_batch, _PIXELS):
        raise DataError(
            f"The CIFAR-10 file {name!r} has pixel data of the wrong shape or type",
            expected=f"uint8 array of shape ({images_per_batch}, {_PIXELS})",
            received=f"{data.dtype} array of shape {tuple(data.shape)}",
            fix=_FIX,
        )
    try:
        label_array = np.asarray(labels)
    except (ValueError, TypeError):
        label_array = np.asarray([], dtype=np.int64)
    if label_array.shape != (images_per_batch,) or label_array.dtype.kind not in "iu":
        raise DataError(
            f"The CIFAR-10 file {name!r} has labels of the wrong count or type",
            expected=f"{images_per_batch} integers",
            received=f"{label_array.dtype} array of shape {tuple(label_array.shape)}",
            fix=_FIX,
        )
    if label_array.size and (label_array.min() < 0 or label_array.max() > 9):
        raise DataError(
            f"The CIFAR-10 file {name!r} has labels outside 0-9",
            expected="labels 0..9 (10 classes)",
            received=f"labels from {label_array.min()} to {label_array.max()}",
            fix=_FIX,
        )
    return data, label_array.astype(np.int32)


def _to_images(data: np.ndarray, labels: np.ndarray, source: str) -> ImageData:
    # CIFAR rows are 1024 red, 1024 green, 1024 blue values: N x C x H x W -> N x H x W x C.
    x = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).astype(np.float32) / 255.0
    return ImageData(x=x, y=labels, source=source)


def load_cifar10(
    directory: str | Path, *, images_per_batch: int = CIFAR10_IMAGES_PER_BATCH
) -> CifarData:
    """Read and validate the CIFAR-10 python batches in ``directory``.

    Args:
        directory: the extracted ``cifar-10-batches-py`` directory.
        images_per_batch: images each batch file must hold (10,000 for the real data set).

    Returns:
        The training batches 1-5 together and the test batch.

    Raises:
        DataError: missing directory or file, a corrupt or truncated pickle, pixel data of the
            wrong shape or type, labels of the wrong count or outside 0-9.
    """
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise DataError(
            f"The CIFAR-10 directory {str(root)!r} does not exist or is not a directory",
            expected="a directory holding " + ", ".join(CIFAR10_FILES),
            received=str(root),
            fix=_FIX,
        )
    train = [_read_batch(root / name, images_per_batch) for name in CIFAR10_FILES[:5]]
    test_data, test_labels = _read_batch(root / "test_batch", images_per_batch)
    source = f"CIFAR-10 from {root}"
    return CifarData(
        train=_to_images(
            np.concatenate([d for d, _ in train]), np.concatenate([y for _, y in train]), source
        ),
        test=_to_images(test_data, test_labels, source),
    )


DIGITS_FILE = Path(__file__).with_name("digits.csv.gz")
"""The UCI handwritten digits (E. Alpaydin, C. Kaynak, 1998; CC BY 4.0), the copy that
scikit-learn ships: 1,797 rows of 64 pixel counts (0-16) and the digit. Kept here so that the
convergence check needs no scikit-learn: with it installed, every ``import tensorflow`` (whose
Keras imports its scikit-learn wrapper) takes about a second longer."""


def digits_split(test_fraction: float = 0.25, seed: int = 0) -> tuple[ImageData, ImageData]:
    """The UCI handwritten digits (:data:`DIGITS_FILE`: 1,797 8x8 images, 10 classes), split
    train/test.

    Pixels are scaled from 0-16 to [0, 1]; the split is stratified and fixed by ``seed``.

    Raises:
        DataError: the bundled file is missing or not the digits (a damaged install).
    """
    import gzip

    try:
        with gzip.open(DIGITS_FILE, "rt", encoding="ascii") as f:
            rows = np.loadtxt(f, delimiter=",", dtype=np.float32)
    except (OSError, ValueError, EOFError) as e:
        raise DataError(
            f"the digits data set {DIGITS_FILE} cannot be read ({e})",
            expected="the gzip CSV installed with tfaccel: 1,797 rows of 65 numbers",
            received=str(e),
            fix="reinstall tfaccel: pip install --force-reinstall tfaccel",
        ) from None
    if rows.ndim != 2 or rows.shape[1] != 65:
        raise DataError(
            f"the digits data set {DIGITS_FILE} is not the digits",
            expected="rows of 64 pixel counts and the digit (65 numbers)",
            received=f"an array of shape {rows.shape}",
            fix="reinstall tfaccel: pip install --force-reinstall tfaccel",
        )
    x = (rows[:, :64] / 16.0).reshape(-1, 8, 8)
    y = rows[:, 64].astype(np.int32)
    rng = np.random.default_rng(seed)
    test_mask = np.zeros(len(y), dtype=bool)
    for label in np.unique(y):
        index = np.flatnonzero(y == label)
        rng.shuffle(index)
        test_mask[index[: round(len(index) * test_fraction)]] = True
    source = "UCI handwritten digits"
    return (
        ImageData(x[~test_mask], y[~test_mask], source),
        ImageData(x[test_mask], y[test_mask], source),
    )
