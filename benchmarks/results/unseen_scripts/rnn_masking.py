# After the TensorFlow tutorial "Text classification with an RNN" and keras.io "Understanding masking & padding"
import numpy as np
import tensorflow as tf

VOCAB_SIZE = 5000
BATCH_SIZE = 64

# Variable-length reviews of word ids (0 is padding), padded at the end
raw_inputs = [np.random.randint(1, VOCAB_SIZE, size=np.random.randint(20, 200)).tolist() for _ in range(2000)]
padded_inputs = tf.keras.utils.pad_sequences(raw_inputs, padding="post")
labels = np.random.randint(0, 2, size=(len(raw_inputs),))

train_dataset = tf.data.Dataset.from_tensor_slices((padded_inputs, labels))
train_dataset = train_dataset.shuffle(10000).batch(BATCH_SIZE).prefetch(tf.data.AUTOTUNE)

model = tf.keras.Sequential([
    tf.keras.layers.Embedding(input_dim=VOCAB_SIZE, output_dim=64, mask_zero=True),
    tf.keras.layers.Bidirectional(tf.keras.layers.GRU(64, return_sequences=True)),
    tf.keras.layers.Bidirectional(tf.keras.layers.GRU(32)),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dropout(0.5),
    tf.keras.layers.Dense(1),
])

model.compile(loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
              optimizer=tf.keras.optimizers.Adam(1e-4),
              metrics=["accuracy"])

history = model.fit(train_dataset, epochs=2)
