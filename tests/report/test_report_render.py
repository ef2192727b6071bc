"""Rendering a report from a hand-built run: files written atomically, text from the system
escaped, plots drawn, an unwritable --out refused before anything is measured."""

from __future__ import annotations

import hashlib
import json
import re
import stat
from pathlib import Path

import pytest
from bench_helpers import sample_run

from tfaccel.bench import BenchMeasurement, BenchRun
from tfaccel.cli import main
from tfaccel.core.errors import UsageError, argument_names
from tfaccel.core.units import fmt_num, fmt_pct, fmt_seconds
from tfaccel.report.document import PLOT_TITLES, build_document
from tfaccel.report.files import MANIFEST, check_writable, write_report
from tfaccel.report.html import render_html

EVIL = "<script>alert(1)</script>"


def _run() -> BenchRun:
    return sample_run(f"CPU {EVIL}", [f"data from /home/{EVIL}/cifar"], run_id=7)


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
    assert "| reference\\_cnn |" in markdown and "![Roofline" in markdown
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
    history = [_run() for _ in range(4)]  # four earlier runs as stable: with run 7, the five
    for run_id, run in enumerate(history, start=3):  # runs that measure the noise between runs
        run.run_id = run_id
    result = BenchResult.from_run(after, compare_runs(before, after, history))
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
    with pytest.raises(UsageError, match=r"is not a directory: .* in its path is a regular file"):
        check_writable(blocker / "report")
    code = main(["report", "--quick", "--out", str(blocker / "report"), "--no-save"])
    err = capsys.readouterr().err
    assert code == 2 and "(--out) is not a directory" in err and "Traceback" not in err


def test_a_report_that_fails_before_writing_leaves_no_new_folder(tmp_path: Path) -> None:
    """The results database is refused after --out is checked (a directory given as the
    database): the new folder for the report, and its parent, are not made."""
    import tfaccel.report
    from tfaccel.bench import BenchOptions
    from tfaccel.store import StoreError

    (tmp_path / "db").mkdir()
    out = tmp_path / "new" / "report"
    with pytest.raises(StoreError, match="is a directory"):
        tfaccel.report.make_report(BenchOptions(), out=out, db=tmp_path / "db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db"]


def test_a_directory_where_a_report_file_goes_names_the_out_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "report"
    (out / "report.json").mkdir(parents=True)  # the directory is writable; this file is not
    with pytest.raises(UsageError) as info:
        write_report(out, _doc())
    assert "(out) holds files tfaccel did not write" in str(info.value)
    assert "'report.json' (a directory)" in str(info.value)
    with argument_names({"out": "--out"}), pytest.raises(UsageError) as info:
        write_report(out, _doc())
    assert "(--out) holds files tfaccel did not write" in str(info.value)

    import tfaccel.cli.report
    import tfaccel.report

    def make_report(options: object, *, out: str, **kwargs: object) -> object:
        return write_report(out, _doc())  # the measuring is not what this checks

    monkeypatch.setattr(tfaccel.report, "make_report", make_report)
    monkeypatch.setattr(tfaccel.cli.report, "quiet_tensorflow", lambda: None)
    code = main(["report", "--smoke", "--no-save", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "(--out) holds files tfaccel did not write" in err
    assert "Fix: pass --out with another directory, e.g. a new folder" in err
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]


# -- a user's files: never replaced, never removed ------------------------------------------------

FAKE_PLOTS = {name: b"\x89PNG " + name.encode() for name in PLOT_TITLES}


def _state(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under ``root``: its SHA-256, size and modification time (ns)."""
    return {
        str(p.relative_to(root)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_size,
            p.stat().st_mtime_ns,
        )
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _users_folder(root: Path) -> dict[str, tuple[str, int, int]]:
    (root / "plots").mkdir(parents=True)
    (root / "report.md").write_text("# my own report\n")
    (root / "report.json").write_text('{"mine": true}\n')
    (root / "plots" / "speedup.png").write_bytes(b"my plot")
    (root / "notes.txt").write_text("unrelated\n")
    return _state(root)


def test_a_users_files_where_the_report_goes_are_refused_and_left_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "project"
    before = _users_folder(out)
    with pytest.raises(UsageError) as info:
        write_report(out, _doc(), FAKE_PLOTS)
    message = str(info.value)
    for name in ("report.md", "report.json", "plots/speedup.png"):
        assert f"{name!r} (not written by tfaccel)" in message
    assert "notes.txt" not in message  # not a file the report writes: no reason to refuse
    assert "Expected: a new or empty directory" in message
    assert "Fix: pass out with another directory, e.g. a new folder" in message
    assert _state(out) == before  # byte for byte, same mtime; no manifest, no report.html
    with pytest.raises(UsageError):
        check_writable(out)  # make_report refuses before measuring
    code = main(["report", "--quick", "--no-save", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "(--out) holds files tfaccel did not write" in err and "'report.md'" in err
    assert _state(out) == before


def test_a_file_changed_since_tfaccel_wrote_it_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_report(out, _doc(), FAKE_PLOTS)
    with (out / "report.md").open("a") as fh:
        fh.write("my notes\n")
    (out / "plots" / "roofline.png").write_bytes(b"edited by hand")
    before = _state(out)
    with pytest.raises(UsageError) as info:
        write_report(out, _doc(), {})  # would remove roofline.png: it is no longer tfaccel's
    message = str(info.value)
    assert "'report.md' (changed since tfaccel wrote it)" in message
    assert "'plots/roofline.png' (changed since tfaccel wrote it)" in message
    assert "report.html" not in message
    assert _state(out) == before
    (out / MANIFEST).write_text("not json")
    with pytest.raises(UsageError, match=r"'\.tfaccel-report' \(not a manifest tfaccel wrote\)"):
        write_report(out, _doc())


def test_the_reports_own_folder_is_rewritten_and_only_its_stale_plot_removed(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    first = write_report(out, _doc(), FAKE_PLOTS)
    (out / "plots" / "mine.png").write_bytes(b"a user's plot beside the report's")
    (out / "notes.txt").write_text("unrelated\n")
    mine = {k: v for k, v in _state(out).items() if k in {"plots/mine.png", "notes.txt"}}
    plots = {k: v for k, v in FAKE_PLOTS.items() if k != "speedup"}
    files = write_report(out, _doc(), plots)
    assert not (out / "plots" / "speedup.png").exists()  # its own, unchanged: removed
    assert {k: v for k, v in _state(out).items() if k in mine} == mine
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest["files"]) == {
        "report.html",
        "report.json",
        "report.md",
        *(f"plots/{k}.png" for k in plots),
    }
    assert "pending" not in manifest
    assert first.html == files.html and files.html.is_file()
    write_report(out, _doc(), {})  # again, no plots: the folder keeps the user's plot
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["mine.png"]


def test_a_write_that_fails_leaves_the_old_report_whole_and_a_new_folder_unmade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while report.md is written: every file is staged before any is renamed,
    so the old report stays as it was (not half old, half new), no temporary is left, and a
    report into a new folder leaves no folder. The next report replaces the old one."""
    import tfaccel.report.files as report_files

    out = tmp_path / "out"
    write_report(out, _doc(), FAKE_PLOTS)
    before = _state(out)
    real = report_files.stage

    def failing(path: Path, data: bytes, **kwargs: object) -> str:
        if path.name == "report.md":
            raise OSError(28, "No space left on device")
        return real(path, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(report_files, "stage", failing)
    doc = _doc()
    doc["summary"]["headline"]["best_images_per_s"] = 1.0  # type: ignore[index]
    with pytest.raises(UsageError, match=r"could not be written.*No space left on device"):
        write_report(out, doc, FAKE_PLOTS)
    assert _state(out) == before
    fresh = tmp_path / "new" / "report"
    with pytest.raises(UsageError, match="could not be written"):
        write_report(fresh, doc, FAKE_PLOTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    monkeypatch.setattr(report_files, "stage", real)
    write_report(out, doc, FAKE_PLOTS)
    assert (
        json.loads((out / "report.json").read_text())["summary"]["headline"]["best_images_per_s"]
        == 1.0
    )


# -- the roofline: labelled points, one bandwidth figure ------------------------------------------


def _micro_run(sizes: tuple[int, ...], *, copy_gbs: float, add_gbs: float) -> BenchRun:
    """A run with matmul at ``sizes`` in fp32 and bf16, the bandwidth benchmark and the vector
    add, shaped as bench.micro writes them."""

    def m(
        benchmark: str, median: float, config: dict[str, object], **extra: object
    ) -> BenchMeasurement:
        samples = [median * f for f in (0.97, 0.99, 1.0, 1.01, 1.03)]
        unit = "TFLOP/s" if benchmark == "matmul" else "GB/s"
        return BenchMeasurement(
            benchmark, {"device": "cpu", **config}, "x", unit, samples, dict(extra)
        )

    measurements = []
    for dtype, itemsize, rate in (("float32", 4, 0.2), ("bfloat16", 2, 0.3)):
        for i, n in enumerate(sizes):
            intensity = 2 * n**3 / (3 * n * n * itemsize)
            config = {"dtype": dtype, "n": n}
            tflops = rate * (0.5 + 0.5 * i / max(1, len(sizes) - 1))
            measurements.append(m("matmul", tflops, config, arithmetic_intensity=intensity))
    measurements.append(m("bandwidth", copy_gbs, {"name": "x*s in place", "bytes": 1 << 30}))
    measurements.append(m("vector_add", add_gbs, {"dtype": "float32", "n": 1 << 26}))
    return BenchRun(
        started_at="2025-01-01T00:00:00+00:00",
        finished_at=None,
        status="complete",
        options={"profile": "full"},
        fingerprint="f",
        fingerprint_data={},
        tfaccel_version="0",
        tf_version=None,
        targets=[
            {
                "name": "cpu",
                "label": "CPU Test",
                "peak_tflops": {"float32": 0.33, "bfloat16": 0.66},
            }
        ],
        measurements=measurements,
    )


def _text_box(text: object, renderer: object) -> object:
    from matplotlib.text import Text

    return Text.get_window_extent(text, renderer)  # type: ignore[arg-type]  # the text alone


@pytest.mark.parametrize("sizes", [(64, 128), (512, 1024, 2048, 4096)], ids=["smoke", "full"])
def test_roofline_labels_every_point_and_no_label_overlaps(sizes: tuple[int, ...]) -> None:
    from tfaccel.bench import summarize_run
    from tfaccel.report.plots import roofline_figure

    summary = summarize_run(_micro_run(sizes, copy_gbs=22.4, add_gbs=23.0))
    [device] = summary["roofline"]
    fig = roofline_figure(summary)
    ax = fig.axes[0]
    fig.canvas.draw()  # as saved: every annotation at its place
    renderer = fig.canvas.get_renderer()
    labels = {t.get_text(): _text_box(t, renderer) for t in ax.texts}
    expected = {p["label"] for p in device["points"]}
    assert set(labels) == expected and len(ax.texts) == len(expected) == 2 * len(sizes) + 1
    assert "matmul fp32 n=512" in labels or "matmul fp32 n=64" in labels
    frame = ax.get_window_extent(renderer)
    boxes = list(labels.values())
    for i, box in enumerate(boxes):
        assert frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
        for other in boxes[i + 1 :]:
            assert not box.overlaps(other), (box, other)
    for point in device["points"]:  # no label covers a point
        px, py = ax.transData.transform((point["intensity"], point["tflops"]))
        assert not any(b.contains(px, py) for b in boxes)


def test_the_bandwidth_ceiling_is_the_bandwidth_row_with_a_line_in_the_legend() -> None:
    from matplotlib.lines import Line2D

    from tfaccel.bench import summarize_run
    from tfaccel.report.plots import roofline_figure
    from tfaccel.report.tables import micro_table

    # the in-place vector add may read faster than the bandwidth benchmark: the ceiling is
    # still the bandwidth row, one figure with one definition, not the larger of the two
    summary = summarize_run(_micro_run((512, 1024), copy_gbs=22.4, add_gbs=43.0))
    [device] = summary["roofline"]
    assert device["bandwidth_gbs"] == pytest.approx(22.4)
    assert device["bandwidth_source"] == "bandwidth x*s in place 1 GiB"
    [row] = [r for r in micro_table(summary).rows if r[0] == "bandwidth"]
    assert (row[2], row[3], row[4]) == ("x*s in place 1 GiB", "22.4", "GB/s")
    legend = roofline_figure(summary).axes[0].get_legend()
    entries = dict(
        zip((t.get_text() for t in legend.get_texts()), legend.legend_handles, strict=True)
    )
    [(text, handle)] = [(t, h) for t, h in entries.items() if t.startswith("measured bandwidth")]
    assert text == "measured bandwidth 22.4 GB/s\n(bandwidth x*s in place 1 GiB; read + written)"
    assert (
        isinstance(handle, Line2D) and handle.get_linestyle() == "-" and handle.get_linewidth() > 0
    )
    assert "43" not in " ".join(entries)


def test_a_saved_report_json_without_the_new_keys_still_draws() -> None:
    from tfaccel.bench import summarize_run
    from tfaccel.report.plots import roofline

    summary = summarize_run(_micro_run((64,), copy_gbs=10.0, add_gbs=11.0))
    for device in summary["roofline"]:
        del device["bandwidth_source"]  # type: ignore[misc]
        for point in device["points"]:
            del point["dtype"]  # type: ignore[misc]
    png = roofline(summary)
    assert png is not None and png.startswith(b"\x89PNG")


# -- the files: what report.html needs, what is listed, strict JSON ------------------------------


def test_the_html_needs_nothing_beside_it_and_the_files_listed_are_those_written(
    tmp_path: Path,
) -> None:
    from tfaccel.report.plots import render_all

    doc = _doc()
    out = tmp_path / "out"
    all_plots = render_all(doc["summary"])  # type: ignore[arg-type]
    write_report(out, doc, all_plots)  # an earlier report, with speedup.png
    plots = {k: v for k, v in all_plots.items() if k != "speedup"}
    files = write_report(out, doc, plots)
    written = files.written()
    assert set(written) == {
        "html",
        "json",
        "markdown",
        "plot:throughput",
        "plot:roofline",
        "plot:step_times",
    }
    on_disk = {str(p) for p in out.rglob("*") if p.is_file() and p.name != MANIFEST}
    assert on_disk == set(written.values())  # the stale speedup.png is gone
    page = files.html.read_text()
    references = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert references and all(r.startswith("data:image/png;base64,") for r in references)
    assert "plots/" not in page
    markdown = files.markdown.read_text()
    for name in plots:
        assert f"](plots/{name}.png)" in markdown and (out / "plots" / f"{name}.png").is_file()
    listed = json.loads(files.json.read_text())["files"]["plots"]
    assert listed == {name: f"plots/{name}.png" for name in plots}


def test_report_json_is_strict_json(tmp_path: Path) -> None:
    run = _run()
    run.measurements.append(
        BenchMeasurement("bandwidth", {"device": "cpu"}, "x", "GB/s", [0.0, 0.0, 1.0])
    )
    doc = build_document(run)
    assert any(
        r["relative_iqr"] == float("inf") for r in doc["summary"]["micro"]
    )  # a spread over a zero median
    files = write_report(tmp_path, doc)
    text = files.json.read_text()

    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    loaded = json.loads(text, parse_constant=refuse)
    [row] = [r for r in loaded["summary"]["micro"] if r["benchmark"] == "bandwidth"]
    assert row["relative_iqr"] is None and row["median"] == 0.0


def test_the_doctor_table_shows_the_fix_and_every_status_has_a_style() -> None:
    from tfaccel.report.html import _CSS

    doc = build_document(
        _run(),
        doctor={
            "findings": [
                {
                    "status": "info",
                    "id": "tip",
                    "title": "A tip",
                    "fix": "pip install tfaccel[bench]",
                },
                {"status": "warn", "id": "w", "title": "A warning", "fix": "export TF_X=1"},
            ]
        },
    )
    page = render_html(doc)
    doctor = page[page.index('id="doctor"') :]
    assert (
        '<span class="info">info</span>' in doctor
        and "<td>pip install tfaccel[bench]</td>" in doctor
    )
    assert "<td>export TF_X=1</td>" in doctor
    for status in ("ok", "skip", "info", "warn", "fail", "better", "worse", "same"):
        assert re.search(rf"\.{status}[,{{]", _CSS), status


def _gpu_run() -> BenchRun:
    """The sample run with the reference CNN's best configuration timed on a GPU as well."""
    import dataclasses

    run = _run()
    best = run.measurements[3]
    run.targets.append({"name": "gpu:0", "label": "GPU 0 NVIDIA H100", "peak_tflops": {}})
    run.measurements.append(
        dataclasses.replace(
            best,
            config={**best.config, "device": "gpu:0", "jit": True},
            samples=[v * 10 for v in best.samples],
        )
    )
    return run


def test_the_report_opens_with_what_to_change_and_the_lines_that_apply_it() -> None:
    from tfaccel.report.markdown import render_markdown

    doc = _doc()
    changes = doc["changes"]
    assert changes["findings"] == [f"warn x: {EVIL} (fix: {EVIL})"]  # type: ignore[index]
    (model,) = changes["models"]  # type: ignore[index]
    assert model["config"] == "tf.data bs256 bf16 mixed" and model["beyond_noise"] is True
    assert model["apply"] == [
        "tfaccel.setup(precision='mixed_bfloat16', jit=False)",
        "model.compile(..., jit_compile=False)",
        "dataset = tfaccel.data.pipeline((x, y), batch_size=256)",
        "model.fit(dataset)",
    ]
    markdown = render_markdown(doc)  # type: ignore[arg-type]
    section = markdown.split("## What to change\n", 1)[1].split("\n## ", 1)[0]
    assert markdown.index("## What to change") < markdown.index("## Headline")
    assert "x2.07 over the Keras default, beyond the noise" in section
    assert "`tfaccel.setup(precision='mixed_bfloat16', jit=False); " in section
    assert "tfaccel.data.pipeline((x, y), batch_size=256); model.fit(dataset)`" in section
    page = render_html(doc)  # type: ignore[arg-type]
    assert page.index('id="changes"') < page.index('id="headline"')
    assert "tfaccel.data.pipeline((x, y), batch_size=256)" in page
    assert json.loads(json.dumps(doc))["changes"] == changes


def test_a_best_inside_the_noise_of_the_default_changes_nothing() -> None:
    from tfaccel.report.changes import what_to_change

    summary = _doc()["summary"]
    row = summary["models"][1]  # type: ignore[index]
    row["vs_default_different"] = False
    (model,) = what_to_change(summary)["models"]  # type: ignore[arg-type]
    assert model["apply"] == [] and "inside the noise: keep the default" in model["verdict"]


def test_a_cpu_only_report_has_no_speedup_over_cpu_and_no_empty_column() -> None:
    from tfaccel.report.markdown import render_markdown
    from tfaccel.report.tables import devices_table

    doc = _doc()
    table = devices_table(doc["summary"])  # type: ignore[arg-type]
    assert "speedup over CPU" not in table.header and len(table.rows[0]) == len(table.header)
    markdown = render_markdown(doc)  # type: ignore[arg-type]
    assert "speedup over CPU" not in markdown and "speedup over CPU" not in render_html(doc)  # type: ignore[arg-type]
    # the best configuration's utilisation is n/a (no bf16 matmul measured): left out
    assert "utilisation (of matmul)" not in markdown


def test_a_report_with_a_gpu_keeps_the_speedup_over_cpu() -> None:
    from tfaccel.report.tables import devices_table

    doc = build_document(_gpu_run())
    table = devices_table(doc["summary"])
    column = table.header.index("speedup over CPU")
    assert sorted(row[column] for row in table.rows) == ["x1.00", "x10.00"]
    assert table.numeric == frozenset(range(3, len(table.header)))
    (model,) = doc["changes"]["models"]
    assert model["device"] == "gpu:0"
    assert "model.compile(..., jit_compile=True)" in model["apply"]
    assert "speedup over CPU" in render_html(doc)


def test_the_plan_counts_memory_as_this_machines_device_does() -> None:
    from tfaccel.report.tables import plan_table

    def device(kind: str, needed: int) -> dict[str, object]:
        return {
            "key": f"{kind}:0",
            "kind": kind,
            "needed_bytes": needed,
            "fits": True,
            "max_batch": 512,
            "gradient_accumulation_steps": None,
            "epoch_s": None,
        }

    fastest = {**device("gpu", 2 * 2**30), "name": "H100"}
    cpu_only = [
        {
            "model": "m",
            "batch_size": 256,
            "needed_bytes": 2**30,
            "this_machine": [device("cpu", 3 * 2**30)],
            "fastest": fastest,
        }
    ]
    table = plan_table(cpu_only)
    assert table.header[2] == "memory (host RAM)" and table.rows[0][2] == "3.00 GiB"
    with_gpu = [{**cpu_only[0], "this_machine": [device("cpu", 3 * 2**30), device("gpu", 2**30)]}]
    table = plan_table(with_gpu)
    assert table.header[2] == "memory (GPU allocator)" and table.rows[0][2] == "1.00 GiB"


def test_the_terminal_opens_with_what_to_change_and_the_lines_that_apply_it(
    tmp_path: Path,
) -> None:
    """``tfaccel report``'s screen (render_report, as the CLI prints it) from a ReportResult
    built the way make_report builds one: the findings and each model's apply-lines."""
    from rich.console import Console

    from tfaccel import inventory
    from tfaccel.bench import BenchResult
    from tfaccel.diagnosis import diagnose
    from tfaccel.report import ReportResult
    from tfaccel.report.changes import model_line
    from tfaccel.report.text import render_report
    from tfaccel.snapshot import Snapshot

    snap = Snapshot()
    inv = inventory.build(snap)
    doctor = diagnose(snap)
    measured = BenchResult.from_run(_run())
    document = build_document(
        measured.run,
        devices=inv.to_dict(),
        doctor={
            "findings": [
                {"status": "warn", "id": "x", "title": "Too few threads", "fix": "export OMP=8"},
                {"status": "ok", "id": "y", "title": "All good", "fix": ""},
            ]
        },
        summary=measured.summary,
    )
    files = write_report(tmp_path / "out", document, {})
    result = ReportResult(measured, inv, doctor, document, files)

    console = Console(record=True, width=100)
    console.print(render_report(result))
    text = console.export_text()

    changes = document["changes"]
    assert changes["findings"] == ["warn x: Too few threads (fix: export OMP=8)"]
    (model,) = changes["models"]
    assert model["apply"] and model["beyond_noise"] is True
    section = text.split("what to change", 1)[1].split("tfaccel devices", 1)[0]
    assert text.index("what to change") < text.index("tfaccel devices")
    assert "- warn x: Too few threads (fix: export OMP=8)" in section
    assert "All good" not in section  # only what needs a change
    flat = " ".join(section.split())  # the lines wrap at the console's width
    assert " ".join(model_line(model, quote="`").split()) in flat
    for line in model["apply"]:
        assert line in flat, line
    assert "x2.07 over the Keras default, beyond the noise" in flat
    assert str(files.html) in text  # the files written, after the sections


def test_the_keras_default_is_the_one_bench_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary's speedups and the report's verdict both go by bench's KERAS_DEFAULT."""
    from tfaccel.bench import summarize_run, training
    from tfaccel.report.changes import what_to_change

    (model,) = what_to_change(summarize_run(sample_run()))["models"]
    assert model["verdict"].startswith("x2.07 over the Keras default")
    best = training.TrainConfig("tf.data", 256, "mixed_bfloat16", False)  # the sample's best
    monkeypatch.setattr(training, "KERAS_DEFAULT", best)
    summary = summarize_run(sample_run())
    speedups = {row["config"]: row["speedup_vs_default"] for row in summary["models"]}
    assert sorted(speedups.values(), key=str) == [pytest.approx(775 / 1603, rel=0.01), None]
    (model,) = what_to_change(summary)["models"]
    assert model["verdict"] == "the Keras default is the fastest measured: nothing to change"
    assert model["apply"] == []
