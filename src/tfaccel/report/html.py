"""The ``tfaccel report`` files: report.json, report.md and one self-contained report.html.

:func:`build_document` assembles the JSON document (devices, doctor, bench run, derived tables,
comparison with the last run); :func:`report_tables` turns it into the tables every renderer
shows (HTML, Markdown, and the terminal in ``tfaccel bench``); :func:`write_report` writes
report.html, report.json, report.md and the PNG plots, each atomically (a temporary file renamed
into place). report.html needs nothing beside it: its plots are embedded as data URIs. The PNG
files in ``plots/`` are for report.md, which links them by those relative paths. report.json is
strict JSON (:mod:`tfaccel.core.jsonout`: NaN and infinities written as null). Every piece of text
that came from the system (device names, paths, doctor evidence) goes through
:func:`html.escape` in the HTML.

The document and its rows are the typed records of :mod:`tfaccel.bench.records`; a report.json
read back renders the same as the document just built.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from tfaccel.bench.records import (
    CHANGED,
    Headline,
    ModelRow,
    RunComparison,
    RunDocument,
    RunSummary,
)
from tfaccel.core.errors import UsageError, argument
from tfaccel.core.files import write_atomic
from tfaccel.core.jsonout import dumps
from tfaccel.report.findings import render_html as findings_html
from tfaccel.report.findings import render_markdown as findings_markdown

if TYPE_CHECKING:
    from tfaccel.bench.results import BenchRun

__all__ = [
    "ReportDocument",
    "ReportFileNames",
    "ReportFiles",
    "SavedReportDocument",
    "Status",
    "Table",
    "build_document",
    "check_writable",
    "checks_table",
    "comparison_table",
    "devices_table",
    "fmt_num",
    "fmt_pct",
    "fmt_seconds",
    "headline_text",
    "micro_table",
    "plan_table",
    "render_html",
    "render_markdown",
    "report_tables",
    "training_table",
    "write_report",
]

SCHEMA = "tfaccel-report/1"
_OUT = "out"  # the argument that names the report directory (make_report's; --out on the CLI)
PLOT_TITLES = {
    "throughput": "Training throughput per configuration",
    "roofline": "Roofline: matmul and bandwidth ceilings",
    "step_times": "Step-time distributions",
    "speedup": "Speedups",
}


# -- formatting --------------------------------------------------------------------------------


def fmt_num(value: Any) -> str:
    """1234.5 -> '1,234'; 12.34 -> '12.3'; 0.1234 -> '0.123'; None -> 'n/a'."""
    if value is None:
        return "n/a"
    v = float(value)
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def fmt_pct(value: Any) -> str:
    """12.345 -> '12.3%'; 0.5 -> '0.50%'; None -> 'n/a'."""
    if value is None:
        return "n/a"
    v = float(value)
    return f"{v:.2f}%" if abs(v) < 1 else f"{v:.1f}%"


def fmt_seconds(value: Any) -> str:
    """0.0123 -> '12.3 ms'; 75 -> '75.0 s'; 300 -> '5 min 0 s'; None -> 'n/a'."""
    if value is None:
        return "n/a"
    v = float(value)
    if v < 1:
        return f"{v * 1000:.3g} ms"
    if v < 120:
        return f"{v:.1f} s"
    minutes, seconds = divmod(round(v), 60)
    return f"{minutes} min {seconds} s"


def _iqr(rel_iqr: Any) -> str:
    return "n/a" if rel_iqr is None else f"{float(rel_iqr) * 100:.1f}%"


def _vs_default(row: ModelRow) -> str:
    if row.get("speedup_vs_default") is None:
        return "-"
    where = "beyond" if row.get("vs_default_different") else "inside"
    return f"x{row['speedup_vs_default']:.2f} ({where} the noise)"


def _speedup(value: Any) -> str:
    return "n/a" if value is None else f"x{float(value):.2f}"


# -- the document and its tables ---------------------------------------------------------------


class ReportDocument(TypedDict):
    """report.json (without its file names): the run, its tables, devices and doctor."""

    schema: str
    generated_at: str
    tfaccel_version: str
    summary: RunSummary
    comparison: RunComparison | None
    devices: dict[str, Any] | None
    doctor: dict[str, Any] | None
    bench: RunDocument
    plan: list[dict[str, Any]] | None


class ReportFileNames(TypedDict):
    """Where report.json says its sibling files are, relative to its directory (``plots``:
    the PNG files report.md links; report.html embeds the same plots and needs none of them).
    """

    html: str
    json: str
    markdown: str
    plots: dict[str, str]


class SavedReportDocument(ReportDocument):
    """report.json as written: the document and the names of the files beside it."""

    files: ReportFileNames


def build_document(
    run: BenchRun,
    *,
    devices: dict[str, Any] | None = None,
    doctor: dict[str, Any] | None = None,
    comparison: RunComparison | None = None,
    summary: RunSummary | None = None,
    plan: list[dict[str, Any]] | None = None,
) -> ReportDocument:
    """The report.json document.

    Args:
        run: a :class:`tfaccel.bench.BenchRun`.
        devices: ``Inventory.to_dict()``.
        doctor: ``DoctorReport.to_dict()``.
        comparison: :func:`tfaccel.bench.compare_runs` output, or None.
        summary: :func:`tfaccel.bench.summarize_run` of ``run`` (derived when not given).
        plan: :func:`tfaccel.planning.source.reference_plans` rows, or None.
    """
    from tfaccel._version import __version__
    from tfaccel.bench.analysis import summarize_run

    return {
        "schema": SCHEMA,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "tfaccel_version": __version__,
        "summary": summarize_run(run) if summary is None else summary,
        "comparison": comparison,
        "devices": devices,
        "doctor": doctor,
        "bench": run.to_dict(),
        "plan": plan,
    }


@dataclass(frozen=True)
class Status:
    """A table cell that names a status (``ok``, ``fail``, ``better``, ``worse``...)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class Table:
    """One table of a report: plain cell values (``Status`` for coloured ones)."""

    key: str
    title: str
    header: list[str]
    rows: list[list[Any]]
    numeric: frozenset[int] = field(default_factory=frozenset)


def headline_text(h: Headline) -> str:
    """The headline in one sentence: Keras default vs best configuration, ratio and noise."""
    return (
        f"{h['model']} on {h['device_label']}: Keras default ({h['default_config']}) "
        f"{fmt_num(h['default_images_per_s'])} images/s (IQR {_iqr(h['default_relative_iqr'])}); "
        f"best configuration ({h['best_config']}) {fmt_num(h['best_images_per_s'])} images/s "
        f"(IQR {_iqr(h['best_relative_iqr'])}); ratio x{h['ratio']:.2f}: {h['verdict']}"
    )


def report_tables(summary: RunSummary, comparison: RunComparison | None) -> list[Table]:
    """The tables of a report, in order: devices, training, micro, checks, comparison.

    Tables without rows are left out.
    """
    tables = [
        devices_table(summary),
        training_table(summary),
        micro_table(summary),
        checks_table(summary),
    ]
    if comparison is not None:
        tables.append(comparison_table(comparison))
    return [t for t in tables if t.rows]


def devices_table(summary: RunSummary) -> Table:
    """Each model's best configuration per device: utilisation, MFU, epoch, speedup."""
    return Table(
        "devices",
        "Devices compared (best configuration of each)",
        [
            "model",
            "device",
            "best configuration",
            "images/s",
            "utilisation (of matmul)",
            "MFU (of spec peak)",
            "time per 50,000-image epoch",
            "speedup over CPU",
        ],
        [
            [
                r["model"],
                r["device_label"],
                r["best_config"],
                fmt_num(r["images_per_s"]),
                fmt_pct(r["utilisation_percent"]),
                fmt_pct(r["mfu_percent"]),
                fmt_seconds(r["epoch_seconds"]),
                _speedup(r["speedup_over_cpu"]),
            ]
            for r in summary["device_table"]
        ],
        frozenset({3, 4, 5, 6, 7}),
    )


def training_table(summary: RunSummary) -> Table:
    """Every training configuration measured, with its derived figures."""
    return Table(
        "training",
        "Training throughput",
        [
            "model",
            "device",
            "configuration",
            "images/s",
            "IQR",
            "step time",
            "epoch",
            "model TFLOP/s",
            "utilisation",
            "MFU",
            "vs the Keras default",
        ],
        [
            [
                r["model"],
                r["device"],
                r["config"],
                fmt_num(r["images_per_s"]),
                _iqr(r["relative_iqr"]),
                fmt_seconds(r["step_time_ms"] / 1000),
                fmt_seconds(r["epoch_seconds"]),
                fmt_num(r["model_tflops"]),
                fmt_pct(r["utilisation_percent"]),
                fmt_pct(r["mfu_percent"]),
                _vs_default(r),
            ]
            for r in summary["models"]
        ],
        frozenset(range(3, 10)),
    )


def micro_table(summary: RunSummary) -> Table:
    """The micro benchmarks against the spec peak and the best measured."""
    return Table(
        "micro",
        "Micro benchmarks",
        [
            "benchmark",
            "device",
            "configuration",
            "median",
            "unit",
            "IQR",
            "% of spec peak",
            "% of best measured",
        ],
        [
            [
                r["benchmark"],
                r["device"],
                r["config"],
                fmt_num(r["median"]),
                r["unit"],
                _iqr(r["relative_iqr"]),
                fmt_pct(r["percent_of_peak"]),
                fmt_pct(r["percent_of_best"]),
            ]
            for r in summary["micro"]
        ],
        frozenset({3, 5, 6, 7}),
    )


def checks_table(summary: RunSummary) -> Table:
    """The correctness checks: value, threshold, ok or fail."""
    return Table(
        "checks",
        "Checks",
        ["check", "device", "test accuracy", "threshold", "result"],
        [
            [
                c["benchmark"],
                c["device"],
                f"{c['value']:.3f}",
                c["threshold"],
                Status("ok" if c["passed"] else "fail"),
            ]
            for c in summary.get("checks") or []
        ],
    )


def comparison_table(comparison: RunComparison, *, changes_only: bool = False) -> Table:
    """The figures measured in both runs (only those that changed beyond the noise, better or
    worse, with ``changes_only``)."""
    rows = [r for r in comparison["rows"] if not changes_only or r["status"] in CHANGED]
    return Table(
        "comparison",
        f"Against run {comparison['before_run_id']} ({comparison['before_started_at']})",
        ["benchmark", "device", "configuration", "before", "after", "unit", "status", "verdict"],
        [
            [
                r["benchmark"],
                r["device"],
                r["config"],
                fmt_num(r["before"]),
                fmt_num(r["after"]),
                r["unit"],
                Status(r["status"]),
                r["verdict"],
            ]
            for r in rows
        ],
        frozenset({3, 4}),
    )


PLAN_TITLE = "Plan of the reference models (predictions: nothing was trained for them)"


def plan_table(plan: list[dict[str, Any]] | None) -> Table:
    """Each reference model's plan: memory at the batch, this machine, the fastest accelerator."""
    rows: list[list[Any]] = []
    for row in plan or []:
        if "error" in row:
            rows.append([row["model"], row["batch_size"], "-", f"no plan: {row['error']}", "-"])
            continue
        here = "; ".join(_plan_cell(d) for d in row["this_machine"]) or "-"
        fastest = row["fastest"]
        rows.append(
            [
                row["model"],
                row["batch_size"],
                _gib(row["needed_bytes"]),
                here,
                f"{fastest['name']}: {_plan_cell(fastest, named=False)}",
            ]
        )
    header = ["model", "batch", "memory (GPU allocator)", "this machine", "fastest in database"]
    return Table("plan", PLAN_TITLE, header, rows, frozenset({1}))


def _plan_cell(device: dict[str, Any], named: bool = True) -> str:
    name = f"{device['key']}: " if named else ""
    if device["fits"]:
        fit = f"fits (max batch {device['max_batch']:,})"
    elif device["gradient_accumulation_steps"]:
        fit = f"accumulate {device['gradient_accumulation_steps']} x {device['micro_batch']}"
    else:
        fit = "does not fit"
    epoch = device.get("epoch_s")
    return name + fit + (f", epoch {fmt_seconds(epoch)}" if epoch is not None else "")


def _gib(value: Any) -> str:
    return "-" if value is None else f"{value / 2**30:.2f} GiB"


def _device_rows(devices: dict[str, Any]) -> list[list[Any]]:
    cpu = devices.get("cpu") or {}
    peak = cpu.get("peak") or {}
    rows: list[list[Any]] = [
        [
            "CPU",
            cpu.get("model"),
            f"{cpu.get('physical_cores')} physical / {cpu.get('usable_cores')} usable cores; "
            + " ".join(cpu.get("features") or []),
            f"fp32 {fmt_num(peak.get('fp32_tflops'))}, bf16 {fmt_num(peak.get('bf16_tflops'))} "
            f"TFLOP/s (estimate: {peak.get('formula')})",
        ]
    ]
    for gpu in devices.get("gpus") or []:
        info, gpeak = gpu.get("info") or {}, gpu.get("peak") or {}
        memory = info.get("memory_total_bytes")
        rows.append(
            [
                f"GPU {info.get('index')}",
                info.get("name"),
                f"CC {info.get('compute_capability')}, "
                f"{fmt_num(memory / 2**30) if memory else 'n/a'} GiB",
                f"fp32 {fmt_num(gpeak.get('fp32_tflops'))}, "
                f"bf16 {fmt_num(gpeak.get('bf16_tflops'))} TFLOP/s, "
                f"{fmt_num(gpeak.get('bandwidth_gbs'))} GB/s ({gpu.get('peak_note')})",
            ]
        )
    if not devices.get("gpus"):
        rows.append(["GPU", "none", devices.get("nvml_error") or "NVML reports none", ""])
    return rows


# -- Markdown ----------------------------------------------------------------------------------


def _md(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def render_markdown(doc: ReportDocument, plot_files: dict[str, str] | None = None) -> str:
    """report.md: the same content as the HTML, as Markdown tables; the plots are linked as
    the files ``plot_files`` names (paths relative to report.md)."""
    bench = doc["bench"]
    out = [
        "# tfaccel report",
        "",
        f"Generated {doc['generated_at']} by tfaccel {doc['tfaccel_version']}, TensorFlow "
        f"{bench.get('tf_version')}; machine fingerprint `{bench['fingerprint']}`; "
        f"run {bench.get('run_id')} ({bench['status']}).",
        "",
    ]
    if headline := doc["summary"].get("headline"):
        out += ["## Headline", "", _md(headline_text(headline)), ""]
    for table in report_tables(doc["summary"], doc.get("comparison")):
        out += [f"## {table.title}", "", *_md_table(table.header, table.rows)]
    for name, path in (plot_files or {}).items():
        out += [f"![{PLOT_TITLES.get(name, name)}]({path})", ""]
    if (plan := plan_table(doc.get("plan"))).rows:
        out += [f"## {plan.title}", "", *_md_table(plan.header, plan.rows)]
    if devices := doc.get("devices"):
        out += [
            "## Devices",
            "",
            *_md_table(["kind", "model", "details", "peak"], _device_rows(devices)),
        ]
    if doctor := doc.get("doctor"):
        out += ["## Doctor", "", findings_markdown(doctor)]
    skipped = bench.get("skipped") or []
    if skipped:
        out += ["## Not measured", ""]
        out += [
            f"- {_md(x['benchmark'])} on {_md(x['device'])}: {_md(x['reason'])}" for x in skipped
        ] + [""]
    out += ["## Notes", "", *(f"- {_md(n)}" for n in bench.get("notes") or []), ""]
    return "\n".join(out)


# -- HTML --------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1200px;color:#1d2330;background:#fff;padding:0 16px}
h1{margin-bottom:4px}h2{margin-top:32px;border-bottom:1px solid #d8dde6;padding-bottom:4px}
.meta{color:#5a6372;font-size:14px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:14px}
th,td{border:1px solid #d8dde6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
.headline{background:#eef5ff;border:1px solid #b8d4ff;border-radius:6px;padding:12px 16px;
font-size:16px}.headline b{font-size:20px}
.ok,.better{color:#1a7f37}.warn{color:#9a6700}.fail,.worse{color:#cf222e;font-weight:bold}
.skip,.same{color:#6e7781}.info{color:#0969da}
figure{margin:16px 0}figure img{max-width:100%;border:1px solid #d8dde6}
figcaption{color:#5a6372;font-size:13px}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _cell(value: Any, numeric: bool) -> str:
    if isinstance(value, Status):
        return f'<td><span class="{_e(value.text)}">{_e(value.text)}</span></td>'
    attribute = ' class="num"' if numeric else ""
    return f"<td{attribute}>{_e(value)}</td>"


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in table.header)
    body = "".join(
        "<tr>" + "".join(_cell(c, i in table.numeric) for i, c in enumerate(row)) + "</tr>"
        for row in table.rows
    )
    return (
        f'<h2 id="{_e(table.key)}">{_e(table.title)}</h2>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _html_headline(h: Headline) -> str:
    return (
        '<div class="headline" id="headline">'
        f"<div>{_e(h['model'])} on {_e(h['device_label'])}</div>"
        f"<div>Keras default ({_e(h['default_config'])}): "
        f"<b>{_e(fmt_num(h['default_images_per_s']))}</b> images/s "
        f"(IQR {_e(_iqr(h['default_relative_iqr']))})</div>"
        f"<div>Best configuration ({_e(h['best_config'])}): "
        f"<b>{_e(fmt_num(h['best_images_per_s']))}</b> images/s "
        f"(IQR {_e(_iqr(h['best_relative_iqr']))})</div>"
        f"<div>Ratio <b>x{h['ratio']:.2f}</b>: {_e(h['verdict'])}</div></div>"
    )


def _html_doctor(doctor: dict[str, Any] | None) -> list[str]:
    if not doctor:
        return []
    return ['<h2 id="doctor">Doctor</h2>', findings_html(doctor)]


def render_html(doc: ReportDocument, plots: dict[str, bytes] | None = None) -> str:
    """report.html: one self-contained page (CSS inline, plots as base64 PNG data URIs)."""
    bench = doc["bench"]
    profile = (bench.get("options") or {}).get("profile")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>tfaccel report {_e(doc['generated_at'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>tfaccel report</h1>",
        f'<p class="meta">Generated {_e(doc["generated_at"])} by tfaccel '
        f"{_e(doc['tfaccel_version'])}, TensorFlow {_e(bench.get('tf_version'))}; machine "
        f"fingerprint <code>{_e(bench['fingerprint'])}</code>; run {_e(bench.get('run_id'))} "
        f"({_e(bench['status'])}), profile {_e(profile)}.</p>",
    ]
    if headline := doc["summary"].get("headline"):
        parts.append(_html_headline(headline))
    tables = report_tables(doc["summary"], doc.get("comparison"))
    parts += [_html_table(t) for t in tables if t.key in ("devices", "training")]
    for name, png in (plots or {}).items():
        data = base64.b64encode(png).decode("ascii")
        title = PLOT_TITLES.get(name, name)
        parts.append(
            f'<figure id="plot-{_e(name)}"><img alt="{_e(title)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(title)}</figcaption></figure>'
        )
    parts += [_html_table(t) for t in tables if t.key not in ("devices", "training")]
    if (plan := plan_table(doc.get("plan"))).rows:
        parts.append(_html_table(plan))
    if devices := doc.get("devices"):
        header = ["kind", "model", "details", "peak"]
        parts.append(_html_table(Table("inventory", "Devices", header, _device_rows(devices))))
    parts += _html_doctor(doc.get("doctor"))
    skipped = bench.get("skipped") or []
    if skipped:
        parts.append("<h2>Not measured</h2><ul>")
        parts += [
            f"<li>{_e(x['benchmark'])} on {_e(x['device'])}: {_e(x['reason'])}</li>"
            for x in skipped
        ]
        parts.append("</ul>")
    parts.append("<h2>Notes</h2><ul>")
    parts += [f"<li>{_e(n)}</li>" for n in bench.get("notes") or []]
    parts.append("</ul></body></html>")
    return "\n".join(parts)


# -- files -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportFiles:
    """The files a report wrote: report.html (self-contained), report.json, report.md, and
    the PNG plots report.md links (``plots``: name -> path)."""

    directory: Path
    html: Path
    json: Path
    markdown: Path
    plots: dict[str, Path]

    def written(self) -> dict[str, str]:
        """Every file written, by kind -> path: ``html``, ``json``, ``markdown``, then
        ``plot:<name>`` for each PNG."""
        files = {"html": str(self.html), "json": str(self.json), "markdown": str(self.markdown)}
        files.update({f"plot:{name}": str(path) for name, path in self.plots.items()})
        return files


def check_writable(directory: str | Path) -> Path:
    """Create ``directory`` if needed and check a file can be written there.

    Raises:
        UsageError: it cannot be created or written (the message names the path).
    """
    path = Path(directory).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".tfaccel-write-test.", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(
            f"The report directory {str(path)!r} ({argument(_OUT)}) is not writable",
            expected="a directory that exists or can be created, and can be written",
            received=f"{type(exc).__name__}: {exc.strerror or exc}",
            fix=f"pass {argument(_OUT)} with a writable directory, e.g. "
            f"{argument(_OUT, './tfaccel-report')}",
        ) from None
    return path


def _write(path: Path, data: bytes) -> None:
    """:func:`write_atomic` of one report file; an error names the report directory's argument
    (``--out`` on the command line), and when a directory or a special file stands where the
    file goes, says to move it or to choose another directory."""
    try:
        write_atomic(path, data, argument_name=_OUT)
    except UsageError as exc:
        if not (os.path.lexists(path) and not path.is_file()):
            raise
        raise UsageError(
            exc.what,
            expected=exc.expected,
            received=exc.received,
            fix=f"move {str(path)!r} out of the way, or pass {argument(_OUT)} with another "
            "directory",
        ) from None


def write_report(
    directory: str | Path, doc: ReportDocument, plots: dict[str, bytes] | None = None
) -> ReportFiles:
    """Write report.html, report.json, report.md and, for report.md, plots/<name>.png.

    report.html embeds the plots and needs no other file; report.md links the PNG files by
    the relative paths report.json lists under ``files.plots``. A plot an earlier report left
    in ``plots/`` that this report does not draw is removed, so the directory holds what
    report.json lists. Each file is written to a temporary name and renamed into place, so a
    reader never sees a half-written file.

    Raises:
        UsageError: the directory cannot be created or written.
    """
    root = check_writable(directory)
    plots = plots or {}
    plot_dir = root / "plots"
    plot_paths: dict[str, Path] = {}
    try:
        if plots:
            plot_dir.mkdir(exist_ok=True)
        for name, png in plots.items():
            plot_paths[name] = plot_dir / f"{name}.png"
            _write(plot_paths[name], png)
        for name in PLOT_TITLES.keys() - plots.keys():
            (plot_dir / f"{name}.png").unlink(missing_ok=True)
        if plot_dir.is_dir() and not any(plot_dir.iterdir()):
            plot_dir.rmdir()
        files = ReportFiles(
            directory=root,
            html=root / "report.html",
            json=root / "report.json",
            markdown=root / "report.md",
            plots=plot_paths,
        )
        saved: SavedReportDocument = {
            **doc,
            "files": {
                "html": "report.html",
                "json": "report.json",
                "markdown": "report.md",
                "plots": {k: f"plots/{k}.png" for k in plots},
            },
        }
        _write(files.json, (dumps(saved) + "\n").encode("utf-8"))
        markdown = render_markdown(saved, saved["files"]["plots"])
        _write(files.markdown, markdown.encode("utf-8"))
        _write(files.html, render_html(saved, plots).encode("utf-8"))
    except OSError as exc:
        raise UsageError(
            f"The report could not be written to {str(root)!r} ({argument(_OUT)})",
            expected="a writable directory with free space",
            received=f"{type(exc).__name__}: {exc.strerror or exc}",
            fix=f"pass {argument(_OUT)} with a writable directory",
        ) from None
    return files
