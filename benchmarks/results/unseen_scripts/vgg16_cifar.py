# After the common "VGG16 on CIFAR-10" tutorials: keras.applications.VGG16 trained from scratch
import keras
import numpy as np

(x_train, y_train) = (np.random.rand(256, 32, 32, 3).astype("float32"), np.random.randint(0, 10, (256, 1)))
y_train = keras.utils.to_categorical(y_train, 10)

base_model = keras.applications.VGG16(weights=None, include_top=False, input_shape=(32, 32, 3))
x = keras.layers.Flatten()(base_model.output)
x = keras.layers.Dense(256, activation="relu")(x)
x = keras.layers.Dropout(0.5)(x)
predictions = keras.layers.Dense(10, activation="softmax")(x)
model = keras.Model(inputs=base_model.input, outputs=predictions)

model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01, momentum=0.9), loss="categorical_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=1, validation_split=0.1)
