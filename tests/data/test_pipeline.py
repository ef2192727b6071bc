"""``tfaccel.data.pipeline``: the options it chooses (and says why), order with a seed, the cache
decision, vectorised map, every kind of source, and clear errors. In-process TensorFlow."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import tfaccel.data  # noqa: E402
from tfaccel.core.errors import UsageError  # noqa: E402

pipeline_module = sys.modules["tfaccel.data.pipeline"]


def _arrays(n: int = 100) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    return x, np.arange(n, dtype=np.int64)


def _labels(ds: Any) -> list[int]:
    return [int(v) for batch in ds for v in batch[1].numpy()]


def test_arrays_choices_are_recorded_with_reasons() -> None:
    ds = tfaccel.data.pipeline(_arrays(), 8, seed=1, deterministic=True)
    info = tfaccel.data.describe(ds)
    assert info.source == "arrays" and info.elements == 100 and info.batch_size == 8
    assert info["cache"].value == "off" and "already in memory" in info["cache"].reason
    assert info["shuffle"].value == "buffer 100" and "full shuffle" in info["shuffle"].reason
    assert info["prefetch"].value == "AUTOTUNE"
    assert info["map"].value == "none"
    assert info["deterministic"].reason == "the same order every run"
    assert info["device"].value == "none"
    assert [c.option for c in info.choices] == [
        "source",
        "cache",
        "shuffle",
        "map",
        "batch",
        "deterministic",
        "prefetch",
        "device",
    ]
    assert "tfaccel.data.pipeline: arrays, 100 elements, batch 8" in str(info)
    assert info.to_dict()["choices"][1]["option"] == "cache"


def test_every_example_comes_once_per_epoch_in_batches() -> None:
    ds = tfaccel.data.pipeline(_arrays(), 8, seed=0)
    labels = _labels(ds)
    assert sorted(labels) == list(range(100)) and labels != list(range(100))
    assert [len(b[1]) for b in ds][-1] == 4  # the last batch is kept
    dropped = tfaccel.data.pipeline(_arrays(), 8, seed=0, drop_remainder=True)
    assert all(len(b[1]) == 8 for b in dropped)


def test_same_seed_gives_the_same_order_every_time() -> None:
    first = _labels(tfaccel.data.pipeline(_arrays(), 8, seed=3, deterministic=True))
    second = _labels(tfaccel.data.pipeline(_arrays(), 8, seed=3, deterministic=True))
    other = _labels(tfaccel.data.pipeline(_arrays(), 8, seed=4, deterministic=True))
    assert first == second and first != other


def test_no_shuffle_keeps_the_order() -> None:
    ds = tfaccel.data.pipeline(_arrays(), 10, shuffle=False)
    assert _labels(ds) == list(range(100))
    assert tfaccel.data.describe(ds)["shuffle"].value == "off"


def test_unseeded_deterministic_says_the_order_changes_between_runs() -> None:
    info = tfaccel.data.describe(tfaccel.data.pipeline(_arrays(), 8, deterministic=True))
    assert "pass seed=" in info["deterministic"].reason


def test_cache_is_chosen_when_the_estimate_fits_in_half_the_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = tf.data.Dataset.from_tensor_slices(_arrays())  # 100 x (16 + 8) bytes
    monkeypatch.setattr(pipeline_module, "available_memory_bytes", lambda: 10_000)
    info = tfaccel.data.describe(tfaccel.data.pipeline(source, 8))
    assert info["cache"].value == "memory" and "fits in half" in info["cache"].reason
    monkeypatch.setattr(pipeline_module, "available_memory_bytes", lambda: 4_000)
    info = tfaccel.data.describe(tfaccel.data.pipeline(source, 8))
    assert info["cache"].value == "off" and "more than half" in info["cache"].reason
    monkeypatch.setattr(pipeline_module, "available_memory_bytes", lambda: None)
    info = tfaccel.data.describe(tfaccel.data.pipeline(source, 8))
    assert info["cache"].value == "off" and "unknown" in info["cache"].reason


def test_cache_can_be_forced_or_written_to_a_file(tmp_path: Path) -> None:
    assert tfaccel.data.describe(tfaccel.data.pipeline(_arrays(), 8, cache=True))[
        "cache"
    ].value == ("memory")
    path = str(tmp_path / "cache")
    ds = tfaccel.data.pipeline(_arrays(), 8, cache=path, shuffle=False)
    assert _labels(ds) == list(range(100))
    assert tfaccel.data.describe(ds)["cache"].value == f"file {path}"


def test_generator_source_needs_a_signature_and_is_not_cached_by_default() -> None:
    def examples() -> Any:
        for i in range(10):
            yield np.full(3, i, np.float32), i

    signature = (tf.TensorSpec((3,), tf.float32), tf.TensorSpec((), tf.int64))
    ds = tfaccel.data.pipeline(examples, 4, output_signature=signature, shuffle=False)
    assert _labels(ds) == list(range(10))
    info = tfaccel.data.describe(ds)
    assert info.source == "generator" and info["cache"].value == "off"
    assert "length is unknown" in info["cache"].reason
    with pytest.raises(UsageError, match="output_signature"):
        tfaccel.data.pipeline(examples, 4)


def test_infinite_dataset_is_never_cached() -> None:
    source = tf.data.Dataset.from_tensor_slices(_arrays()).repeat()
    info = tfaccel.data.describe(tfaccel.data.pipeline(source, 8))
    assert info["cache"].value == "off" and "repeats forever" in info["cache"].reason
    assert info["shuffle"].value == "buffer 10000"


def test_elementwise_map_is_vectorised_and_equals_the_per_element_map() -> None:
    def scale(x: Any, y: Any) -> Any:
        return x * 2.0 + 1.0, y

    vectorised = tfaccel.data.pipeline(_arrays(), 8, map_fn=scale, shuffle=False)
    per_element = tfaccel.data.pipeline(_arrays(), 8, map_fn=scale, shuffle=False, vectorized=False)
    info = tfaccel.data.describe(vectorised)
    assert info["map"].value.startswith("after batch (vectorised)")
    assert "equals the per-element results" in info["map"].reason
    assert tfaccel.data.describe(per_element)["map"].value.startswith("per element")
    for a, b in zip(vectorised, per_element, strict=True):
        np.testing.assert_allclose(a[0].numpy(), b[0].numpy())
        np.testing.assert_array_equal(a[1].numpy(), b[1].numpy())


@pytest.mark.parametrize(
    ("map_fn", "reason"),
    [
        (lambda x, y: (x - tf.reduce_mean(x), y), "other values on a batch"),
        (lambda x, y: (tf.reshape(x, [-1]), y), "not the stacked per-element shape"),
        (lambda x, y: (x + tf.random.uniform(()), y), "other values on a batch"),
        (lambda x, y: (tf.reshape(x, [2, 2]), y), "fails on a batch"),
    ],
    ids=["per-example-mean", "flatten", "random", "fixed-reshape"],
)
def test_functions_that_differ_on_a_batch_run_per_element(map_fn: Any, reason: str) -> None:
    info = tfaccel.data.describe(tfaccel.data.pipeline(_arrays(), 8, map_fn=map_fn))
    assert info["map"].value.startswith("per element")
    assert reason in info["map"].reason


def test_variable_shapes_are_not_batched_before_the_map() -> None:
    ragged = tf.data.Dataset.range(1, 9).map(lambda n: tf.ones([n]))
    ds = tfaccel.data.pipeline(ragged, 4, map_fn=lambda v: tf.reduce_sum(v), shuffle=False)
    info = tfaccel.data.describe(ds)
    assert info["map"].value.startswith("per element") and "vary" in info["map"].reason
    assert [float(v) for b in ds for v in b.numpy()] == [float(n) for n in range(1, 9)]


def test_explicit_parallelism_and_prefetch() -> None:
    ds = tfaccel.data.pipeline(
        _arrays(), 8, map_fn=lambda x, y: (x, y), num_parallel_calls=2, prefetch=3
    )
    info = tfaccel.data.describe(ds)
    assert "parallel 2" in info["map"].value and info["prefetch"].value == "3"
    off = tfaccel.data.describe(tfaccel.data.pipeline(_arrays(), 8, prefetch=0))
    assert off["prefetch"].value == "off"


def test_repeat_makes_an_endless_dataset() -> None:
    ds = tfaccel.data.pipeline(_arrays(), 8, repeat=True)
    assert int(ds.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
    twice = tfaccel.data.pipeline(_arrays(), 10, repeat=2, shuffle=False)
    assert len(_labels(twice)) == 200


def test_dict_features(tmp_path: Path) -> None:
    x, y = _arrays()
    ds = tfaccel.data.pipeline(({"pixels": x, "extra": y}, y), 10, shuffle=False)
    features, labels = next(iter(ds))
    assert set(features) == {"pixels", "extra"} and features["pixels"].shape == (10, 4)
    assert labels.numpy().tolist() == list(range(10))


def test_tfrecord_files(tmp_path: Path) -> None:
    paths = []
    for shard in range(2):
        path = tmp_path / f"part-{shard}.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as writer:
            for i in range(shard * 5, shard * 5 + 5):
                feature = {"v": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
        paths.append(str(path))
    spec = {"v": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record: Any) -> Any:
        return tf.io.parse_single_example(record, spec)["v"]

    ds = tfaccel.data.pipeline(paths, 4, map_fn=parse, seed=0)
    assert sorted(int(v) for b in ds for v in b.numpy()) == list(range(10))
    info = tfaccel.data.describe(ds)
    assert info.source == "tfrecord files"
    assert info["cache"].value == "memory"  # a few hundred bytes on disk
    assert info["map"].value.startswith("per element")  # parse_single_example needs a scalar


def test_image_files_with_labels(tmp_path: Path) -> None:
    paths = []
    for i in range(6):
        path = tmp_path / f"img{i}.png"
        pixels = np.full((5, 7, 3), i * 10, np.uint8)
        path.write_bytes(tf.io.encode_png(pixels).numpy())
        paths.append(str(path))
    ds = tfaccel.data.pipeline((paths, np.arange(6)), 3, shuffle=False)
    images, labels = next(iter(ds))
    assert images.dtype == tf.uint8 and images.shape == (3, 5, 7, 3)
    assert labels.numpy().tolist() == [0, 1, 2] and int(images[2, 0, 0, 0]) == 20
    info = tfaccel.data.describe(ds)
    assert (
        info.source == "image files" and info.element_bytes == 5 * 7 * 3 + 8
    )  # image + int64 label


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tfaccel.data.pipeline(_arrays(), 0), "invalid batch_size"),
        (lambda: tfaccel.data.pipeline(_arrays(), 8, cache=3), "invalid cache"),  # type: ignore[arg-type]
        (lambda: tfaccel.data.pipeline(_arrays(), 8, prefetch=-1), "invalid prefetch"),
        (
            lambda: tfaccel.data.pipeline(_arrays(), 8, num_parallel_calls=0),
            "invalid num_parallel_calls",
        ),
        (lambda: tfaccel.data.pipeline((np.zeros(3), np.zeros(4)), 2), "same number"),
        (lambda: tfaccel.data.pipeline(["missing.tfrecord"], 2), "do not exist"),
        (lambda: tfaccel.data.pipeline([object()], 2), "cannot use this source"),
        (lambda: tfaccel.data.pipeline(_arrays(), 8, device="TPU:0"), "invalid device"),
        (lambda: tfaccel.data.pipeline(_arrays(), 8, device="GPU:7"), "does not see that GPU"),
    ],
    ids=[
        "batch",
        "cache",
        "prefetch",
        "parallel",
        "lengths",
        "missing-file",
        "object",
        "device",
        "no-gpu",
    ],
)
def test_bad_arguments_say_what_and_how_to_fix(call: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        call()
    assert caught.value.fix


def test_mixed_file_kinds_are_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a.tfrecord", tmp_path / "b.csv"
    a.write_bytes(b"")
    b.write_text("1,2\n")
    with pytest.raises(UsageError, match="one kind of file"):
        tfaccel.data.pipeline([str(a), str(b)], 2)


def test_cpu_device_adds_nothing() -> None:
    info = tfaccel.data.describe(tfaccel.data.pipeline(_arrays(), 8, device="CPU:0"))
    assert info["device"].value == "none" and "host" in info["device"].reason


def test_describe_refuses_other_datasets() -> None:
    with pytest.raises(UsageError, match=r"not built by tfaccel\.data\.pipeline"):
        tfaccel.data.describe(tf.data.Dataset.range(3))


def test_accelerator_database_is_still_shipped_in_the_package() -> None:
    from importlib import resources

    text = resources.files("tfaccel").joinpath("accelerators.csv").read_text("utf-8")
    assert text.splitlines()[0]


@pytest.mark.gpu
def test_device_prefetch_puts_batches_on_the_gpu() -> None:
    ds = tfaccel.data.pipeline(_arrays(), 8, device="GPU:0")
    assert tfaccel.data.describe(ds)["device"].value == "/device:GPU:0"
    x, _ = next(iter(ds))
    assert "GPU:0" in x.device
