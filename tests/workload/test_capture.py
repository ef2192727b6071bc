"""tfaccel.workload.capture on scripts written the way people write them: each is run unchanged,
stopped at its fit, and nothing after that point happens.

The captures share this test process (TensorFlow is imported once); every model is tiny.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

keras = pytest.importorskip("keras")

from tfaccel import workload  # noqa: E402
from tfaccel.core.errors import UsageError  # noqa: E402
from tfaccel.workload import CaptureError, capture, isolated  # noqa: E402


def _script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


ARRAYS = """
import argparse

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--epochs", type=int, default=50)
parser.add_argument("--out", default="{out}")
args = parser.parse_args()

x = np.random.rand(200, 8).astype("float32")
y = np.random.randint(0, 3, size=200)

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="relu"),
                          keras.layers.Dense(3)], name="arrays_net")
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05, momentum=0.9),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"], steps_per_execution=4)
model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, validation_split=0.25,
          callbacks=[keras.callbacks.CSVLogger(args.out + ".csv")])
model.save_weights(args.out + ".weights.h5")
with open(args.out + ".done", "w") as f:
    f.write("trained")
"""


def test_module_level_arrays_script_is_captured_at_fit_and_nothing_after_it_runs(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    script = _script(tmp_path, ARRAYS.format(out=out))
    argv = sys.argv[:]
    start = time.perf_counter()
    w = capture(script, ["--batch-size", "24", "--epochs", "3"])
    took = time.perf_counter() - start
    assert took < 20, took  # seconds, not the script's 50 epochs
    assert sys.argv == argv
    assert w.model.name == "arrays_net" and not w.model.optimizer.iterations.numpy()
    assert type(w.compile.optimizer).__name__ == "SGD"
    assert w.compile.optimizer_config["momentum"] == pytest.approx(0.9)
    assert w.compile.steps_per_execution == 4 and w.compile.metrics == ["accuracy"]
    assert w.data_kind == "arrays" and w.x.shape == (200, 8) and w.y.shape == (200,)
    assert (w.batch_size, w.epochs, w.examples) == (24, 3, 150)
    assert [type(c).__name__ for c in w.callbacks] == ["CSVLogger"]
    assert w.origin.script == str(script) and w.origin.args == (
        "--batch-size",
        "24",
        "--epochs",
        "3",
    )
    assert w.origin.call == "train.py:21" and w.origin.fit == 1
    described = w.describe()
    assert described["compile"]["loss"] == "sparse_categorical_crossentropy"
    assert described["data"]["batch_source"] == "fit(batch_size=24)"
    # nothing the script writes at or after its fit was written
    assert list(tmp_path.iterdir()) == [script]


def test_a_main_guarded_tf_data_pipeline_and_keras_default_batch(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import keras
        import numpy as np
        import tensorflow as tf


        def scale(x, y):
            return tf.cast(x, tf.float32) / 255.0, y


        def main():
            x = np.random.randint(0, 255, size=(100, 6, 6, 1)).astype("uint8")
            y = np.random.randint(0, 2, size=100)
            ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(100).map(scale).batch(10)
            ds = ds.prefetch(tf.data.AUTOTUNE)
            inputs = keras.Input((6, 6, 1))
            h = keras.layers.Conv2D(2, 3)(inputs)
            outputs = keras.layers.Dense(2)(keras.layers.Flatten()(h))
            model = keras.Model(inputs, outputs)
            model.compile("adam", "sparse_categorical_crossentropy", jit_compile=False)
            model.fit(ds, epochs=2, validation_data=ds)


        if __name__ == "__main__":
            main()
        """,
    )
    w = capture(script)
    assert w.data_kind == "dataset" and w.y is None
    assert (w.batch_size, w.examples, w.epochs) == (10, 100, 2)
    assert w.validation_data is w.x
    assert w.compile.jit_compile is False and w.origin.call == "train.py:21"
    assert tuple(w.first_batch().shape) == (10, 6, 6, 1)


def test_a_subclassed_model_a_generator_and_the_default_batch_of_arrays(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import keras
        import numpy as np


        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.hidden = keras.layers.Dense(4)
                self.out = keras.layers.Dense(1)

            def call(self, x):
                return self.out(self.hidden(x))


        def batches():
            while True:
                yield np.ones((8, 5), "float32"), np.zeros((8, 1), "float32")


        model = Net()
        model.compile(optimizer="rmsprop", loss="mse")
        model.fit(np.ones((40, 5), "float32"), np.zeros((40, 1), "float32"))
        model.fit(batches(), steps_per_epoch=3)
        """,
    )
    first = capture(script)
    assert first.batch_size == 32 and "default" in first.batch_source
    assert not first.model.built
    second = capture(script, fit=2)
    assert second.data_kind == "generator" and second.model.built
    assert (second.batch_size, second.examples) == (8, 24)
    x, _ = next(second.x)  # the batch read to learn the shape is yielded again
    assert x.shape == (8, 5)


def test_a_functional_model_with_dict_inputs(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import keras
        import numpy as np

        a = keras.Input((3,), name="a")
        b = keras.Input((2,), name="b")
        out = keras.layers.Dense(1)(keras.layers.Concatenate()([a, b]))
        model = keras.Model({"a": a, "b": b}, out)
        model.compile(optimizer="adam", loss="mse")
        data = {"a": np.ones((20, 3), "float32"), "b": np.ones((20, 2), "float32")}
        model.fit(data, np.zeros((20, 1), "float32"), batch_size=5)
        """,
    )
    w = capture(script)
    assert w.data_kind == "dict" and (w.batch_size, w.examples) == (5, 20)
    assert {k: v.shape for k, v in w.first_batch().items()} == {"a": (5, 3), "b": (5, 2)}


def test_fine_tuning_the_second_fit_after_a_first_one(tmp_path: Path) -> None:
    out = tmp_path / "history.txt"
    script = _script(
        tmp_path,
        f"""
        import keras
        import numpy as np

        x, y = np.ones((64, 4), "float32"), np.zeros((64,), "int32")
        base = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="base")])
        model = keras.Sequential([base, keras.layers.Dense(2, name="head")])
        base.trainable = False
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        history = model.fit(x, y, epochs=100, validation_split=0.5)
        print(history.history["loss"], history.history["val_loss"])
        base.trainable = True
        model.compile(optimizer=keras.optimizers.Adam(1e-5), loss="sparse_categorical_crossentropy")
        model.fit(x, y, epochs=100, batch_size=8)
        with open({str(out)!r}, "w") as f:
            f.write("done")
        """,
    )
    start = time.perf_counter()
    first = capture(script)
    assert len(first.model.trainable_weights) == 2
    w = capture(script, fit=2)
    assert time.perf_counter() - start < 20  # the first fit ran one step, not 100 epochs
    assert len(w.model.trainable_weights) == 4
    assert w.compile.optimizer_config["learning_rate"] == pytest.approx(1e-5)
    assert (w.origin.fit, w.batch_size, w.origin.call) == (2, 8, "train.py:14")
    assert not out.exists()
    with pytest.raises(CaptureError, match=r"ended without a model\.fit call #3") as info:
        capture(script, fit=3)
    assert info.value.reason == "no-fit" and "--fit 2" in str(info.value)
    assert out.exists()  # a script run to its end does what it does


def test_a_gradient_tape_loop_is_told_the_line_to_add_and_mark_captures_it(
    tmp_path: Path,
) -> None:
    loop = """
        import keras
        import numpy as np
        import tensorflow as tf
        {import_line}

        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        optimizer = keras.optimizers.Adam(1e-3)
        loss_fn = keras.losses.MeanSquaredError()
        ds = tf.data.Dataset.from_tensor_slices((np.ones((12, 4), "float32"),
                                                 np.ones((12, 2), "float32"))).batch(4)
        {mark_line}
        for x, y in ds:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        """
    plain = _script(tmp_path, loop.format(import_line="", mark_line=""), "loop.py")
    with pytest.raises(CaptureError) as info:
        capture(plain)
    # stopped at its first optimizer step, not run to its end (or to the time limit)
    assert (info.value.reason, info.value.where) == ("own-loop", "loop.py:17")
    assert "trains with its own loop: an optimizer step at loop.py:17" in str(info.value)
    assert "tfaccel.workload.mark(model, dataset, optimizer=optimizer, loss=loss_fn)" in str(
        info.value
    )
    marked = _script(
        tmp_path,
        loop.format(
            import_line="import tfaccel.workload",
            mark_line="tfaccel.workload.mark(model, ds, optimizer=optimizer, loss=loss_fn)",
        ),
        "marked.py",
    )
    w = capture(marked)
    assert w.origin.fit == 0 and w.origin.call == "marked.py:12"
    assert w.compile.optimizer is not None and w.compile.loss is not None
    assert (w.data_kind, w.batch_size, w.examples) == ("dataset", 4, 12)
    assert workload.mark(w.model, w.x) is None  # outside a capture: nothing happens


def test_a_long_custom_loop_in_a_tf_function_stops_at_its_first_step(tmp_path: Path) -> None:
    # the keras.io guide's shape: a tf.function train step, epochs over a dataset, a line
    # printed per step; unmarked, the capture stops where the step is traced, before any update
    steps = tmp_path / "steps.txt"
    script = _script(
        tmp_path,
        f"""
        import keras
        import numpy as np
        import tensorflow as tf

        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
        optimizer = keras.optimizers.SGD(learning_rate=1e-3)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        train = tf.data.Dataset.from_tensor_slices(
            (np.ones((256, 8), "float32"), np.zeros((256,), "int32"))
        ).batch(8)

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_weights)
            optimizer.apply(grads, model.trainable_weights)
            return loss

        for epoch in range(10_000):
            for x, y in train:
                loss = train_step(x, y)
                with open({str(steps)!r}, "a") as f:
                    f.write(f"{{float(loss)}}\\n")
        """,
    )
    started = time.perf_counter()
    with pytest.raises(CaptureError) as info:
        capture(script, timeout=120)
    assert time.perf_counter() - started < 60
    # the loop's line that calls the step (the step itself runs as AutoGraph's copy of it)
    assert (info.value.reason, info.value.where) == ("own-loop", "train.py:23")
    assert not steps.exists()  # no step ran


def test_a_train_on_batch_loop_is_captured_at_its_first_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The older Keras GAN examples' shape: compiled models, a loop over batches, each batch
    # handed to train_on_batch; nothing after the first call runs.
    script = _script(
        tmp_path,
        """
        import numpy as np
        import keras

        discriminator = keras.Sequential(
            [keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
             keras.layers.Dense(1, activation="sigmoid")], name="discriminator")
        discriminator.compile(optimizer=keras.optimizers.Adam(2e-4), loss="binary_crossentropy")
        real = np.random.rand(96, 6).astype("float32")
        batch_size = 24
        for epoch in range(5):
            for i in range(0, len(real), batch_size):
                x = real[i:i + batch_size]
                loss = discriminator.train_on_batch(x, np.ones((len(x), 1), "float32"))
            print("epoch", epoch, "loss", loss)
        open("trained.txt", "w").write("done")
        """,
        "gan_loop.py",
    )
    monkeypatch.chdir(tmp_path)  # where the script writes, when it runs to its end
    w = capture(script)
    assert w.model.name == "discriminator" and not w.model.optimizer.iterations.numpy()
    assert w.origin.method == "train_on_batch" and w.origin.call == "gan_loop.py:14"
    assert (w.data_kind, w.batch_size, w.examples) == ("arrays", 24, None)  # epoch: the loop's
    assert w.y.shape == (24, 1) and type(w.compile.optimizer).__name__ == "Adam"
    assert w.describe()["data"]["batch_source"] == "the first batch given to train_on_batch"
    assert list(tmp_path.iterdir()) == [script]  # nothing after the first call ran
    # asked for a later fit, train_on_batch runs as it is and the script ends without one
    with pytest.raises(CaptureError) as info:
        capture(script, fit=2)
    assert info.value.reason == "no-fit"
    assert (tmp_path / "trained.txt").read_text() == "done"  # it ran to its end


@pytest.mark.parametrize(
    ("body", "reason", "what", "line"),
    [
        (
            "import keras\nconfig = {}\nrate = config['learning_rate']\n",
            "raised",
            "raised KeyError before model.fit, at train.py:3",
            "train.py:3",
        ),
        (
            "import sys\nif len(sys.argv) < 2:\n    sys.exit('usage: train.py DATA_DIR')\n",
            "exited",
            "exited (sys.exit('usage: train.py DATA_DIR')) before model.fit, at train.py:3",
            "train.py:3",
        ),
        (  # not an Exception: a library's own stop signal, still the script's error
            "class Stop(BaseException):\n    pass\nraise Stop('halt')\n",
            "raised",
            "raised Stop before model.fit, at train.py:3",
            "train.py:3",
        ),
        (
            "import keras\nname = input('dataset? ')\n",
            "stdin",
            "reads standard input before its model.fit, at train.py:2",
            "train.py:2",
        ),
        (
            "import sys\n\nconfig = sys.stdin.buffer.read()\n",
            "stdin",
            "reads standard input before its model.fit, at train.py:3",
            "train.py:3",
        ),
        (
            "import time\nwhile True:\n    time.sleep(0.05)\n",
            "timeout",
            "did not reach model.fit within 0.5 s",
            "train.py:3",
        ),
    ],
)
def test_a_script_that_does_not_reach_fit_is_told_why_with_its_line(
    tmp_path: Path, body: str, reason: str, what: str, line: str
) -> None:
    script = _script(tmp_path, body)
    stdin = sys.stdin
    with pytest.raises(CaptureError) as info:
        capture(script, timeout=0.5)
    assert info.value.reason == reason and info.value.where == line
    assert what in info.value.what
    assert sys.stdin is stdin


def test_bad_requests_are_refused_before_the_script_runs(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        capture(tmp_path / "missing.py")
    with pytest.raises(UsageError, match="at least 1"):
        capture(_script(tmp_path, "raise SystemExit(3)\n"), fit=0)


def test_an_argparse_script_given_a_tfaccel_option_after_its_name_is_told_where_it_goes(
    tmp_path: Path,
) -> None:
    """``tfaccel plan train.py --batch 64``: the script's argparse refuses --batch (exit 2);
    the fix says tfaccel's options go before the script's name, not "pass the arguments it
    needs"."""
    script = _script(
        tmp_path,
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--epochs', type=int)\nparser.parse_args()\n",
    )
    with pytest.raises(CaptureError) as info:
        capture(script, ["--batch", "64"], timeout=30)
    assert info.value.reason == "exited" and "sys.exit(2)" in info.value.what
    assert "is an option of tfaccel plan, put it before the script's name" in info.value.fix
    with pytest.raises(CaptureError) as plain:
        capture(script, ["data"], timeout=30)  # not an option: the script's own argument
    assert "pass the script the arguments it needs" in plain.value.fix


def test_a_script_that_swallows_the_time_limit_is_stopped_with_the_process(
    tmp_path: Path,
) -> None:
    """A loop whose bare ``except:`` catches the limit's exception (raised again every
    second) runs on; past the grace the process stops with the reason on stderr, exit 2."""
    script = _script(
        tmp_path,
        "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except:\n        pass\n",
    )
    code = (
        "import sys\n"
        "import tfaccel.workload.capture\n"
        "c = sys.modules['tfaccel.workload.capture']\n"
        "c.STOP_GRACE_S = 1.0\n"
        f"c.capture({str(script)!r}, timeout=0.5)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "did not reach model.fit within 0.5 s, and kept running 1 s after" in done.stderr
    assert "Traceback" not in done.stderr


SWALLOWS = (
    "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except:\n        pass\n"
)
SHORT_GRACE = (  # the module, not the function the package exports under its name
    "import sys, tfaccel.workload.capture\nsys.modules['tfaccel.workload.capture'].STOP_GRACE_S = 1.0\n"
)


def test_a_hard_stop_under_json_still_prints_one_document(tmp_path: Path) -> None:
    """The process ends at once (the script catches every exception), yet stdout holds the
    one JSON document of what stopped it, and stderr says it once."""
    script = _script(tmp_path, SWALLOWS)
    argv = ["plan", "--json", "--timeout", "0.5", str(script)]
    code = SHORT_GRACE + f"from tfaccel.cli import main\nmain({argv!r})\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["exit_code"] == 2 and doc["interrupted"] is False
    assert doc["error"]["type"] == "CaptureError"
    assert "kept running 1 s after it was told to stop" in doc["error"]["what"]
    assert "except Exception:" in doc["error"]["fix"]
    assert done.stderr.count("tfaccel: error:") == 1 and "Traceback" not in done.stderr


def test_a_hard_stop_in_an_isolated_capture_is_the_parents_error(tmp_path: Path) -> None:
    """The child writes the error where the parent reads its result, and leaves saying it to
    the parent (one line in all)."""
    script = _script(tmp_path, SWALLOWS)
    request, result = tmp_path / "request.json", tmp_path / "result.json"
    request.write_text(
        json.dumps(
            {"script": str(script), "args": [], "fit": 1, "timeout": 0.5, "command": "plan",
             "task": "tfaccel.workload.isolated:_task", "options": {}}
        )
    )  # fmt: skip
    code = SHORT_GRACE + (
        f"from tfaccel.workload import isolated\nisolated._main({str(request)!r}, {str(result)!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "tfaccel: error:" not in done.stderr
    error = json.loads(result.read_text())["error"]
    rebuilt = isolated._rebuilt(error)
    assert isinstance(rebuilt, CaptureError) and rebuilt.reason == "timeout"
    assert "kept running 1 s after it was told to stop" in str(rebuilt)
