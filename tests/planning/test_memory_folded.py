"""The memory model's rule for what TensorFlow's graph optimiser folds into constants before a
step runs: a regulariser's gradient broadcast to its weight's shape, held by the step's
function from its first step on."""

from __future__ import annotations

from typing import Any

from tfaccel.planning import AllocatorRules, simulate
from tfaccel.planning.trace import OpInfo, StepGraph, TensorInfo, _folded, _needed, trace_step

EXACT = AllocatorRules("exact", granularity=1)


def _graph(fn: Any, *specs: Any) -> Any:
    import tensorflow as tf

    return tf.function(fn).get_concrete_function(*specs).graph


def _folded_of(graph: Any) -> set[str]:
    return _folded(graph, _needed(graph))


def test_constants_broadcast_to_a_known_shape_are_folded_whatever_their_size() -> None:
    import tensorflow as tf

    names: dict[str, str] = {}

    def fn(x: Any) -> Any:
        spread = tf.tile(tf.reshape(tf.constant(3.0) * 2.0, (1, 1)), (1000, 100))  # 400 KB
        names["spread"] = spread.op.name
        ramp = tf.reshape(tf.range(100_000.0), (1000, 100))  # 400 KB, not one value
        names["ramp"] = ramp.op.name
        small = tf.range(10.0)  # under the limit: folded, whatever its values
        names["small"] = small.op.name
        ones = tf.ones_like(x)
        names["ones"] = ones.op.name
        product = x * spread
        names["product"] = product.op.name
        return product + ramp + tf.reduce_sum(small) + ones

    folded = _folded_of(_graph(fn, tf.TensorSpec((1000, 100), tf.float32)))
    assert names["spread"] in folded
    assert names["small"] in folded
    assert names["ones"] in folded  # OnesLike of a fully known shape
    assert names["ramp"] not in folded  # 400 KB of different values: computed in the step
    assert names["product"] not in folded  # reads the step's input


def test_what_reads_a_variable_or_an_unknown_shape_is_not_folded() -> None:
    import tensorflow as tf

    table = tf.Variable(tf.zeros((50, 4)))
    names: dict[str, str] = {}

    def fn(x: Any) -> Any:
        scaled = table * 2.0
        names["scaled"] = scaled.op.name
        ones = tf.ones_like(x)
        names["ones"] = ones.op.name
        return tf.reduce_sum(scaled) + tf.reduce_sum(ones)

    folded = _folded_of(_graph(fn, tf.TensorSpec((None, 4), tf.float32)))
    assert names["scaled"] not in folded
    assert names["ones"] not in folded  # the batch is not known when the graph is optimised


def _regularised_embedding(rows: int = 300, width: int = 16) -> Any:
    import keras

    model = keras.Sequential(
        [
            keras.Input(shape=(2,), dtype="int32"),
            keras.layers.Embedding(rows, width, embeddings_regularizer=keras.regularizers.l2(1e-6)),
            keras.layers.Flatten(),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_a_regularised_embeddings_gradient_broadcast_is_folded_into_a_table_constant() -> None:
    step = trace_step(_regularised_embedding(300, 16), 8)
    table = 300 * 16 * 4
    folded = [op for op in step.ops if op.folded]
    spread = [op for op in folded if any(t.bytes_at(8) == table for t in op.outputs)]
    assert [op.type for op in spread] == ["Tile"], "the regulariser's Tile to the table's shape"
    assert spread[0].phase == "backward"
    # Nothing that reads the batch or a variable is folded.
    assert all(op.type not in ("ReadVariableOp", "ResourceGather", "MatMul") for op in folded)
    held = simulate(step, 8, rules=EXACT, margin=0.0)
    unfolded = StepGraph(
        [op if not op.folded else _unfold(op) for op in step.ops],
        step.inputs,
        step.variables,
        step.trainable_parameters,
        step.weight_bytes,
        step.optimizer,
        step.policy,
    )
    computed = simulate(unfolded, 8, rules=EXACT, margin=0.0)
    # The constant lives beside the regulariser's gradient and the embedding's dense one.
    assert held.peak_bytes >= computed.peak_bytes + table // 2


def _unfold(op: OpInfo) -> OpInfo:
    from dataclasses import replace

    return replace(op, folded=False)


def _with_constant(folded: bool) -> StepGraph:
    """x (1,000 B) -> a forward activation of 10,000 B, read late; a constant of 4,000 B
    broadcast (folded) and multiplied into the gradient at the end."""
    ops = [
        OpInfo("x", "Placeholder", "other", (), (TensorInfo(0, "float32", 1000, 0),)),
        OpInfo("m/big", "Exp", "forward", (0,), (TensorInfo(1, "float32", 10_000, 0),)),
        OpInfo("m/loss", "Sum", "forward", (1,), (TensorInfo(2, "float32", 4, 0),)),
        OpInfo("gradient_tape/c", "Const", "backward", (), (TensorInfo(3, "float32", 4, 0),)),
        OpInfo(
            "gradient_tape/Tile",
            "Tile",
            "backward",
            (3,),
            (TensorInfo(4, "float32", 4000, 0),),
            folded=folded,
        ),
        OpInfo(
            "gradient_tape/Mul",
            "Mul",
            "backward",
            (4, 2),
            (TensorInfo(5, "float32", 4000, 0),),
        ),
        OpInfo("gradient_tape/g", "Sum", "backward", (5, 1), (TensorInfo(6, "float32", 4, 0),)),
    ]
    return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")


def test_a_folded_constant_is_held_from_the_steps_start_and_never_written_over() -> None:
    computed = simulate(_with_constant(False), 1, rules=EXACT, margin=0.0, orders=("graph",))
    held = simulate(_with_constant(True), 1, rules=EXACT, margin=0.0, orders=("graph",))
    # Computed in the step: the Tile's buffer is made late and the Mul writes over it.
    assert computed.peak_bytes == 1000 + 10_000 + 4 + 4000  # x, the activation, the loss
    # Folded: the constant (4,000 B) is live at the start beside the activation, and the Mul
    # cannot write over it (a buffer of its own).
    assert held.peak_bytes == 1000 + 10_000 + 4 + 4000 + 4000
