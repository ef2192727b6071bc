"""Run TensorFlow scenarios in fresh processes and read back what they saw.

TensorFlow's runtime is process-global and cannot be reset, so each test module that needs a
fresh one runs one scenario process (a function of the module, executed as ``__main__``) that
covers many cases and prints one JSON document; the tests assert on parts of it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parent
MARKER = "SCENARIO-RESULT:"
# The environment and folder the session started in, before any test changed its own: the runs
# tests/conftest.py's Ahead starts in a thread beside the tests start from these.
STARTING_ENVIRON = dict(os.environ)
STARTING_DIR = os.getcwd()


def ctrl_c_reaches_it() -> None:
    """``preexec_fn`` of a child a test sends Ctrl-C (SIGINT): SIGINT's default action, as a
    terminal's foreground process has it. A suite started in the background (``make test &``
    in a non-interactive shell) runs with SIGINT ignored, its children inherit that, and
    Python then never raises KeyboardInterrupt in them: the child would sleep on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def clean_env(
    extra: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """This environment (or ``base``) without TFACCEL_* or TF growth settings, TF's logs
    quietened.

    ``XDG_DATA_HOME`` points at a directory that does not exist (reading the results store
    creates nothing), so no store of this machine's user steers ``jit="auto"``.
    """
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if not k.startswith("TFACCEL_") and k != "TF_FORCE_GPU_ALLOW_GROWTH"
    }
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["XDG_DATA_HOME"] = str(Path(tempfile.gettempdir()) / "tfaccel-tests-no-data")
    env.update(extra or {})
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    return env


def run_scenario(module_file: str, *args: str, timeout_s: float = 300) -> dict[str, Any]:
    """Run ``module_file`` as a script (with ``args``); return the JSON it printed after MARKER."""
    done = subprocess.run(
        [sys.executable, module_file, *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=timeout_s,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    assert done.returncode == 0 and lines, f"scenario failed:\n{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(lines[-1][len(MARKER) :])
    result["_stderr"] = done.stderr
    return result


def emit(result: Mapping[str, Any]) -> None:
    """Print a scenario's result for ``run_scenario``."""
    print(MARKER + json.dumps(result, default=str))


def outcome(call: Callable[[], Any]) -> dict[str, Any]:
    """Run ``call``: {"ok": value} or {"error": class name, "message": text, ...}."""
    try:
        value = call()
    except Exception as exc:
        found: dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
        config = getattr(exc, "config", None)
        if config is not None:
            found["config"] = config.to_dict()
        return found
    return {"ok": value.to_dict() if hasattr(value, "to_dict") else value}


def tf_state() -> dict[str, Any]:
    """What tf.config (and Keras) report now, without starting the runtime."""
    import keras
    import tensorflow as tf
    from tensorflow.python.eager import context
    from tensorflow.python.framework import config as tf_config

    cpu = tf.config.list_physical_devices("CPU")[0]
    virtual = tf.config.get_logical_device_configuration(cpu)
    return {
        "started": context.context()._context_handle is not None,
        "visible_gpus": [d.name for d in tf.config.get_visible_devices("GPU")],
        "cpu_logical_config": None if virtual is None else len(virtual),
        "intra": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter": tf.config.threading.get_inter_op_parallelism_threads(),
        "jit": tf.config.optimizer.get_jit(),
        "deterministic": bool(tf_config.is_op_determinism_enabled()),
        "policy": keras.mixed_precision.global_policy().name,
    }


def launch_env() -> dict[str, str]:
    """:func:`clean_env` without any cluster description (TF_CONFIG, Slurm's job variables),
    for local launches that must build their own cluster."""
    found = clean_env()
    for name in ("TF_CONFIG", "SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"):
        found.pop(name, None)
    return found
