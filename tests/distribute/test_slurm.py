"""Multi-worker training under a real Slurm (one node, 127.0.0.1; ci/slurm/up starts it).

One small script (Dense(4)-Dense(1) on 64 examples, global batch 16, 3 epochs of 4 steps, Adam,
deterministic ops, fixed seed: the script of test_multiworker.py) trains with
``tfaccel.distribute.strategy()`` and ``train()`` and writes each rank's final weights. It runs:

- as ``srun -n 2`` and as ``tfaccel launch -n 2``: the same weights;
- as the batch script of docs/distribute.md in its CPU form (``sbatch``), stopped mid-epoch by
  ``scancel --signal=TERM``: it saves, requeues itself and ends with the weights of the
  uninterrupted ``srun`` run; the time from scancel to the resumed run's first step is printed;
- as ``srun -n 2`` with one task killed (SIGKILL): the other stops within the collective timeout;
- with this task's port taken: the error names it before TensorFlow starts.

And a job larger than the node is refused by Slurm when submitted. Skipped, with the reason,
where ``sinfo`` does not answer (the ``slurm`` marker).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from docs_blocks import read_blocks
from launch_helpers import TRAINING, alive, write_script
from runtime_helpers import launch_env

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

TRAIN = (
    """
import argparse, json, os, time

parser = argparse.ArgumentParser()
parser.add_argument("--checkpoint-dir")
parser.add_argument("--out", default=os.environ.get("TRAIN_OUT", "out"))
args = parser.parse_args()
rank = os.environ.get("SLURM_PROCID") or os.environ.get("TFACCEL_LAUNCH_RANK", "solo")
attempt = os.environ.get("SLURM_RESTART_COUNT") or os.environ.get("TFACCEL_LAUNCH_ATTEMPT", "0")
step_sleep = float(os.environ.get("TRAIN_STEP_SLEEP", "0"))
os.makedirs(args.out, exist_ok=True)


def mark(name, text=""):
    path = os.path.join(args.out, name)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


mark(f"pid-{rank}-{attempt}", str(os.getpid()))

"""
    + TRAINING
    + """

def on_step(log):
    mark(f"step-{rank}-{attempt}-{log.step}", repr(time.time()))
    time.sleep(step_sleep)


result = dist.train(
    model_fn, dataset_fn, epochs=3, global_batch_size=16, strategy=choice, seed=7,
    optimizer_fn=lambda lr: keras.optimizers.Adam(lr), learning_rate=0.05,
    checkpoint_dir=args.checkpoint_dir, checkpoint_every=3 if args.checkpoint_dir else None,
    on_step=on_step,
)
mark(f"result-{rank}.json", json.dumps({
    "weights": [w.tolist() for w in result.model.get_weights()],
    "result": result.to_dict(), "is_chief": choice.is_chief, "task": choice.task,
    "strategy": str(choice),
}))
"""
)

TIMEOUT_S = 240


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_script(tmp_path_factory.mktemp("scripts") / "train.py", TRAIN)


def env(**more: str) -> dict[str, str]:
    """This environment for a Slurm command: no Slurm job of its own (a test run inside one)."""
    found = {k: v for k, v in launch_env().items() if not k.startswith("SLURM_")}
    if "SLURM_CONF" in os.environ:
        found["SLURM_CONF"] = os.environ["SLURM_CONF"]
    return {**found, **more}


def results(out: Path) -> dict[str, dict[str, Any]]:
    return {p.stem.split("-", 1)[1]: json.loads(p.read_text()) for p in out.glob("result-*.json")}


def weights(found: dict[str, Any]) -> list[np.ndarray]:
    return [np.asarray(w, dtype=np.float32) for w in found["weights"]]


def assert_same_weights(a: dict[str, Any], b: dict[str, Any]) -> None:
    for x, y in zip(weights(a), weights(b), strict=True):
        np.testing.assert_array_equal(x, y)


def wait_for(what: str, ready: Callable[[], bool], timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"waited {timeout_s} s for {what}"
        time.sleep(0.05)


def srun(*args: str, **more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["srun", *args], capture_output=True, text=True, env=env(**more), timeout=TIMEOUT_S
    )


@pytest.fixture(scope="module")
def under_srun(script: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted reference: ``srun -n 2 python train.py``, with checkpoints."""
    base = tmp_path_factory.mktemp("srun")
    done = srun(
        "-n", "2", sys.executable, str(script), "--checkpoint-dir", str(base / "ckpt"),
        "--out", str(base / "out"),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return {"done": done, "results": results(base / "out")}


def test_srun_gives_two_workers_that_end_like_tfaccel_launch(
    script: Path, tmp_path: Path, under_srun: dict[str, Any]
) -> None:
    found = under_srun["results"]
    assert set(found) == {"0", "1"}
    assert found["0"]["is_chief"] and not found["1"]["is_chief"]
    assert (found["0"]["task"], found["1"]["task"]) == ("worker:0", "worker:1")
    assert "MultiWorkerMirroredStrategy (2 replicas, 2 workers" in found["0"]["strategy"]
    assert re.search(r"Slurm job \d+ runs 2 tasks; this is task 0", found["0"]["strategy"])
    assert found["0"]["result"]["global_step"] == 12
    assert_same_weights(found["0"], found["1"])
    launched = subprocess.run(
        [sys.executable, "-m", "tfaccel.cli.launch", "-n", "2", str(script), "--out",
         str(tmp_path / "out")],
        capture_output=True, text=True, env=env(), timeout=TIMEOUT_S,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stdout + launched.stderr
    by_launch = results(tmp_path / "out")
    for rank in ("0", "1"):
        assert_same_weights(by_launch[rank], found["0"])


def documented_batch_script(python: str, checkpoint_dir: Path) -> str:
    """docs/distribute.md's batch script for GPUs, in its CPU form: one node of two tasks."""
    (block,) = [
        b for b in read_blocks("docs/distribute.md") if b.lang == "sbatch"
    ]  # the page's one batch script
    text = block.text
    swaps = [
        ("#SBATCH --nodes=2\n", "#SBATCH --nodes=1\n"),
        ("#SBATCH --ntasks-per-node=1\n", "#SBATCH --ntasks-per-node=2\n"),
        ("#SBATCH --gpus-per-node=4\n", ""),
        ("srun python train.py --checkpoint-dir /shared/ckpt",
         f"srun {python} train.py --checkpoint-dir {checkpoint_dir}"),
    ]  # fmt: skip
    for old, new in swaps:
        assert old in text, f"docs/distribute.md's batch script no longer has {old!r}"
        text = text.replace(old, new)
    return text


def job_state(job: str) -> dict[str, str]:
    shown = subprocess.run(
        ["scontrol", "show", "job", "--oneliner", job],
        capture_output=True, text=True, env=env(), timeout=30,
    )  # fmt: skip
    return dict(re.findall(r"(\w+)=(\S*)", shown.stdout))


def test_the_documented_batch_script_requeues_on_scancel_and_resumes_exactly(
    script: Path, tmp_path: Path, under_srun: dict[str, Any]
) -> None:
    (tmp_path / "train.py").write_text(script.read_text())
    job_script = tmp_path / "job.sh"
    job_script.write_text(documented_batch_script(sys.executable, tmp_path / "ckpt"))
    out = tmp_path / "out"
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(job_script)],
        capture_output=True, text=True, cwd=tmp_path, timeout=30,
        env=env(TRAIN_OUT=str(out), TRAIN_STEP_SLEEP="0.4"),
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    try:
        # step 5 done: epoch 1 (steps 5-8) is under way, the last checkpoint is step 3's
        wait_for("step 5 of the first run", (out / "step-0-0-5").exists)
        cancelled_at = time.time()
        cancel = subprocess.run(
            ["scancel", "--signal=TERM", job], capture_output=True, text=True, env=env()
        )
        assert cancel.returncode == 0, cancel.stderr
        wait_for("the requeued run's result", (out / "result-0.json").exists)
        wait_for("the job's end", lambda: job_state(job).get("JobState") == "COMPLETED", 60)
    finally:
        subprocess.run(["scancel", job], capture_output=True, env=env())
    state = job_state(job)
    log = (tmp_path / f"train-{job}.out").read_text()
    assert state["Restarts"] == "1", log
    assert "preempted (SIGTERM): saved step" in log, log
    found = results(out)
    saved = found["0"]["result"]["start_step"]
    assert 5 <= saved <= 8, log  # saved at a step boundary of the interrupted epoch
    assert not (out / f"step-0-0-{saved + 1}").exists()  # the first run stopped there
    assert (tmp_path / "ckpt" / f"ckpt-{saved}.index").exists()
    for rank in ("0", "1"):
        assert found[rank]["result"]["global_step"] == 12
        assert_same_weights(found[rank], under_srun["results"]["0"])
    restarted_at = (out / "pid-0-1").stat().st_mtime  # the requeued run's script started
    resumed_at = float((out / f"step-0-1-{saved + 1}").read_text())
    print(
        f"\nscancel --signal=TERM to the resumed run's first step: {resumed_at - cancelled_at:.1f} s"
        f" (to the requeued run's start {restarted_at - cancelled_at:.1f} s; saved step {saved},"
        f" job {job})"
    )


def test_a_task_killed_stops_the_other_within_the_collective_timeout(
    script: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    timeout_s = 60  # the survivor stops sooner (about 10-20 s here): TF's task heartbeats stop
    step = subprocess.Popen(
        ["srun", "-n", "2", sys.executable, str(script), "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=env(TRAIN_STEP_SLEEP="0.3", TFACCEL_COLLECTIVE_TIMEOUT_S=str(timeout_s)),
    )  # fmt: skip
    try:
        wait_for("step 3", (out / "step-1-0-3").exists)
        os.kill(int((out / "pid-1-0").read_text()), signal.SIGKILL)
        killed_at = time.monotonic()
        output = step.communicate(timeout=timeout_s + 30)[0]
        stopped_s = time.monotonic() - killed_at
    finally:
        step.kill()
    assert step.returncode != 0, output
    assert not results(out), output  # nobody finished
    survivor = int((out / "pid-0-0").read_text())
    assert not alive(survivor), output
    assert stopped_s < timeout_s, f"rank 0 stopped {stopped_s:.1f} s after the kill\n{output}"
    print(f"\nrank 1 killed: the step ended {stopped_s:.1f} s later")


def test_a_taken_port_stops_the_step_with_the_port_named(script: Path, tmp_path: Path) -> None:
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("", 0))
        held.listen()
        port = held.getsockname()[1]
        done = srun(
            "-n", "2", "--kill-on-bad-exit=1", sys.executable, str(script), "--out",
            str(tmp_path / "out"), TFACCEL_SLURM_PORT_BASE=str(port),
        )  # fmt: skip
    assert done.returncode != 0
    assert f"Port {port}, the one Slurm task 0 of job" in done.stderr, done.stderr
    assert "TFACCEL_SLURM_PORT_BASE" in done.stderr


def test_the_node_address_comes_from_slurm() -> None:
    from tfaccel.distribute.slurm import node_address

    node = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, env=env()
    ).stdout.split()[0]
    assert node_address(node) is not None
    assert node_address("no-such-node-here") is None


@pytest.mark.parametrize(
    ("ask", "refusal"),
    [
        (["-n", "64"], "More processors requested than permitted"),
        (["--mem=100000000"], "Memory specification can not be satisfied"),
        (["-N", "2"], "Node count specification invalid"),
    ],
)
def test_a_job_larger_than_the_node_is_refused_by_slurm(ask: list[str], refusal: str) -> None:
    # tfaccel runs inside a job, so it never sees one refused: Slurm's message says which
    # resource (this configuration sets EnforcePartLimits=ALL: refused, not left pending)
    done = subprocess.run(
        ["sbatch", *ask, "--wrap", "true"], capture_output=True, text=True, env=env(), timeout=30
    )
    assert done.returncode != 0, done.stdout
    assert refusal in done.stderr, done.stderr
