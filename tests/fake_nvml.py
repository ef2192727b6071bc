"""A fake NVML binding (the ``pynvml`` module's surface), for probe tests without a GPU.

Each GPU is a dict of the values NVML would return; a value that is an exception instance
is raised instead, the way a GPU that does not support a query behaves.

GPU Performance Metrics (GPM, Hopper and newer) work as NVML's do: each GPU keeps counters
that grow with the activity set in its ``gpm`` dict (metric id -> percent) and the time that
passes, a sample is a copy of the counters, and ``nvmlGpmMetricsGet`` computes each metric
from the difference of two samples. A metric the GPU has no counter for comes back with
``nvmlReturn`` NOT_SUPPORTED, as NVML reports it per metric.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from typing import Any

# pynvml's error codes and GPM metric ids (nvml.h).
NVML_SUCCESS = 0
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_FUNCTION_NOT_FOUND = 13
SM_UTIL, SM_OCCUPANCY, ANY_TENSOR_UTIL, HMMA_TENSOR_UTIL, DRAM_BW_UTIL = 2, 3, 5, 7, 10
METRIC_MAX = 477


class NVMLError(Exception):
    """Stands in for pynvml.NVMLError: the text, and NVML's error code as ``value``."""

    def __init__(self, text: str, value: int | None = None) -> None:
        super().__init__(text)
        self.value = value


NOT_SUPPORTED = NVMLError("Not Supported", NVML_ERROR_NOT_SUPPORTED)
NO_PERMISSION = NVMLError("Insufficient Permissions", NVML_ERROR_NO_PERMISSION)
FUNCTION_NOT_FOUND = NVMLError("Function Not Found", NVML_ERROR_FUNCTION_NOT_FOUND)


class GpmSample:
    """An allocated GPM sample buffer: empty until ``nvmlGpmSampleGet`` fills it."""

    def __init__(self) -> None:
        self.handle: int | None = None
        self.at: float | None = None
        self.counters: dict[int, float] = {}


class GpmMetricsGet:
    """Stands in for pynvml.c_nvmlGpmMetricsGet_t: the fields NVML reads and fills."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: GpmSample | None = None
        self.sample2: GpmSample | None = None
        self.metrics = [
            types.SimpleNamespace(metricId=0, nvmlReturn=NVML_SUCCESS, value=0.0)
            for _ in range(METRIC_MAX)
        ]


def make_binding(
    gpus: list[dict[str, Any]],
    *,
    init_error: str | None = None,
    driver: str = "550.54.14",
    cuda: int = 12040,
    gpm_functions: bool = True,
    gpm_in_driver: bool = True,
) -> types.SimpleNamespace:
    """Build a module-like object with the pynvml functions the probe calls.

    Args:
        gpm_functions: False for a binding too old to have the GPM functions at all.
        gpm_in_driver: False for a driver whose NVML lacks them (every GPM call raises
            FUNCTION_NOT_FOUND, as pynvml does when the symbol is missing).
    """
    calls: list[str] = []
    live_samples: set[int] = set()  # ids of allocated, not yet freed GPM samples
    counters: list[dict[int, float]] = [{} for _ in gpus]
    last_read: list[float | None] = [None for _ in gpus]

    def init() -> None:
        calls.append("init")
        if init_error:
            raise NVMLError(init_error)

    def getter(key: str) -> Callable[[int], Any]:
        def call(handle: int, *_: Any) -> Any:
            value = gpus[handle][key]
            if isinstance(value, BaseException):
                raise value
            return value

        return call

    def clock(handle: int, which: int) -> Any:
        value = gpus[handle]["clocks"][which]
        if isinstance(value, BaseException):
            raise value
        return value

    def gpm_driver() -> None:
        if not gpm_in_driver:
            raise FUNCTION_NOT_FOUND

    def gpm_support(handle: int) -> Any:
        gpm_driver()
        activity = gpus[handle].get("gpm")
        if isinstance(activity, BaseException):
            raise activity
        return types.SimpleNamespace(version=1, isSupportedDevice=int(activity is not None))

    def sample_alloc() -> GpmSample:
        gpm_driver()
        sample = GpmSample()
        live_samples.add(id(sample))
        return sample

    def sample_free(sample: GpmSample) -> None:
        gpm_driver()
        if id(sample) not in live_samples:
            raise NVMLError("Invalid Argument", NVML_ERROR_INVALID_ARGUMENT)
        live_samples.discard(id(sample))

    def sample_get(handle: int, sample: GpmSample) -> GpmSample:
        gpm_driver()
        device = gpus[handle]
        failure = device.get("gpm_sample_error")
        if isinstance(failure, BaseException):
            raise failure
        activity = device.get("gpm")
        if not isinstance(activity, dict):
            raise NOT_SUPPORTED
        if id(sample) not in live_samples:
            raise NVMLError("Invalid Argument", NVML_ERROR_INVALID_ARGUMENT)
        now = time.perf_counter()
        previous = last_read[handle]
        elapsed = 0.0 if previous is None else now - previous
        for metric, percent in activity.items():  # counters grow with activity x time
            counters[handle][metric] = counters[handle].get(metric, 0.0) + percent * elapsed
        last_read[handle] = now
        sample.handle, sample.at, sample.counters = handle, now, dict(counters[handle])
        return sample

    def metrics_get(request: GpmMetricsGet) -> GpmMetricsGet:
        gpm_driver()
        first, second = request.sample1, request.sample2
        if (
            request.version != 1
            or not 0 < request.numMetrics <= METRIC_MAX
            or first is None
            or second is None
            or id(first) not in live_samples
            or id(second) not in live_samples
            or first.at is None
            or second.at is None
            or first.handle != second.handle
            or second.at <= first.at
        ):
            raise NVMLError("Invalid Argument", NVML_ERROR_INVALID_ARGUMENT)
        span = second.at - first.at
        for metric in request.metrics[: request.numMetrics]:
            if metric.metricId in second.counters:
                grown = second.counters[metric.metricId] - first.counters.get(metric.metricId, 0.0)
                metric.nvmlReturn, metric.value = NVML_SUCCESS, grown / span
            else:
                metric.nvmlReturn, metric.value = NVML_ERROR_NOT_SUPPORTED, 0.0
        return request

    ns = types.SimpleNamespace(
        NVMLError=NVMLError,
        NVML_SUCCESS=NVML_SUCCESS,
        NVML_ERROR_NOT_SUPPORTED=NVML_ERROR_NOT_SUPPORTED,
        NVML_ERROR_NO_PERMISSION=NVML_ERROR_NO_PERMISSION,
        NVML_ERROR_FUNCTION_NOT_FOUND=NVML_ERROR_FUNCTION_NOT_FOUND,
        NVML_TEMPERATURE_GPU=0,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        calls=calls,
        live_gpm_samples=live_samples,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlSystemGetDriverVersion=lambda: driver,
        nvmlSystemGetNVMLVersion=lambda: "12." + driver,
        nvmlSystemGetCudaDriverVersion=lambda: cuda,
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=getter("name"),
        nvmlDeviceGetUUID=getter("uuid"),
        nvmlDeviceGetPciInfo=getter("pci"),
        nvmlDeviceGetMemoryInfo=getter("memory"),
        nvmlDeviceGetCudaComputeCapability=getter("cc"),
        nvmlDeviceGetAttributes=getter("attributes"),
        nvmlDeviceGetUtilizationRates=getter("utilization"),
        nvmlDeviceGetTemperature=getter("temperature"),
        nvmlDeviceGetPowerUsage=getter("power_mw"),
        nvmlDeviceGetEnforcedPowerLimit=getter("power_limit_mw"),
        nvmlDeviceGetMaxClockInfo=clock,
        nvmlDeviceGetMemoryBusWidth=getter("bus_width"),
    )
    if gpm_functions:
        ns.NVML_GPM_METRIC_SM_UTIL = SM_UTIL
        ns.NVML_GPM_METRIC_SM_OCCUPANCY = SM_OCCUPANCY
        ns.NVML_GPM_METRIC_ANY_TENSOR_UTIL = ANY_TENSOR_UTIL
        ns.NVML_GPM_METRIC_HMMA_TENSOR_UTIL = HMMA_TENSOR_UTIL
        ns.NVML_GPM_METRIC_DRAM_BW_UTIL = DRAM_BW_UTIL
        ns.NVML_GPM_METRICS_GET_VERSION = 1
        ns.c_nvmlGpmMetricsGet_t = GpmMetricsGet
        ns.nvmlGpmQueryDeviceSupport = gpm_support
        ns.nvmlGpmSampleAlloc = sample_alloc
        ns.nvmlGpmSampleFree = sample_free
        ns.nvmlGpmSampleGet = sample_get
        ns.nvmlGpmMetricsGet = metrics_get
    return ns


def gpm_activity(
    sm: float = 62.0,
    occupancy: float = 31.0,
    tensor: float | None = 45.0,
    hmma: float | None = 40.0,
    dram: float = 38.0,
) -> dict[int, float]:
    """The activity (percent) a Hopper GPU's GPM counters grow with; None: no such counter."""
    activity = {SM_UTIL: sm, SM_OCCUPANCY: occupancy, DRAM_BW_UTIL: dram}
    if tensor is not None:
        activity[ANY_TENSOR_UTIL] = tensor
    if hmma is not None:
        activity[HMMA_TENSOR_UTIL] = hmma
    return activity


def gpu(
    name: str = "NVIDIA A100-SXM4-40GB",
    *,
    total: int = 40 * 2**30,
    used: int = 2**30,
    cc: tuple[int, int] = (8, 0),
    sms: Any = 108,
    power_mw: Any = 65_000,
    utilization: int = 37,
    gpm: Any = None,
    gpm_sample_error: BaseException | None = None,
) -> dict[str, Any]:
    """One GPU's NVML answers; pass NOT_SUPPORTED for a field the GPU does not report.

    ``gpm``: None for a GPU without GPM (before Hopper), a dict from :func:`gpm_activity` for
    one with it, or an exception that ``nvmlGpmQueryDeviceSupport`` raises.
    ``gpm_sample_error``: an exception ``nvmlGpmSampleGet`` raises on this GPU.
    """
    ns = types.SimpleNamespace
    return {
        "name": name.encode(),  # old bindings return bytes
        "uuid": "GPU-1234",
        "pci": ns(busId=b"00000000:3B:00.0"),
        "memory": ns(total=total, used=used, free=total - used),
        "cc": cc,
        "attributes": sms if isinstance(sms, BaseException) else ns(multiprocessorCount=sms),
        "utilization": ns(gpu=utilization, memory=12),
        "temperature": 41,
        "power_mw": power_mw,
        "power_limit_mw": 400_000,
        "clocks": {1: 1410, 2: 1215},
        "bus_width": 5120,
        "gpm": gpm,
        "gpm_sample_error": gpm_sample_error,
    }


def h100(**kwargs: Any) -> dict[str, Any]:
    """An H100 whose GPM counters grow with ``gpm_activity(**kwargs)``."""
    return gpu(
        "NVIDIA H100 80GB HBM3",
        total=80 * 2**30,
        cc=(9, 0),
        sms=132,
        utilization=99,
        gpm=gpm_activity(**kwargs),
    )
