"""Rendering a report from a hand-built run: files written atomically, text from the system
escaped, plots drawn, an unwritable --out refused before anything is measured."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tfaccel.bench import BenchRun, Measurement
from tfaccel.cli import main
from tfaccel.errors import UsageError
from tfaccel.report.html import (
    build_document,
    check_writable,
    fmt_num,
    fmt_pct,
    fmt_seconds,
    render_html,
    write_report,
)

EVIL = "<script>alert(1)</script>"


def _run() -> BenchRun:
    def m(benchmark: str, median: float, **config: object) -> Measurement:
        samples = [median * f for f in (0.97, 0.99, 1.0, 1.01, 1.03)]
        extra: dict[str, object] = {
            "percent_of_peak": 50.0,
            "percent_of_best": 100.0,
            "arithmetic_intensity": 100.0,
        }
        unit = "TFLOP/s"
        if benchmark == "reference_cnn":
            unit = "images/s"
            extra = {
                "flops_per_image": 124_446_720,
                "global_batch": config["batch_size"],
                "peak_tflops": 0.35,
                "step_time_s": [0.03, 0.031, 0.029],
            }
        return Measurement(benchmark, {"device": "cpu", **config}, "m", unit, samples, extra)

    default = {"feed": "numpy", "batch_size": 32, "precision": "float32", "jit": False}
    best = {"feed": "tf.data", "batch_size": 256, "precision": "mixed_bfloat16", "jit": False}
    return BenchRun(
        started_at="2025-01-01T00:00:00+00:00",
        finished_at="2025-01-01T00:01:00+00:00",
        status="complete",
        options={"profile": "quick"},
        fingerprint="f1ngerpr1nt",
        fingerprint_data={},
        tfaccel_version="0.1.0",
        tf_version="2.21.0",
        targets=[{"name": "cpu", "label": f"CPU {EVIL}", "peak_tflops": {"float32": 0.35}}],
        measurements=[
            m("matmul", 0.205, dtype="float32", n=2048),
            m("vector_add", 12.0, dtype="float32", n=1024),
            m("reference_cnn", 775.0, **default),
            m("reference_cnn", 1603.0, **best),
        ],
        notes=[f"data from /home/{EVIL}/cifar"],
        run_id=7,
    )


def _doc() -> dict[str, object]:
    devices = {
        "cpu": {"model": EVIL, "features": ["AVX2"], "peak": {"formula": EVIL}},
        "gpus": [],
        "nvml_error": EVIL,
    }
    doctor = {
        "findings": [{"status": "warn", "id": "x", "title": EVIL, "evidence": [EVIL], "fix": EVIL}]
    }
    return build_document(_run(), devices=devices, doctor=doctor)


def test_formatting() -> None:
    assert (fmt_num(1603.4), fmt_num(12.34), fmt_num(0.2051), fmt_num(None)) == (
        "1,603",
        "12.3",
        "0.205",
        "n/a",
    )
    assert (fmt_pct(12.345), fmt_pct(0.5), fmt_seconds(0.0123), fmt_seconds(300)) == (
        "12.3%",
        "0.50%",
        "12.3 ms",
        "5 min 0 s",
    )


def test_system_text_is_escaped_everywhere() -> None:
    page = render_html(_doc())
    assert EVIL not in page
    assert "<script" not in page.lower()
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 6


def test_files_are_written_with_plots_and_key_figures(tmp_path: Path) -> None:
    from tfaccel.report.plots import render_all

    doc = _doc()
    plots = render_all(doc["summary"])  # type: ignore[arg-type]
    assert set(plots) == {"throughput", "roofline", "step_times", "speedup"}
    assert all(png.startswith(b"\x89PNG") for png in plots.values())
    files = write_report(tmp_path / "out", doc, plots)
    page = files.html.read_text()
    assert page.count("data:image/png;base64,") == 4 and "http://" not in page
    for figure in ("775", "1,603", "x2.07"):  # default, best, ratio
        assert figure in page
    loaded = json.loads(files.json.read_text())
    assert loaded["summary"]["headline"]["best_images_per_s"] == pytest.approx(1603.0)
    markdown = files.markdown.read_text()
    assert "| reference_cnn |" in markdown and "![Roofline" in markdown
    assert (tmp_path / "out" / "plots" / "roofline.png").is_file()
    assert stat.S_IMODE(files.html.stat().st_mode) == 0o644
    assert not [p for p in (tmp_path / "out").rglob("*.tmp")]  # no temporary left behind


def test_terminal_lists_only_the_changes_beyond_the_noise() -> None:
    from rich.console import Console

    from tfaccel.bench import BenchResult, Skipped, compare_runs
    from tfaccel.report.text import render_bench

    before, after = _run(), _run()
    after.run_id = 8
    slower = after.measurements[0]
    slower.samples = [v * 0.8 for v in slower.samples]  # matmul 20% slower, noise +-1%
    after.skipped = [Skipped("transfer", "cpu", "host<->device transfer applies to GPUs")]
    result = BenchResult.from_run(after, compare_runs(before, after))
    console = Console(record=True, width=300)
    console.print(render_bench(result))
    text = console.export_text()
    head, _, changes = text.partition("Against run 7 (2025-01-01T00:00:00+00:00): 3 same, 1 worse")
    assert changes, text
    assert "vector_add" in head and "vector_add" not in changes  # unchanged: counted, not listed
    assert "matmul" in changes and "worse" in changes
    assert "not measured: transfer on cpu: host<->device transfer applies to GPUs" in changes
    assert "Keras default (fit(numpy) bs32 fp32) 775 images/s" in head


def test_unwritable_out_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="not writable"):
        check_writable(blocker / "report")
    code = main(["report", "--quick", "--out", str(blocker / "report"), "--no-save"])
    err = capsys.readouterr().err
    assert code == 2 and "is not writable" in err and "Traceback" not in err
