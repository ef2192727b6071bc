"""The SQLite results store: history written and read back, comparisons by fingerprint,
atomic runs (a SIGKILLed writer leaves the database valid and earlier runs intact), and clear
errors for a locked or corrupt database."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tfaccel import store
from tfaccel.store import ResultRecord, ResultsStore, StoreError, check_store_path

FP = "abc123"  # a machine fingerprint's digest, and what it hashed
FP_DATA = {"cpu_model": "test"}


def _record(benchmark: str = "matmul", median: float = 1.0, **config: object) -> ResultRecord:
    samples = [median * f for f in (0.98, 0.99, 1.0, 1.01, 1.02)]
    return ResultRecord(
        benchmark=benchmark,
        config={"device": "cpu", **config},
        metric="images_per_s" if benchmark == "reference_cnn" else "tflops",
        unit="images/s" if benchmark == "reference_cnn" else "TFLOP/s",
        median=median,
        q1=samples[1],
        q3=samples[3],
        n=5,
        samples=samples,
    )


def _write_run(db: ResultsStore, records: list[ResultRecord], status: str = "complete") -> int:
    run_id = db.begin_run(
        FP,
        fingerprint_data=FP_DATA,
        started_at="2025-01-01T00:00:00+00:00",
        tfaccel_version="0.1.0",
        tf_version="2.21.0",
    )
    db.finish_run(run_id, records, finished_at="2025-01-01T00:01:00+00:00", status=status)
    return run_id


def test_default_path_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert store.default_path() == tmp_path / "tfaccel" / "results.sqlite"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert store.default_path() == Path.home() / ".local/share/tfaccel/results.sqlite"


def test_history_is_written_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "results.sqlite"
    with ResultsStore(path) as db:
        first = _write_run(db, [_record(n=512, dtype="float32"), _record("conv2d", 2.0)])
        second = _write_run(db, [_record(median=1.5, n=512, dtype="float32")])
        _write_run(db, [_record(median=9.0)], status="incomplete")
    with ResultsStore(path) as db:
        last = db.last_run(FP)
        assert last is not None and last.id == second and last.status == "complete"
        assert last.fingerprint_data == FP_DATA and last.tf_version == "2.21.0"
        assert db.last_run(FP, before=second).id == first  # type: ignore[union-attr]
        results = db.results(first)
        assert [r.benchmark for r in results] == ["matmul", "conv2d"]
        assert results[0].config == {"device": "cpu", "n": 512, "dtype": "float32"}
        assert results[0].samples == pytest.approx([0.98, 0.99, 1.0, 1.01, 1.02])
        assert [r.status for r in db.runs(FP)] == ["incomplete", "complete", "complete"]
        assert db.last_run("another-machine") is None


def test_a_tune_run_is_not_the_last_bench_run(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "results.sqlite") as db:
        bench_run = _write_run(db, [_record()])
        tune_run = db.begin_run(
            FP,
            fingerprint_data=FP_DATA,
            started_at="2025-01-02T00:00:00+00:00",
            tfaccel_version="0.1.0",
            tf_version="2.21.0",
            details={"kind": "tune"},
        )
        db.finish_run(
            tune_run,
            [_record(median=3.0)],
            finished_at="2025-01-02T00:01:00+00:00",
            status="complete",
        )
        assert db.last_run(FP).id == bench_run  # type: ignore[union-attr]
        assert db.last_run(FP, kind="tune").id == tune_run  # type: ignore[union-attr]


def test_best_setting_only_beyond_the_noise(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    assert store.best_setting(FP, "reference_cnn", "jit", path=path) is None
    assert not path.exists()  # looking up never creates a database
    with ResultsStore(path) as db:
        _write_run(
            db,
            [
                _record("reference_cnn", 1000.0, jit=False, precision="float32"),
                _record("reference_cnn", 400.0, jit=True, precision="float32"),
                _record("reference_cnn", 1600.0, jit=False, precision="mixed_bfloat16"),
                _record("reference_cnn", 1610.0, jit=True, precision="mixed_bfloat16"),
            ],
        )
    assert store.best_setting(FP, "reference_cnn", "precision", path=path) == "mixed_bfloat16"
    # best jit=True (1610) vs best jit=False (1600): inside the noise, so no recommendation
    assert store.best_setting(FP, "reference_cnn", "jit", path=path) is None
    assert store.best_setting(FP, "reference_cnn", "jit", device="gpu:0", path=path) is None
    assert store.best_setting(FP, "mlp", "jit", path=path) is None


def test_locked_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as db:
        _write_run(db, [_record()])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked by another process") as info:
            ResultsStore(path, timeout_s=0.1)
        assert info.value.fix and "--db" in info.value.fix
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_lock_taken_while_open_is_a_clear_error_on_write(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with ResultsStore(path, timeout_s=0.1) as db:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StoreError, match="locked"):
                _write_run(db, [_record()])
        finally:
            holder.execute("ROLLBACK")
            holder.close()


def test_corrupt_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(StoreError, match="corrupt") as info:
        ResultsStore(path)
    assert info.value.fix and "mv" in info.value.fix
    assert path.read_bytes()  # left as it was, for the user to inspect


@pytest.mark.parametrize(
    ("column", "value", "named"),
    [
        ("runs.details_json", "{{", "runs.details_json is not JSON"),
        ("runs.details_json", "[]", "runs.details_json is a JSON list, not dict"),
        ("runs.fingerprint_json", "{bad", "runs.fingerprint_json is not JSON"),
        ("results.config_json", "{bad", "results.config_json is not JSON"),
        ("results.median", "abc", "results.median is 'abc', not a number"),
        ("results.samples_json", '{"a": 1}', "results.samples_json is a JSON dict, not list"),
    ],
)
def test_a_damaged_row_is_a_clear_error_and_left_as_it_is(
    tmp_path: Path, column: str, value: str, named: str
) -> None:
    # a row edited by hand or damaged on disk: every read that meets it says which and where,
    # as for a corrupt file, instead of failing later in the numbers it feeds
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as db:
        run_id = _write_run(db, [_record("reference_cnn", n=512)])
    table, field = column.split(".")
    with sqlite3.connect(path) as raw:
        key = "id" if table == "runs" else "run_id"
        raw.execute(f"UPDATE {table} SET {field} = ? WHERE {key} = ?", (value, run_id))
    before = path.read_bytes()
    with ResultsStore(path) as db:
        reads = [lambda: db.last_run(FP), lambda: db.get_run(run_id), lambda: db.runs(FP)]
        if table == "results":
            reads = [lambda: db.results(run_id), lambda: db.best_setting(FP, "reference_cnn", "n")]
        for read in reads:
            with pytest.raises(StoreError, match="holds a damaged row") as info:
                read()
            received = info.value.received or ""
            # where SQLite reads the JSON itself (json_extract in a query), it names no row
            assert (named in received and f"run {run_id}" in received) or (
                "malformed JSON" in received
            ), received
            assert info.value.fix and f"mv {path}" in info.value.fix
    assert path.read_bytes() == before


def test_directory_and_newer_schema_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        ResultsStore(tmp_path)
    path = tmp_path / "r.sqlite"
    ResultsStore(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="newer tfaccel"):
        ResultsStore(path)


@pytest.mark.parametrize("kind", ["character device", "named pipe"])
def test_a_path_that_is_not_a_regular_file_is_refused_and_left_alone(
    tmp_path: Path, kind: str
) -> None:
    if kind == "named pipe":
        path = tmp_path / "pipe"
        os.mkfifo(path)
    else:
        path = Path("/dev/null")
    before = path.stat()
    with pytest.raises(StoreError) as info:
        ResultsStore(path)
    message = str(info.value)
    assert f"{str(path)!r} is not a regular file" in message and kind in message
    assert "rollback" not in message and "I/O" not in message and "Fix: pass --db" in message
    after = path.stat()
    assert (after.st_mode, after.st_size) == (before.st_mode, before.st_size)
    assert sorted(tmp_path.iterdir()) == ([path] if kind == "named pipe" else [])


_WRITER = textwrap.dedent(
    """
    import sys, time
    from tfaccel.store import ResultRecord, ResultsStore

    big = [float(i) for i in range(20000)]  # ~200 KB per row: the transaction spills to disk

    def rows(count, announce):
        for i in range(count):
            yield ResultRecord("matmul", {"device": "cpu", "i": i}, "tflops", "TFLOP/s",
                               1.0, 0.9, 1.1, len(big), big)
            if announce and i == 30:
                print("MID-WRITE", flush=True)
                time.sleep(60)

    db = ResultsStore(sys.argv[1])
    first = db.begin_run("abc123", fingerprint_data={}, started_at="t0", tfaccel_version="0.1.0",
                         tf_version=None)
    db.finish_run(first, rows(3, False), finished_at="t1")
    second = db.begin_run("abc123", fingerprint_data={}, started_at="t2", tfaccel_version="0.1.0",
                          tf_version=None)
    db.finish_run(second, rows(100, True), finished_at="t3")
    """
)


def test_a_killed_writer_leaves_the_database_valid_and_history_intact(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "MID-WRITE"
        journal = Path(str(path) + "-journal")
        assert journal.exists()  # the transaction is half written
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    with ResultsStore(path) as db:
        runs = db.runs()
        assert [(r.id, r.status) for r in runs] == [(2, "running"), (1, "complete")]
        assert len(db.results(1)) == 3 and db.results(2) == []
        assert db.last_run("abc123").id == 1  # type: ignore[union-attr]
        _write_run(db, [_record()])  # and it takes new runs


# -- schema 1 databases, and SQLite files of other programs --------------------------------------

_SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, finished_at TEXT,
    fingerprint TEXT NOT NULL, fingerprint_json TEXT NOT NULL, tfaccel_version TEXT NOT NULL,
    tf_version TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete')),
    details_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX runs_by_fingerprint ON runs (fingerprint, status, id);
CREATE TABLE results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    benchmark TEXT NOT NULL, config_json TEXT NOT NULL, metric TEXT NOT NULL, unit TEXT NOT NULL,
    median REAL NOT NULL, q1 REAL NOT NULL, q3 REAL NOT NULL, n INTEGER NOT NULL,
    samples_json TEXT NOT NULL, extra_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX results_by_run ON results (run_id, benchmark);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO runs VALUES (1, 't0', 't1', 'abc123', '{}', '0.1.0', '2.21.0', 'complete', '{}');
INSERT INTO results VALUES
    (1, 1, 'reference_cnn', '{"device":"cpu","jit":false}', 'images_per_s', 'images/s',
     1000, 990, 1010, 3, '[990,1000,1010]', '{}'),
    (2, 1, 'reference_cnn', '{"device":"cpu","jit":true}', 'images_per_s', 'images/s',
     400, 395, 405, 3, '[395,400,405]', '{}');
"""


def test_a_schema_1_database_gains_the_model_column_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.executescript(_SCHEMA_1)
    con.close()
    with ResultsStore(path) as db:
        [run] = db.runs()
        assert (run.id, run.status) == (1, "complete")
        old = db.results(1)
        assert [r.config["jit"] for r in old] == [False, True]
        assert all(r.model_fingerprint is None for r in old)  # measured on no known model
        assert db.best_setting(FP, "reference_cnn", "jit", device="cpu") is False  # by name
        assert db.best_measured(FP, "jit", model_fingerprint="0123456789abcdef") is None
        new_run = _write_run(db, [_record("mlp", 5.0, jit=False)])
    con = sqlite3.connect(path)
    version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    columns = {row[1] for row in con.execute("PRAGMA table_info(results)")}
    con.close()
    assert int(version) == store.SCHEMA_VERSION == 2 and "model_fingerprint" in columns
    with ResultsStore(path) as db:  # opened again: nothing left to upgrade, nothing lost
        assert [r.id for r in db.runs()] == [new_run, 1] and len(db.results(1)) == 2


def test_results_carry_the_model_fingerprint_they_were_stored_with(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "r.sqlite") as db:
        mine = _record("reference_cnn", 1000.0, jit=False)
        mine.model_fingerprint = "aaaaaaaaaaaaaaaa"
        other = _record("reference_cnn", 400.0, jit=True)
        other.model_fingerprint = "bbbbbbbbbbbbbbbb"
        run_id = _write_run(db, [mine, other])
        assert [r.model_fingerprint for r in db.results(run_id)] == [
            mine.model_fingerprint,
            other.model_fingerprint,
        ]
        # by name both count: jit=False 1000 beats jit=True 400 beyond the noise
        found = db.best_measured(FP, "jit", model_name="reference_cnn")
        assert found == store.MeasuredSetting(False, "reference_cnn", run_id, 2)
        assert db.best_setting(FP, "reference_cnn", "jit") is False
        # by architecture one value was measured on that model: a bench compared nothing
        found = db.best_measured(FP, "jit", model_fingerprint=mine.model_fingerprint)
        assert found == store.MeasuredSetting(None, "reference_cnn", run_id, 1)
        assert db.best_measured(FP, "jit", model_fingerprint="cccccccccccccccc") is None
        with pytest.raises(ValueError, match="model_name or a model_fingerprint"):
            db.best_measured(FP, "jit")


def _foreign(path: Path) -> bytes:
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
        "INSERT INTO users (name) VALUES ('ada');"
    )
    con.close()
    return path.read_bytes()


def test_another_programs_sqlite_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    before = _foreign(path)
    with pytest.raises(StoreError, match="not a tfaccel results database") as info:
        ResultsStore(path)
    assert info.value.received == "tables meta, users"
    assert info.value.fix and "--db" in info.value.fix and "permissions" not in info.value.fix
    assert path.read_bytes() == before  # no tfaccel table added to it


def test_a_read_only_open_creates_nothing_and_refuses_a_missing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "new" / "dir" / "results.sqlite"
    with pytest.raises(StoreError) as info:
        ResultsStore(missing, read_only=True)
    message = str(info.value)
    assert "does not exist" in message and "creates no file and no folder" in message
    assert "Fix: pass --db with the database earlier runs recorded to" in message
    assert not (tmp_path / "new").exists()
    with pytest.raises(StoreError, match="does not exist"):
        store.open_read_only(missing)
    assert not (tmp_path / "new").exists()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert store.open_read_only() is None  # no default database yet: no history
    assert not (tmp_path / "xdg").exists()


def test_a_read_only_open_reads_the_history_and_leaves_the_file_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.sqlite"
    with ResultsStore(path) as db:
        run_id = _write_run(db, [_record()])
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    entries = sorted(p.name for p in tmp_path.iterdir())
    with store.open_read_only(path) as db:  # type: ignore[union-attr]
        assert db.last_run(FP).id == run_id  # type: ignore[union-attr]
        with pytest.raises(StoreError):
            _write_run(db, [_record()])  # read only: SQLite refuses the write
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == entries
    path.write_bytes(b"")  # an empty file: no tables, and none created
    with pytest.raises(StoreError, match="not a tfaccel results database"):
        ResultsStore(path, read_only=True)
    assert path.stat().st_size == 0


def test_a_default_database_that_cannot_be_made_names_where_the_default_comes_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """XDG_DATA_HOME set to a file: the fix does not offer the default path that failed, it
    names the variable; a --db given keeps the default as the way out."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setenv("XDG_DATA_HOME", str(afile))
    with pytest.raises(StoreError) as default:
        check_store_path(None)
    assert f"from $XDG_DATA_HOME, set to {str(afile)!r}" in default.value.fix
    assert "leave --db out" not in default.value.fix
    with pytest.raises(StoreError) as given:
        check_store_path(afile / "results.sqlite")
    assert "leave --db out to use" in given.value.fix


def test_a_relative_xdg_data_home_is_ignored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The XDG specification: a relative path in XDG_DATA_HOME is invalid and ignored (it
    would make a database in every folder a command runs from)."""
    from tfaccel.store import default_path

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", "relative/data")
    assert default_path() == tmp_path / ".local" / "share" / "tfaccel" / "results.sqlite"
