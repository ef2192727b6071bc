# SOURCE: https://github.com/keras-team/keras-io/blob/a0c3f6313ffca7ecd9713258551641c85b56d9cd/examples/structured_data/collaborative_filtering_movielens.py
# CHANGES (only these):
#  - the ml-latest-small.zip download (keras.utils.get_file) replaced by writing a zip
#    of the same layout into a temp dir: ml-latest-small/ratings.csv (userId, movieId,
#    rating, timestamp; 1280 ratings, published: 100,836) and ml-latest-small/movies.csv
#    (movieId, title, genres; 9742 movies, as published), random values of the
#    published ranges (610 users, movieIds 1..193609, ratings 0.5..5.0 in steps of 0.5);
#    its path handling and extraction stay. With 1280 ratings all 610 users appear but
#    only ~1200 of the movies, so the movie embedding tables have ~1200 rows (published
#    9724); 1152 training ratings = 18 batches of 64, 128 validation
#  - pandas is not installed in this environment, so `import pandas as pd` is removed,
#    pd.read_csv becomes a small csv-module reader returning a dict of numpy columns
#    (int64 / float64 / str, as pandas infers them), and each DataFrame step is done
#    with numpy on those columns, the same values: .unique() (order of appearance),
#    .map(dict), .values.astype, .sample(frac=1, random_state=42), [[cols]].values,
#    .apply(normalize), .shape[0], and in the recommendation part .sample(1), boolean
#    row selection, ~.isin(), .sort_values(...).head(5) and .itertuples()
#  - epochs 5 -> 2
"""
Title: Collaborative Filtering for Movie Recommendations
Author: [Siddhartha Banerjee](https://twitter.com/sidd2006)
Date created: 2020/05/24
Last modified: 2020/05/24
Description: Recommending movies using a model trained on Movielens dataset.
Accelerator: GPU
"""
"""
## Introduction

This example demonstrates
[Collaborative filtering](https://en.wikipedia.org/wiki/Collaborative_filtering)
using the [Movielens dataset](https://www.kaggle.com/c/movielens-100k)
to recommend movies to users.
The MovieLens ratings dataset lists the ratings given by a set of users to a set of movies.
Our goal is to be able to predict ratings for movies a user has not yet watched.
The movies with the highest predicted ratings can then be recommended to the user.

The steps in the model are as follows:

1. Map user ID to a "user vector" via an embedding matrix
2. Map movie ID to a "movie vector" via an embedding matrix
3. Compute the dot product between the user vector and movie vector, to obtain
the a match score between the user and the movie (predicted rating).
4. Train the embeddings via gradient descent using all known user-movie pairs.

**References:**

- [Collaborative Filtering](https://dl.acm.org/doi/pdf/10.1145/371920.372071)
- [Neural Collaborative Filtering](https://dl.acm.org/doi/pdf/10.1145/3038912.3052569)
"""

# CHANGED: removed `import pandas as pd` (pandas is not installed)
from pathlib import Path
import matplotlib.pyplot as plt
import numpy as np
from zipfile import ZipFile

import keras
from keras import layers
from keras import ops

"""
## First, load the data and apply preprocessing
"""

# Download the actual data from http://files.grouplens.org/datasets/movielens/ml-latest-small.zip"
# Use the ratings.csv file
movielens_data_file_url = (
    "http://files.grouplens.org/datasets/movielens/ml-latest-small.zip"
)
def _fake_movielens_zip(num_ratings=1280, num_users=610, num_movies=9742):  # CHANGED: stands in for keras.utils.get_file("ml-latest-small.zip", movielens_data_file_url, extract=False)
    import csv
    import io
    import tempfile

    rng = np.random.default_rng(0)
    movie_ids = np.sort(rng.choice(np.arange(1, 193610), size=num_movies, replace=False))
    genres = ["Action", "Adventure", "Animation", "Children", "Comedy", "Crime", "Drama", "Fantasy", "Horror", "Romance", "Sci-Fi", "Thriller"]
    users = np.concatenate([np.arange(1, num_users + 1), rng.integers(1, num_users + 1, num_ratings - num_users)])
    movies = rng.choice(movie_ids[:9724], size=num_ratings)
    order = np.lexsort((movies, users))
    ratings = io.StringIO()
    w = csv.writer(ratings, lineterminator="\n")
    w.writerow(["userId", "movieId", "rating", "timestamp"])
    for u, m in zip(users[order], movies[order]):
        w.writerow([u, m, rng.integers(1, 11) / 2, rng.integers(828124615, 1537799250)])
    movies_csv = io.StringIO()
    w = csv.writer(movies_csv, lineterminator="\n")
    w.writerow(["movieId", "title", "genres"])
    for m in movie_ids:
        g = rng.choice(genres, size=rng.integers(1, 4), replace=False)
        w.writerow([m, "Movie %d, The (%d)" % (m, rng.integers(1902, 2019)), "|".join(g)])
    path = Path(tempfile.mkdtemp()) / "ml-latest-small.zip"
    with ZipFile(path, "w") as z:
        z.writestr("ml-latest-small/ratings.csv", ratings.getvalue())
        z.writestr("ml-latest-small/movies.csv", movies_csv.getvalue())
    return str(path)


def _read_csv(path):  # CHANGED: stands in for pd.read_csv (pandas is not installed): a dict of numpy columns
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    columns = {}
    for j, name in enumerate(rows[0]):
        values = [r[j] for r in rows[1:]]
        for dtype in (np.int64, np.float64, str):
            try:
                columns[name] = np.array(values, dtype=dtype)
                break
            except ValueError:
                continue
    return columns


def _pd_unique(a):  # CHANGED: pandas Series.unique() (order of appearance) in numpy
    _, index = np.unique(a, return_index=True)
    return a[np.sort(index)]


movielens_zipped_file = _fake_movielens_zip()  # CHANGED
keras_datasets_path = Path(movielens_zipped_file).parents[0]
movielens_dir = keras_datasets_path / "ml-latest-small"

# Only extract the data the first time the script is run.
if not movielens_dir.exists():
    with ZipFile(movielens_zipped_file, "r") as zip:
        # Extract files
        print("Extracting all the files now...")
        zip.extractall(path=keras_datasets_path)
        print("Done!")

ratings_file = movielens_dir / "ratings.csv"
df = _read_csv(ratings_file)  # CHANGED: pd.read_csv(ratings_file)

"""
First, need to perform some preprocessing to encode users and movies as integer indices.
"""
user_ids = _pd_unique(df["userId"]).tolist()  # CHANGED: df["userId"].unique().tolist()
user2user_encoded = {x: i for i, x in enumerate(user_ids)}
userencoded2user = {i: x for i, x in enumerate(user_ids)}
movie_ids = _pd_unique(df["movieId"]).tolist()  # CHANGED: df["movieId"].unique().tolist()
movie2movie_encoded = {x: i for i, x in enumerate(movie_ids)}
movie_encoded2movie = {i: x for i, x in enumerate(movie_ids)}
df["user"] = np.array([user2user_encoded[u] for u in df["userId"]])  # CHANGED: df["userId"].map(user2user_encoded)
df["movie"] = np.array([movie2movie_encoded[m] for m in df["movieId"]])  # CHANGED: df["movieId"].map(movie2movie_encoded)

num_users = len(user2user_encoded)
num_movies = len(movie_encoded2movie)
df["rating"] = df["rating"].astype(np.float32)  # CHANGED: df["rating"].values.astype(np.float32)
# min and max ratings will be used to normalize the ratings later
min_rating = min(df["rating"])
max_rating = max(df["rating"])

print(
    "Number of users: {}, Number of Movies: {}, Min rating: {}, Max rating: {}".format(
        num_users, num_movies, min_rating, max_rating
    )
)

"""
## Prepare training and validation data
"""
_shuffled = np.random.RandomState(42).permutation(len(df["userId"]))  # CHANGED: df = df.sample(frac=1, random_state=42)
df = {k: v[_shuffled] for k, v in df.items()}  # CHANGED
x = np.stack([df["user"], df["movie"]], axis=1)  # CHANGED: df[["user", "movie"]].values
# Normalize the targets between 0 and 1. Makes it easy to train.
y = (df["rating"] - min_rating) / (max_rating - min_rating)  # CHANGED: df["rating"].apply(lambda x: (x - min_rating) / (max_rating - min_rating)).values
# Assuming training on 90% of the data and validating on 10%.
train_indices = int(0.9 * len(df["userId"]))  # CHANGED: df.shape[0]
x_train, x_val, y_train, y_val = (
    x[:train_indices],
    x[train_indices:],
    y[:train_indices],
    y[train_indices:],
)

"""
## Create the model

We embed both users and movies in to 50-dimensional vectors.

The model computes a match score between user and movie embeddings via a dot product,
and adds a per-movie and per-user bias. The match score is scaled to the `[0, 1]`
interval via a sigmoid (since our ratings are normalized to this range).
"""
EMBEDDING_SIZE = 50


class RecommenderNet(keras.Model):
    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super().__init__(**kwargs)
        self.num_users = num_users
        self.num_movies = num_movies
        self.embedding_size = embedding_size
        self.user_embedding = layers.Embedding(
            num_users,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(
            num_movies,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user_vector = self.user_embedding(inputs[:, 0])
        user_bias = self.user_bias(inputs[:, 0])
        movie_vector = self.movie_embedding(inputs[:, 1])
        movie_bias = self.movie_bias(inputs[:, 1])
        dot_user_movie = ops.tensordot(user_vector, movie_vector, 2)
        # Add all the components (including bias)
        x = dot_user_movie + user_bias + movie_bias
        # The sigmoid activation forces the rating to between 0 and 1
        return ops.nn.sigmoid(x)


model = RecommenderNet(num_users, num_movies, EMBEDDING_SIZE)
model.compile(
    loss=keras.losses.BinaryCrossentropy(),
    optimizer=keras.optimizers.Adam(learning_rate=0.001),
)

"""
## Train the model based on the data split
"""
history = model.fit(
    x=x_train,
    y=y_train,
    batch_size=64,
    epochs=2,  # CHANGED: 5 -> 2
    verbose=1,
    validation_data=(x_val, y_val),
)

"""
## Plot training and validation loss
"""
plt.plot(history.history["loss"])
plt.plot(history.history["val_loss"])
plt.title("model loss")
plt.ylabel("loss")
plt.xlabel("epoch")
plt.legend(["train", "test"], loc="upper left")
plt.show()

"""
## Show top 10 movie recommendations to a user
"""

movie_df = _read_csv(movielens_dir / "movies.csv")  # CHANGED: pd.read_csv(movielens_dir / "movies.csv")

# Let us get a user and see the top recommendations.
user_id = np.random.choice(df["userId"])  # CHANGED: df.userId.sample(1).iloc[0]
movies_watched_by_user = {k: v[df["userId"] == user_id] for k, v in df.items()}  # CHANGED: df[df.userId == user_id]
movies_not_watched = movie_df["movieId"][  # CHANGED: movie_df[
    ~np.isin(movie_df["movieId"], movies_watched_by_user["movieId"])  # CHANGED: ~movie_df["movieId"].isin(movies_watched_by_user.movieId.values)
]  # CHANGED: ]["movieId"]
movies_not_watched = list(
    set(movies_not_watched).intersection(set(movie2movie_encoded.keys()))
)
movies_not_watched = [[movie2movie_encoded.get(x)] for x in movies_not_watched]
user_encoder = user2user_encoded.get(user_id)
user_movie_array = np.hstack(
    ([[user_encoder]] * len(movies_not_watched), movies_not_watched)
)
ratings = model.predict(user_movie_array).flatten()
top_ratings_indices = ratings.argsort()[-10:][::-1]
recommended_movie_ids = [
    movie_encoded2movie.get(movies_not_watched[x][0]) for x in top_ratings_indices
]

print("Showing recommendations for user: {}".format(user_id))
print("====" * 9)
print("Movies with high ratings from user")
print("----" * 8)
top_movies_user = movies_watched_by_user["movieId"][  # CHANGED: movies_watched_by_user.sort_values(by="rating", ascending=False).head(5).movieId.values
    np.argsort(-movies_watched_by_user["rating"], kind="stable")[:5]  # CHANGED
]  # CHANGED
movie_df_rows = np.isin(movie_df["movieId"], top_movies_user)  # CHANGED: movie_df[movie_df["movieId"].isin(top_movies_user)]
for i in np.flatnonzero(movie_df_rows):  # CHANGED: for row in movie_df_rows.itertuples():  (`zip` is the ZipFile above)
    print(movie_df["title"][i], ":", movie_df["genres"][i])  # CHANGED: print(row.title, ":", row.genres)

print("----" * 8)
print("Top 10 movie recommendations")
print("----" * 8)
recommended_movies = np.isin(movie_df["movieId"], recommended_movie_ids)  # CHANGED: movie_df[movie_df["movieId"].isin(recommended_movie_ids)]
for i in np.flatnonzero(recommended_movies):  # CHANGED: for row in recommended_movies.itertuples():
    print(movie_df["title"][i], ":", movie_df["genres"][i])  # CHANGED: print(row.title, ":", row.genres)
