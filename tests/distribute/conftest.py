"""Fixtures shared by the launcher's tests: ``worker``, the module's WORKER script.

A test module that launches plain Python workers defines WORKER (the script's source) and asks
for ``worker``; other shared helpers are in tests/distribute/launch_helpers.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from launch_helpers import write_script


@pytest.fixture
def worker(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The requesting module's WORKER, dedented, as tmp_path/worker.py."""
    return write_script(tmp_path / "worker.py", request.module.WORKER)
