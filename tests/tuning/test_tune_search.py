"""The search engine on a fake runner and a fake clock: halving, ties, OOM, Ctrl-C, budget.

Timings are injected (the runner returns seconds per example from a table), so every decision
is deterministic; no TensorFlow.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from tune_helpers import FakeClock, FakeRunner, run_search

from tfaccel.core.timing import summarize
from tfaccel.tuning import BudgetError, Config, TrialError, pick_winner


def by_batch(rates: dict[int, float]) -> Callable[[Config], float]:
    return lambda c: rates[c.batch_size]


def trial_of(outcome, **match):  # type: ignore[no-untyped-def]
    found = [t for t in outcome.trials if all(getattr(t.config, k) == v for k, v in match.items())]
    assert len(found) == 1, found
    return found[0]


# --- the decision -------------------------------------------------------------------------------


def test_tie_within_noise_picks_the_simpler_configuration() -> None:
    plain = Config(256)
    mixed = Config(256, precision="mixed_bfloat16")
    summaries = {
        plain: summarize([98, 100, 102, 99, 101]),
        mixed: summarize([99, 101, 103, 100, 102]),
    }
    decision = pick_winner(summaries)
    assert decision.fastest == mixed  # higher median ...
    assert decision.winner == plain  # ... but inside the noise: float32 is simpler
    assert "inside the noise" in decision.reason and plain.label() in decision.reason


def test_faster_beyond_the_noise_wins() -> None:
    plain = Config(256)
    mixed = Config(256, precision="mixed_bfloat16")
    summaries = {plain: summarize([98, 100, 102]), mixed: summarize([148, 150, 152])}
    decision = pick_winner(summaries)
    assert decision.winner == mixed and "beyond the noise" in decision.reason


def test_simplicity_order_among_several_ties() -> None:
    configs = [
        Config(256, precision="mixed_bfloat16", feed="pipeline"),
        Config(128, feed="pipeline"),
        Config(256, feed="pipeline"),
        Config(64, jit=True),
    ]
    summaries = {c: summarize([100, 101, 99]) for c in configs}
    assert pick_winner(summaries).winner == Config(128, feed="pipeline")


def test_search_tie_on_injected_timings_picks_float32() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: 1010.0 if c.precision == "mixed_bfloat16" else 1000.0)
    outcome = run_search(runner, {"batch_size": [256], "precision": ["float32", "mixed_bfloat16"]})
    assert outcome.decision is not None
    assert outcome.decision.fastest.precision == "mixed_bfloat16"
    assert outcome.decision.winner == Config(256)


def test_search_clear_winner_on_injected_timings() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: 2000.0 if c.precision == "mixed_bfloat16" else 1000.0)
    outcome = run_search(runner, {"batch_size": [256], "precision": ["float32", "mixed_bfloat16"]})
    assert outcome.decision is not None
    assert outcome.decision.winner == Config(256, precision="mixed_bfloat16")
    assert outcome.final_rounds == 5


# --- successive halving -------------------------------------------------------------------------


def test_successive_halving_drops_losers_early() -> None:
    clock = FakeClock()
    sizes = [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768]
    rates = {b: 100.0 + 10 * i for i, b in enumerate(sizes)}  # larger is faster
    runner = FakeRunner(clock, by_batch(rates))
    outcome = run_search(runner, {"batch_size": sizes})
    assert outcome.decision is not None and outcome.decision.winner.batch_size == 768
    dropped = [t for t in outcome.trials if t.status == "dropped"]
    slowest = {16, 24, 32, 48, 64, 96, 128, 192}  # 12 -> the best 4 survive rung 0
    assert {t.config.batch_size for t in dropped if t.last_rung == 0} == slowest
    assert {t.config.batch_size for t in dropped if t.last_rung == 1} == {256}  # 4 -> 3
    for config, count in runner.samples.items():
        # rung 0: 1 round; rung 1: 2 rounds; the final rung: 5 rounds
        expected = 1 if config.batch_size in slowest else 3 if config.batch_size == 256 else 8
        assert count == expected, config
    assert runner.total_samples < len(sizes) * 5  # far less than timing every one 5 times
    assert {c for c, failed in runner.released if not failed} >= {
        t.config for t in dropped
    }  # losers were released


def test_halving_goes_through_several_rungs() -> None:
    clock = FakeClock()
    sizes = list(range(8, 8 * 31, 8))  # 30 configurations
    runner = FakeRunner(clock, by_batch({b: float(b) for b in sizes}))
    outcome = run_search(runner, {"batch_size": sizes})
    assert outcome.decision is not None and outcome.decision.winner.batch_size == max(sizes)
    rungs = {t.last_rung for t in outcome.trials}
    assert rungs == {0, 1, 2, 3}  # 30 -> 10 -> 4 -> 3 (the final rung)
    assert outcome.final_rounds == 5


def test_a_candidate_inside_the_cutoffs_noise_is_not_dropped() -> None:
    clock = FakeClock()
    sizes = [8 * i for i in range(1, 22)]  # 21 configurations: 7 reach rung 1
    rates = {b: 100.0 + b for b in sizes}
    top = sorted(sizes, reverse=True)
    rates.update({top[0]: 1000.0, top[1]: 990.0, top[2]: 980.0, top[3]: 975.0, top[4]: 800.0})
    runner = FakeRunner(clock, by_batch(rates))
    outcome = run_search(runner, {"batch_size": sizes})
    assert trial_of(outcome, batch_size=top[3]).last_rung == 2  # 0.5% below the cut: kept
    fifth = trial_of(outcome, batch_size=top[4])
    assert fifth.status == "dropped" and fifth.last_rung == 1  # 18% below: dropped


def test_xla_is_tried_once_on_the_leader_and_can_win() -> None:
    clock = FakeClock()

    def speed(c: Config) -> float:
        return c.batch_size * (3.0 if c.jit else 1.0)

    runner = FakeRunner(clock, speed)
    outcome = run_search(runner, {"batch_size": [32, 64, 128, 256], "jit": [False, True]})
    xla = [c for c in runner.prepared if c.jit]
    assert xla == [Config(256, jit=True)]  # only the leader's twin, once
    assert outcome.decision is not None and outcome.decision.winner == Config(256, jit=True)


def test_xla_is_crossed_with_precision() -> None:
    """XLA helps only float32 here: tried once on the leader (bfloat16), it would be judged a
    loss; crossed with the precision, float32 + XLA is found and wins."""
    clock = FakeClock()

    def speed(c: Config) -> float:
        if c.precision == "float32":
            return 300.0 if c.jit else 100.0
        return 80.0 if c.jit else 200.0

    runner = FakeRunner(clock, speed)
    outcome = run_search(
        runner,
        {"batch_size": [256], "precision": ["float32", "mixed_bfloat16"], "jit": [False, True]},
    )
    xla = [c for c in runner.prepared if c.jit]
    assert sorted(c.precision for c in xla) == ["float32", "mixed_bfloat16"]  # once each
    assert outcome.decision is not None
    assert outcome.decision.winner == Config(256, "float32", jit=True)


def test_steps_per_execution_is_a_lever_kept_only_when_it_wins() -> None:
    clock = FakeClock()
    gains = {1: 1.0, 8: 1.6}
    runner = FakeRunner(clock, lambda c: c.batch_size * gains[c.steps_per_execution])
    outcome = run_search(runner, {"batch_size": [64, 128], "steps_per_execution": [1, 8]})
    assert [c for c in runner.prepared if c.steps_per_execution == 8] == [
        Config(128, steps_per_execution=8)
    ]
    assert outcome.decision is not None
    assert outcome.decision.winner == Config(128, steps_per_execution=8)
    runner = FakeRunner(FakeClock(), lambda c: float(c.batch_size))  # no gain: the simpler wins
    outcome = run_search(runner, {"batch_size": [64, 128], "steps_per_execution": [1, 8]})
    assert outcome.decision is not None and outcome.decision.winner == Config(128)


def test_slow_xla_is_dropped_after_its_first_rung() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: c.batch_size / (100.0 if c.jit else 1.0))
    outcome = run_search(runner, {"batch_size": [32, 64, 128, 256, 512], "jit": [False, True]})
    xla = trial_of(outcome, jit=True)
    assert xla.status == "dropped" and xla.last_rung == 1
    assert outcome.decision is not None and not outcome.decision.winner.jit


def test_a_single_configuration_still_gets_its_xla_variant() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: 200.0 if c.jit else 100.0)
    outcome = run_search(runner, {"batch_size": [64], "jit": [False, True]})
    assert outcome.decision is not None and outcome.decision.winner == Config(64, jit=True)


def test_pipeline_knobs_are_varied_on_a_pipeline_leader() -> None:
    clock = FakeClock()

    def speed(c: Config) -> float:
        return 100.0 * (2 if c.feed == "pipeline" else 1) * (1.5 if c.prefetch == 1 else 1)

    runner = FakeRunner(clock, speed)
    outcome = run_search(
        runner,
        {"batch_size": [64, 128], "feed": ["numpy", "pipeline"], "prefetch": ["auto", 1]},
    )
    assert outcome.decision is not None
    winner = outcome.decision.winner
    assert winner.feed == "pipeline" and winner.prefetch == 1


# --- failures -----------------------------------------------------------------------------------


def test_oom_at_prepare_does_not_end_the_search() -> None:
    clock = FakeClock()
    runner = FakeRunner(
        clock,
        by_batch({64: 100.0, 128: 150.0, 256: 300.0}),
        oom_at_prepare=lambda c: c.batch_size > 128,
    )
    outcome = run_search(runner, {"batch_size": [64, 128, 256]})
    assert trial_of(outcome, batch_size=256).status == "oom"
    assert (Config(256), True) in runner.released  # released as failed: state cleared
    assert outcome.decision is not None and outcome.decision.winner.batch_size == 128


def test_oom_in_the_middle_of_a_trial_does_not_end_the_search() -> None:
    clock = FakeClock()
    runner = FakeRunner(
        clock,
        by_batch({64: 100.0, 128: 150.0, 256: 300.0, 512: 50.0}),
        oom_at_sample=lambda c, n: c.batch_size == 256 and n == 2,  # its third timed call
    )
    outcome = run_search(runner, {"batch_size": [64, 128, 256, 512]})
    oom = trial_of(outcome, batch_size=256)
    assert oom.status == "oom" and "out of memory" in oom.note
    assert (Config(256), True) in runner.released
    assert outcome.decision is not None and outcome.decision.winner.batch_size == 128
    assert trial_of(outcome, batch_size=128).summary.n == 5  # the rest went on


def test_first_trial_error_is_raised_clearly() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: 100.0, error_at_prepare=lambda c: True)
    with pytest.raises(TrialError) as info:
        run_search(runner, {"batch_size": [32, 64]})
    text = str(info.value)
    assert "first trial (bs32 float32 numpy xla=off)" in text
    assert "incompatible with the layer" in text and "Fix:" in text


def test_a_later_error_is_recorded_and_the_search_goes_on() -> None:
    clock = FakeClock()
    runner = FakeRunner(
        clock,
        lambda c: 100.0 * c.batch_size,
        error_at_prepare=lambda c: c.precision == "mixed_bfloat16",
    )
    outcome = run_search(
        runner, {"batch_size": [32, 64], "precision": ["float32", "mixed_bfloat16"]}
    )
    errors = [t for t in outcome.trials if t.status == "error"]
    assert len(errors) == 2 and all("ValueError" in t.note for t in errors)
    assert outcome.decision is not None and outcome.decision.winner == Config(64)


def test_ctrl_c_returns_the_best_so_far() -> None:
    clock = FakeClock()
    sizes = [16, 32, 64, 128, 256, 512]
    runner = FakeRunner(clock, by_batch({b: float(b) for b in sizes}), interrupt_after=8)
    outcome = run_search(runner, {"batch_size": sizes})
    assert outcome.interrupted
    assert outcome.decision is not None  # from the screening rung, completed before Ctrl-C
    assert outcome.decision.winner.batch_size == 512
    assert outcome.final_rung == 0
    assert any("interrupted" in note for note in outcome.notes)


def test_ctrl_c_before_anything_was_timed() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: 1.0, interrupt_after=0)
    outcome = run_search(runner, {"batch_size": [32, 64]})
    assert outcome.interrupted and outcome.decision is None


# --- budget and limits --------------------------------------------------------------------------


def test_budget_too_small_for_one_trial_says_how_much_is_needed() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: 1.0, prepare_s=10.0)
    with pytest.raises(BudgetError) as info:
        run_search(runner, {"batch_size": [32]}, budget_s=8.0)
    text = str(info.value)
    assert "10.0 s" in text and "at least 11 s" in text and "--budget 11" in text


def test_a_budget_too_small_names_the_users_budget_and_what_was_kept_for_the_baseline() -> None:
    # tune SCRIPT keeps part of the budget to time the script's own configuration against the
    # winner: the error speaks of the budget the user gave, not of the search's share
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: 1.0, prepare_s=10.0)
    with pytest.raises(BudgetError) as info:
        run_search(runner, {"batch_size": [32]}, budget_s=4.0, reserved_s=14.0)
    text = str(info.value)
    assert "The budget of 18 s" in text and "the 14 s kept to time your own" in text
    assert "budget_s=18" in text and "at least 25 s" in text and "--budget 25" in text


def test_a_small_budget_screens_what_it_can_and_says_so() -> None:
    clock = FakeClock()
    sizes = [8 * i for i in range(1, 21)]
    runner = FakeRunner(clock, by_batch({b: float(b) for b in sizes}))
    outcome = run_search(runner, {"batch_size": sizes}, budget_s=40.0)
    skipped = [t for t in outcome.trials if t.status == "skipped"]
    assert skipped and all("budget" in t.note for t in skipped)
    assert any("not screened for lack of budget" in n for n in outcome.notes)
    assert outcome.decision is not None
    assert clock.now <= 40.0 + 2 * runner.sample_s  # within a sample or two of the budget


def test_batch_sizes_beyond_the_data_are_skipped() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, by_batch({64: 1.0, 128: 2.0, 256: 3.0}))
    outcome = run_search(runner, {"batch_size": [64, 128, 256]}, dataset_size=200)
    assert trial_of(outcome, batch_size=256).status == "skipped"
    assert "data set size (200)" in trial_of(outcome, batch_size=256).note
    assert trial_of(outcome, batch_size=128).status == "skipped"  # numpy: needs two batches
    assert all(c.batch_size <= 200 for c in runner.prepared)


def test_batch_cap_applies_to_explicit_sizes() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, by_batch({64: 1.0, 128: 2.0}))
    outcome = run_search(runner, {"batch_size": [64, 128]}, batch_cap=100)
    assert trial_of(outcome, batch_size=128).status == "skipped"
    assert "batch_cap (100)" in trial_of(outcome, batch_size=128).note


def test_auto_batch_size_uses_the_memory_search_with_margin() -> None:
    clock = FakeClock()
    runner = FakeRunner(
        clock, lambda c: float(c.batch_size), oom_at_prepare=lambda c: c.batch_size > 100
    )
    outcome = run_search(runner, {"batch_size": "auto"}, margin=0.1)
    assert outcome.batch_search is not None
    assert outcome.batch_search.largest_fit == 96 and outcome.batch_search.result == 80
    timed = {t.config.batch_size for t in outcome.trials if t.rung_samples}
    assert timed == {32, 64, 80}
    assert outcome.decision is not None and outcome.decision.winner.batch_size == 80
    assert not runner.held - {t.config for t in outcome.trials if t.status == "ok"}


def test_auto_batch_size_never_exceeds_the_data() -> None:
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: float(c.batch_size))
    outcome = run_search(runner, {"batch_size": "auto", "feed": ["pipeline"]}, dataset_size=100)
    assert max(c.batch_size for c in runner.prepared) == 100
    assert outcome.decision is not None and outcome.decision.winner.batch_size == 100


def test_every_sample_is_interleaved_within_a_rung() -> None:
    clock = FakeClock()
    order: list[int] = []
    runner = FakeRunner(clock, by_batch({32: 1.0, 64: 2.0}))
    original = runner.sample

    def logging_sample(config: Config) -> float:
        order.append(config.batch_size)
        return original(config)

    runner.sample = logging_sample  # type: ignore[method-assign]
    run_search(runner, {"batch_size": [32, 64]})
    final = order[-10:]  # the final rung: 2 configurations x 5 rounds
    assert all(a != b for a, b in itertools.pairwise(final[:2]))
    assert final.count(32) == final.count(64) == 5


def test_a_large_batch_whose_steps_the_budget_cannot_pay_for_is_not_prepared() -> None:
    # 10 ms per example: the warm-up of batch 32 says a step of 1024 takes 10 s, so preparing
    # it (3 warm-up steps) and timing it once (2 steps) would take 50 s of a 40 s budget;
    # estimated from the median preparation alone it looked like 3 s and ran the search over
    clock = FakeClock()
    runner = FakeRunner(clock, lambda c: 100.0, example_s=lambda c: 0.01)
    outcome = run_search(runner, {"batch_size": [32, 1024]}, budget_s=40)
    trials = {t.config.batch_size: t for t in outcome.trials}
    assert trials[32].warm_example_s == 0.01
    assert trials[1024].status == "skipped" and "no budget" in trials[1024].note
    assert Config(1024) not in runner.prepared
    assert clock.now <= 40


def test_a_slow_to_prepare_model_gets_a_second_configuration_before_the_screen_stops() -> None:
    """A model whose every configuration takes long to prepare (a GAN's two optimizers, traced
    anew) would leave the screen's 60% after its first configuration; the later rungs need two
    to compare, so the screen goes on until a second one is ready, inside the budget."""
    clock = FakeClock()
    runner = FakeRunner(clock, by_batch({32: 100.0, 64: 150.0, 128: 180.0}), prepare_s=14.0)
    outcome = run_search(runner, {"batch_size": [32, 64, 128]}, budget_s=45.0)
    ready = [t for t in outcome.trials if t.status != "skipped"]
    assert len(ready) == 2, [(t.config.batch_size, t.status, t.note) for t in outcome.trials]
    assert outcome.decision is not None
    assert clock.now <= 45.0 + 2 * runner.sample_s
    skipped = [t for t in outcome.trials if t.status == "skipped"]
    assert [t.note for t in skipped] == ["no budget left to screen it"]
