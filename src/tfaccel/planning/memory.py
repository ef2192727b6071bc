"""The memory of one training step, simulated over the traced step (pure Python).

The step's operations run in two orders, and the higher peak is the prediction (see
:data:`ORDERS`): graph order, and the order TensorFlow's executor would start them in on two
inter-op threads (:func:`executor_schedule`: an operation starts once what it reads is done, and
the variables' reads and writes keep their order), where operations overlap. Each output takes a
buffer when its operation starts and gives it back once the last operation that reads it is
done. A view (``Reshape``, ``ReadVariableOp``...) shares its input's buffer; an element-wise
operation (:data:`FORWARDING`) writes over an input buffer of its own size that no running or
later operation reads (TensorFlow's ``forward_input_or_allocate_output``), one written over
before included. What the graph does not
size is added by rule: a While loop's TensorLists (one buffer per iteration, see
:func:`tfaccel.planning.trace._tensor_lists`; a loop that pops lists while it fills its own holds
the larger of the two, :func:`_popped_while_filled`) and the buffers of its iterations in flight
(:func:`tfaccel.planning.trace._in_flight`), an operation's own temporaries (an Einsum's
transposed operands) and, on a CPU, the float32 copies a 16-bit MatMul is computed in
(:data:`UPCAST_16_BIT`) and the work buffers of 16-bit convolution and pooling gradients
(:func:`tfaccel.planning.trace._cpu_16_bit_buffers`), held while the operation runs. Operations
the step does not need are not in the trace (:func:`tfaccel.planning.trace._needed`); those
the graph optimiser folds (:func:`tfaccel.planning.trace._folded`) run no kernel, and the
constants they leave are held through the step (:func:`_folded_constants`). The
variables (weights, optimizer slots, metric state) live throughout, and the caller's batch
until the step returns; a CPU's float32 max pooling keeps oneDNN's workspace beside its output
(:func:`_pooling_workspace`). The peak of that simulation,
split by what each live buffer is, is the prediction; an allocator's own rules
(:class:`AllocatorRules`: the size it rounds to, and for the CPU's oneDNN allocator the
allocations below 256 KiB it serves from a pool that ``get_memory_info`` does not count) are
applied so that the prediction is comparable to what that allocator reports.
"""

from __future__ import annotations

import functools
import heapq
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from tfaccel.core.errors import UsageError
from tfaccel.inventory import GpuFacts, fast_precisions
from tfaccel.planning.bfc import Event, replay
from tfaccel.planning.trace import (
    AHEAD,
    ALIASING,
    BODY,
    CONV_OPS,
    CPU_16_BIT,
    NOT_RUN,
    SIXTEEN_BIT,
    SUMMAND_INPUT,
    SUMMED,
    OpInfo,
    StepGraph,
    TensorInfo,
)

__all__ = [
    "CONV_WORKSPACE",
    "CPU_ONEDNN_RULES",
    "FRAGMENTATION_MARGIN",
    "GPU_BFC_RULES",
    "ORDERS",
    "PARTS",
    "RAM_RULES",
    "TPU_RULES",
    "AllocatorRules",
    "MemoryEstimate",
    "Schedule",
    "executor_schedule",
    "fit_rules",
    "graph_schedule",
    "simulate",
]

# Element-wise operations that may write their output over a dying input of the same size
# (TensorFlow's ``forward_input_or_allocate_output``): unary ones and their gradients, BiasAdd,
# and the binary, ternary and n-ary ones (``BinaryOp`` tries both operands, ``SelectV2`` its two
# values, ``AddN`` every term). An input is written over only when its reference count is 1 as
# the kernel runs: no other reader of it still to run or running (:func:`_alone`, in the order
# simulated), not a view of a variable or of the caller's batch, and of the output's size (an
# operand broadcast to the output's shape is not). TensorFlow's allocation log
# (``TF_CPP_VMODULE=log_memory=2``) of an MLP's and an embedding model's Adam update shows it:
# ``Square(g)``, ``Sqrt(v)`` and ``m * alpha`` take new buffers, and the ``Sub``, ``Mul``,
# ``AddV2`` and ``RealDiv`` after them none (they write over ``g``, the square, the root and
# the product); simulating those as new buffers put those rows' peaks 16-26% above the
# measured one. ``LeakyRelu`` is a ``UnaryElementWiseOp`` and ``LeakyReluGrad`` and ``SeluGrad``
# ``BinaryElementWiseOp``s (``tensorflow/core/kernels/relu_op.h``) like ``Relu`` and ``ReluGrad``:
# left out, the keras.io DCGAN's generator, run outside its tape, kept its last 256 MiB
# LeakyReLU beside the transposed convolution it reads (1168.5 MiB predicted, +25.4%; with them
# 916.5, -1.6%) and the conditional GAN's was +13.2% (+4.6%). Every coefficient-wise kernel of
# ``cwise_ops_common.h`` does the same where its output's dtype is its input's (``UnaryOp``:
# ``Abs``, ``Erfc``, ``Reciprocal``...; ``BinaryOp``: ``FloorDiv``, ``Xlogy``...; the gradient
# ``SimpleBinaryOp``s: ``ReciprocalGrad``...): the float ones a Keras step uses are listed.
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
        "LeakyRelu",
        "LeakyReluGrad",
        "SeluGrad",
        "Abs",
        "Sign",
        "Reciprocal",
        "Log1p",
        "Expm1",
        "Erfc",
        "Sin",
        "Cos",
        "Floor",
        "Ceil",
        "Round",
        "ReciprocalGrad",
        "FloorDiv",
        "FloorMod",
        "Xlogy",
        "Xdivy",
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
        "AddV2",
        "Add",
        "Sub",
        "Mul",
        "MulNoNan",
        "RealDiv",
        "Div",
        "DivNoNan",
        "Maximum",
        "Minimum",
        "SquaredDifference",
        "Pow",
        "SqrtGrad",
        "RsqrtGrad",
        "SelectV2",
        "AddN",
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
"""Fraction added on top of the simulated peak for allocator fragmentation and the library
workspaces the graph does not show (oneDNN's, cuBLAS's; cuDNN's beyond :data:`CONV_WORKSPACE`).
Checked on the CPU (``benchmarks/results/bench_plan_order.txt``, 33 worked-from rows): the
allocator's peak over the live buffers the plan simulates without replaying the allocator is a
median 1.08 (quartiles 1.02-1.12, 9 rows above 1.10, max 1.28), which 10% covers for the median row,
not the top quarter; where the allocator is replayed (:data:`CPU_ONEDNN_RULES`, the figure compared
with ``get_memory_info``) the measured/predicted ratio is a median 0.98 (0.79-1.12) and no margin is
needed. Kept at 10%: the checks that use it (the RAM and GPU fit) count allocations the CPU
measurement does not (those under 256 KiB, a GPU's BFC without growing regions), so the CPU ratios
do not size it for them."""


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
        pooling_workspace: the device's max pooling keeps a workspace for the backward pass
            beside its output (:func:`_pooling_workspace`).
        conv_workspace: the device's convolutions take a library workspace while they run,
            from the same allocator (:data:`CONV_WORKSPACE`, :func:`_conv_workspace`).
        nhwc_16_bit: the 16-bit dtypes whose convolutions run in NHWC on the device (the rest
            run in NCHW, with a larger workspace): :func:`fit_rules`.
    """

    name: str
    granularity: int = 256
    counted_from: int = 0
    growth: bool = False
    upcasts_16_bit: bool = False
    pooling_workspace: bool = False
    conv_workspace: bool = False
    nhwc_16_bit: tuple[str, ...] = ()

    def size(self, nbytes: int) -> int:
        if nbytes <= 0 or nbytes < self.counted_from:
            return 0
        return -(-nbytes // self.granularity) * self.granularity


GPU_BFC_RULES = AllocatorRules(
    "TensorFlow's GPU BFC allocator (256-byte granularity)",
    conv_workspace=True,
    nhwc_16_bit=SIXTEEN_BIT,
)
"""A GPU that computes both 16-bit dtypes natively (or one whose capability is unknown)."""
TPU_RULES = AllocatorRules(
    "a TPU's memory, counted as TensorFlow's BFC allocator counts (256 bytes)"
)
"""A TPU: no cuDNN workspace (XLA plans the TPU's memory; its scratch is not modelled)."""
CPU_ONEDNN_RULES = AllocatorRules(
    "TensorFlow's oneDNN CPU allocator: BFC for allocations of 256 KiB and more, a separate "
    "uncounted pool below",
    counted_from=256 * 1024,
    growth=True,
    upcasts_16_bit=True,
    pooling_workspace=True,
)
RAM_RULES = AllocatorRules(
    "all allocations (host RAM)", upcasts_16_bit=True, pooling_workspace=True
)
"""How a plan counts against a machine's RAM: every allocation, as it is."""


def fit_rules(kind: str, compute_capability: str | None = None) -> AllocatorRules:
    """The rules a batch must fit under on a device of ``kind`` (``cpu``: its RAM; ``gpu``:
    the BFC allocator, with cuDNN's workspaces in the layout TensorFlow's layout optimiser
    gives 16-bit convolutions at ``compute_capability``: NHWC for a dtype the GPU computes
    natively (:func:`tfaccel.inventory.fast_precisions`: float16 from 7.0, bfloat16 from 8.0),
    NCHW otherwise; ``tpu``: the BFC allocator's counting, no cuDNN). Not
    :func:`tfaccel.planning.allocator_rules`, which counts what TensorFlow's allocator
    statistics see, to compare with them."""
    if kind == "cpu":
        return RAM_RULES
    if kind == "tpu":
        return TPU_RULES
    gpu = GpuFacts(0, compute_capability=compute_capability)
    if gpu.capability is None:
        return GPU_BFC_RULES
    fast = fast_precisions([gpu]).fast  # the one rule of which 16-bit dtypes a GPU computes
    native = {"mixed_float16": ("float16", "half"), "mixed_bfloat16": ("bfloat16",)}
    nhwc = tuple(dtype for policy, names in native.items() if policy in fast for dtype in names)
    if set(nhwc) == set(SIXTEEN_BIT):
        return GPU_BFC_RULES
    nchw = " and ".join(p.removeprefix("mixed_") for p in native if p not in fast)
    return replace(
        GPU_BFC_RULES,
        name=f"{GPU_BFC_RULES.name[:-1]}; {nchw} convolutions in NCHW)",
        nhwc_16_bit=nhwc,
    )


CONV_WORKSPACE = {"float32": 1.15, "16-bit": 0.50, "16-bit NCHW": 1.35, "depthwise": 0.05}
"""cuDNN's workspace while one convolution runs on a GPU, as a fraction of the bytes the
convolution reads and writes (its tensors): an assumption, from the largest measured on an H200
with cuDNN 9.19 (``benchmarks/results/gpu_constants_h200.txt``: PyTorch's calls, the fastest
algorithm of each convolution and of both its gradients, as TensorFlow's autotuner picks; no
TensorFlow there). float32 in NCHW, the layout TensorFlow's layout optimiser gives float32
convolutions on a GPU: 1.02-1.08 for 3x3 and 7x7 kernels, 0.17 for 1x1. 16-bit in NHWC, the
layout it gives them where the GPU computes that dtype natively (:func:`fit_rules`): bfloat16
at most 0.47 (a 7x7 stride-2 stem; 3x3 0.04-0.11); in NCHW 1.06-1.31 (``16-bit NCHW``).
float16 is taken as bfloat16 (not measured). Depthwise: 0.01 in bfloat16 NHWC (PyTorch runs a
float32 NCHW one in a kernel of its own, not cuDNN). TensorFlow's autotuner also tries
algorithms, with their workspaces, on the first step; that is not modelled. Held while the
convolution runs, as any operation's temporaries are (through the next operation: the executor
runs a layer's two gradients side by side, each with its own)."""

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

ORDERS = ("graph", "executor")
"""The orders a step is simulated in; the prediction is the higher peak. ``graph``: the order
the graph holds its operations (the order the training step built them). ``executor``: the
order TensorFlow's executor (``tensorflow/core/common_runtime/executor.cc``) would start them
in, emulated by :func:`executor_schedule`. The real order depends on thread timing and moves
between runs, and with it how the allocator's chunks are split; neither order bounds the other,
so both are simulated and the higher peak kept (the high side)."""

INLINE_KERNELS = (NOT_RUN - {"CheckNumerics"}) | {"ShapeN", "Rank", "Size"}
"""Operations whose kernels TensorFlow does not call expensive (``OpKernel::IsExpensive()``
false): what launches no kernel of its own (:data:`tfaccel.planning.trace.NOT_RUN`: constants,
views, variable reads) but ``CheckNumerics``, which reads its whole input, and the shape
queries. The executor runs them inline on the thread that made them ready. Every other kernel
on a CPU is expensive until it has run about 90 times (``KernelStats``: its cost estimate
starts at 10^8 cycles and decays by 1/10 per run towards the measured cost, against a
threshold of 8,000 cycles), so, in the first steps of a training run, all of them."""

RESOURCE_READS = frozenset(
    {"ReadVariableOp", "ResourceGather", "ResourceGatherNd", "VariableShape", "VarIsInitializedOp"}
)
"""Operations that read a variable without writing it; any other operation given a variable
handle is taken to write it."""

EXECUTOR_THREADS = 2
"""Inter-op threads emulated: TensorFlow's inter-op pool has one per core by default; two is
the least with which operations overlap."""

OP_LATENCY_S = 5e-6
FLOP_RATE = 50e9
BYTE_RATE = 10e9
"""A rough duration of an expensive operation for the emulated executor: ``OP_LATENCY_S +
FLOPs / FLOP_RATE + bytes written and read / BYTE_RATE``. Only the relative durations matter:
which of two threads finishes first."""


@dataclass(frozen=True)
class Schedule:
    """The order a step's operations start in, and when each is done.

    Attributes:
        order: indices into ``StepGraph.ops``, in the order the operations start.
        done: for each position of ``order``, the last position that starts before the
            operation there has finished (itself when nothing starts meanwhile); its inputs
            are given back, and its temporaries released, from then on.
    """

    order: list[int]
    done: list[int]


def graph_schedule(step: StepGraph) -> Schedule:
    """The operations in graph order, each done before the next starts."""
    count = len(step.ops)
    return Schedule(list(range(count)), list(range(count)))


def _schedule(step: StepGraph, name: str, batch: int) -> Schedule:
    if name == "graph":
        return graph_schedule(step)
    if name == "executor":
        return executor_schedule(step, batch)
    raise UsageError(
        "Unknown order to simulate the step in",
        expected=f"one of {', '.join(ORDERS)}",
        received=repr(name),
        fix="pass orders= a tuple of those names",
    )


def _dependencies(
    step: StepGraph, passed: dict[int, int]
) -> tuple[list[list[int]], list[list[int]]]:
    """For each operation, the operations that must be done before it starts, and those that
    wait for it (each once, in graph order).

    - The operations it reads a tensor from. A reader of an ``IdentityN`` output reads the
      tensor it passes on: the graph optimiser removes ``IdentityN`` (an optimizer's, over
      all the gradients), so that no update waits for every gradient.
    - The order of the operations on one variable, as TensorFlow's automatic control
      dependencies keep it in a ``tf.function``: a read (:data:`RESOURCE_READS`) after the
      write before it, a write after the write and the reads before it (an optimizer reads
      its slot after updating it, not at the start of the step).
    - A backward operation that reads no gradient (``x - mean`` in the gradient of a
      squared difference) after the backward operation before it in graph order that does:
      TensorFlow's gradient functions hold such work back with ``control_dependencies([grad])``
      so that it does not run, and hold its buffer, during the forward pass. The traced step
      keeps no control edges; this stands in for them (assumed: the gradient reaching an
      operation is the one computed just before its gradient function in graph order).
    """
    producer = {t.index: n for n, op in enumerate(step.ops) for t in op.outputs}
    resources = {t.index for op in step.ops for t in op.outputs if t.dtype == "resource"}
    last_write: dict[int, int] = {}
    reads: dict[int, list[int]] = {}
    deps: list[list[int]] = []
    gradient_at = -1  # the last backward operation so far that reads a gradient
    for n, op in enumerate(step.ops):
        inputs = () if op.type == "IdentityN" else op.inputs
        found = {producer[passed.get(i, i)] for i in inputs if passed.get(i, i) in producer}
        if op.phase == "backward":
            if any(step.ops[p].phase == "backward" for p in found):
                gradient_at = n
            elif gradient_at >= 0:
                found.add(gradient_at)
        for handle in (i for i in inputs if i in resources):
            if handle in last_write:
                found.add(last_write[handle])
            if op.type in RESOURCE_READS:
                reads.setdefault(handle, []).append(n)
            else:
                found.update(reads.pop(handle, []))
                last_write[handle] = n
        found.discard(n)
        deps.append(sorted(found))
    users: list[list[int]] = [[] for _ in step.ops]
    for n, before in enumerate(deps):
        for p in before:
            users[p].append(n)
    return deps, users


def _passed_on(step: StepGraph) -> dict[int, int]:
    """``IdentityN`` outputs -> the input each passes on."""
    passed: dict[int, int] = {}
    for op in step.ops:
        if op.type == "IdentityN":
            for t, i in zip(op.outputs, op.inputs, strict=False):
                passed[t.index] = passed.get(i, i)
    return passed


@dataclass(frozen=True)
class _StepMaps:
    """What the simulation derives from a step alone, whatever the order or batch: the
    ``IdentityN`` outputs and what each passes on, the operations with their readers reading
    that instead (an ``IdentityN`` left without inputs or outputs), each operation's
    dependencies and users (:func:`_dependencies`), and the tensors' known roles."""

    count: int
    ops: list[OpInfo]
    deps: list[list[int]]
    users: list[list[int]]
    kinds: dict[int, str]


_MAPS: dict[int, tuple[weakref.ref[StepGraph], _StepMaps]] = {}


def _maps(step: StepGraph) -> _StepMaps:
    """The step's :class:`_StepMaps`, made once per step (a traced step is not changed after
    tracing; one whose operations were added to or removed is mapped again)."""
    held = _MAPS.get(id(step))
    if held is not None and held[0]() is step and held[1].count == len(step.ops):
        return held[1]
    passed = _passed_on(step)
    deps, users = _dependencies(step, passed)
    ops = [
        replace(op, inputs=(), outputs=())
        if op.type == "IdentityN"
        else replace(op, inputs=tuple(passed.get(i, i) for i in op.inputs))
        if any(i in passed for i in op.inputs)
        else op
        for op in step.ops
    ]
    found = _StepMaps(len(step.ops), ops, deps, users, _tensor_kinds(step))
    key = id(step)
    _MAPS[key] = (weakref.ref(step, lambda _gone: _MAPS.pop(key, None)), found)
    return found


def executor_schedule(step: StepGraph, batch: int, threads: int = EXECUTOR_THREADS) -> Schedule:
    """The order TensorFlow's executor would start the step's operations in, on ``threads``
    inter-op threads (``ExecutorState::ScheduleReady`` and ``ProcessInline``).

    An operation is ready when every operation it reads from is done. When one is done, the
    thread that ran it takes the operations it made ready, in graph order: those in
    :data:`INLINE_KERNELS` go to the back of its inline queue; of the expensive ones, the last
    is run next by the same thread when its inline queue is empty, and the others (and that
    one too, when the queue is not empty) go to the thread pool. The pool (Eigen's
    non-blocking pool) puts a task on the front of the scheduling thread's own queue; a thread
    takes work from its inline queue, then the front of its own queue (the newest), then the
    back of another's (the oldest). The roots (operations that read nothing) start on the
    pool, spread over the threads. Durations: :data:`OP_LATENCY_S`, :data:`FLOP_RATE`,
    :data:`BYTE_RATE` (assumed; only which thread finishes first matters).
    """
    ops = step.ops
    maps = _maps(step)
    deps, users = maps.deps, maps.users
    sizes = {t.index: t.bytes_at(batch) for op in ops for t in op.outputs}
    pending = [len(found) for found in deps]
    queues: list[deque[int]] = [deque() for _ in range(threads)]
    inline: list[deque[int]] = [deque() for _ in range(threads)]
    for k, n in enumerate(n for n in range(len(ops)) if not pending[n]):
        queues[k % threads].append(n)
    idle = [True] * threads
    started: list[int] = []
    finishing: list[tuple[float, int, int]] = []  # (time, thread, operation)
    ended: list[tuple[int, int]] = []  # (operation, operations started by then)

    def take(thread: int) -> int | None:
        if inline[thread]:
            return inline[thread].popleft()
        if queues[thread]:
            return queues[thread].popleft()
        for other in range(threads):
            if other != thread and queues[other]:
                return queues[other].pop()
        return None

    def start(thread: int, now: float) -> None:
        n = take(thread)
        if n is None:
            return
        idle[thread] = False
        started.append(n)
        heapq.heappush(finishing, (now + _duration(ops[n], sizes, batch), thread, n))

    for thread in range(threads):
        start(thread, 0.0)
    while finishing:
        now, thread, n = heapq.heappop(finishing)
        idle[thread] = True
        ended.append((n, len(started)))
        ready = []
        for user in users[n]:
            pending[user] -= 1
            if not pending[user]:
                ready.append(user)
        expensive = [u for u in ready if ops[u].type not in INLINE_KERNELS]
        inline[thread].extend(u for u in ready if ops[u].type in INLINE_KERNELS)
        if expensive and not inline[thread]:
            inline[thread].append(expensive.pop())
        for user in expensive:
            queues[thread].appendleft(user)
        for other in [thread] + [t for t in range(threads) if t != thread]:
            if idle[other]:
                start(other, now)
    if len(started) != len(ops):
        raise ValueError("the step's operations do not form an acyclic graph")
    position = {n: p for p, n in enumerate(started)}
    done = list(range(len(ops)))
    for n, count in ended:
        done[position[n]] = max(position[n], count - 1)
    return Schedule(started, done)


def _duration(op: OpInfo, sizes: dict[int, int], batch: int) -> float:
    """The emulated duration of ``op`` (seconds; see :data:`OP_LATENCY_S`)."""
    if op.type in INLINE_KERNELS:
        return 0.0
    moved = sum(t.bytes_at(batch) for t in op.outputs) + sum(sizes.get(i, 0) for i in op.inputs)
    flops = op.flops_fixed + op.flops_per_example * batch
    return OP_LATENCY_S + flops / FLOP_RATE + moved / BYTE_RATE


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
    orders: tuple[str, ...] = ORDERS,
) -> MemoryEstimate:
    """Simulate one training step of ``step`` at ``batch_size`` and return its peak memory:
    the higher of the peaks under each of ``orders`` (:data:`ORDERS`), the one that gave it
    named in the notes."""
    best: MemoryEstimate | None = None
    for name in orders:
        estimate = _simulate(step, batch_size, rules, margin, _schedule(step, name, batch_size))
        estimate.notes.append(f"order: {name}")
        if best is None or estimate.peak_bytes > best.peak_bytes:
            best = estimate
    if best is None:
        raise UsageError(
            "No order to simulate the step in",
            expected=f"orders= one or more of {', '.join(ORDERS)}",
            received="an empty tuple",
            fix="leave orders out to simulate both",
        )
    return best


def _simulate(
    step: StepGraph,
    batch_size: int,
    rules: AllocatorRules,
    margin: float,
    schedule: Schedule,
) -> MemoryEstimate:
    """The peak of one step whose operations start in ``schedule.order``."""
    maps = _maps(step)
    ops = [maps.ops[n] for n in schedule.order]
    done = schedule.done
    sizes: dict[int, int] = {}
    pieces: dict[int, int] = {}  # tensors held in several buffers: index -> how many
    for op in ops:
        for t in op.outputs:
            if t.count > 1:
                pieces[t.index] = t.count
                sizes[t.index] = t.count * rules.size(t.bytes_at(batch_size) // t.count)
            else:
                sizes[t.index] = rules.size(t.bytes_at(batch_size))
    kinds = maps.kinds
    info = {t.index: t for op in ops for t in op.outputs}

    # Each tensor points at the buffer it lives in; a buffer dies once its last reader is done
    # (``done``: the position by which the operation at a position has finished).
    buffer_of: dict[int, int] = {}
    last_use: dict[int, int] = {}
    last_reader: dict[int, int] = {}  # tensor -> the position of the reader that starts last
    others_done: dict[int, int] = {}  # tensor -> by when its other readers are done
    for position, op in enumerate(ops):
        for i in op.inputs:
            if i in last_reader and last_reader[i] != position:
                others_done[i] = max(others_done.get(i, -1), done[last_reader[i]])
            last_use[i] = max(last_use.get(i, -1), done[position])
            last_reader[i] = position
    buffer_end: dict[int, int] = {}
    ending: list[tuple[int, int]] = []  # (end, buffer) for every end set: due ones are freed
    owned: set[int] = set(step.inputs)  # input buffers belong to the caller
    forwarded: set[int] = set()  # tensors written over a dying input's buffer
    workspace_of: dict[int, int] = {}  # a max pooling's output -> its workspace's key
    for i in step.inputs:
        buffer_of[i] = i

    live: dict[int, int] = {i: sizes.get(i, 0) for i in step.inputs}
    live_kind: dict[int, str] = {i: "input_batch" for i in step.inputs}
    for i in step.inputs:  # the caller holds its batch until the step returns
        buffer_end[i] = len(ops)
    for i in _folded_constants(ops):  # the function holds them through the step
        buffer_of[i], buffer_end[i] = i, len(ops)
        owned.add(i)
        live[i], live_kind[i] = sizes.get(i, 0), "temporaries"
    persistent = _variable_parts(step, rules)
    events: list[Event] = [Event(i, size) for i, size in live.items() if size]
    current = sum(live.values())
    peak, peak_parts, peak_op = -1, {}, ""
    # Temporaries held until their operation is done, and at least through the next operation
    # (the executor runs independent operations side by side): release position -> buffers.
    held: dict[int, list[tuple[int, list[tuple[int, int]]]]] = {}

    for position, op in enumerate(ops):
        mark = len(events)
        for t in op.outputs:
            if op.folded or t.index not in last_use:
                continue  # never read: freed at once (or a control output)
            if op.type in ALIASING or op.type in ("Const", "VarHandleOp", "Placeholder"):
                if op.inputs and op.type in ALIASING and op.inputs[0] in buffer_of:
                    base = buffer_of[op.inputs[0]]
                    buffer_of[t.index] = base
                    buffer_end[base] = max(buffer_end.get(base, -1), last_use[t.index])
                    heapq.heappush(ending, (buffer_end[base], base))
                continue
            reuse = _forwardable(
                op,
                t.index,
                sizes,
                buffer_of,
                buffer_end,
                done[position],
                owned,
                forwarded,
                functools.partial(_alone, last_reader, others_done, position),
            )
            if reuse is not None:
                forwarded.add(t.index)
                buffer_of[t.index] = reuse
                buffer_end[reuse] = max(buffer_end[reuse], last_use[t.index])
                heapq.heappush(ending, (buffer_end[reuse], reuse))
                live_kind[reuse] = kinds.get(t.index, _kind_by_phase(op.phase))
                continue
            buffer_of[t.index] = t.index
            buffer_end[t.index] = last_use[t.index]
            heapq.heappush(ending, (buffer_end[t.index], t.index))
            live[t.index] = sizes[t.index]
            if sizes[t.index]:
                events += _allocations(t.index, sizes[t.index], pieces.get(t.index, 1))
            live_kind[t.index] = kinds.get(t.index, _kind_by_phase(op.phase))
            current += sizes[t.index]
            workspace = _pooling_workspace(op, t, batch_size, rules)
            if workspace:
                key = _workspace_key(t.index)
                workspace_of[t.index] = key
                live[key], live_kind[key] = workspace, live_kind[t.index]
                events.append(Event(key, workspace))
                current += workspace
        scratch = [(size, 1) for size in _upcast_copies(op, info, batch_size, rules)]
        scratch += [(size, 1) for size in _conv_workspace(op, info, batch_size, rules)]
        if op.folded:  # evaluated once by the graph optimiser, not in the step
            scratch = []
        elif op.scratch_at(batch_size):
            scratch.append((rules.size(op.scratch_at(batch_size)), 1))
        scratch = [(size, count) for size, count in scratch if size and count]
        scratch += _held_buffers(op.held_at(batch_size), rules)
        for n, (size, count) in enumerate(scratch):  # negative keys: no tensor's
            live[_scratch_key(position, n)] = size * count
            live_kind[_scratch_key(position, n)] = "temporaries"
            events += [Event(("scratch", position, n, k), size) for k in range(count)]
        current += sum(size * count for size, count in scratch)
        if scratch:
            held.setdefault(max(done[position], position + 1), []).append((position, scratch))
        overlap, kind, popped = _popped_while_filled(
            op, done[position], pieces, buffer_of, buffer_end, live
        )
        if overlap:  # in the allocator's replay, the lists popped go before those filled
            events[mark:mark] = [e for b in popped for e in _allocations(b, 0, pieces[b])]
        if current - overlap > peak:
            peak, peak_op = current - overlap, f"{op.type} {op.name}"
            peak_parts = _by_kind(live, live_kind)
            peak_parts[live_kind.get(kind, "temporaries")] -= overlap
        for at, buffers in held.pop(position, []):
            current -= _release(buffers, at, live, events)
        while ending and ending[0][0] <= position:
            end, base = heapq.heappop(ending)
            if base not in live or buffer_end.get(base) != end:
                continue  # not a buffer, or kept longer since (by a view or a forward)
            current -= live.pop(base)
            buffer_end.pop(base)
            events += _allocations(base, 0, pieces.get(base, 1))
            if base in workspace_of:  # a pooling's workspace goes with its output
                key = workspace_of.pop(base)
                current -= live.pop(key)
                events.append(Event(key, 0))
    for pending in held.values():
        for at, buffers in pending:
            _release(buffers, at, live, events)
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


def _folded_constants(ops: list[OpInfo]) -> list[int]:
    """The constants the graph optimiser leaves in the step's function in place of the
    operations it folds (:func:`tfaccel.planning.trace._folded`): the outputs of folded
    operations that an operation it does not fold reads. The function holds each from its
    first step on (a buffer of the step's, never written over); the folded operations
    themselves take no buffer and run no kernel in the step."""
    made = {t.index for op in ops if op.folded for t in op.outputs}
    found: dict[int, None] = {}
    for op in ops:
        if not op.folded:
            found.update((i, None) for i in op.inputs if i in made)
    return list(found)


def _popped_while_filled(
    op: OpInfo,
    done: int,
    pieces: dict[int, int],
    buffer_of: dict[int, int],
    buffer_end: dict[int, int],
    live: dict[int, int],
) -> tuple[int, int, list[int]]:
    """Bytes a loop never holds at once: a loop that pops lists it is the last to read (a
    gradient loop, the forward loop's accumulators) while it fills lists of its own (the input
    gradient, a time step each) holds ``k`` elements of the lists it fills and ``n - k`` of
    those it pops at its ``k``-th iteration, so at most the larger of the two whole: the
    smaller is not held beside it. TensorFlow's allocation log of ``bench_plan.py``'s LSTM at
    batch 128 shows it: the 700 ``(128, 128)`` buffers of the forward lists alive as the
    gradient loop starts, and its 100 ``(128, 64)`` buffers of the input's gradient alive
    only once those are freed (4 MiB of the step's allocations alive then, against 50 MiB).
    The bytes, a list filled (whose part they are taken from) and the lists popped (which
    die once the loop, done by position ``done``, is); 0, 0 and none for any other
    operation."""
    if op.type not in ("While", "StatelessWhile"):
        return 0, 0, []
    filled = [t.index for t in op.outputs if t.index in live and pieces.get(t.index, 1) > 1]
    popped = sorted(
        {
            buffer_of[i]
            for i in op.inputs
            if buffer_of.get(i) in live
            and pieces.get(buffer_of[i], 1) > 1
            and buffer_end.get(buffer_of[i], done + 1) <= done
        }
    )
    if not filled or not popped:
        return 0, 0, []
    overlap = min(sum(live[t] for t in filled), sum(live[b] for b in popped))
    return overlap, filled[0], popped


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


MAX_POOLS = frozenset({"MaxPool", "MaxPoolV2", "MaxPool3D"})


def _pooling_workspace(op: OpInfo, out: TensorInfo, batch: int, rules: AllocatorRules) -> int:
    """The workspace a CPU's oneDNN max pooling keeps beside its float32 output until the
    output's last reader (the pooling's gradient) is done: the index of each pooled element's
    maximum in its window, one byte each (oneDNN's ``u8`` indices, for windows of fewer than
    256 elements: assumed). TensorFlow's allocation log of ``bench_plan.py``'s Conv1D model at
    batch 512 shows it, a ``uint8`` tensor of the pooled output's elements beside each of its
    three ``MaxPool1d`` outputs (4, 2 and 2 MiB), alive until the backward pass. A 16-bit
    pooling on a CPU without 16-bit oneDNN kernels runs in TensorFlow's own kernel, whose
    gradient's work buffers :func:`tfaccel.planning.trace._cpu_16_bit_buffers` counts; a GPU's
    cuDNN keeps none. Bytes as ``rules`` count them; 0 where none is kept."""
    if not rules.pooling_workspace or op.type not in MAX_POOLS or out.dtype != "float32":
        return 0
    if not op.outputs or out.index != op.outputs[0].index:
        return 0
    return rules.size(out.bytes_at(batch) // 4)


def _workspace_key(tensor: int) -> int:
    """The key of the workspace kept beside ``tensor`` (negative, below the temporaries')."""
    return -(2**40) - tensor


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
    half = [t for t in inputs if t.dtype in SIXTEEN_BIT]
    if not half:
        return []
    copies: list[int] = []
    if "inputs" in wants:
        copies += [2 * t.bytes_at(batch) for t in half]
    if "output" in wants:
        copies += [2 * t.bytes_at(batch) for t in outputs[:1]]
    return [size for size in (rules.size(c) for c in copies) if size]


def _conv_workspace(
    op: OpInfo, info: dict[int, TensorInfo], batch: int, rules: AllocatorRules
) -> list[int]:
    """The library workspace a convolution takes while it runs on a device whose rules say so
    (:data:`CONV_WORKSPACE` x the bytes of its tensors); none for any other operation."""
    if not rules.conv_workspace or op.type not in CONV_OPS:
        return []
    tensors = [info[i] for i in op.inputs if i in info] + list(op.outputs)
    if op.type.startswith("Depthwise"):
        fraction = CONV_WORKSPACE["depthwise"]
    elif half := [t.dtype for t in tensors if t.dtype in SIXTEEN_BIT]:
        nhwc = all(dtype in rules.nhwc_16_bit for dtype in half)
        fraction = CONV_WORKSPACE["16-bit" if nhwc else "16-bit NCHW"]
    else:
        fraction = CONV_WORKSPACE["float32"]
    size = rules.size(int(fraction * sum(t.bytes_at(batch) for t in tensors)))
    return [size] if size else []


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


def _alone(last_reader: dict[int, int], others_done: dict[int, int], at: int, i: int) -> bool:
    """Whether the operation at ``at`` is the last to read tensor ``i`` and its other readers
    are done before it starts (TensorFlow forwards a buffer whose reference count is 1)."""
    return last_reader.get(i) == at and others_done.get(i, -1) < at


def _forwardable(
    op: object,
    tensor: int,
    sizes: dict[int, int],
    buffer_of: dict[int, int],
    buffer_end: dict[int, int],
    done: int,
    owned: set[int],
    forwarded: set[int],
    alone: Callable[[int], bool],
) -> int | None:
    """The buffer of a dying input the element-wise ``op`` may write ``tensor`` over: one that
    ``op`` is the last to read (``alone``: no other reader still running), done when ``op`` is
    (``done``)."""
    if getattr(op, "type", "") not in FORWARDING:
        return None
    for i in getattr(op, "inputs", ()):
        base = buffer_of.get(i)
        if base is None or base in owned or (base != i and i not in forwarded):
            continue  # a view or a caller's buffer is never written over
        if sizes.get(i) == sizes[tensor] and buffer_end.get(base) == done and alone(i):
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
                if out.dtype in SIXTEEN_BIT:
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
