"""Check and regenerate the catalogue of TensorFlow's messages from source trees.

The catalogue (``src/tfaccel/diagnosis/log/catalogue.json``) lists messages TensorFlow, XLA, TSL
and Keras write, each as its format string (``{}`` where the code inserts a value, or the
``%s``/``%d`` of a printf-style call), with the cause id the doctor names for it (or ``benign``,
or null for a message no cause claims yet), the source file that writes it and a literal
``find`` that the message's first string literal contains.

Given source trees (directories of source files, e.g. a TensorFlow checkout, an XLA or TSL
checkout, an installed ``site-packages``), this finds each entry's log call in the file whose
path ends with the entry's ``source`` (any file when ``source`` names no file found there), reads
its format string by joining the string literals of the call and putting ``{}`` for each value
between them (C++ ``LOG(...) << ...``, ``absl::StrCat(...)``, ``errors::X(...)``; Python
``raise X(...)``, ``logging.x(...)``, ``warnings.warn(...)``, f-strings), and, in a compiled
library (``*.so*``), checks that each literal piece of the format is among its strings.

Usage:
    python benchmarks/catalogue_from_source.py LABEL=DIR [LABEL=DIR ...] [--write] [--json]

    LABEL names the tree in the entries' ``seen_in`` (``tensorflow-2.21.0``, ``tsl@2024-06-17``).
    Without --write it prints, per entry, what it found and where the catalogue's format differs
    from the source's; with --write it adds the labels to ``seen_in`` and, where an entry's
    ``format`` was transcribed from a log (``origin: "log"``) and the source has it, replaces it
    with the source's format and sets ``origin: "source"``.

Exit status 1 when a format read from source differs from the catalogue's ``source`` one.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "src" / "tfaccel" / "diagnosis" / "log" / "catalogue.json"
SOURCE_SUFFIXES = (".cc", ".h", ".cpp", ".py")
MAX_FILE_BYTES = 8 * 1024 * 1024

# Where a log call or an error's message starts (the last one before the literal is taken).
_START = re.compile(
    r"(?:\bLOG\(\w+\)|\bVLOG\(\d+\)|\bLOG_FIRST_N\(\w+, *\d+\)|\bLOG_EVERY_N\(\w+, *\d+\)"
    r"|\bLOG_IF\([^;]*?\)|\babsl::StrCat\(|\babsl::StrFormat\(|\bStrCat\(|\bstrings::Printf\("
    r"|\babsl::\w+Error\(|\b(?:tsl::|tensorflow::)?errors::\w+\(|\braise \w+\("
    r"|\blogging\.\w+\(|\bwarnings\.warn\(|^[ \t]*_?[A-Z][A-Z0-9_]* *= *\(?"
    r"|\b(?:const )?(?:auto|std::string|string) \w+ *=)",
    re.MULTILINE,
)
_C_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_PY_STRING = re.compile(
    r"""(?i)(?<![\w'"])([rfbu]{0,2})("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
)
_PRINTF = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcsrp]")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\"}


@dataclass
class Found:
    """A format string read from one file."""

    path: str
    format: str


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), text)


def _span(text: str, start: int, python: bool) -> str:
    """The call or statement at ``start``: to its closing parenthesis, a ``;`` or (a Python
    constant without parentheses) the end of the line."""
    head = _START.match(text, start)
    i = head.end() if head else start
    depth = 1 if head and head.group(0).endswith("(") else 0
    call = depth == 1
    quote = ""
    while i < len(text) and i - start < 4000:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch == '"' or (python and ch == "'"):
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if call and depth == 0:
                return text[start : i + 1]
        elif ch == ";" and depth <= 0 and not python:
            return text[start:i]
        elif ch == "\n" and python and depth <= 0 and not call:
            return text[start:i]
        i += 1
    return text[start:i]


def format_of(call: str, python: bool) -> str:
    """Join a call's string literals, with ``{}`` for each value between them."""
    head = _START.match(call)
    body = call[head.end() :] if head else call
    if re.match(r"\s*(?:LOG|VLOG|LOG_FIRST_N|LOG_EVERY_N|LOG_IF)\(", call):
        body = re.sub(r"^[^<]*", "", body, count=1)
    pattern = _PY_STRING if python else _C_STRING
    pieces: list[str] = []
    last = 0
    printf = False
    # literals inside a nested call (absl::StrFormat("%d.%d", ...) in a LOG chain) are values
    literals = [m for m in pattern.finditer(body) if _depth_at(body, m.start(), python) == 0]
    for n, match in enumerate(literals):
        gap = body[last : match.start()]
        if pieces and python and re.search(r"%|\.format\(", gap):
            break  # the values of a %- or .format() string, not more of its text
        if pieces and _is_value(gap, python):
            pieces.append("{}")
        if python:
            prefix, quoted = match.group(1).lower(), match.group(2)
            literal = quoted[1:-1]
            if "f" in prefix:
                literal = re.sub(r"\{[^{}]*\}", "{}", literal)
            if "r" not in prefix:
                literal = unescape(literal)
        else:
            literal = unescape(match.group(1))
        printf = printf or bool(_PRINTF.search(literal))
        pieces.append(literal)
        last = match.end()
        if n == len(literals) - 1:
            tail = body[last:]
            if head is not None and head.group(0).endswith("("):
                tail = tail[: tail.rfind(")")] if ")" in tail else tail
            if (
                not printf
                and not re.match(r"\s*(?:\.format\(|%)", tail)
                and _is_value(tail, python)
            ):
                pieces.append("{}")
    return "".join(pieces)


def _depth_at(body: str, position: int, python: bool) -> int:
    """How many parentheses are open at ``position`` of ``body`` (string literals skipped)."""
    depth = 0
    quote = ""
    i = 0
    while i < position:
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch == '"' or (python and ch == "'"):
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        i += 1
    return depth


def _is_value(gap: str, python: bool = False) -> bool:
    """Whether the code between two literals inserts a value (not just ``<<``, ``,``, ``+``).

    In Python only ``+`` joins a value to the text: what follows a ``,`` is another argument
    (``stacklevel=2``, a warning category).
    """
    if python:
        gap = gap.split(",", 1)[0]
        return "+" in gap and bool(re.sub(r"[+()\s]|\\\n", "", gap))
    stripped = re.sub(r"<<|[,+()\s]|\\\n", "", gap)
    return bool(stripped)


def find_in_source(text: str, find: str, python: bool) -> list[str]:
    """The format strings of the log calls whose literals contain ``find``."""
    formats: list[str] = []
    for match in re.finditer(re.escape(find), text):
        starts = [m for m in _START.finditer(text, max(0, match.start() - 1500), match.start())]
        # the innermost call or statement that reaches past the literal (a LOG chain holds an
        # absl::StrFormat(...) of its own)
        spans = [(m.start(), _span(text, m.start(), python)) for m in reversed(starts)]
        spans = [(start, call) for start, call in spans if start + len(call) > match.end()]
        if not spans:
            continue
        _start, call = spans[0]
        fmt = format_of(call, python)
        if find in fmt and fmt not in formats:
            formats.append(fmt)
    return formats


def _binary_has(data: mmap.mmap | bytes, fmt: str) -> bool:
    """Whether every literal piece (8 characters or more) of ``fmt`` is in a library's bytes."""
    # a value's place, a line break or a sentence's end may part two strings in the library
    parts = r"\{\}|%[-+ #0]*\d*(?:\.\d+)?[a-z]+|\n|(?<=\.) "
    pieces = [p for p in re.split(parts, fmt) if len(p) >= 8]
    return bool(pieces) and all(data.find(p.encode()) >= 0 for p in pieces)


def _is_library(path: Path) -> bool:
    return ".so" in path.name and (path.name.startswith("lib") or "pywrap" in path.name)


def scan(trees: dict[str, Path], entries: list[dict]) -> dict[int, dict[str, list[Found]]]:
    """Per entry index, per tree label, what was found."""
    files: dict[str, list[Path]] = {}
    for label, root in trees.items():
        found_files: list[Path] = []
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                if name.endswith(SOURCE_SUFFIXES) or ".so" in name:
                    found_files.append(Path(dirpath) / name)
        files[label] = found_files
    results: dict[int, dict[str, list[Found]]] = {}
    libraries: dict[str, list[tuple[Path, mmap.mmap]]] = {}
    for label, paths in files.items():
        for path in paths:
            if _is_library(path):
                try:
                    with path.open("rb") as fh:
                        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError):
                    continue
                libraries.setdefault(label, []).append((path, mapped))
    for index, entry in enumerate(entries):
        for label, paths in files.items():
            source = entry.get("source") or ""
            named = [p for p in paths if source and str(p).endswith(source)]
            base = [p for p in paths if source and p.name == Path(source).name]
            for path in named or base:
                if not path.name.endswith(SOURCE_SUFFIXES):
                    continue
                try:
                    if path.stat().st_size > MAX_FILE_BYTES:
                        continue
                    text = path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                for fmt in find_in_source(text, entry["find"], path.suffix == ".py"):
                    results.setdefault(index, {}).setdefault(label, []).append(
                        Found(str(path), fmt)
                    )
            if label in results.get(index, {}):
                continue
            for path, mapped in libraries.get(label, []):
                if _binary_has(mapped, entry["format"]):
                    found = Found(str(path), entry["format"])
                    results.setdefault(index, {}).setdefault(label, []).append(found)
                    break
    return results


CORPUS = ROOT / "tests" / "data" / "doctor-corpus"


def corpus_versions(entries: list[dict]) -> dict[int, list[str]]:
    """Per entry index, the TensorFlow versions of the corpus logs that hold its message
    (every literal piece of 8 characters or more, on one line)."""
    logs: list[tuple[str, str]] = []
    for index in sorted(CORPUS.glob("index-*.jsonl")):
        for line in index.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                path = CORPUS / item["file"]
                if item.get("tf_version") and path.is_file():
                    text = path.read_text(encoding="utf-8", errors="replace")
                    logs.append((str(item["tf_version"]), text))
    out: dict[int, list[str]] = {}
    for i, entry in enumerate(entries):
        first = re.split(r"\{\}|%[-+ #0]*\d*(?:\.\d+)?[a-z]+|\n", entry["format"])
        pieces = [p for p in first if len(p) >= 8][:2] or [entry["find"]]
        versions = {v for v, text in logs if all(p in text for p in pieces)}
        if versions:
            out[i] = sorted(versions)
    return out


def matches(entry_format: str, found: str) -> bool:
    """The source's format is the entry's, or (a constant's text) a start of it."""
    return found == entry_format or (len(found) > 20 and entry_format.startswith(found))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", help="LABEL=DIR: a source tree and its label")
    parser.add_argument("--catalogue", default=str(CATALOGUE))
    parser.add_argument("--write", action="store_true", help="update seen_in and formats")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    trees: dict[str, Path] = {}
    for item in args.trees:
        label, sep, directory = item.partition("=")
        if not sep:
            label, directory = Path(item).name, item
        if not Path(directory).is_dir():
            parser.error(f"{directory!r} is not a directory")
        trees[label] = Path(directory)
    path = Path(args.catalogue)
    catalogue = json.loads(path.read_text(encoding="utf-8"))
    entries = catalogue["messages"]
    results = scan(trees, entries)
    differs = 0
    report = []
    for index, entry in enumerate(entries):
        per_tree = results.get(index, {})
        line = {"id": entry["id"], "found_in": {}, "differs": []}
        for label, founds in per_tree.items():
            same = [f for f in founds if matches(entry["format"], f.format)]
            line["found_in"][label] = sorted({Path(f.path).name for f in founds})
            if same:
                if args.write and label not in entry.setdefault("seen_in", []):
                    entry["seen_in"].append(label)
                if args.write:
                    entry["origin"] = "source"
            else:
                line["differs"] += [f.format for f in founds]
                if args.write and entry.get("origin") == "log" and len(founds) == 1:
                    entry["format"], entry["origin"] = founds[0].format, "source"
                    entry.setdefault("seen_in", []).append(label)
                elif entry.get("origin") == "source":
                    differs += 1
        report.append(line)
    if args.write:
        for i, versions in corpus_versions(entries).items():
            entries[i]["corpus_tf_versions"] = versions
        path.write_text(
            json.dumps(catalogue, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for line in report:
            where = "; ".join(f"{k}: {', '.join(v)}" for k, v in line["found_in"].items())
            print(f"{line['id']:<44} {where or '-'}")
            for fmt in line["differs"]:
                print(f"    source has: {fmt!r}")
    found = sum(1 for line in report if line["found_in"])
    print(f"{found} of {len(entries)} messages found in {len(trees)} trees", file=sys.stderr)
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
