# absl-style entry point, as in tensorflow/models
import numpy as np
import tensorflow as tf
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 64, "Batch size.")
flags.DEFINE_integer("train_epochs", 3, "Epochs.")
flags.DEFINE_string("model_dir", "/tmp/absl_model", "Where to save.")


def build():
    return tf.keras.Sequential([
        tf.keras.layers.Input((28, 28)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dropout(0.2),
        tf.keras.layers.Dense(10),
    ])


def main(_):
    x = np.random.rand(2048, 28, 28).astype("float32")
    y = np.random.randint(0, 10, 2048)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048).batch(FLAGS.batch_size).repeat()
    model = build()
    model.compile(optimizer=tf.keras.optimizers.Adam(0.001),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])
    model.fit(ds, epochs=FLAGS.train_epochs, steps_per_epoch=2048 // FLAGS.batch_size)
    model.save(FLAGS.model_dir + ".keras")


if __name__ == "__main__":
    app.run(main)
