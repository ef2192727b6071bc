"""Unchanged scripts, end to end: plan's predicted peak, tune's wall time, and the tuned run
against the script's own.

For each script of ``tests/data/scripts/`` (the ten shapes of issue 26, written as keras.io and
tensorflow.org write them; the ``GradientTape`` one with its ``tfaccel.workload.mark`` line),
with its benchmark arguments (``SCRIPTS``) and its files pointed into a temporary directory of
its own:

* **plan**: ``tfaccel plan --device this-cpu --json SCRIPT ARGS``'s figure for this CPU ("plan
  RAM": every allocation of the step, its 10% margin included, what the machine's RAM must
  hold; the allocator's statistics cannot check it), and the same plan's peak under the
  counting rules of the allocator it is checked against ("plan": the workload's model and
  optimizer as ``tfaccel plan`` plans them, at the script's batch, per replica under a
  strategy, no margin; oneDNN's CPU allocator counts allocations of 256 KiB and more only),
  as ``benchmarks/bench_plan.py`` predicts it. Measured ("peak") as bench_plan measures it: a
  fresh process runs the script up to its ``fit`` (``tfaccel.workload.capture``), takes one
  ``fit`` step (traced), resets the allocator's statistics and runs the model's own compiled
  step (its ``train_step``) three times on the first batch, without ``fit``'s input pipeline;
  what was in use at the reset beyond the model's and optimizer's variables (the script's own
  tensors) is taken off; ``get_memory_info("CPU:0")["peak"]``, ``TF_ENABLE_ONEDNN_OPTS=1``
  (which the CPU allocator's statistics need). "fit" is the peak of three ``fit`` steps on the
  data as the script gives it, for comparison only: it counts ``fit``'s conversion of whole
  arrays to tensors and its pipeline, which a plan of the training step does not. No error is
  given under 1 MiB measured: a small model's step is then mostly or wholly uncounted;
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
    python benchmarks/bench_workload.py --plan-only # the plan against the allocator only
    python benchmarks/bench_workload.py --no-plan --only mirrored --rounds 5  # no plan
    python benchmarks/bench_workload.py --startup [--startup-against OLD/src]  # below
    python benchmarks/bench_workload.py --no-plan --tuned-all  # the batch size tuned too

* **start-up** (``--startup``): what ``tfaccel run --tuned`` adds to every run, on a tiny
  script with its own loop, tuned once (its script record found, nothing applied): ``python
  s.py``, ``tfaccel run s.py`` and ``tfaccel run --tuned s.py`` (and, with
  ``--startup-against``, the same from another source tree), interleaved, a fresh process each,
  wall and CPU seconds (median, IQR), and ``-X importtime`` of ``tfaccel.tuning``. Results in
  ``benchmarks/results/bench_workload_startup.txt``.

Plan against the allocator (``--plan-only``), measured on the 2-core AMD EPYC, CPU only,
twice: 04:55-05:00 and 05:04-05:10 UTC, load average 4.3 then 1.9 at the starts, 2-5 throughout
(other benchmarks on the same two cores; a peak of 17 for a minute of the first), then the four
small models at 8x their batch (``--batch-scale 8``), 05:00-05:02 and 05:10-05:11 UTC, load 2-3.
Measured peak and error of each run, first / second; "fit" of the first run:

    script               batch plan RAM plan MiB  peak MiB          error       fit MiB
    cnn_arrays             128      7.8      7.7   8.2 /  8.2    -6.5% / -6.5%     25.7
    image_folder            32      8.2      8.0   6.9 /  7.4   +16.4% / +8.5%     10.9
    bilstm_text             32      3.4      0.0   0.0 /  0.0     (uncounted)       0.3
    conv1d_timeseries       32      2.5      2.2   2.0 /  2.0   +12.5% / +12.5%     3.0
    feature_space           32      0.1      0.0   0.0 /  0.0     (uncounted)       0.0
    gradient_tape_marked    64      0.7      0.0   0.0 /  0.0     (uncounted)      32.0
    pydataset_train_step    32      0.1      0.0   0.0 /  0.0     (uncounted)       0.0
    vae                    128        -        -  14.1 / 12.1    (plan refused)    27.1
    densenet_resizer        16    132.9     85.9  89.2 / 87.8    -3.8% / -2.2%    108.8
    mirrored                64      8.9      8.6  10.0 / 10.3   -13.6% / -16.4%    10.0
    bilstm_text            256     19.6      4.5   6.0 /  6.0   -25.0% / -25.0%      4.5
    feature_space          256      0.3      0.0   0.0 /  0.0     (uncounted)       0.0
    gradient_tape_marked   512      2.4      2.0   1.5 /  1.5   +30.6% / +30.6%     36.6
    pydataset_train_step   256      0.2      0.0   0.0 /  0.0     (uncounted)       0.0

"plan RAM" is ``tfaccel plan``'s figure for this CPU (every allocation, 10% margin): the one
the previous table compared with the allocator, which sees only allocations of 256 KiB and
more, and with ``fit``'s whole-array tensors and pipeline ("fit MiB"), which a training step's
plan does not hold. Compared as bench_plan compares, the plan is within 20% for the five
models the allocator sees at their own batch (-16% to +16%); at 8x, the bidirectional LSTM is
under by 25% in both runs (the step measured 6.0 MiB, three ``fit`` steps in the same
process 4.5, the plan's figure: an RNN's iterations in flight, which bench_plan notes move
its peak) and the ``GradientTape`` MLP over by 0.5 MiB of 1.5 (two allocator-sized buffers:
its step is its input batch and little else that is counted).
The small models' steps (bilstm_text, feature_space, gradient_tape_marked, pydataset_train_step
at their batch) allocate nothing of 256 KiB: plan and allocator both say 0, which checks
nothing. The VAE is refused by the plan: it has no ``call`` (its ``train_step`` calls its
encoder and decoder), and the plan traces Keras' standard step through ``call``; its custom
``train_step`` is the one measured. A ``MirroredStrategy`` (one replica here) measures 14-16%
above the traced replica step: the strategy's own buffers, which the plan does not model.

Tune and the tuned runs, measured before (not rerun), ``--budget 20 --rounds 3 --epochs 3``
(DenseNet's budget 4x: 80 s), 04:00-04:43 UTC; load average 7.6 at the start and 6-7
throughout (other benchmarks on the same two cores), 0.5 at the end:

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
is 0.9-1.9x the budget. (The plan's figures of this run were compared with the wrong
measurement: see the table above.) No ``precision`` trial ran: on this CPU the space's
precision is float32.

The same, re-run on a quiet machine (load average 0.3-1.2), 05:50-06:03 UTC, DenseNet left out:

    script                tune wall budget  winner
    cnn_arrays                11.5s    20s  bs128 float32 xla=False spe=1 numpy  (tune: x1.00)
    image_folder              22.4s    20s  bs32 float32 xla=False spe=1 as-given  (tune: x0.98)
    bilstm_text               12.6s    20s  bs32 float32 xla=False spe=1 numpy  (tune: x1.00)
    conv1d_timeseries         12.5s    20s  bs32 float32 xla=False spe=1 numpy  (tune: x1.00)
    feature_space             19.4s    20s  bs32 float32 xla=False spe=8 pipeline  (tune: x2.54)
    gradient_tape_marked      14.2s    20s  bs64 float32 xla=False spe=8 pipeline  (tune: x2.19)
    pydataset_train_step      15.4s    20s  bs32 float32 xla=False spe=8 pipeline  (tune: x2.78)
    vae                       10.5s    20s  bs128 float32 xla=False spe=1 numpy  (tune: x1.00)
    mirrored                  21.3s    20s  bs64 float32 xla=False spe=1 as-given  (tune: x0.93)

    script                             own s (IQR)            tuned s (IQR) speedup
    cnn_arrays               0.264 (0.264-0.275)    0.265 (0.262-0.268)  x1.00  (overlap: noise)
    image_folder             0.302 (0.298-0.302)    0.295 (0.294-0.334)  x1.02  (overlap: noise)
    bilstm_text              0.572 (0.536-0.799)    0.508 (0.504-0.530)  x1.13
    conv1d_timeseries        0.299 (0.298-0.324)    0.334 (0.316-0.344)  x0.90  (overlap: noise)
    feature_space            0.339 (0.336-0.342)    0.292 (0.290-0.293)  x1.16
    gradient_tape_marked     0.680 (0.679-0.746)    1.188 (1.186-1.193)  x0.57 per run
    pydataset_train_step     0.060 (0.059-0.080)    0.048 (0.048-0.049)  x1.25
    vae                      0.534 (0.487-0.535)    0.535 (0.489-0.544)  x1.00  (overlap: noise)
    mirrored                 0.346 (0.328-0.354)    0.488 (0.406-0.491)  x0.71
    median speedup over the scripts: x1.00

Quiet, the search's own verdicts are clear: the script's configuration is the fastest it found
for 6 of 9, and 8 steps per execution with the pipeline feed wins x2.2-2.8 for the other 3;
in the scripts' whole epochs that becomes x1.16 and x1.25 (tune times the step alone). Every
search ended inside its budget (5.8-16.8 s of 20). Two rows are defects to chase: the
``MirroredStrategy`` script runs x0.71 under ``run --tuned`` with the script's own
configuration as the winner (beyond the noise), and the ``GradientTape`` loop pays
``--tuned``'s first pass on every run.

Those two rows chased (``--no-plan --only mirrored --only gradient_tape_marked --rounds 6``,
each run's CPU time per epoch beside its wall time: the process's own work, which other
processes on the two cores move less than its wall time). The current code, 07:33-07:37 UTC,
load 1.5-3.2, ``--budget 40``; then the code before the fix (the same harness on the previous
commit's source), 07:37-07:41 UTC, load 1.8-2.8:

    script                 code    own s (IQR)            tuned s (IQR)          speedup
    mirrored               now     0.539 (0.461-0.613)    0.822 (0.636-0.852)    x0.66
      CPU s                        0.408 (0.385-0.430)    0.420 (0.387-0.443)    x0.97
    gradient_tape_marked   now     1.175 (1.006-1.239)    1.594 (1.421-1.619)    x0.74 per run
      CPU s                        0.876 (0.825-0.990)    1.072 (1.033-1.129)    x0.82
    gradient_tape_marked   before  1.292 (1.139-1.339)    2.102 (1.997-2.167)    x0.61 per run
      CPU s                        0.835 (0.804-0.887)    1.457 (1.365-1.543)    x0.57

The ``MirroredStrategy`` row is this machine's two-speed wall time, not ``--tuned``'s work: the
tuned run does the same CPU work per epoch (x0.97, IQRs overlapping), and its wall time swings
both ways. Run the same way at 07:28-07:30 (load 2.6-3.0) it was x1.52 the other way (own 0.931
(0.926-0.945), tuned 0.611 (0.603-0.649), CPU 0.400 against 0.390, x1.02), and one tuned
configuration of the earlier code gave epochs of 0.28 and 0.93 s in neighbouring runs. A bisection
under load 7-9 (06:50-07:04, 6 rounds, --epochs 6, CPU s per epoch: the script as written
0.921 (0.919-0.944); the first pass of ``--tuned`` then the script 0.936 (0.930-0.952); the
``fit`` wrapper alone 0.995 (0.955-1.023); both 0.958 (0.941-0.982); wall times 2.0-2.5 s,
IQRs 1.4-3.3) found no step that changes it beyond a few percent. Two mechanisms were
fixed all the same: the first pass leaves no strategy behind (tested), and a winner equal to
the model's own settings no longer resets its train function (which made Keras trace it again
at every ``fit`` call); an unchanged script now skips the first pass (below).

The ``GradientTape`` loop, unchanged since its tune, now finds its winner by tune's script record
and runs without the first pass: +0.20 s CPU per run instead of +0.62 s. What is left (0.2-0.4
s) is fixed per run: importing ``tfaccel.tuning`` (0.33 s: its package imports ``api``, which
imports ``planning`` and ``diagnosis``) and one probe of this machine's fingerprint (0.13 s:
it reads every installed package's metadata); on a run of minutes it is nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
    "gan": (64, ["--examples", "1024"]),
}
LONG_TRACE = {"densenet_resizer": 4}
COUNTED_ENOUGH = 1 << 20
"""Below this measured peak (bytes) no error is given: the CPU allocator counts allocations of
256 KiB and more only, so a small model's step is mostly or wholly uncounted (a peak of 0)."""
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
epochs, cpu, examples = [], [], {}

setups = []

class Clock(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):  # what the fit trains with, to compare the two runs
        import tensorflow as tf
        threading = tf.config.threading
        setups.append({"jit": bool(self.model.jit_compile),
                       "spe": int(self.model.steps_per_execution),
                       "policy": self.model.dtype_policy.name, "params": dict(self.params),
                       "threads": [threading.get_intra_op_parallelism_threads(),
                                   threading.get_inter_op_parallelism_threads()]})
    def on_epoch_begin(self, epoch, logs=None):
        self.began, self.cpu = time.perf_counter(), time.process_time()
    def on_epoch_end(self, epoch, logs=None):
        epochs.append(time.perf_counter() - self.began)
        cpu.append(time.process_time() - self.cpu)

original = keras.Model.fit
def fit(self, *a, **kw):
    kw["callbacks"] = list(kw.get("callbacks") or []) + [Clock()]
    return original(self, *a, **kw)

runtime.setup()
info = {}
began, began_cpu = time.perf_counter(), time.process_time()
if tuned_mode in ("on", "all"):
    from tfaccel.tuning.tuned import applied, prepare
    tuned = prepare(script, args, mode=tuned_mode, db=db)
    with applied(tuned):
        inner = keras.Model.fit
        def timed(self, *a, **kw):
            kw["callbacks"] = list(kw.get("callbacks") or []) + [Clock()]
            return inner(self, *a, **kw)
        keras.Model.fit = timed
        status = run_script(script, args)
    info = {"took_effect": tuned.took_effect, "says": tuned.says,
            "found_by": getattr(tuned, "found_by", None)}
else:
    keras.Model.fit = fit
    status = run_script(script, args)
total, total_cpu = time.perf_counter() - began, time.process_time() - began_cpu
json.dump({"status": status, "epochs": epochs, "cpu": cpu, "total_s": total,
           "total_cpu_s": total_cpu, "setups": setups, **info}, open(out, "w"))
"""

# The plan's peak under the counting rules of the allocator it is compared with (oneDNN's CPU
# allocator counts allocations of 256 KiB and more only), as benchmarks/bench_plan.py predicts
# it: the model and optimizer `tfaccel plan` gives the memory model for this workload, traced
# at the script's batch (per replica under a strategy), no margin.
PREDICTED = """
import json, sys
from tfaccel.planning import allocator_rules, estimate_memory
from tfaccel.planning.source import workload_model
from tfaccel.workload import capture

script, out = sys.argv[1:3]
workload = capture(script, sys.argv[3:], command="bench")
model, optimizer, notes = workload_model(workload)
if optimizer is not None:  # its own loop, marked: the loop's optimizer and loss
    model.compile(optimizer=optimizer, loss=workload.compile.loss)
batch = workload.batch_size
strategy = getattr(workload.model, "distribute_strategy", None)
replicas = int(getattr(strategy, "num_replicas_in_sync", 1))
if workload.strategy is not None and replicas > 1:
    batch = max(1, batch // replicas)
estimate = estimate_memory(model, batch, rules=allocator_rules("cpu:0"), margin=0.0)
json.dump({"peak": estimate.peak_bytes, "batch": batch, "parts": estimate.parts,
           "peak_op": estimate.peak_op, "notes": notes}, open(out, "w"))
"""

# The allocator's peak of one training step, as benchmarks/bench_plan.py measures it, on the
# first batch of the script's data: after a first `fit` step (traced; the optimizer built),
# the statistics are reset and the model's own compiled step (`train_function`, its own
# `train_step`) runs three times on that batch, without `fit`'s input pipeline. What was in
# use at the reset apart from the model's and optimizer's counted variables (the script's own
# tensors: a `from_tensor_slices` dataset's arrays) is not the step's and is taken off. Then,
# for comparison only, the peak of three steps of `fit` on the data as the script gives it:
# the allocator counts `fit`'s conversion of whole arrays and its pipeline, the plan does not.
PEAK = """
import json, sys
import numpy as np
import tensorflow as tf
from tfaccel.planning import allocator_rules
from tfaccel.workload import capture
from tfaccel.workload.data import kind_of

script, out = sys.argv[1:3]
workload = capture(script, sys.argv[3:], command="bench")
model = workload.model
if not getattr(model, "compiled", False):  # its own loop, marked: its optimizer and loss
    model.compile(optimizer=workload.compile.optimizer, loss=workload.compile.loss)
x, y, n = workload.x, workload.y, workload.batch_argument
kind = kind_of(x)
if kind in ("arrays", "dict"):
    if kind == "dict":
        xb = {k: v[:n] for k, v in x.items()}
    elif isinstance(x, (list, tuple)):
        xb = [a[:n] for a in x]
    else:
        xb = x[:n]
    # as fit packs a batch: (x, y); without y, x alone ((x,) for a list of inputs)
    element = (xb, y[:n]) if y is not None else ((xb,) if isinstance(xb, list) else xb)
else:
    element = x[0] if kind == "pydataset" else next(iter(x))
element = tf.nest.map_structure(np.asarray, element)  # a dataset's tensors: out of the allocator
kwargs = {k: v for k, v in workload.fit_kwargs.items() if k in ("batch_size",)}
model.fit(x, y, steps_per_epoch=1, epochs=1, verbose=0, **kwargs)  # traced, optimizer built
rules = allocator_rules("cpu:0")
from tfaccel.planning.trace import optimizers_of
variables = [*model.variables, *(v for o in optimizers_of(model) for v in o.variables)]
counted = sum(rules.size(int(v.numpy().nbytes)) for v in variables)
tf.config.experimental.reset_memory_stats("CPU:0")
held = tf.config.experimental.get_memory_info("CPU:0")["current"] - counted
element = tf.nest.map_structure(tf.convert_to_tensor, element)  # counted, as the plan does
for _ in range(3):
    model.train_function(iter([element]))
step_peak = tf.config.experimental.get_memory_info("CPU:0")["peak"] - max(0, held)
tf.config.experimental.reset_memory_stats("CPU:0")
model.fit(x, y, steps_per_epoch=3, epochs=1, verbose=0, **kwargs)
fit_peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
json.dump({"peak": int(step_peak), "held": int(held), "fit_peak": int(fit_peak)}, open(out, "w"))
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


def plan_against_allocator(script: Path, words: list[str], folder: Path) -> dict[str, Any]:
    """``tfaccel plan``'s figure for this CPU (all allocations, its margin included: what the
    machine's RAM must hold), the plan's peak under the CPU allocator's counting rules, and
    the allocator's measured peaks (one training step; ``fit`` on the script's data)."""
    row: dict[str, Any] = {}
    done, _ = _tfaccel("plan", "--device", "this-cpu", "--json", str(script), *words, cwd=folder)
    if done.returncode == 0:
        doc = json.loads(done.stdout)
        here = next((d for d in doc["devices"] if d.get("this_machine")), doc["devices"][0])
        row["plan_ram"] = int(here["needed_bytes"])
    else:
        row["plan_error"] = done.stderr.strip().splitlines()[-1][:300]
    out = str(folder / "child.json")
    try:
        if "plan_error" not in row:
            predicted = _python(PREDICTED, str(script), out, *words, cwd=folder)
            row["predicted_peak"], row["peak_op"] = predicted["peak"], predicted["peak_op"]
        measured = _python(PEAK, str(script), out, *words, cwd=folder)
    except RuntimeError as exc:
        row["peak_error"] = str(exc)[-300:]
        return row
    row["measured_peak"], row["fit_peak"] = measured["peak"], measured["fit_peak"]
    row["held_at_reset"] = measured["held"]
    if "predicted_peak" in row and measured["peak"] >= COUNTED_ENOUGH:
        row["peak_ratio"] = row["predicted_peak"] / measured["peak"] - 1
    return row


def bench_script(
    name: str,
    *,
    budget: int,
    rounds: int,
    epochs: int,
    plan_only: bool = False,
    batch_scale: int = 1,
    plan: bool = True,
    tuned_all: bool = False,
) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"bench_workload_{name}_"))
    script = SCRIPTS_DIR / f"{name}.py"
    batch, own_args = SCRIPTS[name]
    words = [*own_args, *_writes(name, folder), "--epochs", str(epochs)]
    if batch_scale != 1:  # each script takes its batch as an option (per replica: mirrored)
        option = "--batch-size-per-replica" if name == "mirrored" else "--batch-size"
        words += [option, str(batch * batch_scale)]
    db = folder / "results.sqlite"
    budget *= LONG_TRACE.get(name, 1)
    row: dict[str, Any] = {"script": name, "batch": batch * batch_scale}

    # plan's prediction against the allocator's peak, at the script's own batch
    if plan:
        row.update(plan_against_allocator(script, words, folder))
    if plan_only:
        return row

    # tune: its wall time against its budget, the winner stored (the batch stays the
    # script's: `run --tuned` keeps it; with --tuned-all the batch is searched too, 1x-4x the
    # script's, and `run --tuned=all` applies it)
    batches = [batch, 2 * batch, 4 * batch] if tuned_all else [batch]
    row["tuned_mode"] = "all" if tuned_all else "on"
    done, wall = _tfaccel(
        "tune", "--budget", str(budget), "--db", str(db), "--json", "--no-progress",
        "--rounds", str(max(3, rounds)),
        "--space", "batch_size=" + ",".join(str(b) for b in batches),
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
    cpu: dict[str, list[float]] = {"own": [], "tuned": []}
    loads: list[float] = []
    orders = [("own", "tuned"), ("tuned", "own")]
    effect = None
    for i in range(rounds):
        for which in orders[i % 2]:
            out = folder / "child.json"
            mode = row["tuned_mode"] if which == "tuned" else "off"
            loads.append(os.getloadavg()[0])
            result = _python(TIMED_RUN, mode, str(db), str(script), str(out), *words, cwd=folder)
            steady = result["epochs"][1:] or result["epochs"]
            steady_cpu = result["cpu"][1:] or result["cpu"]
            # its own loop (no fit): the whole run, its first epoch's tracing included
            samples[which].append(statistics.median(steady) if steady else result["total_s"])
            cpu[which].append(
                statistics.median(steady_cpu) if steady_cpu else result["total_cpu_s"]
            )
            if which == "tuned":
                effect = result.get("took_effect")
                row["found_by"] = result.get("found_by")
            row.setdefault("setups", {})[which] = result.get("setups")
    row["timed"] = "epoch" if result["epochs"] else "run"
    row["took_effect"] = effect
    row["load"] = [min(loads), max(loads)]
    for which, values in samples.items():
        q1, median, q3 = quartiles(values)
        c1, cm, c3 = quartiles(cpu[which])
        row[which] = {
            "epoch_s": {"q1": q1, "median": median, "q3": q3},
            "samples": values,
            "cpu_s": {"q1": c1, "median": cm, "q3": c3},
            "cpu_samples": cpu[which],
        }
    own, tuned_s = row["own"]["epoch_s"], row["tuned"]["epoch_s"]
    row["speedup"] = own["median"] / tuned_s["median"] if tuned_s["median"] else None
    row["overlap"] = not (tuned_s["q3"] < own["q1"] or own["q3"] < tuned_s["q1"])
    return row


def _mib(value: Any) -> str:
    return f"{value / 2**20:8.1f}" if isinstance(value, (int, float)) else "       -"


def report(rows: list[dict[str, Any]]) -> str:
    lines = [f"on {os.cpu_count()} CPU cores (shared with other work when loaded)"]
    heads = ("plan RAM", "plan MiB", "peak MiB")
    planned = [r for r in rows if {"plan_ram", "plan_error", "measured_peak"} & set(r)]
    if planned:
        lines.append(
            f"{'script':<21} {'batch':>5} {' '.join(f'{h:>8}' for h in heads)} {'error':>7} fit MiB"
        )
    for r in planned:
        err = f"{r['peak_ratio'] * 100:+6.1f}%" if "peak_ratio" in r else "      -"
        plan = " ".join(_mib(r.get(k)) for k in ("plan_ram", "predicted_peak", "measured_peak"))
        why = r.get("plan_error") or r.get("peak_error", "")[-120:]
        lines.append(
            f"{r['script']:<21} {r['batch']:5d} {plan} {err} {_mib(r.get('fit_peak'))}  {why}"
        )
    lines.append(f"load average at the end: {os.getloadavg()[0]:.1f}")
    if all("tune_wall_s" not in r for r in rows):
        return "\n".join(lines)
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
    if any(r.get("tuned_mode") == "all" for r in rows):
        lines.append(
            "tuned: `run --tuned=all`, the tuned batch size applied too (it changes the "
            "optimisation); an epoch is the same examples in fewer, larger steps"
        )
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
        setups = r.get("setups") or {}
        if setups.get("own") != setups.get("tuned"):  # what each fit trained with
            lines.append(f"{'  fit own':<21} {setups.get('own')}")
            lines.append(f"{'  fit tuned':<21} {setups.get('tuned')}")
        if "cpu_s" in r["own"]:  # the process's CPU time: less moved by other work's load
            oc, tc = r["own"]["cpu_s"], r["tuned"]["cpu_s"]
            lines.append(
                f"{'  CPU s':<21} {oc['median']:8.3f} ({oc['q1']:.3f}-{oc['q3']:.3f}) "
                f"{tc['median']:8.3f} ({tc['q1']:.3f}-{tc['q3']:.3f})  "
                f"x{oc['median'] / tc['median']:.2f}; load {r['load'][0]:.1f}-{r['load'][1]:.1f}"
            )
    if speedups:
        lines.append(f"median speedup over the scripts: x{statistics.median(speedups):.2f}")
    return "\n".join(lines)


# A tiny script with its own training loop (marked): its run is mostly the start-up of Python,
# TensorFlow and Keras, which `tfaccel run --tuned` adds its own to.
TINY_SCRIPT = """
import keras
import numpy as np
import tensorflow as tf

import tfaccel

rng = np.random.default_rng(0)
x = rng.random((256, 16)).astype("float32")
y = rng.integers(0, 4, size=256)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(4)], name="tiny")
optimizer = keras.optimizers.SGD(0.01)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def step(a, b):
    with tf.GradientTape() as tape:
        loss = loss_fn(b, model(a, training=True))
    optimizer.apply(tape.gradient(loss, model.trainable_weights), model.trainable_weights)
    return loss


tfaccel.workload.mark(model, ds, optimizer=optimizer, loss=loss_fn)
for a, b in ds:
    step(a, b)
"""


def import_ms(module: str, repeats: int = 5) -> tuple[float, float, float]:
    """``python -X importtime -c "import MODULE"``: the module's cumulative import time (ms),
    its quartiles over ``repeats`` fresh processes."""
    found = []
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            env=_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        for line in done.stderr.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[2] == module:
                found.append(int(parts[1]) / 1000)
    return quartiles(found)


def bench_startup(rounds: int, against: str | None = None) -> str:
    """The start-up ``tfaccel run --tuned`` adds: a tiny script with its own loop, tuned once
    (its script record found, nothing applied), run as ``python s.py``, ``tfaccel run s.py``
    and ``tfaccel run --tuned s.py``, interleaved (the order rotates each round, after one
    round discarded), each a fresh process timed from outside: its wall time, and its CPU
    time (user + system, less moved by other work on a loaded machine). ``against``: the
    ``src`` folder of another tfaccel (an earlier commit), whose ``run --tuned`` joins the
    rounds."""
    lines = [f"on {os.cpu_count()} CPU cores; load average {_load()} at the start"]
    for module in ("tfaccel.tuning", "tfaccel.tuning.tuned", "tfaccel.cli"):
        q1, med, q3 = import_ms(module)
        lines.append(f"import {module:<22} {med:7.1f} ms ({q1:.1f}-{q3:.1f}), -X importtime")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        script = folder / "s.py"
        script.write_text(TINY_SCRIPT)
        db = folder / "results.sqlite"
        done, _ = _tfaccel("tune", "--no-progress", "--db", str(db), "--budget", "10",
                           "--rounds", "3", "--sample-seconds", "0.1", str(script),
                           cwd=folder)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"tune failed:\n{done.stderr[-3000:]}")
        commands = {
            "python s.py": [sys.executable, str(script)],
            "tfaccel run s.py": [sys.executable, "-m", "tfaccel", "run", "--quiet", str(script)],
            "tfaccel run --tuned s.py": [sys.executable, "-m", "tfaccel", "run", "--quiet",
                                         "--tuned", "--db", str(db), str(script)],
        }  # fmt: skip
        done = subprocess.run(
            commands["tfaccel run --tuned s.py"], env=_env(), capture_output=True, text=True
        )
        if "found by the script record" not in done.stderr:
            raise RuntimeError(f"run --tuned did not find the tune's record:\n{done.stderr}")
        envs = {name: _env() for name in commands}
        if against is not None:
            name = "tfaccel run --tuned (against)"
            commands[name] = commands["tfaccel run --tuned s.py"]
            envs[name] = dict(_env(), PYTHONPATH=against)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        names = list(commands)
        for index in range(rounds + 1):
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                began = time.perf_counter()
                subprocess.run(commands[name], env=envs[name], capture_output=True, check=True)
                wall = time.perf_counter() - began
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if index:  # the first round warms the file cache: discarded
                    samples[name].append(wall)
                    cpu[name].append(
                        after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                    )
    lines.append(f"{rounds} rounds interleaved; load average {_load()} at the end")
    lines.append(f"{'command':<30} {'median s':>8} {'(IQR)':>15} {'over python':>11}")
    for what, found in (("wall", samples), ("CPU", cpu)):
        base = statistics.median(found["python s.py"])
        for name, values in found.items():
            q1, med, q3 = quartiles(values)
            lines.append(
                f"{what + ' ' + name:<34} {med:7.3f} ({q1:.3f}-{q3:.3f}) {med - base:+7.3f}s"
            )
    return "\n".join(lines)


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--only", action="append", choices=sorted(SCRIPTS))
    p.add_argument("--smoke", action="store_true")
    p.add_argument(
        "--startup",
        action="store_true",
        help="only the start-up run --tuned adds to a tiny script, against python and run",
    )
    p.add_argument(
        "--startup-against",
        metavar="SRC",
        help="with --startup: also run --tuned from this src folder (an earlier commit's)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--plan-only",
        action="store_true",
        help="the plan against the allocator only: no tune, no timed runs",
    )
    p.add_argument(
        "--no-plan",
        action="store_true",
        help="tune and the timed runs only: no plan against the allocator",
    )
    p.add_argument(
        "--batch-scale",
        type=int,
        default=1,
        help="with --plan-only: each script's batch times this (small models' steps are "
        "uncounted by the CPU allocator at their own batch)",
    )
    p.add_argument(
        "--tuned-all",
        action="store_true",
        help="tune the batch size too (1x, 2x, 4x the script's) and time `run --tuned=all` "
        "against the script's own",
    )
    args = p.parse_args(argv)
    if args.startup:
        print(bench_startup(max(args.rounds, 7), args.startup_against))
        return 0
    if args.batch_scale != 1 and not args.plan_only:
        p.error("--batch-scale changes the scripts' batch: with --plan-only only")
    if args.no_plan and args.plan_only:
        p.error("--no-plan and --plan-only leave nothing to run: give one of them")
    names = args.only or (["cnn_arrays"] if args.smoke else list(SCRIPTS))
    budget, rounds = (15, 2) if args.smoke else (args.budget, args.rounds)
    rows = []
    for n in names:
        rows.append(
            bench_script(
                n,
                budget=budget,
                rounds=rounds,
                epochs=args.epochs,
                plan_only=args.plan_only,
                batch_scale=args.batch_scale,
                plan=not args.no_plan,
                tuned_all=args.tuned_all,
            )
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # each row as it ends
    print(json.dumps(rows, indent=2) if args.json else report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
