"""Every Python block and shell command of README.md and docs/*.md runs here, for real.

- ```python blocks run in subprocesses (never in pytest's own), each in a fresh namespace and a
  fresh working directory: first the prelude PY_BLOCKS declares for it (the tiny data it uses),
  then the block as written (tracebacks name the document's own lines), then the declared
  check. To pay TensorFlow's import three times rather than fifteen, blocks share processes
  (PY_BLOCKS' ``process``, run in table order), each process starting with the block that
  must come before TensorFlow's runtime starts (``setup``, ``split``).
- Shell commands (```bash/sh/console/shell blocks, and the lines of other blocks that start
  with a program: ``tfaccel``, ``python``, ``make``, ``pip``...) run through the installed
  ``tfaccel`` in a temporary directory, with ``$XDG_DATA_HOME`` there as well. A synopsis
  (``tfaccel devices [--json] [--tf]``) runs as ``--help``, and every option it names must be
  in the help. A long command runs as the cheap variant CHEAP gives it, with the reason;
  commands that need a GPU, a cluster or the network are in SKIPPED, with the reason.
- A block that is none of these fails ``test_every_block_is_run_or_listed``.

Every run hides the GPUs (``CUDA_VISIBLE_DEVICES=""``): the documents' examples are checked on
the CPU, the same on every machine. Jobs run two at a time (``TFACCEL_DOC_JOBS=N`` to change
it; ``TFACCEL_DOC_TIMES=1`` with ``-s`` prints what each job and block took).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
TFACCEL = BIN / "tfaccel"
COMMAND_TIMEOUT_S = 240  # a documented command that takes longer needs a cheap variant in CHEAP
PROCESS_TIMEOUT_S = 420
BLOCK_TIMEOUT_S = 180

# ---------------------------------------------------------------------------------------------
# Reading the documents


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository
    line: int  # the line of its first code line
    lang: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Command:
    path: str
    line: int
    first: str  # its first line as written, without a `$ ` prompt, a comment or a `\`
    text: str  # the whole command, continuation lines joined
    block: Block
    output: str = ""  # the output documented under it (blocks with `$ ` prompts)

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_synopsis(self) -> bool:
        """A usage line (``tfaccel run [--memory M] SCRIPT [ARGS...]``), not a command."""
        return bool(re.search(r"\[|\.\.\.|(^|\s)[A-Z][A-Z_]*[A-Z](\s|$|\|)", self.text))


FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
SHELL_LANGS = {"", "bash", "sh", "shell", "console", "text"}
PROGRAMS = {
    "tfaccel",
    "python",
    "python3",
    "make",
    "pip",
    ".venv/bin/pip",
    "export",
    "srun",
    "sbatch",
    "cd",
}


def read_blocks(path: str, text: str | None = None) -> list[Block]:
    """The fenced blocks of a document (``text``, or the file ``path`` of the repository)."""
    lines = (ROOT / path).read_text().splitlines() if text is None else text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, lang = match.groups()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : j]
        ]
        blocks.append(Block(path, i + 2, lang.lower(), "\n".join(body)))
        i = j + 1
    return blocks


def _strip_comment(line: str) -> str:
    return re.sub(r"(^|\s)#.*$", "", line).rstrip()


def _join(parts: list[str]) -> str:
    return " ".join(p.strip().removesuffix("\\").strip() for p in parts)


def read_commands(block: Block) -> tuple[list[Command], list[str]]:
    """The commands of a shell or untagged block, and the lines that are neither a command nor
    part of one (a block with commands and such lines needs a look)."""
    lines = block.text.splitlines()
    prompted = any(line.startswith("$ ") for line in lines)
    found: list[tuple[int, list[str], list[str]]] = []  # (line, command lines, output lines)
    stray: list[str] = []
    for n, raw in enumerate(lines):
        current = found[-1] if found else None
        if prompted:
            if raw.startswith("$ "):
                found.append((block.line + n, [raw[2:]], []))
            elif current and not current[2] and current[1][-1].rstrip().endswith("\\"):
                current[1].append(raw)
            elif current:
                current[2].append(raw)
            continue
        line = _strip_comment(raw)
        if not line.strip():
            continue
        continues = current is not None and current[1][-1].rstrip().endswith("\\")
        if raw[0].isspace() or continues:
            if current is None:
                stray.append(raw)
            else:
                current[1].append(line)
            continue
        word = line.split()[0]
        if word in PROGRAMS or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", word):
            found.append((block.line + n, [line], []))
        else:
            stray.append(raw)
    commands = [
        Command(
            block.path,
            line,
            _strip_comment(parts[0]).removesuffix("\\").strip(),
            _join([_strip_comment(p) for p in parts]),
            block,
            "\n".join(output),
        )
        for line, parts, output in found
    ]
    return commands, stray


def all_blocks() -> list[Block]:
    return [block for path in DOCS for block in read_blocks(path)]


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


@dataclass(frozen=True)
class Py:
    """How one ```python block runs."""

    path: str
    marker: str  # text that only this block of the document contains
    process: str  # blocks of one process share an interpreter, in the order of PY_BLOCKS
    prelude: str = ""
    check: str = ""  # runs after the block, in its namespace
    wrap: str = ""  # the block is an excerpt: the body of this function
    cheap: tuple[tuple[str, str], ...] = ()  # (documented text, what runs instead)
    reason: str = ""  # why it is wrapped or cheapened


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
        prelude="import keras\n\ndef make_model():\n"
        "    return keras.Sequential([keras.Input((784,)), keras.layers.Dense(10)])\n",
        check="assert choice.num_replicas >= 1 and model.built",
    ),
    Py(
        "docs/distribute.md",
        "result = dist.train(",
        "setup",
        prelude=ARRAYS,
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
        prelude="import keras, tfaccel\nimport tfaccel.distribute as dist\n"
        + ARRAYS
        + "x, y = x[:64], y[:64]\n",
        cheap=(('["GPU:0", "GPU:1"]', '["CPU:0", "CPU:1"]'),),
        reason="no GPU here: the same split over the two logical CPU devices that "
        "setup(logical_devices=2) makes",
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
        prelude=ARRAYS,
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
    ("docs/distribute.md", "data-parallel scaling on CPU"): "skip: the recorded output of "
    "benchmarks/bench_scaling.py on a 2-core AMD EPYC, not a command",
    ("docs/profile.md", "pipeline(source, batch_size, *,"): "check: the signature of "
    "tfaccel.data.pipeline, compared with inspect.signature",
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
    ("docs/distribute.md", "srun python train.py --checkpoint-dir /shared/ckpt"): "needs a "
    "Slurm cluster with GPUs",
}


@dataclass
class Ran:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


Check = Callable[[Path, list[Ran]], None]


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


@dataclass(frozen=True)
class Cheap:
    """What runs for a documented command: shell lines, in order, in one fresh directory."""

    run: tuple[str, ...]
    reason: str
    files: tuple[tuple[str, str], ...] = ()  # (name, content) written first
    check: Check | None = None
    exit_codes: tuple[int, ...] = (0,)


def _tune_files() -> tuple[tuple[str, str], ...]:
    """docs/tune.md's own script, with its prelude, as train.py."""
    (block,) = [
        b for b in all_blocks() if b.path == "docs/tune.md" and _py_matches(b, _tune_script())
    ]
    return (("train.py", TUNE_SCRIPT_PRELUDE + "\n" + block.text + "\n"),)


def _tune_script() -> Py:
    return next(p for p in PY_BLOCKS if p.path == "docs/tune.md" and "__main__" in p.marker)


# A tune's cheap variant: fewer configurations, short samples, two final rounds. The search
# ends when those are measured; the budget is only a ceiling (a tiny one is refused when the
# first trial costs more, which on two busy cores can be ten seconds).
TUNE_TINY = "--space jit=off --space feed=numpy --budget 120 --sample-seconds 0.25 --rounds 2"
TUNE_SCRIPT = (
    "tfaccel tune train.py --space batch_size=64,128,256 --space precision=float32 "
    f"--db results.sqlite {TUNE_TINY}"
)
TUNE_MODEL = (
    "tfaccel tune --model reference-cnn --smoke --space batch_size=64 "
    f"--space precision=float32,mixed_bfloat16 {TUNE_TINY} --json"
)


# Documented commands that run in a cheaper form. Key: (document, the command's first line). A
# synopsis line is checked against --help in any case; an entry here runs a real command too.
CHEAP: dict[tuple[str, str], Cheap] = {
    ("README.md", "make run"): Cheap(
        ("tfaccel report --smoke --only matmul --out tfaccel-report",),
        "make run installs what is missing, then runs `tfaccel report --quick` (about 1.5 "
        "minutes): the same report, of one benchmark at its smoke size",
        check=_files(*(f"tfaccel-report/report.{ext}" for ext in ("html", "json", "md"))),
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
        ("python benchmarks/bench_kernels.py --resources --targets sm_90",),
        "one target of the four: tests/kernels/test_kernels_compile.py compiles every kernel for every "
        "target and checks the table; this shows the documented command runs",
    ),
    ("docs/distribute.md", "tfaccel launch -n 2 --restarts 1 train.py --epochs 3"): Cheap(
        ("tfaccel launch -n 2 --restarts 1 train.py --epochs 3",),
        "as documented, with a train.py that only reads its cluster (worker 1 is killed on the "
        "first attempt, as in the output shown): the launcher's part, without ~30 s of "
        "two-worker training",
        files=(("train.py", LAUNCH_TRAIN_PY),),
    ),
    ("docs/tune.md", "tfaccel tune train.py --budget 300"): Cheap(
        (TUNE_SCRIPT,),
        "shares the run of the --space/--db line below, which tunes the same script: fewer "
        "configurations and short samples (each tune costs TensorFlow's import and its search)",
    ),
    (
        "docs/tune.md",
        "tfaccel tune train.py --space batch_size=64,128,256 --space jit=off --db results.sqlite",
    ): Cheap(
        (TUNE_SCRIPT,),
        "docs/tune.md's own script with a small model: fewer configurations (float32, the "
        "numpy feed) and short samples",
        check=_files("results.sqlite"),
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
    ("docs/tune.md", "tfaccel tune train.py --budget 300"): _tune_files,
    (
        "docs/tune.md",
        "tfaccel tune train.py --space batch_size=64,128,256 --space jit=off --db results.sqlite",
    ): _tune_files,
}

# ---------------------------------------------------------------------------------------------
# Classifying the blocks


def _py_matches(block: Block, entry: Py) -> bool:
    return block.path == entry.path and entry.marker in block.text


@dataclass(frozen=True)
class Item:
    kind: str  # "python", "command" or "text"
    block: Block
    command: Command | None = None

    @property
    def id(self) -> str:
        return self.command.id if self.command else self.block.id


def all_items(blocks: list[Block]) -> tuple[list[Item], list[str]]:
    """Every block and command, and the lines no rule covers."""
    items: list[Item] = []
    stray: list[str] = []
    for block in blocks:
        if block.lang in {"python", "py"}:
            items.append(Item("python", block))
            continue
        commands, strays = ([], []) if block.lang not in SHELL_LANGS else read_commands(block)
        if commands:
            items.extend(Item("command", block, c) for c in commands)
            stray.extend(f"{block.id}: {line!r}" for line in strays)
        else:
            items.append(Item("text", block))
    return items, stray


def py_entry(block: Block) -> Py | None:
    matches = [p for p in PY_BLOCKS if _py_matches(block, p)]
    return matches[0] if len(matches) == 1 else None


def text_entry(block: Block) -> str | None:
    matches = [
        v
        for (path, marker), v in TEXT_BLOCKS.items()
        if path == block.path and marker in block.text
    ]
    return matches[0] if len(matches) == 1 else None


ITEMS, STRAY = all_items(all_blocks())

# ---------------------------------------------------------------------------------------------
# Running: subprocesses, two at a time, started for every selected item when the first asks


def _env(tmp: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        XDG_DATA_HOME=str(tmp / "xdg-data"),  # results databases land here, not in the user's
        CUDA_VISIBLE_DEVICES="",
        COLUMNS="120",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.update(extra or {})
    return env


RUNNER = r"""
import contextlib, io, json, os, signal, sys, time, traceback
jobs = json.load(open(sys.argv[1]))
results = open(sys.argv[2], "a")

def on_alarm(signum, frame):
    raise TimeoutError("the block ran too long")

signal.signal(signal.SIGALRM, on_alarm)
for job in jobs:
    os.makedirs(job["cwd"], exist_ok=True)
    os.chdir(job["cwd"])
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    captured, error, start = io.StringIO(), None, time.perf_counter()
    print(f"=== {job['id']}", flush=True)
    signal.alarm(job["timeout"])
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            for part in job["parts"]:
                code = "\n" * (part["line"] - 1) + part["code"]
                exec(compile(code, part["name"], "exec"), namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = traceback.format_exc()
    except BaseException:
        error = traceback.format_exc()
    finally:
        signal.alarm(0)
    record = {"id": job["id"], "error": error, "output": captured.getvalue()[-12000:],
              "seconds": time.perf_counter() - start}
    results.write(json.dumps(record) + "\n")
    results.flush()
"""


def _python_job(item: Item, tmp: Path) -> dict[str, Any]:
    block = item.block
    if item.kind == "text":
        return {
            "id": block.id,
            "cwd": str(tmp / "blocks" / re.sub(r"\W", "_", block.id)),
            "timeout": BLOCK_TIMEOUT_S,
            "parts": [
                {
                    "name": f"<check of {block.id}>",
                    "line": 1,
                    "code": f"DOCUMENTED = {block.text!r}\n" + SIGNATURE_CHECK,
                },
            ],
        }
    entry = py_entry(block)
    assert entry is not None
    code, line = block.text, block.line
    for documented, cheap in entry.cheap:
        assert documented in code, f"CHEAP for {block.id}: {documented!r} is no longer in the block"
        code = code.replace(documented, cheap)
    if entry.wrap:
        code, line = entry.wrap + "\n" + textwrap.indent(code, "    "), line - 1
    parts = [{"name": f"<prelude of {block.id}>", "line": 1, "code": entry.prelude}]
    parts.append({"name": str(ROOT / block.path), "line": line, "code": code})
    parts.append({"name": f"<check of {block.id}>", "line": 1, "code": entry.check})
    return {
        "id": block.id,
        "cwd": str(tmp / "blocks" / re.sub(r"\W", "_", block.id)),
        "timeout": BLOCK_TIMEOUT_S,
        "parts": parts,
    }


def run_process(name: str, items: list[Item], tmp: Path) -> dict[str, dict[str, Any]]:
    """Run ``items`` in one interpreter, in order; one result per block id."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "runner.py").write_text(RUNNER)
    (tmp / "jobs.json").write_text(json.dumps([_python_job(i, tmp) for i in items]))
    results_file = tmp / "results.jsonl"
    try:
        proc = subprocess.run(
            [sys.executable, str(tmp / "runner.py"), str(tmp / "jobs.json"), str(results_file)],
            cwd=tmp,
            env=_env(tmp, PROCESS_ENV.get(name, {})),
            capture_output=True,
            text=True,
            timeout=PROCESS_TIMEOUT_S,
        )
        ended = f"exit status {proc.returncode}; its output ends:\n{(proc.stdout + proc.stderr)[-4000:]}"
    except subprocess.TimeoutExpired as exc:
        ended = f"timed out after {PROCESS_TIMEOUT_S} s; output: {str(exc.stdout)[-2000:]}"
    results: dict[str, dict[str, Any]] = {}
    if results_file.exists():
        for line in results_file.read_text().splitlines():
            record = json.loads(line)
            results[record["id"]] = record
    for item in items:
        results.setdefault(
            item.id,
            {"error": f"process {name!r} ended before this block finished: {ended}", "output": ""},
        )
    return results


def run_commands(cheap: Cheap, tmp: Path, files: tuple[tuple[str, str], ...]) -> list[Ran]:
    tmp.mkdir(parents=True, exist_ok=True)
    for name, content in files:
        (tmp / name).write_text(content)
    runs = []
    for line in cheap.run:
        argv = shlex.split(line)
        program = argv[0]
        if program == "tfaccel":
            argv[0] = str(TFACCEL)
        elif program in {"python", "python3"}:
            argv[0] = sys.executable
            if len(argv) > 1 and (ROOT / argv[1]).is_file():
                argv[1] = str(ROOT / argv[1])
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                argv,
                cwd=tmp,
                env=_env(tmp),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"{line!r} ran past {COMMAND_TIMEOUT_S} s: give it a cheap variant in CHEAP"
            )
        runs.append(
            Ran(
                [program, *argv[1:]],
                proc.returncode,
                proc.stdout,
                proc.stderr,
                time.perf_counter() - start,
            )
        )
        if proc.returncode not in cheap.exit_codes:
            break
    return runs


def help_command(command: Command) -> str:
    """``PROGRAM [SUBCOMMAND] --help`` for a synopsis line."""
    words = []
    for word in command.text.split():
        if word.startswith(("-", "[")) or re.fullmatch(r"[A-Z][A-Z_.\[\],]*", word) or word == "|":
            break
        words.append(word)
    return " ".join([*words, "--help"])


class Jobs:
    """Subprocess jobs run on a small pool; each result is computed once and shared."""

    def __init__(self, tmp: Path, workers: int) -> None:
        self.tmp = tmp
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.futures: dict[Any, tuple[Future[Any], Path]] = {}
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.seconds: dict[Any, tuple[float, float]] = {}

    def submit(self, key: Any, fn: Callable[[Path], Any]) -> tuple[Future[Any], Path]:
        with self.lock:
            if key not in self.futures:
                workdir = self.tmp / f"job{len(self.futures) + 1}"
                self.futures[key] = (self.pool.submit(self._timed, key, fn, workdir), workdir)
            return self.futures[key]

    def _timed(self, key: Any, fn: Callable[[Path], Any], workdir: Path) -> Any:
        start = time.perf_counter()
        try:
            return fn(workdir)
        finally:
            self.seconds[key] = (start - self.started, time.perf_counter() - start)

    def process(self, name: str) -> dict[str, dict[str, Any]]:
        members = [i for i in PROCESS_ITEMS if _process_of(i) == name]
        future, _ = self.submit(("process", name), lambda d: run_process(name, members, d))
        return future.result()

    def commands(self, key: tuple[str, str], cheap: Cheap) -> tuple[Future[Any], Path]:
        files = cheap.files + (CHEAP_FILES[key]() if key in CHEAP_FILES else ())
        return self.submit(("commands", cheap.run, files), lambda d: run_commands(cheap, d, files))


def _process_of(item: Item) -> str:
    if item.kind == "text":
        return "light"
    entry = py_entry(item.block)
    return entry.process if entry else "?"


def _runnable_python(item: Item) -> bool:
    if item.kind == "python":
        return py_entry(item.block) is not None
    return item.kind == "text" and (text_entry(item.block) or "").startswith("check:")


# In the order of PY_BLOCKS, so that blocks of one process run as the table lists them.
PROCESS_ITEMS = sorted(
    (i for i in ITEMS if _runnable_python(i)),
    key=lambda i: next(
        (n for n, p in enumerate(PY_BLOCKS) if _py_matches(i.block, p)), len(PY_BLOCKS)
    ),
)


def _command_plan(command: Command) -> tuple[str | None, Cheap | None]:
    """(the reason it is skipped, or None; what runs besides a synopsis' --help check)."""
    key = (command.path, command.first)
    if key in SKIPPED:
        return SKIPPED[key], None
    if key in CHEAP:
        return None, CHEAP[key]
    if command.is_synopsis:
        return None, None
    return None, Cheap((command.text,), "as documented")


@pytest.fixture(scope="session")
def jobs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Jobs]:
    pool = Jobs(tmp_path_factory.mktemp("docs"), int(os.environ.get("TFACCEL_DOC_JOBS", "2")))
    # Start every job the selected items need, the long ones first.
    selected = [
        i.callspec.params["item"]
        for i in request.session.items
        if i.module is sys.modules[__name__]
        and hasattr(i, "callspec")
        and "item" in i.callspec.params
    ]
    for name in ("keras", "setup", "light"):
        members = [i for i in PROCESS_ITEMS if _process_of(i) == name]
        if any(i in selected for i in members):
            pool.submit(("process", name), lambda d, n=name, m=members: run_process(n, m, d))
    for item in selected:
        if item.kind == "command" and item.command is not None:
            _, cheap = _command_plan(item.command)
            if cheap is not None:
                pool.commands((item.command.path, item.command.first), cheap)
    yield pool
    pool.pool.shutdown(wait=True, cancel_futures=True)
    if os.environ.get("TFACCEL_DOC_TIMES"):
        for key, (at, took) in pool.seconds.items():
            print(f"job at {at:6.1f} s took {took:6.1f} s: {str(key)[:150]}", file=sys.stderr)
            future, _ = pool.futures[key]
            if key[0] == "process" and future.done() and not future.exception():
                for block_id, result in future.result().items():
                    print(f"    {result.get('seconds', 0):6.1f} s {block_id}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# The tests


def unlisted(items: list[Item], stray: list[str]) -> list[str]:
    """The blocks that would neither run nor be skipped with a reason."""
    problems = [f"{line}: not a command, in a block with commands" for line in stray]
    for item in items:
        if item.kind == "python" and py_entry(item.block) is None:
            problems.append(f"{item.id}: a python block with no (or several) PY_BLOCKS entries")
        if item.kind == "text" and text_entry(item.block) is None:
            problems.append(f"{item.id}: neither code nor a command: list it in TEXT_BLOCKS")
    return problems


def test_every_block_is_run_or_listed() -> None:
    """A new block must be runnable (PY_BLOCKS, or a command) or listed with its reason; an
    entry of the tables that matches nothing is stale."""
    problems = unlisted(ITEMS, STRAY)
    blocks = all_blocks()
    for entry in PY_BLOCKS:
        if sum(_py_matches(b, entry) for b in blocks) != 1:
            problems.append(f"PY_BLOCKS {entry.path} {entry.marker!r} matches no block, or several")
    for entry in PY_BLOCKS:
        for documented, _ in entry.cheap:
            if not any(_py_matches(b, entry) and documented in b.text for b in blocks):
                problems.append(f"PY_BLOCKS {entry.path} {entry.marker!r}: {documented!r} is gone")
    for path, marker in TEXT_BLOCKS:
        if sum(b.path == path and marker in b.text for b in blocks) != 1:
            problems.append(f"TEXT_BLOCKS {path} {marker!r} matches no block, or several")
    firsts = {(i.command.path, i.command.first) for i in ITEMS if i.command}
    for key in [*SKIPPED, *CHEAP]:
        if key not in firsts:
            problems.append(f"SKIPPED/CHEAP {key} matches no documented command")
    assert not problems, "\n".join(problems)


def test_a_new_block_is_caught() -> None:
    document = textwrap.dedent(
        """
        ```python
        print("a block no table lists")
        ```

        ```
        some recorded output
        ```

        ```bash
        tfaccel devices --json    # a command: it runs as written
          --tf
        tfaccel doctor
        stray output
        ```
        """
    )
    items, stray = all_items(read_blocks("docs/new.md", document))
    assert [(i.kind, i.id) for i in items] == [
        ("python", "docs/new.md:3"),
        ("text", "docs/new.md:7"),
        ("command", "docs/new.md:11"),
        ("command", "docs/new.md:13"),
    ]
    assert [i.command.text for i in items if i.command] == [
        "tfaccel devices --json --tf",
        "tfaccel doctor",
    ]
    assert unlisted(items, stray) == [
        "docs/new.md:11: 'stray output': not a command, in a block with commands",
        "docs/new.md:3: a python block with no (or several) PY_BLOCKS entries",
        "docs/new.md:7: neither code nor a command: list it in TEXT_BLOCKS",
    ]


def test_the_readme_starts_with_make_run_and_make_test() -> None:
    (first, *_) = read_blocks("README.md")
    commands, _ = read_commands(first)
    assert [c.text for c in commands[:2]] == ["make run", "make test"]


@pytest.mark.parametrize("item", [i for i in ITEMS if i.kind != "command"], ids=lambda i: i.id)
def test_block(item: Item, jobs: Jobs) -> None:
    if item.kind == "text":
        entry = text_entry(item.block)
        if entry is None:
            pytest.fail(f"{item.id} is not code: list it in TEXT_BLOCKS with a reason")
        if entry.startswith("skip:"):
            pytest.skip(entry.removeprefix("skip:").strip())
    elif py_entry(item.block) is None:
        pytest.fail(f"{item.id}: add this python block to PY_BLOCKS (with its prelude)")
    result = jobs.process(_process_of(item))[item.id]
    if result["error"]:
        pytest.fail(
            f"{item.id} failed:\n{result['error']}\n--- its output:\n{result['output']}",
            pytrace=False,
        )


@pytest.mark.parametrize("item", [i for i in ITEMS if i.kind == "command"], ids=lambda i: i.id)
def test_command(item: Item, jobs: Jobs) -> None:
    command = item.command
    assert command is not None
    reason, cheap = _command_plan(command)
    if reason is not None:
        pytest.skip(reason)
    submitted = jobs.commands((command.path, command.first), cheap) if cheap else None
    if command.is_synopsis:
        check_synopsis(command, jobs.tmp / "help")
    if cheap is None or submitted is None:
        return
    future, workdir = submitted
    runs: list[Ran] = future.result()
    last = runs[-1]
    shown = (
        f"$ {' '.join(last.argv)}\n(exit {last.returncode})\n"
        f"{last.stdout[-6000:]}\n{last.stderr[-6000:]}"
    )
    assert last.returncode in cheap.exit_codes and len(runs) == len(cheap.run), shown
    if cheap.check is not None:
        cheap.check(workdir, runs)
    if command.output and "--json" not in last.argv:
        # The documented output's first line, up to its colon ("tfaccel profile:"), is printed.
        head = command.output.strip().splitlines()[0].split(":")[0]
        assert head in last.stdout + last.stderr, f"{head!r} not in the output\n{shown}"
        # So is every finding id it shows (ids are stable; statuses depend on the machine).
        ids = re.findall(r"^(?:fail|warn|info|ok|skip) +([a-z0-9_]+) ", command.output, re.M)
        missing = [i for i in ids if not re.search(rf"\b{i}\b", last.stdout + last.stderr)]
        assert not missing, f"finding ids {missing} not in the output\n{shown}"


def check_synopsis(command: Command, workdir: Path) -> None:
    """Every option a synopsis names is in the help of its command."""
    cheap = Cheap((help_command(command),), "a synopsis: its options against --help")
    (ran,) = run_commands(cheap, workdir, ())
    assert ran.returncode == 0, f"{cheap.run[0]}: exit {ran.returncode}\n{ran.stderr}"
    options = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", command.text))
    missing = sorted(
        o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", ran.stdout)
    )
    assert not missing, f"{cheap.run[0]} does not list {missing}:\n{ran.stdout}"
