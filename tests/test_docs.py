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
  commands that need a GPU, a cluster or the network are in SKIPPED, with the reason. A CHEAP
  entry with ``reuse`` names a session fixture of tests/conftest.py that already ran it for
  other tests; its check reads that run's folder.
- A block that is none of these fails ``test_every_block_is_run_or_listed``.

This module is the machinery and the tests. What each block needs (the preludes, PY_BLOCKS,
PROCESS_ENV, TEXT_BLOCKS, SKIPPED, CHEAP and their checks) is the table in
tests/docs_variants.py, where a new entry goes; reading the documents and the types of the
entries (Block, Command, Py, Cheap, Ran, Check) are in tests/docs_blocks.py.

Every run hides the GPUs (``CUDA_VISIBLE_DEVICES=""``): the documents' examples are checked on
the CPU, the same on every machine. The jobs start with the session, one at a time, on the
core the rest of the suite leaves idle (tests/conftest.py's ``Ahead``, after the other runs
queued there); from this module's first test on they run two at a time
(``TFACCEL_DOC_JOBS=N`` to change it; ``TFACCEL_DOC_TIMES=1`` with ``-s`` prints what each job
and block took).
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
from typing import Any, Protocol

import pytest
from docs_blocks import (
    ROOT,
    SHELL_LANGS,
    Block,
    Cheap,
    Command,
    Py,
    Ran,
    all_blocks,
    py_matches,
    read_blocks,
    read_commands,
)
from docs_variants import (
    CHEAP,
    CHEAP_FILES,
    PROCESS_ENV,
    PY_BLOCKS,
    SIGNATURE_CHECK,
    SKIPPED,
    TEXT_BLOCKS,
)
from runtime_helpers import STARTING_ENVIRON

BIN = Path(sys.executable).parent
TFACCEL = BIN / "tfaccel"
COMMAND_TIMEOUT_S = 240  # a documented command that takes longer needs a cheap variant in CHEAP
PROCESS_TIMEOUT_S = 420
BLOCK_TIMEOUT_S = 180


# ---------------------------------------------------------------------------------------------
# Classifying the blocks


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
    matches = [p for p in PY_BLOCKS if py_matches(block, p)]
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
    env = dict(STARTING_ENVIRON)  # not a test's own: the jobs run beside the tests
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


class Queue(Protocol):
    """tests/conftest.py's ``Ahead``, as the jobs use it."""

    def add(self, key: str, fn: Callable[[], Any]) -> None: ...

    def drop(self, prefix: str) -> None: ...


class Jobs:
    """Subprocess jobs run on a small pool; each result is computed once and shared."""

    def __init__(self, tmp: Path, workers: int) -> None:
        self.tmp = tmp
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.futures: dict[Any, tuple[Future[Any], Path]] = {}
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.seconds: dict[Any, tuple[float, float]] = {}
        self.ahead: Queue | None = None

    def start_all(self, session: pytest.Session) -> None:
        """Start every job the selected items need (the long ones first), as many at a time
        as the pool has workers."""
        if self.ahead is not None:
            self.ahead.drop("docs:")
        for start in _job_starts(self, session):
            start()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

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
        (n for n, p in enumerate(PY_BLOCKS) if py_matches(i.block, p)), len(PY_BLOCKS)
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


def _job_starts(
    pool: Jobs, session: pytest.Session
) -> list[Callable[[], tuple[Future[Any], Path]]]:
    """What starts each job the selected items of this module need, the long ones first."""
    selected = [
        i.callspec.params["item"]
        for i in session.items
        if i.module is sys.modules[__name__]
        and hasattr(i, "callspec")
        and "item" in i.callspec.params
    ]
    starts: list[Callable[[], tuple[Future[Any], Path]]] = []
    for name in ("keras", "setup", "light"):
        members = [i for i in PROCESS_ITEMS if _process_of(i) == name]
        if any(i in selected for i in members):
            starts.append(
                lambda n=name, m=members: pool.submit(
                    ("process", n), lambda d: run_process(n, m, d)
                )
            )
    for item in selected:
        if item.kind == "command" and item.command is not None:
            _, cheap = _command_plan(item.command)
            if cheap is not None and cheap.reuse is None:
                key = (item.command.path, item.command.first)
                starts.append(lambda k=key, c=cheap: pool.commands(k, c))
    return starts


POOL: list[Jobs] = []


def start_ahead(session: pytest.Session, tmp: Path, ahead: Queue) -> None:
    """The pool, its jobs queued on ``ahead`` (tests/conftest.py's, at the session's start):
    each waits for its job, so that they run one at a time until :meth:`Jobs.start_all`."""
    pool = Jobs(tmp, int(os.environ.get("TFACCEL_DOC_JOBS", "2")))
    pool.ahead = ahead
    POOL.append(pool)
    for n, start in enumerate(_job_starts(pool, session)):
        ahead.add(f"docs:{n}", lambda start=start: start()[0].exception())


def close_ahead() -> None:
    for pool in POOL:
        pool.close()


@pytest.fixture(scope="session")
def jobs(request: pytest.FixtureRequest) -> Iterator[Jobs]:
    (pool,) = POOL  # tests/conftest.py's _ahead made it
    pool.start_all(request.session)
    yield pool
    pool.close()
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
        if sum(py_matches(b, entry) for b in blocks) != 1:
            problems.append(f"PY_BLOCKS {entry.path} {entry.marker!r} matches no block, or several")
    for entry in PY_BLOCKS:
        for documented, _ in entry.cheap:
            if not any(py_matches(b, entry) and documented in b.text for b in blocks):
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
def test_command(item: Item, jobs: Jobs, request: pytest.FixtureRequest) -> None:
    command = item.command
    assert command is not None
    reason, cheap = _command_plan(command)
    if reason is not None:
        pytest.skip(reason)
    if cheap is not None and cheap.reuse is not None:
        assert cheap.check is not None, f"{item.id}: a reused run needs a check"
        cheap.check(request.getfixturevalue(cheap.reuse), [])
        return
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
