"""What every command shares to show its output: the ``--json`` document and the stream it owns,
the progress bar, ``--verbose``, and TensorFlow's own log kept off the terminal.

* ``--json``: :func:`json_document` reserves stdout for the one document :func:`print_json`
  writes; whatever else is printed meanwhile (a user's script, a library, native code) goes to
  stderr.
* ``--verbose``: :func:`set_verbose` records the global flag; :func:`quiet_tensorflow` then
  leaves TensorFlow's start-up and log messages as TensorFlow prints them.
* :class:`RichProgress`: a live bar on a terminal, plain status lines anywhere else.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

__all__ = [
    "RichProgress",
    "filter_tensorflow_log",
    "json_document",
    "print_json",
    "print_json_error",
    "quiet_tensorflow",
    "set_verbose",
    "show_tensorflow_log",
    "warn_options_after_script",
]

VERBOSE_HELP = (
    "show TensorFlow's own start-up and log messages (absl, oneDNN and CPU-feature notices, "
    "retracing warnings), which bench, report, tune, profile --model, devices --tf and doctor "
    "--deep hide by default; a TF_CPP_MIN_LOG_LEVEL you set is honoured either way"
)

# The stream the --json document goes to while json_document() is active.
_document: IO[str] | None = None
_printed = False  # whether print_json wrote the document (of this run of the CLI)
_verbose = False


# -- --json --------------------------------------------------------------------------------------


def print_json(document: Any) -> None:
    """Print ``document`` as one JSON document on stdout.

    Strict JSON (:func:`tfaccel.core.jsonout.dumps`): NaN and infinities (a ratio over a zero
    median, a spread of one sample) become null; values JSON does not know (paths, dates) are
    written as text. Inside :func:`json_document` it goes to the stdout the document owns.
    """
    from tfaccel.core.jsonout import dumps

    global _printed
    stream = _document if _document is not None else sys.stdout
    stream.write(dumps(document))
    stream.write("\n")
    stream.flush()
    _printed = True


def print_json_error(error: Exception | None, exit_code: int) -> None:
    """Under ``--json``, where the command stopped before printing its document: one
    document of what stopped it, so that stdout still holds one JSON document (``error``: a
    :class:`~tfaccel.core.errors.TfaccelError`'s what, expected, received and fix; None for
    an interrupt, ``interrupted`` true). Nothing where the document was printed already."""
    if _printed:
        return
    described = None
    if error is not None:
        described = {
            "type": type(error).__name__,
            "what": getattr(error, "what", str(error)),
            "expected": getattr(error, "expected", None),
            "received": getattr(error, "received", None),
            "fix": getattr(error, "fix", None),
        }
    print_json({"error": described, "interrupted": error is None, "exit_code": exit_code})


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None


@contextlib.contextmanager
def json_document() -> Iterator[None]:
    """Keep stdout for the one JSON document :func:`print_json` writes, while the block runs.

    Everything else printed to stdout in the block goes to stderr instead: Python's
    ``print`` (``sys.stdout``) and, when stdout is file descriptor 1, what native code and
    child processes write to it. Nothing is lost and the order with stderr is kept.
    """
    global _document
    real = sys.stdout
    with contextlib.suppress(OSError, ValueError):
        real.flush()
    saved: int | None = None
    document: IO[str] = real
    if _fileno(real) == 1:
        saved = os.dup(1)
        encoding = getattr(real, "encoding", None) or "utf-8"
        document = open(saved, "w", encoding=encoding, closefd=False)
        os.dup2(2, 1)
    global _printed
    previous, _document, _printed = _document, document, False
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _document = previous
        for stream in (sys.stdout, real, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        if saved is not None:
            try:
                document.close()  # may raise: what is left does not fit where stdout goes
            finally:
                os.dup2(saved, 1)
                os.close(saved)


# -- --verbose -----------------------------------------------------------------------------------


def set_verbose(verbose: bool) -> None:
    """Record the global ``--verbose`` flag for this run of the CLI."""
    global _verbose
    _verbose = bool(verbose)


def show_tensorflow_log(log: str | None) -> None:
    """With ``--verbose``, print what a TensorFlow subprocess logged (``devices --tf``,
    ``doctor --deep``) on stderr; without it, nothing."""
    if not _verbose or not log or not log.strip():
        return
    sys.stderr.write("tfaccel: what TensorFlow logged in its subprocess:\n")
    sys.stderr.write(log if log.endswith("\n") else log + "\n")
    sys.stderr.flush()


# -- TensorFlow's own log ----------------------------------------------------------------------

LOG_LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
DEFAULT_LOG_LEVEL = 2  # TensorFlow's errors only
# absl prints this once per library before its logging is set up, whatever the log level.
ABSL_PREINIT = "WARNING: All log messages before absl::InitializeLog() is called"
# "I0000 00:00:1795400751.258919   26082 port.cc:153] ..." (absl, TF >= 2.18) and
# "2024-01-08 21:30:47.213628: W tensorflow/.../gpu_backend_lib.cc:504] ..." (before).
_RECORD = re.compile(
    r"^(?:([IWEF])\d{4} [\d:.]+\s+\d+ |\d{4}-\d\d-\d\d [\d:.]+: ([IWEF]) )[^\s\]]+:\d+\] "
)
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
RETRACING = "triggered tf.function retracing"


class _DropRetracing(logging.Filter):
    """Drops TensorFlow's warning that a tf.function was traced again (tfaccel measures many
    shapes and settings on purpose)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return RETRACING not in record.getMessage()


def quiet_tensorflow() -> None:
    """Keep TensorFlow's own noise off the terminal in tfaccel's own commands (bench, report,
    tune, profile --model), unless ``--verbose`` was given.

    Call it before TensorFlow is first imported (after a Snapshot that should record the
    user's environment). What it does, each measured on TensorFlow 2.21:

    * ``TF_CPP_MIN_LOG_LEVEL=2`` unless the user set it (their value wins): TensorFlow's C++
      info and warning lines while it runs (CPU-feature notice, XLA and device notes).
    * imports TensorFlow with its native stderr read back through :func:`filter_tensorflow_log`,
      since two messages ignore that variable: absl's "All log messages before
      absl::InitializeLog() ..." and the oneDNN notice (``TF_ENABLE_ONEDNN_OPTS`` is left
      alone: it changes the numerics, not only the notice).
    * drops the Python-side retracing warning of the ``tensorflow`` logger.

    Does nothing with ``--verbose``, and nothing twice.
    """
    if _verbose:
        return
    user_level = os.environ.get(LOG_LEVEL_VARIABLE)
    os.environ.setdefault(LOG_LEVEL_VARIABLE, str(DEFAULT_LOG_LEVEL))
    logger = logging.getLogger("tensorflow")
    if not any(isinstance(f, _DropRetracing) for f in logger.filters):
        logger.addFilter(_DropRetracing())
    if "tensorflow" in sys.modules:
        return
    level = _level(user_level) if user_level is not None else DEFAULT_LOG_LEVEL
    with _native_stderr(lambda text: filter_tensorflow_log(text, level, benign=user_level is None)):
        import tensorflow  # noqa: F401


def _level(text: str) -> int:
    try:
        return max(0, min(3, int(text.strip())))
    except ValueError:
        return 0  # TensorFlow reads a value it does not understand as 0


def filter_tensorflow_log(text: str, level: int, *, benign: bool = False) -> str:
    """What of ``text`` (TensorFlow's native log) to show at ``TF_CPP_MIN_LOG_LEVEL=level``.

    A record below ``level`` (I=0, W=1, E=2, F=3) is dropped with its continuation lines, as
    TensorFlow itself drops it once its logging is set up; absl's pre-initialisation notice
    goes from level 1 up. With ``benign``, the records the doctor knows as harmless on every
    start (:data:`tfaccel.diagnosis.log.patterns.BENIGN`) go too, fatal ones excepted. Lines
    before the first record are kept.
    """
    from tfaccel.diagnosis.log.patterns import BENIGN

    anchors = [a for group in BENIGN.values() for a in group]
    kept: list[str] = []
    drop = False
    for line in text.splitlines(keepends=True):
        record = _RECORD.match(line)
        if record:
            severity = _SEVERITY[record.group(1) or record.group(2)]
            drop = severity < level or (benign and severity < 3 and _any_in(anchors, line))
        elif line.startswith(ABSL_PREINIT):
            drop = level >= 1
        # any other line continues the record above it, and goes with it
        if not drop:
            kept.append(line)
    return "".join(kept)


def _any_in(anchors: Iterable[str], line: str) -> bool:
    return any(anchor in line for anchor in anchors)


@contextlib.contextmanager
def _native_stderr(keep: Any) -> Iterator[None]:
    """Read what native code writes to file descriptor 2 in the block, and print ``keep(text)``
    of it on stderr afterwards. Python's own ``sys.stderr`` (a progress bar) keeps reaching the
    terminal meanwhile; a crash in the block still prints Python's fault report there."""
    if _fileno(sys.__stderr__) != 2:
        yield
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    saved = os.dup(2)
    capture = tempfile.TemporaryFile()
    python_stderr = sys.stderr
    own_stream: IO[str] | None = None
    if _fileno(python_stderr) == 2:
        encoding = getattr(python_stderr, "encoding", None) or "utf-8"
        own_stream = open(
            os.dup(saved), "w", encoding=encoding, errors="backslashreplace", buffering=1
        )
        sys.stderr = own_stream
    os.dup2(capture.fileno(), 2)
    fault = not faulthandler.is_enabled()
    if fault:
        faulthandler.enable(file=saved)
    try:
        yield
    finally:
        if fault:
            faulthandler.disable()
        os.dup2(saved, 2)
        os.close(saved)
        if own_stream is not None:
            # Not closed here: a progress thread may be writing to it; it closes when unused.
            own_stream.flush()
            sys.stderr = python_stderr
        capture.seek(0)
        text = capture.read().decode("utf-8", errors="replace")
        capture.close()
        shown = keep(text)
        if shown:
            sys.stderr.write(shown)
            sys.stderr.flush()


# -- options after the script ------------------------------------------------------------------


def warn_options_after_script(
    command: str, own_options: Sequence[str], script: str, script_args: Sequence[str]
) -> None:
    """Warn on stderr about each option of ``tfaccel COMMAND`` among the script's arguments:
    it was passed to the script, and tfaccel's own options go before SCRIPT. Arguments after a
    ``--`` are the script's without doubt."""
    known = set(own_options) - {"-h", "--help"}
    seen: list[str] = []
    for word in script_args:
        if word == "--":
            break
        name = word.split("=", 1)[0]
        if name in known and name not in seen:
            seen.append(name)
    for name in seen:
        print(
            f"tfaccel: warning: {name} after {script} was passed to the script as its own "
            f"argument; to give it to tfaccel {command}, put it before the script: "
            f"tfaccel {command} {name} ... {script}",
            file=sys.stderr,
        )


# -- progress ----------------------------------------------------------------------------------


class RichProgress:
    """Progress on stderr; use as a context manager around the run.

    It is a :class:`tfaccel.bench.Progress` (``start``, ``advance``) that also shows what
    happens between measurements (``status``). On a terminal it is a live rich bar: spinner,
    bar, count and elapsed time, then what is measured, on the same line when it fits and on
    the next one (wrapped at spaces) when not; only the bar shrinks, so the count and the time
    are never cut. Anywhere else (a log file, CI) each status change is one plain line.
    """

    def __init__(self, description: str = "starting") -> None:
        from tfaccel.report.text import is_terminal

        self._live = is_terminal(sys.stderr)
        self._description = description
        self._total: int | None = None
        self._done = 0
        self._started = time.monotonic()
        self._progress = _live_progress(self)
        self._task = self._progress.add_task(description, total=None)

    @property
    def description(self) -> str:
        """What is shown as happening now."""
        return self._description

    def __enter__(self) -> RichProgress:
        if self._live:
            self._progress.start()
        else:
            self._line(self._description)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live:
            self._progress.stop()
        elif self._total is not None:
            elapsed = time.monotonic() - self._started
            self._line(f"{self._done}/{self._total} timed calls in {elapsed:.0f} s")

    def status(self, description: str) -> None:
        """Show what is happening before the measurements start."""
        if not self._live and description != self._description:
            self._line(description)
        self._description = description
        self._progress.refresh()

    def start(self, total: int) -> None:
        """Switch the bar from "starting" to counting ``total`` timed calls."""
        self._total, self._done, self._description = total, 0, "measuring"
        self._progress.update(self._task, total=total, completed=0)
        if not self._live:
            self._line(f"measuring: {total} timed calls")

    def advance(self, label: str) -> None:
        """One timed call done; show what is being measured."""
        self._done += 1
        self._description = label
        self._progress.update(self._task, advance=1)

    @staticmethod
    def _line(text: str) -> None:
        print(f"tfaccel: {text}", file=sys.stderr, flush=True)


def _live_progress(owner: RichProgress) -> Any:
    """The rich Progress of ``owner``: its columns on one line, ``owner.description`` after
    them when it fits the terminal, else on the line below."""
    from rich.cells import cell_len
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.measure import Measurement
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Column, Table
    from rich.text import Text

    from tfaccel.report.findings import Prose

    class _BarThenLabel:
        """The bar's columns, then what is measured: after them when it fits, else below."""

        def __init__(self, bar: Table, label: str) -> None:
            self.bar, self.label = bar, label

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            width = Measurement.get(console, options, self.bar).maximum
            if width + 1 + cell_len(self.label) <= options.max_width:
                line = Table.grid(padding=(0, 1))
                line.add_row(self.bar, Text(self.label, no_wrap=True))
                yield line
            else:
                yield self.bar
                yield Prose(self.label, indent="  ", hang="  ")

    class _Progress(Progress):
        def get_renderables(self) -> Iterable[RenderableType]:
            yield _BarThenLabel(self.make_tasks_table(self.tasks), owner.description)

    def fixed(width: int) -> Column:
        return Column(no_wrap=True, min_width=width)

    return _Progress(
        SpinnerColumn(table_column=fixed(1)),
        TextColumn("[bold]tfaccel[/bold]", table_column=fixed(7)),
        BarColumn(bar_width=30),
        MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=5, justify="right")),
        TimeElapsedColumn(table_column=fixed(7)),
        console=Console(stderr=True),
        transient=True,
    )
