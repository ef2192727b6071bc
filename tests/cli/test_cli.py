"""The CLI on this machine: `devices`, `doctor` and `report`, in-process and as real processes."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tfaccel.probe
from tfaccel.cli import COMMANDS, main
from tfaccel.cli._output import set_verbose
from tfaccel.core.errors import argument
from tfaccel.probe import deep
from tfaccel.snapshot import DeepProbe, Snapshot

CPUINFO = Path("/proc/cpuinfo")


def _tfaccel(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tfaccel", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
    )


def _cpu_flags() -> set[str]:
    for line in CPUINFO.read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _has_nvidia_hardware() -> bool:
    base = Path("/sys/bus/pci/devices")
    return (
        any((d / "vendor").read_text().strip() == "0x10de" for d in base.iterdir())
        if base.is_dir()
        else False
    )


# --- devices --------------------------------------------------------------------------------


def test_devices_json_reports_this_cpu() -> None:
    done = _tfaccel("devices", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    cpu = doc["cpu"]
    assert cpu["logical_cores"] == os.cpu_count()
    assert cpu["usable_cores"] == len(os.sched_getaffinity(0))
    flags = _cpu_flags()
    if "avx512f" in flags:
        assert "AVX-512" in cpu["features"]
    if "avx512_bf16" in flags:
        assert "AVX512_BF16" in cpu["features"]
    if "amx_tile" in flags:
        assert "AMX" in cpu["features"]
    assert cpu["peak"]["estimate"] is True and "cores x" in cpu["peak"]["formula"]
    if not _has_nvidia_hardware():
        assert doc["gpus"] == [] and doc["nvml_error"]


def test_devices_text_names_the_cpu_features(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "CPU" in out and "peak (estimate)" in out and "NVIDIA GPUs" in out
    main(["devices", "--json"])
    formula = json.loads(capsys.readouterr().out)["cpu"]["peak"]["formula"]
    assert f"= {formula}" in out  # piped: the whole formula on one line
    if "avx512_bf16" in _cpu_flags():
        assert "AVX512_BF16" in out


# --- doctor on this machine -----------------------------------------------------------------


def test_doctor_on_this_machine_tells_the_truth_without_alarm() -> None:
    done = _tfaccel("doctor", "--json")
    doc = json.loads(done.stdout)
    by_id = {f["id"]: f for f in doc["findings"]}
    if _has_nvidia_hardware():
        pytest.skip("this machine has NVIDIA hardware; the CPU-only scenario does not apply")
    assert done.returncode == 0, [f for f in doc["findings"] if f["status"] == "fail"]
    assert by_id["no_driver_or_hidden"]["status"] == "skip"
    build = by_id["cpu_only_build"]
    assert build["status"] == "ok"
    assert not [f for f in doc["findings"] if f["status"] == "fail"]


def test_doctor_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert "cpu_only_build" in out and "no_driver_or_hidden" in out
    assert ("failures found (" if code else "no failures (") in out
    assert code in (0, 1)
    # piped: one line per finding, whatever its length, nothing cut or padded
    deep = r"^skip +tf_import +TensorFlow was not imported: run `tfaccel doctor --deep`$"
    assert re.search(deep, out, re.MULTILINE)
    assert "…" not in out and all(line == line.rstrip() for line in out.splitlines())


def test_doctor_log_text_output_shows_the_cause_and_its_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = Path(__file__).parents[1] / "data/doctor-logs/27_oom.log"
    assert main(["doctor", "--log", str(log)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^  fail +oom +The GPU ran out of memory", out, re.MULTILINE)
    assert "- tensor shape [5760,4,4,2048]" in out and "fix: halve the batch size" in out
    assert "failures found (1 fail, 0 warn, 0 info, 0 ok, 0 skip)" in out


DEEP_LOG = (
    "W0000 00:00:1795400751.3 26082 gpu_device.cc:2344] Cannot dlopen some GPU libraries. "
    "Skipping registering GPU devices...\n"
)


def test_doctor_verbose_deep_shows_what_tensorflow_logged(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def snapshot(**kwargs: object) -> Snapshot:
        snap = Snapshot()
        snap.deep = DeepProbe(ran=True, ok=True, returncode=0, timeout_s=120.0, log=DEEP_LOG)
        return snap

    monkeypatch.setattr(tfaccel.probe, "snapshot", snapshot)
    try:
        main(["doctor", "--deep", "-v"])
        verbose = capsys.readouterr().err
        main(["doctor", "--deep"])
        plain = capsys.readouterr().err
    finally:
        set_verbose(False)
    assert "what TensorFlow logged in its subprocess" in verbose and DEEP_LOG in verbose
    assert DEEP_LOG not in plain and "what TensorFlow logged" not in plain


def test_doctor_verbose_help_says_it_shows_the_deep_log(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["doctor", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "with --deep, what TensorFlow logged" in help_text


def test_every_command_names_the_library_arguments_by_its_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """main() puts each command's FLAGS around it: an error the library raises names what the
    user typed (--trace, --tf-timeout, --out), and outside a command the Python name."""
    seen: dict[str, dict[str, str]] = {}
    declared: dict[str, dict[str, str]] = {}
    for name, module_name in COMMANDS:
        module = importlib.import_module(module_name)
        flags = getattr(module, "FLAGS", None)
        if not flags:
            continue
        declared[name] = dict(flags)

        def record(
            args: argparse.Namespace, name: str = name, flags: dict[str, str] = flags
        ) -> int:
            seen[name] = {python: argument(python) for python in flags}
            return 0

        monkeypatch.setattr(module, "run", record)
        assert main([name]) == 0
    assert {"doctor", "tune", "profile", "devices", "report"} <= set(declared)
    assert seen == declared
    assert declared["profile"]["trace_dir"] == "--trace"
    assert declared["devices"]["timeout_s"] == "--tf-timeout"
    assert declared["report"]["out"] == "--out"
    assert argument("trace_dir") == "trace_dir"  # nothing left behind


def test_snapshot_save_then_replay_gives_the_same_report(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    first = _tfaccel("doctor", "--json", "--save-snapshot", str(path))
    assert path.is_file()
    replay = _tfaccel("doctor", "--json", "--snapshot", str(path))
    assert replay.returncode == first.returncode
    assert json.loads(replay.stdout)["findings"] == json.loads(first.stdout)["findings"]


def test_malformed_snapshot_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"cpu": {"flags": "avx2"}}')
    done = _tfaccel("doctor", "--snapshot", str(bad))
    assert done.returncode == 2
    assert "snapshot.cpu.flags" in done.stderr and "Traceback" not in done.stderr


# --- doctor --log bad input -------------------------------------------------------------------


def test_log_bad_inputs_give_clear_messages(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    cases = {
        str(tmp_path / "missing.log"): "does not exist",
        str(tmp_path): "directory",
        str(empty): "empty",
        str(binary): "binary",
    }
    for path in cases:
        code = main(["doctor", "--log", path])
        assert code == 2, path
    for path, needle in cases.items():
        done = _tfaccel("doctor", "--log", path)
        assert done.returncode == 2
        assert needle in done.stderr.lower(), (path, done.stderr)
        assert "Traceback" not in done.stderr


def test_log_from_stdin_finds_the_cause() -> None:
    log = (Path(__file__).parents[1] / "data/doctor-logs/27_oom.log").read_text()
    done = _tfaccel("doctor", "--log", "-", "--json", stdin=log)
    doc = json.loads(done.stdout)
    assert done.returncode == 1
    assert "oom" in [c["id"] for c in doc["log"]["causes"]]
    assert doc["findings"] == []  # a pasted log is diagnosed alone, not mixed with this machine


def test_huge_log_is_answered_in_part(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    block = b"I0000 00:00:1700000000.000000 1 some_file.cc:1] routine line\n" * 16384
    with big.open("wb") as fh:
        for _ in range(200 * 2**20 // len(block)):
            fh.write(block)
        fh.write(
            b"W tensorflow/core/common_runtime/bfc_allocator.cc] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.00GiB\n"
        )
    done = _tfaccel("doctor", "--log", str(big), "--json")
    big.unlink()
    doc = json.loads(done.stdout)
    assert "oom" in [c["id"] for c in doc["log"]["causes"]]
    assert any("MiB" in note for note in doc["log"]["notes"])


# --- deep: a crash or a hang of the TensorFlow import is a value -----------------------------


def _fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def test_deep_reports_a_hang(tmp_path: Path) -> None:
    result = deep.run(timeout_s=1.0, python=_fake_python(tmp_path, "echo starting >&2; sleep 60"))
    assert result.timed_out and not result.ok
    assert "did not finish within 1 s" in (result.error or "")
    assert "starting" in result.log


def test_deep_reports_a_crash(tmp_path: Path) -> None:
    result = deep.run(timeout_s=30, python=_fake_python(tmp_path, "kill -ILL $$"))
    assert not result.ok and result.returncode == -4
    assert "SIGILL" in (result.error or "")


@pytest.mark.slow
def test_deep_imports_tensorflow_in_a_subprocess() -> None:
    done = _tfaccel("doctor", "--deep", "--json")
    doc = json.loads(done.stdout)
    by_id = {f["id"]: f for f in doc["findings"]}
    assert by_id["tf_import"]["status"] == "ok", by_id["tf_import"]
    assert "tf_gpus_registered" in by_id


# --- the command line itself ------------------------------------------------------------------


def test_version_help_and_no_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and "tfaccel" in capsys.readouterr().out
    assert main([]) == 2
    assert "exit codes" in capsys.readouterr().err


def test_deep_and_snapshot_together_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--deep", "--snapshot", str(tmp_path / "x.json")]) == 2
    assert "--deep cannot be combined with --snapshot" in capsys.readouterr().err


def test_json_output_is_strict_json(capsys: pytest.CaptureFixture[str]) -> None:
    from tfaccel.cli._output import print_json

    print_json({"ratio": float("nan"), "rows": [float("inf"), 1.5], "path": Path("/x")})
    out = capsys.readouterr().out
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")) == {
        "ratio": None,
        "rows": [None, 1.5],
        "path": "/x",
    }


def test_output_that_cannot_be_written_is_said_once_without_a_traceback() -> None:
    """A reader that went away (`| head -1`: a broken pipe) ends the command quietly with
    141, as SIGPIPE would; a full disk behind stdout is one line on stderr and exit 2; a
    closed stdout is no crash."""
    command = [sys.executable, "-m", "tfaccel", "devices", "--json"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    reader = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()  # nothing will read what it writes
    err = reader.stderr.read().decode()
    assert reader.wait(timeout=120) == 141 and "Traceback" not in err, err
    with open("/dev/full", "w") as full:
        done = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "the output could not be written (No space left on device)" in done.stderr
    closed = subprocess.run(
        [*command[:-1], "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        pass_fds=(),
        close_fds=True,
        preexec_fn=lambda: os.close(1),
    )
    assert closed.returncode == 0 and "Traceback" not in closed.stderr, closed.stderr


def test_sigterm_stops_a_command_as_ctrl_c_does_with_128_plus_the_signal(tmp_path: Path) -> None:
    """A job scheduler's SIGTERM (or a closed terminal's SIGHUP) takes the interrupt path:
    under --json stdout still holds one document, the exit status is 143 as a shell reports
    a process ended by SIGTERM, and no traceback."""
    import signal
    import time

    script = tmp_path / "sleepy.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfaccel", "run", "--json", "--quiet", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    while "started" not in proc.stderr.readline() and time.monotonic() < deadline:
        pass  # the script's own stdout goes to stderr under --json
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert json.loads(out) == {"error": None, "interrupted": True, "exit_code": 143}
    assert "tfaccel: stopped by SIGTERM" in err and "Traceback" not in err
