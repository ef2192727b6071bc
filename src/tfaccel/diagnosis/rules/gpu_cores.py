"""GPU multiprocessors: does TensorFlow count each GPU as big enough to use.

TensorFlow ignores a GPU with fewer multiprocessors than ``min(8, the largest GPU's count)``,
or than ``TF_MIN_GPU_MULTIPROCESSOR_COUNT`` when set. Finding id: ``gpu_too_few_cores``.
"""

from __future__ import annotations

import re

from tfaccel.core.findings import Finding, Status
from tfaccel.diagnosis.rules._common import NO_NVIDIA_GPU, gpu_name, has_nvidia, make_finding, skip
from tfaccel.snapshot import Snapshot

DEFAULT_MIN_GPU_CORES = 8  # TensorFlow's kDefaultMinGPUMultiprocessorCount


def gpu_too_few_cores(s: Snapshot) -> Finding:
    """TensorFlow ignores GPUs with fewer multiprocessors than min(8, the largest count)."""
    if not has_nvidia(s):
        return skip("gpu_too_few_cores", NO_NVIDIA_GPU)
    counts = [
        (g, g.multiprocessor_count) for g in s.nvml.gpus if g.multiprocessor_count is not None
    ]
    if not counts:
        return skip("gpu_too_few_cores", "no GPU's multiprocessor count is known")
    threshold, how = _min_cores(
        s.env.get("TF_MIN_GPU_MULTIPROCESSOR_COUNT"), max(c for _, c in counts)
    )
    ignored = [(g, c) for g, c in counts if c < threshold]
    evidence = [f"{gpu_name(g)}: {c} multiprocessors" for g, c in counts] + [
        f"minimum: {threshold} ({how})"
    ]
    if not ignored:
        return make_finding(
            "gpu_too_few_cores",
            "ok",
            "every GPU has enough multiprocessors for TensorFlow",
            evidence,
        )
    status: Status = "fail" if len(ignored) == len(counts) else "warn"
    fewest = min(c for _, c in ignored)
    return make_finding(
        "gpu_too_few_cores",
        status,
        f"TensorFlow ignores {len(ignored)} GPU(s) with fewer than {threshold} multiprocessors",
        evidence,
        f"export TF_MIN_GPU_MULTIPROCESSOR_COUNT={fewest}",
    )


def _min_cores(env_value: str | None, largest: int) -> tuple[int, str]:
    """TensorFlow's GetMinGPUMultiprocessorCount."""
    if env_value is None or env_value == "":
        return min(DEFAULT_MIN_GPU_CORES, largest), "min(8, the largest GPU's count)"
    text = env_value.strip()
    if re.fullmatch(r"\+?\d{1,9}", text):
        return int(text), f"TF_MIN_GPU_MULTIPROCESSOR_COUNT={env_value}"
    return (
        DEFAULT_MIN_GPU_CORES,
        f"TF_MIN_GPU_MULTIPROCESSOR_COUNT={env_value!r} is invalid; TF uses 8",
    )
