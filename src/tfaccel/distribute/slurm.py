"""The cluster of a Slurm job step, built by tfaccel instead of ``SlurmClusterResolver``.

TensorFlow's ``tf.distribute.cluster_resolver.SlurmClusterResolver`` turns a job step's
variables into worker addresses, but where tfaccel uses it, it gets four things wrong:

- with default arguments it runs ``nvidia-smi`` to count GPUs, and fails on a CPU node
  (``FileNotFoundError: 'nvidia-smi'``);
- every job's tasks get ports 8888, 8889, ... on each node, so two jobs sharing a node (two
  single-node jobs, or two steps of one job) collide, and the second cannot start its server;
- it sorts the nodes by name as text (``node10`` before ``node9``) and hands out ranks in that
  order, while Slurm numbers the tasks (``SLURM_PROCID``) in its node list's order, so a task
  can be given the address of another node;
- it writes node names into the addresses as they are, though a node name need not resolve
  (Slurm's ``NodeAddr`` is the node's address when it differs from its name).

:func:`slurm_cluster` builds the same cluster (one ``worker`` job, one task per rank, ranks
packed onto the nodes in Slurm's order, as ``srun``'s default block distribution does) with a
port range derived from ``SLURM_JOB_ID`` and ``SLURM_STEP_ID`` (or ``TFACCEL_SLURM_PORT_BASE``),
each node's address resolved (Slurm's ``NodeAddr`` when the name does not resolve), and this
task's own port checked free before TensorFlow tries to bind it. Pure but for the two
look-ups, which tests replace.

Example:
    >>> expand_hostlist("n[1-2],m5,o[08-10]")
    ['n1', 'n2', 'm5', 'o08', 'o09', 'o10']
    >>> slurm_port_base({"SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "0"}, 2)
    26976
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping

from tfaccel.core.cluster import (
    ClusterConfig,
    ClusterConfigError,
    SlurmAllocation,
    format_address,
)

__all__ = [
    "PORT_BASE_ENV",
    "PORT_RANGE",
    "expand_hostlist",
    "node_address",
    "port_is_free",
    "slurm_cluster",
    "slurm_port_base",
]

PORT_BASE_ENV = "TFACCEL_SLURM_PORT_BASE"
"""Set it to fix the first port of every node (for a firewall rule); the tasks of a node use
it and the next ports, one per task."""

PORT_RANGE = (20000, 32768)
"""The ports derived from the job: below Linux's ephemeral range (32768-60999), where the
kernel picks the local ports of outgoing connections."""

_WINDOW = 16
"""Ports set aside per job step and node (more when a node runs more tasks)."""


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed node list, in its order: ``"n[1-2],m5"`` -> ``["n1", "n2", "m5"]``.

    Zero-padded ranges keep their width (``o[08-10]``); several ranges in one bracket
    (``n[1-3,7]``) are read in order.

    Raises:
        ClusterConfigError: the text is not a Slurm node list.
    """
    hosts: list[str] = []
    parts = [p for p in re.findall(r"[^,\[]*(?:\[[^\]]*\])?[^,\[]*", text) if p]
    if ",".join(parts) != text:  # a bracket left open, an empty name
        raise _bad_nodelist(text)
    for part in parts:
        match = re.fullmatch(r"([^\[\]]*)(?:\[([^\]]+)\])?([^\[\]]*)", part)
        if match is None:
            raise _bad_nodelist(text)
        prefix, ranges, suffix = match.groups()
        if ranges is None:
            hosts.append(prefix + suffix)
            continue
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                raise _bad_nodelist(text)
            for number in range(int(low), int(high or low) + 1):
                hosts.append(f"{prefix}{str(number).zfill(len(low))}{suffix}")
    if not hosts:
        raise _bad_nodelist(text)
    return hosts


def _bad_nodelist(text: str) -> ClusterConfigError:
    return ClusterConfigError(
        "The Slurm variable SLURM_STEP_NODELIST cannot be read",
        expected="Slurm's node list, such as 'node[1-4],gpu07'",
        received=repr(text),
        fix="start the tasks with srun, which sets it",
    )


def slurm_port_base(environ: Mapping[str, str], max_tasks_per_node: int) -> int:
    """The first port of every node for this job step.

    ``TFACCEL_SLURM_PORT_BASE`` when set; otherwise a window of ports picked by the job and
    step ids, the same in every task without any exchange: consecutive jobs get consecutive
    windows, so jobs sharing a node do not collide unless hundreds of jobs apart.

    Raises:
        ClusterConfigError: ``TFACCEL_SLURM_PORT_BASE`` is not a port, or leaves no room for
            the node's tasks.
    """
    width = _WINDOW * -(-max_tasks_per_node // _WINDOW)
    given = environ.get(PORT_BASE_ENV, "").strip()
    if given:
        if not given.isdigit() or not 1024 <= int(given) <= 65536 - max_tasks_per_node:
            raise ClusterConfigError(
                f"{PORT_BASE_ENV}={given!r} is not a usable first port",
                expected=f"a port from 1024 to {65536 - max_tasks_per_node}, with room for "
                f"{max_tasks_per_node} task(s) per node",
                received=f"{PORT_BASE_ENV}={given!r}",
                fix=f"set {PORT_BASE_ENV}=29500, or unset it to derive the ports from the job",
            )
        return int(given)
    job = int(environ.get("SLURM_JOB_ID", "0") or 0)
    step = environ.get("SLURM_STEP_ID", "0").strip()
    step_id = int(step) if step.isdigit() else 0  # "batch", "extern": not an srun step
    slots = (PORT_RANGE[1] - PORT_RANGE[0]) // width
    return PORT_RANGE[0] + ((job + 97 * step_id) % slots) * width


def node_address(name: str) -> str | None:
    """Slurm's ``NodeAddr`` of node ``name`` (``scontrol show node``), None if unknown."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return None
    try:
        done = subprocess.run(
            [scontrol, "show", "node", "--oneliner", name],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"\bNodeAddr=(\S+)", done.stdout)
    return found.group(1) if done.returncode == 0 and found else None


def port_is_free(port: int) -> bool:
    """Nothing listens on ``port`` of any interface (TensorFlow's server binds them all)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is free
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


def _resolves(host: str) -> bool:
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False
    return True


def slurm_cluster(
    allocation: SlurmAllocation,
    environ: Mapping[str, str],
    *,
    resolves: Callable[[str], bool] = _resolves,
    lookup: Callable[[str], str | None] = node_address,
    port_free: Callable[[int], bool] = port_is_free,
) -> ClusterConfig:
    """The cluster of ``allocation``'s job step, seen from its task ``allocation.proc_id``.

    Args:
        allocation: the step (:func:`tfaccel.core.cluster.slurm_allocation`).
        environ: ``SLURM_STEP_NODELIST``, ``SLURM_STEP_TASKS_PER_NODE``, ``SLURM_JOB_ID``,
            ``SLURM_STEP_ID``, ``SLURMD_NODENAME``, ``SLURM_LOCALID`` and
            ``TFACCEL_SLURM_PORT_BASE``.
        resolves: whether a host name resolves here.
        lookup: Slurm's address of a node whose name does not resolve.
        port_free: whether this task's port is free.

    Raises:
        ClusterConfigError: the node list and the tasks per node disagree; this task's node
            or local rank is not where block distribution puts it (``srun --distribution``
            other than block); a node name resolves to nothing and Slurm knows no other
            address; this task's port is taken. The message says which and the fix.
    """
    nodes = expand_hostlist(environ.get("SLURM_STEP_NODELIST", ""))
    per_node = _per_node(environ.get("SLURM_STEP_TASKS_PER_NODE", ""))
    if len(per_node) != len(nodes) or sum(per_node) != allocation.num_tasks:
        raise ClusterConfigError(
            "The Slurm step's node list and tasks per node do not describe its tasks",
            expected=f"{allocation.num_tasks} tasks spread over the nodes of "
            "SLURM_STEP_NODELIST as SLURM_STEP_TASKS_PER_NODE counts them",
            received=f"SLURM_STEP_NODELIST={environ.get('SLURM_STEP_NODELIST')!r} "
            f"({len(nodes)} nodes), SLURM_STEP_TASKS_PER_NODE="
            f"{environ.get('SLURM_STEP_TASKS_PER_NODE')!r} ({sum(per_node)} tasks)",
            fix="start the tasks with srun, which sets them",
        )
    base = slurm_port_base(environ, max(per_node))
    placed = [
        (node, local) for node, count in zip(nodes, per_node, strict=True) for local in range(count)
    ]
    my_node, my_local = placed[allocation.proc_id]
    _check_placement(environ, allocation.proc_id, my_node, my_local)
    hosts = {node: _host(node, resolves, lookup) for node in nodes}
    addresses = tuple(format_address(hosts[node], base + local) for node, local in placed)
    port = base + my_local
    if not port_free(port):
        raise ClusterConfigError(
            f"Port {port}, the one Slurm task {allocation.proc_id} of job "
            f"{allocation.job_id} listens on, is taken on {my_node}",
            expected=f"ports {base}..{base + max(per_node) - 1} free on every node of the step",
            received=f"port {port} in use (another job on the node, or a server left over)",
            fix=f"set {PORT_BASE_ENV} to a free range for the whole step (e.g. "
            f"'export {PORT_BASE_ENV}=29500' before srun), or find what holds the port "
            f"('ss -ltnp sport = :{port}')",
        )
    return ClusterConfig({"worker": addresses}, "worker", allocation.proc_id, source="Slurm")


def _per_node(text: str) -> list[int]:
    counts = []
    for part in text.split(","):
        found = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if found is None:
            raise ClusterConfigError(
                "The Slurm variable SLURM_STEP_TASKS_PER_NODE cannot be read",
                expected="Slurm's list of tasks per node, such as '2(x3),1'",
                received=repr(text),
                fix="start the tasks with srun, which sets it",
            )
        counts += [int(found.group(1))] * int(found.group(2) or 1)
    return counts


def _check_placement(environ: Mapping[str, str], rank: int, node: str, local: int) -> None:
    """This task runs where block distribution puts its rank (when Slurm says where it runs)."""
    here = environ.get("SLURMD_NODENAME")
    local_text = environ.get("SLURM_LOCALID", "")
    if (here is None or here == node) and (not local_text.isdigit() or int(local_text) == local):
        return
    raise ClusterConfigError(
        f"Slurm task {rank} does not run where block distribution puts it",
        expected=f"task {rank} on node {node} as its task {local} (srun's default "
        "--distribution=block: ranks fill each node in turn)",
        received=f"SLURMD_NODENAME={here!r}, SLURM_LOCALID={local_text!r}",
        fix="start the step with 'srun --distribution=block' (or without --distribution)",
    )


def _host(node: str, resolves: Callable[[str], bool], lookup: Callable[[str], str | None]) -> str:
    if resolves(node):
        return node
    address = lookup(node)
    if address and address != node and resolves(address):
        return address
    raise ClusterConfigError(
        f"The Slurm node {node!r} of this job step has no address here",
        expected="a node name that resolves (DNS or /etc/hosts), or a Slurm NodeAddr that does",
        received=f"{node!r} does not resolve; Slurm's NodeAddr: {address or 'not known'}",
        fix=f"add {node} to /etc/hosts or DNS on every node, or set its NodeAddr in slurm.conf",
    )
