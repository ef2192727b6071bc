"""Start N local worker processes as one TensorFlow cluster, watch them, stop them together.

``launch()`` is what ``tfaccel launch -n N SCRIPT`` runs. Each worker is ``python SCRIPT
ARGS`` with its own ``TF_CONFIG`` (the same cluster of N workers on free ports of ``host``,
its own task index), in a process group of its own, its output lines prefixed with its rank
(``[1] epoch 0: loss 0.52``).

- **Isolation.** TensorFlow's gRPC worker server listens on every interface at its port
  whatever ``host`` says, unauthenticated. The workers therefore run in a private network
  namespace where only loopback exists (:mod:`tfaccel.distribute.worker_network`); where that is not
  possible, a warning says before the start which ports are exposed and how to fence them.
- **No orphans.** Every worker starts through a small entry that asks the kernel to SIGKILL it
  when the launcher dies (``PR_SET_PDEATHSIG``; a watchdog where that does not exist), so a
  launcher killed with SIGKILL leaves no worker behind.
- **Failures.** When a worker fails, the others are stopped (SIGTERM, then SIGKILL after
  ``grace_s``, each to the whole process group) and, with ``restarts`` left, the whole group
  starts again on new ports; a script that trains with
  ``tfaccel.distribute.train(checkpoint_dir=...)`` resumes from its last checkpoint.
- **Hangs.** With ``hang_timeout_s``, a group whose heartbeats
  (:mod:`tfaccel.distribute.heartbeat`) all stand still that long is stopped, the rank furthest
  behind is named, and the group restarts as after a failure. Until every rank has finished
  its first step (TensorFlow's import, the cluster's start, the first trace) the allowance is
  ``startup_timeout_s`` instead.
- **Preemption.** A worker that saved on SIGTERM exits with status 75
  (:mod:`tfaccel.distribute.preemption`); the launcher waits for the others to do the same and
  restarts the group (it counts as a restart), which resumes from that step.
- Ctrl-C (and SIGTERM) stops every worker the same way; a worker of ``train()`` saves its step
  on the SIGTERM when it can within ``grace_s``.

Workers also get ``TFACCEL_LAUNCH_RANK``, ``TFACCEL_LAUNCH_WORKERS``,
``TFACCEL_LAUNCH_ATTEMPT`` (0 for the first start, 1 after the first restart...) and
``TFACCEL_HEARTBEAT_DIR``.

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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from tfaccel.core.checks import MAX_COUNT, in_range, is_int, is_real
from tfaccel.core.cluster import format_address, local_cluster
from tfaccel.core.errors import TfaccelError, UsageError, shown
from tfaccel.core.stopping import interrupt_code, stop_signals
from tfaccel.distribute.choice import COLLECTIVE_TIMEOUT_ENV
from tfaccel.distribute.heartbeat import HEARTBEAT_DIR_ENV, Beat, read_heartbeats
from tfaccel.distribute.preemption import PREEMPTED_EXIT_CODE
from tfaccel.distribute.worker_network import Network, entry_command, exposure_warning
from tfaccel.probe.cpu import usable_cores
from tfaccel.scripts import check_script

__all__ = [
    "HUNG_EXIT_CODE",
    "OVERSUBSCRIBE_FACTOR",
    "Attempt",
    "LaunchError",
    "LaunchResult",
    "check_ports",
    "free_ports",
    "launch",
    "usable_cores",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_GRACE_S = 5.0
DEFAULT_STARTUP_TIMEOUT_S = 300.0
OVERSUBSCRIBE_FACTOR = 2
MAX_WAIT_S = 7 * 24 * 3600.0  # the longest grace, startup or hang timeout: a week
"""More workers than this many per usable core are refused without ``oversubscribe``."""
HUNG_EXIT_CODE = 124
"""``launch()``'s status when the last attempt hung (as ``timeout(1)`` exits)."""
_POLL_S = 0.05
_WATCH_EVERY_S = 0.25


class LaunchError(TfaccelError):
    """The workers cannot be started as asked (nothing was started)."""


@dataclass
class Attempt:
    """One start of the whole group.

    Attributes:
        number: 0 for the first start, 1 after the first restart...
        ports: each rank's port.
        exit_codes: each rank's exit status (negative: killed by that signal, which is
            SIGTERM or SIGKILL for the workers the launcher stopped; 75: saved and stopped on
            SIGTERM).
        failed_rank: the worker that failed, hung (the one furthest behind) or was preempted
            first; None when all succeeded.
        outcome: "succeeded", "failed", "hung", "preempted" or "interrupted".
        reason: why the attempt ended, in one sentence (empty when it succeeded).
        steps: each rank's last heartbeat (the step it was starting), None without one.
        started_at: when the group was started (seconds since the epoch).
        stopped_at: when the launcher saw the failure, hang or preemption and began to stop
            the group (seconds since the epoch); None when every worker ended by itself.
        seconds: wall time of the attempt.
    """

    number: int
    ports: list[int]
    exit_codes: list[int] = field(default_factory=list)
    failed_rank: int | None = None
    outcome: str = "succeeded"
    reason: str = ""
    steps: list[int | None] = field(default_factory=list)
    started_at: float = 0.0
    stopped_at: float | None = None
    seconds: float = 0.0


@dataclass
class LaunchResult:
    """What ``launch()`` did.

    Attributes:
        exit_code: 0 when every worker succeeded; else the failed worker's status (128 + the
            signal when killed by one), 124 when the group hung, 75 when it was preempted,
            130 after Ctrl-C, 143 after SIGTERM, 129 after SIGHUP.
        attempts: each start of the group.
        interrupted: stopped by Ctrl-C or SIGTERM.
        isolated: the workers ran in a private network namespace (loopback only).
        isolation: how ("user+net", "net"), or why not.
    """

    exit_code: int
    attempts: list[Attempt]
    interrupted: bool = False
    isolated: bool = False
    isolation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
            "isolated": self.isolated,
            "isolation": self.isolation,
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
    isolate: bool = True,
    oversubscribe: bool = False,
    hang_timeout_s: float | None = None,
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LaunchResult:
    """Run ``script`` as ``workers`` local workers of one cluster; restart the group on failure.

    Args:
        script: the Python script (or a directory with ``__main__.py``).
        args: the script's arguments.
        workers: the number of worker processes (>= 1; at most 2 per usable core unless
            ``oversubscribe``).
        restarts: how many times to restart the whole group after a failure, a hang or a
            preemption.
        host: the address the workers use to reach each other (loopback by default).
        port_base: use ports ``port_base .. port_base + workers - 1`` (checked to be free);
            default: free ports picked by the system, new ones at each restart.
        grace_s: seconds between SIGTERM and SIGKILL when stopping workers.
        isolate: run the workers in a private network namespace where the system allows it
            (they then have loopback only: no outside network); False gives them this
            machine's network, and the warning about their exposed ports.
        oversubscribe: start more than 2 workers per usable core all the same.
        hang_timeout_s: stop (and restart) a group whose heartbeats stand still this long;
            None: no hang watch.
        startup_timeout_s: with ``hang_timeout_s``, the allowance until every rank has
            finished its first step.
        stdout: where the workers' standard output goes, prefixed (default ``sys.stdout``).
        stderr: where their standard error and the launcher's messages go (``sys.stderr``).
        environ: the workers' base environment (default ``os.environ``).

    Returns:
        A LaunchResult; ``exit_code`` is what ``tfaccel launch`` exits with.

    Raises:
        UsageError: ``workers`` < 1 or more than 2 per usable core (without
            ``oversubscribe``), ``restarts`` < 0, a timeout that is not a positive number of
            seconds, the script does not exist.
        LaunchError: a port is in use or ``host`` is not an address of this machine.
        Nothing is started in either case.

    Example:
        >>> launch("train.py", workers=2, restarts=1, hang_timeout_s=120).exit_code
        0
    """
    _check_arguments(
        script, workers, restarts, grace_s, hang_timeout_s, startup_timeout_s, port_base, host
    )
    if not oversubscribe:
        _check_cores(workers)
    ports = _ports(host, workers, port_base)
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    base_env = dict(os.environ if environ is None else environ)
    if hang_timeout_s is not None and COLLECTIVE_TIMEOUT_ENV not in base_env:
        # longer than the launcher's own watch, which names the rank behind; a backstop
        backstop = startup_timeout_s + hang_timeout_s + 2 * grace_s
        base_env[COLLECTIVE_TIMEOUT_ENV] = f"{backstop:g}"
    watch = _WatchSettings(hang_timeout_s, startup_timeout_s)
    network = Network.start(host=host, isolate=isolate)
    beats = tempfile.mkdtemp(prefix="tfaccel-launch-")
    try:
        with stop_signals():  # SIGTERM, SIGHUP: the workers stopped as for Ctrl-C
            return _attempts(
                script, list(args), workers, restarts, host, port_base, ports, grace_s,
                watch, network, beats, base_env, out, err,
            )  # fmt: skip
    finally:
        network.close()
        shutil.rmtree(beats, ignore_errors=True)


@dataclass(frozen=True)
class _WatchSettings:
    hang_timeout_s: float | None
    startup_timeout_s: float


def _attempts(
    script: str,
    args: list[str],
    workers: int,
    restarts: int,
    host: str,
    port_base: int | None,
    ports: list[int],
    grace_s: float,
    watch: _WatchSettings,
    network: Network,
    beats: str,
    base_env: dict[str, str],
    out: IO[str],
    err: IO[str],
) -> LaunchResult:
    attempts: list[Attempt] = []

    def result(code: int, interrupted: bool = False) -> LaunchResult:
        how = network.kind if network.isolated else network.reason
        return LaunchResult(code, attempts, interrupted, network.isolated, how or "")

    for number in range(restarts + 1):
        if number:
            ports = _ports(host, workers, port_base)
        directory = os.path.join(beats, f"attempt-{number}")
        os.mkdir(directory)
        group = _Group(script, args, host, ports, number, base_env, network, directory, out, err)
        attempt = Attempt(number, ports)
        attempts.append(attempt)
        where = (
            " in a private network namespace (loopback only, no outside network; "
            "--no-isolate to give them this machine's)"
            if network.isolated
            else ""
        )
        if not network.isolated:
            _say(err, exposure_warning(network.reason, host, ports))
        _say(
            err,
            f"starting {workers} worker{'s' if workers != 1 else ''} on {host} ports "
            f"{', '.join(map(str, ports))}{where} (attempt {number + 1} of {restarts + 1})",
        )
        began = time.monotonic()
        attempt.started_at = time.time()
        try:
            try:
                group.start()
                ending = group.wait(_Watch(directory, workers, watch, began), grace_s)
            except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM or SIGHUP (Terminated)
                code = interrupt_code(stop)
                attempt.stopped_at = time.time()
                _say(err, f"interrupted: stopping every worker{_how(grace_s)}")
                group.stop(grace_s)
                _finish(attempt, group, "interrupted", None, "interrupted", began)
                return result(code, interrupted=True)
            if ending.outcome != "succeeded":
                attempt.stopped_at = time.time() if ending.stopping else None
                whom = "the group" if ending.outcome == "hung" else "the others"
                then = f"; stopping {whom}{_how(grace_s)}" if ending.stopping else ""
                _say(err, f"{ending.reason}{then}")
            group.stop(grace_s)
        finally:
            group.kill()  # whatever ended the attempt (a second Ctrl-C, a closed stderr...)
        _finish(attempt, group, ending.outcome, ending.rank, ending.reason, began)
        if ending.outcome == "succeeded":
            return result(0)
        if number < restarts:
            _say(
                err,
                f"restarting all {workers} workers (restart {number + 1} of {restarts}); "
                "a script that saves checkpoints resumes from its last one",
            )
    last = attempts[-1]
    if last.outcome == "hung":
        return result(HUNG_EXIT_CODE)
    assert last.failed_rank is not None
    return result(_exit_status(last.exit_codes[last.failed_rank]))


def _finish(
    attempt: Attempt, group: _Group, outcome: str, rank: int | None, reason: str, began: float
) -> None:
    attempt.outcome, attempt.failed_rank, attempt.reason = outcome, rank, reason
    attempt.exit_codes = group.exit_codes()
    attempt.steps = group.steps()
    attempt.seconds = time.monotonic() - began


def _say(err: IO[str], text: str) -> None:
    err.write(f"tfaccel launch: {text}\n")
    err.flush()


def _how(grace_s: float) -> str:
    return f" (SIGTERM, then SIGKILL after {grace_s:g} s)"


def _exit_status(code: int) -> int:
    """A worker's status as a shell reports it: 128 + N when killed by signal N."""
    return 128 - code if code < 0 else code


# --------------------------------------------------------------------------- checks


def _check_arguments(
    script: str,
    workers: int,
    restarts: int,
    grace_s: float,
    hang_timeout_s: float | None,
    startup_timeout_s: float,
    port_base: int | None,
    host: str,
) -> None:
    if not is_int(workers) or not 1 <= workers <= MAX_COUNT:
        raise UsageError(
            f"Cannot start {workers!r} workers",
            expected=f"-n N with N from 1 to {MAX_COUNT} (the number of worker processes)",
            received=f"-n {workers}",
            fix="pass -n 2 (or more) to train on several workers",
        )
    if not is_int(restarts) or not 0 <= restarts <= MAX_COUNT:
        raise UsageError(
            f"--restarts {restarts!r} is not a count",
            expected=f"an integer from 0 to {MAX_COUNT}",
            received=f"--restarts {restarts}",
            fix="pass --restarts 1 to restart the group once after a failure",
        )
    for option, value, fix, allow_none in (
        ("--grace", grace_s, "pass --grace 10", False),
        ("--hang-timeout", hang_timeout_s, "pass --hang-timeout 300, or leave it out", True),
        ("--startup-timeout", startup_timeout_s, "pass --startup-timeout 600", False),
    ):
        if value is None and allow_none:
            continue
        if not is_real(value) or not in_range(
            value, minimum=0, above_minimum=True, maximum=MAX_WAIT_S
        ):
            raise UsageError(
                f"{option} {value!r} is not a positive number of seconds",
                expected=f"a finite number of seconds > 0 and at most {MAX_WAIT_S:g} (a week)",
                received=f"{option} {value}",
                fix=fix,
            )
    if port_base is not None and (not is_int(port_base) or not 1 <= port_base <= 65536 - workers):
        raise UsageError(
            f"--port-base {shown(port_base)} "
            + (
                f"leaves no room for {workers} ports"
                if is_int(port_base) and port_base > 1
                else "is not a port"
            ),
            expected=f"an integer port in 1..{65536 - workers}",
            received=f"--port-base {shown(port_base)} ({type(port_base).__name__})",
            fix="pass a port such as 20000, or leave --port-base out to pick free ports",
        )
    if not isinstance(host, str) or not host.strip() or "\0" in host:
        raise UsageError(
            f"--host {shown(host)} is not an address",
            expected="an IP address or host name of this machine, such as 127.0.0.1",
            received=f"--host {shown(host)} ({type(host).__name__})",
            fix=f"pass --host {DEFAULT_HOST}, or leave it out",
        )
    if not isinstance(script, (str, os.PathLike)):
        raise UsageError(
            "tfaccel launch was given no script path",
            expected="the path of a Python script (str or os.PathLike)",
            received=f"script={shown(script)} ({type(script).__name__})",
            fix="pass the script to run: launch('train.py', workers=2)",
        )
    check_script(script, "launch")


def _check_cores(workers: int) -> None:
    cores = usable_cores()
    limit = OVERSUBSCRIBE_FACTOR * cores
    if workers > limit:
        raise UsageError(
            f"-n {workers} starts {workers} workers on {cores} usable "
            f"core{'s' if cores != 1 else ''}",
            expected=f"at most {OVERSUBSCRIBE_FACTOR} workers per usable core ({limit} here): "
            "each worker runs TensorFlow's own thread pools, so more only share the cores "
            "and run slower",
            received=f"-n {workers} with {cores} usable core{'s' if cores != 1 else ''} "
            "(the CPU affinity of this process)",
            fix=f"pass -n {limit} or fewer, or --oversubscribe to start {workers} all the "
            "same (to try a cluster's layout on a small machine)",
        )


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


@dataclass(frozen=True)
class _Ending:
    outcome: str  # "succeeded", "failed", "hung", "preempted"
    rank: int | None = None
    reason: str = ""
    stopping: bool = True  # the launcher stops workers that are still running


class _Watch:
    """Reads the heartbeats; says which ranks hold a hung group up."""

    def __init__(self, directory: str, workers: int, settings: _WatchSettings, began: float):
        self.directory, self.workers, self.settings, self.began = (
            directory,
            workers,
            settings,
            began,
        )
        self.last: dict[int, Beat] = {}
        self.changed_at: dict[int, float] = {}
        self.read_at = 0.0

    def read(self, now: float) -> None:
        self.read_at = now
        for rank, beat in read_heartbeats(self.directory, self.workers).items():
            if self.last.get(rank) != beat:
                self.last[rank] = beat
                self.changed_at[rank] = now

    def hung(self, now: float, running: Sequence[int]) -> tuple[int, str] | None:
        """The rank furthest behind in a hung group, and why it is hung; None if it is not."""
        hang_s = self.settings.hang_timeout_s
        if hang_s is None:
            return None
        if now - self.read_at >= _WATCH_EVERY_S:
            self.read(now)
        active = [r for r in running if not (r in self.last and self.last[r].done)]
        if not active:
            return None
        # a rank is starting until it has begun its second step (finished its first)
        starting = [r for r in active if r not in self.last or self.last[r].count < 2]
        if starting:
            allowance = self.settings.startup_timeout_s
            if now - self.began < allowance:
                return None
            first = min(starting, key=lambda r: (self.last[r].count if r in self.last else 0, r))
            return first, (
                f"worker {first} has not finished a first step within the start-up allowance "
                f"of {allowance:g} s (--startup-timeout){self._where(active)}"
            )
        idle = now - max(self.changed_at[r] for r in active)
        if idle < hang_s:
            return None
        lowest = min(self.last[r].step for r in active)
        behind = sorted((r for r in active if self.last[r].step == lowest), key=self._age)
        ahead = sorted({self.last[r].step for r in active} - {lowest})
        others = (
            f"; the others at step {', '.join(map(str, ahead))}" if ahead else " like the others"
        )
        if len(behind) == len(active) and len(active) > 1:
            listed = ", ".join(map(str, behind))
            return behind[0], (
                f"no progress for {idle:.1f} s (--hang-timeout {hang_s:g}): every worker "
                f"started step {lowest} and none finished it, so the hung one cannot be told "
                f"apart (a hang inside the step: its input, or a collective); workers {listed}, "
                "the oldest heartbeat first"
            )
        who = f"worker {behind[0]}" if len(behind) == 1 else f"workers {behind}"
        return behind[0], (
            f"no progress for {idle:.1f} s (--hang-timeout {hang_s:g}): {who} furthest behind, "
            f"starting step {lowest}{others}"
        )

    def _age(self, rank: int) -> tuple[float, int]:
        return (self.changed_at[rank], rank)

    def _where(self, active: Sequence[int]) -> str:
        seen = [f"worker {r} at step {self.last[r].step}" for r in active if r in self.last]
        return f" ({', '.join(seen)})" if seen else " (no heartbeat from any worker)"


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
        network: Network,
        beats: str,
        out: IO[str],
        err: IO[str],
    ) -> None:
        self.script, self.args, self.host, self.ports = script, args, host, ports
        self.attempt, self.base_env, self.out, self.err = attempt, base_env, out, err
        self.network, self.beats = network, beats
        self.stopped = False
        self.processes: list[subprocess.Popen[bytes]] = []
        self.pumps: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.closed: set[int] = set()  # ids of sinks that raised BrokenPipeError
        self.watch: _Watch | None = None

    def env(self, rank: int) -> dict[str, str]:
        env = dict(self.base_env)
        env["TF_CONFIG"] = local_cluster(self.host, self.ports, rank).to_tf_config()
        env["TFACCEL_LAUNCH_RANK"] = str(rank)
        env["TFACCEL_LAUNCH_WORKERS"] = str(len(self.ports))
        env["TFACCEL_LAUNCH_ATTEMPT"] = str(self.attempt)
        env[HEARTBEAT_DIR_ENV] = self.beats
        env["PYTHONUNBUFFERED"] = "1"  # lines as they are printed, not at exit
        return env

    def start(self) -> None:
        # Started from this thread, which stays in launch() until every worker has ended: the
        # kernel's parent-death signal follows the thread that forked, not the process.
        for rank in range(len(self.ports)):
            command = entry_command(self.network, [sys.executable, self.script, *self.args])
            try:
                process = subprocess.Popen(
                    command,
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

    def wait(self, watch: _Watch, grace_s: float) -> _Ending:
        """Block until every worker succeeded, one failed, the group hung or was preempted."""
        self.watch = watch
        preempted_at: float | None = None
        while True:
            now = time.monotonic()
            codes = [p.poll() for p in self.processes]
            for rank, code in enumerate(codes):
                if code is not None and code not in (0, PREEMPTED_EXIT_CODE):
                    return _Ending("failed", rank, f"worker {rank} {self.how_it_ended(rank)}")
            preempted = [r for r, code in enumerate(codes) if code == PREEMPTED_EXIT_CODE]
            if preempted and preempted_at is None:
                preempted_at = now
            if all(code is not None for code in codes):
                if preempted:
                    return _Ending(
                        "preempted", preempted[0], self._preempted(preempted), stopping=False
                    )
                return _Ending("succeeded")
            if preempted_at is not None and now - preempted_at > grace_s:
                return _Ending("preempted", preempted[0], self._preempted(preempted))
            running = [r for r, code in enumerate(codes) if code is None]
            hung = watch.hung(now, running)
            if hung is not None:
                return _Ending("hung", *hung)
            time.sleep(_POLL_S)

    def _preempted(self, ranks: list[int]) -> str:
        steps = [self.watch.last.get(r) if self.watch else None for r in ranks]
        at = {beat.step for beat in steps if beat is not None}
        where = f" at step {', '.join(map(str, sorted(at)))}" if at else ""
        who = ", ".join(map(str, ranks))
        return (
            f"worker{'s' if len(ranks) != 1 else ''} {who} saved{where} on SIGTERM and exited "
            f"with status {PREEMPTED_EXIT_CODE} (preempted)"
        )

    def how_it_ended(self, rank: int) -> str:
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
        self.stopped = True
        for pump in self.pumps:
            pump.join(timeout=5.0)

    def kill(self) -> None:
        """After an attempt that did not end in :meth:`stop`: SIGKILL every worker's process
        group and reap the workers."""
        if self.stopped:
            return
        self._signal_groups(signal.SIGKILL, only_running=False)
        for process in self.processes:
            with contextlib.suppress(Exception):
                process.wait(timeout=10.0)

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

    def steps(self) -> list[int | None]:
        if self.watch is None:
            return [None] * len(self.ports)
        self.watch.read(time.monotonic())
        return [
            beat.step if (beat := self.watch.last.get(r)) else None for r in range(len(self.ports))
        ]
