"""The batch-size memory search: pure, over an injected OOM boundary (no TensorFlow).

Lightning's batch-size finder overshoots and ignores the data set size; accelerate's
``find_executable_batch_size`` detects OOM by matching text and its decorator form dropped
``reduce_batch_size_fn`` untested. Here the search takes a callable and an ``is_oom`` predicate
and every case below runs it.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfaccel.tuning.batch import auto_batch_sizes, find_batch_size, is_oom_error


class FakeOom(Exception):
    """Stands for tf.errors.ResourceExhaustedError."""


def boundary(largest: int, log: list[int] | None = None):  # type: ignore[no-untyped-def]
    """A trial that fits up to ``largest`` examples and raises FakeOom above."""

    def try_batch(size: int) -> None:
        if log is not None:
            log.append(size)
        if size > largest:
            raise FakeOom(f"OOM when allocating tensor with shape[{size},32,32,32]")

    return try_batch


def is_fake_oom(exc: BaseException) -> bool:
    return isinstance(exc, FakeOom)


def test_grows_then_bisects_and_keeps_the_margin() -> None:
    tried: list[int] = []
    found = find_batch_size(
        boundary(100, tried), dataset_size=50_000, margin=0.1, is_oom=is_fake_oom
    )
    assert tried[:3] == [32, 64, 128]  # powers of two until the first OOM
    assert found.largest_fit == 96  # bisected on multiples of 8 between 64 and 128
    assert found.first_oom == 104
    assert found.result == 80  # 96 * 0.9 = 86.4 -> 86 -> a multiple of 8
    assert found.boundary_found
    assert all(size <= 128 for size in tried)


def test_exact_boundary_with_granularity_one() -> None:
    found = find_batch_size(
        boundary(77), dataset_size=1000, margin=0.0, granularity=1, is_oom=is_fake_oom
    )
    assert (found.largest_fit, found.first_oom, found.result) == (77, 78, 77)


def test_never_beyond_the_dataset_size() -> None:
    tried: list[int] = []
    found = find_batch_size(boundary(10**9, tried), dataset_size=300, is_oom=is_fake_oom)
    assert max(tried) == 300 and found.result == 300 and found.limit == 300
    assert not found.boundary_found  # nothing ran out of memory: no margin taken


def test_never_beyond_the_cap() -> None:
    tried: list[int] = []
    found = find_batch_size(boundary(10**9, tried), dataset_size=10**6, cap=500, is_oom=is_fake_oom)
    assert tried == [32, 64, 128, 256, 500]
    assert found.result == 500


def test_start_larger_than_the_data_is_clamped() -> None:
    tried: list[int] = []
    found = find_batch_size(boundary(10**9, tried), dataset_size=20, start=32, is_oom=is_fake_oom)
    assert tried == [20] and found.result == 20


def test_when_the_first_size_does_not_fit_it_searches_below() -> None:
    found = find_batch_size(boundary(5), dataset_size=1000, margin=0.0, is_oom=is_fake_oom)
    assert found.largest_fit == 5 and found.result == 5


def test_nothing_fits() -> None:
    found = find_batch_size(boundary(0), dataset_size=1000, is_oom=is_fake_oom)
    assert found.largest_fit == 0 and found.result == 0 and found.first_oom == 1


def test_other_errors_propagate_untouched() -> None:
    def broken(size: int) -> None:
        if size >= 64:
            raise ValueError("shapes do not match")

    with pytest.raises(ValueError, match="shapes do not match"):
        find_batch_size(broken, dataset_size=1000, is_oom=is_fake_oom)


def test_oom_is_classified_by_the_predicate_not_the_message() -> None:
    def says_oom(size: int) -> None:
        raise RuntimeError("CUDA out of memory")  # the text says OOM, the type does not

    with pytest.raises(RuntimeError):
        find_batch_size(says_oom, dataset_size=1000, is_oom=is_fake_oom)


def test_default_predicate_takes_memory_error() -> None:
    def host_oom(size: int) -> None:
        if size > 64:
            raise MemoryError

    found = find_batch_size(host_oom, dataset_size=1000, margin=0.0)
    assert found.largest_fit == 64
    assert is_oom_error(MemoryError()) and not is_oom_error(ValueError("out of memory"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dataset_size": 0},
        {"dataset_size": 10, "cap": 0},
        {"dataset_size": 10, "start": 0},
        {"dataset_size": 10, "margin": 1.0},
        {"dataset_size": 10, "margin": -0.1},
        {"dataset_size": 10, "granularity": 0},
    ],
)
def test_bad_arguments(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        find_batch_size(boundary(5), is_oom=is_fake_oom, **kwargs)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    largest=st.integers(0, 5000),
    dataset_size=st.integers(1, 5000),
    cap=st.one_of(st.none(), st.integers(1, 5000)),
    start=st.integers(1, 64),
    margin=st.floats(0.0, 0.5),
    granularity=st.sampled_from([1, 8]),
)
def test_property_largest_fit_margin_and_limits(
    largest: int, dataset_size: int, cap: int | None, start: int, margin: float, granularity: int
) -> None:
    tried: list[int] = []
    found = find_batch_size(
        boundary(largest, tried),
        dataset_size=dataset_size,
        cap=cap,
        start=start,
        margin=margin,
        granularity=granularity,
        is_oom=is_fake_oom,
    )
    limit = min(dataset_size, cap or dataset_size)
    assert found.limit == limit
    assert all(1 <= size <= limit for size in tried)  # never beyond the data or the cap
    assert len(tried) == len(set(tried))  # never the same size twice
    assert len(tried) <= 2 * math.log2(limit) + 4
    assert found.largest_fit <= largest  # what it reports as fitting did fit
    assert 0 <= found.result <= found.largest_fit
    if largest >= limit:
        assert found.result == found.largest_fit == limit and found.first_oom is None
    else:
        assert found.first_oom is not None and found.first_oom > largest
        assert largest - found.largest_fit < granularity  # within one bisection step
        if found.largest_fit:
            expected = max(1, math.floor(found.largest_fit * (1 - margin)))
            if expected >= granularity:
                expected -= expected % granularity
            assert found.result == expected


def test_auto_batch_sizes() -> None:
    assert auto_batch_sizes(920) == (32, 64, 128, 256, 512, 920)
    assert auto_batch_sizes(256) == (32, 64, 128, 256)
    assert auto_batch_sizes(20) == (20,)
    assert auto_batch_sizes(0) == ()


# --- starting at the planned largest batch ----------------------------------------------------


@pytest.mark.parametrize("planned", [80, 100, 120])
def test_a_planned_start_within_the_plans_error_takes_fewer_trials(planned: int) -> None:
    grown: list[int] = []
    started: list[int] = []
    base = find_batch_size(boundary(100, grown), dataset_size=50_000, is_oom=is_fake_oom)
    found = find_batch_size(
        boundary(100, started), dataset_size=50_000, is_oom=is_fake_oom, planned=planned
    )
    assert started[0] == planned - planned % 8  # the first trial is the plan, on the grid
    assert len(started) < len(grown)
    assert found.largest_fit >= base.largest_fit and found.largest_fit <= 100
    assert found.first_oom is not None and found.first_oom > 100


def test_a_planned_start_beyond_the_cap_tries_the_cap_once() -> None:
    tried: list[int] = []
    found = find_batch_size(
        boundary(10**9, tried), dataset_size=10**6, cap=500, is_oom=is_fake_oom, planned=10**7
    )
    assert tried == [500]  # the limit itself, one trial: 32, 64, 128, 256, 500 without the plan
    assert found.result == 500 and not found.boundary_found


def test_a_plan_far_beyond_the_limit_is_trusted_when_asked_and_nothing_is_tried() -> None:
    tried: list[int] = []
    found = find_batch_size(
        boundary(10**9, tried), dataset_size=512, is_oom=is_fake_oom, planned=1024, trust_plan=2
    )
    assert tried == [] and found.planned_only and found.result == 512
    assert not found.boundary_found and found.to_dict()["planned_only"] is True
    # below the factor the limit is tried as before
    near = find_batch_size(
        boundary(10**9, tried), dataset_size=512, is_oom=is_fake_oom, planned=1000, trust_plan=2
    )
    assert tried == [512] and not near.planned_only and near.result == 512


def test_a_planned_start_far_too_high_still_finds_the_boundary() -> None:
    tried: list[int] = []
    found = find_batch_size(
        boundary(5, tried), dataset_size=10**6, is_oom=is_fake_oom, planned=4096
    )
    assert found.largest_fit == 5 and found.first_oom == 6
    assert tried[0] == 4096 and tried[1] == math.floor(4096 / 1.25)  # down by the plan's error


def test_a_planned_start_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="planned"):
        find_batch_size(boundary(10), dataset_size=100, planned=0, is_oom=is_fake_oom)


@settings(max_examples=200, deadline=None)
@given(
    largest=st.integers(0, 5000),
    planned=st.integers(1, 20_000),
    granularity=st.sampled_from([1, 8]),
)
def test_any_planned_start_brackets_the_true_boundary(
    largest: int, planned: int, granularity: int
) -> None:
    found = find_batch_size(
        boundary(largest),
        dataset_size=10_000,
        granularity=granularity,
        is_oom=is_fake_oom,
        planned=planned,
    )
    assert found.largest_fit <= largest
    if largest >= 10_000:
        assert found.largest_fit == 10_000 and found.first_oom is None
    else:
        assert found.first_oom is not None and found.first_oom > largest
        # the gap left is one grid step at most (or the integers below the first grid step)
        assert found.first_oom - found.largest_fit <= max(granularity, 1) or (
            found.largest_fit == 0 and found.first_oom <= granularity
        )
