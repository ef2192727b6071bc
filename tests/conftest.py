"""Capability markers with reasons: `gpu` needs a working NVIDIA GPU, `slurm` a running Slurm
(`sinfo` answers: ci/slurm/up starts one), `slow` can be skipped."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import resources_report


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
def kernel_resources(_ahead: Ahead) -> dict[str, Any]:
    """``benchmarks/bench_kernels.py --resources --json`` (every shipped kernel compiled for
    every default target, kernel_helpers.resources_report), run once (ahead: :class:`Ahead`)
    for tests/kernels/test_kernels_compile.py and docs/kernels.md's ``bench_kernels.py
    --resources`` in tests/test_docs.py."""
    result: dict[str, Any] = _ahead.run(resources_report)
    return result


class Ahead:
    """Expensive runs in subprocesses that tests ask for later, started with the session one at
    a time in a thread of their own: most of the suite runs one process at a time and leaves a
    core idle. A run asked for before its turn is taken off the queue and runs in the asking
    test; one under way is waited for. Each run is one function of nothing, its result shared."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: list[tuple[str, Callable[[], Any]]] = []
        self.futures: dict[str, Future[Any]] = {}

    def add(self, key: str, fn: Callable[[], Any]) -> None:
        with self.lock:
            if key not in self.futures and all(k != key for k, _ in self.queue):
                self.queue.append((key, fn))

    def drop(self, prefix: str) -> None:
        """Take the queued runs whose key starts with ``prefix`` off the queue."""
        with self.lock:
            self.queue = [(k, fn) for k, fn in self.queue if not k.startswith(prefix)]

    def start(self) -> None:
        threading.Thread(target=self._one_at_a_time, name="ahead", daemon=True).start()

    def stop(self) -> None:
        with self.lock:
            self.queue.clear()

    def run(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, run ahead when it was queued (under :func:`ahead_key`)."""
        return self.result(ahead_key(fn), fn)

    def result(self, key: str, fn: Callable[[], Any]) -> Any:
        with self.lock:
            future = self.futures.get(key)
            here = future is None
            if future is None:
                self.queue = [(k, f) for k, f in self.queue if k != key]
                future = self.futures[key] = Future()
        if here:
            _settle(future, fn)
        return future.result()

    def _one_at_a_time(self) -> None:
        while True:
            with self.lock:
                if not self.queue:
                    return
                key, fn = self.queue.pop(0)
                future = self.futures[key] = Future()
            _settle(future, fn)


def _settle(future: Future[Any], fn: Callable[[], Any]) -> None:
    try:
        future.set_result(fn())
    except BaseException as exc:  # pytest.fail's too: raised again in the test that asks
        future.set_exception(exc)


def ahead_key(fn: Callable[[], Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


@pytest.fixture(scope="session", autouse=True)
def _ahead(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ahead]:
    """The session's :class:`Ahead`: the runs of the fixtures the selected tests ask for that
    have one (``AHEAD`` of this file and of a test module: fixture name -> its run) and
    tests/test_docs.py's jobs (its ``Jobs``: two at a time from that module's first test on),
    in the order the tests come."""
    ahead = Ahead()
    docs = None
    for item in request.session.items:
        module = getattr(item, "module", None)
        if docs is None and module is not None and module.__name__ == "test_docs":
            docs = module
            docs.start_ahead(request.session, tmp_path_factory.mktemp("docs"), ahead)
        runs = {**AHEAD, **getattr(module, "AHEAD", {})}
        for name in getattr(item, "fixturenames", ()):
            if name in runs:
                ahead.add(ahead_key(runs[name]), runs[name])
    ahead.start()
    yield ahead
    ahead.stop()
    if docs is not None:
        docs.close_ahead()


AHEAD: dict[str, Callable[[], Any]] = {"kernel_resources": resources_report}
