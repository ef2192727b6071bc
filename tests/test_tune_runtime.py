"""``setup(precision="auto")`` consults the measured precision, as ``jit="auto"`` does for XLA.

Pure decisions on hand-built hardware facts, and the lookup on a results database written the
way ``tfaccel tune`` writes it (no TensorFlow here; the end-to-end check, ``setup`` in a fresh
process, is in test_tune_tf.py).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tfaccel import inventory, runtime, store
from tfaccel.runtime import Hardware, RuntimeState
from tfaccel.runtime.measured import measured_jit, measured_precision
from tfaccel.runtime.settings import build_request
from tfaccel.snapshot import Snapshot
from tfaccel.timing import summarize
from tfaccel.tuning import Config, SearchSettings, TuneResult
from tfaccel.tuning.record import record
from tfaccel.tuning.search import Trial
from tfaccel.tuning.space import parse_space

CPU_BF16 = Hardware(cpu_flags=frozenset({"avx512f", "avx512_bf16"}))
MACHINE = inventory.build(Snapshot(tfaccel_version="0"))  # its fingerprint keys the records
DIGEST = MACHINE.fingerprint.digest


def _decide(hw: Hardware, **arguments: object) -> runtime.Plan:
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


def _tuned(best: Config, name: str = "my_net", *, interrupted: bool = False) -> TuneResult:
    trial = Trial(best, status="ok", rung_samples={2: [990.0, 1000.0, 1010.0]})
    return TuneResult(
        best=best,
        reason="fastest",
        trials=[trial],
        model_name=name,
        device="cpu",
        space=parse_space({"precision": ["float32", "mixed_bfloat16"]}),
        budget_s=SearchSettings(budget_s=60).budget_s,
        elapsed_s=30.0,
        interrupted=interrupted,
    )


def test_measured_precision_reads_what_tune_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    request = build_request({"precision": "auto"}, {}, None)
    assert measured_precision(request, "cpu", DIGEST)[0] is None  # no database yet
    result = _tuned(Config(256, "mixed_bfloat16", feed="pipeline"), name="reference_cnn")
    run_id = record(result, inv=MACHINE)
    assert result.run_id == run_id and result.db_path == str(store.default_path())
    assert measured_precision(request, "cpu", DIGEST) == (
        "mixed_bfloat16",
        "measured here on cpu (reference_cnn): mixed_bfloat16 fastest",
    )
    assert measured_precision(request, "gpu:0", DIGEST)[0] is None  # measured on the CPU
    not_auto = build_request({"precision": "float32"}, {}, None)
    assert measured_precision(not_auto, "cpu", DIGEST) == (None, "not looked up")


def test_the_models_own_name_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    record(_tuned(Config(256, "mixed_bfloat16"), name="reference_cnn"), inv=MACHINE)
    record(_tuned(Config(64, "float32"), name="my_net"), inv=MACHINE)

    model = SimpleNamespace(name="my_net", layers=[])
    request = build_request({"precision": "auto"}, {}, model)
    assert measured_precision(request, "cpu", DIGEST)[0] == "float32"


def test_an_interrupted_tune_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    record(
        _tuned(Config(256, "mixed_bfloat16"), name="reference_cnn", interrupted=True), inv=MACHINE
    )
    request = build_request({"precision": "auto", "jit": "auto"}, {}, None)
    assert measured_precision(request, "cpu", DIGEST)[0] is None
    assert measured_jit(request, "cpu", DIGEST)[0] is None
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
    expected = summarize([990.0, 1000.0, 1010.0])
    assert (result.median, result.n) == (expected.median, 3)
    assert run.details["best"] == best.to_dict() and len(run.details["trials"]) == 1
    fingerprint = inventory.current().fingerprint.digest  # record() keys it by this machine
    for key, value in (("jit", True), ("precision", "mixed_bfloat16"), ("batch_size", 128)):
        assert store.best_setting(fingerprint, "my_net", key, device="cpu", path=db_path) == value
