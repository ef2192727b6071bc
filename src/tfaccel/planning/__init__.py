"""Plan a training run before it runs: memory by part, the accelerators it fits on, the
largest batch, gradient accumulation, and the step and epoch time from a roofline model.

Example:
    >>> import tfaccel
    >>> result = tfaccel.plan(model, batch_size=256)          # doctest: +SKIP
    >>> result.memory.total_bytes                              # doctest: +SKIP
"""

from __future__ import annotations

from tfaccel.planning.api import PRECISIONS, PlanError, plan, plan_step
from tfaccel.planning.memory import (
    CPU_ONEDNN_RULES,
    FRAGMENTATION_MARGIN,
    GPU_BFC_RULES,
    PARTS,
    RAM_RULES,
    TPU_RULES,
    AllocatorRules,
    MemoryEstimate,
    simulate,
)
from tfaccel.planning.result import DevicePlan, Plan
from tfaccel.planning.roofline import StepTime, step_time
from tfaccel.planning.targets import Target, targets
from tfaccel.planning.trace import StepGraph, trace_step

__all__ = [
    "CPU_ONEDNN_RULES",
    "FRAGMENTATION_MARGIN",
    "GPU_BFC_RULES",
    "PARTS",
    "PRECISIONS",
    "RAM_RULES",
    "TPU_RULES",
    "AllocatorRules",
    "DevicePlan",
    "MemoryEstimate",
    "Plan",
    "PlanError",
    "StepGraph",
    "StepTime",
    "Target",
    "allocator_rules",
    "estimate_memory",
    "plan",
    "plan_step",
    "simulate",
    "step_time",
    "targets",
    "trace_step",
]


def allocator_rules(device: str) -> AllocatorRules:
    """The counting rules of the allocator behind ``device`` (``cpu:0``, ``gpu:0``...)."""
    if device.lower().startswith("cpu"):
        return CPU_ONEDNN_RULES
    return TPU_RULES if device.lower().startswith("tpu") else GPU_BFC_RULES


def estimate_memory(
    model: object,
    batch_size: int,
    *,
    rules: AllocatorRules = GPU_BFC_RULES,
    margin: float = FRAGMENTATION_MARGIN,
) -> MemoryEstimate:
    """Trace one training step of the compiled ``model`` and simulate its peak memory."""
    return simulate(trace_step(model, batch_size), batch_size, rules=rules, margin=margin)
