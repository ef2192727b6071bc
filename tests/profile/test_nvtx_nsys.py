"""NVTX ranges of StepTimer, and ``tfaccel profile --nsys``, without a GPU profiler.

* The ranges a timer marks are recorded at the boundary of :mod:`tfaccel.profile.nvtx_marks`
  (its ``ranges`` replaced by a recorder): order, nesting and balance per step, including steps
  that raise. Then for real: a minimal NVTX tool (``tests/data/nvtx_recorder.c``, compiled with
  ``cc``) is loaded by the NVTX library of a child process through ``NVTX_INJECTION64_PATH``,
  as Nsight Systems' own is, and writes down every range the process emits.
* Without the ``nvtx`` package (its import made to fail), the timer runs and marks nothing.
* ``--nsys``: with no nsys on PATH (nor in the install directories searched) the command says
  what is missing and how to install it, exit 2, no traceback, JSON with ``--json``; with a
  fake ``nsys`` executable on PATH (it records its argv and writes the report file), the
  command line it gets and the report path it returns.

No TensorFlow: the timers time plain Python values.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nvtx_helpers import RecordedRanges, record_ranges

from tfaccel.cli import main
from tfaccel.core.errors import UsageError
from tfaccel.profile import StepTimer, nsys, nvtx_marks

ROOT = Path(__file__).resolve().parents[2]
TOOL_SOURCE = ROOT / "tests" / "data" / "nvtx_recorder.c"
TRACE = "--trace=cuda,nvtx,cudnn,cublas,osrt"


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> RecordedRanges:
    return record_ranges(monkeypatch)


def _timer(**options: Any) -> StepTimer:
    return StepTimer(warmup_steps=0, log_every=0, live=False, sample_gpu=False, **options)


def _step(index: int, *phases: str) -> list[tuple[Any, ...]]:
    events: list[tuple[Any, ...]] = [("push", "step", index)]
    for phase in phases:
        events += [("push", phase, None), ("pop",)]
    return [*events, ("pop",)]


def _balanced(events: list[tuple[Any, ...]]) -> bool:
    depth = 0
    for event in events:
        depth += 1 if event[0] == "push" else -1
        if depth < 0:
            return False
    return depth == 0


# --- what a timer marks, recorded at the module boundary -------------------------------------


def test_each_step_is_a_range_with_its_input_and_compute_inside(recorded: RecordedRanges) -> None:
    timer = _timer(batch_size=2)
    for value in range(3):
        with timer.input():
            batch = value
        with timer.step() as step:
            step.wait(batch * 2)
    with timer.step() as step:  # a step without input(): no input range
        step.wait(1)
    assert recorded.events == [
        *_step(0, "input", "compute"),
        *_step(1, "input", "compute"),
        *_step(2, "input", "compute"),
        *_step(3, "compute"),
    ]
    assert [r.index for r in timer.measurement().records] == [0, 1, 2, 3]


def test_ranges_stay_balanced_when_a_step_or_a_fetch_raises(recorded: RecordedRanges) -> None:
    timer = _timer(batch_size=2)
    batches = iter(range(2))
    with timer.input():
        next(batches)
    with pytest.raises(ValueError, match="diverged"), timer.step():
        raise ValueError("loss diverged")
    with timer.input():
        next(batches)
    with timer.step() as step:
        step.wait(0)
    with pytest.raises(StopIteration), timer.input():  # the end of the data
        next(batches)
    assert recorded.events == [
        *_step(0, "input", "compute"),  # raised: nothing recorded, so the next one is 0 again
        *_step(0, "input", "compute"),
        *_step(1, "input"),
    ]
    assert _balanced(recorded.events)
    assert len(timer.measurement().records) == 1


@pytest.mark.parametrize("ending", ["measurement", "with"])
def test_a_step_begun_and_never_ended_is_closed_when_the_timer_ends(
    recorded: RecordedRanges, ending: str
) -> None:
    timer = _timer()
    with timer.input():
        pass
    assert _balanced(recorded.events) is False
    if ending == "measurement":
        timer.measurement()
    else:
        with timer:
            pass
    assert recorded.events == _step(0, "input")


def test_nvtx_false_marks_nothing(recorded: RecordedRanges) -> None:
    timer = _timer(nvtx=False)
    with timer.input():
        pass
    with timer.step():
        pass
    assert recorded.events == [] and len(timer.measurement().records) == 1


def test_nvtx_must_be_a_bool() -> None:
    with pytest.raises(UsageError, match="nvtx"):
        StepTimer(nvtx="yes")  # type: ignore[arg-type]


def test_without_a_tool_attached_no_range_is_made() -> None:
    if os.environ.get("NVTX_INJECTION64_PATH"):
        pytest.skip("an NVTX tool is attached to this test run (NVTX_INJECTION64_PATH)")
    assert nvtx_marks.available()
    assert nvtx_marks.ranges() is None  # nvtx gives a dummy domain: the timers skip marking
    assert nvtx_marks.ranges(enabled=False) is None


@pytest.fixture
def no_nvtx_package(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``import nvtx`` raises ImportError, as where the package is not installed."""
    monkeypatch.setitem(sys.modules, "nvtx", None)
    nvtx_marks.load_nvtx.cache_clear()
    yield
    nvtx_marks.load_nvtx.cache_clear()


@pytest.mark.usefixtures("no_nvtx_package")
def test_without_the_nvtx_package_the_timer_works_and_marks_nothing() -> None:
    assert not nvtx_marks.available() and nvtx_marks.ranges() is None
    timer = _timer(batch_size=4)
    for value in range(12):
        with timer.input():
            batch = value
        with timer.step() as step:
            step.wait(batch)
    figures = timer.measurement().figures()
    assert figures.steps == 12 and figures.examples_per_s is not None


# --- for real: a minimal NVTX tool loaded by the nvtx library of a child process --------------


@pytest.fixture(scope="module")
def nvtx_tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("Requires: a C compiler (cc) to build the NVTX recording tool")
    tool = tmp_path_factory.mktemp("nvtx") / "nvtx_recorder.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(tool), str(TOOL_SOURCE)], check=True
    )
    return tool


LOOP = """
from tfaccel.profile import StepTimer, nvtx_marks

assert nvtx_marks.ranges() is not None, "the tool is not attached"
timer = StepTimer(warmup_steps=0, log_every=0, live=False, sample_gpu=False, batch_size=2)
quiet = StepTimer(warmup_steps=0, log_every=0, live=False, sample_gpu=False, nvtx=False)
batches = iter(range(3))
while True:
    try:
        with timer.input():
            batch = next(batches)
    except StopIteration:
        break
    try:
        with timer.step() as step:
            if batch == 1:
                raise ValueError("a bad batch")
            step.wait(batch)
    except ValueError:
        pass
    with quiet.step():
        pass
print(len(timer.measurement().records), len(quiet.measurement().records))
"""


def test_a_real_nvtx_tool_receives_the_ranges(nvtx_tool: Path, tmp_path: Path) -> None:
    record = tmp_path / "ranges.txt"
    done = subprocess.run(
        [sys.executable, "-c", LOOP],
        env={
            **os.environ,
            "NVTX_INJECTION64_PATH": str(nvtx_tool),
            "NVTX_RECORD_FILE": str(record),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "3"]
    step = "push tfaccel step {}"
    phase = ["push tfaccel input -", "pop tfaccel", "push tfaccel compute -", "pop tfaccel"]
    assert record.read_text().splitlines() == [
        step.format(0), *phase, "pop tfaccel",
        step.format(1), *phase, "pop tfaccel",  # raised in step(): closed, nothing recorded
        step.format(1), *phase, "pop tfaccel",
        step.format(2), "push tfaccel input -", "pop tfaccel", "pop tfaccel",  # StopIteration
    ]  # fmt: skip


# --- tfaccel profile --nsys --------------------------------------------------------------------


def _script(tmp_path: Path) -> str:
    path = tmp_path / "train.py"
    path.write_text("raise SystemExit('the script ran outside nsys')\n")
    return str(path)


@pytest.fixture
def no_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH without nsys, and install directories searched that hold none."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(
        nsys, "SEARCH_DIRS", (str(tmp_path / "opt" / "nsight-systems" / "*" / "bin"),)
    )


@pytest.mark.usefixtures("no_nsys")
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_nsys_not_installed_says_what_is_missing_and_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    script = _script(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = ["profile", "--nsys", *(["--json"] if as_json else []), script]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "Nsight Systems is not installed" in err and "no nsys on PATH" in err
    assert "Fix: install Nsight Systems" in err and "developer.nvidia.com/nsight-systems" in err
    if as_json:
        doc = json.loads(out)
        assert doc["command"] == "profile" and doc["nsys"]["ran"] is False
        assert "not installed" in doc["nsys"]["reason"] and doc["nsys"]["searched"][0] == "PATH"
        assert "Nsight Systems" in doc["nsys"]["fix"]
    else:
        assert out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no report, nothing run


def test_nsys_found_in_an_install_directory(tmp_path: Path) -> None:
    for version in ("2023.4.1", "2024.10.1", "2024.5.1"):
        bin_dir = tmp_path / "opt" / version / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "nsys").write_text("#!/bin/sh\n")
        (bin_dir / "nsys").chmod(0o755)
    found = nsys.find_nsys(path=str(tmp_path / "empty"), search_dirs=[str(tmp_path / "opt/*/bin")])
    assert found == str(tmp_path / "opt" / "2024.10.1" / "bin" / "nsys")  # the newest


FAKE_NSYS = """#!{python}
import json, os, sys
argv = sys.argv
with open(os.environ["FAKE_NSYS_ARGV"], "w") as fh:
    json.dump(argv, fh)
output = argv[argv.index("--output") + 1]
if os.environ.get("FAKE_NSYS_STATUS", "0") == "0" and not os.environ.get("FAKE_NSYS_NO_REPORT"):
    with open(output + ".nsys-rep", "w") as fh:
        fh.write("a report\\n")
print("fake nsys: done")
sys.exit(int(os.environ.get("FAKE_NSYS_STATUS", "0")))
"""


@pytest.fixture
def fake_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ``nsys`` executable on PATH that records its argv (in the returned file) and writes
    the report it is asked for."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    executable = bin_dir / "nsys"
    executable.write_text(FAKE_NSYS.format(python=sys.executable))
    executable.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    argv_file = tmp_path / "nsys-argv.json"
    monkeypatch.setenv("FAKE_NSYS_ARGV", str(argv_file))
    return argv_file


def test_nsys_runs_the_profile_of_the_script_and_returns_its_report(
    tmp_path: Path, fake_nsys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path)
    reports = tmp_path / "reports"
    argv = ["profile", "--nsys", "--nsys-output", str(reports), "--steps", "30", "--warmup", "2"]
    assert main([*argv, "--quiet", "--json", script, "--lr", "0.1"]) == 0
    out, _ = capsys.readouterr()
    run = json.loads(out)["nsys"]
    ran = json.loads(fake_nsys.read_text())
    assert run["ran"] is True and run["command"] == ran and run["exit_status"] == 0
    base = ran[ran.index("--output") + 1]
    assert re.fullmatch(re.escape(str(reports)) + r"/tfaccel-\d{8}-\d{6}", base)
    assert run["report"] == base + ".nsys-rep" and run["report_written"] is True
    assert Path(run["report"]).read_text() == "a report\n"
    assert ran[1:] == [
        "profile", TRACE, "--output", base, "--force-overwrite", "true",
        sys.executable, "-m", "tfaccel", "profile",
        "--warmup", "2", "--steps", "30", "--quiet", script, "--lr", "0.1",
    ]  # fmt: skip
    # the program nsys starts is this same profile, as the CLI reads it back
    from tfaccel.cli import build_parser

    inner = build_parser().parse_args(ran[ran.index("-m") + 2 :])
    assert (inner.steps, inner.warmup, inner.quiet, inner.nsys) == (30, 2, True, False)
    assert inner.script_and_args == [script, "--lr", "0.1"]


def test_nsys_profiles_a_reference_model_and_says_where_the_report_is(
    tmp_path: Path,
    fake_nsys: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "--nsys", "--model", "mlp", "--tiny", "--steps", "12"]) == 0
    out, _ = capfd.readouterr()
    ran = json.loads(fake_nsys.read_text())
    assert ran[ran.index("-m") + 1 :] == [
        "tfaccel", "profile",
        "--warmup", "5", "--steps", "12", "--model", "mlp", "--batch-size", "64",
        "--input", "pipeline", "--precision", "float32", "--tiny",
    ]  # fmt: skip
    (report,) = tmp_path.glob("tfaccel-*.nsys-rep")  # the working directory by default
    assert f"the Nsight Systems report is {report}" in out
    assert "fake nsys: done" in out  # nsys's own output is left as it is


@pytest.mark.parametrize(
    ("env", "status", "note"),
    [
        ({"FAKE_NSYS_STATUS": "3"}, 3, "nsys exited with status 3 and wrote no"),
        ({"FAKE_NSYS_NO_REPORT": "1"}, 1, "nsys exited with status 0 and wrote no"),
    ],
    ids=["nsys-failed", "no-report"],
)
def test_nsys_failure_is_its_exit_status_and_a_note(
    tmp_path: Path,
    fake_nsys: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    status: int,
    note: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["profile", "--nsys", "--nsys-output", str(tmp_path), _script(tmp_path)]) == status
    out, err = capsys.readouterr()
    assert note in err and "Traceback" not in err
    assert "the Nsight Systems report is" not in out
    assert not list(tmp_path.glob("*.nsys-rep"))


def test_an_nsys_that_cannot_be_started_is_a_usage_error(tmp_path: Path) -> None:
    broken = tmp_path / "nsys"
    broken.write_text("not a program\n")  # not executable
    with pytest.raises(UsageError, match="could not be started") as raised:
        nsys.profile(["true"], output_dir=str(tmp_path / "reports"), nsys=str(broken))
    assert "install Nsight Systems" in (raised.value.fix or "")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--trace", "{tmp}/trace", "{tmp}/train.py"], "Give either --trace or --nsys"),
        (["{tmp}/missing.py"], "does not exist"),
        (["--model", "transformer"], "Unknown model"),
        (["--nsys-output", "{tmp}/train.py", "{tmp}/train.py"], "--nsys-output"),
    ],
    ids=["with-trace", "missing-script", "unknown-model", "output-onto-a-file"],
)
def test_nsys_bad_input_is_refused_before_nsys_runs(
    tmp_path: Path,
    fake_nsys: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    fragment: str,
) -> None:
    _script(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["profile", "--nsys", *argv]) == 2
    _, err = capsys.readouterr()
    assert fragment in err and "Fix:" in err and "Traceback" not in err
    assert not fake_nsys.exists()  # nsys never started
