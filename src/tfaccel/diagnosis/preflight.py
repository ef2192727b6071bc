"""Before installing: will this TensorFlow release run on this machine's GPU, and which
``pip install`` fits (``tfaccel doctor --preflight [--tensorflow VERSION]``).

:func:`preflight` is pure: it reads a :class:`~tfaccel.snapshot.Snapshot` and one row of the
release table (:mod:`tfaccel.diagnosis.releases`) and returns a :class:`PreflightReport`, the
overall verdict first, then one finding per question:

==========================  ==============================================================
finding id                  question
==========================  ==============================================================
``preflight``               the verdict, with the install command that fits, or why none
``no_matching_wheel``       is there a wheel for this Python, OS and architecture
``glibc_too_old``           is glibc as new as the wheels' manylinux tag
``no_gpu_wheel``            is that wheel a CUDA build here (only Linux x86_64 is)
``driver_older_than_ptx``   does the driver run the release's CUDA (the doctor's rule)
``cc_too_low``              is the GPU at least the oldest CUDA target (the doctor's rule)
``cc_too_new``              binary kernels, PTX JIT, or nothing (Blackwell: the doctor's rule)
``cuda_runtime_other_major``  a CUDA runtime of another major on the loader's path
``disk_space``              room for the wheels
==========================  ==============================================================

The driver and compute-capability answers are the doctor's own rules, run on the Snapshot as
if the release were installed (its CUDA, cuDNN and build targets from the table), so the two
never disagree. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import posixpath
from dataclasses import dataclass
from typing import Any

from tfaccel.core.findings import Finding, Status, counts, worst
from tfaccel.core.units import fmt_bytes
from tfaccel.diagnosis.releases import Release, newest_tested, releases
from tfaccel.diagnosis.rules._common import (
    NGC_CONTAINER,
    NO_NVIDIA_GPU,
    cpu_arch,
    gpu_summary,
    has_nvidia,
    major_minor,
    make_finding,
    os_name,
    parse_version,
    skip,
)
from tfaccel.diagnosis.rules.compute_capability import cc_too_low, cc_too_new
from tfaccel.diagnosis.rules.driver import driver_older_than_ptx
from tfaccel.snapshot import Snapshot, TfBuild

__all__ = ["PreflightReport", "install_command", "preflight"]

MB = 10**6
# Free space wanted beyond the download: pip keeps each wheel in its cache and unpacks it into
# site-packages, where the shared libraries take more room than in the compressed wheel.
DISK_FACTOR = 3
BLACKWELL_ISSUES = (
    "pip TensorFlow 2.19/2.20 on compute capability 12.0 fails with CUDA_ERROR_INVALID_PTX "
    "(tensorflow/tensorflow#89272, #97387, #99592)"
)
_GPU_IDS = ("driver_older_than_ptx", "cc_too_low", "cc_too_new")


@dataclass
class PreflightReport:
    """The verdict on one release for this machine, and the findings behind it.

    Attributes:
        tensorflow: the release asked about (``2.21``).
        findings: the verdict (id ``preflight``) first, then one finding per question.
        install: the ``pip install`` command that fits: this release's, or where it does not
            fit, that of the newest release in the table that does; None when none does.
    """

    tensorflow: str
    findings: list[Finding]
    install: str | None

    @property
    def verdict(self) -> Finding:
        return self.findings[0]

    @property
    def exit_code(self) -> int:
        """1 when the release will not run here (any finding failed), else 0."""
        return 1 if self.counts()["fail"] else 0

    def counts(self) -> dict[str, int]:
        return counts(self.findings)

    def finding(self, id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == id), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "preflight": {"tensorflow": self.tensorflow, "install": self.install},
            "findings": [f.to_dict() for f in self.findings],
            "log": None,
            "summary": self.counts(),
            "exit_code": self.exit_code,
        }


def preflight(snapshot: Snapshot, release: Release | None = None) -> PreflightReport:
    """Say whether ``release`` (default: the newest tested) will run on this machine.

    Args:
        snapshot: the machine (``tfaccel.probe.snapshot()``, with ``cuda_runtimes`` probed
            for the loader-path question).
        release: a row of :func:`tfaccel.diagnosis.releases.releases`.

    Returns:
        A :class:`PreflightReport`: the verdict first, with the install command that fits,
        or, when this release does not, the newest release that does.
    """
    rel = release if release is not None else newest_tested()
    checks = _checks(snapshot, rel)
    verdict, install = _verdict(snapshot, rel, checks)
    return PreflightReport(rel.version, [verdict, *checks], install)


# --------------------------------------------------------------------------- the questions


def _checks(s: Snapshot, rel: Release) -> list[Finding]:
    findings = [_wheel(s, rel), _glibc(s, rel), _gpu_wheel(s, rel)]
    findings += _gpu_rules(s, rel)
    findings += [_runtimes(s, rel), _disk(s, rel)]
    return findings


def _platform_tag(s: Snapshot, rel: Release) -> str | None:
    """The wheel platform tag for this OS and architecture, or None when PyPI has none."""
    system, arch = os_name(s), cpu_arch(s)
    if system == "linux" and arch in rel.linux:
        return f"manylinux_{rel.manylinux.replace('.', '_')}_{arch}"
    if system == "windows" and arch == "x86_64" and rel.windows:
        return "win_amd64"
    mac_arch = "arm64" if arch == "aarch64" else arch  # the table and the tags say arm64
    if system == "darwin" and mac_arch in rel.macos:
        return f"macosx_{rel.macos[mac_arch].replace('.', '_')}_{mac_arch}"
    return None


def _platforms(rel: Release) -> str:
    tags = [f"manylinux_{rel.manylinux.replace('.', '_')}_{a}" for a in rel.linux]
    tags += ["win_amd64"] if rel.windows else []
    tags += [f"macosx_{v.replace('.', '_')}_{a}" for a, v in rel.macos.items()]
    return ", ".join(tags)


def _python(s: Snapshot) -> tuple[int, int] | None:
    return major_minor(s.platform.python_version) if s.platform.python_version else None


def _wheel(s: Snapshot, rel: Release) -> Finding:
    """A wheel for this Python, OS and architecture (else pip says 'No matching distribution')."""
    id = "no_matching_wheel"
    system, arch = os_name(s) or "unknown OS", cpu_arch(s) or "unknown architecture"
    python = _python(s)
    evidence = [
        f"PyPI has TensorFlow {rel.latest} wheels for {rel.python_tags()} on {_platforms(rel)}",
        f"this machine: {s.platform.system or '?'} {arch}, Python "
        f"{s.platform.python_version or 'unknown'}",
    ]
    tag = _platform_tag(s, rel)
    if tag is None:
        return make_finding(
            id,
            "fail",
            f"No TensorFlow {rel.version} wheel for {system} {arch}: pip will say 'No matching "
            "distribution found'",
            evidence,
            f"run it on Linux x86_64 (or in WSL2), or {NGC_CONTAINER}, or build from source",
        )
    if python is None:
        return skip(id, "this Python's version is unknown", evidence)
    low, high = (major_minor(v) or (0, 0) for v in rel.python)
    if not low <= python <= high:
        newer = "newer" if python > high else "older"
        fits = _releases_for_python(python)
        also = (
            f", or TensorFlow {fits[0].version} supports Python {python[0]}.{python[1]}"
            if fits
            else ""
        )
        return make_finding(
            id,
            "fail",
            f"Python {python[0]}.{python[1]} is {newer} than TensorFlow {rel.version} supports "
            f"({rel.python_range()}): pip will say 'No matching distribution found'",
            evidence,
            f"create an environment with Python {rel.python[1]} (e.g. uv venv --python "
            f"{rel.python[1]}, or conda create -n tf python={rel.python[1]}){also}",
        )
    return make_finding(
        id,
        "ok",
        f"TensorFlow {rel.latest} has a wheel for Python {python[0]}.{python[1]} on {tag}",
        evidence,
    )


def _releases_for_python(python: tuple[int, int]) -> list[Release]:
    return [
        r
        for r in releases()
        if (major_minor(r.python[0]) or (0, 0)) <= python <= (major_minor(r.python[1]) or (0, 0))
    ]


def _glibc(s: Snapshot, rel: Release) -> Finding:
    """glibc at least the wheels' manylinux tag (manylinux_2_27: glibc >= 2.27)."""
    id = "glibc_too_old"
    if os_name(s) != "linux":
        return skip(id, f"not Linux ({s.platform.system or 'unknown OS'}): no manylinux tag")
    need = parse_version(rel.manylinux) or (0,)
    evidence = [
        f"TensorFlow {rel.version}'s Linux wheels are "
        f"manylinux_{rel.manylinux.replace('.', '_')}: glibc >= {rel.manylinux}"
    ]
    if not s.platform.libc_version:
        return skip(id, "the C library is not glibc, or its version is unknown", evidence)
    have = parse_version(s.platform.libc_version) or (0,)
    evidence.append(f"this machine: {s.platform.libc or 'glibc'} {s.platform.libc_version}")
    if have < need:
        fits = [r for r in releases() if (parse_version(r.manylinux) or (0,)) <= have]
        older = (
            f"; TensorFlow {fits[0].version} needs only glibc {fits[0].manylinux}" if fits else ""
        )
        return make_finding(
            id,
            "fail",
            f"glibc {s.platform.libc_version} is older than TensorFlow {rel.version}'s wheels "
            f"need ({rel.manylinux}): pip will find no matching wheel",
            evidence,
            f"use a newer Linux (Ubuntu 18.04+ has glibc 2.27) or a container{older}",
        )
    return make_finding(id, "ok", f"glibc {s.platform.libc_version} >= {rel.manylinux}", evidence)


def _gpu_path(s: Snapshot) -> str | None:
    """Why no CUDA wheel can serve this machine, or None when Linux x86_64 has a GPU."""
    if not has_nvidia(s):
        return NO_NVIDIA_GPU
    system, arch = os_name(s), cpu_arch(s)
    if system == "linux" and arch == "x86_64":
        return None
    if system == "windows":
        return "native Windows has no CUDA build of TensorFlow after 2.10"
    if system == "darwin":
        return "macOS has no CUDA build of TensorFlow"
    if system == "linux" and arch == "aarch64":
        return "the Linux aarch64 wheels are CPU-only"
    return f"no CUDA build of TensorFlow for {system} {arch}"


def _gpu_wheel(s: Snapshot, rel: Release) -> Finding:
    id = "no_gpu_wheel"
    reason = _gpu_path(s)
    if reason == NO_NVIDIA_GPU:
        return skip(id, NO_NVIDIA_GPU)
    if reason is not None:
        return make_finding(
            id,
            "warn",
            f"TensorFlow {rel.version} installs here but runs on the CPU only: {reason}",
            [f"GPUs: {gpu_summary(s)}"],
            _cpu_platform_fix(s),
        )
    extra = (
        f"its [and-cuda] extra brings CUDA {rel.cuda} and cuDNN {rel.cudnn} as nvidia-* wheels"
        if rel.and_cuda
        else f"it has no [and-cuda] extra: CUDA {rel.cuda} and cuDNN {rel.cudnn} must be "
        "installed on the system"
    )
    return make_finding(
        id,
        "ok",
        f"the Linux x86_64 wheel of TensorFlow {rel.version} is a CUDA build",
        [extra],
    )


def _cpu_platform_fix(s: Snapshot) -> str:
    if os_name(s) == "windows":
        return "use WSL2 (Windows driver >= 528.33) and install TensorFlow there"
    return f"{NGC_CONTAINER} (NVIDIA builds for arm64 too), or build TensorFlow from source"


def _as_installed(s: Snapshot, rel: Release) -> Snapshot:
    """The Snapshot as if the release's CUDA wheel were installed, for the doctor's rules."""
    build = TfBuild(
        installed=True,
        distribution="tensorflow",
        version=rel.latest,
        build_info_found=True,
        is_cuda_build=True,
        cuda_version=rel.cuda,
        cudnn_version=rel.cudnn,
        cuda_compute_capabilities=list(rel.cuda_targets),
    )
    return dataclasses.replace(s, tensorflow=build)


def _gpu_rules(s: Snapshot, rel: Release) -> list[Finding]:
    reason = _gpu_path(s)
    if reason is not None:
        return [skip(id, reason) for id in _GPU_IDS]
    future = _as_installed(s, rel)
    found = [driver_older_than_ptx(future), cc_too_low(future), cc_too_new(future)]
    for f in found:
        f.title = f.title.replace("TensorFlow's", f"TensorFlow {rel.version}'s")
        f.evidence = [e.replace("TensorFlow ", f"TensorFlow {rel.version} ", 1) for e in f.evidence]
    new = found[2]
    if new.status == "fail" and any("PTX" in e for e in new.evidence):
        new.evidence.append(BLACKWELL_ISSUES)
        new.title = (
            f"The GPU is newer than every kernel in TensorFlow {rel.version}: no sm_100/sm_120 "
            "binaries, and the compute_90 PTX fails to JIT on Blackwell"
        )
    return found


def _runtimes(s: Snapshot, rel: Release) -> Finding:
    """A CUDA runtime of another major on the loader's path (CUDA 13 where 12 is wanted)."""
    id = "cuda_runtime_other_major"
    reason = _gpu_path(s)
    if reason is not None:
        return skip(id, reason)
    loaded = [lib for lib in s.cuda_runtimes if lib.loaded]
    want = (major_minor(rel.cuda) or (0, 0))[0]
    if not s.cuda_runtimes:
        return skip(id, "the loader's CUDA runtimes were not probed")
    evidence = [
        f"{lib.soname}: {lib.path or 'loads'}{f' (CUDA {lib.version})' if lib.version else ''}"
        for lib in loaded
    ] or ["no libcudart loads from the loader's path"]
    majors = {_soname_major(lib.soname) for lib in loaded}
    other = sorted(m for m in majors if m is not None and m != want)
    if not other:
        title = (
            f"a CUDA {want} runtime is on the loader's path"
            if want in majors
            else "no CUDA runtime on the loader's path: the nvidia-* wheels bring their own"
        )
        return make_finding(id, "ok", title, evidence)
    ld_dirs = [d.rstrip("/") for d in s.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    shadowing = sorted(
        {
            posixpath.dirname(lib.path or "")
            for lib in loaded
            if _soname_major(lib.soname) in other
            and (lib.found_via == "LD_LIBRARY_PATH" or posixpath.dirname(lib.path or "") in ld_dirs)
        }
    )
    others = ", ".join(f"CUDA {m}" for m in other)
    evidence.append(
        f"TensorFlow {rel.version} wants CUDA {want}; "
        + (
            f"pip's nvidia-*-cu{want} wheels ([and-cuda]) bring their own, so {others} "
            "alone does no harm"
            if rel.and_cuda
            else f"CUDA {rel.cuda} must be installed beside it"
        )
    )
    if shadowing:
        evidence.append(
            f"LD_LIBRARY_PATH leads to {', '.join(shadowing)} ({others}): libraries whose soname "
            f"is the same in both majors (libcudnn.so.9, libnccl.so.2) load from there before "
            "the wheels' own"
        )
        return make_finding(
            id,
            "warn",
            f"{others} libraries on LD_LIBRARY_PATH can shadow TensorFlow {rel.version}'s "
            f"CUDA {want} wheels",
            evidence,
            "take the CUDA "
            + "/".join(str(m) for m in other)
            + " folders off LD_LIBRARY_PATH in the shell that runs TensorFlow",
        )
    return make_finding(
        id,
        "ok" if rel.and_cuda else "warn",
        f"only {others} runtime(s) on the loader's path; TensorFlow {rel.version} uses CUDA {want}",
        evidence,
        None if rel.and_cuda else f"install CUDA {rel.cuda} and cuDNN {rel.cudnn}",
    )


def _soname_major(soname: str) -> int | None:
    parts = soname.split(".so.")
    version = parse_version(parts[1]) if len(parts) == 2 else None
    return version[0] if version else None


def _download_mb(s: Snapshot, rel: Release) -> tuple[int, str]:
    """Megabytes pip downloads for the command that fits, and what they are."""
    if _gpu_path(s) is None and rel.and_cuda and rel.cuda_wheels_mb is not None:
        return (
            rel.tf_wheel_mb + rel.cuda_wheels_mb,
            f"tensorflow {rel.tf_wheel_mb} MB + the nvidia-* wheels of [and-cuda] "
            f"{rel.cuda_wheels_mb} MB (PyPI's file sizes)",
        )
    return rel.tf_wheel_mb, f"the tensorflow wheel, {rel.tf_wheel_mb} MB (PyPI's file size)"


def _disk(s: Snapshot, rel: Release) -> Finding:
    id = "disk_space"
    free = s.platform.install_dir_free_bytes
    where = s.platform.install_dir or "site-packages"
    mb, what = _download_mb(s, rel)
    evidence = [f"download: {what}"]
    if free is None:
        return skip(id, "the free space where pip installs is unknown", evidence)
    need = mb * MB
    evidence.append(f"free at {where}: {fmt_bytes(free)}")
    evidence.append(
        f"wanted: {DISK_FACTOR}x the download (pip's cache keeps the wheels; unpacked they "
        "take more room)"
    )
    fix = f"free space at {where}, or install into a virtual environment on a larger disk"
    if free < need:
        return make_finding(
            id,
            "fail",
            f"{fmt_bytes(free)} free is less than the {fmt_bytes(need)} download",
            evidence,
            f"{fix}; pip install --no-cache-dir saves the cache's copy",
        )
    if free < DISK_FACTOR * need:
        return make_finding(
            id,
            "warn",
            f"{fmt_bytes(free)} free may not hold the {fmt_bytes(need)} download unpacked",
            evidence,
            f"{fix}; pip install --no-cache-dir saves the cache's copy",
        )
    return make_finding(
        id, "ok", f"{fmt_bytes(free)} free for a {fmt_bytes(need)} download", evidence
    )


# --------------------------------------------------------------------------- the verdict


def install_command(s: Snapshot, rel: Release) -> str:
    """The ``pip install`` that fits this machine: with ``[and-cuda]`` where a GPU can be used."""
    if _gpu_path(s) is None and rel.and_cuda:
        return f'pip install "tensorflow[and-cuda]=={rel.latest}"'
    return f'pip install "tensorflow=={rel.latest}"'


def _fits(s: Snapshot, rel: Release, gpu: bool) -> bool:
    """Whether ``rel`` installs here (and, with ``gpu``, runs on the GPU)."""
    checks = _checks(s, rel)
    if gpu:
        return all(f.status != "fail" for f in checks if f.id != "disk_space")
    return all(f.status != "fail" for f in checks if f.id in ("no_matching_wheel", "glibc_too_old"))


def _alternative(s: Snapshot, rel: Release, gpu: bool) -> Release | None:
    return next((r for r in releases() if r is not rel and _fits(s, r, gpu)), None)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def _verdict(s: Snapshot, rel: Release, checks: list[Finding]) -> tuple[Finding, str | None]:
    failed = [f for f in checks if f.status == "fail"]
    warned = [f for f in checks if f.status == "warn"]
    gpu_reason = _gpu_path(s)
    name = f"TensorFlow {rel.version}"
    evidence = [f"{f.id}: {f.title}" for f in failed + warned]
    if rel.unchecked:
        evidence.append(
            f"not checked against a source for {rel.version}: {', '.join(rel.unchecked)}"
        )
    install = install_command(s, rel)
    install_failed = [f for f in failed if f.id in ("no_matching_wheel", "glibc_too_old")]
    if install_failed:
        other = _alternative(s, rel, gpu=gpu_reason is None) or _alternative(s, rel, gpu=False)
        fix = (
            f"{install_command(s, other)} (the newest release with a wheel here)"
            if other
            else install_failed[0].fix
        )
        return (
            make_finding(
                "preflight", "fail", f"{name} has no wheel for this machine", evidence, fix
            ),
            install_command(s, other) if other else None,
        )
    gpu_failed = [f for f in failed if f.id in _GPU_IDS]
    if gpu_failed:
        other = _alternative(s, rel, gpu=True)
        if other is not None:
            fix = f"{install_command(s, other)} (the newest release that runs on this GPU)"
        else:
            fix = f"no release in tfaccel's table runs on this GPU: {gpu_failed[0].fix}"
        evidence.append(
            f'{name} would still run on the CPU: pip install "tensorflow=={rel.latest}"'
        )
        return (
            make_finding(
                "preflight",
                "fail",
                f"{name} will not run on the GPU here: {_lower_first(gpu_failed[0].title)}",
                evidence,
                fix,
            ),
            install_command(s, other) if other else None,
        )
    if failed:  # the disk
        return (
            make_finding(
                "preflight",
                "fail",
                f"{name} fits this GPU, but not this disk",
                evidence,
                f"{failed[0].fix}; then {install}",
            ),
            install,
        )
    status: Status = worst(warned)
    if gpu_reason == NO_NVIDIA_GPU:
        title = f"no NVIDIA GPU here: {name} will run on the CPU"
        status = "warn" if warned else "info"
    elif gpu_reason is not None:
        title = f"{name} will run here on the CPU only ({gpu_reason})"
    else:
        title = f"{name} will run on {gpu_summary(s)}"
        if warned:
            title += " (with warnings)"
    if not rel.and_cuda and gpu_reason is None:
        evidence.append(
            f"{name} has no [and-cuda] extra: install CUDA {rel.cuda} and cuDNN {rel.cudnn} too"
        )
    return make_finding("preflight", status, title, evidence, install), install
