"""`tfaccel report` end to end (tiny --smoke sizes), then the HTML opened alone in headless
Chromium: the screenshot is not blank, the key figures are in the page, and a device name
carrying a <script> tag is shown as text, never run. report.json is strict JSON and lists
exactly the files written."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from report_helpers import EVIL

from tfaccel.core.units import fmt_num
from tfaccel.report.files import MANIFEST

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)


@pytest.fixture(scope="module")
def report_dir(smoke_report: Path) -> Path:
    """The report tests/conftest.py's smoke_report wrote (README.md's make run checks it too)."""
    return smoke_report


@pytest.mark.slow
def test_report_files_and_key_figures(report_dir: Path) -> None:
    doc: dict[str, Any] = json.loads((report_dir / "report.json").read_text())
    assert {"summary", "devices", "doctor", "bench", "comparison"} <= set(doc)
    assert doc["doctor"]["findings"]  # the doctor's checks are in the report
    page = (report_dir / "report.html").read_text()
    headline = doc["summary"]["headline"]
    for value in (headline["default_images_per_s"], headline["best_images_per_s"]):
        assert fmt_num(value) in page
    assert f"x{headline['ratio']:.2f}" in page
    for row in doc["summary"]["micro"]:
        assert fmt_num(row["median"]) in page
    assert "Devices compared" in page and "time per 50,000-image epoch" in page
    assert page.count("data:image/png;base64,") >= 3
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt; Test CPU" in page
    markdown = (report_dir / "report.md").read_text()
    assert "## Devices compared" in markdown and fmt_num(headline["best_images_per_s"]) in markdown
    assert "(without --smoke)" in markdown and "(without --quick)" not in markdown


@pytest.mark.slow
def test_report_json_lists_exactly_the_files_written(report_dir: Path) -> None:
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    doc = json.loads((report_dir / "report.json").read_text(), parse_constant=refuse)
    files = doc["files"]
    listed = {files["html"], files["json"], files["markdown"], *files["plots"].values()}
    on_disk = {str(p.relative_to(report_dir)) for p in report_dir.rglob("*") if p.is_file()}
    # beside them only the manifest: what tfaccel wrote there, so it replaces only its own files
    assert on_disk == listed | {MANIFEST} and "plots/roofline.png" in listed
    [roofline] = doc["summary"]["roofline"]
    [row] = [r for r in doc["summary"]["micro"] if r["benchmark"] == "bandwidth"]
    assert roofline["bandwidth_gbs"] == row["median"]  # the plot's figure is the table's


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Requires: chromium (apt-get install chromium)")
def test_report_renders_in_headless_chromium(report_dir: Path, tmp_path: Path) -> None:
    from matplotlib import image

    shot = tmp_path / "report.png"
    alone = tmp_path / "alone" / "report.html"  # nothing beside it: the page is self-contained
    alone.parent.mkdir()
    shutil.copy(report_dir / "report.html", alone)
    args = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        alone.resolve().as_uri(),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    pixels = image.imread(str(shot))[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    assert pixels.std() > 0.05  # not a blank page
    non_white = (pixels.min(axis=2) < 0.9).mean()
    assert non_white > 0.02  # text, tables and plots cover part of the page
    dump = [a for a in args if not a.startswith(("--screenshot", "--window-size"))]
    dom = subprocess.run(
        [*dump[:-1], "--dump-dom", dump[-1]], capture_output=True, text=True, timeout=120
    ).stdout
    assert "Devices compared" in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Test CPU" in dom  # shown as text
    assert EVIL not in dom  # never an element
