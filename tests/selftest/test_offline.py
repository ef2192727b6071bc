"""``tfaccel selftest --gpu --offline`` (``make gpu-check-offline``): what it runs where
TensorFlow cannot be imported, the rehearsal on the CUDA simulator, and the kernels' clear error
for a numba-cuda that breaks on the installed NumPy.

TensorFlow is made unimportable by a ``tensorflow`` package on PYTHONPATH that raises
ImportError; where a GPU must appear to be present, ``pynvml`` on PYTHONPATH is the fake NVML
binding of tests/fake_nvml.py (the hardware boundary). Nothing here reaches the network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tfaccel.selftest import offline, offline_steps
from tfaccel.selftest.runner import Step, run_steps

ROOT = Path(__file__).resolve().parents[2]


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


TESTS = ROOT / "tests"
PY = sys.executable

RUN_THE_CLI = """
import sys
from tfaccel.cli import main
code = main(sys.argv[1:])
assert "tensorflow" not in sys.modules, "the offline self-test imported TensorFlow"
sys.exit(code)
"""
FAKE_PYNVML = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from fake_nvml import h100, make_binding
_binding = make_binding([h100()], driver="580.159.04", cuda=13000)
globals().update({{k: v for k, v in vars(_binding).items() if not k.startswith("__")}})
"""


def _shims(tmp_path: Path, *, gpu: bool) -> Path:
    shims = tmp_path / "shims"
    (shims / "tensorflow").mkdir(parents=True)
    (shims / "tensorflow" / "__init__.py").write_text(
        'raise ImportError("TensorFlow is not installed on this node")\n'
    )
    if gpu:
        (shims / "pynvml.py").write_text(FAKE_PYNVML)
    return shims


def _env(shims: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join([str(shims), str(ROOT / "src")])
    # no network: any pip or HTTP attempt would fail at once
    env.update({"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "https_proxy": "http://127.0.0.1:9"})
    env.update(extra)
    return env


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    done = subprocess.run(
        [PY, "-c", RUN_THE_CLI, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_without_tensorflow_it_says_what_it_would_run_and_why_each_step_skips(
    tmp_path: Path,
) -> None:
    shims = _shims(tmp_path, gpu=True)
    env = _env(shims, PATH=os.path.dirname(PY))  # no nvidia-smi, compute-sanitizer, ncu
    doc = _cli(["selftest", "--gpu", "--offline", "--list", "--json"], env, tmp_path)
    assert doc["kind"] == "gpu-offline"
    assert doc["would_skip"] is None  # the fake NVML shows an H100
    steps = {s["name"]: s for s in doc["steps"]}
    assert list(steps) == [
        "devices",
        "load",
        "doctor",
        "doctor-preflight",
        "kernels",
        "sanitizer",
        "ncu-matmul",
        "nvtx",
        "plan-gpu",
        "gpu-tests",
        "tensorflow",
    ]
    assert steps["tensorflow"]["skip"] == (
        "TensorFlow is not installed: setup in each GPU mode, devices --tf, doctor --deep, "
        "bench models, profile, tune skipped"
    )
    assert "nvidia-smi not found" in steps["devices"]["skip"]
    assert "compute-sanitizer not found" in steps["sanitizer"]["skip"]
    assert "ncu not found" in steps["ncu-matmul"]["skip"]
    if not _importable("torch") and not _importable("cupy"):
        assert "neither PyTorch nor CuPy" in steps["plan-gpu"]["skip"]
    else:
        assert steps["plan-gpu"]["skip"] is None
    for name in ("load", "doctor", "doctor-preflight", "kernels", "gpu-tests"):
        assert steps[name]["skip"] is None, (name, steps[name]["skip"])
    assert steps["kernels"]["argv"][1:] == ["-m", offline.STEPS_MODULE, "kernels", "--json"]
    assert not any(tmp_path.glob("gpu-check-*"))  # --list writes nothing


def test_what_is_importable_is_found_by_importing_it_tensorflow_in_a_child(
    tmp_path: Path,
) -> None:
    shims = _shims(tmp_path, gpu=False)
    done = subprocess.run(
        [PY, "-m", offline.STEPS_MODULE, "discover"],
        env=_env(shims),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["modules"]["tensorflow"] == {
        "ok": False,
        "error": "ImportError: TensorFlow is not installed on this node",
    }
    assert found["modules"]["numpy"]["ok"] is True
    assert set(found["tools"]) == set(offline_steps.TOOLS)


def test_the_rehearsal_runs_the_kernels_on_the_simulator_and_lists_what_needs_a_gpu(
    tmp_path: Path,
) -> None:
    pytest.importorskip(
        "numba_cuda", reason="Requires: numba-cuda (pip install 'tfaccel[kernels]')"
    )
    shims = _shims(tmp_path, gpu=False)
    out = tmp_path / "gpu-check"
    args = ["selftest", "--gpu", "--offline", "--simulate", "--out", str(out), "--json"]
    doc = _cli(args, _env(shims), tmp_path)
    assert doc["kind"] == "gpu-simulated"
    steps = {s["name"]: s for s in doc["steps"]}
    kernels = steps["kernels"]
    assert kernels["status"] == "passed", kernels
    assert kernels["result"]["backend"] == "simulator"
    assert {name: k["status"] for name, k in kernels["result"]["kernels"].items()} == {
        "vector_add": "passed",
        "matmul": "passed",
        "reduce_sum": "passed",
        "bias_relu": "passed",
    }
    assert steps["doctor"]["status"] == "passed"
    assert steps["doctor"]["result"]["checks"][0]["what"] == "exit status"
    assert doc["needs_real_gpu"] == [
        "devices",
        "load",
        "sanitizer",
        "ncu-matmul",
        "plan-gpu",
        "gpu-tests",
    ]
    assert steps["tensorflow"]["reason"].startswith("TensorFlow is not installed")
    # two files come back: the summary and one log with every step's output
    assert sorted(p.name for p in out.iterdir()) == ["steps.log", "summary.json"]
    assert json.loads((out / "summary.json").read_text())["status"] == doc["status"]
    log = (out / "steps.log").read_text()
    assert "===== 05 kernels: passed =====" in log
    assert kernels["log"].endswith("steps.log#05-kernels")


def test_a_step_json_result_is_kept_and_its_skip_recorded(tmp_path: Path) -> None:
    said = 'import json; print("noise"); print(json.dumps({"status": "skipped", "reason": "r"}))'
    long = "x" * 500
    failed = f"import json, sys; print(json.dumps({{'reason': {long!r}}})); sys.exit(1)"
    steps = [
        Step("kept", (PY, "-c", said), "keeps its result", 30, keeps_result=True),
        Step(
            "env",
            (PY, "-c", "import os; assert os.environ['X_SET'] == '1'"),
            "env",
            30,
            env=(("X_SET", "1"),),
        ),
    ]
    steps.append(Step("failed", (PY, "-c", failed), "fails", 30, keeps_result=True))
    results, _ = run_steps(steps, budget_s=60, log_dir=tmp_path)
    assert (results[0].status, results[0].reason) == ("skipped", "r")
    assert (results[2].status, results[2].reason) == ("failed", long)  # whole, not cut
    assert results[0].result == {"status": "skipped", "reason": "r"}
    assert results[1].status == "passed", results[1].output_tail


def test_a_tfaccel_option_this_version_lacks_is_a_skip_not_a_failure() -> None:
    doc = offline_steps.command_step(["doctor", "--no-such-option", "--json"])
    assert doc["status"] == "skipped"
    assert "--no-such-option" in doc["reason"]


# --- numba-cuda that breaks on the installed NumPy ---------------------------------------------

ROW_STACK = """
import json
import sys
import numpy as np
for name in sys.argv[1:]:
    if hasattr(np, name):
        delattr(np, name)  # as NumPy 2.5 did for row_stack
from numba import cuda
from tfaccel.kernels import _launch
from tfaccel.kernels import cuda as kc
from tfaccel.kernels import KernelBackendError


class CompilesAtLaunch:
    # The launch of a kernel on a GPU: numba-cuda compiles it first (no GPU needed for that).
    def __getitem__(self, config):
        return self

    def __call__(self, *args):
        ptx, _ = cuda.compile_ptx(
            kc.vector_add_kernel.py_func, "void(float32[:], float32[:], float32[:])", cc=(9, 0)
        )
        print(json.dumps({"ptx_lines": len(ptx.splitlines())}))


try:
    kc._run(CompilesAtLaunch(), _launch.Launch(grid=(1,), block=(32,)))
except KernelBackendError as exc:
    print(json.dumps({"what": exc.what, "received": exc.received, "fix": exc.fix}))
"""

# The same compile with numba-cuda alone, nothing of tfaccel imported: NumPy 2.5's missing
# name breaks it.
ROW_STACK_WITHOUT_TFACCEL = """
import numpy as np
del np.row_stack
from numba import cuda
def add(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]
cuda.compile_ptx(add, "void(float32[:], float32[:], float32[:])", cc=(9, 0))
"""


def _row_stack_run(code: str, *names: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run(
        [PY, "-c", code, *names], env=env, capture_output=True, text=True, timeout=180
    )


def test_kernels_compile_on_a_numpy_without_row_stack() -> None:
    """numba-cuda 0.30.4 reads ``np.row_stack`` at its first compile and NumPy 2.5 removed
    it: tfaccel.kernels puts the alias (``np.vstack``) back, and the kernel compiles."""
    pytest.importorskip(
        "numba_cuda", reason="Requires: numba-cuda (pip install 'tfaccel[kernels]')"
    )
    done = _row_stack_run(ROW_STACK, "row_stack")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc.get("ptx_lines", 0) > 10, doc  # compiled, not the clear error
    import numba_cuda

    if numba_cuda.__version__ == "0.30.4":  # the release known to need the alias
        alone = _row_stack_run(ROW_STACK_WITHOUT_TFACCEL)
        assert alone.returncode != 0
        assert "has no attribute 'row_stack'" in alone.stderr


def test_numba_cuda_failing_on_this_numpy_at_compile_is_a_clear_error() -> None:
    pytest.importorskip(
        "numba_cuda", reason="Requires: numba-cuda (pip install 'tfaccel[kernels]')"
    )
    # Without vstack the alias cannot be put back, and numba-cuda's compile fails as it does
    # on a NumPy it does not know.
    done = _row_stack_run(ROW_STACK, "row_stack", "vstack")
    assert done.returncode == 0, done.stderr
    error = json.loads(done.stdout.strip().splitlines()[-1])
    import numpy

    assert error["what"].startswith("numba-cuda 0.") and "NumPy" in error["what"]
    assert "AttributeError: module 'numpy' has no attribute" in error["received"]
    assert f"numpy {numpy.__version__}" in error["received"]
    assert 'pip install "numpy<2.5"' in error["fix"]


KERNELS_STEP_ON_A_BROKEN_NUMBA = r"""
import importlib.util
import os
import sys
import warnings

from numba.cuda.simulator import kernel as sim_kernel

from tfaccel.selftest import offline_steps

# The boundary: numba-cuda's launch of a kernel raises from inside numba-cuda's own file, as
# the first compile with numba-cuda 0.30.4 and NumPy 2.5 does (arrayobj.py, np.row_stack).
root = os.path.dirname(importlib.util.find_spec("numba_cuda").origin)
source = "def launch(*args):\n    raise AttributeError(\"module 'numpy' has no attribute 'row_stack'\")\n"
space = {}
exec(compile(source, os.path.join(root, "numba", "cuda", "np", "arrayobj.py"), "exec"), space)
sim_kernel.FakeCUDAKernel.__call__ = space["launch"]
warnings.simplefilter("ignore")
sys.exit(offline_steps.main(["kernels", "--json"]))
"""


def test_the_kernels_step_reports_that_reason_on_one_line_and_goes_on() -> None:
    pytest.importorskip(
        "numba_cuda", reason="Requires: numba-cuda (pip install 'tfaccel[kernels]')"
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run(
        [PY, "-c", KERNELS_STEP_ON_A_BROKEN_NUMBA],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    doc = json.loads(lines[-2])
    assert [k["status"] for k in doc["kernels"].values()] == ["failed"] * 4  # each one tried
    assert lines[-1].startswith("failed: vector_add, matmul, reduce_sum, bias_relu: numba-cuda ")
    assert "row_stack" in lines[-1] and 'pip install "numpy<2.5"' in lines[-1]
    assert lines[-1].count("row_stack") == 1  # the one reason, said once


def test_an_attribute_error_of_other_code_is_not_blamed_on_numba(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tfaccel.kernels import _launch
    from tfaccel.kernels import cuda as kc

    class Broken:
        def __getitem__(self, config: Any) -> Any:
            return self

        def __call__(self, *args: Any) -> None:
            raise AttributeError("a kernel's own mistake")

    with pytest.raises(AttributeError, match="a kernel's own mistake"):
        kc._run(Broken(), _launch.Launch(grid=(1,), block=(1,)))


# --- make gpu-check's choice -------------------------------------------------------------------

MAKE = shutil.which("make")
needs_make = pytest.mark.skipif(MAKE is None, reason="Requires: make")


def _make(
    tmp_path: Path, *args: str, smi: bool, pythonpath: str = ""
) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if smi:  # nvidia-smi -L succeeds: a GPU, as far as make can tell
        (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / "nvidia-smi").chmod(0o755)
    path = os.pathsep.join([str(bin_dir), os.path.dirname(PY), "/usr/bin", "/bin"])
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    env.update(PATH=path, PYTHONPATH=pythonpath)
    return subprocess.run(
        [str(MAKE), "-s", "-C", str(ROOT), "gpu-check", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@needs_make
def test_make_gpu_check_without_a_gpu_exits_0_at_once_installing_nothing(tmp_path: Path) -> None:
    started = time.monotonic()
    done = _make(tmp_path, "VENV=" + str(tmp_path / "no-venv"), smi=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped: no NVIDIA GPU here" in done.stdout
    assert not (tmp_path / "no-venv").exists()
    assert time.monotonic() - started < 10


def _offline_list(tmp_path: Path, pythonpath: str = "") -> tuple[str, dict[str, Any]]:
    """``make gpu-check`` with GPU_CHECK_OFFLINE=1 and ``--list --json``: its first line (why
    it is offline) and the steps' JSON document."""
    done = _make(
        tmp_path,
        "GPU_CHECK_OFFLINE=1",
        f"PYTHON={PY}",
        "VENV=" + str(tmp_path / "no-venv"),
        "GPU_CHECK_ARGS=--list --json --out " + str(tmp_path / "out"),
        smi=True,
        pythonpath=pythonpath,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    first, rest = done.stdout.split("\n", 1)
    return first, json.loads(rest[rest.index("{") :])


@needs_make
def test_make_gpu_check_offline_says_why_and_runs_from_the_source_tree(tmp_path: Path) -> None:
    first, doc = _offline_list(tmp_path)
    assert first.startswith("make gpu-check: offline (GPU_CHECK_OFFLINE=1)")
    assert doc["kind"] == "gpu-offline"
    assert not (tmp_path / "no-venv").exists()


@needs_make
def test_make_gpu_check_offline_keeps_the_pythonpath_it_was_given(tmp_path: Path) -> None:
    # A cluster's `module load` or wheels unpacked by hand put packages on PYTHONPATH: the
    # steps must still find them. Here an `nvtx` there that fails to import, so the nvtx
    # step's reason shows which one the steps saw.
    extra = tmp_path / "site"
    (extra / "nvtx").mkdir(parents=True)
    (extra / "nvtx" / "__init__.py").write_text("raise ImportError('the nvtx on PYTHONPATH')\n")
    _, doc = _offline_list(tmp_path, pythonpath=str(extra))
    nvtx = next(step for step in doc["steps"] if step["name"] == "nvtx")
    assert "the nvtx on PYTHONPATH" in nvtx["skip"]


# --- the devices step against nvidia-smi ---------------------------------------------------------

FAKE_SMI = """#!/bin/sh
# nvidia-smi as the driver prints it: the query's CSV, or the header with the CUDA version
case "$1" in
  --query-gpu=*) echo "NVIDIA H100 80GB HBM3, {memory}, 580.159.04, 1410, 1215, 9.0" ;;
  *) echo "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |" ;;
esac
"""


@pytest.mark.parametrize("memory", [81920, 81000])
def test_the_devices_step_checks_tfaccel_against_nvidia_smi(tmp_path: Path, memory: int) -> None:
    shims = _shims(tmp_path, gpu=True)  # NVML: the fake H100, driver 580.159.04, CUDA 13.0
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(FAKE_SMI.format(memory=memory))
    smi.chmod(0o755)
    env = _env(shims, PATH=os.pathsep.join([str(smi.parent), os.path.dirname(PY), "/usr/bin"]))
    done = subprocess.run(
        [PY, "-m", offline.STEPS_MODULE, "devices", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stdout.strip().splitlines()
    doc = json.loads(lines[0])
    checks = {c["what"]: c for c in doc["checks"]}
    assert {what: c["ok"] for what, c in checks.items()} == {
        "number of GPUs": True,
        "GPU 0 name": True,
        "GPU 0 memory total (MiB)": memory == 81920,
        "GPU 0 max SM clock (MHz)": True,
        "GPU 0 max memory clock (MHz)": True,
        "GPU 0 compute capability": True,
        "driver version": True,
        "CUDA version (nvidia-smi's header)": True,
    }
    if memory == 81920:
        assert (done.returncode, doc["status"]) == (0, "passed"), done.stdout + done.stderr
    else:
        assert (done.returncode, doc["status"]) == (1, "failed")
        assert lines[-1] == ("failed: GPU 0 memory total (MiB): expected 81000, received 81920")


NCU_CSV = """==PROF== Connected to process 4242 (/opt/torch/.venv/bin/python3.12)
==PROF== Profiling "matmul_tiled": 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",\
"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","_ZN6cudapy8tfaccel12matmul_tiledE","1","7","(16, 16, 1)",\
"(16, 32, 1)","0","9.0","Command line profiler metrics",\
"dram__throughput.avg.pct_of_peak_sustained_elapsed","%","12.5"
"0","4242","python3.12","127.0.0.1","_ZN6cudapy8tfaccel12matmul_tiledE","1","7","(16, 16, 1)",\
"(16, 32, 1)","0","9.0","Command line profiler metrics",\
"sm__throughput.avg.pct_of_peak_sustained_elapsed","%","1,234.5"
"""


def test_the_ncu_figures_are_read_from_its_csv() -> None:
    figures = offline_steps._ncu_figures(NCU_CSV)
    assert figures == {
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": 12.5,
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": 1234.5,
        "kernel": "_ZN6cudapy8tfaccel12matmul_tiledE",
    }
