"""The ``tfaccel report`` directory: report.html, report.json, report.md and the PNG plots.

tfaccel writes only what is its own. Beside the report it keeps a manifest,
``.tfaccel-report`` (JSON: each file it wrote, by its path in the directory, with its size and
SHA-256). A file the report would write (or remove: a plot an earlier report drew and this one
does not) that exists and is not in the manifest, or was changed since tfaccel wrote it, is a
user's: the report refuses before anything is written or deleted (a UsageError naming the
files). A new or empty directory, and the directory of an earlier report whose files are
unchanged (the report's own folder: its files are replaced, its stale plots removed), work
as they are. A plot file the manifest does not list is never removed.

:func:`write_report` writes each file atomically (:func:`tfaccel.core.files.write_atomic`: a
temporary file renamed into place); :func:`check_writable` checks the report directory by the
one rule, :func:`tfaccel.core.files.check_writable_dir`. report.html needs nothing beside it:
its plots are embedded as data URIs. The PNG files in ``plots/`` are for report.md, which links them
by those relative paths. report.json is strict JSON (:mod:`tfaccel.core.jsonout`: NaN and
infinities written as null).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tfaccel.core.errors import UsageError, argument
from tfaccel.core.files import (
    check_writable_dir,
    discard,
    file_kind,
    prepare_write,
    stage,
    write_atomic,
)
from tfaccel.core.jsonout import dumps
from tfaccel.report.document import PLOT_TITLES, ReportDocument, SavedReportDocument
from tfaccel.report.html import render_html
from tfaccel.report.markdown import render_markdown

__all__ = ["MANIFEST", "ReportFiles", "check_owned", "check_writable", "write_report"]

_OUT = "out"  # the argument that names the report directory (make_report's; --out on the CLI)
MANIFEST = ".tfaccel-report"
"""The manifest's name in the report directory: what tfaccel wrote there, with sizes and hashes."""
_MANIFEST_KIND = "tfaccel report manifest"
_FIXED = ("report.html", "report.json", "report.md")


@dataclass(frozen=True)
class ReportFiles:
    """The files a report wrote: report.html (self-contained), report.json, report.md, and
    the PNG plots report.md links (``plots``: name -> path)."""

    directory: Path
    html: Path
    json: Path
    markdown: Path
    plots: dict[str, Path]

    def written(self) -> dict[str, str]:
        """Every file written, by kind -> path: ``html``, ``json``, ``markdown``, then
        ``plot:<name>`` for each PNG."""
        files = {"html": str(self.html), "json": str(self.json), "markdown": str(self.markdown)}
        files.update({f"plot:{name}": str(path) for name, path in self.plots.items()})
        return files


def check_writable(directory: str | Path, *, create: bool = True) -> Path:
    """Create ``directory`` if needed (unless ``create`` is False: then only checked, for a
    command to refuse it before any work) and check a file can be written there, and that
    none of the files a report writes there is a user's (:func:`check_owned`).

    Raises:
        UsageError: it cannot be created or written, or it holds files tfaccel did not write
            where the report goes (the message names the path and the files).
    """
    root = _report_dir(directory, create=create)
    if root.is_dir():
        check_owned(root)
    return root


def _report_dir(directory: str | Path, *, create: bool = True) -> Path:
    return check_writable_dir(
        directory,
        what="the report directory",
        argument_name=_OUT,
        example="./tfaccel-report",
        create=create,
    )


def _report_names() -> list[str]:
    """Every file a report may write or remove, by its path in the report directory."""
    return [*_FIXED, *(f"plots/{name}.png" for name in PLOT_TITLES)]


def _digest(data: bytes) -> dict[str, object]:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _read_manifest(root: Path) -> dict[str, dict[str, object]] | None:
    """The files the manifest lists (its ``files`` and, after an interrupted write, its
    ``pending`` versions, by name -> a list of ``{size, sha256}``); None when there is no
    manifest or it is not one tfaccel wrote."""
    path = root / MANIFEST
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > 1 << 20:
            return None
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    if not isinstance(loaded, dict) or loaded.get("kind") != _MANIFEST_KIND:
        return None
    known: dict[str, dict[str, object]] = {}
    for key in ("files", "pending"):
        listed = loaded.get(key)
        if not isinstance(listed, dict):
            continue
        for name, entry in listed.items():
            if isinstance(name, str) and isinstance(entry, dict):
                known.setdefault(name, {})[str(entry.get("sha256"))] = entry.get("size")
    return known


def _ours(path: Path, versions: Mapping[str, object] | None) -> dict[str, object] | None:
    """The size and SHA-256 of ``path`` when it is a regular file (not a link) in a version
    tfaccel wrote; None otherwise."""
    if not versions:
        return None
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size not in versions.values():
            return None
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except (OSError, ValueError):
        return None
    if versions.get(digest) != info.st_size:
        return None
    return {"size": info.st_size, "sha256": digest}


def _foreign(
    root: Path, names: Iterable[str]
) -> tuple[list[tuple[str, str]], dict[str, dict[str, object]]]:
    """The files among ``names`` (and the manifest itself) that exist in ``root`` and are not
    tfaccel's, each with why: (name, reason); and those that are, with their size and SHA-256."""
    known = _read_manifest(root)
    found: list[tuple[str, str]] = []
    ours: dict[str, dict[str, object]] = {}
    if known is None:
        found.append((MANIFEST, "not a manifest tfaccel wrote"))
        known = {}
    plots = root / "plots"
    try:
        plots_usable = stat.S_ISDIR(plots.lstat().st_mode)  # a folder, not a link to one
    except (OSError, ValueError):
        plots_usable = True  # missing: created when a plot is written
    if not plots_usable:
        found.append(("plots", "not a directory"))
    for name in names:
        path = root / name
        if name.startswith("plots/") and not plots_usable:
            continue
        try:
            info = path.lstat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, ValueError) as exc:
            found.append((name, f"cannot be read: {exc}"))
            continue
        if not stat.S_ISREG(info.st_mode):
            kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else file_kind(info.st_mode)
            found.append((name, kind))
        elif name not in known:
            found.append((name, "not written by tfaccel"))
        elif (digest := _ours(path, known[name])) is None:
            found.append((name, "changed since tfaccel wrote it"))
        else:
            ours[name] = digest
    return found, ours


def check_owned(directory: str | Path) -> dict[str, dict[str, object]]:
    """Refuse a report directory where a file the report would write or remove is not
    tfaccel's: not listed in the manifest, or changed since tfaccel wrote it (a user's
    report.md, a plot edited by hand). Nothing is written or deleted.

    Returns:
        The report's files already there, tfaccel's and unchanged, with their size and SHA-256.

    Raises:
        UsageError: naming the files and why each is not tfaccel's.
    """
    root = Path(directory)
    found, ours = _foreign(root, _report_names())
    if not found:
        return ours
    flag = argument(_OUT)
    shown_files = ", ".join(f"{name!r} ({why})" for name, why in found)
    raise UsageError(
        f"The report directory {str(root)!r} ({flag}) holds files tfaccel did not write, "
        "where the report goes; they are left as they are",
        expected="a new or empty directory, or one an earlier tfaccel report wrote (its "
        f"files listed, unchanged, in {MANIFEST})",
        received=shown_files,
        fix=f"pass {flag} with another directory, e.g. a new folder "
        f"({argument(_OUT, str(root / 'tfaccel-report'))}), or move those files out of "
        f"{str(root)!r}",
    )


def _write_manifest(root: Path, files: Mapping[str, object], pending: Mapping[str, object]) -> None:
    content = {"kind": _MANIFEST_KIND, "version": 1, "files": dict(files)}
    if pending:
        content["pending"] = dict(pending)
    _write(root / MANIFEST, (json.dumps(content, indent=1, sort_keys=True) + "\n").encode())


def _missing_folders(directory: Path) -> list[Path]:
    """``directory`` and the folders above it that do not exist yet, deepest first."""
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    return missing


def _undo(staged: Mapping[Path, str], made: list[Path]) -> None:
    """After a write that failed: the temporary files not renamed yet removed, and the
    folders this report made removed again where nothing else is in them (deepest first)."""
    for tmp in staged.values():
        discard(tmp)
    for folder in made:
        try:
            folder.rmdir()  # only an empty one
        except OSError:
            pass


def _prepared(path: Path) -> Path:
    """:func:`prepare_write` of one report file, its errors worded as :func:`_write`'s."""
    try:
        return prepare_write(path, argument_name=_OUT)
    except UsageError as exc:
        if not (os.path.lexists(path) and not path.is_file()):
            raise
        raise UsageError(
            exc.what,
            expected=exc.expected,
            received=exc.received,
            fix=f"move {str(path)!r} out of the way, or pass {argument(_OUT)} with another "
            "directory",
        ) from None


def _write(path: Path, data: bytes) -> None:
    """:func:`write_atomic` of one report file, checked first as :func:`_prepared` says (an
    error names the report directory's argument, ``--out`` on the command line)."""
    write_atomic(_prepared(path), data, argument_name=_OUT)


def write_report(
    directory: str | Path, doc: ReportDocument, plots: dict[str, bytes] | None = None
) -> ReportFiles:
    """Write report.html, report.json, report.md and, for report.md, plots/<name>.png, and
    the manifest ``.tfaccel-report`` that lists them.

    report.html embeds the plots and needs no other file; report.md links the PNG files by
    the relative paths report.json lists under ``files.plots``. A plot an earlier report wrote
    in ``plots/`` that this report does not draw is removed, so the directory holds what
    report.json lists. Each file is written to a temporary name and renamed into place, so a
    reader never sees a half-written file. A file tfaccel did not write is never replaced
    or removed (:func:`check_owned`, checked again here before anything is written).

    Raises:
        UsageError: the directory cannot be created or written, or holds a file that is not
            tfaccel's where the report goes.
    """
    made = _missing_folders(Path(directory).expanduser())  # removed again if the write fails
    root = _report_dir(directory, create=False)  # made when the files are written
    on_disk = check_owned(root) if root.is_dir() else {}
    plots = plots or {}
    plot_dir = root / "plots"
    plot_paths = {name: plot_dir / f"{name}.png" for name in plots}
    files = ReportFiles(
        directory=root,
        html=root / "report.html",
        json=root / "report.json",
        markdown=root / "report.md",
        plots=plot_paths,
    )
    saved: SavedReportDocument = {
        **doc,
        "files": {
            "html": "report.html",
            "json": "report.json",
            "markdown": "report.md",
            "plots": {k: f"plots/{k}.png" for k in plots},
        },
    }
    content: dict[str, bytes] = {f"plots/{name}.png": png for name, png in plots.items()}
    content["report.json"] = (dumps(saved) + "\n").encode("utf-8")
    content["report.md"] = render_markdown(saved, saved["files"]["plots"]).encode("utf-8")
    content["report.html"] = render_html(saved, plots).encode("utf-8")
    stale = [f"plots/{name}.png" for name in PLOT_TITLES.keys() - plots.keys()]
    listed = {name: _digest(data) for name, data in content.items()}
    staged: dict[Path, str] = {}  # each file's temporary beside it, renamed when all are
    try:
        root.mkdir(parents=True, exist_ok=True)
        if plots:
            if not plot_dir.is_dir():
                made.insert(0, plot_dir)
            plot_dir.mkdir(exist_ok=True)
        for name, data in content.items():
            path = _prepared(root / name)
            staged[path] = stage(path, data)
        # listed first as pending: a rename cut short leaves files the next report knows
        _write_manifest(root, on_disk, listed)
        for path, tmp in list(staged.items()):
            os.replace(tmp, path)
            del staged[path]
        removed = False
        for name in stale:
            if (root / name).is_file():  # tfaccel's, unchanged: checked above
                (root / name).unlink()
                removed = True
        if removed and plot_dir.is_dir() and not any(plot_dir.iterdir()):
            plot_dir.rmdir()
        _write_manifest(root, listed, {})
    except OSError as exc:
        _undo(staged, made)
        raise UsageError(
            f"The report could not be written to {str(root)!r} ({argument(_OUT)})",
            expected="a writable directory with free space",
            received=f"{type(exc).__name__}: {exc.strerror or exc}",
            fix=f"pass {argument(_OUT)} with a writable directory",
        ) from None
    except BaseException:
        _undo(staged, made)
        raise
    return files
