import numpy as np
import tensorflow as tf
import keras

x = np.random.rand(64, 64, 64, 3).astype("float32")
y = keras.utils.to_categorical(np.random.randint(0, 5, 64), 5)
base = keras.applications.ResNet50(weights=None, include_top=False, input_shape=(64, 64, 3), pooling="avg")
outputs = keras.layers.Dense(5, activation="softmax")(base.output)
model = keras.Model(base.input, outputs)
model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), loss="categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=8, epochs=1)
