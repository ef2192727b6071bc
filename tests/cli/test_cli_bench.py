"""`tfaccel bench` end to end on this machine (tiny --smoke sizes; figures checked for sanity,
never against the clock), its history and --compare, and every bad input as a clear error."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tfaccel.cli import main
from tfaccel.store import ResultsStore


def _run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _assert_clear_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    assert "tfaccel: error:" in err and "Traceback" not in err
    assert "Fix:" in err
    for needle in needles:
        assert needle in err


@pytest.fixture(scope="module")
def smoke_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench") / "results.sqlite"


@pytest.mark.slow
def test_smoke_bench_json_is_sane_and_recorded(
    smoke_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "bench",
        "--smoke",
        "--only",
        "matmul,bandwidth,vector_add,transfer,conv2d,mlp",
        "--repeats",
        "3",
        "--db",
        str(smoke_db),
        "--json",
    ]
    code, out, _ = _run_cli(capsys, *argv)
    assert code == 0
    doc = json.loads(out)
    run = doc["run"]
    assert run["status"] == "complete" and run["run_id"] == 1
    by_benchmark: dict[str, list[dict[str, Any]]] = {}
    for m in run["measurements"]:
        by_benchmark.setdefault(m["benchmark"], []).append(m)
        assert len(m["samples"]) == 3
        assert all(math.isfinite(v) and v > 0 for v in m["samples"])
    assert {"matmul", "bandwidth", "vector_add", "conv2d", "mlp"} <= set(by_benchmark)
    assert any(s["benchmark"] == "transfer" and "host CPU" in s["reason"] for s in run["skipped"])
    matmul = doc["summary"]["micro"][0]
    assert matmul["percent_of_best"] is not None and 0 < matmul["percent_of_best"] <= 100
    mlp = [r for r in doc["summary"]["models"] if r["model"] == "mlp"]
    assert {r["config"] for r in mlp} >= {"fit(numpy) bs32 fp32", "tf.data bs256 fp32"}
    for r in mlp:
        assert r["flops_per_image"] == 3 * 2 * (784 * 16 + 16 * 10)  # the tiny MLP, counted
        assert r["epoch_seconds"] == pytest.approx(50_000 / r["images_per_s"])
        assert r["utilisation_percent"] > 0
    with ResultsStore(smoke_db) as db:
        (record,) = db.runs()
        assert record.status == "complete" and len(db.results(record.id)) == len(
            run["measurements"]
        )


def _count_path_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every check of a results database path (the CLI's and the store's)."""
    import tfaccel.store

    checked: list[str] = []
    check = tfaccel.store.check_store_path

    def counted(path: Any = None, **kwargs: Any) -> Path:
        checked.append(str(path))
        return check(path, **kwargs)

    monkeypatch.setattr(tfaccel.store, "check_store_path", counted)
    return checked


@pytest.mark.slow
def test_second_run_compares_with_the_first(
    smoke_db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = _count_path_checks(monkeypatch)
    argv = [
        "bench",
        "--smoke",
        "--only",
        "matmul,vector_add",
        "--repeats",
        "3",
        "--db",
        str(smoke_db),
        "--compare",
    ]
    code, out, _ = _run_cli(capsys, *argv)
    assert code == 0
    assert "Against run 1" in out and "recorded as run 2" in out
    assert checked == [str(smoke_db)]  # the database is opened, and its path checked, once
    assert "…" not in out  # piped: no table cell cut
    code, out, _ = _run_cli(capsys, *argv[:-1], "--json", "--compare")
    comparison = json.loads(out)["comparison"]
    assert comparison["before_run_id"] == 2
    assert {r["benchmark"] for r in comparison["rows"]} == {"matmul", "vector_add"}
    # two earlier runs, fewer than the five needed to measure the noise between runs: no
    # change is called, whatever the figures did
    assert all(r["status"] == "not compared" for r in comparison["rows"])
    assert any("not enough history to call a change" in r["verdict"] for r in comparison["rows"])


@pytest.fixture
def unreachable_accuracy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The digits check trains for real (one epoch) against a threshold above 1: it fails."""
    from tfaccel.bench import convergence, options

    monkeypatch.setattr(convergence, "ACCURACY_THRESHOLD", 1.01)
    smoke = dataclasses.replace(options.PROFILES["smoke"], digits_epochs=1)
    monkeypatch.setitem(options.PROFILES, "smoke", smoke)


@pytest.mark.usefixtures("unreachable_accuracy")
def test_bench_exits_1_when_the_convergence_check_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "--smoke", "--only", "digits", "--no-save"]
    code, out, _ = _run_cli(capsys, *argv, "--json")
    assert code == 1
    (check,) = json.loads(out)["summary"]["checks"]
    assert check["passed"] is False and check["threshold"] == 1.01 and 0 <= check["value"] <= 1
    code, out, _ = _run_cli(capsys, *argv)
    assert code == 1 and "digits" in out and "fail" in out
    assert re.search(r"│ digits +│ cpu +│ \d\.\d{3} +│ 1\.01 +│ fail +│", out), out  # whole cells


@pytest.mark.usefixtures("unreachable_accuracy")
def test_report_exits_1_when_the_convergence_check_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "report"
    argv = ["report", "--smoke", "--only", "digits", "--no-save", "--out", str(out_dir)]
    code, out, _ = _run_cli(capsys, *argv, "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["summary"]["checks"][0]["passed"] is False
    assert doc["written"]["json"] == str(out_dir / "report.json")
    saved = json.loads((out_dir / "report.json").read_text())  # written all the same
    assert saved["summary"]["checks"] == doc["summary"]["checks"]
    assert '<span class="fail">fail</span>' in (out_dir / "report.html").read_text()
    # The plan of each reference model, predicted: memory at the batch, this machine, the
    # fastest accelerator of the database; in every file.
    assert {row["model"] for row in doc["plan"]} == {"reference_cnn", "mlp", "resnet20"}
    for row in doc["plan"]:
        assert row["prediction"] is True and row["needed_bytes"] > 0
        assert row["this_machine"][0]["key"] == "this-cpu"
        assert row["fastest"]["rank"] == 1 and row["fastest"]["fits"]
    sizes = {row["model"]: row["needed_bytes"] for row in doc["plan"]}
    assert sizes["mlp"] < sizes["reference_cnn"] < sizes["resnet20"]
    assert "Plan of the reference models" in (out_dir / "report.md").read_text()
    assert "Plan of the reference models" in (out_dir / "report.html").read_text()


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--only", "matmul,warp_drive"], ["Unknown benchmark 'warp_drive'", "reference_cnn"]),
        (["--device", "tpu:0"], ["Unknown device 'tpu:0'"]),
        (["--data", "imagenet:/data"], ["--data value is not understood"]),
    ],
)
def test_bad_arguments_are_clear_errors(
    argv: list[str], needles: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = _run_cli(capsys, "bench", "--db", str(tmp_path / "r.sqlite"), *argv)
    _assert_clear_error(code, err, *needles)


def test_a_gpu_tensorflow_does_not_see(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run_cli(
        capsys, "bench", "--device", "gpu:7", "--only", "matmul", "--db", str(tmp_path / "r.sqlite")
    )
    _assert_clear_error(code, err, "does not see the device 'gpu:7'")
    with ResultsStore(tmp_path / "r.sqlite") as db:
        assert db.runs() == []  # rejected before a run was recorded


def test_batch_larger_than_the_data(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run_cli(
        capsys,
        "bench",
        "--smoke",
        "--only",
        "mlp",
        "--data",
        "synthetic:64",
        "--batch-size",
        "128",
        "--db",
        str(tmp_path / "r.sqlite"),
    )
    _assert_clear_error(code, err, "batch size 128 is larger than the data for mlp (64 images")


def test_corrupt_or_truncated_cifar_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    code, _, err = _run_cli(
        capsys, "bench", "--only", "reference_cnn", "--no-save", "--data", f"cifar10:{root}"
    )
    _assert_clear_error(code, err, "data_batch_1' is missing")
    for name in (
        "data_batch_1",
        "data_batch_2",
        "data_batch_3",
        "data_batch_4",
        "data_batch_5",
        "test_batch",
    ):
        (root / name).write_bytes(pickle.dumps({b"data": b"x" * 100, b"labels": [1]})[:40])
    code, _, err = _run_cli(
        capsys, "bench", "--only", "reference_cnn", "--no-save", "--data", f"cifar10:{root}"
    )
    _assert_clear_error(code, err, "'data_batch_1' is corrupt", "truncated")


def test_locked_and_corrupt_database(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    ResultsStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code, _, err = _run_cli(capsys, "bench", "--only", "matmul", "--db", str(path))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    _assert_clear_error(code, err, "is locked by another process")
    path.write_bytes(b"\x00garbage" * 512)
    code, _, err = _run_cli(capsys, "bench", "--only", "matmul", "--db", str(path))
    _assert_clear_error(code, err, "is corrupt", f"mv {path}")


@pytest.mark.parametrize("command", ["bench", "report"])
def test_the_progress_says_tensorflow_is_starting_while_it_starts(
    command: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import tfaccel.cli.bench
    import tfaccel.cli.report

    shown: list[str] = []

    def starting() -> None:  # stands for quiet_tensorflow(): what does the progress say now?
        shown.append(capsys.readouterr().err)
        raise KeyboardInterrupt

    monkeypatch.setattr(tfaccel.cli.bench, "quiet_tensorflow", starting)
    monkeypatch.setattr(tfaccel.cli.report, "quiet_tensorflow", starting)
    out = ["--out", str(tmp_path / "report")] if command == "report" else []
    assert main([command, "--smoke", "--only", "matmul", "--no-save", *out]) == 130
    assert len(shown) == 1
    lines = shown[0].splitlines()  # off a terminal, each status is one plain line
    assert lines[-2:] == ["tfaccel: probing the machine", "tfaccel: starting TensorFlow"]


def test_kernels_bench_without_a_gpu_says_why_it_skipped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tfaccel import kernels

    if kernels.backend() == "cuda":
        pytest.skip("a real GPU is here: tests/kernels/test_kernels_gpu.py measures it")
    code, out, _ = _run_cli(capsys, "bench", "--kernels", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["kernels"] is None
    assert "needs an NVIDIA GPU" in doc["skipped"]
    code, out, _ = _run_cli(capsys, "bench", "--kernels")
    assert code == 0 and out.startswith("kernels not measured:")


@pytest.mark.parametrize("data", [b"", None])
def test_the_db_check_before_tune_and_report_checks_the_path_once(
    data: bytes | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from tfaccel.cli.bench import check_db

    path = tmp_path / "results.sqlite"
    if data is None:
        ResultsStore(path).close()  # a database with its tables: opened read only to tell
    else:
        path.write_bytes(data)  # 0 bytes: a new database
    before = path.stat()
    checked = _count_path_checks(monkeypatch)
    check_db(argparse.Namespace(db=str(path), no_save=False), compare=False)
    assert checked == [str(path)]
    assert path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_size == before.st_size


def test_no_save_compare_with_a_new_db_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tfaccel.cli.bench
    import tfaccel.probe

    # refused before anything is measured: the machine is not what this checks
    monkeypatch.setattr(tfaccel.probe, "snapshot", lambda: None)
    monkeypatch.setattr(tfaccel.cli.bench, "quiet_tensorflow", lambda: None)
    db = tmp_path / "new" / "dir" / "results.sqlite"
    argv = ("bench", "--smoke", "--only", "matmul", "--no-save", "--compare", "--db", str(db))
    code, _, err = _run_cli(capsys, *argv)
    _assert_clear_error(code, err, "does not exist", "creates no file and no folder")
    assert not (tmp_path / "new").exists()


_DB_BEFORE_ANY_WORK = """
import contextlib, io, json, sys
from tfaccel.cli import main
results = []
for command, db in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([command, "--only", "matmul", "--db", db])
    results.append([code, err.getvalue(), "tensorflow" in sys.modules])
print(json.dumps(results))
"""


def test_a_bad_db_is_refused_before_the_machine_is_probed_or_tensorflow_starts(
    tmp_path: Path,
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    bad = {
        "a path too long": (str(tmp_path / ("x" * 300)), "longer than this file system allows"),
        "a directory": (str(tmp_path), "is a directory"),
        "a symbolic link loop": (str(loop), "loop of symbolic links"),
        "under a regular file": (str(a_file / "results.sqlite"), "which is a file, not a folder"),
    }
    cases = [(command, db) for command in ("bench", "report") for db, _ in bad.values()]
    done = subprocess.run(
        [sys.executable, "-c", _DB_BEFORE_ANY_WORK, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=tmp_path,
    )
    results = json.loads(done.stdout.strip().splitlines()[-1])
    needles = [needle for _ in ("bench", "report") for _, needle in bad.values()]
    for (command, db), (code, err, tf_imported), needle in zip(
        cases, results, needles, strict=True
    ):
        assert code == 2, (command, db, err)
        assert "tfaccel: error:" in err and "Traceback" not in err and "Fix:" in err
        assert needle in err, (command, err)
        assert not tf_imported, f"{command} --db {db} imported TensorFlow before refusing it"
    assert a_file.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "loop"]
