"""``tfaccel launch``'s network isolation and orphan handling, with plain Python workers.

Each worker binds its TF_CONFIG port on the wildcard address, as TensorFlow's gRPC server does,
then waits. The tests read the socket tables of the launcher's network namespace and of the
workers' (``/proc/PID/net/tcp`` and ``tcp6``), never sending a packet anywhere, and check that
no process is left (``/proc``) when the launcher is killed with SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from launch_helpers import alive
from runtime_helpers import clean_env

from tfaccel.distribute.worker_network import ENTRY, Network, is_loopback

# argv: DIR MODE. "listen": bind the TF_CONFIG port on 0.0.0.0 and wait for DIR/go.
WORKER = """
import json, os, socket, subprocess, sys, time
directory, mode = sys.argv[1], sys.argv[2]
rank = os.environ["TFACCEL_LAUNCH_RANK"]
config = json.loads(os.environ["TF_CONFIG"])
port = int(config["cluster"]["worker"][int(rank)].rsplit(":", 1)[1])
server = socket.socket()
server.bind(("0.0.0.0", port))
server.listen()
with open(os.path.join(directory, f"worker-{rank}"), "w") as f:
    json.dump({"pid": os.getpid(), "port": port, "netns": os.readlink("/proc/self/ns/net")}, f)
if mode == "listen":
    while not os.path.exists(os.path.join(directory, "go")):
        time.sleep(0.02)
elif mode == "sleep":
    time.sleep(120)
"""


def start(worker: Path, directory: Path, mode: str, *options: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tfaccel.cli.launch", "--json", *options, "-n", "2"]
    return subprocess.Popen(
        [*command, str(worker), str(directory), mode],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def workers_ready(directory: Path, launcher: subprocess.Popen[str]) -> list[dict[str, object]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = sorted(directory.glob("worker-*"))
        if len(found) == 2:
            try:
                return [json.loads(p.read_text()) for p in found]
            except json.JSONDecodeError:
                pass  # being written
        assert launcher.poll() is None, launcher.communicate()
        time.sleep(0.02)
    raise AssertionError("the workers did not start")


def listening(pid: int) -> dict[int, str]:
    """Port -> local address of each LISTEN socket in the network namespace of ``pid``."""
    found: dict[int, str] = {}
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                address, port = fields[1].rsplit(":", 1)
                found[int(port, 16)] = address
    return found


def is_loopback_hex(address: str) -> bool:
    if len(address) == 8:  # IPv4, little-endian bytes: 127.x.x.x ends with "7F"
        return address.upper().endswith("7F")
    return address.upper() in ("00000000000000000000000001000000",)  # ::1


def finish(directory: Path, launcher: subprocess.Popen[str]) -> tuple[dict[str, object], str]:
    (directory / "go").touch()
    out, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 0, err
    return json.loads(out), err


def isolation_possible() -> bool:
    network = Network.start(host="127.0.0.1", isolate=True)
    network.close()
    return network.isolated


def test_workers_listen_only_inside_their_own_network_namespace(
    worker: Path, tmp_path: Path
) -> None:
    if not isolation_possible():
        pytest.skip("this kernel refuses private network namespaces (see the warning test)")
    launcher = start(worker, tmp_path, "listen")
    workers = workers_ready(tmp_path, launcher)
    ports = {int(w["pid"]): int(w["port"]) for w in workers}  # type: ignore[call-overload]
    outside = listening(launcher.pid)
    for pid, port in ports.items():
        inside = listening(pid)
        assert inside.get(port) in ("00000000", "0" * 32), inside  # it listens, on wildcard
        assert port not in outside, f"port {port} is open in the launcher's namespace"
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink(f"/proc/{launcher.pid}/ns/net")
    assert all(is_loopback_hex(a) for p, a in outside.items() if p in ports.values())
    doc, err = finish(tmp_path, launcher)
    assert doc["isolated"] is True and doc["isolation"] in ("net", "user+net")
    assert "in a private network namespace" in err and "WARNING" not in err


def test_without_isolation_the_exposed_ports_are_named_before_the_start(
    worker: Path, tmp_path: Path
) -> None:
    launcher = start(worker, tmp_path, "listen", "--no-isolate")
    workers = workers_ready(tmp_path, launcher)
    outside = listening(launcher.pid)
    for w in workers:  # the check above can fail: here the ports are open on every interface
        assert outside.get(int(w["port"])) == "00000000"  # type: ignore[call-overload]
    doc, err = finish(tmp_path, launcher)
    assert doc["isolated"] is False and doc["isolation"] == "--no-isolate was given"
    warning, starting = err.index("WARNING: the workers are not isolated"), err.index("starting 2")
    assert warning < starting
    ports = doc["attempts"][0]["ports"]  # type: ignore[index]
    assert f"EVERY interface at ports {ports[0]}, {ports[1]}" in err
    assert f"--dports {ports[0]},{ports[1]} ! -i lo -j DROP" in err


def test_a_kernel_that_refuses_namespaces_gets_the_warning(worker: Path, tmp_path: Path) -> None:
    """Inside a user namespace whose namespace limits are 0, the kernel itself refuses."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs util-linux's unshare to set the namespace limits to 0")
    limits = (
        "echo 0 > /proc/sys/user/max_user_namespaces && "
        'echo 0 > /proc/sys/user/max_net_namespaces && exec "$@"'
    )
    command = [unshare, "--user", "--map-root-user", "sh", "-c", limits, "sh"]
    script = [str(worker), str(tmp_path), "exit"]
    done = subprocess.run(
        [*command, sys.executable, "-m", "tfaccel.cli.launch", "--json", "-n", "1", *script],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0 and "tfaccel" not in done.stderr:
        pytest.skip(f"cannot make a user namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["isolated"] is False
    assert doc["isolation"].startswith("this kernel refused a private network namespace")
    assert "WARNING: the workers are not isolated (this kernel refused" in done.stderr


def test_a_host_that_is_not_loopback_is_not_isolated() -> None:
    network = Network.start(host="0.0.0.0", isolate=True)
    assert not network.isolated and network.reason == "--host 0.0.0.0 is not a loopback address"
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("10.0.0.1") and not is_loopback("example.org")


def test_the_namespace_also_works_for_an_unprivileged_user() -> None:
    """As root, run the holder and a worker entry as nobody (uid 65534): the user-namespace path."""
    setpriv, python = shutil.which("setpriv"), "/usr/bin/python3"
    if os.geteuid() != 0 or setpriv is None or not os.access(python, os.X_OK):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to act as an unprivileged user")
    with tempfile.TemporaryDirectory(prefix="tfaccel-userns-") as directory:
        tmp_path = Path(directory)  # under /tmp, which nobody can reach (pytest's may not be)
        tmp_path.chmod(0o777)
        _run_as_nobody(setpriv, python, tmp_path)


def _run_as_nobody(setpriv: str, python: str, tmp_path: Path) -> None:
    entry = tmp_path / "_entry_process.py"
    shutil.copy(ENTRY, entry)  # readable by nobody, unlike a virtual environment under /root
    entry.chmod(0o644)
    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent(
            f"""
            import os, subprocess, sys
            holder = subprocess.Popen([sys.executable, "-I", {str(entry)!r}, "holder"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            print(holder.stdout.readline().strip())
            code = ("import os, socket; s = socket.socket(); s.bind(('0.0.0.0', 4321)); "
                    "s.listen(); open({str(tmp_path / "made")!r}, 'w').close(); "
                    "print(os.getuid(), os.readlink('/proc/self/ns/net'), "
                    "open('/proc/self/net/tcp').read().count(':10E1 00000000:0000 0A'))")
            subprocess.run([sys.executable, "-I", {str(entry)!r}, "enter", "--parent",
                            str(os.getpid()), "--holder", str(holder.pid), "--userns", "--",
                            sys.executable, "-c", code], check=True)
            print(os.readlink('/proc/self/ns/net'))
            holder.stdin.close()
            holder.wait()
            """
        )
    )
    done = subprocess.run(
        [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", python, str(probe)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    ready, inside, outside = done.stdout.splitlines()
    assert ready == "ready user+net"
    uid, netns, listeners = inside.split()
    assert uid == "65534" and netns != outside and listeners == "1"
    assert (tmp_path / "made").stat().st_uid == 65534  # files keep the user's own id


# --- no orphans ------------------------------------------------------------------------------


def children(pid: int) -> dict[int, str]:
    """The direct children of ``pid`` (pid -> command line), read from /proc."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found[int(entry.name)] = command
    return found


@pytest.mark.parametrize("isolate", [True, False], ids=["isolated", "not-isolated"])
def test_killing_the_launcher_with_sigkill_leaves_no_worker(
    worker: Path, tmp_path: Path, isolate: bool
) -> None:
    launcher = start(worker, tmp_path, "sleep", *([] if isolate else ["--no-isolate"]))
    workers = workers_ready(tmp_path, launcher)
    started = children(launcher.pid)
    worker_pids = {int(w["pid"]) for w in workers}  # type: ignore[call-overload]
    assert worker_pids <= set(started)
    holders = [pid for pid, command in started.items() if "_entry_process.py holder" in command]
    assert len(holders) == (1 if isolate and isolation_possible() else 0)
    launcher.send_signal(signal.SIGKILL)
    launcher.communicate(timeout=30)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(pid) for pid in started):
        time.sleep(0.05)
    left = {pid: command for pid, command in started.items() if alive(pid)}
    assert not left, f"left behind after SIGKILL of the launcher: {left}"
