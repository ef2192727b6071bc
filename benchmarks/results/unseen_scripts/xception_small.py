# After keras.io "Image classification from scratch", with keras.applications.Xception (weights=None)
import keras
import numpy as np
import tensorflow as tf
from keras import layers

image_size = (96, 96)
batch_size = 16
num_classes = 5

images = np.random.randint(0, 256, size=(320, *image_size, 3)).astype("float32")
targets = np.random.randint(0, num_classes, size=(320,))
train_ds = tf.data.Dataset.from_tensor_slices((images, targets)).shuffle(320).batch(batch_size)

data_augmentation_layers = [
    layers.RandomFlip("horizontal"),
    layers.RandomRotation(0.1),
]


def data_augmentation(images):
    for layer in data_augmentation_layers:
        images = layer(images)
    return images


train_ds = train_ds.map(lambda img, label: (data_augmentation(img), label), num_parallel_calls=tf.data.AUTOTUNE)
train_ds = train_ds.prefetch(tf.data.AUTOTUNE)

inputs = keras.Input(shape=image_size + (3,))
x = layers.Rescaling(1.0 / 255)(inputs)
base_model = keras.applications.Xception(weights=None, include_top=False, input_shape=image_size + (3,))
x = base_model(x)
x = layers.GlobalAveragePooling2D()(x)
x = layers.Dropout(0.25)(x)
outputs = layers.Dense(num_classes, activation=None)(x)
model = keras.Model(inputs, outputs)

model.compile(
    optimizer=keras.optimizers.Adam(3e-4),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")],
)
model.fit(train_ds, epochs=1)
