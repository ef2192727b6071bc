"""``tfaccel run --tuned train.py ARGS``: the unchanged script runs with the winner ``tfaccel
tune`` stored for its model, found by the architecture of the model it builds.

The scripts write what their model really trained with (its dtype policy, XLA, steps per
execution, the steps of an epoch) to a JSON file, read back here. A winner is stored by a real
tune of a few seconds in a temporary database, and, for checks that must not depend on which
configuration wins on a loaded machine, written to the database as tune writes it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import clean_env
from tune_helpers import store_tune_result

pytest.importorskip("tensorflow")

SCRIPT = """
import argparse
import json

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--out", default="{out}/seen.json")
args = parser.parse_args()

rng = np.random.default_rng(0)
x = rng.random((256, 10)).astype("float32")
y = rng.integers(0, 4, size=256)
model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(4, activation="softmax")], name="tiny_mlp")
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
history = model.fit(x, y, batch_size=args.batch_size, epochs=1, verbose=0)
with open(args.out, "w") as f:
    json.dump({{"policy": model.dtype_policy.name, "jit": bool(model.jit_compile),
               "spe": int(model.steps_per_execution), "steps": history.params["steps"],
               "layer_policy": model.layers[0].dtype_policy.name}}, f)
"""

DATASET_SCRIPT = """
import json

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.random((256, 10)).astype("float32")
y = rng.integers(0, 4, size=256)
ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 2.0, b)).batch(16)
model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(4, activation="softmax")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
batches = []
count = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batches.append(b))
model.fit(ds, epochs=1, verbose=0, callbacks=[count])
with open("{out}/seen.json", "w") as f:
    json.dump({{"policy": model.dtype_policy.name, "steps": len(batches)}}, f)
"""

# what fit really trained on: the examples and their sum (the script's map doubles them)
COUNTING_SCRIPT = """
import json

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.random((250, 10)).astype("float32")
y = rng.integers(0, 4, size=250)
ds = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64, seed=1).batch(16)
      .map(lambda a, b: (a * 2.0, b)).prefetch(1))
examples = tf.Variable(0, dtype=tf.int64)
total = tf.Variable(0.0, dtype=tf.float64)


class Counting(keras.Sequential):
    def train_step(self, data):
        a, _ = data
        examples.assign_add(tf.cast(tf.shape(a)[0], tf.int64))
        total.assign_add(tf.reduce_sum(tf.cast(a, tf.float64)))
        return super().train_step(data)


model = Counting([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                  keras.layers.Dense(4, activation="softmax")], name="tiny_mlp")
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
batches = []
count = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batches.append(b))
history = model.fit(ds, epochs=1, verbose=0, callbacks=[count])
with open("{out}/seen.json", "w") as f:
    json.dump({{"steps": history.params["steps"], "batches": len(batches),
               "examples": int(examples.numpy()),
               "total": float(total.numpy()), "expected": float(2.0 * x.astype("float64").sum())}}, f)
"""

SUBCLASSED_SCRIPT = """
import json

import keras
import numpy as np


class Net(keras.Model):
    def __init__(self):
        super().__init__(name="subnet")
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(4)

    def call(self, x):
        return self.out(self.hidden(x))


rng = np.random.default_rng(0)
x = rng.random((256, 10)).astype("float32")
y = rng.integers(0, 4, size=256)
model = Net()
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=32, epochs=1, verbose=0)
with open("{out}/seen.json", "w") as f:
    json.dump({{"policy": model.dtype_policy.name,
               "compute": model.hidden.compute_dtype, "jit": bool(model.jit_compile)}}, f)
"""

STRATEGY_SCRIPT = """
import gc
import json

import keras
import numpy as np
import tensorflow as tf

# what an earlier run of this script in this process (run --tuned's first pass) left alive
left = [type(o).__name__ for o in gc.get_objects() if isinstance(o, tf.distribute.Strategy)
        and not type(o).__name__.startswith("_Default")]
strategy = tf.distribute.MirroredStrategy()
rng = np.random.default_rng(0)
ds = tf.data.Dataset.from_tensor_slices(
    (rng.random((64, 10)).astype("float32"), rng.integers(0, 4, size=64))).batch(16)
with strategy.scope():
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(4)], name="tiny_mirrored")
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
seen = {{"left": left, "fits": []}}


class Seen(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        seen["fits"].append({{
            "train_function": id(self.model.train_function), "jit": self.model.jit_compile,
            "spe": self.model.steps_per_execution,
            "strategy": self.model.distribute_strategy is strategy}})


for _ in range(2):  # one epoch a call, as scripts with their own epoch loop do
    model.fit(ds, epochs=1, verbose=0, callbacks=[Seen()])
with open("{out}/seen.json", "w") as f:
    json.dump(seen, f)
"""


@pytest.fixture(autouse=True)
def _float32_after() -> Iterator[None]:
    yield
    import keras

    keras.mixed_precision.set_global_policy("float32")


def _script(tmp_path: Path, text: str = SCRIPT) -> Path:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(text.format(out=tmp_path)))
    return script


def _seen(tmp_path: Path) -> dict[str, Any]:
    seen: dict[str, Any] = json.loads((tmp_path / "seen.json").read_text())
    return seen


def _run(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, dict[str, Any], str]:
    from tfaccel.cli import main

    status = main(["run", "--quiet", "--json", *words])
    out = capsys.readouterr()
    document: dict[str, Any] = json.loads(out.out) if out.out.strip() else {}
    return status, document, out.err


def _store_winner(script: Path, db: Path, *, recorded: bool = False, **config: Any) -> None:
    """Write a tune result for the model ``script`` builds, as ``tfaccel tune`` records it
    (``recorded``: with the script record of ``script`` run without arguments)."""
    from tfaccel.architecture import fingerprint
    from tfaccel.tuning.record import script_digest
    from tfaccel.tuning.script import settled_runtime
    from tfaccel.workload import capture
    from tfaccel.workload.record import build_like_fit

    with settled_runtime():
        workload = capture(script, [], command="test")
    build_like_fit(workload.model, workload.first_batch())  # as tune builds it
    digest = fingerprint(workload.model)
    record = {
        "path": str(script.resolve()), "sha256": script_digest(script), "args": [], "fit": 1,
        "model_fingerprint": digest, "model_name": "tiny_mlp", "precision": "float32",
        "batch_size": 16, "jit": False, "steps_per_execution": 1,
    }  # fmt: skip
    store_tune_result(db, digest, "tiny_mlp", script=record if recorded else None, **config)


def _no_first_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The script may not be run before the run: a first pass fails the test."""
    import tfaccel.tuning.tuned as tuned

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("run --tuned ran the script up to its fit before the run")

    monkeypatch.setattr(tuned, "capture", refused)


def test_the_stored_winner_takes_effect_in_the_scripts_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path)
    db = tmp_path / "results.sqlite"
    _store_winner(
        script,
        db,
        recorded=True,
        precision="mixed_bfloat16",
        jit=True,
        steps_per_execution=4,
        batch_size=64,
    )
    status, document, err = _run(capsys, "--tuned", "--db", str(db), str(script))
    assert status == 0, err
    # the script is recorded, but the precision must be set before it builds its model: the
    # first pass finds its model
    assert document["tuned"]["found_by"] == "first pass"
    seen = _seen(tmp_path)
    # the policy was set before the script built its layers: the model computes in bfloat16
    assert seen["policy"] == "mixed_bfloat16" and seen["layer_policy"] == "mixed_bfloat16"
    assert seen["jit"] is True
    assert seen["spe"] == 4
    # the batch is the script's (256 / 16 = 16 steps) without --tuned=all
    assert seen["steps"] == 16
    assert "batch size 16 (the tune's 64 changes the optimisation" in err
    # it says from which measurement, and what gain to expect
    assert "tune run 1 of 2026-11-26T01:00:00+00:00" in err
    assert "x1.80" in err and "+-5.0%" in err
    assert "expected gain: x1.80" in err
    tuned = document["tuned"]
    assert tuned["took_effect"] == [
        {"precision": "mixed_bfloat16", "jit": True, "steps_per_execution": 4,
         "batch_size": 16, "feed": "as given"}
    ]  # fmt: skip


def test_a_winner_whose_differences_cannot_be_applied_promises_no_gain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the winner differs from the script only in its batch, which --tuned keeps: the fit
    # trains as the script's own, and the gain the tune measured is not promised
    script = _script(tmp_path)
    db = tmp_path / "results.sqlite"
    _store_winner(
        script, db, recorded=True, precision="float32", jit=False, steps_per_execution=1,
        batch_size=64,
    )  # fmt: skip
    status, document, err = _run(capsys, "--tuned", "--db", str(db), str(script))
    assert status == 0, err
    assert "batch size 16 (the tune's 64 changes the optimisation" in err
    assert "expected gain: none: this fit trains as the script's own does" in err
    assert "the tune measured x1.80 with them" in err
    assert "expected gain: x1.80" not in err
    assert document["tuned"]["took_effect"] == [
        {"precision": "float32", "jit": False, "steps_per_execution": 1,
         "batch_size": 16, "feed": "as given"}
    ]  # fmt: skip


def test_tuned_all_changes_the_batch_and_says_how_to_scale_the_learning_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path)
    db = tmp_path / "results.sqlite"
    _store_winner(script, db, batch_size=64)
    status, document, err = _run(capsys, "--tuned=all", "--db", str(db), str(script))
    assert status == 0, err
    assert document["tuned"]["found_by"] == "first pass"  # stored without a script record
    assert _seen(tmp_path)["steps"] == 4  # 256 / 64
    assert "batch size 16 -> 64" in err and "scale your learning rate by 4" in err
    assert "linear scaling rule" in err and "warm-up" in err
    # precision and XLA stay float32 / off, as stored
    assert _seen(tmp_path)["policy"] == "float32"


def test_tuned_all_batches_a_scripts_dataset_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, DATASET_SCRIPT)
    db = tmp_path / "results.sqlite"
    _store_winner(script, db, batch_size=32, feed="as-given")
    status, _, err = _run(capsys, "--tuned=all", "--db", str(db), str(script))
    assert status == 0, err
    assert _seen(tmp_path)["steps"] == 8  # 256 / 32, its .map kept


def test_a_subclassed_model_is_built_under_the_tuned_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, SUBCLASSED_SCRIPT)
    db = tmp_path / "results.sqlite"
    _store_winner(script, db, precision="mixed_bfloat16", jit=False, batch_size=32)
    status, _, err = _run(capsys, "--tuned", "--db", str(db), str(script))
    assert status == 0, err
    seen = _seen(tmp_path)
    assert seen["policy"] == "mixed_bfloat16" and seen["compute"] == "bfloat16", err
    assert seen["jit"] is False


def test_no_stored_result_runs_the_script_as_written_and_says_how_to_get_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path)
    db = tmp_path / "empty.sqlite"
    # `--tuned train.py`: the script is not taken for --tuned's value
    status, document, err = _run(
        capsys, "--db", str(db), "--tuned", str(script), "--batch-size", "32"
    )
    assert status == 0, err
    assert f"to get a result: tfaccel tune --db {db} train.py --batch-size 32" in err
    seen = _seen(tmp_path)
    assert seen["policy"] == "float32" and seen["steps"] == 8  # its own batch, 256 / 32
    assert document["tuned"]["winner"] is None


def test_an_unreadable_default_database_is_said_and_the_script_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the default database (no --db) damaged on disk: run --tuned says so, not "no tune result
    # stored", and runs the script as written; the file is left for the user to look at
    script = _script(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    default = tmp_path / "data" / "tfaccel" / "results.sqlite"
    default.parent.mkdir(parents=True)
    default.write_bytes(b"not a database, " * 512)
    status, document, err = _run(capsys, "--tuned", str(script))
    assert status == 0, err
    assert "the results database cannot be read (" in err and "is corrupt" in err
    assert "no tune result stored" not in err
    assert _seen(tmp_path)["policy"] == "float32" and document["tuned"]["winner"] is None
    assert default.read_bytes() == b"not a database, " * 512


def test_a_script_that_stops_before_fit_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "results.sqlite"
    _store_winner(_script(tmp_path), db, precision="mixed_bfloat16")
    stops = tmp_path / "stops.py"
    stops.write_text("import sys\nprint('no data here')\nsys.exit(3)\n")
    status, document, err = _run(capsys, "--tuned", "--db", str(db), str(stops))
    assert status == 3  # the script's own exit status
    assert "could not be read before the run" in err and "Running stops.py as written" in err
    assert document["tuned"]["winner"] is None


def test_another_models_result_is_not_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    _store_winner(
        _script(other, DATASET_SCRIPT.replace("Dense(8", "Dense(16")),
        tmp_path / "results.sqlite",
        precision="mixed_bfloat16",
    )
    script = _script(tmp_path)
    status, _, err = _run(capsys, "--tuned", "--db", str(tmp_path / "results.sqlite"), str(script))
    assert status == 0, err
    assert "no tune result stored for the model 'tiny_mlp'" in err
    assert _seen(tmp_path)["policy"] == "float32"


def test_a_real_tune_then_run_tuned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfaccel.cli import main

    script = _script(tmp_path)
    db = tmp_path / "results.sqlite"
    status = main(
        [
            "tune", "--no-progress", "--json", "--sample-seconds", "0.1", "--rounds", "3",
            "--budget", "5", "--db", str(db),
            "--space", "batch_size=16,64", "--space", "precision=float32",
            "--space", "jit=off,on", "--space", "steps_per_execution=1,4",
            str(script),
        ]
    )  # fmt: skip
    tuned = json.loads(capsys.readouterr().out)
    assert status == 0
    best = tuned["best"]
    assert tuned["workload"]["source"]["args"] == [] and tuned["workload"]["source"]["fit"] == 1
    with monkeypatch.context() as patched:  # the script, unchanged: found by tune's record
        _no_first_pass(patched)
        status, document, err = _run(capsys, "--tuned", "--db", str(db), str(script))
    assert status == 0, err
    assert document["tuned"]["found_by"] == "record", err
    assert f"script record of tune run {tuned['run_id']}" in err
    seen = _seen(tmp_path)
    assert document["tuned"]["winner"]["run_id"] == tuned["run_id"]
    assert seen["jit"] is best["jit"]
    assert seen["spe"] == best["steps_per_execution"]
    assert seen["steps"] == 16  # the script's batch, whatever the tune's
    assert seen["policy"] == "float32"  # one precision searched: not stored, the script's

    # other arguments, then an edited script: not the recorded run, the first pass reads it
    status, document, err = _run(
        capsys, "--tuned", "--db", str(db), str(script), "--batch-size", "32"
    )
    assert status == 0, err
    assert document["tuned"]["found_by"] == "first pass"
    script.write_text(script.read_text() + "# edited after the tune\n")
    status, document, err = _run(capsys, "--tuned", "--db", str(db), str(script))
    assert status == 0, err
    assert document["tuned"]["found_by"] == "first pass"
    assert document["tuned"]["winner"]["run_id"] == tuned["run_id"]  # the same model
    assert _seen(tmp_path)["spe"] == best["steps_per_execution"]


def test_a_recorded_script_whose_model_changed_is_left_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record matches the script's content and arguments, but what it builds is read
    only at its fit: a model of another architecture there (the script reads a file that
    changed) gets nothing."""
    script = _script(tmp_path, SCRIPT.replace("Dense(8,", "Dense(int(open('{out}/width').read()),"))
    (tmp_path / "width").write_text("8")
    db = tmp_path / "results.sqlite"
    _store_winner(script, db, recorded=True, steps_per_execution=4)
    (tmp_path / "width").write_text("12")
    _no_first_pass(monkeypatch)
    status, document, err = _run(capsys, "--tuned", "--db", str(db), str(script))
    assert status == 0, err
    assert document["tuned"]["found_by"] == "record"
    assert "this fit's model is not the one tuned: left as the script has it" in err
    assert document["tuned"]["took_effect"] == []
    assert _seen(tmp_path)["spe"] == 1


def test_tuned_with_an_explicit_precision_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = _run(capsys, "--tuned", "--precision", "float32", str(_script(tmp_path)))
    assert status == 2
    assert "--tuned and --precision both set what the tune measured" in err
    assert not (tmp_path / "seen.json").exists()


def test_a_strategy_script_whose_own_configuration_won_runs_as_without_tuned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first pass leaves no strategy of its own behind, and the winner, being the
    script's own configuration, changes nothing on the model: its train function is the one
    Keras makes and keeps from one fit call to the next, as without --tuned."""
    script = _script(tmp_path, STRATEGY_SCRIPT)
    db = tmp_path / "results.sqlite"
    _store_winner(script, db, jit=False, steps_per_execution=1, feed="as-given")
    status, document, err = _run(capsys, "--tuned", "--db", str(db), str(script))
    assert status == 0, err
    assert document["tuned"]["found_by"] == "first pass"
    seen = _seen(tmp_path)
    assert seen["left"] == []  # the first pass's MirroredStrategy is gone
    first, second = seen["fits"]
    assert first["strategy"] and second["strategy"]  # the script's own strategy trains it
    assert first["jit"] is False and first["spe"] == 1
    # Keras built one train function and kept it: --tuned did not make it trace again
    assert first["train_function"] == second["train_function"]
    assert document["tuned"]["took_effect"][0]["steps_per_execution"] == 1


def test_the_pipeline_feed_wraps_a_scripts_own_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tune fed a script's dataset through tfaccel.data.pipeline (unbatched, batched
    again, its knobs): the run does the same at fit, with the script's own shuffle and map, the
    same elements and, without --tuned=all, the same batches (250 = 15 x 16 + 10: 16 steps)."""
    script = _script(tmp_path, COUNTING_SCRIPT)
    db = tmp_path / "results.sqlite"
    _store_winner(
        script, db, recorded=True, feed="pipeline", cache=False, prefetch=2,
        num_parallel_calls=2, batch_size=32,
    )  # fmt: skip
    _no_first_pass(monkeypatch)
    status, document, err = _run(capsys, "--tuned", "--db", str(db), str(script))
    assert status == 0, err
    assert "unbatched into tfaccel.data.pipeline, batches of 16 again" in err
    assert "cache=False, prefetch=2, num_parallel_calls=2" in err
    assert document["tuned"]["took_effect"][0]["feed"] == "pipeline"
    seen = _seen(tmp_path)
    # Keras knows the steps of an epoch before it (callbacks, schedules) as without --tuned
    assert seen["steps"] == seen["batches"] == 16 and seen["examples"] == 250
    assert seen["total"] == pytest.approx(seen["expected"], rel=1e-6)  # its map, every example
    # --tuned=all: the tune's batch of 32, through the same pipeline
    status, document, err = _run(capsys, "--tuned=all", "--db", str(db), str(script))
    assert status == 0, err
    assert "batch size 16 -> 32" in err and "batches of 32 again" in err
    seen = _seen(tmp_path)
    assert seen["batches"] == 8 and seen["examples"] == 250
    assert seen["total"] == pytest.approx(seen["expected"], rel=1e-6)


def test_a_dataset_whose_batches_could_change_is_fed_as_given() -> None:
    """Unbatched and batched again, a dataset gives the same batches only when they come from
    its .batch() through maps, prefetch and cache; shuffled batches (the smaller last one may
    come anywhere) or padded ones are left as the script gives them."""
    import numpy as np
    import tensorflow as tf

    from tfaccel.tuning.tuned import _dataset_batching

    ds = tf.data.Dataset.range(50)
    assert _dataset_batching(ds.batch(8).map(lambda a: a + 1).prefetch(2).cache()) == (8, False)
    assert _dataset_batching(ds.batch(8, drop_remainder=True, num_parallel_calls=2)) == (8, True)
    assert _dataset_batching(np.zeros((4, 2))) is None
    shuffled = _dataset_batching(ds.batch(8).shuffle(4))
    assert isinstance(shuffled, str) and "Shuffle stage" in shuffled
    padded = _dataset_batching(ds.padded_batch(8))
    assert isinstance(padded, str) and "batched again, they could differ" in padded


MODULES_SCRIPT = """
import json
import sys

import keras
import numpy as np

x = np.random.default_rng(0).random((64, 10)).astype("float32")
y = np.zeros(64, dtype="int64")
model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(4, activation="softmax")], name="tiny_mlp")
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
model.fit(x, y, batch_size=16, epochs=1, verbose=0)
with open("{out}/seen.jsonl", "a") as f:  # a line a run
    f.write(json.dumps({{"spe": int(model.steps_per_execution),
                        "modules": sorted(m for m in sys.modules if m.startswith("tfaccel"))}}))
    f.write("\\n")
"""

# `tfaccel run --tuned` as its command runs it, twice in one process (one TensorFlow import):
# the script as the tune recorded it, then edited
TWICE = """
import sys

from tfaccel.cli import main

script, db = sys.argv[1:3]
assert main(["run", "--quiet", "--tuned", "--db", db, script]) == 0
with open(script, "a") as f:
    f.write("# edited after the tune\\n")
assert main(["run", "--quiet", "--tuned", "--db", db, script]) == 0
"""


def test_run_tuned_imports_neither_the_search_nor_planning_nor_the_doctor(tmp_path: Path) -> None:
    """`tfaccel run --tuned` adds its start-up to every run of the script: the command, found
    by the tune's script record (unchanged script) or by the first pass (edited), imports
    what it applies with, not the tune's search (tuning.api), planning or the doctor."""
    script = _script(tmp_path, MODULES_SCRIPT)
    db = tmp_path / "results.sqlite"
    _store_winner(script, db, recorded=True, steps_per_execution=4)
    done = subprocess.run(
        [sys.executable, "-c", TWICE, str(script), str(db)],
        capture_output=True, text=True, timeout=300, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the first run found by the record, the second by its first pass: the winner both times
    assert done.stderr.count("found by the script record") == 1, done.stderr
    assert done.stderr.count("tuned configuration for 'tiny_mlp'") == 2, done.stderr
    lines = (tmp_path / "seen.jsonl").read_text().splitlines()
    runs = [json.loads(line) for line in lines]
    assert [run["spe"] for run in runs] == [4, 4]  # the winner applied
    heavy = ("tfaccel.planning", "tfaccel.diagnosis", "tfaccel.tuning.api", "tfaccel.report")
    for found_by, run in zip(("the record", "the first pass"), runs, strict=True):
        imported = [m for m in run["modules"] if m.startswith(heavy)]
        assert imported == [], f"found by {found_by}: {imported}"
