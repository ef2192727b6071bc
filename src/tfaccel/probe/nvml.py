"""NVIDIA GPUs through NVML (the ``nvidia-ml-py`` binding, imported as ``pynvml``).

Every NVML call goes through :func:`_query`, which turns NVML errors into a default value:
an absent library, an absent driver or a field a GPU does not report is a value, never a crash.
Tests pass a fake binding module as ``nvml=`` (the hardware binding boundary).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from tfaccel.snapshot import GpuInfo, NvmlInfo

__all__ = ["GpuSample", "Sampler", "collect", "load_binding", "open_sampler"]

T = TypeVar("T")


def load_binding() -> ModuleType | str:
    """Import the NVML binding; return the error text instead when it is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        return f"the NVML binding is not installed ({exc}); pip install nvidia-ml-py"


def collect(nvml: Any = None) -> NvmlInfo:
    """Query the driver version and every GPU NVML reports.

    Args:
        nvml: the binding module (default: ``pynvml``); tests pass a fake.

    Returns:
        NvmlInfo; ``available`` False with ``error`` set when NVML cannot be used.
    """
    if nvml is None:
        loaded = load_binding()
        if isinstance(loaded, str):
            return NvmlInfo(available=False, error=loaded)
        nvml = loaded
    error_type: type[BaseException] = getattr(nvml, "NVMLError", OSError)
    try:
        nvml.nvmlInit()
    except (error_type, OSError) as exc:
        return NvmlInfo(available=False, error=_text(str(exc)) or type(exc).__name__)
    try:
        return _collect_initialised(nvml, error_type)
    finally:
        _query(nvml.nvmlShutdown, error_type)


def _collect_initialised(nvml: Any, error_type: type[BaseException]) -> NvmlInfo:
    info = NvmlInfo(available=True)
    info.driver_version = _text(_query(nvml.nvmlSystemGetDriverVersion, error_type))
    info.nvml_version = _text(_query(nvml.nvmlSystemGetNVMLVersion, error_type))
    cuda = _query(nvml.nvmlSystemGetCudaDriverVersion, error_type)
    if isinstance(cuda, int) and cuda > 0:
        info.cuda_driver_version = f"{cuda // 1000}.{(cuda % 1000) // 10}"
    count = _query(nvml.nvmlDeviceGetCount, error_type, default=0)
    for index in range(count if isinstance(count, int) else 0):
        handle = _query(nvml.nvmlDeviceGetHandleByIndex, error_type, index)
        if handle is None:
            continue
        info.gpus.append(_gpu(nvml, error_type, index, handle))
    return info


def _gpu(nvml: Any, err: type[BaseException], index: int, handle: Any) -> GpuInfo:
    gpu = GpuInfo(index=index, name=_text(_query(nvml.nvmlDeviceGetName, err, handle)) or "")
    gpu.uuid = _text(_query(nvml.nvmlDeviceGetUUID, err, handle))
    pci = _query(nvml.nvmlDeviceGetPciInfo, err, handle)
    gpu.pci_bus_id = _text(getattr(pci, "busId", None))
    mem = _query(nvml.nvmlDeviceGetMemoryInfo, err, handle)
    if mem is not None:
        gpu.memory_total_bytes = _int(getattr(mem, "total", None))
        gpu.memory_used_bytes = _int(getattr(mem, "used", None))
        gpu.memory_free_bytes = _int(getattr(mem, "free", None))
    cc = _query(nvml.nvmlDeviceGetCudaComputeCapability, err, handle)
    if isinstance(cc, tuple) and len(cc) == 2:
        gpu.compute_capability = f"{cc[0]}.{cc[1]}"
    attrs = _query(getattr(nvml, "nvmlDeviceGetAttributes", None), err, handle)
    gpu.multiprocessor_count = _int(getattr(attrs, "multiprocessorCount", None))
    util = _query(nvml.nvmlDeviceGetUtilizationRates, err, handle)
    gpu.utilization_gpu_percent = _int(getattr(util, "gpu", None))
    gpu.utilization_memory_percent = _int(getattr(util, "memory", None))
    sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
    gpu.temperature_celsius = _int(_query(nvml.nvmlDeviceGetTemperature, err, handle, sensor))
    gpu.power_draw_watts = _milli(_query(nvml.nvmlDeviceGetPowerUsage, err, handle))
    gpu.power_limit_watts = _milli(_query(nvml.nvmlDeviceGetEnforcedPowerLimit, err, handle))
    sm, memclk = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)
    gpu.sm_clock_max_mhz = _int(_query(nvml.nvmlDeviceGetMaxClockInfo, err, handle, sm))
    gpu.memory_clock_max_mhz = _int(_query(nvml.nvmlDeviceGetMaxClockInfo, err, handle, memclk))
    bus = getattr(nvml, "nvmlDeviceGetMemoryBusWidth", None)
    gpu.memory_bus_width_bits = _int(_query(bus, err, handle))
    return gpu


def _query(
    func: Callable[..., T] | None, error_type: type[BaseException], *args: Any, default: Any = None
) -> Any:
    """Call one NVML function; NVML errors (not supported, no permission...) become ``default``."""
    if func is None:
        return default
    try:
        return func(*args)
    except error_type:
        return default


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _milli(value: Any) -> float | None:
    number = _int(value)
    return number / 1000.0 if number is not None else None


@dataclass(frozen=True)
class GpuSample:
    """One cheap reading of a GPU: utilisation (``utilization.gpu``) and memory used."""

    index: int
    utilization_gpu_percent: int | None
    memory_used_bytes: int | None


class Sampler:
    """An open NVML session that reads utilisation and memory of some GPUs, repeatedly.

    NVML's ``utilization.gpu`` is the share of the last sample period (1/6 s to 1 s,
    depending on the GPU) in which a kernel was running. Call :meth:`close` when done.
    """

    def __init__(
        self, nvml: Any, error_type: type[BaseException], handles: list[tuple[int, Any]]
    ) -> None:
        self._nvml = nvml
        self._error_type = error_type
        self.handles = handles

    def sample(self) -> list[GpuSample]:
        out = []
        for index, handle in self.handles:
            util = _query(self._nvml.nvmlDeviceGetUtilizationRates, self._error_type, handle)
            mem = _query(self._nvml.nvmlDeviceGetMemoryInfo, self._error_type, handle)
            out.append(
                GpuSample(
                    index=index,
                    utilization_gpu_percent=_int(getattr(util, "gpu", None)),
                    memory_used_bytes=_int(getattr(mem, "used", None)),
                )
            )
        return out

    def close(self) -> None:
        _query(self._nvml.nvmlShutdown, self._error_type)


def open_sampler(indices: Sequence[int] | None = None, nvml: Any = None) -> Sampler | str:
    """Open NVML for repeated samples of the GPUs ``indices`` (NVML numbering; None: all).

    Returns:
        A Sampler, or the reason (text) when NVML cannot be used or reports no such GPU.
    """
    if nvml is None:
        loaded = load_binding()
        if isinstance(loaded, str):
            return loaded
        nvml = loaded
    error_type: type[BaseException] = getattr(nvml, "NVMLError", OSError)
    try:
        nvml.nvmlInit()
    except (error_type, OSError) as exc:
        return f"NVML cannot be initialised: {_text(str(exc)) or type(exc).__name__}"
    count = _query(nvml.nvmlDeviceGetCount, error_type, default=0)
    wanted = range(count if isinstance(count, int) else 0) if indices is None else indices
    handles = []
    for index in wanted:
        handle = _query(nvml.nvmlDeviceGetHandleByIndex, error_type, index)
        if handle is not None:
            handles.append((index, handle))
    if not handles:
        _query(nvml.nvmlShutdown, error_type)
        return "NVML reports no GPU" if indices is None else f"NVML has no GPU {list(indices)}"
    return Sampler(nvml, error_type, handles)
