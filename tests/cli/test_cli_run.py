"""``tfaccel run SCRIPT``: the settings reach the script, its arguments and exit status pass through.

One real process shows the whole path with TensorFlow; the rest call ``main`` in this process
with ``tfaccel.runtime.setup`` replaced by a recorder, since they test what happens around it
(argument handling, exit statuses, tracebacks), not TensorFlow.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import clean_env

from tfaccel import runtime
from tfaccel.cli import main

USER_SCRIPT = """
import json, sys
import tensorflow as tf

devices = [d.name for d in tf.config.list_logical_devices("CPU")]
print(json.dumps({
    "argv": sys.argv,
    "name": __name__,
    "cpus": devices,
    "threads": tf.config.threading.get_intra_op_parallelism_threads(),
    "jit": tf.config.optimizer.get_jit(),
}))
sys.exit(int(sys.argv[-1]))
"""


def test_run_applies_settings_then_runs_the_script_with_its_arguments(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(USER_SCRIPT)
    config_file = tmp_path / "config.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfaccel",
            "run",
            "--logical-devices",
            "2",
            "--threads",
            "2",
            "--jit",
            "on",
            "--json-config",
            str(config_file),
            str(script),
            "--epochs",
            "3",
            "--threads",
            "9",
            "--",
            "3",
        ],
        capture_output=True,
        text=True,
        env=clean_env({"TFACCEL_SEED": "5"}),
        timeout=300,
    )
    assert done.returncode == 3, done.stderr  # the script's exit status
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["argv"] == [str(script), "--epochs", "3", "--threads", "9", "--", "3"]
    assert seen["name"] == "__main__"
    assert seen["cpus"] == ["/device:CPU:0", "/device:CPU:1"]
    assert seen["threads"] == 2 and seen["jit"] == "autoclustering"
    assert "tfaccel runtime setup:" in done.stderr and "logical_devices  applied" in done.stderr
    settings = json.loads(config_file.read_text())["settings"]
    assert settings["seed"]["source"] == "TFACCEL_SEED" and settings["seed"]["applied"] == 5


# --- around setup(), in this process ---------------------------------------------------------


@pytest.fixture
def setup_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace setup() by a recorder that returns an empty RuntimeConfig."""
    calls: list[dict[str, Any]] = []

    def fake_setup(**kwargs: Any) -> runtime.RuntimeConfig:
        calls.append(kwargs)
        return runtime.RuntimeConfig(settings=())

    monkeypatch.setattr(runtime, "setup", fake_setup)
    return calls


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "user_script.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_options_are_parsed_into_setup_arguments(
    tmp_path: Path, setup_calls: list[dict[str, Any]]
) -> None:
    script = _script(tmp_path, "pass\n")
    options = ["--devices", "0,1", "--memory", "0.5", "--precision", "auto", "--jit", "off"]
    options += ["--threads", "4,2", "--logical-devices", "2", "--deterministic", "--seed", "1"]
    assert main(["run", *options, "--quiet", script]) == 0
    assert setup_calls == [
        {
            "devices": (0, 1),
            "memory": 0.5,
            "precision": "auto",
            "jit": False,
            "threads": (4, 2),
            "logical_devices": 2,
            "deterministic": True,
            "seed": 1,
        }
    ]


@pytest.mark.parametrize(
    ("body", "status", "stderr"),
    [
        ("import sys\nsys.exit()\n", 0, ""),
        ("import sys\nsys.exit(5)\n", 5, ""),
        ("raise SystemExit('bye')\n", 1, "bye"),
        ("x = 1\n", 0, ""),
    ],
)
def test_the_scripts_exit_status_passes_through(
    tmp_path: Path,
    setup_calls: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    body: str,
    status: int,
    stderr: str,
) -> None:
    assert main(["run", "--quiet", _script(tmp_path, body)]) == status
    assert capsys.readouterr().err.strip() == stderr


def test_an_exception_in_the_script_shows_its_own_traceback(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(
        tmp_path,
        """
        def load(path):
            raise FileNotFoundError(path)

        load("data.csv")
        """,
    )
    assert main(["run", "--quiet", script]) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1].startswith(f'  File "{script}", line 5, in <module>')
    assert lines[-1] == "FileNotFoundError: data.csv"
    assert "runpy" not in err and "tfaccel" not in err


def test_a_base_exception_of_the_scripts_own_is_its_error_too(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """An exception class derived from BaseException (a library's stop signal): shown as
    Python shows it, exit 1, no frame of tfaccel's."""
    script = _script(
        tmp_path,
        """
        class Stop(BaseException):
            pass

        raise Stop("halt")
        """,
    )
    assert main(["run", "--quiet", script]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "Stop: halt"
    assert "tfaccel" not in err and "runpy" not in err


def test_a_syntax_error_in_the_script_is_shown_without_tfaccel_frames(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--quiet", _script(tmp_path, "def broken(:\n")]) == 1
    err = capsys.readouterr().err
    assert "SyntaxError" in err and "tfaccel" not in err


def test_argv_and_path_are_restored_and_dashes_after_the_script_are_kept(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(
        tmp_path, "import sys\nprint(sys.argv, sys.path[0] == __file__.rsplit('/', 1)[0])\n"
    )
    argv, path = sys.argv[:], sys.path[:]
    assert main(["run", "--quiet", "--", script, "a", "--", "-b"]) == 0
    assert capsys.readouterr().out.strip() == f"[{script!r}, 'a', '--', '-b'] True"
    assert sys.argv == argv and sys.path == path


def test_the_configuration_goes_to_stderr_unless_quiet(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, "print('hello')\n")
    assert main(["run", script]) == 0
    captured = capsys.readouterr()
    assert captured.out == "hello\n"
    assert captured.err.startswith("tfaccel runtime setup:")


def test_missing_script_is_a_usage_error_before_any_setup(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--memory", "growth", str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err
    assert "nope.py' does not exist" in err and "Fix:" in err
    assert main(["run", "--quiet"]) == 2
    assert "No script to run" in capsys.readouterr().err
    assert main(["run", "--json"]) == 2
    captured = capsys.readouterr()
    assert "No script to run" in captured.err  # and as the one JSON document on stdout
    assert "No script to run" in json.loads(captured.out)["error"]["what"]
    assert setup_calls == []


def test_bad_option_value_is_a_usage_error_naming_the_option(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--memory", "-5", _script(tmp_path, "pass\n")]) == 2
    assert "--memory -5 is not a valid GPU memory setting" in capsys.readouterr().err
    assert setup_calls == []


def test_a_setup_error_is_reported_and_the_script_does_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(**kwargs: Any) -> runtime.RuntimeConfig:
        raise runtime.RuntimeSetupError("GPU 3 does not exist", fix="pass an index that exists")

    monkeypatch.setattr(runtime, "setup", refuse)
    assert main(["run", "--devices", "3", _script(tmp_path, "print('ran')\n")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "tfaccel: error: GPU 3 does not exist" in captured.err


def test_unwritable_json_config_is_a_usage_error(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing-dir" / "config.json"
    script = _script(tmp_path, "print('ran')\n")
    assert main(["run", "--quiet", "--json-config", str(target), script]) == 2
    captured = capsys.readouterr()
    assert "Cannot write" in captured.err and "(given with --json-config)" in captured.err
    assert "does not exist" in captured.err and captured.out == ""
    assert setup_calls == [] and not target.parent.exists()  # refused before the setup


def test_json_prints_one_document_after_the_script_whose_output_goes_to_stderr(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, "import sys\nprint('hello', sys.argv[1:])\nsys.exit(3)\n")
    assert main(["run", "--json", "--memory", "growth", script, "x"]) == 3
    captured = capsys.readouterr()
    doc = json.loads(captured.out)  # the whole of stdout
    assert doc == {
        "command": "run",
        "script": script,
        "args": ["x"],
        "exit_status": 3,
        "config": {"settings": {}, "warnings": []},
    }
    assert captured.err == "hello ['x']\n"  # the script's output, and no configuration text
    assert setup_calls == [{"memory": "growth"}]


def test_a_tfaccel_option_after_the_script_goes_to_the_script_with_a_warning(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, "import sys\nprint(sys.argv[1:])\n")
    argv = ["run", "--quiet", script, "--json", "--memory=growth", "--", "--seed", "1"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == "['--json', '--memory=growth', '--', '--seed', '1']\n"
    warnings = captured.err.splitlines()
    assert len(warnings) == 2  # nothing for --seed: after `--` it is the script's
    assert warnings[0] == (
        f"tfaccel: warning: --json after {script} was passed to the script as its own "
        f"argument; to give it to tfaccel run, put it before the script: "
        f"tfaccel run --json ... {script}"
    )
    assert warnings[1].startswith("tfaccel: warning: --memory after")
    assert setup_calls == [{}]


def test_an_option_prefix_is_not_taken_for_a_longer_option(
    tmp_path: Path, setup_calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path, "print('ran')\n")
    assert main(["run", "--json-conf", str(tmp_path / "c.json"), script]) == 2
    assert "unrecognized arguments: --json-conf" in capsys.readouterr().err
    assert setup_calls == []


def test_a_script_that_forks_is_reported_once(tmp_path: Path) -> None:
    """The script forks a child that runs to the script's end, as Python's own forked
    children do: the child ends there, and tfaccel reports once (one JSON document), with
    the parent's exit status."""
    script = _script(
        tmp_path,
        """
        import os

        pid = os.fork()
        if pid:
            os.waitpid(pid, 0)
            print("parent done")
        else:
            print("child done")
        """,
    )
    done = subprocess.run(
        [sys.executable, "-m", "tfaccel", "run", "--json", "--quiet", script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(done.stdout)  # one document: a second would not parse
    assert document["exit_status"] == 0
    assert "parent done" in done.stderr and "child done" in done.stderr
