"""Helpers shared by the launcher's tests (tests/distribute/test_launch*.py, test_multiworker.py).

- ``write_script``: a worker or training script, dedented, written where the test wants it.
- ``run_launch``: ``tfaccel.distribute.launch`` in this process, its output captured.
- ``alive``: whether a process is still running, read from /proc.

The ``worker`` fixture that writes a module's WORKER is in tests/distribute/conftest.py. A
helper used by more than one of these modules goes here.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

from tfaccel.distribute import launch


def write_script(path: Path, source: str) -> Path:
    """``source``, dedented, written to ``path``."""
    path.write_text(textwrap.dedent(source))
    return path


def run_launch(script: Path, *args: str, **options: object) -> tuple[int, str, str, object]:
    """Launch ``script`` with ``args``: its exit code, stdout, stderr and the launch result."""
    out, err = io.StringIO(), io.StringIO()
    result = launch(str(script), list(args), stdout=out, stderr=err, **options)  # type: ignore[arg-type]
    return result.exit_code, out.getvalue(), err.getvalue(), result


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to read its status counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


TRAINING = """\
import tfaccel
import tfaccel.distribute as dist

choice = dist.strategy()             # first: a worker starts its gRPC server here
tfaccel.setup(deterministic=True)
print(choice, flush=True)

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.normal(size=(64, 3)).astype("float32")
y = (x @ np.array([[1.0], [2.0], [-1.0]], "float32") + 0.5).astype("float32")


def model_fn():
    return keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)]
    )


def dataset_fn(epoch):
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64, seed=100 + epoch)
"""
"""The middle of the training scripts the multi-worker and Slurm tests launch: the strategy
chosen first (a worker starts its gRPC server there), deterministic set-up, and the small
regression model and dataset they train; each test writes its own arguments before it and its
steps and results after it."""
