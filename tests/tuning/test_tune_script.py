"""``tfaccel tune train.py ARGS...`` on scripts as people write them: module-level code,
argparse, NumPy arrays or a ``tf.data`` pipeline with ``.map``, a subclassed model with its own
``train_step``, a checkpoint callback. The workload is captured at ``fit``; each precision's
model is the script's, built again; the script's own configuration is timed against the winner.

The tunes share this test process (the command line's ``main``), with tiny models, fixed
batch sizes and budgets of a few seconds; the decision between the script's own configuration
and a winner is tested on injected timings.
"""

from __future__ import annotations

import io
import json
import re
import textwrap
from pathlib import Path

import pytest
from tune_helpers import FakeClock, FakeRunner, is_fake_oom

from tfaccel.core.timing import summarize
from tfaccel.tuning.script import against_baseline
from tfaccel.tuning.search import Decision, SearchOutcome, SearchSettings, Trial
from tfaccel.tuning.space import OWN_FEED, Config

NUMPY_SCRIPT = """
import argparse

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--checkpoint", default="{out}/best.weights.h5")
args = parser.parse_args()

print("loading the data")  # under --json, on stderr
rng = np.random.default_rng(0)
x = rng.random((512, 10)).astype("float32")
y = rng.integers(0, 4, size=512)
model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(4, activation="softmax")], name="tiny_mlp")
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"], steps_per_execution=2)
checkpoint = keras.callbacks.ModelCheckpoint(args.checkpoint, save_weights_only=True)
model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, validation_split=0.1,
          callbacks=[checkpoint])
model.save("{out}/final.keras")
"""

SUBCLASSED_SCRIPT = """
import keras
import numpy as np
import tensorflow as tf

tf.config.threading.set_inter_op_parallelism_threads(2)  # refused once TensorFlow has started


class Net(keras.Model):
    def __init__(self):
        super().__init__(name="subnet")
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(4)

    def call(self, x):
        return self.out(self.hidden(x))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {{"loss": loss}}


def scale(x, y):
    return tf.cast(x, tf.float32) / 255.0, y


rng = np.random.default_rng(0)
x = rng.integers(0, 255, size=(512, 10)).astype("uint8")
y = rng.integers(0, 4, size=512)
ds = tf.data.Dataset.from_tensor_slices((x, y)).map(scale).shuffle(128).batch(32)
model = Net()
model.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(ds, epochs=3, callbacks=[keras.callbacks.CSVLogger("{out}/log.csv")])
"""

QUICK = ("--no-progress", "--no-save", "--json", "--sample-seconds", "0.1", "--rounds", "3")


def _script(tmp_path: Path, text: str) -> Path:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(text.format(out=tmp_path)))
    return script


def _tune(capsys: pytest.CaptureFixture[str], *words: str) -> dict:
    from tfaccel.cli import main

    status = main(["tune", *QUICK, *words])
    out = capsys.readouterr()
    assert status == 0, out.err[-3000:]
    document: dict = json.loads(out.out)  # one document: the script's prints went to stderr
    return document


def test_numpy_script_with_argparse_and_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("keras")
    script = _script(tmp_path, NUMPY_SCRIPT)
    result = _tune(
        capsys,
        "--budget", "6",
        "--space", "batch_size=24,96",
        "--space", "precision=float32",
        "--space", "jit=off",
        "--space", "steps_per_execution=1,2",
        str(script), "--batch-size", "24",
    )  # fmt: skip
    # the baseline is the script's own: its --batch-size, its precision, its compile
    assert result["baseline"]["batch_size"] == 24
    assert result["baseline"]["precision"] == "float32"
    assert result["baseline"]["steps_per_execution"] == 2
    assert result["baseline"]["feed"] == "numpy"
    verdict = result["baseline_verdict"]
    assert verdict["says"]
    if verdict["kept"]:
        assert result["best"] == result["baseline"]
        assert result["apply"].startswith("nothing to apply: ")
    else:  # the command that applies it to the script as it is, with the script's arguments
        tuned = "--tuned=all" if result["best"]["batch_size"] != 24 else "--tuned"
        assert result["apply"].startswith(f"tfaccel run {tuned} {script} --batch-size 24")
    assert any(t["note"].startswith("your own configuration") for t in result["trials"])
    # what the trials did not run is said, and did not happen
    assert "callback ModelCheckpoint" in result["not_run"]
    assert "validation (validation_split)" in result["not_run"]
    assert not (tmp_path / "best.weights.h5").exists()
    assert not (tmp_path / "final.keras").exists()
    # a Sequential model in its own precision is cloned, with the script's compile
    assert result["workload"]["models"]["float32"].startswith("cloned")
    assert result["workload"]["origin"]["args"] == ["--batch-size", "24"]
    assert result["model_name"] == "tiny_mlp"
    # within its budget, but for a trial under way when it ran out (a model is built and
    # traced whole): 9.1-9.9 s in full-suite runs on 2 cores, most of it the script's run to its
    # fit; the screen takes the whole budget until a second configuration is ready, so one more
    # may be prepared and timed where the estimate says it fits; a search that ignored its
    # budget would take its 5 configurations' time
    longest = max((t["prepare_s"] or 0.0) for t in result["trials"])
    assert result["elapsed_s"] <= 6 * 1.5 + 2 * longest + 1.0, (result["elapsed_s"], longest)


def test_subclassed_model_on_a_mapped_dataset_is_built_again_per_precision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorflow")
    script = _script(tmp_path, SUBCLASSED_SCRIPT)
    # the search ends when its four configurations are timed (about 8 s on a quiet machine):
    # the budget is there for a loaded one
    result = _tune(
        capsys,
        "--budget", "30",
        "--space", "batch_size=32,64",
        "--space", "precision=float32,mixed_bfloat16",
        "--space", "jit=off",
        "--space", "steps_per_execution=1",
        str(script),
    )  # fmt: skip
    models = result["workload"]["models"]
    assert set(models) == {"float32", "mixed_bfloat16"}, (models, result.get("notes"))
    assert all(how.startswith("the script captured again") for how in models.values())
    timed = {t["config"]["precision"] for t in result["trials"] if t["rung_samples"]}
    assert timed == {"float32", "mixed_bfloat16"}, result["trials"]
    assert not [t for t in result["trials"] if t["status"] in ("error", "not applied")]
    # its dataset, exactly as it builds it (its .map, its batches), is the baseline's feed
    assert result["baseline"]["feed"] == OWN_FEED
    assert result["baseline"]["batch_size"] == 32
    assert result["not_run"] == ["callback CSVLogger"]
    assert not (tmp_path / "log.csv").exists()


SIAMESE_SCRIPT = """
import keras
import numpy as np
from keras import layers, ops

keras.mixed_precision.set_global_policy("mixed_bfloat16")  # the script's own precision

rng = np.random.default_rng(0)
x_1 = rng.random((384, 12)).astype("float32")
x_2 = rng.random((384, 12)).astype("float32")
labels = rng.integers(0, 2, size=384).astype("float32")

encoder = keras.Sequential([keras.Input((12,)), layers.Dense(8, activation="relu")])
input_1, input_2 = keras.Input((12,)), keras.Input((12,))
distance = layers.Lambda(lambda pair: ops.abs(pair[0] - pair[1]))(
    [encoder(input_1), encoder(input_2)]
)
output = layers.Dense(1, activation="sigmoid", dtype="float32")(distance)
siamese = keras.Model(inputs=[input_1, input_2], outputs=output, name="siamese")
siamese.compile(loss="binary_crossentropy", optimizer="rmsprop", metrics=["accuracy"])
siamese.fit([x_1, x_2], labels, batch_size=32, epochs=10)
"""


def test_two_inputs_as_a_list_and_the_scripts_own_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # keras.io's Siamese network: fit([x_1, x_2], labels); the script sets its global policy
    # itself, so each model it builds again has it: the precision is its own, not searched
    pytest.importorskip("tensorflow")
    script = _script(tmp_path, SIAMESE_SCRIPT)
    result = _tune(
        capsys,
        "--budget", "30",
        "--space", "batch_size=32,64",
        "--space", "jit=off",
        "--space", "steps_per_execution=1",
        str(script),
    )  # fmt: skip
    assert result["workload"]["data"]["examples"] == 384  # rows of two inputs, not 2 rows
    assert result["baseline"]["precision"] == "mixed_bfloat16"
    timed = [t for t in result["trials"] if t["rung_samples"]]
    assert timed and {t["config"]["precision"] for t in timed} == {"mixed_bfloat16"}
    assert not [t for t in result["trials"] if t["status"] in ("error", "not applied")]
    assert any("the precision is not searched" in n for n in result["workload"]["notes"])
    import keras

    assert keras.mixed_precision.global_policy().name == "float32"  # the script's, not kept


def test_a_model_fn_script_keeps_its_options_after_the_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tfaccel.cli import main

    script = tmp_path / "hooks.py"
    script.write_text("def model_fn():\n    pass\n\ndata = None\n")
    status = main(["tune", str(script), "--smoke", "--no-progress"])
    assert status != 0
    assert "--smoke applies to --model only" in capsys.readouterr().err


# -- the script's own configuration against the winner, on injected timings -------------------


def _outcome(winner: Config, baseline: Config | None) -> SearchOutcome:
    trials = [Trial(winner, status="ok", rung_samples={0: [100.0, 101.0, 99.0]}, order=0)]
    if baseline is not None:
        trials.append(Trial(baseline, status="dropped", rung_samples={0: [50.0]}, order=1))
    return SearchOutcome(
        trials=trials,
        decision=Decision(winner, winner, "fastest"),
        final_rung=0,
        final_rounds=3,
        batch_search=None,
        interrupted=False,
        elapsed_s=1.0,
        notes=[],
    )


@pytest.mark.parametrize(
    ("winner_speed", "kept"),
    [(1000.0, True), (1010.0, True), (2000.0, False)],
    ids=["same-speed", "inside-the-noise", "twice-as-fast"],
)
def test_the_winner_replaces_yours_only_beyond_the_noise(winner_speed: float, kept: bool) -> None:
    yours = Config(32, feed="numpy")
    winner = Config(256, feed="numpy")
    speeds = {yours: 1000.0, winner: winner_speed}
    runner = FakeRunner(FakeClock(), lambda c: speeds[c])
    runner.prepare(winner)
    outcome = _outcome(winner, None)
    verdict = against_baseline(
        outcome, runner, yours, SearchSettings(budget_s=100, final_rounds=5), is_oom=is_fake_oom
    )
    assert verdict["kept"] is kept
    assert outcome.decision is not None
    assert outcome.decision.winner == (yours if kept else winner)
    assert outcome.decision.reason.startswith("keep yours") is kept
    mine = next(t for t in outcome.trials if t.config == yours)
    theirs = next(t for t in outcome.trials if t.config == winner)
    assert mine.rung_samples[1] and theirs.rung_samples[1]  # timed together, one rung more
    assert len(mine.rung_samples[1]) == 5
    assert summarize(theirs.rung_samples[1]).median == pytest.approx(winner_speed, rel=0.05)


def test_a_winner_that_is_yours_needs_no_second_timing() -> None:
    yours = Config(32, feed="numpy")
    runner = FakeRunner(FakeClock(), lambda c: 1000.0)
    outcome = _outcome(yours, None)
    verdict = against_baseline(
        outcome, runner, yours, SearchSettings(budget_s=100), is_oom=is_fake_oom
    )
    assert verdict["kept"] is True
    assert runner.total_samples == 0
    assert "keep yours" in outcome.decision.reason  # type: ignore[union-attr]


def test_a_generators_first_batches_become_the_arrays_every_trial_reads() -> None:
    keras = pytest.importorskip("keras")
    import numpy as np

    from tfaccel.tuning import TuneError
    from tfaccel.tuning.script import workload_hooks
    from tfaccel.workload import CompileArgs, Origin, Workload

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", "mse")

    def batches(labels: bool = True):  # type: ignore[no-untyped-def]
        step = 0
        while True:  # endless, as scripts that give fit steps_per_epoch write them
            x = np.full((8, 4), step, "float32")
            yield (x, np.zeros((8, 2), "float32")) if labels else x
            step += 1

    given = {"steps_per_epoch": 5, "epochs": 2}
    workload = Workload(model, CompileArgs.of(model), batches(), None, given, Origin("train.py"))
    found = workload_hooks(workload)
    x, y = found.hooks.data
    assert x.shape == (40, 4) and y.shape == (40, 2)  # steps_per_epoch batches, read once
    assert [float(x[i * 8, 0]) for i in range(5)] == [0.0, 1.0, 2.0, 3.0, 4.0]  # in order
    assert found.batch_size == 8 and found.feed == "numpy"
    assert any("generator, read once: its first 5 batch(es) (40 examples)" in n
               for n in found.described["notes"])  # fmt: skip
    no_labels = Workload(model, CompileArgs.of(model), batches(False), None, given,
                         Origin("train.py"))  # fmt: skip
    with pytest.raises(TuneError, match="generator gives batches without labels"):
        workload_hooks(no_labels)
    unreadable = Workload(model, CompileArgs.of(model), lambda: None, origin=Origin("train.py"))
    with pytest.raises(TuneError, match=r"which the trials cannot read again"):
        workload_hooks(unreadable)


def test_a_model_built_under_a_strategy_is_built_again_in_it_not_cloned() -> None:
    tf = pytest.importorskip("tensorflow")
    import keras
    import numpy as np

    from tfaccel.tuning.script import workload_hooks
    from tfaccel.workload import CompileArgs, Origin, Workload

    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    x, y = np.zeros((8, 4), "float32"), np.zeros(8)
    workload = Workload(model, CompileArgs(), x, y, origin=Origin("train.py"))
    found = workload_hooks(workload)
    # a clone would leave the strategy: each trial's model is the script's, captured again
    assert found.hooks.model_fn.clone_ok is False  # type: ignore[attr-defined]
    assert any("built under OneDeviceStrategy" in n for n in found.described["notes"])


def test_a_dataset_of_images_alone_for_an_own_train_step_gets_placeholder_labels() -> None:
    # a GAN as keras.io writes it: gan.fit(dataset) on batches of images, no labels, read by
    # its own train_step; the trials get (x, labels) pairs and the model is given x alone
    tf = pytest.importorskip("tensorflow")
    import keras
    import numpy as np

    from tfaccel.tuning.script import _drop_labels, workload_hooks
    from tfaccel.workload import CompileArgs, Origin, Workload

    seen: list = []

    class Critic(keras.Model):
        def train_step(self, data):  # type: ignore[no-untyped-def]
            seen.append(data)
            return {"loss": keras.ops.mean(self(data))}

    inputs = keras.Input((4,))
    model = Critic(inputs, keras.layers.Dense(1)(inputs))
    images = tf.data.Dataset.from_tensor_slices(np.ones((12, 4), "float32")).batch(4)
    workload = Workload(model, CompileArgs(), images, origin=Origin("gan.py"))
    found = workload_hooks(workload)
    x, y = next(iter(found.hooks.data))
    assert tuple(x.shape) == (4, 4) and tuple(y.shape) == (4,)
    assert any("placeholder labels" in n for n in found.described["notes"])
    assert found.hooks.model_fn.drop_labels is True  # type: ignore[attr-defined]
    _drop_labels(model)  # what each trial's model gets
    model.compile(optimizer="sgd")
    model.fit(found.hooks.data, epochs=1, verbose=0)
    assert seen and not isinstance(seen[-1], tuple)  # x alone, as the script's


def test_a_loss_its_layers_add_takes_dicts_alone_and_the_memory_search_plans_the_script() -> None:
    # keras.io's OCR model: the labels are an input, a layer adds the loss, compile(optimizer)
    # alone, and fit(dataset of dicts). The trials carry placeholder labels the model drops,
    # and the memory search plans the model as `tfaccel plan SCRIPT` does, on its first batch
    # (its label input has no fixed length: a plan of the model alone is refused)
    tf = pytest.importorskip("tensorflow")
    import keras
    import numpy as np

    from tfaccel import inventory
    from tfaccel.tuning.api import _planned_batch
    from tfaccel.tuning.script import workload_hooks
    from tfaccel.workload import CompileArgs, Origin, Workload

    class Penalty(keras.layers.Layer):
        def call(self, labels, scores):  # type: ignore[no-untyped-def]
            self.add_loss(keras.ops.mean(keras.ops.square(scores - labels[:, :1])))
            return scores

    image = keras.Input((6,), name="image")
    label = keras.Input((None,), name="label")
    model = keras.Model([image, label], Penalty()(label, keras.layers.Dense(1)(image)))
    optimizer = keras.optimizers.Adam()
    model.compile(optimizer=optimizer)
    elements = {"image": np.ones((12, 6), "float32"), "label": np.ones((12, 3), "float32")}
    data = tf.data.Dataset.from_tensor_slices(elements).batch(4)
    workload = Workload(model, CompileArgs(optimizer=optimizer), data, origin=Origin("ocr.py"))
    found = workload_hooks(workload)
    x, y = next(iter(found.hooks.data))
    assert set(x) == {"image", "label"} and tuple(y.shape) == (4,)
    assert found.hooks.model_fn.drop_labels is True  # type: ignore[attr-defined]
    planned, note = _planned_batch(found.hooks, "float32", inventory.current(), script=found)
    assert planned is not None and planned > 1000, note
    assert note.startswith("memory search: the plan predicts the largest batch that fits is"), note


def test_a_script_whose_model_does_not_take_its_data_gets_its_own_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model built for 10 features, fitted on 20 (the script would fail the same way): the
    error is the script's, with Keras's line that says why, the frames of the user's side
    only, no colour codes, and the command that shows it is the script's own."""
    from tfaccel.cli import main

    script = _script(
        tmp_path,
        """
        import numpy as np
        import keras

        x = np.random.rand(256, 20).astype("float32")
        y = np.random.randint(0, 3, 256)
        model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(3)])
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=32, epochs=1)
        """,
    )
    status = main(["tune", "--no-progress", "--no-save", str(script), "--epochs", "1"])
    err = capsys.readouterr().err
    assert status == 2, err[-2000:]
    assert re.search(r"failed: ValueError: Input 0 .* is incompatible with the layer", err)
    assert "Exception encountered when calling" not in err.split("Received:")[0]
    assert "as its fit at train.py:9 does" in err
    assert "Fix: run `python train.py --epochs 1`" in err
    assert "/tfaccel/" not in err and "traceback_utils" not in err and "\x1b" not in err
    assert "model_fn" not in err


def test_validation_split_rows_are_held_out_of_every_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fit(..., validation_split=0.5) on 97 rows trains on the first 48 (Keras rounds down):
    the batch search goes up to those, not to all 97 rows (a batch of 97 would hold the
    validation rows)."""
    script = _script(
        tmp_path,
        """
        import numpy as np
        import keras

        x = np.random.rand(97, 6).astype("float32")
        y = np.random.randint(0, 2, 97)
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(2)])
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=16, epochs=2, validation_split=0.5)
        """,
    )
    document = _tune(capsys, "--budget", "20", "--space", "precision=float32", str(script))
    tried = {t["config"]["batch_size"] for t in document["trials"]}
    assert tried and max(tried) <= 48 and 48 in tried, tried  # floor(97 x 0.5): Keras's 48


def test_a_bad_timeout_is_refused_before_tensorflow_starts(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    code = (
        "import sys\n"
        "from tfaccel.cli import main\n"
        f"rc = main(['tune', '--no-save', '--timeout', '-5', {str(script)!r}])\n"
        "assert 'tensorflow' not in sys.modules, 'TensorFlow started first'\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--timeout is not a number of seconds above 0 and at most a day" in done.stderr
    assert "never run" not in done.stdout


SIZED_SUBCLASS = """
import keras
import numpy as np


class Net(keras.Model):
    def __init__(self):
        super().__init__(name="net")
        self.hidden = keras.layers.Dense({hidden}, activation="relu")
        self.out = keras.layers.Dense(4)

    def call(self, x):
        return self.out(self.hidden(x))


model = Net()
model.compile(optimizer="adam", loss="mse")
model.fit(np.zeros((64, 10), "float32"), np.zeros((64, 4), "float32"), batch_size=16)
"""


def test_subclassed_models_of_the_same_layer_types_are_told_apart_once_built(
    tmp_path: Path,
) -> None:
    pytest.importorskip("keras")
    from tune_helpers import store_tune_result

    from tfaccel.architecture import fingerprint
    from tfaccel.tuning.script import capture_script
    from tfaccel.tuning.trials import build_model
    from tfaccel.tuning.tuned import prepare

    digests = []
    for hidden in (8, 16):
        script = tmp_path / f"net{hidden}.py"
        script.write_text(SIZED_SUBCLASS.format(hidden=hidden))
        found = capture_script(script)
        model = build_model(found.hooks.model_fn, "float32")  # a trial's model
        assert model.built
        digests.append(fingerprint(model))
    assert digests[0] != digests[1]  # unbuilt, both were two Dense layers and nothing more
    db = tmp_path / "results.sqlite"
    store_tune_result(db, digests[1], "net", steps_per_execution=2)
    found16 = prepare(str(tmp_path / "net16.py"), db=db, out=io.StringIO())
    assert found16.model_fingerprint == digests[1] and found16.winner is not None
    found8 = prepare(str(tmp_path / "net8.py"), db=db, out=io.StringIO())
    assert found8.model_fingerprint == digests[0] and found8.winner is None


def test_a_model_slow_to_prepare_is_tuned_inside_the_budget_with_yours_prepared_once() -> None:
    # DenseNet121-sized: preparing one configuration (building and tracing its step) takes
    # most of the budget. The script's own configuration is screened first and kept prepared,
    # so timing it against the winner costs no second preparation; what the budget could not
    # pay for is left untried and said.
    from tfaccel.tuning.search import search
    from tfaccel.tuning.space import parse_space

    clock = FakeClock()
    yours = Config(16, feed=OWN_FEED)
    runner = FakeRunner(clock, lambda c: 100.0, prepare_s=45.0)
    space = parse_space(
        {"batch_size": [16], "precision": ["float32"], "feed": ["pipeline"],
         "jit": [False, True], "steps_per_execution": [1, 8]}
    )  # fmt: skip
    total = 80.0
    settings = SearchSettings(budget_s=total - 10.0, reserved_s=10.0, final_rounds=3)
    outcome = search(
        space, runner, dataset_size=256, settings=settings, is_oom=is_fake_oom,
        clock=clock, first=yours,
    )  # fmt: skip
    assert runner.prepared[0] == yours
    assert all(config != yours for config, _ in runner.released)
    assert outcome.decision is not None
    verdict = against_baseline(
        outcome, runner, yours, SearchSettings(budget_s=total, final_rounds=3), is_oom=is_fake_oom
    )
    assert runner.prepared.count(yours) == 1
    assert verdict["kept"] is True
    assert clock.now <= total
    untried = [t for t in outcome.trials if t.status == "skipped"]
    assert untried and all("budget" in t.note for t in untried)
    assert any("budget" in note for note in outcome.notes)


def test_time_kept_for_your_configuration_is_sized_by_the_samples_measured() -> None:
    # A small model's samples end long before the 1 s a sample may last (one pass over its
    # data). The time kept to time yours against the winner (11 samples of 1 s) is sized by
    # the samples measured (11 of 0.1 s), and the rest goes to the search: more of the space
    # is screened, and the whole run still ends inside the budget.
    from tfaccel.tuning.search import search
    from tfaccel.tuning.space import parse_space

    clock = FakeClock()
    yours = Config(16, feed=OWN_FEED)
    runner = FakeRunner(clock, lambda c: 100.0 + c.batch_size, prepare_s=1.0, sample_s=0.1)
    space = parse_space(
        {"batch_size": [16, 32, 64, 128], "precision": ["float32"], "feed": ["pipeline"],
         "jit": [False, True], "steps_per_execution": [1, 8]}
    )  # fmt: skip
    total, rounds = 15.0, 5
    kept = (2 * rounds + 1) * 1.0  # as tune SCRIPT keeps it, in samples of sample_s = 1 s
    settings = SearchSettings(
        budget_s=total - kept, reserved_s=kept, final_rounds=rounds, sample_s=1.0
    )
    outcome = search(
        space, runner, dataset_size=4096, settings=settings, is_oom=is_fake_oom,
        clock=clock, first=yours,
    )  # fmt: skip
    screened = [t for t in outcome.trials if t.order >= 0]
    assert len(screened) >= 6, [t.config.label() for t in screened]  # 2 with 11 s kept
    assert outcome.decision is not None
    against_baseline(
        outcome, runner, yours, SearchSettings(budget_s=total, final_rounds=rounds),
        is_oom=is_fake_oom,
    )  # fmt: skip
    assert clock.now <= total


@pytest.mark.parametrize(
    ("best", "kept", "expected"),
    [
        (
            Config(32, steps_per_execution=8),
            False,
            "tfaccel run --tuned --fit 2 'my train.py' --lr 0.1",
        ),
        (
            Config(128),
            False,
            "tfaccel run --tuned=all --fit 2 'my train.py' --lr 0.1  # --tuned=all",
        ),
        (Config(32), True, "nothing to apply: 'my train.py' is fastest as it is"),
    ],
)
def test_a_scripts_result_says_the_command_that_applies_it(
    best: Config, kept: bool, expected: str
) -> None:
    from tfaccel.tuning.result import TuneResult
    from tfaccel.tuning.space import parse_space

    result = TuneResult(
        best, "", [], "m", "cpu", parse_space({}), 10.0, 9.0,
        baseline=Config(32),
        baseline_verdict={"kept": kept},
        workload={"origin": {"script": "my train.py", "args": ["--lr", "0.1"], "fit": 2}},
    )  # fmt: skip
    assert result.run_line().startswith(expected)  # type: ignore[union-attr]
    assert ("apply it to the script as it is:\n  " + expected) in str(result)
    if best.batch_size != 32:
        assert "(32 -> 128), which changes the optimisation" in str(result.run_line())


def test_a_scripts_model_that_fails_under_a_precision_says_so_as_the_scripts(
    tmp_path: Path,
) -> None:
    """keras.io's VAE: its Sampling layer adds a float32 random tensor to bfloat16 means, so
    built again under mixed_bfloat16 it raises. The error names the script, the precision
    and the way out, not "your model_fn"."""
    from tfaccel.tuning import ModelFnError
    from tfaccel.tuning.script import capture_script
    from tfaccel.tuning.trials import build_model

    script = _script(
        tmp_path,
        """
        import numpy as np
        import keras
        import tensorflow as tf


        class Sampling(keras.layers.Layer):
            def call(self, inputs):
                mean = inputs
                return mean + tf.random.normal(shape=tf.shape(mean), dtype=tf.float32)


        inputs = keras.Input((4,))
        model = keras.Model(inputs, Sampling()(keras.layers.Dense(2)(inputs)))
        model.compile("adam", "mse")
        model.fit(np.zeros((32, 4)), np.zeros((32, 2)), batch_size=8)
        """,
    )
    found = capture_script(script)
    with pytest.raises(ModelFnError) as failed:
        build_model(found.hooks.model_fn, "mixed_bfloat16")
    message = str(failed.value)
    assert message.startswith("Building the model of train.py again under mixed_bfloat16 raised")
    assert "Your model_fn" not in message and "--space precision=float32" in message
