"""Image classification from a folder of images (keras.io's image_classification_from_scratch):
image_dataset_from_directory, augmentation in the dataset's .map, prefetch. The images are a
few tiny PNGs the script writes into a folder of its own."""

import argparse
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf
from keras import layers


def write_images(folder, per_class, size):
    rng = np.random.default_rng(0)
    for label in ("cat", "dog"):
        os.makedirs(os.path.join(folder, label), exist_ok=True)
        for i in range(per_class):
            pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
            png = tf.io.encode_png(pixels)
            tf.io.write_file(os.path.join(folder, label, f"{i}.png"), png)


def make_model(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(16, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    previous = x
    for size in (32, 64):
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = layers.Conv2D(size, 1, strides=2, padding="same")(previous)
        x = layers.add([x, residual])
        previous = x
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.25)(x)
    outputs = layers.Dense(1 if num_classes == 2 else num_classes)(x)
    return keras.Model(inputs, outputs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--per-class", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=25)
    args = parser.parse_args()

    folder = args.data_dir or tempfile.mkdtemp(prefix="pets_")
    write_images(folder, args.per_class, args.image_size)
    image_size = (args.image_size, args.image_size)
    train_ds, val_ds = keras.utils.image_dataset_from_directory(
        folder,
        validation_split=0.2,
        subset="both",
        seed=1337,
        image_size=image_size,
        batch_size=args.batch_size,
    )

    data_augmentation_layers = [layers.RandomFlip("horizontal"), layers.RandomRotation(0.1)]

    def data_augmentation(images):
        for layer in data_augmentation_layers:
            images = layer(images)
        return images

    train_ds = train_ds.map(
        lambda img, label: (data_augmentation(img), label),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    train_ds = train_ds.prefetch(tf.data.AUTOTUNE)
    val_ds = val_ds.prefetch(tf.data.AUTOTUNE)

    model = make_model(input_shape=(*image_size, 3), num_classes=2)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-4),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[keras.metrics.BinaryAccuracy(name="acc")],
    )
    model.fit(train_ds, epochs=args.epochs, validation_data=val_ds)


if __name__ == "__main__":
    main()
