"""``tfaccel plan`` and ``tfaccel profile`` on the training scripts of ``tests/data/scripts/``,
unchanged: the shapes people write (a CNN on arrays, ``image_dataset_from_directory`` with
augmentation in ``.map``, a bidirectional LSTM, a Conv1D with callbacks, ``FeatureSpace``, a
``GradientTape`` loop, a ``PyDataset`` with its own ``train_step``, a VAE and a GAN without
``call``, planned through their own ``train_step``, DenseNet121 behind a learned resizer,
``MirroredStrategy``).

Everything runs in this test process (the command line's ``main``), one script after the other;
the scripts' data are tiny and profile stops each fit after a few steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("keras")

from tfaccel.cli import main
from tfaccel.workload import capture

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def _plan(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    status = main(["plan", "--device", "this-cpu", "--json", *words])
    out = capsys.readouterr()
    return status, (json.loads(out.out) if status == 0 else {}), out.err


SHAPES = json.loads((SCRIPTS / "shapes.json").read_text())
# every shape but the loop without its mark line (below) and DenseNet121
PLANNED = [n for n in SHAPES if n not in ("about", "gradient_tape", "densenet_resizer")]
# models with their own train_step: planned through it, on the first batch as fit hands it
OWN_STEP = {
    "pydataset_train_step": "((32, 32) float32, (32, 1) float32)",  # (x, y) of a PyDataset
    "vae": "(128, 28, 28, 1) float32",  # fit(x) alone: x
    "gan": "(64, 28, 28, 1) float32",  # a dataset of images alone
}


@pytest.mark.parametrize("name", PLANNED)
def test_an_unchanged_script_is_planned_at_its_own_batch_and_writes_nothing(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = _where(name, tmp_path)
    before = _files(tmp_path)
    status, document, err = _plan(capsys, str(SCRIPTS / f"{name}.py"), *_small(name), *where)
    assert status == 0, err[-3000:]
    assert document["batch_size"] == SHAPES[name]["batch"]
    assert document["workload"]["origin"]["script"].endswith(f"{name}.py")
    assert document["devices"][0]["needed_bytes"] > 0
    if name == "mirrored":
        assert any("MirroredStrategy" in note for note in document["notes"])
    if name in OWN_STEP:
        note = next(n for n in document["notes"] if "has its own train_step" in n)
        assert f"on the first batch as fit hands it to the step, {OWN_STEP[name]}" in note
        assert not any("Keras' standard" in n or "not compiled" in n for n in document["notes"])
    if name == "gan":  # two tapes, two optimizers of its own compile, and fit's RMSprop
        assert document["optimizer"] == "optimizer RMSprop + d_optimizer Adam + g_optimizer Adam"
        # every weight has RMSprop's slot; the discriminator's and the generator's have
        # Adam's two: three slots a weight in all (each rounded up to 256 bytes)
        slots = document["memory"]["parts"]["optimizer_slots"]
        assert 3 * 4 * document["trainable_parameters"] <= slots
        assert slots <= 3 * 4 * document["trainable_parameters"] + 40 * 256
    after = _files(tmp_path)
    if name == "image_folder":  # its images, written before its fit, are its data
        after = {k: v for k, v in after.items() if not k.startswith("images")}
    assert after == before  # no checkpoint, no backup, no saved model


def _small(name: str) -> list[str]:
    small: list[str] = SHAPES[name]["small"]
    return small


def _where(name: str, folder: Path) -> list[str]:
    """The options that point the script's own files into ``folder`` (shapes.json)."""
    pairs = SHAPES[name].get("writes", [])
    return [w for option, path in pairs for w in (option, str(folder / path))]


def test_a_gradient_tape_loop_is_told_the_one_line_to_add(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = _plan(capsys, str(SCRIPTS / "gradient_tape.py"), *_small("gradient_tape"))
    assert status == 2
    assert "tfaccel.workload.mark(model, dataset, optimizer=optimizer, loss=loss_fn)" in err
    # the copy with that line added (and nothing else) is planned: test above, and here
    marked = (SCRIPTS / "gradient_tape_marked.py").read_text().splitlines()
    plain = (SCRIPTS / "gradient_tape.py").read_text().splitlines()
    added = [line for line in marked if line not in plain]
    assert [a for a in added if a.startswith("tfaccel.")] == [
        "tfaccel.workload.mark(model, train_dataset, optimizer=optimizer, loss=loss_fn)"
    ]


def test_densenet_behind_a_learned_resizer_is_captured_at_its_fit() -> None:
    # planned and tuned by benchmarks/bench_workload.py: tracing DenseNet121's training step
    # takes a minute on two cores
    workload = capture(SCRIPTS / "densenet_resizer.py", _small("densenet_resizer"), command="test")
    assert workload.batch_size == SHAPES["densenet_resizer"]["batch"]
    assert workload.data_kind == "dataset"
    assert type(workload.compile.optimizer).__name__ == "SGD"
    assert any(getattr(layer, "name", "") == "densenet121" for layer in workload.model.layers)


# the shapes whose fit differs most from arrays (the others' fit is profiled elsewhere)
PROFILED = ["image_folder", "pydataset_train_step", "vae", "mirrored"]


@pytest.mark.parametrize("name", PROFILED)
def test_an_unchanged_script_is_profiled(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    words = [str(SCRIPTS / f"{name}.py"), *_small(name), "--epochs", "1", *_where(name, tmp_path)]
    status = main(["profile", "--steps", "2", "--warmup", "1", "--json", *words])
    out = capsys.readouterr()
    assert status == 0, out.err[-3000:]
    document = json.loads(out.out)
    assert document["fit_calls"] == 1
    figures = document["runs"][0]["measurement"]["figures"]
    assert figures["steps"] >= 1 and figures["step_s"]["median"] > 0


def test_a_gradient_tape_loop_without_a_step_timer_is_told_how_to_profile_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["profile", str(SCRIPTS / "gradient_tape.py"), *_small("gradient_tape")])
    err = capsys.readouterr().err
    assert status == 2
    assert "StepTimer" in err and "Traceback" not in err
