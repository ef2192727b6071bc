# After the TensorFlow tutorials' InceptionV3 fine-tuning examples, trained from scratch at its smallest input
import numpy as np
import tensorflow as tf

IMG_SIZE = 75
NUM_CLASSES = 5
BATCH_SIZE = 8

images = np.random.uniform(0, 255, (64, IMG_SIZE, IMG_SIZE, 3)).astype("float32")
labels = np.random.randint(0, NUM_CLASSES, 64)
train_ds = tf.data.Dataset.from_tensor_slices((images, labels)).batch(BATCH_SIZE)
train_ds = train_ds.map(lambda x, y: (tf.keras.applications.inception_v3.preprocess_input(x), y))

base_model = tf.keras.applications.InceptionV3(input_shape=(IMG_SIZE, IMG_SIZE, 3), include_top=False, weights=None)
model = tf.keras.Sequential([
    base_model,
    tf.keras.layers.GlobalAveragePooling2D(),
    tf.keras.layers.Dropout(0.2),
    tf.keras.layers.Dense(NUM_CLASSES),
])
model.compile(optimizer=tf.keras.optimizers.RMSprop(learning_rate=0.0001),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(train_ds, epochs=1)
