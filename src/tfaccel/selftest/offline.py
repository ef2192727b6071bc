"""``tfaccel selftest --gpu --offline``: the GPU checks that need no TensorFlow and no network.

Run from a source tree with the packages a node already has
(``PYTHONPATH=src python3 -m tfaccel selftest --gpu --offline``): it finds what is importable
(numba + numba-cuda, CuPy, PyTorch, nvtx, pynvml, pytest, TensorFlow: each imported in a child
process) and which tools exist (nvidia-smi, compute-sanitizer, ncu), runs every step that can
run here and skips the rest with the reason. Each step is ``python -m tfaccel.selftest.offline_steps
STEP`` (or a tfaccel command), its own process under :func:`tfaccel.selftest.runner.run_steps`,
and prints one JSON object that summary.json keeps.

``--simulate`` rehearses it without a GPU: the kernel step runs on numba-cuda's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) and checks against NumPy; the steps that need the real GPU are
skipped, each saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tfaccel.selftest.runner import Step

__all__ = ["STEPS_MODULE", "TENSORFLOW_STEPS", "discover", "plan_offline_steps"]

STEPS_MODULE = "tfaccel.selftest.offline_steps"
TENSORFLOW_STEPS = (
    "setup in each GPU mode, devices --tf, doctor --deep, bench models, profile, tune"
)
REAL_GPU = "needs the real GPU (--simulate runs only the kernels, on the CUDA simulator)"
SIMULATOR_ENV = (("NUMBA_ENABLE_CUDASIM", "1"),)


def discover(python: str | None = None, timeout_s: float = 180.0) -> dict[str, Any]:
    """What the interpreter ``python`` can import and which tools exist (the ``discover``
    step, run as a child process: nothing is imported here)."""
    py = python or sys.executable
    try:
        done = subprocess.run(
            [py, "-m", STEPS_MODULE, "discover"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        doc = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return {"modules": {}, "tools": {}, "error": f"{type(exc).__name__}: {exc}"}
    return doc if isinstance(doc, dict) else {"modules": {}, "tools": {}}


def _pythonpath() -> tuple[tuple[str, str], ...]:
    """PYTHONPATH for the steps, which run in the self-test's directory: this tfaccel's
    folder first, then each entry the caller gave (``PYTHONPATH=src``) made absolute."""
    import tfaccel

    entries = [str(Path(tfaccel.__file__).resolve().parent.parent)]
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.abspath(entry) not in entries:
            entries.append(os.path.abspath(entry))
    return (("PYTHONPATH", os.pathsep.join(entries)),)


def _have(found: dict[str, Any], module: str) -> bool:
    return bool(found.get("modules", {}).get(module, {}).get("ok"))


def _why_not(found: dict[str, Any], module: str, install: str) -> str:
    error = found.get("modules", {}).get(module, {}).get("error") or "not importable"
    return f"{module} cannot be imported ({error}): {install}"


def plan_offline_steps(
    found: dict[str, Any],
    *,
    gpu: bool,
    simulate: bool = False,
    python: str | None = None,
    root: Path | None = None,
) -> list[Step]:
    """The offline self-test's steps, in order; those that cannot run here carry the reason.

    Args:
        found: what :func:`discover` found.
        gpu: whether NVML sees a GPU to test.
        simulate: rehearse: the kernels on the CUDA simulator, the GPU steps skipped.
        python: the interpreter (default: this one).
        root: the source tree whose ``tests/`` the gpu tests come from (None: none).
    """
    py = python or sys.executable
    path = _pythonpath()
    tools = found.get("tools", {})
    real = None if gpu and not simulate else REAL_GPU
    numba = None
    if not (_have(found, "numba") and _have(found, "numba_cuda")):
        missing = "numba" if not _have(found, "numba") else "numba_cuda"
        numba = _why_not(found, missing, "pip install numba-cuda (or 'tfaccel[kernels]')")

    def step(
        name: str, args: tuple[str, ...], what: str, timeout: float, skip: str | None, **kwargs: Any
    ) -> Step:
        env = path + tuple(kwargs.pop("env", ()))
        return Step(
            name,
            (py, "-m", STEPS_MODULE, *args),
            what,
            timeout,
            skip=skip,
            keeps_result=True,
            env=env,
            **kwargs,
        )

    def first(*reasons: str | None) -> str | None:
        return next((r for r in reasons if r is not None), None)

    smi = None if tools.get("nvidia-smi") else "nvidia-smi not found (it comes with the driver)"
    load_with = None
    if not (_have(found, "cupy") or numba is None):
        load_with = "neither CuPy nor numba-cuda can be imported to make a GPU load"
    nvml = None if _have(found, "pynvml") else _why_not(found, "pynvml", "pip install nvidia-ml-py")
    steps = [
        step(
            "devices",
            ("devices", "--json"),
            "tfaccel devices --json against nvidia-smi's own figures",
            90,
            first(real, smi),
        ),
        step(
            "load",
            ("load", "--json"),
            "NVML utilisation and GPM rise above idle under a load made here",
            90,
            first(real, nvml, load_with),
        ),
        step(
            "doctor",
            ("tfaccel", "doctor", "--json"),
            "tfaccel doctor --json: exit 0 or 1, one JSON document, no traceback",
            120,
            None,
        ),
        step(
            "doctor-preflight",
            ("tfaccel", "doctor", "--preflight", "--json"),
            "tfaccel doctor --preflight --json: exit 0 or 1, one JSON document, no traceback",
            120,
            None,
        ),
        step(
            "kernels",
            ("kernels", "--json"),
            "tfaccel.kernels against NumPy; vector_add against a device copy, the tiled "
            "matmul against cuBLAS (CuPy)",
            180,
            numba,
            env=SIMULATOR_ENV if simulate else (),
        ),
        step(
            "sanitizer",
            ("sanitizer", "--json"),
            "compute-sanitizer memcheck over each kernel: 0 errors",
            300,
            first(
                real,
                numba,
                None
                if tools.get("compute-sanitizer")
                else "compute-sanitizer not found (it comes with the CUDA toolkit)",
            ),
        ),
        step(
            "ncu-matmul",
            ("ncu", "--json"),
            "Nsight Compute's SM and DRAM throughput of the tiled matmul",
            240,
            first(
                real,
                numba,
                None
                if tools.get("ncu")
                else "ncu not found (Nsight Compute comes with the CUDA toolkit)",
            ),
        ),
        step(
            "nvtx",
            ("nvtx", "--json"),
            "NVTX ranges through the nvtx module",
            60,
            None if _have(found, "nvtx") else _why_not(found, "nvtx", "pip install nvtx"),
        ),
        step(
            "plan-gpu",
            ("plan-gpu", "--json"),
            "what a plan assumes of a GPU (datasheet rates, utilisation, per-op cost, cuDNN "
            "workspace) against this one, through PyTorch or CuPy",
            180,
            first(
                real,
                None
                if _have(found, "torch") or _have(found, "cupy")
                else "neither PyTorch nor CuPy can be imported to measure cuBLAS and cuDNN: "
                "pip install torch (cuBLAS and cuDNN) or cupy-cuda12x (cuBLAS only)",
            ),
        ),
    ]
    tests = root / "tests" / "kernels" if root is not None else None
    tests_skip = first(
        real,
        None
        if tests is not None and tests.is_dir()
        else "no tests/ folder: the gpu tests come with the source tree",
        None if _have(found, "pytest") else _why_not(found, "pytest", "pip install pytest"),
        numba,
    )
    steps.append(
        Step(
            "gpu-tests",
            (
                py,
                "-m",
                "pytest",
                "-m",
                "gpu",
                "-q",
                "-rs",
                "-p",
                "no:cacheprovider",
                "tests/kernels",
            ),
            "the tests marked gpu that need no TensorFlow (tests/kernels)",
            240,
            cwd=str(root) if root is not None else None,
            skip=tests_skip,
            env=path,
            skipped_if=r"^(?P<reason>\d+ skipped(?:, \d+ (?:deselected|warnings?))* in .*)$",
        )
    )
    if _have(found, "tensorflow"):
        why = (
            f"TensorFlow is installed: its steps ({TENSORFLOW_STEPS}) run with "
            "tfaccel selftest --gpu, without --offline"
        )
    else:
        why = f"TensorFlow is not installed: {TENSORFLOW_STEPS} skipped"
    steps.append(Step("tensorflow", (), "the steps that need TensorFlow", 0, skip=why))
    return steps
