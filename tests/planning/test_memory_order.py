"""The order a step's operations run in, as TensorFlow's executor would start them, and the
memory simulated under it: hand-built steps, and one traced Keras step."""

from __future__ import annotations

from tfaccel.planning import AllocatorRules, simulate
from tfaccel.planning.memory import executor_schedule, graph_schedule
from tfaccel.planning.trace import OpInfo, StepGraph, TensorInfo, trace_step

EXACT = AllocatorRules("exact", granularity=1)


def _op(name: str, kind: str, inputs: tuple[int, ...], *outputs: TensorInfo) -> OpInfo:
    phase = "backward" if name.startswith("gradient_tape/") else "forward"
    return OpInfo(name, kind, phase, inputs, outputs)


def _t(index: int, per_example: int = 100, dtype: str = "float32") -> TensorInfo:
    return TensorInfo(index, dtype, 0, per_example)


def _step(ops: list[OpInfo]) -> StepGraph:
    return StepGraph(ops, (0,), [], 0, 0, "SGD", "float32")


def _names(step: StepGraph, order: list[int]) -> list[str]:
    return [step.ops[n].name for n in order]


def test_a_chain_runs_in_its_order_one_operation_at_a_time() -> None:
    step = _step(
        [
            _op("x", "Placeholder", (), _t(0)),
            _op("m/a", "Exp", (0,), _t(1)),
            _op("m/b", "Sin", (1,), _t(2)),
            _op("m/c", "Sum", (2,), _t(3, 0)),
        ]
    )
    schedule = executor_schedule(step, 10)
    assert schedule.order == [0, 1, 2, 3]
    assert schedule.done == [0, 1, 2, 3]


def _two_branches() -> StepGraph:
    """x feeds two independent branches, each a big buffer then a small result; graph order
    builds one branch after the other."""
    return _step(
        [
            _op("x", "Placeholder", (), _t(0, 10)),
            _op("m/a", "Exp", (0,), _t(1, 1000)),
            _op("m/a_sum", "Sum", (1,), _t(2, 0)),
            _op("m/b", "Sin", (0,), _t(3, 1000)),
            _op("m/b_sum", "Sum", (3,), _t(4, 0)),
            _op("m/out", "AddV2", (2, 4), _t(5, 0)),
        ]
    )


def test_independent_branches_run_side_by_side_on_two_threads() -> None:
    step = _two_branches()
    schedule = executor_schedule(step, 10)
    # x readies both branches: the thread that ran x goes on with the last (m/b), the other
    # takes m/a from the pool; both start before either is done.
    first, second = schedule.order[1:3]
    assert {step.ops[first].name, step.ops[second].name} == {"m/a", "m/b"}
    assert schedule.done[1] >= 2
    # One thread runs them all, one after the other, each done before the next starts.
    alone = executor_schedule(step, 10, threads=1)
    assert alone.done == list(range(len(step.ops)))


def test_the_prediction_is_the_higher_peak_of_the_orders() -> None:
    step = _two_branches()
    graph = simulate(step, 10, rules=EXACT, margin=0.0, orders=("graph",))
    executor = simulate(step, 10, rules=EXACT, margin=0.0, orders=("executor",))
    both = simulate(step, 10, rules=EXACT, margin=0.0)
    # Graph order: x and one branch's 10,000 bytes at a time; side by side, both branches.
    assert graph.peak_bytes == 100 + 10_000
    assert executor.peak_bytes == 100 + 2 * 10_000
    assert both.peak_bytes == executor.peak_bytes
    assert "order: executor" in both.notes


def test_inexpensive_kernels_run_inline_before_the_expensive_ones_they_were_ready_with() -> None:
    step = _step(
        [
            _op("x", "Placeholder", (), _t(0)),
            _op("m/big", "Exp", (0,), _t(1)),
            _op("m/view", "Reshape", (0,), _t(2)),
            _op("m/c", "AddV2", (1, 2), _t(3)),
        ]
    )
    order = _names(step, executor_schedule(step, 10, threads=1).order)
    assert order == ["x", "m/view", "m/big", "m/c"]


def test_a_variable_is_read_after_the_write_before_it() -> None:
    """An optimizer's slot: read for the forward pass, updated with the gradient, read again
    for the update. The second read waits for the write (automatic control dependencies),
    though nothing it reads is computed by the step."""
    resource = TensorInfo(1, "resource", 0, 0)
    step = _step(
        [
            _op("x", "Placeholder", (), _t(0)),
            _op("slot", "Placeholder", (), resource),
            _op("m/read", "ReadVariableOp", (1,), _t(2, 0)),
            _op("m/a", "Mul", (0, 2), _t(3)),
            _op("m/b", "Exp", (3,), _t(4)),
            _op("adam/grad", "Sum", (4,), _t(5, 0)),
            _op("adam/assign", "AssignAddVariableOp", (1, 5)),
            _op("adam/read_again", "ReadVariableOp", (1,), _t(6, 0)),
            _op("adam/use", "Sqrt", (6,), _t(7, 0)),
        ]
    )
    order = _names(step, executor_schedule(step, 10).order)
    assert order.index("adam/read_again") > order.index("adam/assign")
    assert order.index("adam/assign") > order.index("m/read")


def test_updates_do_not_wait_for_every_gradient_behind_an_identity_n() -> None:
    """The optimizer's IdentityN over all gradients is removed by the graph optimiser: the
    first gradient's update runs, and its buffer is given back, while the second is still
    being computed."""
    step = _step(
        [
            _op("x", "Placeholder", (), _t(0, 10)),
            _op("gradient_tape/h", "Sin", (0,), _t(1, 10)),
            _op("gradient_tape/g1", "Exp", (0,), _t(2, 1000)),
            _op("gradient_tape/h2", "Cos", (1,), _t(3, 10)),
            _op("gradient_tape/h3", "Cos", (3,), _t(9, 10)),
            _op("gradient_tape/h4", "Cos", (9,), _t(10, 10)),
            _op("gradient_tape/g2", "Exp", (10,), _t(4, 1000)),
            _op("adam/IdentityN", "IdentityN", (2, 4), _t(5, 1000), _t(6, 1000)),
            _op("adam/u1", "Sum", (5,), _t(7, 0)),
            _op("adam/u2", "Sum", (6,), _t(8, 0)),
        ]
    )
    order = _names(step, executor_schedule(step, 10, threads=1).order)
    assert order.index("adam/u1") < order.index("gradient_tape/g2")
    estimate = simulate(step, 10, rules=EXACT, margin=0.0, orders=("executor",))
    # x readies g1 and h on two threads: g1 and its update, and h's longer branch to g2,
    # side by side; g1 is given back once its update is done, before g2 is made
    assert estimate.peak_bytes < 2 * 10_000
    # Graph order: g1 waits for its update, after g2. The IdentityN's outputs are the
    # gradients themselves, not buffers of their own; beside the two gradients, the h4 that g2
    # reads and the caller's x, held until the step returns.
    graph = simulate(step, 10, rules=EXACT, margin=0.0, orders=("graph",))
    assert graph.peak_bytes == 2 * 10_000 + 100 + 100


def test_the_graph_schedule_is_the_graph_order() -> None:
    step = _two_branches()
    schedule = graph_schedule(step)
    assert schedule.order == list(range(6)) and schedule.done == list(range(6))


def test_a_traced_keras_step_runs_in_an_order_that_keeps_its_dependencies() -> None:
    import keras

    model = keras.Sequential(
        [keras.Input(shape=(8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
    )
    model.compile(optimizer="adam", loss="mse")
    step = trace_step(model, 4)
    schedule = executor_schedule(step, 4)
    assert sorted(schedule.order) == list(range(len(step.ops)))
    position = {n: p for p, n in enumerate(schedule.order)}
    producer = {t.index: n for n, op in enumerate(step.ops) for t in op.outputs}
    for n, op in enumerate(step.ops):
        if op.type == "IdentityN":
            continue  # its readers read what it passes on
        for i in op.inputs:
            if i in producer and step.ops[producer[i]].type != "IdentityN":
                assert position[producer[i]] < position[n], (op.name, step.ops[producer[i]].name)
    # Adam reads each slot for the update only after adding the gradient's share to it.
    writes = [n for n, op in enumerate(step.ops) if op.type == "AssignAddVariableOp"]
    handles = {step.ops[n].inputs[0] for n in writes}
    for handle in handles:
        touching = [n for n, op in enumerate(step.ops) if op.inputs[:1] == (handle,)]
        in_graph = [step.ops[n].type for n in touching]
        in_run = [step.ops[n].type for n in sorted(touching, key=position.__getitem__)]
        assert in_run == in_graph
    assert all(p <= d for p, d in enumerate(schedule.done))


def test_an_unknown_order_is_refused_with_the_ones_there_are() -> None:
    import pytest

    from tfaccel.core.errors import UsageError

    with pytest.raises(UsageError, match="Unknown order") as caught:
        simulate(_two_branches(), 10, orders=("fastest",))
    assert "graph" in str(caught.value) and "'fastest'" in str(caught.value)
