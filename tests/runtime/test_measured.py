"""A stored measurement applies to the model it was measured on, and to no other.

A real (tiny, ``--smoke``) bench run and a tune result are stored for model A; the lookups of
``setup(jit="auto", precision="auto", model=...)`` apply them to A, decide a different model B
by the hardware rule and say so, and never borrow a measurement when no model is given. The
architecture fingerprint ignores precision and names, and sees every shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tfaccel import architecture, bench, inventory, models, store
from tfaccel.runtime.measured import BY_RULE, measured_jit, measured_precision
from tfaccel.runtime.settings import build_request
from tfaccel.snapshot import Snapshot
from tfaccel.tuning import Config, SearchSettings, TuneResult
from tfaccel.tuning.record import record
from tfaccel.tuning.search import Trial
from tfaccel.tuning.space import parse_space

keras = pytest.importorskip("keras")

MACHINE = inventory.build(Snapshot(tfaccel_version="0"))
DIGEST = MACHINE.fingerprint.digest


def _sixteen_feature_mlp(units: int = 32) -> Any:
    return keras.Sequential(
        [
            keras.Input((16,)),
            keras.layers.Dense(units, activation="relu"),
            keras.layers.Dense(2, activation="softmax"),
        ],
        name="my_mlp",
    )


def _auto(model: Any = None) -> Any:
    return build_request({"jit": "auto", "precision": "auto"}, {}, model)


# -- the fingerprint --------------------------------------------------------------------------


def test_the_fingerprint_ignores_precision_and_names_and_sees_shapes() -> None:
    a = models.build("mlp", tiny=True)
    same = models.build("mlp", tiny=True, dtype="mixed_bfloat16")  # other names, other dtypes
    assert architecture.fingerprint(a) == architecture.fingerprint(same)
    assert architecture.fingerprint(a) != architecture.fingerprint(models.build("mlp"))
    assert architecture.fingerprint(_sixteen_feature_mlp()) != architecture.fingerprint(
        _sixteen_feature_mlp(units=64)
    )
    functional_in = keras.Input((16,))
    hidden = keras.layers.Dense(32, activation="relu")(functional_in)
    functional = keras.Model(functional_in, keras.layers.Dense(2, activation="softmax")(hidden))
    assert architecture.fingerprint(functional) == architecture.fingerprint(_sixteen_feature_mlp())
    described = architecture.structure(_sixteen_feature_mlp())
    assert described["inputs"] == [[16]]
    assert [layer["type"] for layer in described["layers"]] == ["Dense", "Dense"]
    assert described["layers"][0]["weights"] == [[16, 32], [32]]
    assert len(architecture.fingerprint(a)) == 16


# -- a real bench run ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def benched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bench.BenchRun]:
    """A tiny bench of the MLP on the CPU, stored in a fresh results database."""
    home = tmp_path_factory.mktemp("data")
    options = bench.BenchOptions(profile="smoke", only=("mlp",), device="cpu", repeats=2, warmup=0)
    with store.ResultsStore(home / "tfaccel" / "results.sqlite") as db:
        run = bench.run(options, store=db)
    return home, run


def test_a_bench_stores_the_model_fingerprint_with_each_training_figure(
    benched: tuple[Path, bench.BenchRun],
) -> None:
    home, run = benched
    model_a = architecture.fingerprint(models.build("mlp", tiny=True))
    assert run.measurements and {m.model_fingerprint for m in run.measurements} == {model_a}
    with store.ResultsStore(home / "tfaccel" / "results.sqlite") as db:
        stored = db.results(run.run_id)  # type: ignore[arg-type]
        again = bench.load_run(db, run.run_id)  # type: ignore[arg-type]
    assert {r.model_fingerprint for r in stored} == {model_a}
    assert again is not None and again.measurements[0].model_fingerprint == model_a


def test_a_bench_measurement_applies_to_its_model_and_not_to_another(
    benched: tuple[Path, bench.BenchRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, run = benched
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    model_a = models.build("mlp", tiny=True)
    fp_a = architecture.fingerprint(model_a)
    found = store.best_measured(run.fingerprint, "precision", model_fingerprint=fp_a, device="cpu")
    assert found is not None and (found.benchmark, found.run_id) == ("mlp", run.run_id)
    # float32 always, and mixed_bfloat16 where this CPU computes bfloat16 (bench times the 16-bit
    # policies only where they are fast); the winner may be in the noise
    timed = {m.config.get("precision") for m in run.find("mlp")}
    assert "float32" in timed and found.values == len(timed)
    value, reason = measured_precision(
        _auto(model_a), "cpu", run.fingerprint, model_fingerprint=fp_a
    )
    assert reason.startswith("measured here on cpu (mlp)")
    assert value == found.value and (value is None) == reason.endswith(BY_RULE)
    # the smoke configurations time XLA off only: nothing compared, so the rule decides
    assert measured_jit(_auto(model_a), "cpu", run.fingerprint, model_fingerprint=fp_a) == (
        None,
        f"measured here on cpu (mlp) with one jit setting only, nothing compared; {BY_RULE}",
    )
    model_b = _sixteen_feature_mlp()
    fp_b = architecture.fingerprint(model_b)
    for lookup in (measured_jit, measured_precision):
        value, reason = lookup(_auto(model_b), "cpu", run.fingerprint, model_fingerprint=fp_b)
        assert value is None
        assert reason.startswith("no measurement for this model (model 'my_mlp', architecture")
        assert reason.endswith(BY_RULE)
    # another device, or another machine: nothing either
    for device, machine in (("gpu:0", run.fingerprint), ("cpu", "another-machine")):
        value, reason = measured_precision(_auto(model_a), device, machine, model_fingerprint=fp_a)
        assert value is None and reason.startswith("no measurement for this model")


def test_without_a_model_no_measurement_is_borrowed(
    benched: tuple[Path, bench.BenchRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, run = benched
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    for lookup in (measured_jit, measured_precision):
        assert lookup(_auto(), "cpu", run.fingerprint) == (
            None,
            f"no model given to setup(model=...), so no measurement applies; {BY_RULE}",
        )


# -- a tune result --------------------------------------------------------------------------------


def _tuned(
    best: Config, fingerprint: str | None, *, others: tuple[Config, ...] = (Config(64),)
) -> TuneResult:
    """A tune result won by ``best``, with ``others`` timed beside it (by default the
    baseline, so that the winner's precision and XLA setting were compared)."""
    trial = Trial(best, status="ok", rung_samples={2: [990.0, 1000.0, 1010.0]})
    timed = [Trial(c, status="dropped", rung_samples={2: [490.0, 500.0, 510.0]}) for c in others]
    return TuneResult(
        best=best,
        reason="fastest",
        trials=[trial, *timed],
        model_name="my_net",
        device="cpu",
        space=parse_space({"precision": ["float32", "mixed_bfloat16"], "jit": [False, True]}),
        budget_s=SearchSettings(budget_s=60).budget_s,
        elapsed_s=30.0,
        model_fingerprint=fingerprint,
    )


def test_a_tune_result_applies_to_its_model_and_not_to_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    model_a, model_b = _sixteen_feature_mlp(), _sixteen_feature_mlp(units=64)
    fp_a, fp_b = architecture.fingerprint(model_a), architecture.fingerprint(model_b)
    record(_tuned(Config(64, "mixed_bfloat16", jit=True), fp_a), inv=MACHINE)
    with store.ResultsStore() as db:
        [run] = db.runs()
        [result] = db.results(run.id)
    assert result.model_fingerprint == fp_a and run.details["model_fingerprint"] == fp_a
    request_a = _auto(model_a)
    assert measured_precision(request_a, "cpu", DIGEST, model_fingerprint=fp_a) == (
        "mixed_bfloat16",
        "measured here on cpu (my_net): mixed_bfloat16 fastest",
    )
    assert measured_jit(request_a, "cpu", DIGEST, model_fingerprint=fp_a)[0] is True
    value, reason = measured_precision(_auto(model_b), "cpu", DIGEST, model_fingerprint=fp_b)
    assert value is None and "no measurement for this model" in reason and reason.endswith(BY_RULE)


def test_a_tune_result_gives_no_verdict_on_a_setting_it_did_not_compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bf16 was asked but did not take effect (not timed); XLA was timed off only: the stored
    winner carries neither, so setup(..."auto") decides both by rule."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    model = _sixteen_feature_mlp()
    fp = architecture.fingerprint(model)
    result = _tuned(Config(64), fp, others=(Config(32),))
    result.trials.append(Trial(Config(64, "mixed_bfloat16"), status="not applied"))
    record(result, inv=MACHINE)
    with store.ResultsStore() as db:
        [stored] = db.results(db.runs()[0].id)
    assert stored.config["batch_size"] == 64
    assert "precision" not in stored.config and "jit" not in stored.config
    for lookup in (measured_precision, measured_jit):
        value, reason = lookup(_auto(model), "cpu", DIGEST, model_fingerprint=fp)
        assert value is None and "measured here" not in reason and reason.endswith(BY_RULE)


def test_a_tune_result_stored_without_a_fingerprint_applies_to_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    record(_tuned(Config(64, "mixed_bfloat16"), None), inv=MACHINE)
    model = _sixteen_feature_mlp()
    fp = architecture.fingerprint(model)
    assert measured_precision(_auto(model), "cpu", DIGEST, model_fingerprint=fp)[0] is None


def test_an_old_database_still_works_for_the_lookups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from test_store import _SCHEMA_1

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    path = store.default_path()
    path.parent.mkdir(parents=True)
    con = sqlite3.connect(path)
    con.executescript(_SCHEMA_1.replace("'abc123'", f"'{DIGEST}'"))
    con.close()
    model = models.build("reference_cnn", tiny=True)
    fp = architecture.fingerprint(model)
    value, reason = measured_jit(_auto(model), "cpu", DIGEST, model_fingerprint=fp)
    assert value is None and reason.endswith(BY_RULE) and "could not be read" not in reason
    # the old runs are all there, read by name
    assert store.best_setting(DIGEST, "reference_cnn", "jit", device="cpu", path=path) is False


def test_a_bench_inside_the_noise_or_of_one_value_leaves_it_to_the_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    model = _sixteen_feature_mlp()
    fp = architecture.fingerprint(model)
    results = [
        store.ResultRecord(
            "my_mlp",
            {"device": "cpu", "precision": precision, "jit": False},
            "images_per_s",
            "images/s",
            median,
            median * 0.9,
            median * 1.1,
            5,
            [median] * 5,
            model_fingerprint=fp,
        )
        for precision, median in (("float32", 1000.0), ("mixed_bfloat16", 1020.0))
    ]
    with store.ResultsStore() as db:
        run = db.begin_run(
            DIGEST, fingerprint_data={}, started_at="t0", tfaccel_version="0", tf_version=None
        )
        db.finish_run(run, results, finished_at="t1")
    assert measured_precision(_auto(model), "cpu", DIGEST, model_fingerprint=fp) == (
        None,
        f"measured here on cpu (my_mlp): no precision setting faster beyond the noise; {BY_RULE}",
    )
    assert measured_jit(_auto(model), "cpu", DIGEST, model_fingerprint=fp) == (
        None,
        f"measured here on cpu (my_mlp) with one jit setting only, nothing compared; {BY_RULE}",
    )
