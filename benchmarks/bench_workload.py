"""Unchanged scripts, end to end: plan's predicted peak, tune's wall time, and the tuned run
against the script's own.

For each script of ``tests/data/scripts/`` (the ten shapes of issue 26, written as keras.io and
tensorflow.org write them; the ``GradientTape`` one with its ``tfaccel.workload.mark`` line),
with its benchmark arguments (``SCRIPTS``) and its files pointed into a temporary directory of
its own:

* **plan**: ``tfaccel plan --device this-cpu --json SCRIPT ARGS`` predicts the training step's
  peak memory on this CPU; a fresh process runs the script up to its ``fit``
  (``tfaccel.workload.capture``), trains three steps of that workload and reads the CPU
  allocator's peak (``get_memory_info("CPU:0")["peak"]``, after ``reset_memory_stats``;
  ``TF_ENABLE_ONEDNN_OPTS=1``, which the CPU allocator's statistics need);
* **tune**: ``tfaccel tune --budget B --db DB SCRIPT ARGS`` with the batch fixed to the
  script's own (``run --tuned`` keeps it), XLA off/on and 1 or 8 steps per execution: its wall
  time (the command: TensorFlow's import and the capture included) against the budget, the
  winner it stored and its own measured ratio over the script's configuration;
* **tuned against own**: the script run in full, ``--rounds`` times each, interleaved (own,
  tuned, tuned, own, ...), each run a fresh process: ``tfaccel run SCRIPT`` against ``tfaccel
  run --tuned SCRIPT``. Timed: the epochs after the first (the first holds tracing and XLA
  compilation), median and IQR; for the ``GradientTape`` loop, which calls no ``fit``, the
  whole run (``per run``: the first pass of ``--tuned`` included).

    python benchmarks/bench_workload.py [--budget 30] [--rounds 3] [--epochs 3] [--json]
    python benchmarks/bench_workload.py --smoke     # one script, a short tune, 2 rounds

Measured on the 2-core AMD EPYC, CPU only, ``--budget 20 --rounds 3 --epochs 3`` (DenseNet's
budget 4x: 80 s), 04:00-04:43 UTC; load average 7.6 at the start and 6-7 throughout (other
benchmarks on the same two cores), 0.5 at the end:

    script                plan MiB peak MiB   error
    cnn_arrays                7.8    24.4  -68.1%
    image_folder              8.2    10.0  -17.7%
    bilstm_text               3.0     0.0       -
    conv1d_timeseries         2.5     2.0  +26.4%
    feature_space             0.1     0.0       -
    gradient_tape_marked      0.7    32.0  -97.8%
    pydataset_train_step      0.1     0.0       -
    vae                         -    14.1       -  (plan refused: VAE has no call())
    densenet_resizer        132.9   105.9  +25.5%
    mirrored                  8.9    16.3  -45.3%

    script                tune wall budget  winner
    cnn_arrays                24.5s    20s  bs128 float32 xla=False spe=1 numpy  (tune: x1.00)
    image_folder              38.4s    20s  bs32 float32 xla=False spe=1 as-given  (tune: x1.09)
    bilstm_text               17.7s    20s  bs32 float32 xla=False spe=1 numpy  (tune: x1.00)
    conv1d_timeseries         25.4s    20s  bs32 float32 xla=False spe=1 numpy  (tune: x1.00)
    feature_space             36.1s    20s  bs32 float32 xla=False spe=1 as-given  (tune: x0.63)
    gradient_tape_marked      30.0s    20s  bs64 float32 xla=False spe=8 pipeline  (tune: x2.21)
    pydataset_train_step      26.4s    20s  bs32 float32 xla=False spe=8 pipeline  (tune: x2.91)
    vae                       25.8s    20s  bs128 float32 xla=False spe=1 numpy  (tune: x1.00)
    densenet_resizer         145.8s    80s  bs16 float32 xla=False spe=1 as-given  (tune: x1.16)
    mirrored                  20.8s    20s  bs64 float32 xla=False spe=1 as-given  (tune: x0.48)

    script                             own s (IQR)            tuned s (IQR) speedup
    cnn_arrays               0.595 (0.567-0.685)    1.297 (0.994-1.346)  x0.46
    image_folder             0.685 (0.605-0.696)    0.647 (0.643-0.677)  x1.06  (overlap: noise)
    bilstm_text              1.537 (1.497-2.327)    1.311 (1.225-1.318)  x1.17
    conv1d_timeseries        0.921 (0.739-1.190)    0.618 (0.597-0.860)  x1.49  (overlap: noise)
    feature_space            1.300 (1.186-1.599)    1.052 (0.973-1.073)  x1.24
    gradient_tape_marked     1.674 (1.642-1.713)    3.810 (3.744-4.000)  x0.44 per run
    pydataset_train_step     0.148 (0.145-0.163)    0.102 (0.081-0.127)  x1.45
    vae                      1.023 (1.007-1.126)    1.036 (0.992-1.090)  x0.99  (overlap: noise)
    densenet_resizer         8.359 (7.471-8.493)    5.974 (5.405-7.733)  x1.40  (overlap: noise)
    mirrored                 0.328 (0.324-0.337)    0.336 (0.324-0.471)  x0.98  (overlap: noise)
    median speedup over the scripts: x1.12

Against the issue's targets, honestly: **not met**. The median gain is x1.12 (target >= 1.5);
the tune kept the script's own configuration for 8 of the 10, so their two columns run the same
thing and their ratios (x0.46 to x1.49) are this loaded machine's noise in 3 rounds: cnn_arrays'
x0.46 did not come back in a check of 3+3 runs right after (a first pass of the capture then
the script, against the script alone: epochs of 0.48-1.16 s against 0.43-0.87 s). Where the
tune found a winner, its gain carried over to the real run for the PyDataset (x2.91 in tune,
x1.45 in the run: 8 steps per execution) but not for the ``GradientTape`` loop, which calls
no ``fit`` (only the precision can apply; the run is slower by the first pass of ``--tuned``,
the script's pre-fit work done twice). Tune's search (``elapsed_s``) stayed within its budget
for 9 of 10 (DenseNet: 131 s for 80 s: its first trial's tracing and the final comparison
each take tens of seconds); the command's wall time, with TensorFlow's import and the capture,
is 0.9-1.9x the budget. Plan's peak is within 20% of the measured one for image_folder only
(conv1d +26%, DenseNet +26%; the small models -45% to -98%); the allocator reported a peak of 0
for bilstm_text, feature_space and pydataset_train_step (not looked into), and plan refuses the
VAE (no ``call``). No ``precision`` trial ran: on this CPU the space's precision is float32.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCRIPTS_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "scripts"

# script (in tests/data/scripts), its own batch, the arguments of its benchmark runs
SCRIPTS: dict[str, tuple[int, list[str]]] = {
    "cnn_arrays": (128, ["--examples", "4096"]),
    "image_folder": (32, ["--per-class", "256"]),
    "bilstm_text": (32, ["--examples", "1024"]),
    "conv1d_timeseries": (32, ["--examples", "2048"]),
    "feature_space": (32, ["--rows", "2048"]),
    "gradient_tape_marked": (64, ["--examples", "8192"]),
    "pydataset_train_step": (32, []),
    "vae": (128, ["--examples", "4096"]),
    "densenet_resizer": (16, ["--examples", "256"]),
    "mirrored": (64, []),
}
LONG_TRACE = {"densenet_resizer": 4}
"""Scripts whose first trial takes longer than the budget (tracing DenseNet121's step takes
about 30 s here): their budget is this many times --budget."""


def _writes(name: str, folder: Path) -> list[str]:
    """The options that point a script's own files into its benchmark folder (shapes.json)."""
    shapes = json.loads((SCRIPTS_DIR / "shapes.json").read_text())
    pairs = shapes[name].get("writes", [])
    return [w for option, path in pairs for w in (option, str(folder / path))]


# Runs the script as `tfaccel run [--tuned]` does, with each epoch timed from outside it.
TIMED_RUN = """
import json, sys, time
import keras
from tfaccel import runtime
from tfaccel.scripts import run_script

tuned_mode, db, script, out = sys.argv[1:5]
args = sys.argv[5:]
epochs, examples = [], {}

class Clock(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.began = time.perf_counter()
    def on_epoch_end(self, epoch, logs=None):
        epochs.append(time.perf_counter() - self.began)

original = keras.Model.fit
def fit(self, *a, **kw):
    kw["callbacks"] = list(kw.get("callbacks") or []) + [Clock()]
    return original(self, *a, **kw)

runtime.setup()
info = {}
began = time.perf_counter()
if tuned_mode == "on":
    from tfaccel.tuning.tuned import applied, prepare
    tuned = prepare(script, args, mode="on", db=db)
    with applied(tuned):
        inner = keras.Model.fit
        def timed(self, *a, **kw):
            kw["callbacks"] = list(kw.get("callbacks") or []) + [Clock()]
            return inner(self, *a, **kw)
        keras.Model.fit = timed
        status = run_script(script, args)
    info = {"took_effect": tuned.took_effect, "says": tuned.says}
else:
    keras.Model.fit = fit
    status = run_script(script, args)
total = time.perf_counter() - began
json.dump({"status": status, "epochs": epochs, "total_s": total, **info}, open(out, "w"))
"""

PEAK = """
import json, sys
import tensorflow as tf
from tfaccel.workload import capture

script, out = sys.argv[1:3]
workload = capture(script, sys.argv[3:], command="bench")
model = workload.model
if not getattr(model, "compiled", False):  # its own loop, marked: its optimizer and loss
    model.compile(optimizer=workload.compile.optimizer, loss=workload.compile.loss)
kwargs = {k: v for k, v in workload.fit_kwargs.items() if k in ("batch_size",)}
model.fit(workload.x, workload.y, steps_per_epoch=1, epochs=1, verbose=0, **kwargs)  # traced
tf.config.experimental.reset_memory_stats("CPU:0")
model.fit(workload.x, workload.y, steps_per_epoch=3, epochs=1, verbose=0, **kwargs)
peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
json.dump({"peak": int(peak), "batch": workload.batch_size}, open(out, "w"))
"""


def _env() -> dict[str, str]:
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="1")


def _tfaccel(*words: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tfaccel", *words],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return done, time.perf_counter() - began


def _python(code: str, *words: str, cwd: Path) -> dict[str, Any]:
    """Run ``code`` with ``words`` as its arguments; it writes its JSON to cwd/child.json."""
    out = cwd / "child.json"
    done = subprocess.run(
        [sys.executable, "-c", code, *words],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(out.read_text()))


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        v = values[0] if values else float("nan")
        return v, v, v
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def bench_script(name: str, *, budget: int, rounds: int, epochs: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"bench_workload_{name}_"))
    script = SCRIPTS_DIR / f"{name}.py"
    batch, own_args = SCRIPTS[name]
    words = [*own_args, *_writes(name, folder), "--epochs", str(epochs)]
    db = folder / "results.sqlite"
    budget *= LONG_TRACE.get(name, 1)
    row: dict[str, Any] = {"script": name}

    # plan's prediction against the allocator's peak, at the script's own batch
    done, _ = _tfaccel("plan", "--device", "this-cpu", "--json", str(script), *words, cwd=folder)
    if done.returncode == 0:
        doc = json.loads(done.stdout)
        here = next((d for d in doc["devices"] if d.get("this_machine")), doc["devices"][0])
        row["predicted_peak"] = int(here["needed_bytes"])
    else:
        row["plan_error"] = done.stderr.strip().splitlines()[-1][:300]
    try:
        measured = _python(PEAK, str(script), str(folder / "child.json"), *words, cwd=folder)
        row["measured_peak"] = measured["peak"]
    except RuntimeError as exc:
        row["peak_error"] = str(exc)[-300:]
        measured = {}
    if row.get("predicted_peak") and measured.get("peak"):
        row["peak_ratio"] = row["predicted_peak"] / measured["peak"] - 1

    # tune: its wall time against its budget, the winner stored (the batch stays the
    # script's: `run --tuned` keeps it)
    done, wall = _tfaccel(
        "tune", "--budget", str(budget), "--db", str(db), "--json", "--no-progress",
        "--rounds", str(max(3, rounds)), "--space", f"batch_size={batch}",
        "--space", "jit=off,on", "--space", "steps_per_execution=1,8",
        str(script), *words, cwd=folder,
    )  # fmt: skip
    row["tune_wall_s"], row["tune_budget_s"] = wall, budget
    if done.returncode != 0:
        row["tune_error"] = done.stderr.strip().splitlines()[-1][:300]
        return row
    tuned = json.loads(done.stdout)
    row["tune_elapsed_s"] = tuned["elapsed_s"]
    row["winner"] = tuned["best"]
    verdict = tuned.get("baseline_verdict") or {}
    row["tune_says"] = verdict.get("says")
    row["tune_ratio"] = verdict.get("ratio")

    # the script's own configuration against the tuned one, interleaved, a process each
    samples: dict[str, list[float]] = {"own": [], "tuned": []}
    orders = [("own", "tuned"), ("tuned", "own")]
    effect = None
    for i in range(rounds):
        for which in orders[i % 2]:
            out = folder / "child.json"
            mode = "on" if which == "tuned" else "off"
            result = _python(TIMED_RUN, mode, str(db), str(script), str(out), *words, cwd=folder)
            steady = result["epochs"][1:] or result["epochs"]
            # its own loop (no fit): the whole run, its first epoch's tracing included
            samples[which].append(statistics.median(steady) if steady else result["total_s"])
            if which == "tuned":
                effect = result.get("took_effect")
    row["timed"] = "epoch" if result["epochs"] else "run"
    row["took_effect"] = effect
    for which, values in samples.items():
        q1, median, q3 = quartiles(values)
        row[which] = {"epoch_s": {"q1": q1, "median": median, "q3": q3}, "samples": values}
    own, tuned_s = row["own"]["epoch_s"], row["tuned"]["epoch_s"]
    row["speedup"] = own["median"] / tuned_s["median"] if tuned_s["median"] else None
    row["overlap"] = not (tuned_s["q3"] < own["q1"] or own["q3"] < tuned_s["q1"])
    return row


def _mib(value: Any) -> str:
    return f"{value / 2**20:7.1f}" if isinstance(value, (int, float)) else "      -"


def report(rows: list[dict[str, Any]]) -> str:
    lines = [f"on {os.cpu_count()} CPU cores (shared with other work when loaded)"]
    lines.append(f"{'script':<21} {'plan MiB':>8} {'peak MiB':>8} {'error':>7}")
    for r in rows:
        err = f"{r['peak_ratio'] * 100:+6.1f}%" if "peak_ratio" in r else "      -"
        plan = f"{_mib(r.get('predicted_peak'))} {_mib(r.get('measured_peak'))}"
        lines.append(f"{r['script']:<21} {plan} {err}  {r.get('plan_error', '')}")
    lines.append("")
    lines.append(f"{'script':<21} {'tune wall':>9} {'budget':>6}  winner")
    for r in rows:
        w = r.get("winner") or {}
        label = (f"bs{w.get('batch_size')} {w.get('precision')} xla={w.get('jit')} "
                 f"spe={w.get('steps_per_execution')} {w.get('feed')}") if w else r.get(
            "tune_error", "")[:80]  # fmt: skip
        ratio = f"  (tune: x{r['tune_ratio']:.2f})" if r.get("tune_ratio") else ""
        lines.append(
            f"{r['script']:<21} {r['tune_wall_s']:8.1f}s {r['tune_budget_s']:5d}s  {label}{ratio}"
        )
    lines.append("")
    lines.append(f"{'script':<21} {'own s (IQR)':>24} {'tuned s (IQR)':>24} speedup")
    speedups = []
    for r in rows:
        if "own" not in r:
            continue
        o, t = r["own"]["epoch_s"], r["tuned"]["epoch_s"]
        speedups.append(r["speedup"])
        lines.append(
            f"{r['script']:<21} {o['median']:8.3f} ({o['q1']:.3f}-{o['q3']:.3f}) "
            f"{t['median']:8.3f} ({t['q1']:.3f}-{t['q3']:.3f})  x{r['speedup']:.2f}"
            + (" per run" if r.get("timed") == "run" else "")
            + ("  (overlap: noise)" if r["overlap"] else "")
        )
    if speedups:
        lines.append(f"median speedup over the scripts: x{statistics.median(speedups):.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--only", action="append", choices=sorted(SCRIPTS))
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    names = args.only or (["cnn_arrays"] if args.smoke else list(SCRIPTS))
    budget, rounds = (15, 2) if args.smoke else (args.budget, args.rounds)
    rows = []
    for n in names:
        rows.append(bench_script(n, budget=budget, rounds=rounds, epochs=args.epochs))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # each row as it ends
    print(json.dumps(rows, indent=2) if args.json else report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
