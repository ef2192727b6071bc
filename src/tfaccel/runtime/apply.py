"""The TensorFlow side of ``setup()``: read its configuration, make the planned calls, report.

TensorFlow fixes the devices, their memory, logical devices and thread pools when its runtime
starts (the first op, or ``tf.config.list_logical_devices()``). Called later, :func:`apply_plan`
makes the calls that can still change something (precision, XLA, determinism, seed) and
returns the settings that were too late; :func:`outcome` turns the plan into the RuntimeConfig.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from typing import TYPE_CHECKING

from tfaccel.inventory import GpuFacts
from tfaccel.runtime.config import JsonValue, RuntimeConfig, Setting
from tfaccel.runtime.decision import RuntimeState, SetupPlan, memory_in_effect
from tfaccel.runtime.settings import SETTINGS

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["apply_plan", "outcome", "pending", "read_state"]


def read_state(tf: ModuleType) -> RuntimeState:
    """TensorFlow's configuration now; none of these calls starts the runtime."""
    from tensorflow.python.framework import config as tf_config

    gpus = tf.config.list_physical_devices("GPU")
    devices = gpus + tf.config.list_physical_devices("CPU")
    virtual = {}
    for dev in devices:
        configured = tf.config.get_logical_device_configuration(dev)
        if configured:
            virtual[_device_key(dev.name)] = tuple(c.memory_limit for c in configured)
    keras = sys.modules.get("keras")
    return RuntimeState(
        started=runtime_started(),
        visible_gpus=tuple(_device_index(d.name) for d in tf.config.get_visible_devices("GPU")),
        growth={
            _device_key(d.name): bool(tf.config.experimental.get_memory_growth(d)) for d in gpus
        },
        virtual=virtual,
        threads=(
            tf.config.threading.get_intra_op_parallelism_threads(),
            tf.config.threading.get_inter_op_parallelism_threads(),
        ),
        jit=bool(tf.config.optimizer.get_jit()),
        deterministic=bool(tf_config.is_op_determinism_enabled()),
        precision=keras.mixed_precision.global_policy().name if keras else "float32",
    )


def runtime_started() -> bool:
    """Whether TensorFlow's runtime has started (its eager context exists)."""
    from tensorflow.python.eager import context

    return getattr(context.context(), "_context_handle", None) is not None


def pending(plan: SetupPlan, state: RuntimeState) -> set[str]:
    """The fixed-at-start settings whose TensorFlow calls would change the configuration."""
    changes = set()
    if plan.visible_gpus is not None and plan.visible_gpus != state.visible_gpus:
        changes.add("devices")
    if any(not state.growth.get(key) for key in plan.growth):
        changes.add("memory")
    for key, limits in plan.virtual.items():
        if state.virtual.get(key) != limits:
            changes |= plan.virtual_owners[key]
    intra, inter = plan.threads
    if (intra is not None and intra != state.threads[0]) or (
        inter is not None and inter != state.threads[1]
    ):
        changes.add("threads")
    return changes


def apply_plan(tf: ModuleType, plan: SetupPlan, state: RuntimeState) -> set[str]:
    """Make the planned calls; return the settings that were too late to apply."""
    too_late = pending(plan, state) if state.started else set()
    try:
        _apply_fixed(tf, plan, skip=too_late)
    except RuntimeError as exc:  # the runtime started in a way _runtime_started did not see
        if "after" not in str(exc) or "initializ" not in str(exc):
            raise
        too_late |= pending(plan, state)
    _apply_free(tf, plan)
    return too_late


def _apply_fixed(tf: ModuleType, plan: SetupPlan, *, skip: set[str]) -> None:
    physical = {_device_key(d.name): d for d in tf.config.list_physical_devices()}
    if plan.visible_gpus is not None and "devices" not in skip:
        chosen = [physical[f"GPU:{i}"] for i in plan.visible_gpus]
        tf.config.set_visible_devices(chosen, "GPU")
    if "memory" not in skip:
        for key in plan.growth:
            tf.config.experimental.set_memory_growth(physical[key], True)
    for key, limits in plan.virtual.items():
        if not plan.virtual_owners[key] & skip:
            configs = [tf.config.LogicalDeviceConfiguration(memory_limit=mib) for mib in limits]
            tf.config.set_logical_device_configuration(physical[key], configs)
    intra, inter = plan.threads
    if "threads" not in skip:
        if intra is not None:
            tf.config.threading.set_intra_op_parallelism_threads(intra)
        if inter is not None:
            tf.config.threading.set_inter_op_parallelism_threads(inter)


def _apply_free(tf: ModuleType, plan: SetupPlan) -> None:
    from tensorflow.python.framework import config as tf_config

    if plan.precision is not None:
        keras = importlib.import_module("keras")
        keras.mixed_precision.set_global_policy(plan.precision)
    if plan.jit is not None:
        tf.config.optimizer.set_jit(plan.jit)
    if plan.deterministic is True:
        tf.config.experimental.enable_op_determinism()
    elif plan.deterministic is False:
        tf_config.disable_op_determinism()
    if plan.seed is not None:
        importlib.import_module("keras").utils.set_random_seed(plan.seed)


def outcome(plan: SetupPlan, state: RuntimeState, too_late: set[str]) -> RuntimeConfig:
    settings = []
    for name in SETTINGS:
        setting = plan.settings[name]
        if name in too_late:
            setting = dataclasses.replace(
                setting,
                status="too_late",
                applied=_kept(name, setting, state),
                reason="not applied: TensorFlow's runtime had already started and fixes "
                f"{name.replace('_', ' ')} at start",
            )
        settings.append(setting)
    return RuntimeConfig(settings=tuple(settings), warnings=tuple(plan.warnings))


def _kept(name: str, setting: Setting, state: RuntimeState) -> JsonValue:
    """The value TensorFlow kept for a setting that was too late."""
    if name == "devices":
        return [f"GPU:{i}" for i in state.visible_gpus]
    if name == "threads":
        return list(state.threads)
    if name == "logical_devices":
        key = "CPU:0" if not state.visible_gpus else f"GPU:{state.visible_gpus[0]}"
        return len(state.virtual.get(key) or (None,))
    gpus = tuple(GpuFacts(i) for i in state.visible_gpus)
    return memory_in_effect(state, gpus)


def _device_key(name: str) -> str:
    """'/physical_device:GPU:0' -> 'GPU:0'."""
    kind, _, index = name.rsplit("/", 1)[-1].rpartition(":")
    return f"{kind.rsplit(':', 1)[-1]}:{index}"


def _device_index(name: str) -> int:
    return int(name.rsplit(":", 1)[-1])
