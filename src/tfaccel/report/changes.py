"""What to change on this machine: the report's first section.

:func:`what_to_change` picks the top findings (the doctor's failures, warnings and notes, then
the reference models that do not fit this machine, at most :data:`MAX_FINDINGS`) and, for each
model trained, the fastest configuration measured, with the Python lines that apply it. The
lines are those ``tfaccel.tune`` writes to reproduce its winner
(:class:`tfaccel.tuning.result.TuneResult`), one statement each.

A configuration is recommended only when it is faster than the Keras default beyond the noise
(where the run measured the default on that device); otherwise the default is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from tfaccel.bench import training
from tfaccel.bench.records import ModelRow, RunSummary
from tfaccel.core.units import fmt_num
from tfaccel.tuning.result import TuneResult
from tfaccel.tuning.space import Config, Space

__all__ = ["MAX_FINDINGS", "Changes", "ModelChange", "change_lines", "model_line", "what_to_change"]

MAX_FINDINGS = 5
"""At most this many findings head the report."""

_SEVERITY = {"fail": 0, "warn": 1, "info": 2}


class ModelChange(TypedDict):
    """The best training configuration of one model, and the lines that apply it."""

    model: str
    device: str
    device_label: str
    config: str
    images_per_s: float
    speedup_vs_default: float | None
    beyond_noise: bool | None
    verdict: str
    apply: list[str]
    """Python statements that apply the configuration (empty: keep the Keras default)."""


class Changes(TypedDict):
    """report.json's ``changes``: the top findings (one line each) and a line per model."""

    findings: list[str]
    models: list[ModelChange]


def what_to_change(
    summary: RunSummary | Mapping[str, Any],
    doctor: Mapping[str, Any] | None = None,
    plan: list[dict[str, Any]] | None = None,
) -> Changes:
    """The top findings of this machine and the best configuration measured per model."""
    return {"findings": _findings(doctor, plan), "models": _models(summary)}


def _findings(doctor: Mapping[str, Any] | None, plan: list[dict[str, Any]] | None) -> list[str]:
    found = [f for f in (doctor or {}).get("findings") or [] if f.get("status") in _SEVERITY]
    found.sort(key=lambda f: _SEVERITY[f["status"]])
    lines = []
    for f in found:
        fix = f" (fix: {f['fix']})" if f.get("fix") else ""
        lines.append(f"{f['status']} {f['id']}: {f.get('title') or ''}{fix}")
    for row in plan or []:
        for device in row.get("this_machine") or []:
            if device.get("fits"):
                continue
            steps = device.get("gradient_accumulation_steps")
            how = (
                f"accumulate {steps} x {device.get('micro_batch')}"
                if steps
                else "a smaller batch or model"
            )
            lines.append(
                f"plan {row['model']}: batch {row['batch_size']} does not fit "
                f"{device.get('key')} (predicted): {how}"
            )
    return lines[:MAX_FINDINGS]


def _models(summary: RunSummary | Mapping[str, Any]) -> list[ModelChange]:
    best: dict[str, ModelRow] = {}
    for row in summary.get("models") or []:
        model = row["model"]
        if model not in best or row["images_per_s"] > best[model]["images_per_s"]:
            best[model] = row
    return [_model_change(row) for row in best.values()]


def _model_change(row: ModelRow) -> ModelChange:
    ratio, beyond = row.get("speedup_vs_default"), row.get("vs_default_different")
    apply = change_lines(row.get("settings") or {})
    if ratio is None and training.KERAS_DEFAULT.matches(row.get("settings") or {}):
        verdict, apply = "the Keras default is the fastest measured: nothing to change", []
    elif ratio is None:
        verdict = "the fastest measured (the Keras default was not measured on this device)"
    elif beyond:
        verdict = f"x{ratio:.2f} over the Keras default, beyond the noise"
    else:
        verdict = f"x{ratio:.2f} over the Keras default, inside the noise: keep the default"
        apply = []
    return {
        "model": row["model"],
        "device": row["device"],
        "device_label": row["device_label"],
        "config": row["config"],
        "images_per_s": row["images_per_s"],
        "speedup_vs_default": ratio,
        "beyond_noise": beyond,
        "verdict": verdict,
        "apply": apply,
    }


def change_lines(settings: Mapping[str, Any]) -> list[str]:
    """The statements that apply a bench configuration (``feed``, ``batch_size``,
    ``precision``, ``jit``), as ``tfaccel.tune`` writes them for its winner; empty when a
    setting is missing or not one ``tfaccel.tune`` knows.

    >>> change_lines({"feed": "tf.data", "batch_size": 256, "precision": "mixed_bfloat16",
    ...               "jit": True})  # doctest: +NORMALIZE_WHITESPACE
    ["tfaccel.setup(precision='mixed_bfloat16', jit=True)",
     'model.compile(..., jit_compile=True)',
     'dataset = tfaccel.data.pipeline((x, y), batch_size=256)',
     'model.fit(dataset)']
    """
    try:
        config = Config(
            batch_size=int(settings["batch_size"]),
            precision=str(settings["precision"]),
            jit=bool(settings["jit"]),
            feed="numpy" if settings["feed"] == "numpy" else "pipeline",
        )
    except (KeyError, TypeError, ValueError):
        return []
    result = TuneResult(config, "", [], "", "", Space(), 0.0, 0.0)
    setup, compile_line, feed = result.apply_lines()
    return [setup, compile_line, *feed]


def model_line(change: ModelChange, quote: str = "") -> str:
    """One model's change in one line: the configuration, its speed, verdict and statements
    (each between ``quote``)."""
    head = (
        f"{change['model']} on {change['device_label']}: {change['config']}, "
        f"{fmt_num(change['images_per_s'])} images/s ({change['verdict']})"
    )
    code = "; ".join(f"{quote}{line}{quote}" for line in change["apply"])
    return f"{head}: {code}" if code else head
