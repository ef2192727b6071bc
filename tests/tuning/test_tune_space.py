"""The search space: parsing, checking and the simplicity order (the precisions the hardware
runs fast are the inventory's rule, tested in test_inventory.py)."""

from __future__ import annotations

import pytest

from tfaccel.tuning import DEFAULT_SPACE, Config, SpaceError, parse_space, simplicity
from tfaccel.tuning.space import parse_space_text


def test_defaults_fill_the_keys_left_out() -> None:
    space = parse_space({"batch_size": [256, 32, 32]})
    assert space.batch_size == (32, 256)  # de-duplicated, simplest (smallest) first
    assert space.precision == "auto" and space.jit == (False, True)
    assert space.feed == ("numpy", "pipeline") and space.threads == (None,)
    assert parse_space(None) == parse_space(DEFAULT_SPACE)


def test_scalars_become_one_value_lists() -> None:
    space = parse_space({"jit": True, "precision": "mixed_bfloat16", "threads": (2, 1)})
    assert space.jit == (True,)
    assert space.precision == ("mixed_bfloat16",)
    assert space.threads == ((2, 1),)


def test_unknown_key_is_a_clear_error() -> None:
    with pytest.raises(SpaceError) as info:
        parse_space({"batchsize": [32]})
    text = str(info.value)
    assert "unknown key 'batchsize'" in text and "rename it to 'batch_size'" in text
    assert "batch_size, precision, jit, steps_per_execution, feed" in text


@pytest.mark.parametrize(
    ("space", "fragment"),
    [
        ({"batch_size": [0]}, "positive integers"),
        ({"batch_size": [True]}, "positive integers"),
        ({"precision": ["fp16"]}, "mixed_float16"),
        ({"jit": ["yes"]}, "True or False"),
        ({"feed": ["tfdata"]}, "numpy, pipeline"),
        ({"cache": [None]}, "cache file path"),
        ({"prefetch": [-1]}, "integer >= 0"),
        ({"num_parallel_calls": [0]}, "integer >= 1"),
        ({"threads": [0]}, "(intra, inter)"),
        ({"jit": []}, "no value for 'jit'"),
    ],
)
def test_bad_values_are_clear_errors(space: dict[str, object], fragment: str) -> None:
    with pytest.raises(SpaceError) as info:
        parse_space(space)
    assert fragment in str(info.value)
    assert "Fix:" in str(info.value)


def test_space_text_from_the_command_line() -> None:
    parsed = parse_space_text(
        [
            "batch_size=32,256",
            "jit=off,on",
            "precision=auto",
            "threads=default,2:1,4",
            "prefetch=auto,1,none",
            "cache=auto,off,/tmp/cache",
        ]
    )
    assert parsed == {
        "batch_size": [32, 256],
        "jit": [False, True],
        "precision": "auto",
        "threads": [None, (2, 1), 4],
        "prefetch": ["auto", 1, None],
        "cache": ["auto", False, "/tmp/cache"],
    }
    space = parse_space(parsed)
    assert space.threads == (None, (2, 1), (4, None))


@pytest.mark.parametrize("item", ["batch_size", "=32", "jit="])
def test_space_text_needs_key_equals_values(item: str) -> None:
    with pytest.raises(SpaceError, match="KEY=VALUES"):
        parse_space_text([item])


def test_space_text_rejects_a_repeated_key() -> None:
    with pytest.raises(SpaceError, match="given twice"):
        parse_space_text(["jit=on", "jit=off"])


def test_simplicity_order() -> None:
    """float32 < mixed, XLA off < on, numpy < pipeline, default knobs < changed, smaller batch."""
    order = [
        Config(32),
        Config(256),
        Config(32, feed="pipeline"),
        Config(32, feed="pipeline", prefetch=1),
        Config(32, jit=True),
        Config(32, precision="mixed_bfloat16"),
        Config(32, precision="mixed_float16"),
    ]
    assert sorted(reversed(order), key=simplicity) == order
    assert simplicity(Config(32, threads=(2, 1))) > simplicity(Config(32))


def test_variants_are_one_setting_away() -> None:
    space = parse_space({"jit": [False, True], "prefetch": ["auto", 1], "cache": ["auto", False]})
    leader = space.base(256, "mixed_bfloat16", "pipeline")
    variants = space.variants(leader)
    assert Config(256, "mixed_bfloat16", True, "pipeline") in variants
    assert Config(256, "mixed_bfloat16", False, "pipeline", prefetch=1) in variants
    assert Config(256, "mixed_bfloat16", False, "pipeline", cache=False) in variants
    spe = Config(256, "mixed_bfloat16", False, "pipeline", steps_per_execution=8)
    assert spe in variants and spe.label().endswith("spe=8")  # the default space's 1 and 8
    assert len(variants) == 4
    numpy_leader = space.base(256, "float32", "numpy")
    assert space.variants(numpy_leader) == [  # no knobs without the pipeline
        Config(256, jit=True),
        Config(256, steps_per_execution=8),
    ]


def test_steps_per_execution_values_are_checked() -> None:
    assert parse_space({"steps_per_execution": [8, 1, 8]}).steps_per_execution == (1, 8)
    for bad in (0, -1, 2.5, True, "many"):
        with pytest.raises(SpaceError, match="steps_per_execution"):
            parse_space({"steps_per_execution": bad})
    assert simplicity(Config(32, steps_per_execution=8)) > simplicity(Config(32))


def test_config_round_trips_through_json() -> None:
    config = Config(128, "mixed_bfloat16", True, "pipeline", prefetch=1, threads=(2, None))
    assert Config.from_dict(config.to_dict()) == config
    assert config.label() == "bs128 mixed_bfloat16 pipeline xla=on prefetch=1 threads=2"
