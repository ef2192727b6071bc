"""The doctor's screen: :func:`~tfaccel.report.findings.render_terminal`, by its old name."""

from __future__ import annotations

from tfaccel.report.findings import render_terminal as render_doctor

__all__ = ["render_doctor"]
