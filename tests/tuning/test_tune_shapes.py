"""``tfaccel tune`` then ``tfaccel run --tuned`` on the training scripts of
``tests/data/scripts/``, unchanged: a CNN on arrays, ``image_dataset_from_directory`` with
augmentation in ``.map``, a bidirectional LSTM, a Conv1D with checkpoint callbacks,
``FeatureSpace``, a ``GradientTape`` loop with its ``mark`` line, a ``PyDataset`` with its own
``train_step``, a VAE (``fit(x)`` alone, two losses) and ``MirroredStrategy`` with
``ModelCheckpoint`` and ``BackupAndRestore``.

Three scripts (arrays, a VAE fit on x alone, a strategy with checkpoints) are tuned in this
process with a budget of a few seconds and a space of two configurations, into a database of
their own; then their run with ``--tuned`` finds that result by the architecture of the model
it builds and applies it at its ``fit``. For the others, the model tune's trials build is
fingerprinted and a result stored for it, which their ``--tuned`` run must find. Tune and its
captures write none of the script's files; the tuned run writes them as the script does.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("keras")

from tune_helpers import store_tune_result

from tfaccel.cli import main

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"
QUICK = ("--no-progress", "--json", "--sample-seconds", "0.1", "--rounds", "3", "--budget", "12")


@pytest.fixture(autouse=True)
def _float32_after() -> Iterator[None]:
    yield
    import keras

    keras.mixed_precision.set_global_policy("float32")


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


SHAPES = json.loads((SCRIPTS / "shapes.json").read_text())
# tuned for real: arrays; a VAE fit on x alone; a strategy, whose run writes its checkpoint
TUNED = {"cnn_arrays": [], "vae": [], "mirrored": ["ckpt/ckpt_1.weights.h5"]}


def _where(name: str, folder: Path) -> list[str]:
    """The options that point the script's own files into ``folder`` (shapes.json)."""
    pairs = SHAPES[name].get("writes", [])
    return [w for option, path in pairs for w in (option, str(folder / path))]


@pytest.mark.parametrize("name", list(TUNED))
def test_tune_then_run_tuned_on_an_unchanged_script(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch, writes = SHAPES[name]["batch"], TUNED[name]
    out = tmp_path / "out"
    out.mkdir()
    db = tmp_path / "results.sqlite"
    # the run's arguments (--epochs 1: tune trains none of the script's epochs)
    words = [str(SCRIPTS / f"{name}.py"), *SHAPES[name]["small"], *_where(name, out)]
    words += ["--epochs", "1"]
    space = [f"batch_size={batch}", "precision=float32", "jit=off", "steps_per_execution=1,4"]
    spaces = [w for s in space for w in ("--space", s)]
    before = _files(out)
    capsys.readouterr()
    status = main(["tune", *QUICK, "--db", str(db), *spaces, *words])
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    result: dict[str, Any] = json.loads(captured.out)
    assert result["workload"]["origin"]["script"].endswith(f"{name}.py")
    best = result["best"]
    assert best["batch_size"] == batch and best["precision"] == "float32"
    verdict = result["baseline_verdict"]
    assert verdict["says"]  # kept ("keep yours") or a winner faster beyond the noise
    assert verdict["kept"] or verdict["ratio"] > 1
    after = _files(out)
    assert after == before, "tune wrote the script's files"
    if name == "mirrored":
        assert any("MirroredStrategy" in n for n in result["workload"]["notes"])
        assert set(result["not_run"]) >= {"callback BackupAndRestore", "callback ModelCheckpoint"}
    if name == "vae":
        assert any("placeholder labels" in n for n in result["workload"]["notes"])

    capsys.readouterr()
    status = main(["run", "--quiet", "--json", "--tuned", "--db", str(db), *words])
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    tuned = json.loads(captured.out)["tuned"]
    assert tuned["winner"] is not None, tuned["says"]
    # the same script and arguments as tuned: found by tune's script record, no first pass
    assert tuned["found_by"] == "record", captured.err[-3000:]
    effect = tuned["took_effect"][0]
    assert effect["steps_per_execution"] == best["steps_per_execution"]
    assert effect["batch_size"] == batch  # --tuned keeps the script's batch
    for path in writes:
        assert (out / path).exists(), f"the tuned run did not write {path}"


# the other shapes: the model tune's trials build (the script captured, its model function
# called under a precision of its own, built as at fit) is the one the first pass of run
# --tuned finds; the search and the tuned fit are left out (tested above)
FOUND = [n for n in SHAPES if n not in ("about", "gradient_tape", "densenet_resizer", *TUNED)]


@pytest.mark.parametrize("name", FOUND)
def test_the_model_tune_times_is_the_one_run_tuned_finds(
    name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tfaccel.architecture import fingerprint
    from tfaccel.tuning.script import capture_script
    from tfaccel.tuning.trials import build_model
    from tfaccel.tuning.tuned import prepare

    out = tmp_path / "out"
    out.mkdir()
    script = str(SCRIPTS / f"{name}.py")
    words = [*SHAPES[name]["small"], *_where(name, out)]
    before = _files(out)
    found = capture_script(script, words)
    assert found.batch_size == SHAPES[name]["batch"]
    model = build_model(found.hooks.model_fn, "float32")  # a trial's model, as tune builds it
    after = _files(out)
    if name == "image_folder":  # its images, written before its fit, are its data
        after = {k: v for k, v in after.items() if not k.startswith("images")}
    assert after == before, "tune's capture wrote the script's files"
    db = tmp_path / "results.sqlite"
    digest = fingerprint(model)
    store_tune_result(db, digest, str(model.name), steps_per_execution=2)

    if name != "gradient_tape_marked":  # the first pass of run --tuned finds it
        tuned = prepare(script, words, db=db, out=io.StringIO())
        assert tuned.model_fingerprint == digest
        assert tuned.winner is not None and tuned.winner.config["steps_per_execution"] == 2
        return
    # a run of its own loop: the winner found, nothing to apply it at but the precision
    capsys.readouterr()
    status = main(["run", "--quiet", "--json", "--tuned", "--db", str(db), script, *words,
                   "--epochs", "1"])  # fmt: skip
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    document = json.loads(captured.out)["tuned"]
    assert document["winner"] is not None, document["says"]
    assert document["found_by"] == "first pass"  # a result stored without a script record
    assert document["took_effect"] == []
    assert "called no model.fit (its own training loop): nothing applied" in captured.err

    # with the script record tune stores: no first pass, nothing applies, said before the run
    from tfaccel.tuning.record import script_digest

    record = {
        "sha256": script_digest(script), "args": [*words, "--epochs", "1"], "fit": 0, "model_fingerprint": digest,
        "precision": "float32",
    }  # fmt: skip
    store_tune_result(db, digest, str(model.name), script=record, steps_per_execution=2)
    import tfaccel.tuning.tuned as tuned_module

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("run --tuned ran the script up to its mark before the run")

    monkeypatch.setattr(tuned_module, "capture", refused)
    status = main(["run", "--quiet", "--json", "--tuned", "--db", str(db), script, *words,
                   "--epochs", "1"])  # fmt: skip
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    document = json.loads(captured.out)["tuned"]
    assert document["found_by"] == "record" and document["own_loop"] is True
    assert document["precision"] is None and document["took_effect"] == []
    assert "its own loop (no model.fit)" in captured.err and "nothing applies" in captured.err


FINE_TUNING = """
import json
import sys

import keras
import numpy as np

x, y = np.zeros((64, 10), "float32"), np.zeros(64, "int64")
base = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu")])
model = keras.Sequential([base, keras.layers.Dense(4)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(True))
model.fit(x, y, batch_size=16, epochs=1, verbose=0)  # the new head first
seen = [int(model.steps_per_execution)]
base.trainable = False
model.compile(optimizer=keras.optimizers.Adam(1e-5),
              loss=keras.losses.SparseCategoricalCrossentropy(True))
model.fit(x, y, batch_size=16, epochs=1, verbose=0)  # fine-tuning
seen.append(int(model.steps_per_execution))
json.dump(seen, open(sys.argv[1], "w"))
"""


def test_run_tuned_fit_n_applies_from_the_fit_tune_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tfaccel.architecture import fingerprint
    from tfaccel.tuning.script import capture_script
    from tfaccel.tuning.trials import build_model

    script = tmp_path / "finetune.py"
    script.write_text(FINE_TUNING)
    seen = tmp_path / "seen.json"
    found = capture_script(script, [str(seen)], fit=2)  # tfaccel tune --fit 2
    model = build_model(found.hooks.model_fn, "float32")
    db = tmp_path / "results.sqlite"
    store_tune_result(db, fingerprint(model), str(model.name), steps_per_execution=4)
    capsys.readouterr()
    status = main(["run", "--quiet", "--json", "--tuned", "--fit", "2", "--db", str(db),
                   str(script), str(seen)])  # fmt: skip
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    assert json.loads(captured.out)["tuned"]["fit"] == 2
    assert json.loads(seen.read_text()) == [1, 4]  # the first fit as the script has it

    assert main(["run", "--fit", "2", str(script), str(seen)]) == 2
    assert "--fit applies to --tuned only" in capsys.readouterr().err
