"""The memory model's rules for what the graph does not size itself: a While loop's
TensorLists (an RNN's per-step tensors kept for the backward pass), on a traced model and on
hand-built steps."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tfaccel.planning import CPU_ONEDNN_RULES, GPU_BFC_RULES, AllocatorRules, simulate
from tfaccel.planning.memory import _folded_constants
from tfaccel.planning.trace import OpInfo, StepGraph, TensorInfo, trace_step

EXACT = AllocatorRules("exact", granularity=1)


def _rnn(units: int = 16, steps: int = 7, cell: str = "GRU") -> Any:
    import keras

    layer = getattr(keras.layers, cell)(units)
    model = keras.Sequential([keras.Input(shape=(steps, 3)), layer, keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    return model


def test_a_recurrent_loop_keeps_one_buffer_per_time_step_for_the_backward_pass() -> None:
    step = trace_step(_rnn(units=16, steps=7), 32)
    loops = [op for op in step.ops if op.type == "While"]
    assert len(loops) == 1
    kept = [t for t in loops[0].outputs if t.count > 1]
    assert kept, "the forward loop's accumulators are sized"
    # Each accumulator holds one (batch, units) float32 tensor per time step, each its own buffer.
    assert all(t.count == 7 for t in kept)
    per_step = {t.bytes_at(32) // t.count for t in kept}
    assert 32 * 16 * 4 in per_step
    # The per-step tensors grow with the batch; the weights the body reads are not copied.
    assert all(t.per_example > 0 for t in kept)
    # The gradient loop pops them: its own lists of popped accumulators own nothing.
    grads = [op for op in step.ops if op.type == "StatelessWhile"]
    assert grads and all(t.count == 7 for op in grads for t in op.outputs if t.count > 1)


def test_a_list_from_a_tensor_copies_each_slice() -> None:
    step = trace_step(_rnn(units=4, steps=5), 8)
    unstack = [op for op in step.ops if op.type == "TensorListFromTensor"]
    assert unstack
    first = unstack[0].outputs[0]
    assert first.count == 5
    assert first.bytes_at(8) == 8 * 5 * 3 * 4  # the (batch, 5, 3) input, as 5 slices


def _loop_step(count: int, element: int) -> StepGraph:
    """x -> While (keeps ``count`` elements of ``element`` bytes per example) -> gradient While
    that reads them."""
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 8),)),
        OpInfo(
            "m/while",
            "While",
            "forward",
            (0,),
            (TensorInfo(1, "variant", 0, count * element, count),),
        ),
        OpInfo(
            "gradient_tape/m/while_grad",
            "StatelessWhile",
            "backward",
            (1,),
            (TensorInfo(2, "float32", 0, 8),),
        ),
        OpInfo("gradient_tape/sum", "Sum", "backward", (2,), (TensorInfo(3, "float32", 4, 0),)),
    ]
    return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")


def test_list_elements_are_separate_allocations_counted_by_the_allocators_rules() -> None:
    # 100 elements of 1,000 bytes per example at batch 100: 100 KB each.
    exact = simulate(_loop_step(100, 1000), 100, rules=EXACT, margin=0.0)
    assert exact.peak_bytes >= 100 * 100 * 1000
    gpu = simulate(_loop_step(100, 1000), 100, rules=GPU_BFC_RULES, margin=0.0)
    assert gpu.peak_bytes >= 100 * 100_096  # each element rounded to 256 bytes
    # The CPU's oneDNN allocator serves allocations below 256 KiB from a pool it does not count.
    cpu = simulate(_loop_step(100, 1000), 100, rules=CPU_ONEDNN_RULES, margin=0.0)
    assert cpu.peak_bytes < 100 * 100 * 1000 / 10
    cpu_large = simulate(_loop_step(100, 1000), 1000, rules=CPU_ONEDNN_RULES, margin=0.0)
    assert cpu_large.peak_bytes >= 100 * 1000 * 1000  # 1 MB elements: counted


def _matmul_step(dtype: str) -> StepGraph:
    """x (dtype) @ w (dtype) -> y, read by a loss."""
    size = 2 if dtype == "bfloat16" else 4
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, dtype, 0, 1000 * size),)),
        OpInfo("w", "Const", "forward", (), (TensorInfo(1, dtype, 1000 * 500 * size, 0),)),
        OpInfo("m/MatMul", "MatMul", "forward", (0, 1), (TensorInfo(2, dtype, 0, 500 * size),)),
        OpInfo("m/loss", "Sum", "forward", (2,), (TensorInfo(3, "float32", 4, 0),)),
    ]
    return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")


def test_a_cpu_computes_a_16_bit_matmul_in_float32_copies_held_for_the_operation() -> None:
    cpu = AllocatorRules("cpu", granularity=1, upcasts_16_bit=True)
    gpu = AllocatorRules("gpu", granularity=1)
    batch = 100
    x, w, y = batch * 2000, 1000 * 500 * 2, batch * 1000  # bfloat16 bytes
    native = simulate(_matmul_step("bfloat16"), batch, rules=gpu, margin=0.0)
    assert native.peak_bytes == x + y  # the Const is no buffer of the step's
    upcast = simulate(_matmul_step("bfloat16"), batch, rules=cpu, margin=0.0)
    # float32 copies of both inputs and of the output, live while the MatMul runs.
    assert upcast.peak_bytes == x + y + 2 * (x + w + y)
    assert "MatMul" in upcast.peak_op
    # A float32 MatMul needs no copies.
    f32 = simulate(_matmul_step("float32"), batch, rules=cpu, margin=0.0)
    assert f32.peak_bytes == 2 * x + 2 * y


def _einsum_op(equation: str, a: tuple[int, ...], b: tuple[int, ...]) -> Any:
    import tensorflow as tf

    graph = (
        tf.function(lambda x, y: tf.einsum(equation, x, y))
        .get_concrete_function(tf.TensorSpec(a), tf.TensorSpec(b))
        .graph
    )
    return next(op for op in graph.get_operations() if op.type == "Einsum")


def test_an_einsum_copies_the_operands_and_result_it_must_transpose() -> None:
    from tfaccel.planning.trace import _scratch

    # A dense projection: operands laid out for one MatMul, result in order: nothing copied.
    assert _scratch(_einsum_op("abc,cd->abd", (8, 16, 32), (32, 64))) == 0
    # Keras attention scores "aecd,abcd->acbe" (key, query; batch a, heads c): both operands
    # are transposed to [a, c, ...], and the MatMul's [a, c, e, b] result is transposed.
    key, query = (8, 16, 4, 32), (8, 16, 4, 32)
    scores = 8 * 4 * 16 * 16 * 4
    assert _scratch(_einsum_op("aecd,abcd->acbe", key, query)) == 2 * 8 * 16 * 4 * 32 * 4 + scores
    # An output in another order than [batch, free, free]: the MatMul result is a temporary.
    assert _scratch(_einsum_op("ab,bc->ca", (8, 16), (16, 4))) == 8 * 4 * 4


def test_a_binary_element_wise_op_writes_over_a_dying_operand() -> None:
    """A Mul of two dying same-size tensors writes over one of them (TensorFlow's
    ``forward_input_or_allocate_output``), in both orders."""
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 100),)),
        OpInfo("m/a", "Exp", "forward", (0,), (TensorInfo(1, "float32", 0, 100),)),
        OpInfo("m/b", "Sin", "forward", (0,), (TensorInfo(2, "float32", 0, 100),)),
        OpInfo("m/mul", "Mul", "forward", (1, 2), (TensorInfo(3, "float32", 0, 100),)),
        OpInfo("m/sum", "Sum", "forward", (3, 0), (TensorInfo(4, "float32", 4, 0),)),
    ]
    step = StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")
    for order in ("graph", "executor"):
        estimate = simulate(step, 10, rules=EXACT, margin=0.0, orders=(order,))
        assert estimate.peak_bytes == 3 * 1000  # x, a and b; the Mul writes over a or b


@pytest.mark.parametrize(
    ("activation", "gradient"),
    [("LeakyRelu", "LeakyReluGrad"), ("Selu", "SeluGrad"), ("Erfc", "ReciprocalGrad")],
)
def test_element_wise_kernels_and_their_gradients_write_over_their_dying_input(
    activation: str, gradient: str
) -> None:
    """TensorFlow's ``LeakyReluOp`` is a ``UnaryElementWiseOp`` and ``LeakyReluGradOp`` and
    ``SeluGradOp`` ``BinaryElementWiseOp``s (``relu_op.h``), ``Erfc`` a ``UnaryOp`` and
    ``ReciprocalGrad`` a ``SimpleBinaryOp`` (``cwise_ops_common.h``): each writes over a dying
    input, as ``Relu`` does. A generator's last block outside any tape: Conv -> activation ->
    Sum, one big buffer at a time; and a gradient over an operand it reads last."""
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 100),)),
        OpInfo("g/conv", "Conv2D", "forward", (0,), (TensorInfo(1, "float32", 0, 1000),)),
        OpInfo("g/act", activation, "forward", (1,), (TensorInfo(2, "float32", 0, 1000),)),
        OpInfo("g/out", "Sum", "forward", (2,), (TensorInfo(3, "float32", 4, 0),)),
        OpInfo("gradient_tape/dy", "Exp", "backward", (0,), (TensorInfo(4, "float32", 0, 1000),)),
        OpInfo(
            "gradient_tape/dx", gradient, "backward", (4, 1), (TensorInfo(5, "float32", 0, 1000),)
        ),
        OpInfo("gradient_tape/s", "Sum", "backward", (5, 3), (TensorInfo(6, "float32", 4, 0),)),
    ]
    step = StepGraph(ops[:4], (0,), [], 0, 0, "SGD", "float32")
    for order in ("graph", "executor"):
        estimate = simulate(step, 10, rules=EXACT, margin=0.0, orders=(order,))
        assert estimate.peak_bytes == 1000 + 10_000  # x and one buffer, not two
    # The gradient reads dy and the conv output (held for it), both dying there: it writes over
    # one of them, not a third buffer beside them (x, the conv output and dy at the peak).
    ops[3] = OpInfo("g/out", "Sum", "forward", (2,), (TensorInfo(3, "float32", 4, 0),))
    ops[2] = OpInfo("g/act", "Exp", "forward", (0,), (TensorInfo(2, "float32", 0, 1000),))
    backward = StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")
    estimate = simulate(backward, 10, rules=EXACT, margin=0.0, orders=("graph",))
    assert estimate.peak_bytes == 1000 + 2 * 10_000 + 4


def _chain(later_reader: bool) -> StepGraph:
    """x -> Exp -> Mul by a scalar -> AddV2 of a scalar -> Sum (which reads x too, keeping it);
    with ``later_reader``, the Exp's output is read again after the AddV2."""
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 100),)),
        OpInfo("m/s", "Sum", "forward", (0,), (TensorInfo(1, "float32", 4, 0),)),
        OpInfo("m/exp", "Exp", "forward", (0,), (TensorInfo(2, "float32", 0, 100),)),
        OpInfo("m/mul", "Mul", "forward", (2, 1), (TensorInfo(3, "float32", 0, 100),)),
        OpInfo("m/add", "AddV2", "forward", (3, 1), (TensorInfo(4, "float32", 0, 100),)),
        OpInfo("m/sum", "Sum", "forward", (4, 0), (TensorInfo(5, "float32", 4, 0),)),
    ]
    if later_reader:
        ops.append(OpInfo("m/max", "Max", "forward", (2, 5), (TensorInfo(6, "float32", 4, 0),)))
    return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")


def test_a_chain_of_element_wise_ops_writes_over_one_buffer() -> None:
    """The Mul writes over the Exp's output, and the AddV2 over the same buffer again: one
    buffer beside the caller's x, whichever order the step runs in."""
    for order in ("graph", "executor"):
        estimate = simulate(_chain(False), 10, rules=EXACT, margin=0.0, orders=(order,))
        assert estimate.peak_bytes == 2 * 1000 + 4


def test_an_operand_read_again_later_or_of_another_size_is_not_written_over() -> None:
    # The Exp's output is read after the chain: the Mul takes a buffer of its own, the AddV2
    # writes over the Mul's.
    estimate = simulate(_chain(True), 10, rules=EXACT, margin=0.0, orders=("graph",))
    assert estimate.peak_bytes == 3 * 1000 + 4
    # The caller's batch is never written over, nor a scalar broadcast to the output's size.
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 100),)),
        OpInfo("m/s", "Sum", "forward", (0,), (TensorInfo(1, "float32", 4, 0),)),
        OpInfo("m/mul", "Mul", "forward", (0, 1), (TensorInfo(2, "float32", 0, 100),)),
        OpInfo("m/sum", "Sum", "forward", (2,), (TensorInfo(3, "float32", 4, 0),)),
    ]
    step = StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")
    assert simulate(step, 10, rules=EXACT, margin=0.0).peak_bytes == 2 * 1000 + 4


def test_adams_update_writes_its_arithmetic_over_the_gradient_and_the_new_buffers() -> None:
    """A traced Keras step with Adam, one 512 x 512 weight: TensorFlow's allocation log shows
    its update taking new buffers only for ``square(g)``, ``sqrt(v)`` and ``m * alpha``, the
    Sub, Mul, AddV2 and RealDiv between them writing over those or over ``g``: two buffers of
    the weight's size at once in graph order. In the executor's order ``square(g)`` and
    ``g - m`` start side by side on the two threads, so neither may write over ``g``: three
    (the high side; the log shows them one after the other on one thread)."""
    import keras

    model = keras.Sequential([keras.Input(shape=(512,)), keras.layers.Dense(512, use_bias=False)])
    model.compile(optimizer="adam", loss="mse")
    step = trace_step(model, 1)
    weight = 512 * 512 * 4
    # Held through the step as well: the constants the graph optimiser folds (the loss's
    # gradient broadcast to the (1, 512) output, 2 KiB at batch 1).
    sizes = {t.index: t.bytes_at(1) for op in step.ops for t in op.outputs}
    constants = sum(sizes[i] for i in _folded_constants(step.ops))
    assert 0 < constants < 4096
    for order, buffers in (("graph", 2), ("executor", 3)):
        estimate = simulate(step, 1, rules=EXACT, margin=0.0, orders=(order,))
        held = estimate.parts["gradients"] + estimate.parts["temporaries"] - constants
        assert weight * buffers <= held <= weight * buffers + 1024, (order, held / weight)


def test_an_operations_temporaries_are_held_through_the_next_operation() -> None:
    """Two independent operations with temporaries of their own, one after the other in graph
    order: the executor may run them side by side, so both temporaries count at once."""
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 100),)),
        OpInfo("m/a", "Einsum", "forward", (0,), (TensorInfo(1, "float32", 4, 0),), 0, 0, 0, 1000),
        OpInfo("m/b", "Einsum", "forward", (0,), (TensorInfo(2, "float32", 4, 0),), 0, 0, 0, 2000),
        OpInfo("m/c", "AddV2", "forward", (1, 2), (TensorInfo(3, "float32", 4, 0),)),
        OpInfo("m/d", "Sum", "forward", (3,), (TensorInfo(4, "float32", 4, 0),)),
    ]
    step = StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")
    estimate = simulate(step, 10, rules=EXACT, margin=0.0)
    # At m/b: x (1,000), both 4-byte outputs, m/a's 10,000 and m/b's 20,000 bytes of temporaries.
    assert estimate.peak_bytes == 1000 + 8 + 10_000 + 20_000
    assert "m/b" in estimate.peak_op


def test_a_loop_holds_its_iterations_in_flight() -> None:
    """The gradient loop sums the weights' gradients over the time steps: each iteration in
    flight holds a term of each sum (or the gate gradients it is computed from); the forward
    loop computes every iteration's input projection ahead of the recurrence."""
    from tfaccel.planning.trace import AHEAD, SUMMAND_INPUT, SUMMED

    step = trace_step(_rnn(units=8, steps=5, cell="LSTM"), 16)
    forward = next(op for op in step.ops if op.type == "While")
    backward = next(op for op in step.ops if op.type == "StatelessWhile")
    in_flight = min(5, 32)  # parallel_iterations 32, but only 5 iterations
    ahead = [(n, size) for n, size, kind in forward.held_at(16) if kind == AHEAD]
    assert (in_flight, 16 * 4 * 8 * 4) in ahead  # x_t @ kernel: (batch, 4 x units) float32
    summed = sorted(size for n, size, kind in backward.held_at(16) if kind == SUMMED)
    assert all(n == in_flight for n, _, kind in backward.held_at(16) if kind == SUMMED)
    # The kernel's (3 x 32), the recurrent kernel's (8 x 32) and the bias's (32) gradients.
    assert summed == [32 * 4, 3 * 32 * 4, 8 * 32 * 4]
    inputs = [size for _, size, kind in backward.held_at(16) if kind == SUMMAND_INPUT]
    assert 16 * 32 * 4 in inputs  # the gate gradients, (batch, 4 x units)
    assert not forward.held_at(16) or all(kind != SUMMED for *_, kind in forward.held_at(16))


def _held_step(held: tuple[tuple[int, int, int, int], ...]) -> StepGraph:
    """x -> an operation holding ``held`` while it runs -> a sum that reads x too."""
    loop_output = (TensorInfo(1, "float32", 4, 0),)
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 100),)),
        OpInfo("m/loop", "StatelessWhile", "backward", (0,), loop_output, held=held),
        OpInfo("m/sum", "Sum", "backward", (1, 0), (TensorInfo(2, "float32", 4, 0),)),
    ]
    return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")


def test_held_buffers_are_separate_allocations_and_a_lagging_sum_counts_once() -> None:
    from tfaccel.planning.trace import AHEAD, SUMMAND_INPUT, SUMMED

    # 32 terms of 300 KB each, or 32 inputs of 100 KB each: an iteration holds one or the other.
    held = ((32, 300_000, 0, SUMMED), (32, 100_000, 0, SUMMAND_INPUT), (4, 0, 10, AHEAD))
    exact = simulate(_held_step(held), 10, rules=EXACT, margin=0.0)
    assert exact.peak_bytes == 1000 + 4 + 32 * 300_000 + 4 * 100  # x, the output, held
    assert "m/loop" in exact.peak_op
    # The CPU's allocator counts each 300 KB term (256 KiB and more), not the 100-byte ones.
    cpu = simulate(_held_step(held), 10, rules=CPU_ONEDNN_RULES, margin=0.0)
    assert cpu.peak_bytes >= 32 * 300_000
    small = ((32, 200_000, 0, SUMMED),)  # below 256 KiB each: not counted, though 6.4 MB in all
    assert simulate(_held_step(small), 10, rules=CPU_ONEDNN_RULES, margin=0.0).peak_bytes == 0


def _conv_grad_ops(
    dtype: str, image: int = 17, channels: int = 32, filters: int = 64
) -> dict[str, Any]:
    """The gradients of a 3 x 3 VALID convolution of (32, image, image, channels) and of a
    2 x 2 max pooling of its output, as TensorFlow's raw operations, by type."""
    import tensorflow as tf

    out = image - 2

    def step(x: Any, w: Any, dy: Any, pooled: Any, dpooled: Any) -> Any:
        raw = tf.raw_ops
        one, two = [1, 1, 1, 1], [1, 2, 2, 1]
        dx = raw.Conv2DBackpropInput(
            input_sizes=tf.shape(x), filter=w, out_backprop=dy, strides=one, padding="VALID"
        )
        dw = raw.Conv2DBackpropFilter(
            input=x, filter_sizes=tf.shape(w), out_backprop=dy, strides=one, padding="VALID"
        )
        dp = raw.MaxPoolGrad(
            orig_input=dy, orig_output=pooled, grad=dpooled, ksize=two, strides=two, padding="VALID"
        )
        return dx, dw, dp

    specs = [
        tf.TensorSpec((32, image, image, channels), dtype),
        tf.TensorSpec((3, 3, channels, filters), dtype),
        tf.TensorSpec((32, out, out, filters), dtype),
        tf.TensorSpec((32, out // 2, out // 2, filters), dtype),
        tf.TensorSpec((32, out // 2, out // 2, filters), dtype),
    ]
    graph = tf.function(step).get_concrete_function(*specs).graph
    return {op.type: op for op in graph.get_operations()}


def test_a_16_bit_convolution_gradient_on_a_cpu_unfolds_patches_of_many_images(
    monkeypatch: Any,
) -> None:
    """TensorFlow's own CPU kernels unfold ceil(30 MiB / (A + B + C) elements) images' patches
    at once: for a 15 x 15 output, 3 x 3 x 32 filter and 64 filters, 162 images of 225 x 288
    (the sizes TensorFlow 2.21 allocated for reference_cnn's bfloat16 conv2d_2)."""
    from tfaccel.planning import trace
    from tfaccel.planning.trace import CPU_16_BIT, _cpu_16_bit_buffers

    monkeypatch.setattr(trace.os, "cpu_count", lambda: 2)
    ops = _conv_grad_ops("bfloat16")
    unfolded = [(1, 162 * 225 * 288 * 2, CPU_16_BIT)]
    assert _cpu_16_bit_buffers(ops["Conv2DBackpropInput"]) == unfolded
    assert _cpu_16_bit_buffers(ops["Conv2DBackpropFilter"]) == unfolded
    # MaxPoolGrad: a copy of the (32, 7, 7, 64) pooled output and an int64 index per element.
    pooled = 32 * 7 * 7 * 64
    assert _cpu_16_bit_buffers(ops["MaxPoolGrad"]) == [(1, pooled * (2 + 8), CPU_16_BIT)]
    # A 30 x 30 output of 32 filters (reference_cnn's conv2d_1_2): one image's work over two
    # threads is 256 KiB or more, so its input gradient unfolds one image at a time; its
    # filter gradient 53 images.
    big = _conv_grad_ops("bfloat16", image=32, channels=32, filters=32)
    assert _cpu_16_bit_buffers(big["Conv2DBackpropInput"]) == [(1, 900 * 288 * 2, CPU_16_BIT)]
    assert _cpu_16_bit_buffers(big["Conv2DBackpropFilter"]) == [(1, 53 * 900 * 288 * 2, CPU_16_BIT)]
    # float32 runs in oneDNN's kernels, whose buffers the graph's own tensors account for.
    assert all(not _cpu_16_bit_buffers(op) for op in _conv_grad_ops("float32").values())


def test_a_16_bit_work_buffer_counts_only_where_the_device_lacks_16_bit_kernels() -> None:
    from tfaccel.planning.trace import CPU_16_BIT

    held = ((1, 20_000_000, 0, CPU_16_BIT),)
    cpu = AllocatorRules("cpu", granularity=1, upcasts_16_bit=True)
    gpu = AllocatorRules("gpu", granularity=1)
    assert simulate(_held_step(held), 10, rules=cpu, margin=0.0).peak_bytes == 20_001_004
    assert simulate(_held_step(held), 10, rules=gpu, margin=0.0).peak_bytes == 1004


def test_operations_nothing_uses_are_left_out_of_the_step() -> None:
    """TensorFlow's graph optimiser removes what neither the results nor a stateful operation
    need (the gradient a Dropout's where(mask, x, 0) makes for its constant 0)."""
    import tensorflow as tf

    from tfaccel.planning.trace import _needed

    counter = tf.Variable(0.0)

    def step(x: Any) -> Any:
        tf.exp(x, name="unused")
        counter.assign_add(tf.reduce_sum(tf.sin(x, name="stateful_input")))
        return tf.square(x, name="result")

    graph = tf.function(step).get_concrete_function(tf.TensorSpec((4,))).graph
    kept = {op.name for op in _needed(graph)}
    assert "result" in kept and "stateful_input" in kept
    assert "unused" not in kept


def test_a_cpu_max_pooling_keeps_a_byte_per_pooled_element_until_its_gradient() -> None:
    """oneDNN's float32 max pooling keeps a workspace (a u8 index per pooled element) from the
    pooling until its gradient is done; a GPU keeps none, nor a 16-bit pooling on the CPU."""
    from tfaccel.planning.memory import RAM_RULES

    def step(dtype: str) -> StepGraph:
        ops = [
            OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, dtype, 0, 4000),)),
            OpInfo("m/pool", "MaxPool", "forward", (0,), (TensorInfo(1, dtype, 0, 1000),)),
            OpInfo("m/sum", "Sum", "forward", (1,), (TensorInfo(2, dtype, 4, 0),)),
            OpInfo(
                "gradient_tape/m/pool/MaxPoolGrad",
                "MaxPoolGrad",
                "backward",
                (0, 1, 2),
                (TensorInfo(3, dtype, 0, 4000),),
            ),
            OpInfo("gradient_tape/m/s", "Sum", "backward", (3,), (TensorInfo(4, dtype, 4, 0),)),
        ]
        return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")

    exact_cpu = replace(RAM_RULES, granularity=1)
    plain = simulate(step("float32"), 10, rules=EXACT, margin=0.0).peak_bytes
    cpu = simulate(step("float32"), 10, rules=exact_cpu, margin=0.0).peak_bytes
    assert plain == 40_000 + 10_000 + 4 + 40_000  # at the gradient: x, pooled, sum, dx
    assert cpu == plain + 10_000 // 4
    assert simulate(step("bfloat16"), 10, rules=exact_cpu, margin=0.0).peak_bytes == plain


def test_the_callers_batch_is_held_until_the_step_returns() -> None:
    """A batch read only by the first operation (a 16-bit model's Cast) still counts at a
    later peak: the caller holds it until the step returns (TensorFlow's allocation log of a
    bfloat16 MLP shows the float32 batch alive at the backward pass's peak)."""
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 1000),)),
        OpInfo("m/cast", "Cast", "forward", (0,), (TensorInfo(1, "bfloat16", 0, 500),)),
        OpInfo("m/sum", "Sum", "forward", (1,), (TensorInfo(2, "float32", 4, 0),)),
        OpInfo("m/big", "Tile", "forward", (2,), (TensorInfo(3, "float32", 0, 2000),)),
        OpInfo("m/total", "Sum", "forward", (3,), (TensorInfo(4, "float32", 4, 0),)),
    ]
    step = StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")
    for order in ("graph", "executor"):
        estimate = simulate(step, 10, rules=EXACT, margin=0.0, orders=(order,))
        assert estimate.peak_bytes == 10_000 + 4 + 20_000
        assert estimate.parts["input_batch"] == 10_000


def test_a_pushed_loop_variable_keeps_a_buffer_per_step_unless_another_list_holds_it() -> None:
    """An LSTM's forward loop keeps, per time step, its four gates, ``tanh(c)``, ``h`` (set into
    the output TensorArray, and pushed again as the next step's ``h_prev``: one buffer) and
    ``c`` (pushed as the next step's ``c_prev``, the value the step before computed: its own
    buffer, which the list keeps alive), as TensorFlow's allocation log shows."""
    batch, units, steps = 16, 8, 5
    step = trace_step(_rnn(units=units, steps=steps, cell="LSTM"), batch)
    forward = next(op for op in step.ops if op.type == "While")
    kept = [t for t in forward.outputs if t.count == steps and t.per_example]
    per_step = [t.bytes_at(batch) // t.count for t in kept]
    assert per_step.count(batch * units * 4) == 7
    # A GRU carries h alone, also set into the output TensorArray: its 6 lists of per-step
    # (batch, units) tensors are h, the update and reset gates, the candidate, 1 - z and the
    # recurrent projection's slice; h pushed again as the next step's h_prev adds none.
    gru = trace_step(_rnn(units=units, steps=steps, cell="GRU"), batch)
    loop = next(op for op in gru.ops if op.type == "While")
    sizes = [t.bytes_at(batch) // t.count for t in loop.outputs if t.count == steps]
    assert sizes.count(batch * units * 4) == 6


def test_a_tensor_pushed_into_two_lists_is_one_buffer_per_step() -> None:
    """A SimpleRNN sets ``h`` into its output TensorArray and pushes the same tensor for the
    gradient (and again as the next step's ``h_prev``): one buffer per step, not two."""
    batch, units, steps = 16, 8, 5
    step = trace_step(_rnn(units=units, steps=steps, cell="SimpleRNN"), batch)
    loop = next(op for op in step.ops if op.type == "While")
    sizes = [t.bytes_at(batch) // t.count for t in loop.outputs if t.count == steps]
    assert sizes.count(batch * units * 4) == 1


def test_a_gradient_loop_keeps_each_time_steps_input_gradient() -> None:
    """The gradient loop adds a list holding this time step's input gradient to the list it
    carries (``AddN`` of lists): one (batch, features) buffer per time step, as TensorFlow's
    allocation log of an LSTM shows."""
    import keras

    batch, steps, features = 16, 5, 4
    model = keras.Sequential(
        [
            keras.Input(shape=(steps, 3)),
            keras.layers.Dense(features),  # so that the loop's input has a gradient
            keras.layers.LSTM(8),
            keras.layers.Dense(2),
        ]
    )
    model.compile(optimizer="adam", loss="mse")
    step = trace_step(model, batch)
    backward = next(op for op in step.ops if op.type == "StatelessWhile")
    sizes = [t.bytes_at(batch) // t.count for t in backward.outputs if t.count == steps]
    assert sizes.count(batch * features * 4) == 1


def _pop_and_fill_step(popped: int, filled: int) -> StepGraph:
    """x -> While (a list of 10 elements of ``popped`` bytes per example) -> gradient While
    that pops it and fills a list of 10 elements of ``filled`` bytes per example -> a sum."""
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 8),)),
        OpInfo(
            "m/while", "While", "forward", (0,), (TensorInfo(1, "variant", 0, 10 * popped, 10),)
        ),
        OpInfo(
            "gradient_tape/m/while_grad",
            "StatelessWhile",
            "backward",
            (1,),
            (TensorInfo(2, "variant", 0, 10 * filled, 10),),
        ),
        OpInfo("gradient_tape/sum", "Sum", "backward", (2,), (TensorInfo(3, "float32", 4, 0),)),
    ]
    return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")


def test_a_loop_that_pops_lists_while_filling_its_own_holds_the_larger_whole() -> None:
    """At its k-th of n iterations a gradient loop holds n - k elements of the lists it pops
    and k of those it fills: never both whole."""
    for popped, filled in ((1000, 300), (300, 1000)):
        step = _pop_and_fill_step(popped, filled)
        exact = simulate(step, 1000, rules=EXACT, margin=0)
        assert exact.peak_bytes == 8 * 1000 + 10 * max(popped, filled) * 1000
        # The allocator's replay frees the lists popped before it takes those filled: elements
        # of 30-100 MB, counted by the CPU's allocator, not all held at once.
        cpu = simulate(step, 100_000, rules=CPU_ONEDNN_RULES, margin=0)
        assert cpu.peak_bytes < 10 * (popped + filled) * 100_000


def test_a_recurrent_steps_flops_bytes_and_launches_count_every_time_step() -> None:
    """An LSTM's recurrence (h @ recurrent kernel, forward and gradients) runs in its loops'
    bodies, once per time step: the step's FLOPs, bytes and launches count each body its
    iterations' times (the plan's GPU and TPU rows and its JSON read them)."""
    units, steps, batch = 8, 5, 16
    step = trace_step(_rnn(units=units, steps=steps, cell="LSTM"), batch)
    assert step.loops and step.loops_known
    top = sum(op.flops_fixed + op.flops_per_example * batch for op in step.ops)
    recurrence = 2 * batch * units * 4 * units  # one time step's h @ recurrent kernel, forward
    assert step.flops(batch) >= top + steps * recurrence
    assert step.flops(batch) - top == sum(
        (loop.iterations or 0)
        * sum(op.flops_fixed + op.flops_per_example * batch for op in loop.ops)
        for loop in step.loops
    )
    without = replace(step, loops=[])  # the step's own operations alone
    body = sum((loop.iterations or 0) * len(loop.ops) for loop in step.loops)
    assert without.launches < step.launches <= without.launches + body
    assert step.bytes_touched(batch) > without.bytes_touched(batch)


def test_a_gpu_convolution_holds_cudnns_workspace_while_it_runs() -> None:
    """A GPU's convolution takes a workspace from TensorFlow's allocator for as long as it runs:
    1.15x its tensors' bytes in float32, 0.5x in 16-bit, 0.05x for a depthwise one; a CPU's
    rules and every other operation take none."""
    from tfaccel.planning.memory import CONV_WORKSPACE, RAM_RULES

    def step(op_type: str, dtype: str) -> StepGraph:
        size = 2 if dtype == "bfloat16" else 4
        ops = [
            OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, dtype, 0, 1000 * size),)),
            OpInfo("m/conv", op_type, "forward", (0,), (TensorInfo(1, dtype, 0, 3000 * size),)),
            OpInfo("m/sum", "Sum", "forward", (1,), (TensorInfo(2, dtype, size, 0),)),
        ]
        return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")

    gpu = replace(GPU_BFC_RULES, granularity=1)
    for op_type, dtype, key in (
        ("Conv2D", "float32", "float32"),
        ("Conv2DBackpropFilter", "float32", "float32"),
        ("Conv2D", "bfloat16", "16-bit"),
        ("DepthwiseConv2dNative", "float32", "depthwise"),
    ):
        size = 2 if dtype == "bfloat16" else 4
        tensors = 10 * (1000 + 3000) * size  # batch 10: the input and the output
        plain = simulate(step(op_type, dtype), 10, rules=EXACT, margin=0.0)
        held = simulate(step(op_type, dtype), 10, rules=gpu, margin=0.0)
        assert held.peak_bytes == plain.peak_bytes + int(CONV_WORKSPACE[key] * tensors)
        assert "m/conv" in held.peak_op
    # Not on the CPU; not for an operation that is no convolution.
    cpu = simulate(step("Conv2D", "float32"), 10, rules=replace(RAM_RULES, granularity=1))
    assert cpu.peak_bytes == simulate(step("Conv2D", "float32"), 10, rules=EXACT).peak_bytes
    other = simulate(step("MatMul", "float32"), 10, rules=gpu, margin=0.0)
    assert other.peak_bytes == simulate(step("MatMul", "float32"), 10, rules=EXACT).peak_bytes


def test_a_traced_conv_nets_gpu_plan_counts_its_workspaces_and_a_dense_nets_none() -> None:
    import keras

    conv = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(10),
        ]
    )
    conv.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    step = trace_step(conv, 64)
    without = replace(GPU_BFC_RULES, conv_workspace=False)
    with_ws = simulate(step, 64, rules=GPU_BFC_RULES, margin=0.0).peak_bytes
    plain = simulate(step, 64, rules=without, margin=0.0).peak_bytes
    activation = 64 * 32 * 32 * 16 * 4  # one conv output, float32
    # A workspace per convolution running: at most two at once (a layer's two gradients, side
    # by side), each 1.15x the tensors of one (an input and an output, the kernel's few bytes).
    assert plain < with_ws <= plain + 2 * 1.15 * 2.01 * activation
    dense = keras.Sequential([keras.Input((20,)), keras.layers.Dense(8), keras.layers.Dense(1)])
    dense.compile(optimizer="adam", loss="mse")
    dstep = trace_step(dense, 64)
    assert (
        simulate(dstep, 64, rules=GPU_BFC_RULES).peak_bytes
        == simulate(dstep, 64, rules=without).peak_bytes
    )


def test_a_gpus_16_bit_convolutions_take_the_nchw_workspace_where_tensorflow_keeps_nchw() -> None:
    """TensorFlow's layout optimiser runs float16 convolutions in NHWC from compute capability
    7.0 and bfloat16 ones from 8.0; below, in NCHW, cuDNN's workspace is larger. A TPU has no
    cuDNN, a CPU neither."""
    from tfaccel.planning.memory import CONV_WORKSPACE, TPU_RULES, fit_rules

    def step(dtype: str) -> StepGraph:
        ops = [
            OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, dtype, 0, 2000),)),
            OpInfo("m/conv", "Conv2D", "forward", (0,), (TensorInfo(1, dtype, 0, 6000),)),
            OpInfo("m/sum", "Sum", "forward", (1,), (TensorInfo(2, dtype, 2, 0),)),
        ]
        return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")

    def workspace(dtype: str, rules: AllocatorRules) -> int:
        exact = replace(rules, granularity=1)
        return (
            simulate(step(dtype), 10, rules=exact, margin=0.0).peak_bytes
            - simulate(step(dtype), 10, rules=EXACT, margin=0.0).peak_bytes
        )

    tensors = 10 * (2000 + 6000)
    nhwc, nchw = (
        int(CONV_WORKSPACE["16-bit"] * tensors),
        int(CONV_WORKSPACE["16-bit NCHW"] * tensors),
    )
    for capability, bf16, fp16 in (
        ("9.0", nhwc, nhwc),
        (None, nhwc, nhwc),  # unknown: taken as a current GPU
        ("7.5", nchw, nhwc),
        ("6.1", nchw, nchw),
    ):
        rules = fit_rules("gpu", capability)
        assert workspace("bfloat16", rules) == bf16, capability
        assert workspace("float16", rules) == fp16, capability
    assert fit_rules("tpu") is TPU_RULES and workspace("bfloat16", TPU_RULES) == 0
    assert workspace("bfloat16", fit_rules("cpu")) == 0


def test_a_plans_breakdown_is_a_current_gpus_unless_one_device_is_planned() -> None:
    import keras

    from tfaccel.planning.api import plan_step
    from tfaccel.planning.memory import GPU_BFC_RULES, fit_rules
    from tfaccel.planning.targets import targets

    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3)])
    model.compile(optimizer="sgd", loss="mse")
    step = trace_step(model, 4)
    every = targets("float32", None)
    assert plan_step(step, 4, every).memory.allocator == GPU_BFC_RULES.name
    t4 = [t for t in every if t.key == "t4"]
    assert plan_step(step, 4, t4).memory.allocator == fit_rules("gpu", "7.5").name
    cpu = [t for t in every if t.kind == "cpu"]
    if cpu:
        assert plan_step(step, 4, cpu).memory.allocator == cpu[0].rules.name
