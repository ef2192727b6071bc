"""The search: a memory search for the batch size, then successive halving; pure.

Nothing here imports TensorFlow. The search runs trials through a :class:`Runner` (prepare a
configuration, time one sample, release it) and classifies failures with an ``is_oom``
predicate, so every path is tested with a fake runner and a fake clock.

1. Batch sizes (``batch_size="auto"``): :func:`find_batch_size` grows the batch by powers of
   two until a trial runs out of memory, the cap or the data set size; then it bisects between
   the last size that fitted and the first that did not, and keeps a safety margin below the
   boundary. The candidates are the powers of two up to that size, and the size itself.
2. Screening: every combination of batch size, precision and feed is prepared (model built,
   first steps run) and timed once, in one interleaved round.
3. Successive halving: the best third survive to the next rung (with those just below the cut
   that are inside its noise, up to half), which times each of them in more interleaved
   rounds; XLA, the steps per execution and the pipeline knobs are tried on the leading
   configuration (each value once), and XLA also on the best of each other precision. When
   at most ``max_final`` remain they get ``final_rounds`` rounds.
4. The decision (:func:`pick_winner`): the fastest of the last rung wins only when it is faster
   beyond the noise (:func:`tfaccel.core.timing.compare`); otherwise the simplest configuration
   inside its noise wins (:func:`tfaccel.tuning.space.simplicity`).

A trial whose precision or XLA setting did not take effect on the model it built (the runner
raises :class:`~tfaccel.tuning._errors.NotAppliedError`) is marked ``not applied`` and never
timed, so it measures nothing and cannot win; later configurations with that value are marked
so without a build, and the memory search takes the next precision of the space.

A KeyboardInterrupt ends the search with the best of the last completed rung.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from tfaccel.core.errors import UsageError
from tfaccel.core.timing import Summary, compare, measure_interleaved, summarize
from tfaccel.tuning._errors import (
    BudgetError,
    NotAppliedError,
    TrialError,
    TuneError,
    first_line,
    user_traceback,
)
from tfaccel.tuning.batch import (
    DEFAULT_BATCH_CAP,
    BatchSearch,
    auto_batch_sizes,
    find_batch_size,
    is_oom_error,
)
from tfaccel.tuning.space import Config, Space, simplicity

__all__ = [
    "STATUSES",
    "Decision",
    "Runner",
    "SearchEvent",
    "SearchOutcome",
    "SearchSettings",
    "Trial",
    "pick_winner",
    "search",
]

STATUSES = ("ok", "oom", "error", "not applied", "dropped", "skipped", "pending")
WARM_CALLS = 3
"""Training calls a configuration's warm-up runs (``tfaccel.bench.training``: 3 steps)."""
XLA_FIRST_PREPARE = 3.0
"""A configuration with XLA, before any has been prepared, is estimated to take this many times
the median preparation without it: XLA compiles the training step before its first call. On a
2-core EPYC (load 5) building, compiling and running 3 steps of four small Keras models (a
CNN, a text model, an LSTM, an MLP) took 2.1-3.8x as long with ``jit_compile=True``. Once one
XLA configuration is prepared, the others are estimated from it."""
PLAN_TRUSTED = 2.0
"""The memory search runs no trial when the plan predicts this many times its largest batch
(the data or the cap) fits: twice the plan's worst measured error, and more."""


# --------------------------------------------------------------------------- decision


@dataclass(frozen=True)
class Decision:
    """The winner of a set of configurations measured together.

    Attributes:
        winner: the configuration to use.
        fastest: the one with the highest median (the winner, or a faster one inside the noise).
        reason: one sentence.
    """

    winner: Config
    fastest: Config
    reason: str


def pick_winner(summaries: Mapping[Config, Summary]) -> Decision:
    """The fastest configuration if it is faster beyond the noise, else the simplest tie.

    Throughputs (higher is better) of configurations measured in the same interleaved rounds.
    Every configuration whose interquartile range overlaps the fastest one's is a tie; the
    simplest tie (:func:`~tfaccel.tuning.space.simplicity`) wins.

    Raises:
        ValueError: no summaries.

    Example:
        >>> from tfaccel.core.timing import summarize
        >>> plain, mixed = Config(256), Config(256, precision="mixed_bfloat16")
        >>> tie = {plain: summarize([99, 100, 101]), mixed: summarize([100, 101, 102])}
        >>> pick_winner(tie).winner.precision
        'float32'
    """
    if not summaries:
        raise ValueError("no configurations to choose from")
    fastest = max(summaries, key=lambda c: (summaries[c].median, [-k for k in simplicity(c)]))
    top = summaries[fastest]
    ties = [
        c
        for c in summaries
        if c == fastest or not compare(top, summaries[c], higher_is_better=True).different
    ]
    winner = min(ties, key=simplicity)
    if winner == fastest:
        others = len(summaries) - 1
        reason = (
            f"fastest, beyond the noise of the {others} other finalist(s)"
            if len(ties) == 1
            else "fastest, and the simplest of the configurations inside its noise"
        )
        if not others:
            reason = "the only configuration measured to the end"
        return Decision(winner, fastest, reason)
    verdict = compare(summaries[winner], top, higher_is_better=True)
    reason = (
        f"{fastest.label()} measured x{verdict.ratio:.2f} but inside the noise "
        f"(+-{verdict.noise * 100:.1f}%), so the simpler {winner.label()} wins"
    )
    return Decision(winner, fastest, reason)


# --------------------------------------------------------------------------- trials


class Runner(Protocol):
    """What the search needs from the code that trains: TensorFlow, or a fake in tests."""

    def prepare(self, config: Config) -> float | None:
        """Build the model for ``config`` and run its first steps (tracing, warm-up); the
        warm-up's seconds per training example where it timed them (None: not known)."""

    def sample(self, config: Config) -> float:
        """Time one sample of a prepared configuration: seconds per training example."""
        ...

    def release(self, config: Config, *, failed: bool) -> None:
        """Drop what ``config`` holds; after a failure also reset the framework's state."""


@dataclass
class Trial:
    """One configuration's history in the search.

    Attributes:
        config: the configuration.
        status: ``ok`` (measured to the last rung), ``oom``, ``error``, ``not applied`` (its
            precision or XLA setting did not take effect on the model, so it was not timed:
            it measures nothing of that setting), ``dropped`` (lost a rung), ``skipped``
            (never run: budget, data size, interruption) or ``pending``.
        rung_samples: images/s of each timed sample, per rung.
        note: why the status is what it is.
        prepare_s: seconds to build and warm it up.
        order: when it was first tried (0 = first).
        warm_example_s: seconds per example of its warm-up steps (None: not known), which
            the budget scales to estimate what a larger batch's steps will cost.
    """

    config: Config
    status: str = "pending"
    rung_samples: dict[int, list[float]] = field(default_factory=dict)
    note: str = ""
    prepare_s: float | None = None
    order: int = -1
    warm_example_s: float | None = None

    @property
    def last_rung(self) -> int | None:
        """The last rung that timed this configuration."""
        return max(self.rung_samples) if self.rung_samples else None

    @property
    def samples(self) -> list[float]:
        """Images/s of the last rung that timed it."""
        rung = self.last_rung
        return self.rung_samples[rung] if rung is not None else []

    @property
    def summary(self) -> Summary | None:
        """Median and quartiles of :attr:`samples`, None when never timed."""
        return summarize(self.samples) if self.samples else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        summary = self.summary
        return {
            "config": self.config.to_dict(),
            "label": self.config.label(),
            "status": self.status,
            "note": self.note,
            "images_per_s": summary.to_dict() if summary else None,
            "rung_samples": {str(k): v for k, v in self.rung_samples.items()},
            "prepare_s": self.prepare_s,
        }


@dataclass(frozen=True)
class SearchEvent:
    """Progress of the search, for a progress bar.

    Attributes:
        phase: what is happening ("memory search", "screening 16", "rung 2: 3 x 5 rounds").
        elapsed_s / budget_s: time spent and allowed.
        best: (label, images/s) of the current leader, None before the first timing.
    """

    phase: str
    elapsed_s: float
    budget_s: float
    best: tuple[str, float] | None


@dataclass(frozen=True)
class SearchSettings:
    """How the search spends its budget.

    Attributes:
        budget_s: seconds for the whole search.
        sample_s: seconds one timed sample lasts (the runner's target), the first estimate.
        eta: the fraction 1/eta of a rung survives to the next.
        final_rounds: interleaved rounds of the final rung.
        max_final: at most this many configurations reach the final rung.
        screen_share: at most this fraction of the budget goes to the first rung, once two
            configurations are ready (before, all of it: a later rung needs two to compare).
        batch_cap: the largest batch size (None: ``DEFAULT_BATCH_CAP`` for "auto", else none).
        batch_start: the smallest batch size the memory search tries.
        margin: the memory search's safety margin.
        granularity: the memory search's bisection step.
        batch_planned: the largest batch :func:`tfaccel.plan` predicts on the device: the
            memory search starts there (None: it grows from ``batch_start``).
        reserved_s: seconds of the caller's budget kept out of ``budget_s`` for the timing of
            the script's own configuration against the winner (``tfaccel tune SCRIPT``),
            counted in samples of ``sample_s``; once samples are timed, the search keeps that
            many samples at the longest length measured instead (:meth:`_Search.reserve`).
        spent_s: seconds of the caller's budget spent before the search (a script's run to
            its ``fit``), already taken off ``budget_s``; said in a budget error.
    """

    budget_s: float
    sample_s: float = 1.0
    eta: int = 3
    final_rounds: int = 5
    max_final: int = 3
    screen_share: float = 0.6
    batch_cap: int | None = None
    batch_start: int = 32
    margin: float = 0.1
    granularity: int = 8
    batch_planned: int | None = None
    reserved_s: float = 0.0
    spent_s: float = 0.0

    @property
    def min_budget_s(self) -> float:
        """The least budget that can pay for one trial: a warm-up and one sample, twice over
        for the model build and the first step's tracing."""
        return 4.0 * self.sample_s


@dataclass
class SearchOutcome:
    """What the search found.

    Attributes:
        trials: every configuration considered, in the order first tried (skipped last).
        decision: the winner and why; None when nothing was timed.
        final_rung: the rung the decision was made on (None: none completed).
        final_rounds: rounds of that rung.
        batch_search: the memory search, when batch sizes were "auto".
        interrupted: a KeyboardInterrupt ended the search.
        elapsed_s: seconds spent.
        notes: facts a reader needs (budget cut, decisions on few samples).
    """

    trials: list[Trial]
    decision: Decision | None
    final_rung: int | None
    final_rounds: int
    batch_search: BatchSearch | None
    interrupted: bool
    elapsed_s: float
    notes: list[str]


class _OutOfBudget(Exception):
    """The budget cannot pay for the next step."""


def search(
    space: Space,
    runner: Runner,
    *,
    dataset_size: int,
    settings: SearchSettings,
    is_oom: Callable[[BaseException], bool] = is_oom_error,
    clock: Callable[[], float] = time.monotonic,
    on_event: Callable[[SearchEvent], None] | None = None,
    first: Config | None = None,
) -> SearchOutcome:
    """Search ``space`` for the fastest configuration within ``settings.budget_s``.

    Args:
        space: the space, with ``precision`` resolved to a tuple (``batch_size`` may be "auto").
        runner: prepares, times and releases configurations.
        dataset_size: examples in the data set.
        settings: budget and halving parameters.
        is_oom: classifies a trial's exception as out of memory (the trial is released and the
            search goes on) or not (the first trial raises, later ones are recorded as errors).
        clock: seconds, for the budget.
        on_event: receives progress.
        first: a configuration screened before all others and never released by the search
            (the script's own configuration, which is timed against the winner at the end:
            preparing it once, inside the budget, is what keeps a model whose preparation
            takes most of the budget inside it).

    Returns:
        A :class:`SearchOutcome`; ``interrupted`` when a KeyboardInterrupt ended it.

    Raises:
        BudgetError: the first trial alone takes longer than the budget.
        TuneError: the first trial failed (not for memory), or nothing could be timed.
    """
    if isinstance(space.precision, str):
        raise ValueError("resolve space.precision before searching")
    return _Search(space, runner, dataset_size, settings, is_oom, clock, on_event, first).run()


class _Search:
    """One search: the trials, the budget, the rungs. :func:`search` is its only user."""

    def __init__(
        self,
        space: Space,
        runner: Runner,
        dataset_size: int,
        settings: SearchSettings,
        is_oom: Callable[[BaseException], bool],
        clock: Callable[[], float],
        on_event: Callable[[SearchEvent], None] | None,
        first: Config | None = None,
    ) -> None:
        self.space = space
        self.first = first
        self.runner = runner
        self.dataset_size = dataset_size
        self.settings = settings
        self.is_oom = is_oom
        self.clock = clock
        self.on_event = on_event
        self.start = clock()
        self.trials: dict[Config, Trial] = {}
        self.ready: set[Config] = set()
        self.sample_walls: list[float] = []
        self.notes: list[str] = []
        self.batch_search: BatchSearch | None = None
        self.last_rung: tuple[int, int, dict[Config, Summary]] | None = None  # rung, rounds
        self.tried_values: set[tuple[str, Any]] = set()
        self.unapplied: dict[tuple[str, Any], str] = {}  # (setting, value) -> why not
        self.phase = "starting"

    # -- budget -----------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self.clock() - self.start

    def remaining(self) -> float:
        return self.budget() - self.elapsed()

    def reserve(self) -> float:
        """Seconds kept for the final comparison (``reserved_s``): as many samples as
        ``reserved_s`` holds of ``sample_s``, at the longest sample measured so far. A small
        model's samples end early (one pass over its data), and the time they do not use
        goes to the search."""
        kept = self.settings.reserved_s
        if not kept or not self.sample_walls:
            return kept
        return kept * max(self.sample_walls) / self.settings.sample_s

    def budget(self) -> float:
        """Seconds the search may spend: ``budget_s``, plus what the reserve no longer needs
        (or less, where samples last longer than ``sample_s``)."""
        return self.settings.budget_s + self.settings.reserved_s - self.reserve()

    def est_sample(self) -> float:
        return statistics.median(self.sample_walls) if self.sample_walls else self.settings.sample_s

    def est_prepare(self, config: Config | None = None) -> float:
        """Seconds to prepare ``config``: the median preparation of the configurations with
        its XLA setting; for a first one with XLA, :data:`XLA_FIRST_PREPARE` times the
        others'."""
        prepared = [
            (t.config, t.prepare_s) for t in self.trials.values() if t.prepare_s is not None
        ]
        alike = [s for c, s in prepared if config is None or c.jit == config.jit]
        if alike:
            return statistics.median(alike)
        times = [s for _, s in prepared]
        if not times:
            return 2.0 * self.settings.sample_s
        first_xla = config is not None and config.jit
        return statistics.median(times) * (XLA_FIRST_PREPARE if first_xla else 1.0)

    def est_step(self, config: Config) -> float:
        """Seconds of one training call of ``config``, from the warm-up of a prepared
        configuration of the same or the nearest smaller batch (else the smallest): its
        seconds per example times this batch. Throughput rarely falls as the batch grows, so
        this errs long for a larger batch. 0 when no warm-up was timed."""
        known = sorted(
            (t.config.batch_size, t.warm_example_s)
            for t in self.trials.values()
            if t.warm_example_s is not None
        )
        if not known:
            return 0.0
        below = [per for batch, per in known if batch <= config.batch_size]
        per_example = below[-1] if below else known[0][1]
        return per_example * config.batch_size * config.steps_per_execution

    def prepare_cost(self, config: Config) -> float:
        """Preparing ``config``: its estimated preparation (:meth:`est_prepare`), plus the
        warm-up's steps at its batch (``WARM_CALLS`` calls of its training function)."""
        return self.est_prepare(config) + WARM_CALLS * self.est_step(config)

    def sample_cost(self, config: Config) -> float:
        """One timed sample of ``config``: the median sample, or two training calls (a sample
        runs at least two) where its steps are longer."""
        return max(self.est_sample(), 2 * self.est_step(config))

    # -- progress ---------------------------------------------------------------------------

    def emit(self, phase: str | None = None) -> None:
        if phase is not None:
            self.phase = phase
        if self.on_event is None:
            return
        best = None
        if self.last_rung is not None:
            summaries = self.last_rung[2]
            leader = max(summaries, key=lambda c: summaries[c].median)
            best = (leader.label(), summaries[leader].median)
        self.on_event(SearchEvent(self.phase, self.elapsed(), self.settings.budget_s, best))

    # -- trials -----------------------------------------------------------------------------

    def trial(self, config: Config) -> Trial:
        if config not in self.trials:
            self.trials[config] = Trial(config)
        return self.trials[config]

    def prepare(self, config: Config, *, reraise_oom: bool = False) -> bool:
        """Build and warm up ``config``; True when it is ready to time."""
        trial = self.trial(config)
        if config in self.ready:
            return True
        if trial.order >= 0 or trial.status == "skipped":
            return False
        first = not any(t.order >= 0 and t.status != "not applied" for t in self.trials.values())
        trial.order = sum(t.order >= 0 for t in self.trials.values())
        known = next((n for (k, v), n in self.unapplied.items() if getattr(config, k) == v), None)
        if known is not None:  # the same setting did not take effect on an earlier build
            trial.status, trial.note = "not applied", known
            return False
        began = self.clock()
        try:
            warm = self.runner.prepare(config)
        except NotAppliedError as exc:
            trial.prepare_s = self.clock() - began
            self.not_applied(trial, exc)
            return False
        except UsageError:
            self.release(config, failed=True)
            raise  # the user's call is wrong (model_fn returns one model): no trial can run
        except Exception as exc:
            trial.prepare_s = self.clock() - began
            self.fail(trial, exc, first=first)
            if reraise_oom and trial.status == "oom":
                raise
            return False
        trial.prepare_s = self.clock() - began
        trial.warm_example_s = warm if isinstance(warm, float) and warm > 0 else None
        trial.status = "ok"
        self.ready.add(config)
        if first:
            self.check_first_trial(trial)
        return True

    def fail(self, trial: Trial, exc: Exception, *, first: bool) -> None:
        """Record a failed trial and release its state; the first trial's errors are raised."""
        oom = self.is_oom(exc)
        if first and not oom:
            self.release(trial.config, failed=True)
            if isinstance(exc, TuneError):
                raise exc
            raise TrialError(
                f"The first trial ({trial.config.label()}) failed: "
                f"{type(exc).__name__}: {first_line(exc)}",
                expected="the model from model_fn to train on the data with model.fit",
                received=user_traceback(exc, skip=0),
                fix="check that model.fit(x, y, batch_size=32) works with your model_fn and "
                "data outside tfaccel.tune (shapes, dtypes, loss)",
            ) from exc
        if oom:
            trial.status, trial.note = "oom", f"out of memory: {first_line(exc)}"
        else:
            trial.status, trial.note = "error", f"{type(exc).__name__}: {first_line(exc)}"
        _forget_frames(exc)  # the traceback's frames hold the model: let it go
        self.release(trial.config, failed=True)

    def not_applied(self, trial: Trial, exc: NotAppliedError) -> None:
        """Record a trial whose setting did not take effect: never timed, never a winner."""
        trial.status, trial.note = "not applied", f"{exc.what}; not timed"
        note = f"{exc.what}; not counted as a measurement of {trial.config.label()}"
        if exc.setting == "precision":
            note = (
                f"{exc.what}; its trials were not timed, so {trial.config.precision} "
                "was not measured"
            )
        if note not in self.notes:
            self.notes.append(note)
        self.unapplied[(exc.setting, getattr(trial.config, exc.setting))] = trial.note
        self.release(trial.config, failed=False)

    def check_first_trial(self, trial: Trial) -> None:
        prepare_s = trial.prepare_s or 0.0
        needed = prepare_s + self.settings.sample_s
        if needed > self.settings.budget_s:
            reserved, spent = self.settings.reserved_s, self.settings.spent_s
            given = self.settings.budget_s + reserved + spent
            kept = (
                f", after the {reserved:g} s kept to time your own configuration against the winner"
                if reserved
                else ""
            )
            if spent:
                kept += f" and the {spent:.0f} s your script took to reach its fit"
            least = math.ceil(needed + reserved + spent)
            raise BudgetError(
                f"The budget of {given:g} s cannot pay for one trial{kept}: preparing "
                f"the first configuration ({trial.config.label()}) took {prepare_s:.1f} s and "
                f"one timed sample lasts {self.settings.sample_s:g} s",
                expected=f"a budget of at least {least} s for one trial",
                received=f"budget_s={given:g}",
                fix=f"pass a budget of {least} s or more (--budget {least}); screening every "
                f"configuration of this space once needs about "
                f"{math.ceil(needed * self.screen_size() + reserved + spent)} s",
            )

    def screen_size(self) -> int:
        """How many configurations the screen has (6 batch sizes assumed for "auto")."""
        space = self.space
        batches = 6 if isinstance(space.batch_size, str) else len(space.batch_size)
        return batches * len(space.precision) * len(space.feed)

    def release(self, config: Config, *, failed: bool) -> None:
        self.ready.discard(config)
        if config == self.first and not failed:
            return  # kept prepared: it is timed against the winner after the search
        self.runner.release(config, failed=failed)

    # -- the phases -------------------------------------------------------------------------

    def run(self) -> SearchOutcome:
        interrupted = False
        try:
            batches = self.batch_sizes()
            alive = self.screen(batches)
            self.halve(alive)
        except KeyboardInterrupt:
            interrupted = True
            self.notes.append("interrupted (Ctrl-C): the result is the best so far")
        return self.outcome(interrupted)

    def batch_sizes(self) -> tuple[int, ...]:
        space, s = self.space, self.settings
        if space.batch_size != "auto":
            return self.explicit_batches(space.batch_size)
        self.emit("memory search")
        feed = "pipeline" if "pipeline" in space.feed else "numpy"
        per_sample = 1 if feed == "pipeline" else 2 * space.steps_per_execution[0]
        size = self.dataset_size // per_sample
        precisions = [str(p) for p in space.precision]

        def try_batch(batch_size: int) -> None:
            config = space.base(batch_size, precisions[0], feed)
            if self.tried_count() and self.remaining() < self.prepare_cost(config):
                raise _OutOfBudget
            for precision in precisions:  # the first one that takes effect on the model
                config = space.base(batch_size, precision, feed)
                self.prepare(config, reraise_oom=True)
                if self.trials[config].status != "not applied":
                    return
            notes = "; ".join(sorted(set(self.unapplied.values())))
            raise TuneError(
                "The memory search cannot run: no precision of the space takes effect on the model",
                expected="a model whose layers follow the Keras global policy, or a space "
                "with the precision the model computes in",
                received=notes,
                fix="search the precision the model computes in, or build its layers "
                "without dtype= in model_fn",
            )

        cap = s.batch_cap if s.batch_cap is not None else DEFAULT_BATCH_CAP
        try:
            self.batch_search = find_batch_size(
                try_batch,
                dataset_size=max(1, size),
                cap=cap,
                start=s.batch_start,
                margin=s.margin,
                granularity=s.granularity,
                is_oom=self.is_oom,
                planned=s.batch_planned,
                trust_plan=PLAN_TRUSTED,
            )
        except _OutOfBudget:
            fitted = [c.batch_size for c, t in self.trials.items() if t.status == "ok"]
            self.notes.append("the budget ran out during the memory search")
            return auto_batch_sizes(max(fitted, default=0), s.batch_start)
        self.release_search_leftovers(auto_batch_sizes(self.batch_search.result, s.batch_start))
        if self.batch_search.result < 1:
            raise TuneError(
                "Even the smallest batch size ran out of memory",
                expected="a model whose training step fits in the device's memory",
                received="out of memory at batch size "
                + ", ".join(str(b) for b, _ in self.batch_search.tried),
                fix="use a smaller model or input, or free the device (tfaccel doctor)",
            )
        if self.batch_search.planned_only:
            self.notes.append(
                f"memory search: none run; the plan predicts {s.batch_planned:,} fits, at least "
                f"{PLAN_TRUSTED:g}x the largest batch searched ({self.batch_search.limit:,}: "
                "the data or the cap), which the screen times if the budget reaches it"
            )
        if self.batch_search.boundary_found:
            self.notes.append(
                f"largest batch that fitted: {self.batch_search.largest_fit}; using "
                f"{self.batch_search.result} ({s.margin:.0%} margin below the memory limit)"
            )
        return auto_batch_sizes(self.batch_search.result, s.batch_start)

    def release_search_leftovers(self, kept: tuple[int, ...]) -> None:
        """Release what the memory search prepared at sizes the screen will not use."""
        for config in list(self.ready):
            if config.batch_size not in kept:
                self.release(config, failed=False)
                trial = self.trials[config]
                trial.status = "skipped"
                trial.note = "fitted in the memory search; above the size kept with the margin"

    def tried_count(self) -> int:
        return sum(t.order >= 0 for t in self.trials.values())

    def explicit_batches(self, sizes: tuple[int, ...]) -> tuple[int, ...]:
        cap = self.settings.batch_cap
        kept = []
        for size in sizes:
            if size > self.dataset_size or (cap is not None and size > cap):
                limit = (
                    f"the data set size ({self.dataset_size})"
                    if size > self.dataset_size
                    else f"batch_cap ({cap})"
                )
                for config in self.primary((size,)):
                    trial = self.trial(config)
                    trial.status, trial.note = "skipped", f"batch size above {limit}"
                continue
            kept.append(size)
        return tuple(kept)

    def primary(self, batches: Sequence[int]) -> list[Config]:
        """Every batch x precision x feed with the simplest secondary values, in screen order."""
        space = self.space
        configs = [
            space.base(b, str(p), f) for b in batches for p in space.precision for f in space.feed
        ]
        baseline: Config | None
        if self.first is not None and self.first.batch_size in batches:
            baseline = self.first  # the script's own: the anchor the others are compared with
            configs = [baseline, *configs]
        else:
            baseline = min(configs, key=simplicity, default=None)
        rest = sorted(
            dict.fromkeys(c for c in configs if c != baseline),
            key=lambda c: (-c.batch_size, simplicity(c)),
        )
        return ([baseline] if baseline is not None else []) + rest

    def screen(self, batches: Sequence[int]) -> list[Config]:
        """Prepare every primary configuration the budget allows; time each once."""
        candidates = self.primary(batches)
        self.emit(f"screening {len(candidates)} configurations")
        ready: list[Config] = []
        for config in candidates:
            # The later rungs compare what the screen readied: with fewer than two ready they
            # have nothing to compare, so until then the screen may take the whole budget.
            fraction = self.settings.screen_share if len(ready) >= 2 else 1.0
            share = fraction * self.budget()  # the reserve, once measured
            trial = self.trial(config)
            if trial.status == "skipped":
                continue
            if config.feed == "numpy" and 2 * config.steps_per_execution * config.batch_size > (
                self.dataset_size
            ):
                trial.status = "skipped"
                trial.note = _numpy_needs(config)
                continue
            if trial.order < 0 and self.tried_count() and self.over_screen(share, ready, config):
                trial.status, trial.note = "skipped", "no budget left to screen it"
                continue
            if self.prepare(config):
                ready.append(config)
                if self.settings.reserved_s and not self.sample_walls:
                    if not self.probe_sample(config):
                        ready.remove(config)
            self.emit()
        skipped = sum(t.note == "no budget left to screen it" for t in self.trials.values())
        if skipped:
            self.notes.append(
                f"{skipped} configuration(s) not screened for lack of budget: screening all of "
                f"them needs about {math.ceil(sum(self.trial_cost(c) for c in candidates))} s"
            )
        if not ready:
            raise TuneError(
                "No configuration could be trained",
                expected="at least one configuration that fits in memory",
                received="; ".join(f"{t.config.label()}: {t.note}" for t in self.trials.values()),
                fix="lower the batch sizes in the space, or use a smaller model",
            )
        return self.measure(ready, rung=0)

    def probe_sample(self, config: Config) -> bool:
        """Time one sample of the first configuration prepared, before the rest are screened:
        how long a sample lasts sizes :meth:`reserve` (a small model's samples end well before
        ``sample_s``). Only its length is kept; rung 0 times the configuration again. False
        when the sample failed (recorded, and the configuration released)."""
        failed: set[Config] = set()
        self.timed(config, failed)()
        return config not in failed

    def trial_cost(self, config: Config) -> float:
        return self.prepare_cost(config) + self.sample_cost(config)

    def over_screen(self, share: float, ready: list[Config], config: Config) -> bool:
        """Would preparing ``config`` (and timing it and the ``ready`` ones once) exceed the
        share?"""
        timing = sum(self.sample_cost(c) for c in ready)
        return self.elapsed() + self.trial_cost(config) + timing > share

    def measure(self, configs: list[Config], rung: int) -> list[Config]:
        """Time ``configs`` in interleaved rounds; return those still standing, fastest first."""
        rounds = self.rounds(rung, len(configs))
        self.emit(f"rung {rung}: {len(configs)} configuration(s) x {rounds} round(s)")
        failed: set[Config] = set()
        calls = {config.label(): self.timed(config, failed) for config in configs}
        seconds = measure_interleaved(calls, repeats=rounds, warmup=0)
        summaries: dict[Config, Summary] = {}
        for config in configs:
            trial = self.trials[config]
            if config in failed:
                continue
            rates = [1.0 / s for s in seconds[config.label()] if s > 0]
            if not rates:
                self.fail(trial, ValueError("no positive timing"), first=False)
                continue
            trial.rung_samples[rung] = rates
            summaries[config] = summarize(rates)
        if summaries:
            self.last_rung = (rung, rounds, summaries)
        self.emit()
        return sorted(summaries, key=lambda c: -summaries[c].median)

    def rounds(self, rung: int, count: int) -> int:
        if count <= self.settings.max_final:
            return self.settings.final_rounds
        return min(rung + 1, self.settings.final_rounds)

    def timed(self, config: Config, failed: set[Config]) -> Callable[[], float]:
        """The timed call of one configuration; a failure is recorded and released at once."""

        def call() -> float:
            if config in failed:
                return 0.0
            began = self.clock()
            try:
                value = self.runner.sample(config)
            except Exception as exc:
                failed.add(config)
                self.fail(self.trials[config], exc, first=False)
                return 0.0
            self.sample_walls.append(self.clock() - began)
            self.emit()
            return value

        return call

    def halve(self, ranked: list[Config]) -> None:
        """Successive halving from the screened ranking until the final rung is done."""
        rung = 0
        while ranked and self.last_rung is not None:
            new = self.variants(ranked)
            final = self.last_rung[1] == self.settings.final_rounds
            if not new and final and len(ranked) <= self.settings.max_final:
                return  # that rung was the final one
            keep = self.keep_count(ranked)
            survivors, losers = ranked[:keep], ranked[keep:]
            self.drop(losers, rung)
            rung += 1
            survivors, new = self.fit_budget(survivors, new, rung)
            if not survivors:
                return
            ready = survivors + [c for c in new if self.prepare(c)]
            ranked = self.measure(ready, rung)

    def keep_count(self, ranked: list[Config]) -> int:
        """How many of a rung go on: the best 1/eta (at least ``max_final``), plus those just
        below the cut that are inside its noise, up to half of the rung."""
        assert self.last_rung is not None
        summaries = self.last_rung[2]
        keep = max(self.settings.max_final, math.ceil(len(ranked) / self.settings.eta))
        if keep >= len(ranked):
            return len(ranked)
        cutoff = summaries[ranked[keep - 1]]
        limit = max(keep, math.ceil(len(ranked) / 2))
        while (
            keep < limit
            and not compare(cutoff, summaries[ranked[keep]], higher_is_better=True).different
        ):
            keep += 1
        return keep

    def drop(self, losers: Sequence[Config], rung: int) -> None:
        assert self.last_rung is not None
        summaries = self.last_rung[2]
        for config in losers:
            trial = self.trials[config]
            trial.status = "dropped"
            median = summaries[config].median if config in summaries else float("nan")
            trial.note = f"dropped after rung {rung} ({median:.0f}/s)"
            self.release(config, failed=False)

    def variants(self, ranked: Sequence[Config]) -> list[Config]:
        """Untried secondary values on the leader (XLA, steps per execution, knobs), and XLA
        on the best configuration of each other precision: XLA's gain depends on the
        precision, so it is crossed with it rather than tried once. Each value is tried once
        per search (XLA once per precision)."""
        leader = ranked[0]
        out = []
        for config in self.space.variants(leader):
            key = next(
                k for k in self.space.secondary() if getattr(config, k) != getattr(leader, k)
            )
            out += self._untried(config, key)
        seen = {leader.precision}
        for config in ranked[1:]:
            if config.precision in seen:
                continue
            seen.add(config.precision)
            for value in self.space.jit:
                if value != config.jit:
                    out += self._untried(replace(config, jit=value), "jit")
        # XLA last: the budget drops the last first, and an XLA trial costs the most to prepare
        return sorted(out, key=lambda c: c.jit)

    def _untried(self, config: Config, key: str) -> list[Config]:
        value: tuple[Any, ...] = (key, getattr(config, key))
        if key == "jit":
            value += (config.precision,)
        if value in self.tried_values or config in self.trials:
            return []
        self.tried_values.add(value)
        batches = 2 * config.steps_per_execution
        if config.feed == "numpy" and batches * config.batch_size > self.dataset_size:
            trial = self.trial(config)
            trial.status, trial.note = "skipped", _numpy_needs(config)
            return []
        return [config]

    def fit_budget(
        self, survivors: list[Config], new: list[Config], rung: int
    ) -> tuple[list[Config], list[Config]]:
        """Shrink the next rung until its estimated cost fits the remaining budget."""
        while survivors:
            count = len(survivors) + len(new)
            rounds = self.rounds(rung, count)
            cost = sum(self.prepare_cost(c) for c in new) + rounds * sum(
                self.sample_cost(c) for c in [*survivors, *new]
            )
            if cost <= self.remaining():
                return survivors, new
            if new:
                dropped = new.pop()
                trial = self.trial(dropped)
                trial.status, trial.note = "skipped", "no budget left to try it"
                continue
            if len(survivors) <= 2:
                self.notes.append(
                    f"the budget ran out before rung {rung}; the decision uses rung {rung - 1}"
                )
                return [], []
            loser = survivors.pop()
            self.trials[loser].status = "dropped"
            self.trials[loser].note = f"dropped before rung {rung}: no budget to time it again"
            self.release(loser, failed=False)
        return [], []

    # -- the result -------------------------------------------------------------------------

    def outcome(self, interrupted: bool) -> SearchOutcome:
        decision, final_rung, rounds = None, None, 0
        if self.last_rung is not None:
            final_rung, rounds, summaries = self.last_rung
            finalists = {c: s for c, s in summaries.items() if self.trials[c].status == "ok"}
            decision = pick_winner(finalists or summaries)
            for config, trial in self.trials.items():
                if trial.status == "ok" and config not in summaries:
                    trial.status = "skipped" if interrupted else "dropped"
                    trial.note = (
                        "interrupted before it was timed"
                        if interrupted
                        else ("not in the last rung")
                    )
            if rounds == 1 and len(summaries) > 1:
                self.notes.append(
                    "the decision rests on one sample per configuration, so the noise is "
                    "unknown: give a larger budget for a noise-aware decision"
                )
        for trial in self.trials.values():
            if trial.status == "pending":
                trial.status = "skipped"
                trial.note = "interrupted" if interrupted else "not reached"
        ordered = sorted(
            self.trials.values(), key=lambda t: (t.order < 0, t.order, simplicity(t.config))
        )
        return SearchOutcome(
            trials=ordered,
            decision=decision,
            final_rung=final_rung,
            final_rounds=rounds,
            batch_search=self.batch_search,
            interrupted=interrupted,
            elapsed_s=self.elapsed(),
            notes=self.notes,
        )


def _numpy_needs(config: Config) -> str:
    if config.steps_per_execution == 1:
        return "the numpy feed needs two batches of data per sample"
    return (
        f"the numpy feed needs {2 * config.steps_per_execution} batches of data per sample "
        f"(two calls of {config.steps_per_execution} steps)"
    )


def _forget_frames(exc: BaseException | None) -> None:
    """Drop the tracebacks of ``exc`` and its chain, so their frames' locals can be freed."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__
