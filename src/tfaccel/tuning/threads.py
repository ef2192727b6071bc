"""Thread counts, measured in fresh processes.

TensorFlow fixes its intra-op and inter-op thread pools when its runtime starts, and a process
cannot restart it: the in-process search cannot try a second thread setting. So thread counts
are searched last, on the winning configuration only, each setting (TensorFlow's default
included, for a fair comparison) in its own worker process (``python -m
tfaccel.tuning.worker``) that calls ``tfaccel.setup(threads=...)`` before anything else, rebuilds
the model from the script or reference model, warms up and times a few samples. Processes run
round-robin (A B C, then B C A), so drift spreads over all settings as in the in-process
rounds; each process pays TensorFlow's import and the model's tracing, which is why this stage
runs only when the space lists thread settings and the model can be rebuilt in another process
(``tfaccel tune SCRIPT``, ``--model``, :func:`tfaccel.tuning.tune_script`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tfaccel.tuning.search import Trial
from tfaccel.tuning.space import Config, ThreadsValue

__all__ = ["MARKER", "WorkerResult", "launch_worker", "thread_stage"]

MARKER = "TFACCEL-TUNE-WORKER:"

WorkerResult = dict[str, Any]
"""``{"samples": [seconds per example...], "prepare_s": s}`` or ``{"error": text, "oom": b}``."""


def launch_worker(spec: Mapping[str, Any], timeout_s: float) -> WorkerResult:
    """Run one worker process with ``spec``; return what it printed after :data:`MARKER`."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tfaccel.tuning.worker", json.dumps(spec)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the worker did not finish within {timeout_s:.0f} s", "oom": False}
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the worker exited with {done.returncode}: {tail}", "oom": False}
    result: WorkerResult = json.loads(lines[-1][len(MARKER) :])
    return result


def thread_stage(
    recipe: Mapping[str, Any],
    winner: Config,
    values: Sequence[ThreadsValue],
    *,
    rung: int,
    sample_s: float,
    remaining: Callable[[], float],
    rounds: int = 2,
    samples_per_process: int = 3,
    launch: Callable[[Mapping[str, Any], float], WorkerResult] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[Trial]:
    """Time ``winner`` under each thread setting, one worker process per setting and round.

    Args:
        recipe: how a worker rebuilds the model and data (:attr:`Hooks.recipe`).
        winner: the configuration of the in-process search.
        values: thread settings to compare (None: TensorFlow's default).
        rung: the rung number the samples are filed under.
        sample_s: length of one timed sample.
        remaining: seconds of budget left.
        rounds: round-robin passes over the settings.
        samples_per_process: timed samples per worker after its warm-up.
        launch: runs one worker (default :func:`launch_worker`; tests pass a fake).
        clock: seconds, to estimate a worker's cost.

    Returns:
        One :class:`Trial` per setting; ``skipped`` when the budget ran out before it ran.
    """
    launch = launch or launch_worker
    trials = {v: Trial(replace(winner, threads=v), order=1000 + i) for i, v in enumerate(values)}
    costs: list[float] = []
    for round_index in range(rounds):
        shift = round_index % len(values) if values else 0
        for value in [*values[shift:], *values[:shift]]:
            trial = trials[value]
            if trial.status in ("oom", "error"):
                continue
            estimate = max(costs) if costs else samples_per_process * sample_s
            if remaining() < estimate:
                if not trial.rung_samples:
                    trial.status, trial.note = "skipped", "no budget left for a worker process"
                continue
            began = clock()
            spec = _spec(recipe, trial.config, sample_s, samples_per_process)
            result = launch(spec, max(60.0, 3 * estimate))
            costs.append(clock() - began)
            _file(trial, result, rung)
    return list(trials.values())


def _spec(
    recipe: Mapping[str, Any], config: Config, sample_s: float, samples: int
) -> dict[str, Any]:
    return {
        "recipe": dict(recipe),
        "config": config.to_dict(),
        "sample_s": sample_s,
        "samples": samples,
    }


def _file(trial: Trial, result: WorkerResult, rung: int) -> None:
    if "error" in result:
        trial.status = "oom" if result.get("oom") else "error"
        trial.note = f"worker process: {result['error']}"
        return
    rates = [1.0 / s for s in result.get("samples", []) if s > 0]
    trial.rung_samples.setdefault(rung, []).extend(rates)
    trial.status = "ok"
    trial.prepare_s = result.get("prepare_s")
    trial.note = "timed in fresh processes"
