"""``tfaccel launch``'s watch over a running group, with plain Python workers: hangs (from the
heartbeats of ``tfaccel.distribute.heartbeat``), the start-up allowance, preemption exits (75),
and the refusal of far more workers than cores."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from launch_helpers import run_launch

from tfaccel.cli import launch as launch_cli
from tfaccel.core.errors import UsageError
from tfaccel.distribute import heartbeat, launch
from tfaccel.distribute.heartbeat import Beat, read_heartbeats
from tfaccel.distribute.launcher import HUNG_EXIT_CODE, usable_cores

# argv: DIR MODE
WORKER = """
import os, sys, time
from tfaccel.distribute import heartbeat
directory, mode = sys.argv[1], sys.argv[2]
rank = int(os.environ["TFACCEL_LAUNCH_RANK"])
attempt = int(os.environ["TFACCEL_LAUNCH_ATTEMPT"])
def mark(name):
    with open(os.path.join(directory, f"{name}-{rank}-{attempt}"), "w") as f:
        f.write(repr(time.time()))
mark("started")
if mode == "ok":
    sys.exit(0)
if mode == "env":
    with open(os.path.join(directory, f"timeout-{rank}"), "w") as f:
        f.write(os.environ.get("TFACCEL_COLLECTIVE_TIMEOUT_S", "unset"))
if mode == "hang-rank1":           # both take steps 1-3; rank 1 hangs before step 4
    for step in range(1, 4):
        if step > 1:
            time.sleep(0.05)
        heartbeat(step)
    if rank == 1 and attempt == 0:  # marked right after its last heartbeat
        mark("hang")
        time.sleep(120)
    heartbeat(4)
    if attempt == 0:
        time.sleep(120)            # rank 0 waits for rank 1, as in a collective
    heartbeat(4, done=True)
if mode == "hang-inside":         # every rank starts step 3 and none finishes it
    heartbeat(1); heartbeat(2); heartbeat(3)
    time.sleep(120)
if mode == "silent":               # never reports a step
    time.sleep(120)
if mode == "done-then-quiet":      # training over: a long quiet tail is not a hang
    heartbeat(1); heartbeat(2); heartbeat(2, done=True)
    time.sleep(1.5)
if mode == "preempted":            # both save and exit 75 on the first attempt
    sys.exit(75 if attempt == 0 else 0)
if mode == "preempted-rank0":      # rank 0 exits 75, rank 1 never does
    if rank == 0:
        sys.exit(75)
    time.sleep(120)
"""


def run(worker: Path, directory: Path, mode: str, **options: object) -> tuple[object, str]:
    _, _, err, result = run_launch(worker, str(directory), mode, **options)
    return result, err


# --- hangs -----------------------------------------------------------------------------------


def test_a_hung_group_is_stopped_within_the_timeout_and_the_rank_behind_is_named(
    worker: Path, tmp_path: Path
) -> None:
    hang_s, grace_s = 1.0, 0.5
    result, err = run(
        worker, tmp_path, "hang-rank1", workers=2, hang_timeout_s=hang_s, grace_s=grace_s
    )
    assert result.exit_code == HUNG_EXIT_CODE, err  # type: ignore[attr-defined]
    attempt = result.attempts[0]  # type: ignore[attr-defined]
    assert (attempt.outcome, attempt.failed_rank, attempt.steps) == ("hung", 1, [4, 3])
    assert "worker 1 furthest behind, starting step 3; the others at step 4" in err
    hung_at = float((tmp_path / "hang-1-0").read_text())
    assert attempt.stopped_at is not None
    detected = attempt.stopped_at - hung_at
    # the watcher counts from the rank's last heartbeat, written just before the hang mark
    assert hang_s - 0.05 <= detected <= hang_s + 1.0, detected
    assert attempt.seconds < (attempt.stopped_at - attempt.started_at) + grace_s + 1.0


def test_a_hang_inside_a_step_on_every_rank_says_it_cannot_tell_the_rank(
    worker: Path, tmp_path: Path
) -> None:
    result, err = run(worker, tmp_path, "hang-inside", workers=2, hang_timeout_s=1, grace_s=0.5)
    assert result.exit_code == HUNG_EXIT_CODE, err  # type: ignore[attr-defined]
    assert result.attempts[0].outcome == "hung"  # type: ignore[attr-defined]
    assert "every worker started step 3 and none finished it" in err
    assert "cannot be told apart" in err and "furthest behind" not in err


def test_a_hung_group_is_restarted_when_restarts_allow(worker: Path, tmp_path: Path) -> None:
    result, err = run(
        worker, tmp_path, "hang-rank1", workers=2, hang_timeout_s=1, grace_s=0.5, restarts=1
    )
    assert result.exit_code == 0, err  # type: ignore[attr-defined]
    assert [a.outcome for a in result.attempts] == ["hung", "succeeded"]  # type: ignore[attr-defined]
    assert "restarting all 2 workers (restart 1 of 1)" in err


def test_a_worker_that_never_reports_a_step_hits_the_startup_allowance(
    worker: Path, tmp_path: Path
) -> None:
    began = time.monotonic()
    result, err = run(
        worker, tmp_path, "silent", workers=2, hang_timeout_s=0.2, startup_timeout_s=1.5,
        grace_s=0.5,
    )  # fmt: skip
    assert result.exit_code == HUNG_EXIT_CODE  # type: ignore[attr-defined]
    assert time.monotonic() - began >= 1.5  # the start-up allowance, not the hang timeout
    assert "worker 0 has not finished a first step within the start-up allowance of 1.5 s" in err
    assert "(no heartbeat from any worker)" in err


def test_a_worker_done_training_is_no_longer_watched(worker: Path, tmp_path: Path) -> None:
    result, err = run(worker, tmp_path, "done-then-quiet", workers=2, hang_timeout_s=0.3)
    assert result.exit_code == 0, err  # type: ignore[attr-defined]
    assert result.attempts[0].steps == [2, 2]  # type: ignore[attr-defined]


def test_without_a_hang_timeout_a_silent_group_is_left_alone(worker: Path, tmp_path: Path) -> None:
    result, _ = run(worker, tmp_path, "done-then-quiet", workers=1)
    assert result.exit_code == 0  # type: ignore[attr-defined]


# --- preemption ------------------------------------------------------------------------------


def test_workers_that_saved_on_sigterm_are_a_preemption_and_the_group_restarts(
    worker: Path, tmp_path: Path
) -> None:
    result, err = run(worker, tmp_path, "preempted", workers=2, restarts=1)
    assert result.exit_code == 0, err  # type: ignore[attr-defined]
    first = result.attempts[0]  # type: ignore[attr-defined]
    assert (first.outcome, first.exit_codes, first.stopped_at) == ("preempted", [75, 75], None)
    assert "workers 0, 1 saved on SIGTERM and exited with status 75 (preempted)" in err


def test_a_preemption_without_restarts_exits_75_and_stragglers_are_stopped(
    worker: Path, tmp_path: Path
) -> None:
    result, err = run(worker, tmp_path, "preempted-rank0", workers=2, grace_s=0.3)
    assert result.exit_code == 75, err  # type: ignore[attr-defined]
    attempt = result.attempts[0]  # type: ignore[attr-defined]
    assert attempt.outcome == "preempted" and attempt.exit_codes[0] == 75
    assert attempt.exit_codes[1] < 0  # stopped by the launcher after the grace period


# --- too many workers ------------------------------------------------------------------------


def test_far_more_workers_than_cores_is_refused_and_nothing_starts(
    worker: Path, tmp_path: Path
) -> None:
    cores = usable_cores()
    assert cores == len(os.sched_getaffinity(0))
    too_many = 2 * cores + 1
    with pytest.raises(UsageError) as caught:
        launch(str(worker), [str(tmp_path), "ok"], workers=too_many)
    message = str(caught.value)
    assert f"-n {too_many} starts {too_many} workers on {cores} usable core" in message
    assert "--oversubscribe" in (caught.value.fix or "")
    assert not list(tmp_path.glob("started-*"))


def test_the_command_refuses_them_with_status_2_unless_oversubscribe(
    worker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    too_many = str(2 * usable_cores() + 1)
    assert launch_cli.main(["-n", too_many, str(worker), str(tmp_path), "ok"]) == 2
    captured = capsys.readouterr()
    assert "tfaccel: error: -n" in captured.err and "Traceback" not in captured.err
    assert not list(tmp_path.glob("started-*"))
    argv = ["--json", "--oversubscribe", "-n", too_many, str(worker), str(tmp_path), "ok"]
    code = launch_cli.main(argv)
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 0 and len(doc["attempts"][0]["exit_codes"]) == int(too_many)
    assert len(list(tmp_path.glob("started-*"))) == int(too_many)


@pytest.mark.parametrize(("option", "value"), [("hang_timeout_s", 0), ("startup_timeout_s", -1.0)])
def test_timeouts_that_are_not_positive_are_usage_errors(
    worker: Path, tmp_path: Path, option: str, value: float
) -> None:
    with pytest.raises(UsageError, match="is not a positive number of seconds"):
        launch(str(worker), [str(tmp_path), "ok"], workers=1, **{option: value})  # type: ignore[arg-type]
    assert not list(tmp_path.glob("started-*"))


# --- heartbeat -------------------------------------------------------------------------------


def test_heartbeat_writes_the_rank_file_and_does_nothing_outside_the_launcher(
    tmp_path: Path,
) -> None:
    env = {"TFACCEL_HEARTBEAT_DIR": str(tmp_path), "TFACCEL_LAUNCH_RANK": "1"}
    heartbeat(5, environ=env)
    first = read_heartbeats(tmp_path, 2)[1]
    assert (first.step, first.done) == (5, False)
    sent = first.count
    heartbeat(9, done=True, environ=env)
    assert read_heartbeats(tmp_path, 2) == {1: Beat(9, done=True, count=sent + 1)}
    heartbeat(3, environ={})  # no launcher: nothing written, no error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-1"]
    with pytest.raises(UsageError, match="is not a step"):
        heartbeat(-1, environ=env)


# --- collective timeout ----------------------------------------------------------------------


def test_the_collective_timeout_is_read_from_the_environment_and_checked() -> None:
    from tfaccel.distribute.choice import DEFAULT_COLLECTIVE_TIMEOUT_S, collective_timeout

    assert collective_timeout({}) == DEFAULT_COLLECTIVE_TIMEOUT_S
    assert collective_timeout({"TFACCEL_COLLECTIVE_TIMEOUT_S": "42.5"}) == 42.5
    assert collective_timeout({"TFACCEL_COLLECTIVE_TIMEOUT_S": "0"}) == 0.0
    for bad in ("soon", "-1", "nan"):
        with pytest.raises(UsageError, match="is not a number of seconds") as caught:
            collective_timeout({"TFACCEL_COLLECTIVE_TIMEOUT_S": bad})
        assert caught.value.fix


def test_the_launcher_sets_a_collective_timeout_beyond_its_own_watch(
    worker: Path, tmp_path: Path
) -> None:
    result, err = run(
        worker, tmp_path, "env", workers=1, hang_timeout_s=10, startup_timeout_s=60, grace_s=2,
        environ={"PATH": os.environ.get("PATH", "")},
    )  # fmt: skip
    assert result.exit_code == 0, err  # type: ignore[attr-defined]
    assert (tmp_path / "timeout-0").read_text() == "74"  # 60 + 10 + 2 x 2
    result, _ = run(
        worker, tmp_path, "env", workers=1, environ={"PATH": os.environ.get("PATH", "")}
    )
    assert (tmp_path / "timeout-0").read_text() == "unset"  # no watch: the strategy's default
