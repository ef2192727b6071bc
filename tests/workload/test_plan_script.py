"""``tfaccel plan train.py ARGS...`` on unchanged scripts: the workload captured at fit, planned in
the same process (the command line's own), with the script's batch and optimizer.

All plans share this test process; the models are tiny and one device is planned.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("keras")

from tfaccel.cli import main
from tfaccel.workload import capture

ARGPARSE_SCRIPT = """
import argparse

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--epochs", type=int, default=20)
args = parser.parse_args()

print("loading the data")  # under --json, on stderr
x = np.random.rand(120, 10).astype("float32")
y = np.random.randint(0, 4, size=120)
model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(4, activation="softmax")], name="tiny_mlp")
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs)
model.save("{out}")
"""


def _script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def _plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    capsys.readouterr()
    assert main(["plan", "--device", "a100-40gb", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_unchanged_script_is_planned_at_its_batch_with_its_optimizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "model.keras"
    script = _script(tmp_path, ARGPARSE_SCRIPT.format(out=out))
    document = _plan_json(capsys, str(script), "--batch-size", "48")
    assert (document["model"], document["batch_size"]) == ("tiny_mlp", 48)
    assert document["optimizer"] == "SGD" and document["examples_per_epoch"] == 120
    assert document["trainable_parameters"] == 10 * 8 + 8 + 8 * 4 + 4
    assert [d["key"] for d in document["devices"]] == ["a100-40gb"]
    assert document["workload"]["origin"]["call"] == "train.py:18"
    assert document["workload"]["data"]["batch_source"] == "fit(batch_size=48)"
    assert any("captured before it trained" in n for n in document["notes"])
    assert not out.exists()

    # --batch overrides the script's; the script's defaults apply without arguments
    assert _plan_json(capsys, "--batch", "7", str(script))["batch_size"] == 7
    assert _plan_json(capsys, str(script))["batch_size"] == 16
    capsys.readouterr()
    assert main(["plan", "--device", "a100-40gb", str(script)]) == 0
    text = capsys.readouterr().out
    assert "Plan for tiny_mlp: batch 16, float32, SGD" in text
    assert "note: batch 16: fit(batch_size=16)" in text
    assert not out.exists()


def test_a_subclassed_model_with_its_own_step_is_planned_through_it_on_its_first_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(
        tmp_path,
        """
        import keras
        import numpy as np
        import tensorflow as tf


        class Net(keras.Model):
            def __init__(self):
                super().__init__(name="subnet")
                self.hidden = keras.layers.Dense(6, activation="relu")
                self.out = keras.layers.Dense(3)

            def call(self, x):
                return self.out(self.hidden(x))

            def train_step(self, data):
                return super().train_step(data)


        if __name__ == "__main__":
            ds = tf.data.Dataset.from_tensor_slices(
                (np.ones((40, 5), "float32"), np.zeros((40,), "int64"))
            ).map(lambda x, y: (x * 2.0, y)).batch(20)
            model = Net()
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
            model.fit(ds, epochs=3)
        """,
    )
    document = _plan_json(capsys, str(script))
    assert (document["model"], document["batch_size"], document["optimizer"]) == (
        "subnet",
        20,
        "Adam",
    )
    assert document["trainable_parameters"] == 5 * 6 + 6 + 6 * 3 + 3
    assert document["examples_per_epoch"] == 40
    # its own train_step, traced as fit runs it: on (x, y) as the dataset gives them
    assert any(
        "Net has its own train_step: its train_step traced as fit runs it" in n
        and "((20, 5) float32, (20,) int64)" in n
        for n in document["notes"]
    )
    capsys.readouterr()
    assert main(["plan", "--precision", "mixed_bfloat16", str(script)]) == 2
    err = capsys.readouterr().err
    assert "cannot rebuild it as mixed_bfloat16" in err and "Traceback" not in err


LOSS_OF_ITS_OWN_SCRIPT = """
import keras
import numpy as np
from keras import layers, ops


class PenaltyLayer(layers.Layer):  # keras.io's OCR model: the loss is added by a layer
    def call(self, labels, scores):
        self.add_loss(ops.mean(ops.square(ops.mean(scores, axis=-1) - labels)))
        return scores


class Distiller(keras.Model):  # keras.io's knowledge distillation: the teacher in the loss
    def __init__(self, student, teacher):
        super().__init__()
        self.student, self.teacher = student, teacher

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, allow_empty=False):
        soft = ops.softmax(self.teacher(x, training=False))
        return ops.mean(keras.losses.kl_divergence(soft, ops.softmax(y_pred)))

    def call(self, x):
        return self.student(x)


image = keras.Input((12, 6), name="image")
label = keras.Input((12,), name="label")
scores = PenaltyLayer()(label, layers.Dense(4)(layers.Dense(16, activation="relu")(image)))
ocr = keras.Model([image, label], scores, name="ocr")
ocr.compile(optimizer="adam")
data = {"image": np.random.rand(64, 12, 6).astype("float32"),
        "label": np.random.rand(64, 12).astype("float32")}
ocr.fit(data, batch_size=16, epochs=1)

def mlp(width, name):
    return keras.Sequential([keras.Input((6,)), layers.Dense(width, activation="relu"),
                             layers.Dense(3)], name=name)

teacher = mlp(64, "teacher")
distiller = Distiller(mlp(8, "student"), teacher)
distiller.compile(optimizer="sgd", metrics=["accuracy"])
distiller.fit(np.random.rand(64, 6).astype("float32"), np.zeros((64,), "int64"), epochs=1)
"""


def test_a_loss_of_the_models_own_is_planned_through_its_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model compiled without a loss (its layers add it) and a model with its own
    compute_loss are planned through the step fit runs, not given a loss of the plan's."""
    script = _script(tmp_path, LOSS_OF_ITS_OWN_SCRIPT)
    first = _plan_json(capsys, str(script))
    assert (first["model"], first["batch_size"], first["optimizer"]) == ("ocr", 16, "Adam")
    assert not any("not compiled" in n for n in first["notes"])
    assert any(
        "has a loss its layers add (compiled without a loss): its train_step traced" in n
        and "{image: (16, 12, 6) float32, label: (16, 12) float32}" in n
        for n in first["notes"]
    )
    second = _plan_json(capsys, "--fit", "2", str(script))
    assert (second["batch_size"], second["optimizer"]) == (32, "SGD")
    assert any("Distiller has its own compute_loss" in n for n in second["notes"])
    # the teacher's forward pass runs inside the loss: the step's FLOPs are the student's
    # forward and backward (3x its forward) and the teacher's forward, both counted
    student = 2 * 32 * (6 * 8 + 8 * 3)
    teacher = 2 * 32 * (6 * 64 + 64 * 3)
    assert second["flops_per_step"] >= 3 * student + teacher


def test_a_model_built_under_a_distribution_strategy_is_planned_for_one_replica(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(
        tmp_path,
        """
        import keras
        import numpy as np
        import tensorflow as tf

        with tf.distribute.MirroredStrategy().scope():
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
            model.compile(optimizer="adam", loss="mse")
        model.fit(np.ones((8, 3), "float32"), np.zeros((8, 1), "float32"))
        """,
    )
    document = _plan_json(capsys, str(script))
    assert document["batch_size"] == 32  # one replica here: the global batch
    assert (
        "built under MirroredStrategy: one replica's training step is planned"
        in (document["notes"])
    )


def test_a_sequential_without_input_and_sequences_of_any_length_are_planned_on_their_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(
        tmp_path,
        """
        import keras
        import numpy as np

        plain = keras.Sequential([keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
        plain.compile(optimizer="adam", loss="mse")
        plain.fit(np.ones((16, 3), "float32"), np.zeros((16, 1), "float32"), batch_size=4)

        tokens = keras.Input((None,), dtype="int32")
        hidden = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(50, 8)(tokens))
        text = keras.Model(tokens, keras.layers.Dense(2)(hidden), name="text")
        text.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        text.fit(np.ones((24, 12), "int32"), np.zeros((24,), "int32"), batch_size=6)
        """,
    )
    plain = _plan_json(capsys, str(script))
    assert (plain["batch_size"], plain["trainable_parameters"]) == (4, 3 * 4 + 4 + 4 + 1)
    assert any("no symbolic inputs" in n and "(4, 3)" in n for n in plain["notes"])
    text = _plan_json(capsys, "--fit", "2", str(script))
    assert (text["model"], text["batch_size"]) == ("text", 6)
    assert text["trainable_parameters"] == 50 * 8 + 8 * 2 + 2
    assert any("not fully known" in n and "(6, 12)" in n for n in text["notes"])


def test_a_model_rebuilt_on_its_data_is_compiled_as_the_script_compiled_it(
    tmp_path: Path,
) -> None:
    """Sequences of any length: the plan traces a stand-in model built on the first batch. Its
    step must be the one fit runs: the script's metrics (an accuracy's arg-max over the
    outputs), loss weights and steps per execution, as for the same model with a fixed length,
    which is traced as the script built it; a two-output model's metrics keyed by the outputs'
    names find them."""
    script = _script(
        tmp_path,
        """
        import keras
        import numpy as np

        def text_model(length):
            tokens = keras.Input((length,), dtype="int32")
            hidden = keras.layers.Embedding(50, 8, mask_zero=True)(tokens)
            hidden = keras.layers.GlobalAveragePooling1D()(hidden)
            model = keras.Model(tokens, keras.layers.Dense(5, activation="softmax")(hidden))
            model.compile(
                optimizer="adam",
                loss="sparse_categorical_crossentropy",
                loss_weights=0.5,
                metrics=["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(k=2)],
                weighted_metrics=[keras.metrics.SparseCategoricalCrossentropy()],
                steps_per_execution=3,
            )
            return model

        def two_heads(length):  # metrics keyed by the outputs' names
            tokens = keras.Input((length,), dtype="int32")
            hidden = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(50, 8)(tokens))
            heads = [keras.layers.Dense(5, activation="softmax", name=n)(hidden)
                     for n in ("topic", "tone")]
            model = keras.Model(tokens, heads)
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                          metrics={"topic": ["accuracy"],
                                   "tone": [keras.metrics.SparseTopKCategoricalAccuracy(k=2)]})
            return model

        x, y = np.ones((24, 12), "int32"), np.zeros((24,), "int32")
        text_model(None).fit(x, y, batch_size=6)
        text_model(12).fit(x, y, batch_size=6)
        two_heads(None).fit(x, (y, y), batch_size=6)
        two_heads(12).fit(x, (y, y), batch_size=6)
        """,
    )
    text, _ = _same_step_rebuilt_and_as_built(script, 1, 2)
    assert text.steps_per_execution == 3
    heads, _ = _same_step_rebuilt_and_as_built(script, 3, 4)
    assert heads.steps_per_execution == 1


def _same_step_rebuilt_and_as_built(script: Path, rebuilt_fit: int, as_built_fit: int) -> Any:
    """The steps of the script's ``rebuilt_fit``-th model (planned through a stand-in) and of
    its ``as_built_fit``-th (the same layers at a fixed length), checked to be the same."""
    from tfaccel.planning import trace_step
    from tfaccel.planning.source import workload_model

    traced = []
    for fit in (rebuilt_fit, as_built_fit):
        model, _, notes = workload_model(capture(script, fit=fit, timeout=120))
        traced.append(trace_step(model, 6))
        assert any("not fully known" in n for n in notes) == (fit == rebuilt_fit)
    rebuilt, as_built = traced
    assert sorted(op.type for op in rebuilt.ops) == sorted(op.type for op in as_built.ops)
    assert any(op.type == "ArgMax" for op in rebuilt.ops)
    assert rebuilt.metric_variables == as_built.metric_variables > 2  # the loss tracker's 2
    assert rebuilt.steps_per_execution == as_built.steps_per_execution
    return rebuilt, as_built


def test_dict_inputs_and_the_second_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script(
        tmp_path,
        """
        import keras
        import numpy as np

        a = keras.Input((3,), name="a")
        b = keras.Input((2,), name="b")
        hidden = keras.layers.Dense(4, name="hidden")(keras.layers.Concatenate()([a, b]))
        model = keras.Model({"a": a, "b": b}, keras.layers.Dense(1)(hidden), name="two_inputs")
        data = {"a": np.ones((30, 3), "float32"), "b": np.ones((30, 2), "float32")}
        target = np.zeros((30, 1), "float32")
        model.get_layer("hidden").trainable = False
        model.compile(optimizer="adam", loss="mse")
        model.fit(data, target, batch_size=10, epochs=50)
        model.get_layer("hidden").trainable = True
        model.compile(optimizer="sgd", loss="mse")
        model.fit(data, target, batch_size=6, epochs=50)
        """,
    )
    first = _plan_json(capsys, str(script))
    assert (first["batch_size"], first["optimizer"], first["trainable_parameters"]) == (
        10,
        "Adam",
        5,
    )
    second = _plan_json(capsys, "--fit", "2", str(script))
    assert (second["batch_size"], second["optimizer"], second["trainable_parameters"]) == (
        6,
        "SGD",
        29,
    )


def test_a_script_that_does_not_reach_fit_is_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, "import keras\nprint('loading')\nraise ValueError('no data')\n")
    assert main(["plan", str(script)]) == 2
    err = capsys.readouterr().err
    assert "The script train.py raised ValueError before model.fit, at train.py:3: no data" in err
    marker = tmp_path / "ran"
    writes = _script(tmp_path, f"open({str(marker)!r}, 'w').close()\n", "writes.py")
    assert main(["plan", "--device", "a100-41gb", str(writes)]) == 2
    assert "Unknown device key" in capsys.readouterr().err
    assert not marker.exists()  # refused before the script ran
    loop = _script(tmp_path, "import keras\nmodel = keras.Sequential()\n", "loop.py")
    assert main(["plan", "--json", str(loop)]) == 2
    captured = capsys.readouterr()
    assert "tfaccel.workload.mark(model, dataset" in captured.err
    document = json.loads(captured.out)  # under --json, stdout holds the error as a document
    assert document["exit_code"] == 2 and document["error"]["type"] == "CaptureError"
    assert "tfaccel.workload.mark(model, dataset" in document["error"]["fix"]


def test_options_after_a_model_fn_script_are_plans_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(
        tmp_path,
        """
        import keras


        def model_fn():
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
            model.compile(optimizer="adam", loss="mse")
            return model


        if __name__ == "__main__":
            raise SystemExit("the training must not run")
        """,
    )
    capsys.readouterr()
    assert main(["plan", str(script), "--batch", "12", "--device", "a100-40gb", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["batch_size"] == 12 and "workload" not in document


def test_capture_stays_in_seconds(tmp_path: Path) -> None:
    """A script whose training would take minutes is captured in well under its time."""
    import time

    script = _script(tmp_path, ARGPARSE_SCRIPT.format(out=tmp_path / "m.keras"))
    start = time.perf_counter()
    capture(script, ["--epochs", "100000"])
    assert time.perf_counter() - start < 10
