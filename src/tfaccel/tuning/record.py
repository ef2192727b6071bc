"""Record a tune result in the results database, where ``tfaccel.setup`` finds it.

A tune run is one run of :class:`tfaccel.store.ResultsStore` (``details["kind"] == "tune"``,
with the whole trial table in its details) holding ONE result: the winner's images/s, under
the model's name and its architecture fingerprint (:mod:`tfaccel.architecture`), with a
configuration carrying ``device``, ``precision``, ``jit``, ``batch_size``, ``feed`` and the
pipeline knobs. ``store.best_measured(fingerprint, "jit" | "precision",
model_fingerprint=..., device=...)`` reads the newest complete run that measured a model of
that architecture and, finding one value per key, returns the winner's: the search has already
decided, beyond the noise or by simplicity, so ``setup(jit="auto", precision="auto",
model=model)`` applies exactly the configuration tune chose, to that model and to no other. An
interrupted search is recorded as ``incomplete``, which the lookups never read.

A script tuned as written also gets its **script record** in the run's details
(``details["script"]``, :func:`script_record`): the script it measured (resolved path, the
SHA-256 of its content, its arguments, which ``fit``), the fingerprint of the model it built
and that model's own precision and compile settings. ``tfaccel run --tuned`` reads it
(:func:`tfaccel.tuning.tuned.prepare`) to skip its first pass of an unchanged script.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfaccel import inventory
from tfaccel._version import __version__
from tfaccel.store import ResultRecord, ResultsStore
from tfaccel.tuning.result import CLAIMED, TuneResult

if TYPE_CHECKING:
    from tfaccel.inventory import Inventory

__all__ = ["record", "script_digest", "script_record", "store_config"]


def script_digest(path: str | Path) -> str:
    """The SHA-256 of a script file's content (hex): what a script record is matched by."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def script_record(result: TuneResult) -> dict[str, Any] | None:
    """The script record of a tune of a script as written, JSON-ready, or None (a model
    function, a reference model, a search that never built the model).

    Keys: ``path`` (resolved), ``sha256`` (:func:`script_digest`, taken before the script
    ran), ``args``, ``fit`` (0: the script's own loop, marked), ``model_fingerprint``,
    ``model_name``, ``precision`` (the model's own dtype policy; None when the script set one
    the trials did not take as it is), ``batch_size``, ``jit``, ``steps_per_execution``.
    """
    source = (result.workload or {}).get("source")
    if not source or not result.model_fingerprint:
        return None
    return {**source, "model_fingerprint": result.model_fingerprint}


def store_config(result: TuneResult) -> dict[str, Any]:
    """The configuration dict stored with the winner (the keys ``best_setting`` reads).

    ``precision`` and ``jit`` are stored only when the search timed two values of them or
    more (:meth:`TuneResult.compared`): a setting that was not searched, or whose other
    values did not take effect on the model, was not measured, so ``setup(...="auto")``
    must not read a verdict on it.
    """
    assert result.best is not None
    config = {"device": result.device, **result.best.to_dict()}
    for key in CLAIMED:
        if not result.compared(key):
            config.pop(key, None)
    return config


def record(
    result: TuneResult, path: str | Path | None = None, *, inv: Inventory | None = None
) -> int:
    """Write ``result`` to the results database; set and return its run id.

    Args:
        result: a tune result.
        path: the database (default: :func:`tfaccel.store.default_path`).
        inv: this machine's Inventory, whose fingerprint keys the run (default:
            :func:`tfaccel.inventory.current`).

    Returns:
        The run id.

    Raises:
        StoreError: the database cannot be opened or written.
    """
    fingerprint = (inv if inv is not None else inventory.current()).fingerprint
    tf = sys.modules.get("tensorflow")
    details = {
        "kind": "tune",
        "model_name": result.model_name,
        "device": result.device,
        "best": result.best.to_dict() if result.best is not None else None,
        "reason": result.reason,
        "trials": [t.to_dict() for t in result.trials],
        "space": result.space.to_dict(),
        "budget_s": result.budget_s,
        "elapsed_s": result.elapsed_s,
        "notes": result.notes,
        "model_fingerprint": result.model_fingerprint,
        "baseline": result.baseline.to_dict() if result.baseline is not None else None,
        "baseline_verdict": result.baseline_verdict,
        "speedup": _speedup(result),
        "script": script_record(result),
    }
    records = []
    summary = result.best_summary
    if result.best is not None and summary is not None:
        records.append(
            ResultRecord(
                benchmark=result.model_name,
                config=store_config(result),
                metric="images_per_s",
                unit="images/s",
                median=summary.median,
                q1=summary.q1,
                q3=summary.q3,
                n=summary.n,
                samples=list(result.best_trial.samples) if result.best_trial else [],
                extra={"tuned": True, "reason": result.reason},
                model_fingerprint=result.model_fingerprint,
            )
        )
    with ResultsStore(path) as db:
        run_id = db.begin_run(
            fingerprint.digest,
            fingerprint_data=fingerprint.data,
            started_at=_now(),
            tfaccel_version=__version__,
            tf_version=getattr(tf, "__version__", None),
            details=details,
        )
        db.finish_run(
            run_id,
            records,
            finished_at=_now(),
            status="incomplete" if result.interrupted or not records else "complete",
            details=details,
        )
        result.run_id, result.db_path = run_id, str(db.path)
    return run_id


def _speedup(result: TuneResult) -> dict[str, Any] | None:
    """The winner against the configuration it was timed with (``tfaccel run --tuned`` says
    it), JSON-ready."""
    found = result.speedup
    if found is None:
        return None
    return {"ratio": found.ratio, "baseline": found.baseline.label(), "rung": found.rung}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
