"""What TensorFlow's CPU allocator held at a training step's peak, from its allocation log.

For ``NAME BATCH [PRECISION]`` (an architecture of ``bench_plan.py``): one fresh process trains
4 steps with ``TF_CPP_VMODULE=log_memory=2`` and reads the allocator's peak. The log's
allocations of 256 KiB and more (the ones the oneDNN allocator counts) are replayed: the peak of
their sum, the tensors alive at it (kernel, shape, dtype), and the peak of the same allocations
replayed on the BFC allocator (:func:`tfaccel.planning.bfc.replay`) after each step. With
``--trace``, every counted allocation and free of the last step, with the running sum. With
``--counts``, for each kernel (a loop iteration's ``body/_N/`` left out) the most buffers of it
alive at once in the last step, allocations of every size (a While loop's iterations in
flight: how many time steps' tensors of each kind are held together). The
measured peak above the log's replay is memory the log does not record (raw allocations, or
tensors made before the first step).

    python benchmarks/results/mem_log.py mlp 64 [float32|mixed_bfloat16] [--trace] [--counts]
        [OUT ERR: read a child's stdout and log kept from an earlier run instead of training]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

MIB = 2**20
COUNTED = 256 * 1024
LINE = re.compile(r"__LOG_MEMORY__ MemoryLog(\w+) \{(.*)\}\s*$")


def _field(body: str, name: str) -> str | None:
    found = re.search(name + r': "?([^" ]*)"?', body)
    return found.group(1) if found else None


def events(log: str, counted: int = COUNTED) -> list[tuple[str, int, int, str, int]]:
    """The allocations of ``counted`` bytes or more and their frees: (kind, id, bytes, what,
    step)."""
    found: list[tuple[str, int, int, str, int]] = []
    sizes: dict[int, tuple[int, str]] = {}
    step = -1
    for line in log.splitlines():
        if line.startswith("__STEP__"):
            step = int(line.split()[1])
            continue
        match = LINE.search(line)
        if not match:
            continue
        kind, body = match.group(1), match.group(2)
        ident = _field(body, "allocation_id")
        if ident is None:
            continue
        if kind in ("TensorAllocation", "RawAllocation"):
            size = int(_field(body, "allocated_bytes") or _field(body, "num_bytes") or 0)
            if size >= counted:
                shape = "x".join(re.findall(r"size: (\d+)", body))
                what = f"{_field(body, 'kernel_name') or _field(body, 'operation')} {shape}"
                what += f" {_field(body, 'dtype') or ''}"
                sizes[int(ident)] = (size, what)
                found.append(("+", int(ident), size, what, step))
        elif kind in ("TensorDeallocation", "RawDeallocation") and int(ident) in sizes:
            size, what = sizes.pop(int(ident))
            found.append(("-", int(ident), size, what, step))
    return found


def counts(found: list[tuple[str, int, int, str, int]]) -> dict[str, int]:
    """Kernel and shape (a loop iteration's ``body/_N/`` left out) -> the most buffers of it
    alive at once in the last step."""
    last = max((e[4] for e in found), default=-1)
    alive: dict[str, int] = {}
    most: dict[str, int] = {}
    for kind, _ident, _size, what, step in found:
        if step != last:
            continue
        what = re.sub(r"body/_\d+/", "", what)
        alive[what] = alive.get(what, 0) + (1 if kind == "+" else -1)
        most[what] = max(most.get(what, 0), alive[what])
    return most


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        from order_check import log_child

        log_child(argv[1], int(argv[2]), argv[3])
        return 0
    from tfaccel.planning.bfc import Event, replay

    trace = "--trace" in argv
    args = [a for a in argv if a not in ("--trace", "--counts")]
    name, batch = args[0], int(args[1])
    dtype = args[2] if len(args) > 2 else "float32"
    if len(args) > 4:  # a child's output and log kept from before: OUT ERR
        stdout, stderr = Path(args[3]).read_text(), Path(args[4]).read_text()
    else:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="log_memory=2")
        env["TF_ENABLE_ONEDNN_OPTS"] = "1"
        command = [sys.executable, __file__, "--child", name, str(batch), dtype]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        stdout, stderr = done.stdout, done.stderr
    measured = json.loads(stdout.strip().splitlines()[-1])["peak"]
    found = events(stderr)
    live: dict[int, tuple[int, str, int]] = {}
    current = peak = 0
    at_peak: dict[int, tuple[int, str, int]] = {}
    replayed: list[Event] = []
    ends: list[int] = []
    last = max((e[4] for e in found), default=-1)
    for n, (kind, ident, size, what, step) in enumerate(found):
        if n and step != found[n - 1][4]:
            ends.append(len(replayed))
        if kind == "+":
            live[ident] = (size, what, step)
            current += size
            replayed.append(Event(ident, size))
            if current > peak:
                peak, at_peak = current, dict(live)
        else:
            live.pop(ident, None)
            current -= size
            replayed.append(Event(ident, 0))
        if trace and step == last:
            print(f"{kind}{size / MIB:8.3f} {current / MIB:8.2f}  {what}")
    ends.append(len(replayed))
    print(f"{name} batch {batch} {dtype}: measured peak {measured / MIB:.2f} MiB")
    print(
        "the log's counted allocations replayed on the BFC allocator, peak after each step: "
        + ", ".join(f"{replay(replayed[:end]) / MIB:.2f}" for end in ends)
        + " MiB"
    )
    print(f"the peak of their sum: {peak / MIB:.2f} MiB, alive then:")
    for size, what, step in sorted(at_peak.values(), key=lambda v: (v[2], v[1])):
        print(f"  {size / MIB:8.3f} MiB  step {step}  {what}")
    if "--counts" in argv:
        print("the most buffers of each kernel alive at once in the last step (more than one):")
        for what, most in sorted(counts(events(stderr, counted=1)).items()):
            if most > 1:
                print(f"  {most:5d}  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
