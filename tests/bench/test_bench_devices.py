"""Device paths of the bench: MirroredStrategy training (on two logical CPUs here, in a fresh
process, since logical devices must be set before TensorFlow starts), and the GPU-only paths
(host<->device transfer, one GPU, all GPUs), marked `gpu` and skipped without one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tfaccel.cli import main

_MIRRORED = textwrap.dedent(
    """
    import json, os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from tfaccel.bench.datasets import synthetic
    from tfaccel.bench.options import PROFILES
    from tfaccel.bench.targets import BenchTarget
    from tfaccel.bench.training import TrainConfig, train_throughput

    target = BenchTarget("gpus", "mirrored", "2 CPUs (MirroredStrategy)", ("/CPU:0", "/CPU:1"),
                    ("float32",), {"float32": 1.0})
    configs = [TrainConfig("tf.data", 16, "float32", False)]
    out = train_throughput("mlp", target, configs, synthetic(256, (28, 28)), PROFILES["smoke"],
                           repeats=2, warmup=1, tick=lambda name: None)
    print(json.dumps([m.to_dict() for m in out]))
    """
)


@pytest.mark.slow
def test_mirrored_strategy_training_on_two_logical_cpus() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _MIRRORED], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (m,) = json.loads(done.stdout.strip().splitlines()[-1])
    assert m["config"]["device"] == "gpus"
    assert m["extra"]["replicas"] == 2 and m["extra"]["global_batch"] == 32
    assert all(v > 0 for v in m["samples"])


@pytest.mark.gpu
def test_gpu_bench_measures_transfer_matmul_and_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "bench",
            "--smoke",
            "--device",
            "gpu:0",
            "--only",
            "matmul,transfer,bandwidth,mlp",
            "--repeats",
            "3",
            "--db",
            str(tmp_path / "r.sqlite"),
            "--json",
        ]
    )
    assert code == 0
    run = json.loads(capsys.readouterr().out)["run"]
    directions = {m["config"].get("direction") for m in run["measurements"]}
    assert {"host_to_device", "device_to_host"} <= directions
    matmul = [m for m in run["measurements"] if m["benchmark"] == "matmul"]
    assert {m["config"]["dtype"] for m in matmul} >= {"float32", "float16"}
    assert all(m["extra"]["peak_tflops"] for m in matmul)  # a datasheet GPU has a peak


@pytest.mark.gpu
def test_all_devices_give_a_speedup_over_the_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "bench",
            "--smoke",
            "--device",
            "all",
            "--only",
            "matmul,reference_cnn",
            "--repeats",
            "3",
            "--db",
            str(tmp_path / "r.sqlite"),
            "--json",
        ]
    )
    assert code == 0
    table = json.loads(capsys.readouterr().out)["summary"]["device_table"]
    devices = {row["device"]: row for row in table}
    assert "cpu" in devices and "gpu:0" in devices
    assert devices["gpu:0"]["speedup_over_cpu"] is not None
