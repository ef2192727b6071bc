"""The tuner claims only what it measured: a precision or XLA setting that did not take effect
on the model is not timed, not claimed and not stored; a setting that was not searched gets no
verdict; a model_fn that returns one model object on every call is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tune_helpers import FakeClock, FakeRunner, dense_model, run_search

import tfaccel.tuning
from tfaccel.core.errors import UsageError
from tfaccel.store import ResultsStore
from tfaccel.tuning import Config, ModelReusedError, NotAppliedError
from tfaccel.tuning.result import TuneResult
from tfaccel.tuning.search import Trial
from tfaccel.tuning.space import parse_space
from tfaccel.tuning.trials import Realised, check_applied, realised

FAST = {"sample_s": 0.05, "final_rounds": 3, "progress": False}
ONE_BATCH = {"batch_size": [32], "feed": ["numpy"], "steps_per_execution": [1], "jit": [False]}


def float32_model_fn() -> Any:
    """Every layer fixes dtype="float32": the global policy changes nothing."""
    import keras

    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu", dtype="float32"),
            keras.layers.Dense(3, activation="softmax", dtype="float32"),
        ],
        name="fixed_net",
    )
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model


def tiny_data(count: int = 256) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((count, 8), dtype=np.float32), rng.integers(0, 3, count).astype(np.int32)


def test_a_precision_the_layers_override_is_not_measured_claimed_or_stored(
    tmp_path: Path,
) -> None:
    db = tmp_path / "results.sqlite"
    space = {**ONE_BATCH, "precision": ["float32", "mixed_bfloat16"]}
    result = tfaccel.tuning.tune(float32_model_fn, tiny_data(), 60, space, store=db, **FAST)
    bf16 = next(t for t in result.trials if t.config.precision == "mixed_bfloat16")
    assert bf16.status == "not applied" and not bf16.rung_samples
    assert "mixed_bfloat16 asked, the model computes in float32" in bf16.note
    assert result.best is not None and result.best.precision == "float32"
    settings = result.settings_searched()
    assert settings["precision"]["compared"] is False
    assert settings["precision"]["timed"] == ["float32"]
    text = str(result)
    assert "precision: not compared, only float32 was timed" in text
    assert "mixed_bfloat16 did not take effect" in text
    assert "XLA: not searched (kept off), no verdict" in text  # XLA was not in the space
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["settings"]["jit"]["compared"] is False
    assert doc["trials"][1]["status"] == "not applied"
    with ResultsStore(db) as store:
        (stored,) = store.results(result.run_id or -1)
    assert "precision" not in stored.config and "jit" not in stored.config
    assert "mixed_bfloat16" not in json.dumps(stored.config)


def test_a_model_fn_returning_one_model_object_is_refused() -> None:
    built = dense_model(8, "shared_net")
    space = {**ONE_BATCH, "batch_size": [16, 32], "precision": ["float32"]}
    with pytest.raises(ModelReusedError) as info:
        tfaccel.tuning.tune(lambda: built, tiny_data(), 60, space, store=False, **FAST)
    assert isinstance(info.value, UsageError)
    assert "model_fn must build a new model each call" in str(info.value)
    assert "shared_net" in str(info.value)


def test_the_trial_check_reads_the_precision_and_xla_the_model_has() -> None:
    model = float32_model_fn()
    found = realised(model)
    assert found == Realised({"float32": 1.0}, False)
    check_applied(Config(32, "float32"), found)
    with pytest.raises(NotAppliedError, match="its layers set their own dtype"):
        check_applied(Config(32, "mixed_bfloat16"), found)
    with pytest.raises(NotAppliedError) as info:
        check_applied(Config(32, "float32", jit=True), found)
    assert info.value.setting == "jit"
    half = Realised({"bfloat16": 0.75, "float32": 0.25}, False)
    check_applied(Config(32, "mixed_bfloat16"), half)  # most layers follow the policy
    assert half.half_share == 0.75 and half.computes_in() == "bfloat16 (75% of the weights)"


def _result(space: dict[str, Any], timed: list[Config]) -> TuneResult:
    trials = [Trial(c, status="ok", rung_samples={0: [100.0, 101.0]}) for c in timed]
    parsed = parse_space(space)
    return TuneResult(timed[0], "fastest", trials, "m", "cpu", parsed, 10.0, 5.0)


def test_a_verdict_only_on_a_setting_the_search_compared() -> None:
    both = _result(
        {"jit": [False, True], "precision": ["float32"]}, [Config(32), Config(32, jit=True)]
    )
    says = {k: v["says"] for k, v in both.settings_searched().items()}
    assert says["jit"] == "XLA: compared off, on (measured)"
    assert says["precision"] == "precision: not searched (kept float32), no verdict"
    assert both.compared("jit") and not both.compared("precision")


class _FixedBf16(FakeRunner):
    """The model's layers fix mixed_bfloat16: a float32 trial does not take effect."""

    def prepare(self, config: Config) -> None:
        super().prepare(config)
        if config.precision == "float32":
            self.held.discard(config)
            raise NotAppliedError(
                "float32 asked, the model computes in bfloat16: its layers set their own dtype",
                setting="precision",
            )


def test_a_first_trial_that_did_not_take_effect_is_not_timed_and_the_search_goes_on() -> None:
    runner = _FixedBf16(FakeClock(), lambda c: 1000.0)
    outcome = run_search(runner, {"batch_size": [256], "precision": ["float32", "mixed_bfloat16"]})
    first = outcome.trials[0]
    assert first.config.precision == "float32" and first.status == "not applied"
    assert not first.rung_samples and first.note.endswith("not timed")
    assert outcome.decision is not None
    assert outcome.decision.winner.precision == "mixed_bfloat16"
    assert any("float32 was not measured" in note for note in outcome.notes)


def test_a_precision_that_did_not_take_effect_is_built_once_and_the_memory_search_moves_on() -> (
    None
):
    runner = _FixedBf16(FakeClock(), lambda c: 10.0 * c.batch_size)
    outcome = run_search(
        runner, {"batch_size": "auto", "precision": ["float32", "mixed_bfloat16"]}, margin=0.0
    )
    built = [c for c in runner.prepared if c.precision == "float32"]
    assert len(built) == 1  # the first float32 build told; the others were not built
    unapplied = [t for t in outcome.trials if t.status == "not applied"]
    assert unapplied and all(
        t.config.precision == "float32" and not t.rung_samples for t in unapplied
    )
    assert not [t for t in outcome.trials if t.config.precision == "float32" and t.rung_samples]
    assert outcome.batch_search is not None and outcome.batch_search.result > 32
    assert outcome.decision is not None
    assert outcome.decision.winner.precision == "mixed_bfloat16"
