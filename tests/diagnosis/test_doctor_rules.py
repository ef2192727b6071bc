"""Doctor rules on hand-built Snapshots: one scenario that fires each rule and one that does not.

Scenarios are named after the public issue that motivated them where there is one.
"""

from __future__ import annotations

import json

import pytest
from machine_scenarios import (
    WHEEL_LIBS,
    cuda_libs,
    gpu,
    gpu_machine,
    nvidia_pci,
)

from tfaccel.core.findings import Finding, counts
from tfaccel.diagnosis import DoctorReport, diagnose
from tfaccel.diagnosis.rules import RULES
from tfaccel.snapshot import (
    CpuInfo,
    DeepProbe,
    Distribution,
    DriverInfo,
    LibraryLoad,
    NvmlInfo,
    PlatformInfo,
    Snapshot,
    TfBuild,
)

SECTION_1_IDS = {
    "windows_native", "tensorflow_gpu_deprecated", "cpu_only_build", "no_driver_or_hidden",
    "driver_mismatch", "driver_older_than_ptx", "missing_cuda_libs", "cudnn_mismatch",
    "cc_too_low", "cc_too_new", "xla_libdevice_ptxas", "oom", "config_after_init",
}  # fmt: skip
EXTRA_IDS = {
    "tensorflow_missing", "conflicting_tf_distributions", "gpu_too_few_cores", "cpu_no_avx",
    "gpu_memory_in_use", "env_settings", "tf_import", "tf_gpus_registered",
    "x86_emulation", "protobuf_incompatible", "keras_versions_mixed", "tensorboard_missing",
    "cupti_privileges",
}  # fmt: skip


# --------------------------------------------------------------------------- builders


def this_machine() -> Snapshot:
    """No NVIDIA hardware, NVML missing, tensorflow-cpu 2.21 (the project's own machine)."""
    return Snapshot(
        platform=PlatformInfo(system="Linux", machine="x86_64", python_version="3.11.9"),
        cpu=CpuInfo(model="AMD EPYC", flags=["avx", "avx2", "avx512f", "avx512_bf16"]),
        nvml=NvmlInfo(available=False, error="NVML Shared Library Not Found"),
        distributions=[Distribution("tensorflow-cpu", "2.21.0")],
        tensorflow=TfBuild(
            installed=True,
            distribution="tensorflow-cpu",
            version="2.21.0",
            build_info_found=True,
            is_cuda_build=False,
            is_rocm_build=False,
        ),
    )


def find(snapshot: Snapshot, id: str) -> Finding:
    found = diagnose(snapshot).finding(id)
    assert found is not None, f"no finding {id}"
    return found


def statuses(report: DoctorReport) -> dict[str, str]:
    return {f.id: f.status for f in report.findings}


# --------------------------------------------------------------------------- whole reports


def test_this_machine_cpu_only_no_nvidia_is_not_alarming() -> None:
    report = diagnose(this_machine())
    by_id = statuses(report)
    assert report.exit_code == 0
    assert by_id["cpu_only_build"] == "ok"
    assert report.finding("cpu_only_build").title == (  # type: ignore[union-attr]
        "CPU-only build; no NVIDIA GPU found, so it fits this machine"
    )
    assert by_id["no_driver_or_hidden"] == "skip"
    assert report.finding("no_driver_or_hidden").title == "no NVIDIA GPU on this machine"  # type: ignore[union-attr]
    for id in ("driver_mismatch", "missing_cuda_libs", "cudnn_mismatch", "cc_too_low",
               "cc_too_new", "xla_libdevice_ptxas", "gpu_too_few_cores", "gpu_memory_in_use"):  # fmt: skip
        assert by_id[id] == "skip", id
        assert report.finding(id).title  # type: ignore[union-attr]
    assert "warn" not in by_id.values() and "fail" not in by_id.values()


def test_healthy_gpu_machine_has_no_warning_or_failure() -> None:
    report = diagnose(gpu_machine())
    bad = [f for f in report.findings if f.status in ("warn", "fail")]
    assert bad == []
    assert report.exit_code == 0


def test_every_contract_id_is_reported_once_per_snapshot() -> None:
    ids = [f.id for f in diagnose(gpu_machine()).findings]
    assert set(ids) == SECTION_1_IDS | EXTRA_IDS
    assert len(ids) == len(set(ids))
    assert len(RULES) == len(ids) + 1  # plus the deep-log rule, which adds nothing here


def test_report_to_dict_is_json_with_summary_and_exit_code() -> None:
    report = diagnose(this_machine(), log="OOM when allocating tensor with shape[8,3]")
    data = json.loads(json.dumps(report.to_dict()))
    assert set(data) == {"findings", "log", "summary", "exit_code"}
    assert set(data["findings"][0]) == {
        "id",
        "status",
        "title",
        "evidence",
        "numbers",
        "fix",
        "gain",
        "source",
    }
    assert set(data["summary"]) == {"ok", "skip", "info", "warn", "fail"}
    assert data["log"]["causes"][0]["id"] == "oom"
    assert data["exit_code"] == 1 == report.exit_code  # the log's failure counts
    assert sum(data["summary"].values()) == len(data["findings"]) + 1


def test_log_causes_are_findings_counted_with_the_checks() -> None:
    log = (
        "Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.23GiB with "
        "freed_by_count=0. The caller indicates that this is not a failure"
    )
    report = diagnose(this_machine(), log=log)
    assert report.log is not None
    (cause,) = report.log.causes
    assert isinstance(cause, Finding)
    assert (cause.id, cause.status, cause.source) == ("oom", "warn", "log")
    assert report.counts()["warn"] == counts(report.findings)["warn"] + 1
    assert report.exit_code == 0  # a warning is not a failure
    assert report.to_dict()["log"]["causes"] == [cause.to_dict()]


def test_report_without_log_has_null_log() -> None:
    data = diagnose(this_machine()).to_dict()
    assert data["log"] is None
    assert data["exit_code"] == 0


# --------------------------------------------------------------------------- installation


def test_tensorflow_missing_warns_with_install_command() -> None:
    s = gpu_machine()
    s.distributions = []
    s.tensorflow = TfBuild(installed=False)
    f = find(s, "tensorflow_missing")
    assert f.status == "warn"
    assert f.fix == "pip install 'tensorflow[and-cuda]'"
    s.pci, s.nvml = [], NvmlInfo()
    assert find(s, "tensorflow_missing").fix == "pip install tensorflow"


def test_tensorflow_missing_ok_when_installed() -> None:
    f = find(this_machine(), "tensorflow_missing")
    assert f.status == "ok"
    assert "tensorflow-cpu 2.21.0" in f.title


def test_tensorflow_gpu_deprecated_dionhaefner_pyhpc_benchmarks_17() -> None:
    s = gpu_machine(tf_version="2.10.0")
    s.distributions = [Distribution("tensorflow-gpu", "2.10.0")]
    s.tensorflow.distribution = "tensorflow-gpu"
    f = find(s, "tensorflow_gpu_deprecated")
    assert f.status == "warn"
    assert f.fix == "pip uninstall -y tensorflow-gpu && pip install 'tensorflow[and-cuda]'"
    assert any("tensorflow-gpu 2.10.0" in e for e in f.evidence)


def test_tensorflow_gpu_deprecated_ok_without_it() -> None:
    assert find(gpu_machine(), "tensorflow_gpu_deprecated").status == "ok"


@pytest.mark.parametrize(
    "names",
    [
        ("tensorflow", "tensorflow-cpu"),
        ("tensorflow", "tf-nightly"),
        ("Tensorflow_CPU", "tf_nightly"),
    ],
)
def test_conflicting_tf_distributions_fails(names: tuple[str, str]) -> None:
    s = gpu_machine()
    s.distributions = [Distribution(n, "2.21.0") for n in names]
    f = find(s, "conflicting_tf_distributions")
    assert f.status == "fail"
    assert f.fix is not None and f.fix.startswith("pip uninstall -y ")
    assert f.fix.endswith("&& pip install 'tensorflow[and-cuda]'")


def test_conflicting_tf_distributions_ok_for_windows_companion_package() -> None:
    s = this_machine()
    s.platform.system = "Windows"
    s.distributions = [
        Distribution("tensorflow", "2.15.0"),
        Distribution("tensorflow-intel", "2.15.0"),
    ]
    assert find(s, "conflicting_tf_distributions").status == "ok"
    assert find(gpu_machine(), "conflicting_tf_distributions").status == "ok"


def test_conflicting_tf_distributions_ok_for_nightly_with_its_windows_companion() -> None:
    s = this_machine()
    s.platform.system = "Windows"
    s.distributions = [
        Distribution("tf-nightly", "2.22.0.dev1"),
        Distribution("tf-nightly-intel", "2.22.0.dev1"),
    ]
    assert find(s, "conflicting_tf_distributions").status == "ok"


# --------------------------------------------------------------------------- platform


def windows(s: Snapshot, tf_version: str) -> Snapshot:
    s.platform = PlatformInfo(system="Windows", machine="AMD64")
    s.tensorflow.version = tf_version
    s.tensorflow.distribution = "tensorflow"
    s.tensorflow.is_cuda_build = False
    s.distributions = [Distribution("tensorflow", tf_version)]
    return s


def test_windows_native_fails_for_tf_2_15_with_nvidia_gpu() -> None:
    s = windows(gpu_machine(), "2.15.0")
    f = find(s, "windows_native")
    assert f.status == "fail"
    assert f.fix is not None and "wsl --install" in f.fix and "528.33" in f.fix
    # the CPU-only build on that GPU machine points at WSL2 too
    assert find(s, "cpu_only_build").fix == f.fix


def test_windows_native_ok_for_tf_2_10_and_skipped_on_linux() -> None:
    assert find(windows(gpu_machine(), "2.10.1"), "windows_native").status == "ok"
    assert find(gpu_machine(), "windows_native").status == "skip"
    no_gpu = windows(this_machine(), "2.21.0")
    assert find(no_gpu, "windows_native").status == "ok"


def test_cpu_only_build_fails_on_machine_with_nvidia_gpu() -> None:
    s = gpu_machine()
    s.distributions = [Distribution("tensorflow-cpu", "2.21.0")]
    s.tensorflow.distribution = "tensorflow-cpu"
    s.tensorflow.is_cuda_build = False
    f = find(s, "cpu_only_build")
    assert f.status == "fail"
    assert f.fix == "pip uninstall -y tensorflow-cpu && pip install 'tensorflow[and-cuda]'"
    assert any("RTX 4090" in e for e in f.evidence)
    report = diagnose(s)
    assert report.exit_code == 1
    # rules that need a CUDA build say why they do not apply
    assert "not a CUDA build" in report.finding("missing_cuda_libs").title  # type: ignore[union-attr]


def test_cpu_only_build_on_aarch64_points_to_ngc_container() -> None:
    s = gpu_machine()
    s.platform.machine = "aarch64"
    s.distributions = [
        Distribution("tensorflow", "2.21.0"),
        Distribution("tensorflow-cpu-aws", "2.15.0"),
    ]
    s.tensorflow.is_cuda_build = False
    f = find(s, "cpu_only_build")
    assert f.status == "fail"
    assert f.fix is not None and "CPU-only" in f.fix and "nvcr.io/nvidia/tensorflow" in f.fix


def test_cpu_only_build_ok_for_cuda_build_and_without_build_info() -> None:
    assert find(gpu_machine(), "cpu_only_build").status == "ok"
    s = gpu_machine()
    s.tensorflow.is_cuda_build = None
    s.tensorflow.build_info_found = False
    assert find(s, "cpu_only_build").status == "skip"


def test_cpu_no_avx_fails_on_old_cpu() -> None:
    s = this_machine()
    s.cpu.flags = ["sse", "sse2", "sse4_1", "sse4_2"]
    s.cpu.model = "Intel Pentium G4560"
    f = find(s, "cpu_no_avx")
    assert f.status == "fail"
    assert "Illegal instruction" in f.title


def test_cpu_no_avx_ok_with_avx_and_skipped_on_arm() -> None:
    assert find(this_machine(), "cpu_no_avx").status == "ok"
    s = this_machine()
    s.platform.machine = "aarch64"
    s.cpu.flags = ["fp", "asimd"]
    assert find(s, "cpu_no_avx").status == "skip"


# --------------------------------------------------------------------------- driver


def test_no_driver_or_hidden_mobilenet_ssd_keras_10_wrong_visible_index() -> None:
    s = gpu_machine()
    s.env["CUDA_VISIBLE_DEVICES"] = "1"  # one GPU, index 0
    f = find(s, "no_driver_or_hidden")
    assert f.status == "fail"
    assert f.fix is not None and "export CUDA_VISIBLE_DEVICES=0" in f.fix
    assert any("'1' hides every GPU" in e for e in f.evidence)


@pytest.mark.parametrize("value", ["", "-1", " -1 ", "GPU-ffffffff"])
def test_no_driver_or_hidden_cuda_visible_devices_hides_all(value: str) -> None:
    s = gpu_machine()
    s.env["CUDA_VISIBLE_DEVICES"] = value
    f = find(s, "no_driver_or_hidden")
    assert f.status == "fail"
    assert f.fix is not None and "unset CUDA_VISIBLE_DEVICES" in f.fix


def test_no_driver_or_hidden_warns_when_list_stops_early() -> None:
    s = gpu_machine(gpus=[gpu(0), gpu(1)])
    s.env["CUDA_VISIBLE_DEVICES"] = "0,-1,1"
    f = find(s, "no_driver_or_hidden")
    assert f.status == "warn"
    assert any("stops at '-1'" in e for e in f.evidence)


@pytest.mark.parametrize(
    ("pci_driver", "expected"), [(None, "no kernel driver bound"), ("nouveau", "'nouveau'")]
)
def test_no_driver_or_hidden_pci_device_without_nvidia_driver(
    pci_driver: str | None, expected: str
) -> None:
    s = gpu_machine()
    s.pci = [nvidia_pci(0, pci_driver)]
    s.nvml = NvmlInfo(available=False, error="NVML Shared Library Not Found")
    s.driver = DriverInfo()
    f = find(s, "no_driver_or_hidden")
    assert f.status == "fail"
    assert any(expected in e for e in f.evidence)
    assert any("/proc/driver/nvidia/version" in e for e in f.evidence)
    assert f.fix is not None and "sudo ubuntu-drivers install" in f.fix


def test_no_driver_or_hidden_container_without_gpus_flag() -> None:
    s = gpu_machine()
    s.platform.in_container = True
    s.nvml = NvmlInfo(available=False, error="NVML Shared Library Not Found")
    s.driver.libcuda = LibraryLoad(
        "libcuda.so.1", "cuda", False, error="libcuda.so.1: cannot open shared object file"
    )
    s.env["NVIDIA_VISIBLE_DEVICES"] = "void"
    f = find(s, "no_driver_or_hidden")
    assert f.status == "fail"
    assert f.fix is not None and "--gpus all" in f.fix
    assert any("libcuda.so.1: cannot open" in e for e in f.evidence)
    assert any("NVIDIA_VISIBLE_DEVICES='void'" in e for e in f.evidence)


def test_no_driver_or_hidden_wsl_points_at_wsl_lib_dir() -> None:
    s = gpu_machine()
    s.platform.is_wsl = True
    s.pci = []  # WSL2 shows no NVIDIA PCI device
    s.driver = DriverInfo(
        libcuda=LibraryLoad("libcuda.so.1", "cuda", False, error="cannot open shared object file"),
        wsl_lib_dir_present=True,
    )
    f = find(s, "no_driver_or_hidden")
    assert f.status == "fail"
    assert f.fix == "export LD_LIBRARY_PATH=/usr/lib/wsl/lib:$LD_LIBRARY_PATH"
    s.nvml = NvmlInfo(available=False, error="NVML Shared Library Not Found")
    f = find(s, "no_driver_or_hidden")
    assert f.status == "skip"
    assert any("/usr/lib/wsl/lib" in e for e in f.evidence)


def test_no_driver_or_hidden_nvml_missing_beside_a_bound_nvidia_device() -> None:
    s = gpu_machine()
    s.nvml = NvmlInfo(available=False, error="NVML Shared Library Not Found")
    s.driver.libcuda = None  # not probed
    f = find(s, "no_driver_or_hidden")
    assert f.status == "fail"
    assert any("NVML Shared Library Not Found" in e for e in f.evidence)


def test_no_driver_or_hidden_ok_with_driver_and_valid_visible_devices() -> None:
    s = gpu_machine(gpus=[gpu(0), gpu(1)])
    s.env["CUDA_VISIBLE_DEVICES"] = "1"
    f = find(s, "no_driver_or_hidden")
    assert f.status == "ok"
    assert "560.35.03" in f.title


def test_driver_mismatch_nvml_reports_version_mismatch() -> None:
    s = gpu_machine()
    s.nvml = NvmlInfo(available=False, error="Driver/library version mismatch")
    s.driver.libcuda_file_version = "550.90.07"
    s.driver.kernel_module_version = "550.54.14"
    f = find(s, "driver_mismatch")
    assert f.status == "fail"
    assert f.fix is not None and "sudo reboot" in f.fix
    assert "kernel module: 550.54.14" in f.evidence and "libcuda file: 550.90.07" in f.evidence


def test_driver_mismatch_container_libcuda_differs_from_host() -> None:
    s = gpu_machine()
    s.platform.in_container = True
    s.driver.libcuda_file_version = "535.104.05"
    f = find(s, "driver_mismatch")
    assert f.status == "fail"
    assert f.fix is not None and "--gpus all" in f.fix


def test_driver_mismatch_forward_compat_libcuda_only_warns() -> None:
    s = gpu_machine()
    s.driver.libcuda_file_version = "570.86.10"
    s.driver.libcuda = LibraryLoad(
        "libcuda.so.1", "cuda", True, "/usr/local/cuda/compat/libcuda.so.570.86.10"
    )
    assert find(s, "driver_mismatch").status == "warn"


def test_driver_mismatch_ok_when_versions_agree() -> None:
    assert find(gpu_machine(), "driver_mismatch").status == "ok"
    assert find(this_machine(), "driver_mismatch").status == "skip"


def test_driver_older_than_ptx_conda_forge_tensorflow_feedstock_417() -> None:
    # driver 550.144 supports CUDA 12.4; TF 2.18 was built with CUDA 12.5
    s = gpu_machine(tf_version="2.18.0", cuda="12.5.1", driver="550.144.03", driver_cuda="12.4")
    f = find(s, "driver_older_than_ptx")
    assert f.status == "warn"
    assert "12.4" in f.title and "12.5" in f.title
    assert f.fix is not None and "555.42.02" in f.fix


def test_driver_older_than_ptx_fails_across_cuda_majors_and_below_minimum() -> None:
    s = gpu_machine(driver="470.256.02", driver_cuda="11.4")
    f = find(s, "driver_older_than_ptx")
    assert f.status == "fail"
    assert any("525.60.13" in e for e in f.evidence)
    s = gpu_machine(driver="", driver_cuda="11.8")
    assert find(s, "driver_older_than_ptx").status == "fail"


def test_driver_older_than_ptx_on_wsl_points_at_the_windows_driver() -> None:
    s = gpu_machine(driver="527.41", driver_cuda="12.0")
    s.platform.is_wsl = True
    f = find(s, "driver_older_than_ptx")
    assert f.status == "fail"  # WSL2 needs >= 528.33 for CUDA 12
    assert f.fix is not None and "Windows driver" in f.fix and "ubuntu-drivers" not in f.fix


def test_driver_older_than_ptx_ok_with_new_driver() -> None:
    assert find(gpu_machine(), "driver_older_than_ptx").status == "ok"
    s = gpu_machine()
    s.nvml.cuda_driver_version = None
    s.driver.cuda_driver_api_version = None
    assert find(s, "driver_older_than_ptx").status == "skip"


# --------------------------------------------------------------------------- libraries


def test_missing_cuda_libs_google_deepmind_alphafold_26() -> None:
    s = gpu_machine(cuda="11.0", cudnn="8")
    s.tools.nvidia_wheel_lib_dirs = []
    for lib in s.cuda_libs:
        if lib.component in ("cusolver", "cudnn"):
            lib.soname = "libcusolver.so.11" if lib.component == "cusolver" else "libcudnn.so.8"
            lib.loaded, lib.path, lib.version = False, None, None
            lib.error = f"{lib.soname}: cannot open shared object file: No such file or directory"
    f = find(s, "missing_cuda_libs")
    assert f.status == "fail"
    assert "libcusolver.so.11" in f.title and "libcudnn.so.8" in f.title
    assert any("libcudnn.so.8: cannot open shared object file" in e for e in f.evidence)
    assert f.fix is not None and f.fix.startswith("pip install 'tensorflow[and-cuda]'")
    assert "TF_CPP_MAX_VLOG_LEVEL=3" in f.fix


def test_missing_cuda_libs_with_wheels_points_at_ld_library_path() -> None:
    s = gpu_machine()
    cublas = s.cuda_libs[1]
    cublas.loaded, cublas.error = False, "libcublas.so.12: undefined symbol: cublasLtGetVersion"
    f = find(s, "missing_cuda_libs")
    assert f.fix is not None and f.fix.startswith(f"export LD_LIBRARY_PATH={WHEEL_LIBS}/cudnn/lib:")
    assert "libcublas.so.12: undefined symbol: cublasLtGetVersion" in f.evidence
    # cudart's wheel (nvidia/cuda_runtime) is not installed at all: install it
    s.cuda_libs[0].loaded = False
    assert find(s, "missing_cuda_libs").fix.startswith("pip install 'tensorflow[and-cuda]'")  # type: ignore[union-attr]


def test_missing_cuda_libs_ok_when_all_load_and_skipped_without_gpu() -> None:
    assert find(gpu_machine(), "missing_cuda_libs").status == "ok"
    assert find(this_machine(), "missing_cuda_libs").status == "skip"


def test_cudnn_mismatch_balancap_ssd_tensorflow_340() -> None:
    # TF 1.x built with cuDNN 7.0.3 found 7.3.1: old TF needed the same major.minor
    s = gpu_machine(
        tf_version="1.5.0", cuda="9.0", cudnn="7.0.3", driver="390.87", driver_cuda="9.1"
    )
    s.cuda_libs = cuda_libs(cudnn_version="7.3.1", via="system")
    f = find(s, "cudnn_mismatch")
    assert f.status == "fail"
    assert any("7.3.1" in e for e in f.evidence) and any("7.0.3" in e for e in f.evidence)


@pytest.mark.parametrize("loaded", ["9.1.0", "8.9.7"])
def test_cudnn_mismatch_older_or_other_major_than_tf(loaded: str) -> None:
    s = gpu_machine()  # TF 2.21: cuDNN 9.3
    s.tensorflow.cudnn_version = "9.3.0"
    s.cuda_libs = cuda_libs(cudnn_version=loaded)
    f = find(s, "cudnn_mismatch")
    assert f.status == "fail"
    assert f.fix == "pip install -U 'nvidia-cudnn-cu12>=9.3.0'"


@pytest.mark.parametrize("loaded", ["9.3.0", "9.8.0"])
def test_cudnn_mismatch_ok_for_same_or_newer_minor(loaded: str) -> None:
    s = gpu_machine()
    s.tensorflow.cudnn_version = "9.3.0"
    s.cuda_libs = cuda_libs(cudnn_version=loaded)
    assert find(s, "cudnn_mismatch").status == "ok"


# --------------------------------------------------------------------------- GPU fit


def test_cc_too_low_tensorflow_6083_gtx_660m() -> None:
    s = gpu_machine(gpus=[gpu(name="GeForce GTX 660M", cc="3.0", sms=2)], tf_version="0.12.0")
    s.tensorflow.cuda_compute_capabilities = ["3.5", "5.2"]
    f = find(s, "cc_too_low")
    assert f.status == "fail"
    assert any("3.0 < minimum 3.5" in e for e in f.evidence)
    assert f.fix is not None and "TF_CUDA_COMPUTE_CAPABILITIES=3.0" in f.fix


def test_cc_too_low_maxwell_on_current_wheels() -> None:
    s = gpu_machine(gpus=[gpu(name="GeForce GTX 980", cc="5.2", sms=16)])
    assert find(s, "cc_too_low").status == "fail"
    assert find(s, "cc_too_new").status == "ok"  # reported once, by cc_too_low


def test_cc_too_low_ok_for_pascal() -> None:
    s = gpu_machine(gpus=[gpu(name="Tesla P100", cc="6.0", sms=56)])
    assert find(s, "cc_too_low").status == "ok"
    assert find(s, "cc_too_new").status == "ok"


def test_cc_too_new_tensorflow_99592_rtx_5090() -> None:
    s = gpu_machine(
        gpus=[gpu(name="NVIDIA GeForce RTX 5090", cc="12.0", sms=170)], tf_version="2.20.0"
    )
    f = find(s, "cc_too_new")
    assert f.status == "fail"
    assert any("compute_90" in e and "Blackwell" in e for e in f.evidence)
    assert f.fix is not None and "nvcr.io/nvidia/tensorflow" in f.fix


def test_cc_too_new_hopper_jit_only_warns() -> None:
    s = gpu_machine(gpus=[gpu(name="NVIDIA H100 80GB HBM3", cc="9.0", sms=132, total_gib=80)])
    f = find(s, "cc_too_new")
    assert f.status == "warn"
    assert f.fix is not None and "CUDA_CACHE_MAXSIZE" in f.fix


@pytest.mark.parametrize("cc", ["8.6", "8.9", "7.5", "6.1"])
def test_cc_too_new_ok_with_binary_kernels(cc: str) -> None:
    assert find(gpu_machine(gpus=[gpu(cc=cc)]), "cc_too_new").status == "ok"


def test_cc_too_new_and_low_skip_without_build_targets() -> None:
    s = gpu_machine()
    s.tensorflow.cuda_compute_capabilities = []
    assert find(s, "cc_too_new").status == "skip"
    assert find(s, "cc_too_low").status == "skip"


def test_gpu_too_few_cores_mixed_gpus() -> None:
    s = gpu_machine(
        gpus=[gpu(0, "NVIDIA A100", "8.0", 108), gpu(1, "NVIDIA GeForce GT 1030", "6.1", 3)]
    )
    f = find(s, "gpu_too_few_cores")
    assert f.status == "warn"
    assert f.fix == "export TF_MIN_GPU_MULTIPROCESSOR_COUNT=3"
    s.env["TF_MIN_GPU_MULTIPROCESSOR_COUNT"] = "3"
    assert find(s, "gpu_too_few_cores").status == "ok"
    s.env["TF_MIN_GPU_MULTIPROCESSOR_COUNT"] = "200"
    assert find(s, "gpu_too_few_cores").status == "fail"


def test_gpu_too_few_cores_ok_for_single_small_gpu() -> None:
    # the minimum is min(8, the largest count): a lone small GPU is used
    s = gpu_machine(gpus=[gpu(name="NVIDIA GeForce GT 1030", cc="6.1", sms=3)])
    assert find(s, "gpu_too_few_cores").status == "ok"


def test_xla_libdevice_ptxas_iot_salzburg_gpu_jupyter_129() -> None:
    s = gpu_machine(tf_version="2.15.0", cuda="12.2", cudnn="8.9")
    s.tools.ptxas = None
    s.tools.libdevice = None
    f = find(s, "xla_libdevice_ptxas")
    assert f.status == "warn"
    assert f.fix is not None and f.fix.startswith("pip install 'nvidia-cuda-nvcc-cu12==12.2.*'")
    assert "--xla_gpu_cuda_data_dir=" in f.fix


def test_xla_libdevice_ptxas_ok_with_nvcc_wheel() -> None:
    assert find(gpu_machine(), "xla_libdevice_ptxas").status == "ok"


def test_gpu_memory_in_use_warns_when_another_process_holds_it() -> None:
    s = gpu_machine(gpus=[gpu(used_gib=22.5)])
    f = find(s, "gpu_memory_in_use")
    assert f.status == "warn"
    assert any("22.5 GiB of 24.0 GiB" in e for e in f.evidence)
    assert f.fix is not None and f.fix.startswith("nvidia-smi --query-compute-apps")


def test_gpu_memory_in_use_ok_when_free() -> None:
    assert find(gpu_machine(), "gpu_memory_in_use").status == "ok"


@pytest.mark.parametrize("id", ["oom", "config_after_init"])
def test_log_only_rules_skip_and_point_at_log_option(id: str) -> None:
    f = find(gpu_machine(), id)
    assert f.status == "skip"
    assert "tfaccel doctor --log FILE" in f.title


def test_oom_from_log_zhengyang_wang_deeplab_v2_22() -> None:
    log = "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[5760,4,4,2048]"
    report = diagnose(gpu_machine(), log=log, log_source="train.log")
    assert report.log is not None and report.log.source == "train.log"
    assert [c.id for c in report.log.causes] == ["oom"]
    assert report.exit_code == 1


def test_config_after_init_from_log_huggingface_transformers_1507() -> None:
    log = "RuntimeError: Virtual devices cannot be modified after being initialized"
    report = diagnose(this_machine(), log=log)
    assert report.log is not None and report.log.causes[0].id == "config_after_init"


# --------------------------------------------------------------------------- environment


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TF_FORCE_GPU_ALLOW_GROWTH", "yes"),
        ("TF_FORCE_GPU_ALLOW_GROWTH", "True"),
        ("TF_GPU_ALLOCATOR", "cuda_async"),
        ("CUDA_DEVICE_ORDER", "pci_bus_id"),
        ("TF_CPP_MIN_LOG_LEVEL", "quiet"),
        ("XLA_FLAGS", "xla_gpu_autotune_level=0"),
        ("TF_CONFIG", "{bad json"),
        ("TF_CONFIG", '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}'),
    ],
)
def test_env_settings_warns_on_values_tf_does_not_understand(name: str, value: str) -> None:
    s = gpu_machine()
    s.env[name] = value
    f = find(s, "env_settings")
    assert f.status == "warn"
    assert f"{name}={value}" in f.evidence
    assert f.fix


def test_env_settings_xla_cuda_data_dir_without_libdevice() -> None:
    s = gpu_machine()
    s.env["XLA_FLAGS"] = "--xla_gpu_cuda_data_dir=/opt/cuda-missing"
    s.tools.libdevice = None
    f = find(s, "env_settings")
    assert f.status == "warn"
    assert any("/opt/cuda-missing/nvvm/libdevice/libdevice.10.bc" in e for e in f.evidence)


def test_env_settings_reports_valid_values_as_evidence() -> None:
    s = gpu_machine()
    s.env.update(
        {
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
            "TF_GPU_ALLOCATOR": "cuda_malloc_async",
            "XLA_FLAGS": f"--xla_gpu_cuda_data_dir={WHEEL_LIBS}/cuda_nvcc",
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "TF_CONFIG": '{"cluster": {"worker": ["a:1", "b:1"]}, '
            '"task": {"type": "worker", "index": 1}}',
        }
    )
    f = find(s, "env_settings")
    assert f.status == "ok"
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in f.evidence
    assert "TF_GPU_ALLOCATOR=cuda_malloc_async" in f.evidence
    assert find(this_machine(), "env_settings").status == "ok"


# --------------------------------------------------------------------------- deep probe


def deep(**kwargs: object) -> DeepProbe:
    values: dict[str, object] = {
        "ran": True, "ok": True, "returncode": 0, "timeout_s": 60.0, "duration_s": 4.2,
        "tf_version": "2.21.0", "built_with_cuda": True,
        "physical_devices": ["CPU:0", "GPU:0"], "log": "",
    }  # fmt: skip
    values.update(kwargs)
    return DeepProbe(**values)  # type: ignore[arg-type]


def test_tf_import_crash_with_sigill() -> None:
    s = this_machine()
    s.deep = deep(
        ok=False, returncode=-4, physical_devices=[], log="Illegal instruction (core dumped)"
    )
    f = find(s, "tf_import")
    assert f.status == "fail"
    assert "SIGILL" in f.title
    assert "log: Illegal instruction (core dumped)" in f.evidence
    report = diagnose(s)
    assert any(x.id == "cpu_no_avx" and x.source == "deep" for x in report.findings)


def test_tf_import_hang_and_exception() -> None:
    s = this_machine()
    s.deep = deep(ok=False, timed_out=True, returncode=None, physical_devices=[])
    assert find(s, "tf_import").status == "fail"
    assert "60 s" in find(s, "tf_import").title
    s.deep = deep(ok=False, returncode=1, error="ImportError: libcudart.so.11.0: cannot open")
    f = find(s, "tf_import")
    assert f.status == "fail"
    assert "error: ImportError: libcudart.so.11.0: cannot open" in f.evidence


# What a CPU machine's `import tensorflow` prints on every start (TensorFlow 2.21), after the
# line that tells what went wrong.
STARTUP_NOTICES = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795400751.258919   26082 port.cc:153] oneDNN custom operations are on. You may see slightly different numerical results due to floating-point round-off errors from different computation orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.
I0000 00:00:1795400751.301113   26082 cpu_feature_guard.cc:210] This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.
To enable the following instructions: AVX2 AVX512F AVX512_VNNI FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795400752.258919   26082 port.cc:153] oneDNN custom operations are on. You may see slightly different numerical results due to floating-point round-off errors from different computation orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.
"""  # fmt: skip


def test_tf_import_failure_evidence_keeps_the_error_not_the_startup_notices() -> None:
    s = this_machine()
    error = "ImportError: numpy.core.multiarray failed to import"
    s.deep = deep(ok=False, returncode=1, physical_devices=[], log=f"{error}\n{STARTUP_NOTICES}")
    f = find(s, "tf_import")
    assert f.status == "fail"
    logged = [line for line in f.evidence if line.startswith("log: ")]
    assert logged == [f"log: {error}"]
    assert not any("oneDNN" in line or "absl::InitializeLog" in line for line in f.evidence)


def test_tf_import_timeout_below_the_default_says_the_time_was_short() -> None:
    s = this_machine()
    s.deep = deep(ok=False, timed_out=True, returncode=None, timeout_s=5.0, log=STARTUP_NOTICES)
    f = find(s, "tf_import")
    assert f.status == "fail"
    assert f.title == "import tensorflow did not finish within 5 s" and "hung" not in f.title
    assert f.fix is not None and "try the default 120 s (--deep-timeout 120" in f.fix
    assert "time allowed: 5 s, below the default 120 s" in " ".join(f.evidence)
    s.deep = deep(ok=False, timed_out=True, returncode=None, timeout_s=300.0)
    f = find(s, "tf_import")
    assert f.title == "import tensorflow hung (no answer within 300 s)"
    assert f.fix is not None and "--deep-timeout" not in f.fix


def test_tf_import_ok_and_skipped_without_deep() -> None:
    s = gpu_machine()
    s.deep = deep()
    assert find(s, "tf_import").status == "ok"
    assert find(gpu_machine(), "tf_import").status == "skip"
    assert find(gpu_machine(), "tf_gpus_registered").status == "skip"


def test_tf_gpus_registered_none_of_two() -> None:
    s = gpu_machine(gpus=[gpu(0), gpu(1)])
    s.deep = deep(physical_devices=["/physical_device:CPU:0"])
    f = find(s, "tf_gpus_registered")
    assert f.status == "fail"
    s.deep = deep(physical_devices=["/physical_device:CPU:0", "/physical_device:GPU:0"])
    assert find(s, "tf_gpus_registered").status == "warn"


def test_tf_gpus_registered_ok_all_or_as_visible_devices_select() -> None:
    s = gpu_machine(gpus=[gpu(0), gpu(1)])
    s.deep = deep(physical_devices=["CPU:0", "GPU:0", "GPU:1"])
    assert find(s, "tf_gpus_registered").status == "ok"
    s.env["CUDA_VISIBLE_DEVICES"] = "1"
    s.deep = deep(physical_devices=["CPU:0", "GPU:0"])
    assert find(s, "tf_gpus_registered").status == "ok"
    cpu = this_machine()
    cpu.deep = deep(physical_devices=["CPU:0"], built_with_cuda=False)
    assert find(cpu, "tf_gpus_registered").status == "skip"


def test_deep_log_causes_become_findings_from_deep() -> None:
    s = gpu_machine()
    s.deep = deep(
        physical_devices=["CPU:0"],
        log="W0000 00:00:1727.5 123 gpu_device.cc:2344] Cannot dlopen some GPU libraries. "
        "Skipping registering GPU devices...",
    )
    report = diagnose(s)
    deep_findings = [f for f in report.findings if f.source == "deep"]
    assert [(f.id, f.status) for f in deep_findings] == [("missing_cuda_libs", "fail")]
    assert report.exit_code == 1


def test_deep_log_cuda_build_on_machine_without_gpu_is_expected() -> None:
    s = this_machine()
    s.tensorflow.distribution = "tensorflow"
    s.tensorflow.is_cuda_build = True
    s.distributions = [Distribution("tensorflow", "2.21.0")]
    s.deep = deep(
        physical_devices=["CPU:0"],
        log="I0000 00:00:1727.5 1 cuda_executor.cc:1015] Could not find cuda drivers on your "
        "machine, GPU will not be used.\nE0000 00:00:1727.6 1 cuda_executor.cc:1001] failed "
        "call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    )
    report = diagnose(s)
    deep_findings = [f for f in report.findings if f.source == "deep"]
    assert [(f.id, f.status) for f in deep_findings] == [("no_driver_or_hidden", "skip")]
    assert report.exit_code == 0


# --------------------------------------------------------------------------- Python packages

TF_221_REQUIRES = [
    "absl-py>=1.0.0",
    "protobuf<8.0.0,>=6.31.1",
    "keras>=3.12.0",
    'nvidia-cudnn-cu12<10.0,>=9.3.0.75; extra == "and-cuda"',
]
TF_215_REQUIRES = [
    "protobuf!=4.21.0,!=4.21.1,!=4.21.2,!=4.21.3,!=4.21.4,!=4.21.5,<5.0.0dev,>=3.20.3",
    "keras<2.16,>=2.15.0",
    "tensorboard<2.16,>=2.15",
]


def with_packages(
    s: Snapshot, requires: list[str], *dists: tuple[str, str], env: dict[str, str] | None = None
) -> Snapshot:
    s.tensorflow.requires = list(requires)
    s.distributions = [
        Distribution(s.tensorflow.distribution or "tensorflow", s.tensorflow.version or "")
    ]
    s.distributions += [Distribution(n, v) for n, v in dists]
    s.env.update(env or {})
    return s


def test_requirement_and_satisfies_read_pep_440_specifiers() -> None:
    from tfaccel.diagnosis.rules.python_packages import requirement, satisfies

    assert requirement(TF_221_REQUIRES, "protobuf") == "<8.0.0,>=6.31.1"
    assert requirement(TF_221_REQUIRES, "nvidia-cudnn-cu12") is None  # an extra's
    assert requirement(["protobuf (>=3.9.2)"], "protobuf") == ">=3.9.2"
    assert requirement(TF_221_REQUIRES, "tensorboard") is None
    assert satisfies("7.36.2", "<8.0.0,>=6.31.1") is True
    assert satisfies("5.29.3", "<8.0.0,>=6.31.1") is False
    assert satisfies("4.21.1", TF_215_REQUIRES[0].removeprefix("protobuf")) is False
    assert satisfies("3.20.3", "==3.20.*") is True
    assert satisfies("2.15.1", "~=2.15.0") is True and satisfies("2.16.0", "~=2.15.0") is False
    assert satisfies("x", ">=1") is None


def test_protobuf_incompatible_outside_tensorflows_range() -> None:
    s = with_packages(gpu_machine(), TF_221_REQUIRES, ("protobuf", "5.29.3"), ("keras", "3.12.0"))
    f = find(s, "protobuf_incompatible")
    assert f.status == "fail"
    assert "protobuf<8.0.0,>=6.31.1" in " ".join(f.evidence)
    assert f.fix == "pip install 'protobuf<8.0.0,>=6.31.1'"


def test_protobuf_incompatible_dso_60_tf_1_14_with_protobuf_4() -> None:
    # deep-symbolic-optimization#60: TF 1.14 under protobuf 4 ('Descriptors cannot be created
    # directly'); TF 1.14's METADATA asked only protobuf>=3.6.1
    s = with_packages(this_machine(), ["protobuf>=3.6.1"], ("protobuf", "4.21.1"))
    s.tensorflow.version = "1.14.0"
    f = find(s, "protobuf_incompatible")
    assert f.status == "fail" and f.fix == "pip install 'protobuf==3.20.*'"


def test_protobuf_incompatible_ok_in_range_and_skipped_without_metadata() -> None:
    s = with_packages(gpu_machine(), TF_221_REQUIRES, ("protobuf", "7.36.2"), ("keras", "3.12.0"))
    assert find(s, "protobuf_incompatible").status == "ok"
    assert find(gpu_machine(), "protobuf_incompatible").status == "skip"


def test_keras_versions_mixed_keras_2_under_tf_2_21() -> None:
    s = with_packages(gpu_machine(), TF_221_REQUIRES, ("protobuf", "7.36.2"), ("keras", "2.15.0"))
    f = find(s, "keras_versions_mixed")
    assert f.status == "fail" and f.fix == "pip install 'keras>=3.12.0'"


def test_keras_versions_mixed_keras_3_under_tf_2_15_without_metadata() -> None:
    s = gpu_machine(tf_version="2.15.0")
    s.distributions.append(Distribution("keras", "3.3.3"))
    f = find(s, "keras_versions_mixed")
    assert f.status == "fail" and f.fix == "pip install 'keras~=2.15.0'"


def test_keras_versions_mixed_legacy_keras_without_tf_keras() -> None:
    s = with_packages(
        gpu_machine(), TF_221_REQUIRES, ("protobuf", "7.36.2"), ("keras", "3.12.0"),
        env={"TF_USE_LEGACY_KERAS": "1"},
    )  # fmt: skip
    f = find(s, "keras_versions_mixed")
    assert f.status == "fail"
    assert f.fix is not None and f.fix.startswith("pip install 'tf-keras~=2.21.0'")


def test_keras_versions_mixed_legacy_keras_beside_keras_3_warns() -> None:
    s = with_packages(
        gpu_machine(), TF_221_REQUIRES, ("protobuf", "7.36.2"), ("keras", "3.12.0"),
        ("tf-keras", "2.21.0"), env={"TF_USE_LEGACY_KERAS": "true"},
    )  # fmt: skip
    f = find(s, "keras_versions_mixed")
    assert f.status == "warn" and "Two Kerases" in f.title
    s.distributions = [d for d in s.distributions if d.name != "tf-keras"]
    s.distributions.append(Distribution("tf-keras", "2.17.0"))
    f = find(s, "keras_versions_mixed")
    assert f.status == "warn" and f.fix == "pip install 'tf-keras~=2.21.0'"


def test_keras_versions_mixed_ok_cases() -> None:
    s = with_packages(
        gpu_machine(), TF_221_REQUIRES, ("protobuf", "7.36.2"), ("keras", "3.12.0"),
        ("tf-keras", "2.21.0"),
    )  # fmt: skip
    assert find(s, "keras_versions_mixed").status == "ok"
    s.env["TF_USE_LEGACY_KERAS"] = "1"
    s.distributions = [d for d in s.distributions if d.name != "keras"]
    assert find(s, "keras_versions_mixed").status == "ok"  # tf_keras alone
    old = gpu_machine(tf_version="2.15.0")
    old.distributions.append(Distribution("keras", "2.15.0"))
    old.env["TF_USE_LEGACY_KERAS"] = "1"
    assert find(old, "keras_versions_mixed").status == "ok"


def test_tensorboard_missing_under_tf_2_21_is_an_info_with_pip_install() -> None:
    # keras-team/keras#22376, stared/livelossplot#152: TF 2.21 no longer installs tensorboard
    s = with_packages(this_machine(), TF_221_REQUIRES, ("protobuf", "7.36.2"), ("keras", "3.12.0"))
    f = find(s, "tensorboard_missing")
    assert f.status == "info" and f.fix == "pip install tensorboard"
    assert "TBNotInstalledError" in " ".join(f.evidence)
    assert diagnose(s).exit_code == 0


def test_tensorboard_missing_fails_when_tensorflow_requires_it() -> None:
    s = with_packages(gpu_machine(tf_version="2.15.0"), TF_215_REQUIRES, ("protobuf", "4.25.3"))
    f = find(s, "tensorboard_missing")
    assert f.status == "fail" and f.fix == "pip install 'tensorboard<2.16,>=2.15'"


def test_tensorboard_missing_ok_when_installed_and_skipped_without_metadata() -> None:
    s = with_packages(
        gpu_machine(), TF_221_REQUIRES, ("protobuf", "7.36.2"), ("keras", "3.12.0"),
        ("tensorboard", "2.20.0"),
    )  # fmt: skip
    assert find(s, "tensorboard_missing").status == "ok"
    assert find(gpu_machine(), "tensorboard_missing").status == "skip"


# --------------------------------------------------------------------------- emulation, CUPTI


def test_x86_emulation_rosetta_tensorflow_58339() -> None:
    # tensorflow#58339: x86 tensorflow-macos in a Rosetta-translated Python on an M1 -> SIGILL
    s = this_machine()
    s.platform = PlatformInfo(
        system="Darwin", machine="x86_64", emulator="rosetta",
        emulator_evidence="sysctl.proc_translated = 1",
    )  # fmt: skip
    f = find(s, "x86_emulation")
    assert f.status == "fail" and "arm64" in (f.fix or "")
    assert "sysctl.proc_translated = 1" in f.evidence


def test_x86_emulation_qemu_user_warns_and_native_is_ok() -> None:
    s = this_machine()
    s.platform.emulator = "qemu-user"
    s.platform.emulator_evidence = "an x86_64 Python, while /proc/cpuinfo describes an Arm CPU"
    s.cpu.flags = ["fp", "asimd", "sve"]  # the host's, read through /proc/cpuinfo
    f = find(s, "x86_emulation")
    assert f.status == "warn" and "--platform linux/arm64" in (f.fix or "")
    assert find(s, "cpu_no_avx").status == "skip"
    assert find(this_machine(), "x86_emulation").status == "ok"


def test_cupti_privileges_warns_when_counters_are_for_root_only() -> None:
    s = gpu_machine()
    s.driver.profiling_admin_only = True
    s.platform.is_admin = False
    f = find(s, "cupti_privileges")
    assert f.status == "warn"
    assert "NVreg_RestrictProfilingToAdminUsers=0" in (f.fix or "")
    s.platform.is_admin = True
    assert find(s, "cupti_privileges").status == "ok"


def test_cupti_privileges_ok_unrestricted_and_skipped_unread_or_without_gpu() -> None:
    s = gpu_machine()
    assert find(s, "cupti_privileges").status == "skip"  # not read
    s.driver.profiling_admin_only = False
    assert find(s, "cupti_privileges").status == "ok"
    assert find(this_machine(), "cupti_privileges").status == "skip"


@pytest.mark.parametrize(
    ("issue", "name", "cc"),
    [
        ("tensorflow#89272", "NVIDIA GeForce RTX 5080", "12.0"),
        ("tensorflow#97387", "NVIDIA GeForce RTX 5070 Ti", "12.0"),
        ("tensorflow#99592", "NVIDIA GeForce RTX 5090", "12.0"),
        ("DGX Spark", "NVIDIA GB10", "12.1"),
        ("B200", "NVIDIA B200", "10.0"),
    ],
)
def test_cc_too_new_blackwell_on_pip_wheels(issue: str, name: str, cc: str) -> None:
    f = find(gpu_machine([gpu(name=name, cc=cc)]), "cc_too_new")
    assert f.status == "fail", issue
    assert "does not JIT for Blackwell" in " ".join(f.evidence)
