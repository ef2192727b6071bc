"""The top-level Python API: cheap to import, and each call works more than once."""

from __future__ import annotations

import subprocess
import sys

import tfaccel


def test_import_tfaccel_does_not_import_tensorflow() -> None:
    code = "import sys, tfaccel, tfaccel.cli; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_doctor_can_be_called_again_after_its_package_was_imported() -> None:
    first = tfaccel.doctor()
    import tfaccel.diagnosis as package  # the package has its own name: the function stays

    second = tfaccel.doctor()
    assert package.check is not tfaccel.doctor and callable(tfaccel.doctor)
    assert [f.id for f in first.findings] == [f.id for f in second.findings]


def test_devices_returns_the_inventory() -> None:
    inv = tfaccel.devices()
    assert inv.cpu.logical_cores and inv.cpu.peak.estimate
