"""The one reader of a script's hooks (``tfaccel.scripts.read_hooks``), for tune, plan and
``doctor --model``: both forms, which one wins, and each way a script can fail, under the error
class of the command that reads it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tfaccel.core.errors import TfaccelError
from tfaccel.planning.api import PlanError
from tfaccel.scripts import read_hooks
from tfaccel.tuning._errors import TuneError

MODULE = "__tfaccel_test_hooks__"


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(text)
    return path


def test_module_level_model_fn_and_data_function(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        "calls = []\n"
        "def model_fn():\n    return 'model'\n"
        "def data():\n    calls.append(1)\n    return ([1, 2], [3, 4])\n"
        "if __name__ == '__main__':\n    raise SystemExit('training ran')\n",
    )
    hooks = read_hooks(script, MODULE, TuneError)
    assert hooks.model_fn() == "model"
    assert hooks.data == ([1, 2], [3, 4])  # the function was called once, here
    assert hooks.space is None and hooks.model_name is None and hooks.pipeline_kwargs is None
    only_model = read_hooks(script, MODULE, PlanError, data=False)
    assert only_model.model_fn() == "model" and only_model.data is None


def test_a_generator_function_is_the_data_itself(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        "def model_fn():\n    return 'model'\ndef data():\n    yield 1, 2\n",
    )
    hooks = read_hooks(script, MODULE, TuneError)
    assert callable(hooks.data) and list(hooks.data()) == [(1, 2)]


def test_tfaccel_tune_gives_everything_to_tune_and_is_not_called_for_the_model_alone(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "called"
    script = _script(
        tmp_path,
        "from pathlib import Path\n"
        "def model_fn():\n    return 'module model'\n"
        "def tfaccel_tune():\n"
        f"    Path({str(marker)!r}).write_text('x')\n"
        "    return dict(model_fn=lambda: 'hook model', data=(1, 2), space={'jit': [True]},\n"
        "                model_name='net', pipeline_kwargs={'cache': False})\n",
    )
    plan = read_hooks(script, MODULE, PlanError, data=False)
    assert plan.model_fn() == "module model" and not marker.exists()
    tune = read_hooks(script, MODULE, TuneError)
    assert marker.exists()
    assert tune.model_fn() == "hook model" and tune.data == (1, 2)
    assert tune.space == {"jit": [True]} and tune.model_name == "net"
    assert tune.pipeline_kwargs == {"cache": False}


def test_tfaccel_tune_alone_gives_plan_its_model(tmp_path: Path) -> None:
    script = _script(tmp_path, "def tfaccel_tune():\n    return dict(model_fn=lambda: 'm')\n")
    assert read_hooks(script, MODULE, PlanError, data=False).model_fn() == "m"
    with pytest.raises(TuneError, match=r"did not return a dict with model_fn and data"):
        read_hooks(script, MODULE, TuneError)


@pytest.mark.parametrize(
    ("text", "data", "message"),
    [
        ("x = 1\n", True, "The script train.py does not say what to tune"),
        ("x = 1\n", False, "The script train.py defines no model_fn"),
        ("model_fn = None\n", False, "The script train.py defines no model_fn"),
        ("def model_fn():\n    pass\n", True, "does not say what to tune"),  # no data
        (
            "def tfaccel_tune():\n    raise KeyError('data')\n",
            False,
            "tfaccel_tune() in train.py raised KeyError: 'data'",
        ),
        (
            "def tfaccel_tune():\n    return [1]\n",
            False,
            "tfaccel_tune() in train.py did not return a dict with model_fn",
        ),
        (
            "def tfaccel_tune():\n    return dict(model_fn=1, data=2)\n",
            True,
            "returned a model_fn that is not callable",
        ),
        (
            "def tfaccel_tune():\n    return dict(model_fn=len, data=2, batch=3)\n",
            True,
            "returned unknown keys",
        ),
        (
            "def model_fn():\n    pass\ndef data():\n    return 1 / 0\n",
            True,
            "data() in train.py raised ZeroDivisionError",
        ),
        ("import sys\nsys.exit(3)\n", True, "exited while loading (sys.exit(3))"),
        ("x = 1 / 0\n", False, "raised ZeroDivisionError while loading"),
    ],
)
@pytest.mark.parametrize("error", [TuneError, PlanError])
def test_each_failure_is_one_message_under_the_readers_error_class(
    tmp_path: Path, text: str, data: bool, message: str, error: type[TfaccelError]
) -> None:
    script = _script(tmp_path, text)
    with pytest.raises(error, match=re.escape(message)) as raised:
        read_hooks(script, MODULE, error, data=data)
    if "raised" in message:  # the user's own frames are shown, tfaccel's are not
        assert 'File "' + str(script) in raised.value.received
        assert "runpy" not in raised.value.received
