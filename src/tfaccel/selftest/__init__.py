"""The GPU self-test (``tfaccel selftest --gpu``, ``make gpu-check``): everything that needs a GPU,
each step a separate process, one summary.

The steps: every test marked ``gpu``, ``devices --tf``, ``doctor --deep``, ``tfaccel.setup()`` in
each GPU mode (memory growth, a memory limit, a fraction, logical GPUs, mixed_float16 with loss
scaling, mixed_bfloat16, XLA), each checked against what TensorFlow then reports, the bench, the
kernels, profile, a short tune, the benchmark scripts of the checkout, and ``tfaccel report``.
Each step runs in its own process group with its own timeout, inside one total budget: a crash,
a hang or a failure is recorded (command, exit status, seconds, the end of its output) and the
next step runs; when the budget is spent the remaining steps are skipped, with the reason.

Whether there is a GPU is decided without TensorFlow, from NVML (:mod:`tfaccel.probe`), in a
fraction of a second: without one the self-test is skipped, with the reason, and writes nothing.

Everything is written into one directory: ``summary.json`` (the machine, then per step its
command, status, seconds, reason and the end of its output), ``logs/`` (each step's whole output)
and the files of ``tfaccel report`` (``report.html``...); each file is written to a temporary
name and renamed into place. The bench, tune and report steps record into ``results.sqlite`` in
that directory, so the self-test leaves the user's results database (and what
``setup(precision="auto", jit="auto")`` reads from it) as it was.

Example:
    >>> from tfaccel import selftest
    >>> result = selftest.run_gpu_selftest(out="gpu-check")   # doctest: +SKIP
    >>> result.status, [s.name for s in result.steps if s.status == "failed"]   # doctest: +SKIP
    ('passed', [])
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tfaccel import probe
from tfaccel.core.files import check_writable_dir, check_writable_file, write_atomic
from tfaccel.core.jsonout import dumps
from tfaccel.probe import libs
from tfaccel.selftest.gpu import (
    SETUP_MODES,
    checkout_root,
    gpu_missing_reason,
    machine_facts,
    plan_gpu_steps,
)
from tfaccel.selftest.offline import REAL_GPU as _REAL_GPU
from tfaccel.selftest.offline import discover, plan_offline_steps
from tfaccel.selftest.runner import Step, StepProgress, StepResult, run_steps

COMBINED_LOG = "steps.log"
"""With ``one_log``: every step's whole output in one file, each after a header line."""

__all__ = [
    "DEFAULT_BUDGET_S",
    "SETUP_MODES",
    "SelftestResult",
    "Step",
    "StepResult",
    "check_out_dir",
    "checkout_root",
    "default_out",
    "execute",
    "gpu_missing_reason",
    "machine_facts",
    "plan_gpu_steps",
    "probe_machine",
    "run_gpu_selftest",
    "run_offline_selftest",
    "run_steps",
    "write_summary",
]

RunStatus = Literal["passed", "failed", "skipped", "interrupted"]

DEFAULT_BUDGET_S = 570.0
"""The whole self-test's budget: under ten minutes with the probe and the summary."""
_OUT = "out"  # the argument that names the directory (--out on the command line)


@dataclass
class SelftestResult:
    """The self-test's outcome: ``summary.json``'s document.

    Attributes:
        status: ``passed`` (no step failed or timed out), ``failed``, ``skipped`` (no GPU:
            nothing ran; ``reason`` says why) or ``interrupted`` (Ctrl-C; the steps done are
            kept).
        reason: why it was skipped or interrupted.
        machine: the machine's facts (:func:`machine_facts`).
        steps: one result per planned step, in order.
        out: the directory written, None when nothing was written.
        budget_s: the total budget.
        started_at: when it started (UTC, ISO 8601).
        seconds: how long it took.
        kind: ``gpu`` (the whole self-test) or ``gpu-offline`` (``--offline``: no TensorFlow,
            nothing installed; ``gpu-simulated`` with ``--simulate``).
        found: with ``--offline``, the modules importable here and the tools found.
    """

    status: RunStatus
    reason: str | None = None
    machine: dict[str, Any] = field(default_factory=dict)
    steps: list[StepResult] = field(default_factory=list)
    out: str | None = None
    budget_s: float = DEFAULT_BUDGET_S
    started_at: str = ""
    seconds: float = 0.0
    kind: str = "gpu"
    found: dict[str, Any] | None = None

    @property
    def failed(self) -> list[StepResult]:
        """The steps that failed or timed out."""
        return [s for s in self.steps if s.status in ("failed", "timed-out")]

    def counts(self) -> dict[str, int]:
        """Steps per status."""
        counts = {"passed": 0, "failed": 0, "timed-out": 0, "skipped": 0}
        for s in self.steps:
            counts[s.status] += 1
        return counts

    def files(self) -> dict[str, str]:
        """The files of the directory that a reader opens first: summary.json, report.html."""
        if self.out is None:
            return {}
        out = Path(self.out)
        found = {"summary": str(out / "summary.json")}
        if (out / "report.html").is_file():
            found["report"] = str(out / "report.html")
        if (out / COMBINED_LOG).is_file():
            found["log"] = str(out / COMBINED_LOG)
        return found

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: summary.json and the ``--json`` document."""
        doc: dict[str, Any] = {
            "command": "selftest",
            "kind": self.kind,
            "status": self.status,
            "reason": self.reason,
            "started_at": self.started_at,
            "seconds": round(self.seconds, 3),
            "budget_s": self.budget_s,
            "out": self.out,
            "files": self.files(),
            "machine": self.machine,
            "counts": self.counts(),
            "steps": [s.to_dict() for s in self.steps],
        }
        if self.found is not None:
            doc["found"] = self.found
            doc["needs_real_gpu"] = [
                s.name for s in self.steps if s.status == "skipped" and s.reason == _REAL_GPU
            ]
        return doc


# --- the directory ----------------------------------------------------------------------------


def default_out(now: _dt.datetime | None = None) -> str:
    """``gpu-check-YYYYMMDD-HHMMSS`` (local time), in the working directory."""
    moment = now or _dt.datetime.now()
    return f"gpu-check-{moment:%Y%m%d-%H%M%S}"


def check_out_dir(out: str | Path) -> Path:
    """Check that ``out`` is, or can become, a directory to write in; create nothing.

    The rule is :func:`tfaccel.core.files.check_writable_dir`.

    Raises:
        UsageError: ``out`` is empty, is a file (or another non-directory), lies under a file,
            or its nearest existing folder cannot be written; or a summary.json or steps.log
            is there that a self-test did not write (a user's file is never replaced).
    """
    root = check_writable_dir(out, **_OUT_DIR)
    if root.is_dir():
        for name, marker in OWN_FILES.items():
            check_writable_file(root / name, argument_name=_OUT, replaces=marker)
    return root


OWN_FILES: dict[str, tuple[bytes, str]] = {
    "summary.json": (b'"command": "selftest"', "a self-test summary tfaccel wrote"),
    COMBINED_LOG: (b"===== 01 ", "a self-test log tfaccel wrote"),
}
"""The files a self-test writes into its directory, with what each holds when a self-test
wrote it: another file of that name there is refused before anything runs
(``check_writable_file``'s ``replaces``)."""


def _make_out_dir(path: Path, logs: bool = True) -> Path:
    """Create the directory (and its ``logs/``), and check a file can be written there."""
    check_writable_dir(path, create=True, **_OUT_DIR)
    if logs:
        check_writable_dir(path / "logs", create=True, **_OUT_DIR)
    return path


def _combine_logs(results: list[StepResult], out_dir: Path, folder: Path) -> list[StepResult]:
    """Every step's log into one file (:data:`COMBINED_LOG`), each after a header; the
    per-step files and their folder removed; each result's ``log`` names its section."""
    parts: list[str] = []
    combined: list[StepResult] = []
    for number, result in enumerate(results, 1):
        header = f"===== {number:02d} {result.name}: {result.status}"
        if result.reason:
            header += f" ({result.reason})"
        parts.append(f"{header} =====\n$ {result.step.command}\n")
        if result.log is not None:
            path = Path(result.log)
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
            path.unlink()
            parts.append("\n")
            result = dataclasses.replace(
                result, log=f"{out_dir / COMBINED_LOG}#{number:02d}-{result.name}"
            )
        combined.append(result)
    write_atomic(out_dir / COMBINED_LOG, "".join(parts), argument_name=_OUT)
    with contextlib.suppress(OSError):
        folder.rmdir()
    return combined


_OUT_DIR: dict[str, Any] = {
    "what": "the self-test directory",
    "argument_name": _OUT,
    "example": "gpu-check",
}


def write_summary(result: SelftestResult) -> Path:
    """Write ``summary.json`` into ``result.out``, atomically; return its path."""

    assert result.out is not None
    path = Path(result.out) / "summary.json"
    write_atomic(path, dumps(result.to_dict()) + "\n", argument_name=_OUT)
    return path


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# --- the workflow -----------------------------------------------------------------------------


def execute(
    steps: Sequence[Step],
    out: str | Path,
    *,
    machine: dict[str, Any] | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    progress: StepProgress | None = None,
    one_log: bool = False,
    kind: str = "gpu",
    found: dict[str, Any] | None = None,
) -> SelftestResult:
    """Run ``steps`` into the directory ``out`` and write summary.json there.

    The directory (and ``logs/``) is created; summary.json is written even when Ctrl-C stops
    the run (status ``interrupted``). With ``one_log`` the steps' logs end up in one file,
    :data:`COMBINED_LOG`, instead of ``logs/``: two files in all.

    Raises:
        UsageError: ``out`` cannot be created or written.
    """
    out_dir = _make_out_dir(check_out_dir(out))
    started_at = _now()
    begin = time.monotonic()
    results, interrupted = run_steps(
        steps, budget_s=budget_s, log_dir=out_dir / "logs", cwd=out_dir, progress=progress
    )
    if one_log:
        results = _combine_logs(results, out_dir, out_dir / "logs")
    result = SelftestResult(
        status="passed",
        reason="interrupted (Ctrl-C)" if interrupted else None,
        machine=machine or {},
        steps=results,
        out=str(out_dir),
        budget_s=budget_s,
        started_at=started_at,
        seconds=time.monotonic() - begin,
        kind=kind,
        found=found,
    )
    if interrupted:
        result.status = "interrupted"
    elif result.failed:
        result.status = "failed"
    write_summary(result)
    return result


def probe_machine() -> tuple[str | None, dict[str, Any]]:
    """Whether there is a GPU to test (the reason when not) and the machine's facts, without
    TensorFlow."""

    snap = probe.snapshot(libraries=False)
    driver = libs.collect_driver()
    return gpu_missing_reason(snap, driver.nvidia_smi_path), machine_facts(snap, driver)


def _skipped(
    reason: str,
    machine: dict[str, Any],
    *,
    budget_s: float,
    started_at: str,
    begin: float,
    kind: str = "gpu",
) -> SelftestResult:
    """The result of a self-test skipped for ``reason`` (nothing written)."""
    return SelftestResult(
        status="skipped",
        reason=reason,
        machine=machine,
        budget_s=budget_s,
        started_at=started_at,
        seconds=time.monotonic() - begin,
        kind=kind,
    )


def run_gpu_selftest(
    out: str | Path | None = None,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    progress: StepProgress | None = None,
) -> SelftestResult:
    """The GPU self-test: skipped (nothing written) without an NVIDIA GPU, else every step.

    Args:
        out: the directory to write (default :func:`default_out`); checked before anything
            runs, on every machine.
        budget_s: seconds for all the steps.
        progress: told when each step starts and ends.

    Returns:
        The :class:`SelftestResult`; ``status`` ``failed`` when a step failed or timed out.

    Raises:
        UsageError: ``out`` cannot be a directory to write in.
    """
    out_dir = check_out_dir(out if out is not None else default_out())
    started_at = _now()
    begin = time.monotonic()
    missing, machine = probe_machine()
    if missing is not None:
        return _skipped(missing, machine, budget_s=budget_s, started_at=started_at, begin=begin)
    steps = plan_gpu_steps(out_dir.resolve())
    return execute(steps, out_dir, machine=machine, budget_s=budget_s, progress=progress)


def run_offline_selftest(
    out: str | Path | None = None,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    progress: StepProgress | None = None,
    simulate: bool = False,
) -> SelftestResult:
    """The GPU self-test without TensorFlow and without installing anything (``--offline``).

    Finds what this interpreter can import and which tools exist, runs every step that can
    run (:func:`tfaccel.selftest.offline.plan_offline_steps`) and skips the rest with the
    reason; writes summary.json and one log (:data:`COMBINED_LOG`) into ``out``. Skipped
    (nothing written) without an NVIDIA GPU, unless ``simulate``: then the kernels run on the
    CUDA simulator and summary.json's ``needs_real_gpu`` lists the steps left for a GPU.

    Raises:
        UsageError: ``out`` cannot be a directory to write in.
    """
    out_dir = check_out_dir(out if out is not None else default_out())
    started_at = _now()
    begin = time.monotonic()
    missing, machine = probe_machine()
    kind = "gpu-simulated" if simulate else "gpu-offline"
    if missing is not None and not simulate:
        return _skipped(
            missing, machine, budget_s=budget_s, started_at=started_at, begin=begin, kind=kind
        )
    if progress is not None:
        progress.status("looking for the modules and tools this machine has")
    found = discover()
    steps = plan_offline_steps(found, gpu=missing is None, simulate=simulate, root=checkout_root())
    return execute(
        steps,
        out_dir,
        machine=machine,
        budget_s=budget_s,
        progress=progress,
        one_log=True,
        kind=kind,
        found=found,
    )
