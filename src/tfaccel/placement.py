"""Where a training step's ops run, what it copies between devices, and Python work inside it.

``audit(fn, *args)`` reads the step three ways:

1. its Python code (bytecode), for ``.numpy()`` calls and NumPy functions: both run in Python
   on the host, and inside a ``tf.function`` they fail or run only once, at trace time;
2. its traced graph, for ``tf.py_function`` / ``tf.numpy_function`` ops (Python called back
   on every step);
3. one real call with TensorFlow's graph collection on, whose placed partition graphs give
   the device of every op (after soft placement) and the ``_Send``/``_Recv`` pairs, i.e. the
   copies between devices on each call.

The audit runs the step once: a train step updates the weights once. Each problem is a
:class:`~tfaccel.core.findings.Finding` (source ``placement``): ``fail`` when the step did not trace
or run, ``warn`` for work that slows every step. Their ids are stable: ``not_tf_function``,
``numpy_conversion``, ``numpy_call``, ``py_function``, ``trace_failed``, ``run_failed``,
``cpu_fallback``, ``off_target``.

Example:
    >>> import tensorflow as tf
    >>> from tfaccel import placement
    >>> @tf.function
    ... def step(x):
    ...     return tf.reduce_sum(x * 2.0)
    >>> report = placement.audit(step, tf.ones((8, 8)))
    >>> report.findings
    []
    >>> print(report)   # ops per device, ops off the target device, copies per call
"""

from __future__ import annotations

import dis
import importlib
import inspect
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfaccel.core.checks import check_callable, check_text
from tfaccel.core.errors import UsageError
from tfaccel.core.findings import Finding, Status, text_lines
from tfaccel.core.records import to_json
from tfaccel.runtime import on_device

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["PY_FUNC_OPS", "AuditReport", "PlacedOp", "Transfer", "audit"]

PY_FUNC_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
"""Graph ops that call back into Python (``tf.py_function``, ``tf.numpy_function``)."""

# Ops that move arguments, results and tensors, not computation: not counted as placed ops.
_PLUMBING_OPS = frozenset(
    {"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "_Send", "_Recv", "_HostSend", "_HostRecv"}
    | {"NoOp"}
)
_SEND_OPS = frozenset({"_Send", "_HostSend"})
_ACCELERATORS = ("GPU", "TPU")
_STEP_EXPECTED = "a tf.function, a Python function or a Keras model"


@dataclass(frozen=True)
class PlacedOp:
    """One op of the step and the device it ran on ("CPU:0")."""

    name: str
    op: str
    device: str


@dataclass(frozen=True)
class Transfer:
    """Tensors copied from one device to another on each call of the step."""

    source: str
    destination: str
    count: int

    @property
    def host_device(self) -> bool:
        """One end is the host CPU and the other an accelerator."""
        kinds = {_kind(self.source), _kind(self.destination)}
        return "CPU" in kinds and bool(kinds & set(_ACCELERATORS))


@dataclass
class AuditReport:
    """What ``audit`` found.

    Attributes:
        step: what was audited ("tf.function 'train_step'").
        target: the device the step was meant to run on ("GPU:0").
        ran: the step was traced and run, so the placement below is known.
        ops_per_device: device -> number of ops placed there (argument/result/copy plumbing
            not counted).
        off_target_ops: the ops that ran somewhere other than ``target``.
        transfers: the copies between devices on each call.
        findings: what costs time or fails; empty for a clean step.
        note: why the placement is unknown, when it is.
    """

    step: str
    target: str
    ran: bool = False
    ops_per_device: dict[str, int] = field(default_factory=dict)
    off_target_ops: list[PlacedOp] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    note: str | None = None

    @property
    def host_device_copies(self) -> int:
        """Copies between the host CPU and an accelerator on each call."""
        return sum(t.count for t in self.transfers if t.host_device)

    @property
    def clean(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {**to_json(self), "host_device_copies": self.host_device_copies}

    def __str__(self) -> str:
        lines = [f"placement audit of {self.step} (target {self.target}):"]
        if self.ran:
            per_device = ", ".join(f"{d}: {n}" for d, n in sorted(self.ops_per_device.items()))
            lines.append(f"  ops per device: {per_device or 'none'}")
            lines.append(f"  ops off the target: {_summarise(self.off_target_ops) or 'none'}")
            copies = ", ".join(f"{t.source} -> {t.destination}: {t.count}" for t in self.transfers)
            lines.append(f"  copies between devices per call: {copies or 'none'}")
            lines.append(f"  host<->device copies per call: {self.host_device_copies}")
        else:
            lines.append(f"  placement unknown: {self.note or 'the step did not trace or run'}")
        if not self.findings:
            lines.append("  findings: none")
        lines += text_lines(self.findings)
        return "\n".join(lines)


def audit(fn: Any, *args: Any, target: str | None = None, **kwargs: Any) -> AuditReport:
    """Audit one training step: placement, copies, and Python-side work inside it.

    Args:
        fn: a ``tf.function``, a plain Python step function, or a Keras model. A compiled model
            given ``x, y`` is audited through its train step (``model.train_step((x, y))``),
            otherwise through its forward pass.
        *args: the step's arguments (a batch); NumPy arrays are converted to tensors first.
        target: the device the step should run on ("GPU:0"); default: the first GPU, else
            "CPU:0". The step runs under ``tf.device(target)``.
        **kwargs: keyword arguments of the step.

    Returns:
        An AuditReport. ``report.findings`` is empty for a clean step.

    Raises:
        UsageError: ``fn`` cannot be called, or ``target`` is not a device name (checked
            before TensorFlow is imported).
        RuntimeSetupError: ``target`` is not a device TensorFlow has.

    Example:
        >>> report = audit(model, x_batch, y_batch)      # a compiled Keras model
        >>> [f.id for f in report.findings]
        []
    """

    where = "tfaccel.placement.audit"
    check_callable("fn", fn, where=where, expected=_STEP_EXPECTED)
    if target is not None:
        check_text(
            "target",
            target,
            where=where,
            expected="a device name such as 'GPU:0' or 'CPU:0', or None for the default",
            fix="pass target='GPU:0', or leave it out",
        )
    tf = importlib.import_module("tensorflow")
    target = target if target is not None else _default_target(tf)
    placement_scope = on_device(target)
    step = _resolve(tf, fn, args)
    short = _short(target)
    report = AuditReport(step=step.description, target=short if ":" in short else f"{short}:0")
    report.findings += step.findings + _python_findings(step.python_functions)
    args = tf.nest.map_structure(_as_tensor(tf), args)
    try:
        with placement_scope:
            concrete = step.function.get_concrete_function(*args, **kwargs)
    except Exception as exc:  # the user's code failed to trace; that is the finding
        doing = "tracing the step into a graph" if step.is_graph else "tracing it as a tf.function"
        report.findings.append(_failure("trace_failed", doing, exc))
        return report
    report.findings += _py_function_findings(concrete.graph)
    try:
        placed, transfers = _run_placed(tf, step.function, args, kwargs, target)
    except Exception as exc:  # a step that traces but fails to run; that is the finding
        report.findings.append(_failure("run_failed", "running the step once", exc))
        return report
    if not placed:
        report.note = (
            "TensorFlow reported no placed graph for the step (an XLA-compiled function, "
            "jit_compile=True, runs as one cluster on the target device)"
        )
        return report
    report.ran = True
    report.ops_per_device = dict(Counter(op.device for op in placed))
    report.off_target_ops = [op for op in placed if op.device != report.target]
    report.transfers = transfers
    report.findings += _placement_findings(report.off_target_ops, report.target)
    return report


# --------------------------------------------------------------------------- the step


@dataclass
class _Step:
    description: str
    function: Any  # a fresh tf.function, so its graphs are collected when it first runs
    python_functions: list[Any]
    findings: list[Finding] = field(default_factory=list)
    is_graph: bool = True  # False: the user's step runs eagerly; the audit traces a copy


def _resolve(tf: ModuleType, fn: Any, args: tuple[Any, ...]) -> _Step:
    if callable(getattr(fn, "train_step", None)) and hasattr(fn, "layers"):  # Keras 3 or tf_keras
        return _keras_step(tf, fn, args)
    if hasattr(fn, "python_function") and hasattr(fn, "get_concrete_function"):
        fresh = tf.function(
            fn.python_function,
            input_signature=getattr(fn, "input_signature", None),
            jit_compile=getattr(fn, "_jit_compile", None),
        )
        return _Step(f"tf.function {_name(fn.python_function)!r}", fresh, [fn.python_function])
    if not callable(fn):
        raise UsageError(
            "audit() needs a step to run",
            expected=_STEP_EXPECTED,
            received=type(fn).__name__,
            fix="pass the function that runs one training step, and its arguments",
        )
    eager = _finding(
        "not_tf_function",
        "warn",
        f"{_name(fn)!r} is a plain Python function: each op is dispatched from Python, one by "
        "one, on every step",
        "decorate it with @tf.function (after removing .numpy() and NumPy calls from it)",
    )
    return _Step(f"Python function {_name(fn)!r}", tf.function(fn), [fn], [eager], False)


def _keras_step(tf: ModuleType, model: Any, args: tuple[Any, ...]) -> _Step:
    findings = []
    if getattr(model, "run_eagerly", False):
        findings.append(
            _finding(
                "not_tf_function",
                "warn",
                f"model {model.name!r} is compiled with run_eagerly=True: each step runs op by "
                "op from Python",
                "compile without run_eagerly=True",
            )
        )
    own = [
        method
        for method in (type(model).train_step, type(model).call)
        if not getattr(method, "__module__", "").startswith(("keras", "tensorflow", "tf_keras"))
    ]
    if getattr(model, "compiled", False) and len(args) >= 2:
        function = tf.function(lambda *data: model.train_step(data))
        return _Step(f"train step of Keras model {model.name!r}", function, own, findings)
    function = tf.function(lambda *inputs: model(*inputs, training=False))
    return _Step(f"forward pass of Keras model {model.name!r}", function, own, findings)


def _default_target(tf: ModuleType) -> str:
    gpus = tf.config.list_logical_devices("GPU")
    return "GPU:0" if gpus else "CPU:0"


def _as_tensor(tf: ModuleType) -> Callable[[Any], Any]:
    numpy = sys.modules.get("numpy")

    def convert(value: Any) -> Any:
        if numpy is not None and isinstance(value, numpy.ndarray):
            return tf.convert_to_tensor(value)
        return value

    return convert


# --------------------------------------------------------------------------- Python code


def _python_findings(functions: list[Any]) -> list[Finding]:
    findings: list[Finding] = []
    for function in functions:
        for finding in _scan_function(function):
            if finding not in findings:
                findings.append(finding)
    return findings


def _scan_function(function: Any) -> Iterator[Finding]:
    """Read a function's bytecode for ``.numpy`` and NumPy calls (nested functions included)."""
    function = inspect.unwrap(getattr(function, "__func__", function))
    code = getattr(function, "__code__", None)
    if code is None:
        call = type(function).__call__ if callable(function) else None
        code = getattr(call, "__code__", None)
        function = call
    if code is None:
        return
    names = _visible_names(function)
    for inner in _code_objects(code):
        instructions = list(dis.get_instructions(inner))
        line = inner.co_firstlineno
        for i, ins in enumerate(instructions):
            line = _line(ins) or line
            where = f"{_name(function)} ({inner.co_filename}:{line})"
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and ins.argval == "numpy":
                yield _numpy_conversion(where)
            elif ins.opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME"):
                following = instructions[i + 1] if i + 1 < len(instructions) else None
                called = _numpy_callable(names.get(str(ins.argval)), following)
                if called:
                    yield _numpy_call(called, where)


def _visible_names(function: Any) -> dict[str, Any]:
    names = dict(getattr(function, "__globals__", {}))
    code, closure = getattr(function, "__code__", None), getattr(function, "__closure__", None)
    if code is not None and closure:
        for name, cell in zip(code.co_freevars, closure, strict=True):
            try:
                names[name] = cell.cell_contents
            except ValueError:  # an empty cell: the variable is not bound yet
                continue
    return names


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _line(ins: dis.Instruction) -> int | None:
    positions = getattr(ins, "positions", None)
    if positions is not None and positions.lineno:
        return int(positions.lineno)
    start = ins.starts_line
    return start if isinstance(start, int) and not isinstance(start, bool) else None


def _numpy_callable(value: Any, following: dis.Instruction | None) -> str | None:
    """'np.mean' when ``value`` (followed by ``following``) is a NumPy function, else None."""
    if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] == "numpy":
        if following is None or following.opname not in ("LOAD_ATTR", "LOAD_METHOD"):
            return None
        attr = getattr(value, str(following.argval), None)
        if callable(attr) and not isinstance(attr, type):
            return f"{value.__name__}.{following.argval}"
        return None
    module = getattr(value, "__module__", None) or ""
    if callable(value) and not isinstance(value, type) and module.split(".")[0] == "numpy":
        return f"numpy.{getattr(value, '__name__', '?')}"
    return None


def _numpy_conversion(where: str) -> Finding:
    return _finding(
        "numpy_conversion",
        "warn",
        f"{where} calls .numpy(): it copies the tensor to the host and waits for the device "
        "on every step, and fails inside a tf.function",
        "keep the value a tensor (tf ops instead of NumPy); read it back only for logging, "
        "outside the step",
    )


def _numpy_call(called: str, where: str) -> Finding:
    return _finding(
        "numpy_call",
        "warn",
        f"{where} calls {called}: NumPy runs in Python on the host (inside a tf.function it "
        "runs once, at trace time, or fails on a symbolic tensor)",
        f"use the TensorFlow op instead (tf.math / tf.experimental.numpy) of {called}",
    )


# --------------------------------------------------------------------------- graphs


def _py_function_findings(graph: Any) -> list[Finding]:
    graph_def = graph.as_graph_def()
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes += list(function.node_def)
    calls = sorted({f"{n.op} '{n.name}'" for n in nodes if n.op in PY_FUNC_OPS})
    if not calls:
        return []
    return [
        _finding(
            "py_function",
            "warn",
            f"the step calls back into Python through {', '.join(calls)}: it runs in the "
            "interpreter on the host, holding the GIL, on every step",
            "replace tf.py_function / tf.numpy_function with TensorFlow ops",
        )
    ]


def _run_placed(
    tf: ModuleType, function: Any, args: tuple[Any, ...], kwargs: dict[str, Any], target: str
) -> tuple[list[PlacedOp], list[Transfer]]:
    """Run the step once with graph collection on; read its placed partition graphs."""
    from tensorflow.python.eager import context

    ctx = context.context()
    ctx.enable_graph_collection()
    try:
        with tf.device(target):
            function(*args, **kwargs)
        metadata = ctx.export_run_metadata()
    finally:
        ctx.disable_graph_collection()
    nodes = [
        node
        for function_graph in metadata.function_graphs
        for partition in function_graph.partition_graphs
        for node in partition.node
    ]
    placed = [
        PlacedOp(node.name, node.op, _short(node.device))
        for node in nodes
        if node.op not in _PLUMBING_OPS
    ]
    copies = Counter(
        (_short(_attr(node, "send_device")), _short(_attr(node, "recv_device")))
        for node in nodes
        if node.op in _SEND_OPS
    )
    transfers = [Transfer(src, dst, n) for (src, dst), n in sorted(copies.items())]
    return placed, transfers


def _attr(node: Any, name: str) -> str:
    value = node.attr[name].s
    return value.decode() if isinstance(value, bytes) else str(value)


def _placement_findings(off_target: list[PlacedOp], target: str) -> list[Finding]:
    if not off_target:
        return []
    if _kind(target) in _ACCELERATORS:
        on_cpu = [op for op in off_target if _kind(op.device) == "CPU"]
        if on_cpu:
            return [
                _finding(
                    "cpu_fallback",
                    "warn",
                    f"{len(on_cpu)} op(s) fell back to the CPU while {target} was the target: "
                    f"{_summarise(on_cpu)}",
                    "find ops without a GPU kernel (string, some int64 ops), tf.device('CPU') "
                    "scopes and variables created on the CPU; "
                    "tf.debugging.set_log_device_placement(True) logs each placement",
                )
            ]
    return [
        _finding(
            "off_target",
            "warn",
            f"{len(off_target)} op(s) ran elsewhere than {target}: {_summarise(off_target)}",
            "check tf.device scopes in the step and where its variables were created",
        )
    ]


# --------------------------------------------------------------------------- helpers


def _failure(finding_id: str, doing: str, exc: BaseException) -> Finding:
    text = str(exc).strip().splitlines()
    detail = text[-1].strip() if text else ""
    if not detail.startswith(type(exc).__name__):
        detail = f"{type(exc).__name__}: {detail}".rstrip(": ")
    return _finding(
        finding_id,
        "fail",
        f"{doing} failed: {detail}",
        "fix the error above; .numpy(), NumPy calls and Python control flow on tensor values "
        "fail inside a tf.function",
    )


def _finding(finding_id: str, status: Status, title: str, fix: str) -> Finding:
    return Finding(finding_id, status, title, fix=fix, source="placement")


def _summarise(ops: list[PlacedOp]) -> str:
    counts = Counter(f"{op.op}@{op.device}" for op in ops)
    return ", ".join(f"{key} x{n}" if n > 1 else key for key, n in sorted(counts.items()))


def _short(device: str) -> str:
    """'/job:localhost/replica:0/task:0/device:CPU:0' or '/gpu:0' -> 'CPU:0' / 'GPU:0'."""
    last = device.rsplit("/", 1)[-1]
    parts = last.split(":")
    if len(parts) >= 2 and parts[-1].isdigit():
        return f"{parts[-2].upper()}:{parts[-1]}"
    return last.upper()


def _kind(device: str) -> str:
    return device.split(":", 1)[0]


def _name(function: Any) -> str:
    return str(getattr(function, "__qualname__", None) or getattr(function, "__name__", function))
