"""Capability markers with reasons: `gpu` needs a working NVIDIA GPU, `slow` can be skipped."""

from __future__ import annotations

import functools

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
