"""The memory model's rules for what the graph does not size itself: a While loop's
TensorLists (an RNN's per-step tensors kept for the backward pass), on a traced model and on
hand-built steps."""

from __future__ import annotations

from typing import Any

from tfaccel.planning import CPU_ONEDNN_RULES, GPU_BFC_RULES, AllocatorRules, simulate
from tfaccel.planning.trace import OpInfo, StepGraph, TensorInfo, trace_step

EXACT = AllocatorRules("exact", granularity=1)


def _rnn(units: int = 16, steps: int = 7) -> Any:
    import keras

    model = keras.Sequential(
        [keras.Input(shape=(steps, 3)), keras.layers.GRU(units), keras.layers.Dense(2)]
    )
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


def test_a_binary_element_wise_op_takes_a_new_buffer() -> None:
    """A Mul of two dying same-size tensors is not assumed to write over either."""
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 0, 100),)),
        OpInfo("m/a", "Exp", "forward", (0,), (TensorInfo(1, "float32", 0, 100),)),
        OpInfo("m/b", "Sin", "forward", (0,), (TensorInfo(2, "float32", 0, 100),)),
        OpInfo("m/mul", "Mul", "forward", (1, 2), (TensorInfo(3, "float32", 0, 100),)),
        OpInfo("m/sum", "Sum", "forward", (3, 0), (TensorInfo(4, "float32", 4, 0),)),
    ]
    step = StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")
    estimate = simulate(step, 10, rules=EXACT, margin=0.0)
    assert estimate.peak_bytes == 4 * 1000  # x, a, b and the Mul's own output


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
