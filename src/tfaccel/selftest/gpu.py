"""The GPU self-test's knowledge: whether there is a GPU to test, the machine's facts, the steps.

Whether there is a GPU is decided from NVML and the PCI bus (:mod:`tfaccel.probe`), never by
importing TensorFlow. The steps: every test marked ``gpu``, ``devices --tf``, ``doctor --deep``,
``tfaccel.setup()`` in each GPU mode (:data:`SETUP_MODES`, each in a fresh process and checked
against what TensorFlow then reports), the bench, the kernels, profile, a short tune, the
benchmark scripts of the clone, and ``tfaccel report``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tfaccel
from tfaccel.selftest.runner import Step

if TYPE_CHECKING:
    from tfaccel.snapshot import DriverInfo, Snapshot

__all__ = [
    "SETUP_MODES",
    "checkout_root",
    "gpu_missing_reason",
    "machine_facts",
    "plan_gpu_steps",
    "setup_snippet",
]

NVIDIA_PCI_VENDOR = "0x10de"


def gpu_missing_reason(snap: Snapshot, nvidia_smi_path: str | None) -> str | None:
    """Why there is no NVIDIA GPU to test here, or None when there is one.

    Decided without TensorFlow: the GPUs NVML (the driver) reports, unless
    CUDA_VISIBLE_DEVICES hides them all.

    Args:
        snap: the machine (``nvml``, ``pci`` and ``env`` are read).
        nvidia_smi_path: where nvidia-smi is, None when it is not on PATH.

    Returns:
        None, or one line: ``"no NVIDIA GPU: nvidia-smi not found; NVML: ..."``.
    """
    if snap.nvml.available and snap.nvml.gpus:
        visible = snap.env.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and visible.strip() in ("", "-1"):
            return (
                f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from CUDA "
                f"({len(snap.nvml.gpus)} GPU(s) in NVML): unset it to test them"
            )
        return None
    smi = f"nvidia-smi at {nvidia_smi_path}" if nvidia_smi_path else "nvidia-smi not found"
    nvml = f"NVML: {snap.nvml.error}" if not snap.nvml.available else "NVML reports 0 devices"
    reason = f"no NVIDIA GPU: {smi}; {nvml}"
    on_bus = sum(d.vendor_id == NVIDIA_PCI_VENDOR for d in snap.pci)
    if on_bus:
        reason += (
            f"; {on_bus} NVIDIA device(s) on the PCI bus that NVML does not see "
            "(run 'tfaccel doctor')"
        )
    return reason


def machine_facts(snap: Snapshot, driver: DriverInfo | None = None) -> dict[str, Any]:
    """What summary.json says about the machine: its GPUs, driver, CUDA, TensorFlow, Python.

    Read without importing TensorFlow: NVML for the GPUs, the driver and the newest CUDA the
    driver supports; TensorFlow's build file for its version and the CUDA and cuDNN it was
    built with.
    """
    tf = snap.tensorflow
    return {
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "uuid": g.uuid,
                "memory_total_bytes": g.memory_total_bytes,
                "compute_capability": g.compute_capability,
            }
            for g in snap.nvml.gpus
        ],
        "nvml_error": snap.nvml.error,
        "driver_version": snap.nvml.driver_version,
        "cuda_driver_version": snap.nvml.cuda_driver_version,
        "nvidia_smi": driver.nvidia_smi_path if driver is not None else None,
        "tensorflow": {
            "distribution": tf.distribution,
            "version": tf.version,
            "cuda_build": tf.is_cuda_build,
            "cuda_version": tf.cuda_version,
            "cudnn_version": tf.cudnn_version,
        },
        "python": snap.platform.python_version,
        "platform": f"{snap.platform.system} {snap.platform.release} {snap.platform.machine}",
        "tfaccel_version": snap.tfaccel_version,
        # what steers TensorFlow on GPUs (TF_CONFIG names hosts: left out)
        "env": {
            k: v
            for k, v in snap.env.items()
            if ("VISIBLE" in k or k.startswith(("TF_", "TFACCEL_"))) and k != "TF_CONFIG"
        },
    }


def checkout_root() -> Path | None:
    """The clone tfaccel runs from (``src/tfaccel`` inside it), None for an installed package."""
    package = Path(tfaccel.__file__).resolve().parent
    root = package.parent.parent
    if package.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


# tfaccel.setup() in each GPU mode, in a fresh process: the call, then what TensorFlow must
# report after it. Each snippet prints the configuration, then checks; an assertion's message
# (the last line of the output) says what TensorFlow reported instead.
_SETUP_HEAD = """\
import tfaccel
config = tfaccel.setup({call})
print(config, flush=True)
import tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
assert gpus, "TensorFlow sees no GPU (tfaccel doctor --deep says why)"
"""
_MATMUL_ON_GPU = """\
with tf.device("/GPU:0"):
    product = tf.matmul(tf.ones((256, 256)), tf.ones((256, 256)))
assert product.device.endswith("GPU:0"), product.device
assert float(product[0, 0]) == 256.0, float(product[0, 0])
"""
_TRAIN_STEP = """\
import keras
import numpy as np
policy = keras.mixed_precision.global_policy().name
assert policy == "{policy}", policy
model = keras.Sequential(
    [keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
     keras.layers.Dense(10, dtype="float32")]
)
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
assert model.layers[0].compute_dtype == "{compute}", model.layers[0].compute_dtype
loss = float(model.train_on_batch(np.ones((32, 64), "float32"), np.zeros(32, "int32")))
assert np.isfinite(loss), loss
"""
SETUP_MODES: dict[str, tuple[str, str, str]] = {
    # mode: (what it checks, the setup() arguments, the checks after it)
    "memory-growth": (
        "setup(memory='growth'): memory growth on in TensorFlow, an op runs on GPU:0",
        'memory="growth"',
        """\
growth = [tf.config.experimental.get_memory_growth(g) for g in gpus]
assert all(growth), f"memory growth per GPU: {growth}"
"""
        + _MATMUL_ON_GPU,
    ),
    "memory-limit": (
        "setup(memory=1024): GPU:0 limited to 1024 MiB, and 2 GiB do not fit",
        "memory=1024",
        """\
limits = [c.memory_limit for c in tf.config.get_logical_device_configuration(gpus[0])]
assert limits == [1024], f"memory limits of GPU:0: {limits}"
logical = tf.config.list_logical_devices("GPU")
assert len(logical) == len(gpus), [d.name for d in logical]
"""
        + _MATMUL_ON_GPU
        + """\
try:
    with tf.device("/GPU:0"):
        big = tf.zeros((512, 1024, 1024))  # 2 GiB of float32
    float(big[0, 0, 0])
except tf.errors.ResourceExhaustedError:
    pass
else:
    raise AssertionError("2 GiB were allocated on GPU:0 under a limit of 1024 MiB")
""",
    ),
    "memory-fraction": (
        "setup(memory=0.25): GPU:0 limited to a quarter of the memory NVML reports",
        "memory=0.25",
        """\
from tfaccel.probe import nvml
limits = [c.memory_limit for c in tf.config.get_logical_device_configuration(gpus[0])]
applied = config["memory"].applied
assert len(limits) == 1 and limits[0] == applied["GPU:0"], (limits, applied)
quarters = [g.memory_total_bytes // 2**20 * 0.25 for g in nvml.collect().gpus]
assert any(abs(limits[0] - q) <= 1 for q in quarters), (limits, quarters)
"""
        + _MATMUL_ON_GPU,
    ),
    "logical-devices": (
        "setup(logical_devices=2): GPU:0 split into two logical GPUs, MirroredStrategy over them",
        "logical_devices=2",
        """\
logical = [d.name for d in tf.config.list_logical_devices("GPU")]
assert len(logical) == len(gpus) + 1, logical
for name in logical[:2]:
    with tf.device(name):
        value = tf.reduce_sum(tf.ones((64, 64)))
    assert value.device.endswith(name.split("/")[-1]), (name, value.device)
strategy = tf.distribute.MirroredStrategy(
    logical[:2], cross_device_ops=tf.distribute.ReductionToOneDevice()
)
total = strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)
assert float(total) == 2.0, float(total)
""",
    ),
    "mixed-float16": (
        "setup(precision='mixed_float16'): the Keras policy, float16 layers, a loss-scaled step",
        'precision="mixed_float16"',
        _TRAIN_STEP.format(policy="mixed_float16", compute="float16")
        + """\
assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer), model.optimizer
""",
    ),
    "mixed-bfloat16": (
        "setup(precision='mixed_bfloat16'): the Keras policy, bfloat16 layers, a training step",
        'precision="mixed_bfloat16"',
        """\
cc = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability") or (0, 0)
if tuple(cc) < (8, 0):
    print(f"skipped: GPU:0 has compute capability {cc[0]}.{cc[1]}; bfloat16 needs 8.0")
    raise SystemExit(0)
"""
        + _TRAIN_STEP.format(policy="mixed_bfloat16", compute="bfloat16"),
    ),
    "xla": (
        "setup(jit=True): XLA auto-clustering on, a jit-compiled step runs on GPU:0",
        "jit=True",
        """\
assert tf.config.optimizer.get_jit(), "XLA auto-clustering is off"

@tf.function(jit_compile=True)
def step(x):
    return tf.reduce_sum(tf.nn.relu(tf.matmul(x, x)))

with tf.device("/GPU:0"):
    value = step(tf.ones((128, 128)))
assert value.device.endswith("GPU:0"), value.device
assert float(value) == 128.0**3, float(value)
""",
    ),
}
_SKIPPED_LINE = r"^skipped: (?P<reason>.+)$"
_CONVERGENCE = ((1, "the digits convergence check failed: the training loop did not learn"),)


def setup_snippet(mode: str) -> str:
    """The Python code that runs ``tfaccel.setup()`` in ``mode`` and checks TensorFlow."""
    _, call, checks = SETUP_MODES[mode]
    return _SETUP_HEAD.format(call=call) + checks


def plan_gpu_steps(
    out_dir: str | Path,
    *,
    python: str | None = None,
    root: Path | None = None,
    have_pytest: bool | None = None,
) -> list[Step]:
    """The GPU self-test's steps, in order.

    Args:
        out_dir: the self-test's directory: the report, the results database and the
            benchmark scripts' JSON go there.
        python: the interpreter (default: this one).
        root: the clone whose ``tests/`` and ``benchmarks/`` run (default
            :func:`checkout_root`); without them those steps are skipped, with the reason.
        have_pytest: whether pytest is installed (default: looked up).

    Returns:
        The steps; a step that cannot run here has its ``skip`` reason set.
    """
    import importlib.util

    out = Path(out_dir)
    py = python or sys.executable
    root = checkout_root() if root is None else root
    if have_pytest is None:
        have_pytest = importlib.util.find_spec("pytest") is not None
    db = ("--db", str(out / "results.sqlite"))

    def tfaccel(*args: str) -> tuple[str, ...]:
        return (py, "-m", "tfaccel", *args)

    clone = str(root) if root is not None else None  # the tests' and scripts' directory
    where = f"in {root}" if root is not None else "(tfaccel is installed, not run from a clone)"
    steps: list[Step] = []
    tests = root / "tests" if root is not None else None
    tests_skip = None
    if tests is None or not tests.is_dir():
        tests_skip = f"no tests/ folder {where}: the gpu tests come with a clone of tfaccel"
    elif not have_pytest:
        tests_skip = "pytest is not installed: pip install -e '.[dev]' (or make install-dev)"
    steps.append(
        Step(
            "gpu-tests",
            (py, "-m", "pytest", "-m", "gpu", "-q", "-rs", "tests/"),
            "every test marked gpu",
            300,
            cwd=clone,
            skip=tests_skip,
            # -q ends with "N skipped, M deselected in S s" when nothing passed or failed
            skipped_if=r"^(?P<reason>\d+ skipped(?:, \d+ (?:deselected|warnings?))* in .*)$",
        )
    )
    steps.append(
        Step(
            "devices-tf",
            tfaccel("devices", "--tf", "--json"),
            "the devices TensorFlow registers",
            150,
        )
    )
    steps.append(
        Step(
            "doctor-deep",
            tfaccel("doctor", "--deep", "--json"),
            "the doctor's checks, with TensorFlow imported",
            150,
            exit_notes=((1, "the doctor found a failure: the findings with status 'fail'"),),
        )
    )
    for mode, (what, _, _) in SETUP_MODES.items():
        steps.append(
            Step(
                f"setup-{mode}",
                (py, "-c", setup_snippet(mode)),
                what,
                120,
                skipped_if=_SKIPPED_LINE,
                unset_env=("TFACCEL_*", "TF_FORCE_GPU_ALLOW_GROWTH"),
            )
        )
    steps.append(
        Step(
            "bench-quick",
            tfaccel("bench", "--quick", "--device", "all", "--json", *db),
            "micro benchmarks and training on every device, against the spec peaks",
            300,
            exit_notes=_CONVERGENCE,
        )
    )
    steps.append(
        Step(
            "bench-kernels",
            tfaccel("bench", "--kernels", "--json"),
            "the tfaccel.kernels CUDA kernels against the copy bandwidth and cuBLAS",
            180,
            skipped_if=r'^\s*"skipped": "(?P<reason>[^"]+)"',
        )
    )
    steps.append(
        Step(
            "profile-reference-cnn",
            tfaccel("profile", "--model", "reference-cnn", "--quiet", "--json"),
            "what limits training of the reference CNN",
            180,
        )
    )
    steps.append(
        Step(
            "tune-short",
            tfaccel(
                "tune", "--model", "reference-cnn", "--budget", "30", "--no-progress", "--json", *db
            ),
            "a 30 s search of batch size, precision, XLA and input settings",
            150,
        )
    )
    benchmarks = root / "benchmarks" if root is not None else None
    bench_skip = None
    if benchmarks is None or not benchmarks.is_dir():
        bench_skip = f"no benchmarks/ folder {where}: the scripts come with a clone of tfaccel"

    def bench_plan(name: str, models: tuple[str, ...], precision: str, what: str) -> Step:
        only = [word for model in models for word in ("--only", model)]
        return Step(
            name,
            (
                py,
                "benchmarks/bench_plan.py",
                *("--device", "gpu:0", *only, "--precision", precision, "--first"),
                *("--json", str(out / f"{name.replace('-', '_')}.json")),
            ),
            what,
            300,
            exit_notes=(
                (1, "a prediction off by over 15% (or over 10% low), or the median by over 7%"),
            ),
            cwd=clone,
            skip=bench_skip,
        )

    steps.append(
        bench_plan(
            "bench-plan-gpu",
            ("mlp", "reference_cnn", "mobilenetv2"),
            "float32",
            "tfaccel plan's memory prediction against the GPU allocator's peak: a dense, a "
            "convolutional (cuDNN's workspaces) and a depthwise-separable model",
        )
    )
    steps.append(
        bench_plan(
            "bench-plan-gpu-16-bit",
            ("reference_cnn", "mobilenetv2"),
            "mixed_float16",
            "the same under mixed_float16 (every GPU's 16-bit): cuDNN's workspaces in the "
            "layout TensorFlow gives 16-bit convolutions on this GPU",
        )
    )
    steps.append(
        Step(
            "plan-gpu",
            (py, "-m", "tfaccel.selftest.offline_steps", "plan-gpu", "--json"),
            "what a plan assumes of a GPU (datasheet rates, utilisation, per-op cost, cuDNN "
            "workspace) against this one, through PyTorch or CuPy",
            180,
            keeps_result=True,
        )
    )
    steps.append(
        Step(
            "bench-kernels-script",
            (py, "benchmarks/bench_kernels.py", "--sizes", "1024", "2048", "--repeats", "3"),
            "benchmarks/bench_kernels.py: each tile size against cuBLAS",
            180,
            cwd=clone,
            skip=bench_skip,
            skipped_if=_SKIPPED_LINE,
        )
    )
    steps.append(
        Step(
            "report",
            # the micro benchmarks only: bench-quick has trained the models on every device
            tfaccel(
                "report", "--quick", "--only", "micro", "--device", "gpu:0", "--out", str(out), *db
            ),
            "report.html, report.json and report.md of GPU:0's matmul, bandwidth, transfer and "
            "conv2d figures, in this directory",
            300,
            exit_notes=_CONVERGENCE,
        )
    )
    return steps
