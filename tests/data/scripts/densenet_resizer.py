"""DenseNet121 behind a learned resizer (keras.io's learnable_resizer): a Resizing layer and a
small convolutional block that learns the downscaling, then DenseNet121 (weights=None) on the
small images."""

import argparse

import keras
import numpy as np
import tensorflow as tf
from keras import layers


def conv_block(x, filters, kernel_size, strides, activation=True):
    x = layers.Conv2D(filters, kernel_size, strides, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    if activation:
        x = layers.LeakyReLU(0.2)(x)
    return x


def res_block(x):
    inputs = x
    x = conv_block(x, 8, 3, 1)
    x = conv_block(x, 8, 3, 1, activation=False)
    return layers.Add()([inputs, x])


def get_learnable_resizer(input_shape, target_size, filters=8, num_res_blocks=1):
    inputs = layers.Input(shape=input_shape)
    naive_resize = layers.Resizing(*target_size, interpolation="bilinear")(inputs)
    x = layers.Conv2D(filters, kernel_size=7, strides=1, padding="same")(inputs)
    x = layers.LeakyReLU(0.2)(x)
    x = layers.Conv2D(filters, kernel_size=1, strides=1, padding="same")(x)
    x = layers.LeakyReLU(0.2)(x)
    x = layers.BatchNormalization()(x)
    bottleneck = layers.Resizing(*target_size, interpolation="bilinear")(x)
    for _ in range(num_res_blocks):
        x = res_block(bottleneck)
    x = layers.Conv2D(filters, kernel_size=3, strides=1, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.Add()([bottleneck, x])
    x = layers.Conv2D(3, kernel_size=7, strides=1, padding="same")(x)
    final_resize = layers.Add()([naive_resize, x])
    return keras.Model(inputs, final_resize, name="learnable_resizer")


def get_model(input_shape, target_size, num_classes):
    backbone = keras.applications.DenseNet121(
        weights=None,
        include_top=True,
        classes=num_classes,
        input_shape=(*target_size, 3),
    )
    backbone.trainable = True
    inputs = layers.Input(input_shape)
    x = layers.Rescaling(scale=1.0 / 255)(inputs)
    x = get_learnable_resizer(input_shape, target_size)(x)
    outputs = backbone(x)
    return keras.Model(inputs, outputs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input-size", type=int, default=64)
    parser.add_argument("--target-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--examples", type=int, default=128)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(args.examples, args.input_size, args.input_size, 3))
    labels = rng.integers(0, 5, size=args.examples)
    train_ds = (
        tf.data.Dataset.from_tensor_slices((images.astype("float32"), labels))
        .shuffle(args.batch_size * 10)
        .batch(args.batch_size)
        .prefetch(tf.data.AUTOTUNE)
    )
    model = get_model(
        (args.input_size, args.input_size, 3), (args.target_size, args.target_size), 5
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=["accuracy"],
    )
    model.fit(train_ds, epochs=args.epochs)


if __name__ == "__main__":
    main()
