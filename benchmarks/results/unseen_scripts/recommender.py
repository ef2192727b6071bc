# After keras.io "Collaborative Filtering for Movie Recommendations"
import keras
import numpy as np
from keras import layers, ops

num_users, num_movies, EMBEDDING_SIZE = 610, 9724, 50


class RecommenderNet(keras.Model):
    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super().__init__(**kwargs)
        self.user_embedding = layers.Embedding(num_users, embedding_size, embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6))
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(num_movies, embedding_size, embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6))
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user_vector = self.user_embedding(inputs[:, 0])
        user_bias = self.user_bias(inputs[:, 0])
        movie_vector = self.movie_embedding(inputs[:, 1])
        movie_bias = self.movie_bias(inputs[:, 1])
        dot_user_movie = ops.tensordot(user_vector, movie_vector, 2)
        x = dot_user_movie + user_bias + movie_bias
        return ops.nn.sigmoid(x)


n = 20000
x = np.stack([np.random.randint(0, num_users, n), np.random.randint(0, num_movies, n)], axis=1)
y = np.random.rand(n).astype("float32")
train_indices = int(0.9 * n)
x_train, x_val, y_train, y_val = x[:train_indices], x[train_indices:], y[:train_indices], y[train_indices:]
model = RecommenderNet(num_users, num_movies, EMBEDDING_SIZE)
model.compile(loss=keras.losses.BinaryCrossentropy(), optimizer=keras.optimizers.Adam(learning_rate=0.001))
history = model.fit(x=x_train, y=y_train, batch_size=64, epochs=2, verbose=1, validation_data=(x_val, y_val))
