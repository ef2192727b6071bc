"""The README's install from a clone: the wheel it builds holds everything tfaccel reads at run
time, and the installed package works away from the source tree.

The wheel is built as the README says (``pip wheel --no-deps -w dist .``) and installed with
``--no-deps`` into a folder of its own; its dependencies (rich, TensorFlow...) come from this
environment, since installing the ``[cpu]`` extra would download TensorFlow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tfaccel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (found,) = dist.glob("tfaccel-*.whl")
    return found


def test_the_wheel_is_named_as_the_readme_says(wheel: Path) -> None:
    assert wheel.name == f"tfaccel-{tfaccel.__version__}-py3-none-any.whl"
    assert f"dist/{wheel.name}" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_wheel_holds_the_package_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"tfaccel/accelerators.csv", "tfaccel/py.typed", "tfaccel/__init__.py"} <= names
    assert "tfaccel/diagnosis/tf_releases.json" in names
    assert not [n for n in names if n.startswith("tests/")]


def test_the_installed_wheel_runs_outside_the_clone(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]
    install = subprocess.run(
        [*pip, "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import json, sys, tfaccel; from tfaccel.diagnosis.releases import releases; "
        "print(json.dumps({'file': tfaccel.__file__, "
        "'gpus_known': len(tfaccel.inventory.load_specs()), 'releases': len(releases()), "
        "'tf': 'tensorflow' in sys.modules}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["file"].startswith(str(target)) and doc["gpus_known"] > 10 and not doc["tf"]
    assert doc["releases"] >= 10
    devices = subprocess.run(
        [sys.executable, "-m", "tfaccel", "devices", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert devices.returncode == 0, devices.stderr
    assert json.loads(devices.stdout)["cpu"]["logical_cores"] >= 1
