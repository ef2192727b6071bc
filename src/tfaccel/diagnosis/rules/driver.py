"""The NVIDIA driver and GPU visibility: is a driver loaded, and does it fit TensorFlow's CUDA.

Finding ids: ``no_driver_or_hidden`` (no usable NVIDIA driver, a PCI device without the
``nvidia`` kernel driver, or GPUs hidden by ``CUDA_VISIBLE_DEVICES`` / a container's
``NVIDIA_VISIBLE_DEVICES``), ``driver_mismatch`` (the kernel module and libcuda have different
versions), ``driver_older_than_ptx`` (the driver supports an older CUDA than TensorFlow was
built with) and ``cupti_privileges`` (the driver lets only root read the GPU's performance
counters, so the profiler records no GPU activity as a user).
"""

from __future__ import annotations

from tfaccel.core.findings import Finding, Status
from tfaccel.diagnosis.log.patterns import PROFILING_FIX
from tfaccel.diagnosis.rules._common import (
    NO_NVIDIA_GPU,
    dotted,
    gpu_count,
    gpu_skip_reason,
    gpu_summary,
    has_nvidia,
    is_windows_native,
    major_minor,
    make_finding,
    no_gpu_evidence,
    nvidia_pci,
    parse_version,
    skip,
    visibility,
)
from tfaccel.snapshot import Snapshot

INSTALL_DRIVER = "install the NVIDIA driver: sudo ubuntu-drivers install && sudo reboot"
# NVIDIA_VISIBLE_DEVICES values with which the container runtime exposes no GPU
_NO_DEVICES = ("", "void", "none")

# NVIDIA minor-version compatibility: the oldest driver each CUDA major runs on.
DRIVER_MINIMUM_LINUX = {12: "525.60.13", 11: "450.80.02"}
DRIVER_MINIMUM_WINDOWS = {12: "528.33", 11: "452.39"}  # also WSL2, which uses the Windows driver
# CUDA Toolkit release notes, table 3: the driver each toolkit release shipped with (Linux).
# fmt: off
TOOLKIT_DRIVER_LINUX = {
    (11, 8): "520.61.05", (12, 0): "525.60.13", (12, 1): "530.30.02", (12, 2): "535.54.03",
    (12, 3): "545.23.06", (12, 4): "550.54.14", (12, 5): "555.42.02", (12, 6): "560.28.03",
}
# fmt: on


def no_driver_or_hidden(s: Snapshot) -> Finding:
    """No usable NVIDIA driver, or the GPUs hidden by environment variables."""
    if not has_nvidia(s):
        return _no_gpu_finding(s)
    problems: list[tuple[Status, str, str]] = []  # (status, evidence, fix)
    problems += _hidden_by_env(s)
    problems += _driver_problems(s)
    if not problems:
        version = s.nvml.driver_version or s.driver.kernel_module_version or "?"
        title = f"NVIDIA driver {version} loaded; {gpu_count(s)} GPU(s) visible"
        return make_finding("no_driver_or_hidden", "ok", title, [f"GPUs: {gpu_summary(s)}"])
    status: Status = "fail" if any(p[0] == "fail" for p in problems) else "warn"
    title = "GPUs are hidden or the NVIDIA driver is not usable"
    fixes = list(dict.fromkeys(p[2] for p in problems))
    return make_finding(
        "no_driver_or_hidden", status, title, [p[1] for p in problems], "; ".join(fixes)
    )


def _no_gpu_finding(s: Snapshot) -> Finding:
    evidence = no_gpu_evidence(s)
    nvidia_visible = _container_hides_gpus(s)
    if nvidia_visible is not None:
        evidence.append(f"NVIDIA_VISIBLE_DEVICES={nvidia_visible!r}: the container got no GPU")
        return make_finding(
            "no_driver_or_hidden",
            "skip",
            "no NVIDIA GPU visible in this container",
            evidence,
            "if the host has a GPU: docker run --gpus all ... (NVIDIA Container Toolkit)",
        )
    if s.platform.is_wsl:
        present = "present" if s.driver.wsl_lib_dir_present else "missing"
        evidence.append(
            f"WSL2: /usr/lib/wsl/lib (where the Windows driver puts libcuda) is {present}"
        )
        return make_finding(
            "no_driver_or_hidden",
            "skip",
            "no NVIDIA GPU visible in WSL2",
            evidence,
            "if Windows has an NVIDIA GPU: install the NVIDIA Windows driver (>= 528.33) on "
            "Windows, not a Linux driver inside WSL",
        )
    return skip("no_driver_or_hidden", NO_NVIDIA_GPU, evidence)


def _container_hides_gpus(s: Snapshot) -> str | None:
    """``NVIDIA_VISIBLE_DEVICES`` when it gives this container no GPU, else None."""
    value = s.env.get("NVIDIA_VISIBLE_DEVICES")
    if s.platform.in_container and value is not None and value.strip().lower() in _NO_DEVICES:
        return value
    return None


def _hidden_by_env(s: Snapshot) -> list[tuple[Status, str, str]]:
    problems: list[tuple[Status, str, str]] = []
    value = s.env.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        total = gpu_count(s)
        seen = visibility(value, s.nvml.gpus, total)
        existing = ",".join(str(i) for i in range(total)) or "0"
        if seen.visible == 0:
            problems.append(
                (
                    "fail",
                    f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU "
                    f"(this machine has {total}: indices {existing})",
                    f"unset CUDA_VISIBLE_DEVICES (or export CUDA_VISIBLE_DEVICES={existing})",
                )
            )
        elif seen.stopped_at is not None:
            problems.append(
                (
                    "warn",
                    f"CUDA_VISIBLE_DEVICES={value!r}: CUDA stops at {seen.stopped_at!r} (no such "
                    f"GPU) and ignores it and every entry after it; {seen.visible} GPU(s) visible",
                    f"export CUDA_VISIBLE_DEVICES={existing}",
                )
            )
    nvidia_visible = _container_hides_gpus(s)
    if nvidia_visible is not None:
        problems.append(
            (
                "fail",
                f"NVIDIA_VISIBLE_DEVICES={nvidia_visible!r}: the container runtime exposes no GPU",
                "docker run --gpus all ... (or -e NVIDIA_VISIBLE_DEVICES=all)",
            )
        )
    return problems


def _driver_problems(s: Snapshot) -> list[tuple[Status, str, str]]:
    problems: list[tuple[Status, str, str]] = []
    if not s.platform.is_wsl:
        for dev in nvidia_pci(s):
            if dev.driver is None:
                problems.append(
                    ("fail", f"PCI {dev.address}: no kernel driver bound", INSTALL_DRIVER)
                )
            elif dev.driver != "nvidia":
                problems.append(
                    (
                        "fail",
                        f"PCI {dev.address}: bound to '{dev.driver}', not 'nvidia'",
                        INSTALL_DRIVER,
                    )
                )
        if nvidia_pci(s) and s.driver.proc_version is None and not s.platform.in_container:
            fix = "sudo modprobe nvidia" if s.driver.nvidia_smi_path else INSTALL_DRIVER
            problems.append(
                (
                    "fail",
                    "no /proc/driver/nvidia/version: the NVIDIA kernel module is not loaded",
                    fix,
                )
            )
    lib = s.driver.libcuda
    if lib is not None and not lib.loaded:
        problems.append(
            (
                "fail",
                f"{lib.soname or 'libcuda.so.1'} does not load: {lib.error or 'no error text'}",
                _libcuda_fix(s),
            )
        )
    elif lib is None and not s.nvml.gpus and s.nvml.error and not _nvml_mismatch(s):
        problems.append(
            (
                "fail",
                f"NVML: {s.nvml.error} (the user-space driver is missing or unusable)",
                _libcuda_fix(s),
            )
        )
    return problems


def _nvml_mismatch(s: Snapshot) -> bool:
    return "driver/library version mismatch" in (s.nvml.error or "").lower()


def _libcuda_fix(s: Snapshot) -> str:
    if s.platform.is_wsl:
        return "export LD_LIBRARY_PATH=/usr/lib/wsl/lib:$LD_LIBRARY_PATH"
    if s.platform.in_container:
        return "docker run --gpus all ... (the NVIDIA Container Toolkit mounts the host's libcuda)"
    return INSTALL_DRIVER


def driver_mismatch(s: Snapshot) -> Finding:
    """The kernel module and libcuda (the user-space driver) differ."""
    error = s.nvml.error or ""
    kernel = s.driver.kernel_module_version
    user = s.driver.libcuda_file_version
    evidence = []
    if kernel:
        evidence.append(f"kernel module: {kernel}")
    if user:
        evidence.append(f"libcuda file: {user}")
    if _nvml_mismatch(s):
        evidence.append(f"NVML: {error}")
        return _mismatch_fail(s, evidence)
    if kernel and user and kernel.strip() != user.strip():
        path = (s.driver.libcuda.path if s.driver.libcuda else None) or ""
        if "/compat/" in path:
            evidence.append(f"libcuda from {path} (CUDA forward compatibility)")
            return make_finding(
                "driver_mismatch",
                "warn",
                "A forward-compatibility libcuda is in use; it works only on data-center GPUs",
                evidence,
                "on other GPUs take /usr/local/cuda/compat off LD_LIBRARY_PATH",
            )
        return _mismatch_fail(s, evidence)
    if kernel and user:
        return make_finding("driver_mismatch", "ok", f"kernel module and libcuda are both {kernel}")
    if not has_nvidia(s):
        return skip("driver_mismatch", NO_NVIDIA_GPU)
    return skip("driver_mismatch", "kernel module and libcuda versions not both known", evidence)


def _mismatch_fail(s: Snapshot, evidence: list[str]) -> Finding:
    if s.platform.in_container:
        fix = "install no NVIDIA driver in the image; docker run --gpus all ... mounts the host's"
    else:
        fix = "sudo reboot (the driver was upgraded; the old kernel module is still loaded)"
    return make_finding(
        "driver_mismatch",
        "fail",
        "The NVIDIA kernel module and libcuda have different versions",
        evidence,
        fix,
    )


def driver_older_than_ptx(s: Snapshot) -> Finding:
    """The driver supports an older CUDA than TensorFlow was built with."""
    reason = gpu_skip_reason(s)
    if reason:
        return skip("driver_older_than_ptx", reason)
    driver_cuda_text = s.nvml.cuda_driver_version or s.driver.cuda_driver_api_version
    driver_cuda = major_minor(driver_cuda_text)
    tf_cuda = major_minor(s.tensorflow.cuda_version)
    if tf_cuda is None:
        return skip("driver_older_than_ptx", "TensorFlow's CUDA version is unknown")
    evidence = [f"TensorFlow built with CUDA {s.tensorflow.cuda_version}"]
    driver = s.nvml.driver_version or s.driver.kernel_module_version
    if driver:
        evidence.append(f"driver {driver}")
    minimum = _driver_minimum(s, tf_cuda[0])
    if driver and minimum and (parse_version(driver) or (0,)) < (parse_version(minimum) or (0,)):
        evidence.append(f"CUDA {tf_cuda[0]}.x needs driver >= {minimum}")
        return make_finding(
            "driver_older_than_ptx",
            "fail",
            f"Driver {driver} is too old for CUDA {tf_cuda[0]}.x",
            evidence,
            _driver_fix(s, tf_cuda),
        )
    if driver_cuda is None:
        return skip("driver_older_than_ptx", "the driver's CUDA version is unknown", evidence)
    evidence.append(f"driver supports CUDA {driver_cuda_text}")
    if driver_cuda[0] < tf_cuda[0]:
        return make_finding(
            "driver_older_than_ptx",
            "fail",
            f"The driver's CUDA {dotted(driver_cuda)} is older than TensorFlow's CUDA "
            f"{dotted(tf_cuda)}: CUDA will not start",
            evidence,
            _driver_fix(s, tf_cuda),
        )
    if driver_cuda < tf_cuda:
        evidence.append(
            "minor-version compatibility keeps it running, but XLA disables parallel compilation "
            "and PTX from the newer compiler does not load (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)"
        )
        return make_finding(
            "driver_older_than_ptx",
            "warn",
            f"The driver's CUDA {dotted(driver_cuda)} is older than TensorFlow's PTX compiler "
            f"(CUDA {dotted(tf_cuda)})",
            evidence,
            _driver_fix(s, tf_cuda),
        )
    return make_finding(
        "driver_older_than_ptx",
        "ok",
        f"driver CUDA {dotted(driver_cuda)} >= TensorFlow's CUDA {dotted(tf_cuda)}",
        evidence,
    )


def _driver_minimum(s: Snapshot, cuda_major: int) -> str | None:
    table = DRIVER_MINIMUM_WINDOWS if _windows_driver(s) else DRIVER_MINIMUM_LINUX
    return table.get(cuda_major)


def _driver_fix(s: Snapshot, tf_cuda: tuple[int, int]) -> str:
    if _windows_driver(s):
        return (
            f"install an NVIDIA Windows driver that supports CUDA {dotted(tf_cuda)} from "
            "https://www.nvidia.com/drivers (WSL2 uses the Windows driver; install none inside WSL)"
        )
    wanted = TOOLKIT_DRIVER_LINUX.get(tf_cuda)
    needs = (
        f"driver >= {wanted}"
        if wanted
        else f"a driver whose `nvidia-smi` CUDA Version >= {dotted(tf_cuda)}"
    )
    return f"upgrade to a {needs}: sudo ubuntu-drivers install && sudo reboot"


def _windows_driver(s: Snapshot) -> bool:
    """Whether the NVIDIA Windows driver serves this machine (native Windows, or WSL2)."""
    return is_windows_native(s) or s.platform.is_wsl


def cupti_privileges(s: Snapshot) -> Finding:
    """The driver lets only root read GPU performance counters: a profile shows no GPU work."""
    if not has_nvidia(s):
        return skip("cupti_privileges", NO_NVIDIA_GPU)
    restricted = s.driver.profiling_admin_only
    if restricted is None:
        return skip(
            "cupti_privileges",
            "the driver's profiling setting (/proc/driver/nvidia/params) was not read",
        )
    if not restricted:
        return make_finding(
            "cupti_privileges",
            "ok",
            "every user may read GPU performance counters",
            ["/proc/driver/nvidia/params: RmProfilingAdminOnly: 0"],
        )
    evidence = [
        "/proc/driver/nvidia/params: RmProfilingAdminOnly: 1 "
        "(NVreg_RestrictProfilingToAdminUsers=1)"
    ]
    if s.platform.is_admin:
        evidence.append("this process runs as root, which may read them")
        return make_finding(
            "cupti_privileges",
            "ok",
            "GPU performance counters are for root only; this is root",
            evidence,
        )
    evidence.append(
        "the TensorFlow profiler (TensorBoard's profile, `tfaccel profile`) gets "
        "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES and records no GPU kernels as a user"
    )
    return make_finding(
        "cupti_privileges",
        "warn",
        "Only root may read GPU performance counters: a profile run as this user shows no GPU work",
        evidence,
        PROFILING_FIX,
    )
