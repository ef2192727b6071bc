"""Training under tf.distribute.MirroredStrategy (tensorflow.org's distributed training with
Keras): the model built and compiled in strategy.scope(), checkpoints with ModelCheckpoint and
fault tolerance with BackupAndRestore. On a machine with one device it has one replica."""

import argparse
import os

import keras
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=12)
parser.add_argument("--batch-size-per-replica", type=int, default=64)
parser.add_argument("--checkpoint-dir", default="./training_checkpoints")
parser.add_argument("--backup-dir", default="./backup")
args = parser.parse_args()

strategy = tf.distribute.MirroredStrategy()
print(f"Number of devices: {strategy.num_replicas_in_sync}")
BATCH_SIZE = args.batch_size_per_replica * strategy.num_replicas_in_sync

rng = np.random.default_rng(0)
images = rng.random((2048, 28, 28, 1)).astype("float32")
labels = rng.integers(0, 10, size=2048)
train_dataset = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(2048).batch(BATCH_SIZE)

with strategy.scope():
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=keras.optimizers.Adam(),
        metrics=["accuracy"],
    )

checkpoint_prefix = os.path.join(args.checkpoint_dir, "ckpt_{epoch}.weights.h5")
callbacks = [
    keras.callbacks.BackupAndRestore(backup_dir=args.backup_dir),
    keras.callbacks.ModelCheckpoint(filepath=checkpoint_prefix, save_weights_only=True),
]
model.fit(train_dataset, epochs=args.epochs, callbacks=callbacks)
