"""Set the TensorFlow runtime up for this machine: devices, memory, precision, XLA, threads.

``setup()`` decides first and applies after. Every argument and every ``TFACCEL_*`` variable
is checked, against the hardware too, before TensorFlow is touched: a bad value raises and
changes nothing. The decision is a pure function of three plain values (the request, the
hardware facts from :mod:`tfaccel.probe` and TensorFlow's current configuration), so each rule
is tested by building those by hand. What was applied, what was left as it was, and why, comes
back as a :class:`RuntimeConfig`.

TensorFlow fixes the devices, their memory, logical devices and thread pools when its runtime
starts (the first op, or ``tf.config.list_logical_devices()``). ``setup()`` called later applies
what can still change (precision, XLA, determinism, seed) and raises :class:`RuntimeTooLateError`
for the rest.

Example:
    >>> import tfaccel
    >>> config = tfaccel.setup(precision="auto", memory="growth", jit="auto")
    >>> print(config)                     # one line per setting: status, value, reason
    >>> config["precision"].applied       # 'mixed_bfloat16' on a CPU with AVX512_BF16
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from tfaccel.errors import RuntimeSetupError, TfaccelError, UsageError

if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "ENV_VARS",
    "FIXED_AT_START",
    "PRECISIONS",
    "SETTINGS",
    "GpuFacts",
    "Hardware",
    "Plan",
    "Request",
    "RuntimeConfig",
    "RuntimeState",
    "RuntimeTooLateError",
    "Setting",
    "check_model_dims",
    "decide",
    "device",
    "parse_setting",
    "setup",
]

SETTINGS = (
    "devices",
    "memory",
    "logical_devices",
    "threads",
    "precision",
    "jit",
    "deterministic",
    "seed",
)
"""The settings ``setup()`` takes, in the order a RuntimeConfig lists them."""

FIXED_AT_START = frozenset({"devices", "memory", "logical_devices", "threads"})
"""Settings TensorFlow fixes when its runtime starts; the others can change at any time."""

ENV_VARS = {name: "TFACCEL_" + name.upper() for name in SETTINGS}
"""The environment variable of each setting (``TFACCEL_PRECISION``...); arguments win over them."""

PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")

Status = Literal["applied", "unchanged", "not_applicable", "too_late"]
JsonValue: TypeAlias = (
    "bool | int | float | str | Sequence[JsonValue] | Mapping[str, JsonValue] | None"
)
DevicesValue: TypeAlias = 'Literal["all", "none"] | tuple[int, ...]'
MemoryValue: TypeAlias = 'Literal["growth"] | int | float'
JitValue: TypeAlias = 'Literal["auto"] | bool'
ThreadsValue: TypeAlias = "tuple[int, int | None]"

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
MIN_FP16_COMPUTE_CAPABILITY = 7.0
DEFAULT_GPU_SHARE = 0.9  # of total memory split across logical GPUs when no limit is given
REFERENCE_MODEL = "reference_cnn"  # the benchmark whose XLA result stands in for any model
_MIB = 1024 * 1024


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Setting:
    """What ``setup()`` did with one setting.

    Attributes:
        name: the setting ("precision").
        requested: the value asked for, None when neither an argument nor a variable set it.
        source: where the request came from: "argument", a variable name, or "default".
        applied: the value in effect afterwards (for "too_late": the one TensorFlow kept).
        status: "applied", "unchanged" (not requested: left as it was), "not_applicable"
            (requested, but there is nothing to apply it to, such as GPU memory without a GPU)
            or "too_late" (TensorFlow's runtime had started).
        reason: why, in one sentence.
    """

    name: str
    requested: JsonValue
    source: str
    applied: JsonValue
    status: Status
    reason: str


@dataclass(frozen=True)
class RuntimeConfig:
    """What ``setup()`` applied, left as it was, and why, per setting.

    Printable (``str(config)`` is a table) and JSON-serialisable (``config.to_json()``).
    ``setup()`` called again with the same arguments returns an equal RuntimeConfig.

    Example:
        >>> config = tfaccel.setup(precision="auto")
        >>> config["precision"].status, config["precision"].reason
        ('applied', 'this CPU has avx512_bf16, amx_bf16: ...')
    """

    settings: tuple[Setting, ...]
    warnings: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> Setting:
        for setting in self.settings:
            if setting.name == name:
                return setting
        raise KeyError(name)

    @property
    def too_late(self) -> list[str]:
        """The settings that could not change because the runtime had started."""
        return [s.name for s in self.settings if s.status == "too_late"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"settings": {name: {...}}, "warnings": [...]}``."""
        return {
            "settings": {s.name: dataclasses.asdict(s) for s in self.settings},
            "warnings": list(self.warnings),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def __str__(self) -> str:
        rows = [("setting", "status", "value", "why")]
        rows += [(s.name, s.status, _show(s.applied), s.reason) for s in self.settings]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = ["tfaccel runtime setup:"]
        for row in rows:
            cells = [row[i].ljust(widths[i]) for i in range(3)]
            lines.append("  " + "  ".join([*cells, row[3]]).rstrip())
        lines += [f"  warning: {text}" for text in self.warnings]
        return "\n".join(lines)


class RuntimeTooLateError(RuntimeSetupError):
    """``setup()`` ran after TensorFlow's runtime started, so some settings could not change.

    The settings that can still change were applied before this was raised; ``config`` holds
    the full outcome (statuses "too_late" for the others).

    Attributes:
        config: the RuntimeConfig of the call.
    """

    def __init__(self, config: RuntimeConfig) -> None:
        self.config = config
        applied = [s.name for s in config.settings if s.status == "applied"]
        super().__init__(
            "TensorFlow's runtime had already started, so "
            f"{', '.join(config.too_late)} can no longer change",
            expected=(
                "tfaccel.setup() called before any TensorFlow op, model, or "
                "tf.config.list_logical_devices() (each of these starts the runtime)"
            ),
            received=f"a started runtime; applied anyway: {', '.join(applied) or 'nothing'}",
            fix=(
                "call tfaccel.setup(...) first, right after the imports; or set the "
                "TFACCEL_* variables, or start the script with 'tfaccel run [OPTIONS] SCRIPT'"
            ),
        )


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Request:
    """The parsed, validated request: a value per setting (None: not requested).

    Attributes:
        values: setting name -> parsed value (see ``parse_setting``).
        sources: setting name -> "argument", the variable it came from, or "default".
        env_growth: TF_FORCE_GPU_ALLOW_GROWTH is "true" (TensorFlow's own memory growth switch).
        cuda_visible_devices: CUDA_VISIBLE_DEVICES as set, to match TensorFlow's GPUs to NVML's.
        model_name: the model's name, for the measured-XLA lookup.
        model_dims: dimension problems of the model (see ``check_model_dims``).
    """

    values: Mapping[str, Any]
    sources: Mapping[str, str]
    env_growth: bool = False
    cuda_visible_devices: str | None = None
    model_name: str | None = None
    model_dims: tuple[str, ...] = ()

    def get(self, name: str) -> Any:
        return self.values.get(name)


@dataclass(frozen=True)
class GpuFacts:
    """One GPU: its TensorFlow index and what NVML or TensorFlow report about it."""

    index: int
    name: str = ""
    compute_capability: str | None = None  # "8.0"
    memory_total_bytes: int | None = None
    uuid: str | None = None

    @property
    def key(self) -> str:
        return f"GPU:{self.index}"

    @property
    def memory_total_mib(self) -> int | None:
        return None if self.memory_total_bytes is None else self.memory_total_bytes // _MIB


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
    measured_jit_reason: str = "no measurement for this machine in the results store"
    measured_precision: str | None = None
    measured_precision_reason: str = "no measurement for this machine in the results store"


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
class Plan:
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


# --------------------------------------------------------------------------- parsing


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

# setting -> (what it is, the values it accepts, an example as Python, an example as text)
_FORMS: dict[str, tuple[str, str, str, str]] = {
    "devices": (
        "GPU selection",
        "GPU indices (0, [0, 1] or the text '0,1'), 'all' or 'none'",
        "[0, 1]",
        "0,1",
    ),
    "memory": (
        "GPU memory setting",
        "'growth', a limit in MiB (an integer > 0, e.g. 4096) or a fraction of the GPU's "
        "memory in (0, 1] (e.g. 0.5)",
        "'growth'",
        "growth",
    ),
    "precision": ("precision", "one of " + ", ".join(PRECISIONS), "'auto'", "auto"),
    "jit": ("XLA setting", "'auto', true or false", "'auto'", "auto"),
    "threads": (
        "thread count",
        "an integer >= 1 (intra-op threads) or two of them, intra and inter ('4,2')",
        "(4, 2)",
        "4,2",
    ),
    "logical_devices": ("logical device count", "an integer >= 1", "2", "2"),
    "deterministic": ("determinism switch", "true or false", "True", "true"),
    "seed": ("seed", "an integer in [0, 2**32)", "42", "42"),
}


def parse_setting(name: str, value: object, *, source: str | None = None) -> Any:
    """Parse and check one setting, given as a Python value or as text (variable, option).

    Args:
        name: a name from ``SETTINGS``.
        value: the value; text forms are those of the ``TFACCEL_*`` variables
            ("0,1", "growth", "4096", "0.5", "auto", "true", "4,2").
        source: how to name the value in an error ("--memory", "TFACCEL_MEMORY");
            default: the argument ``name=``.

    Returns:
        The normalised value: devices -> "all" | "none" | tuple of indices; memory ->
        "growth" | MiB (int) | fraction (float); jit -> "auto" | bool; threads ->
        (intra, inter or None); the others -> str, int or bool.

    Raises:
        UsageError: the value is not one the setting accepts.

    Example:
        >>> parse_setting("threads", "4,2", source="TFACCEL_THREADS")
        (4, 2)
    """
    parser = _PARSERS.get(name)
    if parser is None:
        raise UsageError(
            f"{name!r} is not a tfaccel.setup() setting",
            expected="one of " + ", ".join(SETTINGS),
            received=repr(name),
        )
    parsed = parser(value.strip() if isinstance(value, str) else value)
    if parsed is None:
        raise _invalid(name, value, source)
    return parsed


def _invalid(name: str, value: object, source: str | None) -> UsageError:
    noun, expected, example, text_example = _FORMS[name]
    if source is None:
        what, fix = f"The argument {name}={value!r} is not a valid {noun}", f"pass {name}={example}"
    elif source.startswith("--"):
        what, fix = f"{source} {value} is not a valid {noun}", f"pass {source} {text_example}"
    else:
        what = f"The environment variable {source}={value!r} is not a valid {noun}"
        fix = f"set {source}={text_example}, or unset it"
    return UsageError(what, expected=expected, received=repr(value), fix=fix)


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    return None


def _parse_devices(value: object) -> DevicesValue | None:
    if isinstance(value, str) and value.lower() in ("all", "none"):
        return "all" if value.lower() == "all" else "none"
    if isinstance(value, str):
        items: list[object] = [part.strip() for part in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    indices = [_int(item) for item in items]
    if not indices or any(i is None or i < 0 for i in indices):
        return None
    return tuple(sorted({i for i in indices if i is not None}))


def _parse_memory(value: object) -> MemoryValue | None:
    if isinstance(value, str):
        if value.lower() == "growth":
            return "growth"
        text = value
        number: object = _int(text)
        if number is None:
            try:
                number = float(text)
            except ValueError:
                return None
        value = number
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float):
        return value if 0.0 < value <= 1.0 and math.isfinite(value) else None
    return None


def _parse_precision(value: object) -> str | None:
    return value if isinstance(value, str) and value in PRECISIONS else None


def _parse_jit(value: object) -> JitValue | None:
    if isinstance(value, str) and value.lower() == "auto":
        return "auto"
    return _bool(value)


def _parse_threads(value: object) -> ThreadsValue | None:
    if isinstance(value, str) and "," in value:
        value = tuple(part.strip() for part in value.split(","))
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            return None
        intra, inter = _int(value[0]), _int(value[1])
        if value[1] is None and intra is not None and intra >= 1:
            return (intra, None)  # the normalised form of a single count
        if intra is None or inter is None or intra < 1 or inter < 1:
            return None
        return (intra, inter)
    count = _int(value)
    return (count, None) if count is not None and count >= 1 else None


def _parse_logical_devices(value: object) -> int | None:
    count = _int(value)
    return count if count is not None and count >= 1 else None


def _parse_seed(value: object) -> int | None:
    seed = _int(value)
    return seed if seed is not None and 0 <= seed < 2**32 else None


_PARSERS: dict[str, Any] = {
    "devices": _parse_devices,
    "memory": _parse_memory,
    "precision": _parse_precision,
    "jit": _parse_jit,
    "threads": _parse_threads,
    "logical_devices": _parse_logical_devices,
    "deterministic": _bool,
    "seed": _parse_seed,
}


def _build_request(arguments: Mapping[str, object], env: Mapping[str, str], model: Any) -> Request:
    """Parse the arguments, fill what they leave unset from the TFACCEL_* variables."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in SETTINGS:
        var = ENV_VARS[name]
        if arguments.get(name) is not None:
            values[name], sources[name] = parse_setting(name, arguments[name]), "argument"
        elif env.get(var, "").strip():
            values[name], sources[name] = parse_setting(name, env[var], source=var), var
        else:
            values[name], sources[name] = None, "default"
    growth = env.get("TF_FORCE_GPU_ALLOW_GROWTH", "").strip().lower() == "true"
    return Request(
        values=values,
        sources=sources,
        env_growth=growth,
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        model_name=getattr(model, "name", None) if model is not None else None,
        model_dims=tuple(check_model_dims(model)) if model is not None else (),
    )


# --------------------------------------------------------------------------- deciding


def decide(request: Request, hardware: Hardware, state: RuntimeState) -> Plan:
    """Decide every setting: pure, no TensorFlow; the core of ``setup()``.

    Args:
        request: the parsed request.
        hardware: the hardware facts.
        state: TensorFlow's configuration as it is now.

    Returns:
        The Plan: the calls to make and the Setting each one reports. Statuses are "applied",
        "unchanged" or "not_applicable"; "too_late" is decided when applying.

    Raises:
        RuntimeSetupError: the request cannot be applied on this hardware (a GPU index that does
            not exist, more memory than the GPU has, memory growth together with a limit).
    """
    plan = Plan()
    selected = _decide_devices(plan, request, hardware, state)
    _decide_memory(plan, request, hardware, state, selected)
    _decide_threads(plan, request, hardware, state)
    _decide_precision(plan, request, hardware, state, selected)
    _decide_jit(plan, request, hardware, state, selected)
    _decide_determinism(plan, request, state)
    _check_state_conflicts(plan, state)
    return plan


def _record(
    plan: Plan, request: Request, name: str, applied: JsonValue, status: Status, reason: str
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
    plan: Plan, request: Request, hw: Hardware, state: RuntimeState
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
        f"GPU {index} does not exist",
        expected=f"one of the GPUs TensorFlow sees: {exist}" if exist else "none: no GPU is seen",
        received=f"devices={list(wanted)}",
        fix=fix,
    )


def _decide_memory(
    plan: Plan, request: Request, hw: Hardware, state: RuntimeState, selected: tuple[GpuFacts, ...]
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
            f"memory={memory} MiB is more than {gpu.key} has",
            expected=f"at most {total} MiB ({gpu.name or 'GPU'} {gpu.key})",
            received=f"memory={memory}",
            fix=f"pass a limit <= {total}, or a fraction such as memory=0.5",
        )
    return int(memory)


def _record_memory(
    plan: Plan,
    request: Request,
    hw: Hardware,
    state: RuntimeState,
    selected: tuple[GpuFacts, ...],
    limits: Mapping[str, int | None],
) -> None:
    memory = request.get("memory")
    if memory is None:
        current = _memory_in_effect(state, selected)
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
    plan: Plan,
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
        names = ", ".join(f"CPU:{i}" for i in range(count))
        reason = f"CPU:0 split into {count} logical device(s) ({names})"
        _record(plan, request, "logical_devices", count, "applied", reason)
        return
    base, owners = limits.get(key), {"logical_devices", "memory"}
    if base is None:
        base, owners = _default_split_base(split_gpu, count), {"logical_devices"}
    per_device = max(1, base // count)
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


def _set_virtual(plan: Plan, key: str, limits: tuple[int | None, ...], owners: set[str]) -> None:
    plan.virtual[key] = limits
    plan.virtual_owners[key] = frozenset(owners)


def _growth_and_limit(what: str, received: str, fix: str) -> RuntimeSetupError:
    return RuntimeSetupError(
        f"Memory growth and a memory limit cannot be combined on one GPU: {what}",
        expected="either memory='growth' or a limit (MiB or fraction), not both",
        received=received,
        fix=fix,
    )


def _decide_threads(plan: Plan, request: Request, hw: Hardware, state: RuntimeState) -> None:
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
    plan: Plan, request: Request, hw: Hardware, state: RuntimeState, gpus: tuple[GpuFacts, ...]
) -> None:
    wanted = request.get("precision")
    if wanted is None:
        _record(plan, request, "precision", state.precision, "unchanged", "Keras policy as set")
        return
    if wanted == "auto" and hw.measured_precision is not None:
        policy, reason = hw.measured_precision, hw.measured_precision_reason
    elif wanted == "auto":
        policy, reason = _auto_precision(hw, gpus)
    else:
        policy, reason = wanted, "as requested"
        plan.warnings += _precision_warnings(policy, hw, gpus)
    if policy == "mixed_float16":
        plan.warnings += [f"mixed_float16: {text}" for text in request.model_dims]
    plan.precision = policy
    _record(plan, request, "precision", policy, "applied", reason)


def _auto_precision(hw: Hardware, gpus: tuple[GpuFacts, ...]) -> tuple[str, str]:
    if gpus:
        slow = [g for g in gpus if _cc(g) is None or (_cc(g) or 0.0) < MIN_FP16_COMPUTE_CAPABILITY]
        if not slow:
            ccs = ", ".join(f"{g.key} {g.compute_capability}" for g in gpus)
            return "mixed_float16", f"compute capability >= 7.0 ({ccs}): tensor cores for float16"
        ccs = ", ".join(f"{g.key} {g.compute_capability or 'unknown'}" for g in slow)
        return "float32", f"compute capability below 7.0 or unknown ({ccs}): no tensor cores"
    if hw.tpu_present:
        return "mixed_bfloat16", "a TPU is attached: TPUs compute in bfloat16"
    flags = [f for f in BF16_CPU_FLAGS if f in hw.cpu_flags]
    if flags:
        return "mixed_bfloat16", f"this CPU has {', '.join(flags)}: bfloat16 matrix instructions"
    return "float32", "no GPU, no TPU, and the CPU lacks avx512_bf16/amx_bf16"


def _precision_warnings(policy: str, hw: Hardware, gpus: tuple[GpuFacts, ...]) -> list[str]:
    if policy == "mixed_float16" and not gpus:
        return ["mixed_float16 without a GPU: float16 math on a CPU is much slower than float32"]
    if policy == "mixed_float16":
        old = [g.key for g in gpus if (_cc(g) or 0.0) < MIN_FP16_COMPUTE_CAPABILITY]
        if old:
            return [f"mixed_float16 on {', '.join(old)} (compute capability < 7.0): no speed-up"]
    bf16_cpu = any(f in hw.cpu_flags for f in BF16_CPU_FLAGS)
    if policy == "mixed_bfloat16" and not gpus and not hw.tpu_present and not bf16_cpu:
        return ["mixed_bfloat16 on a CPU without avx512_bf16/amx_bf16: emulated, slower"]
    return []


def _decide_jit(
    plan: Plan, request: Request, hw: Hardware, state: RuntimeState, gpus: tuple[GpuFacts, ...]
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
        plan.jit, reason = True, f"on for GPU ({hw.measured_jit_reason})"
    else:
        reason = f"off on CPU, where XLA is often slower ({hw.measured_jit_reason})"
        plan.jit = False
    _record(plan, request, "jit", plan.jit, "applied", reason)


def _decide_determinism(plan: Plan, request: Request, state: RuntimeState) -> None:
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


def _check_state_conflicts(plan: Plan, state: RuntimeState) -> None:
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


def _memory_in_effect(state: RuntimeState, gpus: tuple[GpuFacts, ...]) -> dict[str, JsonValue]:
    current: dict[str, JsonValue] = {}
    for gpu in gpus:
        limits = state.virtual.get(gpu.key)
        if state.growth.get(gpu.key):
            current[gpu.key] = "growth"
        elif limits:
            current[gpu.key] = sum(limit or 0 for limit in limits)
    return current


def _cc(gpu: GpuFacts) -> float | None:
    try:
        return float(gpu.compute_capability) if gpu.compute_capability else None
    except ValueError:
        return None


def _of_total(gpu: GpuFacts) -> str:
    return f" of {gpu.memory_total_mib} MiB" if gpu.memory_total_mib is not None else ""


def _names(gpus: tuple[GpuFacts, ...]) -> list[str]:
    return [g.key for g in gpus]


def _no_gpu(hw: Hardware) -> str:
    if hw.nvml_gpus:
        return f"TensorFlow sees no GPU although NVML reports {len(hw.nvml_gpus)} (tfaccel doctor)"
    return "no GPU"


# --------------------------------------------------------------------------- the model


def check_model_dims(model: Any) -> list[str]:
    """List a Keras model's layers whose dimensions are not multiples of 8.

    Tensor cores run float16 matrix math fastest when the input and output features of a
    layer (units, filters, channels) are multiples of 8; ``setup(precision=..., model=model)``
    warns with these messages when the policy is mixed_float16.

    Args:
        model: a built Keras model (or layer).

    Returns:
        One message per layer with such a dimension; empty when all are multiples of 8.

    Example:
        >>> model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(10)])
        >>> check_model_dims(model)
        ["layer 'dense' (Dense): input features 20, output features 10 are not multiples of 8"]
    """
    messages = []
    for layer in _layers(model):
        weights = getattr(layer, "kernel", None)
        if weights is None:
            weights = getattr(layer, "embeddings", None)
        shape = tuple(getattr(weights, "shape", ()))
        if len(shape) < 2:
            continue
        dims = {"input features": shape[-2], "output features": shape[-1]}
        bad = [f"{what} {size}" for what, size in dims.items() if int(size) % 8]
        if bad:
            name = f"layer {layer.name!r} ({type(layer).__name__})"
            messages.append(f"{name}: {', '.join(bad)} not multiples of 8")
    return messages


def _layers(model: Any) -> list[Any]:
    found = [model]
    for layer in getattr(model, "layers", None) or []:
        found += _layers(layer) if layer is not model else []
    return found


# --------------------------------------------------------------------------- TensorFlow side


def setup(
    *,
    devices: str | int | Sequence[int] | None = None,
    memory: str | int | float | None = None,
    precision: str | None = None,
    jit: str | bool | None = None,
    threads: str | int | tuple[int, int] | None = None,
    logical_devices: str | int | None = None,
    deterministic: str | bool | None = None,
    seed: str | int | None = None,
    model: Any = None,
    environ: Mapping[str, str] | None = None,
) -> RuntimeConfig:
    """Configure TensorFlow for this machine, all settings checked before any is applied.

    Call it first, before any TensorFlow op or model. Each argument left as None is taken from
    its ``TFACCEL_*`` variable (``TFACCEL_MEMORY=growth``...), else left as TensorFlow has it.

    Args:
        devices: the GPUs to use: an index, a list of indices (TensorFlow's numbering, as in
            ``tf.config.list_physical_devices('GPU')``), "all", or "none" (CPU only).
        memory: "growth" (take memory as needed), a limit per GPU in MiB (int), or a fraction
            of each GPU's memory (float in (0, 1]). Not combinable with growth from
            TF_FORCE_GPU_ALLOW_GROWTH. Without a GPU it is recorded as not applicable.
        precision: "auto", "float32", "mixed_float16" or "mixed_bfloat16" (Keras global
            policy). Auto: the fastest precision measured for this machine and model in the
            results store (``tfaccel tune``) when there is one; else mixed_float16 on GPUs of
            compute capability >= 7.0, mixed_bfloat16 on TPUs and on CPUs with avx512_bf16 or
            amx_bf16, float32 otherwise.
        jit: XLA auto-clustering (``tf.config.optimizer.set_jit``): True, False, or "auto": the
            measured result for this machine and model when the results store has one, else on
            for GPU and off on CPU.
        threads: intra-op threads (int), or (intra, inter).
        logical_devices: split the first visible GPU (or the CPU when none) into this many
            logical devices, to run multi-device code (MirroredStrategy) on one device. On a GPU
            each gets an equal share of ``memory`` (default: 90% of the GPU).
        deterministic: True turns op determinism on (``enable_op_determinism``), False off.
        seed: seed Python, NumPy and TensorFlow (``keras.utils.set_random_seed``).
        model: a built Keras model: names the model for the XLA measurement lookup, and under
            mixed_float16 warns about dimensions that are not multiples of 8.
        environ: the environment to read TFACCEL_*, TF_FORCE_GPU_ALLOW_GROWTH and
            CUDA_VISIBLE_DEVICES from (default ``os.environ``; TensorFlow itself always reads
            ``os.environ``).

    Returns:
        A RuntimeConfig: per setting, requested and applied values, status and reason.
        Warnings (slow precision choices, model dimensions) are also issued with
        ``warnings.warn``.

    Raises:
        UsageError: an argument or TFACCEL_* variable has a value the setting does not accept.
        RuntimeSetupError: the request does not fit this machine (GPU index, memory size,
            growth with a limit). Nothing was applied.
        RuntimeTooLateError: the runtime had started and a device, memory, logical-device or
            thread setting would change. The others were applied; ``err.config`` has the rest.

    Example:
        >>> import tfaccel
        >>> config = tfaccel.setup(devices="all", memory="growth", precision="auto", jit="auto")
        >>> print(config)
    """
    from tfaccel.probe import system

    arguments = {
        "devices": devices,
        "memory": memory,
        "precision": precision,
        "jit": jit,
        "threads": threads,
        "logical_devices": logical_devices,
        "deterministic": deterministic,
        "seed": seed,
    }
    request = _build_request(arguments, system.collect_env(environ), model)
    tf = importlib.import_module("tensorflow")
    state = _read_state(tf)
    plan = decide(request, _read_hardware(tf, request), state)
    too_late = _apply(tf, plan, state)
    config = _config(plan, state, too_late)
    for text in config.warnings:
        warnings.warn(text, RuntimeWarning, stacklevel=2)
    if too_late:
        raise RuntimeTooLateError(config)
    return config


def _read_hardware(tf: ModuleType, request: Request) -> Hardware:
    """Hardware facts: the probe layer, plus the GPUs TensorFlow lists (no runtime start)."""
    from tfaccel.probe import cpu as probe_cpu
    from tfaccel.probe import nvml as probe_nvml
    from tfaccel.probe import tpu as probe_tpu

    cpu, nvml = probe_cpu.collect(), probe_nvml.collect()
    nvml_gpus = tuple(
        GpuFacts(g.index, g.name, g.compute_capability, g.memory_total_bytes, g.uuid)
        for g in nvml.gpus
    )
    gpus = tuple(
        _tf_gpu(tf, dev, nvml_gpus, request.cuda_visible_devices)
        for dev in tf.config.list_physical_devices("GPU")
    )
    device = "gpu:0" if gpus and request.get("devices") != "none" else "cpu"
    measured, measured_reason = _measured_jit(request, device)
    precision, precision_reason = _measured_precision(request, device)
    return Hardware(
        gpus=gpus,
        nvml_gpus=nvml_gpus,
        cpu_flags=frozenset(cpu.flags),
        tpu_present=probe_tpu.collect().present,
        usable_cores=cpu.usable_cores,
        measured_jit=measured,
        measured_jit_reason=measured_reason,
        measured_precision=precision,
        measured_precision_reason=precision_reason,
    )


def _tf_gpu(
    tf: ModuleType, dev: Any, nvml_gpus: tuple[GpuFacts, ...], cuda_visible: str | None
) -> GpuFacts:
    index = _device_index(dev.name)
    details = tf.config.experimental.get_device_details(dev)
    name = str(details.get("device_name", ""))
    cc = details.get("compute_capability")
    match = _match_nvml(index, name, nvml_gpus, cuda_visible) or GpuFacts(index)
    return GpuFacts(
        index=index,
        name=name or match.name,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else match.compute_capability,
        memory_total_bytes=match.memory_total_bytes,
        uuid=match.uuid,
    )


def _match_nvml(
    index: int, name: str, nvml_gpus: tuple[GpuFacts, ...], cuda_visible: str | None
) -> GpuFacts | None:
    """The NVML GPU behind TensorFlow's GPU ``index`` (CUDA_VISIBLE_DEVICES renumbers them)."""
    entries = [e.strip() for e in (cuda_visible or "").split(",") if e.strip()]
    entry = entries[index] if index < len(entries) else str(index)
    if entry.isdigit():
        match = next((g for g in nvml_gpus if g.index == int(entry)), None)
    else:
        match = next((g for g in nvml_gpus if g.uuid and g.uuid.startswith(entry)), None)
    if match is not None and name and match.name and match.name != name:
        return None  # numbering differs (CUDA_DEVICE_ORDER): better unknown than wrong
    return match


def _measured_jit(request: Request, device: str) -> tuple[bool | None, str]:
    """XLA on or off as measured for this machine in the results store (``tfaccel bench``,
    ``tfaccel tune``); only asked when ``jit="auto"``."""

    def read(value: Any) -> tuple[bool, str] | None:
        return None if value is None else (bool(value), f"XLA {'faster' if value else 'slower'}")

    return _measured(request, device, "jit", read)


def _measured_precision(request: Request, device: str) -> tuple[str | None, str]:
    """The fastest precision measured for this machine in the results store; only asked when
    ``precision="auto"``."""

    def read(value: Any) -> tuple[str, str] | None:
        if value in PRECISIONS and value != "auto":
            return str(value), f"{value} fastest"
        return None

    return _measured(request, device, "precision", read)


def _measured(
    request: Request, device: str, key: str, read: Callable[[Any], tuple[Any, str] | None]
) -> tuple[Any, str]:
    """Look ``key`` up in the results store for this machine: the model's own benchmark name
    first, then the reference CNN. A result inside the measured noise counts as no result, and
    a broken store is a reason, not an error: it must not stop training."""
    if request.get(key) != "auto":
        return None, "not looked up"
    from tfaccel import store

    nothing = f"no clear measurement on this machine's {device} in the results store"
    if not store.default_path().exists():
        return None, nothing  # nothing measured yet: no need to probe the machine
    models = dict.fromkeys(m for m in (request.model_name, REFERENCE_MODEL) if m)
    try:
        fingerprint = store.machine_fingerprint().digest
        for model in models:
            found = read(store.best_setting(fingerprint, model, key, device=device))
            if found is not None:
                value, verdict = found
                return value, f"measured here on {device} ({model}): {verdict}"
    except TfaccelError as exc:
        return None, f"the results store could not be read ({exc.what})"
    return None, nothing


def _read_state(tf: ModuleType) -> RuntimeState:
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
        started=_runtime_started(),
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


def _runtime_started() -> bool:
    from tensorflow.python.eager import context

    return getattr(context.context(), "_context_handle", None) is not None


def _pending(plan: Plan, state: RuntimeState) -> set[str]:
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


def _apply(tf: ModuleType, plan: Plan, state: RuntimeState) -> set[str]:
    """Make the planned calls; return the settings that were too late to apply."""
    too_late = _pending(plan, state) if state.started else set()
    try:
        _apply_fixed(tf, plan, skip=too_late)
    except RuntimeError as exc:  # the runtime started in a way _runtime_started did not see
        if "after" not in str(exc) or "initializ" not in str(exc):
            raise
        too_late |= _pending(plan, state)
    _apply_free(tf, plan)
    return too_late


def _apply_fixed(tf: ModuleType, plan: Plan, *, skip: set[str]) -> None:
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


def _apply_free(tf: ModuleType, plan: Plan) -> None:
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


def _config(plan: Plan, state: RuntimeState, too_late: set[str]) -> RuntimeConfig:
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
    return _memory_in_effect(state, gpus)


def device(spec: str) -> AbstractContextManager[Any]:
    """``tf.device`` for a device that exists, or a clear error (TF would silently fall back).

    Accepts the usual spellings: "GPU:0", "gpu:0", "/gpu:0", "/device:GPU:0", "CPU:1",
    "/job:localhost/replica:0/task:0/device:GPU:0". Checking starts TensorFlow's runtime
    (it lists the logical devices), so call ``setup()`` before it.

    Args:
        spec: the device.

    Returns:
        The ``tf.device`` context manager for it.

    Raises:
        UsageError: the text is not a device name.
        RuntimeSetupError: no such device; the message lists those that exist.

    Example:
        >>> with tfaccel.device("GPU:0"):
        ...     y = tf.matmul(x, x)
    """
    tf = importlib.import_module("tensorflow")
    try:
        wanted = tf.DeviceSpec.from_string(spec.strip())
    except (ValueError, TypeError):
        wanted = None
    if wanted is None or not wanted.device_type:
        raise UsageError(
            f"{spec!r} is not a device name",
            expected="a name such as 'GPU:0', '/gpu:0', '/device:GPU:0' or 'CPU:0'",
            received=repr(spec),
            fix="name a device type and index, e.g. 'GPU:0'",
        )
    existing = [tf.DeviceSpec.from_string(d.name) for d in tf.config.list_logical_devices()]
    if not any(_same_device(wanted, have) for have in existing):
        names = ", ".join(f"{d.device_type}:{d.device_index}" for d in existing)
        raise RuntimeSetupError(
            f"The device {spec!r} does not exist",
            expected=f"one of {names}",
            received=repr(spec),
            fix="use one of those; logical devices come from setup(devices=, logical_devices=)",
        )
    return tf.device(wanted.to_string())


def _same_device(wanted: Any, have: Any) -> bool:
    if wanted.device_type.upper() != have.device_type.upper():
        return False
    if wanted.device_index is not None and wanted.device_index != have.device_index:
        return False
    return wanted.job in (None, "localhost", have.job)


# --------------------------------------------------------------------------- helpers


def _device_key(name: str) -> str:
    """'/physical_device:GPU:0' -> 'GPU:0'."""
    kind, _, index = name.rsplit("/", 1)[-1].rpartition(":")
    return f"{kind.rsplit(':', 1)[-1]}:{index}"


def _device_index(name: str) -> int:
    return int(name.rsplit(":", 1)[-1])


def _jsonable(value: Any) -> JsonValue:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def _show(value: JsonValue) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_show(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(_show(v) for v in value) or "-"
    return str(value)
