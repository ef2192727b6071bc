"""The one Finding: its status scale, counts and worst, its JSON, and the three renderers of
``tfaccel.report.findings`` (terminal, Markdown, HTML) over every status and hostile text."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from rich.console import Console

from tfaccel.core.findings import PROBLEMS, STATUSES, Finding, counts, text_lines, worst
from tfaccel.diagnosis import DoctorReport, diagnose, match_log
from tfaccel.report.findings import findings_html, findings_markdown, findings_terminal
from tfaccel.snapshot import Snapshot

KEYS = {"id", "status", "title", "evidence", "numbers", "fix", "gain", "source"}
HOSTILE = "[bold]x[/bold] a|b *c* _d_ `e` <script>alert('&')</script>"


def one_of_each() -> list[Finding]:
    """One finding per status, each with evidence, a fix and a gain of its own."""
    return [
        Finding(
            f"check_{status}",
            status,
            f"title {status}",
            [f"evidence {status}"],
            f"fix {status}",
            numbers={"share": 0.5},
            gain=f"gain {status}",
        )
        for status in STATUSES
    ]


def plain(renderable: Any, width: int = 120) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(renderable)
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


# --------------------------------------------------------------------------- the shape


def test_the_scale_runs_from_ok_to_fail_and_problems_call_for_a_change() -> None:
    assert STATUSES == ("ok", "skip", "info", "warn", "fail")
    assert PROBLEMS == ("fail", "warn", "info")
    assert [f.is_problem for f in one_of_each()] == [False, False, True, True, True]


def test_counts_and_worst() -> None:
    found = [*one_of_each(), Finding("again", "warn", "again")]
    assert counts(found) == {"ok": 1, "skip": 1, "info": 1, "warn": 2, "fail": 1}
    assert counts([]) == dict.fromkeys(STATUSES, 0)
    assert worst(found) == "fail"
    assert worst([Finding("a", "ok", "a"), Finding("b", "skip", "b")]) == "skip"
    assert worst([Finding("a", "info", "a"), Finding("b", "warn", "b")]) == "warn"
    assert worst([]) == "ok"


@pytest.mark.parametrize("status", ["high", "moderate", "suggestion", "skipped", "", "FAIL"])
def test_a_status_off_the_scale_is_refused(status: str) -> None:
    with pytest.raises(ValueError, match=f"Received: status={status!r}"):
        Finding("x", status, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="status must be one of ok, skip, info, warn, fail"):
        findings_markdown([{"id": "x", "status": status, "title": "x"}])


def test_json_keys_and_round_trip() -> None:
    finding = one_of_each()[-1]
    data = json.loads(json.dumps(finding.to_dict()))
    assert set(data) == KEYS
    assert data == {
        "id": "check_fail",
        "status": "fail",
        "title": "title fail",
        "evidence": ["evidence fail"],
        "numbers": {"share": 0.5},
        "fix": "fix fail",
        "gain": "gain fail",
        "source": "probe",
    }
    assert Finding(**data) == finding


# --------------------------------------------------------------------------- terminal


def test_terminal_shows_every_status_and_the_details_of_problems() -> None:
    out = plain(findings_terminal(one_of_each()))
    for status in STATUSES:
        assert re.search(rf"^{status} +check_{status} +title {status}$", out, re.MULTILINE)
    for status in PROBLEMS:
        assert f"- evidence {status}" in out
        assert f"fix: fix {status}" in out and f"gain: gain {status}" in out
    assert "evidence ok" not in out and "fix skip" not in out
    verbose = plain(findings_terminal(one_of_each(), verbose=True))
    assert "- evidence ok" in verbose and "fix: fix skip" in verbose
    assert "failures found" not in out  # a plain list has no summary line


def test_terminal_prints_markup_literally_and_colours_statuses() -> None:
    found = [Finding("hostile", "fail", HOSTILE, [HOSTILE], HOSTILE)]
    out = plain(findings_terminal(found))
    assert out.count(HOSTILE) == 3  # title, evidence and fix, none of it read as markup
    buffer = io.StringIO()
    Console(file=buffer, width=200, color_system="standard", force_terminal=True).print(
        findings_terminal(found)
    )
    assert "\x1b[1;31mfail" in buffer.getvalue()  # bold red


def test_dicts_render_as_their_findings() -> None:
    objects, dicts = one_of_each(), [f.to_dict() for f in one_of_each()]
    assert plain(findings_terminal(dicts)) == plain(findings_terminal(objects))
    assert findings_markdown(dicts) == findings_markdown(objects)
    assert findings_html(dicts) == findings_html(objects)


# --------------------------------------------------------------------------- Markdown


def test_markdown_table_has_a_row_per_finding_with_every_part() -> None:
    markdown = findings_markdown(one_of_each())
    lines = markdown.splitlines()
    assert lines[:2] == ["| status | check | finding | fix |", "|---|---|---|---|"]
    assert lines[2] == ("| ok | check\\_ok | title ok<br>- evidence ok | fix ok<br>gain: gain ok |")
    assert [line.split(" | ")[0] for line in lines[2:7]] == [f"| {s}" for s in STATUSES]
    assert len(lines) == 7 and markdown.endswith("|\n")
    assert findings_markdown([]) == ""


def test_markdown_escapes_markup_html_and_line_breaks() -> None:
    finding = Finding("hostile", "warn", HOSTILE, ["line 1\nline 2"], "a\n    b")
    row = findings_markdown([finding]).splitlines()[2]
    assert (
        "\\[bold\\]x\\[/bold\\] a\\|b \\*c\\* \\_d\\_ \\`e\\` "
        "&lt;script&gt;alert('&amp;')&lt;/script&gt;" in row
    )
    assert "<script>" not in row and "line 1<br>line 2" in row
    assert row.endswith("| a<br>    b |")
    assert row.count(" | ") == 3  # the pipe in the title does not open a column


# --------------------------------------------------------------------------- HTML


def test_html_fragment_marks_every_status_and_escapes_everything() -> None:
    page = findings_html(one_of_each())
    assert page.startswith('<table class="findings">') and page.endswith("</table>")
    for status in STATUSES:
        assert f'<span class="{status}">{status}</span>' in page
    assert page.count("<tr>") == len(STATUSES) + 1
    hostile = Finding(HOSTILE, "fail", HOSTILE, [HOSTILE], HOSTILE + "\nnext", gain=HOSTILE)
    page = findings_html([hostile])
    assert "<script>" not in page and "[bold]x[/bold]" in page
    assert page.count("&lt;script&gt;alert(&#x27;&amp;&#x27;)&lt;/script&gt;") == 5
    assert "&lt;/script&gt;<br>next" in page
    assert findings_html([]) == ""


# --------------------------------------------------------------------------- the doctor's report


def doctor_report() -> DoctorReport:
    log = "\n".join(
        [
            "W0000 00:00:1.0 1 cuda_dnn.cc:8310] Unable to register cuDNN factory: twice",
            "OOM when allocating tensor with shape[8,1024] <b>",
        ]
    )
    return diagnose(Snapshot(), log=log, log_source="train <log>.txt")


def test_doctor_report_renders_checks_log_and_summary_in_each_format() -> None:
    report = doctor_report()
    assert report.log is not None and report.exit_code == 1
    number = report.counts()
    summary = ", ".join(f"{number[s]} {s}" for s in ("fail", "warn", "info", "ok", "skip"))
    out = plain(findings_terminal(report))
    assert "Log train <log>.txt" in out
    assert re.search(r"^  fail +oom +The GPU ran out of memory$", out, re.MULTILINE)
    assert "line 2: OOM when allocating tensor with shape[8,1024] <b>" in out
    assert "benign noise, nothing to fix: duplicate CUDA plugin registration" in out
    assert out.rstrip().endswith(f"failures found ({summary})")
    markdown = findings_markdown(report)
    assert "**Log** train &lt;log&gt;.txt" in markdown
    assert "| fail | oom | The GPU ran out of memory<br>" in markdown
    assert markdown.rstrip().endswith(f"**failures found** ({summary})")
    page = findings_html(report)
    assert "<p><b>Log</b> train &lt;log&gt;.txt</p>" in page
    assert "shape[8,1024] &lt;b&gt;" in page and "shape[8,1024] <b>" not in page
    assert page.endswith(f"<p><b>failures found</b> ({summary})</p>")


def test_the_json_document_renders_as_the_report() -> None:
    report = doctor_report()
    doc = json.loads(json.dumps(report.to_dict()))
    assert plain(findings_terminal(doc)) == plain(findings_terminal(report))
    assert findings_markdown(doc) == findings_markdown(report)
    assert findings_html(doc) == findings_html(report)


def test_a_log_without_a_cause_says_so() -> None:
    report = DoctorReport(log=match_log("hello\nworld\n", source="x.log"))
    out = plain(findings_terminal(report))
    assert "no known cause matched (2 lines read)" in out and "no failures (0 fail" in out
    assert "no known cause matched (2 lines read)" in findings_markdown(report)
    assert "<p>no known cause matched (2 lines read)</p>" in findings_html(report)


def test_error_lines_not_recognised_are_quoted_with_the_next_step() -> None:
    text = "E0000 00:00:1.0 7 op.cc:9] INTERNAL: <b>never seen</b>\nKeyError: 'x'\n"
    report = DoctorReport(log=match_log(text, source="my run.log"))
    out = plain(findings_terminal(report))
    assert "no known cause matched (2 lines read), but the log holds error lines" in out
    assert "not recognised: 2 error line(s) match no known cause:" in out
    assert "line 1: E0000 00:00:1.0 7 op.cc:9] INTERNAL: <b>never seen</b>" in out
    assert "line 2: KeyError: 'x'" in out
    assert "next: tfaccel doctor --log 'my run.log' --bundle tfaccel-bundle.md" in out
    assert "no known failure, but error lines not recognised" in out
    assert "no failures (" not in out
    markdown = findings_markdown(report)
    assert "not recognised: 2 error line(s)" in markdown and "<b>never" not in markdown
    page = findings_html(report)
    assert "&lt;b&gt;never seen&lt;/b&gt;" in page and "--bundle tfaccel-bundle.md" in page
    doc = json.loads(json.dumps(report.to_dict()))
    assert plain(findings_terminal(doc)) == out


def test_text_lines_keep_a_long_fix_command_whole() -> None:
    command = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader"
    f = Finding("gpu_memory_in_use", "warn", "other processes hold GPU memory", fix=command)
    lines = text_lines([f], width=40)
    assert lines[0] == "  [WARN] gpu_memory_in_use: other processes hold GPU memory"
    assert any(command in line for line in lines)
