"""Model FLOPs counted from the layers of a built Keras model.

The convention (the one MFU figures use, e.g. PaLM appendix B):

- a multiply-add is 2 FLOPs;
- convolution forward: ``2 * k_h * k_w * (c_in / groups) * c_out * H_out * W_out`` per example
  (1-D and 3-D alike; depthwise and separable convolutions per their kernels; transposed
  convolutions per input position);
- dense: ``2 * in * out`` per example, times the positions for inputs of rank > 2;
- bias adds, activations, pooling, normalisation (BatchNormalization, LayerNormalization...),
  dropout, element-wise adds and reshapes count 0: they are memory-bound and small next to the
  matmuls, and not what a matmul ceiling or a tensor-core peak measures;
- a training step is 3x the forward pass: forward, gradient w.r.t. the activations and
  gradient w.r.t. the weights each cost about one forward.

Layers with weights that none of these rules covers are listed in ``FlopCount.uncounted`` rather
than guessed. For the reference CNN this gives 41.5 MFLOP forward, 0.124 GFLOP per training
image.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "CONVENTION",
    "TRAINING_MULTIPLIER",
    "FlopCount",
    "LayerFlops",
    "conv_flops",
    "conv_transpose_flops",
    "count_model",
    "dense_flops",
]

TRAINING_MULTIPLIER = 3
CONVENTION = (
    "2 FLOPs per multiply-add of convolutions and dense layers; bias, activations, pooling, "
    "normalisation, dropout and element-wise adds count 0; training = 3 x forward"
)

_ZERO_BY_CONVENTION = (
    "BatchNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "UnitNormalization",
    "RMSNormalization",
    "Normalization",
    "Embedding",
)


def conv_flops(
    kernel_size: Sequence[int],
    in_channels: int,
    out_channels: int,
    output_spatial: Sequence[int],
    groups: int = 1,
) -> int:
    """Forward FLOPs of one convolution for one example.

    Args:
        kernel_size: (k_h, k_w) or any rank.
        in_channels: input channels (all groups together).
        out_channels: output channels.
        output_spatial: (H_out, W_out) or any rank.
        groups: grouped convolution groups.

    Returns:
        ``2 * prod(kernel_size) * in_channels / groups * out_channels * prod(output_spatial)``.
    """
    per_position = 2 * math.prod(kernel_size) * (in_channels // groups) * out_channels
    return per_position * math.prod(output_spatial)


def conv_transpose_flops(
    kernel_size: Sequence[int],
    in_channels: int,
    out_channels: int,
    input_spatial: Sequence[int],
) -> int:
    """Forward FLOPs of a transposed convolution: every input position scatters a kernel."""
    return 2 * math.prod(kernel_size) * in_channels * out_channels * math.prod(input_spatial)


def dense_flops(in_features: int, out_features: int, positions: int = 1) -> int:
    """Forward FLOPs of a dense layer for one example: ``2 * in * out * positions``."""
    return 2 * in_features * out_features * positions


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs of one layer for one example."""

    name: str
    kind: str
    forward: int


@dataclass
class FlopCount:
    """Counted FLOPs of a model, per example.

    Attributes:
        forward: forward-pass FLOPs per example.
        layers: the layers that count, in model order.
        uncounted: layers with weights no rule covers ("name (Class)"); empty when complete.
        convention: how the counting was done.
    """

    forward: int = 0
    layers: list[LayerFlops] = field(default_factory=list)
    uncounted: list[str] = field(default_factory=list)
    convention: str = CONVENTION

    @property
    def training(self) -> int:
        """FLOPs of one training step per example (3 x forward)."""
        return TRAINING_MULTIPLIER * self.forward

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, with ``training`` included."""
        doc = asdict(self)
        doc["training"] = self.training
        return doc


def count_model(model: Any) -> FlopCount:
    """Count the FLOPs of a built Keras model (nested models are walked).

    Args:
        model: a Keras 3 model whose layers have been called on symbolic inputs
            (any ``keras.Sequential`` with an ``Input``, or a functional model).

    Returns:
        A :class:`FlopCount`; ``forward`` and ``training`` are per example.
    """
    result = FlopCount()
    _walk(model, result)
    return result


def _walk(model: Any, result: FlopCount) -> None:
    import keras

    for layer in model.layers:
        if isinstance(layer, keras.Model):
            _walk(layer, result)
            continue
        flops = _layer_flops(layer)
        if flops is None:
            if layer.weights and type(layer).__name__ not in _ZERO_BY_CONVENTION:
                result.uncounted.append(f"{layer.name} ({type(layer).__name__})")
            continue
        result.layers.append(LayerFlops(layer.name, type(layer).__name__, flops))
        result.forward += flops


def _layer_flops(layer: Any) -> int | None:
    """Forward FLOPs of a layer, or None when it is not a matmul-class layer (or unknown)."""
    from keras import layers as kl

    transposed = (kl.Conv1DTranspose, kl.Conv2DTranspose, kl.Conv3DTranspose)
    separable = (kl.SeparableConv1D, kl.SeparableConv2D)
    depthwise = (kl.DepthwiseConv1D, kl.DepthwiseConv2D)
    conv = (kl.Conv1D, kl.Conv2D, kl.Conv3D)
    if not isinstance(layer, (*transposed, *separable, *depthwise, *conv, kl.Dense)):
        return None
    try:
        in_shape = tuple(layer.input.shape)
        out_shape = tuple(layer.output.shape)
    except (AttributeError, ValueError):  # never called, or called on several inputs
        return None
    if isinstance(layer, kl.Dense):
        kernel = tuple(layer.kernel.shape)
        return dense_flops(kernel[0], kernel[1], math.prod(out_shape[1:-1]))
    channels_first = getattr(layer, "data_format", "channels_last") == "channels_first"
    out_spatial = out_shape[2:] if channels_first else out_shape[1:-1]
    in_spatial = in_shape[2:] if channels_first else in_shape[1:-1]
    if isinstance(layer, transposed):
        # kernel: k + (out_channels, in_channels)
        return 2 * math.prod(layer.kernel.shape) * math.prod(in_spatial)
    if isinstance(layer, separable):
        spatial = math.prod(out_spatial)
        return (
            2
            * spatial
            * (math.prod(layer.depthwise_kernel.shape) + math.prod(layer.pointwise_kernel.shape))
        )
    # conv and depthwise kernels: k + (in_channels / groups, out_channels or multiplier)
    return 2 * math.prod(layer.kernel.shape) * math.prod(out_spatial)
