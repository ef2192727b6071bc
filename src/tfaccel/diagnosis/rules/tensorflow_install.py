"""The TensorFlow installation: is it there, is it one package, and can it use the GPU here.

Finding ids: ``tensorflow_missing`` (no TensorFlow distribution installed),
``tensorflow_gpu_deprecated`` (the removed ``tensorflow-gpu`` package),
``conflicting_tf_distributions`` (two distributions of the ``tensorflow`` package side by side),
``windows_native`` (native Windows has no CUDA build of TensorFlow >= 2.11), ``cpu_only_build``
(a CPU-only or ROCm build on a machine with an NVIDIA GPU), ``cpu_no_avx`` (a CPU without
the AVX the official wheels need) and ``x86_emulation`` (an x86_64 Python translated by Rosetta 2
or QEMU user mode on an Arm CPU).
"""

from __future__ import annotations

from tfaccel.core.findings import Finding, Status
from tfaccel.diagnosis.log.infer import WINDOWS_LAST_GPU
from tfaccel.diagnosis.log.patterns import QEMU_EMULATION_FIX
from tfaccel.diagnosis.rules._common import (
    INSTALL_GPU,
    NGC_CONTAINER,
    cpu_arch,
    cuda_build,
    gpu_summary,
    has_nvidia,
    installed_distributions,
    is_windows_native,
    major_minor,
    make_finding,
    no_gpu_evidence,
    os_name,
    skip,
    tf_distributions,
    tf_installed,
    tf_label,
)
from tfaccel.snapshot import Snapshot

INSTALL_PLAIN = "pip install tensorflow"
WSL_FIX = f"wsl --install, then inside WSL2: {INSTALL_GPU} (NVIDIA Windows driver >= 528.33)"

REMOVED_DISTRIBUTIONS = frozenset({"tensorflow-gpu", "tf-nightly-gpu"})
# Distributions that ``tensorflow`` (or ``tf-nightly``) itself pulls in on some platforms
# (Windows: -intel; Linux aarch64: -cpu-aws; tensorflow-macos >= 2.13 is a shim over tensorflow).
TF_COMPANIONS = {
    "tensorflow": frozenset({"tensorflow-intel", "tensorflow-cpu-aws", "tensorflow-macos"}),
    "tf-nightly": frozenset({"tf-nightly-intel"}),
}


def _gpu_install_command(s: Snapshot) -> str:
    """The install command that gives this machine GPU support, where pip wheels have it."""
    if os_name(s) == "linux" and cpu_arch(s) == "x86_64" and has_nvidia(s):
        return INSTALL_GPU
    return INSTALL_PLAIN


def _reinstall(s: Snapshot, names: str) -> str:
    """Uninstall ``names``, then install the TensorFlow that fits this machine."""
    return f"pip uninstall -y {names} && {_gpu_install_command(s)}"


def _listed(dists: dict[str, str]) -> list[str]:
    """``{"tensorflow": "2.21.0"}`` -> ``["tensorflow 2.21.0"]``, sorted by name."""
    return [f"{n} {v}" for n, v in sorted(dists.items())]


def tensorflow_missing(s: Snapshot) -> Finding:
    """TensorFlow is not installed at all."""
    if tf_installed(s):
        evidence = _listed(tf_distributions(s))
        if s.tensorflow.location:
            evidence.append(f"package at {s.tensorflow.location}")
        return make_finding("tensorflow_missing", "ok", f"{tf_label(s)} is installed", evidence)
    evidence = ["no tensorflow distribution is installed in this environment"]
    if s.platform.python_executable:
        evidence.append(f"python: {s.platform.python_executable}")
    if s.tensorflow.error:
        evidence.append(f"reading TensorFlow's files: {s.tensorflow.error}")
    return make_finding(
        "tensorflow_missing",
        "warn",
        "TensorFlow is not installed",
        evidence,
        _gpu_install_command(s),
    )


def tensorflow_gpu_deprecated(s: Snapshot) -> Finding:
    """The removed ``tensorflow-gpu`` (or ``tf-nightly-gpu``) package is installed."""
    removed = {n: v for n, v in installed_distributions(s).items() if n in REMOVED_DISTRIBUTIONS}
    if not removed:
        return make_finding(
            "tensorflow_gpu_deprecated", "ok", "the removed tensorflow-gpu is not installed"
        )
    names = " ".join(sorted(removed))
    evidence = [
        f"{n} {v} is installed; it was removed after 2.11 and gets no updates"
        for n, v in sorted(removed.items())
    ]
    return make_finding(
        "tensorflow_gpu_deprecated",
        "warn",
        "The tensorflow-gpu package was removed; TensorFlow is its own GPU package now",
        evidence,
        _reinstall(s, names),
    )


def conflicting_tf_distributions(s: Snapshot) -> Finding:
    """Two TensorFlow distributions installed side by side overwrite each other's files."""
    dists = tf_distributions(s)
    primary = set(dists)
    for main, companions in TF_COMPANIONS.items():
        if main in dists:
            primary -= companions
    evidence = _listed(dists)
    if len(primary) < 2:
        return make_finding(
            "conflicting_tf_distributions", "ok", "one TensorFlow distribution installed", evidence
        )
    names = " ".join(sorted(dists))
    evidence.append("each installs the same `tensorflow` package: the last one installed wins")
    return make_finding(
        "conflicting_tf_distributions",
        "fail",
        f"{len(primary)} TensorFlow distributions are installed side by side",
        evidence,
        _reinstall(s, names),
    )


def windows_native(s: Snapshot) -> Finding:
    """Native Windows has no CUDA build of TensorFlow >= 2.11."""
    if not is_windows_native(s):
        system = s.platform.system or "unknown"
        return skip("windows_native", f"not native Windows ({system})")
    if not tf_installed(s):
        return skip("windows_native", "TensorFlow is not installed")
    version = major_minor(s.tensorflow.version)
    evidence = [f"native Windows, {tf_label(s)}"]
    if version is None:
        return skip("windows_native", "TensorFlow's version is unknown", evidence)
    if version <= WINDOWS_LAST_GPU:
        return make_finding(
            "windows_native",
            "ok",
            "TensorFlow < 2.11 still has native Windows GPU builds",
            evidence,
        )
    if not has_nvidia(s):
        return make_finding(
            "windows_native",
            "ok",
            "native Windows without an NVIDIA GPU: the CPU build fits",
            evidence,
        )
    evidence.append("TensorFlow >= 2.11 has no CUDA build for native Windows")
    return make_finding(
        "windows_native",
        "fail",
        "TensorFlow cannot use the NVIDIA GPU on native Windows",
        evidence,
        WSL_FIX,
    )


def cpu_only_build(s: Snapshot) -> Finding:
    """A CPU-only (or ROCm) TensorFlow on a machine with an NVIDIA GPU."""
    if not tf_installed(s):
        return skip("cpu_only_build", "TensorFlow is not installed")
    tf = s.tensorflow
    cuda = cuda_build(s)
    evidence = [f"installed: {tf_label(s)}"]
    if tf.build_info_found:
        evidence.append(f"build info: is_cuda_build={tf.is_cuda_build}")
    if cuda is None:
        return skip("cpu_only_build", "cannot tell the build type (no build info)", evidence)
    if cuda:
        versions = f"CUDA {tf.cuda_version or '?'}, cuDNN {tf.cudnn_version or '?'}"
        return make_finding("cpu_only_build", "ok", f"CUDA build ({versions})", evidence)
    kind = "ROCm build" if tf.is_rocm_build else "CPU-only build"
    if not has_nvidia(s):
        evidence += no_gpu_evidence(s)
        title = f"{kind}; no NVIDIA GPU found, so it fits this machine"
        return make_finding("cpu_only_build", "ok", title, evidence)
    evidence.append(f"NVIDIA GPU present: {gpu_summary(s)}")
    return make_finding(
        "cpu_only_build",
        "fail",
        f"{kind} of TensorFlow on a machine with an NVIDIA GPU",
        evidence,
        _cpu_build_fix(s),
    )


def _cpu_build_fix(s: Snapshot) -> str:
    if is_windows_native(s):
        return WSL_FIX
    if os_name(s) == "linux" and cpu_arch(s) == "aarch64":
        return f"Linux aarch64 TensorFlow wheels are CPU-only; use NVIDIA's: {NGC_CONTAINER}"
    if os_name(s) == "linux" and cpu_arch(s) == "x86_64":
        name = s.tensorflow.distribution or "tensorflow-cpu"
        return f"pip uninstall -y {name} && {INSTALL_GPU}"
    return f"TensorFlow has CUDA wheels only for Linux x86_64 (or WSL2); there: {INSTALL_GPU}"


def cpu_no_avx(s: Snapshot) -> Finding:
    """Official x86_64 wheels are built with AVX; without it ``import tensorflow`` dies."""
    if cpu_arch(s) != "x86_64":
        return skip("cpu_no_avx", f"not an x86_64 CPU ({s.platform.machine or 'unknown'})")
    if s.platform.emulator:
        return skip(
            "cpu_no_avx",
            f"the CPU flags read are the host's, not the emulated CPU's ({s.platform.emulator}; "
            "see x86_emulation)",
        )
    flags = {f.strip().lower() for f in s.cpu.flags}
    if not flags:
        return skip("cpu_no_avx", "the CPU flags were not read")
    model = s.cpu.model or "this CPU"
    if "avx" in flags:
        wide = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
        return make_finding(
            "cpu_no_avx", "ok", f"{model} has AVX", [f"flags: avx {' '.join(wide)}"]
        )
    status: Status = "fail" if tf_installed(s) else "warn"
    return make_finding(
        "cpu_no_avx",
        status,
        "The CPU lacks AVX: official TensorFlow wheels stop with 'Illegal instruction'",
        [f"{model}: no 'avx' among {len(flags)} CPU flags"],
        "run on a CPU with AVX, or build TensorFlow on this machine: "
        "bazel build --copt=-march=native //tensorflow/tools/pip_package:wheel",
    )


ROSETTA_FIX = (
    "install an arm64 Python (Miniforge for arm64, or python.org's universal2 build; untick "
    "'Open using Rosetta' for the terminal): `python -c 'import platform; "
    "print(platform.machine())'` must print arm64; then in a new environment: pip install "
    "tensorflow tensorflow-metal"
)


def x86_emulation(s: Snapshot) -> Finding:
    """This Python's x86_64 code runs translated: Rosetta 2 on Apple silicon, or QEMU user mode."""
    emulator = (s.platform.emulator or "").strip().lower()
    evidence = [s.platform.emulator_evidence] if s.platform.emulator_evidence else []
    if not emulator:
        return make_finding("x86_emulation", "ok", "this Python runs natively (no x86 emulation)")
    if emulator == "rosetta":
        evidence.append(
            "x86_64 TensorFlow wheels need AVX, which Rosetta 2 lacks (before macOS 15): "
            "'Illegal instruction' at import; and an x86_64 TensorFlow gets no Apple GPU"
        )
        status: Status = "fail" if tf_installed(s) else "warn"
        title = "This Python runs as x86_64 under Rosetta on Apple silicon"
        return make_finding("x86_emulation", status, title, evidence, ROSETTA_FIX)
    evidence.append(
        "under QEMU user emulation TensorFlow runs many times slower, and AVX (which the x86_64 "
        "wheels need) exists only in recent QEMU releases"
    )
    return make_finding(
        "x86_emulation",
        "warn",
        f"This {s.platform.machine or 'x86_64'} Python runs translated on an Arm CPU "
        "(QEMU user mode, or Rosetta for Linux)",
        evidence,
        QEMU_EMULATION_FIX,
    )
