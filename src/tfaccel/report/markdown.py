"""report.md: the report as Markdown tables, every text escaped by :mod:`tfaccel.core.markup`."""

from __future__ import annotations

from typing import Any

from tfaccel.core.markup import md_cell
from tfaccel.report.changes import model_line
from tfaccel.report.document import PLOT_TITLES, ReportDocument, document_changes
from tfaccel.report.findings import findings_markdown
from tfaccel.report.tables import device_rows, headline_text, plan_table, report_tables

__all__ = ["render_markdown"]


def _md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
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
    changes = document_changes(doc)
    if changes["findings"] or changes["models"]:
        out += ["## What to change", ""]
        out += [f"- {md_cell(line)}" for line in changes["findings"]]
        for change in changes["models"]:
            head = md_cell(model_line({**change, "apply": []}))
            code = "; ".join(change["apply"])
            out.append(f"- {head}: `{code}`" if code else f"- {head}")
        out.append("")
    if headline := doc["summary"].get("headline"):
        out += ["## Headline", "", md_cell(headline_text(headline)), ""]
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
            *_md_table(["kind", "model", "details", "peak"], device_rows(devices)),
        ]
    if doctor := doc.get("doctor"):
        out += ["## Doctor", "", findings_markdown(doctor)]
    skipped = bench.get("skipped") or []
    if skipped:
        out += ["## Not measured", ""]
        out += [
            f"- {md_cell(x['benchmark'])} on {md_cell(x['device'])}: {md_cell(x['reason'])}"
            for x in skipped
        ] + [""]
    out += ["## Notes", "", *(f"- {md_cell(n)}" for n in bench.get("notes") or []), ""]
    return "\n".join(out)
