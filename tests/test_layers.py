"""The layering of ARCHITECTURE.md, enforced: the import-linter contracts of pyproject.toml hold on the
real tree, and break, naming the contract, when an upward import is planted in a copy of it."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "tfaccel"
CONFIG = ROOT / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _config() -> dict[str, Any]:
    with CONFIG.open("rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]


def _contract(contract_id: str) -> dict[str, Any]:
    (contract,) = [c for c in _config()["contracts"] if c["id"] == contract_id]
    return contract


def _lint_imports(*args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: install the dev extra (pip install -e '.[dev]')")
    env = dict(os.environ, COLUMNS="400")  # one line per contract, whatever the terminal
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(CONFIG), "--no-cache", "--no-logo", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _top_level_modules() -> set[str]:
    names = set()
    for path in PACKAGE.iterdir():
        if path.is_dir() and (path / "__init__.py").is_file():
            names.add(f"tfaccel.{path.name}")
        elif path.suffix == ".py" and path.stem not in {"__init__", "__main__"}:
            names.add(f"tfaccel.{path.stem}")
    return names


def _module_file(package_root: Path, module: str) -> Path:
    """The file that defines ``module`` (``tfaccel.a.b``) under ``package_root``'s parent."""
    base = package_root.parent.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def test_the_real_tree_keeps_every_contract() -> None:
    result = _lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_probe_contract_forbids_every_other_module() -> None:
    """A module added to tfaccel is forbidden to probe until someone decides otherwise."""
    forbidden = {m for m in _contract("probe")["forbidden_modules"] if m.startswith("tfaccel.")}
    allowed = {"tfaccel.probe", "tfaccel.snapshot", "tfaccel.core", "tfaccel._version"}
    assert forbidden == _top_level_modules() - allowed


def test_the_core_contract_forbids_every_other_module() -> None:
    """The shared core imports nothing of tfaccel outside itself: a new top-level module is
    forbidden to it from the start."""
    forbidden = {m for m in _contract("core")["forbidden_modules"] if m.startswith("tfaccel.")}
    assert forbidden == _top_level_modules() - {"tfaccel.core"}


def test_the_package_root_imports_lazily() -> None:
    """``tfaccel/__init__.py`` imports at module level only the two bottom layers of the layers
    contract (the core and the version), so that ``import tfaccel`` stays cheap and no module
    above pays for another."""
    layers = _contract("layers")["layers"][-2:]
    bottom = {f"tfaccel.{name.strip()}" for layer in layers for name in layer.split("|")}
    eager = {".".join(m.split(".")[:2]) for m in _eager_tfaccel_imports(PACKAGE / "__init__.py")}
    assert eager <= bottom, f"tfaccel/__init__.py imports {sorted(eager - bottom)} eagerly"


def _eager_tfaccel_imports(path: Path) -> set[str]:
    """The tfaccel modules a file imports when it is imported (not in functions or classes, not
    under ``if TYPE_CHECKING:``)."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "tfaccel":
                    found.update(f"tfaccel.{a.name}" for a in node.names)
                else:
                    found.add(node.module)
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for part in (node.body, *(h.body for h in node.handlers), node.orelse):
                    visit(part)
                visit(node.finalbody)

    visit(ast.parse(path.read_text()).body)
    return {m for m in found if m == "tfaccel" or m.startswith("tfaccel.")}


def test_an_eager_import_in_the_package_root_is_found(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text(
        "from typing import TYPE_CHECKING\nfrom tfaccel.core.errors import TfaccelError\n"
        "if TYPE_CHECKING:\n    from tfaccel.runtime import RuntimeConfig\n"
        "def setup():\n    from tfaccel import runtime\n"
        "from tfaccel import tuning\n"
    )
    assert _eager_tfaccel_imports(init) == {"tfaccel.core.errors", "tfaccel.tuning"}


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of src/tfaccel (sources only) to plant imports in."""
    root = tmp_path_factory.mktemp("tree")
    shutil.copytree(PACKAGE, root / "tfaccel", ignore=shutil.ignore_patterns("__pycache__"))
    return root


# (importing module, planted line, contract id that must break, text the report must show)
PLANTS = [
    ("tfaccel.probe.cpu", "import tfaccel.cli", "probe", "tfaccel.probe.cpu -> tfaccel.cli"),
    ("tfaccel.probe.cpu", "import tfaccel.cli", "layers", "tfaccel.probe.cpu -> tfaccel.cli"),
    ("tfaccel.probe.cpu", "import tfaccel.cli", "cli", "tfaccel.probe.cpu -> tfaccel.cli"),
    ("tfaccel.inventory", "import tensorflow", "no-tensorflow", "tfaccel.inventory -> tensorflow"),
    (
        "tfaccel.diagnosis",
        "from tfaccel import runtime",
        "no-tensorflow",
        "tfaccel.diagnosis -> tfaccel.runtime",
    ),
    ("tfaccel.core.timing", "import keras", "core-no-tensorflow", "tfaccel.core.timing -> keras"),
    ("tfaccel.data", "from tfaccel import tuning", "layers", "tfaccel.data -> tfaccel.tuning"),
    ("tfaccel.bench", "import tfaccel.profile", "layers", "tfaccel.bench -> tfaccel.profile"),
]


@pytest.mark.parametrize(("module", "line", "contract_id", "shown"), PLANTS)
def test_a_planted_upward_import_breaks_its_contract(
    package_copy: Path, module: str, line: str, contract_id: str, shown: str
) -> None:
    name = _contract(contract_id)["name"]
    target = _module_file(package_copy / "tfaccel", module)
    original = target.read_text()
    before = _lint_imports("--contract", contract_id, pythonpath=package_copy)
    try:
        target.write_text(f"{original}\n{line}  # planted by tests/test_layers.py\n")
        after = _lint_imports("--contract", contract_id, pythonpath=package_copy)
    finally:
        target.write_text(original)
    # The copy is what was analysed, and the plant broke the contract.
    assert after.returncode == 1, after.stdout + after.stderr
    assert f"{name} BROKEN" in after.stdout, after.stdout
    assert shown in after.stdout, after.stdout
    assert shown not in before.stdout
