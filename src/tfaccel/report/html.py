"""report.html: one self-contained page (CSS inline, plots as base64 PNG data URIs).

Every piece of text that came from the system (device names, paths, doctor evidence) goes
through :func:`tfaccel.core.markup.html_text`.
"""

from __future__ import annotations

import base64
from typing import Any

from tfaccel.bench.records import Headline
from tfaccel.core.markup import html_text as _e
from tfaccel.core.units import fmt_num
from tfaccel.report.changes import Changes, model_line
from tfaccel.report.document import PLOT_TITLES, ReportDocument, document_changes
from tfaccel.report.findings import findings_html
from tfaccel.report.tables import (
    Status,
    Table,
    device_rows,
    iqr_text,
    plan_table,
    report_tables,
    spread_advice,
)

__all__ = ["render_html"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1200px;color:#1d2330;background:#fff;padding:0 16px}
h1{margin-bottom:4px}h2{margin-top:32px;border-bottom:1px solid #d8dde6;padding-bottom:4px}
.meta{color:#5a6372;font-size:14px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:14px}
th,td{border:1px solid #d8dde6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
.headline{background:#eef5ff;border:1px solid #b8d4ff;border-radius:6px;padding:12px 16px;
font-size:16px}.headline b{font-size:20px}.headline .wide{color:#a33}
.ok,.better{color:#1a7f37}.warn{color:#9a6700}.fail,.worse{color:#cf222e;font-weight:bold}
.skip,.same{color:#6e7781}.info{color:#0969da}
figure{margin:16px 0}figure img{max-width:100%;border:1px solid #d8dde6}
figcaption{color:#5a6372;font-size:13px}
"""


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
    advice = spread_advice(h["default_relative_iqr"], h["best_relative_iqr"])
    return (
        '<div class="headline" id="headline">'
        f"<div>{_e(h['model'])} on {_e(h['device_label'])}</div>"
        f"<div>Keras default ({_e(h['default_config'])}): "
        f"<b>{_e(fmt_num(h['default_images_per_s']))}</b> images/s "
        f"(IQR {_e(iqr_text(h['default_relative_iqr']))})</div>"
        f"<div>Best configuration ({_e(h['best_config'])}): "
        f"<b>{_e(fmt_num(h['best_images_per_s']))}</b> images/s "
        f"(IQR {_e(iqr_text(h['best_relative_iqr']))})</div>"
        f"<div>Ratio <b>x{h['ratio']:.2f}</b>: {_e(h['verdict'])}</div>"
        + (f'<div class="wide">{_e(advice)}</div>' if advice else "")
        + "</div>"
    )


def _html_changes(changes: Changes) -> list[str]:
    if not (changes["findings"] or changes["models"]):
        return []
    items = [f"<li>{_e(line)}</li>" for line in changes["findings"]]
    for change in changes["models"]:
        head = _e(model_line({**change, "apply": []}))
        code = _e("; ".join(change["apply"]))
        items.append(f"<li>{head}: <code>{code}</code></li>" if code else f"<li>{head}</li>")
    return ['<h2 id="changes">What to change</h2>', "<ul>", *items, "</ul>"]


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
    parts += _html_changes(document_changes(doc))
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
        parts.append(_html_table(Table("inventory", "Devices", header, device_rows(devices))))
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
