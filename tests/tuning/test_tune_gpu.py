"""``tfaccel.tune`` on a real GPU: a real out-of-memory boundary and the GPU's precisions.

Marked ``gpu``: skipped without an NVIDIA GPU (with the reason), run by hand where there is one.
The GPU is limited to 1 GiB (``tfaccel.setup(memory=1024)``) in a fresh process, so the
reference CNN runs out of memory at a batch size well inside the data set.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from runtime_helpers import clean_env

pytestmark = pytest.mark.gpu

SCENARIO = textwrap.dedent(
    """
    import json
    import tfaccel
    tfaccel.setup(memory=1024)
    import tfaccel.tuning
    from tfaccel.tuning.trials import hardware_precisions
    space = {"precision": ["float32"], "jit": [False], "feed": ["pipeline"]}
    result = tfaccel.tuning.tune_model(
        "reference_cnn", 300, space, examples=20_000, batch_cap=16_384, sample_s=0.2,
        final_rounds=3, store=False, progress=False,
    )
    print(json.dumps({
        "search": result.batch_search.to_dict(),
        "statuses": {t.config.label(): t.status for t in result.trials},
        "best": result.best.to_dict(),
        "device": result.device,
        "precisions": list(hardware_precisions()),
    }))
    """
)


def test_memory_search_finds_a_real_oom_boundary_and_goes_on() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    search = doc["search"]
    assert doc["device"] == "gpu:0"
    assert search["first_oom"] is not None  # a real ResourceExhaustedError was met ...
    assert "oom" in [status for _, status in search["tried"]]
    assert search["result"] < search["largest_fit"] < search["first_oom"]  # ... with the margin
    assert doc["best"]["batch_size"] <= search["result"]  # and the search went on after it
    assert "mixed_float16" in doc["precisions"]  # tensor cores (compute capability >= 7.0)
