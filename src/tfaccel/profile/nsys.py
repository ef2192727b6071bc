"""``tfaccel profile --nsys``: a profile run under Nsight Systems (``nsys profile``).

The program run is ``tfaccel profile``'s own (the script with ``model.fit`` patched, or
``--model``), started by ``nsys profile`` as its child, so that the report's timeline has the
CUDA, cuDNN and cuBLAS calls and kernels, the OS runtime calls, and tfaccel's NVTX ranges
(``step``, ``input``, ``compute``, ``rerun`` in the domain ``tfaccel``, see
:mod:`tfaccel.profile.nvtx_marks`) lined up on one clock::

    nsys profile --trace=cuda,nvtx,cudnn,cublas,osrt --output DIR/tfaccel-YYYYmmdd-HHMMSS
        --force-overwrite true PYTHON -m tfaccel profile [OPTIONS] SCRIPT [ARGS...]

nsys writes ``DIR/tfaccel-YYYYmmdd-HHMMSS.nsys-rep``; open it with ``nsys-ui``, or summarise it
with ``nsys stats --report nvtx_sum,cuda_gpu_kern_sum REPORT``. ``nsys`` is looked for on
``PATH``, then in the usual install directories (:data:`SEARCH_DIRS`).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from tfaccel.core.checks import check_dir_argument
from tfaccel.core.errors import UsageError, argument

__all__ = [
    "SEARCH_DIRS",
    "TRACE",
    "NsysNotFoundError",
    "NsysRun",
    "command",
    "find_nsys",
    "profile",
    "require_nsys",
]

TRACE = ("cuda", "nvtx", "cudnn", "cublas", "osrt")
# Where installers put nsys when its directory is not on PATH: the CUDA toolkit's bin (older
# toolkits link nsys there, newer ones ship nsight-systems-VERSION/ beside it) and the Nsight
# Systems packages (.deb, .rpm, .run) under /opt/nvidia.
SEARCH_DIRS = (
    "/usr/local/cuda/bin",
    "/usr/local/cuda/nsight-systems-*/bin",
    "/opt/nvidia/nsight-systems/*/bin",
    "/opt/nvidia/nsight-systems-cli/*/bin",
)
INSTALL_HINT = (
    "install Nsight Systems (https://developer.nvidia.com/nsight-systems, or the nsight-systems "
    "package of NVIDIA's CUDA repository) and put its bin directory on PATH, e.g. export "
    "PATH=/opt/nvidia/nsight-systems/VERSION/bin:$PATH (tracing CUDA needs an NVIDIA GPU and "
    "driver); without it, tfaccel profile --trace DIR captures a TensorFlow Profiler trace"
)


class NsysNotFoundError(UsageError):
    """``nsys`` is neither on PATH nor in the usual install directories."""

    def __init__(self, searched: Sequence[str]) -> None:
        self.searched = list(searched)
        super().__init__(
            "Nsight Systems is not installed: there is no nsys to run the profile under",
            expected="the nsys executable of Nsight Systems, on PATH",
            received="no nsys on PATH"
            + (", nor in " + ", ".join(self.searched) if self.searched else ""),
            fix=INSTALL_HINT,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ran": False,
            "reason": self.what,
            "searched": ["PATH", *self.searched],
            "fix": self.fix,
        }


@dataclass
class NsysRun:
    """What :func:`profile` ran and where the report is.

    Attributes:
        command: the ``nsys profile ...`` command line, as run.
        report: the report's path (``.nsys-rep``), written by nsys when the run succeeds.
        report_written: whether that file exists after the run.
        exit_status: nsys's exit status.
        notes: what went wrong, when the report is missing.
    """

    command: list[str]
    report: str
    exit_status: int
    report_written: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ran": True,
            "command": self.command,
            "report": self.report,
            "report_written": self.report_written,
            "exit_status": self.exit_status,
            "notes": self.notes,
        }


def find_nsys(path: str | None = None, search_dirs: Sequence[str] | None = None) -> str | None:
    """The ``nsys`` executable: on ``path`` (default ``$PATH``), else in ``search_dirs``
    (glob patterns, default :data:`SEARCH_DIRS`; of several versions, the newest), else None."""
    found = shutil.which("nsys", path=path)
    if found:
        return found
    for pattern in SEARCH_DIRS if search_dirs is None else search_dirs:
        for directory in sorted(glob.glob(pattern), key=_version_key, reverse=True):
            candidate = os.path.join(directory, "nsys")
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return None


def require_nsys(path: str | None = None, search_dirs: Sequence[str] | None = None) -> str:
    """:func:`find_nsys`, or an error that says what is missing and how to install it.

    Raises:
        NsysNotFoundError: nsys is not there.
    """
    found = find_nsys(path, search_dirs)
    if found is None:
        raise NsysNotFoundError(SEARCH_DIRS if search_dirs is None else search_dirs)
    return found


def command(
    nsys: str, output: str, program: Sequence[str], trace: Sequence[str] = TRACE
) -> list[str]:
    """The ``nsys profile`` command line that runs ``program`` and writes ``output.nsys-rep``."""
    return [
        nsys,
        "profile",
        f"--trace={','.join(trace)}",
        "--output",
        output,
        "--force-overwrite",
        "true",
        *program,
    ]


def profile(
    program: Sequence[str],
    *,
    output_dir: str = ".",
    nsys: str | None = None,
    stdout: IO[str] | None = None,
) -> NsysRun:
    """Run ``program`` under ``nsys profile``; its report goes to ``output_dir``.

    Args:
        program: the command nsys starts (``[sys.executable, "-m", "tfaccel", "profile", ...]``).
        output_dir: the directory of the report (created when missing).
        nsys: the nsys executable (default: :func:`require_nsys`).
        stdout: where nsys's and the program's standard output go (default: this process's).

    Returns:
        The command run, the report's path and nsys's exit status.

    Raises:
        NsysNotFoundError: ``nsys`` is not given and cannot be found.
        UsageError: ``output_dir`` cannot be written.
    """
    check_dir_argument(argument("output_dir"), output_dir, where="tfaccel profile --nsys")
    executable = nsys or require_nsys()
    directory = os.path.abspath(output_dir)
    os.makedirs(directory, exist_ok=True)
    base = os.path.join(directory, time.strftime("tfaccel-%Y%m%d-%H%M%S"))
    argv = command(executable, base, program)
    try:
        status = subprocess.run(argv, stdout=stdout, check=False).returncode
    except OSError as exc:  # found, but not runnable (a broken install, no permission)
        raise UsageError(
            f"{executable!r} could not be started: {exc.strerror or exc}",
            expected="an nsys executable this user can run",
            received=repr(executable),
            fix=INSTALL_HINT,
        ) from None
    report = base + ".nsys-rep"
    run = NsysRun(argv, report, status, os.path.isfile(report))
    if not run.report_written:
        run.notes.append(f"nsys exited with status {status} and wrote no {report}")
    return run


def _version_key(directory: str) -> tuple[int, ...]:
    """``/opt/nvidia/nsight-systems/2024.10.1/bin`` -> (2024, 10, 1): newest first when sorted."""
    return tuple(int(n) for n in re.findall(r"\d+", directory))
