"""Which cluster this process belongs to: ``TF_CONFIG``, a Slurm allocation, or none.

Pure functions of text and environment mappings, no TensorFlow: a malformed ``TF_CONFIG`` is
reported here, with what is wrong and how to fix it, before TensorFlow reads it and fails
somewhere deeper (or, worse, hangs waiting for a worker that does not exist).

``TF_CONFIG`` is the JSON document TensorFlow's own ``TFConfigClusterResolver`` reads::

    {"cluster": {"worker": ["host1:12345", "host2:12345"]},
     "task": {"type": "worker", "index": 0}}

Example:
    >>> config = parse_tf_config('{"cluster": {"worker": ["127.0.0.1:2222"]}, '
    ...                          '"task": {"type": "worker", "index": 0}}')
    >>> config.num_workers, config.is_chief
    (1, True)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tfaccel.core.checks import is_int
from tfaccel.core.errors import TfaccelError, shown

__all__ = [
    "TRAINING_JOBS",
    "ClusterConfig",
    "ClusterConfigError",
    "SlurmAllocation",
    "format_address",
    "local_cluster",
    "parse_tf_config",
    "slurm_allocation",
]

TRAINING_JOBS = ("chief", "worker")
"""The jobs whose tasks train together under MultiWorkerMirroredStrategy."""

_KNOWN_JOBS = (*TRAINING_JOBS, "evaluator")
_EXAMPLE = (
    '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
    '"task": {"type": "worker", "index": 0}}'
)


class ClusterConfigError(TfaccelError):
    """``TF_CONFIG`` or the Slurm environment does not describe a usable cluster."""


@dataclass(frozen=True)
class ClusterConfig:
    """A validated cluster description and this process's place in it.

    Attributes:
        cluster: job name -> the "host:port" address of each of its tasks.
        task_type: this process's job ("worker", "chief" or "evaluator").
        task_index: this process's index in its job.
        rpc_layer: the protocol between tasks ("grpc").
        source: where the description came from ("TF_CONFIG", "tfaccel launch").
    """

    cluster: Mapping[str, tuple[str, ...]]
    task_type: str
    task_index: int
    rpc_layer: str = "grpc"
    source: str = "TF_CONFIG"

    @property
    def num_workers(self) -> int:
        """The tasks that train: the chief (if any) and the workers."""
        return sum(len(self.cluster.get(job, ())) for job in TRAINING_JOBS)

    @property
    def is_chief(self) -> bool:
        """The task that writes checkpoints: the chief, or worker 0 when there is no chief."""
        if "chief" in self.cluster:
            return self.task_type == "chief"
        return self.task_type == "worker" and self.task_index == 0

    @property
    def task(self) -> str:
        """``"worker:1"``: this task, as the messages name it."""
        return f"{self.task_type}:{self.task_index}"

    def to_tf_config(self) -> str:
        """This configuration as the ``TF_CONFIG`` JSON text TensorFlow reads."""
        return json.dumps(
            {
                "cluster": {job: list(addresses) for job, addresses in self.cluster.items()},
                "task": {"type": self.task_type, "index": self.task_index},
            }
        )


@dataclass(frozen=True)
class SlurmAllocation:
    """The Slurm job step this process runs in (``srun``).

    Attributes:
        job_id: ``SLURM_JOB_ID``.
        num_tasks: the tasks of the step (``SLURM_STEP_NUM_TASKS``, else ``SLURM_NTASKS``).
        proc_id: this task's rank (``SLURM_PROCID``).
        max_tasks_per_node: the most tasks on one node (``SLURM_STEP_TASKS_PER_NODE``).
    """

    job_id: str
    num_tasks: int
    proc_id: int
    max_tasks_per_node: int = 1

    @property
    def is_chief(self) -> bool:
        return self.proc_id == 0


def parse_tf_config(text: str | None) -> ClusterConfig | None:
    """Validate a ``TF_CONFIG`` text.

    Args:
        text: the variable's value; None or blank means "not set".

    Returns:
        The ClusterConfig, or None when ``text`` is None or blank.

    Raises:
        ClusterConfigError: the text is not JSON, lacks ``cluster`` or ``task``, names a job
            the cluster does not have, or a task index out of range; the message says which.

    Example:
        >>> parse_tf_config('{"cluster": {"worker": ["a:1", "b:1"]}, '
        ...                 '"task": {"type": "worker", "index": 1}}').task
        'worker:1'
    """
    if text is not None and not isinstance(text, str):
        raise ClusterConfigError(
            "TF_CONFIG is not text",
            expected=f"the variable's JSON text, such as {_EXAMPLE}, or None",
            received=f"{shown(text)} ({type(text).__name__})",
            fix="pass os.environ.get('TF_CONFIG'): the text itself, not a parsed document",
        )
    if text is None or not text.strip():
        return None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _error(
            f"TF_CONFIG is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
            text,
        ) from None
    except RecursionError:  # "[[[[..." nested beyond Python's stack
        raise _error("TF_CONFIG nests its arrays and objects too deeply to be read", text) from None
    if not isinstance(document, dict):
        raise _error(f"TF_CONFIG is a JSON {type(document).__name__}, not an object", text)
    cluster = _cluster(document, text)
    task_type, task_index = _task(document, cluster, text)
    rpc_layer = document.get("rpc_layer") or "grpc"
    if not isinstance(rpc_layer, str):
        raise _error("TF_CONFIG's rpc_layer is not a text", text)
    return ClusterConfig(cluster, task_type, task_index, rpc_layer)


def _cluster(document: Mapping[str, object], text: str) -> dict[str, tuple[str, ...]]:
    raw = document.get("cluster")
    if not isinstance(raw, dict) or not raw:
        what = "TF_CONFIG has no cluster" if raw is None else "TF_CONFIG's cluster is empty"
        if raw is not None and not isinstance(raw, dict):
            what = "TF_CONFIG's cluster is not an object of job -> addresses"
        raise _error(what, text)
    if "ps" in raw:
        raise ClusterConfigError(
            "TF_CONFIG describes a parameter-server cluster (it has a 'ps' job)",
            expected="a cluster of 'worker' (and at most one 'chief') tasks that all train",
            received=_short(text),
            fix="for parameter servers create tf.distribute.ParameterServerStrategy yourself "
            "and train with its ClusterCoordinator; tfaccel.distribute covers all-reduce training",
        )
    cluster: dict[str, tuple[str, ...]] = {}
    for job, addresses in raw.items():
        if job not in _KNOWN_JOBS:
            raise _error(f"TF_CONFIG's cluster has a job {job!r} tfaccel does not know", text)
        if not isinstance(addresses, list) or not addresses:
            raise _error(f"TF_CONFIG's job {job!r} is not a non-empty list of addresses", text)
        for address in addresses:
            _check_address(job, address, text)
        cluster[job] = tuple(addresses)
    if len(cluster.get("chief", ())) > 1:
        raise _error("TF_CONFIG has more than one chief", text)
    if not any(job in cluster for job in TRAINING_JOBS):
        raise _error("TF_CONFIG's cluster has no 'worker' or 'chief' job", text)
    return cluster


def _check_address(job: str, address: object, text: str) -> None:
    host, sep, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _error(
            f"TF_CONFIG's job {job!r} has the address {address!r}, which is not 'host:port'",
            text,
        )


def _task(
    document: Mapping[str, object], cluster: Mapping[str, tuple[str, ...]], text: str
) -> tuple[str, int]:
    task = document.get("task")
    if not isinstance(task, dict):
        raise _error(
            "TF_CONFIG has a cluster but no task: each process must say which task it is", text
        )
    task_type, index = task.get("type"), task.get("index", 0)
    if not isinstance(task_type, str) or task_type not in cluster:
        jobs = ", ".join(repr(job) for job in cluster)
        raise _error(
            f"TF_CONFIG's task type {task_type!r} is not a job of its cluster ({jobs})", text
        )
    if not is_int(index):
        raise _error(f"TF_CONFIG's task index {index!r} is not an integer", text)
    count = len(cluster[task_type])
    if not 0 <= index < count:
        raise _error(
            f"TF_CONFIG's task index {index} is out of range: the {task_type!r} job has "
            f"{count} task{'s' if count != 1 else ''} (indices 0..{count - 1})",
            text,
        )
    return task_type, index


def _error(what: str, text: str) -> ClusterConfigError:
    return ClusterConfigError(
        what,
        expected=f"JSON such as {_EXAMPLE}",
        received=_short(text),
        fix="correct TF_CONFIG (or unset it to train in one process); 'tfaccel launch -n N "
        "SCRIPT' sets it for local workers",
    )


def _short(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def format_address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets (``[::1]:2222``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def local_cluster(host: str, ports: Sequence[int], rank: int) -> ClusterConfig:
    """The cluster of ``len(ports)`` workers on ``host``, seen from worker ``rank``.

    Example:
        >>> local_cluster("127.0.0.1", [2222, 2223], 1).cluster
        {'worker': ('127.0.0.1:2222', '127.0.0.1:2223')}
    """
    if not 0 <= rank < len(ports):
        raise ValueError(f"rank {rank} is not in [0, {len(ports)})")
    addresses = tuple(format_address(host, port) for port in ports)
    return ClusterConfig({"worker": addresses}, "worker", rank, source="tfaccel launch")


def slurm_allocation(environ: Mapping[str, str]) -> SlurmAllocation | None:
    """The Slurm job step of this process, when it has more than one task.

    Args:
        environ: the environment (Slurm's ``SLURM_*`` variables).

    Returns:
        The allocation, or None outside Slurm or with a single task (nothing to distribute).

    Raises:
        ClusterConfigError: a multi-task allocation, but this process is not one of its tasks
            (the batch script itself, not started by ``srun``), half-set variables (a task's
            without a job, some of :data:`SLURM_STEP_VARIABLES` without the others, a rank
            beyond the tasks: which are set and which missing), or a variable is not a number.
    """
    job_id = environ.get("SLURM_JOB_ID", "").strip()
    step_set = [name for name in SLURM_STEP_VARIABLES if name in environ]
    if not job_id:
        if step_set:  # a task's variables without a job: copied from another shell, or faked
            raise _half_set(environ, "SLURM_JOB_ID is missing")
        return None
    tasks_text = environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS") or "1"
    num_tasks = _slurm_int("SLURM_STEP_NUM_TASKS/SLURM_NTASKS", tasks_text)
    if num_tasks <= 1:
        if _slurm_int("SLURM_PROCID", environ.get("SLURM_PROCID", "0")) > 0:
            raise _half_set(
                environ, f"SLURM_PROCID is {environ['SLURM_PROCID']} in a job of 1 task"
            )
        return None
    if "SLURM_STEP_NUM_TASKS" not in environ or "SLURM_PROCID" not in environ:
        raise ClusterConfigError(
            f"Slurm allocated {num_tasks} tasks, but this process is not one of them",
            expected="the training script started once per task by srun "
            "(which sets SLURM_PROCID and SLURM_STEP_NUM_TASKS)",
            received=_set_and_missing(environ) + " (the batch script itself)",
            fix="run 'srun python train.py' inside the batch script",
        )
    if len(step_set) < len(SLURM_STEP_VARIABLES):
        raise _half_set(environ, "a job step needs all of them")
    proc_id = _slurm_int("SLURM_PROCID", environ["SLURM_PROCID"])
    if proc_id >= num_tasks:
        raise _half_set(environ, f"SLURM_PROCID {proc_id} is not a rank of {num_tasks} tasks")
    per_node = environ["SLURM_STEP_TASKS_PER_NODE"]
    return SlurmAllocation(
        job_id=job_id,
        num_tasks=num_tasks,
        proc_id=proc_id,
        max_tasks_per_node=max(_tasks_per_node(per_node)),
    )


SLURM_STEP_VARIABLES = (
    "SLURM_PROCID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_TASKS_PER_NODE",
)
"""The variables srun sets for each task of a job step, all read to join the cluster."""


def _set_and_missing(environ: Mapping[str, str]) -> str:
    names = ("SLURM_JOB_ID", "SLURM_NTASKS", *SLURM_STEP_VARIABLES)
    given = [f"{name}={shown(environ[name])}" for name in names if name in environ]
    missing = [name for name in names if name not in environ and name != "SLURM_NTASKS"]
    return f"set: {', '.join(given) or 'none'}; missing: {', '.join(missing) or 'none'}"


def _half_set(environ: Mapping[str, str], problem: str) -> ClusterConfigError:
    return ClusterConfigError(
        f"The Slurm variables are half set ({problem})",
        expected="all of SLURM_JOB_ID, " + ", ".join(SLURM_STEP_VARIABLES) + " as srun sets them "
        "for each task, or none of them outside Slurm",
        received=_set_and_missing(environ),
        fix="start each task with srun (e.g. 'srun --ntasks=2 python train.py' inside "
        "sbatch or salloc), or unset the SLURM_* variables to train on this machine alone",
    )


def _tasks_per_node(text: str) -> list[int]:
    """Slurm's compressed list of tasks per node: ``"3(x2),1"`` -> ``[3, 3, 1]``."""
    counts = []
    for part in text.split(","):
        count, _, repeat = part.strip().partition("(x")
        repeat = repeat.rstrip(")")
        if not count.isdigit() or (repeat and not repeat.isdigit()):
            raise ClusterConfigError(
                "The Slurm variable SLURM_STEP_TASKS_PER_NODE cannot be read",
                expected="Slurm's list of tasks per node, such as '2(x3),1'",
                received=repr(text),
                fix="start the tasks with srun, which sets it",
            )
        counts += [int(count)] * int(repeat or 1)
    return counts


def _slurm_int(name: str, text: str) -> int:
    if not text.strip().isdigit():
        raise ClusterConfigError(
            f"The Slurm variable {name} is not a number",
            expected="a non-negative integer, as Slurm sets it",
            received=repr(text),
            fix="start the job with sbatch/srun, or unset SLURM_JOB_ID outside Slurm",
        )
    return int(text)
