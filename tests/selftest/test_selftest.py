"""``tfaccel selftest --gpu`` (``make gpu-check``): the skip without a GPU, the plan, the runner.

The runner runs real processes: a step that fails, crashes, hangs or cannot start is recorded
and the next one runs; a hang is killed with the processes it started; the budget skips what it
cannot pay for. The GPU steps themselves run on a machine with a GPU (``make gpu-check``).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import ctrl_c_reaches_it

import tfaccel
from tfaccel import selftest
from tfaccel.cli import main
from tfaccel.probe import nvml
from tfaccel.selftest import (
    SETUP_MODES,
    SelftestResult,
    Step,
    execute,
    plan_gpu_steps,
    runner,
)
from tfaccel.selftest.runner import run_steps
from tfaccel.snapshot import (
    DriverInfo,
    GpuInfo,
    NvmlInfo,
    PciDevice,
    PlatformInfo,
    Snapshot,
    TfBuild,
)

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
SKIPPED_LINE = r"^skipped: (?P<reason>.+)$"


def _has_gpu() -> bool:
    info = nvml.collect()
    return info.available and bool(info.gpus)


no_gpu_here = pytest.mark.skipif(
    _has_gpu(), reason="this machine has an NVIDIA GPU: the self-test would run for real there"
)


# --- without a GPU ----------------------------------------------------------------------------

RUN_THE_CLI = """
import sys
from tfaccel.cli import main
code = main(sys.argv[1:])
assert "tensorflow" not in sys.modules, "the self-test imported TensorFlow to look for a GPU"
sys.exit(code)
"""


@no_gpu_here
def test_without_a_gpu_it_says_why_exits_0_and_writes_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [PY, "-c", RUN_THE_CLI, "selftest", "--gpu", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["command"] == "selftest" and doc["status"] == "skipped"
    assert doc["reason"].startswith("no NVIDIA GPU: "), doc["reason"]
    assert "NVML" in doc["reason"] and "nvidia-smi" in doc["reason"]
    assert doc["steps"] == [] and doc["out"] is None and doc["files"] == {}
    assert doc["machine"]["tensorflow"]["version"] == tfaccel_tf_version()
    assert list(tmp_path.iterdir()) == []  # no gpu-check-* directory


@no_gpu_here
def test_without_a_gpu_the_text_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["selftest", "--gpu", "--out", str(tmp_path / "gc")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^tfaccel selftest --gpu: skipped: no NVIDIA GPU: .*NVML", out, re.M), out
    assert not (tmp_path / "gc").exists()


def tfaccel_tf_version() -> str | None:
    from tfaccel.probe import packages

    return packages.collect_tensorflow(packages.collect_distributions()).version


def _snapshot(
    gpus: int = 0, *, available: bool = True, error: str | None = None, pci: int = 0, **env: str
) -> Snapshot:
    return Snapshot(
        nvml=NvmlInfo(
            available=available,
            error=error,
            driver_version="550.54.14" if available else None,
            cuda_driver_version="12.4" if available else None,
            gpus=[
                GpuInfo(index=i, name="NVIDIA A100-SXM4-40GB", compute_capability="8.0")
                for i in range(gpus)
            ],
        ),
        pci=[PciDevice(address=f"0000:0{i}:00.0", vendor_id="0x10de") for i in range(pci)],
        tensorflow=TfBuild(installed=True, version="2.21.0", is_cuda_build=True),
        platform=PlatformInfo(system="Linux", machine="x86_64", python_version="3.11.7"),
        env=dict(env),
    )


@pytest.mark.parametrize(
    ("snap", "smi", "expected"),
    [
        (
            _snapshot(available=False, error="NVML Shared Library Not Found"),
            None,
            "no NVIDIA GPU: nvidia-smi not found; NVML: NVML Shared Library Not Found",
        ),
        (
            _snapshot(0),
            "/usr/bin/nvidia-smi",
            "no NVIDIA GPU: nvidia-smi at /usr/bin/nvidia-smi; NVML reports 0 devices",
        ),
        (
            _snapshot(available=False, error="Driver Not Loaded", pci=2),
            None,
            "no NVIDIA GPU: nvidia-smi not found; NVML: Driver Not Loaded; 2 NVIDIA device(s) "
            "on the PCI bus that NVML does not see (run 'tfaccel doctor')",
        ),
        (
            _snapshot(2, CUDA_VISIBLE_DEVICES=""),
            "/usr/bin/nvidia-smi",
            "CUDA_VISIBLE_DEVICES='' hides every GPU from CUDA (2 GPU(s) in NVML): unset it to "
            "test them",
        ),
        (_snapshot(1, CUDA_VISIBLE_DEVICES="-1"), None, "CUDA_VISIBLE_DEVICES='-1' hides"),
        (_snapshot(1), "/usr/bin/nvidia-smi", None),
        (_snapshot(2, CUDA_VISIBLE_DEVICES="1"), "/usr/bin/nvidia-smi", None),
    ],
    ids=[
        "no-nvml",
        "no-devices",
        "on-the-bus-only",
        "hidden",
        "hidden-minus-one",
        "one",
        "one-of-two",
    ],
)
def test_whether_there_is_a_gpu_to_test(
    snap: Snapshot, smi: str | None, expected: str | None
) -> None:
    reason = selftest.gpu_missing_reason(snap, smi)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(expected), reason


def test_machine_facts_come_from_the_probe_without_tensorflow() -> None:
    snap = _snapshot(
        1,
        CUDA_VISIBLE_DEVICES="0",
        TF_CPP_MIN_LOG_LEVEL="2",
        TFACCEL_DB="/tmp/r.sqlite",
        TF_CONFIG='{"cluster": {"worker": ["host-a:2222"]}}',
        HOME="/root",
    )
    facts = selftest.machine_facts(snap, DriverInfo(nvidia_smi_path="/usr/bin/nvidia-smi"))
    assert [g["name"] for g in facts["gpus"]] == ["NVIDIA A100-SXM4-40GB"]
    assert facts["gpus"][0]["compute_capability"] == "8.0"
    assert facts["driver_version"] == "550.54.14" and facts["cuda_driver_version"] == "12.4"
    assert facts["tensorflow"]["version"] == "2.21.0" and facts["tensorflow"]["cuda_build"] is True
    assert facts["nvidia_smi"] == "/usr/bin/nvidia-smi"
    assert facts["python"] == "3.11.7" and facts["platform"] == "Linux  x86_64"
    # what steers TensorFlow, without TF_CONFIG (it names hosts) or anything else
    assert facts["env"] == {
        "CUDA_VISIBLE_DEVICES": "0",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "TFACCEL_DB": "/tmp/r.sqlite",
    }
    assert selftest.machine_facts(snap)["nvidia_smi"] is None


# --- the plan ---------------------------------------------------------------------------------

STEP_NAMES = [
    "gpu-tests",
    "devices-tf",
    "doctor-deep",
    *(f"setup-{mode}" for mode in SETUP_MODES),
    "bench-quick",
    "bench-kernels",
    "profile-reference-cnn",
    "tune-short",
    "bench-plan-gpu",
    "bench-plan-gpu-16-bit",
    "plan-gpu",
    "bench-kernels-script",
    "report",
]


def test_the_plan_runs_every_gpu_command_in_order(tmp_path: Path) -> None:
    out = tmp_path / "gc"
    steps = plan_gpu_steps(out, python="py", root=ROOT, have_pytest=True)
    assert [s.name for s in steps] == STEP_NAMES
    assert set(SETUP_MODES) == {
        "memory-growth",
        "memory-limit",
        "memory-fraction",
        "logical-devices",
        "mixed-float16",
        "mixed-bfloat16",
        "xla",
    }
    by_name = {s.name: s for s in steps}
    assert all(s.skip is None for s in steps), [s.skip for s in steps]
    assert by_name["gpu-tests"].argv == ("py", "-m", "pytest", "-m", "gpu", "-q", "-rs", "tests/")
    assert by_name["gpu-tests"].cwd == str(ROOT)
    db = f"--db {out / 'results.sqlite'}"
    commands = {s.name: s.command for s in steps}
    assert commands["devices-tf"] == "py -m tfaccel devices --tf --json"
    assert commands["doctor-deep"] == "py -m tfaccel doctor --deep --json"
    assert commands["bench-quick"] == f"py -m tfaccel bench --quick --device all --json {db}"
    assert commands["bench-kernels"] == "py -m tfaccel bench --kernels --json"
    assert commands["profile-reference-cnn"].startswith(
        "py -m tfaccel profile --model reference-cnn"
    )
    assert re.fullmatch(
        r"py -m tfaccel tune --model reference-cnn --budget \d+ .*", commands["tune-short"]
    )
    assert commands["tune-short"].endswith(db)
    assert commands["bench-plan-gpu"].startswith("py benchmarks/bench_plan.py --device gpu:0")
    assert commands["bench-kernels-script"].startswith("py benchmarks/bench_kernels.py")
    assert by_name["bench-plan-gpu"].cwd == by_name["bench-kernels-script"].cwd == str(ROOT)
    assert (
        commands["report"]
        == f"py -m tfaccel report --quick --only micro --device gpu:0 --out {out} {db}"
    )
    # every timeout fits the budget, and the setup steps leave the user's TFACCEL_* aside
    assert all(0 < s.timeout_s < selftest.DEFAULT_BUDGET_S for s in steps)
    assert all("TFACCEL_*" in by_name[f"setup-{m}"].unset_env for m in SETUP_MODES)


def test_every_planned_command_takes_the_flags_it_is_given(tmp_path: Path) -> None:
    """The tfaccel steps parse with tfaccel's own parser; each flag of a benchmark script's
    step is in the script's --help (a flag renamed there fails here, not on the GPU machine)."""
    from tfaccel.cli import build_parser

    parser = build_parser()
    for step in plan_gpu_steps(tmp_path, python="py", root=ROOT):
        if step.argv[1:3] == ("-m", "tfaccel"):
            args = parser.parse_args(list(step.argv[3:]))
            assert args.command == step.argv[3], step.command
        elif step.argv[1].startswith("benchmarks/"):
            done = subprocess.run(
                [PY, step.argv[1], "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stderr
            flags = [word for word in step.argv[2:] if word.startswith("--")]
            missing = [flag for flag in flags if not re.search(rf"{flag}\b", done.stdout)]
            assert not missing, (step.name, missing, done.stdout)


@pytest.mark.parametrize("mode", list(SETUP_MODES))
def test_each_setup_mode_is_a_snippet_that_calls_setup_then_checks_tensorflow(mode: str) -> None:
    (step,) = [s for s in plan_gpu_steps("gc", python="py", root=ROOT) if s.name == f"setup-{mode}"]
    program, flag, code = step.argv
    assert (program, flag) == ("py", "-c")
    compile(code, f"setup-{mode}", "exec")  # it parses
    _, call, _ = SETUP_MODES[mode]
    lines = code.splitlines()
    assert lines[:2] == ["import tfaccel", f"config = tfaccel.setup({call})"]
    assert lines.index("import tensorflow as tf") > 1  # setup() comes before TensorFlow
    assert (
        sum(line.startswith(("assert ", "    assert ", "raise AssertionError")) for line in lines)
        >= 2
    )


@no_gpu_here
def test_the_kernel_steps_say_skipped_not_passed_when_they_had_no_gpu(tmp_path: Path) -> None:
    """bench --kernels and bench_kernels.py exit 0 without a GPU: their own words make the
    step 'skipped', so a run that measured nothing is not counted as a pass."""
    plan = {s.name: s for s in plan_gpu_steps(tmp_path, root=ROOT)}
    steps = [plan["bench-kernels"], plan["bench-kernels-script"]]
    results, _ = run_steps(steps, budget_s=300, cwd=tmp_path)
    for result in results:
        assert result.exit_code == 0, result.output_tail
        assert result.status == "skipped", result.output_tail
        assert result.reason is not None and "needs an NVIDIA GPU" in result.reason


@pytest.mark.parametrize(
    ("last_line", "skipped"),
    [
        ("15 skipped, 1408 deselected in 17.52s", True),
        ("2 skipped, 1421 deselected, 1 warning in 9.01s", True),
        ("13 passed, 2 skipped, 1408 deselected in 301.2s", False),
        ("1 failed, 12 passed, 2 skipped, 1408 deselected in 88.0s", False),
    ],
)
def test_the_gpu_tests_step_is_skipped_only_when_every_test_skipped(
    tmp_path: Path, last_line: str, skipped: bool
) -> None:
    (tests,) = [s for s in plan_gpu_steps(tmp_path, root=ROOT) if s.name == "gpu-tests"]
    echo = Step(
        "pytest",
        (PY, "-c", f"print('SKIPPED [1] x.py: Requires: a GPU\\n{last_line}')"),
        "",
        60,
        skipped_if=tests.skipped_if,
    )
    (result,), _ = run_steps([echo], budget_s=60)
    assert result.status == ("skipped" if skipped else "passed"), result
    assert (result.reason == last_line) if skipped else result.reason is None


def test_without_a_clone_the_tests_and_scripts_are_skipped_with_the_reason(tmp_path: Path) -> None:
    steps = {s.name: s for s in plan_gpu_steps(tmp_path / "gc", python="py", root=tmp_path)}
    clone = {"gpu-tests", "bench-plan-gpu", "bench-plan-gpu-16-bit", "bench-kernels-script"}
    for name in clone:
        assert steps[name].skip is not None and "a clone of tfaccel" in steps[name].skip
    assert all(s.skip is None for n, s in steps.items() if n not in clone)
    no_pytest = plan_gpu_steps(tmp_path / "gc", python="py", root=ROOT, have_pytest=False)
    assert no_pytest[0].skip is not None and "pytest is not installed" in no_pytest[0].skip


def test_the_clone_is_found_from_the_package() -> None:
    installed_from_clone = Path(tfaccel.__file__).resolve().is_relative_to(ROOT / "src")
    assert selftest.checkout_root() == (ROOT if installed_from_clone else None)


def test_list_prints_the_steps_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "gc"
    assert main(["selftest", "--gpu", "--list", "--json", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in doc["steps"]] == STEP_NAMES
    assert doc["out"] == str(out.resolve()) and doc["budget_s"] == selftest.DEFAULT_BUDGET_S
    assert doc["would_skip"] == selftest.probe_machine()[0]
    report = doc["steps"][-1]
    assert report["argv"][:3] == [PY, "-m", "tfaccel"] and str(out.resolve()) in report["argv"]
    assert main(["selftest", "--gpu", "--list", "--budget", "60", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("tfaccel selftest --gpu: 19 steps within a budget of 60 s\n")
    for number, name in enumerate(STEP_NAMES, 1):
        assert re.search(rf"^ ?{number}\. {name} \(up to \d+ s\): ", text, re.M), name
    assert f"    $ {PY} -m tfaccel devices --tf --json\n" in text
    assert not out.exists()


# --- the runner, with real processes ----------------------------------------------------------


def _steps() -> list[Step]:
    return [
        Step("first", (PY, "-c", "print('first ran')"), "prints", 60),
        Step("fails", (PY, "-c", "raise AssertionError('2 GiB fit under 1 GiB')"), "asserts", 60),
        Step(
            "crashes",
            (
                PY,
                "-c",
                "import os, signal; print('dying', flush=True); os.kill(os.getpid(), signal.SIGKILL)",
            ),
            "is killed",
            60,
        ),
        Step(
            "exits-with-a-note",
            (PY, "-c", "print('{\"findings\": []}'); raise SystemExit(1)"),
            "exit 1 means something",
            60,
            exit_notes=((1, "the doctor found a failure"),),
        ),
        Step("cannot-start", (str(Path("/nonexistent") / "tool"),), "is missing", 60),
        Step(
            "had-nothing-to-test",
            (PY, "-c", "print('skipped: no widget on this machine')"),
            "says it skipped",
            60,
            skipped_if=SKIPPED_LINE,
        ),
        Step("planned-skip", (PY, "-c", "raise SystemExit(3)"), "never runs", 60, skip="not here"),
        Step("last", (PY, "-c", "import os; print('last ran in', os.getcwd())"), "prints", 60),
    ]


def test_a_failing_step_is_recorded_and_the_rest_still_run(tmp_path: Path) -> None:
    out = tmp_path / "gc"
    result = execute(_steps(), out, machine={"gpus": []}, budget_s=300)
    by_name = {s.name: s for s in result.steps}
    assert [s.status for s in result.steps] == [
        "passed",
        "failed",
        "failed",
        "failed",
        "failed",
        "skipped",
        "skipped",
        "passed",
    ]
    assert result.status == "failed" and [s.name for s in result.failed] == [
        "fails",
        "crashes",
        "exits-with-a-note",
        "cannot-start",
    ]
    assert by_name["first"].exit_code == 0 and by_name["first"].output_tail == "first ran\n"
    fails = by_name["fails"]
    assert fails.exit_code == 1
    assert fails.reason == "exit status 1: AssertionError: 2 GiB fit under 1 GiB"
    assert "Traceback" in fails.output_tail
    crashed = by_name["crashes"]
    assert crashed.exit_code == -signal.SIGKILL and crashed.reason == "killed by SIGKILL: dying"
    assert crashed.output_tail == "dying\n"
    assert by_name["exits-with-a-note"].reason == "exit status 1: the doctor found a failure"
    missing = by_name["cannot-start"]
    assert missing.exit_code is None and missing.reason is not None
    assert missing.reason.startswith("could not start: FileNotFoundError")
    assert by_name["had-nothing-to-test"].reason == "no widget on this machine"
    assert by_name["planned-skip"].reason == "not here" and by_name["planned-skip"].seconds == 0
    assert by_name["last"].output_tail == f"last ran in {out}\n"  # steps run in the directory
    # every run is logged whole; summary.json is the result, read back
    logs = sorted(p.name for p in (out / "logs").iterdir())
    assert logs == [
        "01-first.log",
        "02-fails.log",
        "03-crashes.log",
        "04-exits-with-a-note.log",
        "05-cannot-start.log",
        "06-had-nothing-to-test.log",
        "08-last.log",
    ]
    assert Path(fails.log or "").read_text() == fails.output_tail
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads(json.dumps(result.to_dict()))
    assert summary["counts"] == {"passed": 2, "failed": 4, "timed-out": 0, "skipped": 2}
    assert summary["steps"][1]["command"] == Step("", _steps()[1].argv, "", 1).command
    assert sorted(p.name for p in out.iterdir()) == ["logs", "summary.json"]  # no temporaries


def _state(pid: int) -> str | None:
    """The process's state letter ('Z': a zombie, dead), None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"^State:\s+(\w)", status, re.M)
    return match.group(1) if match else None


CHILD_THAT_HANGS = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print("child", child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="Requires: /proc")
def test_a_hang_is_killed_with_its_children_and_the_budget_skips_what_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "MIN_STEP_S", 1.0)  # a budget of seconds, not minutes
    steps = [
        Step("hangs", (PY, "-c", CHILD_THAT_HANGS), "sleeps", 60),
        Step("next", (PY, "-c", "print('never')"), "would print", 60),
    ]
    start = time.monotonic()
    results, interrupted = run_steps(steps, budget_s=4, log_dir=tmp_path)
    took = time.monotonic() - start
    hung, skipped = results
    assert not interrupted
    assert hung.status == "timed-out" and hung.exit_code is None
    assert hung.reason == "did not finish within 4 s (what was left of the budget); killed"
    assert 4 <= hung.seconds < 60 and took < 60
    started = re.search(r"^child (\d+)$", hung.output_tail, re.M)
    assert started is not None, hung.output_tail
    child = int(started.group(1))
    for _ in range(50):  # the child was killed with its group; init reaps it
        if _state(child) in (None, "Z"):
            break
        time.sleep(0.1)
    assert _state(child) in (None, "Z"), f"the hung step's child {child} still runs"
    assert skipped.status == "skipped" and skipped.seconds == 0
    assert skipped.reason is not None and skipped.reason.startswith("the budget of 4 s is spent")


def test_a_step_is_not_started_with_less_of_the_budget_left_than_it_needs() -> None:
    """With less than MIN_STEP_S (or the step's whole timeout) left, a step would only time out:
    it is skipped, and a short step still runs."""
    times = iter([0.0, 565.0, 565.0, 565.0])
    steps = [
        Step("long", (PY, "-c", "print('long')"), "", 300),
        Step("short", (PY, "-c", "print('short')"), "", 3),
    ]
    results, _ = run_steps(steps, budget_s=570, clock=lambda: next(times))
    assert [r.status for r in results] == ["skipped", "passed"]
    assert results[0].reason == (
        "the budget of 570 s is spent: 5 s left, 20 s needed to start this step (--budget "
        "gives more)"
    )
    assert results[1].timeout_s == 3


def test_the_command_exits_1_and_shows_every_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command on a machine that has a GPU, with the plan replaced by ``_steps()``."""
    machine: dict[str, Any] = {
        "gpus": [{"name": "NVIDIA H100 80GB HBM3"}],
        "driver_version": "550.54.14",
        "tensorflow": {"version": "2.21.0"},
    }
    monkeypatch.setattr(selftest, "probe_machine", lambda: (None, machine))
    monkeypatch.setattr(selftest, "plan_gpu_steps", lambda out: _steps())
    out = tmp_path / "gc"
    assert main(["selftest", "--gpu", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert text.startswith(
        "tfaccel selftest --gpu on NVIDIA H100 80GB HBM3 (driver 550.54.14, TensorFlow 2.21.0)"
    )
    for name, status in [
        ("first", "passed"),
        ("fails", "failed"),
        ("crashes", "failed"),
        ("cannot-start", "failed"),
        ("planned-skip", "skipped"),
        ("last", "passed"),
    ]:
        assert re.search(rf"\b{name}\s+│ {status}\b", text), (name, text)
    assert "AssertionError: 2 GiB fit under 1 GiB" in text
    assert "fails (failed), the end of its output:" in text
    assert "4 step(s) failed (2 passed, 4 failed, 2 skipped)" in text
    assert f"summary: {out / 'summary.json'}" in text
    assert main(["selftest", "--gpu", "--json", "--out", str(out)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "failed" and doc["machine"] == machine and len(doc["steps"]) == 8


def test_a_passing_run_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run where nothing failed; the report a step wrote into the directory is listed."""
    writes_a_report = Step(
        "report", (PY, "-c", "open('report.html', 'w').write('<html></html>')"), "writes", 60
    )
    steps = [_steps()[0], _steps()[6], writes_a_report]  # passed, skipped (planned), passed
    monkeypatch.setattr(selftest, "probe_machine", lambda: (None, {}))
    monkeypatch.setattr(selftest, "plan_gpu_steps", lambda out: steps)
    out = tmp_path / "gc"
    assert main(["selftest", "--gpu", "--json", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "passed" and doc["reason"] is None
    assert doc["counts"] == {"passed": 2, "failed": 0, "timed-out": 0, "skipped": 1}
    assert doc["files"] == {
        "summary": str(out / "summary.json"),
        "report": str(out / "report.html"),
    }
    assert json.loads((out / "summary.json").read_text())["status"] == "passed"


def test_the_default_directory_is_named_by_the_local_time() -> None:
    import datetime

    moment = datetime.datetime(2024, 3, 9, 7, 5, 1)
    assert selftest.default_out(moment) == "gpu-check-20240309-070501"


def test_a_step_runs_without_the_variables_it_unsets_and_unbuffered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The setup steps must not read the user's TFACCEL_* settings (or TensorFlow's growth
    switch); the rest of the environment is passed on."""
    monkeypatch.setenv("TFACCEL_PRECISION", "mixed_float16")
    monkeypatch.setenv("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    monkeypatch.setenv("TFACCEL_SELFTEST_KEPT", "kept")  # not named: kept
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    show = (
        "import json, os; print(json.dumps({k: os.environ.get(k) for k in ("
        "'TFACCEL_PRECISION', 'TF_FORCE_GPU_ALLOW_GROWTH', 'TFACCEL_SELFTEST_KEPT', "
        "'PYTHONUNBUFFERED')}))"
    )
    step = Step("env", (PY, "-c", show), "", 60, unset_env=("TFACCEL_PRECISION", "TF_FORCE_GPU_*"))
    (result,), _ = run_steps([step], budget_s=60)
    assert result.status == "passed", result
    assert json.loads(result.output_tail) == {
        "TFACCEL_PRECISION": None,
        "TF_FORCE_GPU_ALLOW_GROWTH": None,
        "TFACCEL_SELFTEST_KEPT": "kept",
        "PYTHONUNBUFFERED": "1",
    }


def test_progress_is_told_of_each_step() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.said: list[str] = []
            self.advanced: list[str] = []

        def status(self, description: str) -> None:
            self.said.append(description)

        def advance(self, label: str) -> None:
            self.advanced.append(label)

    progress = Recorder()
    steps = [_steps()[0], _steps()[6]]
    run_steps(steps, budget_s=60, progress=progress)
    assert progress.advanced == ["[1/2] first: passed", "[2/2] planned-skip: skipped"]
    assert progress.said[0] == "[1/2] first: running (up to 60 s)"
    assert re.fullmatch(r"\[1/2\] first: passed in \d+\.\d s", progress.said[1])
    assert progress.said[2] == "[2/2] planned-skip: skipped"


def test_interrupted_run_keeps_the_steps_done(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the self-test, not to its step) kills the step, skips the rest and
    still writes summary.json."""
    script = f"""
import sys
from tfaccel.selftest import Step, execute
steps = [Step("first", ({PY!r}, "-c", "print('ok')"), "", 60),
         Step("sleeps", ({PY!r}, "-c", "import time; print('sleeping', flush=True); time.sleep(60)"), "", 60),
         Step("after", ({PY!r}, "-c", "print('after')"), "", 60)]
print("started", flush=True)
result = execute(steps, sys.argv[1], budget_s=120)
print(result.status)
"""
    out = tmp_path / "gc"
    with subprocess.Popen(
        [PY, "-c", script, str(out)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches_it,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "started\n"
        for _ in range(200):
            log = out / "logs"
            if log.is_dir() and any("sleeps" in p.name for p in log.iterdir()):
                break
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert rest.strip().splitlines()[-1] == "interrupted"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert [s["status"] for s in summary["steps"]] == ["passed", "failed", "skipped"]
    assert summary["steps"][1]["reason"] == "interrupted (Ctrl-C); killed"


def test_a_result_counts_every_status() -> None:
    steps = _steps()
    result = SelftestResult(
        status="failed",
        steps=[
            selftest.StepResult(steps[0], "passed"),
            selftest.StepResult(steps[1], "timed-out"),
            selftest.StepResult(steps[2], "skipped"),
        ],
    )
    assert result.counts() == {"passed": 1, "failed": 0, "timed-out": 1, "skipped": 1}
    assert [s.name for s in result.failed] == ["fails"]
