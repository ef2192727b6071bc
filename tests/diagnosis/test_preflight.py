"""doctor --preflight: one machine per verdict, built from the fake NVML binding and Snapshot
scenarios, each checked for its install command or the reason none fits; then the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fake_nvml import gpu as nvml_gpu
from fake_nvml import make_binding
from machine_scenarios import gpu_machine

from tfaccel.cli import main
from tfaccel.core.errors import UsageError
from tfaccel.diagnosis.preflight import PreflightReport, preflight
from tfaccel.diagnosis.releases import newest_tested, release, releases, sources
from tfaccel.probe import nvml
from tfaccel.snapshot import LibraryLoad, Snapshot, TfBuild, save_snapshot

GB = 10**9
CUDA13 = "/usr/local/cuda-13.0/lib64"


def machine(
    name: str = "NVIDIA GeForce RTX 4090",
    cc: tuple[int, int] = (8, 9),
    driver: str = "560.35.03",
    cuda: int = 12060,
    python: str = "3.12.3",
    glibc: str = "2.39",
    free_gb: float = 200,
    arch: str = "x86_64",
) -> Snapshot:
    """A Linux machine without TensorFlow; its GPU as the fake NVML binding reports it."""
    s = gpu_machine()
    s.nvml = nvml.collect(make_binding([nvml_gpu(name, cc=cc)], driver=driver, cuda=cuda))
    s.driver.kernel_module_version = s.driver.libcuda_file_version = driver
    s.platform.machine, s.platform.python_version = arch, python
    s.platform.libc, s.platform.libc_version = "glibc", glibc
    s.platform.install_dir = "/venv/lib/python3.12/site-packages"
    s.platform.install_dir_free_bytes = int(free_gb * GB)
    s.tensorflow, s.distributions, s.cuda_libs = TfBuild(), [], []
    s.cuda_runtimes = [
        LibraryLoad("libcudart.so.13", "cudart", error="libcudart.so.13: cannot open"),
        LibraryLoad("libcudart.so.12", "cudart", error="libcudart.so.12: cannot open"),
        LibraryLoad("libcudart.so.11.0", "cudart", error="libcudart.so.11.0: cannot open"),
    ]
    return s


def statuses(report: PreflightReport) -> dict[str, str]:
    return {f.id: f.status for f in report.findings}


# --- the table ----------------------------------------------------------------------------------


def test_the_table_covers_2_12_to_2_21_and_names_its_sources() -> None:
    versions = [r.version for r in releases()]
    assert versions == [f"2.{m}" for m in range(21, 11, -1)]
    assert newest_tested().version == "2.21"
    assert {"cuda, cudnn", "cuda_targets", "blackwell"} <= set(sources())
    assert all(r.cuda and r.cudnn and r.cuda_targets and r.tf_wheel_mb > 0 for r in releases())
    assert release("2.21").manylinux == "2.27" and release("2.20").manylinux == "2.17"
    assert release("2.19.1") is release("2.19") is release(" 2.19.* ")


@pytest.mark.parametrize("bad", ["banana", "", "2", "3.1", "2.11", "2.21.0rc1", "1e3"])
def test_a_release_the_table_does_not_hold_is_refused_with_the_ones_it_does(bad: str) -> None:
    with pytest.raises(UsageError) as caught:
        release(bad)
    assert "2.21, 2.20" in (caught.value.expected or "")
    assert "--tensorflow" in (caught.value.received or "") and caught.value.fix


# --- one machine per verdict --------------------------------------------------------------------


def test_all_fine_gives_the_and_cuda_install_command() -> None:
    report = preflight(machine())
    assert report.verdict.id == "preflight" and report.verdict.status == "ok"
    assert report.install == 'pip install "tensorflow[and-cuda]==2.21.0"'
    assert report.verdict.fix == report.install and report.exit_code == 0
    assert "RTX 4090" in report.verdict.title
    assert set(statuses(report).values()) == {"ok"}


def test_driver_too_old_for_cuda_12_points_to_the_newest_cuda_11_release() -> None:
    report = preflight(machine(driver="470.82.01", cuda=11040, python="3.11.9"))
    assert statuses(report)["driver_older_than_ptx"] == "fail"
    assert report.verdict.status == "fail" and report.exit_code == 1
    assert "driver 470.82.01 is too old for CUDA 12.x" in report.verdict.title
    assert report.install == 'pip install "tensorflow[and-cuda]==2.14.1"'
    assert report.verdict.fix.startswith(report.install)


def test_cc_too_low_points_to_the_newest_release_built_for_it() -> None:
    report = preflight(machine("Tesla K80", cc=(3, 7), python="3.11.9"))
    assert statuses(report)["cc_too_low"] == "fail"
    assert report.verdict.status == "fail"
    assert report.install == 'pip install "tensorflow[and-cuda]==2.14.1"'  # sm_35 until 2.14


def test_blackwell_without_sm_120_says_ptx_fails_and_gives_the_fallback() -> None:
    report = preflight(
        machine("NVIDIA GeForce RTX 5090", cc=(12, 0), driver="580.95.05", cuda=13000)
    )
    new = report.finding("cc_too_new")
    assert new is not None and new.status == "fail"
    assert any("#89272" in e and "CUDA_ERROR_INVALID_PTX" in e for e in new.evidence)
    assert report.verdict.status == "fail" and report.install is None
    assert "nvcr.io/nvidia/tensorflow" in (report.verdict.fix or "")
    assert "build TensorFlow from source" in (report.verdict.fix or "")
    assert "no release in tfaccel's table runs on this GPU" in (report.verdict.fix or "")


def test_python_without_a_wheel_says_so_before_pip_does() -> None:
    report = preflight(machine(python="3.14.0"))
    wheel = report.finding("no_matching_wheel")
    assert wheel is not None and wheel.status == "fail"
    assert "No matching distribution found" in wheel.title and "3.10 to 3.13" in wheel.title
    assert report.verdict.status == "fail" and report.install is None
    assert "Python 3.13" in (report.verdict.fix or "")


def test_an_old_python_gets_the_newest_release_that_has_its_wheel() -> None:
    report = preflight(machine(python="3.8.18"))
    assert statuses(report)["no_matching_wheel"] == "fail"
    # 2.13 has no [and-cuda] extra: CUDA and cuDNN come from the system
    assert report.install == 'pip install "tensorflow==2.13.1"'


def test_glibc_older_than_manylinux_2_27_points_to_2_20() -> None:
    report = preflight(machine(glibc="2.17"))
    assert statuses(report)["glibc_too_old"] == "fail"
    assert report.install == 'pip install "tensorflow[and-cuda]==2.20.0"'


def test_cuda_13_runtime_only_on_ld_library_path_warns_that_it_can_shadow() -> None:
    s = machine(driver="580.65.06", cuda=13000)
    s.cuda_runtimes[0] = LibraryLoad(
        "libcudart.so.13",
        "cudart",
        True,
        f"{CUDA13}/libcudart.so.13.0.48",
        "system",
        version="13.0",
    )
    s.env["LD_LIBRARY_PATH"] = CUDA13
    report = preflight(s)
    runtime = report.finding("cuda_runtime_other_major")
    assert runtime is not None and runtime.status == "warn"
    assert any("bring their own" in e for e in runtime.evidence)
    assert any(CUDA13 in e and "libcudnn.so.9" in e for e in runtime.evidence)
    assert report.verdict.status == "warn" and report.exit_code == 0
    assert report.install == 'pip install "tensorflow[and-cuda]==2.21.0"'
    s.env.pop("LD_LIBRARY_PATH")  # found through ldconfig only: nothing to take off a path
    runtime = preflight(s).finding("cuda_runtime_other_major")
    assert runtime is not None and runtime.status == "ok"
    # the probe saw it come through a linked LD_LIBRARY_PATH entry (cuda/lib64 -> targets/...)
    s.cuda_runtimes[0].found_via = "LD_LIBRARY_PATH"
    s.env["LD_LIBRARY_PATH"] = "/usr/local/cuda/lib64"
    runtime = preflight(s).finding("cuda_runtime_other_major")
    assert runtime is not None and runtime.status == "warn"


def test_no_gpu_answers_the_cpu_question() -> None:
    s = machine()
    s.nvml.gpus, s.pci = [], []
    report = preflight(s)
    assert report.verdict.status == "info" and "no NVIDIA GPU" in report.verdict.title
    assert report.install == 'pip install "tensorflow==2.21.0"'
    assert statuses(report)["cc_too_new"] == "skip" and report.exit_code == 0


def test_aarch64_with_a_gpu_runs_on_the_cpu_only() -> None:
    report = preflight(machine("NVIDIA GH200 480GB", cc=(9, 0), arch="aarch64"))
    assert statuses(report)["no_gpu_wheel"] == "warn"
    assert report.verdict.status == "warn" and "CPU only" in report.verdict.title
    assert report.install == 'pip install "tensorflow==2.21.0"'


def test_macos_on_apple_silicon_gets_the_cpu_wheel_and_intel_macs_an_older_release() -> None:
    s = machine(arch="arm64")
    s.platform.system, s.platform.libc, s.platform.libc_version = "Darwin", "", ""
    s.nvml.gpus, s.pci = [], []
    report = preflight(s)
    assert statuses(report)["no_matching_wheel"] == "ok" and report.verdict.status == "info"
    assert report.install == 'pip install "tensorflow==2.21.0"'
    s.platform.machine, s.platform.python_version = "x86_64", "3.11.9"
    report = preflight(s)
    assert statuses(report)["no_matching_wheel"] == "fail"
    assert report.install == 'pip install "tensorflow==2.16.2"'  # the last macOS x86_64 wheels


def test_native_windows_with_a_gpu_runs_on_the_cpu_and_points_to_wsl2() -> None:
    s = machine()
    s.platform.system, s.platform.machine = "Windows", "AMD64"
    report = preflight(s)
    gpu_wheel = report.finding("no_gpu_wheel")
    assert gpu_wheel is not None and gpu_wheel.status == "warn" and "WSL2" in (gpu_wheel.fix or "")
    assert statuses(report)["glibc_too_old"] == "skip"
    assert report.install == 'pip install "tensorflow==2.21.0"' and report.exit_code == 0


def test_too_little_disk_for_the_wheels_fails() -> None:
    report = preflight(machine(free_gb=2))
    disk = report.finding("disk_space")
    assert disk is not None and disk.status == "fail"
    assert any("3380 MB" in e or "2807 MB" in e for e in disk.evidence)
    assert report.verdict.status == "fail"


# --- the CLI -----------------------------------------------------------------------------------


def test_cli_json_of_a_saved_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "snap.json"
    save_snapshot(machine(), path)
    assert main(["doctor", "--preflight", "--json", "--snapshot", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["findings"][0]["id"] == "preflight" and doc["exit_code"] == 0
    assert doc["preflight"]["install"] == 'pip install "tensorflow[and-cuda]==2.21.0"'
    save_snapshot(machine(cc=(3, 5)), path)
    assert main(["doctor", "--preflight", "--tensorflow", "2.19", "--snapshot", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("fail  preflight")


@pytest.mark.parametrize(
    "args",
    [
        ["--preflight", "--tensorflow", "banana"],
        ["--preflight", "--tensorflow", "2.99"],
        ["--tensorflow", "2.19"],
        ["--preflight", "--log", "x.log"],
    ],
)
def test_cli_bad_input_exits_2_with_what_expected_received_fix(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", *args]) == 2
    err = capsys.readouterr().err
    assert "Expected:" in err and "Received:" in err and "Fix:" in err
    assert "Traceback" not in err


def test_cli_on_this_machine_imports_no_tensorflow() -> None:
    code = (
        "import sys, json\n"
        "from tfaccel.cli import main\n"
        "rc = main(['doctor', '--preflight', '--json'])\n"
        "assert 'tensorflow' not in sys.modules\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)
    assert doc["findings"][0]["id"] == "preflight"
    assert doc["exit_code"] == done.returncode
