"""Read a TensorFlow log for the matcher: a file, or standard input with ``-``.

Inputs over 32 MiB are read in their first 8 MiB and last 24 MiB only (a very long string given
to the matcher is cut the same way, by :func:`window_text`), and the notes say so. Undecodable
bytes are replaced; binary, empty and unreadable inputs are refused with a
:class:`~tfaccel.core.errors.LogInputError` that says how to save a log.

A stream (standard input, a pipe, a FIFO, a device) is read for at most 1 GiB and 60 seconds,
so an endless one (``/dev/zero``, ``yes``) or a silent one is answered in bounded time (a FIFO
that no program opens for writing within 2 seconds is refused); its first 64 KiB decide whether
it is text before the rest is read.

Example:
    >>> log = read_log_file("train.log")  # doctest: +SKIP
    >>> log.partial, log.notes  # doctest: +SKIP
    (False, [])
"""

from __future__ import annotations

import errno
import os
import select
import shlex
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from tfaccel.core.errors import LogInputError
from tfaccel.core.files import check_file_name

__all__ = ["LogText", "count_lines", "detect_encoding", "read_log_file", "window_text"]

MIB = 1024 * 1024
FULL_SCAN_LIMIT_BYTES = 32 * MIB  # larger inputs: only the head and the tail are scanned
HEAD_BYTES = 8 * MIB
TAIL_BYTES = 24 * MIB
SNIFF_BYTES = 64 * 1024  # looked at to tell text from binary
UNDECODABLE_LIMIT = 0.3  # share of replacement characters above which the input is not text
STREAM_LIMIT_BYTES = 1024 * MIB  # a stream is read up to this much...
STREAM_TIME_LIMIT_S = 60.0  # ... and for this long
FIFO_WRITER_WAIT_S = 2.0  # a named pipe with no writer is refused after this wait

_HOW_TO_SAVE = (
    "save TensorFlow's output with `python train.py 2>&1 | tee tf.log`, "
    "then run `tfaccel doctor --log tf.log`"
)


@dataclass
class LogText:
    """A log read by :func:`read_log_file`: its text (possibly only head and tail) and notes."""

    text: str
    source: str
    size_bytes: int
    bytes_scanned: int
    notes: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """True when part of the input was skipped."""
        return self.bytes_scanned < self.size_bytes


def window_text(text: str) -> tuple[str, list[str]]:
    """Keep the head and tail of a very long string, as :func:`read_log_file` does for files.

    Returns:
        The text to scan (the first 8 Mi and last 24 Mi characters of a text over 32 Mi) and
        the notes that say what was skipped.
    """
    if len(text) <= FULL_SCAN_LIMIT_BYTES:
        return text, []
    tail = _drop_partial_first_line(text[-TAIL_BYTES:])
    skipped = len(text) - HEAD_BYTES - TAIL_BYTES
    note = (
        f"the text is {len(text):,} characters: scanned the first 8 Mi and the last 24 Mi "
        f"({skipped:,} in between skipped)"
    )
    return text[:HEAD_BYTES] + f"\n[... {skipped:,} characters skipped ...]\n" + tail, [note]


def count_lines(text: str) -> int:
    """The number of lines in ``text`` (a last line without a newline counts)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


@dataclass
class _Raw:
    """Bytes read from a file or stream: all of it, or its head and tail."""

    head: bytes
    tail: bytes = b""
    tail_offset: int = 0
    size: int = 0
    stopped: str | None = None  # why a stream was not read to its end

    @property
    def skipped(self) -> int:
        return self.size - len(self.head) - len(self.tail)


def read_log_file(path: str | os.PathLike[str]) -> LogText:
    """Read a log for :func:`~tfaccel.diagnosis.match_log`; ``-`` reads standard input.

    The text is decoded as UTF-8 (undecodable bytes replaced; UTF-16 with a byte-order mark,
    as PowerShell writes, is decoded as such). Inputs over 32 MiB are read in their first
    8 MiB and last 24 MiB only, and the notes say so.

    Args:
        path: the log file, or ``-`` for standard input.

    Returns:
        A :class:`LogText`.

    Raises:
        LogInputError: the file is missing, a directory, unreadable, empty or binary.

    Example:
        >>> log = read_log_file("train.log")  # doctest: +SKIP
        >>> match_log(log).summary  # doctest: +SKIP
    """
    name = os.fspath(path)
    if name == "-":
        return _decode(_read_stdin(), "<stdin>")
    # a read would find the file it names without the slash
    check_file_name(name, reading=True, error=LogInputError)
    return _decode(_read_path(name), name)


def _read_stdin() -> _Raw:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise _input_error("<stdin>", "cannot be read", "no standard input")
    try:
        fd: int | None = stream.fileno()
    except (OSError, ValueError, AttributeError):
        fd = None  # an in-memory stream: finite, read as it is
    try:
        if fd is None:
            return _collect(_file_reader(stream), "<stdin>")
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_size > 0:
            with os.fdopen(os.dup(fd), "rb") as fh:
                return _read_regular(fh, info.st_size)
        return _collect(_fd_reader(fd, blocking=True), "<stdin>")
    except OSError as exc:
        raise _input_error("<stdin>", "cannot be read", str(exc)) from None


def _read_path(name: str) -> _Raw:
    try:
        info = os.stat(name)
    except FileNotFoundError:
        raise _input_error(name, "does not exist", "no such file") from None
    except (OSError, ValueError) as exc:
        raise _unreadable(name, exc) from None
    if stat.S_ISDIR(info.st_mode):
        raise _input_error(name, "is a directory", "a directory")
    if stat.S_ISREG(info.st_mode) and info.st_size > 0:
        try:
            with open(name, "rb") as fh:
                return _read_regular(fh, info.st_size)
        except OSError as exc:
            raise _unreadable(name, exc) from None
    # A FIFO, a device, a socket, or a file whose size is not known (/proc): opened without
    # waiting for a writer, then read within the stream limits.
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _unreadable(name, exc) from None
    try:
        reader = _fd_reader(fd, blocking=False, fifo=stat.S_ISFIFO(info.st_mode))
        return _collect(reader, name, kind=_kind(info.st_mode))
    except OSError as exc:
        raise _unreadable(name, exc) from None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a file"


def _read_regular(fh: IO[bytes], size: int) -> _Raw:
    """Read a whole small file, or seek to read only the head and tail of a big one."""
    if size <= FULL_SCAN_LIMIT_BYTES:
        data = fh.read(FULL_SCAN_LIMIT_BYTES)
        return _Raw(data, size=len(data))
    head = fh.read(HEAD_BYTES)
    fh.seek(size - TAIL_BYTES)
    tail = fh.read(TAIL_BYTES)
    return _Raw(head, tail, size - TAIL_BYTES, size)


# A reader returns up to n bytes: b"" at the end, None when the time limit passed first.
_Reader = Callable[[int], "bytes | None"]


def _file_reader(fh: IO[bytes]) -> _Reader:
    return fh.read


def _fd_reader(fd: int, *, blocking: bool, fifo: bool = False) -> _Reader:
    """Read ``fd`` until ``STREAM_TIME_LIMIT_S`` has passed, waiting for data with poll().

    Args:
        fd: the descriptor.
        blocking: the descriptor is shared (standard input), so it is not switched to
            non-blocking mode; a read follows only when poll() says data (or the end) is there.
        fifo: a named pipe opened without waiting for a writer: its end before any writer
            came means "no writer yet", so a writer is waited for ``FIFO_WRITER_WAIT_S``.
    """
    started = time.monotonic()
    deadline = started + STREAM_TIME_LIMIT_S
    poller = select.poll() if hasattr(select, "poll") else None
    if poller is not None:
        poller.register(fd, select.POLLIN | select.POLLPRI)
    writer_seen = not fifo

    def read(n: int) -> bytes | None:
        nonlocal writer_seen
        while True:
            now = time.monotonic()
            if now >= deadline:
                return None
            if not blocking:
                try:
                    data = os.read(fd, n)
                except BlockingIOError:
                    writer_seen = True  # a writer is there, with nothing to say yet
                else:
                    if data or writer_seen or now - started >= FIFO_WRITER_WAIT_S:
                        writer_seen = writer_seen or bool(data)
                        return data
            if poller is None:
                return os.read(fd, n)  # no poll() here: a plain read
            wait_s = min(deadline - now, 1.0 if writer_seen else 0.05)
            if poller.poll(max(1, int(wait_s * 1000))) and blocking:
                return os.read(fd, n)

    return read


def _collect(read: _Reader, source: str, *, kind: str = "a stream") -> _Raw:
    """Read a stream: all of it up to 32 MiB, else its head and a rolling tail, within the
    stream limits; refuse binary data as soon as its first 64 KiB are in."""
    first = bytearray()
    tail = bytearray()
    total = 0
    sniffed = False
    stopped: str | None = None
    while True:
        chunk = read(MIB)
        if chunk is None:
            stopped = f"it was still open after {STREAM_TIME_LIMIT_S:g} s"
            break
        if not chunk:
            break
        total += len(chunk)
        room = FULL_SCAN_LIMIT_BYTES - len(first)
        first += chunk[:room]
        tail += chunk[room:]
        if len(tail) > 2 * TAIL_BYTES:
            del tail[: len(tail) - TAIL_BYTES]
        if not sniffed and len(first) >= SNIFF_BYTES:
            _refuse_binary(bytes(first[:SNIFF_BYTES]), source)
            sniffed = True
        if total >= STREAM_LIMIT_BYTES:
            stopped = f"it did not end within {STREAM_LIMIT_BYTES // MIB:,} MiB"
            break
    if total == 0:
        if stopped is not None:
            raise _input_error(
                source,
                "gave no data",
                f"{kind} with no data within {STREAM_TIME_LIMIT_S:g} s (no program writes to it?)",
            )
        if kind == "a named pipe (FIFO)":
            raise _input_error(
                source,
                "gave no data",
                f"{kind} that no program wrote to within {FIFO_WRITER_WAIT_S:g} s",
            )
        if kind != "a stream":
            raise _input_error(source, "is empty", f"{kind} that gave no data")
    if total <= FULL_SCAN_LIMIT_BYTES:
        return _Raw(bytes(first), size=total, stopped=stopped)
    # The tail continues from byte FULL_SCAN_LIMIT_BYTES; the head keeps the first 8 MiB.
    rest = bytes(first[HEAD_BYTES:]) + bytes(tail)
    kept = rest[-TAIL_BYTES:]
    return _Raw(bytes(first[:HEAD_BYTES]), kept, total - len(kept), total, stopped)


def _refuse_binary(sniff: bytes, source: str) -> None:
    """Refuse data that is not text: NUL bytes (in UTF-8) or mostly undecodable bytes."""
    encoding = detect_encoding(sniff)
    if encoding == "utf-8" and b"\x00" in sniff:
        raise _input_error(source, "is binary", "binary data (NUL bytes in the first 64 KiB)")
    sample = sniff.decode(encoding, errors="replace")
    bad = sample.count("\ufffd") / max(len(sample), 1)
    if bad > UNDECODABLE_LIMIT:
        raise _input_error(
            source, "is not text", f"bytes that are mostly not UTF-8 text ({bad:.0%} undecodable)"
        )


def _decode(raw: _Raw, source: str) -> LogText:
    if raw.size == 0:
        raise _input_error(source, "is empty", "an empty file (0 bytes)")
    encoding = detect_encoding(raw.head)
    _refuse_binary(raw.head[:SNIFF_BYTES], source)
    text = raw.head.decode(encoding, errors="replace")
    notes = [_encoding_note(encoding)] if encoding != "utf-8" else []
    if raw.stopped is not None:
        notes.append(
            f"stopped reading {source} after {raw.size:,} bytes: {raw.stopped}; "
            "the rest was not read"
        )
    if raw.tail:
        head_lines = count_lines(text)
        tail = _tail_bytes(raw, encoding).decode(_tail_encoding(encoding), errors="replace")
        text = _join_head_tail(text, tail, raw.skipped)
        if raw.skipped > 0:
            notes.append(_partial_note(source, raw, head_lines))
    if not text.strip():
        raise _input_error(source, "holds only whitespace", f"{raw.size} bytes of whitespace")
    return LogText(text, source, raw.size, len(raw.head) + len(raw.tail), notes)


UTF16_ZERO_SHARE = 0.3  # UTF-16 text without a byte-order mark: zero bytes in one column


def detect_encoding(head: bytes) -> str:
    """``utf-16`` / ``utf-8-sig`` after a byte-order mark; ``utf-16-le`` / ``utf-16-be`` for
    UTF-16 without one (mostly ASCII text has a zero byte in every other position); else
    ``utf-8``."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    sample = head[:4096]
    if len(sample) >= 4 and b"\x00" in sample:
        half = len(sample) // 2
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        if odd >= UTF16_ZERO_SHARE * half and even <= 0.02 * half:
            return "utf-16-le"
        if even >= UTF16_ZERO_SHARE * half and odd <= 0.02 * half:
            return "utf-16-be"
    return "utf-8"


def _encoding_note(encoding: str) -> str:
    if encoding in ("utf-16-le", "utf-16-be"):
        return f"decoded as {encoding} (no byte-order mark; told by its zero bytes)"
    return f"decoded as {encoding} (byte-order mark)"


def _tail_bytes(raw: _Raw, encoding: str) -> bytes:
    """UTF-16 code units are two bytes: start the tail on an even offset."""
    if encoding.startswith("utf-16") and raw.tail_offset % 2:
        return raw.tail[1:]
    return raw.tail


def _tail_encoding(encoding: str) -> str:
    """The tail has no byte-order mark of its own."""
    if encoding == "utf-16":
        return "utf-16-le"  # PowerShell and Windows tools write little-endian
    if encoding.startswith("utf-16"):
        return encoding
    return "utf-8"


def _join_head_tail(head: str, tail: str, skipped: int) -> str:
    if skipped <= 0:
        return head + tail
    return head + f"\n[... {skipped:,} bytes skipped ...]\n" + _drop_partial_first_line(tail)


def _drop_partial_first_line(tail: str) -> str:
    newline = tail.find("\n")
    return tail[newline + 1 :] if newline != -1 else tail


def _partial_note(source: str, raw: _Raw, head_lines: int) -> str:
    return (
        f"{source} is {raw.size / MIB:.1f} MiB: scanned the first {len(raw.head) / MIB:.0f} MiB "
        f"and the last {len(raw.tail) / MIB:.0f} MiB ({raw.skipped / MIB:.1f} MiB in between "
        f"skipped); line numbers after line {head_lines} count lines of the scanned text, "
        "not of the file"
    )


def _input_error(source: str, what: str, received: str) -> LogInputError:
    label = "Standard input" if source == "<stdin>" else f"The log file {source!r}"
    return LogInputError(
        f"{label} {what}",
        expected="a text file with TensorFlow's output (its stderr) or a Python traceback",
        received=received,
        fix=_HOW_TO_SAVE,
    )


def _unreadable(name: str, exc: OSError | ValueError) -> LogInputError:
    quoted = shlex.quote(name)
    if isinstance(exc, OSError) and exc.errno in (errno.ELOOP, errno.ENAMETOOLONG, errno.ENOTDIR):
        fix = f"pass the log's own path (`ls -l {quoted}` shows where the name leads)"
    else:
        fix = f"chmod u+r {quoted}, or pipe it in: sudo cat {quoted} | tfaccel doctor --log -"
    return LogInputError(
        f"The log file {name!r} cannot be read",
        expected="a file this user may read",
        received=getattr(exc, "strerror", None) or str(exc),
        fix=fix,
    )
