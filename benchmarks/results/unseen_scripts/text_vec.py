# After keras.io "Text classification from scratch" (TextVectorization in the tf.data map)
import random
import re
import string

import keras
import numpy as np
import tensorflow as tf
from keras import layers

words = ["good", "bad", "movie", "film", "great", "awful", "plot", "<br />", "actor", "boring"]
texts = [" ".join(random.choice(words) for _ in range(random.randint(5, 60))) for _ in range(512)]
labels = np.random.randint(0, 2, 512)
raw_train_ds = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(32)


def custom_standardization(input_data):
    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
    return tf.strings.regex_replace(stripped_html, f"[{re.escape(string.punctuation)}]", "")


max_features, embedding_dim, sequence_length = 2000, 128, 500
vectorize_layer = keras.layers.TextVectorization(standardize=custom_standardization, max_tokens=max_features,
    output_mode="int", output_sequence_length=sequence_length)
text_ds = raw_train_ds.map(lambda x, y: x)
vectorize_layer.adapt(text_ds)


def vectorize_text(text, label):
    text = tf.expand_dims(text, -1)
    return vectorize_layer(text), label


train_ds = raw_train_ds.map(vectorize_text).cache().prefetch(buffer_size=10)
inputs = keras.Input(shape=(None,), dtype="int64")
x = layers.Embedding(max_features, embedding_dim)(inputs)
x = layers.Dropout(0.5)(x)
x = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(x)
x = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(x)
x = layers.GlobalMaxPooling1D()(x)
x = layers.Dense(128, activation="relu")(x)
x = layers.Dropout(0.5)(x)
predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)
model = keras.Model(inputs, predictions)
model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(train_ds, epochs=3)
