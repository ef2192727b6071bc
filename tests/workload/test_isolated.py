"""tfaccel.workload.isolated: the capture in a child process, its result and its errors brought
back; and planning.source.plan_script on it. One child process (TensorFlow is imported there)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

keras = pytest.importorskip("keras")

from tfaccel.core.errors import UsageError  # noqa: E402
from tfaccel.planning.api import PlanError  # noqa: E402
from tfaccel.planning.source import plan_script  # noqa: E402
from tfaccel.workload import CaptureError  # noqa: E402
from tfaccel.workload.isolated import _error_dict, _rebuilt, run_isolated  # noqa: E402


def test_plan_script_plans_in_a_child_and_leaves_this_process_as_it_was(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import keras
            import numpy as np

            print("the script's own output")
            keras.mixed_precision.set_global_policy("mixed_bfloat16")
            model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)], name="child_net")
            model.compile(optimizer="sgd", loss="mse")
            model.fit(np.ones((30, 6), "float32"), np.zeros((30, 3), "float32"), batch_size=10)
            """
        )
    )
    document = plan_script(script, devices=["a100-40gb"])
    assert (document["model"], document["batch_size"], document["optimizer"]) == (
        "child_net",
        10,
        "SGD",
    )
    assert document["precision"] == "mixed_bfloat16"
    assert document["workload"]["origin"]["call"] == "train.py:9"
    assert keras.mixed_precision.global_policy().name == "float32"  # this process untouched


def test_the_childs_errors_come_back_as_their_own_class() -> None:
    capture_error = CaptureError(
        "The script train.py raised KeyError before model.fit, at train.py:3: 'lr'",
        reason="raised",
        where="train.py:3",
        fit_calls=1,
        expected="a script that reaches model.fit call #2 without error",
        received="this traceback",
        fix="fix the error",
    )
    back = _rebuilt(_error_dict(capture_error))
    assert isinstance(back, CaptureError) and str(back) == str(capture_error)
    assert (back.reason, back.where, back.fit_calls) == ("raised", "train.py:3", 1)
    plan_error = _rebuilt(_error_dict(PlanError("no trace", expected="a", received="b", fix="c")))
    assert type(plan_error) is PlanError and plan_error.render() == (
        "no trace. Expected: a. Received: b. Fix: c"
    )


def test_a_task_that_is_not_tfaccels_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    with pytest.raises(UsageError, match="not a function of tfaccel"):
        run_isolated(script, task="os:system")
