"""Figures whose within-run spread is too wide to trust are marked, with the advice to re-run,
in the headline (terminal, Markdown, HTML) and in the tables' IQR cells."""

from __future__ import annotations

from bench_helpers import sample_run
from rich.console import Console

from tfaccel.bench import BenchResult, BenchRun
from tfaccel.report.document import build_document
from tfaccel.report.html import render_html
from tfaccel.report.tables import WIDE_SPREAD, headline_text, spread_advice, spread_text
from tfaccel.report.text import render_bench


def _wide_run() -> BenchRun:
    run = sample_run(run_id=3)
    default = run.find("reference_cnn", feed="numpy")[0]
    default.samples = [775.0 * f for f in (0.7, 0.9, 1.0, 1.1, 1.3)]  # IQR 20%
    return run


def test_spread_text_and_advice_mark_only_wide_figures() -> None:
    assert spread_text(0.05) == "5.0%"
    assert spread_text(WIDE_SPREAD + 0.02) == "12.0% (wide: re-run)"
    assert spread_text(None) == "n/a"
    assert spread_advice(0.02, None) is None
    advice = spread_advice(0.02, 0.25)
    assert advice is not None and "too wide to trust (IQR 25.0% > 10%)" in advice
    assert "re-run" in advice


def test_a_wide_headline_says_so_everywhere() -> None:
    result = BenchResult.from_run(_wide_run())
    headline = result.summary["headline"]
    assert headline is not None
    assert "spread too wide to trust" in headline_text(headline)
    console = Console(record=True, width=400)
    console.print(render_bench(result))
    text = console.export_text()
    assert "spread too wide to trust (IQR 20.0% > 10%): re-run on an idle machine" in text
    assert "20.0% (wide: re-run)" in text  # the training table's IQR cell
    html = render_html(build_document(result.run))
    assert "spread too wide to trust" in html


def test_a_tight_headline_has_no_advice() -> None:
    result = BenchResult.from_run(sample_run(run_id=3))
    headline = result.summary["headline"]
    assert headline is not None and "re-run" not in headline_text(headline)
