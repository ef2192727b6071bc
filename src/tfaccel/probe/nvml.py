"""NVIDIA GPUs through NVML (the ``nvidia-ml-py`` binding, imported as ``pynvml``).

Every NVML call goes through :func:`_query`, which turns NVML errors into a default value:
an absent library, an absent driver or a field a GPU does not report is a value, never a crash.
Tests pass a fake binding module as ``nvml=`` (the hardware binding boundary).

Two measures of how busy a GPU is:

* ``utilization.gpu`` (``nvmlDeviceGetUtilizationRates``, every GPU): the share of the last
  sample period in which any kernel ran. One small kernel on one SM reads as 100%.
* GPU Performance Metrics (NVML GPM, Hopper and newer, :func:`gpm_support`): SM activity,
  SM occupancy, tensor-core activity and DRAM bandwidth, each computed by NVML from two
  samples of the GPU's counters taken more than 100 ms apart (:data:`GPM_MIN_INTERVAL_S`).
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from tfaccel.snapshot import GpmReading, GpuInfo, NvmlInfo

__all__ = [
    "GPM_MIN_INTERVAL_S",
    "GPM_READING_S",
    "GpuSample",
    "Sampler",
    "collect",
    "gpm_support",
    "load_binding",
    "open_sampler",
    "read_gpm",
]

GPM_MIN_INTERVAL_S = 0.1
"""NVML: two GPM samples must be more than 100 ms apart (its counters refresh that often)."""

GPM_READING_S = 0.15
"""The interval of the one GPM reading ``tfaccel devices`` takes (all GPUs at once)."""

_NO_GPM_BINDING = "this NVML binding has no GPM functions: pip install -U nvidia-ml-py"

# The GPM metrics read, as (name, pynvml constant, its value in nvml.h).
_GPM_METRICS = (
    ("sm_activity", "NVML_GPM_METRIC_SM_UTIL", 2),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY", 3),
    ("any_tensor", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5),
    ("hmma_tensor", "NVML_GPM_METRIC_HMMA_TENSOR_UTIL", 7),
    ("dram_bandwidth", "NVML_GPM_METRIC_DRAM_BW_UTIL", 10),
)

# The tensor-core metric reported: any tensor op where NVML computes it, else the FP16/BF16
# (HMMA) tensor ops alone; the value is its name in ``GpmReading.tensor_metric``.
_TENSOR_METRICS = {"any_tensor": "ANY_TENSOR_UTIL", "hmma_tensor": "HMMA_TENSOR_UTIL"}

T = TypeVar("T")


def load_binding() -> ModuleType | str:
    """Import the NVML binding; return the error text instead when it is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        return f"the NVML binding is not installed ({exc}); pip install nvidia-ml-py"


def _init(nvml: Any) -> tuple[Any, type[BaseException], str | None]:
    """Load the binding (``nvml`` None: ``pynvml``) and initialise NVML.

    Returns:
        (binding, its error type, None) when NVML is ready (shut it down when done);
        (binding, error type, why) when ``nvmlInit`` fails; (None, OSError, why) when the
        binding is not installed.
    """
    if nvml is None:
        loaded = load_binding()
        if isinstance(loaded, str):
            return None, OSError, loaded
        nvml = loaded
    error_type = _error_type(nvml)
    try:
        nvml.nvmlInit()
    except (error_type, OSError) as exc:
        return nvml, error_type, _text(str(exc)) or type(exc).__name__
    return nvml, error_type, None


def _error_type(nvml: Any) -> type[BaseException]:
    """The binding's NVML error class (``pynvml.NVMLError``)."""
    error_type: type[BaseException] = getattr(nvml, "NVMLError", OSError)
    return error_type


def collect(nvml: Any = None, *, gpm_interval_s: float | None = None) -> NvmlInfo:
    """Query the driver version and every GPU NVML reports.

    Args:
        nvml: the binding module (default: ``pynvml``); tests pass a fake.
        gpm_interval_s: also read the GPM metrics of every GPU that has them, over this many
            seconds (one pause for all GPUs; more than :data:`GPM_MIN_INTERVAL_S`). None:
            only ask whether each GPU has them.

    Returns:
        NvmlInfo; ``available`` False with ``error`` set when NVML cannot be used.
    """
    nvml, error_type, why = _init(nvml)
    if why is not None:
        return NvmlInfo(available=False, error=why)
    try:
        info = _collect_initialised(nvml, error_type)
        if gpm_interval_s is not None:
            _add_gpm_readings(nvml, error_type, info, gpm_interval_s)
        return info
    finally:
        _query(nvml.nvmlShutdown, error_type)


def _add_gpm_readings(
    nvml: Any, error_type: type[BaseException], info: NvmlInfo, interval_s: float
) -> None:
    supported = [g for g in info.gpus if g.gpm_supported]
    handles = [
        (g.index, _query(nvml.nvmlDeviceGetHandleByIndex, error_type, g.index)) for g in supported
    ]
    readings = read_gpm(nvml, [(i, h) for i, h in handles if h is not None], interval_s)
    for gpu in supported:
        got = readings.get(gpu.index, "NVML gave no handle for this GPU")
        if isinstance(got, GpmReading):
            gpu.gpm = got
        else:
            gpu.gpm_note = got


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
    gpu.gpm_supported, gpu.gpm_note = gpm_support(nvml, handle)
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


# --- GPU Performance Metrics (NVML GPM) -------------------------------------------------------


def gpm_support(nvml: Any, handle: Any) -> tuple[bool | None, str | None]:
    """Whether a GPU offers NVML GPM (``nvmlGpmQueryDeviceSupport``), and why not when not.

    Returns:
        (True, None); (False, reason) for a GPU or driver without GPM; (None, reason) when
        NVML did not answer (no permission, another error) or the binding has no GPM.
    """
    query = getattr(nvml, "nvmlGpmQueryDeviceSupport", None)
    if query is None:
        return None, _NO_GPM_BINDING
    try:
        support = query(handle)
    except _error_type(nvml) as exc:
        return _gpm_refusal(nvml, "nvmlGpmQueryDeviceSupport", exc)
    if getattr(support, "isSupportedDevice", 0):
        return True, None
    return False, "this GPU has no GPM (NVML GPM needs a Hopper or newer data-center GPU)"


def _gpm_refusal(nvml: Any, call: str, exc: BaseException) -> tuple[bool | None, str]:
    """What an NVML error from a GPM call means: not supported (False), or not known (None)."""
    code = getattr(exc, "value", None)
    text = _text(str(exc)) or type(exc).__name__
    if code == getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", 13):
        return False, f"the driver's NVML has no GPM ({call}: {text}): a driver too old for GPM"
    if code == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3):
        return False, f"NVML does not support GPM on this GPU ({call}: {text})"
    if code == getattr(nvml, "NVML_ERROR_NO_PERMISSION", 4):
        return None, f"NVML refused GPM ({call}: {text}); profiling counters may be restricted"
    return None, f"NVML GPM failed ({call}: {text})"


class _GpmStream:
    """Two GPM sample buffers of one GPU: each :meth:`read` returns the metrics NVML computes
    between the previous sample and a new one. Call :meth:`close` to free the buffers."""

    def __init__(self, nvml: Any, handle: Any, buffers: tuple[Any, Any], at: float) -> None:
        self._nvml = nvml
        self._error_type = _error_type(nvml)
        self._handle = handle
        self._previous, self._spare = buffers
        self._at = at

    @classmethod
    def open(cls, nvml: Any, handle: Any) -> _GpmStream | str:
        """Allocate the buffers and take the first sample; the reason (text) when NVML refuses."""
        error_type = _error_type(nvml)
        needed = (
            "nvmlGpmSampleAlloc",
            "nvmlGpmSampleFree",
            "nvmlGpmSampleGet",
            "nvmlGpmMetricsGet",
        )
        if not all(hasattr(nvml, name) for name in needed):
            return _NO_GPM_BINDING
        buffers: list[Any] = []
        try:
            buffers.append(nvml.nvmlGpmSampleAlloc())
            buffers.append(nvml.nvmlGpmSampleAlloc())
            nvml.nvmlGpmSampleGet(handle, buffers[0])
        except error_type as exc:
            for buffer in buffers:
                _query(nvml.nvmlGpmSampleFree, error_type, buffer)
            return _gpm_refusal(
                nvml, "nvmlGpmSampleGet" if len(buffers) == 2 else "nvmlGpmSampleAlloc", exc
            )[1]
        return cls(nvml, handle, (buffers[0], buffers[1]), time.perf_counter())

    def read(self) -> GpmReading | str | None:
        """The metrics since the previous sample; None when it is under 100 ms old (the sample
        is then kept for the next read), the reason (text) when NVML fails."""
        now = time.perf_counter()
        elapsed = now - self._at
        if elapsed <= GPM_MIN_INTERVAL_S:
            return None
        try:
            self._nvml.nvmlGpmSampleGet(self._handle, self._spare)
        except self._error_type as exc:
            return _gpm_refusal(self._nvml, "nvmlGpmSampleGet", exc)[1]
        reading = _gpm_metrics(self._nvml, self._error_type, self._previous, self._spare, elapsed)
        self._previous, self._spare, self._at = self._spare, self._previous, now
        return reading

    def close(self) -> None:
        for buffer in (self._previous, self._spare):
            _query(self._nvml.nvmlGpmSampleFree, self._error_type, buffer)


def _gpm_metrics(
    nvml: Any, error_type: type[BaseException], first: Any, second: Any, interval_s: float
) -> GpmReading | str:
    """``nvmlGpmMetricsGet`` between two samples: every metric NVML computed, in percent."""
    request = nvml.c_nvmlGpmMetricsGet_t()
    request.version = getattr(nvml, "NVML_GPM_METRICS_GET_VERSION", 1)
    request.numMetrics = len(_GPM_METRICS)
    request.sample1, request.sample2 = first, second
    for slot, (_, constant, number) in zip(request.metrics, _GPM_METRICS, strict=False):
        slot.metricId = getattr(nvml, constant, number)
    try:
        nvml.nvmlGpmMetricsGet(request)
    except error_type as exc:
        return _gpm_refusal(nvml, "nvmlGpmMetricsGet", exc)[1]
    success = getattr(nvml, "NVML_SUCCESS", 0)
    values: dict[str, float] = {}
    for slot, (name, _, _) in zip(request.metrics, _GPM_METRICS, strict=False):
        value = slot.value
        if slot.nvmlReturn == success and isinstance(value, (int, float)) and math.isfinite(value):
            values[name] = float(value)
    if not values:
        return "nvmlGpmMetricsGet computed none of the metrics asked for"
    tensor = next((name for name in _TENSOR_METRICS if name in values), "")
    return GpmReading(
        interval_s=interval_s,
        sm_activity_percent=values.get("sm_activity"),
        sm_occupancy_percent=values.get("sm_occupancy"),
        tensor_activity_percent=values.get(tensor),
        tensor_metric=_TENSOR_METRICS.get(tensor),
        dram_bandwidth_percent=values.get("dram_bandwidth"),
    )


def read_gpm(
    nvml: Any, handles: Sequence[tuple[int, Any]], interval_s: float = GPM_READING_S
) -> dict[int, GpmReading | str]:
    """One GPM reading of each GPU over ``interval_s`` seconds (one pause for all of them).

    Args:
        nvml: the initialised binding module.
        handles: (NVML index, device handle) of GPUs that support GPM.
        interval_s: seconds between the two samples; more than :data:`GPM_MIN_INTERVAL_S`.

    Returns:
        Per NVML index, the reading or the reason (text) there is none.
    """
    interval_s = max(interval_s, GPM_MIN_INTERVAL_S + 0.01)
    out: dict[int, GpmReading | str] = {}
    streams: dict[int, _GpmStream] = {}
    try:
        for index, handle in handles:
            opened = _GpmStream.open(nvml, handle)
            if isinstance(opened, str):
                out[index] = opened
            else:
                streams[index] = opened
        if streams:
            time.sleep(interval_s)
        for index, stream in streams.items():
            got = stream.read()
            out[index] = got if got is not None else "the two GPM samples were under 100 ms apart"
    finally:
        for stream in streams.values():
            stream.close()
    return out


# --- repeated readings ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSample:
    """One cheap reading of a GPU: ``utilization.gpu`` (the share of time any kernel ran),
    memory used, and the GPM metrics since the previous sample where the GPU offers them."""

    index: int
    utilization_gpu_percent: int | None
    memory_used_bytes: int | None
    gpm: GpmReading | None = None


class Sampler:
    """An open NVML session that reads utilisation and memory of some GPUs, repeatedly.

    NVML's ``utilization.gpu`` is the share of the last sample period (1/6 s to 1 s,
    depending on the GPU) in which a kernel was running. On GPUs with GPM each sample also
    carries the GPM metrics since the previous one (none when that is under 100 ms ago);
    :attr:`gpm_notes` says, per NVML index, why a GPU has none. Call :meth:`close` when done.
    """

    def __init__(
        self, nvml: Any, error_type: type[BaseException], handles: list[tuple[int, Any]]
    ) -> None:
        self._nvml = nvml
        self._error_type = error_type
        self.handles = handles
        self.gpm_notes: dict[int, str] = {}
        self._gpm: dict[int, _GpmStream] = {}
        for index, handle in handles:
            supported, note = gpm_support(nvml, handle)
            opened = _GpmStream.open(nvml, handle) if supported else note or "no GPM"
            if isinstance(opened, str):
                self.gpm_notes[index] = opened
            else:
                self._gpm[index] = opened

    def sample(self) -> list[GpuSample]:
        out = []
        for index, handle in self.handles:
            util = _query(self._nvml.nvmlDeviceGetUtilizationRates, self._error_type, handle)
            mem = _query(self._nvml.nvmlDeviceGetMemoryInfo, self._error_type, handle)
            stream = self._gpm.get(index)
            got = stream.read() if stream is not None else None
            if isinstance(got, str):
                self.gpm_notes[index] = got
            out.append(
                GpuSample(
                    index=index,
                    utilization_gpu_percent=_int(getattr(util, "gpu", None)),
                    memory_used_bytes=_int(getattr(mem, "used", None)),
                    gpm=got if isinstance(got, GpmReading) else None,
                )
            )
        return out

    def close(self) -> None:
        for stream in self._gpm.values():
            stream.close()
        self._gpm = {}
        _query(self._nvml.nvmlShutdown, self._error_type)


def open_sampler(indices: Sequence[int] | None = None, nvml: Any = None) -> Sampler | str:
    """Open NVML for repeated samples of the GPUs ``indices`` (NVML numbering; None: all).

    Args:
        indices: NVML indices of the GPUs to sample (None: all).
        nvml: the binding module (default: ``pynvml``); tests pass a fake.

    Returns:
        A Sampler, or the reason (text) when NVML cannot be used or reports no such GPU.
    """
    nvml, error_type, why = _init(nvml)
    if why is not None:
        return why if nvml is None else f"NVML cannot be initialised: {why}"
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
