"""The doctor's checks: pure functions of a Snapshot, run in the order of :data:`RULES`.

Each rule reads a :class:`~tfaccel.snapshot.Snapshot` and returns one :class:`Finding` (or a
list of them). Rules do no I/O and never import TensorFlow, so every one of them is tested with
a Snapshot built by hand. A rule that does not apply says ``skip`` and why; a machine without
an NVIDIA GPU running a CPU build of TensorFlow gets ``ok`` and ``skip``, never a failure.

The facts behind the rules (driver minimums, wheel targets, message texts) are the ones of
section 1 of the project's reference notes, from TensorFlow's install docs and source and
NVIDIA's CUDA release notes.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

from tfaccel.diagnosis.logmatch import match_log
from tfaccel.findings import Finding, Status
from tfaccel.snapshot import GpuInfo, LibraryLoad, PciDevice, Snapshot

__all__ = ["RULES", "Rule", "run_rules"]

Rule = Callable[[Snapshot], "Finding | list[Finding]"]

INSTALL_GPU = "pip install 'tensorflow[and-cuda]'"
INSTALL_PLAIN = "pip install tensorflow"
NGC_CONTAINER = "docker run --gpus all -it --rm nvcr.io/nvidia/tensorflow:25.02-tf2-py3"
WSL_FIX = f"wsl --install, then inside WSL2: {INSTALL_GPU} (NVIDIA Windows driver >= 528.33)"
LOG_HINT = "seen only in a log or traceback: run `tfaccel doctor --log FILE`"
VLOG_DEBUG = (
    'TF_CPP_MAX_VLOG_LEVEL=3 python -c "import tensorflow as tf; '
    "print(tf.config.list_physical_devices('GPU'))\""
)

# Every distribution that installs the ``tensorflow`` package (normalised names).
# fmt: off
TF_DISTRIBUTIONS = frozenset({
    "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-cpu-aws",
    "tensorflow-macos", "tensorflow-aarch64", "tensorflow-rocm", "intel-tensorflow",
    "tf-nightly", "tf-nightly-cpu", "tf-nightly-gpu", "tf-nightly-intel",
})
CPU_ONLY_DISTRIBUTIONS = frozenset({
    "tensorflow-cpu", "tensorflow-intel", "tensorflow-cpu-aws", "tensorflow-macos",
    "tensorflow-aarch64", "intel-tensorflow", "tf-nightly-cpu", "tf-nightly-intel",
})
# fmt: on
REMOVED_DISTRIBUTIONS = frozenset({"tensorflow-gpu", "tf-nightly-gpu"})
# Distributions that ``tensorflow`` (or ``tf-nightly``) itself pulls in on some platforms
# (Windows: -intel; Linux aarch64: -cpu-aws; tensorflow-macos >= 2.13 is a shim over tensorflow).
TF_COMPANIONS = {
    "tensorflow": frozenset({"tensorflow-intel", "tensorflow-cpu-aws", "tensorflow-macos"}),
    "tf-nightly": frozenset({"tf-nightly-intel"}),
}

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

SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV"}
MEMORY_IN_USE_SHARE = 0.5
DEFAULT_MIN_GPU_CORES = 8  # TensorFlow's kDefaultMinGPUMultiprocessorCount


# --------------------------------------------------------------------------- helpers


def _finding(
    id: str,
    status: Status,
    title: str,
    evidence: list[str] | None = None,
    fix: str | None = None,
    source: str = "probe",
) -> Finding:
    return Finding(id, status, title, list(evidence or []), fix, source)


def _version(text: str | None) -> tuple[int, ...] | None:
    """``"12.5.1"`` -> ``(12, 5, 1)``; ``"12.x"`` -> ``(12,)``; ``""``/``"abc"`` -> None."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    if match is None:
        return None
    return tuple(int(part[:9]) for part in match.group(1).split("."))


def _major_minor(text: str | None) -> tuple[int, int] | None:
    parts = _version(text)
    if parts is None:
        return None
    return parts[0], parts[1] if len(parts) > 1 else 0


def _dotted(parts: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in parts)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().strip()


def _installed(s: Snapshot) -> dict[str, str]:
    """Installed distributions, normalised name -> version."""
    return {_normalise(d.name): d.version for d in s.distributions if d.name}


def _tf_distributions(s: Snapshot) -> dict[str, str]:
    return {n: v for n, v in _installed(s).items() if n in TF_DISTRIBUTIONS}


def _tf_installed(s: Snapshot) -> bool:
    return s.tensorflow.installed or bool(_tf_distributions(s))


def _tf_label(s: Snapshot) -> str:
    tf = s.tensorflow
    name = tf.distribution or "tensorflow"
    return f"{name} {tf.version}" if tf.version else name


def _nvidia_pci(s: Snapshot) -> list[PciDevice]:
    """NVIDIA display/3D controllers (vendor 0x10de, PCI class 0x03xxxx)."""
    return [
        d
        for d in s.pci
        if d.vendor_id.strip().lower() == "0x10de" and d.class_id.strip().lower().startswith("0x03")
    ]


def _has_nvidia(s: Snapshot) -> bool:
    return bool(_nvidia_pci(s) or s.nvml.gpus)


def _gpu_count(s: Snapshot) -> int:
    return len(s.nvml.gpus) if s.nvml.gpus else len(_nvidia_pci(s))


def _system(s: Snapshot) -> str:
    return s.platform.system.strip().lower()


def _arch(s: Snapshot) -> str:
    machine = s.platform.machine.strip().lower()
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _is_windows_native(s: Snapshot) -> bool:
    return _system(s) == "windows"


def _gpu_install_command(s: Snapshot) -> str:
    """The install command that gives this machine GPU support, where pip wheels have it."""
    if _system(s) == "linux" and _arch(s) == "x86_64" and _has_nvidia(s):
        return INSTALL_GPU
    return INSTALL_PLAIN


def _cuda_build(s: Snapshot) -> bool | None:
    """Whether the installed TensorFlow is a CUDA build; None when it cannot be told."""
    if s.tensorflow.is_cuda_build is not None:
        return s.tensorflow.is_cuda_build
    if s.tensorflow.is_rocm_build:
        return False
    name = _normalise(s.tensorflow.distribution or "")
    if name in CPU_ONLY_DISTRIBUTIONS:
        return False
    return None


def _gpu_skip_reason(s: Snapshot) -> str | None:
    """Why a rule about TensorFlow on the GPU does not apply here, or None when it does."""
    if not _has_nvidia(s):
        return "no NVIDIA GPU on this machine"
    if not _tf_installed(s):
        return "TensorFlow is not installed"
    cuda = _cuda_build(s)
    if cuda is False:
        return f"{_tf_label(s)} is not a CUDA build (see cpu_only_build)"
    if cuda is None:
        return f"cannot tell whether {_tf_label(s)} is a CUDA build (no build info)"
    return None


def _skip(id: str, reason: str, evidence: list[str] | None = None) -> Finding:
    return _finding(id, "skip", reason, evidence)


def _gpu_name(gpu: GpuInfo) -> str:
    return f"GPU {gpu.index} ({gpu.name or 'unnamed'})"


def _no_gpu_evidence(s: Snapshot) -> list[str]:
    evidence = ["no NVIDIA PCI device (vendor 0x10de) found"]
    if s.nvml.error:
        evidence.append(f"NVML: {s.nvml.error}")
    elif not s.nvml.gpus:
        evidence.append("NVML lists no GPU")
    return evidence


@dataclass
class _Visibility:
    """How ``CUDA_VISIBLE_DEVICES`` selects GPUs, read with CUDA's rules."""

    visible: int  # GPUs CUDA will show
    stopped_at: str | None  # the first entry CUDA rejects; it ignores that one and the rest


def _visibility(value: str, gpus: list[GpuInfo], total: int) -> _Visibility:
    """Count the GPUs ``CUDA_VISIBLE_DEVICES=value`` leaves visible.

    CUDA reads the list in order and stops at the first entry that names no GPU
    (``-1``, an index out of range, an unknown UUID).
    """
    uuids = [g.uuid for g in gpus if g.uuid]
    seen: set[str] = set()
    for raw in value.split(","):
        entry = raw.strip()
        if entry.isdigit() and int(entry[:9]) < total:
            seen.add(entry.lstrip("0") or "0")
            continue
        if entry.startswith(("GPU-", "MIG-")) and (
            not uuids or any(u.startswith(entry) for u in uuids)
        ):
            seen.add(entry)
            continue
        return _Visibility(len(seen), entry)
    return _Visibility(len(seen), None)


# --------------------------------------------------------------------------- installation


def tensorflow_missing(s: Snapshot) -> Finding:
    """TensorFlow is not installed at all."""
    if _tf_installed(s):
        evidence = [f"{n} {v}" for n, v in sorted(_tf_distributions(s).items())]
        if s.tensorflow.location:
            evidence.append(f"package at {s.tensorflow.location}")
        return _finding("tensorflow_missing", "ok", f"{_tf_label(s)} is installed", evidence)
    evidence = ["no tensorflow distribution is installed in this environment"]
    if s.platform.python_executable:
        evidence.append(f"python: {s.platform.python_executable}")
    if s.tensorflow.error:
        evidence.append(f"reading TensorFlow's files: {s.tensorflow.error}")
    return _finding(
        "tensorflow_missing",
        "warn",
        "TensorFlow is not installed",
        evidence,
        _gpu_install_command(s),
    )


def tensorflow_gpu_deprecated(s: Snapshot) -> Finding:
    """The removed ``tensorflow-gpu`` (or ``tf-nightly-gpu``) package is installed."""
    removed = {n: v for n, v in _installed(s).items() if n in REMOVED_DISTRIBUTIONS}
    if not removed:
        return _finding(
            "tensorflow_gpu_deprecated", "ok", "the removed tensorflow-gpu is not installed"
        )
    names = " ".join(sorted(removed))
    evidence = [
        f"{n} {v} is installed; it was removed after 2.11 and gets no updates"
        for n, v in sorted(removed.items())
    ]
    return _finding(
        "tensorflow_gpu_deprecated",
        "warn",
        "The tensorflow-gpu package was removed; TensorFlow is its own GPU package now",
        evidence,
        f"pip uninstall -y {names} && {_gpu_install_command(s)}",
    )


def conflicting_tf_distributions(s: Snapshot) -> Finding:
    """Two TensorFlow distributions installed side by side overwrite each other's files."""
    dists = _tf_distributions(s)
    primary = set(dists)
    for main, companions in TF_COMPANIONS.items():
        if main in dists:
            primary -= companions
    if len(primary) < 2:
        evidence = [f"{n} {v}" for n, v in sorted(dists.items())]
        return _finding(
            "conflicting_tf_distributions", "ok", "one TensorFlow distribution installed", evidence
        )
    names = " ".join(sorted(dists))
    evidence = [f"{n} {v}" for n, v in sorted(dists.items())]
    evidence.append("each installs the same `tensorflow` package: the last one installed wins")
    return _finding(
        "conflicting_tf_distributions",
        "fail",
        f"{len(primary)} TensorFlow distributions are installed side by side",
        evidence,
        f"pip uninstall -y {names} && {_gpu_install_command(s)}",
    )


def windows_native(s: Snapshot) -> Finding:
    """Native Windows has no CUDA build of TensorFlow >= 2.11."""
    if not _is_windows_native(s):
        system = s.platform.system or "unknown"
        return _skip("windows_native", f"not native Windows ({system})")
    if not _tf_installed(s):
        return _skip("windows_native", "TensorFlow is not installed")
    version = _major_minor(s.tensorflow.version)
    evidence = [f"native Windows, {_tf_label(s)}"]
    if version is None:
        return _skip("windows_native", "TensorFlow's version is unknown", evidence)
    if version < (2, 11):
        return _finding(
            "windows_native",
            "ok",
            "TensorFlow < 2.11 still has native Windows GPU builds",
            evidence,
        )
    if not _has_nvidia(s):
        return _finding(
            "windows_native",
            "ok",
            "native Windows without an NVIDIA GPU: the CPU build fits",
            evidence,
        )
    evidence.append("TensorFlow >= 2.11 has no CUDA build for native Windows")
    return _finding(
        "windows_native",
        "fail",
        "TensorFlow cannot use the NVIDIA GPU on native Windows",
        evidence,
        WSL_FIX,
    )


def cpu_only_build(s: Snapshot) -> Finding:
    """A CPU-only (or ROCm) TensorFlow on a machine with an NVIDIA GPU."""
    if not _tf_installed(s):
        return _skip("cpu_only_build", "TensorFlow is not installed")
    tf = s.tensorflow
    cuda = _cuda_build(s)
    evidence = [f"installed: {_tf_label(s)}"]
    if tf.build_info_found:
        evidence.append(f"build info: is_cuda_build={tf.is_cuda_build}")
    if cuda is None:
        return _skip("cpu_only_build", "cannot tell the build type (no build info)", evidence)
    if cuda:
        versions = f"CUDA {tf.cuda_version or '?'}, cuDNN {tf.cudnn_version or '?'}"
        return _finding("cpu_only_build", "ok", f"CUDA build ({versions})", evidence)
    kind = "ROCm build" if tf.is_rocm_build else "CPU-only build"
    if not _has_nvidia(s):
        evidence += _no_gpu_evidence(s)
        title = f"{kind}; no NVIDIA GPU found, so it fits this machine"
        return _finding("cpu_only_build", "ok", title, evidence)
    evidence.append(f"NVIDIA GPU present: {_gpu_summary(s)}")
    return _finding(
        "cpu_only_build",
        "fail",
        f"{kind} of TensorFlow on a machine with an NVIDIA GPU",
        evidence,
        _cpu_build_fix(s),
    )


def _gpu_summary(s: Snapshot) -> str:
    if s.nvml.gpus:
        return ", ".join(_gpu_name(g) for g in s.nvml.gpus)
    return ", ".join(
        f"PCI {d.address or '?'} (device {d.device_id or '?'})" for d in _nvidia_pci(s)
    )


def _cpu_build_fix(s: Snapshot) -> str:
    if _is_windows_native(s):
        return WSL_FIX
    if _system(s) == "linux" and _arch(s) == "aarch64":
        return f"Linux aarch64 TensorFlow wheels are CPU-only; use NVIDIA's: {NGC_CONTAINER}"
    if _system(s) == "linux" and _arch(s) == "x86_64":
        name = s.tensorflow.distribution or "tensorflow-cpu"
        return f"pip uninstall -y {name} && {INSTALL_GPU}"
    return f"TensorFlow has CUDA wheels only for Linux x86_64 (or WSL2); there: {INSTALL_GPU}"


def cpu_no_avx(s: Snapshot) -> Finding:
    """Official x86_64 wheels are built with AVX; without it ``import tensorflow`` dies."""
    if _arch(s) != "x86_64":
        return _skip("cpu_no_avx", f"not an x86_64 CPU ({s.platform.machine or 'unknown'})")
    flags = {f.strip().lower() for f in s.cpu.flags}
    if not flags:
        return _skip("cpu_no_avx", "the CPU flags were not read")
    model = s.cpu.model or "this CPU"
    if "avx" in flags:
        wide = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
        return _finding("cpu_no_avx", "ok", f"{model} has AVX", [f"flags: avx {' '.join(wide)}"])
    status: Status = "fail" if _tf_installed(s) else "warn"
    return _finding(
        "cpu_no_avx",
        status,
        "The CPU lacks AVX: official TensorFlow wheels stop with 'Illegal instruction'",
        [f"{model}: no 'avx' among {len(flags)} CPU flags"],
        "run on a CPU with AVX, or build TensorFlow on this machine: "
        "bazel build --copt=-march=native //tensorflow/tools/pip_package:wheel",
    )


# --------------------------------------------------------------------------- driver


def no_driver_or_hidden(s: Snapshot) -> Finding:
    """No usable NVIDIA driver, or the GPUs hidden by environment variables."""
    if not _has_nvidia(s):
        return _no_gpu_finding(s)
    problems: list[tuple[Status, str, str]] = []  # (status, evidence, fix)
    problems += _hidden_by_env(s)
    problems += _driver_problems(s)
    if not problems:
        version = s.nvml.driver_version or s.driver.kernel_module_version or "?"
        title = f"NVIDIA driver {version} loaded; {_gpu_count(s)} GPU(s) visible"
        return _finding("no_driver_or_hidden", "ok", title, [f"GPUs: {_gpu_summary(s)}"])
    status: Status = "fail" if any(p[0] == "fail" for p in problems) else "warn"
    title = "GPUs are hidden or the NVIDIA driver is not usable"
    fixes = list(dict.fromkeys(p[2] for p in problems))
    return _finding(
        "no_driver_or_hidden", status, title, [p[1] for p in problems], "; ".join(fixes)
    )


def _no_gpu_finding(s: Snapshot) -> Finding:
    evidence = _no_gpu_evidence(s)
    nvidia_visible = s.env.get("NVIDIA_VISIBLE_DEVICES")
    if s.platform.in_container and nvidia_visible is not None and _hides_all(nvidia_visible):
        evidence.append(f"NVIDIA_VISIBLE_DEVICES={nvidia_visible!r}: the container got no GPU")
        return _finding(
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
        return _finding(
            "no_driver_or_hidden",
            "skip",
            "no NVIDIA GPU visible in WSL2",
            evidence,
            "if Windows has an NVIDIA GPU: install the NVIDIA Windows driver (>= 528.33) on "
            "Windows, not a Linux driver inside WSL",
        )
    return _skip("no_driver_or_hidden", "no NVIDIA GPU on this machine", evidence)


def _hides_all(value: str) -> bool:
    return value.strip().lower() in ("", "void", "none")


def _hidden_by_env(s: Snapshot) -> list[tuple[Status, str, str]]:
    problems: list[tuple[Status, str, str]] = []
    value = s.env.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        total = _gpu_count(s)
        seen = _visibility(value, s.nvml.gpus, total)
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
    nvidia_visible = s.env.get("NVIDIA_VISIBLE_DEVICES")
    if s.platform.in_container and nvidia_visible is not None and _hides_all(nvidia_visible):
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
    install = "install the NVIDIA driver: sudo ubuntu-drivers install && sudo reboot"
    if not s.platform.is_wsl:
        for dev in _nvidia_pci(s):
            if dev.driver is None:
                problems.append(("fail", f"PCI {dev.address}: no kernel driver bound", install))
            elif dev.driver != "nvidia":
                problems.append(
                    ("fail", f"PCI {dev.address}: bound to '{dev.driver}', not 'nvidia'", install)
                )
        if _nvidia_pci(s) and s.driver.proc_version is None and not s.platform.in_container:
            fix = "sudo modprobe nvidia" if s.driver.nvidia_smi_path else install
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
    return "install the NVIDIA driver: sudo ubuntu-drivers install && sudo reboot"


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
            return _finding(
                "driver_mismatch",
                "warn",
                "A forward-compatibility libcuda is in use; it works only on data-center GPUs",
                evidence,
                "on other GPUs take /usr/local/cuda/compat off LD_LIBRARY_PATH",
            )
        return _mismatch_fail(s, evidence)
    if kernel and user:
        return _finding("driver_mismatch", "ok", f"kernel module and libcuda are both {kernel}")
    if not _has_nvidia(s):
        return _skip("driver_mismatch", "no NVIDIA GPU on this machine")
    return _skip("driver_mismatch", "kernel module and libcuda versions not both known", evidence)


def _mismatch_fail(s: Snapshot, evidence: list[str]) -> Finding:
    if s.platform.in_container:
        fix = "install no NVIDIA driver in the image; docker run --gpus all ... mounts the host's"
    else:
        fix = "sudo reboot (the driver was upgraded; the old kernel module is still loaded)"
    return _finding(
        "driver_mismatch",
        "fail",
        "The NVIDIA kernel module and libcuda have different versions",
        evidence,
        fix,
    )


def driver_older_than_ptx(s: Snapshot) -> Finding:
    """The driver supports an older CUDA than TensorFlow was built with."""
    reason = _gpu_skip_reason(s)
    if reason:
        return _skip("driver_older_than_ptx", reason)
    driver_cuda_text = s.nvml.cuda_driver_version or s.driver.cuda_driver_api_version
    driver_cuda = _major_minor(driver_cuda_text)
    tf_cuda = _major_minor(s.tensorflow.cuda_version)
    if tf_cuda is None:
        return _skip("driver_older_than_ptx", "TensorFlow's CUDA version is unknown")
    evidence = [f"TensorFlow built with CUDA {s.tensorflow.cuda_version}"]
    driver = s.nvml.driver_version or s.driver.kernel_module_version
    if driver:
        evidence.append(f"driver {driver}")
    minimum = _driver_minimum(s, tf_cuda[0])
    if driver and minimum and (_version(driver) or (0,)) < (_version(minimum) or (0,)):
        evidence.append(f"CUDA {tf_cuda[0]}.x needs driver >= {minimum}")
        return _finding(
            "driver_older_than_ptx",
            "fail",
            f"Driver {driver} is too old for CUDA {tf_cuda[0]}.x",
            evidence,
            _driver_fix(s, tf_cuda),
        )
    if driver_cuda is None:
        return _skip("driver_older_than_ptx", "the driver's CUDA version is unknown", evidence)
    evidence.append(f"driver supports CUDA {driver_cuda_text}")
    if driver_cuda[0] < tf_cuda[0]:
        return _finding(
            "driver_older_than_ptx",
            "fail",
            f"The driver's CUDA {_dotted(driver_cuda)} is older than TensorFlow's CUDA "
            f"{_dotted(tf_cuda)}: CUDA will not start",
            evidence,
            _driver_fix(s, tf_cuda),
        )
    if driver_cuda < tf_cuda:
        evidence.append(
            "minor-version compatibility keeps it running, but XLA disables parallel compilation "
            "and PTX from the newer compiler does not load (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)"
        )
        return _finding(
            "driver_older_than_ptx",
            "warn",
            f"The driver's CUDA {_dotted(driver_cuda)} is older than TensorFlow's PTX compiler "
            f"(CUDA {_dotted(tf_cuda)})",
            evidence,
            _driver_fix(s, tf_cuda),
        )
    return _finding(
        "driver_older_than_ptx",
        "ok",
        f"driver CUDA {_dotted(driver_cuda)} >= TensorFlow's CUDA {_dotted(tf_cuda)}",
        evidence,
    )


def _driver_minimum(s: Snapshot, cuda_major: int) -> str | None:
    table = (
        DRIVER_MINIMUM_WINDOWS
        if (_is_windows_native(s) or s.platform.is_wsl)
        else DRIVER_MINIMUM_LINUX
    )
    return table.get(cuda_major)


def _driver_fix(s: Snapshot, tf_cuda: tuple[int, int]) -> str:
    if _is_windows_native(s) or s.platform.is_wsl:
        return (
            f"install an NVIDIA Windows driver that supports CUDA {_dotted(tf_cuda)} from "
            "https://www.nvidia.com/drivers (WSL2 uses the Windows driver; install none inside WSL)"
        )
    wanted = TOOLKIT_DRIVER_LINUX.get(tf_cuda)
    needs = (
        f"driver >= {wanted}"
        if wanted
        else f"a driver whose `nvidia-smi` CUDA Version >= {_dotted(tf_cuda)}"
    )
    return f"upgrade to a {needs}: sudo ubuntu-drivers install && sudo reboot"


# --------------------------------------------------------------------------- libraries


def missing_cuda_libs(s: Snapshot) -> Finding:
    """CUDA/cuDNN libraries TensorFlow dlopens do not load."""
    reason = _gpu_skip_reason(s)
    if reason:
        return _skip("missing_cuda_libs", reason)
    libs = [lib for lib in s.cuda_libs if lib.component != "cuda"]
    if not libs:
        return _skip("missing_cuda_libs", "no CUDA library load was tried")
    failed = [lib for lib in libs if not lib.loaded]
    if not failed:
        evidence = [
            f"{lib.soname}: {lib.path or 'loaded'}"
            + (f" ({lib.found_via})" if lib.found_via else "")
            for lib in libs
        ]
        return _finding("missing_cuda_libs", "ok", f"all {len(libs)} CUDA libraries load", evidence)
    evidence = [_load_error(lib) for lib in failed]
    dirs = s.tools.nvidia_wheel_lib_dirs
    without_wheel = [lib for lib in failed if not _wheel_dir(lib, dirs)]
    if dirs:
        evidence.append(f"nvidia wheel library dirs: {', '.join(dirs)}")
    else:
        evidence.append("no nvidia-* wheel library dirs (site-packages/nvidia/*/lib) found")
    if without_wheel:
        fix = INSTALL_GPU
    else:
        fix = f"export LD_LIBRARY_PATH={':'.join(dirs)}:$LD_LIBRARY_PATH"
    names = ", ".join(lib.soname or lib.component for lib in failed)
    return _finding(
        "missing_cuda_libs",
        "fail",
        f"CUDA libraries do not load: {names}",
        evidence,
        f"{fix}; to see each load attempt: {VLOG_DEBUG}",
    )


# component -> the nvidia-* wheel directory (site-packages/nvidia/<dir>/lib) that ships it
_WHEEL_DIRS = {"cudart": "cuda_runtime", "cublasLt": "cublas", "nvrtc": "cuda_nvrtc"}


def _wheel_dir(lib: LibraryLoad, dirs: list[str]) -> bool:
    name = _WHEEL_DIRS.get(lib.component, lib.component)
    return any(f"/nvidia/{name}/lib" in d.replace("\\", "/") for d in dirs)


def _load_error(lib: LibraryLoad) -> str:
    name = lib.soname or lib.component or "?"
    error = lib.error or "did not load"
    return error if error.startswith(name) else f"{name}: {error}"


def cudnn_mismatch(s: Snapshot) -> Finding:
    """The loaded cuDNN is older than, or of another major version than, TensorFlow's."""
    reason = _gpu_skip_reason(s)
    if reason:
        return _skip("cudnn_mismatch", reason)
    loaded = next((lib for lib in s.cuda_libs if lib.component == "cudnn" and lib.loaded), None)
    if loaded is None:
        return _skip("cudnn_mismatch", "cuDNN did not load (see missing_cuda_libs)")
    have = _version(loaded.version)
    want = _version(s.tensorflow.cudnn_version)
    if have is None or want is None:
        return _skip("cudnn_mismatch", "the cuDNN versions are not both known")
    evidence = [
        f"loaded cuDNN {loaded.version} from {loaded.path or '?'}"
        + (f" ({loaded.found_via})" if loaded.found_via else ""),
        f"TensorFlow built with cuDNN {s.tensorflow.cudnn_version}",
    ]
    problem = _cudnn_problem(have, want, _version(s.tensorflow.version))
    if problem is None:
        return _finding(
            "cudnn_mismatch", "ok", f"cuDNN {loaded.version} fits TensorFlow's", evidence
        )
    evidence.append(problem)
    return _finding(
        "cudnn_mismatch",
        "fail",
        "The cuDNN that loads does not match TensorFlow's",
        evidence,
        _cudnn_fix(s, loaded.found_via),
    )


def _cudnn_problem(
    have: tuple[int, ...], want: tuple[int, ...], tf_version: tuple[int, ...] | None
) -> str | None:
    """TensorFlow needs the same major and a minor >= its own (before TF 1.7: the same minor)."""
    if have[0] != want[0]:
        return f"major version {have[0]} != {want[0]}: cuDNN majors are not compatible"
    if len(want) < 2:
        return None
    have_minor = have[1] if len(have) > 1 else 0
    if have_minor < want[1]:
        return f"minor version {have_minor} < {want[1]}: cuDNN must be the same or newer"
    if have_minor != want[1] and tf_version is not None and tf_version < (1, 7):
        return "TensorFlow before 1.7 needs exactly the cuDNN major.minor it was built with"
    return None


def _cudnn_fix(s: Snapshot, found_via: str | None) -> str:
    if found_via == "wheel":
        wanted = s.tensorflow.cudnn_version or "9"
        return f"pip install -U 'nvidia-cudnn-cu12>={wanted}'"
    return (
        f"{INSTALL_GPU}, then take the older cuDNN's directory off LD_LIBRARY_PATH so "
        "TensorFlow's own (site-packages/nvidia/cudnn/lib) loads first"
    )


# --------------------------------------------------------------------------- GPU fit


@dataclass(frozen=True)
class _Target:
    major: int
    minor: int
    ptx: bool  # compute_XY (PTX, JIT-compiled) rather than sm_XY (binary)
    exact: bool  # sm_90a: runs only on exactly that compute capability

    @property
    def cc(self) -> tuple[int, int]:
        return self.major, self.minor

    def __str__(self) -> str:
        suffix = "a" if self.exact else ""
        return f"{'compute' if self.ptx else 'sm'}_{self.major}{self.minor}{suffix}"


def _targets(capabilities: list[str]) -> list[_Target]:
    """``['sm_60', 'compute_90', '8.6']`` -> build targets; unreadable entries are dropped."""
    targets = []
    for text in capabilities:
        item = text.strip().lower()
        arch = re.fullmatch(r"(sm|compute)_(\d{1,3})(\d)([af]?)", item)
        dotted = re.fullmatch(r"(\d{1,3})\.(\d)", item)
        if arch:
            targets.append(
                _Target(int(arch[2]), int(arch[3]), arch[1] == "compute", arch[4] == "a")
            )
        elif dotted:
            targets.append(_Target(int(dotted[1]), int(dotted[2]), False, False))
    return targets


def _gpus_with_cc(s: Snapshot) -> list[tuple[GpuInfo, tuple[int, int]]]:
    found = []
    for gpu in s.nvml.gpus:
        cc = _major_minor(gpu.compute_capability)
        if cc is not None and re.fullmatch(r"\s*\d+\.\d+\s*", gpu.compute_capability or ""):
            found.append((gpu, cc))
    return found


def _fit_inputs(
    s: Snapshot, id: str
) -> tuple[list[_Target], list[tuple[GpuInfo, tuple[int, int]]]] | Finding:
    reason = _gpu_skip_reason(s)
    if reason:
        return _skip(id, reason)
    targets = _targets(s.tensorflow.cuda_compute_capabilities)
    if not targets:
        return _skip(id, "the build info lists no CUDA compute capabilities")
    gpus = _gpus_with_cc(s)
    if not gpus:
        return _skip(id, "no GPU's compute capability is known (NVML did not report it)")
    return targets, gpus


def cc_too_low(s: Snapshot) -> Finding:
    """A GPU's compute capability is below every target TensorFlow was built for."""
    inputs = _fit_inputs(s, "cc_too_low")
    if isinstance(inputs, Finding):
        return inputs
    targets, gpus = inputs
    lowest = min(t.cc for t in targets)
    built = f"built for {', '.join(str(t) for t in targets)}"
    too_low = [(g, cc) for g, cc in gpus if cc < lowest]
    if not too_low:
        return _finding(
            "cc_too_low",
            "ok",
            f"every GPU is at least compute capability {_dotted(lowest)}",
            [built],
        )
    evidence = [
        f"{_gpu_name(g)}: compute capability {_dotted(cc)} < minimum {_dotted(lowest)}"
        for g, cc in too_low
    ] + [built]
    cc_text = _dotted(too_low[0][1])
    return _finding(
        "cc_too_low",
        "fail",
        "A GPU is older than this TensorFlow supports; TensorFlow ignores it",
        evidence,
        f"build TensorFlow from source with TF_CUDA_COMPUTE_CAPABILITIES={cc_text} ./configure, "
        "or install an older TensorFlow whose build targets include it",
    )


def cc_too_new(s: Snapshot) -> Finding:
    """A GPU newer than every binary target: PTX JIT (slow start) or no kernels at all."""
    inputs = _fit_inputs(s, "cc_too_new")
    if isinstance(inputs, Finding):
        return inputs
    targets, gpus = inputs
    lowest = min(t.cc for t in targets)
    built = f"built for {', '.join(str(t) for t in targets)}"
    worst: Status = "ok"
    evidence: list[str] = []
    for gpu, cc in gpus:
        if cc < lowest:
            continue  # cc_too_low reports it
        status, line = _gpu_fit(gpu, cc, targets)
        evidence.append(line)
        if status == "fail" or (status == "warn" and worst == "ok"):
            worst = status
    evidence.append(built)
    if worst == "ok":
        return _finding(
            "cc_too_new", "ok", "TensorFlow ships binary kernels for every GPU", evidence
        )
    if worst == "warn":
        return _finding(
            "cc_too_new",
            "warn",
            "No binary kernels for this GPU: CUDA JIT-compiles PTX at first start (minutes)",
            evidence,
            "export CUDA_CACHE_MAXSIZE=4294967296 (keeps the JIT cache); wait out the first start",
        )
    return _finding(
        "cc_too_new",
        "fail",
        "The GPU is newer than every kernel in this TensorFlow",
        evidence,
        f"{NGC_CONTAINER}, or build TensorFlow from source for this compute capability",
    )


def _gpu_fit(gpu: GpuInfo, cc: tuple[int, int], targets: list[_Target]) -> tuple[Status, str]:
    name = f"{_gpu_name(gpu)}, compute capability {_dotted(cc)}"
    for t in targets:
        if (
            not t.ptx
            and t.major == cc[0]
            and (t.minor == cc[1] or (not t.exact and t.minor <= cc[1]))
        ):
            return "ok", f"{name}: binary kernels {t}"
    ptx = [t for t in targets if t.ptx and t.cc <= cc]
    if not ptx:
        return "fail", f"{name}: no binary kernels and no PTX old enough to JIT"
    newest = max(ptx, key=lambda t: t.cc)
    if cc[0] >= 10:
        return "fail", f"{name}: only PTX {newest}, which does not JIT for Blackwell GPUs"
    return "warn", f"{name}: only PTX {newest}: JIT-compiled at first start"


def gpu_too_few_cores(s: Snapshot) -> Finding:
    """TensorFlow ignores GPUs with fewer multiprocessors than min(8, the largest count)."""
    if not _has_nvidia(s):
        return _skip("gpu_too_few_cores", "no NVIDIA GPU on this machine")
    counts = [
        (g, g.multiprocessor_count) for g in s.nvml.gpus if g.multiprocessor_count is not None
    ]
    if not counts:
        return _skip("gpu_too_few_cores", "no GPU's multiprocessor count is known")
    threshold, how = _min_cores(
        s.env.get("TF_MIN_GPU_MULTIPROCESSOR_COUNT"), max(c for _, c in counts)
    )
    ignored = [(g, c) for g, c in counts if c < threshold]
    evidence = [f"{_gpu_name(g)}: {c} multiprocessors" for g, c in counts] + [
        f"minimum: {threshold} ({how})"
    ]
    if not ignored:
        return _finding(
            "gpu_too_few_cores",
            "ok",
            "every GPU has enough multiprocessors for TensorFlow",
            evidence,
        )
    status: Status = "fail" if len(ignored) == len(counts) else "warn"
    fewest = min(c for _, c in ignored)
    return _finding(
        "gpu_too_few_cores",
        status,
        f"TensorFlow ignores {len(ignored)} GPU(s) with fewer than {threshold} multiprocessors",
        evidence,
        f"export TF_MIN_GPU_MULTIPROCESSOR_COUNT={fewest}",
    )


def _min_cores(env_value: str | None, largest: int) -> tuple[int, str]:
    """TensorFlow's GetMinGPUMultiprocessorCount."""
    if env_value is None or env_value == "":
        return min(DEFAULT_MIN_GPU_CORES, largest), "min(8, the largest GPU's count)"
    text = env_value.strip()
    if re.fullmatch(r"\+?\d{1,9}", text):
        return int(text), f"TF_MIN_GPU_MULTIPROCESSOR_COUNT={env_value}"
    return (
        DEFAULT_MIN_GPU_CORES,
        f"TF_MIN_GPU_MULTIPROCESSOR_COUNT={env_value!r} is invalid; TF uses 8",
    )


def xla_libdevice_ptxas(s: Snapshot) -> Finding:
    """XLA on the GPU needs ptxas and libdevice (the nvidia-cuda-nvcc wheel has both)."""
    reason = _gpu_skip_reason(s)
    if reason:
        return _skip("xla_libdevice_ptxas", reason)
    tools = s.tools
    missing = [
        name
        for name, path in (("ptxas", tools.ptxas), ("libdevice", tools.libdevice))
        if path is None
    ]
    evidence = [
        f"ptxas: {tools.ptxas or 'not found'}",
        f"libdevice: {tools.libdevice or 'not found'}",
    ]
    if not missing:
        return _finding("xla_libdevice_ptxas", "ok", "XLA finds ptxas and libdevice", evidence)
    evidence.append("XLA / jit_compile=True will fail on the GPU; other ops work")
    return _finding(
        "xla_libdevice_ptxas",
        "warn",
        f"XLA cannot find {' and '.join(missing)}",
        evidence,
        _nvcc_fix(s),
    )


def _nvcc_fix(s: Snapshot) -> str:
    cuda = _major_minor(s.tensorflow.cuda_version)
    wheel = (
        f"pip install 'nvidia-cuda-nvcc-cu{cuda[0]}=={cuda[0]}.{cuda[1]}.*'"
        if cuda
        else ("pip install nvidia-cuda-nvcc-cu12")
    )
    if s.tools.nvcc:
        cuda_dir = posixpath.dirname(posixpath.dirname(s.tools.nvcc))
        return f"{wheel}; or export XLA_FLAGS=--xla_gpu_cuda_data_dir={cuda_dir}"
    return f"{wheel}; or export XLA_FLAGS=--xla_gpu_cuda_data_dir=/usr/local/cuda"


def gpu_memory_in_use(s: Snapshot) -> Finding:
    """Another process holds most of a GPU's memory: TensorFlow will run out."""
    if not _has_nvidia(s):
        return _skip("gpu_memory_in_use", "no NVIDIA GPU on this machine")
    known = [g for g in s.nvml.gpus if g.memory_total_bytes and g.memory_used_bytes is not None]
    if not known:
        return _skip("gpu_memory_in_use", "no GPU's memory use is known")
    evidence = [_memory_line(g) for g in known]
    busy = [
        g
        for g in known
        if (g.memory_used_bytes or 0) > MEMORY_IN_USE_SHARE * (g.memory_total_bytes or 1)
    ]
    if not busy:
        return _finding("gpu_memory_in_use", "ok", "GPU memory is mostly free", evidence)
    return _finding(
        "gpu_memory_in_use",
        "warn",
        f"Most memory of {', '.join(_gpu_name(g) for g in busy)} is already in use: OOM risk",
        evidence,
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv "
        "(then stop those processes, or export CUDA_VISIBLE_DEVICES=<a free GPU's index>)",
    )


def _memory_line(gpu: GpuInfo) -> str:
    used = gpu.memory_used_bytes or 0
    total = gpu.memory_total_bytes or 1
    share = f"{used / total:.0%}"
    return f"{_gpu_name(gpu)}: {used / 2**30:.1f} GiB of {total / 2**30:.1f} GiB used ({share})"


def oom(s: Snapshot) -> Finding:
    """Out-of-memory shows in a log, not in a snapshot (gpu_memory_in_use warns ahead)."""
    return _skip("oom", LOG_HINT)


def config_after_init(s: Snapshot) -> Finding:
    """Device configuration after the runtime started shows in a traceback only."""
    return _skip("config_after_init", LOG_HINT)


# --------------------------------------------------------------------------- environment


_BOOL_VALUES = ("0", "1", "true", "false")


def _check_bool(value: str) -> str | None:
    return None if value.strip().lower() in _BOOL_VALUES else "TF reads only 0, 1, true or false"


def _check_int(value: str) -> str | None:
    return None if re.fullmatch(r"\s*\d{1,9}\s*", value) else "TF expects a non-negative integer"


def _check_choice(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if value in choices:
            return None
        return f"not one of {', '.join(choices)}; it is ignored"

    return check


def _check_allow_growth(value: str) -> str | None:
    if value in ("true", "false"):
        return None
    return "TF accepts only 'true' or 'false' (lower case); it logs an error and ignores this"


def _check_allocator(value: str) -> str | None:
    if value in ("", "bfc", "cuda_malloc_async", "cuda_malloc", "memory_guard"):
        return None
    return "TF does not know this allocator and uses its default (BFC)"


def _check_log_level(value: str) -> str | None:
    return None if value.strip() in ("0", "1", "2", "3") else "TF expects 0, 1, 2 or 3"


# variable -> (check, fix when the check fails)
_ENV_CHECKS: dict[str, tuple[Callable[[str], str | None], str]] = {
    "TF_FORCE_GPU_ALLOW_GROWTH": (_check_allow_growth, "export TF_FORCE_GPU_ALLOW_GROWTH=true"),
    "TF_GPU_ALLOCATOR": (_check_allocator, "export TF_GPU_ALLOCATOR=cuda_malloc_async"),
    "TF_CPP_MIN_LOG_LEVEL": (_check_log_level, "export TF_CPP_MIN_LOG_LEVEL=0"),
    "TF_CPP_MAX_VLOG_LEVEL": (_check_int, "unset TF_CPP_MAX_VLOG_LEVEL"),
    "TF_ENABLE_ONEDNN_OPTS": (_check_bool, "export TF_ENABLE_ONEDNN_OPTS=1"),
    "TF_DETERMINISTIC_OPS": (_check_bool, "export TF_DETERMINISTIC_OPS=1"),
    "TF_CUDNN_DETERMINISTIC": (_check_bool, "export TF_CUDNN_DETERMINISTIC=1"),
    "TF_MIN_GPU_MULTIPROCESSOR_COUNT": (_check_int, "unset TF_MIN_GPU_MULTIPROCESSOR_COUNT"),
    "TF_NUM_INTRAOP_THREADS": (_check_int, "unset TF_NUM_INTRAOP_THREADS"),
    "TF_NUM_INTEROP_THREADS": (_check_int, "unset TF_NUM_INTEROP_THREADS"),
    "TF_GPU_THREAD_MODE": (
        _check_choice("global", "gpu_private", "gpu_shared"),
        "export TF_GPU_THREAD_MODE=gpu_private",
    ),
    "CUDA_DEVICE_ORDER": (
        _check_choice("FASTEST_FIRST", "PCI_BUS_ID"),
        "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
    ),
    "CUDA_MODULE_LOADING": (_check_choice("LAZY", "EAGER"), "export CUDA_MODULE_LOADING=LAZY"),
}
# fmt: off
_ENV_FIRST = (
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
    "TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR", "XLA_FLAGS", "TF_XLA_FLAGS",
    "TF_CPP_MIN_LOG_LEVEL",
)
# fmt: on
MAX_ENV_VALUE_CHARS = 200


def env_settings(s: Snapshot) -> Finding:
    """The TensorFlow/CUDA environment variables in force, and any TF would not understand."""
    names = sorted(
        s.env, key=lambda n: (n not in _ENV_FIRST, _ENV_FIRST.index(n) if n in _ENV_FIRST else 0, n)
    )
    if not names:
        return _finding("env_settings", "ok", "no TensorFlow/CUDA environment variables set")
    evidence = [f"{n}={_shorten(s.env[n])}" for n in names]
    level = s.env.get("TF_CPP_MIN_LOG_LEVEL", "").strip()
    if level in ("2", "3"):
        hidden = "warnings" if level == "2" else "warnings and errors"
        evidence.append(
            f"TF_CPP_MIN_LOG_LEVEL={level} hides TensorFlow's {hidden}: unset it before saving "
            "a log for `tfaccel doctor --log`"
        )
    problems: list[tuple[str, str]] = []  # (evidence, fix)
    for name in names:
        problems += _env_problems(s, name, s.env[name])
    if not problems:
        return _finding(
            "env_settings", "ok", f"{len(names)} environment variable(s) in force", evidence
        )
    evidence += [p[0] for p in problems]
    return _finding(
        "env_settings",
        "warn",
        "Some environment variables hold values TensorFlow does not understand",
        evidence,
        "; ".join(dict.fromkeys(p[1] for p in problems)),
    )


def _shorten(value: str) -> str:
    return value if len(value) <= MAX_ENV_VALUE_CHARS else value[: MAX_ENV_VALUE_CHARS - 3] + "..."


def _env_problems(s: Snapshot, name: str, value: str) -> list[tuple[str, str]]:
    if name in ("XLA_FLAGS", "TF_XLA_FLAGS"):
        return _xla_flag_problems(s, name, value)
    check = _ENV_CHECKS.get(name)
    if check is None:
        return []
    problem = check[0](value)
    if problem:
        return [(f"{name}={_shorten(value)!r}: {problem}", check[1])]
    if name == "TF_GPU_ALLOCATOR" and value == "cuda_malloc_async":
        cuda = _major_minor(s.tensorflow.cuda_version)
        if cuda is not None and cuda < (11, 2):
            return [
                (
                    f"TF_GPU_ALLOCATOR=cuda_malloc_async needs CUDA >= 11.2; TF: {_dotted(cuda)}",
                    "unset TF_GPU_ALLOCATOR",
                )
            ]
    return []


def _xla_flag_problems(s: Snapshot, name: str, value: str) -> list[tuple[str, str]]:
    problems = []
    for token in value.split():
        if not token.startswith("--"):
            problems.append(
                (
                    f"{name}: {token!r} is not a --flag; XLA aborts on flags it cannot parse",
                    f"export {name}='<the flags, each starting with -->'",
                )
            )
        elif token.startswith("--xla_gpu_cuda_data_dir="):
            directory = token.split("=", 1)[1].rstrip("/")
            libdevice = s.tools.libdevice
            if libdevice is None or not libdevice.startswith(directory):
                problems.append(
                    (
                        f"{name} points XLA at {directory!r}, but no libdevice was found there "
                        f"(expected {directory}/nvvm/libdevice/libdevice.10.bc)",
                        "pip install nvidia-cuda-nvcc-cu12, and drop --xla_gpu_cuda_data_dir from "
                        f"{name} (or point it at the CUDA directory holding nvvm/libdevice)",
                    )
                )
    return problems


# --------------------------------------------------------------------------- deep probe


def tf_import(s: Snapshot) -> Finding:
    """``import tensorflow`` in a subprocess: crashed, hung, raised, or worked."""
    deep = s.deep
    if deep is None or not deep.ran:
        return _skip("tf_import", "TensorFlow was not imported: run `tfaccel doctor --deep`")
    tail = [f"log: {line}" for line in _last_lines(deep.log, 5)]
    if deep.timed_out:
        limit = f"{deep.timeout_s:g} s" if deep.timeout_s is not None else "the time limit"
        return _finding(
            "tf_import",
            "fail",
            f"import tensorflow hung (no answer within {limit})",
            tail,
            VLOG_DEBUG,
        )
    code = deep.returncode
    if code is not None and code < 0:
        return _finding(
            "tf_import",
            "fail",
            f"import tensorflow crashed ({_signal_name(-code)})",
            tail,
            _crash_fix(-code),
        )
    if deep.error or not deep.ok or (code is not None and code != 0):
        evidence = ([f"error: {deep.error}"] if deep.error else []) + [f"exit code: {code}"] + tail
        return _finding(
            "tf_import",
            "fail",
            "import tensorflow failed",
            evidence,
            f"python -c 'import tensorflow' shows the full traceback; {VLOG_DEBUG}",
        )
    took = f" in {deep.duration_s:.1f} s" if deep.duration_s is not None else ""
    version = deep.tf_version or "?"
    return _finding(
        "tf_import",
        "ok",
        f"import tensorflow {version} works{took}",
        [f"devices: {', '.join(deep.physical_devices) or 'none'}"],
    )


def _last_lines(text: str, n: int) -> list[str]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return [line[:300] for line in lines[-n:]]


def _signal_name(number: int) -> str:
    name = SIGNALS.get(number)
    return f"signal {number}, {name}" if name else f"signal {number}"


def _crash_fix(number: int) -> str:
    if number == 4:
        return "SIGILL: the CPU lacks an instruction the wheel needs (AVX); see cpu_no_avx"
    if number == 9:
        return "SIGKILL: often the kernel's out-of-memory killer; check `dmesg | tail`"
    return f"python -X faulthandler -c 'import tensorflow' shows where it crashes; {VLOG_DEBUG}"


def _device_type(name: str) -> str:
    """``/physical_device:GPU:0`` or ``GPU:0`` -> ``GPU``."""
    parts = name.split(":")
    return parts[-2].strip("/ ").upper() if len(parts) >= 2 else name.strip().upper()


def tf_gpus_registered(s: Snapshot) -> Finding:
    """NVML sees N GPUs; how many did TensorFlow register?"""
    deep = s.deep
    if deep is None or not deep.ran:
        return _skip(
            "tf_gpus_registered", "TensorFlow was not imported: run `tfaccel doctor --deep`"
        )
    if not deep.ok:
        return _skip("tf_gpus_registered", "import tensorflow failed (see tf_import)")
    registered = sum(1 for d in deep.physical_devices if _device_type(d) == "GPU")
    total = _gpu_count(s)
    expected = total
    value = s.env.get("CUDA_VISIBLE_DEVICES")
    if value is not None and total:
        expected = _visibility(value, s.nvml.gpus, total).visible
    evidence = [f"NVIDIA GPUs on the machine: {total}", f"TensorFlow registered: {registered}"]
    if expected != total:
        evidence.append(f"CUDA_VISIBLE_DEVICES={value!r} leaves {expected} visible")
    if total == 0 and registered == 0:
        return _skip("tf_gpus_registered", "no GPU on this machine", evidence)
    if registered == 0 < expected:
        return _finding(
            "tf_gpus_registered",
            "fail",
            "TensorFlow registered no GPU",
            evidence,
            f"the failed checks above name the cause; {VLOG_DEBUG}",
        )
    if registered < expected:
        return _finding(
            "tf_gpus_registered",
            "warn",
            f"TensorFlow registered {registered} of {expected} GPUs",
            evidence,
            "see gpu_too_few_cores and cc_too_low",
        )
    return _finding(
        "tf_gpus_registered", "ok", f"TensorFlow registered {registered} GPU(s)", evidence
    )


_NO_GPU_EXPECTED = frozenset({"no_driver_or_hidden", "missing_cuda_libs"})


def deep_log_causes(s: Snapshot) -> list[Finding]:
    """The known causes in what ``import tensorflow`` logged, as findings from ``deep``."""
    deep = s.deep
    if deep is None or not deep.ran or not deep.log.strip():
        return []
    findings = match_log(deep.log, source="deep probe").findings(source="deep")
    if _has_nvidia(s):
        return findings
    for finding in findings:
        if finding.id in _NO_GPU_EXPECTED:
            # A CUDA build on a machine without a GPU says so; that is expected, not a fault.
            finding.status = "skip"
            finding.title = f"expected here, no NVIDIA GPU on this machine: {finding.title}"
            finding.fix = None
    return findings


# --------------------------------------------------------------------------- registry


RULES: tuple[Rule, ...] = (
    tensorflow_missing,
    tensorflow_gpu_deprecated,
    conflicting_tf_distributions,
    windows_native,
    cpu_only_build,
    cpu_no_avx,
    no_driver_or_hidden,
    driver_mismatch,
    driver_older_than_ptx,
    missing_cuda_libs,
    cudnn_mismatch,
    cc_too_low,
    cc_too_new,
    gpu_too_few_cores,
    xla_libdevice_ptxas,
    gpu_memory_in_use,
    oom,
    config_after_init,
    env_settings,
    tf_import,
    tf_gpus_registered,
    deep_log_causes,
)


def run_rules(snapshot: Snapshot) -> list[Finding]:
    """Run every rule of :data:`RULES` in order and return their findings.

    Args:
        snapshot: what was probed.

    Returns:
        The findings, in rule order.
    """
    findings: list[Finding] = []
    for rule in RULES:
        result = rule(snapshot)
        findings.extend(result if isinstance(result, list) else [result])
    return findings
