"""What a user sees: every cell, command and evidence printed whole (piped, and on a narrow
terminal), ``--json`` as one JSON document on stdout, TensorFlow's start-up noise kept off the
terminal in tfaccel's own commands unless ``--verbose`` or the user's TF_CPP_MIN_LOG_LEVEL says
otherwise."""

from __future__ import annotations

import argparse
import io
import json
import os
import pty
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from bench_helpers import sample_run

from tfaccel import inventory
from tfaccel.bench import BenchResult
from tfaccel.cli import COMMANDS, build_parser, main
from tfaccel.cli._output import (
    RichProgress,
    filter_tensorflow_log,
    json_document,
    print_json,
    quiet_tensorflow,
    set_verbose,
)
from tfaccel.diagnosis import diagnose
from tfaccel.report.findings import findings_terminal, wrap_words
from tfaccel.report.tables import report_tables
from tfaccel.report.text import WholeConsole, render_bench, render_inventory
from tfaccel.snapshot import save_snapshot

LOGS = Path(__file__).parents[1] / "data" / "doctor-logs"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
GIB = 2**30


def _tfaccel(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tfaccel", *args],
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )


def _narrow(renderable: Any, width: int) -> str:
    """What a terminal ``width`` columns wide receives (colour off, to read it back)."""
    out = io.StringIO()
    WholeConsole(file=out, width=width, color_system=None, highlight=False).print(renderable)
    return out.getvalue()


def _busy_gpu_snapshot() -> Any:
    from machine_scenarios import gpu, gpu_machine

    busy = gpu(name="NVIDIA A100-SXM4-80GB", cc="8.0", sms=108, total_gib=80, used_gib=76)
    return gpu_machine(gpus=[busy])


# --- 1. printed whole ---------------------------------------------------------------------------


@pytest.mark.parametrize("log", sorted(p.name for p in LOGS.glob("[0-9]*.log")))
def test_piped_doctor_prints_every_fix_and_evidence_whole(
    log: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["doctor", "--log", str(LOGS / log), "--json"])
    causes = json.loads(capsys.readouterr().out)["log"]["causes"]
    assert causes
    main(["doctor", "--log", str(LOGS / log)])
    lines = capsys.readouterr().out.splitlines()
    assert "…" not in "\n".join(lines)
    for cause in causes:
        assert any(line.endswith(f"{cause['id']}  {cause['title']}") for line in lines)
        for evidence in cause["evidence"]:
            assert any(line.endswith(f"- {evidence}") for line in lines), evidence
        fix = cause["fix"].splitlines()[0]
        assert any(line.endswith(f"fix: {fix}") for line in lines), fix
    assert all(line == line.rstrip() for line in lines)  # no padding to a terminal's width


def test_a_fix_command_is_one_line_piped_and_on_a_narrow_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
    snapshot = _busy_gpu_snapshot()
    path = tmp_path / "busy.json"
    save_snapshot(snapshot, str(path))
    assert main(["doctor", "--snapshot", str(path)]) == 0
    piped = capsys.readouterr().out
    fix = diagnose(snapshot).finding("gpu_memory_in_use")
    assert fix is not None and fix.fix is not None and fix.fix.startswith(command)
    assert re.search(r"^warn +gpu_memory_in_use +Most memory of .* OOM risk$", piped, re.M)
    assert f"fix: {fix.fix}\n" in piped
    narrow = _narrow(findings_terminal(diagnose(snapshot)), 60)
    assert f"fix: {fix.fix}\n" in narrow and "…" not in narrow
    for line in narrow.splitlines():  # past the edge: a fix, or what cannot be broken
        if len(line) > 60 and "fix: " not in line:
            assert len(wrap_words(line.strip().removeprefix("- "), 1)) == 1, line


def test_evidence_wraps_only_at_spaces_outside_commands() -> None:
    text = "run `tfaccel doctor --deep` then python -c 'import tensorflow as tf; print(tf)' again"
    lines = wrap_words(text, 12)
    assert "`tfaccel doctor --deep`" in lines
    assert "'import tensorflow as tf; print(tf)'" in lines
    assert " ".join(lines) == text
    assert wrap_words("tensorflow/stream_executor/platform/default/dso_loader.cc:64]", 10) == [
        "tensorflow/stream_executor/platform/default/dso_loader.cc:64]"
    ]


def test_gpu_table_cells_are_whole_piped_and_narrow(capsys: pytest.CaptureFixture[str]) -> None:
    inv = inventory.build(_busy_gpu_snapshot())
    from tfaccel.report.text import console

    console().print(render_inventory(inv))
    piped = capsys.readouterr().out
    for width, text in ((None, piped), (40, _narrow(render_inventory(inv), 40))):
        assert "…" not in text, width
        for cell in ("8.0", "108", "76.0 GiB / 80.0 GiB", "560.35.03"):
            assert cell in text, (width, cell)
        words = set(text.split())
        assert {"NVIDIA", "A100-SXM4-80GB"} <= words
    row = next(line for line in piped.splitlines() if "A100" in line)
    assert "NVIDIA A100-SXM4-80GB" in row and "76.0 GiB / 80.0 GiB" in row  # one line each


def _bench_result() -> BenchResult:
    return BenchResult.from_run(sample_run())


def test_bench_tables_print_every_cell_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from tfaccel.report.text import console

    result = _bench_result()
    console().print(render_bench(result))
    piped = capsys.readouterr().out
    tables = report_tables(result.summary, None)
    assert tables
    for width, text in ((None, piped), (40, _narrow(render_bench(result), 40))):
        assert "…" not in text, width
        words = set(text.replace("│", " ").replace("┃", " ").split())
        for table in tables:
            for row in table.rows:
                for index, cell in enumerate(row):
                    if index in table.numeric:
                        assert str(cell) in text, (width, table.key, cell)
                    assert set(str(cell).split()) <= words, (width, table.key, cell)
    for table in tables:  # piped: each row on one line, its cells in order
        for row in table.rows:
            pattern = r".*".join(re.escape(str(c)) for c in row)
            assert re.search(pattern, piped), row


def test_the_progress_bar_never_cuts_its_count_or_time() -> None:
    bar = RichProgress("probing the machine")
    bar.start(49)
    for _ in range(49):
        bar.advance("reference_cnn on cpu: tf.data bs256 mixed_bfloat16 jit=False")
    shown = _narrow(bar._progress.get_renderable(), 50)
    assert "49/49" in shown and re.search(r"\d:\d\d:\d\d", shown) and "…" not in shown
    assert {"reference_cnn", "mixed_bfloat16", "jit=False"} <= set(shown.split())


def test_progress_off_a_terminal_is_plain_status_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with RichProgress("probing the machine") as bar:
        bar.status("importing TensorFlow")
        bar.start(3)
        for _ in range(3):
            bar.advance("matmul")
    lines = capsys.readouterr().err.splitlines()
    assert lines[:3] == [
        "tfaccel: probing the machine",
        "tfaccel: importing TensorFlow",
        "tfaccel: measuring: 3 timed calls",
    ]
    assert re.fullmatch(r"tfaccel: 3/3 timed calls in \d+ s", lines[3])
    assert not [line for line in lines if "\x1b" in line or "\r" in line]


def test_a_narrow_terminal_gets_wrapped_text_and_whole_commands() -> None:
    """The real command on a pseudo-terminal 50 columns wide."""
    log = LOGS / "10_missing_cuda_libs.log"
    primary, secondary = pty.openpty()
    env = {**os.environ, "COLUMNS": "50", "TERM": "xterm"}
    with subprocess.Popen(
        [sys.executable, "-m", "tfaccel", "doctor", "--log", str(log)],
        stdout=secondary,
        stderr=secondary,
        env=env,
    ) as proc:
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=60)
    os.close(primary)
    text = ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")
    assert "…" not in text
    fix = (
        "fix: pip install 'tensorflow[and-cuda]'; to see each load attempt: "
        'TF_CPP_MAX_VLOG_LEVEL=3 python -c "import tensorflow as tf; '
        "print(tf.config.list_physical_devices('GPU'))\""
    )
    assert fix in text.splitlines()[-2]
    wrapped = [line for line in text.splitlines() if line.strip() and "fix: " not in line]
    # Wrapped at the terminal's 50 columns: a table too wide for them (a path without
    # spaces) runs past the edge instead of being cut, but most lines fit.
    assert len(wrapped) > 10
    assert sum(len(line) <= 50 for line in wrapped) >= 2 / 3 * len(wrapped), wrapped
    assert "tensorflow/stream_executor/platform/default/dso_loader.cc:64]" in text


# --- 2. --json is one document ----------------------------------------------------------------


def test_every_command_has_json_and_verbose() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, _module in COMMANDS:
        options = {o for action in sub.choices[name]._actions for o in action.option_strings}
        assert {"--json", "--verbose"} <= options, name
        assert "--verbose" in sub.choices[name].format_help()


def test_json_document_sends_everything_else_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with json_document():
        print("a line the script printed")
        print_json({"answer": 42})
    out, err = capsys.readouterr()
    assert json.loads(out) == {"answer": 42}
    assert err == "a line the script printed\n"


def test_json_document_moves_native_stdout_too() -> None:
    code = textwrap.dedent(
        """
        import os, sys
        from tfaccel.cli._output import json_document, print_json
        print("before")
        with json_document():
            os.system("echo from a child process")
            os.write(1, b"native write\\n")
            print("python print")
            print_json({"ok": True})
        print("after")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    before, _, after = done.stdout.partition("{")
    assert before == "before\n"
    assert json.loads("{" + after.removesuffix("after\n")) == {"ok": True}
    assert done.stdout.endswith("after\n")
    for line in ("from a child process", "native write", "python print"):
        assert line in done.stderr


SCRIPT_THAT_PRINTS = """
import os, time
from tfaccel.profile import StepTimer

print("the script's own output")
os.system("echo from its child process")
timer = StepTimer(batch_size=8)
for _ in range(15):
    with timer.step():
        time.sleep(0.002)
print("done")
"""


def test_profile_json_of_a_script_that_prints_is_one_json_document(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT_THAT_PRINTS)
    piped = subprocess.run(
        f"{sys.executable} -m tfaccel profile --json --quiet {script} "
        f"| {sys.executable} -m json.tool",
        shell=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert piped.returncode == 0, piped.stderr
    doc = json.loads(piped.stdout)
    assert doc["command"] == "profile" and doc["exit_status"] == 0
    assert doc["runs"][0]["measurement"]["figures"]["steps"] == 10
    for line in ("the script's own output", "from its child process", "done"):
        assert line in piped.stderr  # not lost: on stderr


GRAPH_MODE_SCRIPT = """
import numpy as np
import tensorflow as tf
import keras

tf.compat.v1.disable_eager_execution()  # a TF1-era line, left in a Keras 3 script
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
model.compile(optimizer="sgd", loss="mse")
model.fit(np.ones((16, 4), "float32"), np.ones((16, 2), "float32"), epochs=1)
"""


def test_profile_of_a_script_that_disables_eager_execution_shows_the_scripts_own_error(
    tmp_path: Path,
) -> None:
    # Keras 3's fit does not run in graph mode: the user sees what `python train.py` shows,
    # not a failure inside tfaccel's callback (which reads its counters eagerly)
    script = tmp_path / "train.py"
    script.write_text(GRAPH_MODE_SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "tfaccel", "profile", "--quiet", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Keras's own refusal (`python train.py` ends with the same line): the script's error
    assert "`tf.data.Dataset` only supports Python-style iteration" in done.stderr, done.stderr
    assert "numpy() is only available" not in done.stderr
    assert "input_wait.py" not in done.stderr and "keras_callback.py" not in done.stderr


# --- 3. TensorFlow's start-up noise ----------------------------------------------------------

# What `import tensorflow` printed on TensorFlow 2.21 (tensorflow-cpu, AMD EPYC), and what a
# CUDA build adds, as the doctor's log reader knows it.
STARTUP = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795400751.258919   26082 port.cc:153] oneDNN custom operations are on. You may see slightly different numerical results due to floating-point round-off errors from different computation orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.
I0000 00:00:1795400751.348583   26082 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.
To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.
E0000 00:00:1712345678.123456    1234 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered
W0000 00:00:1712345678.223456    1234 gpu_device.cc:2344] Cannot dlopen some GPU libraries.
E0000 00:00:1712345678.323456    1234 cuda_driver.cc:152] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
2024-01-08 21:30:47.213628: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is optimized
"""


def test_the_startup_filter_honours_the_log_level_and_the_doctors_benign_list() -> None:
    assert filter_tensorflow_log(STARTUP, 0) == STARTUP
    quiet = filter_tensorflow_log(STARTUP, 2, benign=True)
    assert quiet.splitlines() == [STARTUP.splitlines()[6]]  # the real error stays
    level_1 = filter_tensorflow_log(STARTUP, 1).splitlines()
    assert [line[:1] for line in level_1] == ["E", "W", "E"]  # the user's level: errors too
    assert "To enable the following instructions" not in "\n".join(level_1)
    assert filter_tensorflow_log("a line of its own\n" + STARTUP, 3).splitlines() == [
        "a line of its own"
    ]


def _quiet_child(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        """
        import os
        from tfaccel.cli import _output
        _output.quiet_tensorflow()
        import tensorflow as tf
        print(float(tf.reduce_sum(tf.ones([8, 8]) @ tf.ones([8, 8]))))
        tf.get_logger().warning("5 out of the last 5 calls to <function f> triggered "
                                "tf.function retracing. Tracing is expensive")
        tf.get_logger().warning("a warning of the user's own")
        print("TF_CPP_MIN_LOG_LEVEL=" + os.environ.get("TF_CPP_MIN_LOG_LEVEL", "unset"))
        """
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**clean, **env},
    )


NOISE = ("absl::InitializeLog", "oneDNN custom operations", "cpu_feature_guard", "retracing")


def test_tensorflow_startup_noise_is_gone_by_default() -> None:
    done = _quiet_child({})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["512.0", "TF_CPP_MIN_LOG_LEVEL=2"]
    assert not [n for n in NOISE if n in done.stderr], done.stderr
    assert "a warning of the user's own" in done.stderr


def test_the_users_log_level_wins() -> None:
    done = _quiet_child({"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert done.stdout.splitlines()[-1] == "TF_CPP_MIN_LOG_LEVEL=0"
    # level 0 asks for info lines: TensorFlow's start-up lines reach the user (the oneDNN line
    # is printed only on processors where TensorFlow turns its oneDNN ops on by default)
    assert "absl::InitializeLog" in done.stderr and "cpu_feature_guard" in done.stderr


def test_verbose_reaches_the_command_before_or_after_its_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    import tfaccel.cli.devices as devices

    def record(args: argparse.Namespace) -> int:
        seen.append(args.verbose)
        return 0

    monkeypatch.setattr(devices, "run", record)
    for argv in (["--verbose", "devices"], ["devices", "-v"], ["devices"]):
        main(argv)
    assert seen == [True, True, False]
    main(["doctor"])
    short = capsys.readouterr().out
    main(["--verbose", "doctor"])  # doctor's own -v: the evidence of every check
    assert len(capsys.readouterr().out.splitlines()) > len(short.splitlines())
    set_verbose(False)


def test_quiet_tensorflow_under_verbose_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    logger = logging.getLogger("tensorflow")
    before = list(logger.filters)
    set_verbose(True)
    try:
        quiet_tensorflow()  # TensorFlow then prints what it prints
        assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ and logger.filters == before
    finally:
        set_verbose(False)


def test_a_subprocess_log_is_shown_only_with_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    from tfaccel.cli._output import show_tensorflow_log

    show_tensorflow_log(STARTUP)
    assert capsys.readouterr() == ("", "")
    set_verbose(True)
    try:
        show_tensorflow_log(STARTUP)
    finally:
        set_verbose(False)
    out, err = capsys.readouterr()
    assert out == "" and err.endswith(STARTUP) and err.startswith("tfaccel: ")
