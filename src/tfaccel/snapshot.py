"""The Snapshot: everything tfaccel probed on a machine, as plain values.

``probe.snapshot()`` fills one in; ``inventory`` and ``doctor`` are pure functions of it.
"Not available" is a value (``None``, an empty list, or an ``error`` string), never an exception.
A Snapshot round-trips through JSON (``to_dict`` / ``from_dict``) so a user can save it and a
maintainer can replay it (``tfaccel doctor --save-snapshot`` / ``--snapshot``).

Units are in field names: ``*_bytes``, ``*_mhz``, ``*_watts``, ``*_celsius``, ``*_percent``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Union

from tfaccel.errors import SnapshotError

__all__ = [
    "SCHEMA_VERSION",
    "CpuInfo",
    "DeepProbe",
    "Distribution",
    "DriverInfo",
    "GpuInfo",
    "LibraryLoad",
    "NvmlInfo",
    "PciDevice",
    "PlatformInfo",
    "Snapshot",
    "TfBuild",
    "ToolPaths",
    "TpuInfo",
    "load_snapshot",
    "save_snapshot",
]

SCHEMA_VERSION = 1


@dataclass
class PlatformInfo:
    """Operating system and Python."""

    system: str = ""  # platform.system(): Linux, Windows, Darwin
    release: str = ""
    machine: str = ""  # x86_64, aarch64, AMD64, arm64
    python_version: str = ""
    python_executable: str = ""
    is_wsl: bool = False
    in_container: bool = False
    hostname: str = ""


@dataclass
class CpuInfo:
    """The host CPU (``/proc/cpuinfo``, ``/sys``, cgroups)."""

    model: str | None = None
    vendor: str | None = None
    physical_cores: int | None = None
    logical_cores: int | None = None
    usable_cores: int | None = None  # CPUs this process may run on (affinity)
    cgroup_cpu_limit: float | None = None  # cores allowed by the cgroup quota, None when unlimited
    sockets: int | None = None
    flags: list[str] = field(default_factory=list)  # as /proc/cpuinfo spells them, lower case
    base_mhz: float | None = None
    max_mhz: float | None = None
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None


@dataclass
class PciDevice:
    """One PCI device of a vendor tfaccel cares about (NVIDIA 0x10de, Google TPU 0x1ae0)."""

    address: str = ""
    vendor_id: str = ""  # "0x10de"
    device_id: str = ""
    class_id: str = ""  # "0x030200" (3D controller)
    driver: str | None = None  # kernel driver bound to it, None when none is


@dataclass
class GpuInfo:
    """One NVIDIA GPU as NVML reports it. Each field is None where NVML does not report it."""

    index: int = 0
    name: str = ""
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    compute_capability: str | None = None  # "8.0"
    multiprocessor_count: int | None = None
    utilization_gpu_percent: int | None = None
    utilization_memory_percent: int | None = None
    temperature_celsius: int | None = None
    power_draw_watts: float | None = None
    power_limit_watts: float | None = None
    sm_clock_max_mhz: int | None = None
    memory_clock_max_mhz: int | None = None
    memory_bus_width_bits: int | None = None


@dataclass
class NvmlInfo:
    """NVML: the driver's view of the NVIDIA GPUs."""

    available: bool = False
    error: str | None = None  # why NVML could not be used (no library, no driver, mismatch...)
    driver_version: str | None = None  # "550.54.14"
    cuda_driver_version: str | None = None  # newest CUDA the driver supports, "12.4"
    nvml_version: str | None = None
    gpus: list[GpuInfo] = field(default_factory=list)


@dataclass
class LibraryLoad:
    """The result of dlopen-ing one shared library the way TensorFlow would."""

    soname: str = ""  # "libcudnn.so.9"
    component: str = ""  # "cudnn"
    loaded: bool = False
    path: str | None = None  # the file that was loaded
    found_via: str | None = None  # "system" (loader search) or "wheel" (site-packages/nvidia/*/lib)
    error: str | None = None  # the loader's error text when it did not load
    version: str | None = None  # the library's own version where it reports one ("9.3.0")


@dataclass
class DriverInfo:
    """The NVIDIA kernel module and the user-space driver (libcuda)."""

    proc_version: str | None = None  # first line of /proc/driver/nvidia/version
    kernel_module_version: str | None = None  # "550.54.14" parsed from it
    libcuda: LibraryLoad | None = None
    libcuda_file_version: str | None = None  # from the resolved libcuda.so.X.Y.Z file name
    cuda_driver_api_version: str | None = None  # cuDriverGetVersion, "12.4"
    nvidia_smi_path: str | None = None
    wsl_lib_dir_present: bool = False  # /usr/lib/wsl/lib exists (WSL2 GPU driver location)


@dataclass
class Distribution:
    """An installed Python distribution that matters for TensorFlow on accelerators."""

    name: str = ""
    version: str = ""
    location: str | None = None


@dataclass
class TfBuild:
    """The installed TensorFlow, read from its files without importing it."""

    installed: bool = False
    distribution: str | None = None  # "tensorflow", "tensorflow-cpu", ...
    version: str | None = None
    location: str | None = None  # the package directory
    build_info_found: bool = False
    is_cuda_build: bool | None = None
    is_rocm_build: bool | None = None
    cuda_version: str | None = None  # "12.5.1"
    cudnn_version: str | None = None  # "9"
    cuda_compute_capabilities: list[str] = field(default_factory=list)  # ["sm_60", "compute_90"]
    build_info: dict[str, str] = field(default_factory=dict)  # every key, values as text
    error: str | None = None


@dataclass
class ToolPaths:
    """Where the CUDA tools XLA needs are, if anywhere."""

    ptxas: str | None = None
    nvcc: str | None = None
    libdevice: str | None = None  # libdevice.10.bc
    nvidia_wheel_lib_dirs: list[str] = field(default_factory=list)  # site-packages/nvidia/*/lib


@dataclass
class TpuInfo:
    """Cloud TPU signals that can be read without starting the TPU runtime."""

    present: bool = False
    accelerator_type: str | None = None  # "v4-8", "v5litepod-8"
    chip_count: int | None = None
    device_files: list[str] = field(default_factory=list)  # /dev/accel*, /dev/vfio/*
    env: dict[str, str] = field(default_factory=dict)
    libtpu_version: str | None = None


@dataclass
class DeepProbe:
    """What TensorFlow itself reported when imported in a subprocess (``doctor --deep``)."""

    ran: bool = False
    ok: bool = False
    returncode: int | None = None
    timed_out: bool = False
    timeout_s: float | None = None
    duration_s: float | None = None
    tf_version: str | None = None
    built_with_cuda: bool | None = None
    physical_devices: list[str] = field(default_factory=list)  # "GPU:0", "CPU:0"
    logical_devices: list[str] = field(default_factory=list)  # "/device:GPU:0"
    gpu_details: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None  # the exception TF raised, last line
    log: str = ""  # stderr of the subprocess, trimmed


@dataclass
class Snapshot:
    """Everything probed on one machine at one time."""

    schema_version: int = SCHEMA_VERSION
    created_at: str = ""  # ISO 8601 UTC
    tfaccel_version: str = ""
    platform: PlatformInfo = field(default_factory=PlatformInfo)
    cpu: CpuInfo = field(default_factory=CpuInfo)
    pci: list[PciDevice] = field(default_factory=list)
    nvml: NvmlInfo = field(default_factory=NvmlInfo)
    driver: DriverInfo = field(default_factory=DriverInfo)
    cuda_libs: list[LibraryLoad] = field(default_factory=list)
    distributions: list[Distribution] = field(default_factory=list)
    tensorflow: TfBuild = field(default_factory=TfBuild)
    tools: ToolPaths = field(default_factory=ToolPaths)
    tpu: TpuInfo = field(default_factory=TpuInfo)
    env: dict[str, str] = field(default_factory=dict)  # the variables that matter, as set
    deep: DeepProbe | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    @classmethod
    def from_dict(cls, data: Any) -> Snapshot:
        """Build a Snapshot from ``to_dict`` output, checking every field's type.

        Unknown keys are ignored (a newer tfaccel may add fields); missing keys take defaults.

        Raises:
            SnapshotError: a value has the wrong type; the message names its path.
        """
        if not isinstance(data, dict):
            raise SnapshotError(
                "The snapshot is not a JSON object",
                expected="a JSON object as written by 'tfaccel doctor --save-snapshot'",
                received=type(data).__name__,
                fix="save a new one with 'tfaccel doctor --save-snapshot FILE'",
            )
        version = data.get("schema_version", SCHEMA_VERSION)
        if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
            raise SnapshotError(
                "The snapshot's schema_version is not one this tfaccel reads",
                expected=f"an integer <= {SCHEMA_VERSION}",
                received=repr(version),
                fix="upgrade tfaccel, or save the snapshot again with this version",
            )
        return _convert(cls, data, "snapshot")


T = TypeVar("T")


def _convert(tp: Any, value: Any, path: str) -> Any:
    """Convert a JSON value to ``tp`` (a dataclass or a typing annotation), strictly."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, path)
            except SnapshotError as exc:
                errors.append(exc)
        raise errors[0] if errors else _type_error(path, tp, value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise _type_error(path, tp.__name__ + " object", value)
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = _convert(hints[f.name], value[f.name], f"{path}.{f.name}")
        return tp(**kwargs)
    if origin is list:
        if not isinstance(value, list):
            raise _type_error(path, "a list", value)
        (item_tp,) = typing.get_args(tp)
        return [_convert(item_tp, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _type_error(path, "an object", value)
        _, val_tp = typing.get_args(tp)
        return {str(k): _convert(val_tp, v, f"{path}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise _type_error(path, "true or false", value)
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _type_error(path, "an integer", value)
        return value
    if tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _type_error(path, "a number", value)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise _type_error(path, "a string", value)
        return value
    raise _type_error(path, str(tp), value)


def _type_error(path: str, expected: Any, value: Any) -> SnapshotError:
    shown = json.dumps(value)[:80] if _jsonable(value) else type(value).__name__
    return SnapshotError(
        f"The snapshot field '{path}' has the wrong type",
        expected=str(expected),
        received=shown,
        fix="save a new one with 'tfaccel doctor --save-snapshot FILE' (do not edit it by hand)",
    )


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read a snapshot saved by ``save_snapshot``.

    Raises:
        SnapshotError: the file is missing, not JSON, or not a snapshot.
    """
    p = Path(path)
    fix = "pass a file written by 'tfaccel doctor --save-snapshot FILE'"
    if not p.exists():
        raise SnapshotError(f"The snapshot file {str(p)!r} does not exist", fix=fix)
    if p.is_dir():
        raise SnapshotError(
            f"The snapshot path {str(p)!r} is a directory", expected="a JSON file", fix=fix
        )
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(
            f"The snapshot file {str(p)!r} cannot be read",
            expected="a UTF-8 JSON file",
            received=str(exc),
            fix=fix,
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(
            f"The snapshot file {str(p)!r} is not valid JSON",
            expected="a JSON object",
            received=f"{exc.msg} at line {exc.lineno} column {exc.colno}",
            fix=fix,
        ) from None
    return Snapshot.from_dict(data)


def save_snapshot(snap: Snapshot, path: str | os.PathLike[str]) -> None:
    """Write a snapshot as JSON, atomically (a temporary file renamed into place)."""
    write_atomic(Path(path), snap.to_json() + "\n")


def write_atomic(path: Path, content: str | bytes, *, mode: int = 0o644) -> None:
    """Write ``content`` to ``path`` so that a reader sees the old file or the whole new one.

    Text is written as UTF-8. The file gets ``mode`` (mkstemp alone would leave it 0600,
    while a report or a snapshot is meant to be shared).
    """
    directory = path.parent if str(path.parent) else Path(".")
    data = content.encode("utf-8") if isinstance(content, str) else content
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
