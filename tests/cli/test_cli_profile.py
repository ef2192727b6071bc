"""``tfaccel profile``: --model runs, scripts calling fit or using StepTimer, and bad input
(a script that raises, one that never trains, a missing script, N = 0). In-process, with the
command added to the CLI's table for the test."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

from tfaccel.cli import main


def _script(tmp_path: Path, body: str, name: str = "train.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


FIT_SCRIPT = """
import sys, time
import keras
import numpy as np
from tfaccel import models

class Busy(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(float(sys.argv[1]))

model = models.build("reference_cnn", tiny=True)
model.compile(optimizer="rmsprop", loss="sparse_categorical_crossentropy")
x = np.random.rand(640, 32, 32, 3).astype("float32")
y = np.random.randint(0, 10, 640).astype("int32")
model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[Busy()])
print("trained")
sys.exit(int(sys.argv[2]))
"""


def _row(status: str, finding_id: str, title: str, out: str) -> bool:
    """A finding's first line from the terminal renderer: status, id, title."""
    return re.search(rf"^{status} +{finding_id} +{re.escape(title)}", out, re.MULTILINE) is not None


def test_model_json_has_figures_diagnosis_pipeline_and_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace"
    argv = ["profile", "--model", "reference-cnn", "--tiny", "--steps", "12", "--warmup", "2"]
    argv += ["--batch-size", "16", "--trace", str(trace), "--trace-steps", "3", "--json"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["command"] == "profile" and doc["target"]["model"] == "reference_cnn"
    figures = doc["measurement"]["figures"]
    assert figures["steps"] == 12 and figures["warmup_steps"] == 2
    assert figures["input_share"] is not None and figures["examples_per_s"] > 0
    assert doc["pipeline"]["source"] == "arrays"
    assert doc["diagnosis"]["refused"] is None
    ids = [f["id"] for f in doc["diagnosis"]["findings"]]
    assert ids[:2] == ["input_bound", "host_overhead"] and "memory_headroom" in ids
    traced = doc["measurement"]["trace"]
    assert traced["error"] is None and traced["steps"] == 3 and traced["top_ops"]
    assert list(trace.glob("plugins/profile/*/*.xplane.pb"))
    assert "tfaccel: step" in err  # the live line goes to stderr


def test_model_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["profile", "--model", "mlp", "--tiny", "--steps", "10", "--warmup", "1", "--quiet"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "10 steps measured (1 warm-up excluded), keras fit on CPU" in out
    assert "Diagnosis:" in out and "tfaccel: step" not in err


def test_too_few_model_steps_are_refused_in_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["profile", "--model", "mlp", "--tiny", "--steps", "3", "--warmup", "1", "--quiet"]
    assert main(argv) == 0
    assert "Diagnosis refused: only 3 step(s) measured" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "reference-cnn", "--steps", "0"], "argument --steps: the number is out of"),
        (["--model", "reference-cnn", "--warmup", "-1"], "argument --warmup: the number is out"),
        (["--model", "transformer"], "Unknown model"),
        (["--model", "mlp", "some_script.py"], "either --model or a SCRIPT"),
        ([], "No script to profile"),
        (["does/not/exist.py"], "does not exist"),
    ],
    ids=["zero-steps", "negative-warmup", "unknown-model", "both", "nothing", "missing-script"],
)
def test_bad_input_exits_2_with_the_fix(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_code(["profile", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Fix:" in err


def _exit_code(argv: list[str]) -> int | str | None:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse refuses a bad number while it parses, and exits 2
        return exc.code


def test_script_zero_steps_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script(tmp_path, "print('never runs')\n")
    assert _exit_code(["profile", "--steps", "0", script]) == 2
    captured = capsys.readouterr()
    assert "argument --steps: the number is out of range" in captured.err
    assert "never runs" not in captured.out


def test_script_fit_gets_the_callback_and_host_overhead_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, FIT_SCRIPT)
    # 50 ms of Python after each step: above the 15% a "fail" needs even when a loaded machine
    # makes the tiny step itself take 70-200 ms (6 ms was not: 8% beside a 70 ms step)
    assert main(["profile", "--quiet", "--warmup", "3", script, "0.05", "0"]) == 0
    out = capsys.readouterr().out
    assert "trained" in out
    assert "17 steps measured (3 warm-up excluded), keras fit on CPU" in out
    assert _row("fail", "host_overhead", "Host overhead: Python runs between the steps", out)
    assert "fix: Run several steps per Python call" in out and "gain: up to x" in out
    assert "waiting for input" in out and "not measured" not in out.split("Diagnosis")[0]


def test_script_json_and_exit_status_pass_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, FIT_SCRIPT)
    assert main(["profile", "--quiet", "--json", "--steps", "10", script, "0", "3"]) == 3
    captured = capsys.readouterr()
    doc = json.loads(captured.out)  # stdout holds the document alone
    assert "trained" in captured.err  # the script's own output is on stderr, not lost
    assert doc["exit_status"] == 3 and doc["fit_calls"] == 1
    (run,) = doc["runs"]
    assert run["label"] == "keras fit"
    assert run["measurement"]["figures"]["steps"] == 10  # --steps stopped fit early
    assert run["measurement"]["context"]["batch_size"] == 32


PYDATASET_SCRIPT = """
import keras
import numpy as np

class Batches(keras.utils.PyDataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        return np.zeros((16, 4), "float32"), np.zeros((16, 1), "float32")

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(Batches(), epochs=1, verbose=0)
"""


def test_script_fit_on_a_pydataset_reports_its_own_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only arrays are cut into fit's batch_size (Keras' 32 by default): a PyDataset's batch is
    the one its pipeline gives (the forms are read by tfaccel.workload.data)."""
    script = _script(tmp_path, PYDATASET_SCRIPT)
    assert main(["profile", "--quiet", "--json", "--warmup", "1", script]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["measurement"]["context"]["batch_size"] == 16


STEP_TIMER_SCRIPT = """
import sys, time
from tfaccel.profile import StepTimer

print("arguments", sys.argv[1:])
timer = StepTimer(batch_size=8)
for _ in range(20):
    with timer.input():
        time.sleep(0.004)
    with timer.step():
        time.sleep(0.004)
"""


def test_script_with_a_step_timer_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script(tmp_path, STEP_TIMER_SCRIPT)
    assert main(["profile", "--quiet", "--warmup", "2", script]) == 0
    out = capsys.readouterr().out
    assert "18 steps measured (2 warm-up excluded), custom loop on CPU" in out
    assert _row("fail", "input_bound", "Input-bound: the step waits for the input pipeline", out)
    fix = re.search(r"^ +fix: (.*)$", out, re.MULTILINE)
    assert fix is not None and "…" not in out  # the fix on one line, nothing cut


TRAIN_ON_BATCH_SCRIPT = """
import numpy as np
import keras

model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(1)], name="regressor")
model.compile(optimizer="adam", loss="mse")
x = np.random.rand(320, 10).astype("float32")
y = np.random.rand(320, 1).astype("float32")
for epoch in range(2):
    for i in range(0, 320, 32):
        loss = model.train_on_batch(x[i:i + 32], y[i:i + 32])
    print("epoch", epoch, "loss", loss)
"""


def test_a_train_on_batch_loop_is_timed_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, TRAIN_ON_BATCH_SCRIPT)
    assert main(["profile", "--quiet", "--warmup", "2", "--json", script]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert "epoch 1 loss" in captured.err  # the script ran to its end
    (run,) = doc["runs"]
    assert run["label"] == "train_on_batch loop (regressor)" and doc["fit_calls"] == 0
    figures = run["measurement"]["figures"]
    assert figures["steps"] == 18 and figures["warmup_steps"] == 2  # its 20 calls
    assert figures["examples_per_s"] > 0 and figures["step_s"]["median"] > 0
    assert "prepares each batch itself" in run["measurement"]["input_note"]
    import keras

    assert "train_on_batch" not in keras.Model.__dict__  # put back as it was


def test_a_profile_option_after_the_script_is_passed_on_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, STEP_TIMER_SCRIPT)
    assert main(["profile", "--quiet", "--warmup", "2", script, "--json", "--steps=5"]) == 0
    captured = capsys.readouterr()
    assert "arguments ['--json', '--steps=5']" in captured.out
    assert "custom loop on CPU" in captured.out  # a report, not JSON: --json went to the script
    assert captured.err.splitlines() == [
        f"tfaccel: warning: {option} after {script} was passed to the script as its own "
        f"argument; to give it to tfaccel profile, put it before the script: "
        f"tfaccel profile {option} ... {script}"
        for option in ("--json", "--steps")
    ]


def test_script_that_raises_shows_the_users_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(
        tmp_path,
        """
        def load_data():
            raise FileNotFoundError("data.npz is missing")

        load_data()
        """,
    )
    assert main(["profile", script]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert f'File "{script}", line 5, in <module>' in err and "in load_data" in err
    assert "FileNotFoundError: data.npz is missing" in err
    assert "runpy" not in err and "tfaccel/profile" not in err


def test_script_that_never_trains_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, "print('hello')\n")
    assert main(["profile", script]) == 2
    captured = capsys.readouterr()
    assert "hello" in captured.out
    assert "ran to its end without a training step" in captured.err
    assert "StepTimer" in captured.err


def test_fit_is_restored_after_the_script(tmp_path: Path) -> None:
    import keras

    before = keras.Model.fit
    script = _script(tmp_path, "import keras\nassert keras.Model.fit.__name__ == 'fit'\n")
    assert main(["profile", "--quiet", script]) == 2
    assert keras.Model.fit is before


def test_a_script_that_fits_several_models_is_profiled_one_run_per_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the overfitting tutorial does: models of three sizes, each fitted in turn. Each is
    its own run (its own warm-up, its own step times), named by the model, not one blend."""
    script = tmp_path / "sizes.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import keras

            x = np.random.rand(256, 8).astype("float32")
            y = np.random.rand(256, 1).astype("float32")
            for width in (4, 64, 512):
                model = keras.Sequential(
                    [keras.Input((8,)), keras.layers.Dense(width), keras.layers.Dense(1)],
                    name=f"width_{width}",
                )
                model.compile("adam", "mse")
                model.fit(x, y, batch_size=16, epochs=1, verbose=0)
            """
        )
    )
    assert main(["profile", "--quiet", "--json", "--warmup", "2", str(script)]) == 0
    doc = json.loads(capsys.readouterr().out)
    labels = [run["label"] for run in doc["runs"]]
    assert labels == [f"keras fit of width_{w}" for w in (4, 64, 512)]
    assert all(run["measurement"]["figures"]["steps"] == 14 for run in doc["runs"])
