"""Pick the ``tf.distribute`` strategy for this process, and say why.

The decision is a pure function of plain facts (:func:`decide_strategy`), so each rule is
tested by building the facts by hand; :func:`strategy` gathers the facts (the probe layer, the
environment, TensorFlow's device configuration, none of which starts TensorFlow's runtime)
and builds the strategy. The rules, first match wins:

1. a Cloud TPU is attached: ``TPUStrategy``;
2. ``TF_CONFIG`` describes a cluster: ``MultiWorkerMirroredStrategy`` (RING all-reduce over
   gRPC on CPUs, NCCL on GPUs);
3. a Slurm step of several tasks (``srun``): ``MultiWorkerMirroredStrategy`` over the
   cluster :func:`tfaccel.distribute.slurm.slurm_cluster` builds from the step;
4. several GPUs: ``MirroredStrategy`` with NCCL all-reduce (copies through one device when
   one GPU is split into logical GPUs, which NCCL cannot pair);
5. one GPU: ``OneDeviceStrategy`` on it;
6. the CPU split into several logical devices (``tfaccel.setup(logical_devices=N)``):
   ``MirroredStrategy`` over them, since asking for them is asking to run data-parallel
   code on one machine (it shares the same cores: it checks correctness, not speed);
7. otherwise ``OneDeviceStrategy`` on the CPU.

Example:
    >>> import tfaccel.distribute as dist
    >>> choice = dist.strategy()
    >>> print(choice)
    OneDeviceStrategy (1 replica): no TPU, no cluster (TF_CONFIG, Slurm), no GPU
    >>> with choice.strategy.scope():
    ...     model = make_model()
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfaccel.core.checks import check_environ, shown_typed
from tfaccel.core.cluster import (
    ClusterConfig,
    SlurmAllocation,
    parse_tf_config,
    slurm_allocation,
)
from tfaccel.core.errors import TfaccelError, UsageError
from tfaccel.distribute.slurm import slurm_cluster
from tfaccel.probe import pci, tpu

__all__ = [
    "COLLECTIVE_TIMEOUT_ENV",
    "DEFAULT_COLLECTIVE_TIMEOUT_S",
    "Facts",
    "StrategyChoice",
    "StrategyDecision",
    "StrategyError",
    "collective_timeout",
    "decide_strategy",
    "strategy",
]

COLLECTIVE_TIMEOUT_ENV = "TFACCEL_COLLECTIVE_TIMEOUT_S"
DEFAULT_COLLECTIVE_TIMEOUT_S = 0.0
"""Seconds a multi-worker collective (an all-reduce) may take before it fails with
``DeadlineExceededError`` instead of hanging (0: no limit, the default);
``TFACCEL_COLLECTIVE_TIMEOUT_S`` sets it, and ``tfaccel launch --hang-timeout`` sets it for its
workers. Off by default because TensorFlow starts one thread per collective to watch its
timeout (timeout x collectives per second threads alive at once); hangs are found by the
launcher's heartbeat watch. The timeout covers waiting for the slowest worker, start-up
included."""


class StrategyError(TfaccelError):
    """The strategy the facts call for cannot be created here."""


@dataclass(frozen=True)
class Facts:
    """What the choice depends on; plain values, so tests build them by hand.

    Attributes:
        tpu_present: the probe found a Cloud TPU.
        tpu_name: ``TPU_NAME`` when set (a TPU node), else None (a TPU VM: "local").
        cluster: the validated ``TF_CONFIG``, None when it is not set.
        slurm: the Slurm step of several tasks, None outside one.
        slurm_cluster: that step's cluster, seen from this task (addresses and ports).
        gpus: the GPUs TensorFlow will use (visible physical GPUs).
        logical_gpus: the logical GPUs they are split into (equal to ``gpus`` unless split).
        logical_cpus: the logical CPU devices configured (1 unless split).
        collective_timeout_s: seconds before a multi-worker collective fails (0: never).
    """

    tpu_present: bool = False
    tpu_name: str | None = None
    cluster: ClusterConfig | None = None
    slurm: SlurmAllocation | None = None
    slurm_cluster: ClusterConfig | None = None
    gpus: int = 0
    logical_gpus: int = 0
    logical_cpus: int = 1
    collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S


@dataclass(frozen=True)
class StrategyDecision:
    """Which strategy, over which devices, with which all-reduce, and why.

    Attributes:
        kind: "tpu", "multi_worker", "mirrored" or "one_device".
        reason: why, in one sentence.
        devices: the local devices of a MirroredStrategy or OneDeviceStrategy.
        communication: how gradients are summed: "NCCL", "RING", "ReductionToOneDevice",
            "TPU" or "none".
    """

    kind: str
    reason: str
    devices: tuple[str, ...] = ()
    communication: str = "none"


_CLASS_NAMES = {
    "tpu": "TPUStrategy",
    "multi_worker": "MultiWorkerMirroredStrategy",
    "mirrored": "MirroredStrategy",
    "one_device": "OneDeviceStrategy",
}


@dataclass(frozen=True)
class StrategyChoice:
    """The strategy built for this process, and why it was chosen.

    Attributes:
        strategy: the ``tf.distribute.Strategy``.
        kind: "tpu", "multi_worker", "mirrored" or "one_device".
        reason: why this strategy, in one sentence.
        num_replicas: replicas in sync over the whole cluster.
        num_workers: processes taking part (1 unless multi-worker).
        is_chief: this process writes the checkpoints and the summaries.
        task: this process's task ("worker:1"), None outside a cluster.
        communication: how gradients are summed ("NCCL", "RING", ...).

    Example:
        >>> choice = tfaccel.distribute.strategy()
        >>> choice.kind, choice.num_replicas
        ('mirrored', 2)
    """

    strategy: Any
    kind: str
    reason: str
    num_replicas: int
    num_workers: int = 1
    is_chief: bool = True
    task: str | None = None
    communication: str = "none"

    @property
    def name(self) -> str:
        """The strategy's class as TensorFlow documents it ("MirroredStrategy")."""
        return _CLASS_NAMES.get(self.kind, type(self.strategy).__name__)

    def __str__(self) -> str:
        replicas = f"{self.num_replicas} replica{'s' if self.num_replicas != 1 else ''}"
        where = f", {self.num_workers} workers, this is {self.task}" if self.task else ""
        comm = f", {self.communication} all-reduce" if self.communication != "none" else ""
        return f"{self.name} ({replicas}{where}{comm}): {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.name,
            "kind": self.kind,
            "reason": self.reason,
            "num_replicas": self.num_replicas,
            "num_workers": self.num_workers,
            "is_chief": self.is_chief,
            "task": self.task,
            "communication": self.communication,
        }


def decide_strategy(facts: Facts) -> StrategyDecision:
    """Choose the strategy from the facts (pure; see the module docstring for the rules).

    Example:
        >>> decide_strategy(Facts(gpus=4, logical_gpus=4)).kind
        'mirrored'
    """
    if not isinstance(facts, Facts):
        raise UsageError(
            "decide_strategy() got no Facts",
            expected="a tfaccel.distribute.Facts (what strategy() reads from this machine)",
            received=f"facts={shown_typed(facts)}",
            fix="pass Facts(gpus=..., ...), or call tfaccel.distribute.strategy() to read them",
        )
    if facts.tpu_present:
        where = f"TPU_NAME={facts.tpu_name}" if facts.tpu_name else "a TPU on this host"
        return StrategyDecision("tpu", f"a Cloud TPU was found ({where})", communication="TPU")
    comm = "NCCL" if facts.gpus else "RING"
    if facts.cluster is not None:
        return _cluster_decision(facts.cluster, comm)
    if facts.slurm is not None:
        slurm = facts.slurm
        return StrategyDecision(
            "multi_worker",
            f"Slurm job {slurm.job_id} runs {slurm.num_tasks} tasks; this is task {slurm.proc_id}",
            communication=comm,
        )
    if facts.logical_gpus > 1:
        devices = tuple(f"/gpu:{i}" for i in range(facts.logical_gpus))
        if facts.logical_gpus > facts.gpus:
            return StrategyDecision(
                "mirrored",
                f"{facts.gpus} GPU(s) split into {facts.logical_gpus} logical GPUs; NCCL "
                "cannot pair devices of one GPU, so gradients are summed on one device",
                devices,
                "ReductionToOneDevice",
            )
        return StrategyDecision("mirrored", f"{facts.gpus} GPUs on this machine", devices, "NCCL")
    if facts.logical_gpus == 1 or facts.gpus == 1:
        return StrategyDecision("one_device", "one GPU on this machine", ("/gpu:0",))
    if facts.logical_cpus > 1:
        devices = tuple(f"/cpu:{i}" for i in range(facts.logical_cpus))
        return StrategyDecision(
            "mirrored",
            f"no GPU; the CPU is split into {facts.logical_cpus} logical devices "
            "(they share its cores: data parallel for correctness, not speed)",
            devices,
            "ReductionToOneDevice",
        )
    return StrategyDecision(
        "one_device", "no TPU, no cluster (TF_CONFIG, Slurm), no GPU", ("/cpu:0",)
    )


def _cluster_decision(cluster: ClusterConfig, comm: str) -> StrategyDecision:
    if cluster.task_type == "evaluator":
        return StrategyDecision(
            "one_device",
            "TF_CONFIG says this task is the evaluator, which does not join training",
            ("/gpu:0",) if comm == "NCCL" else ("/cpu:0",),
        )
    workers = cluster.num_workers
    return StrategyDecision(
        "multi_worker",
        f"{cluster.source} describes a cluster of {workers} worker{'s' if workers != 1 else ''}",
        communication=comm,
    )


# --------------------------------------------------------------------------- building

_BUILT: dict[StrategyDecision, StrategyChoice] = {}
_SLURM_CLUSTERS: dict[SlurmAllocation, ClusterConfig] = {}


def strategy(*, environ: Mapping[str, str] | None = None) -> StrategyChoice:
    """Choose and build the ``tf.distribute`` strategy for this process.

    Call it first, before any TensorFlow op or model: a multi-worker strategy starts this
    process's gRPC server and must do so before TensorFlow's runtime starts. Called again
    with the same facts it returns the same object (a process joins a cluster once).

    Args:
        environ: the environment to read ``TF_CONFIG`` and ``SLURM_*`` from (default
            ``os.environ``).

    Returns:
        A StrategyChoice: ``.strategy`` is the strategy, ``str(choice)`` says which and why.

    Raises:
        UsageError: ``environ`` is not a mapping, or ``TFACCEL_COLLECTIVE_TIMEOUT_S`` is not a
            number of seconds >= 0.
        ClusterConfigError: ``TF_CONFIG`` is malformed, or a Slurm allocation is not usable.
        StrategyError: TensorFlow could not create the strategy (the message has its reason).

    Example:
        >>> choice = tfaccel.distribute.strategy()
        >>> print(choice)
        MirroredStrategy (2 replicas, ReductionToOneDevice all-reduce): no GPU; the CPU ...
        >>> with choice.strategy.scope():
        ...     model = build_model()
    """
    check_environ("environ", environ, where="tfaccel.distribute.strategy")
    env = os.environ if environ is None else environ
    timeout_s = collective_timeout(env)
    cluster = parse_tf_config(env.get("TF_CONFIG"))  # bad TF_CONFIG: fail before importing TF
    slurm = slurm_allocation(env) if cluster is None else None
    # the step's addresses and this task's port, checked before TensorFlow is imported
    slurm_config = None
    if slurm is not None:
        if slurm not in _SLURM_CLUSTERS:  # once: later calls find the port taken by our server
            _SLURM_CLUSTERS[slurm] = slurm_cluster(slurm, env)
        slurm_config = _SLURM_CLUSTERS[slurm]
    facts = dataclasses.replace(
        _facts(env, cluster, slurm),
        slurm_cluster=slurm_config,
        collective_timeout_s=timeout_s,
    )
    decision = decide_strategy(facts)
    if decision not in _BUILT:
        _BUILT[decision] = _build(decision, facts)
    return _BUILT[decision]


def collective_timeout(env: Mapping[str, str]) -> float:
    """The collective timeout ``env`` asks for (``TFACCEL_COLLECTIVE_TIMEOUT_S``), or the default.

    Raises:
        UsageError: the value is not a number of seconds >= 0.
    """
    text = env.get(COLLECTIVE_TIMEOUT_ENV)
    if text is None or not text.strip():
        return DEFAULT_COLLECTIVE_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value >= 0 and math.isfinite(value)):
        raise UsageError(
            f"{COLLECTIVE_TIMEOUT_ENV}={text!r} is not a number of seconds",
            expected="seconds >= 0 a collective may take before it fails (0: no limit)",
            received=f"{COLLECTIVE_TIMEOUT_ENV}={text!r}",
            fix=f"set {COLLECTIVE_TIMEOUT_ENV}=600, or unset it for "
            f"{DEFAULT_COLLECTIVE_TIMEOUT_S:g} s",
        )
    return value


def _facts(
    env: Mapping[str, str], cluster: ClusterConfig | None, slurm: SlurmAllocation | None
) -> Facts:
    import tensorflow as tf

    tpu_info = tpu.collect(pci.collect())
    gpus = tf.config.get_visible_devices("GPU")
    logical_gpus = sum(len(tf.config.get_logical_device_configuration(g) or [g]) for g in gpus)
    cpu = tf.config.list_physical_devices("CPU")[0]
    return Facts(
        tpu_present=tpu_info.present,
        tpu_name=env.get("TPU_NAME") or None,
        cluster=cluster,
        slurm=slurm,
        gpus=len(gpus),
        logical_gpus=logical_gpus,
        logical_cpus=len(tf.config.get_logical_device_configuration(cpu) or [cpu]),
    )


def _build(decision: StrategyDecision, facts: Facts) -> StrategyChoice:
    import tensorflow as tf

    try:
        if decision.kind == "tpu":
            return _tpu(tf, decision, facts)
        if decision.kind == "multi_worker":
            return _multi_worker(tf, decision, facts)
    except (ValueError, RuntimeError, tf.errors.OpError) as exc:
        raise StrategyError(
            f"TensorFlow could not create the {_CLASS_NAMES[decision.kind]} chosen because "
            f"{decision.reason}",
            expected="a strategy created before any other TensorFlow op in this process",
            received=f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}",
            fix="call tfaccel.distribute.strategy() (or train()) first in the script; for a "
            "cluster, check that every worker's address (TF_CONFIG or the Slurm step) is "
            "reachable from the others",
        ) from exc
    if decision.kind == "mirrored":
        ops = (
            tf.distribute.NcclAllReduce()
            if decision.communication == "NCCL"
            else tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0")
        )
        made = tf.distribute.MirroredStrategy(list(decision.devices), cross_device_ops=ops)
    else:
        made = tf.distribute.OneDeviceStrategy(decision.devices[0])
    return StrategyChoice(
        made,
        decision.kind,
        decision.reason,
        int(made.num_replicas_in_sync),
        communication=decision.communication,
    )


def _multi_worker(tf: Any, decision: StrategyDecision, facts: Facts) -> StrategyChoice:
    implementations = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementations.RING
        if decision.communication == "RING"
        else implementations.NCCL,
        # a hung peer fails the collective (DeadlineExceededError) rather than blocking forever
        timeout_seconds=facts.collective_timeout_s or None,
    )
    # A Slurm step's cluster is built by tfaccel, not by TensorFlow's SlurmClusterResolver
    # (see tfaccel.distribute.slurm for what that gets wrong). Each task uses the GPUs it sees
    # (bound by srun --gpus-per-task or --gpu-bind): TF has listed the GPUs already, so
    # CUDA_VISIBLE_DEVICES cannot be re-assigned here.
    config = facts.cluster if facts.cluster is not None else facts.slurm_cluster
    assert config is not None  # multi_worker: TF_CONFIG or a Slurm step
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({job: list(tasks) for job, tasks in config.cluster.items()}),
        task_type=config.task_type,
        task_id=config.task_index,
        rpc_layer=config.rpc_layer,
        num_accelerators={"GPU": facts.gpus},
    )
    task, is_chief, workers = config.task, config.is_chief, config.num_workers
    made = tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=resolver, communication_options=options
    )
    return StrategyChoice(
        made,
        "multi_worker",
        decision.reason,
        int(made.num_replicas_in_sync),
        num_workers=workers,
        is_chief=is_chief,
        task=task,
        communication=decision.communication,
    )


def _tpu(tf: Any, decision: StrategyDecision, facts: Facts) -> StrategyChoice:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=facts.tpu_name or "local")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    made = tf.distribute.TPUStrategy(resolver)
    return StrategyChoice(
        made, "tpu", decision.reason, int(made.num_replicas_in_sync), communication="TPU"
    )
