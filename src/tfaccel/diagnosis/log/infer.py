"""Causes a log implies without stating them: drawn from its facts and the messages it holds.

TensorFlow's own messages name most causes (:mod:`tfaccel.diagnosis.log.patterns`); those
findings carry ``numbers["strength"] == "message"``. Some causes show only as a combination:
``False`` printed by ``tf.test.is_built_with_cuda()`` in a transcript of TensorFlow 2.12 on
``win32`` means the native-Windows build, which has no CUDA. Such a finding is an inference:
its strength is ``inferred``, its evidence names every line it rests on, and its status is
``warn``, never ``fail``, since a printed value or a package listing can mislead. The one
exception is a message made specific by its context (``libcuda.so.1`` missing on WSL2): that
keeps the message's status.

Example:
    >>> from tfaccel.diagnosis.log.facts import read_facts
    >>> text = "Python 3.10.9 [MSC v.1934 64 bit (AMD64)] on win32\\n>>> tf.__version__\\n'2.12.0'"
    >>> text += "\\n>>> tf.config.list_physical_devices('GPU')\\n[]"
    >>> [(f.id, f.status) for f in infer([], read_facts(text))]
    [('windows_native', 'warn')]
"""

from __future__ import annotations

import dataclasses

from tfaccel.core.findings import Finding
from tfaccel.diagnosis.log.facts import Fact, LogFacts, package_kind
from tfaccel.diagnosis.log.patterns import CAUSES, QEMU_EMULATION_FIX, QEMU_EMULATION_TITLE

__all__ = ["infer"]

WINDOWS_LAST_GPU = (2, 10)  # the last TensorFlow with a CUDA build for native Windows


def infer(causes: list[Finding], facts: LogFacts) -> list[Finding]:
    """The causes matched in the messages, made specific by the facts, plus the inferred ones.

    Args:
        causes: the findings the message patterns gave, in the order of the log.
        facts: what :func:`~tfaccel.diagnosis.log.facts.read_facts` read from the same text.

    Returns:
        The findings to report: message findings first (in log order), inferred ones after.
    """
    found = {cause.id: cause for cause in causes}
    result = [_specific(cause, facts) for cause in causes]
    inferred: list[Finding] = []
    platform = facts.platform
    symptoms = _no_gpu_symptoms(facts)
    version = facts.tf_version
    build = _cpu_build_evidence(facts)
    if platform is not None and platform.value == "windows" and "windows_native" not in found:
        if (version is None or version[0] > WINDOWS_LAST_GPU) and (symptoms or build):
            evidence = [f"native Windows: {platform.evidence}"]
            if version is None:
                evidence.append(
                    "the TensorFlow version is not shown: only TensorFlow <= 2.10 has a CUDA "
                    "build for native Windows"
                )
            else:
                evidence.append(
                    f"TensorFlow {version[0][0]}.{version[0][1]}: {version[1].evidence}"
                )
            seen = [platform, *([version[1]] if version else []), *symptoms, *build]
            evidence += _lines(symptoms + build)
            inferred.append(_inferred("windows_native", evidence, seen))
    elif platform is not None and platform.value == "aarch64":
        pip_extra = facts.of("and_cuda_missing")
        if symptoms or build or pip_extra:
            evidence = [f"aarch64 (ARM64): {platform.evidence}"]
            evidence += _lines(pip_extra + symptoms)
            inferred.append(
                _inferred("aarch64_no_cuda", evidence, [platform, *pip_extra, *symptoms])
            )
    elif platform is not None and platform.value == "macos" and (symptoms or build):
        evidence = [f"macOS: {platform.evidence}"]
        evidence += _lines(symptoms + build)
        inferred.append(_inferred("macos_no_metal", evidence, [platform, *symptoms, *build]))
    if not inferred and "cpu_only_build" not in found and build:
        inferred.append(_inferred("cpu_only_build", _lines(build + symptoms), build + symptoms))
    evidence, seen = _shadowing(facts, found)
    if seen:
        inferred.append(_inferred("ld_library_path_shadowing", evidence, seen))
    if not result and not inferred and symptoms:
        inferred.append(_inferred("no_gpu_visible", _lines(symptoms), symptoms))
    return result + inferred


def _inferred(cause: str, evidence: list[str], seen: list[Fact]) -> Finding:
    """An inferred cause: its evidence, and the facts it rests on (their lines are its line
    numbers)."""
    return Finding(
        cause,
        "warn",
        CAUSES[cause].title,
        ["inferred from what the log shows, not from an error message:", *evidence],
        CAUSES[cause].fix,
        source="log",
        numbers={
            "count": len(evidence),
            "line_numbers": sorted({f.line for f in seen}),
            "strength": "inferred",
        },
    )


def _lines(facts: list[Fact]) -> list[str]:
    seen: dict[str, None] = {}
    for fact in sorted(facts, key=lambda f: f.line):
        seen[fact.evidence] = None
    return list(seen)


def _no_gpu_symptoms(facts: LogFacts) -> list[Fact]:
    """Printed values that say TensorFlow sees no GPU: ``[]``, ``0``, ``False``."""
    return [
        f
        for f in facts.facts
        if (f.kind == "gpu_list" and f.value == "[]")
        or (f.kind == "gpu_count" and f.value == "0")
        or (f.kind == "gpu_available" and f.value in ("False", "[]"))
    ]


def _cpu_build_evidence(facts: LogFacts) -> list[Fact]:
    """A printed ``is_built_with_cuda()`` of False, or CPU builds listed and no GPU build."""
    printed = [f for f in facts.of("built_with_cuda") if f.value == "False"]
    kinds = [(f, package_kind(f)) for f in facts.packages()]
    cpu = [f for f, kind in kinds if kind == "cpu"]
    gpu = [f for f, kind in kinds if kind == "gpu"]
    return printed + (cpu if not gpu else [])


def _shadowing(facts: LogFacts, found: dict[str, Finding]) -> tuple[list[str], list[Fact]]:
    """An LD_LIBRARY_PATH with a system CUDA beside pip's nvidia-* libraries, and a library
    that failed to load or loaded in the wrong version."""
    paths = facts.of("ld_library_path")
    pip = facts.of("pip_nvidia")
    failed = [found[c] for c in ("cudnn_mismatch", "missing_cuda_libs") if c in found]
    if not (paths and pip and failed):
        return [], []
    evidence = _lines(paths + pip)
    evidence += [f"and the log shows {cause.id}: {cause.title}" for cause in failed]
    return evidence, paths + pip


def _specific(cause: Finding, facts: LogFacts) -> Finding:
    """A message made specific by the platform: libcuda missing on WSL2 is WSL's libcuda; an
    illegal instruction on macOS is an x86_64 TensorFlow under Rosetta (every Intel Mac since
    2011 has AVX; Rosetta translates none), and beside a QEMU user-mode line it is the x86_64
    code that QEMU emulates on an Arm host, whatever the host's own CPU has."""
    platform = facts.platform
    if (
        cause.id == "no_driver_or_hidden"
        and platform is not None
        and platform.value == "wsl2"
        and any("libcuda" in line for line in cause.evidence)
    ):
        return _as_cause(cause, "wsl_libcuda", f"WSL2: {platform.evidence}")
    qemu = facts.first("qemu_user")
    if cause.id == "cpu_no_avx" and qemu is not None:
        return _as_cause(
            cause,
            "x86_emulation",
            f"QEMU user mode: {qemu.evidence}",
            QEMU_EMULATION_TITLE,
            QEMU_EMULATION_FIX,
        )
    if cause.id == "cpu_no_avx" and platform is not None and platform.value == "macos":
        return _as_cause(cause, "x86_emulation", f"macOS: {platform.evidence}")
    return cause


def _as_cause(
    cause: Finding, cause_id: str, evidence: str, title: str | None = None, fix: str | None = None
) -> Finding:
    """``cause`` reported as the more specific ``cause_id``: its title and fix (unless given),
    with ``evidence`` first."""
    return dataclasses.replace(
        cause,
        id=cause_id,
        title=CAUSES[cause_id].title if title is None else title,
        fix=CAUSES[cause_id].fix if fix is None else fix,
        evidence=[evidence, *cause.evidence],
    )
