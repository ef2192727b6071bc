"""Name the known causes in a TensorFlow log or traceback.

Patterns match the message text, never the source-path prefix: the prefix moved from
``tensorflow/stream_executor/...`` to ``external/local_xla/xla/...``, and TF >= 2.18 writes absl
prefixes (``E0000 00:00:...``). Each pattern has a literal ``anchor`` that every matching line
contains; the text is searched for anchors with ``str.find`` (fast, in C) and only the lines that
hold one are looked at further, so a 32 MiB log is matched in about a second.

Lines that TensorFlow prints on every healthy start (``Unable to register cuDNN factory``, the
CPU-instructions notice, ...) are labelled benign and never called a cause.

Example:
    >>> report = match_log("W0000 00:00:1.0 1 gpu_device.cc:2344] Cannot dlopen some GPU libraries")
    >>> [cause.id for cause in report.causes]
    ['missing_cuda_libs']
"""

from __future__ import annotations

import bisect
import os
import re
import shlex
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from tfaccel.errors import LogInputError
from tfaccel.findings import Finding, Status

__all__ = [
    "CAUSES",
    "BenignMatch",
    "LogMatch",
    "LogReport",
    "LogText",
    "match_log",
    "read_log_file",
]

MIB = 1024 * 1024
FULL_SCAN_LIMIT_BYTES = 32 * MIB  # larger inputs: only the head and the tail are scanned
HEAD_BYTES = 8 * MIB
TAIL_BYTES = 24 * MIB
SNIFF_BYTES = 64 * 1024  # looked at to tell text from binary
UNDECODABLE_LIMIT = 0.3  # share of replacement characters above which the input is not text
MAX_LINES_SHOWN = 5
MAX_LINE_CHARS = 300
MAX_DETAILS = 8
DETAIL_LINES = 100  # details are read from the first lines of a cause only

_HOW_TO_SAVE = (
    "save TensorFlow's output with `python train.py 2>&1 | tee tf.log`, "
    "then run `tfaccel doctor --log tf.log`"
)
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


@dataclass(frozen=True)
class _Cause:
    """What the report says about a cause id, whichever of its patterns matched."""

    title: str
    fix: str


CAUSES: dict[str, _Cause] = {
    "tensorflow_gpu_deprecated": _Cause(
        "The tensorflow-gpu package was removed; pip cannot install it",
        "pip uninstall -y tensorflow-gpu && pip install 'tensorflow[and-cuda]' "
        "(Linux; elsewhere `pip install tensorflow`), and write tensorflow instead of "
        "tensorflow-gpu in requirements files",
    ),
    "windows_native": _Cause(
        "TensorFlow >= 2.11 has no CUDA build for native Windows",
        "wsl --install, then inside WSL2: pip install 'tensorflow[and-cuda]' "
        "(NVIDIA Windows driver >= 528.33)",
    ),
    "cpu_no_avx": _Cause(
        "The CPU lacks AVX, which the official TensorFlow wheels need (Illegal instruction)",
        "run on a CPU with AVX, or build TensorFlow on this machine: "
        "bazel build --copt=-march=native //tensorflow/tools/pip_package:wheel",
    ),
    "no_driver_or_hidden": _Cause(
        "CUDA found no usable GPU: no driver, or the GPUs are hidden",
        "unset CUDA_VISIBLE_DEVICES (or set it to existing indices, e.g. "
        "`export CUDA_VISIBLE_DEVICES=0`); check the driver with `nvidia-smi`; "
        "in Docker: docker run --gpus all ...",
    ),
    "driver_mismatch": _Cause(
        "The NVIDIA kernel module and the user-space driver (libcuda) differ in version",
        "sudo reboot (after a driver upgrade); in a container, do not install a driver in the "
        "image: docker run --gpus all ...",
    ),
    "driver_older_than_ptx": _Cause(
        "The NVIDIA driver is older than the CUDA that TensorFlow was built with",
        "upgrade the NVIDIA driver until `nvidia-smi` shows a CUDA Version >= TensorFlow's: "
        "sudo ubuntu-drivers install && sudo reboot",
    ),
    "missing_cuda_libs": _Cause(
        "CUDA/cuDNN libraries did not load, so TensorFlow skipped the GPU",
        "pip install 'tensorflow[and-cuda]'; to see each load attempt: "
        'TF_CPP_MAX_VLOG_LEVEL=3 python -c "import tensorflow as tf; '
        "print(tf.config.list_physical_devices('GPU'))\"",
    ),
    "cudnn_mismatch": _Cause(
        "The cuDNN that loaded is not the one TensorFlow was built for",
        "pip install 'tensorflow[and-cuda]' and take older cuDNN directories off "
        "LD_LIBRARY_PATH; TensorFlow's own is in "
        "`python -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])'`/lib",
    ),
    "cc_too_low": _Cause(
        "The GPU's compute capability is below the minimum this TensorFlow was built for",
        "build TensorFlow from source with TF_CUDA_COMPUTE_CAPABILITIES=<the GPU's X.Y> "
        "./configure, or install an older TensorFlow whose wheels target it",
    ),
    "gpu_too_few_cores": _Cause(
        "TensorFlow ignored a GPU with fewer multiprocessors than its other GPUs",
        "export TF_MIN_GPU_MULTIPROCESSOR_COUNT=<the ignored GPU's core count>, or hide it: "
        "export CUDA_VISIBLE_DEVICES=<the other GPUs' indices>",
    ),
    "cc_too_new": _Cause(
        "The GPU is newer than the CUDA kernels shipped in this TensorFlow",
        "compute capability 9.x: let the first PTX JIT finish and keep its cache "
        "(export CUDA_CACHE_MAXSIZE=4294967296); 10.x/12.x (Blackwell): "
        "docker run --gpus all -it --rm nvcr.io/nvidia/tensorflow:25.02-tf2-py3, "
        "or build TensorFlow from source",
    ),
    "xla_libdevice_ptxas": _Cause(
        "XLA cannot find libdevice or ptxas, so XLA/jit_compile fails on the GPU",
        "pip install nvidia-cuda-nvcc-cu12; or "
        "export XLA_FLAGS=--xla_gpu_cuda_data_dir=/usr/local/cuda (the directory holding "
        "nvvm/libdevice)",
    ),
    "oom": _Cause(
        "The GPU ran out of memory",
        "halve the batch size; against fragmentation: export TF_GPU_ALLOCATOR=cuda_malloc_async; "
        "tf.keras.mixed_precision.set_global_policy('mixed_float16') halves activations; "
        "`nvidia-smi` shows other processes holding memory",
    ),
    "config_after_init": _Cause(
        "Devices were configured after TensorFlow's runtime had started",
        "call tf.config.experimental.set_memory_growth(gpu, True) / set_visible_devices / "
        "set_logical_device_configuration right after `import tensorflow as tf`, before any "
        "tensor is created or a library that creates one is imported; or "
        "export TF_FORCE_GPU_ALLOW_GROWTH=true",
    ),
}


# --------------------------------------------------------------------------- details


def _extract(regex: str, template: str) -> Callable[[str], str | None]:
    """A detail function: search ``regex`` in the line and fill ``template`` with its groups."""
    compiled = re.compile(regex)

    def detail(line: str) -> str | None:
        match = compiled.search(line)
        if match is None:
            return None
        groups = {k: (v or "?").strip().rstrip(".") for k, v in match.groupdict().items()}
        return template.format(**groups)

    return detail


# fmt: off
_DTYPE_BYTES = {
    "float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
    "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "bool": 1,
}
# fmt: on
_OOM_SHAPE_RE = re.compile(r"shape ?\[(?P<shape>[^\]]*)\](?: and type (?P<dtype>\w+))?")


def _oom_shape(line: str) -> str | None:
    """``OOM when allocating tensor with shape[5760,4,4,2048]`` -> the shape and its size."""
    match = _OOM_SHAPE_RE.search(line)
    if match is None:
        return None
    shape = match.group("shape").replace(" ", "")
    dims = shape.split(",")
    if not all(d.isdigit() and len(d) < 10 for d in dims):
        return f"tensor shape [{shape}]"
    elements = 1
    for d in dims:
        elements *= int(d)
    dtype = match.group("dtype")
    size = elements * _DTYPE_BYTES.get(dtype or "float", 4)
    as_what = dtype if dtype else "float32"
    return f"tensor shape [{shape}]: {elements:,} elements, {_human_bytes(size)} as {as_what}"


def _human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}" if unit != "B" else f"{size} B"
        value /= 1024
    return f"{value:.1f} TiB"


_CUDNN_RE = re.compile(
    r"Loaded runtime CuDNN library: ?(?P<loaded>[\d.]+).*?but source was compiled with:? ?"
    r"(?P<compiled>[\d.]+)"
)


def _cudnn_versions(line: str) -> str | None:
    """``7301 ... 7003`` -> ``loaded cuDNN 7301 (7.3.1), TensorFlow built with 7003 (7.0.3)``."""
    match = _CUDNN_RE.search(line)
    if match is None:
        return None
    loaded = _cudnn_readable(match.group("loaded").rstrip("."))
    compiled = _cudnn_readable(match.group("compiled").rstrip("."))
    return f"loaded cuDNN {loaded}, TensorFlow built with {compiled}"


def _cudnn_readable(version: str) -> str:
    """cuDNN < 9 printed ``major*1000 + minor*100 + patch``; show the dotted form beside it."""
    if version.isdigit() and len(version) == 4:
        number = int(version)
        return f"{version} ({number // 1000}.{number % 1000 // 100}.{number % 100})"
    return version


# --------------------------------------------------------------------------- patterns


@dataclass(frozen=True)
class _Pattern:
    """One message that names a cause.

    Attributes:
        cause: the cause id.
        anchor: literal text every matching line contains (searched with ``str.find``).
        regex: when set, the line must also match it.
        status: ``fail`` or, for milder messages, ``warn``.
        detail: pulls a value worth showing (a library name, a shape) out of the line.
    """

    cause: str
    anchor: str
    regex: re.Pattern[str] | None = None
    status: Status = "fail"
    detail: Callable[[str], str | None] | None = None


def _p(
    cause: str,
    anchor: str,
    regex: str | None = None,
    status: Status = "fail",
    detail: Callable[[str], str | None] | None = None,
) -> _Pattern:
    return _Pattern(cause, anchor, re.compile(regex) if regex else None, status, detail)


# Specific before generic: the first pattern to match a line claims it.
_PATTERNS: tuple[_Pattern, ...] = (
    _p(
        "driver_mismatch",
        "does not match DSO version",
        detail=_extract(
            r"kernel version (?P<k>[\d.]+) does not match DSO version (?P<d>[\d.]+)",
            "kernel module {k}, libcuda (DSO) {d}",
        ),
    ),
    _p("driver_mismatch", "Driver/library version mismatch"),
    _p("driver_mismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
    _p(
        "driver_older_than_ptx",
        "which is older than the",
        regex=r"CUDA version is [\d.]+ which is older than the",
        detail=_extract(
            r"CUDA version is (?P<d>[\d.]+) which is older than the [\w ]*?version "
            r"\(?(?P<p>[\d.]+)",
            "driver's CUDA {d} < PTX compiler {p}",
        ),
    ),
    _p("driver_older_than_ptx", "CUDA driver version is insufficient for CUDA runtime version"),
    _p("driver_older_than_ptx", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
    _p("tensorflow_gpu_deprecated", '"tensorflow-gpu" package has been removed'),
    _p("tensorflow_gpu_deprecated", "No matching distribution found for tensorflow-gpu"),
    _p("windows_native", "CUDA build is not supported for Windows"),
    _p("cpu_no_avx", "Illegal instruction"),
    _p("cpu_no_avx", "compiled to use AVX instructions, but these aren't available"),
    _p(
        "no_driver_or_hidden",
        "libcuda.so.1",
        regex=r"Could not load dynamic library 'libcuda\.so|libcuda\.so\.1: cannot open",
        detail=_extract(r"(?P<e>libcuda\.so\.1: cannot open[^;]*)", "{e}"),
    ),
    _p(
        "no_driver_or_hidden",
        "failed call to cuInit",
        detail=_extract(r"failed call to cuInit: (?P<e>.{1,160})", "cuInit: {e}"),
    ),
    _p("no_driver_or_hidden", "CUDA_ERROR_NO_DEVICE"),
    _p("no_driver_or_hidden", "kernel driver does not appear to be running on this host"),
    _p("no_driver_or_hidden", "Could not find cuda drivers on your machine"),
    _p("no_driver_or_hidden", "/dev/nvidia0 does not exist"),
    _p(
        "missing_cuda_libs",
        "Could not load dynamic library",
        regex=r"Could not load dynamic library '(?!libnvinfer|nvinfer|libcuda\.)[^']+'",
        detail=_extract(r"Could not load dynamic library '(?P<lib>[^']+)'", "missing {lib}"),
    ),
    _p(
        "missing_cuda_libs",
        "Could not load library ",
        regex=r"Could not load library \S+\. Error:",
        detail=_extract(
            r"Could not load library (?P<lib>\S+)\. Error: (?P<e>.{1,120})", "{lib}: {e}"
        ),
    ),
    _p("missing_cuda_libs", "Cannot dlopen some GPU libraries"),
    _p("missing_cuda_libs", "Skipping registering GPU devices"),
    _p("missing_cuda_libs", "DNN library is not found"),
    _p("cudnn_mismatch", "Loaded runtime CuDNN library", detail=_cudnn_versions),
    _p("cudnn_mismatch", "DNN library initialization failed"),
    _p(
        "cc_too_low",
        "Ignoring visible gpu device",
        regex=r"compute capability [\d.]+\. The minimum required",
        detail=_extract(
            r"name: (?P<n>[^,)]+).*?compute capability (?P<cc>[\d.]+)\. The minimum "
            r"required Cuda capability is (?P<m>[\d.]+)",
            "{n}: compute capability {cc} < minimum {m}",
        ),
    ),
    _p(
        "gpu_too_few_cores",
        "Ignoring visible gpu device",
        regex=r"core count",
        status="warn",
        detail=_extract(
            r"name: (?P<n>[^,)]+).*?core count: (?P<c>\d+)\. The minimum required "
            r"count is (?P<m>\d+)",
            "{n}: {c} multiprocessors < minimum {m}",
        ),
    ),
    _p(
        "cc_too_new",
        "not built with CUDA kernel binaries compatible with compute capability",
        regex=r"compute capability (?:1\d|[2-9]\d)\.\d",
        detail=_extract(r"compute capability (?P<cc>\d+\.\d+)", "compute capability {cc}"),
    ),
    _p(
        "cc_too_new",
        "not built with CUDA kernel binaries compatible with compute capability",
        status="warn",
        detail=_extract(
            r"compute capability (?P<cc>\d+\.\d+)",
            "compute capability {cc}: PTX JIT at start (can take many minutes)",
        ),
    ),
    _p("cc_too_new", "CUDA_ERROR_INVALID_PTX"),
    _p("cc_too_new", "device kernel image is invalid"),
    _p("cc_too_new", "no kernel image is available for execution on the device"),
    _p("xla_libdevice_ptxas", "libdevice not found"),
    _p(
        "xla_libdevice_ptxas",
        "Can't find libdevice directory",
        detail=_extract(r"Can't find libdevice directory (?P<d>\S+)", "looked in {d}"),
    ),
    _p("xla_libdevice_ptxas", "Searched for CUDA in the following directories"),
    _p("xla_libdevice_ptxas", "ptxas not found"),
    _p("xla_libdevice_ptxas", "find ptxas binary"),
    _p("xla_libdevice_ptxas", "Failed to launch ptxas"),
    _p("oom", "OOM when allocating tensor", detail=_oom_shape),
    _p(
        "oom",
        "ran out of memory trying to allocate",
        regex=r"not a failure",
        status="warn",
        detail=_extract(
            r"trying to allocate (?P<s>[\d.]+\s*[KMGT]?i?B)",
            "{s} allocation failed (TensorFlow retried; it may be slower)",
        ),
    ),
    _p(
        "oom",
        "ran out of memory trying to allocate",
        detail=_extract(r"trying to allocate (?P<s>[\d.]+\s*[KMGT]?i?B)", "{s} allocation failed"),
    ),
    _p(
        "oom",
        "CUDA_ERROR_OUT_OF_MEMORY",
        detail=_extract(r"failed to allocate (?P<s>[\d.]+\s*[KMGT]?i?B?)", "{s} allocation failed"),
    ),
    _p(
        "oom",
        "Out of memory while trying to allocate",
        detail=_extract(r"trying to allocate (?P<s>\d+) bytes", "{s} bytes allocation failed"),
    ),
    _p("oom", "CUDNN_STATUS_ALLOC_FAILED"),
    _p("oom", "ResourceExhaustedError"),
    _p(
        "config_after_init",
        "devices cannot be modified after being initialized",
        detail=_extract(
            r"(?P<k>Physical|Virtual|Visible) devices cannot be modified",
            "{k} devices configured after the runtime started",
        ),
    ),
)


# label -> anchors: lines TensorFlow prints on healthy runs too.
_BENIGN: dict[str, tuple[str, ...]] = {
    "duplicate CUDA plugin registration (cuDNN/cuFFT/cuBLAS factory)": (
        "Unable to register cu",
        "computation placer already registered",
    ),
    "NUMA node unknown (normal in VMs and containers)": (
        "NUMA node read from SysFS had negative value",
        "could not open file to read NUMA node",
    ),
    "TensorRT not found (only TF-TRT needs it)": (
        "TF-TRT Warning: Could not find TensorRT",
        "Could not load dynamic library 'libnvinfer",
        "Cannot dlopen some TensorRT libraries",
    ),
    "CPU instructions notice": (
        "This TensorFlow binary is optimized to use available CPU instructions",
        "To enable the following instructions:",
        "Your CPU supports instructions that this TensorFlow binary was not compiled to use",
        "This TensorFlow binary is optimized with oneAPI",
    ),
    "oneDNN notice (results may differ in the last bits)": ("oneDNN custom operations are on",),
    "absl logging not yet initialised": ("All log messages before absl::InitializeLog()",),
    "cudart not found on a machine without a GPU set up": (
        "Ignore above cudart dlerror if you do not have a GPU set up",
    ),
    "TensorFlow created a GPU device": ("Created device /job:",),
    "cuDNN loaded": ("Loaded cuDNN version",),
    "XLA started": ("XLA service 0x", "StreamExecutor device ("),
    "XLA compiled a cluster": ("Compiled cluster using XLA!",),
    "end of a tf.data dataset (normal)": ("OUT_OF_RANGE: End of sequence",),
    "MLIR crash reproducer disabled": ("disabling MLIR crash reproducer",),
    "TF_FORCE_GPU_ALLOW_GROWTH applied": (
        "Overriding orig_value setting because the TF_FORCE_GPU_ALLOW_GROWTH",
    ),
}


# --------------------------------------------------------------------------- results


@dataclass
class LogMatch:
    """One cause found in a log.

    Attributes:
        id: the cause id (the same ids as the rules' findings).
        status: ``fail``, or ``warn`` when only milder messages of it matched.
        title: one line a user reads first.
        fix: the command or change that mends it.
        lines: up to five ``(line_number, text)`` pairs, in file order.
        count: how many lines matched in all.
        details: values read from the lines (missing library names, tensor shapes, versions).
    """

    id: str
    status: Status
    title: str
    fix: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    count: int = 0
    details: list[str] = field(default_factory=list)

    def to_finding(self, source: str = "log") -> Finding:
        """Return this match as a :class:`Finding` (details and lines become its evidence)."""
        evidence = list(self.details)
        evidence += [f"line {number}: {text}" for number, text in self.lines]
        if self.count > len(self.lines):
            evidence.append(f"{self.count} matching lines in all")
        return Finding(self.id, self.status, self.title, evidence, self.fix, source)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "title": self.title,
            "fix": self.fix,
            "count": self.count,
            "lines": [{"line": number, "text": text} for number, text in self.lines],
            "details": list(self.details),
        }


@dataclass
class BenignMatch:
    """Log noise that is not a problem, counted under one label."""

    label: str
    count: int
    first_line: int

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "count": self.count, "first_line": self.first_line}


@dataclass
class LogReport:
    """What the log matcher found.

    Attributes:
        causes: known causes, in the order they first appear.
        benign: noise lines, labelled.
        line_count: lines in the scanned text.
        bytes_scanned: bytes of input that were scanned.
        notes: remarks on the input (which part of a big file was scanned, its encoding).
        source: where the text came from (a path, ``<stdin>``), when known.
    """

    causes: list[LogMatch] = field(default_factory=list)
    benign: list[BenignMatch] = field(default_factory=list)
    line_count: int = 0
    bytes_scanned: int = 0
    notes: list[str] = field(default_factory=list)
    source: str | None = None

    @property
    def matched(self) -> bool:
        """True when at least one known cause matched."""
        return bool(self.causes)

    @property
    def summary(self) -> str:
        """One line: which causes matched, or that none did."""
        if not self.causes:
            return f"no known cause matched; {self.line_count} lines read"
        ids = ", ".join(cause.id for cause in self.causes)
        return f"{len(self.causes)} known cause(s) in {self.line_count} lines: {ids}"

    def findings(self, source: str = "log") -> list[Finding]:
        """Return the causes as findings tagged with ``source``."""
        return [cause.to_finding(source) for cause in self.causes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "matched": self.matched,
            "summary": self.summary,
            "causes": [cause.to_dict() for cause in self.causes],
            "benign": [b.to_dict() for b in self.benign],
            "line_count": self.line_count,
            "bytes_scanned": self.bytes_scanned,
            "notes": list(self.notes),
        }


@dataclass
class LogText:
    """A log read by :func:`read_log_file`: its text (possibly only head and tail) and notes."""

    text: str
    source: str
    size_bytes: int
    bytes_scanned: int
    notes: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """True when part of the input was skipped."""
        return self.bytes_scanned < self.size_bytes


# --------------------------------------------------------------------------- matching


def match_log(text: str | LogText, source: str | None = None) -> LogReport:
    """Find the known causes and the benign noise in a TensorFlow log or traceback.

    Args:
        text: the log text, or a :class:`LogText` from :func:`read_log_file`. Text longer
            than 32 Mi characters is scanned in its first 8 Mi and last 24 Mi characters.
        source: where the text came from, shown in the report.

    Returns:
        A :class:`LogReport`; ``report.matched`` is False when no known cause matched.

    Example:
        >>> match_log("OOM when allocating tensor with shape[64,512,512]").causes[0].id
        'oom'
    """
    if isinstance(text, LogText):
        body, notes, scanned = text.text, list(text.notes), text.bytes_scanned
        source = source or text.source
    else:
        body, notes = _window_chars(text)
        scanned = len(body.encode("utf-8", errors="replace"))
    body = _clean(body)
    causes, benign = _scan(body)
    return LogReport(causes, benign, _count_lines(body), scanned, notes, source)


def _window_chars(text: str) -> tuple[str, list[str]]:
    """Keep the head and tail of a very long string, as :func:`read_log_file` does for files."""
    if len(text) <= FULL_SCAN_LIMIT_BYTES:
        return text, []
    tail = _drop_partial_first_line(text[-TAIL_BYTES:])
    skipped = len(text) - HEAD_BYTES - TAIL_BYTES
    note = (
        f"the text is {len(text):,} characters: scanned the first 8 Mi and the last 24 Mi "
        f"({skipped:,} in between skipped)"
    )
    return text[:HEAD_BYTES] + f"\n[... {skipped:,} characters skipped ...]\n" + tail, [note]


def _clean(text: str) -> str:
    """Strip ANSI colour codes and treat carriage returns (progress bars) as line breaks."""
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


@dataclass
class _Hits:
    """Matches of one cause (or one benign label) while scanning."""

    first_lines: list[tuple[int, str]] = field(default_factory=list)  # (start offset, text)
    count: int = 0
    status: Status = "warn"
    details: dict[str, None] = field(default_factory=dict)  # ordered set

    def add(self, start: int, line: str) -> None:
        """Count a line; keep it if it is among the first ``MAX_LINES_SHOWN`` in the text."""
        self.count += 1
        kept = self.first_lines
        if len(kept) == MAX_LINES_SHOWN and start > kept[-1][0]:
            return
        bisect.insort(kept, (start, _shown(line)))
        del kept[MAX_LINES_SHOWN:]


def _shown(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 3] + "..."


def _lines_with(text: str, anchor: str) -> Iterator[tuple[int, str]]:
    """Yield every line holding ``anchor`` as ``(start offset, line)``, each line once."""
    pos = text.find(anchor)
    while pos != -1:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        end = len(text) if end == -1 else end
        yield start, text[start:end]
        pos = text.find(anchor, end)


def _scan(text: str) -> tuple[list[LogMatch], list[BenignMatch]]:
    claimed: dict[int, str] = {}  # line start -> cause id or benign label
    cause_hits: dict[str, _Hits] = {}
    for pattern in _PATTERNS:
        for start, line in _lines_with(text, pattern.anchor):
            if start in claimed or (pattern.regex and not pattern.regex.search(line)):
                continue
            claimed[start] = pattern.cause
            hits = cause_hits.setdefault(pattern.cause, _Hits())
            hits.add(start, line)
            if pattern.status == "fail":
                hits.status = "fail"
            if pattern.detail and hits.count <= DETAIL_LINES:
                value = pattern.detail(line)
                if value and len(hits.details) < MAX_DETAILS:
                    hits.details[value] = None
    benign_hits: dict[str, _Hits] = {}
    for label, anchors in _BENIGN.items():
        for anchor in anchors:
            for start, line in _lines_with(text, anchor):
                if start not in claimed:
                    claimed[start] = label
                    benign_hits.setdefault(label, _Hits()).add(start, line)
    return _build_results(text, cause_hits, benign_hits)


def _build_results(
    text: str, cause_hits: dict[str, _Hits], benign_hits: dict[str, _Hits]
) -> tuple[list[LogMatch], list[BenignMatch]]:
    shown = {cause: hits.first_lines for cause, hits in cause_hits.items()}
    firsts = {label: hits.first_lines[0][0] for label, hits in benign_hits.items()}
    wanted = [start for lines in shown.values() for start, _ in lines] + list(firsts.values())
    numbers = _line_numbers(text, wanted)
    causes = []
    for cause, hits in cause_hits.items():
        info = CAUSES[cause]
        lines = [(numbers[start], line) for start, line in shown[cause]]
        causes.append(
            LogMatch(
                cause, hits.status, info.title, info.fix, lines, hits.count, list(hits.details)
            )
        )
    causes.sort(key=lambda c: c.lines[0][0])
    benign = [
        BenignMatch(label, hits.count, numbers[firsts[label]])
        for label, hits in benign_hits.items()
    ]
    benign.sort(key=lambda b: b.first_line)
    return causes, benign


def _line_numbers(text: str, starts: list[int]) -> dict[int, int]:
    """Map line start offsets to 1-based line numbers, counting newlines once, in order."""
    numbers: dict[int, int] = {}
    line, previous = 1, 0
    for start in sorted(set(starts)):
        line += text.count("\n", previous, start)
        previous = start
        numbers[start] = line
    return numbers


# --------------------------------------------------------------------------- reading


@dataclass
class _Raw:
    """Bytes read from a file or stream: all of it, or its head and tail."""

    head: bytes
    tail: bytes = b""
    tail_offset: int = 0
    size: int = 0

    @property
    def skipped(self) -> int:
        return self.size - len(self.head) - len(self.tail)


def read_log_file(path: str | os.PathLike[str]) -> LogText:
    """Read a log for :func:`match_log`; ``-`` reads standard input.

    The text is decoded as UTF-8 (undecodable bytes replaced; UTF-16 with a byte-order mark,
    as PowerShell writes, is decoded as such). Inputs over 32 MiB are read in their first
    8 MiB and last 24 MiB only, and the notes say so.

    Args:
        path: the log file, or ``-`` for standard input.

    Returns:
        A :class:`LogText`.

    Raises:
        LogInputError: the file is missing, a directory, unreadable, empty or binary.

    Example:
        >>> log = read_log_file("train.log")  # doctest: +SKIP
        >>> match_log(log).summary  # doctest: +SKIP
    """
    name = os.fspath(path)
    if name == "-":
        return _decode(_read_stdin(), "<stdin>")
    return _decode(_read_path(name), name)


def _read_stdin() -> _Raw:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise _input_error("<stdin>", "cannot be read", "no standard input")
    try:
        return _read_stream(stream)
    except OSError as exc:
        raise _input_error("<stdin>", "cannot be read", str(exc)) from None


def _read_path(name: str) -> _Raw:
    try:
        info = os.stat(name)
    except FileNotFoundError:
        raise _input_error(name, "does not exist", "no such file") from None
    except OSError as exc:
        raise _unreadable(name, exc) from None
    if stat.S_ISDIR(info.st_mode):
        raise _input_error(name, "is a directory", "a directory")
    try:
        with open(name, "rb") as fh:
            if stat.S_ISREG(info.st_mode):
                return _read_regular(fh, info.st_size)
            return _read_stream(fh)
    except OSError as exc:
        raise _unreadable(name, exc) from None


def _read_regular(fh: IO[bytes], size: int) -> _Raw:
    """Read a whole small file, or seek to read only the head and tail of a big one."""
    if size <= FULL_SCAN_LIMIT_BYTES:
        data = fh.read(FULL_SCAN_LIMIT_BYTES)
        return _Raw(data, size=len(data))
    head = fh.read(HEAD_BYTES)
    fh.seek(size - TAIL_BYTES)
    tail = fh.read(TAIL_BYTES)
    return _Raw(head, tail, size - TAIL_BYTES, size)


def _read_stream(fh: IO[bytes]) -> _Raw:
    """Read a stream that cannot seek, keeping the head and a rolling tail."""
    head = _read_up_to(fh, FULL_SCAN_LIMIT_BYTES)
    if len(head) < FULL_SCAN_LIMIT_BYTES:
        return _Raw(head, size=len(head))
    tail = bytearray(head[HEAD_BYTES:])
    head = head[:HEAD_BYTES]
    total = FULL_SCAN_LIMIT_BYTES
    while chunk := fh.read(MIB):
        total += len(chunk)
        tail += chunk
        if len(tail) > 2 * TAIL_BYTES:
            del tail[: len(tail) - TAIL_BYTES]
    kept = bytes(tail[-TAIL_BYTES:])
    return _Raw(head, kept, total - len(kept), total)


def _read_up_to(fh: IO[bytes], limit: int) -> bytes:
    parts, got = [], 0
    while got < limit:
        chunk = fh.read(min(MIB, limit - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _decode(raw: _Raw, source: str) -> LogText:
    if raw.size == 0:
        raise _input_error(source, "is empty", "an empty file (0 bytes)")
    encoding = _encoding(raw.head)
    sniff = raw.head[:SNIFF_BYTES]
    if encoding == "utf-8" and b"\x00" in sniff:
        raise _input_error(source, "is binary", "binary data (NUL bytes in the first 64 KiB)")
    sample = sniff.decode(encoding, errors="replace")
    bad = sample.count("\ufffd") / max(len(sample), 1)
    if bad > UNDECODABLE_LIMIT:
        raise _input_error(
            source, "is not text", f"bytes that are mostly not UTF-8 text ({bad:.0%} undecodable)"
        )
    text = raw.head.decode(encoding, errors="replace")
    notes = [f"decoded as {encoding} (byte-order mark)"] if encoding != "utf-8" else []
    if raw.tail:
        head_lines = _count_lines(text)
        tail = _tail_bytes(raw, encoding).decode(_tail_encoding(encoding), errors="replace")
        text = _join_head_tail(text, tail, raw.skipped)
        if raw.skipped > 0:
            notes.append(_partial_note(source, raw, head_lines))
    if not text.strip():
        raise _input_error(source, "holds only whitespace", f"{raw.size} bytes of whitespace")
    return LogText(text, source, raw.size, len(raw.head) + len(raw.tail), notes)


def _encoding(head: bytes) -> str:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    return "utf-8"


def _tail_bytes(raw: _Raw, encoding: str) -> bytes:
    """UTF-16 code units are two bytes: start the tail on an even offset."""
    if encoding == "utf-16" and raw.tail_offset % 2:
        return raw.tail[1:]
    return raw.tail


def _tail_encoding(encoding: str) -> str:
    """The tail has no byte-order mark of its own."""
    if encoding == "utf-16":
        return "utf-16-le"  # PowerShell and Windows tools write little-endian
    return "utf-8"


def _join_head_tail(head: str, tail: str, skipped: int) -> str:
    if skipped <= 0:
        return head + tail
    return head + f"\n[... {skipped:,} bytes skipped ...]\n" + _drop_partial_first_line(tail)


def _drop_partial_first_line(tail: str) -> str:
    newline = tail.find("\n")
    return tail[newline + 1 :] if newline != -1 else tail


def _partial_note(source: str, raw: _Raw, head_lines: int) -> str:
    return (
        f"{source} is {raw.size / MIB:.1f} MiB: scanned the first {len(raw.head) / MIB:.0f} MiB "
        f"and the last {len(raw.tail) / MIB:.0f} MiB ({raw.skipped / MIB:.1f} MiB in between "
        f"skipped); line numbers after line {head_lines} count lines of the scanned text, "
        "not of the file"
    )


def _input_error(source: str, what: str, received: str) -> LogInputError:
    label = "Standard input" if source == "<stdin>" else f"The log file {source!r}"
    return LogInputError(
        f"{label} {what}",
        expected="a text file with TensorFlow's output (its stderr) or a Python traceback",
        received=received,
        fix=_HOW_TO_SAVE,
    )


def _unreadable(name: str, exc: OSError) -> LogInputError:
    quoted = shlex.quote(name)
    return LogInputError(
        f"The log file {name!r} cannot be read",
        expected="a file this user may read",
        received=exc.strerror or str(exc),
        fix=f"chmod u+r {quoted}, or pipe it in: sudo cat {quoted} | tfaccel doctor --log -",
    )
