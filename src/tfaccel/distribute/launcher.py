"""Start N local worker processes as one TensorFlow cluster, and stop them all together.

``launch()`` is what ``tfaccel launch -n N SCRIPT`` runs. Each worker is ``python SCRIPT
ARGS`` with its own ``TF_CONFIG`` (the same cluster of N workers on free ports of ``host``,
its own task index), in a process group of its own, its output lines prefixed with its rank
(``[1] epoch 0: loss 0.52``). When a worker fails, the others are stopped (SIGTERM, then
SIGKILL after ``grace_s``, each to the whole process group, so nothing a worker started is
left behind) and, with ``restarts`` left, the whole group starts again on new ports; a script
that trains with ``tfaccel.distribute.train(checkpoint_dir=...)`` then resumes from its last
checkpoint. Ctrl-C (and SIGTERM) stops every worker the same way. TensorFlow's multi-worker
runtime takes SIGTERM as a preemption notice and keeps running, so a worker blocked in a
collective usually ends with the SIGKILL, ``grace_s`` later.

Workers also get ``TFACCEL_LAUNCH_RANK``, ``TFACCEL_LAUNCH_WORKERS`` and
``TFACCEL_LAUNCH_ATTEMPT`` (0 for the first start, 1 after the first restart...).

The cluster addresses are on ``host`` (127.0.0.1 unless asked), so the workers talk over
loopback. Note that TensorFlow's gRPC server itself listens on every interface at its port
(it ignores the host of its address), so on a machine reachable from an untrusted network,
firewall the ports.

Example:
    >>> result = launch("train.py", ["--epochs", "3"], workers=2, restarts=1)
    >>> result.exit_code
    0
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from tfaccel.distribute.cluster import format_address, local_cluster
from tfaccel.errors import TfaccelError, UsageError
from tfaccel.scripts import check_script

__all__ = ["Attempt", "LaunchError", "LaunchResult", "check_ports", "free_ports", "launch"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_GRACE_S = 5.0
_POLL_S = 0.05


class LaunchError(TfaccelError):
    """The workers cannot be started as asked (nothing was started)."""


class _Stop(BaseException):
    """SIGTERM reached the launcher: stop the workers as for Ctrl-C."""


@dataclass
class Attempt:
    """One start of the whole group.

    Attributes:
        number: 0 for the first start, 1 after the first restart...
        ports: each rank's port.
        exit_codes: each rank's exit status (negative: killed by that signal, which is
            SIGTERM or SIGKILL for the workers the launcher stopped).
        failed_rank: the first worker that failed, None when all succeeded.
        seconds: wall time of the attempt.
    """

    number: int
    ports: list[int]
    exit_codes: list[int] = field(default_factory=list)
    failed_rank: int | None = None
    seconds: float = 0.0


@dataclass
class LaunchResult:
    """What ``launch()`` did.

    Attributes:
        exit_code: 0 when every worker succeeded; else the failed worker's status (128 + the
            signal when killed by one), 130 after Ctrl-C, 143 after SIGTERM.
        attempts: each start of the group.
        interrupted: stopped by Ctrl-C or SIGTERM.
    """

    exit_code: int
    attempts: list[Attempt]
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
            "attempts": [asdict(a) for a in self.attempts],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def launch(
    script: str,
    args: Sequence[str] = (),
    *,
    workers: int,
    restarts: int = 0,
    host: str = DEFAULT_HOST,
    port_base: int | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LaunchResult:
    """Run ``script`` as ``workers`` local workers of one cluster; restart the group on failure.

    Args:
        script: the Python script (or a directory with ``__main__.py``).
        args: the script's arguments.
        workers: the number of worker processes (>= 1).
        restarts: how many times to restart the whole group after a failure.
        host: the address the workers use to reach each other (loopback by default).
        port_base: use ports ``port_base .. port_base + workers - 1`` (checked to be free);
            default: free ports picked by the system, new ones at each restart.
        grace_s: seconds between SIGTERM and SIGKILL when stopping workers.
        stdout: where the workers' standard output goes, prefixed (default ``sys.stdout``).
        stderr: where their standard error and the launcher's messages go (``sys.stderr``).
        environ: the workers' base environment (default ``os.environ``).

    Returns:
        A LaunchResult; ``exit_code`` is what ``tfaccel launch`` exits with.

    Raises:
        UsageError: ``workers`` < 1, ``restarts`` < 0, the script does not exist.
        LaunchError: a port is in use or ``host`` is not an address of this machine.
        Nothing is started in either case.

    Example:
        >>> launch("train.py", workers=2, restarts=1).exit_code
        0
    """
    _check_arguments(script, workers, restarts, grace_s)
    ports = _ports(host, workers, port_base)
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    base_env = dict(os.environ if environ is None else environ)
    attempts: list[Attempt] = []
    with _sigterm_raises_stop():
        for number in range(restarts + 1):
            if number:
                ports = _ports(host, workers, port_base)
            group = _Group(script, list(args), host, ports, number, base_env, out, err)
            attempt = Attempt(number, ports)
            attempts.append(attempt)
            _say(
                err,
                f"starting {workers} worker{'s' if workers != 1 else ''} on "
                f"{host} ports {', '.join(map(str, ports))} (attempt {number + 1} of "
                f"{restarts + 1})",
            )
            began = time.monotonic()
            try:
                group.start()
                attempt.failed_rank = group.wait()
            except (KeyboardInterrupt, _Stop) as stop:
                code = 130 if isinstance(stop, KeyboardInterrupt) else 128 + signal.SIGTERM
                _say(err, f"interrupted: stopping every worker{_how(grace_s)}")
                group.stop(grace_s)
                attempt.exit_codes, attempt.seconds = group.exit_codes(), time.monotonic() - began
                return LaunchResult(code, attempts, interrupted=True)
            if attempt.failed_rank is not None:
                _say(
                    err,
                    f"worker {attempt.failed_rank} {group.describe(attempt.failed_rank)}; "
                    f"stopping the others{_how(grace_s)}",
                )
            group.stop(grace_s)
            attempt.exit_codes, attempt.seconds = group.exit_codes(), time.monotonic() - began
            if attempt.failed_rank is None:
                return LaunchResult(0, attempts)
            if number < restarts:
                _say(
                    err,
                    f"restarting all {workers} workers (restart {number + 1} of {restarts}); "
                    "a script that saves checkpoints resumes from its last one",
                )
    failed = attempts[-1]
    assert failed.failed_rank is not None
    return LaunchResult(_exit_status(failed.exit_codes[failed.failed_rank]), attempts)


def _say(err: IO[str], text: str) -> None:
    err.write(f"tfaccel launch: {text}\n")
    err.flush()


def _how(grace_s: float) -> str:
    return f" (SIGTERM, then SIGKILL after {grace_s:g} s)"


def _exit_status(code: int) -> int:
    """A worker's status as a shell reports it: 128 + N when killed by signal N."""
    return 128 - code if code < 0 else code


# --------------------------------------------------------------------------- checks


def _check_arguments(script: str, workers: int, restarts: int, grace_s: float) -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UsageError(
            f"Cannot start {workers!r} workers",
            expected="-n N with N >= 1 (the number of worker processes)",
            received=f"-n {workers}",
            fix="pass -n 2 (or more) to train on several workers",
        )
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        raise UsageError(
            f"--restarts {restarts!r} is not a count",
            expected="an integer >= 0",
            received=f"--restarts {restarts}",
            fix="pass --restarts 1 to restart the group once after a failure",
        )
    if not grace_s > 0:
        raise UsageError(
            f"--grace {grace_s!r} is not a positive number of seconds",
            expected="seconds > 0 between SIGTERM and SIGKILL",
            received=f"--grace {grace_s}",
            fix="pass --grace 10",
        )
    check_script(script, "launch")


def _ports(host: str, workers: int, port_base: int | None) -> list[int]:
    if port_base is None:
        return free_ports(host, workers)
    if not 1 <= port_base <= 65536 - workers:
        raise UsageError(
            f"--port-base {port_base} leaves no room for {workers} ports",
            expected=f"a port in 1..{65536 - workers}",
            received=f"--port-base {port_base}",
            fix="pass a port such as 20000, or leave --port-base out to pick free ports",
        )
    ports = list(range(port_base, port_base + workers))
    check_ports(host, ports)
    return ports


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def check_ports(host: str, ports: Sequence[int]) -> None:
    """Check that each port can be bound on ``host`` (nothing listens there).

    Raises:
        LaunchError: a port is in use, or ``host`` is not an address of this machine.
    """
    for port in ports:
        with socket.socket(_family(host), socket.SOCK_STREAM) as probe:
            # SO_REUSEADDR: a port whose last connections wait in TIME_WAIT is free to reuse
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                raise _bind_error(host, port, exc) from None


def free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct ports the system reports free on ``host`` now.

    Raises:
        LaunchError: ``host`` is not an address of this machine.
    """
    sockets = []
    try:
        for _ in range(count):
            held = socket.socket(_family(host), socket.SOCK_STREAM)
            sockets.append(held)
            try:
                held.bind((host, 0))
            except OSError as exc:
                raise _bind_error(host, 0, exc) from None
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for held in sockets:
            held.close()


def _bind_error(host: str, port: int, exc: OSError) -> LaunchError:
    if exc.errno == errno.EADDRINUSE:
        return LaunchError(
            f"Port {port} on {host} is in use",
            expected=f"free ports for the workers ({format_address(host, port)} is taken)",
            received=f"{exc.strerror} ({format_address(host, port)})",
            fix="pass another --port-base, or leave it out to pick free ports",
        )
    if exc.errno == errno.EACCES:
        return LaunchError(
            f"Port {port} needs privileges this user does not have",
            expected="ports >= 1024",
            received=f"--port-base {port}",
            fix="pass --port-base 20000 or leave it out",
        )
    return LaunchError(
        f"Cannot bind {format_address(host, port)}",
        expected="--host an address of this machine (127.0.0.1 by default)",
        received=f"{type(exc).__name__}: {exc.strerror or exc}",
        fix="leave --host out to use loopback, or pass one of this machine's addresses",
    )


# --------------------------------------------------------------------------- the group


class _Group:
    """The worker processes of one attempt, their output pumps, and how to stop them."""

    def __init__(
        self,
        script: str,
        args: list[str],
        host: str,
        ports: list[int],
        attempt: int,
        base_env: dict[str, str],
        out: IO[str],
        err: IO[str],
    ) -> None:
        self.script, self.args, self.host, self.ports = script, args, host, ports
        self.attempt, self.base_env, self.out, self.err = attempt, base_env, out, err
        self.processes: list[subprocess.Popen[bytes]] = []
        self.pumps: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.closed: set[int] = set()  # ids of sinks that raised BrokenPipeError

    def env(self, rank: int) -> dict[str, str]:
        env = dict(self.base_env)
        env["TF_CONFIG"] = local_cluster(self.host, self.ports, rank).to_tf_config()
        env["TFACCEL_LAUNCH_RANK"] = str(rank)
        env["TFACCEL_LAUNCH_WORKERS"] = str(len(self.ports))
        env["TFACCEL_LAUNCH_ATTEMPT"] = str(self.attempt)
        env["PYTHONUNBUFFERED"] = "1"  # lines as they are printed, not at exit
        return env

    def start(self) -> None:
        for rank in range(len(self.ports)):
            try:
                process = subprocess.Popen(
                    [sys.executable, self.script, *self.args],
                    env=self.env(rank),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,  # its own process group: stopped as a whole
                )
            except OSError as exc:
                self.stop(0.0)
                raise LaunchError(
                    f"Worker {rank} could not be started",
                    expected=f"{sys.executable} able to run {self.script}",
                    received=f"{type(exc).__name__}: {exc}",
                    fix="check the Python interpreter and the script's permissions",
                ) from None
            self.processes.append(process)
            for pipe, sink in ((process.stdout, self.out), (process.stderr, self.err)):
                pump = threading.Thread(target=self._pump, args=(rank, pipe, sink), daemon=True)
                pump.start()
                self.pumps.append(pump)

    def _pump(self, rank: int, pipe: IO[bytes] | None, sink: IO[str]) -> None:
        assert pipe is not None
        prefix = f"[{rank}] "
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            with self.lock:
                if id(sink) in self.closed:
                    continue  # keep draining so the worker never blocks on a full pipe
                try:
                    sink.write(prefix + line + "\n")
                    sink.flush()
                except BrokenPipeError:
                    self.closed.add(id(sink))
        pipe.close()

    def wait(self) -> int | None:
        """Block until every worker succeeded (None) or one failed (its rank)."""
        while True:
            running = False
            for rank, process in enumerate(self.processes):
                code = process.poll()
                if code is None:
                    running = True
                elif code != 0:
                    return rank
            if not running:
                return None
            time.sleep(_POLL_S)

    def describe(self, rank: int) -> str:
        code = self.processes[rank].returncode
        if code is not None and code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def stop(self, grace_s: float) -> None:
        """SIGTERM every worker's process group, SIGKILL what remains after ``grace_s``."""
        self._signal_groups(signal.SIGTERM, only_running=True)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(p.poll() is None for p in self.processes):
            time.sleep(_POLL_S)
        self._signal_groups(signal.SIGKILL, only_running=False)  # leftovers of exited workers too
        for process in self.processes:
            process.wait()
        for pump in self.pumps:
            pump.join(timeout=5.0)

    def _signal_groups(self, sig: signal.Signals, *, only_running: bool) -> None:
        for process in self.processes:
            if only_running and process.poll() is not None:
                continue
            try:
                os.killpg(process.pid, sig)  # the group id is the worker's pid (new session)
            except ProcessLookupError:
                continue  # the group has no process left
            except PermissionError:
                continue  # the id now names another user's group: not ours to signal

    def exit_codes(self) -> list[int]:
        return [int(p.returncode) for p in self.processes if p.returncode is not None]


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop()


@contextlib.contextmanager
def _sigterm_raises_stop() -> Iterator[None]:
    """While launching, SIGTERM to the launcher stops the workers as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set in the main thread
        return
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
