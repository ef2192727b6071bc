"""Scale out on TensorFlow's own distributed engine (``tf.distribute``), without surprises.

- :func:`strategy`: the right strategy for this process (TPU, a cluster from ``TF_CONFIG`` or
  Slurm, several GPUs, one device) and why.
- :func:`train`: one data-parallel loop for every strategy, with per-replica loss scaling
  to the global batch, optional linear learning-rate scaling, checkpoints every N steps and
  resume from the latest one.
- :func:`launch` (``tfaccel launch -n N SCRIPT``): N local workers of one cluster in a private
  network namespace, stopped together when one fails, hangs or is preempted, restarted as a
  group with ``restarts``; :func:`heartbeat` reports a custom loop's progress to it.
- :func:`split`: model parallel, consecutive layers on different devices, with the
  activations that cross them.
- :func:`scaling`: throughput and efficiency per replica count, and the share of step time
  spent summing gradients.

Importing this package does not import TensorFlow; the functions do when called.

Example:
    >>> import tfaccel.distribute as dist
    >>> choice = dist.strategy()          # first thing in the script
    >>> print(choice)
    >>> result = dist.train(make_model, make_examples, epochs=3, global_batch_size=64,
    ...                     strategy=choice, checkpoint_dir="ckpt", checkpoint_every=100)
"""

from __future__ import annotations

from tfaccel.core.cluster import (
    ClusterConfig,
    ClusterConfigError,
    SlurmAllocation,
    parse_tf_config,
)
from tfaccel.distribute.checkpoint import Checkpointer, CheckpointError
from tfaccel.distribute.choice import (
    Facts,
    StrategyChoice,
    StrategyDecision,
    StrategyError,
    decide_strategy,
    strategy,
)
from tfaccel.distribute.heartbeat import heartbeat
from tfaccel.distribute.launcher import LaunchError, LaunchResult, launch
from tfaccel.distribute.loop import EpochLog, StepLog, TrainResult, train
from tfaccel.distribute.preemption import PREEMPTED_EXIT_CODE, Preempted
from tfaccel.distribute.scaling import ScalingReport, ScalingRow, scaling
from tfaccel.distribute.split import Crossing, Placement, Stage, split

__all__ = [
    "PREEMPTED_EXIT_CODE",
    "CheckpointError",
    "Checkpointer",
    "ClusterConfig",
    "ClusterConfigError",
    "Crossing",
    "EpochLog",
    "Facts",
    "LaunchError",
    "LaunchResult",
    "Placement",
    "Preempted",
    "ScalingReport",
    "ScalingRow",
    "SlurmAllocation",
    "Stage",
    "StepLog",
    "StrategyChoice",
    "StrategyDecision",
    "StrategyError",
    "TrainResult",
    "decide_strategy",
    "heartbeat",
    "launch",
    "parse_tf_config",
    "scaling",
    "split",
    "strategy",
    "train",
]
