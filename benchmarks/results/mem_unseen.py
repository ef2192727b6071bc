"""The plan's peak memory on training scripts it has never seen, against the CPU allocator.

For each script (run unchanged, from its own folder), two fresh processes, as
``benchmarks/bench_workload.py`` compares them: the plan's peak of one training step under the
CPU allocator's counting rules (``bench_workload.PREDICTED``: the workload's model and
optimizer at the script's batch, no margin), and the allocator's measured peak of the model's
own compiled step on the first batch (``bench_workload.PEAK``, ``TF_ENABLE_ONEDNN_OPTS=1``,
what the script's own tensors held at the reset taken off). Prints each row's error and the
operation at the predicted peak.

    python benchmarks/results/mem_unseen.py benchmarks/results/unseen_scripts/vit_small.py ...

Figures on the 2-core EPYC: ``mem_unseen.txt``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def main(scripts: list[str]) -> int:
    sys.path.insert(0, str(HERE.parent))
    import bench_workload

    # bench_workload.PEAK, its first batch of targets sliced leaf by leaf (a dict of targets,
    # one per named output, as a two-output model's fit takes them)
    sliced = "tf.nest.map_structure(lambda a: a[:n], y)"
    peak = bench_workload.PEAK.replace("(xb, y[:n])", f"(xb, {sliced})")
    if peak == bench_workload.PEAK:
        raise RuntimeError("bench_workload.PEAK no longer slices y as (xb, y[:n])")
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1", TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = str(ROOT / "src")
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for script in scripts:
        path = Path(script).resolve()
        row: dict[str, object] = {}
        for name, code in (
            ("predicted", bench_workload.PREDICTED),
            ("measured", peak),
        ):
            with tempfile.TemporaryDirectory() as folder:
                out = Path(folder) / "out.json"
                done = subprocess.run(
                    [sys.executable, "-c", code, str(path), str(out)],
                    env=env, cwd=folder, capture_output=True, text=True, timeout=900,
                )  # fmt: skip
                if done.returncode or not out.exists():
                    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
                    row[name] = f"failed: {tail[:200]}"
                    continue
                row[name] = json.loads(out.read_text())
        p, m = row.get("predicted"), row.get("measured")
        if not (isinstance(p, dict) and isinstance(m, dict)):
            print(f"{path.name:<22} {row}")
            continue
        mib = 2**20
        error = (p["peak"] / m["peak"] - 1) * 100 if m["peak"] else float("nan")
        print(
            f"{path.name:<22} batch {p['batch']:>4}  predicted {p['peak'] / mib:7.1f} MiB  "
            f"measured {m['peak'] / mib:7.1f} MiB  {error:+6.1f}%  (fit's peak "
            f"{m['fit_peak'] / mib:.1f} MiB; load {os.getloadavg()[0]:.1f})  at {p.get('peak_op')}"
        )
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
