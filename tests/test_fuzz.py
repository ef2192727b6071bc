"""Fuzz: random command lines and random snapshot files never crash the CLI.

Each example runs ``tfaccel.cli.main`` in this process and must end with a documented exit
code (0, 1 or 2; 2 with an ``error:`` line), never 3 or an uncaught exception, and print no
traceback. Three families, counted and printed (``pytest -s`` shows the counts):

* snapshot files for ``doctor --snapshot``: a real snapshot with random values put at random
  places (huge and negative integers, floats out of range, NaN, deep nesting, wrong types,
  random text), keys removed or added, a random ``schema_version``, or raw text (bracket
  bombs, truncated JSON, random bytes);
* ``doctor`` and ``devices`` with random flags and values (files, FIFOs, devices, numbers);
* ``bench``, ``tune`` and ``profile`` with random option values, up to their checks.

For speed the machine is probed once (``probe.snapshot`` returns a copy of that snapshot; with
``deep=True`` it checks the timeout as the deep probe does), the TensorFlow import time is
given, and the entry points that would measure are tripwires: reaching one means the command
line passed every check, which is a valid outcome here.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfaccel import probe
from tfaccel.cli import main
from tfaccel.snapshot import DeepProbe, Snapshot

SNAPSHOT_EXAMPLES = 1200
DOCTOR_EXAMPLES = 700
MEASURING_EXAMPLES = 500
TOTAL_EXAMPLES = SNAPSHOT_EXAMPLES + DOCTOR_EXAMPLES + MEASURING_EXAMPLES

FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class ReachedTheWork(BaseException):
    """Raised by a tripwire: the command got past its checks and would measure now."""


COUNTS: dict[str, int] = {}
OUTCOMES: dict[str, Counter[str]] = {}


# --- the machine, probed once ------------------------------------------------------------------


@pytest.fixture(scope="module")
def machine() -> Snapshot:
    return probe.snapshot(libraries=False)


@pytest.fixture
def fast(machine: Snapshot, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Probe from the cached snapshot, no TensorFlow, tripwires before any measurement; the
    working directory and the default database in a scratch directory; the parser built once
    (``main`` builds the same one on every call: three quarters of an example's time)."""
    import tfaccel.bench.history
    import tfaccel.cli
    import tfaccel.models
    import tfaccel.tuning.api
    from tfaccel.probe import deep

    def snapshot(
        *,
        deep: bool = False,
        deep_timeout_s: float | None = None,
        libraries: bool = True,
        gpm_interval_s: float | None = None,
    ) -> Snapshot:
        snap = copy.deepcopy(machine)
        if deep:
            timeout = deep_module.check_timeout(
                deep_module.DEFAULT_TIMEOUT_S if deep_timeout_s is None else deep_timeout_s
            )
            snap.deep = DeepProbe(ran=True, ok=False, timed_out=True, timeout_s=timeout)
        return snap

    deep_module = deep
    build = tfaccel.models.build

    def build_only_unknown_names(name: str, **kwargs: Any) -> Any:
        if name in tfaccel.models.MODELS:
            raise ReachedTheWork
        return build(name, **kwargs)

    def tripwire(*args: object, **kwargs: object) -> None:
        raise ReachedTheWork

    monkeypatch.setattr(probe, "snapshot", snapshot)
    monkeypatch.setattr(deep, "import_seconds", lambda *a, **k: (7.5, "ok"))
    monkeypatch.setattr(tfaccel.bench.history, "run", tripwire)
    monkeypatch.setattr(tfaccel.tuning.api, "_tf_runner", tripwire)
    monkeypatch.setattr(tfaccel.models, "build", build_only_unknown_names)
    monkeypatch.setattr("tfaccel.diagnosis.log.read.FIFO_WRITER_WAIT_S", 0.01)
    monkeypatch.setattr("tfaccel.diagnosis.log.read.STREAM_TIME_LIMIT_S", 0.05)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("XDG_DATA_HOME", str(work / "xdg"))
    parser = tfaccel.cli.build_parser()
    monkeypatch.setattr(tfaccel.cli, "build_parser", lambda: parser)
    yield work


def run_cli(argv: list[str]) -> tuple[int | None, str, str]:
    """Run the CLI in this process: (exit code or None when it reached the work, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    code: int | None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse: 2 for a refusal
            code = exc.code if isinstance(exc.code, int) else 2
        except ReachedTheWork:
            code = None
    return code, out.getvalue(), err.getvalue()


def assert_answered(family: str, argv: list[str], code: int | None, out: str, err: str) -> None:
    COUNTS[family] += 1
    OUTCOMES[family]["checks passed" if code is None else f"exit {code}"] += 1
    shown = f"argv={argv!r}\nstderr:\n{err[-3000:]}"
    assert code in (0, 1, 2, None), shown
    assert "Traceback" not in err and "Traceback" not in out, shown
    if code == 2 and argv:
        assert "error:" in err, shown


def counted(family: str, run: Callable[[], None]) -> Counter[str]:
    """Run the examples of ``family``; print and return how they ended."""
    COUNTS[family] = 0
    OUTCOMES[family] = Counter()
    started = time.perf_counter()
    run()
    took = time.perf_counter() - started
    ends = ", ".join(f"{k}: {v}" for k, v in sorted(OUTCOMES[family].items()))
    print(f"\nfuzz {family}: {COUNTS[family]} examples in {took:.1f} s ({ends})")
    return OUTCOMES[family]


# --- snapshot files ----------------------------------------------------------------------------

HUGE_INTS = [10**400, -(10**400), 2**64, 2**64 - 1, -(2**63) - 1, 2**63, 2**1024, 10**19]
ODD_FLOATS = [1e308, -1e308, 5e-324, 1.7976931348623157e308, 0.0, -0.0]
EDGE_INTS = [2**64 - 1, -(2**63), 2**63, 0, -1, 2**53 + 1, 10**19]
ODD_TEXT = [
    "",
    "12.5.1",
    "8.0",
    "sm_90",
    "0x10de",
    "GPU:0",
    "\x00",
    "é\u2028",
    "99999999999999999999",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(HUGE_INTS),
    st.floats(),  # NaN and infinities too: JSON writes them as NaN and Infinity
    st.sampled_from(ODD_FLOATS),
    st.text(max_size=30),
    st.sampled_from(ODD_TEXT),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=12), inner, max_size=4),
    ),
    max_leaves=12,
)


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


raw_texts = st.one_of(
    st.integers(1, 200_000).map(nested),
    st.integers(1, 200_000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.sampled_from(["", "{", "[", "null", "true", "1", '"x"', "{}", "[]", "NaN", "1e999"]),
)


def paths_of(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in a JSON document (keys and list indexes)."""
    found = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += paths_of(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += paths_of(value, (*prefix, index))
    return found


def put(doc: Any, path: tuple[Any, ...], value: Any, *, delete: bool = False) -> None:
    target = doc
    for key in path[:-1]:
        target = target[key]
    if delete and isinstance(target, dict):
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def value_at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def same_type(value: Any) -> st.SearchStrategy[Any]:
    """Values a snapshot may hold where ``value`` is: 64-bit integers, finite floats, text."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.one_of(st.integers(-(2**63), 2**64 - 1), st.sampled_from(EDGE_INTS))
    if isinstance(value, float):
        return st.one_of(
            st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(ODD_FLOATS)
        )
    if isinstance(value, str):
        return st.one_of(st.text(max_size=40), st.sampled_from(ODD_TEXT))
    if value is None:
        return st.one_of(st.none(), st.integers(-(2**63), 2**64 - 1), st.sampled_from(ODD_TEXT))
    if isinstance(value, list) and value and isinstance(value[0], str):
        return st.lists(st.sampled_from(ODD_TEXT), max_size=5)
    return st.just(value)


def gpu_document() -> dict[str, Any]:
    from machine_scenarios import gpu_machine

    doc: dict[str, Any] = json.loads(gpu_machine().to_json())
    doc["deep"] = json.loads(json.dumps(DeepProbe(ran=True, ok=True, timeout_s=120.0).__dict__))
    return doc


@st.composite
def snapshot_texts(draw: st.DrawFn, bases: list[dict[str, Any]]) -> str:
    kind = draw(
        st.sampled_from(["typed", "typed", "typed", "typed", "wild", "wild", "raw", "json"])
    )
    if kind == "raw":
        return draw(raw_texts)
    if kind == "json":
        return json.dumps(draw(json_values))
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 4))):
        paths = paths_of(doc)
        if not paths:
            break
        numbers = [p for p in paths if _is_number(value_at(doc, p))]
        pick_a_number = draw(st.booleans())  # half the time: where formatting fails
        if numbers and pick_a_number:
            path = draw(st.sampled_from(numbers))
            extreme = st.one_of(same_type(value_at(doc, path)), st.sampled_from(HUGE_INTS))
            put(doc, path, draw(extreme))
            continue
        path = draw(st.sampled_from(paths))
        if kind == "typed":  # a value of the right type, at its extremes: the doctor renders it
            put(doc, path, draw(same_type(value_at(doc, path))))
            continue
        action = draw(st.sampled_from(["replace", "replace", "delete", "deep"]))
        if action == "deep":
            put(doc, path, json.loads(nested(draw(st.integers(1, 60)), "0")))
        else:
            put(doc, path, draw(json_values), delete=action == "delete")
    if draw(st.booleans()):
        doc = {**doc, draw(st.text(max_size=10)): draw(json_values)}
    if draw(st.integers(0, 4)) == 0 and isinstance(doc, dict):
        doc["schema_version"] = draw(json_values)
    return json.dumps(doc)


def test_any_snapshot_file_is_answered_without_a_crash(fast: Path, machine: Snapshot) -> None:
    bases = [json.loads(machine.to_json()), gpu_document()]
    path = fast / "snapshot.json"
    flags = st.lists(st.sampled_from(["--json", "-v", "--verbose"]), max_size=2, unique=True)

    @settings(FUZZ, max_examples=SNAPSHOT_EXAMPLES)
    @given(text=snapshot_texts(bases), extra=flags)
    def one(text: str, extra: list[str]) -> None:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        argv = ["doctor", "--snapshot", str(path), *extra]
        code, out, err = run_cli(argv)
        assert_answered("snapshot files", argv, code, out, err)
        if code in (0, 1) and "--json" in extra:
            assert json.loads(out)["exit_code"] == code

    ends = counted("snapshot files", one)
    assert sum(ends.values()) >= SNAPSHOT_EXAMPLES * 0.9
    # Both sides were exercised: snapshots diagnosed, and snapshots refused.
    assert ends["exit 2"] >= 50 and ends["exit 0"] + ends["exit 1"] >= 50, ends


# --- doctor and devices ------------------------------------------------------------------------

NUMBERS = [
    "0", "-1", "1", "0.05", "0.5", "2", "120", "nan", "NaN", "inf", "-inf", "1e999", "1e-320",
    "1e9", "99999999999999999999", "1_000", " 7 ", "0x10", "", "abc", "-", "--", "\u0663",
    "4" * 5000,
]  # fmt: skip


@pytest.fixture
def inputs(fast: Path) -> Iterator[list[str]]:
    """Files, directories and special files for the flags that take a path."""
    (fast / "dir").mkdir()
    (fast / "text.log").write_text("OOM when allocating tensor with shape[8]\n")
    (fast / "empty.log").write_text("")
    (fast / "binary.bin").write_bytes(bytes(range(256)) * 300)
    (fast / "snap.json").write_text(Snapshot().to_json())
    (fast / "deep.json").write_text(nested(50_000))
    os.mkfifo(fast / "pipe")
    holder = os.open(fast / "pipe", os.O_RDWR | os.O_NONBLOCK)
    yield [
        str(fast / name)
        for name in ("dir", "text.log", "empty.log", "binary.bin", "snap.json", "deep.json",
                     "pipe", "missing/x.json", "text.log/under-a-file", "new.json")
    ] + ["", "/dev/null", "/dev/zero", "/proc/tfaccel.json", "/sys/tfaccel.json", "-"]  # fmt: skip
    os.close(holder)


@st.composite
def doctor_argvs(draw: st.DrawFn, paths: list[str]) -> list[str]:
    command = draw(st.sampled_from(["doctor", "doctor", "doctor", "devices"]))
    if command == "devices":
        options: list[tuple[str, st.SearchStrategy[str] | None]] = [
            ("--json", None),
            ("--tf", None),
            ("--tf-timeout", st.sampled_from(NUMBERS)),
        ]
    else:
        options = [
            ("--json", None),
            ("-v", None),
            ("--deep", None),
            ("--deep-timeout", st.sampled_from(NUMBERS)),
            ("--log", st.sampled_from(paths)),
            ("--snapshot", st.sampled_from(paths)),
            ("--save-snapshot", st.sampled_from(paths)),
        ]
    argv = [command]
    for flag, values in draw(st.lists(st.sampled_from(options), max_size=4)):
        argv.append(flag)
        if values is not None:
            argv.append(draw(values))
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(1, len(argv))), draw(st.sampled_from(["--nope", "x", "-"])))
    return argv


def test_any_doctor_or_devices_command_line_is_answered(
    fast: Path, inputs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    # `--log -` reads standard input: give it a short log.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"Illegal instruction\n")))

    @settings(FUZZ, max_examples=DOCTOR_EXAMPLES)
    @given(argv=doctor_argvs(inputs))
    def one(argv: list[str]) -> None:
        sys.stdin.seek(0)
        code, out, err = run_cli(argv)
        assert_answered("doctor and devices", argv, code, out, err)
        for leftover in fast.glob(".*.tmp"):
            pytest.fail(f"{argv} left {leftover.name} behind")

    ends = counted("doctor and devices", one)
    assert sum(ends.values()) >= DOCTOR_EXAMPLES * 0.9
    assert ends["exit 2"] >= 50 and ends["exit 0"] + ends["exit 1"] >= 50, ends


# --- bench, tune, profile up to their checks ---------------------------------------------------

MEASURING: dict[str, list[tuple[str, st.SearchStrategy[str] | None]]] = {
    "bench": [
        ("--quick", None),
        ("--smoke", None),
        ("--only", st.sampled_from(["matmul", "mlp", "micro", "models", "warp", ",", ""])),
        ("--device", st.sampled_from(["cpu", "gpu", "gpu:9", "all", "tpu", ""])),
        ("--batch-size", st.sampled_from(NUMBERS)),
        ("--repeats", st.sampled_from(NUMBERS)),
        ("--warmup", st.sampled_from(NUMBERS)),
        (
            "--data",
            st.sampled_from(
                [
                    "synthetic",
                    "synthetic:0",
                    "synthetic:64",
                    "synthetic:100000000000",
                    "synthetic:" + "9" * 40,
                    "synthetic:-3",
                    "synthetic:\u0663",
                    "cifar10:",
                    "cifar10:/nope",
                    "imagenet:/x",
                    "",
                ]
            ),
        ),
        ("--db", st.sampled_from(["/proc/x.sqlite", "dir", "r.sqlite", "pipe", "/dev/null"])),
        ("--no-save", None),
        ("--json", None),
        ("--compare", None),
    ],
    "tune": [
        ("--model", st.sampled_from(["mlp", "reference-cnn", "resnet99", ""])),
        ("--budget", st.sampled_from(NUMBERS)),
        ("--space", st.sampled_from(["jit", "jit=on", "batch_size=0", "precison=x", "=", ""])),
        ("--batch-cap", st.sampled_from(NUMBERS)),
        ("--margin", st.sampled_from(NUMBERS)),
        ("--sample-seconds", st.sampled_from(NUMBERS)),
        ("--rounds", st.sampled_from(NUMBERS)),
        ("--smoke", None),
        ("--db", st.sampled_from(["/proc/x.sqlite", "dir", "r.sqlite", "/dev/null"])),
        ("--no-save", None),
        ("--json", None),
        ("--no-progress", None),
    ],
    "profile": [
        ("--model", st.sampled_from(["mlp", "reference-cnn", "transformer", ""])),
        ("--steps", st.sampled_from(NUMBERS)),
        ("--warmup", st.sampled_from(NUMBERS)),
        ("--batch-size", st.sampled_from(NUMBERS)),
        ("--trace-steps", st.sampled_from(NUMBERS)),
        ("--top", st.sampled_from(NUMBERS)),
        ("--precision", st.sampled_from(["float32", "mixed_bfloat16", "float8"])),
        ("--input", st.sampled_from(["pipeline", "generator", "csv"])),
        ("--tiny", None),
        ("--quiet", None),
        ("--json", None),
    ],
}


@st.composite
def measuring_argvs(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(MEASURING)))
    argv = [command]
    for flag, values in draw(st.lists(st.sampled_from(MEASURING[command]), max_size=5)):
        argv.append(flag)
        if values is not None:
            argv.append(draw(values))
    if command != "bench" and draw(st.integers(0, 4)) == 0:
        argv.append("missing_script.py")  # a script that does not exist: refused, never run
    return argv


def test_any_bench_tune_or_profile_command_line_is_answered_before_measuring(
    fast: Path,
) -> None:
    (fast / "dir").mkdir()
    os.mkfifo(fast / "pipe")

    @settings(FUZZ, max_examples=MEASURING_EXAMPLES)
    @given(argv=measuring_argvs())
    def one(argv: list[str]) -> None:
        code, out, err = run_cli(argv)
        assert_answered("bench, tune and profile", argv, code, out, err)

    ends = counted("bench, tune and profile", one)
    assert sum(ends.values()) >= MEASURING_EXAMPLES * 0.9
    assert ends["exit 2"] >= 50 and ends["checks passed"] >= 10, ends
