"""The ``tfaccel report`` directory: report.html, report.json, report.md and the PNG plots.

:func:`write_report` writes each file atomically (:func:`tfaccel.core.files.write_atomic`: a
temporary file renamed into place); :func:`check_writable` checks the report directory by the
one rule, :func:`tfaccel.core.files.check_writable_dir`. report.html needs nothing beside it:
its plots are embedded as data URIs. The PNG files in ``plots/`` are for report.md, which links them
by those relative paths. report.json is strict JSON (:mod:`tfaccel.core.jsonout`: NaN and
infinities written as null).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tfaccel.core.errors import UsageError, argument
from tfaccel.core.files import check_writable_dir, write_atomic
from tfaccel.core.jsonout import dumps
from tfaccel.report.document import PLOT_TITLES, ReportDocument, SavedReportDocument
from tfaccel.report.html import render_html
from tfaccel.report.markdown import render_markdown

__all__ = ["ReportFiles", "check_writable", "write_report"]

_OUT = "out"  # the argument that names the report directory (make_report's; --out on the CLI)


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


def check_writable(directory: str | Path) -> Path:
    """Create ``directory`` if needed and check a file can be written there.

    Raises:
        UsageError: it cannot be created or written (the message names the path).
    """
    return check_writable_dir(
        directory,
        what="the report directory",
        argument_name=_OUT,
        example="./tfaccel-report",
        create=True,
    )


def _write(path: Path, data: bytes) -> None:
    """:func:`write_atomic` of one report file; an error names the report directory's argument
    (``--out`` on the command line), and when a directory or a special file stands where the
    file goes, says to move it or to choose another directory."""
    try:
        write_atomic(path, data, argument_name=_OUT)
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


def write_report(
    directory: str | Path, doc: ReportDocument, plots: dict[str, bytes] | None = None
) -> ReportFiles:
    """Write report.html, report.json, report.md and, for report.md, plots/<name>.png.

    report.html embeds the plots and needs no other file; report.md links the PNG files by
    the relative paths report.json lists under ``files.plots``. A plot an earlier report left
    in ``plots/`` that this report does not draw is removed, so the directory holds what
    report.json lists. Each file is written to a temporary name and renamed into place, so a
    reader never sees a half-written file.

    Raises:
        UsageError: the directory cannot be created or written.
    """
    root = check_writable(directory)
    plots = plots or {}
    plot_dir = root / "plots"
    plot_paths: dict[str, Path] = {}
    try:
        if plots:
            plot_dir.mkdir(exist_ok=True)
        for name, png in plots.items():
            plot_paths[name] = plot_dir / f"{name}.png"
            _write(plot_paths[name], png)
        for name in PLOT_TITLES.keys() - plots.keys():
            (plot_dir / f"{name}.png").unlink(missing_ok=True)
        if plot_dir.is_dir() and not any(plot_dir.iterdir()):
            plot_dir.rmdir()
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
        _write(files.json, (dumps(saved) + "\n").encode("utf-8"))
        markdown = render_markdown(saved, saved["files"]["plots"])
        _write(files.markdown, markdown.encode("utf-8"))
        _write(files.html, render_html(saved, plots).encode("utf-8"))
    except OSError as exc:
        raise UsageError(
            f"The report could not be written to {str(root)!r} ({argument(_OUT)})",
            expected="a writable directory with free space",
            received=f"{type(exc).__name__}: {exc.strerror or exc}",
            fix=f"pass {argument(_OUT)} with a writable directory",
        ) from None
    return files
