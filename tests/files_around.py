"""What "a bad input changes nothing" means for the files around a call, in one place.

:func:`snapshot` records every entry under some folders (the scratch directory, the working
directory, a temporary ``HOME``, the results database's folder): its kind, and for a regular
file its size, modification time and SHA-256; for a folder its modification time (a file
created and removed again inside it still shows). Special files (FIFOs, sockets, devices) are
recorded by kind and modification time, never opened. :func:`changes` names what differs
between two snapshots, one line an entry, for the assertion message.

Both bad-input tables (tests/cli/test_bad_input.py, tests/test_bad_input_api.py) use it around
every row; the folders are small, so a row costs milliseconds.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

Entry = tuple[object, ...]
Snapshot = dict[str, Entry]


def _entry(path: Path, info: os.stat_result) -> Entry:
    mode = info.st_mode
    if stat.S_ISREG(mode):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return ("file", info.st_size, info.st_mtime_ns, digest)
    if stat.S_ISDIR(mode):
        return ("dir", info.st_mtime_ns)
    if stat.S_ISLNK(mode):
        return ("symlink", os.readlink(path))
    return (f"special {stat.S_IFMT(mode):o}", info.st_mtime_ns)


def snapshot(roots: Iterable[str | os.PathLike[str]]) -> Snapshot:
    """Every entry under each of ``roots`` (each root itself too), by absolute path.

    A root that does not exist is recorded as missing, so that creating it shows. Symbolic
    links are recorded, not followed. Folders this user cannot read are recorded as they are.
    """
    found: Snapshot = {}
    for root in roots:
        top = Path(root).absolute()
        try:
            info = top.lstat()
        except FileNotFoundError:
            found[str(top)] = ("missing",)
            continue
        found[str(top)] = _entry(top, info)
        if not stat.S_ISDIR(info.st_mode):
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                found[str(path)] = _entry(path, path.lstat())
    return found


def changes(before: Mapping[str, Entry], after: Mapping[str, Entry]) -> list[str]:
    """What differs, one line an entry: created, removed, or changed (old -> new)."""
    lines = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if old is None or old == ("missing",):
            lines.append(f"created: {path} {new}")
        elif new is None or new == ("missing",):
            lines.append(f"removed: {path} {old}")
        else:
            lines.append(f"changed: {path} {old} -> {new}")
    return lines


def assert_unchanged(before: Mapping[str, Entry], roots: Iterable[str | os.PathLike[str]]) -> None:
    """Fail, naming every change, if the files under ``roots`` differ from ``before``."""
    found = changes(before, snapshot(roots))
    assert not found, "files around the call changed:\n" + "\n".join(found)
