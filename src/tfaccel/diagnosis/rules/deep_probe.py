"""The deep probe: what ``import tensorflow`` in a subprocess (``tfaccel doctor --deep``) showed.

Finding ids: ``tf_import`` (the import crashed, hung, raised, or worked), ``tf_gpus_registered``
(how many GPUs TensorFlow registered against how many NVML sees and ``CUDA_VISIBLE_DEVICES``
leaves visible), and, from ``deep_log_causes``, the ids of the log reader's causes found in
what the import logged, with source ``deep``. Without ``--deep`` the first two say ``skip``
and the last adds nothing.
"""

from __future__ import annotations

from tfaccel.core.findings import Finding
from tfaccel.diagnosis.log.match import match_log
from tfaccel.diagnosis.log.patterns import BENIGN
from tfaccel.diagnosis.rules._common import (
    NO_NVIDIA_GPU,
    VLOG_DEBUG,
    gpu_count,
    has_nvidia,
    make_finding,
    skip,
    visibility,
)
from tfaccel.probe.deep import DEFAULT_TIMEOUT_S
from tfaccel.snapshot import Snapshot

NOT_IMPORTED = "TensorFlow was not imported: run `tfaccel doctor --deep`"
TAIL_LINES = 5  # lines of the subprocess's log shown as evidence of a failed import
_BENIGN_ANCHORS = tuple(anchor for anchors in BENIGN.values() for anchor in anchors)
SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV"}


def tf_import(s: Snapshot) -> Finding:
    """``import tensorflow`` in a subprocess: crashed, hung, raised, or worked."""
    deep = s.deep
    if deep is None or not deep.ran:
        return skip("tf_import", NOT_IMPORTED)
    tail = [f"log: {line}" for line in _last_lines(deep.log, TAIL_LINES)]
    if deep.timed_out:
        return _timed_out(deep.timeout_s, tail)
    code = deep.returncode
    if code is not None and code < 0:
        return make_finding(
            "tf_import",
            "fail",
            f"import tensorflow crashed ({_signal_name(-code)})",
            tail,
            _crash_fix(-code),
        )
    if deep.error or not deep.ok or (code is not None and code != 0):
        evidence = ([f"error: {deep.error}"] if deep.error else []) + [f"exit code: {code}"] + tail
        return make_finding(
            "tf_import",
            "fail",
            "import tensorflow failed",
            evidence,
            f"python -c 'import tensorflow' shows the full traceback; {VLOG_DEBUG}",
        )
    took = f" in {deep.duration_s:.1f} s" if deep.duration_s is not None else ""
    version = deep.tf_version or "?"
    return make_finding(
        "tf_import",
        "ok",
        f"import tensorflow {version} works{took}",
        [f"devices: {', '.join(deep.physical_devices) or 'none'}"],
    )


def _timed_out(timeout_s: float | None, tail: list[str]) -> Finding:
    """A timeout below the default says the time was short, not that TensorFlow hung."""
    if timeout_s is not None and timeout_s < DEFAULT_TIMEOUT_S:
        return make_finding(
            "tf_import",
            "fail",
            f"import tensorflow did not finish within {timeout_s:g} s",
            [
                f"time allowed: {timeout_s:g} s, below the default {DEFAULT_TIMEOUT_S:g} s "
                "(an import from a cold disk cache takes far longer than a warm one)",
                *tail,
            ],
            f"try the default {DEFAULT_TIMEOUT_S:g} s (--deep-timeout {DEFAULT_TIMEOUT_S:g}, "
            "or leave --deep-timeout out)",
        )
    limit = f"{timeout_s:g} s" if timeout_s is not None else "the time limit"
    return make_finding(
        "tf_import",
        "fail",
        f"import tensorflow hung (no answer within {limit})",
        tail,
        VLOG_DEBUG,
    )


def _last_lines(text: str, n: int) -> list[str]:
    """The last ``n`` lines of ``text`` that say something: blank lines and the notices
    TensorFlow prints on every healthy start (``log.patterns.BENIGN``) are left out, so the
    line that tells what went wrong is among them."""
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not any(anchor in line for anchor in _BENIGN_ANCHORS)
    ]
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
        return skip("tf_gpus_registered", NOT_IMPORTED)
    if not deep.ok:
        return skip("tf_gpus_registered", "import tensorflow failed (see tf_import)")
    registered = sum(1 for d in deep.physical_devices if _device_type(d) == "GPU")
    total = gpu_count(s)
    expected = total
    value = s.env.get("CUDA_VISIBLE_DEVICES")
    if value is not None and total:
        expected = visibility(value, s.nvml.gpus, total).visible
    evidence = [f"NVIDIA GPUs on the machine: {total}", f"TensorFlow registered: {registered}"]
    if expected != total:
        evidence.append(f"CUDA_VISIBLE_DEVICES={value!r} leaves {expected} visible")
    if total == 0 and registered == 0:
        return skip("tf_gpus_registered", "no GPU on this machine", evidence)
    if registered == 0 < expected:
        return make_finding(
            "tf_gpus_registered",
            "fail",
            "TensorFlow registered no GPU",
            evidence,
            f"the failed checks above name the cause; {VLOG_DEBUG}",
        )
    if registered < expected:
        return make_finding(
            "tf_gpus_registered",
            "warn",
            f"TensorFlow registered {registered} of {expected} GPUs",
            evidence,
            "see gpu_too_few_cores and cc_too_low",
        )
    return make_finding(
        "tf_gpus_registered", "ok", f"TensorFlow registered {registered} GPU(s)", evidence
    )


_NO_GPU_EXPECTED = frozenset({"no_driver_or_hidden", "wsl_libcuda", "missing_cuda_libs"})


def deep_log_causes(s: Snapshot) -> list[Finding]:
    """The known causes in what ``import tensorflow`` logged, as findings from ``deep``."""
    deep = s.deep
    if deep is None or not deep.ran or not deep.log.strip():
        return []
    findings = match_log(deep.log, source="deep probe").findings(source="deep")
    if has_nvidia(s):
        return findings
    for finding in findings:
        if finding.id in _NO_GPU_EXPECTED:
            # A CUDA build on a machine without a GPU says so; that is expected, not a fault.
            finding.status = "skip"
            finding.title = f"expected here, {NO_NVIDIA_GPU}: {finding.title}"
            finding.fix = None
    return findings
