"""What a pasted log shows besides TensorFlow's messages: platform, versions, packages, results.

People paste more than TensorFlow's stderr: a Python banner (``... on win32``), an interactive
transcript whose evidence is a printed value (``>>> tf.test.is_built_with_cuda()`` then
``False``), ``pip list`` or ``conda list`` output that names the installed build
(``tensorflow-cpu``, a ``cuda120py311...`` or ``mkl_py39...`` conda build string), an
``LD_LIBRARY_PATH``. :func:`read_facts` collects these as :class:`Fact` s, each with the line
that showed it; :mod:`tfaccel.diagnosis.log.infer` draws the causes they imply.

Example:
    >>> facts = read_facts(">>> import tensorflow as tf\\n>>> tf.test.is_built_with_cuda()\\nFalse")
    >>> [(f.kind, f.value, f.line) for f in facts.facts]
    [('built_with_cuda', 'False', 3)]
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass, field

__all__ = ["Fact", "LogFacts", "package_kind", "read_facts"]

FACT_SCAN_CHARS = 2 * 1024 * 1024  # a longer text is read for facts in its head and tail only
MAX_OUTPUT_LINES = 60  # lines after a prompt searched for the value it printed

# Python and IPython prompts, and a shell line that runs Python code: python -c "...".
_PROMPT_RE = re.compile(
    r"^\s*(?:>>>|In ?\[\d*\]:|.*\bpython[\d.]*(?:\.exe)?\s+-c\s)\s?(?P<code>.*)$"
)
# A value a prompt printed: [], False, 0, '2.10.0', [PhysicalDevice(...)].
_VALUE_RE = re.compile(
    r"^\s*(?:Out\[\d+\]:\s*)?(?P<value>\[\]|\[PhysicalDevice.*|\[LogicalDevice.*|True|False|"
    r"\d+|'[^']*'|\"[^\"]*\"|v?\d+\.\d+[\w.+-]*)\s*$"
)
_EXPRESSIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("built_with_cuda", re.compile(r"is_built_with_cuda\(\s*\)")),
    ("gpu_available", re.compile(r"is_gpu_available\(")),
    (
        "gpu_list",
        re.compile(r"list_(?:physical|logical)_devices\(\s*(?:device_type\s*=\s*)?['\"]GPU['\"]"),
    ),
    ("gpu_list", re.compile(r"get_visible_devices\(\s*['\"]GPU['\"]")),
    ("tf_version", re.compile(r"\btf\.(?:__version__|version\.VERSION)\b")),
)

# Lines a script printed, not a prompt: the TensorFlow guide's check and its variants.
_PRINTED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("gpu_count", re.compile(r"Num(?:ber of)? GPUs?(?: Available)?\s*:\s*(?P<v>\d+)", re.I)),
    (
        "gpu_available",
        re.compile(r"\bGPUs? (?:is )?available\s*[:?=]\s*(?P<v>True|False|\[\])", re.I),
    ),
    ("built_with_cuda", re.compile(r"[Bb]uilt with CUDA\s*[:?=]\s*(?P<v>True|False)")),
)

_PLATFORMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "wsl2",
        re.compile(
            r"microsoft-standard-WSL2|\d-Microsoft\b|/usr/lib/wsl/|\bWSL|\bwsl2?\b|/mnt/[c-h]/"
        ),
    ),
    (
        "windows",
        re.compile(
            r"on win32\b|[A-Za-z]:\\\w|\.dll\b|Windows[- ]?(?:10|11|Server)\b|"
            r"tensorflow[-_]intel\b|AppData\\|\[MSC v\.|win_amd64"
        ),
    ),
    (
        "macos",
        re.compile(
            r"on darwin\b|\b[Mm]ac ?OS\b|Darwin\b|tensorflow[-_](?:macos|metal)\b|"
            r"-apple-darwin|Apple M\d\b|\bM[1-4] (?:[Cc]hip|Pro|Max|Ultra)\b|"
            r"macosx_\d+_\d+_(?:arm64|x86_64|universal2)"
        ),
    ),
    (
        "aarch64",
        re.compile(
            r"aarch64\b|\bsbsa\b|Jetson\b|GH200\b|Grace[- ]Hopper\b|Graviton\d?\b|"
            r"tensorflow[-_]cpu[-_]aws\b"
        ),
    ),
)

# A TensorFlow version written in prose or a template: "TensorFlow version: 2.16.1",
# "### TensorFlow version\n\n2.16", "TF 2.10".
_TF_VERSION_TEXT_RE = re.compile(
    r"\b(?:TensorFlow|tensorflow|TF)(?:[ _-]?version)?[^\S\n]*(?:\(use command below\))?"
    r"[:=]?\s{0,4}(?:tf[^\S\n]*|v)?(?P<v>[12]\.\d{1,2})(?:\.\d+)?\b"
)
# A wheel, dist-info or "Successfully installed" name: tensorflow-2.13.0, tensorflow_cpu-2.16.1.
_TF_VERSION_FILE_RE = re.compile(
    r"\b(?:tensorflow|tf_nightly|tf-nightly)(?:[-_](?:gpu|cpu|intel|macos|cpu[-_]aws))?"
    r"-(?P<v>[12]\.\d{1,2})\.\d+"
)

_PACKAGE_NAMES = (
    r"tensorflow(?:[-_](?:gpu|cpu|intel|base|macos|metal|cpu[-_]aws|aarch64|io-gcs-filesystem))?"
    r"|tf[-_]nightly(?:[-_](?:gpu|cpu))?|intel[-_]tensorflow|nvidia[-_][\w-]+[-_]cu1\d"
    r"|cudatoolkit|cudnn|cuda-version|cuda-runtime|keras"
)
# pip list / conda list / pip freeze rows: name, version, and conda's build string.
_PACKAGE_RE = re.compile(
    rf"^[ \t]*(?P<name>{_PACKAGE_NAMES})(?:==|[ \t]{{2,}}|[ \t](?=\d+\.\d+\.\d+[ \t]*$))"
    r"(?P<version>\d[\w.+!-]*)(?:[ \t]+(?P<build>[A-Za-z_]\S*|\d\S*))?",
    re.MULTILINE | re.IGNORECASE,
)
# conda's metapackage that picks the TensorFlow variant: "_tflow_select  2.3.0  mkl", or in a
# solver's plan "_tflow_180_select:  1.0-gpu --> 3.0-eigen" (the last one is what is installed).
_TFLOW_SELECT_RE = re.compile(
    r"^[ \t]*_tflow_\w*select\b:?[ \t]+(?:.*-->[ \t]*)?[\d.]*[- \t]*(?P<b>gpu|eigen|mkl)\b",
    re.MULTILINE,
)
_GPU_BUILD_RE = re.compile(r"^(?:cuda|gpu)", re.I)
_CPU_BUILD_RE = re.compile(r"^(?:mkl|eigen|cpu)", re.I)

_LD_PATH_RE = re.compile(r"\bLD_LIBRARY_PATH\s*[=:]\s*['\"]?(?P<v>[^\s'\"]*(?:cuda|CUDA)[^\s'\"]*)")
_AND_CUDA_MISSING_RE = re.compile(r"does not provide the extra ['\"]?and-cuda")
_PIP_NVIDIA_RE = re.compile(r"site-packages/nvidia/|\bnvidia-\w+(?:-\w+)*-cu1\d\b|\[and-cuda\]")
# x86_64 code run by QEMU's user-mode emulator (an amd64 container on an Arm host): qemu-user's
# own report of a guest that died, or Docker's warning that the image's platform is not the host's.
_QEMU_USER_RE = re.compile(
    r"\bqemu(?:-x86_64(?:-static)?)?: uncaught target signal \d+|"
    r"requested image's platform \(linux/amd64\) does not match the detected host platform "
    r"\(linux/arm64"
)


@dataclass(frozen=True)
class Fact:
    """One thing the log shows.

    Attributes:
        kind: ``platform``, ``tf_version``, ``package``, ``built_with_cuda``, ``gpu_list``,
            ``gpu_available``, ``gpu_count``, ``ld_library_path``, ``and_cuda_missing``,
            ``pip_nvidia``, ``qemu_user``.
        value: what it showed (``windows``, ``2.16``, ``False``, ``[]``, a package row).
        line: the 1-based line number.
        text: the line, stripped.
    """

    kind: str
    value: str
    line: int
    text: str
    origin: str = ""  # for a version: printed, package, file or text (most to least sure)

    @property
    def evidence(self) -> str:
        return f"line {self.line}: {self.text[:200]}"


@dataclass
class LogFacts:
    """The facts of one log, in the order of their lines."""

    facts: list[Fact] = field(default_factory=list)

    def of(self, kind: str) -> list[Fact]:
        return [f for f in self.facts if f.kind == kind]

    def first(self, kind: str, value: str | None = None) -> Fact | None:
        return next(
            (f for f in self.facts if f.kind == kind and (value is None or f.value == value)),
            None,
        )

    @property
    def platform(self) -> Fact | None:
        """The platform the log shows: WSL2 before Windows (a WSL2 log names Windows paths)."""
        for name in ("wsl2", "aarch64", "windows", "macos"):
            found = self.first("platform", name)
            if found is not None:
                return found
        return None

    @property
    def tf_version(self) -> tuple[tuple[int, int], Fact] | None:
        """The TensorFlow version (major, minor) the log shows, and the fact that showed it.

        A printed ``tf.__version__`` counts before a package row, which counts before prose.
        """
        found = self.of("tf_version")
        if not found:
            return None
        best = min(found, key=lambda f: _VERSION_RANK.get(f.origin, 9))
        major, minor = best.value.split(".")[:2]
        return (int(major), int(minor)), best

    def packages(self) -> list[Fact]:
        return self.of("package")


_VERSION_RANK = {"printed": 0, "package": 1, "file": 2, "text": 3}


def read_facts(text: str) -> LogFacts:
    """Collect the platform, versions, packages and printed results that ``text`` shows.

    A text over 2 Mi characters is read in its first and last Mi; line numbers are those of
    the whole text.
    """
    if len(text) > FACT_SCAN_CHARS:
        half = FACT_SCAN_CHARS // 2
        tail_start = len(text) - half
        parts = [
            _Part(text[:half], 1),
            _Part(text[tail_start:], text.count("\n", 0, tail_start) + 1),
        ]
    else:
        parts = [_Part(text, 1)]
    facts: list[Fact] = []
    for part in parts:
        facts += _prompt_results(part)
        facts += _printed(part)
        facts += _platforms(part)
        facts += _versions(part)
        facts += _package_rows(part)
        facts += _single(part, "ld_library_path", _LD_PATH_RE, group="v")
        facts += _single(part, "and_cuda_missing", _AND_CUDA_MISSING_RE)
        facts += _single(part, "pip_nvidia", _PIP_NVIDIA_RE)
        facts += _single(part, "qemu_user", _QEMU_USER_RE)
    facts.sort(key=lambda f: f.line)
    return LogFacts(facts)


class _Part:
    """Text read for facts, whose first line is line ``first_line`` of the log."""

    def __init__(self, text: str, first_line: int) -> None:
        self.text = text
        self.first_line = first_line
        self.lines = text.split("\n")
        self._starts = list(
            itertools.accumulate((len(line) + 1 for line in self.lines[:-1]), initial=0)
        )

    def line_of(self, pos: int) -> tuple[int, str]:
        """The log's line number of offset ``pos``, and that line, stripped."""
        index = bisect.bisect_right(self._starts, pos) - 1
        return self.first_line + index, self.lines[index].strip()


def _prompt_results(part: _Part) -> list[Fact]:
    """``>>> expression`` then the value it printed, up to the next prompt."""
    facts: list[Fact] = []
    lines = part.lines
    for i, line in enumerate(lines):
        if ">>>" not in line and "In [" not in line and "In[" not in line and " -c" not in line:
            continue
        prompt = _PROMPT_RE.match(line)
        if prompt is None:
            continue
        code = prompt.group("code")
        kind = next((k for k, rx in _EXPRESSIONS if rx.search(code)), None)
        if kind is None:
            continue
        for j in range(i + 1, min(i + 1 + MAX_OUTPUT_LINES, len(lines))):
            if _PROMPT_RE.match(lines[j]):
                break
            value = _VALUE_RE.match(lines[j])
            if value is None:
                continue
            shown = value.group("value").strip("'\"")
            if kind == "tf_version":
                version = re.match(r"v?([12]\.\d{1,2})", shown)
                if version:
                    shown_line = f"{line.strip()} -> {lines[j].strip()}"
                    number = part.first_line + j
                    facts.append(Fact(kind, version.group(1), number, shown_line, "printed"))
                break
            if kind == "gpu_list" and shown.isdigit():  # len(list_physical_devices('GPU'))
                kind, shown = "gpu_count", shown
            elif kind == "gpu_list" and shown.startswith("["):
                shown = "[]" if shown == "[]" else "GPU"
            shown_line = f"{line.strip()} -> {lines[j].strip()}"
            facts.append(Fact(kind, shown, part.first_line + j, shown_line))
            break
    return facts


def _printed(part: _Part) -> list[Fact]:
    facts = []
    for kind, regex in _PRINTED:
        for match in regex.finditer(part.text):
            number, line = part.line_of(match.start())
            facts.append(Fact(kind, match.group("v"), number, line))
    return facts


def _platforms(part: _Part) -> list[Fact]:
    facts = []
    for name, regex in _PLATFORMS:
        match = regex.search(part.text)
        if match is not None:
            number, line = part.line_of(match.start())
            facts.append(Fact("platform", name, number, line))
    return facts


def _versions(part: _Part) -> list[Fact]:
    facts = []
    for source, regex in (("file", _TF_VERSION_FILE_RE), ("text", _TF_VERSION_TEXT_RE)):
        for match in regex.finditer(part.text):
            number, line = part.line_of(match.start())
            facts.append(Fact("tf_version", match.group("v"), number, line, source))
    return facts


def _package_rows(part: _Part) -> list[Fact]:
    facts = []
    for match in _PACKAGE_RE.finditer(part.text):
        name = match.group("name").lower().replace("_", "-")
        version = match.group("version")
        build = match.group("build") or ""
        number, line = part.line_of(match.start())
        facts.append(Fact("package", f"{name} {version} {build}".strip(), number, line))
        if name in ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-intel"):
            found = re.match(r"([12]\.\d{1,2})", version)
            if found:
                facts.append(Fact("tf_version", found.group(1), number, line, "package"))
    for match in _TFLOW_SELECT_RE.finditer(part.text):
        number, line = part.line_of(match.start())
        facts.append(Fact("package", f"_tflow_select {match.group('b')}", number, line))
    return facts


def _single(part: _Part, kind: str, regex: re.Pattern[str], group: str | None = None) -> list[Fact]:
    match = regex.search(part.text)
    if match is None:
        return []
    number, line = part.line_of(match.start())
    return [Fact(kind, match.group(group) if group else match.group(0), number, line)]


def package_kind(fact: Fact) -> str | None:
    """``cpu`` or ``gpu`` when a package row names a TensorFlow build of that kind, else None."""
    name, _, rest = fact.value.partition(" ")
    build = rest.partition(" ")[2]
    if name in ("tensorflow-cpu", "tf-nightly-cpu", "intel-tensorflow", "tensorflow-cpu-aws"):
        return "cpu"
    if name in ("tensorflow-gpu", "tf-nightly-gpu"):
        return "gpu"
    if name == "_tflow_select":
        return "gpu" if rest == "gpu" else "cpu"
    if name in ("tensorflow", "tensorflow-base") and build:
        if _GPU_BUILD_RE.match(build):
            return "gpu"
        if _CPU_BUILD_RE.match(build):
            return "cpu"
    if name.startswith("nvidia-") or name in ("cudatoolkit", "cudnn"):
        return "gpu"
    return None
