"""One ``tfaccel report --smoke`` shared by the tests that read a report (the session fixture
``smoke_report`` of tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

EVIL = "<script>alert(1)</script>"


def write_smoke_report(out: Path) -> Path:
    """``tfaccel report --smoke`` of five benchmarks (micro, a model and the digits convergence
    check) into ``out/site``, with its own results database, on a machine whose CPU name
    carries a <script> tag (:data:`EVIL`), which the report must show as text; it exits 0."""
    from tfaccel import probe
    from tfaccel.cli import main

    snap = probe.snapshot()
    snap.cpu.model = f"{EVIL} Test CPU"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(probe, "snapshot", lambda **_: snap)
        code = main(
            [
                "report",
                "--smoke",
                "--only",
                "matmul,bandwidth,vector_add,reference_cnn,digits",
                "--repeats",
                "3",
                "--out",
                str(out / "site"),
                "--db",
                str(out / "results.sqlite"),
            ]
        )
    assert code == 0
    return out / "site"
