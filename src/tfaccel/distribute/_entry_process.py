"""The two small processes behind ``tfaccel launch``'s isolation and orphan handling.

Run as a file (``python -I _entry_process.py MODE ...``), never imported by the worker: it uses the
standard library only, so the process stays single-threaded until it ``exec``s (joining a user
namespace needs that), and it starts in milliseconds.

``holder``: makes a private network namespace (where only loopback exists) and keeps it alive.
    Unprivileged, it unshares a user namespace with it (``CLONE_NEWUSER | CLONE_NEWNET``) and
    maps the caller's own user and group ids to themselves (after writing ``deny`` to
    ``setgroups``), so the files workers write keep the user's ids; with ``CAP_SYS_ADMIN``
    (root) it unshares the network namespace alone. It brings ``lo`` up (a new namespace has it
    down), prints ``ready net`` or ``ready user+net`` (or ``error ERRNO WHAT``), then waits for
    its standard input to close. It dies with the launcher (``PR_SET_PDEATHSIG``).

``enter``: the start of every worker. ``enter --parent PID [--holder PID --userns] -- PYTHON
    SCRIPT ARGS``: asks for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``, then checks
    that its parent is still ``PID``, which closes the race with a parent that died first),
    joins the holder's user and network namespaces (``setns``), and ``exec``s the script, so
    the worker keeps this process's pid and process group. Where ``prctl`` does not exist
    (not Linux) it forks a watchdog that kills the worker's process group when the launcher
    is gone.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
import socket
import struct
import sys
import time

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
WATCHDOG_POLL_S = 0.5
ENTER_FAILED = 126  # the status of a worker whose entry failed before the script started


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def set_parent_death_signal(libc: ctypes.CDLL | None) -> bool:
    """Ask for SIGKILL when the parent (the thread that forked this process) dies."""
    if libc is None or not hasattr(libc, "prctl"):
        return False
    return int(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)) == 0


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))


def _unshare(libc: ctypes.CDLL) -> str:
    """Enter a new network namespace (with a user namespace when needed); say which."""
    if os.geteuid() == 0 and libc.unshare(CLONE_NEWNET) == 0:
        return "net"
    uid, gid = os.getuid(), os.getgid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare(CLONE_NEWUSER|CLONE_NEWNET)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    return "user+net"


def holder() -> int:
    libc = _libc()
    if libc is None or not hasattr(libc, "unshare"):
        print(f"error {errno.ENOSYS} network namespaces need Linux", flush=True)
        return 1
    set_parent_death_signal(libc)
    try:
        kind = _unshare(libc)
        _loopback_up()
    except OSError as exc:
        print(f"error {exc.errno or 0} {exc.strerror or exc}", flush=True)
        return 1
    print(f"ready {kind}", flush=True)
    while sys.stdin.buffer.read(4096):  # until the launcher closes the pipe (or dies)
        pass
    return 0


def _setns(libc: ctypes.CDLL, holder_pid: int, kind: str, flag: int) -> None:
    fd = os.open(f"/proc/{holder_pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(libc.setns(fd, flag), f"setns({kind} namespace of process {holder_pid})")
    finally:
        os.close(fd)


def _watchdog(parent: int) -> None:
    """Without prctl: a child that kills the worker's process group once the launcher is gone."""
    worker = os.getpid()
    if os.fork() != 0:
        return
    while True:
        time.sleep(WATCHDOG_POLL_S)
        if os.getppid() != worker:  # the worker has ended
            os._exit(0)
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os.killpg(os.getpgid(worker), signal.SIGKILL)
            os._exit(0)
        except PermissionError:
            pass


def enter(argv: list[str]) -> int:
    parent, holder_pid, userns = 0, 0, False
    while argv and argv[0] != "--":
        option = argv.pop(0)
        if option == "--parent":
            parent = int(argv.pop(0))
        elif option == "--holder":
            holder_pid = int(argv.pop(0))
        elif option == "--userns":
            userns = True
        else:
            print(f"tfaccel launch: unknown entry option {option}", file=sys.stderr)
            return ENTER_FAILED
    command = argv[1:]
    libc = _libc()
    if set_parent_death_signal(libc):
        if parent and os.getppid() != parent:
            return ENTER_FAILED  # the launcher died before prctl: nobody is watching
    elif parent:
        _watchdog(parent)
    if holder_pid:
        assert libc is not None  # a holder exists only where namespaces do
        try:
            if userns:
                _setns(libc, holder_pid, "user", CLONE_NEWUSER)
            _setns(libc, holder_pid, "net", CLONE_NEWNET)
        except OSError as exc:
            print(f"tfaccel launch: cannot join the private network: {exc}", file=sys.stderr)
            return ENTER_FAILED
    os.execv(command[0], command)
    return ENTER_FAILED  # not reached


def main(argv: list[str]) -> int:
    if argv[:1] == ["holder"]:
        return holder()
    if argv[:1] == ["enter"]:
        return enter(argv[1:])
    print("usage: _entry_process.py holder | enter [--parent PID] [--holder PID] -- COMMAND...")
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
