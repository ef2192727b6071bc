"""A fake NVML binding (the ``pynvml`` module's surface), for probe tests without a GPU.

Each GPU is a dict of the values NVML would return; a value that is an exception instance
is raised instead, the way a GPU that does not support a query behaves.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any


class NVMLError(Exception):
    """Stands in for pynvml.NVMLError."""


NOT_SUPPORTED = NVMLError("Not Supported")


def make_binding(
    gpus: list[dict[str, Any]],
    *,
    init_error: str | None = None,
    driver: str = "550.54.14",
    cuda: int = 12040,
) -> types.SimpleNamespace:
    """Build a module-like object with the pynvml functions the probe calls."""
    calls: list[str] = []

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

    ns = types.SimpleNamespace(
        NVMLError=NVMLError,
        NVML_TEMPERATURE_GPU=0,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        calls=calls,
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
    return ns


def gpu(
    name: str = "NVIDIA A100-SXM4-40GB",
    *,
    total: int = 40 * 2**30,
    used: int = 2**30,
    cc: tuple[int, int] = (8, 0),
    sms: Any = 108,
    power_mw: Any = 65_000,
) -> dict[str, Any]:
    """One GPU's NVML answers; pass NOT_SUPPORTED for a field the GPU does not report."""
    ns = types.SimpleNamespace
    return {
        "name": name.encode(),  # old bindings return bytes
        "uuid": "GPU-1234",
        "pci": ns(busId=b"00000000:3B:00.0"),
        "memory": ns(total=total, used=used, free=total - used),
        "cc": cc,
        "attributes": sms if isinstance(sms, BaseException) else ns(multiprocessorCount=sms),
        "utilization": ns(gpu=37, memory=12),
        "temperature": 41,
        "power_mw": power_mw,
        "power_limit_mw": 400_000,
        "clocks": {1: 1410, 2: 1215},
        "bus_width": 5120,
    }
