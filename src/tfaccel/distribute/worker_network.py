"""Where ``tfaccel launch`` runs its workers: a private network namespace when it can.

TensorFlow's gRPC worker server listens on every interface at its port, whatever host
``TF_CONFIG`` names, and runs whatever graph a peer sends it: anyone who can reach a worker's
port can run code in the job. ``tfaccel launch`` therefore starts the local group in a network
namespace of its own, where only loopback exists (:mod:`tfaccel.distribute._entry_process` does the
system calls), so the ports are reachable from nowhere else, this machine included. Where that
is not possible (the kernel forbids user namespaces, not Linux, ``--host`` not loopback, or
``--no-isolate``) :func:`exposure_warning` says, before anything starts, what is exposed and how
to fence it.

Example:
    >>> network = Network.start(host="127.0.0.1", isolate=True)
    >>> network.isolated, network.kind
    (True, 'user+net')
    >>> network.close()
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ENTRY", "Network", "entry_command", "exposure_warning", "is_loopback"]

ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_entry_process.py")
"""The file every worker starts through (run by path: it needs the standard library only)."""

_HOLDER_START_S = 10.0


def is_loopback(host: str) -> bool:
    """``host`` is a loopback address ("127.0.0.1", "::1", "localhost"); no name lookup."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class Network:
    """The network the workers run in.

    Attributes:
        isolated: the workers run in a private network namespace (loopback only).
        kind: "user+net" (an unprivileged user namespace with it), "net", or None.
        reason: why they are not isolated (empty when they are).
    """

    isolated: bool
    kind: str | None = None
    reason: str = ""
    holder: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @classmethod
    def start(cls, *, host: str, isolate: bool) -> Network:
        """Make the private namespace (or say why not); nothing else is started."""
        if not isolate:
            return cls(False, reason="--no-isolate was given")
        if not is_loopback(host):
            return cls(False, reason=f"--host {host} is not a loopback address")
        if not sys.platform.startswith("linux"):
            return cls(False, reason=f"network namespaces need Linux (this is {sys.platform})")
        try:
            holder = subprocess.Popen(
                [sys.executable, "-I", ENTRY, "holder"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C at a terminal reaches the launcher only
            )
        except OSError as exc:
            return cls(False, reason=f"the namespace holder could not start ({exc})")
        assert holder.stdout is not None
        line = holder.stdout.readline().decode("ascii", errors="replace").split(maxsplit=2)
        if line[:1] == ["ready"] and len(line) == 2:
            return cls(True, kind=line[1], holder=holder)
        _end(holder)
        why = line[2] if len(line) == 3 else "the holder exited"
        return cls(False, reason=f"this kernel refused a private network namespace ({why})")

    def to_dict(self) -> dict[str, Any]:
        return {"isolated": self.isolated, "kind": self.kind, "reason": self.reason}

    def close(self) -> None:
        """End the namespace (after the workers)."""
        if self.holder is not None:
            _end(self.holder)
            self.holder = None


def _end(holder: subprocess.Popen[bytes]) -> None:
    for pipe in (holder.stdin, holder.stdout):
        if pipe is not None:
            pipe.close()  # stdin closed: the holder's read returns and it exits
    try:
        holder.wait(timeout=_HOLDER_START_S)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait()


def entry_command(network: Network, command: Sequence[str]) -> list[str]:
    """``command`` started through the entry: dies with this process, joins ``network``."""
    entry = [sys.executable, "-I", ENTRY, "enter", "--parent", str(os.getpid())]
    if network.isolated and network.holder is not None:
        entry += ["--holder", str(network.holder.pid)]
        if network.kind == "user+net":
            entry.append("--userns")
    return [*entry, "--", *command]


def exposure_warning(reason: str, host: str, ports: Sequence[int]) -> str:
    """What a worker group without isolation exposes, and how to fence it."""
    listed = ", ".join(map(str, ports))
    if len(ports) <= 15:  # iptables' multiport takes up to 15 ports
        match = f"-m multiport --dports {','.join(map(str, ports))}"
    else:
        match = f"--dport {min(ports)}:{max(ports)}"
    return (
        f"WARNING: the workers are not isolated ({reason}). TensorFlow's gRPC worker servers "
        f"listen on EVERY interface at ports {listed}, whatever --host says, without "
        "authentication: anyone who can reach this machine on those ports can run code in "
        "this job. Fence them: run where unprivileged user namespaces are allowed (with "
        "--host 127.0.0.1 and without --no-isolate), or drop outside traffic to the ports, "
        f"e.g. 'iptables -I INPUT -p tcp {match} ! -i lo -j DROP' (or pass a fixed "
        "--port-base and firewall that range)."
    )
