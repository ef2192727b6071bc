# SOURCE: https://github.com/keras-team/keras-io/blob/1909c6710cd3f5af6401f1176dcee9e26781b4f3/examples/nlp/bidirectional_lstm_imdb.py
# CHANGES (only these):
#  - keras.datasets.imdb.load_data(num_words=max_features) replaced by random data of
#    the same types: object arrays of int lists (word ids 1..max_features-1, lengths
#    20..400) and int64 labels 0/1; 1024 train + 256 validation reviews (published:
#    25000 each)
#  - nothing else: the published script already trains 2 epochs
"""
Title: Bidirectional LSTM on IMDB
Author: [fchollet](https://twitter.com/fchollet)
Date created: 2020/05/03
Last modified: 2020/05/03
Description: Train a 2-layer bidirectional LSTM on the IMDB movie review sentiment classification dataset.
Accelerator: GPU
"""

"""
## Setup
"""

import numpy as np
import keras
from keras import layers

max_features = 20000  # Only consider the top 20k words
maxlen = 200  # Only consider the first 200 words of each movie review


def _fake_imdb(num_words):  # CHANGED: stands in for keras.datasets.imdb.load_data()
    rng = np.random.default_rng(0)

    def _split(n):
        x = np.empty(n, dtype=object)
        for i in range(n):
            x[i] = [1] + rng.integers(2, num_words, rng.integers(20, 400)).tolist()
        return x, rng.integers(0, 2, n).astype(np.int64)

    return _split(1024), _split(256)


"""
## Build the model
"""

# Input for variable-length sequences of integers
inputs = keras.Input(shape=(None,), dtype="int32")
# Embed each integer in a 128-dimensional vector
x = layers.Embedding(max_features, 128)(inputs)
# Add 2 bidirectional LSTMs
x = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(x)
x = layers.Bidirectional(layers.LSTM(64))(x)
# Add a classifier
outputs = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs, outputs)
model.summary()

"""
## Load the IMDB movie review sentiment data
"""

(x_train, y_train), (x_val, y_val) = _fake_imdb(  # CHANGED
    num_words=max_features
)
print(len(x_train), "Training sequences")
print(len(x_val), "Validation sequences")
# Use pad_sequence to standardize sequence length:
# this will truncate sequences longer than 200 words and zero-pad sequences shorter than 200 words.
x_train = keras.utils.pad_sequences(x_train, maxlen=maxlen)
x_val = keras.utils.pad_sequences(x_val, maxlen=maxlen)

"""
## Train and evaluate the model

You can use the trained model hosted on [Hugging Face Hub](https://huggingface.co/keras-io/bidirectional-lstm-imdb)
and try the demo on [Hugging Face Spaces](https://huggingface.co/spaces/keras-io/bidirectional_lstm_imdb).
"""

model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=2, validation_data=(x_val, y_val))

"""
## Relevant Chapters from Deep Learning with Python.
- [Chapter 14: Text classification](https://deeplearningwithpython.io/chapters/chapter14_text-classification)
"""
