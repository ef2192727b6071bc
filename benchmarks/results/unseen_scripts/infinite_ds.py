import argparse
import numpy as np
import tensorflow as tf


def make_dataset(n, batch_size):
    x = np.random.rand(n, 28, 28, 1).astype("float32")
    y = np.random.randint(0, 10, size=(n,))
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.shuffle(1000).batch(batch_size).repeat().prefetch(tf.data.experimental.AUTOTUNE)
    return ds


def build_model():
    model = tf.keras.models.Sequential([
        tf.keras.layers.Conv2D(16, 3, activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    ds = make_dataset(2048, args.batch_size)
    model = build_model()
    model.summary()
    model.fit(ds, epochs=args.epochs, steps_per_epoch=2048 // args.batch_size)
    model.save("model.keras")


if __name__ == "__main__":
    main()
