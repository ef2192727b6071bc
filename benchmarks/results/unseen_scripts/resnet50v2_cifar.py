# After the common "ResNet50V2 on CIFAR-10" examples: keras.applications.ResNet50V2 from scratch, upsampled inputs
import keras
import numpy as np
from keras import layers

x_train = np.random.randint(0, 255, (160, 32, 32, 3)).astype("uint8")
y_train = np.random.randint(0, 10, (160, 1))
x_train = x_train.astype("float32") / 255.0

inputs = keras.Input(shape=(32, 32, 3))
x = layers.UpSampling2D(size=(2, 2))(inputs)
base = keras.applications.ResNet50V2(include_top=False, weights=None, input_shape=(64, 64, 3))
x = base(x)
x = layers.GlobalAveragePooling2D()(x)
x = layers.Dense(128, activation="relu")(x)
outputs = layers.Dense(10, activation="softmax")(x)
model = keras.Model(inputs, outputs)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, epochs=1, batch_size=16, validation_split=0.1)
