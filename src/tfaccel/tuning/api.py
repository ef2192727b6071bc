"""``tfaccel.tune``: the three entry points (a model function, a script, a reference model).

Each checks its input before importing TensorFlow, runs the search
(:func:`tfaccel.tuning.search.search`) on :class:`~tfaccel.tuning.trials.TfRunner`, then the thread
stage when asked and possible, and records the winner in the results database.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tfaccel import inventory
from tfaccel.core.checks import (
    check_callable,
    check_mapping,
    in_range,
    is_bool,
    is_int,
    is_real,
)
from tfaccel.core.errors import UsageError, argument, shown
from tfaccel.inventory import Inventory
from tfaccel.planning.advice import memory_advice
from tfaccel.planning.source import workload_model
from tfaccel.planning.targets import training_device
from tfaccel.scripts import defines_hooks
from tfaccel.store import ResultsStore, StoreError
from tfaccel.tuning._errors import BudgetError, SpaceError, TrialError, TuneError
from tfaccel.tuning.batch import DEFAULT_BATCH_CAP, is_oom_error
from tfaccel.tuning.data import TuneData, classify, fit_space, resolve
from tfaccel.tuning.hooks import Hooks, check_tune_script, load_script, reference_hooks
from tfaccel.tuning.record import record, script_digest
from tfaccel.tuning.result import TuneResult
from tfaccel.tuning.script import ScriptWorkload, against_baseline, baseline_config
from tfaccel.tuning.search import (
    Runner,
    SearchEvent,
    SearchOutcome,
    SearchSettings,
    pick_winner,
    search,
)
from tfaccel.tuning.space import Space, parse_space
from tfaccel.tuning.threads import thread_stage
from tfaccel.tuning.trials import TfRunner, build_model, hardware_precisions, resolve_pipeline
from tfaccel.workload.record import Origin

__all__ = ["DEFAULT_BUDGET_S", "tune", "tune_model", "tune_script"]

DEFAULT_BUDGET_S = 300.0
"""Five minutes: enough to screen the default space of a small model on a CPU."""
DEFAULT_MARGIN = 0.1
DEFAULT_SAMPLE_S = 1.0
DEFAULT_FINAL_ROUNDS = 5

StoreTarget = bool | str | Path


def tune(
    model_fn: Callable[[], Any],
    data: Any,
    budget_s: float = DEFAULT_BUDGET_S,
    space: Mapping[str, Any] | None = None,
    *,
    model_name: str | None = None,
    batch_cap: int | None = None,
    margin: float = DEFAULT_MARGIN,
    is_oom: Callable[[BaseException], bool] | None = None,
    store: StoreTarget = True,
    sample_s: float = DEFAULT_SAMPLE_S,
    final_rounds: int = DEFAULT_FINAL_ROUNDS,
    pipeline_kwargs: Mapping[str, Any] | None = None,
    progress: bool = True,
    runner: Runner | None = None,
    batched: bool | None = None,
) -> TuneResult:
    """Find the fastest training configuration of a model on this machine, within a budget.

    Searches batch size, precision, XLA, the feed (``fit`` on arrays or
    ``tfaccel.data.pipeline``) and the pipeline's knobs, measuring every candidate with the
    shared timing core (interleaved, median and IQR) and dropping losers early (successive
    halving). A configuration wins only when it is faster beyond the noise; otherwise the
    simpler one does (float32 < mixed, XLA off < on, numpy feed < pipeline, default knobs <
    changed, smaller batch). The winner is stored in the results database, so
    ``tfaccel.setup(precision="auto", jit="auto", model=model)`` applies it on this machine.

    Thread counts cannot change inside one process once TensorFlow runs; search them with
    :func:`tune_script` or ``tfaccel tune SCRIPT --space threads=...``.

    Args:
        model_fn: builds and compiles the model, e.g. ``lambda: make_model()``. Called once per
            configuration with the precision set as the Keras global policy; layers with an
            explicit dtype keep it. It must build a NEW model on each call: one that returns
            the same model object twice is refused (``ModelReusedError``), since every trial
            would then train that one model, in the precision it was first built with. Each
            trial is checked on the model it built: when its precision or XLA setting did not
            take effect (``Dense(..., dtype="float32")`` under ``mixed_bfloat16``, or Keras
            turning ``jit_compile`` off), the trial is marked ``not applied`` and not timed,
            the result says so, and that setting is neither claimed as measured nor stored.
        data: the training data, in one of five forms (:mod:`tfaccel.tuning.data`); the
            tuner keeps your pipeline and varies what wraps it:

            * ``(x, y)``: NumPy arrays, or dicts of arrays for named inputs or outputs
              (``({"image": x1, "meta": x2}, y)``); both feeds are searched.
            * a ``tf.data.Dataset`` of ``(x, y)`` elements, single examples or batches
              (batches are unbatched and re-batched at each trial's batch size); each trial
              wraps it in ``tfaccel.data.pipeline(dataset, batch_size, shuffle=False,
              repeat=True, ...)``, not cached unless the space lists ``cache`` values.
            * a generator function (``data=make_examples``, not ``make_examples()``) yielding
              ``(x, y)`` examples: ``tf.data.Dataset.from_generator`` with the signature of
              its first element, then as a dataset.
            * a ``keras.utils.PyDataset``: ``fit`` reads it directly, so its batch size is the
              only one tried and the pipeline knobs do not apply.

            Only arrays can use the numpy feed; for the other forms the space's feed is
            ``pipeline`` (the result's notes say so). A source without a known length is
            counted up to the largest batch the search may try, never further.
        budget_s: seconds the search may take (the search ends sooner when it is done).
        space: what to search (:data:`tfaccel.tuning.space.DEFAULT_SPACE` for the keys left out),
            e.g. ``{"batch_size": [64, 128, 256], "jit": False}``.
        model_name: the name the result is stored under (default: the model's ``name``; pass
            the same model to ``setup(model=...)``).
        batch_cap: the largest batch size (default 1024 for ``batch_size="auto"``); a batch
            never exceeds the number of examples.
        margin: fraction kept below the largest batch that fitted in memory.
        is_oom: which exceptions mean "out of memory" (None, the default:
            ``tf.errors.ResourceExhaustedError`` and ``MemoryError``): the trial is released
            and the search goes on.
        store: True (the default results database), False (do not store), or a database path.
        sample_s: seconds per timed sample.
        final_rounds: interleaved rounds of the final comparison.
        pipeline_kwargs: fixed ``tfaccel.data.pipeline`` arguments (``map_fn``, ``seed``...).
        progress: show a progress bar with the current best on stderr.
        runner: runs the trials (default: TensorFlow); tests inject timings through it.
        batched: whether the elements of a ``tf.data.Dataset`` (or a generator) are batches.
            None decides by rank: inputs of the model's input rank (batch axis included) are
            batches, one less single examples; anything else is an error asking for this
            argument.

    Returns:
        A :class:`~tfaccel.tuning.result.TuneResult`: ``best``, every trial, the calls that
        reproduce it (``setup_kwargs()``, ``compile_kwargs()``, ``pipeline_kwargs()``,
        ``code()``). After Ctrl-C: the best so far, ``interrupted=True``.

    Raises:
        SpaceError: an unknown space key or value.
        BudgetError: the budget cannot pay for one trial (the message says how much can).
        ModelFnError: ``model_fn`` raised or returned no compiled model (with its traceback).
        ModelReusedError: ``model_fn`` returned the same model object on two calls (a
            ``UsageError``: "model_fn must build a new model each call").
        TuneError: data in no form above (a generator object, a string...), bad arrays
            (lengths differ, empty), a dataset whose elements are not (x, y), or the first
            trial failed.

    Example:
        >>> import tfaccel
        >>> def model_fn():
        ...     model = keras.Sequential([...], name="my_net")
        ...     model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        ...     return model
        >>> result = tfaccel.tune(model_fn, (x_train, y_train), budget_s=300)  # doctest: +SKIP
        >>> print(result)                                                       # doctest: +SKIP
        >>> result.setup_kwargs()                                               # doctest: +SKIP
        {'precision': 'mixed_bfloat16', 'jit': False}
    """
    check_callable(
        "is_oom",
        is_oom,
        where="tfaccel.tune()",
        expected="a function of an exception that says whether it means out of memory, or None",
        allow_none=True,
    )
    check_mapping(
        "pipeline_kwargs",
        pipeline_kwargs,
        where="tfaccel.tune()",
        expected="a dict of tfaccel.data.pipeline arguments (map_fn, seed...), or None",
    )
    hooks = Hooks(
        model_fn=model_fn,
        data=data,
        source="tfaccel.tune()",
        model_fn_name="",
        model_name=model_name,
        pipeline_kwargs=dict(pipeline_kwargs) if pipeline_kwargs else None,
    )
    keras = sys.modules.get("keras")  # not imported: model_fn cannot be a Keras model
    if keras is not None and isinstance(model_fn, keras.Model):
        raise UsageError(
            "tfaccel.tune() was given a Keras model where model_fn belongs",
            expected="model_fn: a function that builds, compiles and returns a new keras.Model "
            "(each trial builds its own, in its own precision and settings)",
            received=f"model_fn={type(model_fn).__name__} {shown(getattr(model_fn, 'name', ''))}",
            fix="pass the function that builds it: tfaccel.tune(model_fn=lambda: build_model(), "
            "data=...)",
        )
    if not callable(model_fn):
        raise TuneError(
            "model_fn is not callable",
            expected="a function that builds, compiles and returns a keras.Model",
            received=type(model_fn).__name__,
            fix="pass the function itself (model_fn), not a model (model_fn())",
        )
    return _tune(
        hooks,
        budget_s,
        space,
        batch_cap=batch_cap,
        margin=margin,
        is_oom=is_oom if is_oom is not None else is_oom_error,
        store=store,
        sample_s=sample_s,
        final_rounds=final_rounds,
        progress=progress,
        runner=runner,
        batched=batched,
    )


def tune_script(
    path: str | Path,
    budget_s: float = DEFAULT_BUDGET_S,
    space: Mapping[str, Any] | None = None,
    *,
    args: Sequence[str] = (),
    fit: int = 1,
    timeout: float | None = None,
    started: float | None = None,
    **options: Any,
) -> TuneResult:
    """:func:`tune` on a training script (``tfaccel tune SCRIPT [ARGS...]``).

    A script as written (no ``model_fn``): it runs with ``args`` up to its ``fit``-th
    ``model.fit``, in this process, where its model, compile arguments and data are captured
    and the script stops (nothing trains, its callbacks never run); the trials vary batch size,
    precision, XLA, steps per execution and the feed around the script's own data, and the
    script's own configuration is timed against the winner at the end (see
    :mod:`tfaccel.tuning.script`). Run it from a process that exists for the job (the command
    line does): the script leaves what it sets behind.

    A script defining ``model_fn()`` and ``data`` (or ``data()``), or ``tfaccel_tune()``
    returning ``dict(model_fn=..., data=(x, y), space=..., model_name=..., pipeline_kwargs=...)``
    (see :mod:`tfaccel.tuning.hooks`), is read as before; ``space`` here overrides the
    script's keys. Thread counts in the space are measured in fresh processes.

    Args:
        path: the script.
        budget_s / space / options: as for :func:`tune` (``model_name``, ``batch_cap``,
            ``margin``, ``is_oom``, ``store``, ``sample_s``, ``final_rounds``, ``progress``).
        args: the script's own arguments (a script as written).
        fit: which ``model.fit`` call to tune (2: a fine-tuning fit after a first one).
        timeout: seconds the script may take to reach that ``fit`` (default 300).
        started: ``time.monotonic()`` when the budget began (the command line: its start,
            TensorFlow's import included); default: this call. The budget counts the
            script's run to its ``fit`` and the plan of its memory too, and says how much.

    Example:
        >>> result = tfaccel.tuning.tune_script("train.py", budget_s=600)  # doctest: +SKIP
    """
    entered = time.monotonic() if started is None else started
    check_numbers(budget_s, **options)  # before the script runs: it may import TensorFlow
    script = check_tune_script(path)  # before anything imports TensorFlow
    if not defines_hooks(script):
        with _global_policy_kept():  # the script may set its own, in this process
            return _tune_captured(script, args, budget_s, space, fit, timeout, entered, options)
    if args:
        raise UsageError(
            f"The script {script.name} defines model_fn or tfaccel_tune(), which take no arguments",
            expected="arguments for a script that tune runs as written (without model_fn)",
            received=f"args={list(args)!r}",
            fix="drop the arguments, or give the values inside model_fn()/data()",
        )
    hooks = load_script(path)
    merged = {**(hooks.space or {}), **(space or {})}
    if options.get("model_name"):
        hooks.model_name = options.pop("model_name")
    options.pop("model_name", None)
    return _tune(hooks, budget_s, merged, started=entered, **options)


def _tune_captured(
    script: Path,
    args: Sequence[Any],
    budget_s: float,
    space: Mapping[str, Any] | None,
    fit: int,
    timeout: float | None,
    entered: float,
    options: dict[str, Any],
) -> TuneResult:
    """:func:`tune_script` on a script run as written up to its ``fit``."""
    from tfaccel.tuning.script import capture_script
    from tfaccel.workload import no_fit_explained

    parse_space(space)  # a bad space or database is refused before the script runs
    _check_store(options.get("store", True))
    digest = script_digest(script)  # the content measured (read before it runs)
    with no_fit_explained(
        script,
        what="tune",
        expected="a training script that calls model.fit (tuned where it calls it), or one "
        "defining model_fn() and data(), or tfaccel_tune()",
    ):
        found = capture_script(script, [str(a) for a in args], fit=fit, timeout=timeout)
    found.described["source"] = _script_source(found, script, digest)
    if found.policy != "float32" and found.policy == found.precision:
        if not (space and "precision" in space):  # the script fixes it: not searched
            space = {**(space or {}), "precision": [found.precision]}
            found.described.setdefault("notes", []).append(
                f"the script builds its model in {found.policy} itself (its own "
                "set_global_policy, or its layers' dtype=), which the trials cannot change: "
                "the precision is not searched; without that line tune compares them"
            )
    if options.get("model_name"):
        found.hooks.model_name = options.pop("model_name")
    options.pop("model_name", None)
    try:
        return _tune(found.hooks, budget_s, space, script=found, started=entered, **options)
    except TrialError as exc:  # said of the script, not of a model_fn it does not have
        origin = found.workload.origin if found.workload is not None else Origin()
        command = shlex.join(["python", script.name, *[str(a) for a in args]])
        raise TrialError(
            exc.what,
            expected=f"the script's model to train on its own data, as its {origin.method} at "
            f"{origin.call or script.name} does",
            received=exc.received,
            fix=f"run `{command}`: where it fails the same way, the error is the script's "
            "own (fix it there, then tune); where it trains, this is tfaccel's fault: "
            "report it with this message",
        ) from exc


@contextlib.contextmanager
def _global_policy_kept() -> Iterator[None]:
    """The Keras global dtype policy as it was before the block (Keras's default where Keras
    was not imported yet): a script run inside it may set its own."""
    keras = sys.modules.get("keras")
    before = keras.mixed_precision.global_policy().name if keras is not None else None
    try:
        yield
    finally:
        keras = sys.modules.get("keras")
        if keras is not None:
            keras.mixed_precision.set_global_policy(before or keras.config.floatx())


def _script_source(found: ScriptWorkload, script: Path, digest: str) -> dict[str, Any]:
    """What :func:`tfaccel.tuning.record.script_record` stores of the script measured."""
    origin = found.described.get("origin") or {}
    return {
        "path": str(script.resolve()),
        "sha256": digest,
        "args": [str(a) for a in origin.get("args") or ()],
        "fit": int(origin.get("fit", 1)),
        "model_name": (found.described.get("model") or {}).get("name"),
        # unknown when the trials did not take the script's own policy as it is
        "precision": found.precision if found.policy == found.precision else None,
        "batch_size": found.batch_size,
        "jit": found.jit,
        "steps_per_execution": found.steps_per_execution,
    }


def tune_model(
    name: str = "reference_cnn",
    budget_s: float = DEFAULT_BUDGET_S,
    space: Mapping[str, Any] | None = None,
    *,
    smoke: bool = False,
    examples: int | None = None,
    **options: Any,
) -> TuneResult:
    """:func:`tune` on a tfaccel reference model and synthetic data (``tfaccel tune --model``).

    Args:
        name: ``reference_cnn`` (``reference-cnn``), ``mlp`` or ``resnet20``.
        budget_s / space / options: as for :func:`tune`.
        smoke: the tiny model on 512 examples (checks the machinery; figures mean nothing).
        examples: synthetic examples (default 10,000).

    Example:
        >>> result = tfaccel.tuning.tune_model("reference_cnn", budget_s=300)  # doctest: +SKIP
    """
    check_numbers(budget_s, **options)  # before the synthetic data is made
    hooks = reference_hooks(name, smoke=smoke, examples=examples)
    options.pop("model_name", None)
    return _tune(hooks, budget_s, space, **options)


def _tune(
    hooks: Hooks,
    budget_s: float,
    space: Mapping[str, Any] | None,
    *,
    batch_cap: int | None = None,
    margin: float = DEFAULT_MARGIN,
    is_oom: Callable[[BaseException], bool] = is_oom_error,
    store: StoreTarget = True,
    sample_s: float = DEFAULT_SAMPLE_S,
    final_rounds: int = DEFAULT_FINAL_ROUNDS,
    progress: bool = True,
    runner: Runner | None = None,
    batched: bool | None = None,
    script: ScriptWorkload | None = None,
    started: float | None = None,
) -> TuneResult:
    """Check everything, search in this process, search threads in workers, store; for a
    script as written, time its own configuration against the winner.

    ``started`` (``time.monotonic()``): when the budget began, where that was before this
    call (a script's run to its ``fit``); the seconds since then are spent from the budget."""
    entered = time.monotonic() if started is None else started
    settings = _settings(budget_s, sample_s, final_rounds, batch_cap, margin)
    if batched is not None and not is_bool(batched):
        raise _bad_option("batched", batched, "True, False or None (decided by rank)", True)
    batched = None if batched is None else bool(batched)
    if runner is not None and not all(
        callable(getattr(runner, method, None)) for method in ("prepare", "sample", "release")
    ):
        raise _bad_option(
            "runner",
            runner,
            "None (TensorFlow), or an object with prepare, sample and release",
            None,
        )
    if script is not None and batched is None:
        batched = script.batched
    parsed = parse_space(space)
    data = classify(hooks.data)
    threads = _thread_values(parsed, hooks, data)
    # The database is opened (created when missing) once every other input is known good and
    # before the search, so a bad path fails in a second, not after minutes of searching.
    _check_store(store)
    data = resolve(
        data,
        batched=batched,
        count_limit=_count_limit(parsed, batch_cap),
        build_model=functools.partial(_model_for_ranks, hooks),
    )
    parsed, data_notes = fit_space(parsed, data, dict(space or {}))
    if data.kind == "pydataset" and hooks.pipeline_kwargs:
        data_notes.append("pipeline_kwargs not used: fit reads the PyDataset as it is")
    tf_runner = None
    if runner is None:
        tf_runner = _tf_runner(hooks, parsed, data, sample_s)
        runner = tf_runner
    hardware = functools.cache(inventory.current)  # probed at most once, when first needed
    resolved = _resolve_precision(parsed, hardware)
    plan_note = None
    if tf_runner is not None and resolved.batch_size == "auto":
        planned, plan_note = _planned_batch(
            hooks, str(resolved.precision[0]), hardware(), script=script
        )
        settings = dataclasses.replace(settings, batch_planned=planned)
    baseline = baseline_config(script, resolved) if script is not None else None
    full = settings
    spent = time.monotonic() - entered  # the script to its fit, the data, the plan
    if spent >= 1.0:
        settings = dataclasses.replace(
            settings, budget_s=max(0.0, settings.budget_s - spent), spent_s=spent
        )
    if baseline is not None:  # time kept for the baseline against the winner
        # both are held when the search ends (the baseline is screened first and kept
        # prepared): the interleaved rounds and one sample of slack
        reserve = (settings.final_rounds * 2 + 1) * settings.sample_s
        searched = max(min(settings.min_budget_s, settings.budget_s), settings.budget_s - reserve)
        settings = dataclasses.replace(
            settings, budget_s=searched, reserved_s=settings.budget_s - searched
        )
    began = time.monotonic()
    with _policy_kept(), _progress_bar(progress) as on_event:
        outcome = search(
            resolved,
            runner,
            dataset_size=data.examples,
            settings=settings,
            is_oom=is_oom,
            on_event=on_event,
            first=baseline,
        )
        device = str(getattr(runner, "device", "cpu"))
        name = hooks.model_name or getattr(runner, "model_name", None) or "model"
        verdict = None
        if baseline is not None and outcome.decision is not None and not outcome.interrupted:
            verdict = against_baseline(outcome, runner, baseline, full, is_oom=is_oom)
    if tf_runner is not None:
        tf_runner.close()
    outcome.notes[:0] = [*data.notes, *data_notes]
    if plan_note:
        outcome.notes.insert(0, plan_note)
    result = _result(outcome, name, device, resolved, full.budget_s)
    result.model_fingerprint = getattr(runner, "model_fingerprint", None)
    if script is not None:
        result.baseline = baseline
        result.baseline_verdict = verdict
        result.not_run = list(script.not_run)
        result.workload = {**script.described, "models": dict(script.models)}
    if threads and result.best is not None and not result.interrupted:
        _thread_search(result, hooks, threads, settings, began)
    result.elapsed_s = time.monotonic() - (began if started is None else entered)
    if settings.spent_s:
        what = "the script's run to its fit" if script else "the script's loading"
        result.notes.insert(
            0,
            f"budget: {settings.spent_s:.1f} s of the {full.budget_s:g} s went before the first "
            f"trial: TensorFlow's import, {what} (its data included) and the plan of its memory",
        )
    _store(result, store, hardware)
    return result


def _planned_batch(
    hooks: Hooks, precision: str, inv: Inventory, script: ScriptWorkload | None = None
) -> tuple[int | None, str]:
    """The largest batch :func:`tfaccel.plan` predicts on the device the trials train on, and
    a note for the result (None and why when the plan cannot be made). A script's model in its
    own precision is planned as ``tfaccel plan SCRIPT`` plans it (its step of its own, its
    inputs shaped like its data)."""
    device = training_device(inv)
    if device.usable_bytes is None:
        return None, f"memory search: {device.words}, so it grew from batch 32"
    model: Any = hooks.model_fn
    optimizer: Any = None
    try:
        if script is not None and script.workload is not None and precision == script.precision:
            model, optimizer, _ = workload_model(script.workload)
            precision_arg: str | None = None
        else:
            precision_arg = precision
        advice = memory_advice(
            model,
            1,
            device.usable_bytes,
            precision=precision_arg,
            optimizer=optimizer,
            rules=device.rules,
        )
    except Exception as exc:  # the search finds the limit by trials anyway
        return None, f"memory search: no plan ({type(exc).__name__}: {exc}), grew from batch 32"
    if advice.max_batch < 1:
        return None, f"memory search: the plan predicts not even batch 1 fits on {device.words}"
    return advice.max_batch, (
        f"memory search: the plan predicts the largest batch that fits is {advice.max_batch:,} on "
        f"{device.words} (tfaccel.plan, a prediction)"
    )


def _tf_runner(hooks: Hooks, space: Space, data: TuneData, sample_s: float) -> Any:
    if "pipeline" in space.feed and data.kind != "pydataset":
        resolve_pipeline()  # a missing module fails now, not in the middle of the search
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return TfRunner(
        hooks.model_fn,
        data.x,
        data.y,
        sample_s=sample_s,
        pipeline_kwargs=hooks.pipeline_kwargs,
        model_fn_name=hooks.model_fn_name or None,
        data=data,
    )


def _count_limit(space: Space, batch_cap: int | None) -> int:
    """How many examples of a source of unknown size are counted: the largest batch the
    search may try (a larger source makes no difference to it)."""
    cap = batch_cap if batch_cap is not None else DEFAULT_BATCH_CAP
    explicit = () if isinstance(space.batch_size, str) else space.batch_size
    return max((cap, *explicit))


def _model_for_ranks(hooks: Hooks) -> Any:
    """The model in float32, built once to read its input ranks (is a dataset batched?)."""
    return build_model(hooks.model_fn, "float32", name=hooks.model_fn_name or None)


def check_numbers(
    budget_s: float,
    *,
    sample_s: float = DEFAULT_SAMPLE_S,
    final_rounds: int = DEFAULT_FINAL_ROUNDS,
    batch_cap: int | None = None,
    margin: float = DEFAULT_MARGIN,
    **_others: Any,
) -> SearchSettings:
    """Check the numbers of a search (what :func:`_tune` checks first), before the model and
    data are loaded.

    Raises:
        TuneError: a number is not valid; BudgetError: the budget cannot pay for one trial.
    """
    return _settings(budget_s, sample_s, final_rounds, batch_cap, margin)


def _check_store(store: StoreTarget) -> None:
    """Open the results database (created when missing) and close it again.

    Raises:
        TuneError: ``store`` is not True, False or a path; StoreError: the database cannot
            be opened or created (a directory, an unwritable place, another program's file).
    """
    if store is False:
        return
    if store is not True and not isinstance(store, (str, os.PathLike)):
        raise TuneError(
            f"The argument {argument('store', store)} is not valid",
            expected="True (the default results database), False (do not store), or the path "
            "of a database file",
            received=type(store).__name__,
            fix=f"pass {argument('store', 'results.sqlite')}",
        )

    ResultsStore(None if store is True else store).close()  # as given: Path drops a "/"


def _settings(
    budget_s: float, sample_s: float, final_rounds: int, batch_cap: int | None, margin: float
) -> SearchSettings:
    _check_number("sample_s", sample_s, "a number of seconds > 0", 1.0, lambda v: v > 0)
    _check_number("margin", margin, "a fraction in [0, 1)", 0.1, lambda v: 0 <= v < 1)
    if not is_int(final_rounds) or final_rounds < 1:
        raise _bad_option("final_rounds", final_rounds, "an integer >= 1", 5)
    if batch_cap is not None and (not is_int(batch_cap) or batch_cap < 1):
        raise _bad_option("batch_cap", batch_cap, "an integer >= 1, or None", 1024)
    _check_number("budget_s", budget_s, "a number of seconds > 0", 300, lambda v: v > 0)
    settings = SearchSettings(
        budget_s=float(budget_s),
        sample_s=float(sample_s),
        final_rounds=int(final_rounds),
        batch_cap=None if batch_cap is None else int(batch_cap),
        margin=float(margin),
    )
    if budget_s < settings.min_budget_s:
        needed = math.ceil(settings.min_budget_s)
        raise BudgetError(
            f"A budget of {budget_s:g} s is too small for one trial",
            expected=f"at least {needed} s: building the model, its first (traced) steps and "
            f"one timed sample of {sample_s:g} s (a trial takes about 4 samples' time); a "
            "useful search of the default space takes minutes",
            received=argument("budget_s", budget_s),
            fix=f"pass a budget of {needed} s or more ({argument('budget_s', needed)}); "
            f"{math.ceil(DEFAULT_BUDGET_S)} s searches the default space of a small model",
        )
    return settings


def _check_number(
    name: str, value: Any, expected: str, example: float, ok: Callable[[float], bool]
) -> None:
    if not is_real(value) or not in_range(value) or not ok(value):
        raise _bad_option(name, value, expected, example)


def _bad_option(name: str, value: Any, expected: str, example: object) -> TuneError:
    return TuneError(
        f"The argument {argument(name, value)} is not valid",
        expected=expected,
        received=repr(value),
        fix=f"pass, for example, {argument(name, example)}",
    )


def _thread_values(space: Space, hooks: Hooks, data: TuneData) -> tuple[Any, ...]:
    """The thread settings to time in workers (empty: only TensorFlow's default)."""
    if all(value is None for value in space.threads):
        return ()
    if hooks.recipe and not data.arrays:
        raise SpaceError(
            f"Thread counts cannot be searched with a {data.kind} as the training data",
            expected="threads searched with (x, y) arrays: each thread setting runs in a fresh "
            "process that rebuilds the data, which only arrays support",
            received="threads=" + ", ".join(repr(v) for v in space.threads),
            fix="drop 'threads' from the space, or let data() return (x, y) arrays",
        )
    if not hooks.recipe:
        raise SpaceError(
            "Thread counts cannot be searched by tfaccel.tune(model_fn, data)",
            expected="threads searched through a script or a reference model, whose model a "
            "fresh process can rebuild (TensorFlow fixes its thread pools when it starts, so "
            "each setting needs its own process)",
            received="threads=" + ", ".join(repr(v) for v in space.threads),
            fix="use tfaccel.tuning.tune_script('train.py', space={'threads': [...]}) or "
            "tfaccel tune train.py --space threads=default,2:1; or drop 'threads'",
        )
    return space.threads


def _resolve_precision(space: Space, hardware: Callable[[], Inventory]) -> Space:
    if not isinstance(space.precision, str):
        return space
    from dataclasses import replace

    return replace(space, precision=hardware_precisions(hardware()))


class _policy_kept:
    """Keep the caller's Keras global dtype policy (trials and clear_session change it)."""

    def __enter__(self) -> None:
        import sys

        keras = sys.modules.get("keras")
        self.saved = keras.mixed_precision.global_policy().name if keras is not None else None

    def __exit__(self, *exc: object) -> None:
        import sys

        keras = sys.modules.get("keras")
        if keras is not None:
            keras.mixed_precision.set_global_policy(self.saved or "float32")


class _progress_bar:
    """A rich progress bar on stderr (elapsed time against the budget, the current best)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.progress: Any = None
        self.task: Any = None

    def __enter__(self) -> Callable[[SearchEvent], None] | None:
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.table import Column

        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]tfaccel tune[/bold]"),
            BarColumn(),
            # the time is never cut; the description wraps rather than ending in "..."
            TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
            TextColumn("{task.description}", table_column=Column(overflow="fold")),
            console=Console(stderr=True),
            transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task("starting", total=None)
        return self.update

    def update(self, event: SearchEvent) -> None:
        from rich.markup import escape

        text = event.phase
        if event.best is not None:
            label, rate = event.best
            text += f" | best: {label} {rate:.0f}/s"
        self.progress.update(
            self.task,
            total=event.budget_s,
            completed=min(event.elapsed_s, event.budget_s),
            description=escape(text),
        )

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()


def _result(
    outcome: SearchOutcome, name: str, device: str, space: Space, budget_s: float
) -> TuneResult:
    decision = outcome.decision
    return TuneResult(
        best=decision.winner if decision else None,
        reason=decision.reason if decision else "nothing was timed",
        trials=outcome.trials,
        model_name=name,
        device=device,
        space=space,
        budget_s=budget_s,
        elapsed_s=outcome.elapsed_s,
        interrupted=outcome.interrupted,
        batch_search=outcome.batch_search,
        final_rounds=outcome.final_rounds,
        notes=list(outcome.notes),
    )


def _thread_search(
    result: TuneResult,
    hooks: Hooks,
    values: tuple[Any, ...],
    settings: SearchSettings,
    began: float,
) -> None:
    """Time the winner under each thread setting in worker processes; keep the best."""
    assert result.best is not None
    winner_trial = result.best_trial
    rung = (winner_trial.last_rung or 0) + 1 if winner_trial else 1
    try:
        trials = thread_stage(
            hooks.recipe,
            result.best,
            values,
            rung=rung,
            sample_s=settings.sample_s,
            remaining=lambda: settings.budget_s - (time.monotonic() - began),
        )
    except KeyboardInterrupt:
        result.interrupted = True
        result.notes.append("interrupted (Ctrl-C) during the thread search: threads not tuned")
        return
    result.trials += trials
    timed = {t.config: t.summary for t in trials if t.summary is not None}
    if not timed:
        result.notes.append("no thread setting could be timed (budget or worker errors)")
        return
    decision = pick_winner(timed)
    result.best = decision.winner
    result.reason = f"{result.reason}; threads (fresh processes): {decision.reason}"


def _store(result: TuneResult, store: StoreTarget, hardware: Callable[[], Inventory]) -> None:
    if store is False or result.best is None:
        return

    path = None if store is True else Path(store)
    try:
        record(result, path, inv=hardware())
    except StoreError as exc:
        result.notes.append(f"not stored: {exc.what}")
