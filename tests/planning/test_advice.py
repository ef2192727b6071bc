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
        (["--model", "mlp"], "no --log was given"),
        (["--log", str(BFC_LOG), "--batch", "8"], "no --model was given"),
        (["--log", str(BFC_LOG), "--model", "mlp", "--device", "rtx-9999"], "Unknown device"),
        (["--log", str(SHAPE_ONLY_LOG), "--model", "mlp"], "does not say how much memory"),
        (["--log", str(BFC_LOG), "--model", "resnet99"], "resnet99"),
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
    with pytest.raises(SystemExit) as exited:
        main(["doctor", "--log", str(BFC_LOG), "--model", "mlp", "--batch", "0"])
    assert exited.value.code == 2
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
