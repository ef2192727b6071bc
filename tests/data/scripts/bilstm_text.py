"""Bidirectional LSTM on IMDB-like sequences (keras.io's bidirectional_lstm_imdb), with random
token ids in place of the reviews."""

import argparse

import keras
import numpy as np
from keras import layers

parser = argparse.ArgumentParser()
parser.add_argument("--max-features", type=int, default=2000)
parser.add_argument("--maxlen", type=int, default=40)
parser.add_argument("--examples", type=int, default=512)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()

rng = np.random.default_rng(0)
x_train = rng.integers(1, args.max_features, size=(args.examples, args.maxlen))
y_train = rng.integers(0, 2, size=args.examples)
x_val = rng.integers(1, args.max_features, size=(args.examples // 4, args.maxlen))
y_val = rng.integers(0, 2, size=args.examples // 4)
print(len(x_train), "Training sequences")

inputs = keras.Input(shape=(None,), dtype="int32")
x = layers.Embedding(args.max_features, 32)(inputs)
x = layers.Bidirectional(layers.LSTM(16, return_sequences=True))(x)
x = layers.Bidirectional(layers.LSTM(16))(x)
outputs = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs, outputs)
model.summary()

model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(
    x_train,
    y_train,
    batch_size=args.batch_size,
    epochs=args.epochs,
    validation_data=(x_val, y_val),
)
