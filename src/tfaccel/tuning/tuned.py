"""Run an unchanged script with the configuration ``tfaccel tune`` stored for its model.

``tfaccel run --tuned train.py ARGS...`` (:func:`prepare`, then :func:`applied` around the
script's run):

1. **Which model.** The stored winner is keyed by the architecture fingerprint of the model
   (:mod:`tfaccel.architecture`), which exists only once the script has built it.

   * **The tune's script record first.** ``tfaccel tune`` stores, with its run, the script it
     measured: the SHA-256 of its content, its arguments, which ``fit``, the fingerprint of
     the model it built and that model's own precision (:func:`tfaccel.tuning.record.
     script_record`). When this script's content and arguments are the recorded ones, the
     recorded fingerprint's winner is looked up and, if it asks for no precision change,
     nothing has to be set before the script builds its model: the run starts at once, with
     no first pass, and the model is checked at its ``fit`` (a model of another fingerprint
     is left as the script has it). A script with its own training loop (marked, no ``fit``)
     whose winner needs no precision change gets nothing: it is said, and it runs as written.
   * **Else the first pass.** With no matching record (an edited script, other arguments, a
     result stored before the records), or when the winner's precision is not the script's,
     the script is first run up to its first ``fit`` (:func:`tfaccel.workload.capture`:
     nothing trains, the script stops there), the fingerprint of the model it builds with
     these arguments is read, and the newest complete tune result of that architecture on
     this machine and device is looked up.
2. **The precision** is the Keras global policy, which a layer reads when it is built: it has
   to be set before the script builds its model, so it is set between that first pass and the
   real run, which then builds the model under it from its first line. It is never set from a
   record alone: an edited script could not be caught until its layers were built.
3. **At ``fit``**, on a model of that fingerprint only: ``jit_compile`` and
   ``steps_per_execution`` (set on the compiled model where they differ from its own, its
   train function then rebuilt; a model already as the winner has it is left untouched), the
   pipeline feed (``tfaccel.data.pipeline`` with the tuned knobs, as the tune fed it: arrays;
   a ``tf.data.Dataset`` unbatched into it and batched again, its maps and shuffle kept, its
   batches and steps per epoch kept where its batches come from its ``.batch()``) and, with
   ``--tuned=all`` only, the batch size (it changes the optimisation: scale the learning rate
   with it, linearly, with a warm-up). What took effect is read back from the model.

The run looks its results up by the machine's fingerprint alone
(:func:`tfaccel.inventory.current_fingerprint`), in one opening of the results database, and
imports neither the search (:mod:`tfaccel.tuning.api`), nor planning, nor the doctor.

A setting the tune did not compare (one value searched) is not stored, and stays the
script's. With no stored result the script runs as written, after a message saying how to
get one.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tfaccel import inventory, store
from tfaccel.architecture import fingerprint, short
from tfaccel.core.errors import TfaccelError
from tfaccel.tuning.record import script_digest
from tfaccel.tuning.space import OWN_FEED
from tfaccel.workload import DEFAULT_TIMEOUT_S, CaptureError, capture
from tfaccel.workload import data as data_forms
from tfaccel.workload.keras_fit import replaced_fit
from tfaccel.workload.record import build_like_fit

if TYPE_CHECKING:
    from tfaccel.store import ResultsStore, RunRecord

# What runs before the script, kept light: it imports the tuning package's own modules and the
# workload, not the search (tuning.api imports planning and the doctor); the trials' device
# name and the first pass's settled runtime are imported where they are used.

__all__ = [
    "MODES",
    "ScriptRecord",
    "StoredWinner",
    "TunedRun",
    "applied",
    "find_script_record",
    "find_winner",
    "prepare",
]

MODES = ("on", "all")
"""``--tuned`` (everything but the batch size) and ``--tuned=all`` (the batch size too)."""


@dataclass
class StoredWinner:
    """The tune result stored for a model on this machine.

    Attributes:
        config: the winner's stored configuration (``precision`` and ``jit`` only when the
            tune compared them).
        model_name / model_fingerprint: what it was stored under.
        run_id / db_path / date: where and when.
        images_per_s: the winner's median, with its interquartile range ``(q1, q3)``.
        speedup: ``{"ratio", "baseline", "rung"}``: the winner against the configuration it
            was timed with (the script's own, for a script), or None (not recorded).
        verdict: the script's own configuration against the winner (``kept``, ``ratio``,
            ``noise``, ``says``), or None.
    """

    config: dict[str, Any]
    model_name: str
    model_fingerprint: str
    run_id: int
    db_path: str
    date: str
    images_per_s: float
    iqr: tuple[float, float]
    speedup: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None

    def measured(self) -> str:
        """One line: from which measurement, its speedup and noise."""
        low, high = self.iqr
        noise = (high - low) / self.images_per_s / 2 if self.images_per_s else 0.0
        text = (
            f"tune run {self.run_id} of {self.date} in {self.db_path}: "
            f"{self.images_per_s:.1f} images/s (+-{noise * 100:.1f}%)"
        )
        verdict = self.verdict or {}
        if verdict.get("kept"):
            return text + "; the tune kept the script's own configuration"
        ratio = verdict.get("ratio") or (self.speedup or {}).get("ratio")
        if ratio:
            against = (self.speedup or {}).get("baseline", "the script's own configuration")
            said = f"; x{ratio:.2f} over {against}"
            if verdict.get("noise") is not None:
                said += f" (noise +-{verdict['noise'] * 100:.1f}%)"
            text += said
        return text


@dataclass
class TunedRun:
    """What ``run --tuned`` found before the run, and what it applied during it.

    Attributes:
        mode: ``on`` or ``all``.
        fit: the script's ``fit`` call the winner was looked up at (1: the first); the
            winner applies from that call on, to the model of that fingerprint.
        winner: the stored result, or None.
        model_fingerprint: the fingerprint of the model the script builds (None: not captured).
        script: the script's own settings as captured (``precision``, ``batch_size``,
            ``jit``, ``steps_per_execution``).
        precision: the global policy set before the run (None: left as the script's).
        found_by: how the model was found: ``first pass`` (the script run up to its
            ``fit`` before the run), ``record`` (the tune's script record of this script's
            content and arguments: no first pass) or None (not found).
        own_loop: the script trains in its own loop (no ``fit``), known from the record:
            nothing is applied to it.
        says: why nothing is applied, when nothing is.
        took_effect: what was read back from the model at each tuned ``fit``.
        messages: the lines printed (also to stderr).
    """

    mode: str
    fit: int = 1
    winner: StoredWinner | None = None
    model_fingerprint: str | None = None
    script: dict[str, Any] = field(default_factory=dict)
    precision: str | None = None
    found_by: str | None = None
    own_loop: bool = False
    says: str = ""
    took_effect: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        winner = self.winner
        return {
            "mode": self.mode,
            "fit": self.fit,
            "model_fingerprint": self.model_fingerprint,
            "script": self.script,
            "winner": None
            if winner is None
            else {
                "config": winner.config,
                "model_name": winner.model_name,
                "run_id": winner.run_id,
                "db_path": winner.db_path,
                "date": winner.date,
                "images_per_s": winner.images_per_s,
                "iqr": list(winner.iqr),
                "speedup": winner.speedup,
                "verdict": winner.verdict,
            },
            "precision": self.precision,
            "found_by": self.found_by,
            "own_loop": self.own_loop,
            "says": self.says,
            "took_effect": self.took_effect,
        }


def find_winner(
    model_fingerprint: str,
    *,
    device: str,
    path: str | Path | None = None,
    machine: str | None = None,
) -> StoredWinner | None:
    """The newest complete tune result of a model of this architecture, on this machine
    (``machine``: the digest of its fingerprint) and device; None when there is none.

    Raises:
        StoreError: the database is corrupt or locked.
    """
    db = store.open_read_only(path)
    if db is None:
        return None
    digest = machine or inventory.current_fingerprint().digest
    with db:
        return _winner_in(db, _tune_runs(db, digest), model_fingerprint, device)


def _tune_runs(db: ResultsStore, machine: str) -> list[RunRecord]:
    """The complete tune runs of this machine, newest first (the lookups read no other)."""
    return [
        run
        for run in db.runs(machine, limit=500)
        if run.status == "complete" and run.details.get("kind") == "tune"
    ]


def _winner_in(
    db: ResultsStore, runs: Sequence[RunRecord], model_fingerprint: str, device: str
) -> StoredWinner | None:
    for run in runs:
        for result in db.results(run.id):
            if result.model_fingerprint != model_fingerprint:
                continue
            if result.config.get("device") != device:
                continue
            return StoredWinner(
                config=dict(result.config),
                model_name=result.benchmark,
                model_fingerprint=model_fingerprint,
                run_id=run.id,
                db_path=str(db.path),
                date=run.finished_at or run.started_at,
                images_per_s=result.median,
                iqr=(result.q1, result.q3),
                speedup=run.details.get("speedup"),
                verdict=run.details.get("baseline_verdict"),
            )
    return None


@dataclass
class ScriptRecord:
    """The script a tune measured, as its run stored it (:func:`tfaccel.tuning.record.
    script_record`), with the run it came from.

    Attributes:
        precision: the model's own dtype policy, or None (the script set one the trials did
            not take as it is).
        settings: the script's other settings: ``model_name``, ``batch_size``, ``jit``,
            ``steps_per_execution``.
    """

    run_id: int
    model_fingerprint: str
    precision: str | None
    fit: int
    settings: dict[str, Any]


def find_script_record(
    script: str | Path,
    args: Sequence[str] = (),
    *,
    fit: int = 1,
    path: str | Path | None = None,
    machine: str | None = None,
) -> ScriptRecord | None:
    """The newest complete tune run on this machine whose script record has this script's
    content (SHA-256) and these arguments, tuned at this ``fit`` (or marked: its own loop);
    None when there is none (results stored before script records included)."""
    db = store.open_read_only(path)
    if db is None:
        return None
    machine = machine or inventory.current_fingerprint().digest
    with db:
        return _record_in(_tune_runs(db, machine), script, args, fit)


def _record_in(
    runs: Sequence[RunRecord], script: str | Path, args: Sequence[str], fit: int
) -> ScriptRecord | None:
    try:
        digest = script_digest(script)
    except OSError:
        return None
    wanted_args = [str(a) for a in args]
    for run in runs:
        found = run.details.get("script")
        if not isinstance(found, dict) or found.get("sha256") != digest:
            continue
        if list(found.get("args") or []) != wanted_args:
            continue
        recorded_fit = int(found.get("fit", 1))
        if recorded_fit not in (fit, 0) or not found.get("model_fingerprint"):
            continue
        return ScriptRecord(
            run_id=run.id,
            model_fingerprint=str(found["model_fingerprint"]),
            precision=found.get("precision"),
            fit=recorded_fit,
            settings={
                "model_name": str(found.get("model_name") or ""),
                "batch_size": found.get("batch_size"),
                "jit": bool(found.get("jit", False)),
                "steps_per_execution": int(found.get("steps_per_execution") or 1),
            },
        )
    return None


def prepare(
    script: str,
    args: Sequence[str] = (),
    *,
    mode: str = "on",
    db: str | Path | None = None,
    fit: int = 1,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    out: TextIO | None = None,
) -> TunedRun:
    """Find the stored winner for the model ``script`` builds and set its precision.

    When a tune recorded this script (same content, same arguments: :func:`find_script_record`)
    and the winner needs no precision change, that record gives the fingerprint and nothing
    runs before the script: its model is checked at its ``fit``. Otherwise runs the script up
    to its ``fit`` in this process (nothing trains), reads the fingerprint of its model, looks
    the winner up and, when it has a precision other than the script's, sets the Keras global
    policy (after clearing Keras' session: the real run starts clean).

    A script that does not reach its ``fit`` here (it reads standard input, exits, raises or
    runs past ``timeout`` first) is said and left to run as written.

    Raises:
        StoreError: the database cannot be read.
    """
    stream = out if out is not None else sys.stderr
    tuned = TunedRun(mode=mode, fit=fit)
    name = Path(script).name
    how = "tfaccel tune " + (f"--db {db} " if db is not None else "")
    how += (f"--fit {fit} " if fit != 1 else "") + name
    how += "".join(f" {a}" for a in args)
    opened: ResultsStore | None = None
    runs: list[Any] = []
    if db is not None and not Path(db).exists():
        says = f"the results database {db} does not exist yet; to get a result: {how}"
    else:
        opened, runs, unreadable = _open_runs(db)
        says = (
            f"no tune result stored for this machine; to get one: {how}"
            if unreadable is None
            else f"{unreadable}; to get a result in a new one: {how}"
        )
    if opened is None:  # nothing to look up: said, and the script runs as written
        tuned.says = says
        _say(tuned, stream, f"{says}. Running {name} as written.")
        return tuned
    with opened:  # opened once, for every lookup (read only: the first pass may run meanwhile)
        if _from_record(tuned, script, args, db=opened, runs=runs, stream=stream):
            return tuned
        if not _first_pass(tuned, script, args, timeout=timeout, stream=stream):
            return tuned
        from tfaccel.tuning.trials import device_name

        device = device_name()
        assert tuned.model_fingerprint is not None
        winner = _winner_in(opened, runs, tuned.model_fingerprint, device)
    if winner is None:
        tuned.says = (
            f"no tune result stored for the model {tuned.script['model_name']!r} "
            f"(architecture {short(tuned.model_fingerprint)}) on this machine's {device}; "
            f"to get one: {how}"
        )
        _say(tuned, stream, f"{tuned.says}. Running {name} as written.")
        return tuned
    tuned.winner = winner
    _say(tuned, stream, f"tuned configuration for {winner.model_name!r}: {winner.measured()}")
    wanted = winner.config.get("precision")
    if wanted and wanted != tuned.script["precision"]:
        import keras

        keras.mixed_precision.set_global_policy(wanted)
        tuned.precision = str(wanted)
    return tuned


def _open_runs(db: str | Path | None) -> tuple[ResultsStore | None, list[Any], str | None]:
    """The results database opened read only with this machine's tune runs in it (the
    lookups read only the runs of its fingerprint, not the whole Inventory); ``(None, [],
    None)`` where there are none (the default database not created yet, no run), and what
    made the default database unreadable in the third place.

    Raises:
        StoreError: ``db`` was given and cannot be read.
    """
    try:
        opened = store.open_read_only(db)
        if opened is None:
            return None, [], None
        try:
            runs = _tune_runs(opened, inventory.current_fingerprint().digest)
        except BaseException:
            opened.close()
            raise
    except TfaccelError as exc:
        if db is not None:
            raise
        return None, [], f"the results database cannot be read ({exc.what}: {exc.received})"
    if not runs:
        opened.close()
        return None, [], None
    return opened, runs, None


def _first_pass(
    tuned: TunedRun,
    script: str,
    args: Sequence[str],
    *,
    timeout: float | None,
    stream: TextIO,
) -> bool:
    """Run the script up to its ``fit`` (nothing trains), read its model's fingerprint and
    settings into ``tuned``; False (said) when it does not get there."""
    import gc

    import keras

    from tfaccel.tuning.script import settled_runtime

    try:
        with settled_runtime():
            workload = capture(script, args, fit=tuned.fit, timeout=timeout, command="run")
    except CaptureError as exc:  # its own run shows the same error, or gets its keyboard
        tuned.says = f"the model could not be read before the run ({exc.what}); nothing applied"
        _say(tuned, stream, f"{tuned.says}. Running {Path(script).name} as written.")
        return False
    model = workload.model
    # built as its first fit step builds it (a subclassed model not called yet), as tune's
    # trials build it before they fingerprint it
    build_like_fit(model, workload.first_batch())
    policy = getattr(getattr(model, "dtype_policy", None), "name", None) or "float32"
    tuned.model_fingerprint = fingerprint(model)
    tuned.found_by = "first pass"
    tuned.script = {
        "model_name": str(getattr(model, "name", "")),
        "precision": str(policy),
        "batch_size": workload.batch_size,
        "jit": bool(getattr(model, "jit_compile", False)),
        "steps_per_execution": int(getattr(model, "steps_per_execution", 1) or 1),
    }
    del model, workload
    keras.backend.clear_session()  # the run numbers its layers as a fresh process would
    gc.collect()
    return True


def _from_record(
    tuned: TunedRun,
    script: str,
    args: Sequence[str],
    *,
    db: ResultsStore,
    runs: Sequence[RunRecord],
    stream: TextIO,
) -> bool:
    """Fill ``tuned`` from the tune's script record of this script, when one matches and its
    winner needs no precision change (nothing to set before the script builds its model);
    False: the first pass is needed."""
    found = _record_in(runs, script, args, tuned.fit)
    if found is None or found.precision is None:
        return False
    from tfaccel.tuning.trials import device_name

    winner = _winner_in(db, runs, found.model_fingerprint, device_name())
    wanted = None if winner is None else winner.config.get("precision")
    if winner is None or (wanted and wanted != found.precision):
        return False
    tuned.winner = winner
    tuned.model_fingerprint = found.model_fingerprint
    settings = dict(found.settings)
    tuned.script = {"model_name": settings.pop("model_name"), "precision": found.precision}
    tuned.script.update(settings)
    tuned.found_by = "record"
    _say(
        tuned,
        stream,
        f"tuned configuration for {winner.model_name!r}: {winner.measured()}; found by the "
        f"script record of tune run {found.run_id} (this script's content and arguments, "
        "unchanged): no first pass, the model is checked at its fit",
    )
    if found.fit == 0:
        tuned.own_loop = True
        tuned.says = (
            f"the script trains in its own loop (no model.fit) and the winner keeps its "
            f"precision ({found.precision}): nothing applies (XLA, steps per execution, the "
            "feed and the batch size are applied at model.fit)"
        )
        _say(tuned, stream, f"{tuned.says}. Running {Path(script).name} as written.")
    return True


@contextlib.contextmanager
def applied(tuned: TunedRun, *, out: TextIO | None = None) -> Iterator[TunedRun]:
    """While the script runs: its ``fit`` calls on the tuned model get the winner's XLA,
    steps per execution, feed and (``all``) batch size; what took effect is recorded."""
    stream = out if out is not None else sys.stderr
    if tuned.winner is None or tuned.model_fingerprint is None or tuned.own_loop:
        yield tuned
        return

    calls = 0

    def make(original: Any, signature: inspect.Signature) -> Any:
        def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            bound = signature.bind(self, *args, **kwargs)
            arguments = dict(bound.arguments)
            arguments.pop("self", None)
            if calls < tuned.fit:  # before the fit the tune measured (fine-tuning: --fit N)
                return original(self, **arguments)
            try:
                if not getattr(self, "built", True):
                    arguments = _build_on_first_batch(self, arguments)
                same = fingerprint(self) == tuned.model_fingerprint
            except Exception:
                same = False
            if same:
                arguments = _apply(tuned, self, arguments, stream)
            elif not tuned.took_effect:
                _say(
                    tuned,
                    stream,
                    "this fit's model is not the one tuned: left as the script has it",
                )
            return original(self, **arguments)

        return fit

    with replaced_fit(make):
        yield tuned
    if calls == 0:  # its own training loop (marked): no fit to apply the rest at
        applies = (
            f"only the precision ({tuned.precision}) applied"
            if tuned.precision
            else f"nothing applied (the precision stayed the script's, "
            f"{tuned.script.get('precision')})"
        )
        _say(
            tuned,
            stream,
            f"the script called no model.fit (its own training loop): {applies}; XLA, steps "
            "per execution, the feed and the batch size are applied at model.fit",
        )


def _apply(
    tuned: TunedRun, model: Any, arguments: dict[str, Any], stream: TextIO
) -> dict[str, Any]:
    """Set the winner's settings on ``model`` and this ``fit``'s arguments; say what changed."""
    assert tuned.winner is not None
    config = tuned.winner.config
    changed: list[str] = []
    kept: list[str] = []
    # only what differs is set: a model already as the winner has it (the script's own
    # configuration won) keeps its train function, traced or not, exactly as without --tuned
    rebuild = False
    if "jit" in config:
        if bool(getattr(model, "jit_compile", False)) != bool(config["jit"]):
            model.jit_compile = bool(config["jit"])
            rebuild = True
    else:
        kept.append("XLA (not compared by the tune)")
    spe = int(config.get("steps_per_execution") or 1)
    if int(getattr(model, "steps_per_execution", 1) or 1) != spe:
        model.steps_per_execution = spe
        if hasattr(model, "_steps_per_execution") and hasattr(model._steps_per_execution, "assign"):
            model._steps_per_execution.assign(spe)
        rebuild = True
    if rebuild:
        model.train_function = None  # built again with these settings
    batch = _batch_of(arguments)
    x = arguments.get("x")
    feed = config.get("feed")
    batching = _dataset_batching(x) if feed == "pipeline" else None
    wanted_batch = int(config.get("batch_size") or 0)
    if tuned.mode == "all" and wanted_batch and batch and wanted_batch != batch:
        if not isinstance(batching, tuple):  # else the pipeline below batches it so
            arguments = _with_batch(arguments, wanted_batch)
        changed.append(
            f"batch size {batch} -> {wanted_batch} (--tuned=all: scale your learning rate by "
            f"{wanted_batch / batch:.3g}, the linear scaling rule, with a few epochs of warm-up)"
        )
        batch = wanted_batch
    elif wanted_batch and batch and wanted_batch != batch:
        kept.append(
            f"batch size {batch} (the tune's {wanted_batch} changes the optimisation: "
            "--tuned=all applies it)"
        )
    if feed == "pipeline" and _is_arrays(x) and not arguments.get("validation_split"):
        arguments = _as_pipeline(arguments, config, int(_batch_of(arguments) or 32))
        changed.append("feed: tfaccel.data.pipeline " + _knobs(config))
    elif isinstance(batching, tuple) and batch:
        arguments = _dataset_as_pipeline(arguments, config, batch, drop=batching[1])
        changed.append(
            f"feed: the script's dataset (its own maps kept) unbatched into "
            f"tfaccel.data.pipeline, batches of {batch} again, {_knobs(config)}"
        )
    elif isinstance(batching, str):
        kept.append(f"the feed ({feed}): the script's dataset as given: {batching}")
    elif feed not in (None, "numpy", OWN_FEED):
        kept.append(
            f"the feed ({feed}): applied to arrays without validation_split and to a "
            f"tf.data.Dataset of batches, this fit gets {type(x).__name__}"
        )
    policy = getattr(getattr(model, "dtype_policy", None), "name", "float32")
    effect = {
        "precision": str(policy),
        "jit": bool(getattr(model, "jit_compile", False)),
        "steps_per_execution": int(getattr(model, "steps_per_execution", 1) or 1),
        "batch_size": _batch_of(arguments),
        "feed": "pipeline" if any(c.startswith("feed") for c in changed) else "as given",
    }
    tuned.took_effect.append(effect)
    wanted_policy = config.get("precision")
    if wanted_policy and policy != wanted_policy:
        kept.append(
            f"precision: the model computes in {policy}, not the tune's {wanted_policy} (the "
            "script sets its own dtype policy)"
        )
    xla = "on" if effect["jit"] else "off"
    line = (
        f"applied at {getattr(model, 'name', 'the model')}.fit: precision {policy}, "
        f"XLA {xla}, steps_per_execution {effect['steps_per_execution']}"
    )
    if changed:
        line += "; " + "; ".join(changed)
    if kept:
        line += "; kept the script's: " + "; ".join(kept)
    _say(tuned, stream, line)
    own_precision = (tuned.script or {}).get("precision")
    applied = rebuild or bool(changed) or bool(own_precision and policy != own_precision)
    expected = _expected(tuned, applied=applied)
    if expected:
        _say(tuned, stream, expected)
    return arguments


def _build_on_first_batch(model: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Build a model not built yet on this fit's first batch, as the fit would (and as tune
    and :func:`prepare` did before fingerprinting it); a generator read for it is given back
    whole."""
    x = arguments.get("x")
    first, replacement = data_forms.first_batch(x, int(arguments.get("batch_size") or 32))
    build_like_fit(model, first)
    if replacement is not None:
        arguments = {**arguments, "x": replacement}
    return arguments


def _expected(tuned: TunedRun, *, applied: bool = True) -> str:
    winner = tuned.winner
    assert winner is not None
    verdict = winner.verdict or {}
    if verdict.get("kept"):
        return "expected gain: none measured (the tune found the script's own as fast)"
    ratio = verdict.get("ratio") or (winner.speedup or {}).get("ratio")
    if not ratio:
        return ""
    if not applied:
        return (
            f"expected gain: none: this fit trains as the script's own does, since none of the "
            f"winner's settings that differ could be applied here (kept above); the tune "
            f"measured x{ratio:.2f} with them"
        )
    text = f"expected gain: x{ratio:.2f} in training throughput, as measured by the tune"
    if tuned.mode != "all" and winner.config.get("batch_size") != tuned.script.get("batch_size"):
        text += " (with its batch size; less with the script's own)"
    return text


def _say(tuned: TunedRun, stream: TextIO, line: str) -> None:
    tuned.messages.append(line)
    print(f"tfaccel run --tuned: {line}", file=stream)


def _is_arrays(x: Any) -> bool:
    import numpy as np

    if isinstance(x, dict):
        return all(isinstance(v, np.ndarray) for v in x.values())
    if isinstance(x, (list, tuple)):
        return bool(x) and all(isinstance(v, np.ndarray) for v in x)
    return isinstance(x, np.ndarray)


def _batch_of(arguments: dict[str, Any]) -> int | None:
    """The batch size of this ``fit``: its ``batch_size`` on arrays (Keras' 32 by default),
    else the leading dimension of the dataset's batches."""
    x = arguments.get("x")
    if _is_arrays(x):
        return int(arguments.get("batch_size") or 32)
    import tensorflow as tf

    if isinstance(x, tf.data.Dataset):
        spec = tf.nest.flatten(x.element_spec)[0]
        dim = spec.shape[0] if spec.shape.rank else None
        if dim is not None:
            return int(dim)
        with contextlib.suppress(Exception):
            return int(tf.nest.flatten(next(iter(x.take(1))))[0].shape[0])
    if data_forms.kind_of(x) == "pydataset":  # its batches are fixed: the first one's size
        return data_forms.leading_dim(data_forms.first_batch(x, 0)[0])
    return None


def _with_batch(arguments: dict[str, Any], batch: int) -> dict[str, Any]:
    import tensorflow as tf

    out = dict(arguments)
    x = out.get("x")
    if isinstance(x, tf.data.Dataset):  # its maps and shuffling kept, batched again
        out["x"] = x.unbatch().batch(batch)
    else:
        out["batch_size"] = batch
    return out


def _as_pipeline(arguments: dict[str, Any], config: dict[str, Any], batch: int) -> dict[str, Any]:
    from tfaccel.data import pipeline

    out = dict(arguments)
    x, y = out.pop("x"), out.pop("y", None)
    knobs = {k: config[k] for k in ("cache", "prefetch", "num_parallel_calls") if k in config}
    shuffle = out.pop("shuffle", True)
    out.pop("batch_size", None)
    source = x if y is None else (x, y)
    out["x"] = pipeline(source, batch, shuffle=bool(shuffle), **knobs)
    return out


# tf.data stages that keep a dataset's batches as they are, one for one and in order: through
# them, the batches are those of the `batch` stage below
_BATCH_KEEPING = (
    "_PrefetchDataset",
    "_MapDataset",
    "_ParallelMapDataset",
    "_OptionsDataset",
    "CacheDataset",
    "_CacheDataset",
    "_MemoryCacheDataset",
)
_BATCHING = ("_BatchDataset", "_ParallelBatchDataset")


def _dataset_batching(x: Any) -> tuple[int, bool] | str | None:
    """How a script's ``tf.data.Dataset`` makes its batches, when unbatching it and batching
    it again at the same size gives the same batches (the same elements, the same steps per
    epoch): ``(batch size, drop_remainder)`` of its ``batch`` stage, reached through stages
    that keep batches as they are (maps, prefetch, cache, options). A string: why not (a
    ``shuffle`` or ``repeat`` of batches may put the last, smaller batch anywhere; a
    ``padded_batch``, a window...). None: ``x`` is not a ``tf.data.Dataset``."""
    import tensorflow as tf

    if not isinstance(x, tf.data.Dataset):
        return None
    stage = x
    while type(stage).__name__ in _BATCH_KEEPING:
        stage = getattr(stage, "_input_dataset", None)
    name = type(stage).__name__
    if name not in _BATCHING:
        shown = name.strip("_").removesuffix("Dataset") or "unknown"
        return (
            f"its batches come from a {shown} stage, not from .batch() under maps, prefetch "
            "or cache: batched again, they could differ"
        )
    size = tf.get_static_value(stage._batch_size)
    drop = tf.get_static_value(stage._drop_remainder)
    if size is None or drop is None:
        return "its .batch() size is not a constant"
    return int(size), bool(drop)


def _dataset_as_pipeline(
    arguments: dict[str, Any], config: dict[str, Any], batch: int, *, drop: bool
) -> dict[str, Any]:
    """The script's dataset, unbatched, into ``tfaccel.data.pipeline`` as the tune fed it:
    not shuffled again (its own shuffle kept), not repeated, batched at ``batch`` (its last,
    smaller batch kept unless its ``.batch()`` dropped it), with the tuned knobs; at the
    script's own batch size, with the script's number of batches (its cardinality) kept."""
    import tensorflow as tf

    from tfaccel.data import pipeline

    out = dict(arguments)
    given = out["x"]
    knobs = {k: config[k] for k in ("cache", "prefetch", "num_parallel_calls") if k in config}
    fed = pipeline(given.unbatch(), batch, shuffle=False, drop_remainder=drop, **knobs)
    steps = int(given.cardinality())
    if steps >= 0 and batch == _static_batch(given):
        # as many batches as the script's (same size, same elements): said to Keras, which
        # then knows the steps of an epoch as it did (callbacks, schedules, progress), and
        # checked by tf.data as the batches go
        fed = fed.apply(tf.data.experimental.assert_cardinality(steps))
    out["x"] = fed
    return out


def _static_batch(x: Any) -> int | None:
    """The size of a dataset's ``batch`` stage (:func:`_dataset_batching`), else None."""
    found = _dataset_batching(x)
    return found[0] if isinstance(found, tuple) else None


def _knobs(config: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={config[k]}" for k in ("cache", "prefetch", "num_parallel_calls") if k in config
    )
