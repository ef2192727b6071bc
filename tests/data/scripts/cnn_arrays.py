"""Simple MNIST convnet, as keras.io writes it, on random images of the same shape."""

import argparse

import keras
import numpy as np
from keras import layers

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--epochs", type=int, default=15)
parser.add_argument("--examples", type=int, default=1024)
args = parser.parse_args()

num_classes = 10
input_shape = (28, 28, 1)

rng = np.random.default_rng(0)
x_train = rng.integers(0, 256, size=(args.examples, 28, 28)).astype("float32") / 255
y_train = rng.integers(0, num_classes, size=args.examples)
x_train = np.expand_dims(x_train, -1)
print("x_train shape:", x_train.shape)
y_train = keras.utils.to_categorical(y_train, num_classes)

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)
model.summary()

model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs, validation_split=0.1)
