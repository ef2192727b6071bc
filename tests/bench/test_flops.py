"""FLOP counting, checked by hand on small layers and on the reference models."""

from __future__ import annotations

from typing import Any

import pytest

from tfaccel.bench.flops import (
    TRAINING_MULTIPLIER,
    conv_flops,
    conv_transpose_flops,
    count_model,
    dense_flops,
)

keras = pytest.importorskip("keras")
layers = keras.layers


def _seq(input_shape: tuple[int, ...], *stack: Any) -> Any:
    return keras.Sequential([keras.Input(shape=input_shape), *stack])


def test_formulas_by_hand() -> None:
    # 3x3 kernel, 2 -> 4 channels, 8x8 output: 2 * 9 * 2 * 4 * 64
    assert conv_flops((3, 3), 2, 4, (8, 8)) == 9216
    # grouped: each output channel sees in/groups inputs
    assert conv_flops((3, 3), 4, 4, (8, 8), groups=2) == 2 * 9 * 2 * 4 * 64
    assert dense_flops(10, 5) == 100
    assert dense_flops(10, 5, positions=7) == 700
    assert conv_transpose_flops((2, 2), 3, 5, (4, 4)) == 2 * 4 * 3 * 5 * 16


def test_conv2d_same_and_valid_and_strided() -> None:
    same = count_model(_seq((8, 8, 2), layers.Conv2D(4, 3, padding="same")))
    assert same.forward == 2 * 9 * 2 * 4 * 8 * 8
    valid = count_model(_seq((8, 8, 2), layers.Conv2D(4, 3)))
    assert valid.forward == 2 * 9 * 2 * 4 * 6 * 6
    strided = count_model(_seq((8, 8, 2), layers.Conv2D(4, 3, strides=2, padding="same")))
    assert strided.forward == 2 * 9 * 2 * 4 * 4 * 4


def test_dense_flat_and_per_position() -> None:
    assert count_model(_seq((10,), layers.Dense(5))).forward == 2 * 10 * 5
    # Dense on (7, 10) inputs applies the same kernel at 7 positions
    assert count_model(_seq((7, 10), layers.Dense(5))).forward == 7 * 2 * 10 * 5


def test_pooling_batchnorm_dropout_activation_count_zero() -> None:
    count = count_model(
        _seq(
            (8, 8, 2),
            layers.Conv2D(4, 1),
            layers.BatchNormalization(),
            layers.Activation("relu"),
            layers.MaxPooling2D(2),
            layers.AveragePooling2D(2),
            layers.Dropout(0.5),
            layers.Flatten(),
            layers.Dense(3),
        )
    )
    conv = 2 * 1 * 2 * 4 * 64
    dense = 2 * (2 * 2 * 4) * 3
    assert count.forward == conv + dense
    assert [entry.kind for entry in count.layers] == ["Conv2D", "Dense"]
    assert count.uncounted == []  # BatchNormalization has weights but counts 0 by convention


def test_depthwise_separable_transposed() -> None:
    depthwise = count_model(_seq((8, 8, 3), layers.DepthwiseConv2D(3, padding="same")))
    assert depthwise.forward == 2 * 9 * 3 * 1 * 64
    separable = count_model(_seq((8, 8, 3), layers.SeparableConv2D(5, 3, padding="same")))
    assert separable.forward == 2 * 64 * (9 * 3 + 3 * 5)
    transposed = count_model(_seq((4, 4, 3), layers.Conv2DTranspose(5, 2, strides=2)))
    assert transposed.forward == conv_transpose_flops((2, 2), 3, 5, (4, 4))


def test_training_is_three_times_forward_and_unknown_layers_are_listed() -> None:
    count = count_model(_seq((6, 4), layers.LSTM(3), layers.Dense(2)))
    assert count.forward == 2 * 3 * 2
    assert count.training == TRAINING_MULTIPLIER * count.forward == 36
    assert count.uncounted and "LSTM" in count.uncounted[0]
    assert count.to_dict()["training"] == 36


def test_nested_models_are_walked() -> None:
    inner = _seq((10,), layers.Dense(5))
    outer = _seq((10,), inner, layers.Dense(2))
    assert count_model(outer).forward == 2 * 10 * 5 + 2 * 5 * 2


def test_reference_models_by_hand() -> None:
    from tfaccel import models

    cnn = count_model(models.build("reference_cnn"))
    expected = (
        2 * 9 * 3 * 32 * 32 * 32  # conv32 same, 32x32
        + 2 * 9 * 32 * 32 * 30 * 30  # conv32 valid, 30x30
        + 2 * 9 * 32 * 64 * 15 * 15  # conv64 same after pooling, 15x15
        + 2 * 9 * 64 * 64 * 13 * 13  # conv64 valid, 13x13
        + 2 * (6 * 6 * 64) * 512  # dense 512 after pooling to 6x6x64
        + 2 * 512 * 10
    )
    assert cnn.forward == expected == 41_482_240
    assert cnn.training == 124_446_720  # ~0.124 GFLOP per training image
    assert count_model(models.build("mlp")).forward == 2 * (784 * 512 + 512 * 512 + 512 * 10)
    resnet = count_model(models.build("resnet20"))
    convs = (
        2 * 9 * 3 * 16 * 1024  # stem
        + 6 * 2 * 9 * 16 * 16 * 1024  # stage 1: 6 convs at 32x32
        + 2 * 9 * 16 * 32 * 256
        + 5 * 2 * 9 * 32 * 32 * 256
        + 2 * 16 * 32 * 256  # stage 2
        + 2 * 9 * 32 * 64 * 64
        + 5 * 2 * 9 * 64 * 64 * 64
        + 2 * 32 * 64 * 64  # stage 3
    )
    assert resnet.forward == convs + 2 * 64 * 10
    assert resnet.uncounted == []
