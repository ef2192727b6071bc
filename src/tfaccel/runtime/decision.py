"""The decision of ``setup()``: a pure function of the request, the hardware and TensorFlow's state.

:func:`decide` takes three plain values and returns the :class:`SetupPlan` (the TensorFlow calls to
make, and what each setting reports), so every rule is tested by building those by hand. It
checks the request against the hardware too: a GPU index that does not exist, more memory than
a GPU has, growth together with a limit raise here, before anything is applied. Which precision
is fast on which device is the inventory's rule (:func:`tfaccel.inventory.fast_precisions`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tfaccel.core.errors import RuntimeSetupError, shown
from tfaccel.inventory import GpuFacts, fast_precisions, precision_warning
from tfaccel.runtime.config import JsonValue, Setting, Status
from tfaccel.runtime.settings import Request

__all__ = [
    "DEFAULT_GPU_SHARE",
    "Hardware",
    "RuntimeState",
    "SetupPlan",
    "decide",
    "memory_in_effect",
]

DEFAULT_GPU_SHARE = 0.9  # of total memory split across logical GPUs when no limit is given


@dataclass(frozen=True)
class Hardware:
    """The hardware facts a decision needs.

    Attributes:
        gpus: the GPUs TensorFlow sees, by TensorFlow index.
        nvml_gpus: the GPUs NVML reports (used for checks when TensorFlow sees none).
        cpu_flags: the CPU's ISA flags, lower case as /proc/cpuinfo spells them.
        tpu_present: a Cloud TPU is attached.
        usable_cores: CPUs this process may run on.
        measured_jit: XLA on (True) or off (False) as measured for this machine and model in
            the results store, None when there is no measurement.
        measured_jit_reason: how the measurement reads, or why none was used.
        measured_precision: the fastest precision measured for this machine and model in the
            results store (``tfaccel tune``, ``tfaccel bench``), None when there is none.
        measured_precision_reason: how that measurement reads, or why none was used.
    """

    gpus: tuple[GpuFacts, ...] = ()
    nvml_gpus: tuple[GpuFacts, ...] = ()
    cpu_flags: frozenset[str] = frozenset()
    tpu_present: bool = False
    usable_cores: int | None = None
    measured_jit: bool | None = None
    measured_jit_reason: str = "no measurement for this model; decided by rule"
    measured_precision: str | None = None
    measured_precision_reason: str = "no measurement for this model; decided by rule"


@dataclass(frozen=True)
class RuntimeState:
    """TensorFlow's current configuration, read without starting the runtime.

    Keys of ``growth`` and ``virtual`` are physical device keys ("GPU:0", "CPU:0"); a virtual
    entry is the memory limit in MiB of each logical device (None on a CPU).
    """

    started: bool = False
    visible_gpus: tuple[int, ...] = ()
    growth: Mapping[str, bool] = field(default_factory=dict)
    virtual: Mapping[str, tuple[int | None, ...]] = field(default_factory=dict)
    threads: tuple[int, int] = (0, 0)  # intra, inter; 0 = TensorFlow chooses
    jit: bool = False
    deterministic: bool = False
    precision: str = "float32"


@dataclass
class SetupPlan:
    """The TensorFlow calls ``setup()`` will make, and the Setting each one reports."""

    visible_gpus: tuple[int, ...] | None = None
    growth: tuple[str, ...] = ()
    virtual: dict[str, tuple[int | None, ...]] = field(default_factory=dict)
    virtual_owners: dict[str, frozenset[str]] = field(default_factory=dict)
    threads: tuple[int | None, int | None] = (None, None)
    precision: str | None = None
    jit: bool | None = None
    deterministic: bool | None = None
    seed: int | None = None
    settings: dict[str, Setting] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def decide(request: Request, hardware: Hardware, state: RuntimeState) -> SetupPlan:
    """Decide every setting: pure, no TensorFlow; the core of ``setup()``.

    Args:
        request: the parsed request.
        hardware: the hardware facts.
        state: TensorFlow's configuration as it is now.

    Returns:
        The SetupPlan: the calls to make and the Setting each one reports. Statuses are "applied",
        "unchanged" or "not_applicable"; "too_late" is decided when applying.

    Raises:
        RuntimeSetupError: the request cannot be applied on this hardware (a GPU index that does
            not exist, more memory than the GPU has, memory growth together with a limit).
    """
    plan = SetupPlan()
    selected = _decide_devices(plan, request, hardware, state)
    _decide_memory(plan, request, hardware, state, selected)
    _decide_threads(plan, request, hardware, state)
    _decide_precision(plan, request, hardware, state, selected)
    _decide_jit(plan, request, hardware, state, selected)
    _decide_determinism(plan, request, state)
    _check_state_conflicts(plan, state)
    return plan


def _record(
    plan: SetupPlan, request: Request, name: str, applied: JsonValue, status: Status, reason: str
) -> None:
    plan.settings[name] = Setting(
        name=name,
        requested=_jsonable(request.get(name)),
        source=request.sources.get(name, "default"),
        applied=applied,
        status=status,
        reason=reason,
    )


def _decide_devices(
    plan: SetupPlan, request: Request, hw: Hardware, state: RuntimeState
) -> tuple[GpuFacts, ...]:
    """Record the devices setting; return the GPUs that will be visible."""
    wanted = request.get("devices")
    if wanted is None:
        selected = tuple(g for g in hw.gpus if g.index in state.visible_gpus)
        reason = "TensorFlow's default: every GPU it sees is visible" if hw.gpus else _no_gpu(hw)
        _record(plan, request, "devices", _names(selected), "unchanged", reason)
        return selected
    if not hw.gpus and wanted in ("all", "none"):
        _record(plan, request, "devices", [], "not_applicable", "not applied: " + _no_gpu(hw))
        return ()
    if wanted == "all":
        selected = hw.gpus
    elif wanted == "none":
        selected = ()
    else:
        selected = tuple(_gpu_by_index(hw, wanted, i) for i in wanted)
    plan.visible_gpus = tuple(g.index for g in selected)
    reason = (
        f"visible: {', '.join(_names(selected))}"
        if selected
        else "GPUs hidden: TensorFlow runs on the CPU"
    )
    _record(plan, request, "devices", _names(selected), "applied", reason)
    return selected


def _gpu_by_index(hw: Hardware, wanted: tuple[int, ...], index: int) -> GpuFacts:
    for gpu in hw.gpus:
        if gpu.index == index:
            return gpu
    exist = ", ".join(str(g.index) for g in hw.gpus)
    fix = "pass indices of tf.config.list_physical_devices('GPU'), 'all' or 'none'"
    if not hw.gpus and hw.nvml_gpus:
        fix = (
            f"NVML reports {len(hw.nvml_gpus)} GPU(s) but this TensorFlow sees none: "
            "run 'tfaccel doctor' to find out why"
        )
    raise RuntimeSetupError(
        f"GPU {shown(index)} does not exist",
        expected=f"one of the GPUs TensorFlow sees: {exist}" if exist else "none: no GPU is seen",
        received=f"devices={shown(list(wanted))}",
        fix=fix,
    )


def _decide_memory(
    plan: SetupPlan,
    request: Request,
    hw: Hardware,
    state: RuntimeState,
    selected: tuple[GpuFacts, ...],
) -> None:
    """Record the memory and logical_devices settings: growth, limits, splits."""
    memory, split = request.get("memory"), request.get("logical_devices")
    growth = memory == "growth" or request.env_growth
    if memory not in (None, "growth") and request.env_growth:
        raise _growth_and_limit(
            "TF_FORCE_GPU_ALLOW_GROWTH=true and a memory limit",
            f"memory={memory!r} with TF_FORCE_GPU_ALLOW_GROWTH=true",
            "drop the limit, or unset TF_FORCE_GPU_ALLOW_GROWTH",
        )
    scope = selected if hw.gpus else hw.nvml_gpus
    limits = {g.key: _limit_mib(memory, g, strict=g in selected) for g in scope}
    split_gpu = selected[0] if selected and split is not None else None
    if split_gpu is not None and growth:
        raise _growth_and_limit(
            f"logical_devices={split} on {split_gpu.key} (each logical GPU needs a memory limit) "
            "and memory growth",
            f"logical_devices={split}, memory growth "
            + ("from TF_FORCE_GPU_ALLOW_GROWTH" if request.env_growth else "requested"),
            "drop memory='growth' (give a limit in MiB or a fraction instead), or drop "
            "logical_devices",
        )
    for gpu in selected:
        if memory == "growth":
            plan.growth += (gpu.key,)
        elif limits.get(gpu.key) is not None:
            _set_virtual(plan, gpu.key, (limits[gpu.key],), {"memory"})
    _record_memory(plan, request, hw, state, selected, limits)
    _decide_split(plan, request, state, selected, split_gpu, limits)


def _limit_mib(memory: Any, gpu: GpuFacts, *, strict: bool) -> int | None:
    """The limit in MiB that ``memory`` asks for on ``gpu``; checks it fits."""
    if memory is None or memory == "growth":
        return None
    total = gpu.memory_total_mib
    if isinstance(memory, float):
        if total is None:
            if not strict:
                return None
            raise RuntimeSetupError(
                f"The total memory of {gpu.key} is unknown, so memory={memory} (a fraction) "
                "cannot be turned into a limit",
                expected="a GPU whose memory NVML reports, or a limit in MiB",
                received=f"memory={memory}",
                fix="pass the limit in MiB, e.g. memory=4096",
            )
        return max(1, int(total * memory))
    if total is not None and memory > total:
        raise RuntimeSetupError(
            f"memory={shown(memory)} MiB is more than {gpu.key} has",
            expected=f"at most {total} MiB ({gpu.name or 'GPU'} {gpu.key})",
            received=f"memory={shown(memory)}",
            fix=f"pass a limit <= {total}, or a fraction such as memory=0.5",
        )
    return int(memory)


def _record_memory(
    plan: SetupPlan,
    request: Request,
    hw: Hardware,
    state: RuntimeState,
    selected: tuple[GpuFacts, ...],
    limits: Mapping[str, int | None],
) -> None:
    memory = request.get("memory")
    if memory is None:
        current = memory_in_effect(state, selected)
        if not selected:
            reason = _no_gpu(hw) if not hw.gpus else "no GPU is visible"
        elif request.env_growth:
            reason = "memory growth from TF_FORCE_GPU_ALLOW_GROWTH=true"
        else:
            reason = "TensorFlow's default: it maps nearly all GPU memory at start"
        _record(plan, request, "memory", current, "unchanged", reason)
        return
    if not selected:
        why = _no_gpu(hw) if not hw.gpus else "GPUs hidden by devices='none'"
        _record(plan, request, "memory", None, "not_applicable", f"not applied: {why}")
        return
    if memory == "growth":
        reason = (
            f"memory growth on {', '.join(plan.growth)}: TensorFlow takes GPU memory as it "
            "needs it instead of mapping nearly all of it at start"
        )
        _record(plan, request, "memory", {k: "growth" for k in plan.growth}, "applied", reason)
        return
    applied = {g.key: limits[g.key] for g in selected}
    parts = [f"{g.key} limited to {limits[g.key]} MiB" + _of_total(g) for g in selected]
    _record(plan, request, "memory", applied, "applied", "; ".join(parts))


def _decide_split(
    plan: SetupPlan,
    request: Request,
    state: RuntimeState,
    selected: tuple[GpuFacts, ...],
    split_gpu: GpuFacts | None,
    limits: Mapping[str, int | None],
) -> None:
    count = request.get("logical_devices")
    key = split_gpu.key if split_gpu is not None else "CPU:0"
    if count is None:
        current_key = selected[0].key if selected else "CPU:0"
        current = len(state.virtual.get(current_key) or (None,))
        reason = f"{current_key}: {current} logical device(s), as configured"
        _record(plan, request, "logical_devices", current, "unchanged", reason)
        return
    if split_gpu is None:
        _set_virtual(plan, key, (None,) * count, {"logical_devices"})
        names = (
            ", ".join(f"CPU:{i}" for i in range(count))
            if count <= 4
            else f"CPU:0 to CPU:{count - 1}"
        )
        reason = f"CPU:0 split into {count} logical device(s) ({names})"
        _record(plan, request, "logical_devices", count, "applied", reason)
        return
    base, owners = limits.get(key), {"logical_devices", "memory"}
    if base is None:
        base, owners = _default_split_base(split_gpu, count), {"logical_devices"}
    if base < count:
        raise RuntimeSetupError(
            f"logical_devices={count} on {key} leaves less than 1 MiB of memory to each "
            "logical GPU (TensorFlow's memory limits are whole MiB)",
            expected=f"at most {base} logical GPUs for a limit of {base} MiB",
            received=f"logical_devices={count} over a limit of {base} MiB",
            fix="pass fewer logical devices, or a larger memory limit",
        )
    per_device = base // count
    _set_virtual(plan, key, (per_device,) * count, owners)
    reason = f"{key} split into {count} logical GPU(s) of {per_device} MiB each"
    _record(plan, request, "logical_devices", count, "applied", reason)


def _default_split_base(gpu: GpuFacts, count: int) -> int:
    total = gpu.memory_total_mib
    if total is None:
        raise RuntimeSetupError(
            f"logical_devices={count} on {gpu.key} needs a memory limit per logical GPU, and "
            f"the total memory of {gpu.key} is unknown",
            expected="a memory limit in MiB",
            received=f"logical_devices={count}, memory not given",
            fix=f"pass memory=MiB for the whole GPU, e.g. memory={1024 * count}",
        )
    return int(total * DEFAULT_GPU_SHARE)


def _set_virtual(
    plan: SetupPlan, key: str, limits: tuple[int | None, ...], owners: set[str]
) -> None:
    plan.virtual[key] = limits
    plan.virtual_owners[key] = frozenset(owners)


def _growth_and_limit(what: str, received: str, fix: str) -> RuntimeSetupError:
    return RuntimeSetupError(
        f"Memory growth and a memory limit cannot be combined on one GPU: {what}",
        expected="either memory='growth' or a limit (MiB or fraction), not both",
        received=received,
        fix=fix,
    )


def _decide_threads(plan: SetupPlan, request: Request, hw: Hardware, state: RuntimeState) -> None:
    threads = request.get("threads")
    if threads is None:
        reason = "as configured (0 = TensorFlow chooses)"
        _record(plan, request, "threads", list(state.threads), "unchanged", reason)
        return
    intra, inter = threads
    plan.threads = (intra, inter)
    applied = [intra, inter if inter is not None else state.threads[1]]
    reason = f"{intra} intra-op thread(s) (inside one op)"
    reason += f", {inter} inter-op (ops in parallel)" if inter is not None else ""
    if hw.usable_cores is not None and intra > hw.usable_cores:
        reason += f"; more than the {hw.usable_cores} core(s) this process may use"
    _record(plan, request, "threads", applied, "applied", reason)


def _decide_precision(
    plan: SetupPlan, request: Request, hw: Hardware, state: RuntimeState, gpus: tuple[GpuFacts, ...]
) -> None:
    wanted = request.get("precision")
    if wanted is None:
        _record(plan, request, "precision", state.precision, "unchanged", "Keras policy as set")
        return
    if wanted == "auto" and hw.measured_precision is not None:
        policy, reason = hw.measured_precision, hw.measured_precision_reason
    elif wanted == "auto":
        fast = fast_precisions(gpus, hw.cpu_flags, tpu=hw.tpu_present)
        policy, reason = fast.best, f"{hw.measured_precision_reason}: {fast.reason}"
    else:
        policy, reason = wanted, "as requested"
        slow = precision_warning(policy, gpus, hw.cpu_flags, tpu=hw.tpu_present)
        plan.warnings += [slow] if slow else []
    if policy == "mixed_float16":
        plan.warnings += [f"mixed_float16: {text}" for text in request.model_dims]
    plan.precision = policy
    _record(plan, request, "precision", policy, "applied", reason)


def _decide_jit(
    plan: SetupPlan, request: Request, hw: Hardware, state: RuntimeState, gpus: tuple[GpuFacts, ...]
) -> None:
    wanted = request.get("jit")
    if wanted is None:
        _record(plan, request, "jit", state.jit, "unchanged", "XLA auto-clustering as set")
        return
    if wanted != "auto":
        reason = "as requested"
        if wanted and not gpus:
            reason += "; XLA on a CPU can be slower (3x on the reference CNN): measure it"
        plan.jit = bool(wanted)
    elif hw.measured_jit is not None:
        plan.jit, reason = hw.measured_jit, hw.measured_jit_reason
    elif gpus:
        plan.jit, reason = True, f"{hw.measured_jit_reason}: on for GPU"
    else:
        reason = f"{hw.measured_jit_reason}: off on CPU, where XLA is often slower"
        plan.jit = False
    _record(plan, request, "jit", plan.jit, "applied", reason)


def _decide_determinism(plan: SetupPlan, request: Request, state: RuntimeState) -> None:
    wanted, seed = request.get("deterministic"), request.get("seed")
    if wanted is None:
        _record(plan, request, "deterministic", state.deterministic, "unchanged", "as set")
    else:
        plan.deterministic = bool(wanted)
        reason = "op determinism " + ("on: deterministic kernels, slower" if wanted else "off")
        if wanted and seed is None:
            reason += "; pass seed= too, TensorFlow random ops need a seed under determinism"
        _record(plan, request, "deterministic", plan.deterministic, "applied", reason)
    if seed is None:
        _record(plan, request, "seed", None, "unchanged", "not set")
        return
    plan.seed = seed
    _record(plan, request, "seed", seed, "applied", "Python, NumPy and TensorFlow seeds set")


def _check_state_conflicts(plan: SetupPlan, state: RuntimeState) -> None:
    """Growth and a limit on one GPU, where one of them was set before ``setup()``."""
    for key in plan.growth:
        if state.virtual.get(key) and key not in plan.virtual:
            raise _growth_and_limit(
                f"{key} already has a memory limit or logical devices (set by an earlier "
                "tf.config.set_logical_device_configuration call)",
                "memory='growth'",
                "remove the earlier tf.config call, or pass a limit instead of growth",
            )
    for key in plan.virtual:
        if key.startswith("GPU:") and state.growth.get(key) and key not in plan.growth:
            raise _growth_and_limit(
                f"{key} already has memory growth on (set by an earlier "
                "tf.config.experimental.set_memory_growth call)",
                "a memory limit or logical devices",
                "remove the earlier set_memory_growth call, or pass memory='growth' alone",
            )


def memory_in_effect(state: RuntimeState, gpus: tuple[GpuFacts, ...]) -> dict[str, JsonValue]:
    current: dict[str, JsonValue] = {}
    for gpu in gpus:
        limits = state.virtual.get(gpu.key)
        if state.growth.get(gpu.key):
            current[gpu.key] = "growth"
        elif limits:
            current[gpu.key] = sum(limit or 0 for limit in limits)
    return current


def _of_total(gpu: GpuFacts) -> str:
    return f" of {gpu.memory_total_mib} MiB" if gpu.memory_total_mib is not None else ""


def _names(gpus: tuple[GpuFacts, ...]) -> list[str]:
    return [g.key for g in gpus]


def _no_gpu(hw: Hardware) -> str:
    if hw.nvml_gpus:
        return f"TensorFlow sees no GPU although NVML reports {len(hw.nvml_gpus)} (tfaccel doctor)"
    return "no GPU"


def _jsonable(value: Any) -> JsonValue:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value
