"""Real multi-worker training: worker processes on 127.0.0.1 started by ``tfaccel launch``.

One small script trains a Dense(4)-Dense(1) model on 64 examples (global batch 16, 3 epochs
of 4 steps, Adam, deterministic ops, fixed seed) with ``tfaccel.distribute.train`` and writes
each worker's final weights. It runs:

- as two workers, uninterrupted (the reference);
- as one process (OneDeviceStrategy), same global batch;
- as two tasks of a (simulated) Slurm job step on 127.0.0.1 (tests/distribute/test_slurm.py
  runs them under a real Slurm).

A worker killed mid-epoch, the group stopped and restarted from its checkpoint: the five kills
of tests/distribute/test_launch_faults.py (each attempt costs two TensorFlow starts).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from launch_helpers import TRAINING, write_script
from runtime_helpers import launch_env

pytestmark = pytest.mark.slow

TRAIN = (
    """
import argparse, json, os

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--ckpt")
args = parser.parse_args()
rank = os.environ.get("TFACCEL_LAUNCH_RANK", "solo")
os.makedirs(args.out, exist_ok=True)

"""
    + TRAINING
    + """

result = dist.train(
    model_fn, dataset_fn, epochs=3, global_batch_size=16, strategy=choice, seed=7,
    optimizer_fn=lambda lr: keras.optimizers.Adam(lr), learning_rate=0.05,
    checkpoint_dir=args.ckpt, checkpoint_every=3 if args.ckpt else None,
)
with open(os.path.join(args.out, f"result-{rank}.json"), "w") as f:
    json.dump({"weights": [w.tolist() for w in result.model.get_weights()],
               "result": result.to_dict(), "is_chief": choice.is_chief}, f)
"""
)


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_script(tmp_path_factory.mktemp("scripts") / "train.py", TRAIN)


def launch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tfaccel.cli.launch", *args],
        capture_output=True,
        text=True,
        env=launch_env(),
        timeout=300,
    )


def results(out: Path) -> dict[str, dict[str, Any]]:
    return {p.stem.split("-", 1)[1]: json.loads(p.read_text()) for p in out.glob("result-*.json")}


def weights(found: dict[str, Any]) -> list[np.ndarray]:
    return [np.asarray(w, dtype=np.float32) for w in found["weights"]]


@pytest.fixture(scope="module")
def uninterrupted(script: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("uninterrupted")
    done = launch("-n", "2", str(script), "--out", str(base / "out"), "--ckpt", str(base / "ckpt"))
    assert done.returncode == 0, done.stdout + done.stderr
    return {"done": done, "results": results(base / "out"), "base": base}


@pytest.fixture(scope="module")
def solo(script: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("solo") / "out"
    done = subprocess.run(
        [sys.executable, str(script), "--out", str(out)],
        capture_output=True,
        text=True,
        env=launch_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return results(out)["solo"]


def test_two_workers_train_and_end_with_identical_weights(uninterrupted: dict[str, Any]) -> None:
    found = uninterrupted["results"]
    assert set(found) == {"0", "1"}
    assert found["0"]["is_chief"] and not found["1"]["is_chief"]
    for a, b in zip(weights(found["0"]), weights(found["1"]), strict=True):
        np.testing.assert_array_equal(a, b)
    result = found["0"]["result"]
    assert (result["num_replicas"], result["global_step"]) == (2, 12)
    assert "MultiWorkerMirroredStrategy" in result["strategy"]
    assert result["history"][-1]["loss"] < result["history"][0]["loss"]


def test_the_workers_output_is_prefixed_and_only_the_chief_prints_epochs(
    uninterrupted: dict[str, Any],
) -> None:
    out = uninterrupted["done"].stdout.splitlines()
    assert any(line.startswith("[0] MultiWorkerMirroredStrategy") for line in out)
    assert any(line.startswith("[1] MultiWorkerMirroredStrategy") for line in out)
    assert [line for line in out if line.startswith("[0] epoch ")]
    assert not [line for line in out if line.startswith("[1] epoch ")]


def test_only_the_chief_keeps_checkpoints(uninterrupted: dict[str, Any]) -> None:
    ckpt = uninterrupted["base"] / "ckpt"
    names = sorted(p.name for p in ckpt.iterdir())
    assert "checkpoint" in names and "ckpt-12.index" in names
    assert not [name for name in names if name.startswith("workertemp")]


def test_two_workers_match_one_process_training_the_same_global_batch(
    uninterrupted: dict[str, Any], solo: dict[str, Any]
) -> None:
    assert solo["result"]["num_replicas"] == 1
    for a, b in zip(weights(uninterrupted["results"]["0"]), weights(solo), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _ports_free(*ports: int) -> bool:
    import socket

    for port in ports:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is free
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def test_a_slurm_step_of_two_tasks_trains_like_tf_config_workers(
    script: Path, tmp_path: Path, uninterrupted: dict[str, Any]
) -> None:
    from tfaccel.distribute.slurm import slurm_port_base

    slurm = {
        "SLURM_JOB_ID": "42",
        "SLURM_NTASKS": "2",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_NODELIST": "127.0.0.1",
        "SLURM_STEP_TASKS_PER_NODE": "2",
    }
    base = slurm_port_base(slurm, 2)
    if not _ports_free(base, base + 1):
        pytest.skip(f"ports {base} and {base + 1} are in use here")
    out = tmp_path / "out"
    tasks = [
        subprocess.Popen(
            [sys.executable, str(script), "--out", str(out)],
            env={
                **launch_env(),
                **slurm,
                "SLURM_PROCID": str(rank),
                "TFACCEL_LAUNCH_RANK": str(rank),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [task.communicate(timeout=300)[0] for task in tasks]
    assert [task.returncode for task in tasks] == [0, 0], "\n".join(outputs)
    assert "Slurm job 42 runs 2 tasks; this is task 0" in outputs[0]
    found = results(out)
    assert found["0"]["is_chief"] and not found["1"]["is_chief"]
    for rank in ("0", "1"):
        for a, b in zip(weights(found[rank]), weights(uninterrupted["results"]["0"]), strict=True):
            np.testing.assert_array_equal(a, b)
