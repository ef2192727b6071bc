"""The budget estimates a first XLA configuration from what XLA costs to prepare: on a fake
runner and a fake clock (no TensorFlow), so the decisions are deterministic."""

from __future__ import annotations

from tune_helpers import FakeClock, FakeRunner, run_search

from tfaccel.tuning import Config


class XlaRunner(FakeRunner):
    """Prepares an XLA configuration in 3x the time of the others (2 s + 4 s of compile):
    building, compiling and warming up four small Keras models took 2.1-3.8x as long with
    ``jit_compile=True`` on a 2-core EPYC."""

    def prepare(self, config: Config) -> float | None:
        if config.jit:
            self.clock.now += 4.0
        return super().prepare(config)


SPACE = {"batch_size": [32], "jit": [False, True], "steps_per_execution": [1, 4]}


def searched(budget_s: float):  # type: ignore[no-untyped-def]
    """The search of ``SPACE`` in ``budget_s``: its clock's end, the runner, the XLA trial, the
    outcome (XLA 20% faster)."""
    clock = FakeClock()
    runner = XlaRunner(clock, lambda c: 120.0 if c.jit else 100.0)
    outcome = run_search(runner, SPACE, budget_s=budget_s)
    xla = next(t for t in outcome.trials if t.config.jit)
    return clock.now, runner, xla, outcome


def test_a_first_xla_trial_is_estimated_at_its_compile_and_the_search_ends_in_the_budget() -> None:
    # Estimated at the median preparation without XLA (2 s), the XLA trial was started with
    # 21 s left and the search ended at 30 s of a 27 s budget (a text model's tune: 77 s of
    # 60 s, its XLA trial's compile not in the estimate).
    ended, runner, xla, outcome = searched(27)
    assert ended <= 27
    assert xla.status == "skipped" and "no budget" in xla.note
    assert Config(32, jit=True) not in runner.prepared
    assert any(t.config.steps_per_execution == 4 and t.status == "ok" for t in outcome.trials)


def test_with_budget_for_it_the_xla_trial_runs_and_is_measured() -> None:
    ended, _, xla, outcome = searched(40)
    assert ended <= 40
    assert xla.status == "ok" and xla.prepare_s == 6.0
    assert outcome.decision is not None and outcome.decision.winner.jit
