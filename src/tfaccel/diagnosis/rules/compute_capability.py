"""Compute capability: does this TensorFlow build have kernels for each GPU.

TensorFlow's build info lists the targets it was compiled for (``sm_XY`` binaries, ``compute_XY``
PTX); NVML gives each GPU's compute capability. Finding ids: ``cc_too_low`` (a GPU below every
target: TensorFlow ignores it) and ``cc_too_new`` (a GPU newer than every binary target: PTX is
JIT-compiled at first start, or there are no kernels for it at all).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tfaccel.core.findings import Finding, Status
from tfaccel.diagnosis.rules._common import (
    NGC_CONTAINER,
    dotted,
    gpu_name,
    gpu_skip_reason,
    major_minor,
    make_finding,
    skip,
)
from tfaccel.snapshot import GpuInfo, Snapshot


@dataclass(frozen=True)
class _Target:
    """One build target of TensorFlow's CUDA kernels: ``sm_86``, ``compute_90``, ``sm_90a``."""

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
        decimal = re.fullmatch(r"(\d{1,3})\.(\d)", item)
        if arch:
            targets.append(
                _Target(int(arch[2]), int(arch[3]), arch[1] == "compute", arch[4] == "a")
            )
        elif decimal:
            targets.append(_Target(int(decimal[1]), int(decimal[2]), False, False))
    return targets


def _gpus_with_cc(s: Snapshot) -> list[tuple[GpuInfo, tuple[int, int]]]:
    """The GPUs whose compute capability NVML reported as ``major.minor``."""
    found = []
    for gpu in s.nvml.gpus:
        cc = major_minor(gpu.compute_capability)
        if cc is not None and re.fullmatch(r"\s*\d+\.\d+\s*", gpu.compute_capability or ""):
            found.append((gpu, cc))
    return found


@dataclass(frozen=True)
class _Fit:
    """What both rules compare: the build's targets and the GPUs whose capability is known."""

    targets: list[_Target]
    gpus: list[tuple[GpuInfo, tuple[int, int]]]

    @property
    def lowest(self) -> tuple[int, int]:
        return min(t.cc for t in self.targets)

    @property
    def built(self) -> str:
        return f"built for {', '.join(str(t) for t in self.targets)}"


def _fit_inputs(s: Snapshot, id: str) -> _Fit | Finding:
    """The targets and GPUs to compare, or the ``skip`` finding saying why there are none."""
    reason = gpu_skip_reason(s)
    if reason:
        return skip(id, reason)
    targets = _targets(s.tensorflow.cuda_compute_capabilities)
    if not targets:
        return skip(id, "the build info lists no CUDA compute capabilities")
    gpus = _gpus_with_cc(s)
    if not gpus:
        return skip(id, "no GPU's compute capability is known (NVML did not report it)")
    return _Fit(targets, gpus)


def cc_too_low(s: Snapshot) -> Finding:
    """A GPU's compute capability is below every target TensorFlow was built for."""
    fit = _fit_inputs(s, "cc_too_low")
    if isinstance(fit, Finding):
        return fit
    lowest = fit.lowest
    too_low = [(g, cc) for g, cc in fit.gpus if cc < lowest]
    if not too_low:
        return make_finding(
            "cc_too_low",
            "ok",
            f"every GPU is at least compute capability {dotted(lowest)}",
            [fit.built],
        )
    evidence = [
        f"{gpu_name(g)}: compute capability {dotted(cc)} < minimum {dotted(lowest)}"
        for g, cc in too_low
    ] + [fit.built]
    cc_text = dotted(too_low[0][1])
    return make_finding(
        "cc_too_low",
        "fail",
        "A GPU is older than this TensorFlow supports; TensorFlow ignores it",
        evidence,
        f"build TensorFlow from source with TF_CUDA_COMPUTE_CAPABILITIES={cc_text} ./configure, "
        "or install an older TensorFlow whose build targets include it",
    )


def cc_too_new(s: Snapshot) -> Finding:
    """A GPU newer than every binary target: PTX JIT (slow start) or no kernels at all."""
    fit = _fit_inputs(s, "cc_too_new")
    if isinstance(fit, Finding):
        return fit
    worst: Status = "ok"
    evidence: list[str] = []
    for gpu, cc in fit.gpus:
        if cc < fit.lowest:
            continue  # cc_too_low reports it
        status, line = _gpu_fit(gpu, cc, fit.targets)
        evidence.append(line)
        if status == "fail" or (status == "warn" and worst == "ok"):
            worst = status
    evidence.append(fit.built)
    if worst == "ok":
        return make_finding(
            "cc_too_new", "ok", "TensorFlow ships binary kernels for every GPU", evidence
        )
    if worst == "warn":
        return make_finding(
            "cc_too_new",
            "warn",
            "No binary kernels for this GPU: CUDA JIT-compiles PTX at first start (minutes)",
            evidence,
            "export CUDA_CACHE_MAXSIZE=4294967296 (keeps the JIT cache); wait out the first start",
        )
    return make_finding(
        "cc_too_new",
        "fail",
        "The GPU is newer than every kernel in this TensorFlow",
        evidence,
        f"{NGC_CONTAINER}, or build TensorFlow from source for this compute capability",
    )


def _gpu_fit(gpu: GpuInfo, cc: tuple[int, int], targets: list[_Target]) -> tuple[Status, str]:
    """How one GPU runs this build: binary kernels (ok), PTX JIT (warn), nothing (fail)."""
    name = f"{gpu_name(gpu)}, compute capability {dotted(cc)}"
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
