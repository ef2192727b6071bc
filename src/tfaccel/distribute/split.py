"""Model parallel: consecutive groups of layers on different devices.

``split(model, devices)`` copies a chain of layers (a Sequential model, or a functional model
in which each layer feeds only the next) onto the devices, each group's variables created on
its device, and returns a Keras model that runs each group there. Its outputs are the
original model's (same weights); the original is not changed. Groups are balanced by
parameter count (the largest group as small as possible) or cut at given boundaries.

The price of a cut is the activation that crosses it: every step sends the output of the
group's last layer to the next device, and in training its gradient back. ``placement``
reports those tensors: shape, dtype, bytes per example, and bytes per step for a batch.

This is the simple, sequential form of model parallelism: one device works at a time. It fits
a model too large for one device; it does not make a model that fits faster (that needs
pipelining micro-batches, which this does not do).

Example:
    >>> tfaccel.setup(logical_devices=2)
    >>> parallel = tfaccel.distribute.split(model, ["CPU:0", "CPU:1"])
    >>> print(parallel.placement)
    >>> parallel(x)                      # equals model(x)
    >>> parallel.placement.bytes_per_step(batch_size=64)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tfaccel import runtime
from tfaccel.core.checks import check_text, is_int
from tfaccel.core.errors import UsageError, shown

__all__ = ["Crossing", "Placement", "Stage", "balance", "split"]


@dataclass(frozen=True)
class Stage:
    """One group of consecutive layers and its device.

    Attributes:
        device: the device ("/device:CPU:1").
        layers: the layers' names, in order.
        params: their parameter count.
    """

    device: str
    layers: tuple[str, ...]
    params: int


@dataclass(frozen=True)
class Crossing:
    """An activation sent from one device to the next, once per example per forward pass.

    Attributes:
        source: the device that computes it.
        target: the device that consumes it.
        after_layer: the layer whose output it is.
        shape: its shape per example (without the batch axis); None for an unknown size.
        dtype: its dtype ("float32").
        bytes_per_example: its size per example, None when the shape is not fully known.
    """

    source: str
    target: str
    after_layer: str
    shape: tuple[int | None, ...]
    dtype: str
    bytes_per_example: int | None


@dataclass(frozen=True)
class Placement:
    """Where each group of layers runs and what crosses between devices.

    Example:
        >>> placement.bytes_per_step(batch_size=32)          # forward and backward
        65536
    """

    stages: tuple[Stage, ...]
    crossings: tuple[Crossing, ...]

    def bytes_per_step(self, batch_size: int, *, training: bool = True) -> int | None:
        """Bytes that cross devices in one step: activations forward, and in training their
        gradients backward (the same size). None when a crossing's size is unknown."""
        sizes = [c.bytes_per_example for c in self.crossings]
        if any(size is None for size in sizes):
            return None
        per_example = sum(size for size in sizes if size is not None)
        return per_example * batch_size * (2 if training else 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stages": [asdict(s) for s in self.stages],
            "crossings": [asdict(c) for c in self.crossings],
        }

    def __str__(self) -> str:
        lines = ["model parallel placement:"]
        for stage in self.stages:
            names = ", ".join(stage.layers)
            lines.append(f"  {stage.device}: {stage.params:,} parameters ({names})")
        if not self.crossings:
            lines.append("  no activation crosses devices")
        for c in self.crossings:
            size = "unknown size" if c.bytes_per_example is None else f"{c.bytes_per_example:,} B"
            shape = "x".join("?" if d is None else str(d) for d in c.shape) or "scalar"
            lines.append(
                f"  {c.source} -> {c.target}: output of {c.after_layer}, {shape} {c.dtype}, "
                f"{size} per example (and its gradient back in training)"
            )
        return "\n".join(lines)


def balance(params: Sequence[int], parts: int) -> tuple[int, ...]:
    """Cut a chain of layers into ``parts`` consecutive non-empty groups, the largest group's
    parameter count as small as possible (ties: the earliest cuts).

    Args:
        params: each layer's parameter count, in order.
        parts: the number of groups (<= len(params)).

    Returns:
        The boundaries: the index of the first layer of groups 2..parts.

    Example:
        >>> balance([10, 10, 10, 30], 2)
        (3,)
    """
    n = len(params)
    if not 1 <= parts <= n:
        raise ValueError(f"cannot cut {n} layers into {parts} non-empty groups")
    prefix = [0]
    for p in params:
        prefix.append(prefix[-1] + p)
    # cost[k][i]: the best largest group for the first i layers in k groups; cut[k][i]: its cut
    cost = [[math.inf] * (n + 1) for _ in range(parts + 1)]
    cut = [[0] * (n + 1) for _ in range(parts + 1)]
    cost[0][0] = 0
    for k in range(1, parts + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                candidate = max(cost[k - 1][j], prefix[i] - prefix[j])
                if candidate < cost[k][i]:
                    cost[k][i], cut[k][i] = candidate, j
    bounds = []
    i = n
    for k in range(parts, 1, -1):
        i = cut[k][i]
        bounds.append(i)
    return tuple(reversed(bounds))


def split(model: Any, devices: Sequence[str], boundaries: Sequence[int] | None = None) -> Any:
    """Place consecutive groups of ``model``'s layers on ``devices``.

    Args:
        model: a built Keras model whose layers form a chain: a Sequential model, or a
            functional model with one input and one output in which each layer feeds the next.
        devices: the devices, one per group, in order ("CPU:0", "GPU:1", "/gpu:0"...).
        boundaries: the index (in the chain, input layer excluded) of the first layer of each
            group after the first; default: balanced by parameter count.

    Returns:
        A Keras model whose outputs equal ``model``'s, with copies of its layers placed on
        the devices; ``.placement`` (a Placement) says where and what crosses devices.

    Raises:
        UsageError: the model is not a built chain, a device does not exist, or the
            boundaries do not cut the chain into ``len(devices)`` non-empty groups.

    Example:
        >>> parallel = tfaccel.distribute.split(model, ["GPU:0", "GPU:1"])
        >>> print(parallel.placement)
        >>> parallel.compile("adam", "mse"); parallel.fit(x, y)
    """
    layers = _chain(model)
    specs = _device_specs(devices)
    if len(specs) > len(layers):
        raise UsageError(
            f"{len(specs)} devices for a chain of {len(layers)} layers",
            expected=f"at most {len(layers)} devices (each gets at least one layer)",
            received=f"{len(specs)} devices: {shown(specs)}",
            fix="pass fewer devices",
        )
    counts = [int(layer.count_params()) for layer in layers]
    bounds = _boundaries(boundaries, len(layers), len(specs)) or balance(counts, len(specs))
    names = _devices(specs)  # every argument is checked before the devices are looked up
    edges = [0, *bounds, len(layers)]
    groups = [layers[edges[i] : edges[i + 1]] for i in range(len(names))]
    placement = _placement(names, groups)
    copies = [_copy_group(group, device) for group, device in zip(groups, names, strict=True)]
    made = _split_model_class()(copies, names, name=f"{model.name}_split")
    made.placement = placement
    import tensorflow as tf

    shape = tuple(1 if d is None else d for d in model.inputs[0].shape[1:])
    made(tf.zeros((1, *shape), dtype=model.inputs[0].dtype))  # builds it
    return made


def _chain(model: Any) -> list[Any]:
    """The model's layers in order, or an error saying why they are not a chain."""
    try:
        inputs, outputs = model.inputs, model.outputs
    except AttributeError:
        inputs = outputs = None
    if not inputs or not outputs:
        raise UsageError(
            f"The model {getattr(model, 'name', model)!r} has no defined inputs",
            expected="a built Sequential or functional Keras model (subclassed models "
            "have no layer graph to cut)",
            received=type(model).__name__,
            fix="give the model a keras.Input, or call it on a batch once before split()",
        )
    if len(inputs) != 1 or len(outputs) != 1:
        raise _not_chain(model, f"{len(inputs)} inputs and {len(outputs)} outputs")
    import keras

    chain = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    previous = inputs[0]
    for layer in chain:
        if len(layer._inbound_nodes) != 1 or layer.input is not previous:
            raise _not_chain(model, f"layer {layer.name!r} does not take the previous output only")
        previous = layer.output
    if previous is not outputs[0]:
        raise _not_chain(model, "the last layer's output is not the model's output")
    return chain


def _not_chain(model: Any, received: str) -> UsageError:
    return UsageError(
        f"The model {model.name!r} is not a chain of layers",
        expected="one input, one output, each layer used once and feeding only the next",
        received=received,
        fix="split a Sequential model, or place the branches yourself with tf.device",
    )


def _device_specs(devices: object) -> list[str]:
    """The device names as given: a non-empty list of text (not looked up yet)."""
    if isinstance(devices, str) or not isinstance(devices, Sequence) or not devices:
        raise UsageError(
            "split() needs a list of devices",
            expected="a list such as ['CPU:0', 'CPU:1'] or ['GPU:0', 'GPU:1']",
            received=f"devices={shown(devices)} ({type(devices).__name__})",
            fix="pass one device per group of layers",
        )
    return [
        check_text(
            "devices",
            spec,
            where="tfaccel.distribute.split",
            expected="device names such as 'CPU:0' or 'GPU:1'",
            fix="pass a list of device names, one per group of layers",
        )
        for spec in devices
    ]


def _devices(specs: list[str]) -> list[str]:
    """The canonical names of devices that exist ('/device:CPU:1')."""
    import tensorflow as tf

    names = []
    for spec in specs:
        runtime.on_device(spec)  # raises when the device does not exist
        parsed = tf.DeviceSpec.from_string(spec.strip())
        names.append(f"/device:{parsed.device_type.upper()}:{parsed.device_index or 0}")
    return names


def _boundaries(boundaries: Sequence[int] | None, layers: int, groups: int) -> tuple[int, ...]:
    if boundaries is None:
        return ()
    if isinstance(boundaries, (str, bytes)) or not isinstance(boundaries, Sequence):
        raise _bad_boundaries(boundaries, layers, groups)
    bounds = tuple(boundaries)
    if not all(is_int(b) for b in bounds):
        raise _bad_boundaries(boundaries, layers, groups)
    bounds = tuple(int(b) for b in bounds)
    ordered = all(a < b for a, b in zip((0, *bounds), (*bounds, layers), strict=True))
    if len(bounds) != groups - 1 or not ordered:
        raise _bad_boundaries(list(bounds), layers, groups)
    return bounds


def _bad_boundaries(boundaries: object, layers: int, groups: int) -> UsageError:
    return UsageError(
        f"The boundaries {shown(boundaries)} do not cut {layers} layers into {groups} groups",
        expected=f"{groups - 1} increasing layer indices (integers) in 1..{layers - 1}",
        received=f"boundaries={shown(boundaries)}",
        fix=f"pass e.g. boundaries={list(balance([1] * layers, groups))}, or leave "
        "them out to balance by parameter count",
    )


def _placement(devices: list[str], groups: list[list[Any]]) -> Placement:
    import tensorflow as tf

    stages = tuple(
        Stage(
            device,
            tuple(layer.name for layer in group),
            sum(int(layer.count_params()) for layer in group),
        )
        for device, group in zip(devices, groups, strict=True)
    )
    crossings = []
    for i in range(len(groups) - 1):
        last = groups[i][-1]
        shape = tuple(last.output.shape[1:])
        dtype = tf.as_dtype(last.output.dtype)
        size = None if None in shape else math.prod(shape) * dtype.size
        crossings.append(Crossing(devices[i], devices[i + 1], last.name, shape, dtype.name, size))
    return Placement(stages, tuple(crossings))


def _copy_group(group: list[Any], device: str) -> list[Any]:
    """Copies of the layers with their variables created on ``device`` and weights copied."""
    import tensorflow as tf

    copies = []
    with tf.device(device):
        for layer in group:
            copy = type(layer).from_config(layer.get_config())
            shape = tuple(1 if d is None else d for d in layer.input.shape[1:])
            copy(tf.zeros((1, *shape), dtype=layer.input.dtype))
            copy.set_weights(layer.get_weights())
            copies.append(copy)
    return copies


@functools.cache
def _split_model_class() -> type:
    import keras
    import tensorflow as tf

    class SplitModel(keras.Model):
        """Runs each group of layers under ``tf.device`` of its device, in order."""

        def __init__(self, groups: list[list[Any]], devices: list[str], **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.chain = [layer for group in groups for layer in group]
            self.group_sizes = tuple(len(group) for group in groups)
            self.devices = tuple(devices)

        def call(self, inputs: Any, training: Any = None) -> Any:
            x, start = inputs, 0
            for device, size in zip(self.devices, self.group_sizes, strict=True):
                with tf.device(device):
                    for layer in self.chain[start : start + size]:
                        x = layer(x, training=training)
                start += size
            return x

    return SplitModel
