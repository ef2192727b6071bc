"""``doctor --deep``: import TensorFlow in a subprocess and record what it says.

The import runs in a child process with a timeout and raised log verbosity, so a crash
(a signal such as SIGILL on a CPU without AVX), a hang or an exception becomes a value. The
child reads the GPUs' details with :func:`tfaccel.probe.tf_gpus.collect`, as this process would.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping

from tfaccel.core.checks import in_range, is_real
from tfaccel.core.errors import UsageError, argument
from tfaccel.snapshot import DeepProbe

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "MIN_IMPORT_S",
    "RESULT_MARKER",
    "check_timeout",
    "import_seconds",
    "run",
    "timeout_too_short",
]

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 24 * 3600.0
MIN_IMPORT_S = 1.0
"""No import of TensorFlow 2 finishes sooner: a new interpreter starts and loads the
framework's shared libraries (over a gigabyte for TensorFlow 2.21). A timeout below this
cannot tell a hang from a normal import."""
MEASURE_LIMIT_S = 60.0
RESULT_MARKER = "TFACCEL_DEEP_RESULT "
_MAX_LOG_CHARS = 200_000

_SCRIPT = r"""
import json, sys
out = {"tf_version": None, "built_with_cuda": None, "physical_devices": [],
       "logical_devices": [], "gpu_details": [], "error": None}
try:
    import tensorflow as tf
    out["tf_version"] = tf.__version__
    out["built_with_cuda"] = bool(tf.test.is_built_with_cuda())
    devices = tf.config.list_physical_devices()
    out["physical_devices"] = [d.name.replace("/physical_device:", "") for d in devices]
    from tfaccel.probe import tf_gpus
    gpus = tf_gpus.collect(tf)
    out["gpu_details"] = [gpu.details for gpu in gpus]
    # Listing logical devices starts the runtime: device creation errors are logged here.
    out["logical_devices"] = [d.name for d in tf.config.list_logical_devices()]
    if gpus:
        with tf.device("/GPU:0"):
            float(tf.reduce_sum(tf.matmul(tf.ones([64, 64]), tf.ones([64, 64]))))
except BaseException as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
sys.stderr.flush()
print("MARKER" + json.dumps(out), flush=True)
""".replace("MARKER", RESULT_MARKER)


def run(
    timeout_s: float = DEFAULT_TIMEOUT_S,
    python: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> DeepProbe:
    """Import TensorFlow in a child process and collect devices, errors and its log.

    Args:
        timeout_s: seconds before the child is killed and the import reported as hung
            (finite, above 0, at most ``MAX_TIMEOUT_S``).
        python: the interpreter to use (default: this one).
        environ: the child's environment (default: this process's), log verbosity raised.

    Raises:
        UsageError: ``timeout_s`` is not a finite number of seconds in range.
    """
    timeout_s = check_timeout(timeout_s)
    env = dict(os.environ if environ is None else environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
    env.setdefault("TF_CPP_VMODULE", "dso_loader=1,cuda_dnn=1,gpu_device=1")
    start = time.monotonic()
    probe = DeepProbe(ran=True, timeout_s=timeout_s)
    with subprocess.Popen(
        [python or sys.executable, "-c", _SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        errors="replace",
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            stdout, stderr = proc.communicate()
            probe.timed_out = True
        except BaseException:  # Ctrl-C, SIGTERM: the child has its own session, kill it too
            _kill_group(proc)
            raise
    probe.duration_s = round(time.monotonic() - start, 3)
    probe.returncode = proc.returncode
    probe.log = stderr[-_MAX_LOG_CHARS:]
    _read_result(probe, stdout)
    if probe.timed_out:
        probe.error = f"importing TensorFlow did not finish within {timeout_s:g} s"
    elif proc.returncode and proc.returncode < 0:
        name = _signal_name(-proc.returncode)
        probe.error = f"the TensorFlow process was killed by {name}"
    elif proc.returncode and probe.error is None:
        probe.error = f"the TensorFlow process exited with code {proc.returncode}"
    probe.ok = probe.error is None and not probe.timed_out and proc.returncode == 0
    return probe


def check_timeout(timeout_s: object) -> float:
    """``timeout_s`` as a float, when it is a finite number of seconds in (0, MAX_TIMEOUT_S].

    Raises:
        UsageError: anything else (NaN, infinity, 0, a negative number, not a number); the
            message names the argument as the caller spells it (``--deep-timeout`` on the CLI).
    """
    if is_real(timeout_s) and in_range(
        timeout_s, minimum=0, above_minimum=True, maximum=MAX_TIMEOUT_S
    ):
        return float(timeout_s)
    raise UsageError(
        f"The time allowed for importing TensorFlow, {argument('timeout_s')}, is not valid",
        expected=f"a finite number of seconds above 0 and at most {MAX_TIMEOUT_S:g} (a day)",
        received=repr(timeout_s),
        fix=f"pass {argument('timeout_s', DEFAULT_TIMEOUT_S)} (the default)",
    )


def import_seconds(
    limit_s: float = MEASURE_LIMIT_S, python: str | None = None
) -> tuple[float, str]:
    """How long ``import tensorflow`` takes here, in a fresh interpreter.

    It measures for an error message, so it leaves the user's files as they were: what the
    import writes of its own (Keras's ``~/.keras/keras.json``, Matplotlib's font cache in
    ``~/.cache`` and ``~/.config``) goes to a temporary folder, removed afterwards.

    Args:
        limit_s: stop waiting after this many seconds.
        python: the interpreter to use (default: this one).

    Returns:
        (seconds, outcome): outcome ``ok``, ``failed`` (it raised or crashed) or ``timed out``
        (seconds is then ``limit_s``).
    """
    with tempfile.TemporaryDirectory(prefix="tfaccel-import-") as scratch:
        env = {
            **os.environ,
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "KERAS_HOME": os.path.join(scratch, "keras"),
            "MPLCONFIGDIR": os.path.join(scratch, "matplotlib"),
            "XDG_CACHE_HOME": os.path.join(scratch, "cache"),
            "XDG_CONFIG_HOME": os.path.join(scratch, "config"),
        }
        start = time.monotonic()
        with subprocess.Popen(
            [python or sys.executable, "-c", "import tensorflow"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        ) as proc:
            try:
                code = proc.wait(timeout=limit_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                proc.wait()
                return limit_s, "timed out"
            except BaseException:  # its own session: an interrupt of ours does not reach it
                _kill_group(proc)
                raise
        return time.monotonic() - start, "ok" if code == 0 else "failed"


def timeout_too_short(
    timeout_s: float, *, python: str | None = None, limit_s: float = MEASURE_LIMIT_S
) -> UsageError:
    """The error for a timeout shorter than any TensorFlow import (below ``MIN_IMPORT_S``).

    It measures how long the import takes here (at most ``limit_s``), so the message can
    say which timeout fits this machine.
    """
    seconds, outcome = import_seconds(limit_s, python)
    if outcome == "ok":
        here = f"importing TensorFlow took {seconds:.1f} s here (measured now)"
        suggested = max(30, 5 * math.ceil(seconds))
    elif outcome == "failed":
        here = (
            f"here 'import tensorflow' fails after {seconds:.1f} s "
            "(run it with --deep and the default timeout to see why)"
        )
        suggested = int(DEFAULT_TIMEOUT_S)
    else:
        here = f"here it did not finish within {limit_s:g} s (measured now)"
        suggested = int(DEFAULT_TIMEOUT_S)
    return UsageError(
        f"The timeout {argument('timeout_s', timeout_s)} is too short for importing TensorFlow: "
        "the import would be reported as a hang",
        expected=f"at least {MIN_IMPORT_S:g} s, which no TensorFlow import beats; {here}",
        received=f"{timeout_s:g} s",
        fix=f"pass {argument('timeout_s', suggested)}, or leave the default "
        f"{DEFAULT_TIMEOUT_S:g} s",
    )


def _read_result(probe: DeepProbe, stdout: str) -> None:
    for line in stdout.splitlines():
        if not line.startswith(RESULT_MARKER):
            continue
        try:
            data = json.loads(line[len(RESULT_MARKER) :])
        except json.JSONDecodeError:
            continue
        probe.tf_version = data.get("tf_version")
        probe.built_with_cuda = data.get("built_with_cuda")
        probe.physical_devices = [str(d) for d in data.get("physical_devices") or []]
        probe.logical_devices = [str(d) for d in data.get("logical_devices") or []]
        probe.gpu_details = [
            {str(k): str(v) for k, v in d.items()} for d in data.get("gpu_details") or []
        ]
        probe.error = data.get("error")


def _kill_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
