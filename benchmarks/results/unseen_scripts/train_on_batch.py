import numpy as np
import keras

model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
x = np.random.rand(256, 10).astype("float32")
y = np.random.rand(256, 1).astype("float32")
for epoch in range(3):
    for i in range(0, 256, 32):
        loss = model.train_on_batch(x[i:i + 32], y[i:i + 32])
    print("epoch", epoch, "loss", loss)
