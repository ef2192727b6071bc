"""Bad command-line input: one table, each row a clear error (exit 2) that changes nothing.

Every row is an argv, the exit code 2 and a fragment of the message. The row runs in a scratch
directory (also the working directory) prepared by its setup, with a temporary ``HOME`` and
results database folder (``$XDG_DATA_HOME``); the test records every file and folder in all
three (kind, size, SHA-256, modification time: tests/files_around.py) before and after, and
asserts that nothing was created, changed or removed, and that no traceback was printed. Rows run in-process through ``tfaccel.cli.main`` unless they need a real
standard input (``subprocess``).

Where a command would go on to measure (bench, tune, profile), the measuring entry point is
replaced by a tripwire: a row that gets past the checks fails at once, instead of running a
benchmark.

Below the table: the library paths behind some rows that a command line cannot reach (a
read-only file system, a disk that fills up while a file is written).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from files_around import assert_unchanged, snapshot

from tfaccel.cli import main
from tfaccel.core.errors import TfaccelError, UsageError, argument, argument_names
from tfaccel.core.files import write_atomic
from tfaccel.profile.trace import TraceError, check_logdir
from tfaccel.snapshot import SCHEMA_VERSION, Snapshot, load_snapshot, save_snapshot

Setup = Callable[[Path], Callable[[], None] | None]


@dataclass(frozen=True)
class Row:
    """One bad input.

    Attributes:
        id: the test id.
        argv: the command line; ``{work}`` stands for the scratch directory.
        fragment: text the message must contain.
        setup: prepares the scratch directory; may return a cleanup.
        patches: ``(module, attribute, value)`` set for the row (shorter limits).
        stdin: a file given as standard input (the row then runs as a subprocess).
        fix: the message must say the fix ("Fix:"); False for argparse's own messages.
        env: environment variables set for the row.
    """

    id: str
    argv: tuple[str, ...]
    fragment: str
    setup: Setup | None = None
    patches: tuple[tuple[str, str, Any], ...] = ()
    stdin: str | None = None
    fix: bool = True
    env: tuple[tuple[str, str], ...] = ()


# --- setups ------------------------------------------------------------------------------------


def _file(name: str, content: str | bytes) -> Setup:
    def make(work: Path) -> None:
        data = content.encode() if isinstance(content, str) else content
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(data)

    return make


def _snapshot_with(**changes: Any) -> str:
    doc = Snapshot().to_dict()
    doc.update(changes)
    return json.dumps(doc)


def _gpu_snapshot(**gpu: Any) -> str:
    return _snapshot_with(nvml={"available": True, "gpus": [{"index": 0, "name": "A100", **gpu}]})


def _keras_used_before(setup: Setup) -> Setup:
    """``setup``, in a HOME where Keras ran before: for a row whose bad input shows only once
    TensorFlow runs the user's code (a model_fn that raises). Keras's first import anywhere
    (the user's own script's too) writes ``~/.keras/keras.json`` and Matplotlib's font cache;
    importing it here, before the files are recorded, makes the HOME of such a user."""

    def make(work: Path) -> Callable[[], None] | None:
        import keras  # noqa: F401  (HOME is the row's temporary one)

        return setup(work)

    return make


def _links_to_a_dir(work: Path) -> None:
    """file.txt, dir, train.py and linkdir, a symbolic link to dir."""
    _a_file_and_a_script(work)
    os.symlink(work / "dir", work / "linkdir")


def _nfc_named_log(work: Path) -> None:
    (work / "caf\u00e9.log").write_text("OOM when allocating tensor\n")


def _foreign_db(work: Path) -> None:
    with sqlite3.connect(work / "other.sqlite") as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("CREATE TABLE runs (x)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.close()


def _fifo(work: Path) -> None:
    os.mkfifo(work / "pipe")


def _fifo_with_a_silent_writer(work: Path) -> Callable[[], None]:
    os.mkfifo(work / "pipe")
    holder = os.open(work / "pipe", os.O_RDWR | os.O_NONBLOCK)  # a writer that never writes
    return lambda: os.close(holder)


def _a_file_and_a_dir(work: Path) -> None:
    (work / "file.txt").write_text("not a directory\n")
    (work / "dir").mkdir()


def _a_file_and_a_script(work: Path) -> None:
    """file.txt, and train.py, a script that exits with status 1 if it runs."""
    _a_file_and_a_dir(work)
    (work / "train.py").write_text("raise SystemExit('the script ran')\n")


def _symlink_loop(work: Path) -> None:
    os.symlink(work / "loop-b", work / "loop-a")
    os.symlink(work / "loop-a", work / "loop-b")


def _socket(work: Path) -> Callable[[], None]:
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(work / "sock"))
    return sock.close


def _a_dir_with_a_script(work: Path) -> None:
    (work / "proj").mkdir()
    (work / "proj" / "train.py").write_text("raise SystemExit('the script ran')\n")


LONG_NAME = "n" * 300  # longer than NAME_MAX (255) on every Linux file system
LONG_PATH = "/".join(["dir"] * 1500)  # about 6,000 bytes: longer than PATH_MAX (4096)


DEEP = "[" * 100_000 + "]" * 100_000
TOO_BIG = " " * (8 * 2**20) + "{}"
TOO_LONG = "9" * 40

LOGREAD = "tfaccel.diagnosis.log.read"
SHORT_WAITS = ((LOGREAD, "FIFO_WRITER_WAIT_S", 0.2), (LOGREAD, "STREAM_TIME_LIMIT_S", 0.5))


def _tensorflow_started() -> None:
    raise ReachedTheWork  # the command started TensorFlow before it checked its input


# profile checks its flags and the model name before it starts TensorFlow.
BEFORE_TENSORFLOW = (("tfaccel.cli.profile", "quiet_tensorflow", _tensorflow_started),)

# (label, value, what the message says) for an option that takes seconds
BAD_SECONDS = (
    ("nan", "nan", "not a finite number of seconds"),
    ("inf", "inf", "not a finite number of seconds"),
    ("negative", "-1", "the number of seconds is out of range"),
    ("zero", "0", "the number of seconds is out of range"),
    ("above-a-day", "1e9", "the number of seconds is out of range"),
    ("text", "soon", "not a number of seconds"),
)

ROWS: list[Row] = [
    # --- the command line itself
    Row("no-command", (), "exit codes", fix=False),
    Row("unknown-command", ("frobnicate",), "invalid choice", fix=False),
    Row("doctor-unknown-flag", ("doctor", "--nope"), "unrecognized arguments", fix=False),
    # --- doctor --save-snapshot: the one atomic writer
    Row(
        "save-snapshot-into-a-missing-directory",
        ("doctor", "--save-snapshot", "{work}/missing/snap.json"),
        "the directory '{work}/missing' does not exist",
    ),
    Row(
        "save-snapshot-onto-a-directory",
        ("doctor", "--save-snapshot", "{work}/dir"),
        "(given with --save-snapshot): it is a directory",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "save-snapshot-under-proc",
        ("doctor", "--save-snapshot", "/proc/tfaccel-snapshot.json"),
        "the directory '/proc' does not accept the file",
    ),
    Row(
        "save-snapshot-on-a-read-only-file-system",
        ("doctor", "--save-snapshot", "/sys/tfaccel-snapshot.json"),
        "the directory '/sys' does not accept the file",
    ),
    Row(
        "save-snapshot-onto-a-device",
        ("doctor", "--save-snapshot", "/dev/null"),
        "it is not a regular file",
    ),
    Row(
        "save-snapshot-under-a-file",
        ("doctor", "--save-snapshot", "{work}/file.txt/snap.json"),
        "'{work}/file.txt' is not a directory",
        setup=_a_file_and_a_dir,
    ),
    Row("save-snapshot-empty-name", ("doctor", "--save-snapshot", ""), "empty file name"),
    Row(
        "save-snapshot-over-a-users-script",  # only a snapshot it saved is replaced
        ("doctor", "--save-snapshot", "{work}/train.py"),
        "a file is there that is not a snapshot tfaccel saved",
        setup=_a_file_and_a_script,
    ),
    Row(
        "bundle-over-a-users-file",
        ("doctor", "--bundle", "{work}/file.txt"),
        "a file is there that is not a bundle tfaccel wrote",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "json-config-over-a-users-script",
        ("run", "--json-config", "{work}/train.py", "{work}/train.py"),
        "a file is there that is not a configuration tfaccel wrote",
        setup=_a_file_and_a_script,
    ),
    # --- doctor --bundle: checked before the probe, with the same atomic writer
    Row(
        "bundle-into-a-missing-directory",
        ("doctor", "--bundle", "{work}/missing/bundle.md"),
        "the directory '{work}/missing' does not exist",
    ),
    Row(
        "bundle-onto-a-directory",
        ("doctor", "--bundle", "{work}/dir"),
        "(given with --bundle): it is a directory",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "bundle-under-proc",
        ("doctor", "--bundle", "/proc/tfaccel-bundle.md"),
        "the directory '/proc' does not accept the file",
    ),
    Row(
        "bundle-on-a-read-only-file-system",
        ("doctor", "--deep", "--bundle", "/sys/tfaccel-bundle.md"),
        "the directory '/sys' does not accept the file",
    ),
    Row("bundle-onto-a-device", ("doctor", "--bundle", "/dev/null"), "it is not a regular file"),
    Row(
        "bundle-under-a-file",
        ("doctor", "--bundle", "{work}/file.txt/bundle.md"),
        "'{work}/file.txt' is not a directory",
        setup=_a_file_and_a_dir,
    ),
    Row("bundle-empty-name", ("doctor", "--bundle", ""), "--bundle was given an empty file name"),
    Row("bundle-blank-name", ("doctor", "--bundle", "  "), "--bundle was given an empty file name"),
    # --- doctor --deep-timeout
    *(
        Row(
            f"deep-timeout-{label}",
            ("doctor", "--deep", "--deep-timeout", value),
            f"argument --deep-timeout: {what}",
        )
        for label, value, what in BAD_SECONDS
    ),
    Row(
        "deep-and-snapshot-together",
        ("doctor", "--deep", "--snapshot", "{work}/x.json"),
        "--deep cannot be combined with --snapshot",
    ),
    # --- doctor --snapshot: the loader's bounds
    Row("snapshot-missing", ("doctor", "--snapshot", "{work}/nope.json"), "does not exist"),
    Row(
        "snapshot-is-a-directory",
        ("doctor", "--snapshot", "{work}/dir"),
        "is a directory",
        setup=_a_file_and_a_dir,
    ),
    Row("snapshot-empty-name", ("doctor", "--snapshot", ""), "empty file name"),
    Row(
        "preflight-snapshot-empty-name",
        ("doctor", "--preflight", "--snapshot", ""),
        "--snapshot was given an empty file name",
    ),
    Row("snapshot-dev-zero", ("doctor", "--snapshot", "/dev/zero"), "a character device"),
    Row(
        "snapshot-fifo",
        ("doctor", "--snapshot", "{work}/pipe"),
        "a named pipe (FIFO)",
        setup=_fifo,
    ),
    Row(
        "snapshot-100k-nested-brackets",
        ("doctor", "--snapshot", "{work}/deep.json"),
        "nests its arrays and objects too deeply",
        setup=_file("deep.json", DEEP),
    ),
    Row(
        "snapshot-integer-beyond-a-float",
        ("doctor", "--json", "--snapshot", "{work}/big.json"),
        "holds a number no machine reports",
        setup=_file("big.json", _gpu_snapshot(memory_total_bytes=10**400, memory_used_bytes=1)),
    ),
    Row(
        "snapshot-integer-beyond-64-bits",
        ("doctor", "--snapshot", "{work}/big.json"),
        "holds a number no machine reports",
        setup=_file("big.json", _gpu_snapshot(memory_total_bytes=2**64, memory_used_bytes=1)),
    ),
    Row(
        "snapshot-integer-of-5000-digits",
        ("doctor", "--snapshot", "{work}/big.json"),
        "5,000 digits",
        setup=_file("big.json", '{"schema_version": 1, "cpu": {"sockets": ' + "7" * 5000 + "}}"),
    ),
    Row(
        "snapshot-float-beyond-range",
        ("doctor", "--snapshot", "{work}/big.json"),
        "1e999",
        setup=_file("big.json", '{"schema_version": 1, "cpu": {"max_mhz": 1e999}}'),
    ),
    Row(
        "snapshot-nan",
        ("doctor", "--snapshot", "{work}/nan.json"),
        "NaN (not a finite number)",
        setup=_file("nan.json", '{"schema_version": 1, "cpu": {"max_mhz": NaN}}'),
    ),
    *(
        Row(
            f"snapshot-schema-version-{label}",
            ("doctor", "--snapshot", "{work}/v.json"),
            "schema_version is not one this tfaccel reads",
            setup=_file("v.json", _snapshot_with(schema_version=value)),
        )
        for label, value in (
            ("0", 0),
            ("negative", -1),
            ("newer", 99),
            ("text", "1"),
            ("bool", True),
        )
    ),
    Row(
        "snapshot-wrong-type",
        ("doctor", "--snapshot", "{work}/t.json"),
        "'snapshot.nvml.gpus' has the wrong type",
        setup=_file("t.json", _snapshot_with(nvml={"gpus": "A100"})),
    ),
    Row(
        "snapshot-wrong-type-deep-inside",
        ("doctor", "--snapshot", "{work}/t.json"),
        "'snapshot.nvml.gpus[0].memory_total_bytes' has the wrong type",
        setup=_file("t.json", _gpu_snapshot(memory_total_bytes="80 GB")),
    ),
    Row(
        "snapshot-not-json",
        ("doctor", "--snapshot", "{work}/x.json"),
        "is not valid JSON",
        setup=_file("x.json", "{not json"),
    ),
    Row(
        "snapshot-empty-file",
        ("doctor", "--snapshot", "{work}/x.json"),
        "is not valid JSON",
        setup=_file("x.json", ""),
    ),
    Row(
        "snapshot-a-list",
        ("doctor", "--snapshot", "{work}/x.json"),
        "not a JSON object",
        setup=_file("x.json", "[1, 2]"),
    ),
    Row(
        "snapshot-another-json-document",
        ("doctor", "--snapshot", "{work}/package.json"),
        "none of a snapshot's fields",
        setup=_file("package.json", '{"name": "my-app", "version": "1.0.0"}'),
    ),
    Row(
        "snapshot-too-large",
        ("doctor", "--snapshot", "{work}/x.json"),
        "too large to be a snapshot",
        setup=_file("x.json", TOO_BIG),
    ),
    Row(
        "snapshot-not-utf8",
        ("doctor", "--snapshot", "{work}/x.json"),
        "is not UTF-8 text",
        setup=_file("x.json", b'{"schema_version": 1, "env": {"A": "\xff\xfe"}}'),
    ),
    # --- doctor --log: bounded reads, clear refusals
    Row("log-missing", ("doctor", "--log", "{work}/nope.log"), "does not exist"),
    Row(
        "log-a-directory",
        ("doctor", "--log", "{work}/dir"),
        "is a directory",
        setup=_a_file_and_a_dir,
    ),
    Row("log-empty", ("doctor", "--log", "{work}/e.log"), "is empty", setup=_file("e.log", "")),
    Row(
        "log-only-whitespace",
        ("doctor", "--log", "{work}/e.log"),
        "holds only whitespace",
        setup=_file("e.log", " \n\t\n"),
    ),
    Row(
        "log-binary-file",
        ("doctor", "--log", "{work}/core.bin"),
        "is binary",
        setup=_file("core.bin", bytes(range(256)) * 64),
    ),
    Row("log-dev-zero", ("doctor", "--log", "/dev/zero"), "is binary"),
    Row("log-dev-urandom", ("doctor", "--log", "/dev/urandom"), "/dev/urandom' is"),
    Row("log-dev-null", ("doctor", "--log", "/dev/null"), "a character device that gave no data"),
    Row(
        "log-fifo-nobody-writes-to",
        ("doctor", "--log", "{work}/pipe"),
        "no program wrote to",
        setup=_fifo,
        patches=SHORT_WAITS,
    ),
    Row(
        "log-fifo-with-a-silent-writer",
        ("doctor", "--log", "{work}/pipe"),
        "with no data within 0.5 s",
        setup=_fifo_with_a_silent_writer,
        patches=SHORT_WAITS,
    ),
    Row(
        "log-stdin-dev-zero",
        ("doctor", "--log", "-"),
        "Standard input is binary",
        stdin="/dev/zero",
    ),
    Row("log-stdin-empty", ("doctor", "--log", "-"), "Standard input is empty", stdin="/dev/null"),
    # --- bench
    Row(
        "bench-synthetic-285-TiB",
        ("bench", "--only", "mlp", "--no-save", "--data", "synthetic:100000000000"),
        "does not fit in this machine's memory: it needs",
    ),
    Row(
        "bench-synthetic-40-digits",
        ("bench", "--no-save", "--data", f"synthetic:{TOO_LONG}"),
        "too large to be a number of images",
    ),
    Row(
        "bench-synthetic-zero", ("bench", "--data", "synthetic:0"), "--data value is not understood"
    ),
    Row(
        "bench-data-unknown",
        ("bench", "--data", "imagenet:/data"),
        "--data value is not understood",
    ),
    Row("bench-smoke-and-quick", ("bench", "--smoke", "--quick"), "cannot be combined"),
    Row(
        "bench-db-another-programs-sqlite",
        ("bench", "--only", "matmul", "--db", "{work}/other.sqlite"),
        "not a tfaccel results database",
        setup=_foreign_db,
    ),
    Row(
        "bench-db-a-directory",
        ("bench", "--only", "matmul", "--db", "{work}/dir"),
        "is a directory",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "bench-db-under-proc",
        ("bench", "--only", "matmul", "--db", "/proc/tfaccel.sqlite"),
        "cannot be opened",
    ),
    Row(
        "bench-db-corrupt",
        ("bench", "--only", "matmul", "--db", "{work}/r.sqlite"),
        "is corrupt",
        setup=_file("r.sqlite", b"\x00garbage" * 512),
    ),
    Row(
        "bench-unknown-benchmark",
        ("bench", "--only", "matmul,warp_drive"),
        "Unknown benchmark 'warp_drive'",
    ),
    Row("bench-unknown-device", ("bench", "--device", "tpu:0"), "Unknown device 'tpu:0'"),
    *(
        Row(f"bench-{flag[2:]}-{label}", ("bench", flag, value), f"argument {flag}: {what}")
        for flag, label, value, what in (
            ("--batch-size", "zero", "0", "the number is out of range"),
            ("--batch-size", "fraction", "1.5", "not an integer"),
            ("--repeats", "zero", "0", "the number is out of range"),
            ("--repeats", "nan", "nan", "not an integer"),
            ("--repeats", "a-million", "1000000", "the number is out of range"),
            ("--warmup", "negative", "-1", "the number is out of range"),
        )
    ),
    # --- tune
    *(
        Row(
            f"tune-{flag[2:]}-{label}",
            ("tune", "--model", "mlp", flag, value),
            f"argument {flag}: {what}",
        )
        for flag, label, value, what in (
            ("--budget", "nan", "nan", "not a finite number of seconds"),
            ("--budget", "inf", "inf", "not a finite number of seconds"),
            ("--budget", "negative", "-5", "the number of seconds is out of range"),
            ("--sample-seconds", "zero", "0", "the number of seconds is out of range"),
            ("--margin", "one", "1", "the fraction is out of range"),
            ("--margin", "nan", "nan", "the fraction is out of range"),
            ("--rounds", "zero", "0", "the number is out of range"),
            ("--batch-cap", "zero", "0", "the number is out of range"),
        )
    ),
    Row(
        "tune-budget-too-small-names-the-flag",
        ("tune", "--model", "mlp", "--smoke", "--no-progress", "--no-save", "--budget", "0.5"),
        "Received: --budget 0.5. Fix: pass a budget of 4 s or more (--budget 4)",
    ),
    Row(
        "tune-db-under-proc",
        ("tune", "--model", "mlp", "--smoke", "--no-progress", "--db", "/proc/tfaccel.sqlite"),
        "cannot be opened",
    ),
    Row(
        "tune-db-a-directory",
        ("tune", "--model", "mlp", "--smoke", "--no-progress", "--db", "{work}/dir"),
        "is a directory",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "tune-db-another-programs-sqlite",
        ("tune", "--model", "mlp", "--smoke", "--no-progress", "--db", "{work}/other.sqlite"),
        "not a tfaccel results database",
        setup=_foreign_db,
    ),
    Row("tune-nothing-to-tune", ("tune", "--no-progress"), "SCRIPT or --model"),
    Row(
        "tune-smoke-with-a-script",
        ("tune", "train.py", "--smoke", "--no-progress"),
        "--smoke applies to --model only",
    ),
    # an option where it does nothing is refused, never ignored without a word
    Row(
        "tune-fit-with-a-model",
        ("tune", "--model", "mlp", "--fit", "2", "--no-progress"),
        "--fit applies to a training script only (the fit it is tuned at",
    ),
    Row(
        "plan-timeout-with-a-model",
        ("plan", "--model", "mlp", "--timeout", "30"),
        "--timeout applies to a training script that calls model.fit only",
    ),
    Row(
        "plan-fit-with-a-model-fn-script",
        ("plan", "--fit", "2", "{work}/hooks.py"),
        "Fix: drop --fit: a reference model or a model_fn() is built, not run up to a fit",
        setup=_file("hooks.py", "def model_fn():\n    raise SystemExit('the script ran')\n"),
    ),
    Row(
        "profile-batch-size-with-a-script",
        ("profile", "--batch-size", "128", "train.py"),
        "--batch-size applies to --model only",
        patches=BEFORE_TENSORFLOW,
        setup=_a_file_and_a_script,
    ),
    Row(
        "profile-input-with-a-script",
        ("profile", "--input", "generator", "train.py"),
        "Received: --input generator",
        patches=BEFORE_TENSORFLOW,
        setup=_a_file_and_a_script,
    ),
    Row(
        "run-db-without-tuned",
        ("run", "--db", "{work}/results.sqlite", "train.py"),
        "--db applies to --tuned only",
        setup=_a_file_and_a_script,
    ),
    Row(
        "plan-list-devices-with-a-model",
        ("plan", "--list-devices", "--model", "mlp"),
        "--list-devices lists the device keys and plans nothing",
    ),
    Row(
        "launch-startup-timeout-without-hang-timeout",
        ("launch", "-n", "2", "--startup-timeout", "900", "train.py"),
        "--startup-timeout applies to --hang-timeout only",
        setup=_a_file_and_a_script,
    ),
    Row(
        "launch-port-base-zero",
        ("launch", "-n", "2", "--port-base", "0", "train.py"),
        "is not a port",
        setup=_a_file_and_a_script,
    ),
    Row(
        "selftest-simulate-without-gpu",
        ("selftest", "--simulate"),
        "(--simulate choose how the GPU self-test runs)",
    ),
    Row("tune-unknown-model", ("tune", "--model", "resnet99", "--no-progress"), "Unknown model"),
    Row("tune-bad-space", ("tune", "--model", "mlp", "--space", "jit"), "KEY=VALUES"),
    # --- plan (checked before the model is traced)
    Row(
        "plan-batch-zero",
        ("plan", "--model", "mlp", "--batch", "0"),
        "argument --batch: the number is out of range",
    ),
    Row(
        "plan-batch-text",
        ("plan", "--model", "mlp", "--batch", "many"),
        "argument --batch: not an integer",
    ),
    Row("plan-nothing-to-plan", ("plan",), "SCRIPT or --model, neither was given"),
    Row(
        "plan-json-nothing-to-plan",  # under --json, stdout holds the error as its document
        ("plan", "--json"),
        "SCRIPT or --model, neither was given",
    ),
    Row("plan-json-batch-text", ("plan", "--json", "--batch", "many"), "not an integer", fix=False),
    Row(
        "plan-script-syntax-error",  # Python's own message and line, no frames of tfaccel's
        ("plan", "train.py"),
        "The script train.py is not valid Python: invalid syntax at train.py:2",
        setup=_file("train.py", "import keras\ndef build(:\n    pass\n"),
    ),
    Row(
        "tune-binary-script",
        ("tune", "--no-progress", "train.py"),
        "is not Python source: it holds NUL bytes",
        setup=_file("train.py", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))),
    ),
    Row(
        "plan-timeout-past-a-day",  # past what the timer can take: said before the script runs
        ("plan", "--timeout", "1e12", "train.py"),
        "--timeout is not a number of seconds above 0 and at most a day",
        setup=_file("train.py", "raise SystemExit('the script must not run')\n"),
    ),
    Row("plan-unknown-model", ("plan", "--model", "resnet99"), "Unknown model"),
    Row(
        "plan-unknown-device",
        ("plan", "--model", "mlp", "--device", "a100-41gb"),
        "Unknown device key 'a100-41gb'",
    ),
    Row(
        "plan-price-without-value",
        ("plan", "--model", "mlp", "--price", "a100-40gb"),
        "is not KEY=PER_HOUR",
    ),
    Row(
        "plan-price-nan",
        ("plan", "--model", "mlp", "--price", "a100-40gb=nan"),
        "is not KEY=PER_HOUR",
    ),
    Row(
        "plan-price-unknown-device",
        ("plan", "--model", "mlp", "--price", "a100-41gb=1"),
        "unknown device key",
    ),
    Row("plan-missing-script", ("plan", "nope.py"), "does not exist"),
    Row(
        "plan-script-without-model-fn",
        ("plan", "train.py"),
        "defines no model_fn",
        # plan runs the script as written, with Keras's fit patched: Keras is imported first
        setup=_keras_used_before(_file("train.py", "x = 1\n")),
    ),
    Row(
        "plan-model-fn-raises",
        ("plan", "train.py", "--batch", "8"),
        "model_fn raised ValueError: no model today",
        setup=_keras_used_before(
            _file("train.py", "def model_fn():\n    raise ValueError('no model today')\n")
        ),
    ),
    # --- profile (checked before TensorFlow starts)
    *(
        Row(
            f"profile-{flag[2:]}-{label}",
            ("profile", "--model", "mlp", flag, value),
            f"argument {flag}: {what}",
            patches=BEFORE_TENSORFLOW,
        )
        for flag, label, value, what in (
            ("--steps", "zero", "0", "the number is out of range"),
            ("--steps", "nan", "nan", "not an integer"),
            ("--steps", "fraction", "1.5", "not an integer"),
            ("--steps", "beyond-31-bits", "9" * 40, "the number is out of range"),
            ("--warmup", "negative", "-1", "the number is out of range"),
            ("--batch-size", "zero", "0", "the number is out of range"),
            ("--trace-steps", "zero", "0", "the number is out of range"),
            ("--top", "negative", "-1", "the number is out of range"),
            ("--top", "text", "all", "not an integer"),
        )
    ),
    Row(
        "profile-unknown-model",
        ("profile", "--model", "transformer"),
        "Unknown model",
        patches=BEFORE_TENSORFLOW,
    ),
    # --- devices
    *(
        Row(
            f"devices-tf-timeout-{label}",
            ("devices", "--tf", "--tf-timeout", value),
            f"argument --tf-timeout: {what}",
        )
        for label, value, what in BAD_SECONDS
    ),
    # --- the results database is a file: a device, a FIFO (SQLite would fail with I/O errors)
    Row(
        "bench-db-dev-null",
        ("bench", "--only", "matmul", "--db", "/dev/null"),
        "'/dev/null' is not a regular file. Expected: the path of a regular file",
    ),
    Row(
        "bench-db-a-fifo",
        ("bench", "--only", "matmul", "--db", "{work}/pipe"),
        "is not a regular file. Expected: the path of a regular file (it is created when "
        "missing). Received: a named pipe (FIFO)",
        setup=_fifo,
    ),
    Row(
        "tune-db-dev-zero",
        ("tune", "--model", "mlp", "--smoke", "--no-progress", "--db", "/dev/zero"),
        "'/dev/zero' is not a regular file. Expected: the path of a regular file",
    ),
    # --- report --out (checked before the bench runs)
    Row(
        "report-out-is-a-file",
        ("report", "--smoke", "--no-save", "--out", "{work}/file.txt"),
        "(--out) is not a directory: it is a regular file",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "report-out-under-proc-sys",
        ("report", "--smoke", "--no-save", "--out", "/proc/sys/tfaccel-report"),
        "(--out) is not writable",
    ),
    # --- paths no file system call takes (core.files.check_path), and scripts that are not
    # Python files (scripts.check_script): what the path is, never "does not exist"
    *(
        Row(
            f"{cmd[0]}-script-name-too-long",
            (*cmd, LONG_NAME),
            "longer than this file system allows (NAME_MAX",
        )
        for cmd in (("run",), ("profile",), ("launch", "-n", "2"), ("tune",), ("plan",))
    ),
    *(
        Row(f"{cmd[0]}-script-path-too-long", (*cmd, LONG_PATH), "(PATH_MAX, ")
        for cmd in (("run",), ("tune", "--no-progress"), ("plan",))
    ),
    *(
        Row(f"{cmd[0]}-db-name-too-long", (*cmd, "--db", LONG_NAME), "The results database path")
        for cmd in (
            ("bench", "--only", "matmul"),
            ("tune", "--model", "mlp", "--smoke", "--no-progress"),
        )
    ),
    Row(
        "bench-db-path-too-long",
        ("bench", "--only", "matmul", "--db", LONG_PATH + "/r.sqlite"),
        "(PATH_MAX, ",
    ),
    Row(
        "bench-db-symlink-loop",
        ("bench", "--only", "matmul", "--db", "{work}/loop-a"),
        "runs through a loop of symbolic links",
        setup=_symlink_loop,
    ),
    Row(
        "bench-db-a-socket",
        ("bench", "--only", "matmul", "--db", "{work}/sock"),
        "Received: a socket",
        setup=_socket,
    ),
    *(
        Row(
            f"{cmd[0]}-script-symlink-loop",
            (*cmd, "{work}/loop-a"),
            "runs through a loop of symbolic links",
            setup=_symlink_loop,
        )
        for cmd in (("run",), ("profile",), ("tune", "--no-progress"), ("plan",))
    ),
    Row("run-script-empty", ("run", ""), "The script '' is empty"),
    Row("run-script-blank", ("run", "   "), "is empty"),
    Row("plan-script-empty", ("plan", ""), "The script '' is empty"),
    Row(
        "run-script-a-directory",
        ("run", "{work}/proj"),
        "is a directory, without a __main__.py",
        setup=_a_dir_with_a_script,
    ),
    Row(
        "tune-script-a-directory",
        ("tune", "--no-progress", "{work}/proj"),
        "is a directory. Expected: a Python file defining model_fn() and data()",
        setup=_a_dir_with_a_script,
    ),
    Row(
        "plan-script-a-directory",
        ("plan", "{work}/proj"),
        "is a directory",
        setup=_a_dir_with_a_script,
    ),
    Row("run-script-a-fifo", ("run", "{work}/pipe"), "it is a named pipe (FIFO)", setup=_fifo),
    Row(
        "launch-script-a-fifo",
        ("launch", "-n", "2", "{work}/pipe"),
        "it is a named pipe (FIFO)",
        setup=_fifo,
    ),
    Row("profile-script-dev-null", ("profile", "/dev/null"), "it is a character device"),
    Row("run-script-dev-null", ("run", "/dev/null"), "it is a character device"),
    Row("tune-script-dev-zero", ("tune", "--no-progress", "/dev/zero"), "a character device"),
    Row("plan-script-dev-null", ("plan", "/dev/null"), "it is a character device"),
    Row("run-script-a-socket", ("run", "{work}/sock"), "it is a socket", setup=_socket),
    Row(
        "run-script-under-a-file",
        ("run", "{work}/file.txt/train.py"),
        "does not exist",
        setup=_a_file_and_a_dir,
    ),
    # --- odd numbers and text on every numeric and path option: floats written as 2.0, 1e30,
    # NaN, infinities, empty and blank text, other scripts' digits, Python's underscores,
    # near-miss names, NUL bytes and names beyond NAME_MAX
    *(
        Row(f"audit-{cmd[0]}-{flag[2:]}-{label}", (*cmd, flag, value), f"argument {flag}: {what}")
        for cmd, flag, label, value, what in (
            (("bench", "--no-save"), "--batch-size", "two-point-zero", "2.0", "not an integer"),
            (("bench", "--no-save"), "--batch-size", "1e30", "1e30", "not an integer"),
            (("bench", "--no-save"), "--batch-size", "inf", "inf", "not an integer"),
            (("bench", "--no-save"), "--batch-size", "empty", "", "not an integer"),
            (("bench", "--no-save"), "--batch-size", "blank", "  ", "not an integer"),
            (("bench", "--no-save"), "--batch-size", "hex", "0x10", "not an integer"),
            (
                ("bench", "--no-save"),
                "--batch-size",
                "arabic-indic-digit",
                "\u0663",
                "not an integer",
            ),
            (("bench", "--no-save"), "--batch-size", "underscore", "4_0", "not an integer"),
            (("bench", "--no-save"), "--repeats", "1e30", "1e30", "not an integer"),
            (("bench", "--no-save"), "--repeats", "minus-zero", "-0", "the number is out of range"),
            (("bench", "--no-save"), "--warmup", "two-point-zero", "2.0", "not an integer"),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--budget",
                "1e30",
                "1e30",
                "the number of seconds is out of range",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--budget",
                "empty",
                "",
                "not a number of seconds",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--budget",
                "decimal-comma",
                "2,5",
                "not a number of seconds",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--budget",
                "underscore",
                "3_00",
                "not a number of seconds",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--sample-seconds",
                "inf",
                "inf",
                "not a finite number of seconds",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--margin",
                "inf",
                "inf",
                "the fraction is out of range",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--margin",
                "negative",
                "-0.1",
                "the fraction is out of range",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--margin",
                "underscore",
                "0.1_0",
                "not a fraction",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--rounds",
                "fraction",
                "2.5",
                "not an integer",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--batch-cap",
                "two-point-zero",
                "2.0",
                "not an integer",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--batch-cap",
                "negative",
                "-1",
                "the number is out of range",
            ),
            (("plan", "--model", "mlp"), "--batch", "1e30", "1e30", "not an integer"),
            (("plan", "--model", "mlp"), "--batch", "nan", "nan", "not an integer"),
            (("plan", "--model", "mlp"), "--batch", "negative", "-1", "the number is out of range"),
            (("plan", "--model", "mlp"), "--examples", "zero", "0", "the number is out of range"),
            (("plan", "--model", "mlp"), "--examples", "1e30", "1e30", "not an integer"),
            (("profile", "--model", "mlp"), "--steps", "two-point-zero", "2.0", "not an integer"),
            (("profile", "--model", "mlp"), "--warmup", "nan", "nan", "not an integer"),
            (("profile", "--model", "mlp"), "--batch-size", "1e30", "1e30", "not an integer"),
            (("profile", "--model", "mlp"), "--trace-steps", "fraction", "2.5", "not an integer"),
            (("profile", "--model", "mlp"), "--top", "1e30", "1e30", "not an integer"),
            (
                ("doctor", "--deep"),
                "--deep-timeout",
                "nan",
                "nan",
                "not a finite number of seconds",
            ),
            (
                ("doctor", "--deep"),
                "--deep-timeout",
                "1e30",
                "1e30",
                "the number of seconds is out of range",
            ),
            (("doctor", "--deep"), "--deep-timeout", "empty", "", "not a number of seconds"),
            (
                ("devices", "--tf"),
                "--tf-timeout",
                "decimal-comma",
                "2,5",
                "not a number of seconds",
            ),
            (("launch", "-n", "2"), "--restarts", "two-point-zero", "2.0", "not an integer"),
            (("launch", "-n", "2"), "--port-base", "fraction", "2.5", "not an integer"),
            (("launch", "-n", "2"), "--port-base", "underscore", "2_0000", "not an integer"),
            (("launch", "-n", "2"), "--grace", "underscore", "1_0", "not a number"),
        )
    ),
    *(
        Row(
            f"audit-launch-workers-{label}",
            ("launch", "-n", value, "train.py"),
            f"argument -n/--workers: {what}",
        )
        for label, value, what in (
            ("1e30", "1e30", "not an integer"),
            ("two-point-zero", "2.0", "not an integer"),
            ("underscore", "1_0", "not an integer"),
        )
    ),
    *(
        Row(
            f"audit-launch-{label}",
            ("launch", "-n", "2", *options, "{work}/train.py"),
            fragment,
            setup=_a_file_and_a_script,
        )
        for label, options, fragment in (
            (
                "port-base-beyond-65535",
                ("--port-base", "99999"),
                "--port-base 99999 leaves no room",
            ),
            ("grace-inf", ("--grace", "inf"), "--grace inf is not a positive number of seconds"),
            (
                "startup-timeout-1e30",
                ("--hang-timeout", "60", "--startup-timeout", "1e30"),
                "--startup-timeout 1e+30 is not",
            ),
            ("hang-timeout-nan", ("--hang-timeout", "nan"), "--hang-timeout nan is not"),
            ("host-empty", ("--host", ""), "--host '' is not an address"),
            ("host-blank", ("--host", "  "), "--host '  ' is not an address"),
        )
    ),
    *(
        Row(
            f"audit-run-{flag[2:]}-{label}",
            ("run", flag, value, "{work}/train.py"),
            fragment,
            setup=_a_file_and_a_script,
        )
        for flag, label, value, fragment in (
            ("--logical-devices", "empty", "", "not a valid logical device count"),
            ("--logical-devices", "1e30", "1e30", "--logical-devices 1e30 is not"),
            ("--logical-devices", "two-point-zero", "2.0", "--logical-devices 2.0 is not"),
            ("--logical-devices", "underscore", "1_0", "--logical-devices 1_0 is not"),
            ("--precision", "float23", "float23", "--precision float23 is not a valid precision"),
            ("--precision", "mixed-bf16", "mixed_bf16", "--precision mixed_bf16 is not"),
            ("--precision", "empty", "", "is not a valid precision"),
            ("--threads", "1e30", "1e30", "--threads 1e30 is not a valid thread count"),
            ("--threads", "underscore", "4_0", "--threads 4_0 is not"),
            ("--seed", "negative", "-1", "--seed -1 is not a valid seed"),
            ("--seed", "arabic-indic-digit", "\u0663", "is not a valid seed"),
            ("--seed", "1e30", "1e30", "--seed 1e30 is not a valid seed"),
            ("--memory", "nan", "nan", "--memory nan is not a valid GPU memory setting"),
            ("--memory", "inf", "inf", "--memory inf is not"),
            ("--memory", "zero", "0", "--memory 0 is not"),
            ("--memory", "underscore", "1_024", "--memory 1_024 is not"),
            ("--devices", "negative", "-1", "--devices -1 is not a valid GPU selection"),
            ("--devices", "1e30", "1e30", "--devices 1e30 is not"),
            ("--jit", "maybe", "maybe", "--jit maybe is not a valid XLA setting"),
        )
    ),
    Row(
        "audit-launch-workers-1e30-as-digits",
        ("launch", "-n", "1" + "0" * 30, "{work}/train.py"),
        "Cannot start 1000000000000000000000000000000 workers",
        setup=_a_file_and_a_script,
    ),
    Row(
        "audit-bench-data-synthetic-empty-size",
        ("bench", "--no-save", "--data", "synthetic:"),
        "--data value is not understood",
    ),
    Row(
        "audit-bench-data-synthetic-fraction",
        ("bench", "--no-save", "--data", "synthetic:2.5"),
        "--data value is not understood",
    ),
    Row(
        "audit-bench-data-synthetic-1e3",
        ("bench", "--no-save", "--data", "synthetic:1e3"),
        "--data value is not understood",
    ),
    Row(
        "audit-bench-data-empty",
        ("bench", "--no-save", "--data", ""),
        "--data value is not understood",
    ),
    Row(
        "audit-bench-db-empty",
        ("bench", "--only", "matmul", "--db", ""),
        "The results database path '' is empty",
    ),
    Row(
        "audit-bench-db-nul",
        ("bench", "--only", "matmul", "--db", "{work}/r\x00.sqlite"),
        "holds a NUL byte",
    ),
    Row(
        "audit-bench-only-empty", ("bench", "--no-save", "--only", ""), "--only names no benchmark"
    ),
    Row(
        "audit-bench-only-near-miss",
        ("bench", "--no-save", "--only", "matmull"),
        "Unknown benchmark 'matmull'",
    ),
    Row(
        "audit-bench-device-near-miss",
        ("bench", "--no-save", "--device", "gpu23"),
        "Unknown device 'gpu23'",
    ),
    Row(
        "audit-tune-space-float23",
        ("tune", "--model", "mlp", "--no-progress", "--space", "precision=float23"),
        "'float23' is not valid for 'precision'",
    ),
    Row(
        "audit-tune-space-mixed-bf16",
        ("tune", "--model", "mlp", "--no-progress", "--space", "precision=mixed_bf16"),
        "'mixed_bf16' is not valid",
    ),
    Row(
        "audit-tune-space-batch-1e30",
        ("tune", "--model", "mlp", "--no-progress", "--space", "batch_size=1e30"),
        "'1e30' is not valid for 'batch_size'",
    ),
    Row(
        "audit-tune-space-threads-negative",
        ("tune", "--model", "mlp", "--no-progress", "--space", "threads=-1"),
        "'-1' is not valid for 'threads'",
    ),
    Row(
        "audit-tune-space-bare-equals",
        ("tune", "--model", "mlp", "--no-progress", "--space", "="),
        "is not KEY=VALUES",
    ),
    Row(
        "audit-tune-model-trailing-space",
        ("tune", "--model", "mlp ", "--no-progress"),
        "Unknown model 'mlp '",
    ),
    Row(
        "audit-plan-precision-float23",
        ("plan", "--model", "mlp", "--precision", "float23"),
        "invalid choice: 'float23'",
        fix=False,
    ),
    Row(
        "audit-plan-precision-mixed-bf16",
        ("plan", "--model", "mlp", "--precision", "mixed_bf16"),
        "invalid choice: 'mixed_bf16'",
        fix=False,
    ),
    Row(
        "audit-plan-price-inf",
        ("plan", "--model", "mlp", "--price", "a100-40gb=inf"),
        "A --price is not KEY=PER_HOUR",
    ),
    Row(
        "audit-plan-price-negative",
        ("plan", "--model", "mlp", "--price", "a100-40gb=-1"),
        "A --price is not KEY=PER_HOUR",
    ),
    Row(
        "audit-plan-price-beyond-a-float",
        ("plan", "--model", "mlp", "--price", "a100-40gb=1e400"),
        "A --price is not KEY=PER_HOUR",
    ),
    Row(
        "audit-plan-price-without-key",
        ("plan", "--model", "mlp", "--price", "=1"),
        "A --price is not KEY=PER_HOUR",
    ),
    Row(
        "audit-plan-device-empty",
        ("plan", "--model", "mlp", "--device", ""),
        "Unknown device key ''",
    ),
    Row(
        "audit-profile-precision-float23",
        ("profile", "--model", "mlp", "--precision", "float23"),
        "invalid choice: 'float23'",
        fix=False,
    ),
    Row(
        "audit-doctor-save-snapshot-name-too-long",
        ("doctor", "--save-snapshot", "{work}/" + LONG_NAME),
        "Cannot write",
    ),
    Row(
        "audit-doctor-bundle-name-too-long",
        ("doctor", "--bundle", "{work}/" + LONG_NAME),
        "Cannot write",
    ),
    Row(
        "audit-report-out-empty",
        ("report", "--smoke", "--no-save", "--out", ""),
        "--out was given an empty directory name",
    ),
    Row(
        "audit-report-out-name-too-long",
        ("report", "--smoke", "--no-save", "--out", "{work}/" + LONG_NAME),
        "The report directory",
    ),
    Row(
        "audit-selftest-out-name-too-long",
        ("selftest", "--gpu", "--out", "{work}/" + LONG_NAME),
        "The self-test directory",
    ),
    # --- a second audit: a trailing slash on a file (Path drops it, so "file.txt/" would
    # replace or run file.txt), symbolic links to directories given as files, zero-byte and
    # other programs' databases read for a comparison, look-alike Unicode and whitespace in
    # names, negative zero and NaN where counts go, garbage in TFACCEL_* variables
    *(
        Row(
            f"audit2-doctor-{flag[2:]}-trailing-slash-{label}",
            ("doctor", flag, "{work}/" + name),
            "the name ends with a slash, so it names a directory",
            setup=_a_file_and_a_dir,
        )
        for flag in ("--save-snapshot", "--bundle")
        for label, name in (("on-a-file", "file.txt/"), ("on-a-new-name", "new.json/"))
    ),
    *(
        Row(
            f"audit2-doctor-{'-'.join(f[2:] for f in flags)}-trailing-slash-{label}",
            ("doctor", *flags, "{work}/" + name),
            f"(given with {flags[-1]}): the name ends with a slash, so it names a directory",
            setup=_a_file_and_a_dir,
        )
        for flags in (("--snapshot",), ("--log",), ("--preflight", "--snapshot"))
        for label, name in (("on-a-file", "file.txt/"), ("on-a-new-name", "new.json/"))
    ),
    *(
        Row(
            f"audit2-doctor-{flag[2:]}-symlink-to-a-directory",
            ("doctor", flag, "{work}/linkdir"),
            "it is a directory",
            setup=_links_to_a_dir,
        )
        for flag in ("--save-snapshot", "--bundle")
    ),
    Row(
        "audit2-run-json-config-trailing-slash-on-a-file",
        ("run", "--json-config", "{work}/file.txt/", "{work}/train.py"),
        "the name ends with a slash",
        setup=_a_file_and_a_script,
    ),
    *(
        Row(
            f"audit2-{cmd[0]}-script-trailing-slash-on-a-file",
            (*cmd, "{work}/train.py/"),
            "ends with a slash, which names a directory, but it is a regular file",
            setup=_a_file_and_a_script,
        )
        for cmd in (("run",), ("plan",), ("tune", "--no-progress"), ("launch", "-n", "2"))
    ),
    Row(
        "audit2-run-script-symlink-to-a-directory",
        ("run", "{work}/linkdir"),
        "is a directory, without a __main__.py",
        setup=_links_to_a_dir,
    ),
    Row(
        "audit2-bench-db-symlink-to-a-directory",
        ("bench", "--only", "matmul", "--db", "{work}/linkdir"),
        "is a directory",
        setup=_links_to_a_dir,
    ),
    Row(
        "audit2-bench-db-trailing-slash-on-a-file",
        ("bench", "--only", "matmul", "--db", "{work}/file.txt/"),
        "ends with a slash, so it names a directory",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "audit2-tune-db-trailing-slash-on-a-file",
        ("tune", "--model", "mlp", "--smoke", "--no-progress", "--db", "{work}/file.txt/"),
        "ends with a slash, so it names a directory",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "audit2-bench-compare-db-a-zero-byte-file",
        ("bench", "--only", "matmul", "--no-save", "--compare", "--db", "{work}/empty.sqlite"),
        "not a tfaccel results database",
        setup=_file("empty.sqlite", b""),
    ),
    Row(
        "audit2-bench-compare-db-another-programs-sqlite",
        ("bench", "--only", "matmul", "--no-save", "--compare", "--db", "{work}/other.sqlite"),
        "not a tfaccel results database",
        setup=_foreign_db,
    ),
    Row(
        "audit2-report-out-trailing-slash-on-a-file",
        ("report", "--smoke", "--no-save", "--out", "{work}/file.txt/"),
        "(--out) is not a directory: it is a regular file",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "audit2-doctor-log-name-in-another-unicode-form",
        ("doctor", "--log", "{work}/cafe\u0301.log"),
        "does not exist",
        setup=_nfc_named_log,
    ),
    Row(
        "audit2-doctor-log-name-with-a-trailing-space",
        ("doctor", "--log", "{work}/caf\u00e9.log "),
        "does not exist",
        setup=_nfc_named_log,
    ),
    Row(
        "audit2-plan-model-fullwidth-letters",
        ("plan", "--model", "\uff4d\uff4c\uff50"),
        "Unknown model",
    ),
    Row(
        "audit2-tune-model-zero-width-space",
        ("tune", "--model", "mlp\u200b", "--no-progress"),
        "Unknown model",
    ),
    Row(
        "audit2-bench-only-cyrillic-look-alike",
        ("bench", "--no-save", "--only", "m\u0430tmul"),
        "Unknown benchmark",
    ),
    *(
        Row(f"audit2-{cmd[0]}-{flag[2:]}-{label}", (*cmd, flag, value), f"argument {flag}: {what}")
        for cmd, flag, label, value, what in (
            (
                ("plan", "--model", "mlp"),
                "--batch",
                "minus-zero",
                "-0",
                "the number is out of range",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--budget",
                "minus-zero",
                "-0",
                "the number of seconds is out of range",
            ),
            (
                ("doctor", "--deep"),
                "--deep-timeout",
                "minus-zero",
                "-0.0",
                "the number of seconds is out of range",
            ),
            (
                ("profile", "--model", "mlp"),
                "--steps",
                "minus-zero",
                "-0",
                "the number is out of range",
            ),
            (
                ("tune", "--model", "mlp", "--no-progress"),
                "--rounds",
                "nan",
                "nan",
                "not an integer",
            ),
        )
    ),
    *(
        Row(
            f"audit2-run-{flag[2:]}-{label}",
            ("run", flag, value, "{work}/train.py"),
            fragment,
            setup=_a_file_and_a_script,
        )
        for flag, label, value, fragment in (
            ("--threads", "nan", "nan", "--threads nan is not a valid thread count"),
            ("--logical-devices", "minus-zero", "-0", "--logical-devices -0 is not"),
            ("--seed", "nan", "nan", "--seed nan is not a valid seed"),
        )
    ),
    *(
        Row(
            f"audit2-run-env-{variable}-{label}",
            ("run", "{work}/train.py"),
            f"The environment variable {variable}=",
            setup=_a_file_and_a_script,
            env=((variable, value),),
        )
        for variable, label, value in (
            ("TFACCEL_MEMORY", "text", "lots"),
            ("TFACCEL_MEMORY", "nan", "nan"),
            ("TFACCEL_THREADS", "text", "abc"),
            ("TFACCEL_THREADS", "arabic-indic-digit", "\u0663"),
            ("TFACCEL_PRECISION", "float23", "float23"),
            ("TFACCEL_JIT", "perhaps", "perhaps"),
            ("TFACCEL_DETERMINISTIC", "maybe", "maybe"),
            ("TFACCEL_SEED", "negative", "-1"),
            ("TFACCEL_SEED", "beyond-32-bits", str(2**40)),
        )
    ),
    # --- selftest (checked before it looks for a GPU: the same answer on every machine)
    Row("selftest-without-gpu", ("selftest",), "Expected: --gpu"),
    Row(
        "selftest-out-is-a-file",
        ("selftest", "--gpu", "--out", "{work}/file.txt"),
        "(--out) is not a directory: it is a regular file",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "selftest-out-under-a-file",
        ("selftest", "--gpu", "--json", "--out", "{work}/file.txt/gpu-check"),
        "'{work}/file.txt' in its path is a regular file",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "selftest-list-out-is-a-device",
        ("selftest", "--gpu", "--list", "--out", "/dev/null"),
        "(--out) is not a directory: it is a character device",
    ),
    Row(
        "selftest-out-under-proc-sys",
        ("selftest", "--gpu", "--out", "/proc/sys/tfaccel-gpu-check"),
        "(--out) is not writable",
    ),
    Row("selftest-out-empty", ("selftest", "--gpu", "--out", ""), "--out was given an empty"),
    Row(
        "selftest-out-holds-a-users-summary",  # never replaced: refused before anything runs
        ("selftest", "--gpu", "--simulate", "--out", "{work}/dir"),
        "a file is there that is not a self-test summary tfaccel wrote",
        setup=_file("dir/summary.json", '{"mine": true}\n'),
    ),
    Row(
        "selftest-out-holds-a-users-steps-log",
        ("selftest", "--gpu", "--simulate", "--out", "{work}/dir"),
        "not a self-test log tfaccel wrote",
        setup=_file("dir/steps.log", "my notes\n"),
    ),
    *(
        Row(
            f"selftest-budget-{label}",
            ("selftest", "--gpu", "--budget", value),
            f"argument --budget: {what}",
        )
        for label, value, what in BAD_SECONDS
    ),
]

SLOW_ROWS = [
    # Measure how long importing TensorFlow takes here, to say which timeout fits.
    Row(
        "deep-timeout-shorter-than-any-import",
        ("doctor", "--deep", "--deep-timeout", "0.05"),
        "is too short for importing TensorFlow",
    ),
    Row(
        "devices-tf-timeout-shorter-than-any-import",
        ("devices", "--tf", "--tf-timeout", "0.05"),
        "The timeout --tf-timeout 0.05 is too short for importing TensorFlow",
    ),
]

# The trace directory (tfaccel.profile.trace.check_logdir) is checked before the model is
# built or the script runs, not when the trace starts after a training run.
TRACE_ROWS = [
    Row(
        "profile-trace-onto-a-file",
        ("profile", "--model", "mlp", "--tiny", "--trace", "{work}/file.txt"),
        "(--trace) is a file",
        setup=_a_file_and_a_dir,
    ),
    Row(
        "profile-trace-in-a-read-only-directory",
        ("profile", "--model", "mlp", "--tiny", "--trace", "/sys/tfaccel-trace"),
        "cannot be written",
    ),
    Row(
        "profile-script-trace-onto-a-file",
        ("profile", "--trace", "{work}/file.txt", "{work}/train.py"),
        "(--trace) is a file",
        setup=_a_file_and_a_script,
    ),
]


# --- running a row -----------------------------------------------------------------------------


class ReachedTheWork(BaseException):
    """Raised by a tripwire: the command got past its checks and would measure now."""


def _tripwire(*args: object, **kwargs: object) -> None:
    raise ReachedTheWork


@pytest.fixture(autouse=True)
def tripwires(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row that passes every check fails at once here, instead of measuring for minutes."""
    import tfaccel.bench.history
    import tfaccel.models
    import tfaccel.selftest
    import tfaccel.tuning.api

    build = tfaccel.models.build

    def build_only_unknown_names(name: str, **kwargs: Any) -> Any:
        if name in tfaccel.models.MODELS:
            raise ReachedTheWork
        return build(name, **kwargs)  # raises the error that lists the models

    monkeypatch.setattr(tfaccel.bench.history, "run", _tripwire)
    monkeypatch.setattr(tfaccel.selftest, "execute", _tripwire)
    monkeypatch.setattr(tfaccel.tuning.api, "_tf_runner", _tripwire)
    monkeypatch.setattr(tfaccel.models, "build", build_only_unknown_names)


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def run_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Outcome:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals exit 2
        code = exc.code if isinstance(exc.code, int) else 2
    except ReachedTheWork:
        out, err = capsys.readouterr()
        pytest.fail(f"{argv} passed every check and went on to measure; stderr: {err[-500:]}")
    out, err = capsys.readouterr()
    return Outcome(code, out, err)


def run_as_process(argv: list[str], work: Path, stdin: str) -> Outcome:
    with open(stdin, "rb") as fh:
        done = subprocess.run(
            [sys.executable, "-m", "tfaccel", *argv],
            stdin=fh,
            capture_output=True,
            text=True,
            cwd=work,
            env=dict(os.environ),  # the temporary HOME and results folder of the fixture
            timeout=120,
        )
    return Outcome(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The scratch directory, also the working directory; HOME and the results database's
    folder (``$XDG_DATA_HOME``) are temporary folders beside it."""
    root = tmp_path / "work"
    root.mkdir()
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    yield root


def around(work: Path) -> list[Path]:
    """The folders a row must leave as they were: the scratch (and working) directory, the
    temporary HOME and the results database's folder."""
    return [work, work.parent / "home", work.parent / "data"]


def check_row(
    row: Row, work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cleanup = row.setup(work) if row.setup is not None else None
    for module, name, value in row.patches:
        monkeypatch.setattr(f"{module}.{name}", value)
    for variable, text in row.env:
        monkeypatch.setenv(variable, text)
    argv = [arg.replace("{work}", str(work)) for arg in row.argv]
    before = snapshot(around(work))
    try:
        if row.stdin is not None:
            outcome = run_as_process(argv, work, row.stdin)
        else:
            outcome = run_in_process(argv, capsys)
    finally:
        if cleanup is not None:
            cleanup()
    printed = outcome.out + outcome.err
    assert outcome.code == 2, f"exit {outcome.code} for {argv}:\n{printed[-2000:]}"
    if "--json" in argv:  # stdout holds one JSON document still: what was wrong
        document = json.loads(outcome.out)
        assert document["exit_code"] == 2 and not document["interrupted"], outcome.out
        assert row.fragment.replace("{work}", str(work)) in document["error"]["what"] + str(
            document["error"]["received"]
        ), outcome.out
    assert "Traceback" not in printed, printed
    assert row.fragment.replace("{work}", str(work)) in outcome.err, outcome.err
    if row.fix:
        assert "error:" in outcome.err and "Fix:" in outcome.err, outcome.err
    assert_unchanged(before, around(work))


@pytest.mark.parametrize("row", [pytest.param(row, id=row.id) for row in ROWS])
def test_bad_input_is_a_clear_error_that_changes_nothing(
    row: Row, work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    check_row(row, work, monkeypatch, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("row", [pytest.param(row, id=row.id) for row in SLOW_ROWS])
def test_slow_bad_input_is_a_clear_error_that_changes_nothing(
    row: Row, work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    check_row(row, work, monkeypatch, capsys)


@pytest.mark.parametrize("row", [pytest.param(row, id=row.id) for row in TRACE_ROWS])
def test_trace_directory_is_refused_before_training(
    row: Row, work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    check_row(row, work, monkeypatch, capsys)


# --- rows for a user the permission bits stop ----------------------------------------------
# The tests run as root, for whom every file is readable and every folder writable. These rows
# run the command in a subprocess as the unprivileged user nobody (setpriv, else runuser), in a
# scratch folder nobody can read but not write, with a HOME nobody owns (so a stray write
# there would succeed and show).

NOBODY = 65534


def _switch_user() -> list[str] | None:
    """The command prefix that runs a program as nobody, None where none can (not root, or
    neither setpriv nor runuser installed)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    return None


def _unreadable(name: str, content: str | bytes = "x = 1\n") -> Setup:
    def make(work: Path) -> None:
        _file(name, content)(work)
        (work / name).chmod(0o000)

    return make


def _read_only_folder(name: str) -> Setup:
    def make(work: Path) -> None:
        (work / name).mkdir(mode=0o755)  # root's: nobody may read it, not write in it

    return make


def _unreadable_tfaccel_db(work: Path) -> None:
    from tfaccel.store import ResultsStore

    ResultsStore(work / "r.sqlite").close()
    (work / "r.sqlite").chmod(0o000)


UNPRIVILEGED_ROWS = [
    Row(
        "nobody-run-unreadable-script",
        ("run", "{work}/train.py"),
        "cannot be read",
        setup=_unreadable("train.py"),
    ),
    Row(
        "nobody-plan-unreadable-script",
        ("plan", "{work}/train.py"),
        "cannot be read",
        setup=_unreadable("train.py"),
    ),
    Row(
        "nobody-doctor-unreadable-log",
        ("doctor", "--log", "{work}/tf.log"),
        "cannot be read",
        setup=_unreadable("tf.log", "OOM when allocating tensor\n"),
    ),
    Row(
        "nobody-doctor-unreadable-snapshot",
        ("doctor", "--snapshot", "{work}/snap.json"),
        "cannot be read",
        setup=_unreadable("snap.json", _snapshot_with()),
    ),
    Row(
        "nobody-report-out-read-only-folder",
        ("report", "--smoke", "--no-save", "--out", "{work}/out"),
        "(--out) is not writable",
        setup=_read_only_folder("out"),
    ),
    Row(
        "nobody-doctor-save-snapshot-read-only-folder",
        ("doctor", "--save-snapshot", "{work}/out/snap.json"),
        "does not accept the file",
        setup=_read_only_folder("out"),
    ),
    Row(
        "nobody-bench-db-in-a-read-only-folder",
        ("bench", "--only", "matmul", "--db", "{work}/out/results.sqlite"),
        "no file can be created",
        setup=_read_only_folder("out"),
    ),
    Row(
        "nobody-tune-db-in-a-read-only-folder",
        ("tune", "--model", "mlp", "--smoke", "--no-progress", "--db", "{work}/out/r.sqlite"),
        "no file can be created",
        setup=_read_only_folder("out"),
    ),
    Row(
        "nobody-bench-compare-unreadable-db",
        ("bench", "--only", "matmul", "--no-save", "--compare", "--db", "{work}/r.sqlite"),
        "cannot be opened",
        setup=_unreadable_tfaccel_db,
    ),
]


@pytest.fixture
def nobody_work() -> Iterator[Path]:
    """A scratch folder outside root's private /tmp/pytest-of-root, readable by nobody, with
    a HOME nobody owns."""
    root = Path(tempfile.mkdtemp(prefix="tfaccel-nobody-"))
    try:
        root.chmod(0o755)
        work = root / "work"
        work.mkdir(mode=0o755)
        home = root / "home"
        home.mkdir(mode=0o755)
        if _switch_user() is not None:
            os.chown(home, NOBODY, NOBODY)
        yield work
    finally:
        for path in (root, *root.rglob("*")):
            if not path.is_symlink():
                path.chmod(0o700)
        shutil.rmtree(root)


@pytest.mark.parametrize("row", [pytest.param(row, id=row.id) for row in UNPRIVILEGED_ROWS])
def test_bad_input_of_an_unprivileged_user_is_a_clear_error_that_changes_nothing(
    row: Row, nobody_work: Path
) -> None:
    prefix = _switch_user()
    if prefix is None:
        pytest.skip(
            "needs root and setpriv or runuser, to run the command as the user nobody "
            f"(here: uid {os.geteuid()}, setpriv {shutil.which('setpriv')}, "
            f"runuser {shutil.which('runuser')})"
        )
    work = nobody_work
    assert row.setup is not None
    row.setup(work)
    argv = [arg.replace("{work}", str(work)) for arg in row.argv]
    home = work.parent / "home"
    source = Path(sys.modules["tfaccel"].__file__ or "").parents[1]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "PYTHONPATH": str(source),
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    before = snapshot([work, home])
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "tfaccel", *argv],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=120,
    )
    printed = done.stdout + done.stderr
    assert done.returncode == 2, f"exit {done.returncode} for {argv}:\n{printed[-2000:]}"
    assert "Traceback" not in printed, printed
    assert row.fragment in done.stderr, done.stderr
    for part in ("error:", "Expected:", "Received:", "Fix:"):
        assert part in done.stderr, done.stderr
    assert_unchanged(before, [work, home])


def test_the_table_covers_every_command_that_takes_input() -> None:
    commands = {row.argv[0] for row in ROWS + SLOW_ROWS + TRACE_ROWS if row.argv}
    assert commands >= {"doctor", "bench", "tune", "profile", "devices"}
    assert len(ROWS) + len(SLOW_ROWS) + len(TRACE_ROWS) >= 90


# --- the library behind the rows -------------------------------------------------------------


def test_a_read_only_file_system_is_a_usage_error_that_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_only(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    target = tmp_path / "snap.json"
    with argument_names({"path": "--save-snapshot"}), pytest.raises(UsageError) as info:
        save_snapshot(Snapshot(), target)
    message = str(info.value)
    assert "Read-only file system" in message and "--save-snapshot" in message
    assert str(target) in message and "Fix:" in message
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    target.write_text("the old report\n")

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(UsageError, match="No space left on device"):
        write_atomic(target, "x" * 10_000)
    assert target.read_text() == "the old report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_an_interrupted_write_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "snap.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_errors_name_python_arguments_from_python_and_flags_from_the_cli() -> None:
    assert argument("budget_s", 4) == "budget_s=4"
    with argument_names({"budget_s": "--budget", "path": "SCRIPT"}):
        assert argument("budget_s", 4) == "--budget 4"
        assert argument("budget_s") == "--budget"
        assert argument("path", "my train.py") == "'my train.py'"
        with argument_names({"margin": "--margin"}):
            assert argument("budget_s") == "--budget" and argument("margin") == "--margin"
        assert argument("margin") == "margin"
    assert argument("budget_s") == "budget_s"


def test_errors_echo_a_huge_value_cut_and_at_once() -> None:
    start = time.monotonic()
    text = argument("steps", 10**5000)  # repr() of an integer over 4,300 digits raises
    assert time.monotonic() - start < 1.0
    assert text == "steps=an integer of about 5,001 digits"
    with argument_names({"steps": "--steps"}):
        assert argument("steps", -(10**5000)) == "--steps an integer of about 5,001 digits"
        flag = argument("steps", "9" * 10**6)
    assert len(argument("log", "x" * 10**6)) < 5_000 and len(flag) < 5_000
    assert flag.endswith("… (1,000,000 characters)")
    long_path = "/data/" + "d" * 300 + "/traces"
    assert argument("trace_dir", long_path) == f"trace_dir={long_path!r}"  # a fix is never cut


def test_tune_from_python_names_its_arguments() -> None:
    from tfaccel.tuning import tune_model
    from tfaccel.tuning._errors import BudgetError, TuneError

    with pytest.raises(BudgetError) as info:
        tune_model("mlp", 0.5, smoke=True, store=False, progress=False)
    assert "budget_s=0.5" in str(info.value) and "budget_s=4" in str(info.value)
    assert "--budget" not in str(info.value)
    with pytest.raises(TuneError, match=r"sample_s=nan is not valid"):
        tune_model("mlp", 60, smoke=True, store=False, progress=False, sample_s=float("nan"))


def test_tune_opens_the_database_before_it_builds_anything(tmp_path: Path) -> None:
    from tfaccel.store import StoreError
    from tfaccel.tuning import tune_model

    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(StoreError):
        tune_model("mlp", 60, smoke=True, progress=False, store=tmp_path / "file.txt" / "r.db")
    fresh = tmp_path / "new" / "results.sqlite"
    with pytest.raises(ReachedTheWork):  # the tripwire replaces the TensorFlow runner
        tune_model("mlp", 60, smoke=True, progress=False, store=fresh)
    assert fresh.is_file()  # created (and checked) before the search would start


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("file.txt", "is a file"),
        ("file.txt/sub", "a file"),
        ("/sys/tfaccel-trace", "cannot be written"),
    ],
)
def test_trace_directory_check(tmp_path: Path, name: str, fragment: str) -> None:
    (tmp_path / "file.txt").write_text("x")
    with argument_names({"trace_dir": "--trace"}), pytest.raises(TraceError) as info:
        check_logdir(tmp_path / name)
    assert fragment in str(info.value) and "--trace" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_profile_checks_the_trace_directory_before_it_trains_or_runs_the_script(
    tmp_path: Path,
) -> None:
    from tfaccel.profile import command

    (tmp_path / "file.txt").write_text("x")
    ran: list[str] = []

    def run(script: str, args: list[str]) -> int:
        ran.append(script)
        return 0

    with pytest.raises(TraceError, match="trace_dir"):
        command.profile_script("train.py", [], run, trace_dir=str(tmp_path / "file.txt"))
    assert ran == []
    # the model is not built (the tripwire on tfaccel.models.build is not reached)
    with pytest.raises(TraceError, match="is a file"):
        command.profile_model("mlp", tiny=True, trace_dir=str(tmp_path / "file.txt"))
    with pytest.raises(TraceError, match="cannot be written"):
        command.check_model_request("mlp", trace_dir="/sys/tfaccel-trace")


def test_trace_directory_that_can_be_made_is_accepted_and_not_made(tmp_path: Path) -> None:
    assert check_logdir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert list(tmp_path.iterdir()) == []


def test_a_snapshot_the_loader_accepts_at_its_bounds_is_rendered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    top = 2**64 - 1
    path = tmp_path / "edge.json"
    path.write_text(
        _gpu_snapshot(memory_total_bytes=top, memory_used_bytes=top, memory_free_bytes=0)
    )
    snapshot = load_snapshot(path)
    assert snapshot.schema_version == SCHEMA_VERSION
    assert snapshot.nvml.gpus[0].memory_total_bytes == top  # kept whole, not clamped
    capsys.readouterr()
    assert main(["doctor", "--snapshot", str(path), "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    busy = next(f for f in report["findings"] if f["id"] == "gpu_memory_in_use")
    assert busy["status"] in ("warn", "fail"), busy  # all of it in use: said, not crashed


def test_deep_probe_refuses_a_timeout_that_is_not_a_number_of_seconds() -> None:
    from tfaccel.probe import deep

    for bad in (float("nan"), float("inf"), 0, -1, True, "10"):
        with pytest.raises(TfaccelError, match="is not valid"):
            deep.run(timeout_s=bad)  # type: ignore[arg-type]


def test_a_file_tfaccel_wrote_is_replaced_where_another_is_refused(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the other side of the rows above: --save-snapshot and --bundle replace what they wrote
    for flag, name in (("--save-snapshot", "snap.json"), ("--bundle", "bundle.md")):
        target = work / name
        for _ in range(2):
            assert main(["doctor", flag, str(target)]) in (0, 1), capsys.readouterr().err
        assert target.stat().st_size > 0
    capsys.readouterr()
