"""Reading README.md and docs/*.md: their fenced blocks and the shell commands in them, and
the types that say how each one runs.

- ``read_blocks``/``all_blocks`` give the fenced blocks (``Block``), ``read_commands`` the
  commands of a shell block (``Command``).
- ``Py`` says how one ```python block runs, ``Cheap`` what runs for a documented command;
  ``Ran`` is one command that ran and ``Check`` a check on the commands' directory and runs.

tests/docs_variants.py holds the table of what each block needs, made of these types, and
tests/test_docs.py the machinery that runs them; both import this module, which imports
neither. A new kind of block or a new field of an entry goes here; a new entry goes in
tests/docs_variants.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


# ---------------------------------------------------------------------------------------------
# Reading the documents


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository
    line: int  # the line of its first code line
    lang: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Command:
    path: str
    line: int
    first: str  # its first line as written, without a `$ ` prompt, a comment or a `\`
    text: str  # the whole command, continuation lines joined
    block: Block
    output: str = ""  # the output documented under it (blocks with `$ ` prompts)

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_synopsis(self) -> bool:
        """A usage line (``tfaccel run [--memory M] SCRIPT [ARGS...]``), not a command."""
        return bool(re.search(r"\[|\.\.\.|(^|\s)[A-Z][A-Z_]*[A-Z](\s|$|\|)", self.text))


FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
SHELL_LANGS = {"", "bash", "sh", "shell", "console", "text"}
PROGRAMS = {
    "tfaccel",
    "python",
    "python3",
    "make",
    "pip",
    ".venv/bin/pip",
    "export",
    "srun",
    "sbatch",
    "cd",
}


def read_blocks(path: str, text: str | None = None) -> list[Block]:
    """The fenced blocks of a document (``text``, or the file ``path`` of the repository)."""
    lines = (ROOT / path).read_text().splitlines() if text is None else text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, lang = match.groups()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : j]
        ]
        blocks.append(Block(path, i + 2, lang.lower(), "\n".join(body)))
        i = j + 1
    return blocks


def _strip_comment(line: str) -> str:
    return re.sub(r"(^|\s)#.*$", "", line).rstrip()


def _join(parts: list[str]) -> str:
    return " ".join(p.strip().removesuffix("\\").strip() for p in parts)


def read_commands(block: Block) -> tuple[list[Command], list[str]]:
    """The commands of a shell or untagged block, and the lines that are neither a command nor
    part of one (a block with commands and such lines needs a look)."""
    lines = block.text.splitlines()
    prompted = any(line.startswith("$ ") for line in lines)
    found: list[tuple[int, list[str], list[str]]] = []  # (line, command lines, output lines)
    stray: list[str] = []
    for n, raw in enumerate(lines):
        current = found[-1] if found else None
        if prompted:
            if raw.startswith("$ "):
                found.append((block.line + n, [raw[2:]], []))
            elif current and not current[2] and current[1][-1].rstrip().endswith("\\"):
                current[1].append(raw)
            elif current:
                current[2].append(raw)
            continue
        line = _strip_comment(raw)
        if not line.strip():
            continue
        continues = current is not None and current[1][-1].rstrip().endswith("\\")
        if raw[0].isspace() or continues:
            if current is None:
                stray.append(raw)
            else:
                current[1].append(line)
            continue
        word = line.split()[0]
        if word in PROGRAMS or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", word):
            found.append((block.line + n, [line], []))
        else:
            stray.append(raw)
    commands = [
        Command(
            block.path,
            line,
            _strip_comment(parts[0]).removesuffix("\\").strip(),
            _join([_strip_comment(p) for p in parts]),
            block,
            "\n".join(output),
        )
        for line, parts, output in found
    ]
    return commands, stray


def all_blocks() -> list[Block]:
    return [block for path in DOCS for block in read_blocks(path)]


# ---------------------------------------------------------------------------------------------
# How a block or a command runs


@dataclass(frozen=True)
class Py:
    """How one ```python block runs."""

    path: str
    marker: str  # text that only this block of the document contains
    process: str  # blocks of one process share an interpreter, in the order of PY_BLOCKS
    prelude: str = ""
    check: str = ""  # runs after the block, in its namespace
    wrap: str = ""  # the block is an excerpt: the body of this function
    cheap: tuple[tuple[str, str], ...] = ()  # (documented text, what runs instead)
    reason: str = ""  # why it is wrapped or cheapened


@dataclass
class Ran:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


Check = Callable[[Path, list[Ran]], None]


@dataclass(frozen=True)
class Cheap:
    """What runs for a documented command: shell lines, in order, in one fresh directory."""

    run: tuple[str, ...]
    reason: str
    files: tuple[tuple[str, str], ...] = ()  # (name, content) written first
    check: Check | None = None
    exit_codes: tuple[int, ...] = (0,)
    # A session fixture (tests/conftest.py) that already ran this command's equivalent for
    # other tests: nothing runs here, and ``check`` reads the folder the fixture returns.
    reuse: str | None = None


def py_matches(block: Block, entry: Py) -> bool:
    return block.path == entry.path and entry.marker in block.text
