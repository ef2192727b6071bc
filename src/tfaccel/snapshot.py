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
import math
import os
import re
import stat
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from tfaccel.core.errors import SnapshotError
from tfaccel.core.files import check_file_name, file_kind, os_reason, write_atomic
from tfaccel.core.records import INT_RANGE, MAX_INT, MIN_INT, from_json, json_excerpt

__all__ = [
    "SCHEMA_VERSION",
    "CpuInfo",
    "DeepProbe",
    "Distribution",
    "DriverInfo",
    "GpmReading",
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

# What a snapshot file may hold. A real one is tens of KiB (the deep probe's log is capped at
# 200,000 characters), nests 4 levels deep, and every number fits in 64 bits.
MAX_SNAPSHOT_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 32


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
    libc: str = ""  # platform.libc_ver(): "glibc"; "" where unknown (musl, macOS, Windows)
    libc_version: str = ""  # "2.39"
    install_dir: str | None = None  # where pip installs for this Python (site-packages)
    install_dir_free_bytes: int | None = None  # free space on its file system
    # x86_64 code translated on another CPU: "rosetta" (macOS sysctl.proc_translated = 1) or
    # "qemu-user" (an x86_64 Python whose /proc/cpuinfo describes an Arm CPU); None: native
    emulator: str | None = None
    emulator_evidence: str | None = None  # what showed it
    is_admin: bool | None = None  # the process runs as root (effective uid 0); None: unknown


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
class GpmReading:
    """NVML GPU Performance Metrics (GPM, Hopper and newer) of one GPU over ``interval_s``.

    Percentages computed by NVML between two GPM samples: ``sm_activity_percent`` is the
    time-averaged share of SMs with a warp resident (``NVML_GPM_METRIC_SM_UTIL``),
    ``sm_occupancy_percent`` resident warps against the maximum, ``tensor_activity_percent``
    the share of time the tensor cores worked (``tensor_metric`` names the NVML metric), and
    ``dram_bandwidth_percent`` the memory bandwidth used against its peak.
    """

    interval_s: float = 0.0
    sm_activity_percent: float | None = None
    sm_occupancy_percent: float | None = None
    tensor_activity_percent: float | None = None
    tensor_metric: str | None = None  # "ANY_TENSOR_UTIL", or "HMMA_TENSOR_UTIL" (FP16/BF16)
    dram_bandwidth_percent: float | None = None


@dataclass
class GpuInfo:
    """One NVIDIA GPU as NVML reports it. Each field is None where NVML does not report it.

    ``utilization_gpu_percent`` is NVML's ``utilization.gpu``: the share of the last sample
    period in which any kernel ran, not the share of the SMs at work; ``gpm`` holds those
    where the GPU and driver offer GPM, and ``gpm_note`` says why not where they do not.
    """

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
    gpm_supported: bool | None = None  # NVML GPM; None: not known (not asked, or no answer)
    gpm_note: str | None = None  # why there is no GPM reading
    gpm: GpmReading | None = None  # a short reading (``tfaccel devices``), when one was taken


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
    # "system" (loader search), "wheel" (site-packages/nvidia/*/lib), or "LD_LIBRARY_PATH"
    # (a folder of it: libs.cuda_runtimes)
    found_via: str | None = None
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
    # /proc/driver/nvidia/params ``RmProfilingAdminOnly`` (module option
    # NVreg_RestrictProfilingToAdminUsers): GPU performance counters for root only; None: unread
    profiling_admin_only: bool | None = None


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
    # the distribution's Requires-Dist lines (its METADATA), as written: "protobuf<8,>=6.31.1"
    requires: list[str] = field(default_factory=list)
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
    # libcudart of each CUDA major that loads from the loader's path (doctor --preflight)
    cuda_runtimes: list[LibraryLoad] = field(default_factory=list)
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

        Unknown keys are ignored (a newer tfaccel may add fields); missing keys take defaults
        (``schema_version`` too), but an object with none of a snapshot's fields is refused.
        Integers must fit in 64 bits and numbers be finite.

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
        known = {f.name for f in dataclasses.fields(cls)}
        if not known.intersection(data):
            keys = ", ".join(repr(k) for k in list(data)[:8]) or "none"
            raise SnapshotError(
                "The JSON object is not a tfaccel snapshot: it has none of a snapshot's fields",
                expected="a JSON object as written by 'tfaccel doctor --save-snapshot', "
                f'starting with "schema_version": {SCHEMA_VERSION}',
                received=f"an object with the keys {keys}",
                fix="save a new one with 'tfaccel doctor --save-snapshot FILE'",
            )
        # A hand-written partial snapshot (a few fields of a bug report) may leave it out.
        version = data.get("schema_version", SCHEMA_VERSION)
        if (
            not isinstance(version, int)
            or isinstance(version, bool)
            or not 1 <= version <= SCHEMA_VERSION
        ):
            newer = isinstance(version, int) and not isinstance(version, bool) and version > 1
            raise SnapshotError(
                "The snapshot's schema_version is not one this tfaccel reads",
                expected=f"an integer from 1 to {SCHEMA_VERSION}",
                received=json_excerpt(version),
                fix="upgrade tfaccel to read it"
                if newer
                else "save a new one with 'tfaccel doctor --save-snapshot FILE'",
            )
        return from_json(cls, data, where="snapshot", error=_field_error)


def _field_error(path: str, expected: str, value: Any, out_of_range: bool) -> SnapshotError:
    """The snapshot's error for a field :func:`tfaccel.core.records.from_json` refuses."""
    if out_of_range:
        return SnapshotError(
            f"The snapshot field '{path}' holds a number no machine reports",
            expected=f"a finite number; an integer {INT_RANGE}",
            received=json_excerpt(value),
            fix=_FIX_EDITED,
        )
    return SnapshotError(
        f"The snapshot field '{path}' has the wrong type",
        expected=expected,
        received=json_excerpt(value),
        fix=_FIX_EDITED,
    )


_FIX_EDITED = "save a new one with 'tfaccel doctor --save-snapshot FILE' (do not edit it by hand)"


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read a snapshot saved by ``save_snapshot``.

    The file is read only when it is a regular file of at most ``MAX_SNAPSHOT_BYTES``; its
    JSON may nest at most ``MAX_DEPTH`` levels, hold integers of at most 64 bits and finite
    numbers only, and must have this tfaccel's ``schema_version``.

    Raises:
        SnapshotError: the file is missing, not a regular file, too large, not JSON, or not a
            snapshot (the message names the field and what it should hold).
    """
    fix = "pass a file written by 'tfaccel doctor --save-snapshot FILE'"
    # Path() would drop a trailing slash and read the file it names
    check_file_name(path, reading=True, error=SnapshotError)
    p = Path(path)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise SnapshotError(f"The snapshot file {str(p)!r} does not exist", fix=fix) from None
    except (OSError, ValueError) as exc:
        raise SnapshotError(
            f"The snapshot file {str(p)!r} cannot be read",
            expected="a readable JSON file",
            received=os_reason(exc),
            fix=fix,
        ) from None
    if stat.S_ISDIR(info.st_mode):
        raise SnapshotError(
            f"The snapshot path {str(p)!r} is a directory", expected="a JSON file", fix=fix
        )
    if not stat.S_ISREG(info.st_mode):
        raise SnapshotError(
            f"The snapshot path {str(p)!r} is not a regular file",
            expected="a JSON file",
            received=file_kind(info.st_mode),
            fix=fix,
        )
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError as exc:
        raise SnapshotError(
            f"The snapshot file {str(p)!r} cannot be read",
            expected="a readable JSON file",
            received=os_reason(exc),
            fix=fix,
        ) from None
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(
            f"The snapshot file {str(p)!r} is too large to be a snapshot",
            expected=f"at most {MAX_SNAPSHOT_BYTES // 2**20} MiB (a snapshot is tens of KiB)",
            received=f"{max(info.st_size, len(raw)):,} bytes",
            fix=fix,
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(
            f"The snapshot file {str(p)!r} is not UTF-8 text",
            expected="a UTF-8 JSON file",
            received=f"{exc.reason} at byte {exc.start}",
            fix=fix,
        ) from None
    return Snapshot.from_dict(parse_json(text, source=f"The snapshot file {str(p)!r}", fix=fix))


# A string runs to its closing quote, or to the end of an unterminated text: the match never
# fails once started, so the scan stays linear on any input.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class _Refused(ValueError):
    """A JSON number the snapshot loader does not take (raised inside ``json.loads``)."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > 20 or not MIN_INT <= int(text) <= MAX_INT:
        raise _Refused(
            f"the integer {text[:30]}{'...' if len(text) > 30 else ''} "
            f"({len(text.lstrip('-')):,} digits)"
        )
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:30]} (beyond the range of a float)")
    return value


def _parse_constant(name: str) -> float:
    raise _Refused(f"{name} (not a finite number)")


def nesting_depth(text: str) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings ignored).

    Linear in the length of the text and without recursion, so it is safe on any input.
    """
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


def parse_json(text: str, *, source: str, fix: str) -> Any:
    """Parse a snapshot's JSON text within bounds: depth, integer size, finite numbers.

    Args:
        text: the JSON text.
        source: what it is, for the message (``The snapshot file 'x.json'``).
        fix: the fix the message gives.

    Raises:
        SnapshotError: not JSON, nested deeper than ``MAX_DEPTH``, an integer beyond 64 bits,
            or a number that is not finite (``NaN``, ``Infinity``, ``1e999``).
    """
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise SnapshotError(
            f"{source} nests its arrays and objects too deeply to be a snapshot",
            expected=f"at most {MAX_DEPTH} levels (a snapshot has 4)",
            received=f"{depth:,} levels",
            fix=fix,
        )
    try:
        return json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except _Refused as exc:
        raise SnapshotError(
            f"{source} holds a number no machine reports",
            expected=f"integers {INT_RANGE} and finite numbers",
            received=str(exc),
            fix=fix,
        ) from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(
            f"{source} is not valid JSON",
            expected="a JSON object",
            received=f"{exc.msg} at line {exc.lineno} column {exc.colno}",
            fix=fix,
        ) from None
    except (ValueError, RecursionError) as exc:  # any other refusal of the parser, by name
        raise SnapshotError(
            f"{source} is not valid JSON",
            expected="a JSON object",
            received=f"{type(exc).__name__}: {str(exc)[:200]}",
            fix=fix,
        ) from None


def save_snapshot(
    snap: Snapshot, path: str | os.PathLike[str], *, argument_name: str = "path"
) -> None:
    """Write a snapshot as JSON, atomically (a temporary file renamed into place).

    Raises:
        UsageError: the file cannot be written there (the message names the path, the
            argument ``argument_name`` as the caller spells it, and why).
    """
    write_atomic(path, snap.to_json() + "\n", argument_name=argument_name)
