# After keras.io "OCR model for reading Captchas" (CTC loss in a layer, dict inputs)
import keras
import numpy as np
import tensorflow as tf
from keras import layers, ops

img_width, img_height, max_length, n_chars = 64, 32, 5, 20


def ctc_batch_cost(y_true, y_pred, input_length, label_length):
    label_length = ops.cast(ops.squeeze(label_length, axis=-1), dtype="int32")
    input_length = ops.cast(ops.squeeze(input_length, axis=-1), dtype="int32")
    sparse_labels = tf.sparse.from_dense(ops.cast(y_true, "int32"))
    y_pred = ops.log(ops.transpose(y_pred, axes=[1, 0, 2]) + keras.backend.epsilon())
    return ops.expand_dims(
        tf.compat.v1.nn.ctc_loss(inputs=y_pred, labels=sparse_labels, sequence_length=input_length), 1
    )


class CTCLayer(layers.Layer):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.loss_fn = ctc_batch_cost

    def call(self, y_true, y_pred):
        batch_len = ops.cast(ops.shape(y_true)[0], dtype="int64")
        input_length = ops.cast(ops.shape(y_pred)[1], dtype="int64")
        label_length = ops.cast(ops.shape(y_true)[1], dtype="int64")
        input_length = input_length * ops.ones(shape=(batch_len, 1), dtype="int64")
        label_length = label_length * ops.ones(shape=(batch_len, 1), dtype="int64")
        loss = self.loss_fn(y_true, y_pred, input_length, label_length)
        self.add_loss(loss)
        return y_pred


def build_model():
    input_img = layers.Input(shape=(img_width, img_height, 1), name="image", dtype="float32")
    labels = layers.Input(name="label", shape=(None,), dtype="float32")
    x = layers.Conv2D(32, (3, 3), activation="relu", padding="same")(input_img)
    x = layers.MaxPooling2D((2, 2))(x)
    x = layers.Conv2D(64, (3, 3), activation="relu", padding="same")(x)
    x = layers.MaxPooling2D((2, 2))(x)
    x = layers.Reshape(target_shape=((img_width // 4), (img_height // 4) * 64))(x)
    x = layers.Dense(64, activation="relu")(x)
    x = layers.Dropout(0.2)(x)
    x = layers.Bidirectional(layers.LSTM(32, return_sequences=True, dropout=0.25))(x)
    x = layers.Dense(n_chars + 1, activation="softmax", name="dense2")(x)
    output = CTCLayer(name="ctc_loss")(labels, x)
    model = keras.models.Model(inputs=[input_img, labels], outputs=output, name="ocr_model_v1")
    model.compile(optimizer=keras.optimizers.Adam())
    return model


images = np.random.rand(256, img_width, img_height, 1).astype("float32")
labs = np.random.randint(1, n_chars, (256, max_length)).astype("float32")
train_dataset = tf.data.Dataset.from_tensor_slices({"image": images, "label": labs})
train_dataset = train_dataset.batch(16).prefetch(tf.data.AUTOTUNE)
model = build_model()
early_stopping = keras.callbacks.EarlyStopping(monitor="loss", patience=10, restore_best_weights=True)
history = model.fit(train_dataset, epochs=2, callbacks=[early_stopping])
