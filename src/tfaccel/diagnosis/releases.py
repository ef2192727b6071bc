"""TensorFlow's releases and what their pip wheels need: the one table, ``tf_releases.json``.

Each row is one minor release: the CUDA and cuDNN it was built with, the Python versions and
platforms PyPI has wheels for, the glibc its Linux wheels need (their manylinux tag), the CUDA
targets its kernels were compiled for, and how much ``pip install 'tensorflow[and-cuda]'``
downloads. The file names its sources and the fields that could not be checked. The doctor's
``--preflight`` reads it; nothing here touches the machine or imports TensorFlow.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from tfaccel.core.errors import UsageError

__all__ = ["Release", "newest_tested", "release", "releases", "sources"]

_FILE = "tf_releases.json"


@dataclass(frozen=True)
class Release:
    """One TensorFlow minor release, as its pip wheels are (a row of ``tf_releases.json``)."""

    version: str  # "2.21"
    latest: str  # its newest patch on PyPI, "2.21.0"
    cuda: str  # the CUDA of its tested Linux GPU build, "12.5"
    cudnn: str  # "9.3"
    python: tuple[str, str]  # oldest and newest CPython with a wheel, ("3.10", "3.13")
    cuda_targets: tuple[str, ...]  # ("sm_60", ..., "compute_90")
    manylinux: str  # the glibc its Linux wheels need, "2.27"
    linux: tuple[str, ...]  # architectures with Linux wheels (only x86_64 is a CUDA build)
    windows: bool  # a win_amd64 wheel exists (CPU only after 2.10)
    macos: dict[str, str]  # architecture -> oldest macOS of its wheel (no CUDA on macOS)
    and_cuda: bool  # the wheel has the [and-cuda] extra (the nvidia-* wheels)
    tf_wheel_mb: int  # the Linux x86_64 wheel, MB
    cuda_wheels_mb: int | None  # the nvidia-* wheels of [and-cuda], MB; None: not measured
    unchecked: tuple[str, ...]  # the fields that could not be checked against a source

    @property
    def key(self) -> tuple[int, int]:
        major, minor = self.version.split(".")
        return int(major), int(minor)

    def python_range(self) -> str:
        return f"{self.python[0]} to {self.python[1]}"

    def python_tags(self) -> str:
        """``cp310-cp313``."""
        return "-".join("cp" + v.replace(".", "") for v in self.python)


def _row(data: dict[str, Any]) -> Release:
    return Release(
        version=data["version"],
        latest=data["latest"],
        cuda=data["cuda"],
        cudnn=data["cudnn"],
        python=(data["python"][0], data["python"][1]),
        cuda_targets=tuple(data["cuda_targets"]),
        manylinux=data["manylinux"],
        linux=tuple(data["linux"]),
        windows=bool(data["windows"]),
        macos=dict(data["macos"]),
        and_cuda=bool(data["and_cuda"]),
        tf_wheel_mb=int(data["tf_wheel_mb"]),
        cuda_wheels_mb=data["cuda_wheels_mb"],
        unchecked=tuple(data["unchecked"]),
    )


@cache
def _table() -> dict[str, Any]:
    text = resources.files("tfaccel.diagnosis").joinpath(_FILE).read_text("utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


@cache
def releases() -> tuple[Release, ...]:
    """Every release of the table, newest first."""
    rows = [_row(r) for r in _table()["releases"]]
    return tuple(sorted(rows, key=lambda r: r.key, reverse=True))


def sources() -> dict[str, str]:
    """Where each field of the table comes from."""
    return dict(_table()["sources"])


def newest_tested() -> Release:
    """The newest release tfaccel is tested with (the default of ``--preflight``)."""
    return release(_table()["newest_tested"])


def release(version: str, *, argument: str = "--tensorflow") -> Release:
    """The row of ``version`` (``2.21``, ``2.21.0``, ``2.21.*``).

    Raises:
        UsageError: not a version, or a release the table does not hold.
    """
    known = ", ".join(r.version for r in releases())
    text = version.strip() if isinstance(version, str) else ""
    match = re.fullmatch(r"v?(\d{1,3})\.(\d{1,3})(?:\.(?:\d{1,4}|\*))?", text)
    if match is None:
        raise UsageError(
            f"{argument} takes a TensorFlow release, and {version!r} is not one",
            expected=f"a release as MAJOR.MINOR or MAJOR.MINOR.PATCH, one of {known}",
            received=f"{argument} {version!r}",
            fix=f"e.g. {argument} {newest_tested().version}",
        )
    minor = f"{int(match[1])}.{int(match[2])}"
    for row in releases():
        if row.version == minor:
            return row
    raise UsageError(
        f"TensorFlow {minor} is not in tfaccel's table of releases",
        expected=f"one of {known}",
        received=f"{argument} {version}",
        fix=f"pick one of those (the newest tested is {newest_tested().version})",
    )
