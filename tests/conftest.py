"""Capability markers with reasons: `gpu` needs a working NVIDIA GPU, `slow` can be skipped."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_slow = config.getoption("--skip-slow")
    for item in items:
        if "gpu" in item.keywords:
            reason = _gpu_missing_reason()
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
