"""A worker process of the thread search: ``python -m tfaccel.tuning.worker SPEC_JSON``.

Applies the configuration's thread counts with ``tfaccel.setup`` before TensorFlow's runtime
starts, rebuilds the model and data from the recipe, warms up, times the samples and prints
one line ``TFACCEL-TUNE-WORKER:{json}`` (see :mod:`tfaccel.tuning.threads`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from tfaccel.runtime import setup
from tfaccel.tuning.batch import is_oom_error
from tfaccel.tuning.hooks import hooks_from_recipe
from tfaccel.tuning.space import Config
from tfaccel.tuning.threads import MARKER
from tfaccel.tuning.trials import TfRunner, check_data

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the worker described by the JSON in ``argv[0]``; print its result; return 0."""
    spec = json.loads((sys.argv[1:] if argv is None else argv)[0])
    try:
        result = _run(spec)
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}"[:500], "oom": is_oom_error(exc)}
    print(MARKER + json.dumps(result), flush=True)
    return 0


def _run(spec: dict[str, Any]) -> dict[str, Any]:
    config = Config.from_dict(spec["config"])
    if config.threads is not None:
        intra, inter = config.threads
        setup(threads=(intra, inter) if inter is not None else intra)
    hooks = hooks_from_recipe(spec["recipe"])
    x, y, _ = check_data(hooks.data)
    runner = TfRunner(
        hooks.model_fn,
        x,
        y,
        sample_s=float(spec["sample_s"]),
        pipeline_kwargs=hooks.pipeline_kwargs,
        model_fn_name=hooks.model_fn_name,
    )
    began = time.monotonic()
    runner.prepare(config)
    prepare_s = time.monotonic() - began
    samples = [runner.sample(config) for _ in range(int(spec["samples"]))]
    return {"samples": samples, "prepare_s": prepare_s}


if __name__ == "__main__":
    sys.exit(main())
