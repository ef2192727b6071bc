"""The plan-gpu step's checks: what a plan assumes of a GPU against figures measured on one.
The figures below are an H200's, from the step's runs through PyTorch (cuBLAS, cuDNN 9.19), a
few of each kind and rounded (the convolutions' bytes too); the measuring itself needs the GPU
and runs in ``make gpu-check`` (``tfaccel selftest --gpu``, with or without ``--offline``)."""

from __future__ import annotations

import copy
from typing import Any

from tfaccel.inventory.specs import match_spec
from tfaccel.selftest.gpu_constants import NO_LIBRARY, judge

H200: dict[str, Any] = {
    "name": "NVIDIA H200",
    "library": "PyTorch 2.11.0+cu130",
    "copy_gbs": 4240.6,
    "matmul": [
        {"precision": "fp32", "mkn": [8192, 8192, 8192], "tflops": 51.2},
        {"precision": "fp32", "mkn": [32, 1024, 1024], "tflops": 2.9},
        {"precision": "tf32", "mkn": [8192, 8192, 8192], "tflops": 408.1},
        {"precision": "tf32", "mkn": [256, 4096, 4096], "tflops": 138.1},
        {"precision": "bf16", "mkn": [8192, 8192, 8192], "tflops": 789.6},
        {"precision": "bf16", "mkn": [1024, 1024, 1024], "tflops": 100.6},
        {"precision": "fp16", "mkn": [8192, 8192, 8192], "tflops": 757.7},
    ],
    "launch_from_python_s": 7.18e-6,
    "kernel_floor_s": 1.13e-6,
    "conv": [
        {
            "case": "3x3",
            "precision": "fp32",
            "layout": "NCHW",
            "depthwise": False,
            "workspace_bytes": 106_200_000,
            "tensor_bytes": 102_760_448,
        },
        {
            "case": "7x7 stem",
            "precision": "bf16",
            "layout": "NHWC",
            "depthwise": False,
            "workspace_bytes": 57_570_000,
            "tensor_bytes": 122_000_000,
        },
        {
            "case": "depthwise",
            "precision": "fp32",
            "layout": "NCHW",
            "depthwise": True,
            "workspace_bytes": 300_000,
            "tensor_bytes": 616_562_688,
        },
    ],
}


def _failed(figures: dict[str, Any], name: str = "NVIDIA H200") -> list[str]:
    checks, _ = judge(figures, match_spec(name))
    return [c["what"] for c in checks if not c["ok"]]


def test_an_h200s_figures_bear_out_every_assumption_and_say_each_share() -> None:
    checks, derived = judge(H200, match_spec("NVIDIA H200"))
    assert all(c["ok"] for c in checks), [c for c in checks if not c["ok"]]
    assert len(checks) == 1 + 1 + 4 + 1 + 3  # row, copy, four precisions, floor, three convs
    assert derived["copy_of_datasheet"] == round(4240.6 / 4800, 3)
    assert derived["matmul_of_datasheet"]["bf16"]["8192x8192x8192"] == round(789.6 / 989, 3)
    assert derived["matmul_of_datasheet"]["bf16"]["1024x1024x1024"] == round(100.6 / 989, 3)
    assert derived["launch_from_python_us"] == 7.18
    assert derived["conv_workspace_largest"]["float32"] == round(106.2 / 102.760448, 3)


def test_each_assumption_the_gpu_does_not_bear_out_fails_by_name() -> None:
    fast_copy = copy.deepcopy(H200)
    fast_copy["copy_gbs"] = 5500.0  # above the datasheet: the catalogue's row is wrong
    assert _failed(fast_copy) == ["copy bandwidth (GB/s) against the datasheet's 4800"]
    slow_copy = copy.deepcopy(H200)
    slow_copy["copy_gbs"] = 3000.0  # under the plan's 80%
    assert _failed(slow_copy) == ["copy bandwidth (GB/s) against the datasheet's 4800"]
    slow_bf16 = copy.deepcopy(H200)
    for row in slow_bf16["matmul"]:
        if row["precision"] == "bf16":
            row["tflops"] = 300.0  # under 40% of 989
    assert _failed(slow_bf16) == [
        "fastest bf16 matrix product (TFLOP/s) against the datasheet's 989"
    ]
    slow_launch = copy.deepcopy(H200)
    slow_launch["kernel_floor_s"] = 9e-6
    assert _failed(slow_launch) == ["a tiny kernel's time on the device (us, CUDA graph replay)"]
    big_workspace = copy.deepcopy(H200)
    big_workspace["conv"][1]["workspace_bytes"] = 122_000_000  # 1.0x: over the plan's 0.5
    assert _failed(big_workspace) == [
        "largest cuDNN workspace of a 16-bit convolution, over its input and output bytes"
    ]


def test_a_gpu_the_catalogue_lacks_fails_that_check_alone() -> None:
    checks, derived = judge({**H200, "name": "NVIDIA Future 9000"}, None)
    assert [c["what"] for c in checks if not c["ok"]] == ["catalogue row for this GPU"]
    assert checks[0]["received"] == "NVIDIA Future 9000"
    assert derived["matmul_of_datasheet"] == {}


def test_cupys_figures_without_convolutions_or_a_graph_floor_are_judged_on_what_they_have() -> None:
    figures = {k: v for k, v in H200.items() if k not in ("kernel_floor_s", "conv")}
    figures["matmul"] = [r for r in H200["matmul"] if r["precision"] in ("fp32", "fp16")]
    checks, derived = judge(figures, match_spec("NVIDIA H200"))
    assert all(c["ok"] for c in checks)
    assert len(checks) == 1 + 1 + 2
    assert derived["conv_workspace_largest"] == {}


def test_without_pytorch_or_cupy_the_step_says_what_to_install() -> None:
    import importlib.util
    import json
    import subprocess
    import sys

    import pytest

    if importlib.util.find_spec("torch") or importlib.util.find_spec("cupy"):
        pytest.skip("PyTorch or CuPy is installed here: the step would measure")
    done = subprocess.run(
        [sys.executable, "-m", "tfaccel.selftest.offline_steps", "plan-gpu", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, done.stderr
    assert doc == {"step": "plan-gpu", "status": "skipped", "reason": NO_LIBRARY}
