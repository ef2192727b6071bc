"""The plan answers an out-of-memory error: the advice on a traced step, what a real OOM log
says about the device and the batch, and ``tfaccel doctor --log FILE --model``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_plan import _step

from tfaccel.cli import main
from tfaccel.core.errors import UsageError
from tfaccel.diagnosis import match_log
from tfaccel.diagnosis.log.memory import oom_context
from tfaccel.planning import GPU_BFC_RULES, simulate
from tfaccel.planning.advice import advice_for_step, find_log_oom, oom_finding

CORPUS = Path(__file__).resolve().parents[1] / "data" / "doctor-corpus"
BFC_LOG = CORPUS / "a_oom_yolo3_bfc.log"  # "Limit: 3059430195", shape[255,256,256,69]
SHAPE_ONLY_LOG = CORPUS / "b_segan42_oom_oneline.log"  # shape[100,4096,32], no limit
NO_OOM_LOG = CORPUS / "a_cc30_quadro_k2000m.log"  # no out-of-memory error


def test_the_advice_is_the_largest_batch_that_fits_and_an_accumulation_that_divides() -> None:
    step = _step()
    usable = simulate(step, 100, rules=GPU_BFC_RULES).total_bytes
    advice = advice_for_step(step, 1000, usable, device="a small GPU", model_name="net")
    assert not advice.fits and advice.needed_bytes > usable
    assert simulate(step, advice.max_batch, rules=GPU_BFC_RULES).total_bytes <= usable
    assert simulate(step, advice.max_batch + 1, rules=GPU_BFC_RULES).total_bytes > usable
    k, micro = advice.accumulation_steps, advice.micro_batch
    assert k is not None and micro is not None and k * micro == 1000 and micro <= advice.max_batch
    assert not any(1000 % j == 0 and 1000 // j <= advice.max_batch for j in range(2, k))
    finding = oom_finding(advice, evidence=["line 3: OOM"], source="log")
    assert finding.id == "oom" and finding.status == "fail"
    assert f"batch <= {advice.max_batch}" in finding.title
    assert f"gradient_accumulation_steps={k}" in (finding.fix or "")
    assert finding.evidence[0] == "line 3: OOM" and "needs" in finding.evidence[-1]
    assert finding.numbers["max_batch"] == advice.max_batch


def test_a_batch_that_fits_is_said_to_fit() -> None:
    step = _step()
    usable = simulate(step, 100, rules=GPU_BFC_RULES).total_bytes
    advice = advice_for_step(step, 10, usable)
    assert advice.fits and advice.accumulation_steps is None
    assert advice.sentence().endswith(f"it fits (up to batch {advice.max_batch})")


def test_what_real_oom_logs_say_about_the_device_and_the_batch() -> None:
    bfc = oom_context(BFC_LOG.read_text(encoding="utf-8"))
    assert bfc.usable_bytes == 3059430195 and "3059430195" in (bfc.usable_from or "")
    assert bfc.shape == (255, 256, 256, 69) and bfc.batch_guess == 255
    shape_only = oom_context(SHAPE_ONLY_LOG.read_text(encoding="utf-8"))
    assert shape_only.usable_bytes is None and shape_only.batch_guess == 100
    created = oom_context(
        "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1886] Created device "
        "/job:localhost/replica:0/task:0/device:GPU:0 with 9858 MB memory:  -> device: 0"
    )
    assert created.usable_bytes == 9858 * 2**20 and created.shape is None


def test_the_library_finds_the_batch_and_the_device_memory_of_an_oom_log() -> None:
    text = BFC_LOG.read_text(encoding="utf-8")
    report = match_log(text)
    oom = find_log_oom(report, text, model="mlp")
    assert oom is not None and report.causes[oom.index].id == "oom"
    assert (oom.batch, oom.usable_bytes) == (255, 3059430195)
    assert "the first dimension of the tensor that did not fit" in oom.evidence[-1]
    given = find_log_oom(report, text, model="mlp", batch=32)
    assert given is not None and given.batch == 32
    assert given.evidence == report.causes[oom.index].evidence  # a batch given is not guessed
    shape_only = SHAPE_ONLY_LOG.read_text(encoding="utf-8")
    with pytest.raises(UsageError, match="how much memory the device had"):
        find_log_oom(match_log(shape_only), shape_only, model="mlp")
    clean = match_log("nothing ran out of memory here")
    assert find_log_oom(clean, "nothing ran out of memory here", model="mlp") is None
    assert clean.notes[-1].startswith("--model mlp: the log shows no out-of-memory error")


def test_doctor_answers_the_oom_of_a_log_with_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["doctor", "--log", str(BFC_LOG), "--model", "resnet20", "--batch", "8192", "--json"]
    )
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    oom = next(c for c in doc["log"]["causes"] if c["id"] == "oom")
    numbers = oom["numbers"]
    assert numbers["usable_bytes"] == 3059430195 and numbers["batch_size"] == 8192
    assert numbers["needed_bytes"] > numbers["usable_bytes"]
    assert 0 < numbers["max_batch"] < 8192
    k = numbers["gradient_accumulation_steps"]
    assert k is not None and numbers["micro_batch"] * k == 8192
    assert oom["title"].startswith("Out of memory at batch 8192: batch <= ")
    assert any(line.startswith("line 10:") for line in oom["evidence"])  # the log's own line
    assert numbers["line_numbers"] == [10]  # the matcher's numbers are kept


def test_doctor_with_a_batch_that_fits_keeps_the_logs_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor", "--log", str(BFC_LOG), "--model", "mlp", "--json"]) == 1
    oom = next(c for c in json.loads(capsys.readouterr().out)["log"]["causes"] if c["id"] == "oom")
    assert oom["numbers"]["batch_size"] == 255  # read from the failing tensor's shape
    assert oom["title"] == "The GPU ran out of memory" and "halve the batch" in oom["fix"]
    assert any("the plan predicts this batch fits" in line for line in oom["evidence"])


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--model", "mlp"], "or run tfaccel plan --model mlp --batch N for the plan alone"),
        (["--model", "train.py --epochs 3"], "run tfaccel plan --batch N train.py --epochs 3 for"),
        (["--log", str(BFC_LOG), "--batch", "8"], "no --model was given"),
        (["--log", str(BFC_LOG), "--model", "mlp", "--device", "rtx-9999"], "Unknown device"),
        (["--log", str(SHAPE_ONLY_LOG), "--model", "mlp"], "does not say how much memory"),
        (["--log", str(BFC_LOG), "--model", "resnet99"], "resnet99"),
        (["--log", str(NO_OOM_LOG), "--model", "resnet99"], "Unknown model 'resnet99'"),
        (["--log", str(NO_OOM_LOG), "--model", ""], "Unknown model ''"),
    ],
)
def test_doctor_plan_flags_that_cannot_work_are_clear_errors(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", *argv]) == 2
    captured = capsys.readouterr()
    assert fragment in captured.err and "Traceback" not in captured.err
    assert captured.out == ""


def test_doctor_refuses_a_batch_of_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--log", str(BFC_LOG), "--model", "mlp", "--batch", "0"]) == 2
    assert "--batch" in capsys.readouterr().err


def test_profile_answers_an_out_of_memory_run_with_the_plan(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``profile --model`` that raises ResourceExhaustedError prints the plan for this device
    (a real TensorFlow error and a real traced model; the out-of-memory itself cannot be
    provoked safely on this CPU)."""
    import argparse

    import tensorflow as tf

    from tfaccel import inventory
    from tfaccel.cli.profile import _out_of_memory
    from tfaccel.planning.targets import training_device

    exc = tf.errors.ResourceExhaustedError(
        None, None, "OOM when allocating tensor with shape[4096,32,32,32] and type float"
    )
    args = argparse.Namespace(
        model="mlp", batch_size=4096, precision="float32", tiny=True, json=True
    )
    assert _out_of_memory(args, exc) == 1
    doc = json.loads(capsys.readouterr().out)
    (finding,) = doc["findings"]
    assert finding["id"] == "oom" and finding["status"] == "fail"
    assert finding["evidence"][0].startswith("ResourceExhaustedError: OOM when allocating")
    numbers = finding["numbers"]
    assert numbers["batch_size"] == 4096
    here = training_device(inventory.current())  # available RAM moves a little between reads
    assert here.kind == "cpu" and here.usable_bytes is not None
    assert abs(numbers["usable_bytes"] - here.usable_bytes) < 0.05 * here.usable_bytes
    assert "GiB of RAM available" in finding["evidence"][-1]
    assert numbers["needed_bytes"] > 0 and numbers["max_batch"] > 0


# --- doctor --model SCRIPT: a training script as written ----------------------------------------

UNCHANGED_SCRIPT = """\
import argparse
import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=64)
args = parser.parse_args()
x = np.zeros((64, 64, 64, 3), "float32")
y = np.zeros(64, "int64")
model = keras.Sequential([
    keras.Input((64, 64, 3)),
    keras.layers.Conv2D(64, 3, activation="relu"),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(10, activation="softmax"),
], name="wide_conv")
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
model.fit(x, y, batch_size=args.batch, epochs=3)
model.save("trained.keras")
"""


def test_doctor_answers_the_oom_of_an_unchanged_training_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script runs up to its fit, as tfaccel plan runs it (nothing trains, nothing after
    fit runs); its own batch, from its own arguments, is the batch planned."""
    script = tmp_path / "train.py"
    script.write_text(UNCHANGED_SCRIPT)
    monkeypatch.chdir(tmp_path)
    argv = ["doctor", "--log", str(BFC_LOG), "--model", f"{script} --batch 4096", "--json"]
    assert main(argv) == 1
    doc = json.loads(capsys.readouterr().out)
    oom = next(c for c in doc["log"]["causes"] if c["id"] == "oom")
    numbers = oom["numbers"]
    assert numbers["batch_size"] == 4096 and numbers["usable_bytes"] == 3059430195
    assert numbers["needed_bytes"] > numbers["usable_bytes"] and 0 < numbers["max_batch"] < 4096
    assert numbers["line_numbers"] == [10]
    assert oom["title"].startswith("Out of memory at batch 4096: batch <= ")
    evidence = "\n".join(oom["evidence"])
    assert "batch 4096: the script's own (fit(batch_size=4096))" in evidence
    assert "the workload of train.py:17 (model.fit #1), captured before it trained" in evidence
    assert "model 'wide_conv' at batch 4096 needs" in evidence
    assert "first dimension of the tensor" not in evidence  # the script's batch, not a guess
    assert not (tmp_path / "trained.keras").exists()  # stopped at fit


def test_doctor_plans_a_scripts_later_fit_at_the_batch_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        UNCHANGED_SCRIPT.replace("model.save", "model.fit(x, y, batch_size=8)\nmodel.save")
    )
    monkeypatch.chdir(tmp_path)
    argv = ["doctor", "--log", str(BFC_LOG), "--model", str(script), "--fit", "2"]
    assert main([*argv, "--batch", "32", "--timeout", "120", "--json"]) == 1
    oom = next(c for c in json.loads(capsys.readouterr().out)["log"]["causes"] if c["id"] == "oom")
    assert oom["numbers"]["batch_size"] == 32
    assert any("(model.fit #2)" in line for line in oom["evidence"])
    assert any("it fits" in line for line in oom["evidence"])
    assert not (tmp_path / "trained.keras").exists()


def test_doctor_without_model_or_without_an_oom_never_starts_tensorflow(tmp_path: Path) -> None:
    """Nothing runs the script, nor imports TensorFlow, unless the log shows an
    out-of-memory error to answer."""
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('the script ran')\n")
    clean = tmp_path / "clean.log"
    clean.write_text("Epoch 1/3\n100/100 - 3s - loss: 0.3\n")
    code = (
        "import sys\n"
        "from tfaccel.cli import main\n"
        f"assert main(['doctor', '--log', {str(BFC_LOG)!r}, '--json']) == 1\n"
        f"main(['doctor', '--log', {str(clean)!r}, '--model', {str(script)!r}, '--json'])\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "the script ran" not in done.stdout + done.stderr
    assert "the log shows no out-of-memory error, so no plan was made" in done.stdout


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--model", "{dir}/nope.py --batch 8"], "The script '{dir}/nope.py' does not exist"),
        (["--model", "{dir}/train.py 'unclosed"], "No closing quotation"),
        (["--model", "{dir}/hooks.py --batch 8"], "defines model_fn(), which takes no arguments"),
        (["--model", "mlp", "--timeout", "0"], "--timeout is not a number of seconds above 0"),
        (["--fit", "2"], "--fit sizes the plan of --model, and no --model was given"),
        (["--timeout", "30"], "--timeout sizes the plan of --model"),
    ],
)
def test_doctor_model_script_mistakes_are_refused_before_anything_runs(
    tmp_path: Path, extra: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text("raise SystemExit('the script ran')\n")
    (tmp_path / "hooks.py").write_text("def model_fn():\n    raise SystemExit('loaded')\n")
    argv = ["doctor", "--log", str(BFC_LOG), *(w.replace("{dir}", str(tmp_path)) for w in extra)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert fragment.replace("{dir}", str(tmp_path)) in captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert "the script ran" not in captured.err
