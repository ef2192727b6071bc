"""The memory of one training step, simulated over the traced step (pure Python).

The step's operations run in graph order; each output takes a buffer when its operation runs
and gives it back after the last operation that reads it. A view (``Reshape``,
``ReadVariableOp``...) shares its input's buffer; a unary element-wise operation writes over an
input buffer of its own size that nothing reads later (TensorFlow's
``forward_input_or_allocate_output``). What the graph does not size is added by rule: a While
loop's TensorLists (one buffer per iteration, see :func:`tfaccel.planning.trace._tensor_lists`)
and the buffers of its iterations in flight (:func:`tfaccel.planning.trace._in_flight`), an
operation's own temporaries (an Einsum's transposed operands) and, on a CPU, the float32 copies
a 16-bit MatMul is computed in (:data:`UPCAST_16_BIT`) and the work buffers of 16-bit
convolution and pooling gradients (:func:`tfaccel.planning.trace._cpu_16_bit_buffers`), held
while the operation runs. Operations the step does not need are not in the trace
(:func:`tfaccel.planning.trace._needed`). The variables (weights, optimizer slots, metric
state) live throughout. The peak of that simulation, split by what each live buffer is, is the
prediction; an allocator's own rules (:class:`AllocatorRules`: the size it rounds to, and for
the CPU's oneDNN allocator the allocations below 256 KiB it serves from a pool that
``get_memory_info`` does not count) are applied so that the prediction is comparable to what
that allocator reports.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tfaccel.planning.bfc import Event, replay
from tfaccel.planning.trace import (
    AHEAD,
    ALIASING,
    BODY,
    CPU_16_BIT,
    SUMMAND_INPUT,
    SUMMED,
    OpInfo,
    StepGraph,
    TensorInfo,
)

__all__ = [
    "CPU_ONEDNN_RULES",
    "FRAGMENTATION_MARGIN",
    "GPU_BFC_RULES",
    "PARTS",
    "RAM_RULES",
    "AllocatorRules",
    "MemoryEstimate",
    "fit_rules",
    "simulate",
]

# Element-wise operations that may write their output over a dying input of the same size:
# unary ones (and their gradients, BiasAdd). Binary ones with two tensor operands (AddV2, Mul,
# Sub, RealDiv, SelectV2...) are assumed to take a new buffer: TensorFlow forwards an input
# only when its reference count is 1 when the kernel runs, which the executor running branches
# in parallel often does not give; assumed, the high side (the Transformer rows of
# benchmarks/bench_plan.py measured 6-11% above the plan with them forwarding).
FORWARDING = frozenset(
    {
        "Relu",
        "Relu6",
        "Elu",
        "Selu",
        "Sigmoid",
        "Tanh",
        "Softmax",
        "LogSoftmax",
        "ReluGrad",
        "Relu6Grad",
        "EluGrad",
        "SigmoidGrad",
        "TanhGrad",
        "Neg",
        "Square",
        "Sqrt",
        "Rsqrt",
        "Exp",
        "Log",
        "BiasAdd",
        "Erf",
        "Gelu",
    }
)

PARTS = (
    "weights",
    "gradients",
    "optimizer_slots",
    "activations",
    "input_batch",
    "mixed_precision_copies",
    "temporaries",
    "state",
    "allocator_chunks",
)

FRAGMENTATION_MARGIN = 0.10
"""Fraction added on top of the simulated peak for allocator fragmentation and library
workspaces (cuDNN/oneDNN scratch) that the graph does not show. Source: the spread of
measured/simulated peak in ``benchmarks/bench_plan.py`` on the CPU (TensorFlow's BFC allocator
hands out a whole free chunk when it is less than twice the request, so a step's buffers take
a few percent to tens of percent more than their sizes)."""


@dataclass(frozen=True)
class AllocatorRules:
    """How an allocator counts what it hands out.

    Attributes:
        name: the allocator, for the note.
        granularity: sizes are rounded up to a multiple of this (BFC: 256 bytes).
        counted_from: allocations below this size are not counted (0: all are).
        growth: the allocator grows in doubling regions (replayed by :mod:`bfc`).
        upcasts_16_bit: the device computes some 16-bit operations in float32, in float32
            copies it allocates for the operation (:data:`UPCAST_16_BIT`).
    """

    name: str
    granularity: int = 256
    counted_from: int = 0
    growth: bool = False
    upcasts_16_bit: bool = False

    def size(self, nbytes: int) -> int:
        if nbytes <= 0 or nbytes < self.counted_from:
            return 0
        return -(-nbytes // self.granularity) * self.granularity


GPU_BFC_RULES = AllocatorRules("TensorFlow's GPU BFC allocator (256-byte granularity)")
CPU_ONEDNN_RULES = AllocatorRules(
    "TensorFlow's oneDNN CPU allocator: BFC for allocations of 256 KiB and more, a separate "
    "uncounted pool below",
    counted_from=256 * 1024,
    growth=True,
    upcasts_16_bit=True,
)
RAM_RULES = AllocatorRules("all allocations (host RAM)", upcasts_16_bit=True)
"""How a plan counts against a machine's RAM: every allocation, as it is."""


def fit_rules(kind: str) -> AllocatorRules:
    """The rules a batch must fit under on a device of ``kind`` (``cpu``: its RAM; ``gpu``,
    ``tpu``: the BFC allocator). Not :func:`tfaccel.planning.allocator_rules`, which counts
    what TensorFlow's allocator statistics see, to compare with them."""
    return RAM_RULES if kind == "cpu" else GPU_BFC_RULES


UPCAST_16_BIT: dict[str, tuple[str, ...]] = {
    "MatMul": ("inputs", "output"),
    "BatchMatMulV2": ("inputs", "output"),
    "BatchMatMulV3": ("inputs", "output"),
    "Einsum": ("inputs", "output"),
}
"""What a CPU allocates to compute a 16-bit operation in float32, for the operation only:
float32 copies of its inputs and output (a 1024 x 2048 x 1024 bfloat16 MatMul took 22 MiB
beyond its 2 MiB output under TensorFlow 2.21's oneDNN allocator on an AMD EPYC without
AVX512_BF16). Assumed for every CPU (the high side: one with AVX512_BF16 or AMX may compute
them natively); a GPU or TPU computes them natively. A 16-bit convolution gradient's or
max-pooling gradient's work buffers: :func:`tfaccel.planning.trace._cpu_16_bit_buffers`."""

REPLAYED_STEPS = 3
"""Steps replayed on a growing allocator: its chunks settle after the first step or two."""


@dataclass
class MemoryEstimate:
    """The simulated peak memory of one training step, by part (bytes).

    Attributes:
        batch_size: the batch simulated.
        parts: part name -> bytes at the peak (see :data:`PARTS`); they add up to ``peak_bytes``.
        peak_bytes: the simulated peak (variables plus the live buffers at the worst moment).
        margin_bytes: the fragmentation/workspace margin (``FRAGMENTATION_MARGIN`` x peak).
        total_bytes: ``peak_bytes + margin_bytes``: the figure to compare with a device.
        peak_op: the operation running at the peak.
        allocator: the allocator rules applied.
    """

    batch_size: int
    parts: dict[str, int]
    peak_bytes: int
    margin_bytes: int
    peak_op: str
    allocator: str
    notes: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return self.peak_bytes + self.margin_bytes

    def to_dict(self) -> dict[str, object]:
        return {
            "batch_size": self.batch_size,
            "parts": dict(self.parts),
            "peak_bytes": self.peak_bytes,
            "margin_bytes": self.margin_bytes,
            "margin_fraction": FRAGMENTATION_MARGIN,
            "total_bytes": self.total_bytes,
            "peak_op": self.peak_op,
            "allocator": self.allocator,
            "prediction": True,
        }


def simulate(
    step: StepGraph,
    batch_size: int,
    *,
    rules: AllocatorRules = GPU_BFC_RULES,
    margin: float = FRAGMENTATION_MARGIN,
) -> MemoryEstimate:
    """Simulate one training step of ``step`` at ``batch_size`` and return its peak memory."""
    ops = step.ops
    sizes: dict[int, int] = {}
    pieces: dict[int, int] = {}  # tensors held in several buffers: index -> how many
    for op in ops:
        for t in op.outputs:
            if t.count > 1:
                pieces[t.index] = t.count
                sizes[t.index] = t.count * rules.size(t.bytes_at(batch_size) // t.count)
            else:
                sizes[t.index] = rules.size(t.bytes_at(batch_size))
    kinds = _tensor_kinds(step)
    info = {t.index: t for op in ops for t in op.outputs}

    # Each tensor points at the buffer it lives in; a buffer dies after its last reader.
    buffer_of: dict[int, int] = {}
    last_use: dict[int, int] = {}
    for position, op in enumerate(ops):
        for i in op.inputs:
            last_use[i] = position
    buffer_end: dict[int, int] = {}
    owned: set[int] = set(step.inputs)  # input buffers belong to the caller
    for i in step.inputs:
        buffer_of[i] = i

    live: dict[int, int] = {i: sizes.get(i, 0) for i in step.inputs}
    live_kind: dict[int, str] = {i: "input_batch" for i in step.inputs}
    for i in step.inputs:
        buffer_end[i] = last_use.get(i, -1)
    persistent = _variable_parts(step, rules)
    events: list[Event] = [Event(i, size) for i, size in live.items() if size]
    current = sum(live.values())
    peak, peak_parts, peak_op = -1, {}, ""
    held: list[tuple[int, int]] = []  # the previous operation's temporaries, and its position
    held_at = 0

    for position, op in enumerate(ops):
        for t in op.outputs:
            if t.index not in last_use:
                continue  # never read: freed at once (or a control output)
            if op.type in ALIASING or op.type in ("Const", "VarHandleOp", "Placeholder"):
                if op.inputs and op.type in ALIASING and op.inputs[0] in buffer_of:
                    base = buffer_of[op.inputs[0]]
                    buffer_of[t.index] = base
                    buffer_end[base] = max(buffer_end.get(base, -1), last_use[t.index])
                continue
            reuse = _forwardable(op, t.index, sizes, buffer_of, buffer_end, position, owned)
            if reuse is not None:
                buffer_of[t.index] = reuse
                buffer_end[reuse] = max(buffer_end[reuse], last_use[t.index])
                live_kind[reuse] = kinds.get(t.index, _kind_by_phase(op.phase))
                continue
            buffer_of[t.index] = t.index
            buffer_end[t.index] = last_use[t.index]
            live[t.index] = sizes[t.index]
            if sizes[t.index]:
                events += _allocations(t.index, sizes[t.index], pieces.get(t.index, 1))
            live_kind[t.index] = kinds.get(t.index, _kind_by_phase(op.phase))
            current += sizes[t.index]
        scratch = [(size, 1) for size in _upcast_copies(op, info, batch_size, rules)]
        if op.scratch_at(batch_size):
            scratch.append((rules.size(op.scratch_at(batch_size)), 1))
        scratch = [(size, count) for size, count in scratch if size and count]
        scratch += _held_buffers(op.held_at(batch_size), rules)
        for n, (size, count) in enumerate(scratch):  # negative keys: no tensor's
            live[_scratch_key(position, n)] = size * count
            live_kind[_scratch_key(position, n)] = "temporaries"
            events += [Event(("scratch", position, n, k), size) for k in range(count)]
        current += sum(size * count for size, count in scratch)
        if current > peak:
            peak, peak_op = current, f"{op.type} {op.name}"
            peak_parts = _by_kind(live, live_kind)
        # The executor runs independent operations side by side (two inter-op threads at
        # least): an operation's temporaries are held through the next operation too.
        current -= _release(held, held_at, live, events)
        held, held_at = scratch, position
        for base in [b for b, end in buffer_end.items() if end <= position and b in live]:
            current -= live.pop(base)
            buffer_end.pop(base)
            events += _allocations(base, 0, pieces.get(base, 1))
    _release(held, held_at, live, events)
    for base in live:
        events += _allocations(base, 0, pieces.get(base, 1))

    parts = dict.fromkeys(PARTS, 0)
    for name, value in persistent.items():
        parts[name] += value
    for name, value in peak_parts.items():
        parts[name] += value
    if rules.growth:
        parts["allocator_chunks"] = max(
            0, _replayed_peak(step, rules, events) - sum(parts.values())
        )
    total = sum(parts.values())
    return MemoryEstimate(
        batch_size=batch_size,
        parts=parts,
        peak_bytes=total,
        margin_bytes=int(total * margin),
        peak_op=peak_op,
        allocator=rules.name,
    )


def _held_buffers(held: list[tuple[int, int, int]], rules: AllocatorRules) -> list[tuple[int, int]]:
    """The buffers an operation holds while it runs, ``(size, count)`` as ``rules`` count
    them. A loop's: those computed ahead, one iteration's own, and the larger of a lagging
    sum's terms and the tensors they are computed from (an iteration holds one or the other;
    see :func:`tfaccel.planning.trace._in_flight`). A 16-bit operation's work buffers, on a
    device that ``upcasts_16_bit``."""
    kinds: dict[int, list[tuple[int, int]]] = {
        kind: [] for kind in (AHEAD, BODY, SUMMED, SUMMAND_INPUT, CPU_16_BIT)
    }
    for count, size, kind in held:
        if count and rules.size(size):
            kinds[kind].append((rules.size(size), count))
    lagging = max(kinds[SUMMED], kinds[SUMMAND_INPUT], key=lambda b: sum(s * n for s, n in b))
    own = kinds[CPU_16_BIT] if rules.upcasts_16_bit else []
    return kinds[AHEAD] + kinds[BODY] + lagging + own


def _scratch_key(position: int, n: int) -> int:
    """The key of the ``n``-th temporary of the operation at ``position`` (negative: no
    tensor's)."""
    return -1 - position * 1024 - n


def _release(
    scratch: list[tuple[int, int]], position: int, live: dict[int, int], events: list[Event]
) -> int:
    """Free the temporaries ``(size, count)`` of the operation at ``position``; their bytes."""
    for n, (_size, count) in enumerate(scratch):
        del live[_scratch_key(position, n)]
        events += [Event(("scratch", position, n, k), 0) for k in range(count)]
    return sum(size * count for size, count in scratch)


def _upcast_copies(
    op: OpInfo, info: dict[int, TensorInfo], batch: int, rules: AllocatorRules
) -> list[int]:
    """The float32 copies a device that upcasts 16-bit operations allocates for ``op`` (bytes
    each, as ``rules`` count them); none for any other operation or device."""
    wants = UPCAST_16_BIT.get(op.type)
    if not rules.upcasts_16_bit or wants is None:
        return []
    inputs = [info[i] for i in op.inputs if i in info]
    outputs = list(op.outputs)
    half = [t for t in inputs if t.dtype in ("bfloat16", "half", "float16")]
    if not half:
        return []
    copies: list[int] = []
    if "inputs" in wants:
        copies += [2 * t.bytes_at(batch) for t in half]
    if "output" in wants:
        copies += [2 * t.bytes_at(batch) for t in outputs[:1]]
    return [size for size in (rules.size(c) for c in copies) if size]


def _allocations(key: int, size: int, count: int) -> list[Event]:
    """The allocator events of a tensor of ``size`` bytes in ``count`` equal buffers (size 0:
    their frees)."""
    if count <= 1:
        return [Event(key, size)]
    return [Event((key, n), size // count) for n in range(count)]


def _replayed_peak(step: StepGraph, rules: AllocatorRules, events: list[Event]) -> int:
    """The peak a growing BFC allocator reports: the variables (weights first, then the
    optimizer's slots as ``optimizer.build`` makes them), then the step, replayed."""
    order = {"weight": 0, "frozen": 0, "state": 1, "slot": 1}
    variables = sorted(step.variables, key=lambda v: order.get(v.kind, 1))
    replay_events = [Event(("var", n), rules.size(v.bytes)) for n, v in enumerate(variables)]
    for repeat in range(REPLAYED_STEPS):
        replay_events += [Event((repeat, e.key), e.size) for e in events]
    return replay(replay_events)


def _forwardable(
    op: object,
    tensor: int,
    sizes: dict[int, int],
    buffer_of: dict[int, int],
    buffer_end: dict[int, int],
    position: int,
    owned: set[int],
) -> int | None:
    """The buffer of a dying input the element-wise ``op`` may write ``tensor`` over."""
    if getattr(op, "type", "") not in FORWARDING:
        return None
    for i in getattr(op, "inputs", ()):
        base = buffer_of.get(i)
        if base is None or base in owned or base != i:
            continue  # a view or a caller's buffer is never written over
        if sizes.get(i) == sizes[tensor] and buffer_end.get(base) == position:
            return base
    return None


def _kind_by_phase(phase: str) -> str:
    return "activations" if phase == "forward" else "temporaries"


def _tensor_kinds(step: StepGraph) -> dict[int, str]:
    """Tensors whose role is known from the graph: gradients handed to the optimizer, and
    16-bit copies of the weights (a Cast of a ReadVariableOp in the forward pass)."""
    kinds: dict[int, str] = {}
    producer: dict[int, object] = {}
    for op in step.ops:
        for t in op.outputs:
            producer[t.index] = op
    for op in step.ops:
        if op.phase == "update":
            for i in op.inputs:
                source = producer.get(i)
                if source is not None and getattr(source, "phase", "") == "backward":
                    kinds[i] = "gradients"
        if op.type == "Cast" and op.inputs:
            source = producer.get(op.inputs[0])
            if getattr(source, "type", "") == "ReadVariableOp" and op.outputs:
                out = op.outputs[0]
                if out.dtype in ("bfloat16", "half", "float16"):
                    kinds[out.index] = "mixed_precision_copies"
    return kinds


def _by_kind(live: dict[int, int], live_kind: dict[int, str]) -> dict[str, int]:
    """What the live buffers are: a buffer made by the forward pass and still live is an
    activation kept for the backward pass."""
    parts: dict[str, int] = {}
    for base, size in live.items():
        kind = live_kind.get(base, "temporaries")
        parts[kind] = parts.get(kind, 0) + size
    return parts


def _variable_parts(step: StepGraph, rules: AllocatorRules) -> dict[str, int]:
    parts = {"weights": 0, "optimizer_slots": 0, "state": 0}
    for var in step.variables:
        key = {"weight": "weights", "frozen": "weights", "slot": "optimizer_slots"}.get(
            var.kind, "state"
        )
        parts[key] += rules.size(var.bytes)
    return parts


def variable_bytes(step: StepGraph, rules: AllocatorRules, kinds: Iterable[str]) -> int:
    """Bytes of the step's variables of ``kinds`` as ``rules`` count them."""
    wanted = set(kinds)
    return sum(rules.size(v.bytes) for v in step.variables if v.kind in wanted)
