"""SQLite history of benchmark results, keyed by a machine fingerprint.

One database file (default ``$XDG_DATA_HOME/tfaccel/results.sqlite``, else
``~/.local/share/tfaccel/results.sqlite``) with two tables::

    runs(id, started_at, finished_at, fingerprint, fingerprint_json, tfaccel_version,
         tf_version, status, details_json)
    results(id, run_id, benchmark, config_json, metric, unit, median, q1, q3, n,
            samples_json, extra_json, model_fingerprint)

plus ``meta(key, value)`` holding ``schema_version``. ``model_fingerprint`` (schema 2) is the
architecture fingerprint (:mod:`tfaccel.architecture`) of the model a training figure was
measured on; it is null for micro benchmarks and for results stored before schema 2. A
database of schema 1 gains the column when it is first opened (its runs are kept; their
training figures match no model). A SQLite file of another program is refused, never written.

A run is recorded with status ``running`` when it starts; its results and its final status
(``complete``, or ``incomplete`` when it was interrupted) are written in ONE transaction at the
end. A process killed in between leaves the database valid (SQLite's journal rolls the
half-written transaction back), earlier runs intact, and the killed run ``running`` with no
results; queries only ever read ``complete`` runs.

Runs are keyed by the digest of the machine fingerprint (:mod:`tfaccel.inventory`: CPU model,
cores and flags, GPU names and memory, the driver, the TensorFlow and tfaccel versions), which
the caller passes in: the store never looks at the machine.

Example:
    >>> from tfaccel import inventory, store
    >>> with store.ResultsStore() as db:                      # doctest: +SKIP
    ...     run = db.last_run(inventory.current().fingerprint.digest)
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfaccel.core.errors import TfaccelError
from tfaccel.core.files import (
    check_path,
    file_kind,
    nearest_existing,
    os_reason,
    trailing_slash,
    try_writing_in,
)

__all__ = [
    "SCHEMA_VERSION",
    "MeasuredSetting",
    "ResultRecord",
    "ResultsStore",
    "RunRecord",
    "StoreError",
    "best_measured",
    "best_setting",
    "check_store_path",
    "default_path",
    "open_read_only",
]

SCHEMA_VERSION = 2
DEFAULT_TIMEOUT_S = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    fingerprint TEXT NOT NULL,
    fingerprint_json TEXT NOT NULL,
    tfaccel_version TEXT NOT NULL,
    tf_version TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete')),
    details_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS runs_by_fingerprint ON runs (fingerprint, status, id);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    benchmark TEXT NOT NULL,
    config_json TEXT NOT NULL,
    metric TEXT NOT NULL,
    unit TEXT NOT NULL,
    median REAL NOT NULL,
    q1 REAL NOT NULL,
    q3 REAL NOT NULL,
    n INTEGER NOT NULL,
    samples_json TEXT NOT NULL,
    extra_json TEXT NOT NULL DEFAULT '{}',
    model_fingerprint TEXT
);
CREATE INDEX IF NOT EXISTS results_by_run ON results (run_id, benchmark);
CREATE INDEX IF NOT EXISTS results_by_model ON results (model_fingerprint);
"""
_TABLES = frozenset({"meta", "runs", "results"})


class StoreError(TfaccelError):
    """The results database cannot be opened, read or written."""


def default_path() -> Path:
    """``$XDG_DATA_HOME/tfaccel/results.sqlite``, else ``~/.local/share/tfaccel/...`` (a
    relative ``XDG_DATA_HOME`` is ignored, as the XDG base directory specification says: it
    would put the database in whatever folder a command runs from)."""
    base = _xdg_data_home() or str(Path.home() / ".local" / "share")
    return Path(base) / "tfaccel" / "results.sqlite"


def _xdg_data_home() -> str | None:
    """``$XDG_DATA_HOME`` where it is an absolute path (else None: the default applies)."""
    xdg = os.environ.get("XDG_DATA_HOME")
    return xdg if xdg and os.path.isabs(xdg) else None


@dataclass
class ResultRecord:
    """One measured figure of a run: robust statistics plus the raw samples."""

    benchmark: str
    config: dict[str, Any]
    metric: str
    unit: str
    median: float
    q1: float
    q3: float
    n: int
    samples: list[float]
    extra: dict[str, Any] = field(default_factory=dict)
    model_fingerprint: str | None = None
    """The architecture fingerprint of the model measured (training figures), else None."""


@dataclass(frozen=True)
class MeasuredSetting:
    """The measured best value of one setting, and where it was measured.

    Attributes:
        value: the winning value (``True``, ``"mixed_bfloat16"``...); None when none beats
            the others beyond the noise, or a bench measured one value only (keep the default).
        benchmark: the name the model was measured under (``reference_cnn``, ``my_net``).
        run_id: the run that measured it.
        values: how many values of the setting were measured (a tune run stores its winner
            alone: it has compared the others already).
    """

    value: Any
    benchmark: str
    run_id: int
    values: int = 1


@dataclass
class RunRecord:
    """One row of ``runs``."""

    id: int
    started_at: str
    finished_at: str | None
    fingerprint: str
    fingerprint_data: dict[str, Any]
    tfaccel_version: str
    tf_version: str | None
    status: str
    details: dict[str, Any]


def check_store_path(path: str | Path | None = None, *, read_only: bool = False) -> Path:
    """Refuse a results database path that cannot be opened, before any work; create nothing.

    The checks :class:`ResultsStore` makes before it connects, for a command to call first
    (``tfaccel bench --db``, ``tfaccel report --db`` refuse a bad path before probing the
    machine or starting TensorFlow).

    Args:
        path: the SQLite file (``~`` expanded; default :func:`default_path`).
        read_only: the database is only read, so it must exist.

    Returns:
        ``path`` as a Path.

    Raises:
        StoreError: the path is empty, too long, holds a NUL byte or loops; it is a directory
            (or ends with a slash) or not a regular file; a folder on its way is a file; or,
            ``read_only``, it does not exist.
    """
    target = Path(path).expanduser() if path is not None else default_path()
    check_path(
        target if path is None else path,  # as given: Path("") would be "."
        what="the results database path",
        fix=f"pass --db with another path, e.g. --db results.sqlite{_or_default(path)}",
        error=StoreError,
    )
    given = os.fspath(path) if path is not None else ""
    is_dir = target.is_dir()
    file = None if is_dir else trailing_slash(given)
    if file is not None:  # Path drops the slash: "notes.txt/" would open notes.txt
        raise StoreError(
            f"The results database path {given!r} ends with a slash, so it names a directory",
            expected="the path of a database file, without a trailing slash",
            received=repr(given),
            fix=f"pass --db {file}, or a file inside a "
            f"directory, e.g. --db {os.path.join(given, 'results.sqlite')}",
        )
    if is_dir:
        raise StoreError(
            f"The results database path {str(target)!r} is a directory",
            expected="a file path (it is created when missing)",
            received="a directory",
            fix=f"pass --db {target / 'results.sqlite'}",
        )
    kind = _special_kind(target)
    if kind is not None:  # SQLite would fail later with "disk I/O error" or worse
        raise StoreError(
            f"The results database path {str(target)!r} is not a regular file",
            expected="the path of a regular file (it is created when missing)",
            received=kind,
            fix=f"pass --db with the path of a file, e.g. --db results.sqlite{_or_default(path)}",
        )
    try:
        nearest: tuple[Path, os.stat_result] | None = nearest_existing(target.parent)
        walk_error: OSError | ValueError | None = None
    except (OSError, ValueError) as exc:  # unreadable: opening it says why
        nearest, walk_error = None, exc
    blocker = None if nearest is None or stat.S_ISDIR(nearest[1].st_mode) else nearest[0]
    if blocker is not None:
        raise StoreError(
            f"The results database path {str(target)!r} is under {str(blocker)!r}, "
            "which is a file, not a folder",
            expected="a path whose folders are folders (missing ones are created)",
            received=f"{str(blocker)!r} is a file",
            fix=f"pass --db with a path in a folder, e.g. --db results.sqlite{_or_default(path)}",
        )
    if read_only and not os.path.lexists(target):
        raise StoreError(
            f"The results database {str(target)!r} does not exist",
            expected="an existing tfaccel results database to read (a run that is not "
            "recorded, --no-save, creates no file and no folder)",
            received="no such file",
            fix="pass --db with the database earlier runs recorded to (leave --db out for "
            f"{default_path()}), or leave --no-save out to record this run there",
        )
    if not read_only and not os.path.lexists(target):
        _check_creatable(target, nearest, walk_error, path)
    return target


def check_store(path: str | Path | None = None, *, read_only: bool = False) -> None:
    """Refuse, before any work, a results database that a run would open and cannot: the
    path's checks (:func:`check_store_path`), and for a file that holds data, an open read
    only (SQLite's ``mode=ro``: nothing written, not even a journal) to tell it is a tfaccel
    database SQLite can read (another program's, a corrupt or a newer one is refused).
    ``read_only``: the run only reads it, so it must exist. Creates nothing.

    Raises:
        StoreError: as :func:`check_store_path` and :class:`ResultsStore` say why.
    """
    target = Path(path).expanduser() if path is not None else default_path()
    if read_only or _holds_data(target):  # 0 bytes or missing: a new one
        ResultsStore(path, read_only=True).close()
    else:
        check_store_path(path)
    if read_only or not target.exists():
        return
    try:
        if not os.access(target, os.W_OK):
            raise PermissionError("no write permission")
        try_writing_in(target.parent)  # SQLite writes its journal beside the database
    except (OSError, ValueError):
        raise StoreError(
            f"The results database {str(target)!r} cannot be written",
            expected="a database this user may write to (a run is recorded in it), in a "
            "folder where its journal can be created",
            received="a file without write permission, in a folder where no file can be "
            "created, or on a read-only file system",
            fix="pass --db with a writable path, e.g. --db results.sqlite" + _or_default(path),
        ) from None


def _holds_data(path: Path) -> bool:
    """``path`` is a regular file (or a link to one) of at least one byte."""
    try:
        info = path.stat()
    except (OSError, ValueError):
        return False  # missing or unusable: check_store_path says why
    return stat.S_ISREG(info.st_mode) and info.st_size > 0


def _or_default(path: str | os.PathLike[str] | None) -> str:
    """The end of a fix for a results database path that cannot be used: where ``--db`` gave
    it, that leaving it out uses the default; where the default itself failed, where the
    default comes from (``$XDG_DATA_HOME``, else the home folder)."""
    if path is not None:
        return f", or leave --db out to use {default_path()}"
    xdg = _xdg_data_home()
    source = f"$XDG_DATA_HOME, set to {xdg!r}" if xdg else "your home"
    return (
        f"; without --db the database is {default_path()}, from {source}: "
        "set XDG_DATA_HOME to a folder you can write to (an absolute path)"
    )


def _check_creatable(
    target: Path,
    nearest: tuple[Path, os.stat_result] | None,
    walk_error: OSError | ValueError | None,
    given: str | Path | None = None,
) -> None:
    """Refuse a database that does not exist and cannot be created: no file can be made in
    the nearest existing folder on its way (``nearest``, or ``walk_error`` when finding it
    failed: /proc, a read-only file system, permissions)."""
    reason = walk_error
    if reason is None and nearest is not None:
        try:
            try_writing_in(nearest[0])
        except (OSError, ValueError) as exc:
            reason = exc
    if reason is None:
        return
    folder = str(nearest[0]) if nearest is not None else str(target.parent)
    raise StoreError(
        f"The results database {str(target)!r} cannot be opened: no file can be created "
        f"in {folder!r}",
        expected="a path in a folder this user can write to (missing folders are created)",
        received=os_reason(reason),
        fix="pass --db with a path in a writable folder, e.g. --db results.sqlite"
        + _or_default(given),
    )


def _special_kind(path: Path) -> str | None:
    """What ``path`` is when it exists but is neither a regular file nor a directory (a
    device, a FIFO, a socket); None otherwise (missing, unreadable: opening it says why)."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return file_kind(mode)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class ResultsStore:
    """The results database. Use it as a context manager, or call :meth:`close`.

    Args:
        path: the SQLite file (created with its directory when missing; default
            :func:`default_path`).
        timeout_s: how long to wait for another process's lock before giving up.
        read_only: open an existing database for reading only (SQLite's ``mode=ro``): no
            file, folder, table or upgrade is created, and a missing file is refused.

    Raises:
        StoreError: the path is a directory or not a regular file (a device, a FIFO), the
            file cannot be created, is not a SQLite database (corrupt), is a SQLite database
            of another program (its tables named), was written by a newer tfaccel, or is
            locked by another process for longer than ``timeout_s``.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        read_only: bool = False,
    ):
        self.path = Path(path).expanduser() if path is not None else default_path()
        self.timeout_s = timeout_s
        self.read_only = read_only
        check_store_path(path, read_only=read_only)
        try:
            if read_only:  # SQLite's URI: mode=ro creates nothing, not even a journal
                uri = f"{self.path.absolute().as_uri()}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(
                    str(self.path), timeout=timeout_s, isolation_level=None
                )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"The results database {str(self.path)!r} cannot be opened",
                expected="a writable location",
                received=str(exc),
                fix="pass --db with a path in a writable directory",
            ) from None
        try:
            with self._guard("opened"):
                self._conn.execute("PRAGMA foreign_keys = ON")
                self._init_schema()
        except StoreError:
            self._conn.close()
            raise

    # -- plumbing ---------------------------------------------------------------------------

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (an open transaction is rolled back)."""
        self._conn.close()

    def _guard(self, action: str) -> _Guard:
        return _Guard(self, action)

    def _init_schema(self) -> None:
        """Create the tables in a new (empty) file, upgrade an older tfaccel database, and
        refuse a newer one or a SQLite file of another program."""
        self._has_model_column = True
        tables = self._tables()
        if not tables and not self.read_only:
            self._create()
            return
        version = self._version(tables)
        if version is None or not _TABLES <= tables:
            found = ", ".join(sorted(tables)) or "none"
            raise StoreError(
                f"{str(self.path)!r} is a SQLite database, but not a tfaccel results database",
                expected="a tfaccel results database (tables meta, runs and results), or a "
                "path where one can be created",
                received=f"tables {found}",
                fix="pass --db with another path: a new file is created there (e.g. --db "
                f"{self.path.with_name('tfaccel-results.sqlite')}), or leave --db out to use "
                f"{default_path()}",
            )
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"The results database {str(self.path)!r} was written by a newer tfaccel",
                expected=f"schema version <= {SCHEMA_VERSION}",
                received=f"schema version {version}",
                fix="upgrade tfaccel, or pass --db with another file",
            )
        if version < SCHEMA_VERSION:
            self._upgrade()

    def _tables(self) -> set[str]:
        rows = self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        return {str(name) for (name,) in rows}

    def _version(self, tables: set[str]) -> int | None:
        """The schema version in ``meta``; None when there is no such record."""
        if "meta" not in tables:
            return None
        try:
            row = self._conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone()
            return int(row[0]) if row is not None else None
        except (sqlite3.OperationalError, TypeError, ValueError):
            return None  # a "meta" table of another shape: another program's

    def _create(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            if not self._tables():  # another process may have created them meanwhile
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                self._conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def _columns(self, table: str) -> set[str]:
        return {str(row[1]) for row in self._conn.execute(f"PRAGMA table_info({table})")}

    def _upgrade(self) -> None:
        """Schema 1 -> 2: the nullable ``results.model_fingerprint`` column; every run is kept.

        A database that cannot be written (a read-only file) is read as it is: its results
        carry no model fingerprint.
        """
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "read-only" in str(exc):
                self._has_model_column = "model_fingerprint" in self._columns("results")
                return
            raise
        try:
            if "model_fingerprint" not in self._columns("results"):
                self._conn.execute("ALTER TABLE results ADD COLUMN model_fingerprint TEXT")
            self._conn.execute(
                "CREATE INDEX IF NOT EXISTS results_by_model ON results (model_fingerprint)"
            )
            self._conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )
            self._conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            self._conn.execute("ROLLBACK")
            if "readonly" not in str(exc) and "read-only" not in str(exc):
                raise
            self._has_model_column = "model_fingerprint" in self._columns("results")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    # -- writing ----------------------------------------------------------------------------

    def begin_run(
        self,
        fingerprint: str,
        *,
        fingerprint_data: Mapping[str, Any],
        started_at: str,
        tfaccel_version: str,
        tf_version: str | None,
        details: dict[str, Any] | None = None,
    ) -> int:
        """Record that a run started (status ``running``) and return its id.

        Args:
            fingerprint: the digest of the machine fingerprint (``Fingerprint.digest``).
            fingerprint_data: what it hashes (``Fingerprint.data``), kept with the run.
            started_at: ISO 8601 time.
            tfaccel_version / tf_version: the versions that ran it.
            details: the run's details (options, devices, ``kind``...).
        """
        with self._guard("written"):
            cur = self._conn.execute(
                "INSERT INTO runs (started_at, fingerprint, fingerprint_json, tfaccel_version,"
                " tf_version, status, details_json) VALUES (?, ?, ?, ?, ?, 'running', ?)",
                (
                    started_at,
                    fingerprint,
                    _dumps(dict(fingerprint_data)),
                    tfaccel_version,
                    tf_version,
                    _dumps(details or {}),
                ),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

    def finish_run(
        self,
        run_id: int,
        results: Iterable[ResultRecord],
        *,
        finished_at: str,
        status: str = "complete",
        details: dict[str, Any] | None = None,
    ) -> None:
        """Write a run's results and final status in one transaction.

        Args:
            run_id: the id :meth:`begin_run` returned.
            results: the figures (consumed inside the transaction).
            finished_at: ISO 8601 time.
            status: ``complete``, or ``incomplete`` for an interrupted run (kept for the
                record, never used for comparisons).
            details: replaces the run's details (options, devices, skipped benchmarks...).
        """
        if status not in ("complete", "incomplete"):
            raise ValueError(f"status must be 'complete' or 'incomplete', got {status!r}")
        with self._guard("written"):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for r in results:
                    self._conn.execute(
                        "INSERT INTO results (run_id, benchmark, config_json, metric, unit,"
                        " median, q1, q3, n, samples_json, extra_json, model_fingerprint)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            run_id,
                            r.benchmark,
                            _dumps(r.config),
                            r.metric,
                            r.unit,
                            r.median,
                            r.q1,
                            r.q3,
                            r.n,
                            json.dumps(r.samples),
                            _dumps(r.extra),
                            r.model_fingerprint,
                        ),
                    )
                sets, params = "status = ?, finished_at = ?", [status, finished_at]
                if details is not None:
                    sets += ", details_json = ?"
                    params.append(_dumps(details))
                self._conn.execute(f"UPDATE runs SET {sets} WHERE id = ?", (*params, run_id))
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    # -- reading ----------------------------------------------------------------------------

    def runs(self, fingerprint: str | None = None, *, limit: int = 50) -> list[RunRecord]:
        """The most recent runs (every status), newest first, optionally of one fingerprint."""
        query = "SELECT * FROM runs"
        params: tuple[Any, ...] = ()
        if fingerprint is not None:
            query += " WHERE fingerprint = ?"
            params = (fingerprint,)
        query += " ORDER BY id DESC LIMIT ?"
        with self._guard("read"):
            rows = self._conn.execute(query, (*params, limit)).fetchall()
            return [_run(row) for row in rows]

    def get_run(self, run_id: int) -> RunRecord | None:
        """The run with this id, or None."""
        with self._guard("read"):
            row = self._conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            return _run(row) if row is not None else None

    def last_run(
        self, fingerprint: str, *, before: int | None = None, kind: str = "bench"
    ) -> RunRecord | None:
        """The newest ``complete`` run of ``fingerprint`` (older than run ``before`` if given)
        of one kind: ``details["kind"]``, "bench" when absent ("tune" for ``tfaccel tune``)."""
        found = self.complete_runs(fingerprint, before=before, kind=kind, limit=1)
        return found[0] if found else None

    def complete_runs(
        self,
        fingerprint: str,
        *,
        before: int | None = None,
        kind: str = "bench",
        limit: int = 50,
    ) -> list[RunRecord]:
        """The newest ``limit`` ``complete`` runs of ``fingerprint`` (older than run ``before``
        if given) of one kind (as :meth:`last_run`), newest first."""
        query = (
            "SELECT * FROM runs WHERE fingerprint = ? AND status = 'complete'"
            " AND COALESCE(json_extract(details_json, '$.kind'), 'bench') = ?"
        )
        params: list[Any] = [fingerprint, kind]
        if before is not None:
            query += " AND id < ?"
            params.append(before)
        with self._guard("read"):
            rows = self._conn.execute(query + " ORDER BY id DESC LIMIT ?", (*params, limit))
            return [_run(row) for row in rows.fetchall()]

    def results(self, run_id: int, benchmark: str | None = None) -> list[ResultRecord]:
        """The results of a run, in the order they were written."""
        model = "model_fingerprint" if self._has_model_column else "NULL"
        query = (
            "SELECT benchmark, config_json, metric, unit, median, q1, q3, n, samples_json,"
            f" extra_json, {model} FROM results WHERE run_id = ?"
        )
        params: list[Any] = [run_id]
        if benchmark is not None:
            query += " AND benchmark = ?"
            params.append(benchmark)
        with self._guard("read"):
            rows = self._conn.execute(query + " ORDER BY id", params).fetchall()
            return [
                ResultRecord(
                    benchmark=_stored(b, str, "results.benchmark", run_id),
                    config=_stored_json(c, dict, "results.config_json", run_id),
                    metric=_stored(m, str, "results.metric", run_id),
                    unit=_stored(u, str, "results.unit", run_id),
                    median=_stored(med, float, "results.median", run_id),
                    q1=_stored(q1, float, "results.q1", run_id),
                    q3=_stored(q3, float, "results.q3", run_id),
                    n=_stored(n, int, "results.n", run_id),
                    samples=_stored_json(s, list, "results.samples_json", run_id),
                    extra=_stored_json(e, dict, "results.extra_json", run_id),
                    model_fingerprint=_stored(
                        fp, str, "results.model_fingerprint", run_id, optional=True
                    ),
                )
                for b, c, m, u, med, q1, q3, n, s, e, fp in rows
            ]

    def best_setting(
        self,
        fingerprint: str,
        model_name: str | None,
        key: str,
        *,
        device: str | None = None,
        model_fingerprint: str | None = None,
    ) -> Any | None:
        """The measured best value of one setting for a model on this machine.

        :meth:`best_measured`'s value (its arguments), or None.
        """
        found = self.best_measured(
            fingerprint,
            key,
            model_name=model_name,
            model_fingerprint=model_fingerprint,
            device=device,
        )
        return None if found is None else found.value

    def best_measured(
        self,
        fingerprint: str,
        key: str,
        *,
        model_name: str | None = None,
        model_fingerprint: str | None = None,
        device: str | None = None,
    ) -> MeasuredSetting | None:
        """The measured best value of one setting for a model on this machine, and where.

        Reads the newest complete run of ``fingerprint`` that measured the model (training
        images/s) on ``device``, takes the best result for each value of ``key`` in the
        configurations (e.g. ``jit``: True/False, ``precision``: ``float32`` /
        ``mixed_bfloat16``), and returns the winning value only when it beats the runner-up
        beyond the measured noise (their interquartile ranges do not overlap). A tune run's
        single result is its winner; a bench run that measured one value compared nothing.

        Args:
            fingerprint: the digest of the machine fingerprint
                (:attr:`tfaccel.inventory.Inventory.fingerprint`).
            key: configuration key (``jit``, ``precision``, ``batch_size``, ``feed``).
            model_name: only results stored under this name (``reference_cnn``, ``my_net``).
            model_fingerprint: only results measured on a model of this architecture
                (:func:`tfaccel.architecture.fingerprint`); results stored without one never
                match it.
            device: only results of this device (``cpu``, ``gpu:0``...).

        Returns:
            A :class:`MeasuredSetting` (its ``value`` None when the difference is inside the
            noise: then keep the default), or None when nothing was measured.

        Raises:
            ValueError: neither ``model_name`` nor ``model_fingerprint`` was given.
        """
        if model_name is None and model_fingerprint is None:
            raise ValueError("best_measured needs a model_name or a model_fingerprint")
        if model_fingerprint is not None and not self._has_model_column:
            return None  # a read-only database of schema 1: no result names its model
        where = ["s.metric = 'images_per_s'"]
        params: list[Any] = []
        if model_name is not None:
            where.append("s.benchmark = ?")
            params.append(model_name)
        if model_fingerprint is not None:
            where.append("s.model_fingerprint = ?")
            params.append(model_fingerprint)
        if device is not None:
            where.append("json_extract(s.config_json, '$.device') = ?")
            params.append(device)
        matching = " AND ".join(where)
        with self._guard("read"):
            row = self._conn.execute(
                "SELECT r.id, COALESCE(json_extract(r.details_json, '$.kind'), 'bench')"
                " FROM runs r WHERE r.fingerprint = ? AND r.status = 'complete'"
                f" AND EXISTS (SELECT 1 FROM results s WHERE s.run_id = r.id AND {matching})"
                " ORDER BY r.id DESC LIMIT 1",
                (fingerprint, *params),
            ).fetchone()
        if row is None:
            return None
        run_id, kind = row
        best: dict[str, ResultRecord] = {}
        values: dict[str, Any] = {}
        for r in self.results(run_id, model_name):
            if r.metric != "images_per_s" or key not in r.config:
                continue
            if device is not None and r.config.get("device") != device:
                continue
            if model_fingerprint is not None and r.model_fingerprint != model_fingerprint:
                continue
            tag = _dumps(r.config[key])
            values[tag] = r.config[key]
            if tag not in best or r.median > best[tag].median:
                best[tag] = r
        if not best:
            return None
        ranked = sorted(best.items(), key=lambda item: item[1].median, reverse=True)
        tag, winner = ranked[0]
        count = len(ranked)
        if count > 1 and winner.q1 <= ranked[1][1].q3:
            return MeasuredSetting(None, winner.benchmark, run_id, count)  # inside the noise
        if count == 1 and kind != "tune":
            return MeasuredSetting(None, winner.benchmark, run_id, count)  # nothing compared
        return MeasuredSetting(values[tag], winner.benchmark, run_id, count)


def open_read_only(path: str | Path | None = None) -> ResultsStore | None:
    """The database at ``path`` opened read only (SQLite's ``mode=ro``), for a run that is
    not recorded but compared (``tfaccel bench --no-save --compare``): nothing is created.

    Returns:
        None when ``path`` is None and the default database does not exist yet: there is no
        history to compare with.

    Raises:
        StoreError: ``path`` was given and does not exist, or the database cannot be read.
    """
    if path is None and not os.path.lexists(default_path()):
        return None
    return ResultsStore(path, read_only=True)


def best_setting(
    fingerprint: str,
    model_name: str | None,
    key: str,
    *,
    device: str | None = None,
    model_fingerprint: str | None = None,
    path: str | Path | None = None,
) -> Any | None:
    """:meth:`ResultsStore.best_setting` on the database at ``path`` (default location).

    Returns None without creating anything when the database does not exist yet.

    Example:
        >>> from tfaccel import inventory, store
        >>> fp = inventory.current().fingerprint.digest             # doctest: +SKIP
        >>> store.best_setting(fp, "reference_cnn", "jit", device="cpu")  # doctest: +SKIP
        False

    Raises:
        StoreError: the database is corrupt, locked, or not a tfaccel results database.
    """
    found = best_measured(
        fingerprint,
        key,
        model_name=model_name,
        model_fingerprint=model_fingerprint,
        device=device,
        path=path,
    )
    return None if found is None else found.value


def best_measured(
    fingerprint: str,
    key: str,
    *,
    model_name: str | None = None,
    model_fingerprint: str | None = None,
    device: str | None = None,
    path: str | Path | None = None,
) -> MeasuredSetting | None:
    """:meth:`ResultsStore.best_measured` on the database at ``path`` (default location).

    Returns None without creating anything when the database does not exist yet.

    Raises:
        StoreError: the database is corrupt, locked, or not a tfaccel results database.
    """
    db_path = Path(path).expanduser() if path is not None else default_path()
    if not db_path.exists():
        return None
    with ResultsStore(db_path) as db:
        return db.best_measured(
            fingerprint,
            key,
            model_name=model_name,
            model_fingerprint=model_fingerprint,
            device=device,
        )


def _run(row: tuple[Any, ...]) -> RunRecord:
    """A row of ``runs``, its JSON read and every field of the type it is written with (else
    :class:`_Damaged`)."""
    rid, started, finished, fp, fp_json, version, tf_version, status, details = row
    return RunRecord(
        id=rid,
        started_at=_stored(started, str, "runs.started_at", rid),
        finished_at=_stored(finished, str, "runs.finished_at", rid, optional=True),
        fingerprint=_stored(fp, str, "runs.fingerprint", rid),
        fingerprint_data=_stored_json(fp_json, dict, "runs.fingerprint_json", rid),
        tfaccel_version=_stored(version, str, "runs.tfaccel_version", rid),
        tf_version=_stored(tf_version, str, "runs.tf_version", rid, optional=True),
        status=_stored(status, str, "runs.status", rid),
        details=_stored_json(details, dict, "runs.details_json", rid),
    )


class _Damaged(ValueError):
    """A stored value that is not what tfaccel writes there (edited, or damaged on disk)."""


def _stored(value: Any, kind: type, column: str, run_id: Any, *, optional: bool = False) -> Any:
    """``value`` of ``column`` (of run ``run_id``) when it is a ``kind`` (a float: any number;
    ``optional``: or None), else :class:`_Damaged`."""
    if optional and value is None:
        return None
    ok = (
        isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is float
        else isinstance(value, kind) and not isinstance(value, bool)
    )
    if not ok:
        wanted = "a number" if kind is float else kind.__name__
        raise _Damaged(f"run {run_id}'s {column} is {value!r:.60}, not {wanted}")
    return value


def _stored_json(text: Any, kind: type, column: str, run_id: Any) -> Any:
    """``text`` of ``column`` read as JSON when it is a JSON ``kind``, else :class:`_Damaged`."""
    try:
        value = json.loads(_stored(text, str, column, run_id))
    except json.JSONDecodeError as exc:
        raise _Damaged(f"run {run_id}'s {column} is not JSON ({exc})") from None
    if not isinstance(value, kind):
        raise _Damaged(
            f"run {run_id}'s {column} is a JSON {type(value).__name__}, not {kind.__name__}"
        )
    return value


def _damaged_row(path: str, received: str) -> StoreError:
    """The error of a row of the database at ``path`` that is not what tfaccel writes."""
    return StoreError(
        f"The results database {path!r} holds a damaged row",
        expected="the rows tfaccel writes (their JSON and their numbers)",
        received=received,
        fix=f"move it away (mv {path} {path}.corrupt); tfaccel then starts a new one",
    )


class _Guard:
    """Turns sqlite3 errors into StoreErrors that say what happened and what to do."""

    def __init__(self, store: ResultsStore, action: str) -> None:
        self.store = store
        self.action = action

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        path = str(self.store.path)
        if isinstance(exc, _Damaged):
            raise _damaged_row(path, str(exc)) from None
        if exc is None or not isinstance(exc, sqlite3.Error):
            return
        text = str(exc)
        if "malformed JSON" in text:  # SQLite's json_extract on a damaged row
            raise _damaged_row(path, f"a stored JSON column that is not JSON (SQLite: {text})")
        if "locked" in text or "busy" in text:
            raise StoreError(
                f"The results database {path!r} is locked by another process",
                expected=f"the lock released within {self.store.timeout_s:g} s",
                received=text,
                fix="wait for the other tfaccel run to finish, or pass --db with another file",
            ) from None
        if isinstance(exc, sqlite3.DatabaseError) and (
            "not a database" in text or "malformed" in text or "corrupt" in text
        ):
            raise StoreError(
                f"The results database {path!r} is corrupt",
                expected="a SQLite database written by tfaccel",
                received=text,
                fix=f"move it away (mv {path} {path}.corrupt); tfaccel then starts a new one",
            ) from None
        raise StoreError(
            f"The results database {path!r} could not be {self.action}",
            expected="a readable and writable SQLite file",
            received=f"{type(exc).__name__}: {text}",
            fix="check the file's permissions and free disk space, or pass --db with another file",
        ) from None
