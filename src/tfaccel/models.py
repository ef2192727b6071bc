"""Reference models for benchmarks: the Keras CIFAR-10 CNN, an MLP on 28x28, ResNet-20.

Every builder imports Keras when it is called (never at import time), takes the sizes that
matter as arguments so tests can build tiny versions, and takes a Keras dtype policy name
(``"float32"``, ``"mixed_bfloat16"``, ``"mixed_float16"``) that is applied layer by layer, so
models of different precisions can live in one process without touching the global policy.
The last activation always computes in float32, as the Keras mixed-precision guide advises.

Example:
    >>> from tfaccel import models
    >>> model = models.build("reference_cnn", dtype="mixed_bfloat16")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfaccel.core.errors import UsageError

if TYPE_CHECKING:
    import keras

__all__ = [
    "MODELS",
    "REFERENCE_LEARNING_RATE",
    "REFERENCE_LOSS",
    "ModelInfo",
    "build",
    "compile_reference",
    "mlp",
    "model_key",
    "reference_cnn",
    "reference_model_fn",
    "resnet20",
]

REFERENCE_LEARNING_RATE = 1e-4
"""The learning rate of RMSprop, the reference models' optimizer (the Keras CIFAR-10 example's)."""
REFERENCE_LOSS = "sparse_categorical_crossentropy"
"""The reference models' loss: integer class labels."""


def reference_cnn(
    *,
    input_shape: Sequence[int] = (32, 32, 3),
    classes: int = 10,
    filters: Sequence[int] = (32, 64),
    dense_units: int = 512,
    dtype: str = "float32",
) -> keras.Model:
    """The Keras CIFAR-10 example CNN (the reference CNN of ``tfaccel bench``).

    conv32(same)-conv32-pool-conv64(same)-conv64-pool-dense512-dense10, ReLU, dropout
    0.25/0.25/0.5; about 0.124 GFLOP per training image at the default sizes (see
    :mod:`tfaccel.bench.flops` for the counting convention).

    Args:
        input_shape: image height, width, channels.
        classes: output classes.
        filters: channels of the first and the second pair of convolutions.
        dense_units: units of the hidden dense layer.
        dtype: Keras dtype policy name for every layer but the final softmax.

    Returns:
        An uncompiled ``keras.Sequential`` model.
    """
    import keras
    from keras import layers

    f1, f2 = filters
    return keras.Sequential(
        [
            keras.Input(shape=tuple(input_shape)),
            layers.Conv2D(f1, 3, padding="same", activation="relu", dtype=dtype),
            layers.Conv2D(f1, 3, activation="relu", dtype=dtype),
            layers.MaxPooling2D(2, dtype=dtype),
            layers.Dropout(0.25, dtype=dtype),
            layers.Conv2D(f2, 3, padding="same", activation="relu", dtype=dtype),
            layers.Conv2D(f2, 3, activation="relu", dtype=dtype),
            layers.MaxPooling2D(2, dtype=dtype),
            layers.Dropout(0.25, dtype=dtype),
            layers.Flatten(dtype=dtype),
            layers.Dense(dense_units, activation="relu", dtype=dtype),
            layers.Dropout(0.5, dtype=dtype),
            layers.Dense(classes, dtype=dtype),
            layers.Activation("softmax", dtype="float32"),
        ],
        name="reference_cnn",
    )


def mlp(
    *,
    input_shape: Sequence[int] = (28, 28),
    classes: int = 10,
    hidden: Sequence[int] = (512, 512),
    dropout: float = 0.2,
    dtype: str = "float32",
) -> keras.Model:
    """A multi-layer perceptron on 28x28 inputs (the Keras MNIST MLP example).

    Args:
        input_shape: shape of one example; it is flattened.
        classes: output classes.
        hidden: units of each hidden ReLU layer.
        dropout: dropout rate after each hidden layer (0 for none).
        dtype: Keras dtype policy name for every layer but the final softmax.

    Returns:
        An uncompiled ``keras.Sequential`` model.
    """
    import keras
    from keras import layers

    stack: list[Any] = [keras.Input(shape=tuple(input_shape)), layers.Flatten(dtype=dtype)]
    for units in hidden:
        stack.append(layers.Dense(units, activation="relu", dtype=dtype))
        if dropout:
            stack.append(layers.Dropout(dropout, dtype=dtype))
    stack += [layers.Dense(classes, dtype=dtype), layers.Activation("softmax", dtype="float32")]
    return keras.Sequential(stack, name="mlp")


def resnet20(
    *,
    input_shape: Sequence[int] = (32, 32, 3),
    classes: int = 10,
    depth: int = 20,
    width: int = 16,
    dtype: str = "float32",
) -> keras.Model:
    """ResNet for CIFAR (He et al. 2016, section 4.2): depth 6n+2, three stages of n blocks.

    Basic blocks conv3x3-BN-ReLU-conv3x3-BN plus shortcut; a 1x1 strided convolution where the
    shape changes (the Keras ``resnet_v1`` example); global average pooling and a dense
    classifier. ``depth=20`` is ResNet-20 (~0.27M parameters).

    Args:
        input_shape: image height, width, channels.
        classes: output classes.
        depth: 6n+2 layers (20, 32, 44, 56, ...; 8 is the smallest).
        width: channels of the first stage (doubled at each later stage).
        dtype: Keras dtype policy name for every layer but the final softmax.

    Returns:
        An uncompiled functional ``keras.Model``.

    Raises:
        UsageError: ``depth`` is not of the form 6n+2.
    """
    import keras
    from keras import layers

    if depth < 8 or (depth - 2) % 6:
        raise UsageError(
            "The ResNet depth is not of the form 6n+2",
            expected="20, 32, 44, 56, ... (8 at least)",
            received=str(depth),
            fix="pass depth=20 for ResNet-20",
        )
    blocks = (depth - 2) // 6

    def conv_bn(x: Any, filters: int, strides: int = 1, relu: bool = True) -> Any:
        x = layers.Conv2D(filters, 3, strides=strides, padding="same", use_bias=False, dtype=dtype)(
            x
        )
        x = layers.BatchNormalization(dtype=dtype)(x)
        return layers.Activation("relu", dtype=dtype)(x) if relu else x

    inputs = keras.Input(shape=tuple(input_shape))
    x = conv_bn(inputs, width)
    for stage in range(3):
        filters = width * 2**stage
        for block in range(blocks):
            strides = 2 if stage > 0 and block == 0 else 1
            y = conv_bn(x, filters, strides)
            y = conv_bn(y, filters, relu=False)
            if strides != 1:
                x = layers.Conv2D(filters, 1, strides=strides, dtype=dtype)(x)
            x = layers.Activation("relu", dtype=dtype)(layers.Add(dtype=dtype)([x, y]))
    x = layers.GlobalAveragePooling2D(dtype=dtype)(x)
    x = layers.Dense(classes, dtype=dtype)(x)
    outputs = layers.Activation("softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs, name=f"resnet{depth}")


@dataclass(frozen=True)
class ModelInfo:
    """A reference model: its builder, its input shape and the kwargs of its tiny version.

    The tiny version keeps the input shape (so it trains on the same data) and shrinks
    the widths and depth.
    """

    name: str
    title: str
    builder: Callable[..., Any]
    input_shape: tuple[int, ...]
    classes: int
    tiny: dict[str, Any]


MODELS: dict[str, ModelInfo] = {
    "reference_cnn": ModelInfo(
        "reference_cnn",
        "Keras CIFAR-10 CNN",
        reference_cnn,
        (32, 32, 3),
        10,
        {"filters": (4, 8), "dense_units": 16},
    ),
    "mlp": ModelInfo("mlp", "MLP 28x28 (512-512)", mlp, (28, 28), 10, {"hidden": (16,)}),
    "resnet20": ModelInfo(
        "resnet20",
        "ResNet-20 (CIFAR)",
        resnet20,
        (32, 32, 3),
        10,
        {"depth": 8, "width": 4},
    ),
}


def model_key(name: str) -> str:
    """The key in :data:`MODELS` of a reference model's name as people spell it: in any case,
    with dashes, underscores or neither between its parts (``reference-cnn``, ``ResNet-20``,
    ``resnet_20``: ``reference_cnn``, ``resnet20``). The one place names are normalised; a
    space, or any other character, is not forgiven.

    Raises:
        UsageError: no reference model has that name (the message lists the names).
    """
    compact = _compact(name) if isinstance(name, str) else None
    for key in MODELS:
        if _compact(key) == compact:
            return key
    raise UsageError(
        f"Unknown model {name!r}",
        expected="one of " + ", ".join(MODELS) + " (dashes may stand for underscores)",
        received=repr(name),
        fix="pick a name from tfaccel.models.MODELS, e.g. reference-cnn or resnet20",
    )


def _compact(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def build(name: str, *, tiny: bool = False, dtype: str = "float32") -> keras.Model:
    """Build a reference model by name.

    Args:
        name: one of :data:`MODELS`, spelled as :func:`model_key` reads it.
        tiny: build the small version used by tests and ``--smoke`` runs.
        dtype: Keras dtype policy name (``float32``, ``mixed_bfloat16``, ``mixed_float16``).

    Returns:
        An uncompiled Keras model.

    Raises:
        UsageError: unknown model name.
    """
    info = MODELS[model_key(name)]
    kwargs = dict(info.tiny) if tiny else {}
    model: keras.Model = info.builder(dtype=dtype, **kwargs)
    return model


def reference_model_fn(name: str, *, tiny: bool = False) -> Callable[[], keras.Model]:
    """The ``model_fn`` of a reference model (checked now, without importing Keras): each call
    builds it under the Keras global policy in force and compiles it
    (:func:`compile_reference`), as ``tune --model`` and ``plan --model`` take it.

    Raises:
        UsageError: unknown model name.
    """
    key = model_key(name)

    def model_fn() -> keras.Model:
        import keras

        precision = keras.mixed_precision.global_policy().name
        model = build(key, tiny=tiny, dtype=precision)
        compile_reference(model, precision)
        return model

    return model_fn


def compile_reference(model: Any, precision: str | None = None, **compile_kwargs: Any) -> None:
    """Compile a reference model the way every tfaccel command does: RMSprop at
    :data:`REFERENCE_LEARNING_RATE` and :data:`REFERENCE_LOSS`; under ``mixed_float16`` the
    optimizer is wrapped in ``keras.optimizers.LossScaleOptimizer`` (dynamic loss scaling).

    Args:
        model: the model, built by :func:`build`.
        precision: the Keras dtype policy it was built in (default: the model's own policy).
        compile_kwargs: more ``model.compile`` arguments (``jit_compile``...).
    """
    import keras

    if precision is None:
        precision = str(getattr(getattr(model, "dtype_policy", None), "name", "float32"))
    optimizer: Any = keras.optimizers.RMSprop(learning_rate=REFERENCE_LEARNING_RATE)
    if precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, loss=REFERENCE_LOSS, **compile_kwargs)
