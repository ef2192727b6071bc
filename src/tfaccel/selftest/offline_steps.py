"""The steps of ``tfaccel selftest --gpu --offline``, each run as its own process:
``python -m tfaccel.selftest.offline_steps STEP``.

Every step prints one JSON object on a line of its own (``{"step": ..., "status": ...}``, with
what it read and checked), the runner keeps it in summary.json; a step that failed then prints
``failed: <the reason>`` as its last line and exits 1. None of them imports TensorFlow.

The steps: ``discover`` (what is importable), ``devices`` (``tfaccel devices --json`` against
nvidia-smi's own figures), ``load`` (NVML utilisation and GPM under a load made here),
``tfaccel ARGS...`` (a command's exit status and JSON, no traceback), ``kernels``
(tfaccel.kernels against NumPy, the copy bandwidth and cuBLAS), ``run-kernels`` (each kernel
once: what compute-sanitizer and Nsight Compute watch), ``sanitizer``, ``ncu``, ``nvtx``,
``plan-gpu`` (what a plan assumes of a GPU, measured: :mod:`tfaccel.selftest.gpu_constants`).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from tfaccel.selftest.runner import last_json_line

__all__ = ["MODULES", "TOOLS", "find_tool", "main"]

MODULES = (
    "numpy",
    "numba",
    "numba_cuda",
    "cupy",
    "torch",
    "nvtx",
    "pynvml",
    "pytest",
    "tensorflow",
)
"""The Python modules the offline self-test looks for (``discover`` imports each)."""
TOOLS = ("nvidia-smi", "compute-sanitizer", "ncu")
"""The programs it looks for, on PATH and in the CUDA toolkit's bin folder."""
CUDA_BIN = ("/usr/local/cuda/bin",)
NCU_METRICS = (
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
SMI_FIELDS = "name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,compute_cap"
# What the host pays for a kernel launch + synchronise, and then some: below it a timing of
# one kernel says nothing about the GPU.
_LOAD_S = 4.0


def find_tool(name: str) -> str | None:
    """Where the program ``name`` is: on PATH, else in the CUDA toolkit's bin folder."""
    found = shutil.which(name)
    if found is not None:
        return found
    for folder in CUDA_BIN:
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _emit(doc: dict[str, Any]) -> int:
    """Print the step's JSON line (and, when it failed, the reason as the last line)."""
    sys.stdout.write(json.dumps(doc, default=str, allow_nan=False) + "\n")
    if doc.get("status") == "failed":
        sys.stdout.write(f"failed: {doc.get('reason') or 'see the checks above'}\n")
    sys.stdout.flush()
    return 1 if doc.get("status") == "failed" else 0


def _verdict(step: str, checks: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """passed when every check is ok; else failed, the reason naming the checks that were not."""
    bad = [c for c in checks if not c.get("ok")]
    doc: dict[str, Any] = {"step": step, "status": "failed" if bad else "passed"}
    if bad:
        doc["reason"] = "; ".join(
            f"{c['what']}: expected {c.get('expected')!s}, received {c.get('received')!s}"
            for c in bad
        )
    doc["checks"] = checks
    doc.update(extra)
    return doc


def _check(what: str, expected: Any, received: Any, ok: bool | None = None) -> dict[str, Any]:
    return {
        "what": what,
        "expected": expected,
        "received": received,
        "ok": (expected == received) if ok is None else bool(ok),
    }


def _python_tfaccel(*args: str) -> list[str]:
    return [sys.executable, "-m", "tfaccel", *args]


# --- discover ---------------------------------------------------------------------------------


def discover() -> dict[str, Any]:
    """What is importable here (each module imported, TensorFlow in a process of its own) and
    which tools exist."""
    import importlib.metadata
    import importlib.util

    modules: dict[str, dict[str, Any]] = {}
    for name in MODULES:
        if name in ("tensorflow", "torch"):  # large, and native: a crash stays in the child
            modules[name] = _import_in_child(name)
            continue
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            modules[name] = {"ok": False, "error": _one_line(f"{type(exc).__name__}: {exc}")}
            continue
        version = getattr(module, "__version__", None)
        if version is None:
            dist = {"numba_cuda": "numba-cuda", "pynvml": "nvidia-ml-py"}.get(name, name)
            try:
                version = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                version = None
        modules[name] = {"ok": True, "version": str(version) if version else None}
    tools = {name: find_tool(name) for name in TOOLS}
    return {
        "step": "discover",
        "status": "passed",
        "python": sys.executable,
        "modules": modules,
        "tools": tools,
    }


def _import_in_child(name: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """Import ``name`` in a child process (TensorFlow: never in this one)."""
    import importlib.util

    try:
        if importlib.util.find_spec(name) is None:
            return {"ok": False, "error": f"No module named '{name}'"}
    except (ImportError, ValueError) as exc:
        return {"ok": False, "error": _one_line(f"{type(exc).__name__}: {exc}")}
    code = f"import {name} as m; print(getattr(m, '__version__', ''))"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"import {name} took over {timeout_s:g} s"}
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        return {"ok": False, "error": _one_line(lines[-1] if lines else f"exit {done.returncode}")}
    return {"ok": True, "version": done.stdout.strip().splitlines()[-1] or None}


# --- devices ----------------------------------------------------------------------------------


def _nvidia_smi(*args: str, timeout_s: float = 30.0) -> str:
    smi = find_tool("nvidia-smi")
    if smi is None:
        raise RuntimeError("nvidia-smi is not installed")
    done = subprocess.run([smi, *args], capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(_one_line(f"nvidia-smi exit {done.returncode}: {done.stderr}"))
    return done.stdout


def _number(text: str) -> float | int | None:
    try:
        value = float(text)
    except ValueError:
        return None  # "[N/A]"
    return int(value) if value.is_integer() else value


def devices_step() -> dict[str, Any]:
    """``tfaccel devices --json`` against nvidia-smi's own figures, GPU by GPU."""
    done = subprocess.run(
        _python_tfaccel("devices", "--json"), capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0 or "Traceback" in done.stderr:
        return {
            "step": "devices",
            "status": "failed",
            "reason": _one_line(f"tfaccel devices --json exit {done.returncode}: {done.stderr}"),
        }
    doc = json.loads(done.stdout)
    rows = list(
        csv.reader(
            io.StringIO(_nvidia_smi(f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits")),
            skipinitialspace=True,
        )
    )
    header = _nvidia_smi()
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", header)
    checks: list[dict[str, Any]] = []
    gpus = doc.get("gpus") or []
    checks.append(_check("number of GPUs", len(rows), len(gpus)))
    for row, gpu in zip(rows, gpus, strict=False):
        info = gpu.get("info", {})
        name, memory, driver, sm_clock, mem_clock, cc = (c.strip() for c in row[:6])
        index = info.get("index")
        total = info.get("memory_total_bytes")
        checks += [
            _check(f"GPU {index} name", name, info.get("name")),
            _check(
                f"GPU {index} memory total (MiB)",
                _number(memory),
                total // 2**20 if isinstance(total, int) else None,
                ok=isinstance(total, int) and _number(memory) == total // 2**20,
            ),
            _check(
                f"GPU {index} max SM clock (MHz)",
                _number(sm_clock),
                info.get("sm_clock_max_mhz"),
                ok=_number(sm_clock) == info.get("sm_clock_max_mhz"),
            ),
            _check(
                f"GPU {index} max memory clock (MHz)",
                _number(mem_clock),
                info.get("memory_clock_max_mhz"),
                ok=_number(mem_clock) == info.get("memory_clock_max_mhz"),
            ),
            _check(f"GPU {index} compute capability", cc, info.get("compute_capability")),
        ]
        checks.append(_check("driver version", driver, doc.get("driver_version")))
    checks.append(
        _check(
            "CUDA version (nvidia-smi's header)",
            cuda.group(1) if cuda else None,
            doc.get("cuda_driver_version"),
        )
    )
    return _verdict("devices", checks)


# --- a load, and the utilisation NVML reads under it ------------------------------------------


def _load_generator() -> tuple[str, Callable[[], None], int | None]:
    """A few milliseconds of GPU work per call, from CuPy or numba-cuda, and the number of
    multiprocessors (from the CUDA device attributes: NVML does not give it)."""
    try:
        import cupy

        device = cupy.cuda.Device(0)
        sms = int(device.attributes["MultiProcessorCount"])
        a = cupy.random.random((4096, 4096), dtype=cupy.float32)

        def cupy_step() -> None:
            for _ in range(4):
                a @ a
            cupy.cuda.Device(0).synchronize()

        cupy_step()
        return "cupy matmul 4096x4096", cupy_step, sms
    except Exception as exc:  # no CuPy, or it cannot run here: numba-cuda then
        cupy_error = _one_line(f"{type(exc).__name__}: {exc}")
    import numpy as np
    from numba import cuda as numba_cuda

    from tfaccel.kernels._compat import restore_numpy_aliases

    restore_numpy_aliases()  # the spin kernel below compiles with numba-cuda too
    cuda: Any = numba_cuda  # typed as Any, as tfaccel.kernels.cuda does

    @cuda.jit
    def spin(out: Any, rounds: int) -> None:  # pragma: no cover - runs on the GPU
        i = cuda.grid(1)
        x = np.float32(i)
        for _ in range(rounds):
            x = x * np.float32(0.999999) + np.float32(0.5)
        if i < out.shape[0]:
            out[i] = x

    device = cuda.get_current_device()
    sms = int(device.MULTIPROCESSOR_COUNT)
    blocks = sms * 8
    out = cuda.device_array(blocks * 256, dtype=np.float32)

    def numba_step() -> None:
        spin[blocks, 256](out, 200_000)
        cuda.synchronize()

    numba_step()
    return f"numba-cuda arithmetic loop (CuPy: {cupy_error})", numba_step, sms


def load_step(seconds: float = _LOAD_S) -> dict[str, Any]:
    """NVML's utilisation (and GPM where the GPU has it) when idle, then under a load."""
    from tfaccel.probe import nvml

    try:
        what, step, sms = _load_generator()
    except Exception as exc:
        return {
            "step": "load",
            "status": "failed",
            "reason": _one_line(f"cannot make a GPU load: {type(exc).__name__}: {exc}"),
        }
    sampler = nvml.open_sampler([0])
    if isinstance(sampler, str):
        return {"step": "load", "status": "failed", "reason": f"NVML: {sampler}"}
    try:
        time.sleep(1.5)  # the warm-up leaves NVML's utilisation window (up to 1 s) first
        idle = _samples(sampler, 1.5, None)
        busy = _samples(sampler, seconds, step)
        notes = dict(sampler.gpm_notes)
    finally:
        sampler.close()

    def util(samples: list[Any]) -> list[int]:
        return [s.utilization_gpu_percent for s in samples if s.utilization_gpu_percent is not None]

    def sm_activity(samples: list[Any]) -> list[float]:
        return [
            s.gpm.sm_activity_percent
            for s in samples
            if s.gpm is not None and s.gpm.sm_activity_percent is not None
        ]

    idle_util, busy_util = util(idle), util(busy)
    idle_level = statistics.median(idle_util) if idle_util else 0
    busy_top = max(busy_util, default=None)
    checks = [
        _check(
            "utilization.gpu under load (max %)",
            f"> idle median {idle_level:g} + 10, and >= 30",
            busy_top,
            ok=busy_top is not None and busy_top > idle_level + 10 and busy_top >= 30,
        )
    ]
    busy_sm, idle_sm = sm_activity(busy), sm_activity(idle)
    if busy_sm:
        checks.append(
            _check(
                "GPM SM activity under load (max %)",
                f"> idle median {statistics.median(idle_sm) if idle_sm else 0:.1f}",
                round(max(busy_sm), 1),
                ok=max(busy_sm) > (statistics.median(idle_sm) if idle_sm else 0.0),
            )
        )
    return _verdict(
        "load",
        checks,
        load=what,
        multiprocessors=sms,
        idle_utilization=idle_util,
        busy_utilization=busy_util,
        idle_sm_activity=[round(v, 1) for v in idle_sm],
        busy_sm_activity=[round(v, 1) for v in busy_sm],
        gpm_notes={str(k): v for k, v in notes.items()},
    )


def _samples(sampler: Any, seconds: float, work: Callable[[], None] | None) -> list[Any]:
    out: list[Any] = []
    end = time.monotonic() + seconds
    last = 0.0
    while time.monotonic() < end:
        if work is not None:
            work()
        else:
            time.sleep(0.05)
        if time.monotonic() - last >= 0.25:
            out += sampler.sample()
            last = time.monotonic()
    return out


# --- a tfaccel command ------------------------------------------------------------------------


def command_step(args: Sequence[str], ok_codes: Sequence[int] = (0, 1)) -> dict[str, Any]:
    """``tfaccel ARGS``: its exit status documented, one JSON document on stdout, no traceback."""
    name = "tfaccel " + " ".join(args)
    # under the step's own timeout (120 s), so a hang is reported with this step's figures
    done = subprocess.run(_python_tfaccel(*args), capture_output=True, text=True, timeout=110)
    unknown = re.search(r"unrecognized arguments: (.+)", done.stderr)
    if done.returncode == 2 and unknown:
        return {
            "step": name,
            "status": "skipped",
            "reason": f"this tfaccel has no {unknown.group(1).strip()} (a later version adds it)",
        }
    checks = [
        _check(
            "exit status",
            f"one of {list(ok_codes)}",
            done.returncode,
            ok=done.returncode in ok_codes,
        ),
        _check("no traceback", "none", "Traceback" if "Traceback" in done.stderr else "none"),
    ]
    try:
        doc = json.loads(done.stdout)
        parsed = type(doc).__name__
    except ValueError as exc:
        doc, parsed = None, _one_line(f"not JSON: {exc}")
    checks.append(_check("stdout is one JSON document", "dict", parsed))
    summary: dict[str, Any] = {"exit_code": done.returncode}
    if isinstance(doc, dict):
        findings = doc.get("findings")
        if isinstance(findings, list):
            summary["findings"] = {
                str(f.get("status")): sum(g.get("status") == f.get("status") for g in findings)
                for f in findings
                if isinstance(f, dict)
            }
            summary["failed_findings"] = [
                f.get("id") for f in findings if isinstance(f, dict) and f.get("status") == "fail"
            ]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if lines:
        summary["stderr_tail"] = [_one_line(line) for line in lines[-5:]]
    return _verdict(name, checks, **summary)


# --- the kernels --------------------------------------------------------------------------------


def _median_s(run: Callable[[], None], synchronize: Callable[[], None], repeats: int) -> float:
    run()
    synchronize()  # warm-up: compile, allocate
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def kernels_step(only: str | None = None, small: bool = False) -> dict[str, Any]:
    """Each kernel against its NumPy reference; on a GPU also vector_add's bandwidth against a
    device-to-device copy, and the tiled matmuls (one output per thread, and 8x8 per thread)
    against cuBLAS (CuPy) as ratios."""
    import numpy as np

    from tfaccel import kernels
    from tfaccel.kernels import reference

    step = "run-kernels" if small else "kernels"
    backend = kernels.backend()
    if backend == "none":
        reason = kernels.unavailable_reason() or "no backend"
        return {"step": step, "status": "failed", "reason": _one_line(reason)}
    simulator = backend == "simulator"
    tiny = simulator or small
    rng = np.random.default_rng(0)
    cases: dict[str, Callable[[], tuple[Any, Any, float]]] = {}

    def vector_add() -> tuple[Any, Any, float]:
        n = 256 if simulator else 4096 if small else 1 << 22
        a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        return kernels.vector_add(a, b), reference.vector_add(a, b), 0.0

    def matmul() -> tuple[Any, Any, float]:
        m, k, n = (33, 17, 9) if simulator else (512, 384, 256)
        a = rng.random((m, k), dtype=np.float32)
        b = rng.random((k, n), dtype=np.float32)
        return kernels.matmul(a, b, tile=8 if simulator else 16), reference.matmul(a, b), 1e-4

    def reduce_sum() -> tuple[Any, Any, float]:
        x = rng.random(300 if simulator else 5000 if small else 1 << 22).astype(np.float64)
        return kernels.reduce_sum(x), reference.reduce_sum(x), 1e-9

    def bias_relu() -> tuple[Any, Any, float]:
        shape = (20, 13) if tiny else (1024, 1000)
        x = np.asarray(rng.standard_normal(shape), dtype=np.float32)
        bias = np.asarray(rng.standard_normal(shape[1]), dtype=np.float32)
        return kernels.bias_relu(x, bias), reference.bias_relu(x, bias), 0.0

    cases = {
        "vector_add": vector_add,
        "matmul": matmul,
        "reduce_sum": reduce_sum,
        "bias_relu": bias_relu,
    }
    results: dict[str, Any] = {}
    failures: list[str] = []
    for name, case in cases.items():
        if only is not None and name != only:
            continue
        try:
            got, want, rtol = case()
        except kernels.KernelBackendError as exc:
            reason = _one_line(f"{exc.what}: {exc.received}; fix: {exc.fix}")
            results[name] = {"status": "failed", "reason": reason}
            failures.append(f"{name}: {reason}")
            continue
        except Exception as exc:
            reason = _one_line(f"{type(exc).__name__}: {exc}")
            results[name] = {"status": "failed", "reason": reason}
            failures.append(f"{name}: {reason}")
            continue
        same = (
            bool(np.allclose(got, want, rtol=rtol, atol=rtol))
            if rtol
            else bool(np.array_equal(got, want))
        )
        error = float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))
        results[name] = {"status": "passed" if same else "failed", "max_abs_error": error}
        if not same:
            failures.append(f"{name}: differs from NumPy by up to {error:g}")
    doc: dict[str, Any] = {"step": step, "backend": backend, "kernels": results}
    if not simulator and not small and not failures and only is None:
        try:
            doc["performance"] = _performance()
        except Exception as exc:  # the kernels' results above are kept
            import traceback

            traceback.print_exc()
            failures.append(f"performance: {_one_line(f'{type(exc).__name__}: {exc}')}")
    elif simulator:
        doc["performance"] = "not measured: the CUDA simulator runs Python, not a GPU"
    doc["status"] = "failed" if failures else "passed"
    if failures:
        # one line: the same reason for every kernel (a broken compiler) is said once
        distinct = list(dict.fromkeys(f.split(": ", 1)[1] for f in failures))
        names = ", ".join(f.split(": ", 1)[0] for f in failures)
        doc["reason"] = f"{names}: " + " | ".join(distinct)
    doc["numpy"] = np.__version__
    return doc


def _performance() -> dict[str, Any]:
    """vector_add's bandwidth against a device copy's, the tiled matmuls (one output per
    thread, and 8x8 per thread) against cuBLAS."""
    import numpy as np
    from numba import cuda

    from tfaccel import kernels

    out: dict[str, Any] = {}
    device = cuda.get_current_device()
    out["device"] = str(device.name.decode() if isinstance(device.name, bytes) else device.name)
    out["multiprocessors"] = int(device.MULTIPROCESSOR_COUNT)
    sync = cuda.synchronize
    n = 1 << 28  # 1 GiB per float32 operand: the launch's own cost is lost in 3 GiB moved
    a = cuda.to_device(np.ones(n, np.float32))
    b = cuda.to_device(np.ones(n, np.float32))
    c = cuda.device_array(n, np.float32)
    add_s = _median_s(lambda: kernels.vector_add(a, b, out=c), sync, 10)
    copy_s = _median_s(lambda: c.copy_to_device(a), sync, 10)  # device to device
    add_gbs = 3 * n * 4 / add_s / 1e9
    copy_gbs = 2 * n * 4 / copy_s / 1e9
    out["vector_add_gbs"] = round(add_gbs, 1)
    out["copy_gbs"] = round(copy_gbs, 1)
    out["copy_by"] = "numba-cuda device-to-device copy"
    out["vector_add_of_copy"] = round(add_gbs / copy_gbs, 3)
    size = 2048
    x = cuda.to_device(np.random.default_rng(1).random((size, size), dtype=np.float32))
    y = cuda.to_device(np.random.default_rng(2).random((size, size), dtype=np.float32))
    z = cuda.device_array((size, size), np.float32)
    flop = 2.0 * size**3
    tiled_s = _median_s(lambda: kernels.matmul(x, y, 16, out=z), sync, 5)
    out["matmul_size"] = size
    out["matmul_tiled_tflops"] = round(flop / tiled_s / 1e12, 3)
    w = cuda.device_array((size, size), np.float32)
    register_s = _median_s(lambda: kernels.matmul(x, y, 16, per_thread=8, out=w), sync, 5)
    out["matmul_register_tiled_tflops"] = round(flop / register_s / 1e12, 3)
    out["matmul_register_tiled_of_tiled"] = round(tiled_s / register_s, 3)
    try:
        import cupy
    except Exception as exc:
        out["cublas"] = _one_line(f"not compared: CuPy cannot be imported ({exc})")
        return out
    cx, cy = cupy.asarray(x), cupy.asarray(y)
    cublas_s = _median_s(lambda: cupy.matmul(cx, cy), cupy.cuda.Device().synchronize, 5)
    want = cx @ cy
    out["matmul_cublas_tflops"] = round(flop / cublas_s / 1e12, 3)
    out["matmul_tiled_of_cublas"] = round(cublas_s / tiled_s, 3)
    out["matmul_register_tiled_of_cublas"] = round(cublas_s / register_s, 3)
    out["matmul_matches_cublas"] = all(
        bool(cupy.allclose(cupy.asarray(got), want, rtol=1e-3, atol=1e-2)) for got in (z, w)
    )
    return out


# --- the tools ----------------------------------------------------------------------------------


def _kernels_child(*extra: str) -> list[str]:
    return [sys.executable, "-m", "tfaccel.selftest.offline_steps", "run-kernels", *extra]


def sanitizer_step() -> dict[str, Any]:
    """compute-sanitizer's memcheck over one run of each kernel: "ERROR SUMMARY: 0 errors"."""
    tool = find_tool("compute-sanitizer")
    if tool is None:
        return {"step": "sanitizer", "status": "skipped", "reason": "compute-sanitizer not found"}
    done = subprocess.run(
        [tool, "--tool", "memcheck", *_kernels_child()],
        capture_output=True,
        text=True,
        timeout=270,  # under the step's 300 s: the summary then has this step's figures
    )
    text = done.stdout + done.stderr
    summary = re.search(r"ERROR SUMMARY: (\d+) errors?", text)
    inner = last_json_line(done.stdout)
    checks = [
        _check("memcheck's ERROR SUMMARY", 0, int(summary.group(1)) if summary else None),
        _check("the kernels' run", "passed", inner.get("status") if inner else None),
    ]
    extra: dict[str, Any] = {"tool": tool, "exit_code": done.returncode}
    if inner and inner.get("reason"):
        extra["kernels_reason"] = inner["reason"]
    reports = [line for line in text.splitlines() if line.startswith("========= ")]
    extra["sanitizer_lines"] = [_one_line(line) for line in reports[:20]]
    doc = _verdict("sanitizer", checks, **extra)
    if inner and inner.get("status") == "failed":
        doc["reason"] = f"the kernels failed under memcheck: {inner.get('reason')}"
    return doc


def ncu_step() -> dict[str, Any]:
    """Nsight Compute's throughput counters of one tiled-matmul launch."""
    tool = find_tool("ncu")
    if tool is None:
        return {"step": "ncu", "status": "skipped", "reason": "ncu (Nsight Compute) not found"}
    done = subprocess.run(
        [
            tool,
            "--metrics",
            ",".join(NCU_METRICS),
            "--clock-control",
            "none",
            "-k",
            "regex:matmul",
            "--launch-count",
            "1",
            "--csv",
            *_kernels_child("--only", "matmul"),
        ],
        capture_output=True,
        text=True,
        timeout=210,  # under the step's 240 s
    )
    text = done.stdout + done.stderr
    if "ERR_NVGPUCTRPERM" in text:
        return {
            "step": "ncu",
            "status": "skipped",
            "reason": "the driver does not let this user read the GPU's performance counters "
            "(ERR_NVGPUCTRPERM): run as root or set NVreg_RestrictProfilingToAdminUsers=0",
        }
    figures = _ncu_figures(done.stdout)
    inner = last_json_line(done.stdout)
    if inner is not None and inner.get("status") == "failed":
        return {
            "step": "ncu",
            "status": "failed",
            "tool": tool,
            "reason": f"the matmul failed under ncu: {inner.get('reason')}",
        }
    checks = [
        _check(
            f"{metric} read",
            "a number",
            figures.get(metric),
            ok=isinstance(figures.get(metric), float),
        )
        for metric in NCU_METRICS
    ]
    notes = [_one_line(line) for line in text.splitlines() if line.startswith("==")][:10]
    return _verdict(
        "ncu", checks, tool=tool, exit_code=done.returncode, metrics=figures, ncu_lines=notes
    )


def _ncu_figures(text: str) -> dict[str, Any]:
    """The metric values of ncu's ``--csv`` table (the header row starts with "ID")."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    figures: dict[str, Any] = {}
    if start is None:
        return figures
    for row in csv.DictReader(lines[start:]):
        metric, value = row.get("Metric Name"), row.get("Metric Value")
        if metric and value is not None:
            try:
                figures[metric] = float(value.replace(",", ""))
            except ValueError:
                figures[metric] = value
            if row.get("Kernel Name"):
                figures.setdefault("kernel", _one_line(row["Kernel Name"], 120))
    return figures


def nvtx_step() -> dict[str, Any]:
    """A range pushed and popped through the ``nvtx`` module, and tfaccel's ranges."""
    try:
        import nvtx
    except ImportError as exc:
        return {
            "step": "nvtx",
            "status": "skipped",
            "reason": f"the nvtx module is not installed ({exc}): pip install nvtx",
        }
    from tfaccel.profile import nvtx_marks

    nvtx.push_range("tfaccel-selftest")
    nvtx.pop_range()
    marks = nvtx_marks.ranges()
    checks = [_check("nvtx_marks.available()", True, nvtx_marks.available())]
    return _verdict(
        "nvtx",
        checks,
        tool_attached=marks is not None,
        note="ranges pushed and popped; Nsight Systems shows them when attached",
    )


# --- the command line ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run one step; print its JSON line; exit 1 when it failed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tfaccel"]:  # the rest is tfaccel's own command line
        return _emit(_guarded("tfaccel", lambda: command_step(argv[1:])))
    parser = argparse.ArgumentParser(prog="python -m tfaccel.selftest.offline_steps")
    parser.add_argument(
        "step",
        choices=(
            "discover",
            "devices",
            "load",
            "kernels",
            "run-kernels",
            "sanitizer",
            "ncu",
            "nvtx",
            "plan-gpu",
        ),
    )
    parser.add_argument("--only", choices=("vector_add", "matmul", "reduce_sum", "bias_relu"))
    parser.add_argument("--json", action="store_true", help="(the output is always JSON)")
    args = parser.parse_args(argv)
    name = args.step
    steps: dict[str, Callable[[], dict[str, Any]]] = {
        "discover": discover,
        "devices": devices_step,
        "load": load_step,
        "kernels": lambda: kernels_step(args.only),
        "run-kernels": lambda: kernels_step(args.only, small=True),
        "sanitizer": sanitizer_step,
        "ncu": ncu_step,
        "nvtx": nvtx_step,
        "plan-gpu": _plan_gpu,
    }
    return _emit(_guarded(name, steps[name]))


def _plan_gpu() -> dict[str, Any]:
    from tfaccel.selftest.gpu_constants import plan_gpu_step

    return plan_gpu_step()


def _guarded(name: str, step: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The step's document; an unexpected error becomes a failure with a one-line reason
    (the traceback goes to the log, on stderr)."""
    try:
        return step()
    except Exception as exc:
        import traceback

        traceback.print_exc()
        return {
            "step": name,
            "status": "failed",
            "reason": _one_line(f"{type(exc).__name__}: {exc}"),
        }


if __name__ == "__main__":
    sys.exit(main())
