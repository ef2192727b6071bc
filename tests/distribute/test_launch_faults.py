"""Fault injection into real multi-worker training (two TensorFlow workers on 127.0.0.1 under
``tfaccel launch``): every faulty run must end with exactly the weights of an uninterrupted one.

One small script trains a Dense(4)-Dense(1) model (48 examples, global batch 8, 2 epochs of 6
steps, Adam, deterministic ops, checkpoints every 2 steps) with ``tfaccel.distribute.train``
and injects the faults a JSON plan names, in its ``on_step`` (the library has no fault hooks):

- kills: at attempt A, rank R SIGKILLs itself K steps after the attempt's first step (five
  attempts in a row, drawn from a fixed seed printed in the failure messages): each is named,
  stops the group, and the next resumes from the checkpoint before it, mid-epoch;
- hang: at attempt 0, rank 1 sleeps for ever after step 4 (the launcher must detect it within
  ``--hang-timeout`` and restart the group);
- term: at attempt 1, rank 0 stops at step 8 until the test has sent it SIGTERM (it must save
  at the next step boundary with rank 1, exit 75, and the group resume from there).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from launch_helpers import alive, write_script
from runtime_helpers import launch_env

pytestmark = pytest.mark.slow  # real TensorFlow workers: about 90 s on 2 cores

SEED = 20240607
HANG_TIMEOUT_S = 3.0
GRACE_S = 2.0

TRAIN = """
import argparse, json, os, signal, time

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--ckpt", required=True)
parser.add_argument("--plan", default="{}")
args = parser.parse_args()
plan = json.loads(args.plan)
rank = int(os.environ["TFACCEL_LAUNCH_RANK"])
attempt = int(os.environ["TFACCEL_LAUNCH_ATTEMPT"])
os.makedirs(args.out, exist_ok=True)


def note(name, text=None):  # whole or not at all: the test reads some as they appear
    path = os.path.join(args.out, f"{name}-{rank}-{attempt}")
    with open(path + ".part", "w") as f:
        f.write(str(os.getpid()) if text is None else text)
    os.replace(path + ".part", path)


note("pid")
import tfaccel
import tfaccel.distribute as dist

choice = dist.strategy()
tfaccel.setup(deterministic=True)
import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.normal(size=(48, 3)).astype("float32")
y = (x @ np.array([[1.0], [2.0], [-1.0]], "float32") + 0.5).astype("float32")
first = []


def on_step(log):
    first.append(log.step)
    kill = plan.get("kills", {}).get(str(attempt))
    if kill and kill[0] == rank and log.step == first[0] + kill[1]:
        note("killed", json.dumps({"step": log.step, "first": first[0]}))
        print(f"killing myself at step {log.step}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    if plan.get("hang") == [attempt, rank, log.step]:
        note("hang", repr(time.time()))
        while True:
            time.sleep(3600)
    if plan.get("term") == [attempt, rank, log.step]:
        note("term")  # the test sends SIGTERM, then writes term-ack
        while not os.path.exists(os.path.join(args.out, "term-ack")):
            time.sleep(0.01)


result = dist.train(
    lambda: keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)]
    ),
    lambda epoch: tf.data.Dataset.from_tensor_slices((x, y)).shuffle(48, seed=100 + epoch),
    epochs=2, global_batch_size=8, strategy=choice, seed=7,
    optimizer_fn=lambda lr: keras.optimizers.Adam(lr), learning_rate=0.05,
    checkpoint_dir=args.ckpt, checkpoint_every=2, on_step=on_step, verbose=False,
)
np.savez(os.path.join(args.out, f"weights-{rank}.npz"), *result.model.get_weights())
note("result", json.dumps({"start_step": result.start_step, "global_step": result.global_step,
                           "netns": os.readlink("/proc/self/ns/net")}))
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_script(tmp_path_factory.mktemp("faults") / "train.py", TRAIN)


def start(script: Path, base: Path, plan: dict[str, Any], *options: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tfaccel.cli.launch", "--json", "-n", "2", *options]
    paths = ["--out", str(base / "out"), "--ckpt", str(base / "ckpt")]
    return subprocess.Popen(
        [*command, str(script), *paths, "--plan", json.dumps(plan)],
        env=launch_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(launcher: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    out, err = launcher.communicate(timeout=400)
    return json.loads(out), err


def weights(base: Path, rank: int) -> list[np.ndarray]:
    with np.load(base / "out" / f"weights-{rank}.npz") as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def assert_exact(base: Path, reference: Path, context: str) -> None:
    expected = weights(reference, 0)
    for rank in (0, 1):
        found = weights(base, rank)
        assert len(found) == len(expected), context
        for a, b in zip(found, expected, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=context)


def assert_no_worker_left(base: Path) -> None:
    pids = [int(p.read_text()) for p in (base / "out").glob("pid-*")]
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if alive(pid)]


@pytest.fixture(scope="module")
def reference(script: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("reference")
    doc, err = finish(start(script, base, {}))
    assert doc["exit_code"] == 0, err
    return base


@pytest.fixture(scope="module")
def hang_then_sigterm(script: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Attempt 0: rank 1 hangs after step 4. Attempt 1: the test SIGTERMs rank 0 at step 8."""
    base = tmp_path_factory.mktemp("hang_then_sigterm")
    plan = {"hang": [0, 1, 4], "term": [1, 0, 8]}
    launcher = start(
        script, base, plan, "--restarts", "2", "--hang-timeout", f"{HANG_TIMEOUT_S:g}",
        "--grace", f"{GRACE_S:g}",
    )  # fmt: skip
    marker = base / "out" / "term-0-1"
    while not marker.exists() and launcher.poll() is None:
        time.sleep(0.02)
    if launcher.poll() is None:
        os.kill(int(marker.read_text()), signal.SIGTERM)
        (base / "out" / "term-ack").touch()
    doc, err = finish(launcher)
    return {"doc": doc, "err": err, "base": base}


def test_the_uninterrupted_run_is_isolated_and_both_workers_agree(reference: Path) -> None:
    assert_exact(reference, reference, "rank 1 against rank 0")
    results = [json.loads((reference / "out" / f"result-{r}-0").read_text()) for r in (0, 1)]
    assert [r["global_step"] for r in results] == [12, 12]
    # where the launcher could isolate, the workers shared a network namespace of their own
    own = os.readlink("/proc/self/ns/net")
    assert results[0]["netns"] == results[1]["netns"]
    network = json.loads(
        subprocess.run(
            [sys.executable, "-c", "from tfaccel.distribute.worker_network import Network; "
             "n = Network.start(host='127.0.0.1', isolate=True); n.close(); print(n.isolated)"],
            capture_output=True, text=True, check=True,
        ).stdout.strip().lower()
    )  # fmt: skip
    assert (results[0]["netns"] != own) is network


def test_five_kills_of_random_ranks_at_random_steps_end_with_the_exact_weights(
    script: Path, tmp_path: Path, reference: Path
) -> None:
    """Each kill: the launcher names the killed rank and stops the other (blocked in a
    collective), nobody finishes that attempt, and the next group resumes from the checkpoint
    before the kill; the last one ends with the uninterrupted weights. (Without restarts the
    launcher then exits 128 + 9: tests/distribute/test_launch.py checks that exit code with
    plain Python workers.)"""
    rng = random.Random(SEED)
    kills = {str(a): [rng.randrange(2), rng.randrange(3)] for a in range(5)}
    context = f"seed {SEED}, kills (attempt: [rank, steps after the attempt's first]) {kills}"
    # A short grace: the rank left is stuck in a collective with the dead one, never at a
    # step boundary where it could save, so most attempts wait out the whole grace (SIGKILL)
    doc, err = finish(
        start(script, tmp_path, {"kills": kills}, "--restarts", "5", "--grace", "0.5")
    )
    assert doc["exit_code"] == 0, f"{context}\n{err}"
    outcomes = [(a["outcome"], a["failed_rank"]) for a in doc["attempts"]]
    assert outcomes == [("failed", kills[str(a)][0]) for a in range(5)] + [("succeeded", None)], (
        context
    )
    killed = sorted((tmp_path / "out").glob("killed-*"))
    assert len(killed) == 5, context
    assert err.count("restarting all 2 workers") == 5, f"{context}\n{err}"
    stopped = [line for line in err.splitlines() if "; stopping the others" in line]
    assert len(stopped) == 5, f"{context}\n{err}"
    resumed_at = 0  # the step each attempt starts after
    for a in range(5):
        rank = kills[str(a)][0]
        at = json.loads((tmp_path / "out" / f"killed-{rank}-{a}").read_text())
        assert at["first"] == resumed_at + 1, f"{context}: attempt {a} {at}"
        assert at["step"] == at["first"] + kills[str(a)][1], f"{context}: attempt {a} {at}"
        assert f"[{rank}] killing myself at step {at['step']}" in err, f"{context}\n{err}"
        attempt = doc["attempts"][a]
        assert f"worker {rank} was killed by SIGKILL" in stopped[a], f"{context}\n{err}"
        assert attempt["reason"] in stopped[a], (context, attempt)
        assert attempt["exit_codes"][rank] == -9, (context, attempt)
        assert attempt["exit_codes"][1 - rank] != 0, (context, attempt)  # nobody finished
        resumed_at = (at["step"] - 1) // 2 * 2  # the checkpoint before the kill (every 2 steps)
    final = [json.loads((tmp_path / "out" / f"result-{r}-5").read_text()) for r in (0, 1)]
    assert [r["start_step"] for r in final] == [resumed_at] * 2, context
    assert resumed_at % 6, context  # mid-epoch (6 steps an epoch): the data's place restored too
    assert [r["global_step"] for r in final] == [12, 12], context
    assert_exact(tmp_path, reference, context)
    assert_no_worker_left(tmp_path)


def test_a_hung_rank_is_named_and_detected_within_the_hang_timeout(
    hang_then_sigterm: dict[str, Any],
) -> None:
    doc, err, base = hang_then_sigterm["doc"], hang_then_sigterm["err"], hang_then_sigterm["base"]
    hung = doc["attempts"][0]
    assert (hung["outcome"], hung["failed_rank"]) == ("hung", 1), err
    assert "worker 1 furthest behind, starting step 4; the others at step 5" in hung["reason"]
    hang_began = float((base / "out" / "hang-1-0").read_text())
    detected = hung["stopped_at"] - hang_began
    restarted = doc["attempts"][1]["started_at"] - hang_began
    assert HANG_TIMEOUT_S <= detected <= HANG_TIMEOUT_S + 1.0, (detected, err)
    assert restarted <= HANG_TIMEOUT_S + GRACE_S + 1.5, (restarted, err)


def test_sigterm_saves_at_the_next_step_on_every_worker_and_the_group_resumes_there(
    hang_then_sigterm: dict[str, Any], reference: Path
) -> None:
    doc, err, base = hang_then_sigterm["doc"], hang_then_sigterm["err"], hang_then_sigterm["base"]
    assert doc["exit_code"] == 0, err
    preempted = doc["attempts"][1]
    assert (preempted["outcome"], preempted["exit_codes"]) == ("preempted", [75, 75]), err
    assert preempted["steps"] == [9, 9]  # SIGTERM after step 8: both saved step 9
    assert (base / "ckpt" / "ckpt-9.index").exists()
    final = [json.loads((base / "out" / f"result-{r}-2").read_text()) for r in (0, 1)]
    assert [r["start_step"] for r in final] == [9, 9]
    assert [a["outcome"] for a in doc["attempts"]] == ["hung", "preempted", "succeeded"]
    assert_exact(base, reference, "hang in attempt 0, SIGTERM to rank 0 in attempt 1")
    assert_no_worker_left(base)
