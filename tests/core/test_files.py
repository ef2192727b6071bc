"""tfaccel.core.files: one rule for a file path written with a trailing slash, for every check
of a file argument (each words its own message)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from files_around import assert_unchanged, snapshot

from tfaccel.core.checks import check_file_argument
from tfaccel.core.errors import TfaccelError, UsageError
from tfaccel.core.files import check_writable_file, trailing_slash, write_atomic
from tfaccel.store import check_store_path


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("notes.txt/", "notes.txt"),
        ("notes.txt//", "notes.txt"),
        ("sub/new.json/", "sub/new.json"),
        ("notes.txt", None),
        ("/", None),  # the root: left to the checks for a directory
        ("", None),
    ],
)
def test_trailing_slash_names_the_file_without_it(name: str, file: str | None) -> None:
    assert trailing_slash(name) == file
    assert trailing_slash(Path(name)) is None  # a Path has already dropped it


def _refusals(path: str) -> dict[str, str]:
    """What each check of a file argument says of ``path`` ("" when it takes it)."""
    checks = {
        "check_file_argument": lambda: check_file_argument("cache", path, where="pipeline()"),
        "check_writable_file": lambda: check_writable_file(path, argument_name="out"),
        "write_atomic": lambda: write_atomic(path, "replaced\n", argument_name="out"),
        "check_store_path": lambda: check_store_path(path),
    }
    said = {}
    for name, check in checks.items():
        try:
            check()
        except TfaccelError as exc:
            said[name] = str(exc)
        else:
            said[name] = ""
    return said


@pytest.mark.parametrize("name", ["notes.txt/", "notes.txt//", "new.json/"])
def test_every_file_check_refuses_a_trailing_slash_and_changes_nothing(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # short names: a message shows them whole
    Path("notes.txt").write_text("mine\n")
    before = snapshot([tmp_path])
    said = _refusals(name)
    assert_unchanged(before, [tmp_path])
    assert Path("notes.txt").read_text() == "mine\n"
    file = trailing_slash(name)
    assert file is not None and not file.endswith("/")
    for check, message in said.items():
        assert f"{name!r}" in message and "ends with a slash" in message, (check, message)
        assert file in message.split("ends with a slash", 1)[1], (check, message)


def test_a_directory_given_with_a_slash_is_refused_as_a_directory(tmp_path: Path) -> None:
    path = str(tmp_path) + os.sep
    said = _refusals(path)
    for check in ("check_file_argument", "check_store_path"):
        assert "is a directory" in said[check], said[check]
    for check in ("check_writable_file", "write_atomic"):  # refused before it is looked at
        assert "ends with a slash" in said[check], said[check]


def test_a_write_through_a_link_replaces_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    """``echo > link`` writes the file the link names; so does a write of tfaccel's (renaming
    the new file over the link would turn it into a file and leave the target stale)."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "config.json"
    target.write_text("old\n")
    link = tmp_path / "config.json"
    link.symlink_to(Path("real") / "config.json")
    assert check_writable_file(link) == target
    write_atomic(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(Path("real") / "config.json")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["config.json"]


@pytest.mark.parametrize("through", ["/dev/stdout", "/proc/self/fd/1"])
def test_a_link_to_a_device_or_a_descriptor_is_refused_and_left_alone(
    tmp_path: Path, through: str
) -> None:
    """/dev/stdout is a link to /proc/self/fd/1, which names whatever stdout is: a write
    renamed over it would replace the system's link (as root) or the file stdout goes to."""
    link = tmp_path / "out.json"
    link.symlink_to(through)
    for write in (lambda: check_writable_file(link), lambda: write_atomic(link, "{}")):
        with pytest.raises(UsageError, match="not to a file of its own"):
            write()
    assert link.is_symlink() and os.readlink(link) == through
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
