"""What each block of README.md and docs/*.md needs to run in tests/test_docs.py.

- The preludes (ARRAYS, MODEL, LAUNCH_TRAIN_PY, TUNE_SCRIPT_PRELUDE, KERNEL_PRELUDE): the tiny
  data and definitions a block uses without defining them.
- PY_BLOCKS: one ``Py`` entry per ```python block, found by a ``marker`` only that block
  contains, with its ``process``, prelude, check and cheap replacements. PROCESS_ENV gives a
  process's environment.
- TEXT_BLOCKS: the blocks that are not code (recorded output, a signature), with what is done
  instead.
- SKIPPED: the documented commands not run, with the reason; CHEAP: those that run in a
  cheaper form (a ``Cheap`` with its reason and check); CHEAP_FILES: cheap entries whose files
  are made from the documents themselves. Their key is (document, the command's first line).

To add a block: a new ```python block gets a ``Py`` entry in PY_BLOCKS (in the process it
belongs to, at the place it must run); a block that is not code gets a TEXT_BLOCKS entry; a
command that needs a GPU, a cluster or the network gets a SKIPPED entry, one that takes longer
than tests/test_docs.py's COMMAND_TIMEOUT_S a CHEAP entry, each with its reason.
``test_every_block_is_run_or_listed`` says which block lacks one, and which entry matches no
block any more. The types are in tests/docs_blocks.py.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docs_blocks import ROOT, Cheap, Check, Py, Ran, all_blocks, py_matches

# ---------------------------------------------------------------------------------------------
# What each Python block needs

ARRAYS = """
import numpy as np
rng = np.random.default_rng(0)
x = x_train = rng.random((1280, 784), dtype=np.float32)
y = y_train = rng.integers(0, 10, size=1280)
"""

# A small classifier for 784 features, compiled: the `model` the examples train.
MODEL = """
import keras
model = keras.Sequential(
    [keras.Input((784,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10)]
)
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
"""

# `train.py` for `tfaccel launch`: reads the cluster it was given and says so; worker 1 is
# killed on the first attempt, as in the documented output, so the restart happens too. Real
# multi-worker training is tests/distribute/test_multiworker.py's (tens of seconds).
LAUNCH_TRAIN_PY = """\
import json, os, signal, sys
rank = int(os.environ["TFACCEL_LAUNCH_RANK"])
attempt = int(os.environ["TFACCEL_LAUNCH_ATTEMPT"])
workers = json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"]
epochs = int(sys.argv[sys.argv.index("--epochs") + 1])
print(f"worker {rank} of {len(workers)} ({workers[rank]}), attempt {attempt}, {epochs} epochs")
if attempt == 0 and rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
"""

# What docs/tune.md's script leaves to the user: `build_my_net` and the data.
TUNE_SCRIPT_PRELUDE = (
    ARRAYS
    + """
import keras

def build_my_net():
    return keras.Sequential(
        [keras.Input((784,)), keras.layers.Dense(32, activation="relu"),
         keras.layers.Dense(10, activation="softmax")],
        name="my_net",
    )
"""
)

KERNEL_PRELUDE = """
import math, sys
import numba
import numpy as np
from numba import cuda
sys.setswitchinterval(1e-4)  # the simulator's threads meet at every barrier
rng = np.random.default_rng(0)
dtype = np.dtype(np.float32)
element = numba.from_dtype(dtype)
zero = dtype.type(0)
"""


PY_BLOCKS = [
    # -- process "setup": setup() and strategy() must come before the TensorFlow runtime starts;
    #    setup() does not start it, so strategy() may follow it, as in a script.
    Py(
        "README.md",
        "config = tfaccel.setup(",
        "setup",
        check="assert 'precision' in str(config), str(config)",
    ),
    Py(
        "docs/distribute.md",
        "choice = dist.strategy()   # FIRST",
        "setup",
        check="assert choice.num_replicas >= 1 and model.built",
    ),
    Py(
        "docs/distribute.md",
        "result = dist.train(",
        "setup",
        check=textwrap.dedent(
            """
            import os
            assert result.global_step == 5 * result.steps_per_epoch, result
            assert os.listdir("ckpt"), "no checkpoint written"
            """
        ),
    ),
    # -- process "keras": split() first, since its setup(logical_devices=2) must come before the
    #    runtime starts; then the blocks that only train.
    Py(
        "docs/distribute.md",
        "parallel = dist.split(",
        "keras",
        check="assert parallel.placement.bytes_per_step(batch_size=64) > 0",
    ),
    Py(
        "README.md",
        "PerformanceCallback()",
        "keras",
        prelude=ARRAYS + MODEL,
    ),
    Py(
        "docs/profile.md",
        "callback = PerformanceCallback(",
        "keras",
        prelude=ARRAYS
        + MODEL
        + "import tensorflow as tf\n"
        + "train_ds = tf.data.Dataset.from_tensor_slices((x_train[:640], y_train[:640])).batch(32)\n",
        cheap=(("epochs=5", "epochs=1"),),
        reason="one epoch of 20 steps is enough for the figures and the diagnosis",
        check="assert diagnosis.refused is None, diagnosis.refused\n"
        "assert diagnosis.get('input_bound') is not None",
    ),
    Py(
        "docs/profile.md",
        "timer = StepTimer(",
        "keras",
        prelude=ARRAYS
        + MODEL
        + textwrap.dedent(
            """
            import tensorflow as tf
            dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(64).repeat()
            steps = 20
            optimizer = keras.optimizers.SGD(0.01)
            loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

            @tf.function
            def train_step(batch):
                features, labels = batch
                with tf.GradientTape() as tape:
                    loss = loss_fn(labels, model(features, training=True))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss
            """
        ),
        check="assert timer.diagnose().refused is None, timer.diagnose().refused",
    ),
    Py(
        "docs/profile.md",
        "ds = tfaccel.data.pipeline((x_train, y_train), 128, map_fn=augment, seed=0)",
        "keras",
        prelude=ARRAYS
        + MODEL
        + textwrap.dedent(
            """
            import tensorflow as tf
            x_train, y_train = x_train[:512], y_train[:512]

            def augment(x, y):
                return tf.clip_by_value(x * 1.1, 0.0, 1.0), y
            """
        ),
        cheap=(("epochs=10", "epochs=2"),),
        reason="two epochs show the pipeline feeding fit as well as ten",
    ),
    Py(
        "docs/tune.md",
        'if __name__ == "__main__":',
        "keras",
        prelude=TUNE_SCRIPT_PRELUDE,
        cheap=(("epochs=10", "epochs=2"),),
        reason="two epochs run the script's training as well as ten",
    ),
    Py(
        "docs/tune.md",
        "result = tfaccel.tune(",
        "keras",
        cheap=(
            (
                "budget_s=300",
                "budget_s=120, sample_s=0.25, final_rounds=2, "
                'space={"batch_size": [64, 128], "precision": ["float32"], "feed": ["numpy"]}',
            ),
        ),
        reason="fewer configurations and short samples (the search ends when they are "
        "measured; the budget is only a ceiling): its report and result, not a real winner",
        check="assert result.best is not None, str(result)",
    ),
    Py(
        "docs/tune.md",
        'tfaccel.setup(precision="auto", jit="auto", model=model)',
        "keras",
        prelude="import tfaccel\n" + TUNE_SCRIPT_PRELUDE + "model = build_my_net()\n",
    ),
    Py(
        "docs/plan.md",
        'parser.add_argument("--batch-size", type=int, default=128)',
        "keras",
        wrap="def train_script():",
        reason="a user's script, run for real by the tfaccel plan command below it (up to its "
        "fit); here it is only compiled",
    ),
    Py(
        "docs/tune.md",
        'parser.add_argument("--batch-size", type=int, default=32)',
        "keras",
        wrap="def train_script():",
        reason="a user's script, run for real by the tfaccel tune command below it (up to its "
        "fit, once per precision); here it is only compiled",
    ),
    Py(
        "docs/plan.md",
        "tfaccel.workload.mark(model, dataset, optimizer=optimizer, loss=loss_fn)",
        "keras",
        prelude="import tfaccel.workload\n"
        + ARRAYS
        + MODEL
        + "dataset, optimizer, loss_fn = (x, y), model.optimizer, model.loss\n",
        check="assert not model.optimizer.iterations.numpy()  # outside a capture: nothing",
    ),  # -- process "light": no TensorFlow; kernels on numba's CUDA simulator.
    Py(
        "docs/distribute.md",
        "result = launch(",
        "light",
        prelude=f"open('train.py', 'w').write({LAUNCH_TRAIN_PY!r})\n",
        check="assert result.exit_code == 0 and len(result.attempts) == 2, result",
    ),
    Py(
        "docs/kernels.md",
        "c = kernels.matmul(a, b, tile=8)",
        "light",
        check="np.testing.assert_allclose(c, a @ b, rtol=1e-5)\n"
        "assert kernels.backend() in ('simulator', 'cuda'), kernels.backend()",
    ),
    Py(
        "docs/kernels.md",
        "def vector_add_kernel(a, b, out):",
        "light",
        prelude=KERNEL_PRELUDE,
        check=textwrap.dedent(
            """
            a, b = rng.random(300, dtype=np.float32), rng.random(300, dtype=np.float32)
            out = np.full(300, np.nan, np.float32)
            vector_add_kernel[2, 64](a, b, out)  # 128 threads: the grid-stride loop runs
            np.testing.assert_array_equal(out, a + b)
            """
        ),
    ),
    Py(
        "docs/kernels.md",
        "vector_add_kernel[grid, block](d_a, d_b, d_out)",
        "light",
        prelude=KERNEL_PRELUDE
        + textwrap.dedent(
            """
            from tfaccel.kernels.cuda import vector_add_kernel
            a, b = rng.random(300, dtype=np.float32), rng.random(300, dtype=np.float32)
            d_a, d_b = cuda.to_device(a), cuda.to_device(b)
            d_out = cuda.device_array_like(a)
            block = (128,)
            grid = (math.ceil(a.size / 128),)
            """
        ),
        check="np.testing.assert_array_equal(d_out.copy_to_host(), a + b)",
    ),
    Py(
        "docs/kernels.md",
        "tile_a = cuda.shared.array(",
        "light",
        prelude=KERNEL_PRELUDE + "tile = 4\nm, k, n = 13, 7, 19\n",
        wrap="def matmul_tiled(a, b, c):",
        reason="an excerpt: the body of the matmul kernel, run as one on the simulator",
        check=textwrap.dedent(
            """
            a = rng.random((m, k), dtype=np.float32)
            b = rng.random((k, n), dtype=np.float32)
            c = np.full((m, n), np.nan, np.float32)
            cuda.jit(matmul_tiled)[(math.ceil(n / tile), math.ceil(m / tile)), (tile, tile)](a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-5)
            """
        ),
    ),
    Py(
        "docs/kernels.md",
        "column_a[i] = slice_a[ty + i * tile, kk]",
        "light",
        prelude=KERNEL_PRELUDE
        + textwrap.dedent(
            """
            tile, per, tx, ty = 4, 2, 1, 3
            slice_a = rng.random((tile * per, tile))
            slice_b = rng.random((tile, tile * per))
            column_a, row_b, acc = np.zeros(per), np.zeros(per), np.zeros((per, per))
            """
        ),
        reason="an excerpt: one thread's inner loop of the register-tiled matmul, run on "
        "NumPy arrays standing for its shared slices and registers",
        check=textwrap.dedent(
            """
            rows = [ty + i * tile for i in range(per)]
            cols = [tx + j * tile for j in range(per)]
            np.testing.assert_allclose(acc, slice_a[rows, :] @ slice_b[:, cols], rtol=1e-12)
            """
        ),
    ),
    Py(
        "docs/kernels.md",
        "sums = cuda.shared.array(",
        "light",
        prelude=KERNEL_PRELUDE + "threads = 32\n",
        wrap="def reduce_block_sums(x, partial):",
        reason="an excerpt: the body of the block-sum kernel, run as one on the simulator",
        check=textwrap.dedent(
            """
            x = rng.random(300, dtype=np.float32)
            partial = np.full(3, np.nan, np.float32)
            cuda.jit(reduce_block_sums)[3, threads](x, partial)
            np.testing.assert_allclose(partial.sum(), x.sum(), rtol=1e-5)
            """
        ),
    ),
]

PROCESS_ENV = {"light": {"NUMBA_ENABLE_CUDASIM": "1"}}

# Blocks that are not code to run (recorded output, a signature), with what is done instead.
TEXT_BLOCKS: dict[tuple[str, str], str] = {
    ("README.md", "warn  preflight"): "skip: the recorded output of tfaccel doctor --preflight "
    "on a saved snapshot of an H100 machine, not a command",
    ("docs/distribute.md", "data-parallel scaling on CPU"): "skip: the recorded output of "
    "benchmarks/bench_scaling.py on a 2-core AMD EPYC, not a command",
    ("docs/distribute.md", "#SBATCH --requeue"): "skip: the batch script for GPUs; "
    "tests/distribute/test_slurm.py runs it in its CPU form under a real one-node Slurm",
    ("docs/profile.md", "pipeline(source, batch_size, *,"): "check: the signature of "
    "tfaccel.data.pipeline, compared with inspect.signature",
    ("docs/plan.md", "op(o) = latency + max(FLOPs / rate"): "skip: the formula of the "
    "plan's CPU step time, not a command; tests/planning/test_time_model.py checks each term",
}

SIGNATURE_CHECK = """
import inspect, re
import tfaccel.data
parts, star = [], False
for p in inspect.signature(tfaccel.data.pipeline).parameters.values():
    if p.kind is p.KEYWORD_ONLY and not star:
        parts.append("*")
        star = True
    parts.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
actual = "pipeline(" + ", ".join(parts) + ")"
def norm(text):
    return re.sub(r"\\s+", "", text).replace("'", '"')
assert norm(DOCUMENTED) == norm(actual), f"documented:\\n{DOCUMENTED}\\nactual:\\n{actual}"
"""

# ---------------------------------------------------------------------------------------------
# What each shell command needs

# Commands not run, with the reason. Key: (document, the command's first line).
SKIPPED: dict[tuple[str, str], str] = {
    ("README.md", "make test"): "runs this whole test suite, of which this test is a part",
    ("README.md", ".venv/bin/pip install -e '.[cpu]'"): "downloads and installs TensorFlow "
    "(minutes): `make run` and `make test` make this very install, and tests/test_install.py "
    "installs the package itself",
    ("README.md", "python3 -m pip wheel --no-deps -w dist ."): "tests/test_install.py builds "
    "this wheel from the clone, checks its contents and runs it",
    ("README.md", "pip install 'dist/tfaccel-0.1.0-py3-none-any.whl[cpu]'"): "tests/"
    "test_install.py installs this wheel (without the [cpu] extra, which downloads TensorFlow) "
    "and runs it away from the clone",
    (
        "docs/distribute.md",
        """export TF_CONFIG='{"cluster": {"worker": ["host1:12345", "host2:12345"]},""",
    ): "needs a real cluster: two hosts, host1 and host2",
    ("docs/distribute.md", "python train.py"): "needs a real cluster: one worker of two hosts",
}


def _json_doc(d: Path, runs: list[Ran]) -> None:
    for run in runs:
        if "--json" in run.argv:
            assert isinstance(json.loads(run.stdout), dict), run.stdout[:2000]


OOM_LOG = (ROOT / "tests/data/doctor-corpus/a_oom_yolo3_bfc.log").read_text(encoding="utf-8")


def _oom_answered(d: Path, runs: list[Ran]) -> None:
    """The oom finding carries the plan: the batch that fits, or the accumulation."""
    out = runs[-1].stdout
    assert "Out of memory at batch 8192: batch <= " in out, out
    assert "gradient_accumulation_steps=" in out and "needs" in out, out


def _doctor_exit_code(d: Path, runs: list[Ran]) -> None:
    """The saved snapshot replays to the same findings; exit 1 exactly when one failed."""
    report = json.loads(runs[0].stdout)
    failed = any(f["status"] == "fail" for f in report["findings"])
    assert [r.returncode for r in runs] == [int(failed)] * 2, (runs[0].stdout, runs[1].stdout)


def _plan_table(d: Path, runs: list[Ran]) -> None:
    """The comparison was made and printed: each row predicted and measured, then the verdict."""
    out = runs[-1].stdout
    assert "predicted (tfaccel plan) vs measured" in out and "median |error|" in out, out
    assert "float32" in out, out


def _planned_unchanged(d: Path, runs: list[Ran]) -> None:
    """docs/plan.md's script was planned at its own batch and optimizer, and stopped at fit."""
    out = runs[-1].stdout
    assert "batch 512, float32, AdamW" in out and "6,000 examples per epoch" in out, out
    assert "train.py:20 (model.fit #1)" in out, out
    assert not (d / "model.keras").exists(), "the script ran past its fit"


def _plan_script_files() -> tuple[tuple[str, str], ...]:
    """docs/plan.md's own unchanged script, as train.py."""
    (block,) = [
        b
        for b in all_blocks()
        if b.path == "docs/plan.md" and 'parser.add_argument("--batch-size"' in b.text
    ]
    return (("train.py", block.text),)


def _report_files(d: Path, runs: list[Ran]) -> None:
    """report.html, report.json and report.md were written, and report.json lists them."""
    missing = [n for n in ("report.html", "report.json", "report.md") if not (d / n).is_file()]
    assert not missing, f"missing in {d}: {missing}"
    files = json.loads((d / "report.json").read_text())["files"]
    assert (files["html"], files["json"], files["markdown"]) == (
        "report.html",
        "report.json",
        "report.md",
    ), files


def _every_device_planned(d: Path, runs: list[Ran]) -> None:
    """The plan covers this machine and the accelerators of the spec database, ranked."""
    devices = json.loads(runs[-1].stdout)["devices"]
    keys = {row["key"] for row in devices}
    assert {"this-cpu", "t4", "a100-40gb"} <= keys and len(devices) >= 10, sorted(keys)
    assert [row["rank"] for row in devices] == list(range(1, len(devices) + 1)), devices


def _kernel_table(report: Any, runs: list[Ran]) -> None:
    """Every default target compiled, within every limit, and the table the command prints
    (``report``: the document of tests/conftest.py's kernel_resources, not a folder)."""
    from tfaccel.kernels.occupancy import DEFAULT_TARGETS
    from tfaccel.kernels.resources import ResourceRow, Toolchain, check_resources, render_text

    rows = [ResourceRow.from_dict(r) for r in report["rows"]]
    assert report["ok"] and list(report["targets"]) == list(DEFAULT_TARGETS), report["targets"]
    text = render_text(rows, check_resources(rows), Toolchain(**report["toolchain"]))
    assert text.startswith("toolchain: numba-cuda's NVVM to PTX ISA "), text[:300]


def _tuned_unchanged(d: Path, runs: list[Ran]) -> None:
    """docs/tune.md's own script was tuned against its own configuration, and stopped at fit:
    no best.keras right after the tune (TUNE_THEN_RUN's second line looks, before the run
    that writes one)."""
    result = json.loads(runs[0].stdout)
    assert result["baseline"]["batch_size"] == 32 and result["baseline"]["feed"] == "as-given"
    assert result["baseline_verdict"]["says"], result["baseline_verdict"]
    assert result["not_run"] == ["callback ModelCheckpoint"], result["not_run"]
    assert runs[1].returncode == 0, "the tune wrote best.keras: the script's checkpoint ran"


def _ran_tuned(d: Path, runs: list[Ran]) -> None:
    """The script ran with the stored winner: its XLA setting and batch took effect at fit."""
    tuned = json.loads(runs[-1].stdout)["tuned"]
    winner = tuned["winner"]
    assert winner is not None, tuned["says"]
    (effect,) = tuned["took_effect"]
    assert "jit" in winner["config"], f"the tune did not time both XLA settings: {tuned}"
    assert effect["jit"] is winner["config"]["jit"], tuned
    assert effect["batch_size"] == 32, tuned  # the script's own without --tuned=all


def _tune_own_script_files() -> tuple[tuple[str, str], ...]:
    """docs/tune.md's script as written, as train.py."""
    (block,) = [
        b
        for b in all_blocks()
        if b.path == "docs/tune.md" and 'parser.add_argument("--batch-size"' in b.text
    ]
    return (("train.py", block.text),)


def _files(*names: str) -> Check:
    def check(d: Path, runs: list[Ran]) -> None:
        missing = [n for n in names if not (d / n).exists()]
        assert not missing, f"missing after the command: {missing}"

    return check


BUNDLE_LOG = (
    'Traceback (most recent call last):\n  File "/home/alice/train.py", line 12, in <module>\n'
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
    "tensor with shape[8,1024]\n"
)


def _bundle(*fragments: str) -> Check:
    """tfaccel-bundle.md was written, holds ``fragments``, and its JSON block parses."""

    def check(d: Path, runs: list[Ran]) -> None:
        text = (d / "tfaccel-bundle.md").read_text()
        for fragment in fragments:
            assert fragment in text, fragment
        block = re.search(r"^(`{3,})json\n(.*?)\n\1$", text, re.M | re.S)
        assert block and isinstance(json.loads(block.group(2)), dict)
        assert "alice" not in text

    return check


def _both(*checks: Check) -> Check:
    def check(d: Path, runs: list[Ran]) -> None:
        for c in checks:
            c(d, runs)

    return check


def _tune_files() -> tuple[tuple[str, str], ...]:
    """docs/tune.md's own script, with its prelude, as train.py."""
    (block,) = [
        b for b in all_blocks() if b.path == "docs/tune.md" and py_matches(b, _tune_script())
    ]
    return (("train.py", TUNE_SCRIPT_PRELUDE + "\n" + block.text + "\n"),)


def _tune_script() -> Py:
    return next(p for p in PY_BLOCKS if p.path == "docs/tune.md" and "__main__" in p.marker)


PLAN_SCRIPT = "tfaccel plan --device a100-40gb --device this-cpu train.py --batch-size 512"
PLAN_MODEL = "tfaccel plan --model reference-cnn --batch 256"
TUNE_OWN_SCRIPT = "tfaccel tune --budget 60 train.py --batch-size 32"
RUN_TUNED = "tfaccel run --tuned train.py --batch-size 32"
# Both commands in one job, as the document runs them: the script tuned (no best.keras
# written: the second line exits 1 when there is one), then run with the winner.
# The budget is a ceiling: the search ends when its four configurations are measured. With 30 s
# a slow run once ended before it timed XLA on, and the winner then rightly stored no XLA
# setting (tuning.record.store_config) for the run to apply.
TUNE_THEN_RUN = (
    "tfaccel tune --budget 90 --sample-seconds 0.2 --rounds 3 --space batch_size=32,128 "
    "--space precision=float32 --space jit=off,on --space steps_per_execution=1 "
    "--db results.sqlite --json train.py --batch-size 32",
    "python -c \"import os, sys; sys.exit(os.path.exists('best.keras'))\"",
    "tfaccel run --quiet --json --db results.sqlite --tuned train.py --batch-size 32 --epochs 1",
)

# A tune's cheap variant: fewer configurations, short samples, two final rounds. The search
# ends when those are measured; the budget is only a ceiling (a tiny one is refused when the
# first trial costs more, which on two busy cores can be ten seconds).
TUNE_TINY = "--space jit=off --space feed=numpy --budget 120 --sample-seconds 0.25 --rounds 2"
TUNE_SCRIPT = (
    "tfaccel tune --space batch_size=64,128,256 --space precision=float32 "
    f"--db results.sqlite {TUNE_TINY} train.py"
)
TUNE_MODEL = (
    "tfaccel tune --model reference-cnn --smoke --space batch_size=64 "
    f"--space precision=float32,mixed_bfloat16 {TUNE_TINY} --json"
)


# Documented commands that run in a cheaper form. Key: (document, the command's first line). A
# synopsis line is checked against --help in any case; an entry here runs a real command too.
CHEAP: dict[tuple[str, str], Cheap] = {
    ("README.md", "make run"): Cheap(
        (
            "tfaccel report --smoke --only matmul,bandwidth,vector_add,reference_cnn,digits "
            "--repeats 3",
        ),
        "make run installs what is missing, then runs `tfaccel report --quick` (about 1.5 "
        "minutes): the same report at its smoke size, the one tests/report/test_report_browser.py "
        "reads (tests/conftest.py's smoke_report, run once: a report plans the reference "
        "models, ~25 s)",
        check=_report_files,
        reuse="smoke_report",
    ),
    ("README.md", "python3 -m venv .venv"): Cheap(
        ("python3 -m venv --without-pip .venv",),
        "without pip: the next line, pip's install into it, downloads TensorFlow and is not "
        "run (tests/test_install.py installs the package), and seeding pip costs ~15 s",
        check=_files(".venv/bin/python", ".venv/pyvenv.cfg"),
    ),
    ("README.md", "tfaccel devices [--json] [--tf]"): Cheap(
        ("tfaccel devices --json", "tfaccel devices"),
        "a synopsis: its options against --help, and the command itself (no TensorFlow, fast)",
        check=_json_doc,
    ),
    (
        "README.md",
        "tfaccel doctor [--json] [--deep] [--log FILE|-] [--snapshot FILE] [--save-snapshot FILE] "
        "[--bundle FILE]",
    ): Cheap(
        (
            "tfaccel doctor --json --save-snapshot snapshot.json --bundle bundle.md",
            "tfaccel doctor --snapshot snapshot.json",
        ),
        "a synopsis: its options against --help, and the doctor on this machine, saved (with "
        "a bundle) and replayed (not --deep, which imports TensorFlow in a subprocess)",
        check=_both(_doctor_exit_code, _files("snapshot.json", "bundle.md")),
        exit_codes=(0, 1),  # 1 when the doctor finds a failure on this machine: its job
    ),
    ("docs/plan.md", "python benchmarks/bench_plan.py --smoke"): Cheap(
        ("python benchmarks/bench_plan.py --smoke --precision float32 --stored-calibration",),
        "its float32 row, without calibrating first (none is stored here, so the step time is "
        "not predicted): the calibration costs 15-60 s, three tries on a busy machine, and "
        "tests/planning/test_time_model.py calibrates; the mixed_bfloat16 row's measured and "
        "predicted peaks are tests/planning/test_plan.py's. Exit 1 too: the benchmark's "
        "verdict on its accuracy target, which a test does not judge",
        check=_plan_table,
        exit_codes=(0, 1),
    ),
    ("docs/bundle.md", "tfaccel doctor --deep --bundle tfaccel-bundle.md"): Cheap(
        ("tfaccel doctor --deep --bundle tfaccel-bundle.md",),
        "as documented; exit 1 too, when the doctor finds a failure on this machine (its job)",
        check=_bundle("TensorFlow's start-up log"),
        exit_codes=(0, 1),
    ),
    ("docs/bundle.md", "tfaccel doctor --log train.log --bundle tfaccel-bundle.md"): Cheap(
        ("tfaccel doctor --log train.log --bundle tfaccel-bundle.md",),
        "as documented, with a train.log that ran out of GPU memory (so the doctor exits 1)",
        files=(("train.log", BUNDLE_LOG),),
        check=_bundle("The log given with --log", "/home/<user>/train.py"),
        exit_codes=(1,),
    ),
    ("docs/plan.md", "tfaccel doctor --log train.log --model resnet20 --batch 8192"): Cheap(
        ("tfaccel doctor --log train.log --model resnet20 --batch 8192",),
        "as documented, with a train.log that ran out of memory on a 2.8 GiB GPU (a real log "
        "of the doctor corpus), so the doctor exits 1 with the plan's answer",
        files=(("train.log", OOM_LOG),),
        check=_oom_answered,
        exit_codes=(1,),
    ),
    ("docs/kernels.md", "python benchmarks/bench_kernels.py --resources"): Cheap(
        ("python benchmarks/bench_kernels.py --resources --json",),
        "its --json form, run once for tests/kernels/test_kernels_compile.py (tests/conftest.py's "
        "kernel_resources: every kernel for every default target, ~25 s), which checks the "
        "table this command prints from those rows",
        check=_kernel_table,
        reuse="kernel_resources",
    ),
    ("docs/distribute.md", "tfaccel launch -n 2 --restarts 1 train.py --epochs 3"): Cheap(
        ("tfaccel launch -n 2 --restarts 1 train.py --epochs 3",),
        "as documented, with a train.py that only reads its cluster (worker 1 is killed on the "
        "first attempt, as in the output shown): the launcher's part, without ~30 s of "
        "two-worker training",
        files=(("train.py", LAUNCH_TRAIN_PY),),
    ),
    ("docs/plan.md", PLAN_MODEL): Cheap(
        (f"{PLAN_MODEL} --json",),
        "with --json: the run of README.md's `tfaccel plan --model reference-cnn --batch 256 "
        "--json`, the same plan (each costs ~30 s of tracing and simulating); the table form "
        "runs in the --device line below",
        check=_every_device_planned,
    ),
    ("docs/plan.md", PLAN_SCRIPT): Cheap(
        (PLAN_SCRIPT,),
        "as documented, with the document's train.py; checked that it stopped at its fit",
        check=_planned_unchanged,
    ),
    ("docs/tune.md", "tfaccel tune --budget 300 train.py"): Cheap(
        (TUNE_SCRIPT,),
        "shares the run of the --space/--db line below, which tunes the same script: fewer "
        "configurations and short samples (each tune costs TensorFlow's import and its search)",
    ),
    (
        "docs/tune.md",
        "tfaccel tune --space batch_size=64,128,256 --space jit=off --db results.sqlite train.py",
    ): Cheap(
        (TUNE_SCRIPT,),
        "docs/tune.md's own script with a small model: fewer configurations (float32, the "
        "numpy feed) and short samples",
        check=_files("results.sqlite"),
    ),
    ("docs/tune.md", TUNE_OWN_SCRIPT): Cheap(
        TUNE_THEN_RUN,
        "the document's script as written: two batch sizes in float32, XLA off and on, short "
        "samples, checked against its own configuration, with its checkpoint not written by "
        "the tune; shares the run of `tfaccel run --tuned` below, which applies this tune",
        check=_tuned_unchanged,
    ),
    ("docs/tune.md", RUN_TUNED): Cheap(
        TUNE_THEN_RUN,
        "the document's script tuned briefly into a database of its own (the tune above), "
        "then run with the winner for one epoch",
        check=_ran_tuned,
    ),
    ("docs/tune.md", "tfaccel tune --model reference-cnn --budget 150 --json"): Cheap(
        (TUNE_MODEL,),
        "--smoke (the tiny model on 512 examples), two configurations and short samples; "
        "shared with the --space line under 'The result'",
        check=_json_doc,
    ),
    (
        "docs/tune.md",
        "tfaccel tune --model reference-cnn --budget 150 --space batch_size=32,64,128,256",
    ): Cheap(
        (TUNE_MODEL,),
        "--smoke (the tiny model on 512 examples), batch 64 in both precisions, short samples; "
        "with --json, as it shares the run of the --json line above",
        check=_json_doc,
    ),
}

# Cheap entries whose commands read files made from the documents themselves.
CHEAP_FILES: dict[tuple[str, str], Callable[[], tuple[tuple[str, str], ...]]] = {
    ("docs/plan.md", PLAN_SCRIPT): _plan_script_files,
    ("docs/tune.md", TUNE_OWN_SCRIPT): _tune_own_script_files,
    ("docs/tune.md", RUN_TUNED): _tune_own_script_files,
    ("docs/tune.md", "tfaccel tune --budget 300 train.py"): _tune_files,
    (
        "docs/tune.md",
        "tfaccel tune --space batch_size=64,128,256 --space jit=off --db results.sqlite train.py",
    ): _tune_files,
}
