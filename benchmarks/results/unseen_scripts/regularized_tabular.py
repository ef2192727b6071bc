# After the TensorFlow tutorial "Overfit and underfit": weight regularization, dropout and batch normalization
import numpy as np
import tensorflow as tf
from tensorflow.keras import layers, regularizers

FEATURES = 28
N_TRAIN = 10000
BATCH_SIZE = 500
STEPS_PER_EPOCH = N_TRAIN // BATCH_SIZE

features = np.random.normal(size=(N_TRAIN, FEATURES)).astype("float32")
labels = np.random.randint(0, 2, size=(N_TRAIN, 1)).astype("float32")
train_ds = tf.data.Dataset.from_tensor_slices((features, labels)).cache().shuffle(N_TRAIN).repeat().batch(BATCH_SIZE)

lr_schedule = tf.keras.optimizers.schedules.InverseTimeDecay(
    0.001, decay_steps=STEPS_PER_EPOCH * 1000, decay_rate=1, staircase=False)

combined_model = tf.keras.Sequential([
    layers.Dense(512, kernel_regularizer=regularizers.l1_l2(l1=1e-5, l2=1e-4), input_shape=(FEATURES,)),
    layers.BatchNormalization(),
    layers.Activation("elu"),
    layers.Dropout(0.5),
    layers.Dense(512, kernel_regularizer=regularizers.l1_l2(l1=1e-5, l2=1e-4)),
    layers.BatchNormalization(),
    layers.Activation("elu"),
    layers.Dropout(0.5),
    layers.Dense(512, kernel_regularizer=regularizers.l1_l2(l1=1e-5, l2=1e-4)),
    layers.BatchNormalization(),
    layers.Activation("elu"),
    layers.Dropout(0.5),
    layers.Dense(512, kernel_regularizer=regularizers.l1_l2(l1=1e-5, l2=1e-4), activation="elu"),
    layers.Dropout(0.5),
    layers.Dense(1),
])

combined_model.compile(optimizer=tf.keras.optimizers.Adam(lr_schedule),
                       loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
                       metrics=[tf.keras.metrics.BinaryCrossentropy(from_logits=True, name="binary_crossentropy"),
                                "accuracy"])

combined_model.summary()
history = combined_model.fit(train_ds, steps_per_epoch=STEPS_PER_EPOCH, epochs=2, verbose=2)
