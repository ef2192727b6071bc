"""``tfaccel.tune`` on real TensorFlow (CPU) with tiny models: every call form, bad input,
OOM in the middle of a trial, the results store read back by ``tfaccel.setup``."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from runtime_helpers import clean_env
from tune_helpers import dense_model

import tfaccel
import tfaccel.cli
import tfaccel.tuning
from tfaccel import inventory, store
from tfaccel.cli import main
from tfaccel.tuning import BudgetError, Config, ModelFnError, SpaceError, TuneError, TuneResult
from tfaccel.tuning.trials import TfRunner

FAST = {"sample_s": 0.05, "final_rounds": 3, "store": False, "progress": False}
SMALL_SPACE = {
    "batch_size": [32, 64],
    "precision": ["float32"],
    "jit": [False],
    "steps_per_execution": [1],
}


def tiny_model_fn() -> Any:
    return dense_model(16, "tiny_net")


def tiny_data(count: int = 512) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((count, 8), dtype=np.float32), rng.integers(0, 3, count).astype(np.int32)


# --- the call forms ---------------------------------------------------------------------------


def test_function_form_finds_and_explains_the_best() -> None:
    result = tfaccel.tune(tiny_model_fn, tiny_data(), 60, SMALL_SPACE, **FAST)  # type: ignore[operator]
    assert isinstance(result, TuneResult) and result.best is not None
    assert result.model_name == "tiny_net" and result.device == "cpu"
    assert {t.config.feed for t in result.trials} == {"numpy", "pipeline"}
    assert all(t.status in ("ok", "dropped") for t in result.trials)
    assert result.best_summary is not None and result.best_summary.n == 3
    text = str(result)
    assert "best: " in text and "reproduce:" in text and "tfaccel.setup(" in text
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["best"]["batch_size"] == result.best.batch_size
    assert doc["compile"] == {"jit_compile": False}
    if result.best.feed == "pipeline":
        assert doc["pipeline"] == {"batch_size": result.best.batch_size}
    else:
        assert doc["fit"] == {"batch_size": result.best.batch_size}


def test_the_memory_search_starts_at_the_planned_largest_batch() -> None:
    """On the CPU the plan predicts far more than the data: no trial is spent on memory, the
    limit (the data) is the largest batch the screen times."""
    space = {"batch_size": "auto", "precision": ["float32"], "jit": [False], "feed": ["numpy"]}
    result = tfaccel.tune(tiny_model_fn, tiny_data(), 60, space, **FAST)  # type: ignore[operator]
    assert result.batch_search is not None
    # the numpy feed keeps half the data for batches: 256; without the plan 32, 64, 128, 256
    # were trials of the memory search, with a plan not far beyond the limit 256 alone
    assert result.batch_search.tried == () and result.batch_search.planned_only
    assert result.batch_search.result == 256
    assert result.notes[0].startswith(
        "memory search: the plan predicts the largest batch that fits is"
    )
    assert any(n.startswith("memory search: none run; the plan predicts") for n in result.notes)
    assert {t.config.batch_size for t in result.trials} <= {32, 64, 128, 256}


def test_module_function_and_tune_tune_are_the_same_call() -> None:
    result = tfaccel.tuning.tune(
        tiny_model_fn,
        tiny_data(),
        60,
        {**SMALL_SPACE, "batch_size": [32], "feed": ["numpy"]},
        **FAST,
    )
    assert result.best == Config(32)
    assert result.reason == "the only configuration measured to the end"


def test_tune_model_and_tune_script_in_python(tmp_path: Path) -> None:
    space = {**SMALL_SPACE, "batch_size": [16], "feed": ["pipeline"]}
    result = tfaccel.tuning.tune_model("reference-cnn", 60, space, smoke=True, **FAST)
    assert result.model_name == "reference_cnn" and result.best == Config(16, feed="pipeline")
    script = _write_script(tmp_path)
    result = tfaccel.tuning.tune_script(script, 60, {"batch_size": [32], "feed": ["numpy"]}, **FAST)
    assert result.model_name == "script_net" and result.best is not None
    # precision and XLA were searched (which wins is this machine's measurement, not fixed)
    assert (result.best.batch_size, result.best.feed) == (32, "numpy")
    assert {t.config.jit for t in result.trials} == {False, True}
    assert "float32" in {t.config.precision for t in result.trials}


def test_a_scripts_way_to_its_fit_is_spent_from_the_budget_and_said(tmp_path: Path) -> None:
    # The user's budget is their clock's: what the script does before its fit (here a sleep
    # standing for reading its data) is taken from it, and the result says how much.
    script = tmp_path / "slow_start.py"
    script.write_text(
        textwrap.dedent(
            """
            import time
            import keras
            import numpy as np

            time.sleep(1.5)  # reading the data
            x = np.random.rand(256, 8).astype("float32")
            y = np.random.randint(0, 3, 256)
            model = keras.Sequential(
                [keras.Input((8,)), keras.layers.Dense(3)], name="slow_start"
            )
            model.compile("sgd", "sparse_categorical_crossentropy")
            model.fit(x, y, batch_size=32, epochs=1)
            """
        )
    )
    space = {"batch_size": [32], "feed": ["numpy"], "jit": [False]}
    result = tfaccel.tuning.tune_script(script, 30, space, runner=_Scripted(), **FAST)
    spent = [n for n in result.notes if n.startswith("budget: ")]
    assert spent, result.notes
    seconds = float(spent[0].split()[1])
    assert seconds >= 1.5, spent[0]  # the script's sleep before its fit, at least
    assert seconds < 30, spent[0]
    assert "of the 30 s went before the first trial" in spent[0]
    assert result.budget_s == 30 and result.elapsed_s >= seconds - 0.05  # said to 0.1 s


def test_cli_model_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    code = main(
        [
            "tune",
            "--model",
            "reference-cnn",
            "--smoke",
            "--budget",
            "60",
            "--space",
            "batch_size=16,32",
            "--space",
            "precision=float32",
            "--space",
            "jit=off",
            "--space",
            "steps_per_execution=1",
            "--sample-seconds",
            "0.05",
            "--rounds",
            "3",
            "--db",
            str(db),
            "--json",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out)
    assert doc["model_name"] == "reference_cnn" and doc["best"]["precision"] == "float32"
    assert len(doc["trials"]) == 4 and doc["run_id"] is not None
    with store.ResultsStore(db) as opened:
        run = opened.get_run(doc["run_id"])
        assert run is not None and run.status == "complete" and run.details["kind"] == "tune"
        [record] = opened.results(run.id)
    assert record.benchmark == "reference_cnn"
    # one precision and XLA off only were searched: no verdict on either is stored
    assert "jit" not in record.config and "precision" not in record.config
    assert doc["settings"]["jit"]["says"] == "XLA: not searched (kept off), no verdict"
    assert record.config["batch_size"] == doc["best"]["batch_size"]


STARTUP_NOISE = ("absl::InitializeLog", "oneDNN custom operations", "cpu_feature_guard")
TUNE_SMOKE = [
    "tune", "--model", "reference-cnn", "--smoke", "--budget", "60", "--space", "batch_size=16",
    "--space", "precision=float32", "--space", "jit=off", "--space", "feed=numpy",
    "--sample-seconds", "0.05", "--rounds", "2", "--no-save", "--no-progress",
]  # fmt: skip


def _tune_process(*extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in clean_env().items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run(
        [sys.executable, "-m", "tfaccel", *TUNE_SMOKE, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_cli_tune_keeps_the_notices_tensorflow_prints_off_stderr() -> None:
    # what this TensorFlow prints when nothing hides it: its import alone (a tune under
    # --verbose printed the same notices, at twice the time)
    env = {k: v for k, v in clean_env().items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    bare = subprocess.run(
        [sys.executable, "-c", "import tensorflow"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    if not any(noise in bare.stderr for noise in STARTUP_NOISE):
        pytest.skip("this TensorFlow prints none of the start-up notices tfaccel hides")
    quiet = _tune_process()
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "best: " in quiet.stdout
    assert [noise for noise in STARTUP_NOISE if noise in quiet.stderr] == [], quiet.stderr


def _write_script(tmp_path: Path, body: str | None = None) -> Path:
    script = tmp_path / "train.py"
    script.write_text(
        body
        or textwrap.dedent(
            """
            import numpy as np

            def model_fn():
                import keras
                model = keras.Sequential(
                    [keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(3, activation="softmax")],
                    name="script_net",
                )
                model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
                return model

            def data():
                rng = np.random.default_rng(0)
                return rng.random((256, 8), dtype=np.float32), rng.integers(0, 3, 256)

            if __name__ == "__main__":
                raise SystemExit("the training must not run under tfaccel tune")
            """
        )
    )
    return script


def test_cli_script_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = _write_script(tmp_path)
    code = main(
        [
            "tune",
            str(script),
            "--budget",
            "60",
            "--space",
            "batch_size=32",
            "--space",
            "precision=float32",
            "--space",
            "jit=off",
            "--sample-seconds",
            "0.05",
            "--rounds",
            "3",
            "--no-save",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("tfaccel tune: script_net on cpu")
    assert "best: bs32 float32" in out and "reproduce:" in out


def test_cli_script_with_a_tfaccel_tune_hook(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = _write_script(
        tmp_path,
        textwrap.dedent(
            """
            import numpy as np

            def build():
                import keras
                model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)], name="hooked")
                model.compile(optimizer="sgd", loss="mse")
                return model

            def tfaccel_tune():
                x = np.zeros((128, 8), "float32")
                return dict(model_fn=build, data=(x, np.zeros((128, 3), "float32")),
                            space={"batch_size": [16], "precision": ["float32"], "jit": [False],
                                   "feed": ["numpy"]},
                            model_name="hooked_model")
            """
        ),
    )
    code = main(["tune", str(script), "--budget", "30", "--sample-seconds", "0.05",
                 "--rounds", "3", "--no-save", "--no-progress", "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["model_name"] == "hooked_model"
    assert doc["best"]["batch_size"] == 16
    ran = [t for t in doc["trials"] if t["status"] != "skipped"]
    [skipped] = [t for t in doc["trials"] if t["status"] == "skipped"]
    assert len(ran) == 1 and skipped["config"]["steps_per_execution"] == 8
    assert "needs 16 batches of data" in skipped["note"]  # 128 examples hold 8 batches of 16


# --- bad input --------------------------------------------------------------------------------


def test_a_model_fn_that_raises_is_named_with_its_traceback() -> None:
    def broken_model_fn() -> Any:
        raise ValueError("units must be positive, got -3")

    with pytest.raises(ModelFnError) as info:
        tfaccel.tuning.tune(broken_model_fn, tiny_data(), 60, SMALL_SPACE, **FAST)
    text = str(info.value)
    assert "Your model_fn" in text and "broken_model_fn" in text
    assert "ValueError: units must be positive, got -3" in text
    assert 'raise ValueError("units must be positive, got -3")' in text  # their traceback


def test_an_uncompiled_model_is_a_clear_error() -> None:
    def uncompiled() -> Any:
        import keras

        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])

    with pytest.raises(ModelFnError, match="not compiled"):
        tfaccel.tuning.tune(uncompiled, tiny_data(), 60, SMALL_SPACE, **FAST)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ((np.zeros((0, 8)), np.zeros(0)), "The training data is empty"),
        (np.zeros((10, 8)), "not a pair (x, y)"),
        ((np.zeros((10, 8)), np.zeros(9)), "different lengths"),
        ((3, 4), "has no length"),
        (({"image": np.zeros((10, 8))}, np.zeros(9)), "9 rows of y"),
    ],
)
def test_bad_data_is_a_clear_error(data: Any, fragment: str) -> None:
    with pytest.raises(TuneError, match="Fix:") as info:
        tfaccel.tuning.tune(tiny_model_fn, data, 60, SMALL_SPACE, **FAST)
    assert fragment in str(info.value)


def test_a_budget_too_small_for_one_trial_says_how_much() -> None:
    with pytest.raises(BudgetError) as info:
        tfaccel.tuning.tune(tiny_model_fn, tiny_data(), 0.5, SMALL_SPACE, sample_s=1.0, store=False)
    text = str(info.value)
    assert "too small for one trial" in text and "at least 4 s" in text and "budget_s=4" in text


def test_unknown_space_key_is_a_clear_error() -> None:
    with pytest.raises(SpaceError, match=r"unknown key 'precison'.*'precision'"):
        tfaccel.tuning.tune(tiny_model_fn, tiny_data(), 60, {"precison": ["float32"]}, **FAST)


def test_threads_need_a_script_or_reference_model() -> None:
    with pytest.raises(SpaceError, match="tune_script"):
        tfaccel.tuning.tune(tiny_model_fn, tiny_data(), 60, {"threads": [None, 1]}, **FAST)


def test_cli_errors_exit_2_with_the_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["tune", "--no-progress"]) == 2
    assert "SCRIPT or --model" in capsys.readouterr().err
    empty = _write_script(tmp_path, "x = 1\n")  # a script as written, run up to its fit
    assert main(["tune", str(empty), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "does not say what to tune" in err and "ended without calling model.fit" in err
    raising = _write_script(tmp_path, "import numpy\nraise RuntimeError('no GPU found here')\n")
    assert main(["tune", str(raising), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "raised RuntimeError before model.fit, at train.py:2: no GPU found here" in err
    hook = _write_script(tmp_path, "def model_fn():\n    pass\n\ndata = 1\n")
    assert main(["tune", str(hook), "--no-progress"]) == 2  # a model_fn script: read as before
    assert "The training data is not a pair (x, y)" in capsys.readouterr().err
    assert main(["tune", "--model", "resnet99", "--no-progress"]) == 2
    assert "Unknown model 'resnet99'" in capsys.readouterr().err
    assert main(["tune", "--model", "mlp", "--space", "jit", "--no-progress"]) == 2
    assert "KEY=VALUES" in capsys.readouterr().err


# --- OOM in the middle of a trial ---------------------------------------------------------------


def test_oom_mid_trial_releases_it_and_the_search_goes_on() -> None:
    import keras
    import tensorflow as tf

    big_models: list[weakref.ref[Any]] = []
    seen_after_oom: list[bool] = []

    class OomAtBatch64(keras.Sequential):
        """Runs out of memory on its second fit at batch 64: during timing, not warm-up."""

        fits = 0

        def fit(self, *args: Any, **kwargs: Any) -> Any:
            self.fits += 1
            if kwargs.get("batch_size") != 64 and big_models and not seen_after_oom:
                # the first fit after the OOM: a model freed then stays freed (a dead weak
                # reference never comes back), so one collection answers for every later fit
                gc.collect()
                seen_after_oom.append(big_models[0]() is not None)
            if kwargs.get("batch_size") == 64 and self.fits >= 2:
                big_models.append(weakref.ref(self))
                raise tf.errors.ResourceExhaustedError(
                    None, None, "OOM when allocating tensor with shape[64,16]"
                )
            return super().fit(*args, **kwargs)

    def model_fn() -> Any:
        model = OomAtBatch64([keras.Input((8,)), keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
        return model

    space = {
        "batch_size": [16, 32, 64],
        "precision": ["float32"],
        "jit": [False],
        "feed": ["numpy"],
    }
    result = tfaccel.tuning.tune(model_fn, tiny_data(), 60, space, **FAST)
    oom = next(t for t in result.trials if t.config.batch_size == 64)
    assert oom.status == "oom" and "OOM when allocating" in oom.note
    assert result.best is not None and result.best.batch_size in (16, 32)
    assert seen_after_oom and not any(seen_after_oom)  # the OOM trial's model was freed


def test_default_is_oom_takes_resource_exhausted() -> None:
    import tensorflow as tf

    assert tfaccel.tuning.is_oom_error(tf.errors.ResourceExhaustedError(None, None, "OOM"))
    assert not tfaccel.tuning.is_oom_error(tf.errors.InvalidArgumentError(None, None, "shape"))


# --- the results store, read back by setup() ----------------------------------------------------


class _Scripted:
    """A runner with injected timings: float32 with XLA clearly fastest."""

    device = "cpu"
    model_name = "reference_cnn"
    model_fingerprint: str | None = None

    def prepare(self, config: Config) -> None:
        pass

    def sample(self, config: Config) -> float:
        rate = 3000.0 if (config.jit and config.precision == "float32") else 1000.0
        return 1.0 / rate

    def release(self, config: Config, *, failed: bool) -> None:
        pass


class _Interrupting(_Scripted):
    calls = 0

    def sample(self, config: Config) -> float:
        self.calls += 1
        if self.calls > 10:  # after the screening rung (8 samples)
            raise KeyboardInterrupt
        return super().sample(config)


def test_stored_result_is_what_setup_auto_applies(tmp_path: Path) -> None:
    from tfaccel import architecture, models

    db = tmp_path / "tfaccel" / "results.sqlite"
    space = {"batch_size": [64], "precision": ["float32", "mixed_bfloat16"], "jit": [False, True]}
    runner = _Scripted()
    runner.model_fingerprint = architecture.fingerprint(models.build("reference_cnn", tiny=True))
    result = tfaccel.tuning.tune(
        tiny_model_fn, tiny_data(), 60, space, **{**FAST, "store": db}, runner=runner
    )
    assert result.best == Config(64, jit=True) and result.run_id is not None
    assert result.model_fingerprint == runner.model_fingerprint
    code = (
        "import json, sys, tfaccel\n"
        "from tfaccel import models\n"
        "model = models.build('reference_cnn', tiny=True) if sys.argv[1] == 'same' else None\n"
        "config = tfaccel.setup(jit='auto', precision='auto', model=model)\n"
        "print(json.dumps({k: [config[k].applied, config[k].reason] for k in ('jit', 'precision')}))"
    )

    def applied(which: str) -> dict[str, list[Any]]:
        done = subprocess.run(
            [sys.executable, "-c", code, which],
            capture_output=True,
            text=True,
            env=clean_env({"XDG_DATA_HOME": str(tmp_path)}),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    same = applied("same")  # the architecture that was measured
    assert same["jit"] == [True, "measured here on cpu (reference_cnn): XLA faster"]
    assert same["precision"] == ["float32", "measured here on cpu (reference_cnn): float32 fastest"]
    unmeasured = applied("none")  # no model: nothing is borrowed, the rule decides
    for setting in ("jit", "precision"):
        reason = unmeasured[setting][1]
        assert reason.startswith("no model given to setup(model=...)"), reason
        assert "decided by rule" in reason
    assert unmeasured["jit"][0] is False  # the rule on a CPU


def test_ctrl_c_returns_the_best_so_far_and_stores_it_as_incomplete(tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    space = {"batch_size": [16, 32, 64, 128], "precision": ["float32"], "jit": [False, True]}
    result = tfaccel.tuning.tune(
        tiny_model_fn, tiny_data(), 60, space, **{**FAST, "store": db}, runner=_Interrupting()
    )
    assert result.interrupted and result.best is not None
    assert "interrupted" in str(result)
    with store.ResultsStore(db) as opened:
        [run] = opened.runs()
        assert run.status == "incomplete"
    assert (
        store.best_setting(inventory.current().fingerprint.digest, "reference_cnn", "jit", path=db)
        is None
    )


def test_tune_with_auto_precision_and_a_store_probes_the_machine_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfaccel import probe

    calls: list[dict[str, Any]] = []
    real = probe.snapshot

    def counted(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(probe, "snapshot", counted)
    db = tmp_path / "results.sqlite"
    space = {"batch_size": [64], "precision": "auto", "jit": [False, True], "feed": ["numpy"]}
    result = tfaccel.tuning.tune(
        tiny_model_fn, tiny_data(), 60, space, **{**FAST, "store": db}, runner=_Scripted()
    )
    assert result.best is not None and result.run_id is not None  # searched and stored
    assert "float32" in {t.config.precision for t in result.trials}
    assert calls == [{"libraries": False}]


class DeviceFull(Exception):
    """An out-of-memory error of some other framework."""


class _FullAbove64(_Scripted):
    def prepare(self, config: Config) -> None:
        if config.batch_size > 64:
            raise DeviceFull("no room")


def test_a_custom_is_oom_predicate_is_used() -> None:
    space = {"batch_size": [32, 64, 128], "precision": ["float32"], "jit": [False]}
    result = tfaccel.tuning.tune(
        tiny_model_fn,
        tiny_data(),
        60,
        space,
        is_oom=lambda exc: isinstance(exc, DeviceFull),
        **FAST,
        runner=_FullAbove64(),
    )
    assert {t.status for t in result.trials if t.config.batch_size == 128} == {"oom"}
    with pytest.raises(TuneError, match="first trial"):  # not an OOM by this predicate
        tfaccel.tuning.tune(
            tiny_model_fn,
            tiny_data(),
            60,
            {**space, "batch_size": [128]},
            is_oom=lambda exc: False,
            **FAST,
            runner=_FullAbove64(),
        )


def test_progress_bar_runs(capsys: pytest.CaptureFixture[str]) -> None:
    result = tfaccel.tuning.tune(
        tiny_model_fn,
        tiny_data(),
        60,
        {"batch_size": [64], "precision": ["float32"], "jit": [False, True]},
        **{**FAST, "progress": True},
        runner=_Scripted(),
    )
    assert result.best == Config(64, jit=True)
    assert capsys.readouterr().out == ""  # the bar goes to stderr


def test_tf_runner_releases_after_failure() -> None:
    x, y = tiny_data()
    runner = TfRunner(tiny_model_fn, x, y, sample_s=0.02)
    config = Config(32)
    runner.prepare(config)
    assert runner.holds(config) and runner.sample(config) > 0
    runner.release(config, failed=True)
    assert not runner.holds(config)


# --- threads, in fresh processes ----------------------------------------------------------------


def test_thread_stage_in_worker_processes() -> None:
    from tfaccel.tuning.threads import thread_stage

    trials = thread_stage(
        {"model": "reference_cnn", "smoke": True, "examples": 256},
        Config(32, feed="pipeline"),
        (None, (1, 1)),
        rung=3,
        sample_s=0.05,
        remaining=lambda: 300.0,
        rounds=1,
        samples_per_process=2,
    )
    assert [t.config.threads for t in trials] == [None, (1, 1)]
    for trial in trials:
        assert trial.status == "ok", trial.note
        assert len(trial.rung_samples[3]) == 2


def test_thread_values_reach_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    from tfaccel.tuning import threads

    launched: list[dict[str, Any]] = []

    def fake_launch(spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        launched.append(spec)
        fast = spec["config"]["threads"] == [2, 1]
        return {"samples": [1 / (3000.0 if fast else 1000.0)] * 3, "prepare_s": 1.0}

    monkeypatch.setattr(threads, "launch_worker", fake_launch)
    result = tfaccel.tuning.tune_model(
        "reference_cnn",
        60,
        {
            "batch_size": [16],
            "precision": ["float32"],
            "jit": [False],
            "steps_per_execution": [1],
            "feed": ["numpy"],
            "threads": [None, (2, 1)],
        },
        smoke=True,
        **FAST,
    )
    assert len(launched) == 4  # two settings x two rounds
    assert result.best == Config(16, threads=(2, 1))
    assert result.setup_kwargs()["threads"] == (2, 1)
    assert "threads (fresh processes)" in result.reason


# --- import cost --------------------------------------------------------------------------------


def test_importing_tune_does_not_import_tensorflow() -> None:
    code = "import sys, tfaccel.tuning, tfaccel.cli.tune; print('tensorflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
