"""The memory model's rule for Grappler's constant push-down: in an attention's softmax
gradient ``((dP - sum) * P) * c``, TensorFlow pairs the constant with the input whose name sorts
first. For a model named before ``gradient_tape`` that is the forward softmax ``P``: ``c * P``
runs in the forward pass and is held into the backward pass. Checked here against the graph
TensorFlow itself runs (its run metadata), for a model named on each side."""

from __future__ import annotations

from typing import Any

import pytest

from tfaccel.planning.trace import trace_step

LENGTH, HEADS, KEY = 8, 2, 4
BATCH = 4


def _attention(name: str) -> Any:
    """A small Transformer classifier, as the keras.io example writes one (no dropout in the
    attention, so Keras computes it as softmax(q k^T * c) v)."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=(LENGTH,), dtype="int32")
    x = layers.Embedding(50, HEADS * KEY)(inputs)
    x = x + layers.MultiHeadAttention(num_heads=HEADS, key_dim=KEY)(x, x)
    x = layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, layers.Dense(2, activation="softmax")(x), name=name)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def _reads_softmax_and_a_constant(ops: Any) -> list[Any]:
    producer = {t.index: op for op in ops for t in op.outputs}
    return [
        op
        for op in ops
        if op.type == "Mul"
        and sorted(producer[i].type for i in op.inputs if i in producer) == ["Const", "Softmax"]
    ]


def _runtime_pairs_the_constant_with_softmax(model: Any) -> bool:
    """Whether the graph TensorFlow ran has ``Mul(Const, Softmax)`` (its run metadata)."""
    import numpy as np
    from tensorflow.python.eager import context

    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, (2 * BATCH, LENGTH)).astype("int32")
    y = rng.integers(0, 2, 2 * BATCH)
    ctx = context.context()
    ctx.enable_run_metadata()
    try:
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
        metadata = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
    for graphs in metadata.function_graphs:
        nodes = {n.name: n for n in graphs.post_optimization_graph.node}
        for node in nodes.values():
            kinds = sorted(
                nodes[i.split(":")[0]].op for i in node.input if i.split(":")[0] in nodes
            )
            if node.op == "Mul" and kinds == ["Const", "Softmax"]:
                return True
    return False


@pytest.mark.parametrize(("name", "held"), [("attn", True), ("zattn", False)])
def test_the_softmax_gradients_constant_goes_where_tensorflow_puts_it(
    name: str, held: bool
) -> None:
    model = _attention(name)
    step = trace_step(model, BATCH)
    pushed = _reads_softmax_and_a_constant(step.ops)
    assert bool(pushed) is held
    assert _runtime_pairs_the_constant_with_softmax(model) is held, (
        "TensorFlow's graph optimiser no longer pairs the constant as this model says"
    )
    if held:
        (op,) = pushed
        softmax = next(o for o in step.ops if o.type == "Softmax")
        order = [o.name for o in step.ops]
        # right after the softmax, in the forward pass: held until the backward pass reads it
        assert order.index(op.name) == order.index(softmax.name) + 1
        assert op.outputs[0].bytes_at(BATCH) == softmax.outputs[0].bytes_at(BATCH)
        assert op.outputs[0].bytes_at(BATCH) == BATCH * HEADS * LENGTH * LENGTH * 4
