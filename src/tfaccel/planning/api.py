"""``tfaccel.plan``: memory by part, fit, largest batch, accumulation and time, per accelerator."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tfaccel import inventory as inventory_module
from tfaccel.core.checks import in_range, is_int, is_real
from tfaccel.core.errors import TfaccelError, UsageError, argument, shown
from tfaccel.inventory.precision import PRECISIONS
from tfaccel.planning.memory import (
    FRAGMENTATION_MARGIN,
    GPU_BFC_RULES,
    AllocatorRules,
    MemoryEstimate,
    simulate,
)
from tfaccel.planning.result import BATCH_CAP, DevicePlan, Plan
from tfaccel.planning.roofline import (
    CALIBRATE_HINT,
    STEP_CALLS,
    CpuCalibration,
    StepTime,
    cpu_step_time,
    kernel_pass_note,
    loop_note,
    per_step_overhead,
    step_time,
    stored_cpu_figures,
    unpredicted,
    with_host_floor,
)
from tfaccel.planning.targets import Target, targets
from tfaccel.planning.trace import (
    StepData,
    StepGraph,
    check_input_shape,
    optimizers_of,
    remembered_step_data,
    trace_step,
)
from tfaccel.workload.record import CompileArgs

__all__ = ["PRECISIONS", "PlanError", "plan", "plan_step"]

MAX_BATCH = BATCH_CAP
KNOWN_OPTIMIZERS = (
    "sgd",
    "adam",
    "adamw",
    "rmsprop",
    "adagrad",
    "adadelta",
    "adamax",
    "nadam",
    "ftrl",
    "lion",
    "lamb",
    "adafactor",
)
ASSUMED_SLOTS = 2  # an unknown optimizer is planned as Adam, the most common: two slots a weight


class PlanError(TfaccelError):
    """A plan cannot be made: the model cannot be built or traced."""


def plan(
    model: Any,
    batch_size: int = 32,
    precision: str | None = None,
    optimizer: Any = None,
    devices: Sequence[str] | None = None,
    *,
    examples: int | None = None,
    prices: Mapping[str, float] | None = None,
    inventory: Any = None,
    data: Any = None,
    step_call: str = "fit",
) -> Plan:
    """Plan training of ``model`` at ``batch_size``: will it fit, where, how long.

    Nothing trains: one training step is traced (forward, backward, the optimizer's update),
    its buffers are simulated to a peak by part, and the FLOPs and bytes it moves give a
    roofline time on every accelerator of the spec database and this machine.

    Args:
        model: a Keras model, or a function returning one (``model_fn``). A compiled model
            plans with its own optimizer and loss; an uncompiled one with ``optimizer`` (default
            Adam) and a loss chosen from its output.
        batch_size: the global batch (a positive integer).
        precision: ``float32``, ``mixed_bfloat16`` or ``mixed_float16`` (default: the model's).
        optimizer: a Keras optimizer or its name; an unknown name is planned as an Adam-like
            optimizer with two slots per weight, stated in the notes.
        devices: spec database keys (``["a100-40gb", "h100-sxm"]``) or ``this-cpu``
            (default: every GPU and TPU row and this machine).
        examples: training examples per epoch (default: none, no epoch time).
        prices: device key -> price per hour, for the cost of an epoch.
        inventory: this machine's Inventory (default: probed once).
        data: one batch of training data as ``fit`` hands it to ``train_step`` (``x``,
            ``(x, y)``, ``(x, y, sample_weight)``, dicts of arrays), or a ``tf.data.Dataset``
            or ``keras.utils.PyDataset`` whose first batch is taken. The model's own
            ``train_step`` is traced on its structure and dtypes (at ``batch_size``), with
            every optimizer the step applies: needed for a model with no symbolic inputs (a
            subclassed model, a VAE or GAN without ``call``), and for a ``train_step`` that
            reads something other than ``(x, y)``. The model is built on it first, as ``fit``
            builds it.
        step_call: how each step will be called, for this CPU's time: ``fit`` (default; a
            custom loop calling its own ``tf.function`` too) or ``train_on_batch`` (a loop of
            calls, each of which also resets the model's metrics).

    Returns:
        A :class:`Plan`; every figure in it is a prediction.

    Raises:
        UsageError: a bad batch size, precision, device key, price or step call.
        PlanError: the model cannot be built or traced.

    Example:
        >>> result = tfaccel.plan(model_fn, batch_size=256, devices=["a100-40gb"])  # doctest: +SKIP
        >>> result.devices[0].max_batch                                             # doctest: +SKIP
    """
    _check_batch(batch_size)
    _check_precision(precision)
    _check_examples(examples)
    _check_step_call(step_call)
    price_table = _check_prices(prices)
    if devices is not None:
        if isinstance(devices, str):
            devices = [devices]
        if not devices or not all(isinstance(d, str) for d in devices):
            raise UsageError(
                "devices is not a list of device keys",
                expected="a list of spec database keys, e.g. ['a100-40gb', 'h100-sxm']",
                received=argument("devices", devices),
                fix="pass device keys as text, or leave devices out for every device",
            )

    if inventory is not None and not isinstance(inventory, inventory_module.Inventory):
        raise UsageError(
            "tfaccel.plan() got an invalid inventory",
            expected="a tfaccel.inventory.Inventory (tfaccel.devices()), or None",
            received=f"inventory={shown(inventory)} ({type(inventory).__name__})",
            fix="leave inventory out (this machine is probed once), or pass tfaccel.devices()",
        )
    inv = inventory if inventory is not None else inventory_module.current()
    wanted = list(devices) if devices else None
    targets(precision or "float32", wanted, inv=inv)  # an unknown key is refused before building
    notes: list[str] = []
    built, model_notes = _prepare(model, precision, optimizer, data)
    notes += model_notes
    step = traced(built, batch_size)
    notes += step.notes
    measured, calibration = stored_cpu_figures(inv.fingerprint.digest, step.policy)
    chosen = targets(step.policy, wanted, inv=inv, measured_cpu=measured, calibration=calibration)
    return plan_step(
        step,
        batch_size,
        chosen,
        host=calibration,
        examples=examples,
        prices=price_table,
        notes=notes,
        model_name=getattr(built, "name", "model"),
        step_call=step_call,
    )


def traced(built: Any, batch_size: int) -> StepGraph:
    """One training step of the compiled model ``built``, traced.

    Raises:
        PlanError: the step cannot be traced (the model's own error, named).
    """
    try:
        return trace_step(built, batch_size)
    except TfaccelError:
        raise
    except Exception as exc:
        if remembered_step_data(built) is not None:
            raise _own_step_error(built, exc) from exc
        raise PlanError(
            f"The training step of the model could not be traced: {type(exc).__name__}: {exc}",
            expected="a model whose train_step runs under tf.function",
            received=f"model {getattr(built, 'name', '?')!r}",
            fix="check that model.fit runs on one batch; fix the error it raises",
        ) from exc


def _own_step_error(model: Any, exc: Exception) -> PlanError:
    """Why a model's own ``train_step`` did not trace into a graph, and what to change."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    kind = type(exc).__name__
    if "numpy" in text:
        why = "it reads a tensor's value in Python (.numpy()), which a graph does not have"
    elif kind == "OperatorNotAllowedInGraphError" or "Python bool" in text:
        why = "it uses a tensor's value as a Python bool or loop bound"
    else:
        why = "it does not run under tf.function"
    cls = type(model).__name__
    return PlanError(
        f"The plan cannot trace {cls}.train_step into a graph: {why}",
        expected="a train_step that runs under tf.function, as fit runs it unless "
        "compile(run_eagerly=True): TensorFlow or keras.ops operations on tensors",
        received=f"{cls} {getattr(model, 'name', '?')!r}: {kind}: {shown(text, quoted=False)}",
        fix="keep the step's values as tensors (no .numpy(); tf.cond or keras.ops.cond for a "
        "branch on a value), or plan a model whose train_step does; a step that runs only "
        "eagerly cannot be planned",
    )


def plan_step(
    step: StepGraph,
    batch_size: int,
    chosen: Sequence[Target],
    *,
    examples: int | None = None,
    prices: Mapping[str, float] | None = None,
    notes: Sequence[str] = (),
    model_name: str = "model",
    step_call: str = "fit",
    host: CpuCalibration | None = None,
) -> Plan:
    """The plan of a traced step on ``chosen`` targets (pure: no TensorFlow); each step called
    by ``step_call`` (:data:`~tfaccel.planning.roofline.STEP_CALLS`). ``host``: this CPU's
    calibration, whose per-step cost is the GPU and TPU rows' floor
    (:func:`~tfaccel.planning.roofline.with_host_floor`; default: the calibration of this
    machine's CPU among ``chosen``)."""
    if host is None:
        host = next((t.calibration for t in chosen if t.kind == "cpu" and t.this_machine), None)
    # The breakdown is a GPU's: the one planned, a current one where several are; without a
    # GPU, the first device's.
    gpus = [t for t in chosen if t.kind == "gpu"]
    shown = gpus if len(gpus) == 1 else chosen if not gpus else []
    memory = simulate(step, batch_size, rules=shown[0].rules if shown else GPU_BFC_RULES)
    cache: dict[tuple[str, int], MemoryEstimate] = {}

    def total(rules: AllocatorRules, batch: int) -> int:
        key = (rules.name, batch)
        if key not in cache:
            cache[key] = simulate(step, batch, rules=rules)
        return cache[key].total_bytes

    rows = []
    for target in chosen:
        sized = functools.partial(total, target.rules)
        usable = target.usable_bytes
        largest: int | None = None
        accumulation: int | None = None
        if usable:
            need, largest, accumulation = fit_batch(sized, batch_size, usable)
        else:
            need = sized(batch_size)
        fits = usable is not None and need <= usable
        micro = batch_size // accumulation if accumulation else batch_size
        steps = accumulation or 1
        if target.kind == "cpu" and target.this_machine:
            timing = cpu_step_time(step, micro, target.calibration, call=step_call)
        elif not step.loops_known:
            timing = unpredicted(
                "a While loop of the step (a recurrent layer) runs a number of iterations the "
                "graph does not give"
            )
        else:
            timing = step_time(target, step.flops(micro), step.bytes_touched(micro), step.launches)
            timing = with_host_floor(timing, step, host, step_call)
        step_s = (
            timing.step_s * steps if timing.step_s is not None and (fits or accumulation) else None
        )
        epoch_s = None
        if step_s is not None and examples:
            epoch_s = math.ceil(examples / batch_size) * step_s
        price = (prices or {}).get(target.key)
        rows.append(
            DevicePlan(
                target=target,
                needed_bytes=need,
                fits=fits,
                max_batch=largest,
                accumulation_steps=accumulation,
                micro_batch=micro if accumulation else None,
                time=timing,
                step_s=step_s,
                epoch_s=epoch_s,
                price_per_hour=price,
                epoch_cost=epoch_s / 3600.0 * price if epoch_s is not None and price else None,
            )
        )
    cpu_notes = [
        note
        for row in rows
        if row.target.kind == "cpu" and row.target.this_machine
        for note in (_cpu_time_note(row), *_part_notes(row))
    ]
    ranked = sorted(rows, key=_rank_key)
    for rank, row in enumerate(ranked, start=1):
        row.rank = rank
        row.reason = _reason(row)
    return Plan(
        model=model_name,
        batch_size=batch_size,
        precision=step.policy,
        optimizer=step.optimizer,
        parameters=step.trainable_parameters,
        flops_per_step=step.flops(batch_size),
        bytes_per_step=step.bytes_touched(batch_size),
        memory=memory,
        devices=ranked,
        examples=examples,
        notes=[
            *notes,
            "every figure is a prediction: memory from the traced training step, time from a "
            "roofline of counted FLOPs and bytes (on this CPU, plus measured per-op and "
            "per-step costs)",
            *cpu_notes,
            *_host_note(chosen, step, host, step_call),
            *_loop_note(chosen, step),
            f"memory includes a {FRAGMENTATION_MARGIN:.0%} fragmentation/workspace margin "
            "(the spread measured by benchmarks/bench_plan.py)",
            "GPU memory usable = memory - 0.5 GiB (CUDA context) - TensorFlow's reserve "
            "(MinSystemMemory: 1.5 GiB from compute capability 8.0)",
        ],
    )


def _rank_key(row: DevicePlan) -> tuple[int, float]:
    usable = 0 if row.fits else 1 if row.accumulation_steps else 2
    return (usable, row.step_s if row.step_s is not None else math.inf)


def _reason(row: DevicePlan) -> str:
    if not row.fits and not row.accumulation_steps:
        if not row.max_batch:
            return "memory: does not fit at any batch size"
        return "memory: does not fit, and no accumulation divides the batch"
    bound = row.time.bound
    parts = []
    target = row.target
    if row.accumulation_steps:
        parts.append(
            f"memory: fits with gradient_accumulation_steps={row.accumulation_steps} "
            f"(batch {row.micro_batch})"
        )
    calibrated = target.kind == "cpu" and target.this_machine
    if bound is None:
        parts.append(f"time not predicted: {row.time.why or 'no peak known'}")
    elif calibrated:
        parts.append(f"{bound}-bound ({_cpu_terms(row.time)})")
    elif bound == "compute":
        parts.append(
            f"compute-bound at {target.peak_tflops:.3g} TFLOP/s x {target.utilisation:.0%}"
        )
    elif bound == "bandwidth":
        parts.append(f"bandwidth-bound at {target.bandwidth_gbs:g} GB/s")
    elif bound == "per-step overhead":
        parts.append(
            f"host-bound: {row.time.step_overhead_s * 1e3:.2g} ms per step in the training loop "
            "(this CPU's, measured); the device takes less"
            if row.time.step_overhead_s
            else "host-bound"
        )
    else:
        parts.append(
            "per-op overhead-bound: the step's operations are too small to fill the device"
        )
    return "; ".join(parts)


def _host_note(
    chosen: Sequence[Target], step: StepGraph, calibration: CpuCalibration | None, call: str
) -> list[str]:
    """What the GPU and TPU rows' step times say of the host's per-step cost: the floor
    measured on this CPU, or that it is left out where this CPU is not calibrated."""
    if not any(t.kind in ("gpu", "tpu") for t in chosen):
        return []
    if calibration is None:
        return [
            "GPU and TPU step times leave out the host's per-step cost (the training loop's "
            "Python and its call into TensorFlow, about a millisecond), which bounds a small "
            f"model's step: {CALIBRATE_HINT} measures it, and the rows then include it"
        ]
    host = per_step_overhead(step, calibration, call)
    return [
        f"GPU and TPU step times are at least the host's per-step cost, {host * 1e3:.2g} ms "
        "(the training loop on this machine's CPU, measured; the host of that device may "
        "differ)"
    ]


def _loop_note(chosen: Sequence[Target], step: StepGraph) -> list[str]:
    """What a GPU row's time assumes of the step's ``While`` loops (recurrent layers)."""
    if not step.loops or not any(t.kind == "gpu" for t in chosen):
        return []
    return [
        "GPU step times run the recurrent layers' loops as TensorFlow's executor does, a "
        "launch per operation per time step; on a GPU Keras runs an LSTM or GRU with its "
        "default arguments as one cuDNN kernel instead, which can be several times faster"
    ]


def _cpu_terms(time: StepTime) -> str:
    """The four terms of a calibrated CPU time, in milliseconds."""
    terms = (
        ("compute", time.compute_s),
        ("bandwidth", time.memory_s),
        ("per-op", time.op_floor_s),
        ("per-step", time.step_overhead_s),
    )
    return ", ".join(f"{name} {(value or 0.0) * 1e3:.1f} ms" for name, value in terms)


def _part_notes(row: DevicePlan) -> list[str]:
    """How far the parts of a CPU row's time whose cost is spread may move it (kernel passes,
    loops' bodies), each where it is a large enough share of the step."""
    notes = (kernel_pass_note(row.time), loop_note(row.time))
    return [f"{row.target.key}: {note}" for note in notes if note]


def _cpu_time_note(row: DevicePlan) -> str:
    calibration = row.target.calibration
    if calibration is None:
        return f"{row.target.key}: step time not predicted: {CALIBRATE_HINT}"
    return f"{row.target.key}: {calibration.describe()}"


def fit_batch(total: Callable[[int], int], batch: int, usable: int) -> tuple[int, int, int | None]:
    """For a device of ``usable`` bytes, with ``total(b)`` the bytes batch ``b`` needs: what
    ``batch`` needs, the largest batch that fits (0: not even 1), and, when ``batch`` does not
    fit, the fewest accumulation steps whose micro-batch does (None: none divides it)."""
    need = total(batch)
    largest = _largest_batch(total, usable)
    accumulation = _accumulation(batch, largest) if need > usable and largest > 0 else None
    return need, largest, accumulation


def _largest_batch(total: Callable[[int], int], usable: int) -> int:
    """The largest batch whose predicted total fits in ``usable`` (0: not even 1).

    The bracket doubles from 1 (its totals are shared by every device of a plan); inside it,
    each probe is where the straight line through the bracket's ends reaches ``usable``,
    followed by its neighbour on the far side: a step's memory grows almost linearly with the
    batch, so two or three probes close the bracket where halving it took up to 23, each a
    simulation of the whole step. The answer is the bracket's own (``total(low) <= usable <
    total(low + 1)``), as halving finds it."""
    if total(1) > usable:
        return 0
    low, high = 1, 2
    while high < MAX_BATCH and total(high) <= usable:
        low, high = high, high * 2
    if high >= MAX_BATCH and total(MAX_BATCH) <= usable:
        return MAX_BATCH
    while high - low > 1:
        t_low, t_high = total(low), total(high)
        guess = low + (usable - t_low) * (high - low) // max(t_high - t_low, 1)
        guess = min(max(guess, low + 1), high - 1)
        if total(guess) <= usable:
            low = guess
            if guess + 1 < high and total(guess + 1) > usable:
                high = guess + 1
        else:
            high = guess
            if guess - 1 > low and total(guess - 1) <= usable:
                low = guess - 1
    return low


def _accumulation(batch: int, largest: int) -> int | None:
    """The fewest accumulation steps ``k`` with ``batch / k`` a whole batch that fits."""
    for k in range(2, batch + 1):
        if batch % k == 0 and batch // k <= largest:
            return k
    return None


def _prepare(
    model: Any, precision: str | None, optimizer: Any, data: Any = None
) -> tuple[Any, list[str]]:
    """A compiled model of ``precision`` with ``optimizer``: the model itself when it already
    is one, else a clone (the caller's model is left as it was). With ``data`` (or data a
    captured workload remembers for the model): its own step, :func:`_prepare_own_step`."""
    import keras

    notes: list[str] = []
    if not isinstance(model, keras.Model):
        if not callable(model):
            raise UsageError(
                "model is neither a Keras model nor a function that builds one",
                expected="a keras.Model, or model_fn returning one",
                received=argument("model", model),
                fix="pass the model, or the function that builds it",
            )
        model = _build(model, precision)
    if data is not None or remembered_step_data(model) is not None:
        return _prepare_own_step(model, precision, optimizer, data), notes
    check_input_shape(model)
    policy = _policy_of(model)
    if precision is not None and precision != policy:
        model = _clone(model, precision)
        notes.append(f"planned as {precision} (the model was built as {policy})")
    opt, note = _optimizer(optimizer, model)
    if note:
        notes.append(note)
    compiled = getattr(model, "optimizer", None) is not None and getattr(model, "loss", None)
    if not compiled or opt is not None:
        if compiled:
            model = _clone(model, None)
        loss = getattr(model, "loss", None) or _loss_for(model)
        if not getattr(model, "loss", None):
            notes.append(f"the model was not compiled: planned with loss {loss!r}")
        # with the rest of its compile (metrics, loss weights, steps per execution) as it was
        given = CompileArgs.of(model)
        step = dataclasses.replace(given, optimizer=opt or keras.optimizers.Adam(), loss=loss)
        model.compile(**step.step_kwargs())
        if opt is None:
            notes.append("no optimizer given: planned with Adam")
    return model, notes


def _prepare_own_step(model: Any, precision: str | None, optimizer: Any, data: Any) -> Any:
    """The model, built on ``data`` as ``fit`` builds it and set to have its own
    ``train_step`` traced on it (:func:`tfaccel.planning.trace.remember_step_data`), as it was
    compiled: its step applies the optimizers it holds, computes the losses it computes, in
    the precision it was built in.

    Raises:
        UsageError: the model holds no optimizer; ``data`` is not a batch of arrays.
        PlanError: another precision or optimizer asked for (the model cannot be rebuilt).
    """
    cls = type(model).__name__
    if data is not None:
        own_step_data(model, _first_element(data))
    policy = _policy_of(model)
    if precision is not None and precision != policy:
        raise PlanError(
            f"The plan traces {cls}.train_step as the model was built ({policy}) and cannot "
            f"rebuild it as {precision}",
            expected="the precision the model was built in, or a model_fn",
            received=argument("precision", precision),
            fix=f"build the model under keras.mixed_precision.set_global_policy({precision!r}) "
            "and plan that model, or pass model_fn and precision",
        )
    own = optimizers_of(model)
    if optimizer is not None and not any(optimizer is o for o in own):
        raise PlanError(
            f"The plan traces {cls}.train_step with the optimizers it applies and cannot "
            "give it another",
            expected="the model as compiled (its optimizers: "
            + (", ".join(type(o).__name__ for o in own) or "none")
            + ")",
            received=argument("optimizer", optimizer),
            fix="compile the model with the optimizer wanted and leave optimizer out",
        )
    if not own:
        raise UsageError(
            f"The model {getattr(model, 'name', '?')!r} is not compiled",
            expected="a model compiled with its optimizer(s), as before model.fit",
            received=f"{cls} without an optimizer",
            fix="call model.compile(...) (the model's own compile, for a GAN) before planning",
        )
    return model


def _first_element(data: Any) -> Any:
    """The first batch of ``data`` as ``fit`` hands it to ``train_step``: a dataset's or
    PyDataset's first element, else ``data`` itself (a batch)."""
    from tfaccel.workload import data as data_forms

    kind = data_forms.kind_of(data)
    if kind == "dataset":
        return next(iter(data))
    if kind == "pydataset":
        return data[0]
    return data


def own_step_data(model: Any, element: Any) -> StepData:
    """Make ``model``'s own ``train_step`` the step its plans trace, on batches shaped as
    ``element`` (a first batch as ``fit`` hands it): the model is built as its first ``fit``
    step builds it, and the batch's structure is remembered for the trace
    (:func:`tfaccel.planning.trace.remember_step_data`).

    Raises:
        UsageError: ``element`` is not a batch the step can be traced on.
    """
    from tfaccel.planning.trace import remember_step_data
    from tfaccel.workload.record import build_like_fit

    data = StepData.of(element)
    x, _, _ = unpack_batch(element)
    build_like_fit(model, x)
    remember_step_data(model, data)
    return data


def unpack_batch(element: Any) -> tuple[Any, Any, Any]:
    """``(x, y, sample_weight)`` of a batch, as Keras' standard ``train_step`` unpacks it."""
    import keras

    return tuple(keras.utils.unpack_x_y_sample_weight(element))


def _build(model_fn: Callable[[], Any], precision: str | None) -> Any:
    import keras

    saved = keras.mixed_precision.global_policy().name
    try:
        if precision is not None:
            keras.mixed_precision.set_global_policy(precision)
        built = model_fn()
    except TfaccelError:
        raise
    except Exception as exc:
        raise PlanError(
            f"model_fn raised {type(exc).__name__}: {exc}",
            expected="model_fn() to return a Keras model",
            received=f"{type(exc).__name__}: {shown(str(exc), quoted=False)}",
            fix="fix the error in model_fn (calling it alone reproduces it)",
        ) from exc
    finally:
        keras.mixed_precision.set_global_policy(saved)
    if not isinstance(built, keras.Model):
        raise PlanError(
            "model_fn did not return a Keras model",
            expected="model_fn() returning a keras.Model",
            received=f"{type(built).__name__}: {shown(built)}",
            fix="return the model from model_fn",
        )
    return built


def _policy_of(model: Any) -> str:
    names: list[str] = [
        str(getattr(layer.dtype_policy, "name", ""))
        for layer in model._flatten_layers(include_self=False)
        if getattr(layer, "dtype_policy", None) is not None
    ]
    names = [n for n in names if n]
    if not names:
        return "float32"
    return max(set(names), key=names.count)


def _clone(model: Any, precision: str | None) -> Any:
    import keras

    majority = _policy_of(model)

    def clone(layer: Any) -> Any:
        config = layer.get_config()
        if precision is not None and "dtype" in config:
            own = getattr(getattr(layer, "dtype_policy", None), "name", None)
            if own == majority:
                config["dtype"] = precision
        return layer.__class__.from_config(config)

    try:
        return keras.models.clone_model(model, clone_function=clone)
    except Exception as exc:
        raise PlanError(
            f"The model could not be rebuilt in another precision or with another optimizer "
            f"({type(exc).__name__}: {exc})",
            expected="a model keras.models.clone_model can rebuild (Sequential or functional)",
            received=f"model {getattr(model, 'name', '?')!r}",
            fix="pass model_fn instead of a model, or build the model with the policy and "
            "optimizer wanted and leave precision and optimizer out",
        ) from exc


def _optimizer(optimizer: Any, model: Any) -> tuple[Any, str | None]:
    import keras

    if optimizer is None:
        return None, None
    if isinstance(optimizer, keras.optimizers.Optimizer):
        return optimizer, None
    if isinstance(optimizer, str):
        name = optimizer.strip().lower()
        if name in KNOWN_OPTIMIZERS or name.startswith("sgd"):
            if name in ("sgd-momentum", "sgd_momentum", "momentum"):
                return keras.optimizers.SGD(momentum=0.9), None
            try:
                return keras.optimizers.get(name), None
            except ValueError:
                pass
        return keras.optimizers.Adam(), (
            f"optimizer {optimizer!r} is not known to the plan: assumed {ASSUMED_SLOTS} slots "
            "per weight (Adam-like); SGD keeps 0, SGD with momentum and RMSprop 1"
        )
    raise UsageError(
        "optimizer is not a Keras optimizer or its name",
        expected="a keras.optimizers.Optimizer, or a name such as 'adam', 'sgd', 'rmsprop'",
        received=argument("optimizer", optimizer),
        fix="pass optimizer='adam' (or the optimizer object)",
    )


def _loss_for(model: Any) -> str:
    shape = tuple(model.outputs[0].shape)
    return "sparse_categorical_crossentropy" if shape[-1] and shape[-1] > 1 else "mse"


def _check_batch(batch_size: Any) -> None:
    if not is_int(batch_size) or batch_size < 1:
        raise UsageError(
            "The batch size is not a positive integer",
            expected="a whole number of examples, 1 or more",
            received=argument("batch_size", batch_size),
            fix="pass e.g. " + argument("batch_size", 256),
        )
    if batch_size > MAX_BATCH:
        raise UsageError(
            "The batch size is too large to plan",
            expected=f"at most {MAX_BATCH:,}",
            received=argument("batch_size", batch_size),
            fix="pass e.g. " + argument("batch_size", 256),
        )


def _check_precision(precision: Any) -> None:
    if precision is not None and precision not in PRECISIONS:
        raise UsageError(
            "Unknown precision",
            expected="one of " + ", ".join(PRECISIONS),
            received=argument("precision", precision),
            fix="pass e.g. " + argument("precision", "mixed_bfloat16"),
        )


def _check_step_call(step_call: Any) -> None:
    if step_call not in STEP_CALLS:
        raise UsageError(
            "Unknown step call",
            expected="one of " + ", ".join(STEP_CALLS),
            received=argument("step_call", step_call),
            fix="pass step_call='fit' where fit (or a custom loop) trains, 'train_on_batch' "
            "where the script calls model.train_on_batch itself",
        )


def _check_examples(examples: Any) -> None:
    if examples is None:
        return
    if not is_int(examples) or examples < 1:
        raise UsageError(
            "The number of examples per epoch is not a positive integer",
            expected="a whole number of training examples, 1 or more",
            received=argument("examples", examples),
            fix="pass e.g. " + argument("examples", 50000),
        )


def _check_prices(prices: Any) -> dict[str, float]:
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise UsageError(
            "prices is not a mapping of device key to price per hour",
            expected="e.g. {'a100-40gb': 1.10}",
            received=argument("prices", prices),
            fix="pass a dict",
        )
    table = {}
    for key, value in prices.items():
        ok = is_real(value) and in_range(value, minimum=0)
        if not isinstance(key, str) or not ok:
            raise UsageError(
                "A price is not a finite number of at least 0 per hour",
                expected="device key -> price per hour, e.g. a100-40gb=1.10",
                received=argument("prices", {key: value}),
                fix="give each device key a price such as 1.10",
            )
        table[key.strip().lower()] = float(value)
    return table
