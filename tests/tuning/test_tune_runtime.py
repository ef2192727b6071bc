"""``setup(precision="auto")`` consults the measured precision, as ``jit="auto"`` does for XLA.

Pure decisions on hand-built hardware facts, the lookup on a results database written the way
``tfaccel tune`` writes it (by the model's architecture fingerprint), and the lines a tune
result prints to reproduce it, run as written in a fresh process on a tiny model (the
end-to-end check of ``setup`` is in test_tune_tf.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tfaccel import inventory, runtime, store
from tfaccel.core.timing import summarize
from tfaccel.runtime import Hardware, RuntimeState
from tfaccel.runtime.measured import measured_jit, measured_precision
from tfaccel.runtime.settings import build_request
from tfaccel.snapshot import Snapshot
from tfaccel.tuning import Config, SearchSettings, TuneResult
from tfaccel.tuning.record import record
from tfaccel.tuning.search import Trial
from tfaccel.tuning.space import parse_space

CPU_BF16 = Hardware(cpu_flags=frozenset({"avx512f", "avx512_bf16"}))
MACHINE = inventory.build(Snapshot(tfaccel_version="0"))  # its fingerprint keys the records
DIGEST = MACHINE.fingerprint.digest


def _decide(hw: Hardware, **arguments: object) -> runtime.SetupPlan:
    request = build_request(arguments, {}, None)
    return runtime.decide(request, hw, RuntimeState())


def test_auto_without_a_measurement_keeps_the_hardware_rule() -> None:
    plan = _decide(CPU_BF16, precision="auto")
    assert plan.precision == "mixed_bfloat16"
    assert "avx512_bf16" in plan.settings["precision"].reason


def test_auto_with_a_measurement_applies_it() -> None:
    measured = Hardware(
        cpu_flags=frozenset({"avx512_bf16"}),
        measured_precision="float32",
        measured_precision_reason="measured here on cpu (my_net): float32 fastest",
    )
    plan = _decide(measured, precision="auto")
    assert plan.precision == "float32"
    assert plan.settings["precision"].reason == "measured here on cpu (my_net): float32 fastest"


def test_an_explicit_precision_ignores_the_measurement() -> None:
    measured = Hardware(measured_precision="float32", measured_precision_reason="measured")
    assert _decide(measured, precision="mixed_bfloat16").precision == "mixed_bfloat16"


def _tuned(
    best: Config, name: str = "my_net", *, interrupted: bool = False, fingerprint: str = "a" * 16
) -> TuneResult:
    """A result won by ``best`` over a slower configuration of the other precision and XLA
    setting, timed in the same rung (so both settings were compared)."""
    trial = Trial(best, status="ok", rung_samples={2: [990.0, 1000.0, 1010.0]})
    other = "float32" if best.precision != "float32" else "mixed_bfloat16"
    loser = replace(best, precision=other, jit=not best.jit)
    lost = Trial(loser, status="dropped", rung_samples={2: [490.0, 500.0, 510.0]})
    return TuneResult(
        best=best,
        reason="fastest",
        trials=[trial, lost],
        model_name=name,
        device="cpu",
        space=parse_space({"precision": ["float32", "mixed_bfloat16"], "jit": [False, True]}),
        budget_s=SearchSettings(budget_s=60).budget_s,
        elapsed_s=30.0,
        interrupted=interrupted,
        model_fingerprint=fingerprint,
    )


def test_measured_precision_reads_what_tune_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    request = build_request({"precision": "auto"}, {}, SimpleNamespace(name="net", layers=[]))
    model = "c" * 16
    assert measured_precision(request, "cpu", DIGEST, model_fingerprint=model)[0] is None  # no db
    result = _tuned(
        Config(256, "mixed_bfloat16", feed="pipeline"), "reference_cnn", fingerprint=model
    )
    run_id = record(result, inv=MACHINE)
    assert result.run_id == run_id and result.db_path == str(store.default_path())
    assert measured_precision(request, "cpu", DIGEST, model_fingerprint=model) == (
        "mixed_bfloat16",
        "measured here on cpu (reference_cnn): mixed_bfloat16 fastest",
    )
    assert measured_precision(request, "gpu:0", DIGEST, model_fingerprint=model)[0] is None
    not_auto = build_request({"precision": "float32"}, {}, None)
    assert measured_precision(not_auto, "cpu", DIGEST, model_fingerprint=model) == (
        None,
        "not looked up",
    )


def test_the_models_architecture_picks_the_result_not_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    record(
        _tuned(Config(256, "mixed_bfloat16"), "reference_cnn", fingerprint="1" * 16), inv=MACHINE
    )
    record(_tuned(Config(64, "float32"), "my_net", fingerprint="2" * 16), inv=MACHINE)
    record(_tuned(Config(64, "mixed_bfloat16"), "my_net", fingerprint="3" * 16), inv=MACHINE)

    request = build_request({"precision": "auto"}, {}, SimpleNamespace(name="my_net", layers=[]))
    assert measured_precision(request, "cpu", DIGEST, model_fingerprint="2" * 16)[0] == "float32"
    assert measured_precision(request, "cpu", DIGEST, model_fingerprint="1" * 16) == (
        "mixed_bfloat16",
        "measured here on cpu (reference_cnn): mixed_bfloat16 fastest",
    )


def test_an_interrupted_tune_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    record(
        _tuned(Config(256, "mixed_bfloat16"), name="reference_cnn", interrupted=True), inv=MACHINE
    )
    request = build_request({"precision": "auto", "jit": "auto"}, {}, None)
    assert measured_precision(request, "cpu", DIGEST, model_fingerprint="a" * 16)[0] is None
    assert measured_jit(request, "cpu", DIGEST, model_fingerprint="a" * 16)[0] is None
    with store.ResultsStore() as db:
        [run] = db.runs()
        assert run.status == "incomplete" and run.details["kind"] == "tune"


def test_the_stored_record_carries_the_winner(tmp_path: Path) -> None:
    db_path = tmp_path / "results.sqlite"
    best = Config(128, "mixed_bfloat16", True, "pipeline", prefetch=1)
    record(_tuned(best), db_path)
    with store.ResultsStore(db_path) as db:
        [run] = db.runs()
        [result] = db.results(run.id)
    assert result.benchmark == "my_net" and result.metric == "images_per_s"
    assert result.config == {"device": "cpu", **best.to_dict()}
    assert result.model_fingerprint == "a" * 16
    expected = summarize([990.0, 1000.0, 1010.0])
    assert (result.median, result.n) == (expected.median, 3)
    assert run.details["best"] == best.to_dict() and len(run.details["trials"]) == 2
    fingerprint = inventory.current().fingerprint.digest  # record() keys it by this machine
    for key, value in (("jit", True), ("precision", "mixed_bfloat16"), ("batch_size", 128)):
        assert store.best_setting(fingerprint, "my_net", key, device="cpu", path=db_path) == value


# -- the reproduce lines run as written ----------------------------------------------------------

_REPRODUCE = """
import json, sys
import keras
import numpy as np

x = np.random.default_rng(0).random((64, 8)).astype("float32")
y = (x.sum(axis=1) > 4).astype("int32")
optimizer, loss = "sgd", "sparse_categorical_crossentropy"


def build_model():
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(8), keras.layers.Dense(2)])


exec(compile(sys.stdin.read(), "<reproduce>", "exec"))
print(json.dumps({
    "policy": keras.mixed_precision.global_policy().name,
    "jit_compile": bool(model.jit_compile),
    "steps_per_execution": int(model.steps_per_execution),
    "steps": int(model.optimizer.iterations.numpy()),
}))
"""


def test_the_reproduce_lines_of_a_scripts_own_dataset_assume_that_dataset() -> None:
    from tfaccel.tuning.result import CODE_NAMES_DATASET
    from tfaccel.tuning.space import OWN_FEED

    result = _tuned(Config(32, "float32", feed=OWN_FEED))
    lines = result.code().splitlines()
    assert lines[: len(CODE_NAMES_DATASET)] == [f"# {line}" for line in CODE_NAMES_DATASET]
    assert "arrays" not in result.code() and lines[-1].startswith("model.fit(dataset)")


REPRODUCED = {
    "numpy": (Config(16, "float32"), 4),
    "pipeline": (Config(32, "mixed_bfloat16", True, "pipeline", cache=False, prefetch=1), 2),
    "steps_per_execution": (Config(16, "float32", steps_per_execution=2), 4),
}


def _reproduce(best: Config) -> tuple[TuneResult, str]:
    result = _tuned(best)
    result.best = best
    return result, result.code()


def _reproduce_all() -> dict[str, Any]:
    """Each case's reproduce lines run as written, each in a fresh process (in the session's
    starting environment and folder: it may run beside a test)."""
    import subprocess
    import sys

    from runtime_helpers import STARTING_DIR, STARTING_ENVIRON, clean_env

    return {
        case: subprocess.run(
            [sys.executable, "-c", _REPRODUCE],
            input=_reproduce(best)[1],
            capture_output=True,
            text=True,
            env=clean_env(base=STARTING_ENVIRON),
            cwd=STARTING_DIR,
            timeout=300,
        )
        for case, (best, _) in REPRODUCED.items()
    }


AHEAD = {"reproduced": _reproduce_all}  # run ahead: tests/conftest.py's Ahead


@pytest.fixture(scope="module")
def reproduced(_ahead: Any) -> dict[str, Any]:
    runs: dict[str, Any] = _ahead.run(_reproduce_all)
    return runs


@pytest.mark.parametrize("case", list(REPRODUCED))
def test_the_reproduce_lines_run_as_written(case: str, reproduced: dict[str, Any]) -> None:
    import json

    from tfaccel.tuning.result import CODE_NAMES

    best, steps = REPRODUCED[case]
    result, code = _reproduce(best)
    lines = code.splitlines()
    assert lines[: len(CODE_NAMES)] == [f"# {line}" for line in CODE_NAMES]
    for name in ("build_model()", "optimizer", "loss", "x and y"):
        assert name in " ".join(CODE_NAMES)
    compile(code, "<reproduce>", "exec")  # valid Python, as printed
    done = reproduced[case]
    assert done.returncode == 0, f"{code}\n{done.stderr[-3000:]}"
    ran = json.loads(done.stdout.strip().splitlines()[-1])
    assert ran == {
        "policy": best.precision,
        "jit_compile": best.jit,
        "steps_per_execution": best.steps_per_execution,
        "steps": steps,
    }
    assert "  " + lines[-1] in str(result)  # the text report prints the same lines
