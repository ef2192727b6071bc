"""Capture a TensorFlow Profiler trace and read it: top ops by self time, copies, busy time.

Capture: ``tf.profiler.experimental.start(DIR)`` / ``stop()``, with a ``Trace("train",
step_num=N, _r=1)`` marker around each step so the TensorFlow Profiler's step-based pages
(overview, input pipeline) work; TensorBoard shows the trace (``tensorboard --logdir DIR``,
Profile tab, with the ``tensorboard-plugin-profile`` package).

Reading: the trace is ``DIR/plugins/profile/<run>/<host>.xplane.pb``. TensorFlow ships the
converter the Profiler's "framework op stats" page uses
(``tensorflow.python.profiler.internal._pywrap_profiler_plugin.xspace_to_tools_data``, a
private module): it gives, per TensorFlow op, where it ran (host or device), how often, its
total and self time. The "kernel_stats" tool gives, on GPUs, which kernels used tensor cores.
Busy time per GPU comes from the ``Stream`` lines of each ``/device:GPU:N`` plane of the
XSpace protobuf (``tensorflow/tsl/profiler/protobuf/xplane_pb2``). Where the converter is
missing (another TensorFlow version), :class:`TraceSummary.error` says so and no op is
listed: nothing is guessed.
"""

from __future__ import annotations

import contextlib
import json
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tfaccel.core.errors import TfaccelError, argument
from tfaccel.core.files import nearest_existing, os_reason, try_writing_in

__all__ = [
    "OpStat",
    "TraceError",
    "TraceSummary",
    "check_logdir",
    "device_busy_us",
    "find_xspace",
    "parse_kernel_stats",
    "parse_op_stats",
    "read_trace",
    "start",
    "step_marker",
    "stop",
]

STEP_NAME = "train"
_COPY_TYPES = ("memcpyhtod", "memcpydtoh")
_COLLECTIVE_WORDS = ("allreduce", "collective", "nccl", "allgather", "reducescatter")


class TraceError(TfaccelError):
    """The profiler cannot start, stop, or write its trace."""


def check_logdir(logdir: str | Path) -> Path:
    """Check, before any training, that the profiler can write its trace under ``logdir``.

    ``logdir`` must be a directory or not exist yet; the nearest existing directory above it
    must accept a new file (tried with a temporary file, removed at once, so a read-only
    directory or file system is found now). Nothing is left behind: a missing ``logdir`` is
    created by the profiler when the trace starts.

    Returns:
        ``logdir`` as a Path (``~`` expanded).

    Raises:
        TraceError: ``logdir`` is a file, a parent is a file, or nothing can be written there;
            the message names the path and the argument (``--trace`` on the command line).
    """
    flag = argument("trace_dir")
    path = Path(logdir).expanduser()
    fix = f"pass {flag} with a directory you can write, e.g. {argument('trace_dir', 'traces')}"
    try:
        found = nearest_existing(path)
    except (OSError, ValueError) as exc:
        raise _logdir_error(path, os_reason(exc), fix) from None
    existing = found[0] if found is not None else path
    if found is not None and not stat.S_ISDIR(found[1].st_mode):
        what = "is a file" if existing == path else f"is under {str(existing)!r}, a file"
        raise TraceError(
            f"The trace directory {str(path)!r} ({flag}) {what}",
            expected="a directory (created when missing) for the TensorFlow Profiler's files",
            received=f"{str(existing)!r} is not a directory",
            fix=fix,
        )
    try:
        try_writing_in(existing, prefix=".tfaccel-trace-check.")
    except (OSError, ValueError) as exc:
        raise _logdir_error(path, f"{str(existing)!r}: {os_reason(exc)}", fix) from None
    return path


def _logdir_error(path: Path, received: str, fix: str) -> TraceError:
    return TraceError(
        f"The trace cannot be written to {str(path)!r} ({argument('trace_dir')})",
        expected="a directory that exists or can be created, and can be written",
        received=received,
        fix=fix,
    )


def start(logdir: str | Path) -> None:
    """Start the TensorFlow Profiler, writing under ``logdir``.

    Raises:
        TraceError: ``logdir`` cannot be written (:func:`check_logdir`), a profiler session
            is already running, or the profiler cannot start.
    """
    check_logdir(logdir)
    import tensorflow as tf

    try:
        tf.profiler.experimental.start(str(logdir))
    except (tf.errors.AlreadyExistsError, tf.errors.UnavailableError) as exc:
        raise TraceError(
            "The TensorFlow Profiler cannot start: another profiling session is running",
            expected="no other trace (Keras TensorBoard(profile_batch=...), another profiler)",
            received=str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
            fix="remove profile_batch from the TensorBoard callback, or drop --trace",
        ) from None


def stop() -> None:
    """Stop the profiler and write the trace.

    Raises:
        TraceError: no profiler session was running.
    """
    import tensorflow as tf

    try:
        tf.profiler.experimental.stop()
    except tf.errors.UnavailableError as exc:
        raise TraceError(
            "The TensorFlow Profiler was not running when the trace was to be written",
            expected="a session started by tfaccel",
            received=str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
            fix="do not stop the profiler from the script while tfaccel traces",
        ) from None


@contextlib.contextmanager
def step_marker(step: int) -> Iterator[None]:
    """Mark one training step in the trace (the Profiler's step boundaries)."""
    import tensorflow as tf

    with tf.profiler.experimental.Trace(STEP_NAME, step_num=step, _r=1):
        yield


@dataclass(frozen=True)
class OpStat:
    """One TensorFlow op type/name in the trace; times in microseconds over the traced steps."""

    name: str
    type: str
    where: str  # "Host" or "Device"
    occurrences: int
    self_time_us: float
    total_time_us: float


@dataclass
class TraceSummary:
    """What was read from one trace.

    Attributes:
        path: the .xplane.pb file read.
        steps: steps traced (to turn totals into per-step figures).
        ops: ops sorted by self time (idle time excluded).
        idle_us: self time of the profiler's "IDLE" rows, per "Host"/"Device".
        tensor_core_share: share of GPU kernel time in kernels that used tensor cores.
        device_busy_us: per GPU plane, time with at least one kernel or copy running.
        error: why ops are missing, when they are.
    """

    path: str | None
    steps: int
    ops: list[OpStat] = field(default_factory=list)
    idle_us: dict[str, float] = field(default_factory=dict)
    tensor_core_share: float | None = None
    device_busy_us: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def top(self, n: int = 10) -> list[OpStat]:
        return self.ops[:n]

    def has_device_ops(self) -> bool:
        return any(op.where == "Device" for op in self.ops)

    def self_time_us(self, where: str) -> float:
        return sum(op.self_time_us for op in self.ops if op.where == where)

    def copy_us(self) -> tuple[float, int]:
        """Device time and count of host<->device copies (op types MemcpyHToD/MemcpyDToH)."""
        copies = [op for op in self.ops if op.type.lower().replace("_", "") in _COPY_TYPES]
        return sum(op.self_time_us for op in copies), sum(op.occurrences for op in copies)

    def collective_us(self) -> float:
        """Self time of collective ops (all-reduce, NCCL, collective reduce/gather)."""
        return sum(
            op.self_time_us
            for op in self.ops
            if any(word in (op.type + op.name).lower() for word in _COLLECTIVE_WORDS)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "steps": self.steps,
            "top_ops": [asdict(op) for op in self.top(20)],
            "ops_listed": len(self.ops),
            "idle_us": self.idle_us,
            "tensor_core_share": self.tensor_core_share,
            "device_busy_us": self.device_busy_us,
            "error": self.error,
        }


def find_xspace(logdir: str | Path) -> Path | None:
    """The newest ``*.xplane.pb`` under ``logdir`` (None when there is none)."""
    files = sorted(
        Path(logdir).glob("plugins/profile/*/*.xplane.pb"), key=lambda p: p.stat().st_mtime
    )
    if not files:
        files = sorted(Path(logdir).rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    return files[-1] if files else None


def read_trace(logdir: str | Path, steps: int) -> TraceSummary:
    """Read the newest trace under ``logdir``.

    Args:
        logdir: the directory given to :func:`start`.
        steps: how many steps were traced.

    Returns:
        A TraceSummary; ``error`` set (and no ops) when the trace or the converter is missing.
    """
    path = find_xspace(logdir)
    if path is None:
        return TraceSummary(None, steps, error=f"no .xplane.pb trace under {logdir}")
    summary = TraceSummary(str(path), steps)
    try:
        from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin
    except ImportError as exc:
        summary.error = (
            f"this TensorFlow has no trace converter ({exc}); open the trace in TensorBoard"
        )
        return summary
    data, ok = plugin.xspace_to_tools_data([str(path)], "framework_op_stats", {})
    if not ok:
        summary.error = f"the trace converter failed: {_text(data)[:200]}"
        return summary
    summary.ops, summary.idle_us = parse_op_stats(data)
    kernels, ok = plugin.xspace_to_tools_data([str(path)], "kernel_stats", {})
    if ok:
        summary.tensor_core_share = parse_kernel_stats(kernels)
    summary.device_busy_us = device_busy_us(path.read_bytes())
    return summary


def _text(data: Any) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)


def _rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    ids = [c["id"] for c in table.get("cols", [])]
    return [
        dict(zip(ids, (cell.get("v") if cell else None for cell in row.get("c", [])), strict=False))
        for row in table.get("rows", [])
    ]


def parse_op_stats(data: bytes | str) -> tuple[list[OpStat], dict[str, float]]:
    """Ops and idle time from the converter's ``framework_op_stats`` JSON (a list of Google
    DataTables; the first includes the IDLE rows)."""
    tables = json.loads(_text(data))
    if not isinstance(tables, list) or not tables:
        return [], {}
    ops: list[OpStat] = []
    idle: dict[str, float] = {}
    for row in _rows(tables[0]):
        where = str(row.get("host_or_device") or "")
        self_us = float(row.get("total_self_time") or 0.0)
        if row.get("type") == "IDLE":
            idle[where] = idle.get(where, 0.0) + self_us
            continue
        ops.append(
            OpStat(
                name=str(row.get("operation") or ""),
                type=str(row.get("type") or ""),
                where=where,
                occurrences=int(row.get("occurrences") or 0),
                self_time_us=self_us,
                total_time_us=float(row.get("total_time") or 0.0),
            )
        )
    ops.sort(key=lambda op: op.self_time_us, reverse=True)
    return ops, idle


def parse_kernel_stats(data: bytes | str) -> float | None:
    """Share of GPU kernel time in kernels using tensor cores (``kernel_stats`` JSON), or None
    when there is no kernel (a CPU-only trace)."""
    tables = json.loads(_text(data))
    table = tables[0] if isinstance(tables, list) and tables else tables
    if not isinstance(table, dict):
        return None
    total = tensor = 0.0
    for row in _rows(table):
        duration = float(row.get("total_duration_us") or 0.0)
        total += duration
        if row.get("is_kernel_using_tensor_core"):
            tensor += duration
    return tensor / total if total > 0 else None


def device_busy_us(xspace: bytes) -> dict[str, float]:
    """Per ``/device:GPU:N`` plane, microseconds in which a ``Stream`` line had an event."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(xspace)
    busy: dict[str, float] = {}
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        spans: list[tuple[int, int]] = []
        for line in plane.lines:
            if not line.name.startswith("Stream"):
                continue
            base_ps = line.timestamp_ns * 1000
            spans += [
                (base_ps + e.offset_ps, base_ps + e.offset_ps + e.duration_ps) for e in line.events
            ]
        if spans:
            busy[plane.name] = _union_ps(spans) / 1e6
    return busy


def _union_ps(spans: list[tuple[int, int]]) -> int:
    total = 0
    current_start = current_end = None
    for begin, end in sorted(spans):
        if current_end is None or begin > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = begin, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total
