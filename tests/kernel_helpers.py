"""The compiled kernels' resources, shared by tests/kernels/test_kernels_compile.py and
docs/kernels.md's ``python benchmarks/bench_kernels.py --resources`` in tests/test_docs.py
(the session fixture ``kernel_resources`` of tests/conftest.py runs it once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import STARTING_DIR, STARTING_ENVIRON

ROOT = Path(__file__).resolve().parents[1]


def compiler_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment (or ``base``) without the simulator: numba-cuda's real target, its
    compiler."""
    return {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if k != "NUMBA_ENABLE_CUDASIM"
    }


def no_compiler(error: str) -> None:
    pytest.fail(
        f"the kernels cannot be compiled here: {error}\n(the CUDA compiler wheels come with "
        "`pip install 'tfaccel[kernels]'`, which `make test` runs)",
        pytrace=False,
    )


def resources_report() -> dict[str, Any]:
    """``bench_kernels.py --resources --json`` for the default targets: every shipped kernel
    (in the session's starting environment and folder: it may run beside a test)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_kernels.py"), "--resources", "--json"],
        capture_output=True,
        text=True,
        timeout=540,
        env=compiler_env(STARTING_ENVIRON),
        cwd=STARTING_DIR,
    )
    document: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    if "error" in document:
        no_compiler(document["error"])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return document
