"""Files: the one answer to "can I write here?" and the one atomic writer.

- :func:`check_writable_dir`: a directory that is, or can become, a place to write files in.
  The rule, for every caller: the nearest existing folder of the path must be a directory, and
  a new file must be creatable there, tried with an unnamed temporary file (this finds a
  read-only file system, /proc and /sys, and permissions, also for root, where ``os.access``
  says yes to everything). Nothing is left behind, not even a new modification time of the
  folder, unless ``create`` asks for the directory.
- :func:`check_writable_file`: the same, before any work, for a file :func:`write_atomic` will
  write.
- :func:`nearest_existing` and :func:`try_writing_in`: the two steps of that rule, for checks
  that word their own messages (:mod:`tfaccel.core.checks`).
- :func:`trailing_slash`: the one rule for a file path written with a trailing slash
  (``notes.txt/`` names a directory, but ``Path`` drops the slash), which every check of a
  file argument refuses; :func:`check_file_name` is that refusal for a file to write or read.
- :func:`write_atomic`: a reader sees the old file or the whole new one, never half of it; on
  any failure nothing is left behind.

An error names the path and the argument that gave it, as the caller spells it
(:func:`tfaccel.core.errors.argument`: ``--out`` on the command line, ``out=`` from Python).
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
import tempfile
from pathlib import Path

from tfaccel.core.errors import TfaccelError, UsageError, argument, shown

__all__ = [
    "check_file_name",
    "check_path",
    "check_writable_dir",
    "check_writable_file",
    "discard",
    "file_kind",
    "nearest_existing",
    "os_reason",
    "path_problem",
    "prepare_write",
    "remote_path",
    "stage",
    "trailing_slash",
    "try_writing_in",
    "write_atomic",
]


def remote_path(path: str) -> bool:
    """gs://, s3://, hdfs://...: TensorFlow's file systems, which only writing can check."""
    return "://" in path


_NAME_MAX = 255  # Linux's limits, where os.pathconf cannot say
_PATH_MAX = 4096


def _limit(path: Path, name: str, default: int) -> int:
    """``os.pathconf``'s limit ``name`` for the file system of ``path``'s nearest folder."""
    folder = path if path.is_absolute() else Path.cwd() / path
    while True:
        try:
            value = os.pathconf(folder, name)
            return value if value > 0 else default
        except (OSError, ValueError):
            if folder.parent == folder:
                return default
            folder = folder.parent


def path_problem(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """Why no file system call can take ``path``, or None when one can.

    Returns:
        ``(problem, received)``: the path is empty or blank, holds a NUL byte, has a name
        longer than NAME_MAX or is longer than PATH_MAX (both read from ``os.pathconf`` where
        it can say), or runs through a loop of symbolic links.
    """
    text = os.fspath(path)
    if not text.strip():
        return "is empty", repr(text)
    if "\0" in text:
        return "holds a NUL byte (\\x00)", f"a NUL byte at character {text.index(chr(0)) + 1}"
    target = Path(text).expanduser()
    name_max = _limit(target.parent, "PC_NAME_MAX", _NAME_MAX)
    for part in target.parts:
        if len(os.fsencode(part)) > name_max:
            return (
                f"has a name longer than this file system allows (NAME_MAX, {name_max} bytes)",
                f"a name of {len(os.fsencode(part)):,} bytes: {shown(part)}",
            )
    path_max = _limit(target.parent, "PC_PATH_MAX", _PATH_MAX)
    size = len(os.fsencode(str(target.absolute())))
    if size >= path_max:
        return (
            f"is longer than this system allows (PATH_MAX, {path_max} bytes)",
            f"a path of {size:,} bytes",
        )
    try:
        target.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "runs through a loop of symbolic links", f"{str(target)!r}: {os_reason(exc)}"
        if exc.errno == errno.ENAMETOOLONG:
            return "is too long for this file system", os_reason(exc)
    except ValueError as exc:
        return "cannot be used", os_reason(exc)
    return None


def check_path(
    path: str | os.PathLike[str],
    *,
    what: str,
    fix: str,
    error: type[TfaccelError] = UsageError,
) -> Path:
    """Refuse a path no file system call can take (see :func:`path_problem`), naming it.

    Args:
        path: the path a user gave (``~`` expanded).
        what: what the path is for ("the script", "the results database path").
        fix: what to do instead.
        error: the UsageError subclass to raise.

    Returns:
        ``path`` as a Path, ``~`` expanded.

    Raises:
        TfaccelError: (``error``, UsageError by default) the path is empty, holds a NUL byte,
            is too long, or loops.
    """
    found = path_problem(path)
    if found is not None:
        problem, received = found
        raise error(
            f"{what[:1].upper()}{what[1:]} {shown(os.fspath(path))} {problem}",
            expected="a path of at most NAME_MAX bytes a name and PATH_MAX in all, "
            "without NUL bytes or a loop of symbolic links",
            received=received,
            fix=fix,
        )
    return Path(path).expanduser()


def check_writable_dir(
    path: str | os.PathLike[str],
    *,
    what: str,
    argument_name: str,
    example: str,
    create: bool = False,
    error: type[UsageError] = UsageError,
) -> Path:
    """Check that ``path`` is, or can become, a directory to write files in.

    Args:
        path: the directory (``~`` expanded).
        what: what the directory is for, for the message ("the report directory").
        argument_name: the argument that gave it, named as the caller spells it.
        example: a directory to suggest in the fix.
        create: create the directory (and its parents) when the checks pass.
        error: the UsageError subclass to raise.

    Returns:
        ``path`` as a Path, ``~`` expanded.

    Raises:
        UsageError: (or ``error``) the path is empty, is a file or another non-directory, lies
            under one, or no file can be created in its nearest existing folder.
    """
    flag = argument(argument_name)
    fix = f"pass {flag} with another directory, e.g. {argument(argument_name, example)}"
    expected = "a directory that exists or can be created, and can be written"
    if not str(path).strip():
        raise error(
            f"{flag} was given an empty directory name",
            expected=f"{what}: {expected}",
            received=repr(str(path)),
            fix=fix,
        )
    target = Path(path).expanduser()

    def refuse(problem: str, received: str) -> UsageError:
        return error(
            f"{what.capitalize()} {str(target)!r} ({flag}) {problem}",
            expected=expected,
            received=received,
            fix=fix,
        )

    try:
        found = nearest_existing(target)
    except (OSError, ValueError) as exc:
        raise refuse("cannot be used", f"{str(target)!r}: {os_reason(exc)}") from None
    if found is None:
        raise refuse("has no existing folder above it", str(target))
    existing, info = found
    if not stat.S_ISDIR(info.st_mode):
        kind = file_kind(info.st_mode)
        where = "it is" if existing == target else f"{str(existing)!r} in its path is"
        raise refuse(f"is not a directory: {where} {kind}", f"{str(existing)!r}, {kind}")
    try:
        try_writing_in(existing)
        if create:
            target.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        raise refuse("is not writable", f"{str(existing)!r}: {os_reason(exc)}") from None
    return target


def nearest_existing(path: Path) -> tuple[Path, os.stat_result] | None:
    """``path`` or its nearest existing folder above it, with what ``stat`` says of it.

    Returns:
        None when nothing of the path exists, not even its root.

    Raises:
        OSError, ValueError: ``stat`` fails for another reason than a missing path (a
            permission, a name with a NUL byte).
    """
    existing = path
    while True:
        try:
            return existing, existing.stat()
        except (FileNotFoundError, NotADirectoryError):
            if existing.parent == existing:
                return None
            existing = existing.parent


def try_writing_in(
    directory: str | os.PathLike[str], *, prefix: str = ".tfaccel-write-test."
) -> None:
    """The test of "can a file be created here?": create a file in ``directory`` and drop it.

    The file is an unnamed one (``O_TMPFILE``) where the file system makes them: it never
    appears in the folder, so the folder's modification time stays as it was (a check that
    changes nothing). Elsewhere (/proc, /sys, file systems without ``O_TMPFILE``) a named
    temporary file is created and removed at once.

    Unlike ``os.access`` this finds a read-only file system, /proc and /sys, and permissions
    also for root.

    Raises:
        OSError, ValueError: the file could not be created (the reason is in the error).
    """
    unnamed = getattr(os, "O_TMPFILE", 0)
    if unnamed:
        try:
            fd = os.open(directory, unnamed | os.O_WRONLY, 0o600)
        except OSError as exc:
            if exc.errno not in _NO_TMPFILE:
                raise
        else:
            os.close(fd)
            return
    fd, probe = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    os.close(fd)
    os.unlink(probe)


# What open(O_TMPFILE) says where the file system has no unnamed files (EISDIR: older kernels).
_NO_TMPFILE = frozenset({errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL})


def check_writable_file(
    path: str | os.PathLike[str],
    *,
    argument_name: str = "path",
    replaces: tuple[bytes, str] | None = None,
) -> Path:
    """Check, before any work, that :func:`write_atomic` can write ``path``; create nothing.

    The path must not be a directory or a special file (a device, a FIFO), its directory must
    exist, and a file must be creatable in it (tried with a temporary file, removed at once:
    this also catches read-only file systems and directories such as /proc and /sys).

    Args:
        path: the file to be written.
        argument_name: the argument that gave the path, named in the message (through
            :func:`tfaccel.core.errors.argument`, so the CLI's flag when the CLI runs).
        replaces: ``(marker, what)``: an existing non-empty file is replaced only when its
            first MiB holds ``marker`` (what this writer writes, named ``what``): a user's
            file of another kind in the way is refused and left as it is.

    Returns:
        ``path`` as a Path.

    Raises:
        UsageError: the file cannot be written there, or (``replaces``) it exists and is not
            what this writer writes; the message names the path and why.
    """
    target = prepare_write(path, argument_name=argument_name)
    directory = target.parent if str(target.parent) else Path(".")
    if replaces is not None:
        _check_replaceable(target, argument_name, *replaces)
    try:
        try_writing_in(directory, prefix=f".{target.name}.")
    except (OSError, ValueError) as exc:
        raise _write_error(target, directory, argument_name, exc) from None
    return target


def write_atomic(
    path: str | os.PathLike[str],
    content: str | bytes,
    *,
    mode: int = 0o644,
    argument_name: str = "path",
) -> None:
    """Write ``content`` to ``path`` so that a reader sees the old file or the whole new one.

    Text is written as UTF-8. The file gets ``mode`` (mkstemp alone would leave it 0600,
    while a report or a snapshot is meant to be shared). On any failure nothing is left
    behind: the temporary file is removed and an existing file at ``path`` is untouched.

    Args:
        path: the file to write.
        content: its content.
        mode: its permission bits.
        argument_name: the argument that gave the path, named in an error (the CLI's flag
            when the CLI runs, through :func:`tfaccel.core.errors.argument`).

    Raises:
        UsageError: ``path`` is a directory (or ends with a slash) or a special file, its
            directory is missing, or the file cannot be written (permissions, a read-only
            file system, a full disk).
    """
    path = prepare_write(path, argument_name=argument_name)
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp: str | None = None
    try:
        tmp = stage(path, data, mode=mode)
        os.replace(tmp, path)
        tmp = None
    except (OSError, ValueError) as exc:
        raise _write_error(path, path.parent, argument_name, exc) from None
    finally:
        if tmp is not None:
            discard(tmp)


def prepare_write(path: str | os.PathLike[str], *, argument_name: str = "path") -> Path:
    """The checks :func:`write_atomic` makes before it writes ``path``, and the file it will
    replace (where a symbolic link leads). For a writer of several files that stages them
    all (:func:`stage`) before it renames any.

    Raises:
        UsageError: as :func:`write_atomic`, before anything is written.
    """
    check_file_name(path, argument_name=argument_name)
    target = _through_link(Path(path), argument_name)
    _check_target(target, argument_name)
    return target


def stage(path: Path, data: bytes, *, mode: int = 0o644) -> str:
    """``data`` in a new temporary file beside ``path`` (written, synced, given ``mode``):
    ``os.replace`` of it over ``path`` puts the whole file in place at once. Returns its
    name.

    Raises:
        OSError: it could not be written (a full disk); no temporary file is left then.
    """
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        discard(tmp)
        raise
    return tmp


def discard(name: str) -> None:
    """Remove the temporary file ``name`` if it is there (nothing said if it cannot be)."""
    try:
        os.unlink(name)
    except OSError:
        pass


def trailing_slash(path: str | os.PathLike[str]) -> str | None:
    """The file ``path`` would name without its trailing slash, when it ends with one.

    A file argument written with a trailing slash (``notes.txt/``) names a directory, while
    ``Path`` and ``os.path.abspath`` drop the slash: taken as given, the file ``notes.txt``
    would be read or replaced. Every check of a file argument refuses such a path through
    this, in its own words (:func:`check_file_name`,
    :func:`tfaccel.core.checks.check_file_argument`, :func:`tfaccel.store.check_store_path`,
    :func:`tfaccel.scripts.check_script`).
    The root (slashes only) is left to the checks for a directory.

    Returns:
        ``path`` without its trailing slashes; None when it has none (or is not text).
    """
    text = os.fspath(path)
    if isinstance(text, str) and text.endswith(os.sep) and text.rstrip(os.sep):
        return text.rstrip(os.sep)
    return None


def check_file_name(
    path: str | os.PathLike[str],
    *,
    argument_name: str = "path",
    reading: bool = False,
    error: type[TfaccelError] = UsageError,
) -> None:
    """Refuse a file path that ends with a slash (:func:`trailing_slash`), before the file it
    would name without the slash is replaced or, ``reading``, read.

    Args:
        path: the file's path, as given.
        argument_name: the argument that gave it, named as the caller spells it.
        reading: the file is to be read, not written.
        error: the error class raised (the reader's own: ``SnapshotError``, ``LogInputError``).

    Raises:
        UsageError (or ``error``): ``path`` is empty, or ends with a slash.
    """
    text = os.fspath(path)
    flag = argument(argument_name)
    if isinstance(text, str) and not text.strip():  # Path("") is ".", the working directory
        raise error(
            f"{flag} was given an empty file name",
            expected="the path of a file",
            received=repr(text),
            fix=f"e.g. {argument(argument_name, 'out.json')}",
        )
    file = trailing_slash(path)
    if file is None:
        return
    verb = "read" if reading else "write"
    fix = f"pass {argument(argument_name, file)} to {verb} that file"
    if not reading:
        inside = argument(argument_name, os.path.join(text, "FILE"))
        fix += f", or {inside} to write inside a directory"
    raise error(
        f"Cannot {verb} {text!r} ({_given(flag)}): the name ends with a slash, so it names "
        "a directory, not a file",
        expected="the path of a file, without a trailing slash",
        received=repr(text),
        fix=fix,
    )


def _check_replaceable(path: Path, argument_name: str, marker: bytes, what: str) -> None:
    """Refuse to replace an existing non-empty ``path`` whose first MiB lacks ``marker``."""
    try:
        with open(path, "rb") as fh:
            head, size = fh.read(2**20), os.fstat(fh.fileno()).st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _write_error(path, path.parent, argument_name, exc) from None
    if head and marker not in head:
        flag = argument(argument_name)
        raise UsageError(
            f"Cannot write {str(path)!r} ({_given(flag)}): a file is there that is not {what}",
            expected=f"a new file, or {what} to replace",
            received=f"an existing file of {size:,} bytes without {marker.decode()}",
            fix=f"pass {flag} with another path; the file there is left as it is",
        )


SYSTEM_FOLDERS = ("/dev/", "/proc/", "/sys/")
"""Where a symbolic link must not lead a file tfaccel writes: the file put in its place would
replace a device or a process's file descriptor (``/dev/stdout`` is a link to
``/proc/self/fd/1``)."""
MAX_LINK_HOPS = 40
"""Links followed before a chain is taken as a loop (Linux's own limit)."""


def _through_link(path: Path, argument_name: str) -> Path:
    """The file a write of ``path`` goes to: ``path``, or where it leads when it is a symbolic
    link (a write replaces the file the link names and keeps the link, as ``echo > link``
    does; replacing the link itself would leave its target stale).

    Raises:
        UsageError: the link leads into :data:`SYSTEM_FOLDERS` (``/dev/stdout``), or loops.
    """
    try:
        if not path.is_symlink():
            return path
    except (OSError, ValueError):  # a name too long, a NUL: the checks after say why
        return path
    flag = argument(argument_name)
    hops = [path]  # each link on the way, followed by hand: realpath hides /proc/self/fd/1
    try:
        while hops[-1].is_symlink() and len(hops) <= MAX_LINK_HOPS:
            hops.append(Path(os.path.abspath(hops[-1].parent / os.readlink(hops[-1]))))
        target = Path(os.path.realpath(path, strict=False))
    except (OSError, ValueError, RuntimeError) as exc:
        raise _write_error(path, path.parent, argument_name, exc) from None
    system = next((h for h in hops[1:] if (str(h) + os.sep).startswith(SYSTEM_FOLDERS)), None)
    if system is not None:
        raise UsageError(
            f"Cannot write {str(path)!r} ({_given(flag)}): it is a link to {str(system)!r}, "
            "not to a file of its own",
            expected="the path of a file, or a link to one (tfaccel writes a new file and "
            "renames it into place)",
            received=f"a link to {str(system)!r}",
            fix=f"pass {flag} with the path of a file (to see the output on the terminal, "
            "leave the option out)",
        )
    return target


def _check_target(path: Path, argument_name: str) -> Path:
    """The directory ``path`` will be written in, after the checks that need no writing."""
    directory = path.parent if str(path.parent) else Path(".")
    flag = argument(argument_name)
    try:
        info: os.stat_result | None = path.stat()
    except FileNotFoundError:
        info = None
    except NotADirectoryError:
        info = None  # a parent is a file: said below
    except (OSError, ValueError) as exc:
        raise _write_error(path, directory, argument_name, exc) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise UsageError(
            f"Cannot write {str(path)!r} ({_given(flag)}): it is a directory",
            expected="the path of a file (created or replaced)",
            received="an existing directory",
            fix=f"name a file inside it: {argument(argument_name, str(path / 'FILE'))}",
        )
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise UsageError(
            f"Cannot write {str(path)!r} ({_given(flag)}): it is not a regular file",
            expected="the path of a regular file (created or replaced)",
            received=file_kind(info.st_mode),
            fix=f"pass {flag} with the path of a file in a writable directory",
        )
    try:
        parent = directory.stat()
    except FileNotFoundError:
        raise UsageError(
            f"Cannot write {str(path)!r} ({_given(flag)}): the directory "
            f"{str(directory)!r} does not exist",
            expected="a file in an existing directory",
            received="no such directory",
            fix=f"create it first (mkdir -p {shlex.quote(str(directory))}), or pass {flag} "
            "with a path in an existing directory",
        ) from None
    except (OSError, ValueError) as exc:
        raise _write_error(path, directory, argument_name, exc) from None
    if not stat.S_ISDIR(parent.st_mode):
        raise UsageError(
            f"Cannot write {str(path)!r} ({_given(flag)}): {str(directory)!r} is not a directory",
            expected="a file in an existing directory",
            received=f"{str(directory)!r} is {file_kind(parent.st_mode)}",
            fix=f"pass {flag} with a path in an existing directory",
        )
    return directory


def _write_error(path: Path, directory: Path, argument_name: str, exc: Exception) -> UsageError:
    flag = argument(argument_name)
    return UsageError(
        f"Cannot write {str(path)!r} ({_given(flag)}): the directory {str(directory)!r} "
        "does not accept the file",
        expected="a path in a writable directory on a writable file system, with free space",
        received=os_reason(exc),
        fix=f"pass {flag} with a path in a writable directory, e.g. in your home directory",
    )


def _given(flag: str) -> str:
    return f"given with {flag}" if flag.startswith("-") else f"the argument {flag}"


def os_reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"


def file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISREG, "a regular file"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")
