"""Where Grappler's constant push-down put an attention's scale at run time, and where it puts
it on the step the plan traces.

For each model (``public``: the Transformer classifier of
``unseen_scripts/public2/text_classification_with_transformer.py``, built as that script builds
it; or an architecture of ``bench_plan.py``): ``fit`` runs one epoch of two batches of 32 with
TensorFlow's run metadata on, and the function graph TensorFlow ran is read twice: before its
graph optimiser (the softmax gradient of the first attention block, ``mul_1 = sub * P`` and
``Mul_2 = mul_1 * c``) and after it (every node that reads an attention softmax ``P``). A node
``Mul(c, P)`` after it is the push-down that pairs the constant with ``P``: a product of
forward tensors, computed in the forward pass and held until the backward pass. Then Grappler
is run offline (``tf_optimizer.OptimizeGraph``, constant folding alone and the default
optimisers) on ``model.train_step`` traced at batch 32 and at an unknown batch, and the
``Mul(c, P)`` nodes it leaves are listed.

    python benchmarks/results/runtime_pushdown.py public|transformer|gru_attention
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PUBLIC = Path(__file__).resolve().parent / "unseen_scripts" / "public2"
FETCHED = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")


def public() -> tuple[Any, tuple[int, ...], str]:
    """The keras.io Transformer classifier: its own layer classes, its own model code."""
    import keras
    from keras import layers

    source = (PUBLIC / "text_classification_with_transformer.py").read_text()
    classes: dict[str, Any] = {}
    exec(source.split("vocab_size = 20000")[0], classes)  # the imports and the two layers
    inputs = layers.Input(shape=(200,))
    x = classes["TokenAndPositionEmbedding"](200, 20000, 32)(inputs)
    x = classes["TransformerBlock"](32, 2, 32)(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    x = layers.Dense(20, activation="relu")(x)
    x = layers.Dropout(0.1)(x)
    model = keras.Model(inputs, layers.Dense(2, activation="softmax")(x))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model, (200,), "float32"


def bench(name: str) -> tuple[Any, tuple[int, ...], str]:
    import bench_plan

    model = getattr(bench_plan, name)()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model, tuple(model.inputs[0].shape[1:]), "int32"


def _short(name: str) -> str:
    return name.split(":")[0].lstrip("^").rsplit("/", 1)[-1]


def runtime(model: Any, shape: tuple[int, ...], dtype: str) -> None:
    import numpy as np
    from tensorflow.python.eager import context

    rng = np.random.default_rng(0)
    x = rng.integers(0, 100, (64, *shape)).astype(dtype)
    y = rng.integers(0, 2, 64)
    ctx = context.context()
    ctx.enable_run_metadata()
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    metadata = ctx.export_run_metadata()
    ctx.disable_run_metadata()
    for graphs in metadata.function_graphs:
        for function in graphs.pre_optimization_graph.library.function:
            nodes = {n.name: n for n in function.node_def}
            soft = [
                n.name for n in function.node_def if n.op == "Softmax" and "attention" in n.name
            ]
            if not soft:
                continue
            scope = "gradient_tape/" + soft[0].rsplit("/", 1)[0]
            print(f"before the optimiser ({function.signature.name}), {soft[0]}'s gradient:")
            for node in function.node_def:
                if node.name.rsplit("/", 1)[0] == scope and node.op in ("Mul", "Sub", "Sum"):
                    inputs = [
                        f"{_short(i)} ({nodes[i.split(':')[0]].op})"
                        if i.split(":")[0] in nodes
                        else _short(i)
                        for i in node.input
                    ]
                    print(f"  {_short(node.name)} = {node.op}({', '.join(inputs)})")
            break
        after = graphs.post_optimization_graph
        nodes = {n.name: n for n in after.node}
        soft = {n.name for n in after.node if n.op == "Softmax" and "attention" in n.name}
        if not soft:
            continue
        print("after the optimiser, the nodes that read an attention softmax:")
        for node in after.node:
            names = [i.split(":")[0].lstrip("^") for i in node.input]
            if any(n in soft for n in names):
                inputs = [f"{_short(n)} ({nodes[n].op if n in nodes else '?'})" for n in names]
                print(
                    f"  {node.name.removeprefix('StatefulPartitionedCall/')} = "
                    f"{node.op}({', '.join(inputs)})"
                )


def offline(model: Any, shape: tuple[int, ...], dtype: str) -> None:
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
    from tensorflow.python.grappler import tf_optimizer

    step = tf.function(lambda x, y: model.train_step((x, y)))
    for batch in (32, None):
        graph = step.get_concrete_function(
            tf.TensorSpec((batch, *shape), dtype), tf.TensorSpec((batch,), "int64")
        ).graph
        meta = tf.compat.v1.train.export_meta_graph(
            graph_def=graph.as_graph_def(add_shapes=True), graph=graph
        )
        fetch = meta_graph_pb2.CollectionDef()
        fetch.node_list.value.extend(t.name for t in graph.outputs)
        fetch.node_list.value.extend(op.name for op in graph.get_operations() if op.type in FETCHED)
        meta.collection_def["train_op"].CopyFrom(fetch)
        for optimizers in (["constfold"], []):
            config = config_pb2.ConfigProto()
            config.graph_options.rewrite_options.optimizers.extend(optimizers)
            config.graph_options.rewrite_options.min_graph_nodes = -1
            done = tf_optimizer.OptimizeGraph(config, meta, graph_id=b"step")
            nodes = {n.name: n for n in done.node}
            soft = {n.name for n in done.node if n.op == "Softmax"}
            pushed = [
                n.name
                for n in done.node
                if n.op == "Mul"
                and any(i.split(":")[0] in soft for i in n.input)
                and any(
                    nodes.get(i.split(":")[0]) is not None and nodes[i.split(":")[0]].op == "Const"
                    for i in n.input
                )
            ]
            label = "constant folding" if optimizers else "the default optimisers"
            print(f"offline, batch {batch}, {label}: Mul(c, P) at {pushed or 'none'}")


def main() -> int:
    which = sys.argv[1] if len(sys.argv) > 1 else "public"
    model, shape, dtype = public() if which == "public" else bench(which)
    print(f"== {which}")
    runtime(model, shape, dtype)
    offline(model, shape, dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main())
