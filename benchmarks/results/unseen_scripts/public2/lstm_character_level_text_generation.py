# SOURCE: https://github.com/keras-team/keras-io/blob/61b6dba5e62808524df142b4c56d8266add5d349/examples/generative/lstm_character_level_text_generation.py
# CHANGES (only these):
#  - the nietzsche.txt download (keras.utils.get_file) replaced by writing a random
#    text file of 60,000 characters from a 57-character alphabet (the published corpus
#    has ~600,000 characters, 57 distinct after lower()) into a temp dir; the rest of
#    the data preparation is unchanged
#  - epochs 40 -> 2
#  - generated characters per diversity range(400) -> range(10) (one predict() each)
"""
Title: Character-level text generation with LSTM
Author: [fchollet](https://twitter.com/fchollet)
Date created: 2015/06/15
Last modified: 2020/04/30
Description: Generate text from Nietzsche's writings with a character-level LSTM.
"""
"""
## Introduction

This example demonstrates how to use a LSTM model to generate
text character-by-character.

At least 20 epochs are required before the generated text
starts sounding locally coherent.

It is recommended to run this script on GPU, as recurrent
networks are quite computationally intensive.

If you try this script on new data, make sure your corpus
has at least ~100k characters. ~1M is better.
"""

"""
## Setup
"""
from tensorflow import keras
from tensorflow.keras import layers

import numpy as np
import random
import io

"""
## Prepare the data
"""

# CHANGED: random stand-in for the nietzsche.txt download
import os as _os
import tempfile as _tempfile
_rng = np.random.default_rng(0)
_alphabet = list("abcdefghijklmnopqrstuvwxyz0123456789 .,;:!?'\"-()[]_=\näæéë")
path = _os.path.join(_tempfile.mkdtemp(), "nietzsche.txt")
with io.open(path, "w", encoding="utf-8") as _f:
    _f.write("".join(_rng.choice(_alphabet, 60000)))
with io.open(path, encoding="utf-8") as f:
    text = f.read().lower()
text = text.replace("\n", " ")  # We remove newlines chars for nicer display
print("Corpus length:", len(text))

chars = sorted(list(set(text)))
print("Total chars:", len(chars))
char_indices = dict((c, i) for i, c in enumerate(chars))
indices_char = dict((i, c) for i, c in enumerate(chars))

# cut the text in semi-redundant sequences of maxlen characters
maxlen = 40
step = 3
sentences = []
next_chars = []
for i in range(0, len(text) - maxlen, step):
    sentences.append(text[i : i + maxlen])
    next_chars.append(text[i + maxlen])
print("Number of sequences:", len(sentences))

x = np.zeros((len(sentences), maxlen, len(chars)), dtype=np.bool)
y = np.zeros((len(sentences), len(chars)), dtype=np.bool)
for i, sentence in enumerate(sentences):
    for t, char in enumerate(sentence):
        x[i, t, char_indices[char]] = 1
    y[i, char_indices[next_chars[i]]] = 1


"""
## Build the model: a single LSTM layer
"""

model = keras.Sequential(
    [
        keras.Input(shape=(maxlen, len(chars))),
        layers.LSTM(128),
        layers.Dense(len(chars), activation="softmax"),
    ]
)
optimizer = keras.optimizers.RMSprop(learning_rate=0.01)
model.compile(loss="categorical_crossentropy", optimizer=optimizer)

"""
## Prepare the text sampling function
"""


def sample(preds, temperature=1.0):
    # helper function to sample an index from a probability array
    preds = np.asarray(preds).astype("float64")
    preds = np.log(preds) / temperature
    exp_preds = np.exp(preds)
    preds = exp_preds / np.sum(exp_preds)
    probas = np.random.multinomial(1, preds, 1)
    return np.argmax(probas)


"""
## Train the model
"""

epochs = 2  # CHANGED: 40 -> 2
batch_size = 128

for epoch in range(epochs):
    model.fit(x, y, batch_size=batch_size, epochs=1)
    print()
    print("Generating text after epoch: %d" % epoch)

    start_index = random.randint(0, len(text) - maxlen - 1)
    for diversity in [0.2, 0.5, 1.0, 1.2]:
        print("...Diversity:", diversity)

        generated = ""
        sentence = text[start_index : start_index + maxlen]
        print('...Generating with seed: "' + sentence + '"')

        for i in range(10):  # CHANGED: 400 -> 10
            x_pred = np.zeros((1, maxlen, len(chars)))
            for t, char in enumerate(sentence):
                x_pred[0, t, char_indices[char]] = 1.0
            preds = model.predict(x_pred, verbose=0)[0]
            next_index = sample(preds, diversity)
            next_char = indices_char[next_index]
            sentence = sentence[1:] + next_char
            generated += next_char

        print("...Generated: ", generated)
        print()
