"""The traced training step: every tensor it makes, who makes it and who reads it.

:func:`trace_step` traces ``model.train_step`` (forward, ``tf.GradientTape`` backward and the
optimizer's update, as ``fit`` runs it) into a graph twice, at two batch sizes, and records
each operation in the order the graph holds them, with each output's size as an affine
function of the batch (``fixed + per_example * batch``). Nothing runs: the sizes come from the
graph's static shapes. :mod:`tfaccel.planning.memory` simulates that list; the FLOPs and the
bytes the operations touch feed :mod:`tfaccel.planning.roofline`.
"""

from __future__ import annotations

import math
import os
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfaccel.core.errors import UsageError

_Record = tuple[
    str,
    str,
    str,
    tuple[int, ...],
    list[tuple[int, str, int, int]],
    int,
    int,
    list[tuple[int, int, int]],
    tuple[int, ...],
    bool,
]
"""A traced operation: name, type, phase, inputs, outputs (index, dtype, bytes, count), FLOPs,
scratch bytes, buffers held for a loop's iterations in flight (count, bytes of each, what), a
convolution's kernel shape, whether the graph optimiser folds it into a constant (see
``_folded``)."""

__all__ = [
    "OpInfo",
    "StepData",
    "StepGraph",
    "TensorInfo",
    "Variable",
    "check_input_shape",
    "optimizers_of",
    "remember_step_data",
    "remembered_step_data",
    "trace_step",
]

# Operations whose output is a view of their first input (no new buffer).
ALIASING = frozenset(
    {
        "Identity",
        "IdentityN",
        "Reshape",
        "Squeeze",
        "ExpandDims",
        "StopGradient",
        "PreventGradient",
        "EnsureShape",
        "Snapshot",
        "CheckNumerics",
        "ReadVariableOp",
    }
)
NOT_RUN = ALIASING | {"Const", "NoOp", "VarHandleOp", "Placeholder", "Shape"}
"""Operations that launch no kernel of their own: views, constants, variable handles, inputs."""
SIXTEEN_BIT = ("bfloat16", "float16", "half")
"""The 16-bit floating-point dtype names (``half`` is float16's other name)."""
# Matmul-class operations whose FLOPs are counted (2 per multiply-add).
_MATMULS = frozenset({"MatMul", "BatchMatMulV2", "BatchMatMulV3", "BatchMatMul", "Einsum"})
CONV_OPS = frozenset(
    {
        "Conv2D",
        "Conv3D",
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "Conv3DBackpropInputV2",
        "Conv3DBackpropFilterV2",
        "DepthwiseConv2dNative",
        "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter",
    }
)


@dataclass(frozen=True)
class TensorInfo:
    """One output of an operation: its size is ``fixed + per_example * batch`` bytes, held in
    ``count`` separate buffers of equal size (more than one for a TensorList: a While loop's
    per-iteration tensors, each its own allocation)."""

    index: int
    dtype: str
    fixed: int
    per_example: int
    count: int = 1

    def bytes_at(self, batch: int) -> int:
        return max(0, self.fixed + self.per_example * batch)


@dataclass(frozen=True)
class OpInfo:
    """One operation of the step, in graph order.

    Attributes:
        name: the operation's name (``gradient_tape/...`` for the backward pass, the
            optimizer's name for its update).
        type: the TensorFlow operation type.
        phase: ``forward``, ``backward``, ``update`` or ``other``.
        inputs: indices of the tensors it reads.
        outputs: the tensors it makes.
        flops_fixed / flops_per_example: matmul-class FLOPs, affine in the batch.
        scratch_fixed / scratch_per_example: bytes of temporaries the operation allocates
            and frees itself (not in the graph), affine in the batch.
        held: more buffers the operation holds while it runs, each its own allocation (a
            loop's iterations in flight, see ``_in_flight``; a CPU's 16-bit work buffers, see
            ``_cpu_16_bit_buffers``): ``(count, fixed, per_example, what)``, ``count``
            buffers of ``fixed + per_example * batch`` bytes.
        kernel: a convolution's (its forward's or a gradient's) kernel shape: its window's
            spatial sizes, its input channels, its output channels (a depthwise one's: its
            channel multiplier); empty for anything else or an unknown size (see
            :attr:`window`).
        folded: TensorFlow's graph optimiser replaces the operation by a constant before the
            step runs (see ``_folded``): its outputs that an operation left in the graph reads
            are constants, held while the step's function lives.
    """

    name: str
    type: str
    phase: str
    inputs: tuple[int, ...]
    outputs: tuple[TensorInfo, ...]
    flops_fixed: int = 0
    flops_per_example: int = 0
    scratch_fixed: int = 0
    scratch_per_example: int = 0
    held: tuple[tuple[int, int, int, int], ...] = ()
    kernel: tuple[int, ...] = ()
    folded: bool = False

    @property
    def window(self) -> tuple[int, ...]:
        """A convolution's kernel window, its spatial sizes (``(1, 7)`` for a Keras ``Conv1D``
        of kernel size 7, which TensorFlow runs as a 2-D convolution one row high); empty for
        anything else or an unknown size."""
        return self.kernel[:-2]

    def scratch_at(self, batch: int) -> int:
        """Bytes the operation allocates for itself while it runs (see ``_scratch``)."""
        return max(0, self.scratch_fixed + self.scratch_per_example * batch)

    def held_at(self, batch: int) -> list[tuple[int, int, int]]:
        """The separate buffers the operation holds while it runs: (how many, bytes each,
        what they are: ``BODY``, ``AHEAD``, ``SUMMED``, ``SUMMAND_INPUT`` or ``CPU_16_BIT``)."""
        return [(n, max(0, fixed + per * batch), out) for n, fixed, per, out in self.held]


@dataclass(frozen=True)
class Variable:
    """A variable that lives through the step: a weight, an optimizer slot, or other state."""

    name: str
    kind: str  # "weight", "frozen", "slot", "state"
    bytes: int


@dataclass
class StepGraph:
    """The traced step: operations in graph order, the inputs, the persistent variables."""

    ops: list[OpInfo]
    inputs: tuple[int, ...]
    variables: list[Variable]
    trainable_parameters: int
    weight_bytes: int
    optimizer: str
    policy: str
    notes: list[str] = field(default_factory=list)
    loops: list[LoopBody] = field(default_factory=list)
    metric_variables: int = 0
    """The variables of the model's metrics (its loss tracker's too), which ``train_on_batch``
    resets, one by one, before every step."""
    steps_per_execution: int = 1
    """The compiled model's ``steps_per_execution``: the steps ``fit`` runs in one call of its
    function."""

    def flops(self, batch: int) -> int:
        """Matmul-class FLOPs of one training step at ``batch`` (forward, backward, update),
        ``While`` loops' bodies counted once per iteration where the graph gives them."""
        return _flops(self.ops, batch) + _looped(self.loops, lambda ops: _flops(ops, batch))

    @property
    def launches(self) -> int:
        """Operations that run a kernel (views, constants and variable reads excluded), a
        loop's body once per iteration (as TensorFlow's executor runs it; a GPU's cuDNN kernel
        for an LSTM or GRU runs the whole loop as one)."""
        return _launches(self.ops) + _looped(self.loops, _launches)

    @property
    def loops_known(self) -> bool:
        """Whether every ``While`` loop's iterations (nested ones too) are known."""
        return _all_known(self.loops)

    def bytes_touched(self, batch: int) -> int:
        """Bytes every operation writes plus reads once: a lower bound of the memory traffic
        (a loop's body once per iteration)."""
        return _bytes(self.ops, batch) + _looped(self.loops, lambda ops: _bytes(ops, batch))


def _flops(ops: Sequence[OpInfo], batch: int) -> int:
    return sum(op.flops_fixed + op.flops_per_example * batch for op in ops)


def _launches(ops: Sequence[OpInfo]) -> int:
    return sum(1 for op in ops if op.type not in NOT_RUN)


def _bytes(ops: Sequence[OpInfo], batch: int) -> int:
    sizes: dict[int, int] = {}
    total = 0
    for op in ops:
        for t in op.outputs:
            sizes[t.index] = t.bytes_at(batch)
            if op.type not in ALIASING:
                total += sizes[t.index]
        if op.type not in ALIASING:
            total += sum(sizes.get(i, 0) for i in op.inputs)
    return total


def _looped(loops: Sequence[LoopBody], count: Callable[[Sequence[OpInfo]], int]) -> int:
    """``count`` of the loops' bodies, each times its iterations, nested loops inside theirs;
    a loop whose iterations are unknown counts once (a lower bound, see
    :attr:`StepGraph.loops_known`)."""
    return sum(
        (loop.iterations or 1) * (count(loop.ops) + _looped(loop.loops, count)) for loop in loops
    )


def _all_known(loops: Sequence[LoopBody]) -> bool:
    return all(loop.iterations is not None and _all_known(loop.loops) for loop in loops)


def trace_step(
    model: Any,
    batch_size: int,
    *,
    probe_batch: int | None = None,
    data: StepData | None = None,
) -> StepGraph:
    """Trace one training step of a compiled, built Keras model at two batch sizes.

    Args:
        model: a compiled ``keras.Model``: one whose inputs have known shapes (apart from the
            batch), or one whose training data is given (``data``).
        batch_size: the batch the plan is for.
        probe_batch: the second batch size traced (default ``batch_size + 8``) to separate
            each tensor's per-example part from its fixed part.
        data: the structure and dtypes of a batch as ``fit`` hands it to ``train_step``
            (:class:`StepData`; default: what :func:`remember_step_data` holds for ``model``):
            the model's own ``train_step`` is traced on it, with every optimizer the step
            applies. Without it, ``train_step((x, y))`` on ``model.inputs`` and a ``y`` the
            compiled loss accepts.

    Raises:
        UsageError: the model has no optimizer, or no fully known input shape.
    """
    import tensorflow as tf

    data = data if data is not None else remembered_step_data(model)
    if data is not None:
        return _trace_own_step(model, batch_size, probe_batch or batch_size + 8, data, tf)
    if getattr(model, "optimizer", None) is None:
        raise _not_compiled(model)
    specs = _input_specs(model)
    model.optimizer.build(model.trainable_variables)
    second = probe_batch or batch_size + 8
    first_ops, inputs, first_loops = _trace(model, specs, batch_size, tf)
    second_ops, _, second_loops = _trace(model, specs, second, tf)
    if not _same_ops(first_ops, second_ops):  # a small batch's constants: traced larger
        batch_size, second = batch_size + LARGER_TRACE, second + LARGER_TRACE
        (first_ops, inputs, first_loops), (second_ops, _, second_loops) = (
            _trace(model, specs, batch, tf) for batch in (batch_size, second)
        )
    return _step_graph(
        model,
        (first_ops, second_ops),
        inputs,
        batch_size,
        second,
        [model.optimizer],
        (first_loops, second_loops),
    )


def _not_compiled(model: Any) -> UsageError:
    return UsageError(
        "The model is not compiled",
        expected="a keras.Model after model.compile(optimizer=..., loss=...)",
        received=f"{type(model).__name__} {getattr(model, 'name', '')!r} without optimizer",
        fix="compile the model in model_fn() before returning it",
    )


LARGER_TRACE = 1024
"""Examples added to both batches a step is traced at when the two traces differ in their
operations: TensorFlow makes a ``tf.zeros`` or ``tf.ones`` of fewer than 1,000 elements a
constant and a larger one a ``Fill`` (``array_ops.zeros``), so an RNN's zero state at batch 1
(1 x 128) and at batch 9 (9 x 128) trace to different graphs; from 1,024 examples on, every
tensor that grows with the batch is past that size. The sizes, affine in the batch, are read
from the larger traces (the smaller batch's constants cost what its fills would)."""


def _same_ops(first: list[_Record], second: list[_Record]) -> bool:
    """Whether two traces of a step ran the same operations, in the same order."""
    return [o[1] for o in first] == [o[1] for o in second]


def _step_graph(
    model: Any,
    traced: tuple[list[_Record], list[_Record]],
    inputs: tuple,
    batch_size: int,
    second: int,
    optimizers: list[Any],
    loops: tuple[list[_LoopRecord], list[_LoopRecord]],
) -> StepGraph:
    """The step traced at ``batch_size`` and ``second`` (``traced``: its operations, ``loops``:
    its loops' bodies, at each), as affine sizes; ``optimizers``: those whose variables live
    through the step."""
    first_ops, second_ops = traced
    first_loops, second_loops = loops
    if not _same_ops(first_ops, second_ops):
        raise RuntimeError("the training step traced to different graphs at two batch sizes")
    ops = [_affine(a, b, batch_size, second) for a, b in zip(first_ops, second_ops, strict=False)]
    variables = _variables(model, optimizers)
    weight_bytes = sum(v.bytes for v in variables if v.kind in ("weight", "frozen"))
    parameters = sum(int(math.prod(v.shape)) for v in model.trainable_variables)
    policy = getattr(getattr(model, "dtype_policy", None), "name", None) or "float32"
    if any("bfloat16" in v or "float16" in v for v in _layer_policies(model)):
        policy = next(v for v in _layer_policies(model) if "16" in v)
    return StepGraph(
        ops=ops,
        inputs=inputs,
        variables=variables,
        trainable_parameters=parameters,
        weight_bytes=weight_bytes,
        optimizer=_optimizer_name(model, optimizers),
        policy=policy,
        loops=loop_bodies(first_loops, second_loops, batch_size, second),
        metric_variables=len(getattr(model, "metrics_variables", None) or []),
        steps_per_execution=_steps_per_execution(model),
    )


def _steps_per_execution(model: Any) -> int:
    """The compiled model's ``steps_per_execution`` (1 where it has none, or not a count)."""
    value = getattr(model, "steps_per_execution", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


@dataclass(frozen=True)
class _Leaf:
    """One tensor of a batch: its shape after the batch dimension (the whole shape when it
    has none) and its dtype."""

    shape: tuple[int, ...]
    dtype: str
    batched: bool


@dataclass(frozen=True)
class StepData:
    """The structure and dtypes of one batch as ``fit`` hands it to ``train_step``: ``x``
    alone, ``(x, y)``, ``(x, y, sample_weight)``, dicts and lists of them (what
    ``keras.utils.pack_x_y_sample_weight`` makes of ``fit``'s arrays, or a dataset's
    element). A tensor whose first dimension is the batch's is traced at the batch planned;
    any other keeps its shape."""

    structure: Any
    batch: int

    @classmethod
    def of(cls, element: Any) -> StepData:
        """The StepData of one batch (arrays, tensors or ``tf.TensorSpec``s, nested).

        Raises:
            UsageError: a part of it is not a dense array (a RaggedTensor, a SparseTensor,
                an object), or it holds no array with a batch dimension.
        """
        import numpy as np
        import tensorflow as tf

        leaves = []
        for value in tf.nest.flatten(element):
            if isinstance(value, tf.TensorSpec):
                shape, dtype = tuple(value.shape), value.dtype.name
            elif isinstance(value, np.ndarray) and value.dtype.kind in "USO":
                shape, dtype = tuple(value.shape), "string"  # text, as TensorFlow holds it
            elif isinstance(value, (tf.Tensor, np.ndarray)) and not isinstance(
                value, (tf.RaggedTensor, tf.SparseTensor)
            ):
                shape, dtype = tuple(value.shape), tf.as_dtype(value.dtype).name
            elif isinstance(value, (int, float, bool, np.generic)):
                array = np.asarray(value)
                shape, dtype = tuple(array.shape), tf.as_dtype(array.dtype).name
            else:
                raise UsageError(
                    "A part of the training batch is not a dense array",
                    expected="arrays or tensors (x, (x, y), (x, y, sample_weight), dicts of "
                    "them), as fit hands them to train_step",
                    received=f"a {type(value).__name__} in the batch",
                    fix="plan on a batch of dense arrays (densify ragged or sparse inputs)",
                )
            if any(d is None for d in shape[1:]):
                raise UsageError(
                    "A shape of the training batch is not fully known",
                    expected="every dimension but the batch known",
                    received=f"a tensor of shape {shape}",
                    fix="plan on a batch of arrays (data=(x[:32], y[:32])), not open specs",
                )
            leaves.append((shape, dtype))
        sized = [shape[0] for shape, _ in leaves if shape]
        if not sized:
            raise UsageError(
                "The training batch has no batch dimension",
                expected="one batch of arrays whose first dimension is the batch",
                received="scalars only" if leaves else "no arrays",
                fix="pass one batch as fit would read it, e.g. data=(x[:32], y[:32])",
            )
        batch = sized[0]
        structure = tf.nest.pack_sequence_as(
            element,
            [
                _Leaf(
                    tuple(int(d) for d in shape[1:]) if batched else _whole(shape),
                    dtype,
                    batched,
                )
                for shape, dtype in leaves
                for batched in [bool(shape) and (shape[0] == batch or shape[0] is None)]
            ],
        )
        return cls(structure, int(batch) if batch is not None else 0)

    def specs(self, batch: int) -> Any:
        """The ``tf.TensorSpec``s of a batch of ``batch`` examples, in the batch's structure."""
        import tensorflow as tf

        def spec(leaf: _Leaf) -> Any:
            shape = (batch, *leaf.shape) if leaf.batched else leaf.shape
            return tf.TensorSpec(shape, tf.as_dtype(leaf.dtype))

        return tf.nest.map_structure(spec, self.structure)

    def describe(self) -> str:
        """The batch's shapes, ``((128, 28, 28, 1) float32, (128,) int64)``."""

        def one(leaf: Any) -> str:
            if isinstance(leaf, _Leaf):
                shape = (self.batch or None, *leaf.shape) if leaf.batched else leaf.shape
                return f"{tuple(shape)} {leaf.dtype}"
            if isinstance(leaf, dict):
                return "{" + ", ".join(f"{k}: {one(v)}" for k, v in leaf.items()) + "}"
            return "(" + ", ".join(one(v) for v in leaf) + ")"

        return one(self.structure)


def _whole(shape: tuple[Any, ...]) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


_REMEMBERED: weakref.WeakKeyDictionary[Any, StepData] = weakref.WeakKeyDictionary()


def remember_step_data(model: Any, data: StepData) -> None:
    """Have :func:`trace_step` trace ``model``'s own ``train_step`` on ``data`` from now on,
    wherever it is called from (``tfaccel.plan``, ``estimate_memory``): what a captured
    workload knows of its data (:func:`tfaccel.planning.source.workload_model`) travels
    with its model."""
    _REMEMBERED[model] = data


def remembered_step_data(model: Any) -> StepData | None:
    """What :func:`remember_step_data` holds for ``model`` (None: nothing)."""
    try:
        return _REMEMBERED.get(model)
    except TypeError:  # not weakly referable: nothing remembered
        return None


def optimizers_of(model: Any) -> list[Any]:
    """Every optimizer the model holds: ``model.optimizer`` and those its own ``compile``
    keeps as attributes (a GAN's ``d_optimizer`` and ``g_optimizer``), in lists and dicts
    too, once each."""
    import keras

    found: dict[int, Any] = {}
    candidates = [getattr(model, "optimizer", None)]
    for value in list(vars(model).values()):
        if isinstance(value, dict):
            candidates += list(value.values())
        elif isinstance(value, (list, tuple)):
            candidates += list(value)
        else:
            candidates.append(value)
    for value in candidates:
        if isinstance(value, keras.optimizers.Optimizer):
            found.setdefault(id(value), value)
    return list(found.values())


def _trace_own_step(model: Any, batch_size: int, second: int, data: StepData, tf: Any) -> StepGraph:
    """The model's own ``train_step`` traced on ``data`` at two batch sizes. Its optimizers
    are built as ``fit`` builds them: ``model.optimizer`` on the trainable variables, any
    other (a GAN's) on the variables it is first applied to, in the first trace (traced again
    where that made a graph other than the built optimizers' second trace)."""
    optimizers = optimizers_of(model)
    if not optimizers:
        raise _not_compiled(model)
    if getattr(model, "optimizer", None) is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)  # as fit does before its first step
    unbuilt = [o for o in optimizers if not o.built]
    first_ops, inputs, first_loops = _trace(model, data, batch_size, tf)
    second_ops, _, second_loops = _trace(model, data, second, tf)
    if any(o.built for o in unbuilt) and not _same_ops(first_ops, second_ops):
        # built in it: traced again
        first_ops, inputs, first_loops = _trace(model, data, batch_size, tf)
    if not _same_ops(first_ops, second_ops):  # a small batch's constants: traced larger
        batch_size, second = batch_size + LARGER_TRACE, second + LARGER_TRACE
        (first_ops, inputs, first_loops), (second_ops, _, second_loops) = (
            _trace(model, data, batch, tf) for batch in (batch_size, second)
        )
    used = [o for o in optimizers if o.built]
    step = _step_graph(
        model,
        (first_ops, second_ops),
        inputs,
        batch_size,
        second,
        used,
        (first_loops, second_loops),
    )
    main = getattr(model, "optimizer", None)
    if main is not None and len(used) > 1:
        scope = re.compile(rf"{re.escape(main.name)}(_\d+)?/")
        if not any(scope.match(record[0]) for record in first_ops):
            step.notes.append(
                f"{type(main).__name__} (model.optimizer, {type(model).__name__}'s compile "
                "left it to Keras) is built by fit on every trainable weight, and its slots "
                "counted, though the step applies other optimizers"
            )
    return step


def _optimizer_name(model: Any, optimizers: list[Any]) -> str:
    """``Adam``; for several, each with the attribute that holds it: ``d_optimizer Adam +
    g_optimizer Adam``."""
    if len(optimizers) == 1:
        return type(optimizers[0]).__name__
    names = {id(v): k for k, v in vars(model).items() if not k.startswith("_")}
    if getattr(model, "optimizer", None) is not None:
        names[id(model.optimizer)] = "optimizer"
    return " + ".join(f"{names.get(id(o), o.name)} {type(o).__name__}" for o in optimizers)


def _layer_policies(model: Any) -> list[str]:
    return [
        getattr(getattr(layer, "dtype_policy", None), "name", "")
        for layer in model._flatten_layers()
    ]


def check_input_shape(model: Any) -> None:
    """Refuse a model the planner cannot trace: one without known symbolic inputs and outputs
    (a subclassed model, built or not; a Sequential model never built).

    Raises:
        UsageError: what the planner needs, and how to give it.
    """
    try:
        known = bool(model.inputs) and bool(model.outputs)
    except (AttributeError, ValueError):
        known = False
    if not known:
        raise _no_input_shape(model)
    _input_specs(model)


def _no_input_shape(model: Any) -> UsageError:
    import keras

    kind = type(model).__name__
    name = getattr(model, "name", "")
    built = "built" if getattr(model, "built", False) else "not built"
    if isinstance(model, keras.Sequential):
        fix = (
            "start the model with keras.Input(shape=...), or call model.build((None, ...)) "
            "with the shape of one example, before planning"
        )
    else:
        fix = (
            "pass one batch of its training data, as fit gets it: tfaccel.plan(model, "
            "data=(x[:32], y[:32])) (its train_step is traced on it), or plan a functional "
            f"model around it: x = keras.Input(shape=(...)); tfaccel.plan(keras.Model(x, "
            f"{kind}()(x))) (model.build() alone gives a subclassed model no symbolic inputs)"
        )
    return UsageError(
        f"The planner cannot trace {kind} {name!r}: its input shape is unknown",
        expected="a model with known inputs and outputs: Sequential or functional, built on "
        "keras.Input(shape=...)",
        received=f"{kind} {name!r}, {built}, without symbolic inputs",
        fix=fix,
    )


def _input_specs(model: Any) -> list[tuple[tuple[int, ...], str]]:
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):
        inputs = None
    if not inputs:
        raise _no_input_shape(model)
    specs = []
    for tensor in inputs:
        shape = tuple(tensor.shape[1:])
        if any(d is None for d in shape):
            raise UsageError(
                "The model's input shape is not fully known",
                expected="every dimension but the batch known, e.g. keras.Input(shape=(32, 32, 3))",
                received=f"input shape {tuple(tensor.shape)}",
                fix="give keras.Input a full shape (pad or crop sequences to one length)",
            )
        specs.append((tuple(int(d) for d in shape), str(tensor.dtype)))
    return specs


def _targets(model: Any, batch: int, tf: Any) -> Any:
    """TensorSpecs for ``y`` that the compiled loss accepts, one per output in the structure
    of the model's outputs (a dict of named outputs: a dict of targets, with each output's own
    loss): integer labels when the output is a class distribution and its loss is a sparse
    one, else the output's own shape."""
    loss = model.loss if hasattr(model, "loss") else None
    structure = getattr(model, "_outputs_struct", None)
    if isinstance(structure, dict) and len(structure) > 1:
        return {
            key: _target(output, loss.get(key) if isinstance(loss, dict) else loss, batch, tf)
            for key, output in structure.items()
        }
    if isinstance(structure, (list, tuple)) and len(structure) > 1:
        losses = loss if isinstance(loss, (list, tuple)) else [loss] * len(structure)
        return [_target(o, each, batch, tf) for o, each in zip(structure, losses, strict=False)]
    return _target(model.outputs[0], loss, batch, tf)


def _target(output: Any, loss: Any, batch: int, tf: Any) -> Any:
    name = loss if isinstance(loss, str) else getattr(loss, "name", type(loss).__name__)
    out_shape = tuple(int(d) for d in output.shape[1:])
    if "sparse" in str(name).lower():
        return tf.TensorSpec((batch, *out_shape[:-1]), tf.int64)
    return tf.TensorSpec((batch, *out_shape), tf.float32)


def _trace(
    model: Any, specs: list[tuple[tuple[int, ...], str]] | StepData, batch: int, tf: Any
) -> tuple[list[_Record], tuple, list[_LoopRecord]]:
    if isinstance(specs, StepData):
        graph = _own_step_graph(model, specs, batch, tf)
        phase_of = _own_phases(model)
    else:
        graph = _standard_step_graph(model, specs, batch, tf)
        optimizer_scope = model.optimizer.name + "/"

        def phase_of(name: str) -> str:
            return (
                "backward"
                if name.startswith("gradient_tape/")
                else "update"
                if name.startswith(optimizer_scope)
                else "forward"
                if name.startswith(model.name)
                else "other"
            )

    index: dict[str, int] = {}
    records = []
    elements: dict[str, int] = {}  # TensorList tensor name -> elements it holds (when known)
    needed = _needed(graph)
    folded = _folded(graph, needed)
    for op in graph.get_operations():
        if op not in needed:
            continue
        outputs = []
        lists = _tensor_lists(op, elements)
        for n, t in enumerate(op.outputs):
            index[t.name] = len(index)
            count, element = lists.get(n, (1, -2))
            size = _nbytes(t) if element == -2 else count * element
            outputs.append((index[t.name], t.dtype.name, size, max(count, 1)))
        inputs = tuple(index[t.name] for t in op.inputs if t.name in index)
        records.append(
            (
                op.name,
                op.type,
                phase_of(op.name),
                inputs,
                outputs,
                _op_flops(op),
                _scratch(op),
                _in_flight(op, elements) + _cpu_16_bit_buffers(op),
                _op_kernel(op),
                op.name in folded,
            )
        )
    placeholders = tuple(
        index[t.name] for t in graph.inputs if t.dtype != tf.resource and t.name in index
    )
    if isinstance(specs, StepData):
        records = _ready_early(graph, needed, records)
    records = _pushed_down(graph, needed, folded, records, index)
    return records, placeholders, loop_records(graph, needed)


_PUSH_FAMILY = {
    "Mul": frozenset({"Mul"}),
    "AddV2": frozenset({"AddV2", "Add"}),
    "Add": frozenset({"AddV2", "Add"}),
}
"""Grappler's constant push-down: a parent of these types with a constant input, over a child
of the same family (``ConstantFolding::ConstantPushDown``, its symmetric cases)."""


def _grappler_name(tensor: Any) -> str:
    """A tensor as a node's input string in a GraphDef: ``op`` or ``op:k``."""
    return tensor.op.name if tensor.value_index == 0 else f"{tensor.op.name}:{tensor.value_index}"


def _pushed_down(
    graph: Any, needed: set[Any], folded: set[str], records: list[_Record], index: dict[str, int]
) -> list[_Record]:
    """``records`` after Grappler's constant push-down, where it lets a product of forward
    tensors run in the forward pass and be held until the backward pass reads it.

    ``parent(C, child(A, B))``, C a scalar constant, the child's result read by the parent
    alone, neither A nor B constant, float32 or float64 (not 16-bit: Grappler leaves those
    alone), becomes ``parent(X, child(C, Y))``. Which of A and B stays with C is decided by
    the order of their names, as Grappler sorts a commutative operation's inputs: C stays with
    the one whose name sorts first (read off TensorFlow's own rewritten graphs:
    ``benchmarks/results/runtime_pushdown.py``). In an attention's softmax gradient
    ``((dP - sum) * P) * c``, ``P`` is the forward softmax, named under the model's scope, and
    ``dP - sum`` is named ``gradient_tape/...``: for a model whose name sorts before
    ``gradient_tape`` (``functional``, ``attn``), TensorFlow computes ``c * P`` as soon as the
    softmax is done and holds it, one more attention-score-sized buffer, through the forward
    pass into the backward (the keras.io Transformer classifier: 4 such buffers at its peak in
    TensorFlow's allocation log, 3 without this); for one that sorts after (``transformer``,
    ``gru_attention``), ``(dP - sum) * c`` is computed in the backward pass and nothing is held.

    Here the child is moved to run right after the later of the stays-with leaf's and the
    constant's producers, in that leaf's phase (``c * P`` is a forward activation), with those
    two as its inputs, its result that leaf's size; the parent reads the other leaf and the
    child. (A moved child is read by its parent alone, which has a constant input and so is no
    other move's child: moves never chain.)
    """
    position = {record[0]: n for n, record in enumerate(records)}
    sizes = {out[0]: out[2] for record in records for out in record[4]}

    def constant(op: Any) -> bool:
        return op.type == "Const" or op.name in folded

    # child -> the record it follows, its inputs, its size, the phase it now runs in
    moves: dict[str, tuple[str, tuple[int, ...], int, str]] = {}
    parents: dict[str, tuple[int, ...]] = {}
    for op in graph.get_operations():
        family = _PUSH_FAMILY.get(op.type)
        if family is None or op not in needed or len(op.inputs) != 2:
            continue
        if op.outputs[0].dtype.name not in ("float32", "float64"):
            continue
        consts = [t for t in op.inputs if constant(t.op)]
        if len(consts) != 1 or consts[0].shape.rank != 0:
            continue  # a scalar (of any batch: the two traces must agree)
        c = consts[0]
        inner = op.inputs[1] if op.inputs[0] is c else op.inputs[0]
        child = inner.op
        if child.type not in family or len(child.inputs) != 2:
            continue
        if sum(1 for consumer in inner.consumers() if consumer in needed) != 1:
            continue
        if any(constant(t.op) for t in child.inputs):
            continue
        stays, lifted = sorted(child.inputs, key=_grappler_name)
        if not all(t.name in index for t in (stays, lifted, c, inner)):
            continue  # a tensor the trace did not record (a loop's, a resource)
        after = max(position[stays.op.name], position.get(c.op.name, -1))
        size = sizes.get(index[stays.name], 0)
        phase = records[position[stays.op.name]][2]
        moves[child.name] = (records[after][0], (index[stays.name], index[c.name]), size, phase)
        parents[op.name] = (index[lifted.name], index[inner.name])
    if not moves:
        return records
    changed: dict[str, _Record] = {}
    for record in records:
        if record[0] in moves:
            _, inputs, size, phase = moves[record[0]]
            outputs = [(n, dtype, size, count) for n, dtype, _, count in record[4]]
            changed[record[0]] = (record[0], record[1], phase, inputs, outputs, *record[5:])
        elif record[0] in parents:
            changed[record[0]] = (record[0], record[1], record[2], parents[record[0]], *record[4:])
    follows: dict[str, list[str]] = {}
    for child, (predecessor, *_) in moves.items():
        follows.setdefault(predecessor, []).append(child)
    result: list[_Record] = []
    for record in records:
        if record[0] in moves:
            continue
        result.append(changed.get(record[0], record))
        result.extend(changed[child] for child in follows.get(record[0], []))
    return result


def _ready_early(graph: Any, needed: set[Any], records: list[_Record]) -> list[_Record]:
    """``records`` with the operations that are ready from the step's start, though the
    graph holds them after the first optimizer update, moved before the first backward
    operation.

    In a step of several tapes (a GAN: the discriminator's, then the generator's), the second
    tape's forward through a model the first update does not change (the generator, on new
    noise) depends on nothing of the first tape's backward pass or update, through its inputs
    or its control inputs: TensorFlow's executor runs it alongside the first tape's work, and
    its activations are live through the first backward pass. The optimizers' own operations
    stay where they are. Measured on
    ``tests/data/scripts/gan.py`` (CPU allocator, float32): in graph order the plan was 7% under
    the peak at batch 64 and 17% under at 256; moved, 8% over and 1% under (2.6% under at 64
    once ``LeakyRelu`` writes over its input, as TensorFlow's kernel does). TensorFlow's executor
    log (``TF_CPP_VMODULE=executor=1``) of the keras.io DCGAN shows the same: the second
    generator's operations start interleaved with the first's, before the first backward pass.
    An operation that reads anything of the first backward pass or of an update stays where it
    is.
    """
    ops = [op for op in graph.get_operations() if op in needed]
    phases = [record[2] for record in records]
    if "update" not in phases or "backward" not in phases:
        return records
    first_update, first_backward = phases.index("update"), phases.index("backward")
    if first_backward > first_update:
        return records
    late: set[Any] = set()  # at or after the first backward operation, and what reads them
    movable: list[int] = []
    for position, op in enumerate(ops):
        sources = [t.op for t in op.inputs] + list(op.control_inputs)
        reads_late = any(source in late for source in sources)
        if position >= first_update and not reads_late and phases[position] != "update":
            movable.append(position)
        elif position >= first_backward or reads_late:
            late.add(op)
    if not movable:
        return records
    moved = set(movable)
    kept = [record for position, record in enumerate(records) if position not in moved]
    early = [records[position] for position in movable]
    return kept[:first_backward] + early + kept[first_backward:]


def _standard_step_graph(
    model: Any, specs: list[tuple[tuple[int, ...], str]], batch: int, tf: Any
) -> Any:
    """``model.train_step((x, y))`` traced on ``model.inputs`` and a ``y`` of its loss."""
    x_specs = [tf.TensorSpec((batch, *shape), dtype) for shape, dtype in specs]
    y_spec = _targets(model, batch, tf)

    @tf.autograph.experimental.do_not_convert
    def step(x: Any, y: Any) -> Any:
        return model.train_step((x, y))

    x_arg: Any = x_specs[0] if len(x_specs) == 1 else x_specs
    if len(x_specs) > 1:  # the model's own structure (a dict of named inputs), where it has one
        import keras

        try:
            x_arg = keras.tree.pack_sequence_as(model.input, x_specs)
        except (AttributeError, ValueError, TypeError):
            pass
    return tf.function(step).get_concrete_function(x_arg, y_spec).graph


def _own_step_graph(model: Any, data: StepData, batch: int, tf: Any) -> Any:
    """``model.train_step(data)`` traced on a batch of ``batch`` shaped as ``data``, as the
    function ``fit`` compiles calls it (AutoGraph on, as there)."""

    def step(batch_data: Any) -> Any:
        return model.train_step(batch_data)

    return tf.function(step).get_concrete_function(data.specs(batch)).graph


def _own_phases(model: Any) -> Any:
    """The phase of an operation of a step of the model's own: ``backward`` under any
    ``tf.GradientTape``'s gradient (``gradient_tape/``, ``gradient_tape_1/``...), ``update``
    under any of its optimizers' names, ``forward`` under the model's name or a layer's it
    holds (a VAE's ``encoder``, ``decoder_1``: each call of a nested model has a scope of
    its own), else ``other`` (the losses, the metrics)."""
    optimizers = "|".join(re.escape(o.name) for o in optimizers_of(model))
    layers = [model.name]
    try:
        layers += [
            layer.name for layer in model._flatten_layers(include_self=False, recursive=False)
        ]
    except AttributeError:
        pass
    backward = re.compile(r"gradient_tape(_\d+)?/")
    update = re.compile(rf"({optimizers})(_\d+)?/") if optimizers else None
    forward = re.compile("(" + "|".join(re.escape(n) for n in layers) + r")(_\d+)?/")

    def phase_of(name: str) -> str:
        if backward.match(name):
            return "backward"
        if update is not None and update.match(name):
            return "update"
        return "forward" if forward.match(name) else "other"

    return phase_of


def _needed(graph: Any) -> set[Any]:
    """The operations the step runs: those its results or a stateful operation (a variable's
    update, a random generator's) depend on. TensorFlow's graph optimiser removes the rest
    before anything runs (a gradient the step computes and never uses: the gradient of
    ``where(mask, x, 0)`` with respect to the constant 0, as for every Keras ``Dropout``)."""
    todo = [t.op for t in graph.outputs]
    for op in graph.get_operations():
        try:
            stateful = op.op_def.is_stateful
        except AttributeError:
            stateful = True
        if stateful or not op.outputs:
            todo.append(op)
    needed: set[Any] = set()
    while todo:
        op = todo.pop()
        if op in needed:
            continue
        needed.add(op)
        todo += [t.op for t in op.inputs] + list(op.control_inputs)
    return needed


FOLD_LIMIT = 100 * 1024
"""Bytes from which TensorFlow's constant folding keeps an operation whose values are not all
equal (``kMaxConstantSize`` of ``grappler/optimizers/constant_folding.cc``: it folds only where
the constant's encoding is under 100 KiB or no larger than what it replaces; a tensor of one
repeated value is encoded as that value, whatever its size)."""

_SHAPE_QUERIES = frozenset({"Shape", "ShapeN", "Size", "Rank"})
_FILLS = frozenset({"OnesLike", "ZerosLike"})
# What keeps a tensor of one repeated value one: its first input's value moved, broadcast or
# cast (Fill: its second input's).
_SPREADS = frozenset(
    {"Tile", "BroadcastTo", "Reshape", "ExpandDims", "Squeeze", "Identity", "Cast", "Transpose",
     "Unpack", "Slice", "StridedSlice"}
)  # fmt: skip
_ELEMENTWISE = frozenset(
    {
        "Neg", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Sign", "Abs", "Reciprocal",
        "AddV2", "Add", "Sub", "Mul", "MulNoNan", "RealDiv", "Div", "DivNoNan", "Maximum",
        "Minimum", "Pow", "SquaredDifference", "AddN",
    }
)  # fmt: skip
_NEVER_FOLDED = frozenset(
    {"Placeholder", "ReadVariableOp", "While", "StatelessWhile", "If", "StatelessIf",
     "PartitionedCall", "StatefulPartitionedCall", "NoOp"}
)  # fmt: skip


def _folded(graph: Any, needed: set[Any]) -> set[str]:
    """The names of the operations TensorFlow's graph optimiser replaces by constants before a
    ``tf.function``'s step runs (Grappler's constant folding, on by default): an operation
    that is not stateful, reads no variable, list or placeholder, and whose inputs are all
    constants (a ``Const``, or an operation folded before it); a shape query (``Shape``,
    ``Size``, ``Rank``) of a tensor of fully known shape; ``OnesLike`` and ``ZerosLike`` of a
    fully known shape. One whose values are not all equal is folded only under
    :data:`FOLD_LIMIT` bytes. The graph optimiser evaluates each once, and the step's function
    then holds the result as a constant for as long as it lives.

    TensorFlow's allocation log of the keras.io recommender (``benchmarks/results/
    unseen_scripts/recommender.py``: an ``l2`` ``embeddings_regularizer`` on a 9,724 x 50
    table) shows one: the regulariser's gradient ``l2 * 2 * table`` is computed as the
    gradient of ``l2 * sum(square(table))``, whose ``Tile`` of the loss's constant gradient to
    the table's shape reads constants only; the graph optimiser evaluates it (an allocation of
    step ``-1``) and the function keeps the table-sized result (``Unknown (from Proto)``) from
    the first step to the end, beside the step's own buffers: one table-sized buffer the
    plan had not counted at the step's peak (13.1 MiB measured, 11.6 predicted).
    """
    constant: dict[str, bool] = {}  # a constant tensor's name -> all its values equal
    folded: set[str] = set()
    for op in graph.get_operations():
        if op not in needed:
            continue
        if op.type == "Const":
            for t in op.outputs:
                constant[t.name] = _one_value(op)
            continue
        if op.type in _NEVER_FOLDED or _stateful(op):
            continue
        if any(t.dtype.name in ("resource", "variant") for t in [*op.inputs, *op.outputs]):
            continue
        if op.type in _SHAPE_QUERIES:
            if not all(t.shape.is_fully_defined() for t in op.inputs):
                continue
            uniform = False
        elif op.type in _FILLS:
            if not op.outputs[0].shape.is_fully_defined():
                continue
            uniform = True
        elif op.inputs and all(t.name in constant for t in op.inputs):
            values = [constant[t.name] for t in op.inputs]
            if op.type == "Fill":
                uniform = values[1]
            elif op.type in _SPREADS:
                uniform = values[0]
            else:
                uniform = op.type in _ELEMENTWISE and all(values)
        else:
            continue
        if all(t.shape.is_fully_defined() and t.shape.num_elements() <= 1 for t in op.outputs):
            uniform = True
        if not uniform and sum(max(_nbytes(t), 0) for t in op.outputs) >= FOLD_LIMIT:
            continue
        folded.add(op.name)
        for t in op.outputs:
            constant[t.name] = uniform
    return folded


def _stateful(op: Any) -> bool:
    try:
        return bool(op.op_def.is_stateful)
    except AttributeError:
        return True


def _one_value(op: Any) -> bool:
    """Whether every value of a ``Const`` is the same."""
    import numpy as np
    import tensorflow as tf

    try:
        value = tf.make_ndarray(op.get_attr("value"))
    except (ValueError, TypeError, AttributeError):
        return False
    return bool(value.size <= 1 or np.all(value == value.flat[0]))


def _nbytes(tensor: Any) -> int:
    if tensor.dtype.name in ("resource", "variant"):
        return 0
    shape = tensor.shape
    if shape.rank is None or not shape.is_fully_defined():
        return -1
    return int(math.prod(shape.as_list())) * tensor.dtype.size


# Producers (through Identity) of a tensor a While body pushes that own no new buffer: a
# TensorList keeps a reference to the variable's, the caller's or the list's own buffer.
_SHARED_BUFFER = frozenset({"ReadVariableOp", "Placeholder", "Const", "TensorListGetItem"})


def _tensor_lists(op: Any, elements: dict[str, int]) -> dict[int, tuple[int, int]]:
    """The TensorList outputs of ``op`` (variant tensors the graph gives no size): output
    position -> (elements, bytes of one element), each element its own buffer.

    - ``TensorListFromTensor`` copies each slice of its input into an element of its own.
    - A While loop's output list whose body pushes (``TensorListPushBack``: the accumulators
      that keep a tensor of every iteration for the backward pass) or sets
      (``TensorListSetItem``: a TensorArray of per-step outputs) a computed tensor holds one
      element per iteration. Iterations: the loop's static ``maximum_iterations``, else the
      largest element count of the lists it reads (the time steps an RNN unstacks, or the
      forward loop's accumulators its gradient loop pops), else 1. The whole list is taken at
      the loop's start and kept to the list's last reader: the forward loop fills it step by
      step, the gradient loop pops it step by step, so the high side.
    - A pushed loop variable (the value the iteration before computed, carried in: an LSTM's
      cell state ``c``) is a buffer of its own per iteration, kept by the list where it would
      have died with the next iteration; unless the body's value for it is pushed or set into
      another list as well (an LSTM's ``h``, also set into the layer's output TensorArray),
      which counts that buffer already (:func:`_carried_value`, :func:`_listed`).
      TensorFlow's allocation log of ``bench_plan.py``'s LSTM (128 units, 100 steps) shows
      it: 7 buffers of ``(batch, 128)`` per time step alive into the gradient loop (the four
      gates, ``tanh(c)``, ``h`` and ``c``), where the lists counted 6, ``c`` left out as a
      shared buffer.
    - A gradient loop's list of the input's gradient, a sum (``AddN``) of the list carried
      and one holding this time step's element, holds one element per iteration: TensorFlow's
      allocation log of the LSTM shows 100 ``(batch, 64)`` buffers of it alive at once
      (``AddN_3``), where the list counted none.
    - A tensor pushed or set into two lists (a SimpleRNN's ``h``: the output TensorArray and
      the gradient's accumulator) is one buffer, counted in the first.
    - A list the body pops or passes through owns nothing new (0 bytes).
    Also records in ``elements`` the element count of every list it can tell.
    """
    import tensorflow as tf

    found: dict[int, tuple[int, int]] = {}
    if op.type == "TensorListReserve":
        count = tf.get_static_value(op.inputs[1])
        if count is not None:
            elements[op.outputs[0].name] = int(count)
        found[0] = (1, 0)
    elif op.type == "TensorListFromTensor":
        shape = op.inputs[0].shape
        if shape.rank and shape[0] is not None:
            count = int(shape[0])
            elements[op.outputs[0].name] = count
            whole = _nbytes(op.inputs[0])
            found[0] = (count, whole // count if whole > 0 and count else 0)
    elif op.type in ("While", "StatelessWhile"):
        body = getattr(op, "_body_graph", None)
        if body is None:
            return {n: (1, 0) for n, t in enumerate(op.outputs) if t.dtype.name == "variant"}
        iterations = tf.get_static_value(op.inputs[1]) if len(op.inputs) > 1 else None
        if iterations is None or int(iterations) < 0:
            known = [elements[t.name] for t in op.inputs if t.name in elements]
            iterations = max(known) if known else 1
        iterations = int(iterations)
        listed = _listed(body)
        counted: set[Any] = set()  # pushed tensors counted in a list already
        for n, t in enumerate(op.outputs):
            if t.dtype.name != "variant" or n >= len(body.outputs):
                continue
            elements[t.name] = iterations
            source = _through_identity(body.outputs[n].op)
            pushed = _pushed(source)
            shared = pushed is None or _through_identity(pushed.op).type in _SHARED_BUFFER
            if shared and pushed is not None and _carried_value(body, pushed) is not None:
                shared = _carried_value(body, pushed) in listed
            if shared or _through_identity(pushed.op) in counted:
                found[n] = (1, 0)
                continue
            counted.add(_through_identity(pushed.op))
            element = _nbytes(pushed)
            found[n] = (iterations, max(element, 0))
    return found


def _pushed(source: Any) -> Any:
    """The tensor a loop body's list output ``source`` takes in each iteration: what it pushes
    or sets; for a sum of lists (``AddN``: a gradient loop adds a list holding this
    iteration's input gradient to the one carried, each time step its own element), what the
    list it adds sets or pushes; else None."""
    if source.type == "TensorListPushBack":
        return source.inputs[1]
    if source.type == "TensorListSetItem":
        return source.inputs[2]
    if source.type == "AddN":
        for term in source.inputs:
            found = _through_identity(term.op)
            if found.type in ("TensorListPushBack", "TensorListSetItem"):
                return _pushed(found)
    return None


def _listed(body: Any) -> set[Any]:
    """The operations (through ``Identity``) whose output the loop body pushes or sets into a
    list."""
    found = set()
    for body_op in body.get_operations():
        if body_op.type == "TensorListPushBack":
            found.add(_through_identity(body_op.inputs[1].op))
        elif body_op.type == "TensorListSetItem":
            found.add(_through_identity(body_op.inputs[2].op))
    return found


def _carried_value(body: Any, tensor: Any) -> Any:
    """Where ``tensor`` (through ``Identity``) is a floating-point loop variable of ``body``
    that the body changes: the operation that computes its next value (through
    ``Identity``); else None (not a loop variable, or one passed through unchanged)."""
    source = _through_identity(tensor.op)
    if source.type != "Placeholder" or not tensor.dtype.is_floating:
        return None
    for n, given in enumerate(body.inputs):
        if given.op is source and n < len(body.outputs):
            value = _through_identity(body.outputs[n].op)
            return None if value is source else value
    return None


def _through_identity(op: Any) -> Any:
    while op.type in ("Identity", "IdentityN") and op.inputs:
        op = op.inputs[0].op
    return op


AHEAD, SUMMED, SUMMAND_INPUT, BODY, CPU_16_BIT = 0, 1, 2, 3, 4
"""What a buffer an operation holds while it runs is: a loop's (see :func:`_in_flight`), or
the work buffer of a 16-bit operation on a CPU without native 16-bit kernels
(:func:`_cpu_16_bit_buffers`)."""

CPU_WORKING_SET = 30 * 2**20
"""Bytes TensorFlow's own CPU convolution-gradient kernels (``Conv2DCustomBackpropInputOp``,
``Conv2DCustomBackpropFilterOp``) size their work on (their "L3 cache")."""
CPU_L2_SET = 256 * 2**10
"""Bytes of one image's work per thread above which ``Conv2DCustomBackpropInputOp`` works on
one image at a time (its "L2 cache")."""


def _cpu_16_bit_buffers(op: Any) -> list[tuple[int, int, int]]:
    """The work buffers of a 16-bit operation that a CPU runs in TensorFlow's own kernels
    rather than oneDNN's (oneDNN takes bfloat16 only with AVX512_BF16 or AMX): (1, bytes,
    ``CPU_16_BIT``).

    - ``Conv2DBackpropInput``/``Conv2DBackpropFilter`` unfold the patches of
      ``ceil(W / (A + B + C))`` images at once, ``A`` = output pixels x filter size (kernel
      height x width x input channels), ``B``, ``C`` the other two matrices of one image's
      product, ``W`` = :data:`CPU_WORKING_SET` in elements, whatever the batch (up to 30 MiB:
      measured 14-26 MiB each on five bfloat16 convolution gradients of ``reference_cnn``,
      TensorFlow 2.21). The input gradient takes one image at a time when ``(A + B + C)``
      over this machine's CPUs reaches :data:`CPU_L2_SET` in elements (measured: the sixth).
    - ``MaxPoolGrad`` keeps a copy of the pooled output and an int64 index per pooled element.
    """
    if op.type not in ("Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPoolGrad"):
        return []
    half = [t for t in op.inputs if t.dtype.name in SIXTEEN_BIT]
    if not half:
        return []
    size = half[0].dtype.size
    try:
        if op.type == "MaxPoolGrad":
            pooled = int(math.prod(op.inputs[1].shape.as_list()))
            return [(1, pooled * (size + 8), CPU_16_BIT)]
        dy = op.inputs[2].shape.as_list()  # (batch, height, width, filters), NHWC
        kernel = (op.inputs[1] if op.type == "Conv2DBackpropInput" else op.outputs[0]).shape
        height, width, channels, filters = kernel.as_list()
        pixels, patch = dy[1] * dy[2], height * width * channels
    except (TypeError, ValueError, IndexError):
        return []  # a dimension unknown: not modelled
    unit = pixels * patch + patch * filters + pixels * filters
    images = -(-(CPU_WORKING_SET // size) // unit)
    threads = os.cpu_count() or 1
    if op.type == "Conv2DBackpropInput" and unit // threads >= CPU_L2_SET // size:
        images = 1  # one image at a time, each product spread over the threads
    return [(1, images * pixels * patch * size, CPU_16_BIT)]


def _in_flight(op: Any, elements: dict[str, int]) -> list[tuple[int, int, int]]:
    """The buffers a While loop holds while it runs: (how many, bytes each, ``BODY``,
    ``AHEAD``, ``SUMMED`` or ``SUMMAND_INPUT``).

    ``BODY``: the tensors one iteration of the body makes, once each (all of them at once:
    the high side).

    The executor runs up to ``parallel_iterations`` iterations of a loop at once; an iteration
    waits only for the tensors carried from the one before. So, per iteration in flight:

    - ``AHEAD``: a tensor of the body that does not depend on the floating-point tensors
      carried from one iteration to the next (an RNN's input projection ``x_t @ W``) is
      computed for every iteration in flight before the recurrence reaches it (measured: 32
      buffers of an LSTM's ``x_t @ W`` live at once at batch 128 and 256,
      ``parallel_iterations`` 32).
    - A sum carried through the loop (``acc + term``: a gradient loop summing a weight's
      gradient over the time steps) lags behind the recurrence: an iteration in flight holds
      either its term (``SUMMED``; measured: 33 buffers of an LSTM's 128 x 512
      recurrent-kernel gradient live at once at batch 32) or, before the term is computed, the
      tensors the body made that the term is computed from (``SUMMAND_INPUT``; measured: 32
      buffers of the LSTM's gate gradients at batch 128). :func:`tfaccel.planning.memory.simulate`
      counts the larger of the two.

    Assumed the high side: all ``parallel_iterations`` (at most the loop's iterations, where
    ``elements`` tells them), for every such tensor, through the whole loop. How far a sum lags
    depends on thread timing: in TensorFlow's allocation log of ``bench_plan.py``'s LSTM (128
    units, 100 steps) at batch 32 one process holds 31-32 terms of the recurrent kernel's
    gradient at once and another 2-3 (its gate gradients lagging instead, 23-28), each the same
    in all four steps; at batch 128 the gate gradients lag by 12, at 256 by 2. The bound costs
    nothing where the forward loop's peak is as high (the LSTM at 128 and 256), and over-counts
    by the lag not taken where the gradient loop's is the step's peak.
    """
    if op.type not in ("While", "StatelessWhile"):
        return []
    body = getattr(op, "_body_graph", None)
    if body is None:
        return []
    try:
        parallel = int(op.get_attr("parallel_iterations"))
    except (ValueError, AttributeError):
        parallel = 10  # tf.while_loop's default
    iterations = [elements[t.name] for t in op.outputs if t.name in elements]
    if iterations:  # the loop's iterations, as :func:`_tensor_lists` found them
        parallel = min(parallel, max(iterations))
    carried = set()  # the body's floating-point inputs that change from one iteration to the next
    sums = []
    for n, out in enumerate(body.outputs):
        if n >= len(body.inputs) or not out.dtype.is_floating:
            continue
        source = _through_identity(out.op)
        if source is body.inputs[n].op:
            continue  # passed through unchanged: a loop invariant
        carried.add(body.inputs[n].op)
        if source.type in ("AddN", "AddV2", "Add") and any(
            _through_identity(t.op) is body.inputs[n].op for t in source.inputs
        ):
            sums.append(source)
    chained: set[Any] = set()
    for body_op in body.get_operations():  # in graph order: inputs before their readers
        if body_op in carried or any(t.op in chained for t in body_op.inputs):
            chained.add(body_op)
    held: list[tuple[int, int, int]] = []
    summands = {_through_identity(t.op) for source in sums for t in source.inputs}
    for body_op in body.get_operations():
        if not _owns_buffers(body_op) or body_op in sums or body_op in summands:
            continue
        kind = BODY if body_op in chained else AHEAD
        count = 1 if body_op in chained else parallel
        held += [(count, _nbytes(t), kind) for t in body_op.outputs if _nbytes(t) > 0]
    inputs: dict[str, int] = {}
    for source in sums:
        for t in source.inputs:
            term = _through_identity(t.op)
            if term in carried or not _owns_buffers(term):
                continue
            held += [(parallel, _nbytes(o), SUMMED) for o in term.outputs if _nbytes(o) > 0]
            for i in term.inputs:
                if _owns_buffers(_through_identity(i.op)) and _nbytes(i) > 0:
                    inputs[i.name] = _nbytes(i)
    held += [(parallel, size, SUMMAND_INPUT) for size in inputs.values()]
    return held


def _owns_buffers(op: Any) -> bool:
    """Whether ``op`` makes tensors of its own (not a view, a constant, a placeholder, a list
    operation or a variable read)."""
    return not (
        op.type in ALIASING
        or op.type in ("Const", "Placeholder", "Shape", "NoOp")
        or op.type.startswith("TensorList")
        or not op.outputs
    )


def _scratch(op: Any) -> int:
    """Bytes an operation allocates for itself while it runs, where the graph can tell.

    ``Einsum`` (TensorFlow's EinsumHelper) runs as one batched MatMul over operands laid out
    as [batch labels, free labels, contracted labels] (either order of the last two, by
    adjoint): an operand whose labels are in another order is copied, transposed, into a
    temporary; and the MatMul's result is a temporary of the output's size when the output's
    labels are not [batch, free labels of the first operand, of the second]. Equations with
    an ellipsis or more than two operands: 0 (not modelled).
    """
    if op.type != "Einsum":
        return 0
    try:
        equation = op.get_attr("equation").decode().replace(" ", "")
    except (ValueError, AttributeError):
        return 0
    terms, _, output = equation.partition("->")
    operands = terms.split(",")
    if "." in equation or len(operands) != 2 or len(op.inputs) != 2:
        return 0
    first, second = operands
    batch = [c for c in output if c in first and c in second]
    total = 0
    for term, tensor in ((first, op.inputs[0]), (second, op.inputs[1])):
        other = second if term is first else first
        rest = [c for c in term if c not in batch]
        free = [c for c in rest if c in output]
        contract = [c for c in rest if c in other and c not in output]
        if len(free) + len(contract) != len(rest):
            return 0  # a label summed over one operand alone: not modelled
        laid_out = list(term)
        if laid_out not in (batch + free + contract, batch + contract + free):
            total += max(_nbytes(tensor), 0)
    free_first = [c for c in first if c in output and c not in batch]
    free_second = [c for c in second if c in output and c not in batch]
    if list(output) != batch + free_first + free_second:
        total += max(_nbytes(op.outputs[0]), 0)
    return total


def _op_flops(op: Any) -> int:
    """2 x multiply-adds of a matmul-class operation (0 for anything else)."""
    try:
        if op.type in _MATMULS:
            out = op.outputs[0].shape.as_list()
            a = op.inputs[0].shape.as_list()
            if op.type == "Einsum":
                equation = op.get_attr("equation").decode()
                return _einsum_flops(equation, [t.shape.as_list() for t in op.inputs])
            adj = op.get_attr("transpose_a") if op.type == "MatMul" else op.get_attr("adj_x")
            inner = a[-2] if adj else a[-1]
            return 2 * int(math.prod(out)) * int(inner)
        if op.type in CONV_OPS:
            out = op.outputs[0].shape.as_list()
            if op.type.endswith("BackpropFilter"):
                grad = op.inputs[2].shape.as_list()  # dy; the output is the kernel
                return 2 * int(math.prod(out)) * int(math.prod(grad[:-1]))
            if op.type.endswith(("BackpropInput", "BackpropInputV2")):
                kernel = op.inputs[1].shape.as_list()
                dy = op.inputs[2].shape.as_list()
                # a depthwise filter (h, w, channels, multiplier) reaches one input channel
                # for each output: the window alone, as in the forward
                window = kernel[:-2] if op.type.startswith("Depthwise") else kernel[:-1]
                return 2 * int(math.prod(dy)) * int(math.prod(window))
            kernel = op.inputs[1].shape.as_list()
            if op.type.startswith("Depthwise"):
                return 2 * int(math.prod(out)) * int(math.prod(kernel[:-2]))
            return 2 * int(math.prod(out)) * int(math.prod(kernel[:-1]))
    except (TypeError, ValueError):  # an unknown dimension: not counted
        return 0
    return 0


def _op_kernel(op: Any) -> tuple[int, ...]:
    """A convolution's kernel shape (its window's spatial sizes, then its input channels and
    its output channels or depth multiplier; empty for anything else, or where a size is
    unknown): the kernel is the second input of a forward and of an input's gradient, the
    output of a kernel's gradient."""
    if op.type not in CONV_OPS:
        return ()
    try:
        kernel = op.outputs[0] if op.type.endswith(("BackpropFilter", "FilterV2")) else op.inputs[1]
        shape = kernel.shape.as_list()
    except (TypeError, ValueError, IndexError):
        return ()
    if len(shape) < 3 or any(not isinstance(size, int) for size in shape):
        return ()
    return tuple(shape)


def _einsum_flops(equation: str, shapes: list[list[int]]) -> int:
    inputs, _, _output = equation.replace(" ", "").partition("->")
    sizes: dict[str, int] = {}
    for term, shape in zip(inputs.split(","), shapes, strict=False):
        for letter, size in zip(term, shape, strict=False):
            sizes[letter] = int(size)
    letters = set(inputs.replace(",", ""))
    if "." in letters:
        return 0
    return 2 * int(math.prod(sizes[c] for c in letters)) if len(shapes) == 2 else 0


def _affine(
    a: _Record,
    b: _Record,
    batch: int,
    second: int,
) -> OpInfo:
    name, op_type, phase, inputs, outs_a, flops_a, scratch_a, held_a, kernel, folded = a
    outs_b, flops_b, scratch_b, held_b = b[4], b[5], b[6], b[7]
    per_scratch = (scratch_b - scratch_a) // (second - batch)
    held = []
    for (count, size_a, output), (_, size_b, _) in zip(held_a, held_b, strict=False):
        per = (size_b - size_a) // (second - batch)
        held.append((count, size_a - per * batch, per, output))
    outputs = []
    for (index, dtype, size_a, count), (_, _, size_b, _) in zip(outs_a, outs_b, strict=False):
        size_a, size_b = max(size_a, 0), max(size_b, 0)
        per = (size_b - size_a) // (second - batch)
        outputs.append(TensorInfo(index, dtype, size_a - per * batch, per, count))
    per_flops = (flops_b - flops_a) // (second - batch)
    return OpInfo(
        name=name,
        type=op_type,
        phase=phase,
        inputs=inputs,
        outputs=tuple(outputs),
        flops_fixed=flops_a - per_flops * batch,
        flops_per_example=per_flops,
        scratch_fixed=scratch_a - per_scratch * batch,
        scratch_per_example=per_scratch,
        held=tuple(held),
        kernel=kernel,
        folded=folded and b[9],
    )


def _variables(model: Any, optimizers: list[Any]) -> list[Variable]:
    seen: set[int] = set()
    result = []
    trainable = {id(v) for v in model.trainable_variables}
    groups = [("weight" if id(v) in trainable else "frozen", v) for v in model.variables]
    for optimizer in optimizers:
        groups += [("slot" if len(v.shape) else "state", v) for v in optimizer.variables]
    for var in getattr(model, "metrics_variables", []) or []:
        groups.append(("state", var))
    for kind, var in groups:
        if id(var) in seen:
            continue
        seen.add(id(var))
        size = int(math.prod(var.shape)) * _dtype_size(var.dtype)
        result.append(Variable(getattr(var, "path", var.name), kind, size))
    return result


def _dtype_size(dtype: Any) -> int:
    import numpy as np

    return int(np.dtype(str(dtype)).itemsize) if str(dtype) != "bfloat16" else 2


# -- the operations a While loop runs per iteration (its body), for the step time --------------


@dataclass(frozen=True)
class LoopBody:
    """A ``While`` loop of the step: the operations its body (and its condition) runs once per
    iteration, which are not among the step's own operations.

    Attributes:
        name: the ``While`` operation's name in the step (a nested loop: in its outer body).
        iterations: how many times the body runs (the time steps of an RNN), or None when
            the graph cannot tell (``why`` says so).
        ops: the body's and the condition's operations, in graph order, with their own tensor
            indices; sizes and FLOPs affine in the batch, as the step's. A ``TensorList``
            operation moves a reference, not the tensor: no bytes (an assumption).
        loops: the loops nested in the body, each run ``iterations`` times.
        why: where ``iterations`` is None, the reason.
    """

    name: str
    iterations: int | None
    ops: tuple[OpInfo, ...]
    loops: tuple[LoopBody, ...] = ()
    why: str | None = None


_LoopRecord = tuple[str, int | None, list[_Record], list[Any], str | None]
"""A loop of one traced graph: name, iterations, body records, nested loops, why."""


def loop_records(graph: Any, needed: set[Any] | None = None) -> list[_LoopRecord]:
    """The ``While`` loops among the operations of ``graph`` that run (``needed``, default all
    :func:`_needed`), in graph order, each with its body's operations and nested loops.

    Iterations: the loop's static ``maximum_iterations``, else the largest element count of
    the ``TensorList``s it reads (an RNN's unstacked time steps; a gradient loop's forward
    accumulators), as :func:`_tensor_lists` records them; else unknown (None, with why)."""
    import tensorflow as tf

    needed = _needed(graph) if needed is None else needed
    elements: dict[str, int] = {}
    found: list[_LoopRecord] = []
    for op in graph.get_operations():
        if op not in needed:
            continue
        if op.type in ("While", "StatelessWhile"):
            iterations = tf.get_static_value(op.inputs[1]) if len(op.inputs) > 1 else None
            iterations = int(iterations) if iterations is not None and iterations >= 0 else None
            if iterations is None:
                known = [elements[t.name] for t in op.inputs if t.name in elements]
                iterations = max(known) if known else None
            found.append(_loop_record(op, iterations))
        _tensor_lists(op, elements)
    return found


def _loop_record(op: Any, iterations: int | None) -> _LoopRecord:
    body = _function_graph(op, "body")
    why = None
    if iterations is None:
        why = (
            f"the While loop {op.name} runs an unknown number of iterations (no static "
            "maximum_iterations, no input list of known length: give the layer a fixed "
            "sequence length)"
        )
    if body is None:
        return (op.name, None, [], [], f"the body of the While loop {op.name} is not readable")
    parts = [body] + [g for g in [_function_graph(op, "cond")] if g is not None]
    index: dict[str, int] = {}
    records: list[_Record] = []
    for part in parts:
        keep = _needed(part) if part is body else set(part.get_operations())
        for body_op in part.get_operations():
            if body_op not in keep or body_op.type in ("While", "StatelessWhile"):
                continue
            listed = body_op.type.startswith("TensorList")
            outputs = []
            for t in body_op.outputs:
                index[t.name] = len(index)
                size = 0 if listed else max(_nbytes(t), 0)
                outputs.append((index[t.name], t.dtype.name, size, 1))
            inputs = (
                () if listed else tuple(index[t.name] for t in body_op.inputs if t.name in index)
            )
            flops = _op_flops(body_op)
            records.append(
                (
                    body_op.name,
                    body_op.type,
                    "loop",
                    inputs,
                    outputs,
                    flops,
                    0,
                    [],
                    _op_kernel(body_op),
                    False,
                )
            )
    nested = loop_records(body)
    return (op.name, iterations, records, nested, why)


def _function_graph(op: Any, attr: str) -> Any:
    """The graph of a ``While`` operation's ``body`` or ``cond`` function: the one built with
    it, else the function library's."""
    built = getattr(op, f"_{attr}_graph", None)
    if built is not None:
        return built
    try:
        function = op.graph._get_function(op.get_attr(attr).name)
    except (AttributeError, ValueError):
        return None
    return getattr(function, "graph", None)


def loop_bodies(
    first: list[_LoopRecord], second: list[_LoopRecord], batch: int, other: int
) -> list[LoopBody]:
    """The loops of the step traced at ``batch`` (``first``) and ``other`` (``second``), with
    each body operation's sizes and FLOPs affine in the batch (as :func:`_affine`)."""
    bodies = []
    for a, b in zip(first, second, strict=False):
        name, iterations, ops_a, nested_a, why = a
        ops = [_affine(x, y, batch, other) for x, y in zip(ops_a, b[2], strict=False)]
        bodies.append(
            LoopBody(
                name=name,
                iterations=iterations,
                ops=tuple(ops),
                loops=tuple(loop_bodies(nested_a, b[3], batch, other)),
                why=why,
            )
        )
    return bodies
