"""Capability markers with reasons: `gpu` needs a working NVIDIA GPU, `slurm` a running Slurm
(`sinfo` answers: ci/slurm/up starts one), `slow` can be skipped."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--skip-slow", action="store_true", help="skip tests marked slow")


@functools.lru_cache(maxsize=1)
def _gpu_missing_reason() -> str | None:
    from tfaccel.probe import nvml

    info = nvml.collect()
    if not info.available:
        return f"Requires: an NVIDIA GPU with a working driver (NVML: {info.error})"
    if not info.gpus:
        return "Requires: an NVIDIA GPU (NVML reports none)"
    return None


@functools.lru_cache(maxsize=1)
def _slurm_missing_reason() -> str | None:
    if shutil.which("sinfo") is None:
        return "Requires: Slurm (no sinfo command; ci/slurm/up or `make slurm-up` starts one)"
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Requires: a running Slurm (sinfo: {exc}; `make slurm-up` starts one)"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        return f"Requires: a running Slurm (sinfo: {why}; `make slurm-up` starts one)"
    if not any(state.startswith(("idle", "mix", "alloc")) for state in done.stdout.split()):
        return f"Requires: a Slurm node that is up (sinfo says {done.stdout.split()})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_slow = config.getoption("--skip-slow")
    for item in items:
        if "gpu" in item.keywords:
            reason = _gpu_missing_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
        if "slurm" in item.keywords:
            reason = _slurm_missing_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
        if skip_slow and "slow" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="slow test: run without --skip-slow"))


@pytest.fixture(autouse=True)
def _keep_tensorflow_log_level() -> Iterator[None]:
    """A command run in-process sets ``TF_CPP_MIN_LOG_LEVEL`` for the rest of its process (it
    quiets TensorFlow, as a user's own run would); the next test starts from the level it had."""
    before = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    yield
    if before is None:
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    else:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = before


@pytest.fixture(scope="session")
def smoke_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of one ``tfaccel report --smoke`` (report_helpers.write_smoke_report), run
    once for the tests that read a report: tests/report/test_report_browser.py and README.md's
    ``make run`` in tests/test_docs.py."""
    from report_helpers import write_smoke_report

    return write_smoke_report(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="session")
def kernel_resources() -> dict[str, Any]:
    """``benchmarks/bench_kernels.py --resources --json`` (every shipped kernel compiled for
    every default target, kernel_helpers.resources_report), run once for
    tests/kernels/test_kernels_compile.py and docs/kernels.md's ``bench_kernels.py
    --resources`` in tests/test_docs.py."""
    from kernel_helpers import resources_report

    return resources_report()


@pytest.fixture(scope="session", autouse=True)
def _docs_jobs_ahead(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """tests/test_docs.py's subprocess jobs (its ``Jobs``), started with the session one at a
    time: most of the suite runs one process at a time and leaves a core idle, on which the
    documents' commands run long before their tests ask for them. None when no test of
    tests/test_docs.py is selected."""
    docs = next(
        (
            module
            for item in request.session.items
            if (module := getattr(item, "module", None)) is not None
            and module.__name__ == "test_docs"
        ),
        None,
    )
    if docs is None:
        yield None
        return
    pool = docs.start_ahead(request.session, tmp_path_factory.mktemp("docs"))
    yield pool
    pool.close()
