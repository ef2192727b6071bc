"""``tfaccel launch``'s process handling, with plain Python workers (no TensorFlow): output
prefixes, exit statuses, stopping the whole group (process groups, grandchildren, workers that
ignore SIGTERM), restarts, Ctrl-C, and bad input refused before anything starts.

Each worker writes its pid (and its children's) to a directory, so the tests can check that
no process is left behind, reading /proc rather than trusting the launcher."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch_helpers import alive, run_launch
from runtime_helpers import clean_env, ctrl_c_reaches_it

from tfaccel.cli import launch as launch_cli
from tfaccel.core.errors import UsageError
from tfaccel.distribute import LaunchError, launch

# argv: PIDS_DIR MODE; MODE decides what each rank does
WORKER = """
import json, os, signal, subprocess, sys, time
pids, mode = sys.argv[1], sys.argv[2]
rank = int(os.environ["TFACCEL_LAUNCH_RANK"])
attempt = int(os.environ["TFACCEL_LAUNCH_ATTEMPT"])
def record(name, pid):  # whole or not at all: the test reads these files as they appear
    path = os.path.join(pids, f"{name}-{rank}-{attempt}")
    with open(path + ".part", "w") as f:
        f.write(str(pid))
    os.replace(path + ".part", path)
record("worker", os.getpid())
print(f"hello from {rank}", flush=True)
print(f"warning from {rank}", file=sys.stderr, flush=True)
if mode == "ok":
    print("TF_CONFIG " + os.environ["TF_CONFIG"], flush=True)
    sys.exit(0)
def wait_for(name):
    path = os.path.join(pids, f"{name}-0-{attempt}")
    while not os.path.exists(path):
        time.sleep(0.01)
if mode == "fail-rank1":            # rank 1 fails, rank 0 (and a child of it) would run on
    if rank == 1:
        wait_for("child")
        sys.exit(3)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    record("child", child.pid)
    time.sleep(120)
if mode == "ignore-term":           # rank 0 ignores SIGTERM: needs SIGKILL
    if rank == 1:
        wait_for("ready")
        sys.exit(4)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    record("ready", os.getpid())
    time.sleep(120)
if mode == "fail-first-attempt":
    if rank == 1 and attempt == 0:
        wait_for("worker")          # rank 0 has started (and recorded) before the group is torn down
        sys.exit(5)
    sys.exit(0)
if mode == "killed":
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)
if mode == "sleep":
    time.sleep(120)
"""


@pytest.fixture
def pids(tmp_path: Path) -> Path:
    directory = tmp_path / "pids"
    directory.mkdir()
    return directory


def recorded(pids: Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in pids.iterdir() if p.suffix != ".part"}


def assert_none_left(pids: Path) -> None:
    deadline = time.monotonic() + 5  # a killed grandchild is reaped by init, not by us
    while time.monotonic() < deadline:
        left = {name: pid for name, pid in recorded(pids).items() if alive(pid)}
        if not left:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes left behind: {left}")


# --- normal runs ---------------------------------------------------------------------------


def test_each_worker_gets_its_tf_config_and_its_output_is_prefixed_with_its_rank(
    worker: Path, pids: Path
) -> None:
    code, out, err, result = run_launch(worker, str(pids), "ok", workers=3)
    assert code == 0
    for rank in range(3):
        assert f"[{rank}] hello from {rank}" in out.splitlines()
        assert f"[{rank}] warning from {rank}" in err.splitlines()
    configs = [
        json.loads(line.split("TF_CONFIG ", 1)[1])
        for line in out.splitlines()
        if "TF_CONFIG" in line
    ]
    assert sorted(c["task"]["index"] for c in configs) == [0, 1, 2]
    workers = {tuple(c["cluster"]["worker"]) for c in configs}
    assert len(workers) == 1  # the same cluster for all
    addresses = workers.pop()
    assert all(a.startswith("127.0.0.1:") for a in addresses) and len(set(addresses)) == 3
    assert [int(a.rsplit(":", 1)[1]) for a in addresses] == result.attempts[0].ports  # type: ignore[attr-defined]
    assert_none_left(pids)


def test_port_base_sets_the_ports(worker: Path, pids: Path) -> None:
    base = _free_port_range(2)
    code, out, _, _ = run_launch(worker, str(pids), "ok", workers=2, port_base=base)
    assert code == 0
    assert f'"127.0.0.1:{base}", "127.0.0.1:{base + 1}"' in out


# --- failures stop the group -----------------------------------------------------------------


def test_a_failing_worker_stops_the_others_and_their_children(worker: Path, pids: Path) -> None:
    code, _, err, result = run_launch(worker, str(pids), "fail-rank1", workers=2, grace_s=5)
    assert code == 3
    assert "worker 1 exited with status 3; stopping the others" in err
    assert result.attempts[0].failed_rank == 1  # type: ignore[attr-defined]
    names = recorded(pids)
    assert {"worker-0-0", "worker-1-0", "child-0-0"} <= set(names)
    assert_none_left(pids)


def test_a_worker_ignoring_sigterm_is_killed_after_the_grace_period(
    worker: Path, pids: Path
) -> None:
    code, _, _, result = run_launch(worker, str(pids), "ignore-term", workers=2, grace_s=0.5)
    assert code == 4
    assert result.attempts[0].exit_codes == [-signal.SIGKILL, 4]  # type: ignore[attr-defined]
    assert_none_left(pids)


def test_a_worker_killed_by_a_signal_gives_128_plus_the_signal(worker: Path, pids: Path) -> None:
    code, _, err, _ = run_launch(worker, str(pids), "killed", workers=2, grace_s=5)
    assert code == 128 + signal.SIGKILL
    assert "worker 1 was killed by SIGKILL" in err
    assert_none_left(pids)


def test_restarts_start_the_whole_group_again_on_new_ports(worker: Path, pids: Path) -> None:
    code, _, err, result = run_launch(
        worker, str(pids), "fail-first-attempt", workers=2, restarts=2
    )
    assert code == 0
    attempts = result.attempts  # type: ignore[attr-defined]
    assert len(attempts) == 2 and attempts[0].failed_rank == 1 and attempts[1].failed_rank is None
    assert set(attempts[0].ports).isdisjoint(attempts[1].ports)
    assert "restarting all 2 workers (restart 1 of 2)" in err
    assert {"worker-0-0", "worker-1-0", "worker-0-1", "worker-1-1"} == set(recorded(pids))


def test_without_restarts_the_first_failure_is_the_exit_status(worker: Path, pids: Path) -> None:
    code, _, _, result = run_launch(worker, str(pids), "fail-first-attempt", workers=2)
    assert code == 5 and len(result.attempts) == 1  # type: ignore[attr-defined]


def test_ctrl_c_stops_every_worker_and_exits_130(worker: Path, pids: Path) -> None:
    launcher = subprocess.Popen(
        [sys.executable, "-m", "tfaccel.cli.launch", "-n", "2", str(worker), str(pids), "sleep"],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches_it,
    )
    _wait_for(lambda: len(recorded(pids)) == 2)
    launcher.send_signal(signal.SIGINT)
    _out, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 130, err
    assert "interrupted: stopping every worker" in err
    assert_none_left(pids)


def test_sigterm_to_the_launcher_stops_every_worker(worker: Path, pids: Path) -> None:
    launcher = subprocess.Popen(
        [sys.executable, "-m", "tfaccel.cli.launch", "-n", "2", str(worker), str(pids), "sleep"],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(lambda: len(recorded(pids)) == 2)
    launcher.terminate()
    _, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 128 + signal.SIGTERM, err
    assert_none_left(pids)


# --- bad input: a clear error, nothing started ---------------------------------------------


@pytest.mark.parametrize("workers", [0, -2])
def test_no_workers_is_a_usage_error(worker: Path, pids: Path, workers: int) -> None:
    with pytest.raises(UsageError, match=f"Cannot start {workers} workers"):
        launch(str(worker), [str(pids), "ok"], workers=workers)
    assert not recorded(pids)


def test_a_script_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist") as caught:
        launch(str(tmp_path / "nope.py"), workers=2)
    assert caught.value.fix


def test_a_port_in_use_is_a_clear_error_and_nothing_starts(worker: Path, pids: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(LaunchError) as caught:
            launch(str(worker), [str(pids), "ok"], workers=2, port_base=port)
    err = caught.value
    assert f"Port {port} on 127.0.0.1 is in use" in err.what and "--port-base" in (err.fix or "")
    assert not recorded(pids)


def test_a_host_that_is_not_this_machine_is_a_clear_error(worker: Path, pids: Path) -> None:
    with pytest.raises(LaunchError, match=r"Cannot bind 203\.0\.113\.7"):
        launch(str(worker), [str(pids), "ok"], workers=1, host="203.0.113.7")
    assert not recorded(pids)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"restarts": -1}, "--restarts -1"),
        ({"grace_s": 0}, "--grace 0"),
        ({"port_base": 65535}, "leaves no room"),
    ],
)
def test_bad_options_are_usage_errors(
    worker: Path, pids: Path, options: dict[str, object], match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        launch(str(worker), [str(pids), "ok"], workers=2, **options)  # type: ignore[arg-type]
    assert not recorded(pids)


# --- the command ---------------------------------------------------------------------------


def test_the_command_reports_usage_errors_with_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert launch_cli.main(["-n", "0", str(tmp_path / "x.py")]) == 2
    assert "tfaccel: error: Cannot start 0 workers" in capsys.readouterr().err
    assert launch_cli.main(["-n", "2", str(tmp_path / "missing.py")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert launch_cli.main(["-n", "2"]) == 2
    assert "No script to launch" in capsys.readouterr().err


def test_the_command_passes_options_after_the_script_to_the_script(
    worker: Path, pids: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = launch_cli.main(["-n", "1", "--json", str(worker), str(pids), "ok", "--restarts"])
    captured = capsys.readouterr()
    assert code == 0
    doc = json.loads(captured.out)  # --json: only the summary on stdout
    assert doc["exit_code"] == 0 and len(doc["attempts"]) == 1
    assert "[0] hello from 0" in captured.err


def test_the_command_registers_as_a_tfaccel_subcommand() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    launch_cli.add_parser(sub)
    args = parser.parse_args(["launch", "-n", "2", "--restarts", "1", "train.py", "--lr", "0.1"])
    assert (args.workers, args.restarts, args.script_and_args) == (
        2,
        1,
        ["train.py", "--lr", "0.1"],
    )
    assert args.handler is launch_cli.run


# --- helpers -------------------------------------------------------------------------------


def _free_port_range(count: int) -> int:
    for base in range(31000, 60000, 97):
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError("no free port range")


def _wait_for(condition: object, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_worker_environment_does_not_leak_the_launchers_tf_config(
    worker: Path, pids: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["elsewhere:1"]}}')
    code, out, _, _ = run_launch(worker, str(pids), "ok", workers=1, environ=dict(os.environ))
    assert code == 0 and "elsewhere" not in out


def test_tfaccel_main_runs_launch_once_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tfaccel.cli as cli

    assert cli.main(["launch", "-n", "0", str(tmp_path / "train.py")]) == 2
    assert "tfaccel: error: Cannot start 0 workers" in capsys.readouterr().err
