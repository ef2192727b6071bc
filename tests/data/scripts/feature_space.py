"""Structured data classification with FeatureSpace (keras.io), on random rows shaped like the
heart disease table: dict inputs, FeatureSpace adapted and applied in the dataset's .map."""

import argparse

import keras
import numpy as np
import tensorflow as tf
from keras.utils import FeatureSpace

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int, default=512)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=20)
args = parser.parse_args()

rng = np.random.default_rng(1337)
n = args.rows
columns = {
    "sex": rng.integers(0, 2, size=n),
    "cp": rng.integers(0, 4, size=n),
    "fbs": rng.integers(0, 2, size=n),
    "restecg": rng.integers(0, 3, size=n),
    "exang": rng.integers(0, 2, size=n),
    "ca": rng.integers(0, 4, size=n),
    "thal": rng.choice(["fixed", "normal", "reversible"], size=n),
    "age": rng.uniform(29, 77, size=n).astype("float32"),
    "trestbps": rng.uniform(94, 200, size=n).astype("float32"),
    "chol": rng.uniform(126, 564, size=n).astype("float32"),
    "thalach": rng.uniform(71, 202, size=n).astype("float32"),
    "oldpeak": rng.uniform(0, 6, size=n).astype("float32"),
    "slope": rng.integers(1, 4, size=n).astype("float32"),
}
target = rng.integers(0, 2, size=n)
split = int(0.8 * n)


def dataframe_to_dataset(rows, labels):
    ds = tf.data.Dataset.from_tensor_slices((rows, labels))
    return ds.shuffle(buffer_size=len(labels))


train_ds = dataframe_to_dataset({k: v[:split] for k, v in columns.items()}, target[:split])
val_ds = dataframe_to_dataset({k: v[split:] for k, v in columns.items()}, target[split:])
train_ds = train_ds.batch(args.batch_size)
val_ds = val_ds.batch(args.batch_size)

feature_space = FeatureSpace(
    features={
        "sex": FeatureSpace.integer_categorical(num_oov_indices=0),
        "cp": FeatureSpace.integer_categorical(num_oov_indices=0),
        "fbs": FeatureSpace.integer_categorical(num_oov_indices=0),
        "restecg": FeatureSpace.integer_categorical(num_oov_indices=0),
        "exang": FeatureSpace.integer_categorical(num_oov_indices=0),
        "ca": FeatureSpace.integer_categorical(num_oov_indices=0),
        "thal": FeatureSpace.string_categorical(num_oov_indices=0),
        "age": FeatureSpace.float_discretized(num_bins=30),
        "trestbps": FeatureSpace.float_normalized(),
        "chol": FeatureSpace.float_normalized(),
        "thalach": FeatureSpace.float_normalized(),
        "oldpeak": FeatureSpace.float_normalized(),
        "slope": FeatureSpace.float_normalized(),
    },
    crosses=[
        FeatureSpace.cross(feature_names=("sex", "age"), crossing_dim=64),
        FeatureSpace.cross(feature_names=("thal", "ca"), crossing_dim=16),
    ],
    output_mode="concat",
)
train_ds_with_no_labels = train_ds.map(lambda x, _: x)
feature_space.adapt(train_ds_with_no_labels)

preprocessed_train_ds = train_ds.map(
    lambda x, y: (feature_space(x), y), num_parallel_calls=tf.data.AUTOTUNE
)
preprocessed_train_ds = preprocessed_train_ds.prefetch(tf.data.AUTOTUNE)
preprocessed_val_ds = val_ds.map(
    lambda x, y: (feature_space(x), y), num_parallel_calls=tf.data.AUTOTUNE
)
preprocessed_val_ds = preprocessed_val_ds.prefetch(tf.data.AUTOTUNE)

dict_inputs = feature_space.get_inputs()
encoded_features = feature_space.get_encoded_features()
x = keras.layers.Dense(32, activation="relu")(encoded_features)
x = keras.layers.Dropout(0.5)(x)
predictions = keras.layers.Dense(1, activation="sigmoid")(x)

training_model = keras.Model(inputs=encoded_features, outputs=predictions)
training_model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
inference_model = keras.Model(inputs=dict_inputs, outputs=predictions)

training_model.fit(
    preprocessed_train_ds,
    epochs=args.epochs,
    validation_data=preprocessed_val_ds,
    verbose=2,
)
